//! One ModelCall actor per model per stage: runs a provider request with the call's timeout,
//! forwards streamed deltas to its Deliberation, reports the outcome, and stops.
//!
//! Stopping the actor (on cancel or when the run fails) drops the request future, and with it
//! the HTTP connection: that is how a cancelled run stops its in-flight calls.

use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::mpsc;

use crate::modes::{CallError, CallErrorKind, CallReply, CallSpec};
use crate::providers::Providers;

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

/// Abandon the call now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopCall {}

pub struct ModelCall {
    spec: Option<CallSpec>,
    providers: Providers,
    finished: Recipient<CallFinished>,
    deltas: Recipient<CallDelta>,
}

impl ModelCall {
    pub fn new(
        spec: CallSpec,
        providers: Providers,
        finished: Recipient<CallFinished>,
        deltas: Recipient<CallDelta>,
    ) -> Self {
        ModelCall { spec: Some(spec), providers, finished, deltas }
    }
}

impl Actor for ModelCall {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let Some(spec) = self.spec.take() else { return };
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let deltas = self.deltas.clone();
        let key = spec.key.clone();
        ctx.spawn(
            async move {
                while let Some(delta) = rx.recv().await {
                    deltas.do_send(CallDelta { key: key.clone(), delta });
                }
            }
            .into_actor(self),
        );
        let request = self.providers.chat(&spec.model, spec.messages.clone(), Some(tx));
        let timeout = Duration::from_millis(spec.timeout_ms);
        let started = Instant::now();
        ctx.spawn(
            async move {
                let outcome = tokio::time::timeout(timeout, request).await;
                let elapsed = started.elapsed().as_millis() as u64;
                let (result, usage) = match outcome {
                    Ok(Ok(resp)) => (Ok(resp.text), resp.usage),
                    Ok(Err(e)) => (Err(e), None),
                    Err(_) => (
                        Err(CallError {
                            kind: CallErrorKind::Timeout,
                            status: None,
                            message: format!("no answer within {} ms", timeout.as_millis()),
                        }),
                        None,
                    ),
                };
                CallReply {
                    key: spec.key,
                    model: spec.model,
                    response_time_ms: elapsed,
                    result,
                    usage,
                }
            }
            .into_actor(self)
            .map(|reply, act, ctx| {
                act.finished.do_send(CallFinished { reply });
                ctx.stop();
            }),
        );
    }
}

impl Handler<StopCall> for ModelCall {
    type Result = ();
    fn handle(&mut self, _: StopCall, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
