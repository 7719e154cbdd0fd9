//! The Deliberation actor: one per run, the supervisor that executes what its mode asks.
//!
//! It owns the run's sequence numbers, starts a ModelCall actor per requested call, feeds
//! replies back to the mode, publishes events through the Hub, sends stage rows and events to
//! the Store, and ends the run as completed, failed or cancelled. It holds no prompt text and
//! no SQL: those belong to `modes/` and `store/`.
//!
//! Writes and publication: each step (the start, a reply, a timer) is journaled together with
//! the stage rows and events it produced, in one transaction ([`Commit`]); its events reach
//! watchers only once that transaction has committed, so nobody ever sees an event the store
//! could lose. One commit is in flight per run at a time; steps that come meanwhile are
//! written together in the next one. A failed commit is retried with backoff; if the database
//! keeps refusing, the run fails with the database's error (see [`COMMIT_RETRIES`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::{json, Value};

use super::events::{is_transient, EventFrame, ProgressMark, Terminal};
use super::hub::{CancelRun, Hub, Publish, RunEnded};
use super::model_call::{
    CallDelta, CallFinished, CallNote, CallNoted, CallOwner, CallRetrying, ModelCall, StopCall,
};
use super::resume::{self, Replayed};
use super::retry::RetryPolicy;
use super::spend::{Admit, CallSize, SpendGuard, Used};
use crate::attachments::Given;
use crate::modes::registry::ModeKind;
use crate::modes::{
    CallError, CallErrorKind, CallReply, CallSpec, Effect, Mode, StageRow, Structured, Usage,
};
use crate::providers::{Notice, Providers};
use crate::store::{
    self, Commit, JournalRecord, RunFinish, RunStatus, Store, StoreError, StoredEvent,
};

/// How often a refused commit is tried again (with doubling delays from 100 ms, capped at
/// 2 s: about 10 s in all) before the run fails with the database's error.
pub const COMMIT_RETRIES: u32 = 8;

/// How often a run's failure that the database refused to store is tried again. Until it is
/// stored, nothing of it is published.
pub const FAILURE_RETRY: Duration = Duration::from_secs(2);

/// How often calls a spending guard told to wait ask it again.
const GUARD_POLL: Duration = Duration::from_millis(20);

/// Where a run is in its life.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Running,
    /// The mode produced its answer; waiting for calls still in flight (a title).
    Finishing {
        answer: String,
    },
    /// A terminal event is being written; nothing more is accepted.
    Ending,
}

/// How a Deliberation is set up.
pub struct DeliberationSetup {
    pub run_id: String,
    pub message_id: String,
    pub conversation_id: String,
    pub mode: Box<dyn Mode>,
    /// The mode's name (`council`, …): with a call's role, it chooses the call's output cap.
    pub mode_name: String,
    pub hub: Addr<Hub>,
    pub store: Store,
    pub providers: Providers,
    /// How often streamed deltas are flushed as `token` events.
    pub token_flush: Duration,
    /// How long calls still in flight (a title) may hold a run that has its answer.
    pub finish_grace: Duration,
    pub retry: RetryPolicy,
    /// Set when the run is resumed after a crash: where it stood.
    pub resume: Option<Resumed>,
    /// Asked before each model call starts (an eval's budget), when the run has one.
    pub guard: Option<Arc<dyn SpendGuard>>,
    /// The models its mode asks for JSON ([`crate::modes::RunContext::structured`]),
    /// journaled with its start so a resumed run asks as it asked before.
    pub structured: Structured,
    /// The files the run was given: each call's prompt is preceded by them.
    pub given: Given,
}

/// A run picked up from its journal (see [`super::resume`]).
pub struct Resumed {
    pub replayed: Replayed,
    /// The last sequence number stored before the crash.
    pub seq: i64,
}

pub struct Deliberation {
    run_id: String,
    message_id: String,
    conversation_id: String,
    mode: Box<dyn Mode>,
    mode_name: String,
    hub: Addr<Hub>,
    store: Store,
    providers: Providers,
    token_flush: Duration,
    finish_grace: Duration,
    retry: RetryPolicy,
    seq: i64,
    stage_position: i32,
    /// Every stage row of the run, replayed and new, in the order written: the result its
    /// outcome is read from when it completes.
    rows: Vec<StageRow>,
    phase: Phase,
    in_flight: HashMap<String, (Addr<ModelCall>, CallSpec)>,
    /// Deltas received since the last flush, by call key (ordered for stable output).
    pending_tokens: BTreeMap<String, String>,
    usage: Usage,
    cost_seen: bool,
    /// Journal steps so far.
    step: i64,
    /// What the current step writes, and the frames it publishes once written.
    batch: Commit,
    frames: Vec<Arc<EventFrame>>,
    /// A commit is in flight (or waiting to be retried): later steps wait in `batch`.
    committing: bool,
    commit_failures: u32,
    resume: Option<Resumed>,
    guard: Option<Arc<dyn SpendGuard>>,
    /// Calls the guard told to wait for room, in the order the mode asked for them.
    waiting: VecDeque<CallSpec>,
    structured: Structured,
    given: Given,
}

impl Deliberation {
    pub fn new(setup: DeliberationSetup) -> Self {
        Deliberation {
            run_id: setup.run_id,
            message_id: setup.message_id,
            conversation_id: setup.conversation_id,
            mode: setup.mode,
            mode_name: setup.mode_name,
            hub: setup.hub,
            store: setup.store,
            providers: setup.providers,
            token_flush: setup.token_flush,
            finish_grace: setup.finish_grace,
            retry: setup.retry,
            seq: 0,
            stage_position: 0,
            rows: Vec::new(),
            phase: Phase::Running,
            in_flight: HashMap::new(),
            pending_tokens: BTreeMap::new(),
            usage: Usage::default(),
            cost_seen: false,
            step: 0,
            batch: Commit::default(),
            frames: Vec::new(),
            committing: false,
            commit_failures: 0,
            resume: setup.resume,
            guard: setup.guard,
            waiting: VecDeque::new(),
            structured: setup.structured,
            given: setup.given,
        }
    }

    /// Assigns sequence numbers and queues the events: durable ones are written with the
    /// current step, and all go to the Hub once it is committed (see [`Self::commit`]).
    fn publish(&mut self, events: Vec<(String, Value)>) {
        for (event, data) in events {
            self.seq += 1;
            let mark = ProgressMark::of(&event, &data);
            if !is_transient(&event) {
                self.batch.events.push(StoredEvent {
                    seq: self.seq,
                    event: event.clone(),
                    data: data.clone(),
                });
            }
            self.frames.push(Arc::new(
                EventFrame::new(&self.run_id, self.seq, &event, data).with_mark(mark),
            ));
        }
    }

    /// Journals one input of the mode with the current step.
    fn journal(&mut self, kind: &str, call_key: Option<&str>, data: Value) {
        self.step += 1;
        self.batch.journal.push(JournalRecord {
            step: self.step,
            kind: kind.to_string(),
            call_key: call_key.map(str::to_string),
            data,
        });
    }

    /// Writes what the steps so far produced, unless a commit is already in flight (its
    /// completion sends the next). Frames with nothing to write ahead of them (streamed
    /// tokens between steps) go straight out.
    fn commit(&mut self, ctx: &mut Context<Self>) {
        if self.committing {
            return;
        }
        if self.batch.is_empty() {
            if !self.frames.is_empty() {
                let frames = std::mem::take(&mut self.frames);
                self.hub.do_send(Publish { run_id: self.run_id.clone(), frames });
            }
            return;
        }
        let mut batch = std::mem::take(&mut self.batch);
        batch.run_id.clone_from(&self.run_id);
        batch.message_id.clone_from(&self.message_id);
        batch.conversation_id.clone_from(&self.conversation_id);
        let frames = std::mem::take(&mut self.frames);
        self.send_commit(Arc::new(batch), frames, ctx);
    }

    fn send_commit(
        &mut self,
        batch: Arc<Commit>,
        frames: Vec<Arc<EventFrame>>,
        ctx: &mut Context<Self>,
    ) {
        self.committing = true;
        let store = self.store.clone();
        let sent = batch.clone();
        ctx.spawn(async move { store.commit(sent).await }.into_actor(self).map(
            move |result, act, ctx| match result {
                Ok(()) => {
                    act.committing = false;
                    act.commit_failures = 0;
                    if !frames.is_empty() {
                        act.hub.do_send(Publish { run_id: act.run_id.clone(), frames });
                    }
                    match &batch.finish {
                        Some(finish) => {
                            let outcome = finish.outcome.clone();
                            act.ended(finish.status, finish.finished_at, outcome, ctx)
                        }
                        None => act.commit(ctx),
                    }
                }
                Err(e) => act.commit_failed(e, batch, frames, ctx),
            },
        ));
    }

    /// A commit was refused: try again (with what accumulated meanwhile) after a delay, or,
    /// after [`COMMIT_RETRIES`], fail the run with the database's error.
    fn commit_failed(
        &mut self,
        error: StoreError,
        batch: Arc<Commit>,
        frames: Vec<Arc<EventFrame>>,
        ctx: &mut Context<Self>,
    ) {
        self.commit_failures += 1;
        crate::metrics::global().commit_failed();
        if self.commit_failures > COMMIT_RETRIES {
            log::error!("run {}: the database refused its writes: {error}", self.run_id);
            self.store_gave_up(error, &batch, ctx);
            return;
        }
        let delay = Duration::from_millis((100u64 << (self.commit_failures - 1)).min(2_000));
        log::warn!(
            "run {}: writing a step failed ({error}); attempt {} of {} in {} ms",
            self.run_id,
            self.commit_failures + 1,
            COMMIT_RETRIES + 1,
            delay.as_millis()
        );
        ctx.run_later(delay, move |act, ctx| {
            let mut merged = Arc::try_unwrap(batch).unwrap_or_else(|shared| (*shared).clone());
            merged.absorb(std::mem::take(&mut act.batch));
            let mut frames = frames;
            frames.append(&mut act.frames);
            act.send_commit(Arc::new(merged), frames, ctx);
        });
    }

    /// The run is ending: no more steps; calls still going are stopped and their unflushed
    /// text dropped.
    fn stop_calls(&mut self) {
        self.phase = Phase::Ending;
        for (key, (addr, _)) in self.in_flight.drain() {
            addr.do_send(StopCall {});
            if let Some(g) = &self.guard {
                g.settle(&self.run_id, &key, Used::Unknown);
            }
        }
        self.waiting.clear();
        self.pending_tokens.clear();
    }

    /// The database keeps refusing this run's writes: stop its calls and record the failure,
    /// then tell its watchers why. The `error` event goes out only once the failure is stored:
    /// until then the failure is tried again every [`FAILURE_RETRY`], watchers get nothing
    /// terminal, and the run counts as running here (its lease is renewed whenever the
    /// database takes that). Should this process die first, the run is still `running` in the
    /// database and is resumed from its last stored step, with nothing unstored ever shown.
    fn store_gave_up(&mut self, error: StoreError, batch: &Commit, ctx: &mut Context<Self>) {
        self.stop_calls();
        self.frames.clear();
        let message = format!("the database refused the run's writes: {error}");
        let seq = batch
            .events
            .iter()
            .chain(self.batch.events.iter())
            .map(|e| e.seq)
            .min()
            .unwrap_or(self.seq + 1);
        let data = json!({ "message": message });
        let finished_at = store::now_ms();
        let last = Commit {
            run_id: self.run_id.clone(),
            message_id: self.message_id.clone(),
            conversation_id: self.conversation_id.clone(),
            events: vec![StoredEvent { seq, event: "error".into(), data }],
            finish: Some(self.finish_record(RunStatus::Failed, Some(message), None, finished_at)),
            ..Commit::default()
        };
        self.store_failure(Arc::new(last), ctx);
    }

    /// Writes the run's failure (`last`: its `error` event and its end), then publishes it;
    /// refused, tries again after [`FAILURE_RETRY`].
    fn store_failure(&mut self, last: Arc<Commit>, ctx: &mut Context<Self>) {
        let store = self.store.clone();
        let sent = last.clone();
        ctx.spawn(async move { store.commit(sent).await }.into_actor(self).map(
            move |result, act, ctx| {
                if let Err(e) = result {
                    crate::metrics::global().commit_failed();
                    log::error!(
                        "run {}: its failure could not be stored ({e}); trying again in {} s",
                        act.run_id,
                        FAILURE_RETRY.as_secs()
                    );
                    ctx.run_later(FAILURE_RETRY, move |act, ctx| act.store_failure(last, ctx));
                    return;
                }
                let frames = last
                    .events
                    .iter()
                    .map(|e| {
                        Arc::new(EventFrame::new(&act.run_id, e.seq, &e.event, e.data.clone()))
                    })
                    .collect();
                act.hub.do_send(Publish { run_id: act.run_id.clone(), frames });
                let finished_at =
                    last.finish.as_ref().map_or_else(store::now_ms, |f| f.finished_at);
                act.ended(RunStatus::Failed, finished_at, None, ctx);
            },
        ));
    }

    fn flush_tokens(&mut self) {
        if self.pending_tokens.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending_tokens);
        let events = pending
            .into_iter()
            .map(|(key, delta)| {
                let model = self.in_flight.get(&key).map(|(_, s)| s.model.clone());
                ("token".to_string(), json!({ "key": key, "model": model, "delta": delta }))
            })
            .collect();
        self.publish(events);
    }

    fn execute(&mut self, effects: Vec<Effect>, ctx: &mut Context<Self>) {
        let mut events = Vec::new();
        // Side calls the guard refused: failed to the mode once this batch is out.
        let mut dropped = Vec::new();
        for effect in effects {
            if self.phase == Phase::Ending {
                break;
            }
            match effect {
                Effect::Call(spec) => {
                    // Calls keep their order: one asked after a waiting call waits behind it.
                    let idle = self.waiting.is_empty();
                    self.waiting.push_back(spec);
                    if idle {
                        if self.offer_waiting(&mut events, &mut dropped, ctx) {
                            self.publish(std::mem::take(&mut events));
                            self.refused(ctx);
                            return;
                        }
                        if !self.waiting.is_empty() {
                            ctx.run_later(GUARD_POLL, |act, ctx| act.retry_waiting(ctx));
                        }
                    }
                }
                Effect::Emit { event, data } => events.push((event, data)),
                Effect::Store(row) => {
                    self.rows.push(row.clone());
                    self.batch.stages.push((self.stage_position, row));
                    self.stage_position += 1;
                }
                Effect::SetTitle(title) => self.batch.title = Some(title),
                Effect::Finish { answer } => {
                    if self.phase == Phase::Running {
                        self.phase = Phase::Finishing { answer };
                        // The answer is out; a slow side call (a title) may not hold the run
                        // open for a whole stage timeout.
                        ctx.run_later(self.finish_grace, |act, ctx| {
                            if let Phase::Finishing { answer } = act.phase.clone() {
                                log::info!(
                                    "run {}: {} call(s) still in flight after the answer; dropped",
                                    act.run_id,
                                    act.in_flight.len()
                                );
                                act.end(ctx, RunStatus::Completed, None, Some(answer));
                            }
                        });
                    }
                }
                Effect::FlagForReview { reason } => self.batch.flag = Some(reason),
                Effect::Timer { key, after_ms } => {
                    ctx.run_later(Duration::from_millis(after_ms), move |act, ctx| {
                        if act.phase != Phase::Ending {
                            act.journal(resume::TIMER, Some(&key), json!({}));
                            let effects = act.mode.on_timer(&key);
                            act.execute(effects, ctx);
                        }
                    });
                }
                Effect::Fail { message } => {
                    self.publish(std::mem::take(&mut events));
                    self.end(ctx, RunStatus::Failed, Some(message), None);
                    return;
                }
            }
        }
        self.publish(events);
        if !dropped.is_empty() {
            // The mode hears of them as failed calls; what it does next checks and commits.
            self.fail_dropped(dropped, ctx);
            return;
        }
        self.check_done(ctx);
        self.commit(ctx);
    }

    /// A call the guard refused that the run can do without: a side call (the title), or any
    /// call once the answer is out.
    fn may_drop(&self, spec: &CallSpec) -> bool {
        spec.role == "title" || matches!(self.phase, Phase::Finishing { .. })
    }

    /// Tells the mode that these calls failed: the budget would not cover them.
    fn fail_dropped(&mut self, dropped: Vec<CallSpec>, ctx: &mut Context<Self>) {
        let mut effects = Vec::new();
        for spec in dropped {
            log::info!(
                "run {}: call {} dropped: the budget would not cover it",
                self.run_id,
                spec.key
            );
            let reply = CallReply {
                key: spec.key,
                model: spec.model,
                response_time_ms: 0,
                result: Err(CallError::new(
                    CallErrorKind::Cancelled,
                    None,
                    "the budget would not cover this call",
                )),
                usage: None,
            };
            effects.extend(self.mode.on_reply(reply));
        }
        self.execute(effects, ctx);
    }

    /// What the run's guard says of a call (go, when it has none).
    fn admit(&self, spec: &CallSpec) -> Admit {
        let Some(guard) = &self.guard else { return Admit::Go };
        let size = CallSize {
            prompt_bytes: spec.messages.iter().map(|m| m.content.len()).sum(),
            messages: spec.messages.len(),
            max_tokens: self.providers.max_tokens(&self.mode_name, &spec.role, &spec.model),
        };
        guard.admit(&self.run_id, &spec.key, &spec.model, size)
    }

    /// Starts a model call, with its `call_start` event.
    fn start_call(
        &mut self,
        spec: CallSpec,
        events: &mut Vec<(String, Value)>,
        ctx: &mut Context<Self>,
    ) {
        let mut data = json!({
            "key": spec.key, "model": spec.model,
            "stage": spec.stage, "role": spec.role,
        });
        if let Some(schema) = &spec.schema {
            // The reply is machine-read: by this schema where it fits.
            data["schema"] = json!(schema.name);
        }
        events.push(("call_start".to_string(), data));
        let owner = CallOwner {
            finished: ctx.address().recipient(),
            deltas: ctx.address().recipient(),
            retrying: ctx.address().recipient(),
            noted: ctx.address().recipient(),
        };
        let max_tokens = self.providers.max_tokens(&self.mode_name, &spec.role, &spec.model);
        // The run's files go into what is sent, not into what the run keeps of the call.
        let mut sent = spec.clone();
        // (Images only to a model that sees them: a backup model may not.)
        let sees_images = self.providers.vision(&sent.model);
        self.given.prepare(&mut sent, sees_images);
        let call = ModelCall::new(sent, max_tokens, self.providers.clone(), self.retry, owner);
        let addr = call.start();
        self.in_flight.insert(spec.key.clone(), (addr, spec));
    }

    /// Offers the waiting calls to the guard, in order: starts those it lets go until one
    /// must wait, and moves to `dropped` a refused one the run can do without. True when it
    /// refused one the run cannot do without.
    fn offer_waiting(
        &mut self,
        events: &mut Vec<(String, Value)>,
        dropped: &mut Vec<CallSpec>,
        ctx: &mut Context<Self>,
    ) -> bool {
        while let Some(spec) = self.waiting.front() {
            let admit = self.admit(spec);
            if admit == Admit::Wait {
                break;
            }
            if admit == Admit::Refuse && !self.may_drop(spec) {
                return true;
            }
            let Some(spec) = self.waiting.pop_front() else { break };
            if admit == Admit::Go {
                self.start_call(spec, events, ctx);
            } else {
                dropped.push(spec);
            }
        }
        false
    }

    /// Asks the guard again for the calls it told to wait, in order.
    fn retry_waiting(&mut self, ctx: &mut Context<Self>) {
        if self.phase == Phase::Ending {
            return;
        }
        let mut events = Vec::new();
        let mut dropped = Vec::new();
        if self.offer_waiting(&mut events, &mut dropped, ctx) {
            self.publish(events);
            self.refused(ctx);
            return;
        }
        if !self.waiting.is_empty() {
            ctx.run_later(GUARD_POLL, |act, ctx| act.retry_waiting(ctx));
        }
        self.publish(events);
        if !dropped.is_empty() {
            self.fail_dropped(dropped, ctx);
            return;
        }
        self.commit(ctx);
    }

    /// The guard will not let a call start: the run is cancelled, saying why.
    fn refused(&mut self, ctx: &mut Context<Self>) {
        let why = self.guard.as_ref().map(|g| g.refusal()).unwrap_or_default();
        log::info!("run {} cancelled: {why}", self.run_id);
        self.end(ctx, RunStatus::Cancelled, Some(why), None);
    }

    fn check_done(&mut self, ctx: &mut Context<Self>) {
        if !self.in_flight.is_empty() || !self.waiting.is_empty() {
            return;
        }
        match &self.phase {
            Phase::Finishing { answer } => {
                let answer = answer.clone();
                self.end(ctx, RunStatus::Completed, None, Some(answer));
            }
            Phase::Running => {
                // A mode must always have a call in flight or have ended; anything else
                // would leave the run hanging forever.
                log::error!("run {}: mode stopped without an answer", self.run_id);
                self.end(
                    ctx,
                    RunStatus::Failed,
                    Some("internal error: the mode stopped".into()),
                    None,
                );
            }
            Phase::Ending => {}
        }
    }

    /// Ends the run: stops calls and writes the outcome with the terminal event; the event
    /// is published once written, so a client that reads the result on `complete` finds it
    /// stored.
    fn end(
        &mut self,
        ctx: &mut Context<Self>,
        status: RunStatus,
        error: Option<String>,
        answer: Option<String>,
    ) {
        if self.phase == Phase::Ending {
            return;
        }
        self.stop_calls();
        let terminal = Terminal::of_status(status);
        let data = match terminal {
            Terminal::Complete => json!({}),
            _ => json!({ "message": error.clone().unwrap_or_default() }),
        };
        self.publish(vec![(terminal.event().to_string(), data)]);
        self.batch.finish = Some(self.finish_record(status, error, answer, store::now_ms()));
        self.commit(ctx);
    }

    fn finish_record(
        &self,
        status: RunStatus,
        error: Option<String>,
        answer: Option<String>,
        finished_at: i64,
    ) -> RunFinish {
        RunFinish {
            run_id: self.run_id.clone(),
            message_id: self.message_id.clone(),
            status,
            error,
            answer,
            prompt_tokens: self.usage.prompt_tokens as i64,
            completion_tokens: self.usage.completion_tokens as i64,
            cost: self.cost_seen.then_some(self.usage.cost.unwrap_or(0.0)),
            finished_at,
            outcome: (status == RunStatus::Completed).then(|| self.outcome()).flatten(),
        }
    }

    /// The completed run's one line for lists: its mode's outcome of the result its rows make
    /// (the rows in the order the store reads them back).
    fn outcome(&self) -> Option<String> {
        let spec = ModeKind::parse(&self.mode_name)?.spec();
        let mut rows = self.rows.clone();
        rows.sort_by_key(|r| r.stage_order);
        (spec.outcome)(&(spec.load_result)(&rows))
    }

    /// The run's end is stored and published: tell the Hub and stop.
    fn ended(
        &mut self,
        status: RunStatus,
        finished_at: i64,
        outcome: Option<String>,
        ctx: &mut Context<Self>,
    ) {
        self.hub.do_send(RunEnded { run_id: self.run_id.clone(), status, finished_at, outcome });
        ctx.stop();
    }

    fn add_usage(&mut self, reply: &CallReply) {
        if let Some(u) = reply.usage {
            self.usage = self.usage.plus(u);
            self.cost_seen |= u.cost.is_some();
        }
    }
}

impl Actor for Deliberation {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(self.token_flush, |act, ctx| {
            act.flush_tokens();
            act.commit(ctx);
        });
        let effects = match self.resume.take() {
            None => {
                log::info!("run {} started", self.run_id);
                // A guarded run is never finished without its guard (see `Engine::resume_run`).
                let mut start =
                    if self.guard.is_some() { json!({ "guarded": true }) } else { json!({}) };
                if !self.structured.is_empty() {
                    start["structured"] = json!(self.structured);
                }
                self.journal(resume::START, None, start);
                self.mode.start()
            }
            Some(Resumed { mut replayed, seq }) => {
                log::warn!(
                    "run {} resumed after step {} (seq {seq}), {} call(s) to make again",
                    self.run_id,
                    replayed.steps,
                    replayed.calls()
                );
                self.seq = seq;
                self.step = replayed.steps;
                self.stage_position = replayed.rows.len() as i32;
                self.rows = std::mem::take(&mut replayed.rows);
                self.usage = replayed.usage;
                self.cost_seen = replayed.cost_seen;
                self.publish(vec![(
                    "resumed".to_string(),
                    json!({ "afterSeq": seq, "calls": replayed.calls() }),
                )]);
                replayed.pending
            }
        };
        self.execute(effects, ctx);
    }
}

impl Handler<CallDelta> for Deliberation {
    type Result = ();
    fn handle(&mut self, msg: CallDelta, _: &mut Context<Self>) {
        if self.in_flight.contains_key(&msg.key) {
            self.pending_tokens.entry(msg.key).or_default().push_str(&msg.delta);
        }
    }
}

impl Handler<CallFinished> for Deliberation {
    type Result = ();
    fn handle(&mut self, msg: CallFinished, ctx: &mut Context<Self>) {
        let reply = msg.reply;
        let Some((_, spec)) = self.in_flight.get(&reply.key) else { return };
        let stage = spec.stage.clone();
        let role = spec.role.clone();
        // Text streamed before the reply goes out first, so `token` never follows the
        // `call_complete` of its call.
        self.flush_tokens();
        self.in_flight.remove(&reply.key);
        if let Some(g) = &self.guard {
            g.settle(&self.run_id, &reply.key, Used::of_reply(&reply));
        }
        self.add_usage(&reply);
        let mut data = json!({
            "key": reply.key, "model": reply.model, "stage": stage, "role": role,
            "ok": reply.result.is_ok(), "responseTimeMs": reply.response_time_ms,
            "usage": reply.usage,
        });
        if let Err(e) = &reply.result {
            log::warn!(
                "run {}: call {} to {} failed: {}",
                self.run_id,
                reply.key,
                reply.model,
                e.message
            );
            data["error"] = json!(e);
        }
        self.publish(vec![("call_complete".to_string(), data)]);
        self.journal(resume::REPLY, Some(&reply.key), resume::reply_data(&reply));
        let effects = self.mode.on_reply(reply);
        self.execute(effects, ctx);
    }
}

impl Handler<CallRetrying> for Deliberation {
    type Result = ();
    fn handle(&mut self, msg: CallRetrying, ctx: &mut Context<Self>) {
        let Some((_, spec)) = self.in_flight.get(&msg.key) else { return };
        if let Some(g) = &self.guard {
            if !g.retry(&self.run_id, &msg.key, msg.used) {
                self.flush_tokens();
                self.refused(ctx);
                return;
            }
        }
        let data = json!({
            "key": msg.key, "model": spec.model, "stage": spec.stage, "role": spec.role,
            "attempt": msg.attempt, "delayMs": msg.delay_ms, "error": msg.error,
        });
        log::warn!(
            "run {}: call {} attempt {} failed ({}); retrying in {} ms",
            self.run_id,
            msg.key,
            msg.attempt,
            msg.error.message,
            msg.delay_ms
        );
        // Text streamed by the failed attempt is void: flush what is pending first so the
        // `call_retry` event marks exactly where it ends.
        self.flush_tokens();
        self.publish(vec![("call_retry".to_string(), data)]);
        self.commit(ctx);
    }
}

impl Handler<CallNoted> for Deliberation {
    type Result = ();
    fn handle(&mut self, msg: CallNoted, ctx: &mut Context<Self>) {
        let Some((_, spec)) = self.in_flight.get(&msg.key) else { return };
        let mut data = json!({
            "key": msg.key, "model": spec.model, "stage": spec.stage, "role": spec.role,
        });
        let event = match msg.note {
            CallNote::Provider(Notice::StructuredRefused { route, message }) => {
                data["route"] = json!(route);
                data["message"] = json!(message);
                "structured_output_refused"
            }
            CallNote::Fitted { context_tokens, cuts, fits, after_refusal } => {
                log::info!(
                    "run {}: call {} fitted into {} tokens: {} cut(s){}",
                    self.run_id,
                    msg.key,
                    context_tokens,
                    cuts.len(),
                    if fits { "" } else { ", and it still does not fit" }
                );
                data["contextTokens"] = json!(context_tokens);
                data["cuts"] = json!(cuts);
                data["fits"] = json!(fits);
                data["afterRefusal"] = json!(after_refusal);
                "prompt_fitted"
            }
            CallNote::Waiting { route } => {
                log::debug!("run {}: call {} waits for a turn at {route}", self.run_id, msg.key);
                data["route"] = json!(route);
                "call_waiting"
            }
            CallNote::Turn => {
                log::debug!("run {}: call {} got its turn", self.run_id, msg.key);
                "call_turn"
            }
        };
        self.publish(vec![(event.to_string(), data)]);
        self.commit(ctx);
    }
}

impl Handler<CancelRun> for Deliberation {
    type Result = ();
    fn handle(&mut self, msg: CancelRun, ctx: &mut Context<Self>) {
        self.flush_tokens();
        if msg.shutdown {
            log::warn!("run {} interrupted: the server is shutting down", self.run_id);
            let reason = "interrupted: the server shut down before the run finished";
            self.end(ctx, RunStatus::Interrupted, Some(reason.into()), None);
        } else {
            log::info!("run {} cancelled ({})", self.run_id, msg.reason);
            self.end(ctx, RunStatus::Cancelled, Some(format!("cancelled by {}", msg.reason)), None);
        }
    }
}
