//! Running a stored run again ("Run again" on a cancelled or failed run): the same request as
//! the server stored it, started as a new run.
//!
//! The stored request is the normalised configuration, which may hold what a client may not
//! send (the server's backup models), so it is not validated again as a client's body: it is
//! rebuilt as the [`modes::ValidRequest`] it was, its models are checked against today's
//! routes, and it is started through the same path as a normal start (follow-up rules, the
//! mode's build, the caller's limits). Nothing here reads or writes SQL of its own.

use serde_json::Value;

use super::{Engine, EngineError, StartedRun, Viewer};
use crate::attachments::Given;
use crate::ids::RunId;
use crate::modes::{self, ModeKind};
use crate::store::{RunRecord, RunStatus};

/// The validated request a run was started with, as stored in `runs.request`: its mode, its
/// question exactly as the mode first saw it, its conversation (when it was a follow-up) and
/// its normalised configuration. An error says what is missing.
pub(super) fn stored_request(run: &RunRecord) -> Result<modes::ValidRequest, String> {
    let mode = ModeKind::parse(&run.mode).ok_or_else(|| format!("unknown mode {}", run.mode))?;
    let question = match run.request.get("question") {
        Some(Value::String(q)) => q.clone(),
        _ => return Err("its stored request has no question".into()),
    };
    let config = match run.request.get("config") {
        Some(c @ Value::Object(_)) => c.clone(),
        _ => return Err("its stored request has no configuration".into()),
    };
    let conversation_id =
        run.request.get("conversationId").and_then(Value::as_str).map(str::to_string);
    let models = run
        .request
        .get("models")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    Ok(modes::ValidRequest { mode, question, conversation_id, config, models })
}

impl Engine {
    /// Starts a new run with the request of run `id`, owned by `viewer`, who must be allowed
    /// to see that run (else it is not found). A run still going is a conflict: running it
    /// twice at once is almost always a double click, and it can be cancelled first.
    ///
    /// The new run goes where the old request said: a first question starts a new
    /// conversation (with the old one's visibility), a follow-up is asked again in its
    /// conversation (with that conversation's history as it is now, where the failed turn,
    /// having no answer, is left out). This is what sending the same request again does.
    pub async fn rerun(&self, id: &RunId, viewer: &Viewer) -> Result<StartedRun, EngineError> {
        if self.draining.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(EngineError::Unavailable);
        }
        let access = self.access(id, viewer).await?;
        let run = self
            .store
            .get_run(id.as_str())
            .await?
            .ok_or_else(|| EngineError::NotFound(id.describe()))?;
        if run.status == RunStatus::Running {
            return Err(EngineError::Conflict(format!(
                "run {} is still running: cancel it or wait for it to end before running it again",
                run.id
            )));
        }
        let req = stored_request(&run).map_err(|why| {
            EngineError::Conflict(format!("run {} cannot be run again: {why}", run.id))
        })?;
        // Routes may have changed since: say which model no longer has one, plainly.
        for model in &req.models {
            if let Err(message) = self.providers.resolve(model) {
                return Err(EngineError::Conflict(format!(
                    "run {} cannot be run again: its model {model} is not available on this \
                     server now ({message})",
                    run.id
                )));
            }
        }
        let visibility = req.conversation_id.is_none().then_some(access.visibility);
        // The same files, as the run was given them.
        let given = Given::new(self.store.run_attachments(&run.id).await?);
        self.begin(req, visibility, viewer, super::Started { given, ..Default::default() }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(request: Value) -> RunRecord {
        RunRecord {
            id: "r".into(),
            conversation_id: "c".into(),
            user_message_id: "u".into(),
            message_id: "m".into(),
            mode: "council".into(),
            status: RunStatus::Cancelled,
            error: None,
            request,
            owner: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost: None,
            last_seq: 0,
            created_at: 0,
            finished_at: None,
            needs_human_review: false,
            review_reason: None,
            reviewed_at: None,
            review_note: None,
            outcome: None,
        }
    }

    #[test]
    fn a_stored_request_comes_back_with_its_backups_and_conversation() {
        let stored = json!({
            "mode": "council", "question": "Q?", "conversationId": "conv-1",
            "config": { "councilModels": ["sim/a"], "chairmanModel": "sim/a",
                        "chairmanFallbackModel": "sim/backup" },
            "models": ["sim/a", "sim/backup"],
        });
        let req = stored_request(&record(stored.clone())).unwrap();
        assert_eq!(req.mode, ModeKind::parse("council").unwrap());
        assert_eq!(req.question, "Q?");
        assert_eq!(req.conversation_id.as_deref(), Some("conv-1"));
        assert_eq!(req.config, stored["config"], "the server's backup is kept");
        assert_eq!(req.models, vec!["sim/a", "sim/backup"]);
    }

    #[test]
    fn a_stored_request_without_question_or_configuration_is_refused() {
        let no_question = json!({ "config": {} });
        assert!(stored_request(&record(no_question)).unwrap_err().contains("no question"));
        let no_config = json!({ "question": "Q?" });
        assert!(stored_request(&record(no_config)).unwrap_err().contains("no configuration"));
    }
}
