//! The eval page's data: `GET /api/evals` (newest first) and `GET /api/evals/{id}` (the
//! report: the table's figures, the differences to the best single member, and the questions
//! where the arms disagree, each with the runs behind every arm's answer). Signed-in callers
//! only, like the other REST routes; what an eval runs and how it grades is `crate::eval`'s.

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::ApiError;
use super::AppState;
use crate::eval::runner::stored_report;
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
    Ok(HttpResponse::Ok().json(body))
}
