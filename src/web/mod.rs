//! HTTP interfaces: REST routes, the WebSocket session, the SSE stream, the Prometheus
//! metrics and the static client.
//!
//! Handlers translate between HTTP and the [`Engine`]; they hold no mode logic and no SQL.

mod assets;
mod attachments;
pub mod auth;
pub mod client_msg;
pub mod error;
mod evals;
pub mod limits;
mod metrics;
mod pages;
mod rest;
mod share;
mod sse;
mod ws;

use std::time::Duration;

use actix_web::error::{JsonPayloadError, PayloadError};
use actix_web::web;

use crate::engine::Engine;
use error::ApiError;

/// The largest JSON body accepted (`POST /api/deliberations` and the rest): over it, 413.
/// Fields have their own, smaller limits (see `modes::request`); this one keeps a client from
/// making the server buffer an arbitrary amount before any field is looked at.
pub const MAX_JSON_BYTES: usize = 1 << 20;

/// Shared by every handler (created once, handed out with `web::Data`).
pub struct AppState {
    pub engine: Engine,
    pub heartbeat_interval: Duration,
    pub client_timeout: Duration,
    /// How long a socket may stay open without signing in.
    pub sign_in_timeout: Duration,
    /// The time the per-socket message rate goes by.
    pub clock: crate::engine::limits::Clock,
    /// The sockets not yet signed in, per client address.
    pub unauthenticated: std::sync::Arc<limits::Unauthenticated>,
    /// The evals started from the page that this server runs now.
    pub evals: std::sync::Arc<evals::EvalJobs>,
}

/// A body that could not be read as JSON: too large (413), not sent as JSON (415), or
/// malformed (400), each with a message saying which.
fn json_error(err: JsonPayloadError) -> ApiError {
    let too_large = || {
        ApiError::PayloadTooLarge(format!(
            "the request body is larger than the limit of {MAX_JSON_BYTES} bytes (1 MiB)"
        ))
    };
    match err {
        JsonPayloadError::OverflowKnownLength { .. } | JsonPayloadError::Overflow { .. } => {
            too_large()
        }
        JsonPayloadError::Payload(PayloadError::Overflow) => too_large(),
        JsonPayloadError::ContentType => ApiError::UnsupportedMediaType(
            "the request body must be JSON, sent with `Content-Type: application/json`".into(),
        ),
        JsonPayloadError::Deserialize(e) => ApiError::BadRequest {
            field: Some(named_field(&e.to_string()).unwrap_or("body").to_string()),
            message: format!("invalid JSON body: {e}"),
        },
        other => ApiError::BadRequest {
            field: Some("body".into()),
            message: format!("the request body could not be read: {other}"),
        },
    }
}

/// The field a typed body's error names (serde says "unknown field `notes`" or "missing field
/// `note`"), so those answers name the field like every other 400.
fn named_field(message: &str) -> Option<&str> {
    ["unknown field `", "missing field `"].iter().find_map(|prefix| {
        let rest = &message[message.find(prefix)? + prefix.len()..];
        Some(&rest[..rest.find('`')?])
    })
}

/// Registers every route.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::JsonConfig::default()
            .limit(MAX_JSON_BYTES)
            .error_handler(|err, _| json_error(err).into()),
    )
    .app_data(
        web::QueryConfig::default()
            .error_handler(|err, _| ApiError::bad_request(format!("invalid query: {err}")).into()),
    )
    .app_data(
        web::PathConfig::default()
            .error_handler(|err, _| ApiError::bad_request(format!("invalid path: {err}")).into()),
    )
    .route("/healthz", web::get().to(rest::health))
    .route("/metrics", web::get().to(metrics::scrape))
    .route("/login", web::get().to(auth::login_link))
    .route("/ws", web::get().to(ws::connect))
    .service(
        web::scope("/api")
            .route("/session", web::post().to(auth::sign_in))
            .route("/session", web::delete().to(auth::sign_out))
            .route("/me", web::get().to(auth::me))
            .route("/deliberations", web::post().to(rest::start))
            .route("/deliberations", web::get().to(rest::list_runs))
            .route("/deliberations/{id}", web::get().to(rest::get_run))
            .route("/deliberations/{id}/cancel", web::post().to(rest::cancel))
            .route("/deliberations/{id}/rerun", web::post().to(rest::rerun))
            .route("/deliberations/{id}/events", web::get().to(sse::events))
            .route("/deliberations/{id}/export", web::get().to(share::export_run))
            .route("/deliberations/{id}/attachments/{n}", web::get().to(attachments::file))
            .route("/deliberations/{id}/attachments/{n}/text", web::get().to(attachments::text))
            .route("/attachments", web::post().to(attachments::upload))
            .route("/deliberations/{id}/shares", web::post().to(share::create_share))
            .route("/deliberations/{id}/shares", web::get().to(share::list_shares))
            .route("/deliberations/{id}/shares/{share}", web::delete().to(share::revoke_share))
            .route("/conversations", web::get().to(rest::list_conversations))
            .route("/conversations/{id}", web::get().to(rest::get_conversation))
            .route("/conversations/{id}/export", web::get().to(share::export_conversation))
            .route("/evals", web::get().to(evals::list))
            .route("/evals", web::post().to(evals::start))
            .route("/evals/{id}", web::get().to(evals::get))
            .route("/evals/{id}/cancel", web::post().to(evals::cancel))
            .route("/models", web::get().to(rest::models))
            .route("/modes", web::get().to(rest::modes_list))
            .route("/reviews", web::get().to(rest::list_reviews))
            .route("/reviews/{id}", web::post().to(rest::mark_reviewed))
            .default_service(web::to(|| async {
                Err::<actix_web::HttpResponse, _>(ApiError::NotFound("no such API route".into()))
            })),
    )
    // A share link's public page and its data: no sign-in, one run, read-only.
    .route("/s/{token}", web::get().to(share::page))
    .route("/s/{token}/json", web::get().to(share::page_json))
    .route("/s/{token}/export", web::get().to(share::page_export))
    .route("/s/{token}/attachments/{n}", web::get().to(attachments::shared_file))
    .route("/s/{token}/attachments/{n}/text", web::get().to(attachments::shared_text))
    .route("/", web::get().to(assets::index))
    .route("/favicon.ico", web::get().to(assets::favicon))
    .route("/static/{path:.*}", web::get().to(assets::file))
    // Any other address: a page saying there is nothing here and where to go.
    .default_service(web::to(pages::unknown_address));
}

#[cfg(test)]
mod tests {
    use super::named_field;

    #[test]
    fn serde_errors_name_their_field() {
        assert_eq!(
            named_field("unknown field `notes`, expected `note` at line 1 column 8"),
            Some("notes")
        );
        assert_eq!(named_field("missing field `note` at line 1 column 2"), Some("note"));
        assert_eq!(named_field("invalid type: integer `3`, expected a string"), None);
        assert_eq!(named_field("unknown field `"), None);
    }
}
