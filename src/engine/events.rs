//! The event envelope every interface sends: `{type: "event", run, seq, event, data}`,
//! rendered to JSON once per event and shared by every watcher.

use std::sync::Arc;

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

/// An event ready to send: the envelope plus its JSON text, rendered once.
#[derive(Debug, Clone)]
pub struct EventFrame {
    pub run: String,
    pub seq: i64,
    pub event: String,
    pub json: Arc<str>,
}

impl EventFrame {
    pub fn new(run: &str, seq: i64, event: &str, data: Value) -> Self {
        let env =
            Envelope { kind: "event", run: run.to_string(), seq, event: event.to_string(), data };
        let json = serde_json::to_string(&env).unwrap_or_else(|_| "{}".to_string());
        EventFrame { run: run.to_string(), seq, event: event.to_string(), json: json.into() }
    }

    /// Events that end a run: after one of these a run publishes nothing more.
    pub fn is_terminal(&self) -> bool {
        is_terminal(&self.event)
    }
}

pub fn is_terminal(event: &str) -> bool {
    matches!(event, "complete" | "error" | "cancelled")
}

/// Events that are not persisted: streamed token deltas (their text arrives whole in the
/// stage events, so a replay from the database loses nothing but the typing effect).
pub fn is_transient(event: &str) -> bool {
    event == "token"
}

/// What a watcher's channel carries.
#[derive(Debug, Clone)]
pub enum Frame {
    Event(Arc<EventFrame>),
    /// A dashboard update: `{type: "dashboard", runs: [...]}` or `{type: "dashboard_update", run}`.
    Dashboard(Arc<str>),
    /// The watcher fell too far behind and was unsubscribed from `run`; it has now read
    /// everything sent before this marker and should watch again from `since`.
    Lagged {
        run: String,
        since: i64,
    },
    /// Likewise for the dashboard feed: subscribe again for a fresh snapshot.
    DashboardLagged,
    /// A marker a watcher puts in its own channel when it watches `run` again after an
    /// unwatch: frames of `run` ahead of it belong to the dropped subscription. `epoch` tells
    /// which unwatch it answers, should the client unwatch again before it is read.
    Rewatch {
        run: String,
        epoch: u64,
    },
}

pub type FrameSender = tokio::sync::mpsc::Sender<Frame>;
pub type FrameReceiver = tokio::sync::mpsc::Receiver<Frame>;

/// How many frames may wait for one watcher. A watcher that lets more pile up is slow: its
/// token frames are dropped, and at the next durable event it is unsubscribed and told to
/// resume, so it never slows the run or the other watchers and its memory stays bounded.
pub const WATCHER_BUFFER: usize = 1024;

pub fn watcher_channel() -> (FrameSender, FrameReceiver) {
    tokio::sync::mpsc::channel(WATCHER_BUFFER)
}
