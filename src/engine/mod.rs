//! The deliberation engine: actors that run deliberations and fan their events out.
//!
//! [`Engine`] is the one entry point the web layer and the CLI use: it validates and starts
//! runs, routes cancels, subscribes watchers (replaying from memory or the store), and
//! rebuilds results. Mode logic stays in `modes/`, SQL in `store/`. With a [`bus::Bus`]
//! several instances share one database: watches, cancels and the live list reach runs that
//! other instances execute.

pub mod access;
mod attachments;
pub mod bus;
pub mod deliberation;
pub mod events;
mod exports;
pub mod fit;
pub mod hub;
pub mod limits;
pub mod model_call;
mod reads;
mod recovery;
pub use recovery::UNUSED_UPLOAD_KEPT;
mod rerun;
pub mod resume;
pub mod retry;
pub mod spend;
pub mod summary;
pub mod views;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde::Serialize;
use serde_json::{json, Value};

use crate::attachments::Given;
use crate::ids::{ConversationId, RunId};
use crate::modes::{self, ChatMessage, Defaults, FieldError, ModeKind, RunContext};
use crate::providers::Providers;
use crate::store::{
    self, MessageRecord, NewRun, RunRecord, RunStatus, Store, StoreError, Visibility,
};
pub use access::Viewer;
pub use attachments::Upload;
use deliberation::{Deliberation, DeliberationSetup, Resumed};
use events::{EventFrame, Frame, FrameSender};
pub use exports::{SharedRun, MAX_ACTIVE_SHARES};
use hub::{Hub, RegisterRun, RunSummary, WatchOutcome, WatcherId};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The client's request is wrong; nothing was started.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    #[error("{0} not found")]
    NotFound(String),
    /// The caller may see the run but not do this to it.
    #[error("{0}")]
    Forbidden(String),
    /// The request clashes with the state of things (too many share links).
    #[error("{0}")]
    Conflict(String),
    /// Over a per-user limit: try again after `retry_after_secs`.
    #[error("{message}")]
    RateLimited { message: String, retry_after_secs: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the engine is shutting down")]
    Unavailable,
}

/// What `start` answers.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartedRun {
    pub run_id: RunId,
    pub conversation_id: ConversationId,
    pub message_id: String,
    pub mode: ModeKind,
}

/// How a watch was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// Subscribed to a live run: more events will come until its terminal event.
    Live,
    /// The run is over: every event after `since` was sent and nothing more will come.
    Ended,
}

/// Engine settings (from the configuration).
#[derive(Debug, Clone)]
pub struct EngineSettings {
    pub defaults: Defaults,
    pub token_flush: Duration,
    pub retention: Duration,
    /// See [`deliberation::DeliberationSetup::finish_grace`].
    pub finish_grace: Duration,
    pub retry: retry::RetryPolicy,
    pub user_limits: limits::UserLimits,
    /// The time the start limits go by.
    pub clock: limits::Clock,
    /// How long a run's lease lasts without a heartbeat (see [`Engine::recover`]).
    pub lease: Duration,
    /// Take over runs whose lease ran out (the server does; the CLI shares the database with
    /// a server and leaves other runs alone).
    pub recover: bool,
    /// Exchange with other instances over Redis (None: a single instance, no Redis at all).
    pub bus: Option<bus::BusSettings>,
    /// Size limits of attached files.
    pub attachments: crate::attachments::Limits,
}

/// What a start brings besides its request: the eval it belongs to and its budget, and the
/// files it is given.
#[derive(Default)]
struct Started {
    eval_id: Option<String>,
    guard: Option<Arc<dyn spend::SpendGuard>>,
    given: Given,
}

/// How a run's actor is started, besides its mode: where it resumes from, the place its
/// owner's limits reserved, its spending guard, and the models it asks for JSON.
struct HowRun {
    resume: Option<Resumed>,
    place: Option<limits::Reserved>,
    guard: Option<Arc<dyn spend::SpendGuard>>,
    structured: modes::Structured,
    given: Given,
}

/// Cloneable handle to the engine's actors.
#[derive(Clone)]
pub struct Engine {
    hub: Addr<Hub>,
    store: Store,
    providers: Providers,
    settings: Arc<EngineSettings>,
    next_watcher: Arc<AtomicU64>,
    /// Set at shutdown: no new runs.
    draining: Arc<std::sync::atomic::AtomicBool>,
    /// When unused uploads were last deleted (ms; 0: not yet).
    last_prune: Arc<std::sync::atomic::AtomicI64>,
    /// This process, as the holder of its runs' leases (and its name on the bus).
    instance: Arc<str>,
    bus: Option<bus::Bus>,
}

/// How many turns of a conversation's history a follow-up may carry (modes truncate further).
const HISTORY_LIMIT: usize = 200;

impl Engine {
    /// Starts the Hub, the bus (when configured) and the lease heartbeat (which, with
    /// `settings.recover`, also takes over runs whose lease ran out). Must run inside an
    /// actix System.
    pub fn launch(store: Store, providers: Providers, settings: EngineSettings) -> Self {
        modes::request::prepare();
        let instance: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let mut bus_handle = None;
        let mut hub = Hub::new(settings.retention);
        let mut inbound = None;
        if let Some(config) = &settings.bus {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            match bus::Bus::start(config, &instance, tx) {
                Ok(bus) => {
                    bus_handle = Some(bus.clone());
                    inbound = Some(rx);
                    hub = hub.with_bus(hub::BusLink {
                        bus,
                        beat: settings.lease / 3,
                        silent_after: settings.lease,
                    });
                }
                Err(e) => {
                    log::error!("the Redis bus cannot start ({e}): running as a single instance")
                }
            }
        }
        let hub = hub.start();
        // What the bus brings goes to the Hub in the order it came.
        if let Some(mut rx) = inbound {
            let to = hub.clone();
            actix::spawn(async move {
                while let Some(msg) = rx.recv().await {
                    to.do_send(msg);
                }
            });
        }
        let engine = Engine {
            hub,
            store,
            providers,
            settings: Arc::new(settings),
            next_watcher: Arc::new(AtomicU64::new(1)),
            draining: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            last_prune: Arc::new(std::sync::atomic::AtomicI64::new(0)),
            instance,
            bus: bus_handle,
        };
        let beat = engine.clone();
        actix::spawn(async move {
            let period = beat.settings.lease / 3;
            loop {
                tokio::time::sleep(period).await;
                beat.heartbeat().await;
            }
        });
        engine
    }

    /// Registers a run with the Hub (with the events it already has) and starts its actor.
    fn run_actor(
        &self,
        summary: RunSummary,
        log: Vec<Arc<EventFrame>>,
        mode: Box<dyn modes::Mode>,
        how: HowRun,
    ) {
        let HowRun { resume, place, guard, structured, given } = how;
        // Register with the Hub before the actor runs, so a watch sent right after this call
        // returns finds the run: the registration is queued in the Hub's mailbox now, ahead of
        // anything sent after this call (the actor's events, a watch). It is not waited for: in
        // a burst of starts the Hub is busy, and the client's `started` need not wait its turn.
        let actor_ctx = Context::<Deliberation>::new();
        let addr = actor_ctx.address();
        let (run_id, message_id, conversation_id) =
            (summary.id.clone(), summary.message_id.clone(), summary.conversation_id.clone());
        let mode_name = summary.mode.clone();
        self.hub.do_send(RegisterRun { summary, log, cancel: addr.recipient(), place });
        actor_ctx.run(Deliberation::new(DeliberationSetup {
            run_id,
            message_id,
            conversation_id,
            mode,
            mode_name,
            hub: self.hub.clone(),
            store: self.store.clone(),
            providers: self.providers.clone(),
            token_flush: self.settings.token_flush,
            finish_grace: self.settings.finish_grace,
            retry: self.settings.retry,
            resume,
            guard,
            structured,
            given,
        }));
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn providers(&self) -> &Providers {
        &self.providers
    }

    pub fn defaults(&self) -> &Defaults {
        &self.settings.defaults
    }

    /// A fresh id for a watcher's channel.
    pub fn watcher_id(&self) -> WatcherId {
        self.next_watcher.fetch_add(1, Ordering::Relaxed)
    }

    /// Shutdown: refuse new runs, let running ones finish for up to `grace`, end the rest as
    /// `interrupted` (their completed stages stay stored), and wait until every write has
    /// reached the database. Returns how many runs were interrupted.
    pub async fn drain(&self, grace: Duration) -> Result<usize, EngineError> {
        self.draining.store(true, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + grace;
        while self.running_here().await? > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let interrupted =
            self.hub.send(hub::InterruptAll {}).await.map_err(|_| EngineError::Unavailable)?;
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while self.running_here().await? > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.store.flush().await?;
        Ok(interrupted)
    }

    /// Validates a start request and starts the run. Every client mistake is reported as
    /// [`EngineError::Invalid`] before anything is stored or any model is called.
    pub async fn start_run(
        &self,
        body: &Value,
        viewer: &Viewer,
    ) -> Result<StartedRun, EngineError> {
        self.start_checked(body, viewer, None, None).await
    }

    /// [`Engine::start_run`] for eval `eval_id`: the run's conversation is marked as that
    /// eval's (History and the dashboard leave it out), and each of its model calls is asked of
    /// `guard` before it starts (see [`spend`]).
    pub async fn start_eval_run(
        &self,
        body: &Value,
        viewer: &Viewer,
        eval_id: &str,
        guard: Option<Arc<dyn spend::SpendGuard>>,
    ) -> Result<StartedRun, EngineError> {
        self.start_checked(body, viewer, Some(eval_id.to_string()), guard).await
    }

    async fn start_checked(
        &self,
        body: &Value,
        viewer: &Viewer,
        eval_id: Option<String>,
        guard: Option<Arc<dyn spend::SpendGuard>>,
    ) -> Result<StartedRun, EngineError> {
        if self.draining.load(Ordering::SeqCst) {
            return Err(EngineError::Unavailable);
        }
        let given = self.given(body, viewer).await?;
        let with_material;
        let body = match attachments::with_material(body, &given) {
            Some(changed) => {
                with_material = changed;
                &with_material
            }
            None => body,
        };
        let req = modes::validate(body, &self.settings.defaults)?;
        if let Some((model, message)) = self.blind_to(&given, &req.models) {
            return Err(FieldError::new(&field_naming(body, &model), message).into());
        }
        let requested_visibility = match body.get("visibility") {
            None | Some(Value::Null) => None,
            Some(Value::String(v)) if Visibility::parse(v).is_some() => Visibility::parse(v),
            Some(_) => {
                return Err(FieldError::new("visibility", "must be \"team\" or \"private\"").into())
            }
        };
        for model in &req.models {
            if let Err(message) = self.providers.resolve(model) {
                return Err(FieldError::new(&field_naming(body, model), message).into());
            }
        }
        self.begin(req, requested_visibility, viewer, Started { eval_id, guard, given }).await
    }

    /// Starts a validated request whose models route: in its conversation when it names one
    /// (a follow-up, with the conversation's history), else in a new one. The follow-up rules,
    /// the mode's own build and then the caller's limits are checked before anything is stored.
    async fn begin(
        &self,
        req: modes::ValidRequest,
        requested_visibility: Option<Visibility>,
        viewer: &Viewer,
        started: Started,
    ) -> Result<StartedRun, EngineError> {
        let Started { eval_id, guard, mut given } = started;
        let owner = viewer.name.clone();
        // The conversation's last answered turn: its files are this follow-up's too.
        let mut answered: Option<String> = None;
        let (conversation_id, new_conversation, history, visibility) = match &req.conversation_id {
            None => (
                ConversationId::generate().into_string(),
                true,
                Vec::new(),
                requested_visibility.unwrap_or_default(),
            ),
            Some(id) => {
                let detail = match self.store.get_conversation(id).await? {
                    Some(d)
                        if viewer.can_see(
                            d.conversation.user_id.as_deref(),
                            d.conversation.visibility,
                        ) =>
                    {
                        d
                    }
                    _ => {
                        return Err(FieldError::new(
                            "conversationId",
                            "no conversation has this id",
                        )
                        .into())
                    }
                };
                let conv = detail.conversation;
                if !viewer.can_control(conv.user_id.as_deref()) {
                    return Err(EngineError::Forbidden(
                        "only the conversation's owner or an admin may ask a follow-up in it"
                            .into(),
                    ));
                }
                if requested_visibility.is_some_and(|v| v != conv.visibility) {
                    return Err(FieldError::new(
                        "visibility",
                        format!(
                            "a follow-up keeps its conversation's visibility ({})",
                            conv.visibility
                        ),
                    )
                    .into());
                }
                if conv.mode != req.mode.as_str() {
                    return Err(FieldError::new(
                        "conversationId",
                        format!(
                            "this is a {} conversation; a {} run needs a new conversation",
                            conv.mode,
                            req.mode.as_str()
                        ),
                    )
                    .into());
                }
                if !req.mode.multi_turn() && !detail.messages.is_empty() {
                    return Err(FieldError::new(
                        "conversationId",
                        format!(
                            "{} mode takes no follow-ups; start a new conversation",
                            req.mode.as_str()
                        ),
                    )
                    .into());
                }
                answered = detail
                    .runs
                    .iter()
                    .rev()
                    .find(|r| r.status == RunStatus::Completed)
                    .map(|r| r.id.clone());
                (conv.id, false, history_of(&detail.messages), conv.visibility)
            }
        };
        // A follow-up's models read the files the conversation was given before, as they read
        // its earlier answered turns (each once, the earliest first): a run lists the files it
        // inherited with its own, so the last answered turn's list holds them all.
        if let Some(run) = &answered {
            let inherited = self.store.run_attachments(run).await?;
            if !inherited.is_empty() {
                given = given.after(inherited);
                self.within_file_limits(&given)?;
                if let Some((_, message)) = self.blind_to(&given, &req.models) {
                    let message = format!("this conversation's files go to every turn: {message}");
                    return Err(FieldError::new("attachments", message).into());
                }
            }
        }
        let run_id = RunId::generate().into_string();
        let message_id = uuid::Uuid::now_v7().to_string();
        let created_at = store::now_ms();
        let ctx = RunContext {
            run_id: run_id.clone(),
            conversation_id: conversation_id.clone(),
            message_id: message_id.clone(),
            question: req.question.clone(),
            history,
            new_conversation,
            seed: modes::common::seed_from_run_id(&run_id),
            structured: self.providers.structured(&req.models),
            material: given.text(),
        };
        let structured = ctx.structured.clone();
        // Built before anything is stored: a configuration that does not fit is refused
        // with nothing left behind.
        let mode = modes::instantiate(&req, ctx)
            .map_err(|e| EngineError::Invalid(FieldError::new("modeConfig", e)))?;
        let request = serde_json::to_value(&req).unwrap_or(Value::Null);
        // The limits come last, once the request is known to be good. A place is reserved
        // until the run is registered with the Hub: the count of the user's running runs plus
        // their reserved places includes every start that passed before, and only an accepted
        // start is counted in the per-minute budget.
        let reserved = match &owner {
            Some(name) => Some(self.within_limits(name).await?),
            None => None,
        };
        self.store
            .create_run(NewRun {
                run_id: run_id.clone(),
                conversation_id: conversation_id.clone(),
                new_conversation,
                user_message_id: uuid::Uuid::now_v7().to_string(),
                message_id: message_id.clone(),
                mode: req.mode.as_str().to_string(),
                question: req.question.clone(),
                request,
                owner: owner.clone(),
                visibility,
                created_at,
                lease: Some((
                    self.instance.to_string(),
                    created_at + self.settings.lease.as_millis() as i64,
                )),
                eval_id: eval_id.clone(),
                attachments: given.files().iter().map(|f| f.info.id.clone()).collect(),
            })
            .await?;
        let summary = RunSummary {
            id: run_id.clone(),
            mode: req.mode.as_str().to_string(),
            conversation_id: conversation_id.clone(),
            message_id: message_id.clone(),
            question: req.question.chars().take(200).collect(),
            status: RunStatus::Running,
            owner,
            visibility,
            created_at,
            finished_at: None,
            title: None,
            last_event: None,
            last_seq: 0,
            calls: Vec::new(),
            outcome: None,
            eval_id,
        };
        // The reserved place goes with the registration: the Hub gives it back as it starts
        // counting the run (dropped unregistered, it is given back all the same).
        let how = HowRun { resume: None, place: reserved, guard, structured, given };
        self.run_actor(summary, Vec::new(), mode, how);
        crate::metrics::global().run_started(req.mode.as_str());
        Ok(StartedRun {
            run_id: RunId::from_stored(run_id),
            conversation_id: ConversationId::from_stored(conversation_id),
            message_id,
            mode: req.mode,
        })
    }

    /// Checks `user`'s limits and reserves a place for the new run, to be held until it is
    /// registered: counted and reserved in one step by the Hub, so one user's burst of starts
    /// is counted one at a time but written to the database together.
    async fn within_limits(&self, user: &str) -> Result<limits::Reserved, EngineError> {
        let ask = hub::ReserveStart {
            owner: user.to_string(),
            limits: self.settings.user_limits,
            clock: self.settings.clock.clone(),
        };
        self.hub.send(ask).await.map_err(|_| EngineError::Unavailable)?.map_err(|r| {
            EngineError::RateLimited { message: r.message, retry_after_secs: r.retry_after_secs }
        })
    }

    /// Who owns a run and who may see it; a run `viewer` may not see is not found.
    async fn access(&self, run_id: &RunId, viewer: &Viewer) -> Result<store::Access, EngineError> {
        match self.store.run_access(run_id.as_str()).await? {
            Some(a) if viewer.can_see_access(&a) => Ok(a),
            _ => Err(EngineError::NotFound(run_id.describe())),
        }
    }

    /// Cancels a run. `Ok(true)` when it was running, `Ok(false)` when it had already ended.
    /// Only its owner or an admin may.
    pub async fn cancel(
        &self,
        id: &RunId,
        reason: &str,
        viewer: &Viewer,
    ) -> Result<bool, EngineError> {
        let access = self.access(id, viewer).await?;
        let run_id = id.as_str();
        if !viewer.can_control(access.owner.as_deref()) {
            return Err(EngineError::Forbidden(
                "only the run's owner or an admin may cancel it".into(),
            ));
        }
        // What the run's watchers read (`cancelled by alice`): the person, not the transport,
        // which goes to the log.
        log::info!("run {run_id}: cancel asked through {reason}");
        let who = viewer.name.clone().unwrap_or_else(|| reason.to_string());
        let reason = who.as_str();
        let live = self
            .hub
            .send(hub::Cancel { run_id: run_id.to_string(), reason: reason.to_string() })
            .await
            .map_err(|_| EngineError::Unavailable)?;
        if live {
            return Ok(true);
        }
        match self.store.get_run(run_id).await? {
            // Executed by another instance (or about to be taken over): whoever holds it
            // stops it; the request is checked here, not there.
            Some(run) if run.status == RunStatus::Running && self.bus.is_some() => {
                if let Some(bus) = &self.bus {
                    bus.control(bus::Control::Cancel {
                        run: run_id.to_string(),
                        reason: reason.to_string(),
                    });
                }
                Ok(true)
            }
            Some(_) => Ok(false),
            None => Err(EngineError::NotFound(id.describe())),
        }
    }

    /// Sends `sink` every event of the run after `since`, then (for a live run) the live ones.
    pub async fn watch(
        &self,
        id: &RunId,
        since: i64,
        watcher: WatcherId,
        sink: FrameSender,
        viewer: &Viewer,
    ) -> Result<Watched, EngineError> {
        self.access(id, viewer).await?;
        let run_id = id.as_str();
        let outcome = self
            .hub
            .send(hub::Watch { run_id: run_id.to_string(), since, watcher, sink: sink.clone() })
            .await
            .map_err(|_| EngineError::Unavailable)?;
        match outcome {
            WatchOutcome::Live { ended: false } => Ok(Watched::Live),
            WatchOutcome::Live { ended: true } => Ok(Watched::Ended),
            WatchOutcome::NotLive => {
                let Some(run) = self.store.get_run(run_id).await? else {
                    return Err(EngineError::NotFound(id.describe()));
                };
                if run.status.is_over() {
                    self.replay(run_id, since, &sink).await?;
                    return Ok(Watched::Ended);
                }
                // Running, but no actor here executes it: another instance does, or its
                // process died and it will be resumed when its lease runs out. With a bus,
                // receive its frames before reading the store: an event stored after the read
                // is published after it, so it comes over the bus.
                let epoch = match &self.bus {
                    Some(_) => Some(
                        self.hub
                            .send(hub::Follow { run_id: run_id.to_string() })
                            .await
                            .map_err(|_| EngineError::Unavailable)?,
                    ),
                    None => None,
                };
                let replayed = self.replay(run_id, since, &sink).await;
                let sent = match replayed {
                    Ok(Some(sent)) => sent,
                    Ok(None) | Err(_) => {
                        if epoch.is_some() {
                            self.hub.do_send(hub::Unfollow { run_id: run_id.to_string() });
                        }
                        return replayed.map(|_| Watched::Ended);
                    }
                };
                // The watcher follows it over the bus, and here if it is resumed here.
                self.hub
                    .send(hub::Park {
                        run_id: run_id.to_string(),
                        since: sent,
                        watcher,
                        sink,
                        epoch,
                    })
                    .await
                    .map_err(|_| EngineError::Unavailable)?;
                Ok(Watched::Live)
            }
        }
    }

    /// Sends the stored events after `since` (the caller must be reading the channel: this
    /// waits for room). Answers the last sequence number sent, or None when the watcher went
    /// away or the events end with the run's terminal one (it ended meanwhile).
    async fn replay(
        &self,
        run_id: &str,
        since: i64,
        sink: &FrameSender,
    ) -> Result<Option<i64>, EngineError> {
        let mut sent = since;
        let mut stored = self.store.events_since(run_id, since).await?.into_iter().peekable();
        while stored.peek().is_some() {
            let piece: Vec<Arc<EventFrame>> = stored
                .by_ref()
                .take(hub::REPLAY_BATCH)
                .map(|e| Arc::new(EventFrame::new(run_id, e.seq, &e.event, e.data)))
                .collect();
            let last = piece.last().map_or(sent, |f| f.seq);
            let terminal = piece.iter().any(|f| f.is_terminal());
            if sink.send(Frame::Events(piece.into())).await.is_err() || terminal {
                return Ok(None);
            }
            sent = last;
        }
        Ok(Some(sent))
    }

    pub fn unwatch(&self, run_id: &RunId, watcher: WatcherId) {
        self.hub.do_send(hub::Unwatch { run_id: run_id.to_string(), watcher });
    }

    pub fn disconnect(&self, watcher: WatcherId) {
        self.hub.do_send(hub::Disconnect { watcher });
    }

    /// The live-run list and its updates, limited to the runs `viewer` may see.
    pub fn subscribe_dashboard(&self, watcher: WatcherId, sink: FrameSender, viewer: Viewer) {
        self.hub.do_send(hub::SubscribeDashboard { watcher, sink, viewer });
    }

    /// The runs going on (and lately ended) that `viewer` may see, on every instance.
    pub async fn live_runs(&self, viewer: &Viewer) -> Result<Vec<RunSummary>, EngineError> {
        let live = self
            .hub
            .send(hub::ListLive { viewer: viewer.clone() })
            .await
            .map_err(|_| EngineError::Unavailable)?;
        // A person's own runs: an eval's are followed on its page.
        Ok(live.into_iter().filter(|r| r.eval_id.is_none()).collect())
    }

    /// How many runs this instance executes now.
    async fn running_here(&self) -> Result<usize, EngineError> {
        self.hub.send(hub::CountRunning).await.map_err(|_| EngineError::Unavailable)
    }

    /// A run's record and the mode's result rebuilt from its stored stage rows, when the caller
    /// may see it (`views::run_view` makes the JSON clients get of it).
    pub async fn result(&self, id: &RunId, viewer: &Viewer) -> Result<RunDetail, EngineError> {
        let access = self.access(id, viewer).await?;
        let run_id = id.as_str();
        let run = self
            .store
            .get_run(run_id)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("run {run_id}")))?;
        let stages = self.store.get_stages(&run.message_id).await?;
        let rows: Vec<_> = stages.into_iter().map(|s| s.row).collect();
        let mode = ModeKind::parse(&run.mode);
        let mut result = match mode {
            Some(kind) => modes::load_result(kind, &rows),
            None => Value::Null,
        };
        let conversation = self.store.get_conversation(&run.conversation_id).await?;
        let eval_id = conversation.as_ref().and_then(|c| c.conversation.eval_id.clone());
        let (title, question, answer) = match &conversation {
            Some(crate::store::ConversationDetail { conversation: conv, messages, runs }) => {
                let first = runs.first().is_some_and(|r| r.id == run.id);
                let q = messages
                    .iter()
                    .find(|m| m.id == run.user_message_id)
                    .map(|m| m.content.clone());
                let a = messages
                    .iter()
                    .find(|m| m.id == run.message_id && !m.content.is_empty())
                    .map(|m| m.content.clone());
                (conv.title.clone().filter(|_| first), q, a)
            }
            None => (None, None, None),
        };
        if let (Some(t), Some(obj)) = (&title, result.as_object_mut()) {
            obj.insert("title".into(), json!(t));
        }
        // The one line a list or dashboard shows: the winner, verdict, score or estimate.
        let outcome = mode
            .filter(|_| run.status == RunStatus::Completed)
            .and_then(|kind| (kind.spec().outcome)(&result));
        let attachments = self.store.run_attachment_infos(run_id).await?;
        Ok(RunDetail {
            can_control: viewer.can_control(access.owner.as_deref()),
            attachments,
            visibility: access.visibility,
            run,
            question,
            answer,
            title,
            outcome,
            result,
            eval_id,
        })
    }
}

/// A run as its reader may see it: the record, its question, answer and title, and the mode's
/// result rebuilt from the stored rows.
#[derive(Debug, Clone)]
pub struct RunDetail {
    pub run: RunRecord,
    pub question: Option<String>,
    pub answer: Option<String>,
    pub title: Option<String>,
    /// The one line a list shows of a completed run ([`modes::registry::ModeSpec::outcome`]).
    pub outcome: Option<String>,
    pub result: Value,
    pub visibility: Visibility,
    /// Whether the reader may cancel, review or follow it up.
    pub can_control: bool,
    /// The eval that started it, if one did.
    pub eval_id: Option<String>,
    /// The files it was given, in order (no text, no bytes).
    pub attachments: Vec<crate::store::AttachmentInfo>,
}

/// A conversation's completed turns as chat history (a turn whose run produced no answer is
/// left out: the models never saw an answer to it), answers without their reasoning traces.
fn history_of(messages: &[MessageRecord]) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    let mut iter = messages.iter().peekable();
    while let Some(m) = iter.next() {
        if m.role != "user" {
            continue;
        }
        if let Some(next) = iter.peek() {
            if next.role == "assistant" && !next.content.is_empty() {
                out.push(ChatMessage::user(m.content.clone()));
                // The models get the answer back, not the reasoning behind it (providers ask
                // for traces to be left out of history; they are stored with the reply).
                let answer = crate::modes::reading::answer_text(&next.content);
                out.push(ChatMessage::assistant(answer.into_owned()));
                iter.next();
            }
        }
    }
    let keep = HISTORY_LIMIT * 2;
    if out.len() > keep {
        out.drain(..out.len() - keep);
    }
    out
}

/// The request field that holds `model`, so an unroutable model id is reported where the
/// client wrote it (`councilModels[1]`, `chairmanModel`, `modeConfig.models[0]`...).
fn field_naming(body: &Value, model: &str) -> String {
    fn search(v: &Value, path: &str, model: &str) -> Option<String> {
        match v {
            Value::String(s) if s == model => Some(path.to_string()),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, item)| search(item, &format!("{path}[{i}]"), model)),
            Value::Object(map) => map.iter().find_map(|(k, item)| {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                if k == "question" {
                    None
                } else {
                    search(item, &p, model)
                }
            }),
            _ => None,
        }
    }
    search(body, "", model).unwrap_or_else(|| "models".to_string())
}

#[cfg(test)]
mod tests;
