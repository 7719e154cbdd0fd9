//! One ModelCall actor per model per stage: waits for its turn at a server that caps its
//! concurrent calls, runs a provider request with the call's timeout (timed from that turn),
//! forwards streamed deltas to its Deliberation, reports the outcome, and stops.
//!
//! Transient failures (429, 5xx, broken connections) are retried with backoff inside the call's
//! timeout budget (see [`super::retry`]); each retry is reported so watchers can reset text
//! streamed by the failed attempt.
//!
//! Stopping the actor (on cancel or when the run fails) drops the request future, and with it
//! the HTTP connection: that is how a cancelled run stops its in-flight calls.
//!
//! Every attempt asks for at most the call's output cap (`max_tokens`), resolved by its
//! Deliberation from the run's mode and the call's role.
//!
//! Every call that ends, and every retry, is counted in [`crate::metrics`]: latency, error
//! kind, and the tokens and cost of the reply. A call stopped that way is not.

use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::mpsc;

use super::fit::{self, Cut, Fitted};
use crate::modes::{CallError, CallErrorKind, CallReply, CallSpec, ChatMessage};
use crate::providers::{Ask, Listeners, Notice, Providers};

use super::retry::RetryPolicy;
use super::spend::Used;
use crate::modes::Usage;
use crate::providers::StructuredOutput;

/// A call finished (successfully or not).
#[derive(Message)]
#[rtype(result = "()")]
pub struct CallFinished {
    pub reply: CallReply,
}

/// A piece of streamed text.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CallDelta {
    pub key: String,
    pub delta: String,
}

/// An attempt failed and another follows after `delay_ms` (text streamed so far is void).
#[derive(Message)]
#[rtype(result = "()")]
pub struct CallRetrying {
    pub key: String,
    /// The attempt that failed (1-based).
    pub attempt: u32,
    pub delay_ms: u64,
    pub error: CallError,
    /// What the failed attempt used, for a spending guard: what its error suggests, or
    /// nothing for a reply asked again ([`REASKED`]), whose tokens the call's reply counts.
    pub used: Used,
}

/// Why a reply constrained to its schema is asked for once more: it does not hold the JSON
/// the schema describes (cut off at the cap before the object closed, or breaking a rule the
/// server's grammar cannot enforce, such as a label given twice).
pub const REASKED: &str = "the reply did not hold the JSON it was asked for (cut off at its \
                           length cap, or breaking a rule of its schema); asking once more";

/// Something the run should say about a call as it goes (an event).
#[derive(Message)]
#[rtype(result = "()")]
pub struct CallNoted {
    pub key: String,
    pub note: CallNote,
}

/// What [`CallNoted`] says.
#[derive(Debug, Clone, PartialEq)]
pub enum CallNote {
    /// From the provider layer (a refused `response_format`).
    Provider(Notice),
    /// The prompt was fitted into the model's context: what was cut, and whether the server
    /// had refused it for its length first.
    Fitted { context_tokens: u32, cuts: Vec<Cut>, fits: bool, after_refusal: bool },
    /// Every turn at the model's server is taken (its route caps its concurrent calls): the
    /// call waits for one, its time not yet running.
    Waiting { route: String },
    /// The waiting call's turn came: it is sent, and its time runs from now.
    Turn,
}

/// Abandon the call now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopCall {}

pub struct ModelCall {
    spec: Option<CallSpec>,
    max_tokens: u32,
    providers: Providers,
    retry: RetryPolicy,
    finished: Recipient<CallFinished>,
    deltas: Recipient<CallDelta>,
    retrying: Recipient<CallRetrying>,
    noted: Recipient<CallNoted>,
}

/// Where a ModelCall reports to (its Deliberation).
pub struct CallOwner {
    pub finished: Recipient<CallFinished>,
    pub deltas: Recipient<CallDelta>,
    pub retrying: Recipient<CallRetrying>,
    pub noted: Recipient<CallNoted>,
}

impl ModelCall {
    /// A call of `spec` whose answer may run to `max_tokens`.
    pub fn new(
        spec: CallSpec,
        max_tokens: u32,
        providers: Providers,
        retry: RetryPolicy,
        owner: CallOwner,
    ) -> Self {
        ModelCall {
            spec: Some(spec),
            max_tokens,
            providers,
            retry,
            finished: owner.finished,
            deltas: owner.deltas,
            retrying: owner.retrying,
            noted: owner.noted,
        }
    }
}

/// The messages and cap an attempt sends: the call's own, or fitted to the context.
struct Prompt {
    messages: Vec<ChatMessage>,
    max_tokens: u32,
}

/// A prompt longer than this is fitted off the actor's thread: fitting scans and copies it
/// a few dozen times (an attached file may make it megabytes long).
const LONG_PROMPT_BYTES: usize = 256 * 1024;

/// [`Prompt::fitted`], on a blocking thread when the prompt is long, so the runs sharing this
/// thread keep streaming meanwhile.
async fn fit_prompt(
    spec: &CallSpec,
    max_tokens: u32,
    context: u32,
    scale: f64,
    after_refusal: bool,
    noted: &Recipient<CallNoted>,
) -> Prompt {
    let tell = |to: &Recipient<CallNoted>, key: &str, note| {
        to.do_send(CallNoted { key: key.to_string(), note })
    };
    let long = spec.messages.iter().map(|m| m.content.len()).sum::<usize>() > LONG_PROMPT_BYTES;
    if !long {
        let note = |n| tell(noted, &spec.key, n);
        return Prompt::fitted(spec, max_tokens, context, scale, after_refusal, &note);
    }
    let (owned, to) = (spec.clone(), noted.clone());
    let fitted = tokio::task::spawn_blocking(move || {
        let note = |n| tell(&to, &owned.key, n);
        Prompt::fitted(&owned, max_tokens, context, scale, after_refusal, &note)
    });
    fitted.await.unwrap_or_else(|_| Prompt { messages: spec.messages.clone(), max_tokens })
}

impl Prompt {
    /// Fits the call's prompt into `context`, weighed at `scale` (`after_refusal`: the server
    /// refused it for its length); the cuts, if any, are noted.
    fn fitted(
        spec: &CallSpec,
        max_tokens: u32,
        context: u32,
        scale: f64,
        after_refusal: bool,
        note: &impl Fn(CallNote),
    ) -> Prompt {
        let Fitted { messages, max_tokens, cuts, fits } =
            fit::fit(&spec.messages, &spec.material, context, max_tokens, scale);
        if !cuts.is_empty() || !fits {
            note(CallNote::Fitted { context_tokens: context, cuts, fits, after_refusal });
        }
        Prompt { messages, max_tokens }
    }
}

impl Actor for ModelCall {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let Some(spec) = self.spec.take() else { return };
        let deltas = self.deltas.clone();
        let providers = self.providers.clone();
        let policy = self.retry;
        let max_tokens = self.max_tokens;
        let retrying = self.retrying.clone();
        let noted = self.noted.clone();
        let timeout = Duration::from_millis(spec.timeout_ms);
        ctx.spawn(
            async move {
                let note =
                    |note: CallNote| noted.do_send(CallNoted { key: spec.key.clone(), note });
                // A call to a server that caps its concurrent calls waits for its turn before
                // its clock starts: other runs' calls queued ahead of it are not this model being
                // slow. Watchers are told it waits, and when it is sent. A cancelled run stops
                // waiting (this future is dropped); a retry's wait for a turn counts.
                let turn = match providers.try_turn(&spec.model) {
                    Some(turn) => turn,
                    None => {
                        let route = providers.route_of(&spec.model).unwrap_or_default();
                        note(CallNote::Waiting { route });
                        let turn = providers.turn(&spec.model).await;
                        note(CallNote::Turn);
                        turn
                    }
                };
                let mut turn = Some(turn);
                let started = Instant::now();
                let deadline = started + timeout;
                // The context is asked once per model (and remembered); the wait counts
                // against the call's time.
                let context = tokio::time::timeout(timeout, providers.context_tokens(&spec.model))
                    .await
                    .ok()
                    .flatten();
                let mut prompt = match context {
                    Some(c) => fit_prompt(&spec, max_tokens, c, 1.0, false, &noted).await,
                    None => Prompt { messages: spec.messages.clone(), max_tokens },
                };
                // A server that refuses the prompt for its length is asked once more with the
                // prompt fitted to what it said.
                let mut refitted = false;
                let (ntx, mut nrx) = mpsc::unbounded_channel::<Notice>();
                let timed_out = || {
                    CallError::new(
                        CallErrorKind::Timeout,
                        None,
                        format!("no answer within {} ms", timeout.as_millis()),
                    )
                };
                let forward = |delta: String| {
                    deltas.do_send(CallDelta { key: spec.key.clone(), delta });
                };
                let mut attempt = 1u32;
                // A constrained reply that does not fit its schema is asked for again once;
                // what the first used is counted in the call's reply.
                let mut reasked = false;
                let mut spent: Option<Usage> = None;
                let (result, usage) = loop {
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    let (tx, rx) = mpsc::unbounded_channel::<String>();
                    let ask = Ask {
                        model: spec.model.clone(),
                        messages: prompt.messages.clone(),
                        max_tokens: prompt.max_tokens,
                        // A reply the schema allows must fit the cap, or it ends cut off.
                        schema: spec.schema.as_ref().map(|s| s.within(prompt.max_tokens)),
                        turn: turn.take(),
                    };
                    let listen = Listeners { deltas: Some(tx), notices: Some(ntx.clone()) };
                    let request = providers.chat_capped(ask, listen);
                    let outcome =
                        stream_attempt(tokio::time::timeout(remaining, request), rx, &forward)
                            .await;
                    while let Ok(n) = nrx.try_recv() {
                        note(CallNote::Provider(n));
                    }
                    let e = match outcome {
                        Ok(Ok(resp)) => {
                            let usage = sum(spent, resp.usage);
                            // A reply the server held to its schema by a grammar, that still
                            // does not fit it, is asked for once more (the second stands
                            // whatever it holds; the readers judge it).
                            let unreadable = !reasked
                                && providers.structured_output(&spec.model)
                                    == StructuredOutput::JsonSchema
                                && spec
                                    .schema
                                    .as_ref()
                                    .is_some_and(|s| s.read(&resp.text).is_none());
                            if !unreadable || deadline <= Instant::now() {
                                break (Ok(resp.text), usage);
                            }
                            reasked = true;
                            spent = usage;
                            retrying.do_send(CallRetrying {
                                key: spec.key.clone(),
                                attempt,
                                delay_ms: 0,
                                error: CallError::new(CallErrorKind::Malformed, None, REASKED),
                                used: Used::Nothing,
                            });
                            attempt += 1;
                            continue;
                        }
                        Ok(Err(e)) => e,
                        Err(_) => break (Err(timed_out()), spent),
                    };
                    if let Some((tokens, said)) = fit::overflow(&e).filter(|_| !refitted) {
                        refitted = true;
                        // What the server counted, against what it was weighed at, corrects
                        // the weighing (never below it).
                        let weighed = fit::estimate(&prompt.messages, 1.0) as f64;
                        let scale =
                            tokens.map_or(1.25, |t| t as f64 / weighed.max(1.0) * 1.05).max(1.0);
                        if let Some(c) = said.or(context) {
                            prompt = fit_prompt(&spec, max_tokens, c, scale, true, &noted).await;
                            continue;
                        }
                    }
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    let seed = crate::modes::common::seed_from_run_id(&spec.key)
                        ^ u64::from(attempt)
                        ^ started.elapsed().as_nanos() as u64;
                    match policy.next(attempt, &e, remaining, seed) {
                        Some(wait) => {
                            crate::metrics::global().call_retried(&spec.model);
                            retrying.do_send(CallRetrying {
                                key: spec.key.clone(),
                                attempt,
                                delay_ms: wait.as_millis() as u64,
                                used: Used::of_error(&e),
                                error: e,
                            });
                            tokio::time::sleep(wait).await;
                            attempt += 1;
                        }
                        None => break (Err(e), spent),
                    }
                };
                let reply = CallReply {
                    key: spec.key,
                    model: spec.model,
                    response_time_ms: started.elapsed().as_millis() as u64,
                    result,
                    usage,
                };
                crate::metrics::global().call_finished(&reply);
                reply
            }
            .into_actor(self)
            .map(|reply, act, ctx| {
                act.finished.do_send(CallFinished { reply });
                ctx.stop();
            }),
        );
    }
}

/// What two attempts used together (either may not have said).
fn sum(a: Option<Usage>, b: Option<Usage>) -> Option<Usage> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.plus(b)),
        (a, b) => a.or(b),
    }
}

/// Runs one attempt while forwarding its streamed text, then forwards what is still queued
/// before answering: every delta of an attempt reaches the Deliberation before the attempt's
/// retry or the call's reply does (a delta after the reply would be dropped, and one after a
/// retry notice would be counted as the next attempt's text).
async fn stream_attempt<F: std::future::Future>(
    request: F,
    mut rx: mpsc::UnboundedReceiver<String>,
    forward: &impl Fn(String),
) -> F::Output {
    let mut request = std::pin::pin!(request);
    let mut open = true;
    let outcome = loop {
        tokio::select! {
            biased;
            delta = rx.recv(), if open => match delta {
                Some(d) => forward(d),
                None => open = false,
            },
            outcome = &mut request => break outcome,
        }
    };
    while let Ok(d) = rx.try_recv() {
        forward(d);
    }
    outcome
}

impl Handler<StopCall> for ModelCall {
    type Result = ();
    fn handle(&mut self, _: StopCall, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
