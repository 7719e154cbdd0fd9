//! The runs this instance executes: each one's summary, event log and watchers, and how long
//! an ended run stays held for late watchers (a retention period and a byte budget, the runs
//! that ended first going first). Plain data: the Hub actor owns one and hands it messages.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fanout::{fan_out, replay_and_subscribe, WatcherId, Watchers};
use crate::engine::events::{is_transient, EventBatch, EventFrame, FrameSender};
use crate::engine::summary::RunSummary;
use crate::store::RunStatus;

/// What a frame kept in a log costs besides its JSON (the frame, its names, the pointer).
const FRAME_OVERHEAD: usize = 160;

/// Asks a run's actor to stop: `(reason, shutdown)` (a shutdown ends it `interrupted`).
pub type Canceller = Box<dyn Fn(String, bool)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchOutcome {
    /// Replayed from memory and subscribed; `ended` when the run is already over.
    Live { ended: bool },
    /// The Hub does not hold this run: replay it from the store.
    NotLive,
}

/// What [`LiveRuns::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// The run's actor was asked to stop.
    Asked,
    /// The run is held here but already over.
    Over,
    /// No run of that id is held here.
    Unknown,
}

struct LiveRun {
    summary: RunSummary,
    log: Vec<Arc<EventFrame>>,
    watchers: Watchers,
    cancel: Canceller,
    ended_at: Option<Instant>,
}

pub struct LiveRuns {
    runs: HashMap<String, LiveRun>,
    /// Ended runs still held, in the order they ended, with the bytes each log holds.
    ended: VecDeque<(String, usize)>,
    /// The bytes of the logs in `ended`.
    ended_bytes: usize,
    /// The most `ended_bytes` may reach.
    retained_bytes: usize,
    /// How long an ended run's events stay in memory for late watchers.
    retention: Duration,
}

impl LiveRuns {
    pub fn new(retention: Duration, retained_bytes: usize) -> Self {
        LiveRuns {
            runs: HashMap::new(),
            ended: VecDeque::new(),
            ended_bytes: 0,
            retained_bytes,
            retention,
        }
    }

    pub fn set_retained_bytes(&mut self, bytes: usize) {
        self.retained_bytes = bytes;
    }

    pub fn contains(&self, run_id: &str) -> bool {
        self.runs.contains_key(run_id)
    }

    /// Holds a run from before its first event (a run resumed after a crash brings the events
    /// it already stored, folded into its summary); replaces what an earlier attempt left.
    /// Answers the summary as it now stands.
    pub fn register(
        &mut self,
        mut summary: RunSummary,
        log: Vec<Arc<EventFrame>>,
        cancel: Canceller,
    ) -> RunSummary {
        for frame in &log {
            note(&mut summary, frame);
        }
        let run = LiveRun {
            summary: summary.clone(),
            log,
            watchers: Watchers::new(),
            cancel,
            ended_at: None,
        };
        self.runs.insert(summary.id.clone(), run);
        summary
    }

    /// Sends a step's events to the run's watchers and keeps them in its log. Answers None for
    /// a run not held here, else whether its summary changed (a durable event came).
    pub fn publish(&mut self, run_id: &str, batch: &EventBatch) -> Option<bool> {
        let run = self.runs.get_mut(run_id)?;
        let mut changed = false;
        for frame in batch.iter() {
            changed |= note(&mut run.summary, frame);
        }
        fan_out(&mut run.watchers, run_id, batch);
        run.log.extend(batch.iter().cloned());
        Some(changed)
    }

    pub fn summary(&self, run_id: &str) -> Option<&RunSummary> {
        self.runs.get(run_id).map(|r| &r.summary)
    }

    /// The run's terminal event was published: its watchers are let go (closing their channels
    /// tells stream-based watchers the run is over) and it is held for the retention period.
    /// Answers its final summary.
    pub fn end(
        &mut self,
        run_id: &str,
        status: RunStatus,
        finished_at: i64,
        outcome: Option<String>,
    ) -> Option<RunSummary> {
        let run = self.runs.get_mut(run_id)?;
        if run.ended_at.is_none() {
            let bytes = run.log.iter().map(|f| f.json.len() + FRAME_OVERHEAD).sum();
            self.ended.push_back((run_id.to_string(), bytes));
            self.ended_bytes += bytes;
        }
        run.ended_at = Some(Instant::now());
        run.summary.end(status, finished_at, outcome);
        run.watchers.clear();
        let summary = run.summary.clone();
        if self.ended_bytes > self.retained_bytes {
            self.evict_expired();
        }
        Some(summary)
    }

    /// Replays a held run's log after `since` to a watcher and subscribes it (see
    /// [`replay_and_subscribe`]).
    pub fn attach(
        &mut self,
        run_id: &str,
        since: i64,
        watcher: WatcherId,
        sink: FrameSender,
    ) -> WatchOutcome {
        let Some(run) = self.runs.get_mut(run_id) else {
            return WatchOutcome::NotLive;
        };
        let ended = run.ended_at.is_some();
        let lagged =
            replay_and_subscribe(&run.log, ended, &mut run.watchers, run_id, since, watcher, sink);
        WatchOutcome::Live { ended: ended && !lagged }
    }

    /// Drops ended runs whose retention is over, and the earliest ended while the ended runs'
    /// logs hold more than their byte budget.
    pub fn evict_expired(&mut self) {
        while let Some((run_id, bytes)) = self.ended.front() {
            let over = self.ended_bytes > self.retained_bytes;
            match self.runs.get(run_id).and_then(|r| r.ended_at) {
                // Resumed here since (the entry is stale) or already gone.
                None => {}
                Some(t) if over || t.elapsed() >= self.retention => {
                    self.runs.remove(run_id);
                }
                Some(_) => break,
            }
            self.ended_bytes -= bytes;
            self.ended.pop_front();
        }
    }

    /// Every held run's summary, running or ended.
    pub fn summaries(&self) -> impl Iterator<Item = &RunSummary> {
        self.runs.values().map(|r| &r.summary)
    }

    /// The summaries of the runs still executing here.
    pub fn running(&self) -> impl Iterator<Item = &RunSummary> {
        self.runs.values().filter(|r| r.ended_at.is_none()).map(|r| &r.summary)
    }

    pub fn running_ids(&self) -> HashSet<String> {
        self.running().map(|s| s.id.clone()).collect()
    }

    /// Asks a run executed here to stop.
    pub fn cancel(&self, run_id: &str, reason: String) -> Cancelled {
        match self.runs.get(run_id) {
            Some(run) if run.ended_at.is_none() => {
                (run.cancel)(reason, false);
                Cancelled::Asked
            }
            Some(_) => Cancelled::Over,
            None => Cancelled::Unknown,
        }
    }

    /// Shutdown: asks every run still going to end `interrupted`; answers how many were.
    pub fn interrupt_all(&self) -> usize {
        let mut n = 0;
        for run in self.runs.values().filter(|r| r.ended_at.is_none()) {
            (run.cancel)("server shutdown".into(), true);
            n += 1;
        }
        n
    }

    pub fn unwatch(&mut self, run_id: &str, watcher: WatcherId) {
        if let Some(run) = self.runs.get_mut(run_id) {
            run.watchers.remove(&watcher);
        }
    }

    pub fn disconnect(&mut self, watcher: WatcherId) {
        for run in self.runs.values_mut() {
            run.watchers.remove(&watcher);
        }
    }
}

/// Folds one published event into a summary; answers whether it was durable (the summary's
/// last event changed).
fn note(summary: &mut RunSummary, frame: &EventFrame) -> bool {
    let durable = !is_transient(&frame.event);
    if durable {
        summary.last_event = Some(frame.event.clone());
    }
    if let Some(mark) = &frame.mark {
        summary.apply(mark);
    }
    summary.last_seq = frame.seq;
    durable
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::events::Frame;
    use std::cell::RefCell;
    use std::rc::Rc;
    use tokio::sync::mpsc;

    fn frame(run: &str, seq: i64, event: &str) -> Arc<EventFrame> {
        Arc::new(EventFrame::new(run, seq, event, serde_json::json!({ "t": "x".repeat(500) })))
    }

    /// No actor anywhere: a run is registered, watched, published to, cancelled and ended,
    /// and ended runs are held within the byte budget, oldest first.
    #[test]
    fn runs_are_watched_cancelled_and_held_within_a_byte_budget_without_an_actor() {
        let asked = Rc::new(RefCell::new(Vec::new()));
        let mut live = LiveRuns::new(Duration::from_secs(600), 2_500);
        for id in ["a", "b"] {
            let asked = asked.clone();
            let cancel: Canceller =
                Box::new(move |reason, shutdown| asked.borrow_mut().push((reason, shutdown)));
            let s =
                live.register(RunSummary::sample(id), vec![frame(id, 1, "stage1_start")], cancel);
            assert_eq!((s.last_seq, s.last_event.as_deref()), (1, Some("stage1_start")));
        }
        let (tx, mut rx) = mpsc::channel(16);
        assert_eq!(live.attach("a", 0, 7, tx), WatchOutcome::Live { ended: false });
        let Ok(Frame::Events(replayed)) = rx.try_recv() else { panic!("the replay") };
        assert_eq!(replayed.iter().map(|f| f.seq).collect::<Vec<_>>(), [1]);
        let batch: EventBatch = vec![frame("a", 2, "token"), frame("a", 3, "call_start")].into();
        assert_eq!(live.publish("a", &batch), Some(true), "a durable event changes the summary");
        assert_eq!(live.publish("nobody", &batch), None);
        let Ok(Frame::Events(sent)) = rx.try_recv() else { panic!("the step") };
        assert_eq!(sent.len(), 2, "one message per step");
        assert_eq!(live.cancel("a", "user".into()), Cancelled::Asked);
        assert_eq!(live.cancel("zz", "user".into()), Cancelled::Unknown);
        assert_eq!(live.running_ids().len(), 2);
        let ended = live.end("a", RunStatus::Cancelled, 42, None).unwrap();
        assert_eq!((ended.status, ended.finished_at), (RunStatus::Cancelled, Some(42)));
        assert!(rx.try_recv().is_err() && rx.is_closed(), "its watchers were let go");
        assert_eq!(live.cancel("a", "user".into()), Cancelled::Over);
        assert_eq!(live.interrupt_all(), 1, "only b still runs");
        assert_eq!(*asked.borrow(), [("user".into(), false), ("server shutdown".into(), true)]);
        // a holds three frames of about 700 bytes each: within the budget until b ends too.
        assert!(live.contains("a"));
        live.end("b", RunStatus::Completed, 43, Some("B won".into()));
        let b = live.summary("b").unwrap();
        assert_eq!(b.outcome.as_deref(), Some("B won"), "the dashboard lists its outcome");
        assert!(!live.contains("a") && live.contains("b"), "the run that ended first went");
    }
}
