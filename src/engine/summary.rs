//! What a run's progress looks like from outside: the summary the dashboard lists (and
//! instances tell each other over the bus), folded from the progress marks of its events.
//! Plain data: the Hub keeps one per run, the bus carries them, the web shows them.

use serde::{Deserialize, Serialize};

use super::events::{CallRef, ProgressMark};
use crate::store::{RunStatus, Visibility};

/// A run as the dashboard lists it (and as instances tell each other over the bus).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub id: String,
    pub mode: String,
    pub conversation_id: String,
    pub message_id: String,
    pub question: String,
    pub status: RunStatus,
    /// The name of the user who started the run (null for runs of the local CLI).
    pub owner: Option<String>,
    /// `team` (every signed-in user sees it) or `private` (its owner and admins).
    pub visibility: Visibility,
    pub created_at: i64,
    /// When the run ended (ms since the epoch, like `created_at`).
    pub finished_at: Option<i64>,
    /// The conversation's title, once the run has generated one.
    pub title: Option<String>,
    /// The last durable event published (`stage2_start`...).
    pub last_event: Option<String>,
    pub last_seq: i64,
    /// The run's model calls in the order they started (title calls left out).
    pub calls: Vec<CallProgress>,
    /// Once it completed: its outcome in its mode's terms (the winner, the verdict…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The eval that started it, if one did (the dashboard lists a person's own runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_id: Option<String>,
}

/// One model call of a run, as the dashboard shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallProgress {
    pub key: String,
    pub model: String,
    pub stage: String,
    pub role: String,
    pub state: CallState,
    /// Set when the call has ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_time_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallState {
    Running,
    /// An attempt failed with a transient error and the call waits to try again.
    Retrying,
    /// Every turn at its server is taken (its route caps its concurrent calls): it waits for
    /// one before it is sent.
    Waiting,
    Ok,
    Failed,
    /// The run ended while the call was still going.
    Stopped,
}

/// The stage of the title call, which runs beside the deliberation: not progress to show.
const TITLE_STAGE: &str = "title";

impl RunSummary {
    /// Applies what one event says about the run's progress.
    pub fn apply(&mut self, mark: &ProgressMark) {
        match mark {
            ProgressMark::Title(title) => self.title = Some(title.clone()),
            ProgressMark::CallStarted(call) => self.set_call(call, CallState::Running, None),
            ProgressMark::CallRetrying(call) => self.set_call(call, CallState::Retrying, None),
            ProgressMark::CallWaiting(call) => self.set_call(call, CallState::Waiting, None),
            ProgressMark::CallFinished { call, ok, response_time_ms } => {
                let state = if *ok { CallState::Ok } else { CallState::Failed };
                self.set_call(call, state, *response_time_ms)
            }
        }
    }

    fn set_call(&mut self, call: &CallRef, state: CallState, response_time_ms: Option<u64>) {
        if call.stage == TITLE_STAGE {
            return;
        }
        // Keys are unique within a run; a run has a few dozen calls at most.
        match self.calls.iter_mut().find(|c| c.key == call.key) {
            Some(c) => {
                c.state = state;
                c.response_time_ms = response_time_ms;
            }
            None => self.calls.push(CallProgress {
                key: call.key.clone(),
                model: call.model.clone(),
                stage: call.stage.clone(),
                role: call.role.clone(),
                state,
                response_time_ms,
            }),
        }
    }

    /// The run is over: calls still going were stopped with it.
    pub fn end(&mut self, status: RunStatus, finished_at: i64, outcome: Option<String>) {
        self.status = status;
        self.finished_at = Some(finished_at);
        self.outcome = outcome;
        for c in &mut self.calls {
            if matches!(c.state, CallState::Running | CallState::Retrying | CallState::Waiting) {
                c.state = CallState::Stopped;
            }
        }
    }
}

#[cfg(test)]
impl RunSummary {
    /// A running Council run of no owner, for tests.
    pub fn sample(id: &str) -> Self {
        RunSummary {
            id: id.into(),
            mode: "council".into(),
            conversation_id: "c".into(),
            message_id: "m".into(),
            question: "q".into(),
            status: RunStatus::Running,
            owner: None,
            visibility: Visibility::Team,
            created_at: 0,
            finished_at: None,
            title: None,
            last_event: None,
            last_seq: 0,
            calls: Vec::new(),
            outcome: None,
            eval_id: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_after(events: &[&str]) -> Vec<CallState> {
        let mut s = RunSummary::sample("r");
        let data = serde_json::json!({ "key": "stage1:0", "model": "local/a", "stage": "stage1",
                                       "role": "council", "route": "local/" });
        let mut states = Vec::new();
        for e in events {
            if *e == "end" {
                s.end(RunStatus::Cancelled, 1, None);
            } else if let Some(mark) = ProgressMark::of(e, &data) {
                s.apply(&mark);
            }
            states.push(s.calls[0].state);
        }
        states
    }

    #[test]
    fn a_call_waiting_for_its_turn_shows_waiting_then_running_and_stops_with_the_run() {
        use CallState::*;
        assert_eq!(
            state_after(&["call_start", "call_waiting", "call_turn"]),
            [Running, Waiting, Running]
        );
        assert_eq!(
            state_after(&["call_start", "call_waiting", "end"]),
            [Running, Waiting, Stopped]
        );
    }
}
