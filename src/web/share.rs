//! Exports and share links over HTTP: `GET …/export?format=md|json` for a run or a
//! conversation (read access, like the rest of the API), the share links of a run (its owner
//! or an admin), and the public, read-only page of a share link (`/s/{token}`, no sign-in).
//!
//! A share token is random (244 bits, the same source as API tokens), shown once, stored only
//! as its SHA-256, and checked for its shape before the database is asked. A share link reads
//! its one run and nothing else: no control, no other run, no event stream.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

use super::auth::{hash_token, Caller};
use super::error::{conversation_id, run_id, ApiError};
use super::AppState;
use crate::engine::{Engine, EngineError, Viewer};
use crate::export::{Export, Format};
use crate::store::ShareRecord;

/// The start of every share token.
const SHARE_PREFIX: &str = "shr_";

/// A new share token: `shr_` and 64 hex digits from two v4 UUIDs (the OS's CSPRNG).
pub fn new_share_token() -> String {
    format!("{SHARE_PREFIX}{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Whether `token` has the shape of a share token (else it is not found without a query).
fn share_token_shape(token: &str) -> bool {
    token.strip_prefix(SHARE_PREFIX).is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The stored hash of a share token, or 404 (without a query) for one not of its shape.
pub(super) fn share_hash(token: &str) -> Result<String, ApiError> {
    if !share_token_shape(token) {
        return Err(ApiError::NotFound("share link not found".into()));
    }
    Ok(hash_token(token))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    format: Option<String>,
    /// Add the stored events to a JSON export.
    events: Option<bool>,
}

fn format_of(q: &ExportQuery) -> Result<Format, ApiError> {
    match q.format.as_deref() {
        None => Ok(Format::Markdown),
        Some(f) => Format::parse(f).ok_or_else(|| ApiError::BadRequest {
            field: Some("format".into()),
            message: "format: must be md or json".into(),
        }),
    }
}

/// An export as a download named `name`, in `format` (only the one asked for is made), with
/// its events in JSON when `events`.
fn download(format: Format, name: &str, export: &impl Export, events: bool) -> HttpResponse {
    let body = export.render(format, events);
    HttpResponse::Ok()
        .content_type(format.content_type())
        .insert_header((
            "Content-Disposition",
            format!("attachment; filename=\"{name}.{}\"", format.extension()),
        ))
        .insert_header(("Cache-Control", "no-store"))
        .body(body)
}

/// What an export route is given: the caller, the `{id}` of what it exports, and the query.
type ExportRequest = (web::Data<AppState>, Caller, web::Path<String>, web::Query<ExportQuery>);

/// `GET /api/deliberations/{id}/export?format=md|json[&events=true]`.
pub async fn export_run(req: ExportRequest) -> Result<HttpResponse, ApiError> {
    export(req, "run", run_id, Engine::export_run).await
}

/// `GET /api/conversations/{id}/export?format=md|json[&events=true]`: every run, in order.
pub async fn export_conversation(req: ExportRequest) -> Result<HttpResponse, ApiError> {
    export(req, "conversation", conversation_id, Engine::export_conversation).await
}

/// The export `read` makes of what `{id}` names (`what`: `run` or `conversation`), as the
/// download `conclave-{what}-{id}`: the format is checked first, then the id, then the access.
async fn export<Id: AsRef<str>, E: Export>(
    (state, caller, id, q): ExportRequest,
    what: &str,
    parse: fn(&str) -> Result<Id, ApiError>,
    read: impl AsyncFnOnce(&Engine, &Id, &Viewer) -> Result<E, EngineError>,
) -> Result<HttpResponse, ApiError> {
    let format = format_of(&q)?;
    let id = parse(&id)?;
    let e = read(&state.engine, &id, &caller.viewer()).await?;
    let name = format!("conclave-{what}-{}", id.as_ref());
    Ok(download(format, &name, &e, q.events.unwrap_or(false)))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShareBody {
    /// Show `Model A`, `Model B`… instead of the models' names.
    #[serde(default)]
    hide_models: bool,
}

/// A body of at most [`super::MAX_JSON_BYTES`], the limit of every JSON body (413 past it).
async fn read_body(mut payload: web::Payload) -> Result<web::BytesMut, ApiError> {
    use futures_util::StreamExt;
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::BadRequest {
            field: Some("body".into()),
            message: format!("the request body could not be read: {e}"),
        })?;
        if body.len() + chunk.len() > super::MAX_JSON_BYTES {
            return Err(ApiError::PayloadTooLarge(format!(
                "the request body is larger than the limit of {} bytes (1 MiB)",
                super::MAX_JSON_BYTES
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn share_view(s: &ShareRecord) -> serde_json::Value {
    json!({ "id": s.id, "runId": s.run_id, "hideModels": s.hide_models, "createdBy": s.created_by,
            "createdAt": s.created_at, "revokedAt": s.revoked_at,
            "active": s.revoked_at.is_none() })
}

/// `POST /api/deliberations/{id}/shares` with `{hideModels?}`: 201 with the link's token and
/// path (shown only now).
pub async fn create_share(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&id)?;
    let body = read_body(payload).await?;
    // No body is the default link; a body is `{hideModels}` and nothing else.
    let options: ShareBody = if body.iter().all(u8::is_ascii_whitespace) {
        ShareBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest {
            field: Some(
                if e.to_string().contains("unknown field") { "body" } else { "hideModels" }.into(),
            ),
            message: format!("invalid share options: {e}"),
        })?
    };
    let hide = options.hide_models;
    let token = new_share_token();
    let share = state.engine.create_share(&id, hash_token(&token), hide, &caller.viewer()).await?;
    let mut v = share_view(&share);
    v["token"] = json!(token);
    v["path"] = json!(format!("/s/{token}"));
    Ok(HttpResponse::Created().json(v))
}

/// `GET /api/deliberations/{id}/shares`: the run's links, revoked ones too.
pub async fn list_shares(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let shares = state.engine.shares(&run_id(&id)?, &caller.viewer()).await?;
    Ok(HttpResponse::Ok()
        .json(json!({ "shares": shares.iter().map(share_view).collect::<Vec<_>>() })))
}

/// `DELETE /api/deliberations/{id}/shares/{shareId}`: the link stops working at once.
pub async fn revoke_share(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, share_id) = path.into_inner();
    let id = run_id(&id)?;
    if share_id.len() > 64 {
        return Err(ApiError::NotFound("share link not found".into()));
    }
    let share = state.engine.revoke_share(&id, &share_id, &caller.viewer()).await?;
    Ok(HttpResponse::Ok().json(share_view(&share)))
}

/// The run a share token reads, or 404 (an unknown, malformed or revoked token alike).
async fn shared(state: &AppState, token: &str) -> Result<crate::engine::SharedRun, ApiError> {
    Ok(state.engine.shared_run(&share_hash(token)?).await?)
}

/// `GET /s/{token}`: the public page (the page fetches `/s/{token}/json`).
pub async fn page(state: web::Data<AppState>, token: web::Path<String>) -> HttpResponse {
    // Only whether the link works: the page reads the run itself from `/s/{token}/json`.
    let works = match share_hash(&token) {
        Err(_) => Ok(false),
        Ok(hash) => state.engine.share_link_works(&hash).await.map_err(ApiError::from),
    };
    match works {
        Ok(true) => super::assets::shared_page(),
        Ok(false) => HttpResponse::NotFound()
            .content_type("text/html; charset=utf-8")
            .insert_header(("Referrer-Policy", "no-referrer"))
            .body(
                "<!doctype html><meta charset=utf-8><meta name=viewport \
                 content=\"width=device-width, initial-scale=1\"><title>Conclave</title>\
                 <p>This share link does not exist or was revoked.",
            ),
        Err(e) => actix_web::ResponseError::error_response(&e),
    }
}

/// `GET /s/{token}/json`: the shared run as its JSON export with its events (model names
/// hidden in all of it when the link says so), the Markdown beside it, and what the page needs
/// of its mode to show it with the mode's own view (`modeInfo`: id, label, description,
/// whether it has a view of its own).
pub async fn page_json(
    state: web::Data<AppState>,
    token: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let s = shared(&state, &token).await?;
    let mut doc = s.export.to_json(true);
    doc["markdown"] = json!(s.export.to_markdown());
    doc["hideModels"] = json!(s.hide_models);
    let mode = s.export.view["mode"].as_str().and_then(crate::modes::ModeKind::parse);
    doc["modeLabel"] = json!(mode.map(|m| m.spec().label));
    doc["modeInfo"] = json!(mode.map(|m| {
        let spec = m.spec();
        json!({ "id": spec.id, "label": spec.label, "description": spec.description,
                "multiTurn": spec.multi_turn, "view": super::rest::has_view(m) })
    }));
    Ok(HttpResponse::Ok()
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .json(doc))
}

/// `GET /s/{token}/export?format=md|json`: the shared run as a download.
pub async fn page_export(
    state: web::Data<AppState>,
    token: web::Path<String>,
    q: web::Query<ExportQuery>,
) -> Result<HttpResponse, ApiError> {
    let format = format_of(&q)?;
    let s = shared(&state, &token).await?;
    Ok(download(format, &format!("conclave-run-{}", s.export.run_id()), &s.export, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_tokens_are_random_and_checked_for_shape() {
        let a = new_share_token();
        assert_ne!(a, new_share_token());
        assert!(share_token_shape(&a), "{a}");
        assert!(!share_token_shape("shr_abc"));
        assert!(!share_token_shape(&a.to_uppercase()));
        assert!(!share_token_shape(&a.replacen("shr_", "cnv_", 1)));
        assert!(!share_token_shape(&format!("{a}0")));
    }
}
