//! The fields of the protocols' ops: each a type that knows its name and what it may hold, so a
//! bad value is answered `field "NAME" must be ..., got VALUE`.
//!
//! A protocol declares its fields with the `fields!` macro, giving each a [`Kind`]; the op enums use
//! them as their variants' field types.

use serde::de::{self, Deserialize, Deserializer};

use super::json::Json;

/// What a field may hold.
pub trait Kind {
    /// The value the replayer works with.
    type Value;

    /// The value `json` holds, or, when it holds none, what it must be: "must be ..., got ...".
    fn accept(json: &Json) -> Result<Self::Value, String>;
}

/// Reads a value of kind `K` for the field `name`.
pub fn read<'de, K: Kind, D: Deserializer<'de>>(
    deserializer: D,
    name: &str,
) -> Result<K::Value, D::Error> {
    let json = Json::deserialize(deserializer)?;
    K::accept(&json).map_err(|why| de::Error::custom(format!("field \"{name}\" {why}")))
}

fn must(want: &str, got: &Json) -> String {
    format!("must be {want}, got {got}")
}

/// Any integer, saturated to `i128` (beyond every range the protocols check).
pub struct Integer;

impl Kind for Integer {
    type Value = i128;

    fn accept(json: &Json) -> Result<i128, String> {
        json.integer().ok_or_else(|| must("an integer", json))
    }
}

/// A non-negative integer of any size, saturated to `u128`.
pub struct Natural;

impl Kind for Natural {
    type Value = u128;

    fn accept(json: &Json) -> Result<u128, String> {
        natural(json).ok_or_else(|| must("a non-negative integer", json))
    }
}

fn natural(json: &Json) -> Option<u128> {
    json.integer().and_then(|n| u128::try_from(n).ok())
}

/// A caller's name for something (an owner, a task): a non-negative integer below 2^64.
pub struct Name;

const NAME: &str = "a non-negative integer below 2^64";

fn name(json: &Json) -> Option<u64> {
    json.integer().and_then(|n| u64::try_from(n).ok())
}

impl Kind for Name {
    type Value = u64;

    fn accept(json: &Json) -> Result<u64, String> {
        name(json).ok_or_else(|| must(NAME, json))
    }
}

/// A [`Name`] or `null` for none.
pub struct NameOrNull;

impl Kind for NameOrNull {
    type Value = Option<u64>;

    fn accept(json: &Json) -> Result<Option<u64>, String> {
        match json {
            Json::Null => Ok(None),
            _ => name(json)
                .map(Some)
                .ok_or_else(|| must(&format!("{NAME} or null"), json)),
        }
    }
}

/// An integer in `0..N`: an index.
pub struct Below<const N: usize>;

impl<const N: usize> Kind for Below<N> {
    type Value = usize;

    fn accept(json: &Json) -> Result<usize, String> {
        json.integer()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n < N)
            .ok_or_else(|| must(&format!("an integer in 0..{N}"), json))
    }
}

/// `true` or `false`.
pub struct Flag;

impl Kind for Flag {
    type Value = bool;

    fn accept(json: &Json) -> Result<bool, String> {
        match json {
            Json::Bool(value) => Ok(*value),
            _ => Err(must("true or false", json)),
        }
    }
}

/// An array of integers, each saturated to `i128`.
pub struct Integers;

impl Kind for Integers {
    type Value = Vec<i128>;

    fn accept(json: &Json) -> Result<Vec<i128>, String> {
        array_of(json, "integers", Json::integer)
    }
}

/// An array of non-negative integers, each saturated to `u128`.
pub struct Naturals;

impl Kind for Naturals {
    type Value = Vec<u128>;

    fn accept(json: &Json) -> Result<Vec<u128>, String> {
        array_of(json, "non-negative integers", natural)
    }
}

fn array_of<T>(json: &Json, items: &str, item: fn(&Json) -> Option<T>) -> Result<Vec<T>, String> {
    let Json::Array(values) = json else {
        return Err(must(&format!("an array of {items}"), json));
    };
    values
        .iter()
        .map(|value| item(value).ok_or_else(|| format!("must hold {items} only, got {value}")))
        .collect()
}

/// Declares fields: `Type: Kind = "name";` makes `Type` a newtype over `Kind`'s value that
/// reads the field `name`. Attributes (docs, derives) go before each.
macro_rules! fields {
    ($($(#[$meta:meta])* $field:ident: $kind:ty = $name:literal;)*) => {$(
        $(#[$meta])*
        pub struct $field(pub <$kind as $crate::replay::field::Kind>::Value);

        impl<'de> serde::Deserialize<'de> for $field {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                $crate::replay::field::read::<$kind, D>(deserializer, $name).map($field)
            }
        }
    )*};
}

pub(crate) use fields;
