//! The Hub: the one actor through which runs publish their events and watchers, dashboards and
//! other instances reach them. It is a thin actor over plain parts, each testable alone:
//!
//! - [`live::LiveRuns`]: the runs executed here, their event logs and watchers, and how long
//!   an ended run stays held for late watchers;
//! - [`fanout`]: sending events to watchers, with back-pressure (a slow watcher loses tokens,
//!   then is told to resume; it never holds up a run);
//! - [`followed::FollowedRuns`]: runs watched here that another instance executes (or that
//!   wait to be resumed), with the checks that send watchers back to the store when frames
//!   were lost;
//! - [`remote::RemoteRuns`]: other instances' runs and cancel requests kept for a takeover;
//! - [`dashboards::Dashboards`]: the dashboards and what each viewer may see.
//!
//! A run's events are kept in memory while it runs and for a while after it ends, so a watcher
//! that joins late or reconnects gets every event after its `since` and then the live ones:
//! replay and subscription happen in one message handler, so nothing can slip between them.
//! The Hub does no I/O; runs it no longer holds are replayed from the store by the caller.
//! Token events dropped and watchers told to resume are counted in [`crate::metrics`].
//!
//! With a [`Bus`] (several instances), it also publishes what its own runs do and reads what
//! the bus brings ([`Inbound`], forwarded by the engine: the bus does not know the Hub).
//! Without one it behaves as a single instance: a watcher of a run executed nowhere here waits
//! for it to be resumed here.

pub mod dashboards;
pub mod fanout;
pub mod followed;
pub mod live;
pub mod remote;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::access::Viewer;
use super::bus::{Bus, Control, Inbound};
use super::events::{EventBatch, EventFrame, FrameSender};
use super::limits::{Clock, Refused, Reserved, StartLimiter, UserLimits};
use crate::store::RunStatus;
use dashboards::Dashboards;
pub use fanout::{WatcherId, REPLAY_BATCH};
use followed::FollowedRuns;
pub use live::WatchOutcome;
use live::{Cancelled, LiveRuns};
use remote::RemoteRuns;

pub use super::summary::{CallProgress, CallState, RunSummary};

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
    /// The place its start reserved under the user's limits: given back as the run starts
    /// being counted, in the same step (see [`ReserveStart`]).
    pub place: Option<Reserved>,
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
    /// A completed run's one-line outcome, as stored.
    pub outcome: Option<String>,
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

/// How many runs this instance executes.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct CountRunning;

/// Checks `owner`'s limits for a new run and reserves a place for it, in one step: their runs
/// running on every instance (known from the bus) and the places their other starts hold
/// (checked, not yet registered) count as running. A burst of one user's starts queues here,
/// each counted after the one before reserved its place, without waiting on each other's round
/// trips. Counted without copying summaries: the Hub holds every run of the retention period.
#[derive(Message)]
#[rtype(result = "Result<Reserved, Refused>")]
pub struct ReserveStart {
    pub owner: String,
    pub limits: UserLimits,
    pub clock: Clock,
}

/// The runs an actor of this instance is executing (not ended yet): its own runs are never
/// taken over as if their process had died, even when their lease ran out while the database
/// refused to renew it.
#[derive(Message)]
#[rtype(result = "HashSet<String>")]
pub struct RunningHere {}

/// Shutdown: end every run still going as `interrupted`; answers how many were.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct InterruptAll {}

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

pub struct Hub {
    /// The start limits whose reserved places count as running runs.
    starts: Arc<StartLimiter>,
    live: LiveRuns,
    followed: FollowedRuns,
    remote: RemoteRuns,
    dashboards: Dashboards,
    retention: Duration,
    bus: Option<BusLink>,
}

impl Hub {
    /// `retention`: how long an ended run's events stay in memory for late watchers.
    pub fn new(retention: Duration) -> Self {
        Hub {
            starts: Arc::default(),
            live: LiveRuns::new(retention, RETAINED_BYTES),
            followed: FollowedRuns::default(),
            remote: RemoteRuns::default(),
            dashboards: Dashboards::default(),
            retention,
            bus: None,
        }
    }

    /// Exchanges with other instances over `link`.
    pub fn with_bus(mut self, link: BusLink) -> Self {
        self.bus = Some(link);
        self
    }

    /// Keeps at most `bytes` of ended runs' events (see [`RETAINED_BYTES`]).
    pub fn retain_bytes(mut self, bytes: usize) -> Self {
        self.live.set_retained_bytes(bytes);
        self
    }

    /// A run executed here changed: update the dashboards here and elsewhere.
    fn local_update(&mut self, summary: &RunSummary) {
        if let Some(link) = &self.bus {
            link.bus.control(Control::Summary { run: Box::new(summary.clone()) });
        }
        self.dashboards.update(summary);
    }

    /// Tells the other instances which runs this one executes, in full.
    fn send_snapshot(&self) {
        if let Some(link) = &self.bus {
            link.bus.control(Control::Snapshot { runs: self.live.running().cloned().collect() });
        }
    }

    /// The runs `viewer` may see, this instance's and (from the bus) the others', newest first.
    fn live_summaries(&self, viewer: &Viewer) -> Vec<RunSummary> {
        let visible = |s: &RunSummary| viewer.can_see(s.owner.as_deref(), s.visibility);
        let mut list: Vec<RunSummary> =
            self.live.summaries().filter(|s| visible(s)).cloned().collect();
        list.extend(
            self.remote.summaries().filter(|s| visible(s) && !self.live.contains(&s.id)).cloned(),
        );
        list.sort_by_key(|r| std::cmp::Reverse(r.created_at));
        list
    }

    /// Another instance's summary of a run it executes.
    fn remote_update(&mut self, from: &str, summary: RunSummary) {
        if self.live.contains(&summary.id) {
            return;
        }
        self.dashboards.update(&summary);
        self.remote.update(from, summary);
    }

    /// Delivers a cancel to a run executed here; otherwise (with a bus) keeps it for a while,
    /// in case this instance takes the run over before it was stopped.
    fn cancel(&mut self, run_id: &str, reason: String) -> bool {
        match self.live.cancel(run_id, reason.clone()) {
            Cancelled::Asked => true,
            Cancelled::Over => false,
            Cancelled::Unknown => {
                if self.bus.is_some() {
                    self.remote.keep_cancel(run_id, reason);
                }
                false
            }
        }
    }

    /// Drops followed runs nobody watches, other instances' runs that ended a retention ago or
    /// whose instance fell silent, and cancels kept too long.
    fn tidy(&mut self) {
        let bus = self.bus.as_ref().map(|l| &l.bus);
        self.followed.tidy(|run_id| {
            if let Some(bus) = bus {
                bus.unsubscribe(run_id);
            }
        });
        if let Some(link) = &self.bus {
            self.remote.tidy(self.retention, link.silent_after);
        }
    }
}

impl Actor for Hub {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let period = (self.retention / 4).max(Duration::from_millis(50));
        ctx.run_interval(period, |hub, _| hub.live.evict_expired());
        ctx.run_interval(Duration::from_secs(1), |hub, _| hub.tidy());
        if let Some(link) = &self.bus {
            ctx.run_interval(link.beat, |hub, _| {
                if let Some(link) = &hub.bus {
                    let running = hub.live.running().map(|s| s.id.clone()).collect();
                    link.bus.control(Control::Beat { running });
                }
            });
        }
    }
}

impl Handler<RegisterRun> for Hub {
    type Result = ();
    fn handle(&mut self, msg: RegisterRun, _: &mut Context<Self>) {
        let id = msg.summary.id.clone();
        if let Some(reason) = self.remote.take_cancel(&id) {
            // Cancelled while no instance executed it: it stops as soon as it starts.
            msg.cancel.do_send(CancelRun { reason, shutdown: false });
        }
        let recipient = msg.cancel;
        let cancel = Box::new(move |reason, shutdown| {
            recipient.do_send(CancelRun { reason, shutdown });
        });
        // A run resumed here replaces what an earlier attempt left (its watchers are gone).
        let summary = self.live.register(msg.summary, msg.log, cancel);
        // Counted as running from now on: its start is accepted and its place goes back in
        // the same step.
        if let Some(place) = &msg.place {
            place.accept();
        }
        self.remote.remove(&id);
        // Watchers that followed it elsewhere now follow it here: its log holds every stored
        // event, and it numbers new ones after anything they were sent.
        if let Some(watchers) = self.followed.take_watchers(&id) {
            for (watcher, w) in watchers {
                self.live.attach(&id, w.last_seq, watcher, w.sink);
            }
            if let Some(link) = &self.bus {
                link.bus.unsubscribe(&id);
            }
        }
        self.local_update(&summary);
    }
}

impl Handler<Publish> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Publish, _: &mut Context<Self>) {
        if !self.live.contains(&msg.run_id) {
            log::warn!("events for unknown run {}", msg.run_id);
            return;
        }
        let batch: EventBatch = msg.frames.into();
        if let Some(link) = &self.bus {
            link.bus.frames(&msg.run_id, batch.clone());
        }
        let changed = self.live.publish(&msg.run_id, &batch).unwrap_or(false);
        // Nobody to tell (no dashboard here, no bus): no copy of the summary.
        if changed && (self.bus.is_some() || !self.dashboards.is_empty()) {
            if let Some(summary) = self.live.summary(&msg.run_id).cloned() {
                self.local_update(&summary);
            }
        }
    }
}

impl Handler<RunEnded> for Hub {
    type Result = ();
    fn handle(&mut self, msg: RunEnded, _: &mut Context<Self>) {
        // The terminal event went out before this message (same sender, same order).
        if let Some(summary) = self.live.end(&msg.run_id, msg.status, msg.finished_at, msg.outcome)
        {
            self.local_update(&summary);
        }
    }
}

impl Handler<Watch> for Hub {
    type Result = MessageResult<Watch>;
    fn handle(&mut self, msg: Watch, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.live.attach(&msg.run_id, msg.since, msg.watcher, msg.sink))
    }
}

impl Handler<Follow> for Hub {
    type Result = ResponseFuture<u64>;
    fn handle(&mut self, msg: Follow, _: &mut Context<Self>) -> Self::Result {
        // Executed here (resumed since the caller looked): its [`Park`] attaches to it.
        if self.live.contains(&msg.run_id) {
            return Box::pin(async { 0 });
        }
        let epoch = self.followed.follow(&msg.run_id);
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
        self.followed.unfollow(&msg.run_id);
    }
}

impl Handler<Park> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Park, _: &mut Context<Self>) {
        // Resumed here since the caller looked: attach at once.
        if self.live.contains(&msg.run_id) {
            if msg.epoch.is_some() {
                self.followed.unfollow(&msg.run_id);
            }
            self.live.attach(&msg.run_id, msg.since, msg.watcher, msg.sink);
            return;
        }
        self.followed.park(&msg.run_id, msg.since, msg.epoch, msg.watcher, msg.sink);
    }
}

impl Handler<Abandon> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Abandon, _: &mut Context<Self>) {
        if let Some(link) = &self.bus {
            link.bus.frames(&msg.run_id, Arc::from([msg.terminal.clone()]));
        }
        self.followed.abandon(&msg.run_id, msg.terminal);
    }
}

impl Handler<Inbound> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Inbound, _: &mut Context<Self>) {
        match msg {
            Inbound::Up => {
                // Whatever came while the bus was away is lost: followers catch up from the store.
                self.followed.resync_all();
                self.send_snapshot();
            }
            Inbound::Frames { run_id, frames } => {
                // A run executed here now: its own actor is the source.
                if !self.live.contains(&run_id) {
                    self.followed.receive(&run_id, frames);
                }
            }
            Inbound::Control { from, msg } => self.control(from, msg),
        }
    }
}

impl Hub {
    /// A control message from another instance.
    fn control(&mut self, from: String, msg: Control) {
        self.remote.heard_from(&from);
        match msg {
            Control::Summary { run } => self.remote_update(&from, *run),
            Control::Beat { running } => self.remote.running(&from, &running),
            Control::Snapshot { runs } => {
                let ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
                self.remote.running(&from, &ids);
                for run in runs {
                    self.remote_update(&from, run);
                }
            }
            Control::Hello { resync } => {
                self.send_snapshot();
                if resync {
                    log::warn!("instance {from} lost events it published; followers catch up");
                    self.followed.resync_all();
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

impl Handler<ListFollowed> for Hub {
    type Result = MessageResult<ListFollowed>;
    fn handle(&mut self, _: ListFollowed, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.followed.watched())
    }
}

impl Handler<Verify> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Verify, _: &mut Context<Self>) {
        self.followed.verify(&msg.run_id, msg.stored_seq);
    }
}

impl Handler<Unwatch> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Unwatch, _: &mut Context<Self>) {
        self.live.unwatch(&msg.run_id, msg.watcher);
        self.followed.unwatch(&msg.run_id, msg.watcher);
    }
}

impl Handler<Disconnect> for Hub {
    type Result = ();
    fn handle(&mut self, msg: Disconnect, _: &mut Context<Self>) {
        self.live.disconnect(msg.watcher);
        self.followed.disconnect(msg.watcher);
        self.dashboards.remove(msg.watcher);
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
        self.dashboards.subscribe(msg.watcher, msg.sink, msg.viewer, &runs);
    }
}

impl Handler<InterruptAll> for Hub {
    type Result = usize;
    fn handle(&mut self, _: InterruptAll, _: &mut Context<Self>) -> usize {
        self.live.interrupt_all()
    }
}

impl Handler<CountRunning> for Hub {
    type Result = usize;
    fn handle(&mut self, _: CountRunning, _: &mut Context<Self>) -> usize {
        self.live.summaries().filter(|s| s.status == RunStatus::Running).count()
    }
}

impl Handler<ReserveStart> for Hub {
    type Result = MessageResult<ReserveStart>;
    fn handle(&mut self, msg: ReserveStart, _: &mut Context<Self>) -> Self::Result {
        let owner = msg.owner.as_str();
        let local = self.live.summaries().filter(|s| remote::running_of(s, owner)).count();
        let elsewhere = self
            .remote
            .summaries()
            .filter(|s| remote::running_of(s, owner) && !self.live.contains(&s.id))
            .count();
        let running = local + elsewhere + self.starts.pending(owner);
        MessageResult(self.starts.reserve(owner, running, msg.limits, &msg.clock))
    }
}

impl Handler<RunningHere> for Hub {
    type Result = MessageResult<RunningHere>;
    fn handle(&mut self, _: RunningHere, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.live.running_ids())
    }
}

impl Handler<ListLive> for Hub {
    type Result = MessageResult<ListLive>;
    fn handle(&mut self, msg: ListLive, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.live_summaries(&msg.viewer))
    }
}

#[cfg(test)]
mod tests;
