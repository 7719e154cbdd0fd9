//! The one place errors become HTTP statuses and JSON bodies `{error, field?}`: 400 for a
//! client's mistake (naming the field when there is one), 413 for a body over the size limit,
//! 415 for a body that is not JSON, 404, 409, 503 (shutting down, or the database unavailable),
//! and 500 with the details only in the log.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::json;

use crate::engine::EngineError;
use crate::modes::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest { field: Option<String>, message: String },
    /// No valid token or session: sign in.
    #[error("{0}")]
    Unauthorized(String),
    /// Signed in, allowed to see it, but not to do this (cancel someone else's run).
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// Over a per-user limit; `Retry-After` says when to try again.
    #[error("{message}")]
    TooManyRequests { message: String, retry_after_secs: u64 },
    /// The body is over the size limit (413).
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The body is not JSON, by its `Content-Type` (415).
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("the server is shutting down")]
    Unavailable,
    /// The database is unreachable, locked or full: nothing was done; try again (503 with
    /// `Retry-After`). Details are logged.
    #[error("the database is unavailable right now (busy, unreachable or full); nothing was changed, try again shortly")]
    StoreUnavailable(String),
    /// Details are logged, not sent.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest { field: None, message: message.into() }
    }
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        ApiError::BadRequest {
            message: format!("{}: {}", e.field, e.message),
            field: Some(e.field),
        }
    }
}

/// A database failure is the server's problem, not the client's: logged, answered 503 when the
/// database is unavailable (retry) and 500 otherwise.
impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        if e.is_unavailable() {
            ApiError::StoreUnavailable(e.to_string())
        } else {
            ApiError::Internal(e.to_string())
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Invalid(f) => f.into(),
            EngineError::NotFound(what) => ApiError::NotFound(format!("{what} not found")),
            EngineError::Forbidden(why) => ApiError::Forbidden(why),
            EngineError::Conflict(why) => ApiError::Conflict(why),
            EngineError::RateLimited { message, retry_after_secs } => {
                ApiError::TooManyRequests { message, retry_after_secs }
            }
            EngineError::Unavailable => ApiError::Unavailable,
            EngineError::Store(s) => s.into(),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable | ApiError::StoreUnavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            ApiError::Internal(detail) => log::error!("internal error: {detail}"),
            ApiError::StoreUnavailable(detail) => log::warn!("database unavailable: {detail}"),
            _ => {}
        }
        let body = match self {
            ApiError::BadRequest { field: Some(f), message } => {
                json!({ "error": message, "field": f })
            }
            ApiError::PayloadTooLarge(message) => json!({ "error": message, "field": "body" }),
            ApiError::TooManyRequests { message, retry_after_secs } => {
                json!({ "error": message, "retryAfterSeconds": retry_after_secs })
            }
            other => json!({ "error": other.to_string() }),
        };
        let mut resp = HttpResponse::build(self.status_code());
        if let ApiError::TooManyRequests { retry_after_secs, .. } = self {
            resp.insert_header(("Retry-After", retry_after_secs.to_string()));
        }
        if let ApiError::StoreUnavailable(_) = self {
            resp.insert_header(("Retry-After", "2"));
        }
        resp.json(body)
    }
}

/// The run a client named (a path segment, a WebSocket field): one that cannot be an id is not
/// found, as one that does not exist is.
pub fn run_id(given: &str) -> Result<crate::ids::RunId, ApiError> {
    crate::ids::RunId::parse(given).ok_or_else(|| not_found("run", given))
}

/// The conversation a client named; see [`run_id`].
pub fn conversation_id(given: &str) -> Result<crate::ids::ConversationId, ApiError> {
    crate::ids::ConversationId::parse(given).ok_or_else(|| not_found("conversation", given))
}

fn not_found(what: &str, given: &str) -> ApiError {
    let shown: String = given.chars().take(64).collect();
    ApiError::NotFound(format!("{what} {shown} not found"))
}
