//! The Hub: registry of live runs, their event logs and watchers, fan-out, cancel routing and
//! the dashboard feed.
//!
//! A run's events are kept in memory while it runs and for a while after it ends, so a watcher
//! that joins late or reconnects gets every event after its `since` and then the live ones:
//! replay and subscription happen in one message handler, so nothing can slip between them.
//! The Hub does no I/O; runs it no longer holds are replayed from the store by the caller.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;

use super::events::{EventFrame, Frame};

/// Identifies a watcher's channel (a WebSocket session, an SSE stream, the CLI).
pub type WatcherId = u64;

/// A run as the dashboard lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub id: String,
    pub mode: String,
    pub conversation_id: String,
    pub message_id: String,
    pub question: String,
    pub status: String,
    pub created_at: i64,
    /// The last durable event published (`stage2_start`...).
    pub last_event: Option<String>,
    pub last_seq: i64,
}

/// Ask a running deliberation to stop.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct CancelRun {
    /// Who asked, for the log.
    pub reason: String,
}

/// Register a run before its first event (so an early `watch` finds it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct RegisterRun {
    pub summary: RunSummary,
    pub cancel: Recipient<CancelRun>,
}

/// Publish a run's events, in sequence order.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Publish {
    pub run_id: String,
    pub frames: Vec<Arc<EventFrame>>,
}

/// A run ended (its terminal event was published): drop it after the retention period.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RunEnded {
    pub run_id: String,
    pub status: String,
}

/// Subscribe to a run's events after `since`.
#[derive(Message)]
#[rtype(result = "WatchOutcome")]
pub struct Watch {
    pub run_id: String,
    pub since: i64,
    pub watcher: WatcherId,
    pub sink: UnboundedSender<Frame>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchOutcome {
    /// Replayed from memory and subscribed; `ended` when the run is already over.
    Live { ended: bool },
    /// The Hub does not hold this run: replay it from the store.
    NotLive,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Unwatch {
    pub run_id: String,
    pub watcher: WatcherId,
}

/// Forget every subscription of a watcher (its socket closed).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Disconnect {
    pub watcher: WatcherId,
}

/// Route a cancel request; answers whether the run was live here.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct Cancel {
    pub run_id: String,
    pub reason: String,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct SubscribeDashboard {
    pub watcher: WatcherId,
    pub sink: UnboundedSender<Frame>,
}

#[derive(Message)]
#[rtype(result = "Vec<RunSummary>")]
pub struct ListLive {}

struct LiveRun {
    summary: RunSummary,
    log: Vec<Arc<EventFrame>>,
    watchers: HashMap<WatcherId, UnboundedSender<Frame>>,
    cancel: Recipient<CancelRun>,
    ended_at: Option<Instant>,
}

pub struct Hub {
    runs: HashMap<String, LiveRun>,
    dashboards: HashMap<WatcherId, UnboundedSender<Frame>>,
    retention: Duration,
}

impl Hub {
    /// `retention`: how long an ended run's events stay in memory for late watchers.
    pub fn new(retention: Duration) -> Self {
        Hub { runs: HashMap::new(), dashboards: HashMap::new(), retention }
    }

    fn dashboard_update(&mut self, summary: &RunSummary) {
        if self.dashboards.is_empty() {
            return;
        }
        let text = serde_json::json!({ "type": "dashboard_update", "run": summary }).to_string();
        let frame = Frame::Dashboard(text.into());
        self.dashboards.retain(|_, sink| sink.send(frame.clone()).is_ok());
    }

    fn evict_expired(&mut self) {
        let retention = self.retention;
        self.runs.retain(|_, run| run.ended_at.is_none_or(|t| t.elapsed() < retention));
    }

    fn live_summaries(&self) -> Vec<RunSummary> {
        let mut list: Vec<RunSummary> = self.runs.values().map(|r| r.summary.clone()).collect();
        list.sort_by_key(|r| std::cmp::Reverse(r.created_at));
        list
    }
}

impl Actor for Hub {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let period = (self.retention / 4).max(Duration::from_millis(50));
        ctx.run_interval(period, |hub, _| hub.evict_expired());
    }
}

impl Handler<RegisterRun> for Hub {
    type Result = ();
    fn handle(&mut self, msg: RegisterRun, _: &mut Context<Self>) {
        let summary = msg.summary.clone();
        self.runs.insert(
            msg.summary.id.clone(),
            LiveRun {
                summary: msg.summary,
                log: Vec::new(),
                watchers: HashMap::new(),
                cancel: msg.cancel,
                ended_at: None,
            },
        );
        self.dashboard_update(&summary);
    }
}

impl Handler<Publish> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Publish, _: &mut Context<Self>) {
        let Some(run) = self.runs.get_mut(&msg.run_id) else {
            log::warn!("events for unknown run {}", msg.run_id);
            return;
        };
        let mut changed = false;
        for frame in msg.frames {
            if !super::events::is_transient(&frame.event) {
                run.summary.last_event = Some(frame.event.clone());
                changed = true;
            }
            run.summary.last_seq = frame.seq;
            let out = Frame::Event(frame.clone());
            run.watchers.retain(|_, sink| sink.send(out.clone()).is_ok());
            run.log.push(frame);
        }
        if changed {
            let summary = run.summary.clone();
            self.dashboard_update(&summary);
        }
    }
}

impl Handler<RunEnded> for Hub {
    type Result = ();
    fn handle(&mut self, msg: RunEnded, _: &mut Context<Self>) {
        if let Some(run) = self.runs.get_mut(&msg.run_id) {
            run.ended_at = Some(Instant::now());
            run.summary.status = msg.status;
            // The terminal event went out before this message (same sender, same order):
            // closing the channels tells stream-based watchers (SSE, CLI) the run is over.
            run.watchers.clear();
            let summary = run.summary.clone();
            self.dashboard_update(&summary);
        }
    }
}

impl Handler<Watch> for Hub {
    type Result = MessageResult<Watch>;
    fn handle(&mut self, msg: Watch, _: &mut Context<Self>) -> Self::Result {
        let Some(run) = self.runs.get_mut(&msg.run_id) else {
            return MessageResult(WatchOutcome::NotLive);
        };
        // The log is in seq order: replay the tail after `since`, then subscribe, in one
        // handler so no event can fall between the two.
        let start = run.log.partition_point(|f| f.seq <= msg.since);
        for frame in &run.log[start..] {
            if msg.sink.send(Frame::Event(frame.clone())).is_err() {
                return MessageResult(WatchOutcome::Live { ended: run.ended_at.is_some() });
            }
        }
        let ended = run.ended_at.is_some();
        if !ended {
            run.watchers.insert(msg.watcher, msg.sink);
        }
        MessageResult(WatchOutcome::Live { ended })
    }
}

impl Handler<Unwatch> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Unwatch, _: &mut Context<Self>) {
        if let Some(run) = self.runs.get_mut(&msg.run_id) {
            run.watchers.remove(&msg.watcher);
        }
    }
}

impl Handler<Disconnect> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Disconnect, _: &mut Context<Self>) {
        for run in self.runs.values_mut() {
            run.watchers.remove(&msg.watcher);
        }
        self.dashboards.remove(&msg.watcher);
    }
}

impl Handler<Cancel> for Hub {
    type Result = bool;
    fn handle(&mut self, msg: Cancel, _: &mut Context<Self>) -> bool {
        match self.runs.get(&msg.run_id) {
            Some(run) if run.ended_at.is_none() => {
                run.cancel.do_send(CancelRun { reason: msg.reason });
                true
            }
            _ => false,
        }
    }
}

impl Handler<SubscribeDashboard> for Hub {
    type Result = ();
    fn handle(&mut self, msg: SubscribeDashboard, _: &mut Context<Self>) {
        let text =
            serde_json::json!({ "type": "dashboard", "runs": self.live_summaries() }).to_string();
        if msg.sink.send(Frame::Dashboard(text.into())).is_ok() {
            self.dashboards.insert(msg.watcher, msg.sink);
        }
    }
}

impl Handler<ListLive> for Hub {
    type Result = MessageResult<ListLive>;
    fn handle(&mut self, _: ListLive, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.live_summaries())
    }
}
