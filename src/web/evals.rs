//! The eval page's data: `GET /api/evals` (newest first) and `GET /api/evals/{id}` (the
//! report: the table's figures, the differences to the best single member, and the questions
//! where the arms disagree, each with the runs behind every arm's answer). Signed-in callers
//! only, like the other REST routes; what an eval runs and how it grades is `crate::eval`'s.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::ApiError;
use super::AppState;
use crate::eval::runner::{run_eval, stored_report, EvalError, EvalOptions, Progress};
use crate::ids::EvalId;
use crate::store::EvalRecord;

fn summary(e: &EvalRecord) -> Value {
    json!({
        "id": e.id,
        "setName": e.set_name,
        "status": e.status,
        "note": e.note,
        "questions": e.questions.as_array().map_or(0, Vec::len),
        "members": e.settings["members"],
        "arms": e.settings["arms"],
        "createdAt": e.created_at,
        "finishedAt": e.finished_at,
    })
}

/// `GET /api/evals`: the 100 newest evals.
pub async fn list(state: web::Data<AppState>, _caller: Caller) -> Result<HttpResponse, ApiError> {
    let evals = state.engine.store().list_evals(100).await?;
    let list: Vec<Value> = evals.iter().map(summary).collect();
    Ok(HttpResponse::Ok().json(json!({ "evals": list })))
}

/// `GET /api/evals/{id}`: one eval's report.
pub async fn get(
    state: web::Data<AppState>,
    _caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let not_found = || ApiError::NotFound(format!("eval {id}"));
    let id = EvalId::parse(&id).ok_or_else(not_found)?;
    let store = state.engine.store();
    let record = store.get_eval(id.as_str()).await?.ok_or_else(not_found)?;
    let rows = store.eval_runs(id.as_str()).await?;
    let (report, questions) =
        stored_report(&record, &rows).map_err(|e| ApiError::Internal(e.to_string()))?;
    let disagreements: Vec<Value> = report
        .disagreements
        .iter()
        .map(|(qid, arms)| {
            let q = questions.iter().find(|q| &q.id == qid);
            let arms: serde_json::Map<String, Value> = arms
                .iter()
                .map(|(arm, (grade, runs))| {
                    (arm.clone(), json!({ "grade": grade, "runIds": runs }))
                })
                .collect();
            json!({
                "questionId": qid,
                "question": q.map(|q| q.question.as_str()),
                "answer": q.map(|q| q.answer.as_str()),
                "arms": arms,
            })
        })
        .collect();
    // Other evals of the same question set, newest first: what this one can be compared with.
    let same_set: Vec<Value> = store
        .list_evals(100)
        .await?
        .iter()
        .filter(|e| e.set_hash == record.set_hash && e.id != record.id)
        .map(summary)
        .collect();
    let mut body = report.to_json();
    body["eval"] = summary(&record);
    body["sameSet"] = json!(same_set);
    body["disagreements"] = json!(disagreements);
    // While this server runs it: how far it is, and whether it can still be stopped.
    body["progress"] = progress_of(&state, id.as_str()).unwrap_or(Value::Null);
    Ok(HttpResponse::Ok().json(body))
}

// ---- evals started from the page ------------------------------------------------------------

/// The evals this server runs for the page: each one's latest progress and its stop switch,
/// until it ends (then its stored record says how it ended).
#[derive(Default)]
pub struct EvalJobs {
    jobs: std::sync::Mutex<std::collections::HashMap<String, EvalJob>>,
}

struct EvalJob {
    progress: Progress,
    stop: Option<tokio::sync::oneshot::Sender<String>>,
}

impl EvalJobs {
    fn with<T>(&self, f: impl FnOnce(&mut std::collections::HashMap<String, EvalJob>) -> T) -> T {
        f(&mut self.jobs.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// `POST /api/evals`'s body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartEval {
    /// `sample`, or the name of the uploaded set whose JSON lines are `questions`.
    set: String,
    questions: Option<String>,
    /// Only the first N questions.
    limit: Option<usize>,
    members: Vec<String>,
    /// Arm names (`single`, `majority`, `council`, `jury`…); the CLI's default when empty.
    #[serde(default)]
    arms: Vec<String>,
    budget_tokens: Option<u64>,
    judge: Option<String>,
    seed: Option<u64>,
}

/// The largest question set the page may upload (the CLI reads any file).
const MAX_SET_BYTES: usize = 512 * 1024;

fn field_error(field: &str, message: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest { field: Some(field.into()), message: format!("{field}: {message}") }
}

/// A CLI flag's name as the body's field: `budget-tokens` → `budgetTokens`.
fn camel(flag: &str) -> String {
    let mut parts = flag.split('-');
    let first = parts.next().unwrap_or("").to_string();
    parts.fold(first, |mut out, p| {
        let mut c = p.chars();
        if let Some(h) = c.next() {
            out.extend(h.to_uppercase());
            out.push_str(c.as_str());
        }
        out
    })
}

/// An eval's own refusal, named by the field of the body that caused it (the runner names the
/// CLI's flag: `--members: …`).
fn refused(e: EvalError) -> ApiError {
    match e {
        EvalError::Usage(m) => match m.strip_prefix("--").and_then(|r| r.split_once(": ")) {
            Some((flag, rest)) => field_error(&camel(flag), rest),
            None => ApiError::bad_request(m),
        },
        EvalError::Set(e) => field_error("questions", e),
        EvalError::Engine(e) => e.into(),
        EvalError::Store(e) => e.into(),
    }
}

/// `POST /api/evals` (admins: an eval spends tokens on the server's routes): starts an eval
/// in this server, answers 202 `{evalId}` once it is stored, or 400 naming the field it
/// refused. Its progress is in `GET /api/evals/{id}` while it runs.
pub async fn start(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    if !caller.user.is_admin {
        return Err(ApiError::Forbidden("only an admin may start an eval".into()));
    }
    let req: StartEval = serde_json::from_value(body.into_inner())
        .map_err(|e| ApiError::bad_request(format!("the eval's settings: {e}")))?;
    let text = match (req.set.as_str(), &req.questions) {
        ("sample", None) => crate::eval::SAMPLE.to_string(),
        ("sample", Some(_)) => return Err(field_error("questions", "the sample set takes none")),
        (_, Some(q)) if q.len() > MAX_SET_BYTES => {
            return Err(field_error("questions", "a set of at most 512 KiB"))
        }
        (_, Some(q)) => q.clone(),
        (_, None) => {
            return Err(field_error("questions", "give the set's JSON lines, or set \"sample\""))
        }
    };
    let text = match req.limit {
        Some(0) => return Err(field_error("limit", "at least 1 question")),
        Some(n) => crate::eval::questions::first_questions(&text, n),
        None => text,
    };
    let set_name = req.set.trim().chars().take(200).collect::<String>();
    if set_name.is_empty() {
        return Err(field_error("set", "name the set"));
    }
    let arms = if req.arms.is_empty() {
        crate::eval::arms::DEFAULT_ARMS.to_string()
    } else {
        req.arms.join(",")
    };
    let opts = EvalOptions {
        set_name,
        set_text: text,
        members: req
            .members
            .iter()
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect(),
        arms,
        samples: 5,
        seed: req.seed.unwrap_or(42),
        budget_tokens: req.budget_tokens,
        budget_cost: None,
        concurrency: 4,
        mode_settings: Default::default(),
        judge: req.judge.filter(|j| !j.trim().is_empty()),
    };
    let (id_tx, id_rx) = tokio::sync::oneshot::channel::<String>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<String>();
    let engine = state.engine.clone();
    let jobs = state.evals.clone();
    let task = actix_web::rt::spawn(async move {
        let (mut id_tx, mut stop_tx) = (Some(id_tx), Some(stop_tx));
        let mut id: Option<String> = None;
        let mut on_progress = |p: &Progress| {
            jobs.with(|all| {
                let job = all
                    .entry(p.eval_id.clone())
                    .or_insert_with(|| EvalJob { progress: p.clone(), stop: stop_tx.take() });
                job.progress = p.clone();
            });
            if let Some(tx) = id_tx.take() {
                id = Some(p.eval_id.clone());
                let _ = tx.send(p.eval_id.clone());
            }
        };
        let stop = async { stop_rx.await.unwrap_or_else(|_| "stopped".into()) };
        let out = run_eval(&engine, &opts, None, stop, &mut on_progress).await;
        if let Some(id) = id {
            jobs.with(|all| all.remove(&id));
        }
        // A refusal is the client's to read (400); anything else is the server's.
        if let Err(e @ (EvalError::Engine(_) | EvalError::Store(_))) = &out {
            log::warn!("an eval started from the page ended with an error: {e}");
        }
        out.map(|_| ())
    });
    match id_rx.await {
        Ok(id) => Ok(HttpResponse::Accepted().json(json!({ "evalId": id }))),
        Err(_) => match task.await {
            Ok(Err(e)) => Err(refused(e)),
            _ => Err(ApiError::Internal("the eval ended before it was stored".into())),
        },
    }
}

/// `POST /api/evals/{id}/cancel` (admins): stops an eval this server is running; the runs in
/// flight are cancelled and what is done is kept (a stopped eval). 409 when it is not running
/// here.
pub async fn cancel(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    if !caller.user.is_admin {
        return Err(ApiError::Forbidden("only an admin may stop an eval".into()));
    }
    let not_found = || ApiError::NotFound(format!("eval {id}"));
    let id = EvalId::parse(&id).ok_or_else(not_found)?;
    let stop = state.evals.with(|all| all.get_mut(id.as_str()).and_then(|j| j.stop.take()));
    match stop {
        Some(tx) => {
            let _ = tx.send(format!("stopped from the page by {}", caller.user.name));
            Ok(HttpResponse::Accepted().json(json!({ "evalId": id.as_str(), "stopping": true })))
        }
        None => {
            state.engine.store().get_eval(id.as_str()).await?.ok_or_else(not_found)?;
            Err(ApiError::Conflict(format!("eval {} is not running on this server", id.as_str())))
        }
    }
}

/// The progress of an eval this server runs, for its page.
fn progress_of(state: &AppState, id: &str) -> Option<Value> {
    state.evals.with(|all| {
        all.get(id).map(|j| {
            json!({ "done": j.progress.done, "total": j.progress.total,
                    "stoppable": j.stop.is_some() })
        })
    })
}
