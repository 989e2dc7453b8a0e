//! One input line as JSON, exactly as written, and how the protocols' op enums read it.
//!
//! `serde_json::Value` would do, but for two things the protocols need: an integer of any size
//! must stay an integer (a `Value` turns 2^64 into a float, indistinguishable from `1.8e19`, and
//! refuses 10^400), and an object must not hold a key twice (a `Value` keeps the last). So a line
//! is parsed into [`Json`], whose numbers keep their literal, checking keys on the way; the op
//! enums are then deserialized from that tree.
//!
//! Tagged enums make serde buffer a line's fields before it knows the op, and its buffer holds
//! no integer wider than 64 bits. Numbers therefore cross it as a newtype struct holding their
//! literal, which [`Json`]'s own `Deserialize` turns back into a number; the field types of
//! [`super::field`] read every value through it.

use std::collections::HashSet;
use std::fmt;

use serde::de::value::{MapDeserializer, SeqDeserializer, StrDeserializer};
use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess,
    SeqAccess, Visitor,
};

use super::BadInput;

/// A JSON value as the line spelled it.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as its literal (checked against JSON's grammar).
    Number(String),
    /// A string, unescaped.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object's entries in input order; no key appears twice.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parses one line: a single JSON value, nested no deeper than serde_json allows (127
    /// levels), whose objects hold no key twice.
    ///
    /// serde_json reads the structure, in one pass. It would read numbers as `u64`, `i64` or
    /// `f64`, losing integers beyond 64 bits and refusing those beyond `f64`, so it reads a copy
    /// of the line in which every number is `0` (padded with spaces, so that error positions
    /// hold), and each number's literal is taken from the line: serde visits values in document
    /// order, the order in which the private `numbers` scan finds them.
    pub fn parse(line: &str) -> Result<Json, BadInput> {
        let Some((literals, structure)) = numbers(line) else {
            // serde_json says where the malformed number is.
            let error = serde_json::from_str::<IgnoredAny>(line)
                .err()
                .map_or_else(|| "a malformed number".to_owned(), |e| e.to_string());
            return Err(BadInput(format!("not valid JSON: {error}")));
        };
        let mut literals = literals.into_iter();
        let mut deserializer = serde_json::Deserializer::from_str(&structure);
        Node {
            literals: &mut literals,
        }
        .deserialize(&mut deserializer)
        .and_then(|json| deserializer.end().map(|()| json))
        .map_err(|error| {
            if error.is_data() {
                // One of ours: a repeated key.
                BadInput(error.to_string())
            } else {
                BadInput(format!("not valid JSON: {error}"))
            }
        })
    }

    /// The integer this value spells, saturated to the `i128` range (wide enough for every
    /// range the protocols check); `None` if it is not a number without fraction or exponent.
    pub fn integer(&self) -> Option<i128> {
        let Json::Number(literal) = self else {
            return None;
        };
        if literal.contains(['.', 'e', 'E']) {
            return None;
        }
        // The literal is digits with an optional minus: parsing fails only by overflow.
        Some(literal.parse().unwrap_or(if literal.starts_with('-') {
            i128::MIN
        } else {
            i128::MAX
        }))
    }

    /// The object's value for `key`, if this is an object that has it.
    pub fn get(&self, key: &str) -> Option<&Json> {
        let Json::Object(entries) = self else {
            return None;
        };
        entries
            .iter()
            .find_map(|(name, value)| (name == key).then_some(value))
    }
}

/// `text` as a JSON string literal.
pub fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// Compact JSON, numbers as written: how details quote a value.
impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(value) => write!(f, "{value}"),
            Json::Number(literal) => f.write_str(literal),
            Json::String(text) => f.write_str(&quoted(text)),
            Json::Array(items) => {
                f.write_str("[")?;
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Json::Object(entries) => {
                f.write_str("{")?;
                for (index, (key, value)) in entries.iter().enumerate() {
                    if index > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}:{value}", quoted(key))?;
                }
                f.write_str("}")
            }
        }
    }
}

/// The literals of the numbers in `line`, in order, and the line with each of them replaced by
/// `0` and spaces; `None` if a number is malformed.
///
/// Outside strings, a JSON text has a `-` or digit only where a number starts, and a number is
/// a run of digits, signs, points and exponent letters.
fn numbers(line: &str) -> Option<(Vec<&str>, String)> {
    let bytes = line.as_bytes();
    let mut literals = Vec::new();
    let mut structure = bytes.to_vec();
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => {
                at += 1;
                while let Some(&byte) = bytes.get(at) {
                    at += if byte == b'\\' { 2 } else { 1 };
                    if byte == b'"' {
                        break;
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = at;
                while bytes.get(at).is_some_and(|byte| {
                    matches!(byte, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                }) {
                    at += 1;
                }
                if !is_number(&bytes[start..at]) {
                    return None;
                }
                structure[start..at].fill(b' ');
                structure[start] = b'0';
                // The run is ASCII, so its ends are character boundaries.
                literals.extend(line.get(start..at));
            }
            _ => at += 1,
        }
    }
    // Only ASCII bytes were replaced, by ASCII bytes.
    let structure = String::from_utf8(structure).ok()?;
    Some((literals, structure))
}

/// Whether `run` is a JSON number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn is_number(run: &[u8]) -> bool {
    fn digits(run: &[u8]) -> usize {
        run.iter().take_while(|byte| byte.is_ascii_digit()).count()
    }
    let mut rest = run.strip_prefix(b"-").unwrap_or(run);
    match digits(rest) {
        0 => return false,
        n if n > 1 && rest[0] == b'0' => return false,
        n => rest = &rest[n..],
    }
    if let Some(fraction) = rest.strip_prefix(b".") {
        match digits(fraction) {
            0 => return false,
            n => rest = &fraction[n..],
        }
    }
    if let Some(exponent) = rest.strip_prefix(b"e").or_else(|| rest.strip_prefix(b"E")) {
        let exponent = exponent
            .strip_prefix(b"+")
            .or_else(|| exponent.strip_prefix(b"-"))
            .unwrap_or(exponent);
        match digits(exponent) {
            0 => return false,
            n => rest = &exponent[n..],
        }
    }
    rest.is_empty()
}

/// Reads one value into a [`Json`], numbers from `literals`.
struct Node<'a, 'b> {
    literals: &'a mut std::vec::IntoIter<&'b str>,
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = Json;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Node<'_, '_> {
    fn number<E: de::Error>(self) -> Result<Json, E> {
        let literal = self
            .literals
            .next()
            .ok_or_else(|| E::custom("a number the text does not show"))?;
        Ok(Json::Number(literal.to_owned()))
    }
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Json, E> {
        Ok(Json::Bool(value))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Json, E> {
        self.number()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Json, E> {
        self.number()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Json, E> {
        self.number()
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Json, E> {
        Ok(Json::String(text.to_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Node {
            literals: &mut *self.literals,
        })? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut keys = HashSet::new();
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if !keys.insert(key.clone()) {
                return Err(de::Error::custom(format!("duplicate key {}", quoted(&key))));
            }
            let value = map.next_value_seed(Node {
                literals: &mut *self.literals,
            })?;
            entries.push((key, value));
        }
        Ok(Json::Object(entries))
    }
}

impl serde::de::Error for BadInput {
    fn custom<T: fmt::Display>(message: T) -> Self {
        BadInput(message.to_string())
    }

    fn missing_field(field: &'static str) -> Self {
        BadInput(format!("missing field {}", quoted(field)))
    }

    /// Only the ops are variants: the protocols' enums are tagged by `"op"`.
    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        BadInput(format!(
            "unknown op {} (expected one of: {})",
            quoted(variant),
            expected.join(", ")
        ))
    }
}

impl<'de> Deserializer<'de> for &Json {
    type Error = BadInput;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, BadInput> {
        match self {
            Json::Null => visitor.visit_unit(),
            Json::Bool(value) => visitor.visit_bool(*value),
            Json::Number(literal) => {
                visitor.visit_newtype_struct(StrDeserializer::<BadInput>::new(literal))
            }
            Json::String(text) => visitor.visit_str(text),
            Json::Array(items) => visitor.visit_seq(SeqDeserializer::new(items.iter())),
            Json::Object(entries) => visitor.visit_map(MapDeserializer::new(
                entries.iter().map(|(key, value)| (key.as_str(), value)),
            )),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

impl<'de, 'a> IntoDeserializer<'de, BadInput> for &'a Json {
    type Deserializer = &'a Json;

    fn into_deserializer(self) -> &'a Json {
        self
    }
}

/// Reads a [`Json`] back from serde's buffer, numbers from the newtypes they crossed it as.
impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        struct JsonVisitor;

        impl<'de> Visitor<'de> for JsonVisitor {
            type Value = Json;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }

            fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<Json, E> {
                Ok(Json::Bool(value))
            }

            fn visit_newtype_struct<D: Deserializer<'de>>(
                self,
                literal: D,
            ) -> Result<Json, D::Error> {
                String::deserialize(literal).map(Json::Number)
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Json, E> {
                Ok(Json::String(text.to_owned()))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Json::Array(items))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Json::Object(entries))
            }
        }

        deserializer.deserialize_any(JsonVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_literal_and_integers_any_size() {
        let json = Json::parse(r#" {"a":[18446744073709551616,-1e400,1.50,-0]} "#).unwrap();
        assert_eq!(
            json.to_string(),
            r#"{"a":[18446744073709551616,-1e400,1.50,-0]}"#
        );
        let Some(Json::Array(items)) = json.get("a") else {
            panic!("an array: {json}");
        };
        let integers: Vec<_> = items.iter().map(Json::integer).collect();
        assert_eq!(integers, [Some(1 << 64), None, None, Some(0)]);
        let huge = Json::Number(format!("-{}", "9".repeat(60)));
        assert_eq!(huge.integer(), Some(i128::MIN));
        let line = format!("[{}]", "9".repeat(400));
        assert_eq!(Json::parse(&line).unwrap().to_string(), line);
    }

    #[test]
    fn malformed_numbers_are_not_json_and_keep_their_position() {
        for bad in [
            "01", "1.", ".5", "-", "1e", "1e+", "1.5.5", "1-2", "+1", "--1", "0x1",
        ] {
            let detail = Json::parse(&format!("[{bad}]")).unwrap_err().0;
            assert!(detail.starts_with("not valid JSON: "), "{bad}: {detail}");
        }
        for good in ["0", "-0", "10", "1.25", "1e5", "1E-5", "-0.0e+0"] {
            assert!(is_number(good.as_bytes()), "{good}");
        }
        let detail = Json::parse(r#"[123456789, x]"#).unwrap_err().0;
        assert!(detail.ends_with("column 13"), "{detail}");
    }

    #[test]
    fn keys_may_not_repeat_at_any_depth() {
        let detail = |line: &str| Json::parse(line).unwrap_err().0;
        assert!(detail(r#"{"a":1,"a":1}"#).starts_with("duplicate key \"a\" at "));
        assert!(detail(r#"{"a":[{"b":1,"\u0062":2}]}"#).starts_with("duplicate key \"b\" at "));
        assert!(detail(r#"{"a":1"#).starts_with("not valid JSON: "));
        let line = r#"{"a":{"b":"\n"},"b":{"a":null}}"#;
        assert_eq!(Json::parse(line).unwrap().to_string(), line);
    }

    #[test]
    fn numbers_inside_strings_are_not_numbers() {
        let line = r#"{"k-1":"2 \"3\\\" 4","n":[-5e-1,6],"t":true,"x":"\\"}"#;
        assert_eq!(numbers(line).unwrap().0, ["-5e-1", "6"]);
        let json = Json::parse(line).unwrap();
        assert_eq!(json.to_string(), line);
        assert_eq!(json.get("k-1"), Some(&Json::String("2 \"3\\\" 4".into())));
    }

    #[test]
    fn nesting_stops_at_serde_jsons_limit() {
        let deep = |depth| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(Json::parse(&deep(127)).is_ok());
        let detail = Json::parse(&deep(128)).unwrap_err().0;
        assert!(detail.contains("recursion limit"), "{detail}");
        // A line of the longest length, all nesting: refused at the limit, not after 1 MiB.
        assert!(Json::parse(&"[".repeat(1 << 20)).is_err());
    }
}
