//! REST handlers: start, list, read and cancel runs; conversations; models; health.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::{conversation_id, run_id, ApiError};
use super::AppState;
use crate::engine::views::{recent_view, run_view};
use crate::modes::{self, ModeKind};
use crate::store::{
    ConversationFilter, ConversationRecord, EvalConversations, RecentRun, ReviewStatus, RunRecord,
};

#[derive(Deserialize)]
pub struct ListQuery {
    limit: Option<i64>,
}

fn limit(q: &ListQuery) -> Result<i64, ApiError> {
    match q.limit {
        None => Ok(50),
        Some(n) if (1..=500).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::BadRequest {
            field: Some("limit".into()),
            message: "limit: must be between 1 and 500".into(),
        }),
    }
}

/// `POST /api/deliberations`: 202 with the run, conversation and message ids.
pub async fn start(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let started = state.engine.start_run(&body, &caller.viewer()).await?;
    Ok(HttpResponse::Accepted().json(started))
}

/// `POST /api/deliberations/{id}/rerun`: starts a new run with the stored request of a run the
/// caller may see (404 otherwise, 409 while it is still running); answers like a start.
pub async fn rerun(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let started = state.engine.rerun(&run_id(&id)?, &caller.viewer()).await?;
    Ok(HttpResponse::Accepted().json(started))
}

/// `GET /api/deliberations`: live runs, then the most recent ones.
pub async fn list_runs(
    state: web::Data<AppState>,
    caller: Caller,
    q: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = limit(&q)?;
    let viewer = caller.viewer();
    let live = state.engine.live_runs(&viewer).await?;
    let recent = state.engine.recent_runs(limit, &viewer).await?;
    // A list entry stays small: the start of the question and the title, never the answer or
    // the result.
    let recent: Vec<Value> = recent.iter().map(recent_view).collect();
    Ok(HttpResponse::Ok().json(json!({ "live": live, "recent": recent })))
}

/// `GET /api/deliberations/{id}`: status, timings, usage and the mode's result.
pub async fn get_run(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&id)?;
    Ok(HttpResponse::Ok().json(run_view(&state.engine.result(&id, &caller.viewer()).await?)))
}

/// `POST /api/deliberations/{id}/cancel`: 202 when the run was stopped, 409 when it had
/// already ended.
pub async fn cancel(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&id)?;
    if state.engine.cancel(&id, "a REST request", &caller.viewer()).await? {
        Ok(HttpResponse::Accepted().json(json!({ "runId": id.as_str(), "cancelled": true })))
    } else {
        Err(ApiError::Conflict(format!("run {} has already ended", id.as_str())))
    }
}

#[derive(Deserialize)]
pub struct ConversationQuery {
    limit: Option<i64>,
    /// Only conversations whose title contains this, ignoring case.
    q: Option<String>,
    /// The page after the one that answered this cursor (its `next`).
    after: Option<String>,
    /// `include`: also the conversations evals started (hidden by default).
    evals: Option<String>,
    /// Only the conversations this eval started.
    eval: Option<String>,
}

/// A list cursor: the last conversation listed, as `UPDATED_AT:ID`.
fn cursor_of(c: &ConversationRecord) -> String {
    format!("{}:{}", c.updated_at, c.id)
}

fn parse_cursor(text: &str) -> Result<(i64, String), ApiError> {
    let bad = || ApiError::BadRequest {
        field: Some("after".into()),
        message: "after: not a cursor this server gave (use the list's `next`)".into(),
    };
    let (at, id) = text.split_once(':').ok_or_else(bad)?;
    let at: i64 = at.parse().map_err(|_| bad())?;
    if id.is_empty() || id.len() > 64 {
        return Err(bad());
    }
    Ok((at, id.to_string()))
}

/// The longest title search accepted.
const MAX_QUERY_CHARS: usize = 200;

/// `GET /api/conversations?q=TEXT&limit=N&after=CURSOR&evals=include&eval=ID`: conversations,
/// most recently updated first, optionally only those whose title contains `q` (`%` and `_`
/// are plain characters). Those an eval started are left out unless `evals=include`, or
/// `eval` names the eval. `next` is the cursor of the page after this one, null on the last.
pub async fn list_conversations(
    state: web::Data<AppState>,
    caller: Caller,
    q: web::Query<ConversationQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = limit(&ListQuery { limit: q.limit })?;
    let text = q.q.as_deref().filter(|t| !t.is_empty());
    if text.is_some_and(|t| t.chars().count() > MAX_QUERY_CHARS) {
        return Err(ApiError::BadRequest {
            field: Some("q".into()),
            message: format!("q: at most {MAX_QUERY_CHARS} characters"),
        });
    }
    let evals = match (q.eval.as_deref().filter(|e| !e.is_empty()), q.evals.as_deref()) {
        (Some(id), _) => EvalConversations::Only(id.to_string()),
        (None, Some("include")) => EvalConversations::Included,
        (None, None | Some("" | "hide")) => EvalConversations::Hidden,
        (None, Some(_)) => {
            return Err(ApiError::BadRequest {
                field: Some("evals".into()),
                message: "evals: must be \"include\" or \"hide\"".into(),
            })
        }
    };
    let after = q.after.as_deref().filter(|a| !a.is_empty()).map(parse_cursor).transpose()?;
    let filter = ConversationFilter { title_contains: text.map(str::to_string), evals, after };
    // One more than asked for tells whether a next page exists.
    let mut list = state.engine.conversations(limit + 1, filter, &caller.viewer()).await?;
    let more = list.len() as i64 > limit;
    list.truncate(limit as usize);
    let next = list.last().filter(|_| more).map(|c| cursor_of(&c.conversation));
    Ok(HttpResponse::Ok().json(json!({ "conversations": list, "next": next })))
}

pub async fn get_conversation(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    // One the caller may not see is not found either.
    let detail = state.engine.conversation(&conversation_id(&id)?, &caller.viewer()).await?;
    let runs: Vec<Value> = detail
        .runs
        .iter()
        .map(|r| {
            json!({ "id": r.id, "messageId": r.message_id, "userMessageId": r.user_message_id,
                    "mode": r.mode, "status": r.status, "error": r.error,
                    "createdAt": r.created_at, "finishedAt": r.finished_at })
        })
        .collect();
    Ok(HttpResponse::Ok().json(
        json!({ "conversation": detail.conversation, "messages": detail.messages, "runs": runs }),
    ))
}

/// `GET /api/modes`: every mode the server runs, with what a client needs to offer it: its
/// label and description, whether it takes follow-ups, its question, its roles with their
/// default models on this server, the JSON Schema of its `modeConfig` and an example request.
pub async fn modes_list(state: web::Data<AppState>, _caller: Caller) -> HttpResponse {
    let defaults = state.engine.defaults();
    let list: Vec<Value> = ModeKind::all()
        .into_iter()
        .map(|kind| {
            let spec = kind.spec();
            let roles: Vec<Value> = spec
                .roles
                .iter()
                .map(|r| {
                    let mut v = json!(r);
                    if let Some(o) = v.as_object_mut() {
                        o.insert("defaultModels".into(), json!(defaults.models(spec.id, r.id)));
                    }
                    v
                })
                .collect();
            json!({
                "id": spec.id,
                "label": spec.label,
                "description": spec.description,
                "multiTurn": spec.multi_turn,
                "question": spec.question,
                "roles": roles,
                "topLevel": spec.top_level,
                "configSchema": modes::registry::config_schema(kind),
                "resultSchema": (spec.result_schema)(),
                "example": (spec.example)(),
                "view": has_view(kind),
            })
        })
        .collect();
    HttpResponse::Ok().json(json!({ "modes": list }))
}

/// Whether the page has a view of its own for a mode (else it shows the generic one).
pub fn has_view(kind: ModeKind) -> bool {
    super::assets::has_file(&format!("js/modes/{}.js", kind.spec().id))
}

/// The settings validation fills in for a mode's request that leaves them out: its example
/// (which names no models), less every setting the example need not give. An example may set
/// `rounds: 1` to run fast; a form must not show that as the default.
fn default_config(mode: ModeKind, defaults: &modes::Defaults) -> Option<Value> {
    let mut probe = (mode.spec().example)();
    let keys: Vec<String> =
        probe["modeConfig"].as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
    for key in keys {
        let mut without = probe.clone();
        if let Some(o) = without["modeConfig"].as_object_mut() {
            o.remove(&key);
        }
        if modes::validate(&without, defaults).is_ok() {
            probe = without;
        }
    }
    let mut req = modes::validate(&probe, defaults).ok()?;
    if let Some(o) = req.config.as_object_mut() {
        o.remove("content");
    }
    Some(req.config)
}

/// `GET /api/models`: the default panel of each mode and whether real providers are set up.
pub async fn models(state: web::Data<AppState>, _caller: Caller) -> HttpResponse {
    let defaults = state.engine.defaults();
    let mut per_mode = serde_json::Map::new();
    for mode in ModeKind::all() {
        if let Some(config) = default_config(mode, defaults) {
            per_mode.insert(mode.as_str().to_string(), config);
        }
    }
    let files = state.engine.attachment_limits();
    HttpResponse::Ok().json(json!({
        "offline": defaults.offline,
        // A run that names no models would use a sim model somewhere (the page says so).
        "simDefaults": defaults.sim_by_default(),
        "stageTimeoutMs": defaults.stage_timeout_ms,
        // What a run may be given (`[attachments]`).
        "attachments": {
            "maxFileBytes": files.file_bytes,
            "maxRunBytes": files.run_bytes,
            "maxPdfPages": files.pdf_pages,
            "maxFiles": crate::attachments::MAX_PER_RUN,
        },
        "modes": per_mode,
        "simModels": ["sim/alpha", "sim/beta", "sim/gamma", "sim/delta", "sim/epsilon", "sim/zeta"],
        "simBehaviours": {
            "sim/fail…": "always fails (HTTP 503)",
            "sim/stall…": "never answers (the stage timeout ends it)",
            "sim/malformed…": "answers without the requested structure",
            "sim/flaky…": "fails the first attempt at each prompt with HTTP 503, then answers",
            "sim/ratelimit…": "answers the first attempt at each prompt with HTTP 429 and Retry-After: 1, then answers",
            "sim/reset…": "breaks the connection off mid-stream on the first attempt at each prompt, then answers when retried",
            "sim/empty…": "answers an empty completion (200 with empty content)",
            "sim/slowstart…": "sends nothing for 15 s (or its start_delay_ms) before answering",
            "sim/xss…": "answers normally, with hostile HTML and markdown (script, event handlers, javascript: links) in its prose, for testing sanitisers",
            "sim/reader…": "answers anything with what reached it: the attached files' names, types and lengths, and how many images it was shown",
            "sim/thinker…": "answers normally after a <think> trace holding a draft that differs from its answer (sent in reasoning_content over HTTP), as a reasoning model does",
            "sim/oracle-P…": "answers a question of a `conclave eval` run in the same process right with probability P (0 to 1), independently per call; otherwise like sim/alpha",
        },
    }))
}

/// `GET /healthz`: 200 when the database answers. Anyone may ask, so a failure answers the
/// same generic body whatever went wrong; the database's own words (a host, a table, a
/// file path) go to the log only.
pub async fn health(state: web::Data<AppState>) -> HttpResponse {
    match state.engine.store().list_runs(1).await {
        Ok(_) => HttpResponse::Ok().json(json!({ "status": "ok", "database": "ok" })),
        Err(e) => {
            log::error!("health check: {e}");
            HttpResponse::ServiceUnavailable()
                .json(json!({ "status": "degraded", "database": "unavailable" }))
        }
    }
}

#[derive(Deserialize)]
pub struct ReviewQuery {
    status: Option<String>,
    limit: Option<i64>,
}

fn review_view(r: &RunRecord) -> Value {
    json!({
        "runId": r.id, "conversationId": r.conversation_id, "mode": r.mode, "status": r.status,
        "reason": r.review_reason, "createdAt": r.created_at, "reviewedAt": r.reviewed_at,
        "note": r.review_note, "outcome": r.outcome,
    })
}

/// A flagged run in the review queue: what it was about (its conversation's title and the
/// start of its question) as well.
fn queued_review_view(recent: &RecentRun) -> Value {
    let mut v = review_view(&recent.run);
    v["title"] = json!(recent.title);
    v["question"] = json!(recent.question);
    v
}

/// `GET /api/reviews?status=pending|reviewed|all`: runs flagged for human review, of those
/// the caller may see.
pub async fn list_reviews(
    state: web::Data<AppState>,
    caller: Caller,
    q: web::Query<ReviewQuery>,
) -> Result<HttpResponse, ApiError> {
    let status = match q.status.as_deref().unwrap_or("pending") {
        "pending" => ReviewStatus::Pending,
        "reviewed" => ReviewStatus::Reviewed,
        "all" => ReviewStatus::All,
        _ => {
            return Err(ApiError::BadRequest {
                field: Some("status".into()),
                message: "status: must be pending, reviewed or all".into(),
            })
        }
    };
    let limit = limit(&ListQuery { limit: q.limit })?;
    let runs = state.engine.reviews(status, limit, &caller.viewer()).await?;
    Ok(HttpResponse::Ok()
        .json(json!({ "reviews": runs.iter().map(queued_review_view).collect::<Vec<_>>() })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewBody {
    note: String,
}

/// `POST /api/reviews/{id}` with `{note}`: marks a flagged run reviewed (its owner or an admin).
pub async fn mark_reviewed(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    body: web::Json<ReviewBody>,
) -> Result<HttpResponse, ApiError> {
    if body.note.chars().count() > 10_000 {
        return Err(ApiError::BadRequest {
            field: Some("note".into()),
            message: "note: at most 10 000 characters".into(),
        });
    }
    let run = state.engine.mark_reviewed(&run_id(&id)?, body.note.trim(), &caller.viewer()).await?;
    Ok(HttpResponse::Ok().json(review_view(&run)))
}
