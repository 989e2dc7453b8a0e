//! [`ApiError`]: every refusal of the HTTP API, with its status and its stable code.

use idspace_lease::LeaseError;

/// A refused request: the HTTP status, a stable machine-readable code, and a message for
/// people. The body is `{"error": CODE, "message": TEXT}`.
///
/// ```
/// use idspace_serve::ApiError;
///
/// let error = ApiError::bad_count("0");
/// assert_eq!((error.status, error.code), (400, "bad_count"));
/// assert!(error.body().starts_with(r#"{"error":"bad_count""#));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: u16,
    /// The stable code (`unknown_space`, `exhausted`, `bad_count`, `store_unreachable`, ...).
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// Seconds after which to retry (`Retry-After`), for `store_unreachable`.
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400 `bad_count`: a count that is not an integer from 1 to [`crate::MAX_COUNT`].
    pub fn bad_count(count: &str) -> ApiError {
        ApiError::new(
            400,
            "bad_count",
            format!(
                "count must be an integer from 1 to {}, not \"{}\"",
                crate::MAX_COUNT,
                count.escape_debug()
            ),
        )
    }

    /// 400 `bad_request`: a request the API cannot read (a body, a space name).
    pub fn bad_request(why: impl Into<String>) -> ApiError {
        ApiError::new(400, "bad_request", why)
    }

    /// 404 `not_found`: no such route.
    pub fn not_found(path: &str) -> ApiError {
        ApiError::new(
            404,
            "not_found",
            format!("no route {}", path.escape_debug()),
        )
    }

    /// 404 `admin_disabled`: the admin routes are off (no `--admin-token-file`).
    pub fn admin_disabled() -> ApiError {
        ApiError::new(
            404,
            "admin_disabled",
            "admin routes are off: start with --admin-token-file",
        )
    }

    /// 405 `method_not_allowed`.
    pub fn method_not_allowed(method: &str) -> ApiError {
        ApiError::new(
            405,
            "method_not_allowed",
            format!("method {method} is not allowed here"),
        )
    }

    /// 401 `unauthorized`: a missing or wrong bearer token.
    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "unauthorized", "a valid bearer token is needed")
    }

    /// 503 `shutting_down`: the node stops.
    pub fn shutting_down() -> ApiError {
        let mut error = ApiError::new(503, "shutting_down", "the node is stopping");
        error.retry_after = Some(1);
        error
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        serde_json::json!({ "error": self.code, "message": self.message }).to_string()
    }
}

impl From<LeaseError> for ApiError {
    fn from(error: LeaseError) -> ApiError {
        let message = error.to_string();
        match error {
            LeaseError::UnknownSpace(_) => ApiError::new(404, "unknown_space", message),
            LeaseError::Exhausted(_) => ApiError::new(409, "exhausted", message),
            LeaseError::SpaceExists(_) => ApiError::new(409, "space_exists", message),
            LeaseError::InvalidSpace(_) => ApiError::new(400, "invalid_space", message),
            LeaseError::Closed => ApiError::shutting_down(),
            LeaseError::StoreUnreachable(_)
            | LeaseError::Connection(_)
            | LeaseError::Authentication(_)
            | LeaseError::PermissionDenied(_)
            | LeaseError::BadUrl(_) => {
                let mut error = ApiError::new(503, "store_unreachable", message);
                error.retry_after = Some(1);
                error
            }
            _ => ApiError::new(500, "internal", message),
        }
    }
}
