//! The JSON clients get of the engine's records (`GET /api/deliberations…`; `conclave run
//! --json` prints the same).

use serde_json::{json, Value};

use crate::engine::RunDetail;
use crate::store::{RecentRun, RunRecord};

/// The fields of a run every view has.
fn run_fields(run: &RunRecord, question: Option<&str>, title: Option<&str>) -> Value {
    json!({
        "id": run.id,
        "conversationId": run.conversation_id,
        "messageId": run.message_id,
        "mode": run.mode,
        "status": run.status,
        "error": run.error,
        "question": question,
        "title": title,
        "request": run.request,
        "owner": run.owner,
        "createdAt": run.created_at,
        "finishedAt": run.finished_at,
        "durationMs": run.finished_at.map(|f| f - run.created_at),
        "usage": {
            "promptTokens": run.prompt_tokens,
            "completionTokens": run.completion_tokens,
            "cost": run.cost,
        },
        "lastSeq": run.last_seq,
        // A completed run's outcome in its mode's terms, as stored when it ended.
        "outcome": run.outcome,
        "review": {
            "needsHumanReview": run.needs_human_review,
            "reason": run.review_reason,
            "reviewedAt": run.reviewed_at,
            "note": run.review_note,
        },
    })
}

/// A run with its answer, outcome and result (`GET /api/deliberations/{id}`).
pub fn run_view(d: &RunDetail) -> Value {
    let mut v = run_fields(&d.run, d.question.as_deref(), d.title.as_deref());
    if let Some(o) = v.as_object_mut() {
        o.insert("answer".into(), json!(d.answer));
        // Rebuilt from the result: runs stored before outcomes were kept have one too.
        o.insert("outcome".into(), json!(d.outcome));
        o.insert("result".into(), d.result.clone());
        o.insert("visibility".into(), json!(d.visibility));
        o.insert("canControl".into(), json!(d.can_control));
        if let Some(e) = &d.eval_id {
            o.insert("evalId".into(), json!(e));
        }
        // The files it was given (names, types, sizes); their text is read one at a time.
        o.insert("attachments".into(), json!(d.attachments));
    }
    v
}

/// A run in a list: small, the start of the question and the title, never the answer or the
/// result.
pub fn recent_view(r: &RecentRun) -> Value {
    run_fields(&r.run, r.question.as_deref(), r.title.as_deref())
}
