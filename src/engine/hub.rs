//! The Hub: registry of live runs, their event logs and watchers, fan-out, cancel routing and
//! the dashboard feed.
//!
//! A run's events are kept in memory while it runs and for a while after it ends, so a watcher
//! that joins late or reconnects gets every event after its `since` and then the live ones:
//! replay and subscription happen in one message handler, so nothing can slip between them.
//! The Hub does no I/O; runs it no longer holds are replayed from the store by the caller.
//! Token events dropped and watchers told to resume are counted in [`crate::metrics`].
//!
//! With a [`Bus`] (several instances), it also publishes what its own runs do, follows runs
//! other instances execute for the watchers here ([`Follow`], [`RemoteFrames`]), lists other
//! instances' runs on the dashboard ([`RemoteControl`]) and delivers their cancel requests.
//! Without one it behaves as a single instance: a watcher of a run executed nowhere here waits
//! for it to be resumed here.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::error::TrySendError;

use super::access::Viewer;
use super::bus::{Bus, Control};
use super::events::{
    after, is_transient, CallRef, EventBatch, EventFrame, Frame, FrameSender, ProgressMark,
};
use crate::metrics::{self, Feed};
use crate::store::{RunStatus, Visibility};

/// Identifies a watcher's channel (a WebSocket session, an SSE stream, the CLI).
pub type WatcherId = u64;

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
    Ok,
    Failed,
    /// The run ended while the call was still going.
    Stopped,
}

/// The stage of the title call, which runs beside the deliberation: not progress to show.
const TITLE_STAGE: &str = "title";

impl RunSummary {
    /// Applies what one event says about the run's progress.
    fn apply(&mut self, mark: &ProgressMark) {
        match mark {
            ProgressMark::Title(title) => self.title = Some(title.clone()),
            ProgressMark::CallStarted(call) => self.set_call(call, CallState::Running, None),
            ProgressMark::CallRetrying(call) => self.set_call(call, CallState::Retrying, None),
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
    fn end(&mut self, status: RunStatus, finished_at: i64) {
        self.status = status;
        self.finished_at = Some(finished_at);
        for c in &mut self.calls {
            if matches!(c.state, CallState::Running | CallState::Retrying) {
                c.state = CallState::Stopped;
            }
        }
    }
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

/// Register a run before its first event (so an early `watch` finds it). A run resumed after
/// a crash brings the events it already stored, so watchers replay them as if it never stopped.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RegisterRun {
    pub summary: RunSummary,
    pub log: Vec<Arc<EventFrame>>,
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
    pub status: RunStatus,
    /// When it ended (ms since the epoch), as stored.
    pub finished_at: i64,
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

/// Follow a run that is `running` in the store but executed by no actor here (another instance
/// executes it, or its process died and its lease has not run out): the watcher, already sent
/// the stored events up to `since`, gets the rest as they come over the bus, and from the run's
/// own actor if it is resumed here.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Park {
    pub run_id: String,
    pub since: i64,
    pub watcher: WatcherId,
    pub sink: FrameSender,
    /// What [`Follow`] answered before the store was read (None without a bus).
    pub epoch: Option<u64>,
}

/// With a bus: start receiving a run's frames before its stored events are read, so none can
/// fall between the two. Answers, once subscribed, the follow's epoch for its [`Park`] (or
/// [`Unfollow`] when the store says the run is over).
#[derive(Message)]
#[rtype(result = "u64")]
pub struct Follow {
    pub run_id: String,
}

/// A [`Follow`] that ends without a [`Park`] (the run was over, or the watch failed).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Unfollow {
    pub run_id: String,
}

/// A run with parked watchers will not be resumed (it was ended `interrupted`): send them its
/// terminal event and let them go.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Abandon {
    pub run_id: String,
    pub terminal: Arc<EventFrame>,
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
    /// Only the runs this viewer may see are listed and updated.
    pub viewer: Viewer,
}

#[derive(Message)]
#[rtype(result = "Vec<RunSummary>")]
pub struct ListLive {
    /// Only the runs this viewer may see, on every instance (others' known from the bus).
    pub viewer: Viewer,
}

/// How many runs are running: those of `owner` on every instance (known from the bus), or
/// with no owner given, every run this instance executes. Counted without copying summaries:
/// a start asks this, and the Hub holds every run of the retention period.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct CountRunning {
    pub owner: Option<String>,
}

/// The runs an actor of this instance is executing (not ended yet): its own runs are never
/// taken over as if their process had died, even when their lease ran out while the database
/// refused to renew it.
#[derive(Message)]
#[rtype(result = "std::collections::HashSet<String>")]
pub struct RunningHere {}

/// Shutdown: end every run still going as `interrupted`; answers how many were.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct InterruptAll {}

/// Frames another instance published for a run followed here.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RemoteFrames {
    pub run_id: String,
    pub frames: Vec<Arc<EventFrame>>,
}

/// A control message from another instance.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RemoteControl {
    pub from: String,
    pub msg: Control,
}

/// The bus (re)connected: frames may have been missed meanwhile.
#[derive(Message)]
#[rtype(result = "()")]
pub struct BusUp {}

/// The runs followed over the bus and the highest sequence number known of each (received,
/// or read from the store by a watcher).
#[derive(Message)]
#[rtype(result = "Vec<(String, i64)>")]
pub struct ListFollowed {}

/// What the store says of a followed run: if it stays ahead of what the bus brought for a
/// whole check period, frames were lost, and the run's watchers catch up from the store.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Verify {
    pub run_id: String,
    /// The run's last stored sequence number (its terminal event's if it is over).
    pub stored_seq: i64,
}

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

/// A run watched here that no actor here executes: its frames come over the bus (if any).
struct Followed {
    /// Frames received since this instance subscribed (or since the last gap): a watcher that
    /// read the store after the subscription finds here every event after what it read.
    log: Vec<Arc<EventFrame>>,
    watchers: HashMap<WatcherId, Watching>,
    /// Watches between their [`Follow`] and their [`Park`] or [`Unfollow`].
    pending: usize,
    /// The last frame received (frames come numbered in a row: see [`Followed::receive`]).
    last_seq: i64,
    /// The highest number known here: received, or read from the store by a watcher.
    known: i64,
    /// Changes when frames were lost: a watch that read the store before cannot trust `log`.
    epoch: u64,
    /// The store's last sequence number at the previous [`Verify`], when it was ahead.
    suspect: Option<i64>,
    ended: bool,
    /// Since when nobody watches or waits (the entry goes after [`FOLLOW_LINGER`]).
    idle_since: Option<Instant>,
}

impl Followed {
    fn new(epoch: u64) -> Self {
        Followed {
            log: Vec::new(),
            watchers: HashMap::new(),
            pending: 0,
            last_seq: 0,
            known: 0,
            epoch,
            suspect: None,
            ended: false,
            idle_since: None,
        }
    }

    fn touch(&mut self) {
        self.idle_since = if self.watchers.is_empty() && self.pending == 0 {
            Some(self.idle_since.unwrap_or_else(Instant::now))
        } else {
            None
        };
    }
}

/// How long a followed run nobody watches any more stays subscribed (a watcher that
/// reconnects at once finds it still there).
const FOLLOW_LINGER: Duration = Duration::from_secs(10);

/// Another instance's run, as its dashboard shows it.
struct RemoteRun {
    summary: RunSummary,
    instance: String,
    ended_at: Option<Instant>,
}

/// The Hub's side of the bus.
pub struct BusLink {
    pub bus: Bus,
    /// How often this instance tells the others which runs it executes (a third of a lease).
    pub beat: Duration,
    /// An instance silent this long (a lease) has its runs dropped from the live list; a
    /// cancel for a run executed nowhere is kept three times as long, for whoever takes the
    /// run over.
    pub silent_after: Duration,
}

/// How many bytes of ended runs' events the Hub keeps for late watchers, at most (their
/// rendered JSON); past it the runs that ended first go, before their retention is over. A
/// watcher of a run no longer held reads it from the store, as after the retention.
pub const RETAINED_BYTES: usize = 64 << 20;

/// What a frame kept in a log costs besides its JSON (the frame, its names, the pointer).
const FRAME_OVERHEAD: usize = 160;

pub struct Hub {
    runs: HashMap<String, LiveRun>,
    /// Ended runs still held, in the order they ended, with the bytes each log holds.
    ended: std::collections::VecDeque<(String, usize)>,
    /// The bytes of the logs in `ended`.
    ended_bytes: usize,
    /// The most `ended_bytes` may reach.
    retained_bytes: usize,
    /// Watched runs no actor here executes (see [`Park`]).
    followed: HashMap<String, Followed>,
    dashboards: HashMap<WatcherId, (FrameSender, Viewer)>,
    retention: Duration,
    bus: Option<BusLink>,
    /// Other instances' runs (from the bus).
    remote: HashMap<String, RemoteRun>,
    /// When each other instance was last heard from.
    heard: HashMap<String, Instant>,
    /// Cancel requests for runs not executed here, in case this instance takes one over.
    pending_cancels: HashMap<String, (String, Instant)>,
    /// Gaps seen so far (numbers [`Followed::epoch`]).
    gaps: u64,
}

/// Tells a slow watcher to resume, once it has read what it already has (the send waits for
/// room, off the Hub's mailbox).
fn send_lagged(sink: FrameSender, frame: Frame) {
    actix::spawn(async move {
        let _ = sink.send(frame).await;
    });
}

/// What offering a batch to a watcher did.
enum Offer {
    Sent,
    /// The buffer is full and the batch held only tokens: dropped for this watcher only.
    Dropped(usize),
    /// The buffer is full on a durable event: the watcher must resume later.
    Lagged,
    Closed,
}

fn offer(sink: &FrameSender, batch: EventBatch) -> Offer {
    match sink.try_send(Frame::Events(batch)) {
        Ok(()) => Offer::Sent,
        Err(TrySendError::Full(Frame::Events(b))) if b.iter().all(|f| is_transient(&f.event)) => {
            Offer::Dropped(b.len())
        }
        Err(TrySendError::Full(_)) => Offer::Lagged,
        Err(TrySendError::Closed(_)) => Offer::Closed,
    }
}

/// The events of `batch` after `last_seq`: the batch itself when the watcher has none of it
/// (the usual case: every watcher shares one allocation), else a copy of its tail.
fn unsent(batch: &EventBatch, last_seq: i64) -> Option<EventBatch> {
    let rest = after(batch, last_seq);
    if rest.is_empty() {
        None
    } else if rest.len() == batch.len() {
        Some(batch.clone())
    } else {
        Some(rest.into())
    }
}

/// Sends every watcher of a run, in one message, the events of `batch` it has not had,
/// dropping the watchers that are gone or too slow (told to resume).
fn fan_out(watchers: &mut HashMap<WatcherId, Watching>, run_id: &str, batch: &EventBatch) {
    let Some(last) = batch.last().map(|f| f.seq) else { return };
    watchers.retain(|_, w| {
        let Some(unsent) = unsent(batch, w.last_seq) else { return true };
        match offer(&w.sink, unsent) {
            Offer::Sent => {
                w.last_seq = last;
                true
            }
            Offer::Dropped(n) => {
                metrics::global().tokens_dropped(n);
                true
            }
            Offer::Lagged => {
                metrics::global().watcher_lagged(Feed::Run);
                send_lagged(
                    w.sink.clone(),
                    Frame::Lagged { run: run_id.to_string(), since: w.last_seq },
                );
                false
            }
            Offer::Closed => false,
        }
    });
}

/// How many events of a replay go in one message.
pub const REPLAY_BATCH: usize = 256;

/// Replays `log` after `since` to a watcher and subscribes it unless `ended` (see
/// [`Hub::attach`]); answers whether the replay overflowed the watcher's buffer (it was told
/// to resume).
fn replay_and_subscribe(
    log: &[Arc<EventFrame>],
    ended: bool,
    watchers: &mut HashMap<WatcherId, Watching>,
    run_id: &str,
    since: i64,
    watcher: WatcherId,
    sink: FrameSender,
) -> bool {
    let mut last_seq = since;
    for piece in after(log, since).chunks(REPLAY_BATCH) {
        match sink.try_send(Frame::Events(piece.into())) {
            Ok(()) => last_seq = piece.last().map_or(last_seq, |f| f.seq),
            Err(TrySendError::Full(_)) => {
                metrics::global().watcher_lagged(Feed::Run);
                send_lagged(sink, Frame::Lagged { run: run_id.to_string(), since: last_seq });
                return true;
            }
            Err(TrySendError::Closed(_)) => return false,
        }
    }
    if !ended {
        watchers.insert(watcher, Watching { sink, last_seq });
    }
    false
}

impl Followed {
    /// Frames were lost: every watcher catches up from the store (it is told to watch again
    /// from the last event it got) and what was received so far is no longer a whole log.
    fn resync(&mut self, run_id: &str, gaps: &mut u64) {
        for (_, w) in self.watchers.drain() {
            send_lagged(w.sink, Frame::Lagged { run: run_id.to_string(), since: w.last_seq });
        }
        *gaps += 1;
        self.epoch = *gaps;
        self.log.clear();
        self.last_seq = 0;
        self.known = 0;
        self.suspect = None;
        self.touch();
    }

    /// Takes one frame as the next of the run.
    fn receive(&mut self, run_id: &str, frame: Arc<EventFrame>, gaps: &mut u64) {
        if self.ended || frame.seq <= self.last_seq {
            return;
        }
        // One publisher numbers every frame of a run in a row, tokens included (a run taken
        // over continues after the highest number published): a jump means frames were lost.
        if self.last_seq > 0 && frame.seq > self.last_seq + 1 {
            log::warn!(
                "run {run_id}: events {} to {} never came over the bus; its watchers here catch \
                 up from the database",
                self.last_seq + 1,
                frame.seq - 1
            );
            self.resync(run_id, gaps);
        }
        self.last_seq = frame.seq;
        self.known = self.known.max(frame.seq);
        fan_out(&mut self.watchers, run_id, &Arc::from([frame.clone()]));
        let terminal = frame.is_terminal();
        self.log.push(frame);
        if terminal {
            self.ended = true;
            // Closing the channels tells stream-based watchers (SSE) the run is over.
            self.watchers.clear();
            self.touch();
        }
    }
}

impl Hub {
    /// `retention`: how long an ended run's events stay in memory for late watchers.
    pub fn new(retention: Duration) -> Self {
        Hub {
            runs: HashMap::new(),
            ended: std::collections::VecDeque::new(),
            ended_bytes: 0,
            retained_bytes: RETAINED_BYTES,
            followed: HashMap::new(),
            dashboards: HashMap::new(),
            retention,
            bus: None,
            remote: HashMap::new(),
            heard: HashMap::new(),
            pending_cancels: HashMap::new(),
            gaps: 0,
        }
    }

    /// Exchanges with other instances over `link`.
    pub fn with_bus(mut self, link: BusLink) -> Self {
        self.bus = Some(link);
        self
    }

    fn dashboard_update(&mut self, summary: &RunSummary) {
        if self.dashboards.is_empty() {
            return;
        }
        let text = serde_json::json!({ "type": "dashboard_update", "run": summary }).to_string();
        let frame = Frame::Dashboard(text.into());
        self.dashboards.retain(|_, (sink, viewer)| {
            if !viewer.can_see(summary.owner.as_deref(), summary.visibility) {
                return true;
            }
            match sink.try_send(frame.clone()) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    metrics::global().watcher_lagged(Feed::Dashboard);
                    send_lagged(sink.clone(), Frame::DashboardLagged);
                    false
                }
                Err(TrySendError::Closed(_)) => false,
            }
        });
    }

    /// A run executed here changed: update the dashboards here and elsewhere.
    fn local_update(&mut self, summary: &RunSummary) {
        if let Some(link) = &self.bus {
            link.bus.control(Control::Summary { run: Box::new(summary.clone()) });
        }
        self.dashboard_update(summary);
    }

    /// Keeps at most `bytes` of ended runs' events (see [`RETAINED_BYTES`]).
    pub fn retain_bytes(mut self, bytes: usize) -> Self {
        self.retained_bytes = bytes;
        self
    }

    /// Drops ended runs whose retention is over, and the earliest ended while the ended runs'
    /// logs hold more than their byte budget.
    fn evict_expired(&mut self) {
        let retention = self.retention;
        while let Some((run_id, bytes)) = self.ended.front() {
            let over = self.ended_bytes > self.retained_bytes;
            match self.runs.get(run_id).and_then(|r| r.ended_at) {
                // Resumed here since (the entry is stale) or already gone.
                None => {}
                Some(t) if over || t.elapsed() >= retention => {
                    self.runs.remove(run_id);
                }
                Some(_) => break,
            }
            self.ended_bytes -= bytes;
            self.ended.pop_front();
        }
    }

    /// Drops followed runs nobody watches, other instances' runs that ended a retention ago or
    /// whose instance fell silent, and cancels kept too long.
    fn tidy(&mut self) {
        let bus = self.bus.as_ref().map(|l| &l.bus);
        self.followed.retain(|run_id, f| {
            let keep = f.idle_since.is_none_or(|t| t.elapsed() < FOLLOW_LINGER);
            if !keep {
                if let Some(bus) = bus {
                    bus.unsubscribe(run_id);
                }
            }
            keep
        });
        let Some(link) = &self.bus else { return };
        let (retention, silent) = (self.retention, link.silent_after);
        let heard = &self.heard;
        self.remote.retain(|_, r| match r.ended_at {
            Some(t) => t.elapsed() < retention,
            None => heard.get(&r.instance).is_some_and(|t| t.elapsed() < silent),
        });
        self.heard.retain(|_, t| t.elapsed() < retention.max(silent));
        self.pending_cancels.retain(|_, (_, t)| t.elapsed() < silent * 3);
    }

    /// The runs `viewer` may see, this instance's and (from the bus) the others', newest first.
    fn live_summaries(&self, viewer: &Viewer) -> Vec<RunSummary> {
        let visible = |s: &RunSummary| viewer.can_see(s.owner.as_deref(), s.visibility);
        let mut list: Vec<RunSummary> =
            self.runs.values().map(|r| &r.summary).filter(|s| visible(s)).cloned().collect();
        list.extend(
            self.remote
                .values()
                .map(|r| &r.summary)
                .filter(|s| visible(s) && !self.runs.contains_key(&s.id))
                .cloned(),
        );
        list.sort_by_key(|r| std::cmp::Reverse(r.created_at));
        list
    }

    fn running_here(&self) -> Vec<RunSummary> {
        self.runs.values().filter(|r| r.ended_at.is_none()).map(|r| r.summary.clone()).collect()
    }

    /// Another instance's summary of a run it executes.
    fn remote_update(&mut self, from: &str, summary: RunSummary) {
        if self.runs.contains_key(&summary.id) {
            return;
        }
        let ended_at = summary.status.is_over().then(Instant::now);
        self.dashboard_update(&summary);
        let run = RemoteRun { summary, instance: from.to_string(), ended_at };
        self.remote.insert(run.summary.id.clone(), run);
    }

    /// `from` executes exactly `running` of the runs it had said it executes.
    fn remote_running(&mut self, from: &str, running: &[String]) {
        let running: HashSet<&str> = running.iter().map(String::as_str).collect();
        self.remote.retain(|id, r| {
            r.instance != from || r.ended_at.is_some() || running.contains(id.as_str())
        });
    }

    fn resync_followed(&mut self) {
        let gaps = &mut self.gaps;
        for (run_id, f) in &mut self.followed {
            if !f.ended {
                f.resync(run_id, gaps);
            }
        }
    }

    /// Delivers a cancel to a run executed here; otherwise (with a bus) keeps it for a while,
    /// in case this instance takes the run over before it was stopped.
    fn cancel(&mut self, run_id: &str, reason: String) -> bool {
        match self.runs.get(run_id) {
            Some(run) if run.ended_at.is_none() => {
                run.cancel.do_send(CancelRun { reason, shutdown: false });
                true
            }
            Some(_) => false,
            None => {
                if self.bus.is_some() {
                    self.pending_cancels.insert(run_id.to_string(), (reason, Instant::now()));
                }
                false
            }
        }
    }
}

impl Actor for Hub {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let period = (self.retention / 4).max(Duration::from_millis(50));
        ctx.run_interval(period, |hub, _| hub.evict_expired());
        ctx.run_interval(Duration::from_secs(1), |hub, _| hub.tidy());
        if let Some(link) = &self.bus {
            ctx.run_interval(link.beat, |hub, _| {
                if let Some(link) = &hub.bus {
                    let running = hub.running_here().into_iter().map(|s| s.id).collect();
                    link.bus.control(Control::Beat { running });
                }
            });
        }
    }
}

impl Handler<RegisterRun> for Hub {
    type Result = ();
    fn handle(&mut self, msg: RegisterRun, _: &mut Context<Self>) {
        let mut summary = msg.summary;
        for frame in &msg.log {
            if !is_transient(&frame.event) {
                summary.last_event = Some(frame.event.clone());
            }
            if let Some(mark) = &frame.mark {
                summary.apply(mark);
            }
            summary.last_seq = frame.seq;
        }
        if let Some((reason, _)) = self.pending_cancels.remove(&summary.id) {
            // Cancelled while no instance executed it: it stops as soon as it starts.
            msg.cancel.do_send(CancelRun { reason, shutdown: false });
        }
        let run = LiveRun {
            summary: summary.clone(),
            log: msg.log,
            watchers: HashMap::new(),
            cancel: msg.cancel,
            ended_at: None,
        };
        // A run resumed here replaces what an earlier attempt left (its watchers are gone).
        self.runs.insert(summary.id.clone(), run);
        self.remote.remove(&summary.id);
        // Watchers that followed it elsewhere now follow it here: its log holds every stored
        // event, and it numbers new ones after anything they were sent.
        if let Some(followed) = self.followed.remove(&summary.id) {
            for (watcher, w) in followed.watchers {
                self.attach(&summary.id, w.last_seq, watcher, w.sink);
            }
            if let Some(link) = &self.bus {
                link.bus.unsubscribe(&summary.id);
            }
        }
        self.local_update(&summary);
    }
}

impl Handler<Publish> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Publish, _: &mut Context<Self>) {
        let Some(run) = self.runs.get_mut(&msg.run_id) else {
            log::warn!("events for unknown run {}", msg.run_id);
            return;
        };
        let batch: EventBatch = msg.frames.into();
        if let Some(link) = &self.bus {
            link.bus.frames(&msg.run_id, batch.clone());
        }
        let mut changed = false;
        for frame in batch.iter() {
            if !is_transient(&frame.event) {
                run.summary.last_event = Some(frame.event.clone());
                changed = true;
            }
            if let Some(mark) = &frame.mark {
                run.summary.apply(mark);
            }
            run.summary.last_seq = frame.seq;
        }
        fan_out(&mut run.watchers, &msg.run_id, &batch);
        run.log.extend(batch.iter().cloned());
        // Nobody to tell (no dashboard here, no bus): no copy of the summary.
        if changed && (self.bus.is_some() || !self.dashboards.is_empty()) {
            let summary = run.summary.clone();
            self.local_update(&summary);
        }
    }
}

impl Handler<RunEnded> for Hub {
    type Result = ();
    fn handle(&mut self, msg: RunEnded, _: &mut Context<Self>) {
        if let Some(run) = self.runs.get_mut(&msg.run_id) {
            if run.ended_at.is_none() {
                let bytes = run.log.iter().map(|f| f.json.len() + FRAME_OVERHEAD).sum();
                self.ended.push_back((msg.run_id.clone(), bytes));
                self.ended_bytes += bytes;
            }
            run.ended_at = Some(Instant::now());
            run.summary.end(msg.status, msg.finished_at);
            // The terminal event went out before this message (same sender, same order):
            // closing the channels tells stream-based watchers (SSE, CLI) the run is over.
            run.watchers.clear();
            let summary = run.summary.clone();
            self.local_update(&summary);
            if self.ended_bytes > self.retained_bytes {
                self.evict_expired();
            }
        }
    }
}

impl Hub {
    /// Replays a live run's log after `since` to a watcher and subscribes it, in one step so
    /// no event can fall between the two. The replay goes out in pieces of [`REPLAY_BATCH`]
    /// events; one that finds the watcher's buffer full stops there, and the watcher is told
    /// to resume where it stopped.
    fn attach(
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
}

impl Handler<Watch> for Hub {
    type Result = MessageResult<Watch>;
    fn handle(&mut self, msg: Watch, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.attach(&msg.run_id, msg.since, msg.watcher, msg.sink))
    }
}

impl Handler<Follow> for Hub {
    type Result = ResponseFuture<u64>;
    fn handle(&mut self, msg: Follow, _: &mut Context<Self>) -> Self::Result {
        // Executed here (resumed since the caller looked): its [`Park`] attaches to it.
        if self.runs.contains_key(&msg.run_id) {
            return Box::pin(async { 0 });
        }
        let gaps = self.gaps;
        let entry = self.followed.entry(msg.run_id.clone()).or_insert_with(|| Followed::new(gaps));
        entry.pending += 1;
        entry.touch();
        let epoch = entry.epoch;
        let subscribed = self.bus.as_ref().map(|l| l.bus.subscribe(&msg.run_id));
        Box::pin(async move {
            if let Some(subscribed) = subscribed {
                subscribed.await;
            }
            epoch
        })
    }
}

impl Handler<Unfollow> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Unfollow, _: &mut Context<Self>) {
        if let Some(f) = self.followed.get_mut(&msg.run_id) {
            f.pending = f.pending.saturating_sub(1);
            f.touch();
        }
    }
}

impl Handler<Park> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Park, _: &mut Context<Self>) {
        // Resumed here since the caller looked: attach at once.
        if self.runs.contains_key(&msg.run_id) {
            if let (Some(f), Some(_)) = (self.followed.get_mut(&msg.run_id), msg.epoch) {
                f.pending = f.pending.saturating_sub(1);
                f.touch();
            }
            self.attach(&msg.run_id, msg.since, msg.watcher, msg.sink);
            return;
        }
        let gaps = self.gaps;
        let entry = self.followed.entry(msg.run_id.clone()).or_insert_with(|| Followed::new(gaps));
        if msg.epoch.is_some() {
            entry.pending = entry.pending.saturating_sub(1);
        }
        if msg.epoch.is_some_and(|e| e != entry.epoch) {
            // Frames were lost while this watcher read the store: read it again.
            send_lagged(msg.sink, Frame::Lagged { run: msg.run_id, since: msg.since });
        } else {
            entry.known = entry.known.max(msg.since);
            replay_and_subscribe(
                &entry.log,
                entry.ended,
                &mut entry.watchers,
                &msg.run_id,
                msg.since,
                msg.watcher,
                msg.sink,
            );
        }
        entry.touch();
    }
}

impl Handler<Abandon> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Abandon, _: &mut Context<Self>) {
        if let Some(link) = &self.bus {
            link.bus.frames(&msg.run_id, Arc::from([msg.terminal.clone()]));
        }
        let gaps = self.gaps;
        let entry = self.followed.entry(msg.run_id.clone()).or_insert_with(|| Followed::new(gaps));
        // Its last event before the terminal one was stored, not necessarily received: no gap.
        entry.last_seq = entry.last_seq.max(msg.terminal.seq - 1);
        entry.receive(&msg.run_id, msg.terminal, &mut self.gaps);
    }
}

impl Handler<RemoteFrames> for Hub {
    type Result = ();
    fn handle(&mut self, msg: RemoteFrames, _: &mut Context<Self>) {
        // A run executed here now: its own actor is the source.
        if self.runs.contains_key(&msg.run_id) {
            return;
        }
        let Some(entry) = self.followed.get_mut(&msg.run_id) else { return };
        for frame in msg.frames {
            entry.receive(&msg.run_id, frame, &mut self.gaps);
        }
    }
}

impl Handler<RemoteControl> for Hub {
    type Result = ();
    fn handle(&mut self, msg: RemoteControl, _: &mut Context<Self>) {
        let from = msg.from;
        self.heard.insert(from.clone(), Instant::now());
        match msg.msg {
            Control::Summary { run } => self.remote_update(&from, *run),
            Control::Beat { running } => self.remote_running(&from, &running),
            Control::Snapshot { runs } => {
                let ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
                self.remote_running(&from, &ids);
                for run in runs {
                    self.remote_update(&from, run);
                }
            }
            Control::Hello { resync } => {
                if let Some(link) = &self.bus {
                    link.bus.control(Control::Snapshot { runs: self.running_here() });
                }
                if resync {
                    log::warn!("instance {from} lost events it published; followers catch up");
                    self.resync_followed();
                }
            }
            Control::Cancel { run, reason } => {
                if self.cancel(&run, reason) {
                    log::info!("run {run} cancelled at the request of instance {from}");
                }
            }
        }
    }
}

impl Handler<BusUp> for Hub {
    type Result = ();
    fn handle(&mut self, _: BusUp, _: &mut Context<Self>) {
        // Whatever came while the bus was away is lost: followers catch up from the store.
        self.resync_followed();
        if let Some(link) = &self.bus {
            link.bus.control(Control::Snapshot { runs: self.running_here() });
        }
    }
}

impl Handler<ListFollowed> for Hub {
    type Result = MessageResult<ListFollowed>;
    fn handle(&mut self, _: ListFollowed, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.followed
                .iter()
                .filter(|(_, f)| !f.ended && (!f.watchers.is_empty() || f.pending > 0))
                .map(|(id, f)| (id.clone(), f.known))
                .collect(),
        )
    }
}

impl Handler<Verify> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Verify, _: &mut Context<Self>) {
        let Some(f) = self.followed.get_mut(&msg.run_id) else { return };
        if f.ended || msg.stored_seq <= f.known {
            f.suspect = None;
            return;
        }
        // The store is ahead: normal for a moment (events are published once stored), not
        // for a whole check period.
        match f.suspect {
            Some(earlier) if f.known < earlier => {
                log::warn!(
                    "run {}: the bus brought nothing after event {} though event {earlier} was \
                     stored a while ago; its watchers here catch up from the database",
                    msg.run_id,
                    f.known
                );
                f.resync(&msg.run_id, &mut self.gaps);
            }
            _ => f.suspect = Some(msg.stored_seq),
        }
    }
}

impl Handler<Unwatch> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Unwatch, _: &mut Context<Self>) {
        if let Some(run) = self.runs.get_mut(&msg.run_id) {
            run.watchers.remove(&msg.watcher);
        }
        if let Some(f) = self.followed.get_mut(&msg.run_id) {
            f.watchers.remove(&msg.watcher);
            f.touch();
        }
    }
}

impl Handler<Disconnect> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Disconnect, _: &mut Context<Self>) {
        for run in self.runs.values_mut() {
            run.watchers.remove(&msg.watcher);
        }
        for f in self.followed.values_mut() {
            if f.watchers.remove(&msg.watcher).is_some() {
                f.touch();
            }
        }
        self.dashboards.remove(&msg.watcher);
    }
}

impl Handler<Cancel> for Hub {
    type Result = bool;
    fn handle(&mut self, msg: Cancel, _: &mut Context<Self>) -> bool {
        self.cancel(&msg.run_id, msg.reason)
    }
}

impl Handler<SubscribeDashboard> for Hub {
    type Result = ();
    fn handle(&mut self, msg: SubscribeDashboard, _: &mut Context<Self>) {
        let runs = self.live_summaries(&msg.viewer);
        let text = serde_json::json!({ "type": "dashboard", "runs": runs }).to_string();
        match msg.sink.try_send(Frame::Dashboard(text.into())) {
            Ok(()) => {
                self.dashboards.insert(msg.watcher, (msg.sink, msg.viewer));
            }
            Err(TrySendError::Full(_)) => {
                metrics::global().watcher_lagged(Feed::Dashboard);
                send_lagged(msg.sink, Frame::DashboardLagged)
            }
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

impl Handler<CountRunning> for Hub {
    type Result = usize;
    fn handle(&mut self, msg: CountRunning, _: &mut Context<Self>) -> usize {
        let running = |s: &RunSummary| s.status == RunStatus::Running;
        match &msg.owner {
            None => self.runs.values().filter(|r| running(&r.summary)).count(),
            Some(owner) => {
                let mine = |s: &RunSummary| running(s) && s.owner.as_deref() == Some(owner);
                let local = self.runs.values().filter(|r| mine(&r.summary)).count();
                let remote = self
                    .remote
                    .values()
                    .filter(|r| mine(&r.summary) && !self.runs.contains_key(&r.summary.id))
                    .count();
                local + remote
            }
        }
    }
}

impl Handler<RunningHere> for Hub {
    type Result = MessageResult<RunningHere>;
    fn handle(&mut self, _: RunningHere, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.runs
                .iter()
                .filter(|(_, r)| r.ended_at.is_none())
                .map(|(id, _)| id.clone())
                .collect(),
        )
    }
}

impl Handler<ListLive> for Hub {
    type Result = MessageResult<ListLive>;
    fn handle(&mut self, msg: ListLive, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.live_summaries(&msg.viewer))
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
            status: RunStatus::Running,
            owner: None,
            visibility: Visibility::Team,
            created_at: 0,
            finished_at: None,
            title: None,
            last_event: None,
            last_seq: 0,
            calls: Vec::new(),
        }
    }

    /// The next frame the Hub has sent `rx`, or will send it from what it was told so far;
    /// None when there is none. Nothing waits for quiet: a round trip through the Hub's mailbox
    /// means it handled every earlier message (queueing their frames), and on the test's
    /// single-threaded System the lag markers those handlings spawned, and any that waited for
    /// the room just read, run before the Hub answers.
    async fn next_frame(hub: &Addr<Hub>, rx: &mut mpsc::Receiver<Frame>) -> Option<Frame> {
        if let Ok(f) = rx.try_recv() {
            return Some(f);
        }
        hub.send(CountRunning { owner: None }).await.unwrap();
        rx.try_recv().ok()
    }

    /// Reads what is waiting: event seqs, then the lag marker if there is one.
    async fn drain(hub: &Addr<Hub>, rx: &mut mpsc::Receiver<Frame>) -> (Vec<i64>, Option<i64>) {
        let mut seqs = Vec::new();
        while let Some(f) = next_frame(hub, rx).await {
            match f {
                Frame::Events(batch) => seqs.extend(batch.iter().map(|e| e.seq)),
                Frame::Lagged { since, .. } => return (seqs, Some(since)),
                _ => {}
            }
        }
        (seqs, None)
    }

    /// Ended runs' events are kept within their byte budget: past it the run that ended first
    /// is no longer held (its watchers read the store), the later ones are, and running runs
    /// always are, whatever their size.
    #[actix_web::test]
    async fn ended_runs_are_held_within_a_byte_budget_oldest_first() {
        let text = "x".repeat(1000);
        let big = |run: &str, seq| {
            Arc::new(EventFrame::new(run, seq, "stage1_complete", serde_json::json!({ "t": text })))
        };
        // Room for about two runs of three such events.
        let hub = Hub::new(Duration::from_secs(600)).retain_bytes(8_000).start();
        for id in ["a", "b", "c", "d"] {
            let cancel = Nobody.start().recipient();
            let summary = RunSummary { id: id.into(), ..summary() };
            hub.send(RegisterRun { summary, log: Vec::new(), cancel }).await.unwrap();
            let frames = (1..=3).map(|seq| big(id, seq)).collect();
            hub.send(Publish { run_id: id.into(), frames }).await.unwrap();
        }
        let held = |id: &'static str| {
            let hub = hub.clone();
            async move {
                let (sink, _rx) = mpsc::channel(16);
                let watch = Watch { run_id: id.into(), since: 0, watcher: 9, sink };
                matches!(hub.send(watch).await.unwrap(), WatchOutcome::Live { .. })
            }
        };
        for id in ["a", "b", "c"] {
            let end = RunEnded { run_id: id.into(), status: RunStatus::Completed, finished_at: 1 };
            hub.send(end).await.unwrap();
        }
        assert!(!held("a").await, "the first to end went when the third ended");
        assert!(held("b").await && held("c").await, "the two last ended are kept");
        assert!(held("d").await, "a running run is held whatever the budget");
    }

    /// The messages waiting in `rx`, each as the numbers of its events.
    async fn messages(hub: &Addr<Hub>, rx: &mut mpsc::Receiver<Frame>) -> Vec<Vec<i64>> {
        let mut got = Vec::new();
        while let Some(f) = next_frame(hub, rx).await {
            if let Frame::Events(batch) = f {
                got.push(batch.iter().map(|e| e.seq).collect());
            }
        }
        got
    }

    /// A step's events reach each watcher in one message (one wake-up and one write per
    /// socket); a watcher that already read some of them from the store gets only the rest.
    #[actix_web::test]
    async fn a_steps_events_reach_each_watcher_in_one_message_without_what_it_read() {
        let hub = Hub::new(Duration::from_secs(60)).start();
        let cancel = Nobody.start().recipient();
        let log = vec![frame(1, "stage1_start")];
        hub.send(RegisterRun { summary: summary(), log, cancel }).await.unwrap();
        let (a_tx, mut a_rx) = mpsc::channel(100);
        let (b_tx, mut b_rx) = mpsc::channel(100);
        hub.send(Watch { run_id: "r".into(), since: 0, watcher: 1, sink: a_tx }).await.unwrap();
        // Events are stored before they are published: B read 2 and 3 from the store before
        // the Hub had them.
        hub.send(Watch { run_id: "r".into(), since: 3, watcher: 2, sink: b_tx }).await.unwrap();
        let step = vec![frame(2, "call_complete"), frame(3, "stage1_complete"), frame(4, "token")];
        hub.send(Publish { run_id: "r".into(), frames: step }).await.unwrap();
        hub.send(Publish { run_id: "r".into(), frames: vec![frame(5, "stage2_start")] })
            .await
            .unwrap();
        assert_eq!(messages(&hub, &mut a_rx).await, vec![vec![1], vec![2, 3, 4], vec![5]]);
        assert_eq!(messages(&hub, &mut b_rx).await, vec![vec![4], vec![5]]);
    }

    /// A replay that overflows the watcher's buffer stops at a piece's end; the watcher is told
    /// to resume from there and, watching again each time, gets the whole log once, then what
    /// comes live.
    #[actix_web::test]
    async fn a_replay_larger_than_the_buffer_resumes_piece_by_piece_without_a_gap() {
        let hub = Hub::new(Duration::from_secs(60)).start();
        let cancel = Nobody.start().recipient();
        let n = 2 * REPLAY_BATCH as i64 + 1;
        let log = (1..=n).map(|s| frame(s, "call_complete")).collect();
        hub.send(RegisterRun { summary: summary(), log, cancel }).await.unwrap();
        let (tx, mut rx) = mpsc::channel(1);
        let (mut seen, mut lags, mut since) = (Vec::new(), Vec::new(), 0);
        loop {
            let watch = Watch { run_id: "r".into(), since, watcher: 1, sink: tx.clone() };
            hub.send(watch).await.unwrap();
            let (got, lag) = drain(&hub, &mut rx).await;
            seen.extend(got);
            match lag {
                Some(s) => {
                    lags.push(s);
                    since = s;
                }
                None => break,
            }
        }
        let batch = REPLAY_BATCH as i64;
        assert_eq!(lags, vec![batch, 2 * batch], "each overflow stops at a piece's end");
        hub.send(Publish { run_id: "r".into(), frames: vec![frame(n + 1, "stage1_complete")] })
            .await
            .unwrap();
        seen.extend(drain(&hub, &mut rx).await.0);
        assert_eq!(seen, (1..=n + 1).collect::<Vec<_>>(), "no gap, no repeat, then live");
    }

    #[actix_web::test]
    async fn a_slow_watcher_never_holds_up_the_others_and_resumes_without_a_gap() {
        let (dropped, lagged) =
            (metrics::global().events_dropped(), metrics::global().watchers_lagged(Feed::Run));
        let hub = Hub::new(Duration::from_secs(60)).start();
        let cancel = Nobody.start().recipient();
        hub.send(RegisterRun { summary: summary(), log: Vec::new(), cancel }).await.unwrap();
        let (fast_tx, mut fast_rx) = mpsc::channel(100);
        let (slow_tx, mut slow_rx) = mpsc::channel(4);
        for (w, sink) in [(1, fast_tx), (2, slow_tx.clone())] {
            hub.send(Watch { run_id: "r".into(), since: 0, watcher: w, sink }).await.unwrap();
        }
        // Each publish is one step's events, one message to each watcher: a start, seven
        // token flushes, then a stage's end with the next stage's start.
        let mut steps = vec![vec![frame(1, "stage1_start")]];
        steps.extend((2..=8).map(|s| vec![frame(s, "token")]));
        steps.push(vec![frame(9, "stage1_complete"), frame(10, "stage2_start")]);
        for frames in steps {
            hub.send(Publish { run_id: "r".into(), frames }).await.unwrap();
        }

        let (fast, lag) = drain(&hub, &mut fast_rx).await;
        assert_eq!(
            (fast, lag),
            ((1..=10).collect::<Vec<_>>(), None),
            "the fast watcher gets everything"
        );
        // The slow one got its buffer's worth, then (token frames dropped meanwhile) the
        // durable event at seq 9 unsubscribed it with a marker to resume from 4.
        let (slow, lag) = drain(&hub, &mut slow_rx).await;
        assert_eq!((slow, lag), (vec![1, 2, 3, 4], Some(4)));
        // Counted (other tests of this binary may add to the same counters meanwhile).
        assert!(metrics::global().events_dropped() >= dropped + 4, "tokens 5 to 8 were dropped");
        assert!(metrics::global().watchers_lagged(Feed::Run) > lagged, "the slow one lagged");
        // Resuming replays from the log until it is live again.
        let mut seen = Vec::new();
        let mut since = 4;
        loop {
            hub.send(Watch { run_id: "r".into(), since, watcher: 2, sink: slow_tx.clone() })
                .await
                .unwrap();
            let (got, lag) = drain(&hub, &mut slow_rx).await;
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
        assert_eq!(drain(&hub, &mut slow_rx).await, (vec![11], None), "subscribed again");
    }

    fn marked(seq: i64, event: &str, data: serde_json::Value) -> Arc<EventFrame> {
        let mark = ProgressMark::of(event, &data);
        Arc::new(EventFrame::new("r", seq, event, data).with_mark(mark))
    }

    fn call_data(key: &str, stage: &str) -> serde_json::Value {
        serde_json::json!({ "key": key, "model": "sim/a", "stage": stage, "role": "council" })
    }

    fn done_data(key: &str, ok: bool, ms: u64) -> serde_json::Value {
        let mut d = call_data(key, "stage1");
        d["ok"] = serde_json::json!(ok);
        d["responseTimeMs"] = serde_json::json!(ms);
        d
    }

    /// The `run` of every dashboard message waiting in `rx`.
    async fn dashboard_runs(
        hub: &Addr<Hub>,
        rx: &mut mpsc::Receiver<Frame>,
    ) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        while let Some(f) = next_frame(hub, rx).await {
            if let Frame::Dashboard(text) = f {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                if v["type"] == "dashboard_update" {
                    out.push(v["run"].clone());
                }
            }
        }
        out
    }

    fn states(run: &serde_json::Value) -> Vec<(String, String)> {
        run["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["key"].as_str().unwrap().into(), c["state"].as_str().unwrap().into()))
            .collect()
    }

    #[actix_web::test]
    async fn the_summary_follows_each_call_the_title_and_the_end_of_the_run() {
        let hub = Hub::new(Duration::from_secs(60)).start();
        let cancel = Nobody.start().recipient();
        hub.send(RegisterRun { summary: summary(), log: Vec::new(), cancel }).await.unwrap();
        let (tx, mut rx) = mpsc::channel(100);
        hub.send(SubscribeDashboard { watcher: 9, sink: tx, viewer: Viewer::local() })
            .await
            .unwrap();
        let frames = vec![
            marked(1, "call_start", call_data("stage1:0", "stage1")),
            marked(2, "call_start", call_data("stage1:1", "stage1")),
            marked(3, "call_start", call_data("stage1:2", "stage1")),
            marked(4, "call_start", call_data("title", "title")),
            marked(5, "token", serde_json::json!({ "key": "stage1:0", "delta": "x" })),
        ];
        hub.send(Publish { run_id: "r".into(), frames }).await.unwrap();
        let frames = vec![
            marked(6, "call_retry", call_data("stage1:1", "stage1")),
            marked(7, "call_complete", done_data("stage1:0", true, 120)),
            marked(8, "call_complete", done_data("stage1:2", false, 90)),
            marked(9, "title_complete", serde_json::json!({ "data": { "title": "Sky Colour" } })),
        ];
        hub.send(Publish { run_id: "r".into(), frames }).await.unwrap();
        hub.send(RunEnded { run_id: "r".into(), status: RunStatus::Cancelled, finished_at: 4242 })
            .await
            .unwrap();

        let updates = dashboard_runs(&hub, &mut rx).await;
        assert_eq!(updates.len(), 3, "one update per batch of durable events, one at the end");
        let pair = |k: &str, s: &str| (k.to_string(), s.to_string());
        assert_eq!(
            states(&updates[0]),
            vec![
                pair("stage1:0", "running"),
                pair("stage1:1", "running"),
                pair("stage1:2", "running")
            ],
            "the title call is not progress"
        );
        assert_eq!(
            states(&updates[1]),
            vec![pair("stage1:0", "ok"), pair("stage1:1", "retrying"), pair("stage1:2", "failed")]
        );
        assert_eq!(updates[1]["title"], "Sky Colour");
        assert_eq!(updates[1]["finishedAt"], serde_json::Value::Null);
        let last = &updates[2];
        assert_eq!(
            states(last),
            vec![pair("stage1:0", "ok"), pair("stage1:1", "stopped"), pair("stage1:2", "failed")]
        );
        assert_eq!(
            (&last["status"], &last["finishedAt"]),
            (&serde_json::json!("cancelled"), &serde_json::json!(4242))
        );
        assert_eq!(
            last["calls"][0],
            serde_json::json!({ "key": "stage1:0", "model": "sim/a", "stage": "stage1",
                                "role": "council", "state": "ok", "responseTimeMs": 120 })
        );
        assert!(last["calls"][1].get("responseTimeMs").is_none(), "absent until the call ends");
        assert!(last.get("owner").is_some_and(serde_json::Value::is_null));
        // The REST list sees the same summary.
        let live = hub.send(ListLive { viewer: Viewer::local() }).await.unwrap();
        assert_eq!(serde_json::to_value(&live[0]).unwrap(), *last);
    }

    /// Every frame waiting in `rx`: event seqs, and the lag marker's `since` if one came.
    async fn drain_all(hub: &Addr<Hub>, rx: &mut mpsc::Receiver<Frame>) -> (Vec<i64>, Option<i64>) {
        let mut seqs = Vec::new();
        let mut lag = None;
        while let Some(f) = next_frame(hub, rx).await {
            match f {
                Frame::Events(batch) => seqs.extend(batch.iter().map(|e| e.seq)),
                Frame::Lagged { since, .. } => lag = Some(since),
                _ => {}
            }
        }
        (seqs, lag)
    }

    async fn remote(hub: &Addr<Hub>, frames: Vec<Arc<EventFrame>>) {
        hub.send(RemoteFrames { run_id: "r".into(), frames }).await.unwrap();
    }

    #[actix_web::test]
    async fn a_run_executed_elsewhere_is_followed_without_repeats_and_a_gap_sends_watchers_back_to_the_store(
    ) {
        let hub = Hub::new(Duration::from_secs(60)).start();
        let epoch = hub.send(Follow { run_id: "r".into() }).await.unwrap();
        // Frames that arrive while the watcher reads the store wait in the log.
        remote(&hub, vec![frame(3, "call_start"), frame(4, "token")]).await;
        let (tx, mut rx) = mpsc::channel(100);
        let park = |since, epoch, sink| Park {
            run_id: "r".into(),
            since,
            watcher: 1,
            sink,
            epoch: Some(epoch),
        };
        hub.send(park(3, epoch, tx.clone())).await.unwrap();
        remote(&hub, vec![frame(4, "token"), frame(5, "stage1_start")]).await;
        assert_eq!(
            drain_all(&hub, &mut rx).await,
            (vec![4, 5], None),
            "after what it read, once each"
        );
        // 6 and 7 never came: the watcher is told to catch up from the store after 5.
        remote(&hub, vec![frame(8, "token")]).await;
        assert_eq!(drain_all(&hub, &mut rx).await, (vec![], Some(5)));
        // A watch that read the store before that gap cannot trust what was received: it is
        // sent back too; one that follows afresh is served.
        let stale = hub.send(Follow { run_id: "r".into() }).await.unwrap();
        assert_eq!(stale, epoch + 1, "the gap started a new epoch");
        let (tx2, mut rx2) = mpsc::channel(100);
        hub.send(park(2, epoch, tx2.clone())).await.unwrap();
        assert_eq!(drain_all(&hub, &mut rx2).await, (vec![], Some(2)));
        hub.send(park(7, stale, tx2)).await.unwrap();
        remote(&hub, vec![frame(9, "complete")]).await;
        assert_eq!(drain_all(&hub, &mut rx2).await, (vec![8, 9], None));
        // The terminal event ends the follow: the Hub let go of the watcher's channel.
        drop(tx);
        assert!(rx2.recv().await.is_none(), "nothing holds the channel open");
        assert!(hub.send(ListFollowed {}).await.unwrap().is_empty());
    }

    #[actix_web::test]
    async fn watchers_following_a_run_switch_to_it_when_it_is_resumed_here() {
        let hub = Hub::new(Duration::from_secs(60)).start();
        let epoch = hub.send(Follow { run_id: "r".into() }).await.unwrap();
        let (tx, mut rx) = mpsc::channel(100);
        hub.send(Park { run_id: "r".into(), since: 2, watcher: 1, sink: tx, epoch: Some(epoch) })
            .await
            .unwrap();
        remote(&hub, vec![frame(3, "token")]).await;
        assert_eq!(drain_all(&hub, &mut rx).await, (vec![3], None));
        // Taken over here: the log holds the stored events; numbering goes on after the token.
        let cancel = Nobody.start().recipient();
        let log = vec![frame(1, "stage1_start"), frame(2, "call_start")];
        hub.send(RegisterRun { summary: summary(), log, cancel }).await.unwrap();
        hub.send(Publish { run_id: "r".into(), frames: vec![frame(4, "resumed")] }).await.unwrap();
        // Frames still in flight from the old executor are ignored.
        remote(&hub, vec![frame(4, "token"), frame(5, "token")]).await;
        hub.send(Publish { run_id: "r".into(), frames: vec![frame(5, "call_start")] })
            .await
            .unwrap();
        assert_eq!(drain_all(&hub, &mut rx).await, (vec![4, 5], None));
        assert!(hub.send(ListFollowed {}).await.unwrap().is_empty(), "no longer followed");
    }

    #[actix_web::test]
    async fn a_quiet_run_is_left_alone_but_a_store_that_stays_ahead_of_the_bus_sends_watchers_back()
    {
        let hub = Hub::new(Duration::from_secs(60)).start();
        let epoch = hub.send(Follow { run_id: "r".into() }).await.unwrap();
        let (tx, mut rx) = mpsc::channel(100);
        hub.send(Park { run_id: "r".into(), since: 5, watcher: 1, sink: tx, epoch: Some(epoch) })
            .await
            .unwrap();
        assert_eq!(hub.send(ListFollowed {}).await.unwrap(), vec![("r".to_string(), 5)]);
        let verify = |stored_seq| Verify { run_id: "r".into(), stored_seq };
        // A long model call: nothing new anywhere, however often it is checked.
        for _ in 0..3 {
            hub.send(verify(5)).await.unwrap();
        }
        assert_eq!(drain_all(&hub, &mut rx).await, (vec![], None));
        // Stored but not yet published: fine once; still missing a check later, it was lost.
        hub.send(verify(7)).await.unwrap();
        assert_eq!(drain_all(&hub, &mut rx).await, (vec![], None));
        hub.send(verify(7)).await.unwrap();
        assert_eq!(drain_all(&hub, &mut rx).await, (vec![], Some(5)));
    }
}
