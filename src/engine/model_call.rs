//! One ModelCall actor per model per stage: runs a provider request with the call's timeout,
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

use crate::modes::{CallError, CallErrorKind, CallReply, CallSpec};
use crate::providers::Providers;

use super::retry::RetryPolicy;

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
}

/// Where a ModelCall reports to (its Deliberation).
pub struct CallOwner {
    pub finished: Recipient<CallFinished>,
    pub deltas: Recipient<CallDelta>,
    pub retrying: Recipient<CallRetrying>,
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
        }
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
        let timeout = Duration::from_millis(spec.timeout_ms);
        let started = Instant::now();
        ctx.spawn(
            async move {
                let deadline = started + timeout;
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
                let (result, usage) = loop {
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    let (tx, rx) = mpsc::unbounded_channel::<String>();
                    let request = providers.chat_capped(
                        &spec.model,
                        spec.messages.clone(),
                        max_tokens,
                        Some(tx),
                    );
                    let outcome =
                        stream_attempt(tokio::time::timeout(remaining, request), rx, &forward)
                            .await;
                    let e = match outcome {
                        Ok(Ok(resp)) => break (Ok(resp.text), resp.usage),
                        Ok(Err(e)) => e,
                        Err(_) => break (Err(timed_out()), None),
                    };
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
                                error: e,
                            });
                            tokio::time::sleep(wait).await;
                            attempt += 1;
                        }
                        None => break (Err(e), None),
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
