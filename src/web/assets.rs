//! The browser client, embedded in the binary so the server needs no files beside it.

use actix_web::{web, HttpResponse};
use rust_embed::RustEmbed;

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
                .body(file.data.into_owned())
        }
        None => HttpResponse::NotFound().content_type("text/plain").body("not found"),
    }
}

pub async fn index() -> HttpResponse {
    serve("index.html")
}

pub async fn favicon() -> HttpResponse {
    serve("favicon.svg")
}

pub async fn file(path: web::Path<String>) -> HttpResponse {
    serve(&path.into_inner())
}
