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
use tokio::sync::mpsc::error::TrySendError;

use super::events::{is_transient, EventFrame, Frame, FrameSender};

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
    /// The server is shutting down: the run ends `interrupted`, not `cancelled`.
    pub shutdown: bool,
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
    pub sink: FrameSender,
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
    pub sink: FrameSender,
}

#[derive(Message)]
#[rtype(result = "Vec<RunSummary>")]
pub struct ListLive {}

/// Shutdown: end every run still going as `interrupted`; answers how many were.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct InterruptAll {}

/// A subscribed watcher and the last sequence number it was sent.
struct Watching {
    sink: FrameSender,
    last_seq: i64,
}

struct LiveRun {
    summary: RunSummary,
    log: Vec<Arc<EventFrame>>,
    watchers: HashMap<WatcherId, Watching>,
    cancel: Recipient<CancelRun>,
    ended_at: Option<Instant>,
}

pub struct Hub {
    runs: HashMap<String, LiveRun>,
    dashboards: HashMap<WatcherId, FrameSender>,
    retention: Duration,
}

/// Tells a slow watcher to resume, once it has read what it already has (the send waits for
/// room, off the Hub's mailbox).
fn send_lagged(sink: FrameSender, frame: Frame) {
    actix::spawn(async move {
        let _ = sink.send(frame).await;
    });
}

/// What offering a frame to a watcher did.
enum Offer {
    Sent,
    /// The buffer is full and the frame was a token: dropped for this watcher only.
    Dropped,
    /// The buffer is full on a durable event: the watcher must resume later.
    Lagged,
    Closed,
}

fn offer(sink: &FrameSender, frame: &Arc<EventFrame>) -> Offer {
    match sink.try_send(Frame::Event(frame.clone())) {
        Ok(()) => Offer::Sent,
        Err(TrySendError::Full(_)) if is_transient(&frame.event) => Offer::Dropped,
        Err(TrySendError::Full(_)) => Offer::Lagged,
        Err(TrySendError::Closed(_)) => Offer::Closed,
    }
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
        self.dashboards.retain(|_, sink| match sink.try_send(frame.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                send_lagged(sink.clone(), Frame::DashboardLagged);
                false
            }
            Err(TrySendError::Closed(_)) => false,
        });
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
            if !is_transient(&frame.event) {
                run.summary.last_event = Some(frame.event.clone());
                changed = true;
            }
            run.summary.last_seq = frame.seq;
            let run_id = &msg.run_id;
            run.watchers.retain(|_, w| match offer(&w.sink, &frame) {
                Offer::Sent => {
                    w.last_seq = frame.seq;
                    true
                }
                Offer::Dropped => true,
                Offer::Lagged => {
                    send_lagged(
                        w.sink.clone(),
                        Frame::Lagged { run: run_id.clone(), since: w.last_seq },
                    );
                    false
                }
                Offer::Closed => false,
            });
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
        // handler so no event can fall between the two. A replay larger than the watcher's
        // buffer goes out in pieces: the watcher is told to resume where this one stopped.
        let ended = run.ended_at.is_some();
        let start = run.log.partition_point(|f| f.seq <= msg.since);
        let mut last_seq = msg.since;
        for frame in &run.log[start..] {
            match msg.sink.try_send(Frame::Event(frame.clone())) {
                Ok(()) => last_seq = frame.seq,
                Err(TrySendError::Full(_)) => {
                    send_lagged(
                        msg.sink,
                        Frame::Lagged { run: msg.run_id.clone(), since: last_seq },
                    );
                    return MessageResult(WatchOutcome::Live { ended: false });
                }
                Err(TrySendError::Closed(_)) => return MessageResult(WatchOutcome::Live { ended }),
            }
        }
        if !ended {
            run.watchers.insert(msg.watcher, Watching { sink: msg.sink, last_seq });
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
                run.cancel.do_send(CancelRun { reason: msg.reason, shutdown: false });
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
        match msg.sink.try_send(Frame::Dashboard(text.into())) {
            Ok(()) => {
                self.dashboards.insert(msg.watcher, msg.sink);
            }
            Err(TrySendError::Full(_)) => send_lagged(msg.sink, Frame::DashboardLagged),
            Err(TrySendError::Closed(_)) => {}
        }
    }
}

impl Handler<InterruptAll> for Hub {
    type Result = usize;
    fn handle(&mut self, _: InterruptAll, _: &mut Context<Self>) -> usize {
        let mut n = 0;
        for run in self.runs.values().filter(|r| r.ended_at.is_none()) {
            run.cancel.do_send(CancelRun { reason: "server shutdown".into(), shutdown: true });
            n += 1;
        }
        n
    }
}

impl Handler<ListLive> for Hub {
    type Result = MessageResult<ListLive>;
    fn handle(&mut self, _: ListLive, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.live_summaries())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    struct Nobody;
    impl Actor for Nobody {
        type Context = Context<Self>;
    }
    impl Handler<CancelRun> for Nobody {
        type Result = ();
        fn handle(&mut self, _: CancelRun, _: &mut Context<Self>) {}
    }

    fn frame(seq: i64, event: &str) -> Arc<EventFrame> {
        Arc::new(EventFrame::new("r", seq, event, serde_json::json!({})))
    }

    fn summary() -> RunSummary {
        RunSummary {
            id: "r".into(),
            mode: "council".into(),
            conversation_id: "c".into(),
            message_id: "m".into(),
            question: "q".into(),
            status: "running".into(),
            created_at: 0,
            last_event: None,
            last_seq: 0,
        }
    }

    /// Reads what is waiting: event seqs, then the lag marker if there is one.
    async fn drain(rx: &mut mpsc::Receiver<Frame>) -> (Vec<i64>, Option<i64>) {
        let mut seqs = Vec::new();
        while let Ok(Some(f)) = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {
            match f {
                Frame::Event(e) => seqs.push(e.seq),
                Frame::Lagged { since, .. } => return (seqs, Some(since)),
                _ => {}
            }
        }
        (seqs, None)
    }

    #[actix_web::test]
    async fn a_slow_watcher_never_holds_up_the_others_and_resumes_without_a_gap() {
        let hub = Hub::new(Duration::from_secs(60)).start();
        let cancel = Nobody.start().recipient();
        hub.send(RegisterRun { summary: summary(), cancel }).await.unwrap();
        let (fast_tx, mut fast_rx) = mpsc::channel(100);
        let (slow_tx, mut slow_rx) = mpsc::channel(4);
        for (w, sink) in [(1, fast_tx), (2, slow_tx.clone())] {
            hub.send(Watch { run_id: "r".into(), since: 0, watcher: w, sink }).await.unwrap();
        }
        let mut frames = vec![frame(1, "stage1_start")];
        frames.extend((2..=8).map(|s| frame(s, "token")));
        frames.extend([frame(9, "stage1_complete"), frame(10, "stage2_start")]);
        hub.send(Publish { run_id: "r".into(), frames }).await.unwrap();

        let (fast, lag) = drain(&mut fast_rx).await;
        assert_eq!(
            (fast, lag),
            ((1..=10).collect::<Vec<_>>(), None),
            "the fast watcher gets everything"
        );
        // The slow one got its buffer's worth, then (token frames dropped meanwhile) the
        // durable event at seq 9 unsubscribed it with a marker to resume from 4.
        let (slow, lag) = drain(&mut slow_rx).await;
        assert_eq!((slow, lag), (vec![1, 2, 3, 4], Some(4)));
        // Resuming replays from the log in buffer-sized pieces until it is live again.
        let mut seen = Vec::new();
        let mut since = 4;
        loop {
            hub.send(Watch { run_id: "r".into(), since, watcher: 2, sink: slow_tx.clone() })
                .await
                .unwrap();
            let (got, lag) = drain(&mut slow_rx).await;
            seen.extend(got);
            match lag {
                Some(s) => since = s,
                None => break,
            }
        }
        assert_eq!(seen, (5..=10).collect::<Vec<_>>(), "no gap, no repeat");
        hub.send(Publish { run_id: "r".into(), frames: vec![frame(11, "stage2_complete")] })
            .await
            .unwrap();
        assert_eq!(drain(&mut slow_rx).await, (vec![11], None), "subscribed again");
    }
}
