//! The browser client, embedded in the binary so the server needs no files beside it.
//!
//! Every file goes out with a strict Content-Security-Policy: the page runs only its own
//! scripts, so even model output that slipped past the sanitiser could not execute (no inline
//! script, no event-handler attributes, no `javascript:` URLs, no plugins, no framing).

use actix_web::{web, HttpResponse};
use rust_embed::RustEmbed;

/// The page loads scripts, styles and images from itself only and talks to its own server.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
    connect-src 'self'; object-src 'none'; frame-src 'none'; frame-ancestors 'none'; \
    base-uri 'none'; form-action 'self'";

#[derive(RustEmbed)]
#[folder = "static/"]
struct Assets;

fn serve(path: &str) -> HttpResponse {
    match Assets::get(path) {
        Some(file) => {
            let mime = mime_guess::from_path(path).first_or_octet_stream();
            HttpResponse::Ok()
                .content_type(mime.as_ref())
                .insert_header(("Cache-Control", "no-cache"))
                .insert_header(("Content-Security-Policy", CSP))
                .insert_header(("X-Content-Type-Options", "nosniff"))
                .insert_header(("Referrer-Policy", "no-referrer"))
                .body(file.data.into_owned())
        }
        None => HttpResponse::NotFound().content_type("text/plain").body("not found"),
    }
}

/// Whether the page holds this file.
pub fn has_file(path: &str) -> bool {
    Assets::get(path).is_some()
}

pub async fn index() -> HttpResponse {
    serve("index.html")
}

/// A share link's public page (`/s/{token}`): its shell; it reads the run from `/s/{token}/json`.
/// No referrer leaves it, so the token in its address goes nowhere else.
pub fn shared_page() -> HttpResponse {
    serve("shared.html")
}

pub async fn favicon() -> HttpResponse {
    serve("favicon.svg")
}

pub async fn file(path: web::Path<String>) -> HttpResponse {
    serve(&path.into_inner())
}
