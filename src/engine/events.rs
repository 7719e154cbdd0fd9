//! The event envelope every interface sends: `{type: "event", run, seq, event, data}`,
//! rendered to JSON once per event and shared by every watcher.

use std::sync::Arc;

use bytestring::ByteString;
use serde::Serialize;
use serde_json::Value;

/// One event of one run, as published to watchers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Envelope {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub run: String,
    pub seq: i64,
    pub event: String,
    pub data: Value,
}

/// An event ready to send: the envelope plus its JSON text, rendered once (every socket that
/// sends it shares the text: a WebSocket text frame holds a [`ByteString`]).
#[derive(Debug, Clone)]
pub struct EventFrame {
    pub run: String,
    pub seq: i64,
    pub event: String,
    pub json: ByteString,
    /// What the event means for the run's progress, when it matters to the dashboard.
    pub mark: Option<ProgressMark>,
}

/// A model call as its progress events name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRef {
    pub key: String,
    pub model: String,
    pub stage: String,
    pub role: String,
}

/// The part of an event the Hub's run summary needs, read by the publisher, which holds the
/// event's JSON value, so the Hub never parses the rendered text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressMark {
    /// `call_start`.
    CallStarted(CallRef),
    /// `call_retry`.
    CallRetrying(CallRef),
    /// `call_waiting`: every turn at its server is taken.
    CallWaiting(CallRef),
    /// `call_complete`.
    CallFinished { call: CallRef, ok: bool, response_time_ms: Option<u64> },
    /// `title_complete`.
    Title(String),
}

impl ProgressMark {
    /// The mark of an event, if it has one (`call_start`, `call_retry`, `call_waiting`,
    /// `call_turn`, `call_complete`, `title_complete` with the payloads the engine and the
    /// modes give them). A call's turn coming marks it running again, as its start did.
    pub fn of(event: &str, data: &Value) -> Option<ProgressMark> {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let call = || {
            Some(CallRef {
                key: data.get("key")?.as_str()?.to_string(),
                model: text(&data["model"]),
                stage: text(&data["stage"]),
                role: text(&data["role"]),
            })
        };
        match event {
            "call_start" | "call_turn" => call().map(ProgressMark::CallStarted),
            "call_waiting" => call().map(ProgressMark::CallWaiting),
            "call_retry" => call().map(ProgressMark::CallRetrying),
            "call_complete" => Some(ProgressMark::CallFinished {
                call: call()?,
                ok: data["ok"].as_bool().unwrap_or(false),
                response_time_ms: data["responseTimeMs"].as_u64(),
            }),
            "title_complete" => {
                data["data"]["title"].as_str().map(|t| ProgressMark::Title(t.into()))
            }
            _ => None,
        }
    }
}

impl EventFrame {
    pub fn new(run: &str, seq: i64, event: &str, data: Value) -> Self {
        let env =
            Envelope { kind: "event", run: run.to_string(), seq, event: event.to_string(), data };
        let json = serde_json::to_string(&env).unwrap_or_else(|_| "{}".to_string());
        EventFrame {
            run: run.to_string(),
            seq,
            event: event.to_string(),
            json: json.into(),
            mark: None,
        }
    }

    pub fn with_mark(mut self, mark: Option<ProgressMark>) -> Self {
        self.mark = mark;
        self
    }

    /// Events that end a run: after one of these a run publishes nothing more.
    pub fn is_terminal(&self) -> bool {
        is_terminal(&self.event)
    }
}

/// How a run ended: the event after which it publishes nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terminal {
    Complete,
    Error,
    Cancelled,
}

impl Terminal {
    pub const ALL: [Terminal; 3] = [Terminal::Complete, Terminal::Error, Terminal::Cancelled];

    /// The event's name.
    pub fn event(self) -> &'static str {
        match self {
            Terminal::Complete => "complete",
            Terminal::Error => "error",
            Terminal::Cancelled => "cancelled",
        }
    }

    /// How a run that ended with `status` ended (a run still going ended in error).
    pub fn of_status(status: crate::store::RunStatus) -> Terminal {
        match status {
            crate::store::RunStatus::Completed => Terminal::Complete,
            crate::store::RunStatus::Cancelled => Terminal::Cancelled,
            _ => Terminal::Error,
        }
    }

    /// The terminal event `event` names, if it names one.
    pub fn of(event: &str) -> Option<Terminal> {
        Terminal::ALL.into_iter().find(|t| t.event() == event)
    }
}

pub fn is_terminal(event: &str) -> bool {
    Terminal::of(event).is_some()
}

/// Events that are not persisted: streamed token deltas (their text arrives whole in the
/// stage events, so a replay from the database loses nothing but the typing effect).
pub fn is_transient(event: &str) -> bool {
    event == "token"
}

/// Events of one run, in the order of their numbers: what one step of the run published
/// together (or a piece of a replay). A watcher gets them in one message and a socket writes
/// them in one go, so a burst of events costs one wake-up and one write per watcher.
pub type EventBatch = Arc<[Arc<EventFrame>]>;

/// The events of `events` (in the order of their numbers, as a batch or a log is) numbered
/// after `seq`: what a watcher that has everything up to `seq` has not had yet.
pub fn after(events: &[Arc<EventFrame>], seq: i64) -> &[Arc<EventFrame>] {
    &events[events.partition_point(|f| f.seq <= seq)..]
}

/// What a watcher's channel carries.
#[derive(Debug, Clone)]
pub enum Frame {
    /// Never empty; every event of it belongs to the same run.
    Events(EventBatch),
    /// A dashboard update: `{type: "dashboard", runs: [...]}` or `{type: "dashboard_update", run}`.
    Dashboard(Arc<str>),
    /// The watcher fell too far behind and was unsubscribed from `run`; it has now read
    /// everything sent before this marker and should watch again from `since`.
    Lagged { run: String, since: i64 },
    /// Likewise for the dashboard feed: subscribe again for a fresh snapshot.
    DashboardLagged,
    /// A marker a watcher puts in its own channel when it watches `run` again after an
    /// unwatch: frames of `run` ahead of it belong to the dropped subscription. `epoch` tells
    /// which unwatch it answers, should the client unwatch again before it is read.
    Rewatch { run: String, epoch: u64 },
    /// A watch asked with an `id` is in place: whatever it replayed is ahead of this in the
    /// channel, so the client's `watching` reply follows every event the watch sent.
    Watching { run: String, id: serde_json::Value },
}

pub type FrameSender = tokio::sync::mpsc::Sender<Frame>;
pub type FrameReceiver = tokio::sync::mpsc::Receiver<Frame>;

/// How many messages may wait for one watcher (a message is one step's events, or a piece of
/// a replay: see [`EventBatch`]). A watcher that lets more pile up is slow: messages of only
/// `token` events are dropped for it, and at the next one holding a durable event it is
/// unsubscribed and told to resume, so it never slows the run or the other watchers and its
/// memory stays bounded.
pub const WATCHER_BUFFER: usize = 1024;

pub fn watcher_channel() -> (FrameSender, FrameReceiver) {
    tokio::sync::mpsc::channel(WATCHER_BUFFER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(key: &str) -> CallRef {
        CallRef {
            key: key.into(),
            model: "sim/a".into(),
            stage: "stage1".into(),
            role: "council".into(),
        }
    }

    #[test]
    fn progress_marks_are_read_from_the_payloads() {
        let c = json!({"key": "stage1:0", "model": "sim/a", "stage": "stage1", "role": "council"});
        assert_eq!(
            ProgressMark::of("call_start", &c),
            Some(ProgressMark::CallStarted(call("stage1:0")))
        );
        let mut r = c.clone();
        r["attempt"] = json!(1);
        r["delayMs"] = json!(500);
        assert_eq!(
            ProgressMark::of("call_retry", &r),
            Some(ProgressMark::CallRetrying(call("stage1:0")))
        );
        let mut done = c.clone();
        done["ok"] = json!(false);
        done["responseTimeMs"] = json!(812);
        assert_eq!(
            ProgressMark::of("call_complete", &done),
            Some(ProgressMark::CallFinished {
                call: call("stage1:0"),
                ok: false,
                response_time_ms: Some(812)
            })
        );
        assert_eq!(
            ProgressMark::of("title_complete", &json!({"data": {"title": "Sky Colour"}})),
            Some(ProgressMark::Title("Sky Colour".into()))
        );
        assert_eq!(ProgressMark::of("stage1_complete", &json!({"data": []})), None);
        assert_eq!(ProgressMark::of("call_start", &json!({"model": "no key"})), None);
        assert_eq!(ProgressMark::of("title_complete", &json!({})), None);
    }
}
