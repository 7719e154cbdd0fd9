//! HTTP interfaces: REST routes, the WebSocket session, the SSE stream and the static client.
//!
//! Handlers translate between HTTP and the [`Engine`]; they hold no mode logic and no SQL.

mod assets;
pub mod error;
mod rest;
mod sse;
mod ws;

use std::time::Duration;

use actix_web::web;

use crate::engine::Engine;
use error::ApiError;

/// Shared by every handler (created once, handed out with `web::Data`).
pub struct AppState {
    pub engine: Engine,
    pub heartbeat_interval: Duration,
    pub client_timeout: Duration,
}

/// Registers every route.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::JsonConfig::default().limit(1 << 20).error_handler(|err, _| {
            ApiError::bad_request(format!("invalid JSON body: {err}")).into()
        }),
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
    .route("/ws", web::get().to(ws::connect))
    .service(
        web::scope("/api")
            .route("/deliberations", web::post().to(rest::start))
            .route("/deliberations", web::get().to(rest::list_runs))
            .route("/deliberations/{id}", web::get().to(rest::get_run))
            .route("/deliberations/{id}/cancel", web::post().to(rest::cancel))
            .route("/deliberations/{id}/events", web::get().to(sse::events))
            .route("/conversations", web::get().to(rest::list_conversations))
            .route("/conversations/{id}", web::get().to(rest::get_conversation))
            .route("/models", web::get().to(rest::models))
            .route("/reviews", web::get().to(rest::list_reviews))
            .route("/reviews/{id}", web::post().to(rest::mark_reviewed))
            .default_service(web::to(|| async {
                Err::<actix_web::HttpResponse, _>(ApiError::NotFound("no such API route".into()))
            })),
    )
    .route("/", web::get().to(assets::index))
    .route("/favicon.ico", web::get().to(assets::favicon))
    .route("/static/{path:.*}", web::get().to(assets::file));
}
