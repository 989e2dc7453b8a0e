//! [`Service`]: the HTTP API, the same code on every runtime.
//!
//! Routes (every refusal is a JSON body `{"error": CODE, "message": TEXT}`, see
//! [`ApiError`]):
//!
//! - `GET /api/segment/get/{space}`: one ID as plain text (Meituan Leaf's segment contract);
//! - `GET /v1/spaces/{space}/ids?count=N`: N IDs (1 to [`MAX_COUNT`], default 1), one per line,
//!   or a JSON array with `Accept: application/json`;
//! - `POST /v1/spaces` with `Authorization: Bearer TOKEN` and `{"name", "min", "max",
//!   "cyclic"}`: creates a space (off without an admin token);
//! - `GET /healthz`: 200 with `ok` while the store answers or a lease held has IDs left,
//!   else 503 with the reason; then, a line per space, when the lease it serves from expires
//!   unless renewed;
//! - `GET /metrics`: Prometheus text.
//!
//! A space name in a path is percent-decoded and must be UTF-8 of 1 to 200 bytes. `HEAD` is
//! answered where `GET` only reads (`/healthz`, `/metrics`), never on the ID routes; a 405
//! names the methods a route takes in `Allow`.

use std::borrow::Cow;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Body;
use hyper::header::{
    HeaderValue, ACCEPT, ALLOW, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;

use crate::error::ApiError;
use crate::metrics::{monotonic_ns, Metrics, Route};
use crate::spaces::{NodeConfig, Spaces};
use crate::MAX_COUNT;

/// The largest body `POST /v1/spaces` reads.
const MAX_BODY: usize = 16 * 1024;

/// The HTTP API over the node's spaces.
pub(crate) struct Service {
    spaces: Arc<Spaces>,
    metrics: Metrics,
    admin_token: Option<String>,
    stopping: AtomicBool,
}

/// A request's answer before it becomes a response: status, content type, body.
struct Answer {
    status: u16,
    content_type: HeaderValue,
    body: Bytes,
}

impl Answer {
    fn text(status: u16, body: impl Into<Bytes>) -> Answer {
        Answer {
            status,
            // Checked at compile time: `from_static` at run time walks the string's bytes at
            // every request.
            content_type: const { HeaderValue::from_static("text/plain; charset=utf-8") },
            body: body.into(),
        }
    }

    fn json(status: u16, body: impl Into<Bytes>) -> Answer {
        Answer {
            status,
            content_type: const { HeaderValue::from_static("application/json") },
            body: body.into(),
        }
    }
}

/// A request [`Service::answer_now`] could not answer at once, and when it came in.
pub(crate) struct Later<B> {
    request: Request<B>,
    /// [`monotonic_ns`] when it came in.
    started: u64,
}

/// The body of a single ID: `prefix`, the ID in decimal, `suffix`, in one allocation of its
/// exact size. Most requests ask for one ID, and a `String` turned into [`Bytes`] costs two
/// allocations (the string's, and the shared header `Bytes` adds when its length is not its
/// capacity).
fn one_id(prefix: &str, id: u64, suffix: &str) -> Bytes {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(id);
    let mut body = Vec::with_capacity(prefix.len() + digits.len() + suffix.len());
    body.extend_from_slice(prefix.as_bytes());
    body.extend_from_slice(digits.as_bytes());
    body.extend_from_slice(suffix.as_bytes());
    // Length equal to capacity: `Bytes` takes the vector over without another allocation.
    Bytes::from(body)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewSpace {
    name: String,
    min: u64,
    max: u64,
    #[serde(default)]
    cyclic: bool,
}

impl Service {
    pub(crate) fn new(config: NodeConfig, admin_token: Option<String>) -> Service {
        Service {
            spaces: Arc::new(Spaces::new(config)),
            metrics: Metrics::new(),
            admin_token,
            stopping: AtomicBool::new(false),
        }
    }

    /// Answers `request` at once when nothing has to be awaited (an ID route whose space's
    /// node runs, `/metrics`, every refusal), which is nearly every request; else hands it
    /// back, to be answered by [`Service::answer_later`].
    ///
    /// A synchronous answer needs no future of its own: hyper gets a ready one, the request
    /// is read where it lies instead of being moved into a handler's state, and the
    /// connection's handle on the service is not cloned per request.
    pub(crate) fn answer_now<B>(
        &self,
        request: Request<B>,
    ) -> Result<Response<Full<Bytes>>, Box<Later<B>>> {
        let started = monotonic_ns();
        match self.route_now(&request) {
            Some((route, answer)) => Ok(self.respond(started, route, answer)),
            // Boxed: a request is large, and the rare case pays for moving it.
            None => Err(Box::new(Later { request, started })),
        }
    }

    /// Answers a request [`Service::answer_now`] handed back: starts a space's node (off the
    /// worker's thread), creates a space or checks the store, awaiting the result.
    pub(crate) async fn answer_later<B>(&self, later: Box<Later<B>>) -> Response<Full<Bytes>>
    where
        B: Body<Data = Bytes>,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let Later { request, started } = *later;
        let (route, answer) = self.route_later(request).await;
        self.respond(started, route, answer)
    }

    /// The response to a request of `route` that came in at `started`, counted in the metrics.
    fn respond(
        &self,
        started: u64,
        route: Route,
        answer: Result<Answer, ApiError>,
    ) -> Response<Full<Bytes>> {
        let took = monotonic_ns().saturating_sub(started);
        let (answer, retry_after, code) = match answer {
            Ok(answer) => (answer, None, None),
            Err(error) => (
                Answer::json(error.status, error.body()),
                error.retry_after,
                Some(error.code),
            ),
        };
        self.metrics.record(route, took, code);
        let mut response = Response::new(Full::new(answer.body));
        *response.status_mut() =
            StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, answer.content_type);
        if let Some(seconds) = retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        if answer.status == 405 {
            // RFC 9110 15.5.6: a 405 names the methods the route answers.
            headers.insert(ALLOW, allowed(route));
        }
        if answer.status == 401 {
            // RFC 9110 11.6.1: a 401 names the scheme that would be accepted.
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }

    /// The route and answer of `request` if nothing has to be awaited for it; `None` for an
    /// ID route whose space has no node yet, `POST /v1/spaces` and `GET /healthz`.
    fn route_now<B>(&self, request: &Request<B>) -> Option<(Route, Result<Answer, ApiError>)> {
        let path = request.uri().path();
        let get = request.method() == Method::GET;
        // HEAD, which every server must take where it takes GET (RFC 9110 9.1), on the routes
        // that only read: the answer is GET's without its body (hyper leaves it out). Not on
        // the ID routes, where a GET takes IDs.
        let read = get || request.method() == Method::HEAD;
        let wrong = || Err(ApiError::method_not_allowed(request.method().as_str()));
        if let Some((route, space)) = id_route(path) {
            let answer = match route {
                _ if !get => wrong(),
                Route::Segment => self.segment(space)?,
                _ => self.ids(space, request)?,
            };
            return Some((route, answer));
        }
        let answer = match path {
            "/v1/spaces" if request.method() == Method::POST => return None,
            "/v1/spaces" => (Route::CreateSpace, wrong()),
            "/healthz" if read => return None,
            "/healthz" => (Route::Health, wrong()),
            "/metrics" if read => (Route::Metrics, Ok(self.render())),
            "/metrics" => (Route::Metrics, wrong()),
            _ => (Route::Other, Err(ApiError::not_found(path))),
        };
        Some(answer)
    }

    /// The route and answer of a request [`Service::route_now`] could not answer.
    async fn route_later<B>(&self, request: Request<B>) -> (Route, Result<Answer, ApiError>)
    where
        B: Body<Data = Bytes>,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let path = request.uri().path();
        if path == "/v1/spaces" {
            return (Route::CreateSpace, self.create(request).await);
        }
        if path == "/healthz" {
            return (Route::Health, self.health().await);
        }
        // An ID route whose space has no node yet: start it, then answer as at once.
        let route = id_route(path).map_or(Route::Other, |(route, _)| route);
        if let Some((route, space)) = id_route(path) {
            if let Err(error) = self.start(space).await {
                return (route, Err(error));
            }
        }
        // No answer now even so: the node was stopped meanwhile.
        self.route_now(&request)
            .unwrap_or_else(|| (route, Err(ApiError::shutting_down())))
    }

    /// One ID of `space`; `None` if its node has not started.
    fn segment(&self, space: &str) -> Option<Result<Answer, ApiError>> {
        let mut taken = 0;
        let taken = self.take(space, 1, |id| taken = id)?.map(|()| taken);
        Some(taken.map(|id| Answer::text(200, one_id("", id, ""))))
    }

    /// The IDs a `/v1/spaces/{space}/ids` request asks for; `None` if the space's node has not
    /// started.
    fn ids<B>(&self, space: &str, request: &Request<B>) -> Option<Result<Answer, ApiError>> {
        let count = match parse_count(request.uri().query()) {
            Ok(count) => count,
            Err(error) => return Some(Err(error)),
        };
        let json = request.headers().get_all(ACCEPT).iter().any(accepts_json);
        if count == 1 {
            let mut taken = 0;
            let taken = self.take(space, 1, |id| taken = id)?.map(|()| taken);
            return Some(taken.map(|id| {
                if json {
                    Answer::json(200, one_id("[", id, "]"))
                } else {
                    Answer::text(200, one_id("", id, "\n"))
                }
            }));
        }
        // The IDs are written into the body as they are taken: no list of them in between.
        let mut body = String::with_capacity(count * 12 + 2);
        if json {
            body.push('[');
            let taken = self.take(space, count, |id| {
                let comma = if body.len() > 1 { "," } else { "" };
                let _ = write!(body, "{comma}{id}");
            })?;
            body.push(']');
            Some(taken.map(|()| Answer::json(200, body)))
        } else {
            let taken = self.take(space, count, |id| {
                let _ = writeln!(body, "{id}");
            })?;
            Some(taken.map(|()| Answer::text(200, body)))
        }
    }

    /// `count` IDs of `space` for `each`; `None` if its node has not started.
    fn take(
        &self,
        space: &str,
        count: usize,
        each: impl FnMut(u64),
    ) -> Option<Result<(), ApiError>> {
        // Relaxed: a stop flag; a request racing with it is answered either way.
        if self.stopping.load(Ordering::Relaxed) {
            return Some(Err(ApiError::shutting_down()));
        }
        match decode_space(space) {
            Ok(space) => self.spaces.take(&space, count, each),
            Err(error) => Some(Err(error)),
        }
    }

    /// Starts the node of `space` (a path segment) unless it runs.
    async fn start(&self, space: &str) -> Result<(), ApiError> {
        // Relaxed: a stop flag.
        if self.stopping.load(Ordering::Relaxed) {
            return Err(ApiError::shutting_down());
        }
        let space = decode_space(space)?;
        self.spaces.start(&space).await
    }

    async fn create<B>(&self, request: Request<B>) -> Result<Answer, ApiError>
    where
        B: Body<Data = Bytes>,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let Some(token) = &self.admin_token else {
            return Err(ApiError::admin_disabled());
        };
        let given = request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|value| bearer_token(value.as_bytes()))
            .unwrap_or_default();
        if !same(given, token.as_bytes()) {
            return Err(ApiError::unauthorized());
        }
        let body = Limited::new(request.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| ApiError::bad_request(format!("body: {e}")))?
            .to_bytes();
        let new: NewSpace = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("body: {e}")))?;
        let name = new.name.clone();
        self.spaces
            .create(name, new.min, new.max, new.cyclic)
            .await?;
        let created = serde_json::json!({
            "name": new.name, "min": new.min, "max": new.max, "cyclic": new.cyclic
        });
        Ok(Answer::json(201, created.to_string()))
    }

    async fn health(&self) -> Result<Answer, ApiError> {
        // Relaxed: a stop flag.
        if self.stopping.load(Ordering::Relaxed) {
            return Err(ApiError::shutting_down());
        }
        Ok(Answer::text(200, self.spaces.health().await?))
    }

    fn render(&self) -> Answer {
        let mut out = String::new();
        self.metrics.render(&mut out);
        self.spaces.render(&mut out);
        Answer {
            status: 200,
            content_type: const { HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8") },
            body: out.into(),
        }
    }

    /// Refuses new IDs from now on (in-flight requests finish) and stops every space's node,
    /// parking the unused tails of its leases.
    pub(crate) fn stop_nodes(&self) {
        // Relaxed: a stop flag.
        self.stopping.store(true, Ordering::Relaxed);
        self.spaces.shutdown();
    }
}

/// The methods `route` answers: `POST` to create a space, `GET` and `HEAD` on the routes
/// that only read, `GET` on the ID routes.
fn allowed(route: Route) -> HeaderValue {
    HeaderValue::from_static(match route {
        Route::CreateSpace => "POST",
        Route::Health | Route::Metrics => "GET, HEAD",
        Route::Segment | Route::Ids | Route::Other => "GET",
    })
}

/// The ID route of `path` and its space segment (not yet decoded), if it is one. Matched on
/// the path as it is, without copying or splitting it: a space is one segment, so a `/` in the
/// rest matches no route.
fn id_route(path: &str) -> Option<(Route, &str)> {
    if let Some(space) = segment(path.strip_prefix("/api/segment/get/")) {
        return Some((Route::Segment, space));
    }
    let ids = path
        .strip_prefix("/v1/spaces/")
        .and_then(|rest| rest.strip_suffix("/ids"));
    segment(ids).map(|space| (Route::Ids, space))
}

/// `rest` if it is one path segment (no `/`).
fn segment(rest: Option<&str>) -> Option<&str> {
    rest.filter(|s| !s.contains('/'))
}

/// The `count` of a query string: 1 when absent.
fn parse_count(query: Option<&str>) -> Result<usize, ApiError> {
    let Some(value) = query
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("count="))
    else {
        return Ok(1);
    };
    // A query's values may be percent-encoded (`count=%31%30` is 10), as a client library
    // may send them.
    let decoded = value
        .contains('%')
        .then(|| percent_decode(value).ok())
        .flatten();
    match decoded.as_deref().unwrap_or(value).parse::<usize>() {
        Ok(count) if (1..=MAX_COUNT).contains(&count) => Ok(count),
        _ => Err(ApiError::bad_count(value)),
    }
}

/// A space name from a path segment: percent-decoded, UTF-8, 1 to 200 bytes; borrowed from
/// the path when it has no escape.
fn decode_space(segment: &str) -> Result<Cow<'_, str>, ApiError> {
    let name = if segment.contains('%') {
        Cow::Owned(percent_decode(segment)?)
    } else {
        Cow::Borrowed(segment)
    };
    if name.is_empty() || name.len() > 200 {
        return Err(ApiError::bad_request("a space name has 1 to 200 bytes"));
    }
    Ok(name)
}

/// `segment` (a path segment or a query value) with its `%XX` escapes decoded; the result
/// must be UTF-8.
fn percent_decode(segment: &str) -> Result<String, ApiError> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| ApiError::bad_request("a bad percent escape in the space name"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ApiError::bad_request("the space name is not UTF-8"))
}

/// Whether an `Accept` value names JSON: media types are case-insensitive (RFC 9110 8.3.1),
/// so `Application/JSON` counts too.
fn accepts_json(value: &HeaderValue) -> bool {
    const JSON: &[u8] = b"application/json";
    value
        .as_bytes()
        .windows(JSON.len())
        .any(|window| window.eq_ignore_ascii_case(JSON))
}

/// The token of an `Authorization` value of the Bearer scheme: the scheme's name in any
/// case, one or more spaces, the token (RFC 9110 11.4, RFC 6750 2.1).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(b"Bearer ".len())?;
    if !scheme.eq_ignore_ascii_case(b"Bearer ") {
        return None;
    }
    let start = rest.iter().position(|&b| b != b' ')?;
    Some(&rest[start..])
}

/// Compares two tokens in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_named_in_any_case() {
        let accepts = |value: &'static str| accepts_json(&HeaderValue::from_static(value));
        assert!(accepts("application/json"));
        assert!(accepts("text/plain, Application/JSON; charset=utf-8"));
        assert!(!accepts("text/plain"));
        assert!(!accepts("*/*"));
    }

    #[test]
    fn bearer_scheme_in_any_case() {
        assert_eq!(bearer_token(b"Bearer s3cret"), Some(&b"s3cret"[..]));
        assert_eq!(bearer_token(b"bearer s3cret"), Some(&b"s3cret"[..]));
        assert_eq!(bearer_token(b"BEARER  s3cret"), Some(&b"s3cret"[..]));
        assert_eq!(bearer_token(b"Basic s3cret"), None);
        assert_eq!(bearer_token(b"Bearers3cret"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Bear"), None);
    }

    #[test]
    fn counts_and_names_are_checked() {
        assert_eq!(parse_count(None), Ok(1));
        assert_eq!(parse_count(Some("a=1&count=7")), Ok(7));
        assert_eq!(parse_count(Some("count=0")).unwrap_err().code, "bad_count");
        assert_eq!(parse_count(Some("count=%31%30")), Ok(10));
        for bad in ["count=%", "count=%3", "count=%FF", "count=%30"] {
            assert_eq!(
                parse_count(Some(bad)).unwrap_err().code,
                "bad_count",
                "{bad}"
            );
        }
        let huge = format!("count={}", MAX_COUNT + 1);
        assert_eq!(parse_count(Some(&huge)).unwrap_err().code, "bad_count");
        assert_eq!(decode_space("a%20b").as_deref(), Ok("a b"));
        assert!(matches!(decode_space("plain"), Ok(Cow::Borrowed("plain"))));
        assert_eq!(segment(Some("a")), Some("a"));
        assert_eq!(segment(Some("a/ids")), None);
        assert!(decode_space("%FF").is_err());
        assert!(decode_space("%G1").is_err());
        assert!(decode_space("").is_err());
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"ab", b"abc"));
    }

    #[test]
    fn one_id_frames_the_decimal_id() {
        assert_eq!(one_id("", 0, ""), "0");
        assert_eq!(one_id("", 42, "\n"), "42\n");
        assert_eq!(one_id("[", u64::MAX, "]"), format!("[{}]", u64::MAX));
    }
}
