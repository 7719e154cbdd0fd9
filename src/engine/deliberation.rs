//! The Deliberation actor: one per run, the supervisor that executes what its mode asks.
//!
//! It owns the run's sequence numbers, starts a ModelCall actor per requested call, feeds
//! replies back to the mode, publishes events through the Hub, sends stage rows and events to
//! the Store, and ends the run as completed, failed or cancelled. It holds no prompt text and
//! no SQL: those belong to `modes/` and `store/`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::{json, Value};

use super::events::{is_transient, EventFrame, ProgressMark};
use super::hub::{CancelRun, Hub, Publish, RunEnded};
use super::model_call::{CallDelta, CallFinished, CallOwner, CallRetrying, ModelCall, StopCall};
use super::retry::RetryPolicy;
use crate::modes::{CallReply, CallSpec, Effect, Mode, Usage};
use crate::providers::Providers;
use crate::store::{
    self, AppendEvents, FlagRun, RunFinish, SetTitle, Store, StoreStage, StoredEvent,
};

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
    pub hub: Addr<Hub>,
    pub store: Store,
    pub providers: Providers,
    /// How often streamed deltas are flushed as `token` events.
    pub token_flush: Duration,
    /// How long calls still in flight (a title) may hold a run that has its answer.
    pub finish_grace: Duration,
    pub retry: RetryPolicy,
}

pub struct Deliberation {
    run_id: String,
    message_id: String,
    conversation_id: String,
    mode: Box<dyn Mode>,
    hub: Addr<Hub>,
    store: Store,
    providers: Providers,
    token_flush: Duration,
    finish_grace: Duration,
    retry: RetryPolicy,
    seq: i64,
    stage_position: i32,
    phase: Phase,
    in_flight: HashMap<String, (Addr<ModelCall>, CallSpec)>,
    /// Deltas received since the last flush, by call key (ordered for stable output).
    pending_tokens: BTreeMap<String, String>,
    usage: Usage,
    cost_seen: bool,
}

impl Deliberation {
    pub fn new(setup: DeliberationSetup) -> Self {
        Deliberation {
            run_id: setup.run_id,
            message_id: setup.message_id,
            conversation_id: setup.conversation_id,
            mode: setup.mode,
            hub: setup.hub,
            store: setup.store,
            providers: setup.providers,
            token_flush: setup.token_flush,
            finish_grace: setup.finish_grace,
            retry: setup.retry,
            seq: 0,
            stage_position: 0,
            phase: Phase::Running,
            in_flight: HashMap::new(),
            pending_tokens: BTreeMap::new(),
            usage: Usage::default(),
            cost_seen: false,
        }
    }

    /// Assigns sequence numbers, persists the durable events and hands all to the Hub.
    fn publish(&mut self, events: Vec<(String, Value)>) {
        if events.is_empty() {
            return;
        }
        let mut frames = Vec::with_capacity(events.len());
        let mut durable = Vec::new();
        for (event, data) in events {
            self.seq += 1;
            let mark = ProgressMark::of(&event, &data);
            if !is_transient(&event) {
                durable.push(StoredEvent {
                    seq: self.seq,
                    event: event.clone(),
                    data: data.clone(),
                });
            }
            frames.push(Arc::new(
                EventFrame::new(&self.run_id, self.seq, &event, data).with_mark(mark),
            ));
        }
        if !durable.is_empty() {
            self.store.write_later(AppendEvents { run_id: self.run_id.clone(), events: durable });
        }
        self.hub.do_send(Publish { run_id: self.run_id.clone(), frames });
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
        for effect in effects {
            if self.phase == Phase::Ending {
                break;
            }
            match effect {
                Effect::Call(spec) => {
                    events.push((
                        "call_start".to_string(),
                        json!({
                            "key": spec.key, "model": spec.model,
                            "stage": spec.stage, "role": spec.role,
                        }),
                    ));
                    let owner = CallOwner {
                        finished: ctx.address().recipient(),
                        deltas: ctx.address().recipient(),
                        retrying: ctx.address().recipient(),
                    };
                    let addr =
                        ModelCall::new(spec.clone(), self.providers.clone(), self.retry, owner)
                            .start();
                    self.in_flight.insert(spec.key.clone(), (addr, spec));
                }
                Effect::Emit { event, data } => events.push((event, data)),
                Effect::Store(row) => {
                    self.store.write_later(StoreStage {
                        message_id: self.message_id.clone(),
                        position: self.stage_position,
                        row,
                    });
                    self.stage_position += 1;
                }
                Effect::SetTitle(title) => self
                    .store
                    .write_later(SetTitle { conversation_id: self.conversation_id.clone(), title }),
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
                                act.end(ctx, "completed", None, Some(answer));
                            }
                        });
                    }
                }
                Effect::FlagForReview { reason } => {
                    self.store.write_later(FlagRun { run_id: self.run_id.clone(), reason })
                }
                Effect::Timer { key, after_ms } => {
                    ctx.run_later(Duration::from_millis(after_ms), move |act, ctx| {
                        if act.phase != Phase::Ending {
                            let effects = act.mode.on_timer(&key);
                            act.execute(effects, ctx);
                        }
                    });
                }
                Effect::Fail { message } => {
                    self.publish(std::mem::take(&mut events));
                    self.end(ctx, "failed", Some(message), None);
                    return;
                }
            }
        }
        self.publish(events);
        self.check_done(ctx);
    }

    fn check_done(&mut self, ctx: &mut Context<Self>) {
        if !self.in_flight.is_empty() {
            return;
        }
        match &self.phase {
            Phase::Finishing { answer } => {
                let answer = answer.clone();
                self.end(ctx, "completed", None, Some(answer));
            }
            Phase::Running => {
                // A mode must always have a call in flight or have ended; anything else
                // would leave the run hanging forever.
                log::error!("run {}: mode stopped without an answer", self.run_id);
                self.end(ctx, "failed", Some("internal error: the mode stopped".into()), None);
            }
            Phase::Ending => {}
        }
    }

    /// Ends the run: stops calls, writes the outcome, and only then publishes the terminal
    /// event, so a client that reads the result on `complete` finds it stored.
    fn end(
        &mut self,
        ctx: &mut Context<Self>,
        status: &str,
        error: Option<String>,
        answer: Option<String>,
    ) {
        if self.phase == Phase::Ending {
            return;
        }
        self.phase = Phase::Ending;
        for (_, (addr, _)) in self.in_flight.drain() {
            addr.do_send(StopCall {});
        }
        self.pending_tokens.clear();
        let (event, data) = match status {
            "completed" => ("complete", json!({})),
            "cancelled" => ("cancelled", json!({ "message": error.clone().unwrap_or_default() })),
            _ => ("error", json!({ "message": error.clone().unwrap_or_default() })),
        };
        self.seq += 1;
        let seq = self.seq;
        self.store.write_later(AppendEvents {
            run_id: self.run_id.clone(),
            events: vec![StoredEvent { seq, event: event.to_string(), data: data.clone() }],
        });
        let finished_at = store::now_ms();
        let finish = RunFinish {
            run_id: self.run_id.clone(),
            message_id: self.message_id.clone(),
            status: status.to_string(),
            error,
            answer,
            prompt_tokens: self.usage.prompt_tokens as i64,
            completion_tokens: self.usage.completion_tokens as i64,
            cost: self.cost_seen.then_some(self.usage.cost.unwrap_or(0.0)),
            finished_at,
        };
        let store = self.store.clone();
        let status = status.to_string();
        ctx.spawn(
            async move {
                if let Err(e) = store.finish_run(finish).await {
                    log::error!("could not store the end of a run: {e}");
                }
            }
            .into_actor(self)
            .map(move |_, act, ctx| {
                let frame = Arc::new(EventFrame::new(&act.run_id, seq, event, data));
                act.hub.do_send(Publish { run_id: act.run_id.clone(), frames: vec![frame] });
                act.hub.do_send(RunEnded { run_id: act.run_id.clone(), status, finished_at });
                ctx.stop();
            }),
        );
    }

    fn add_usage(&mut self, reply: &CallReply) {
        if let Some(u) = reply.usage {
            self.usage.prompt_tokens += u.prompt_tokens;
            self.usage.completion_tokens += u.completion_tokens;
            if let Some(c) = u.cost {
                self.cost_seen = true;
                self.usage.cost = Some(self.usage.cost.unwrap_or(0.0) + c);
            }
        }
    }
}

impl Actor for Deliberation {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        log::info!("run {} started", self.run_id);
        ctx.run_interval(self.token_flush, |act, _| act.flush_tokens());
        let effects = self.mode.start();
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
        let effects = self.mode.on_reply(reply);
        self.execute(effects, ctx);
    }
}

impl Handler<CallRetrying> for Deliberation {
    type Result = ();
    fn handle(&mut self, msg: CallRetrying, _: &mut Context<Self>) {
        let Some((_, spec)) = self.in_flight.get(&msg.key) else { return };
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
    }
}

impl Handler<CancelRun> for Deliberation {
    type Result = ();
    fn handle(&mut self, msg: CancelRun, ctx: &mut Context<Self>) {
        self.flush_tokens();
        if msg.shutdown {
            log::warn!("run {} interrupted: the server is shutting down", self.run_id);
            let reason = "interrupted: the server shut down before the run finished";
            self.end(ctx, "interrupted", Some(reason.into()), None);
        } else {
            log::info!("run {} cancelled ({})", self.run_id, msg.reason);
            self.end(ctx, "cancelled", Some(format!("cancelled by {}", msg.reason)), None);
        }
    }
}
