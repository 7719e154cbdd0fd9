//! The ideal of a run, measured rather than assumed: the run's mode state machine (the same
//! `modes/` code the engine drives) is driven here straight against the sim-server, through
//! the same HTTP client the server uses, with no actor, database or socket in between.
//!
//! Given the real run's id it makes the very same calls: the mode's shuffles are seeded from
//! the run id and the sim answers deterministically per prompt, so every prompt, answer and
//! streamed chunk (hence every delivered latency) is the real run's. The critical path is then
//! the sum, along the chain of replies that started each stage, of the measured call times:
//! "the sum over its stages of the slowest model latency", as the sim really delivered it. This
//! executor's own glue is not counted in it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use serde_json::Value;

use super::BenchError;
use crate::config::DEFAULT_STAGE_TIMEOUT_MS;
use crate::modes::{
    self, CallError, CallErrorKind, CallReply, Defaults, Effect, RunContext, Structured,
};
use crate::providers::{BoxFuture, ChatRequest, ChatResponse, Provider, StructuredOutput};

/// What the reference execution of one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Ideal {
    /// Each stage's slowest call, summed along the run's chain of stages.
    pub critical_path: Duration,
    /// Model calls made.
    pub calls: usize,
    /// The longest single call.
    pub slowest_call: Duration,
}

/// A finished call: its key and model, when its stage could start on the critical path, how
/// long it took, and its outcome.
type Done = (String, String, Duration, Duration, Result<ChatResponse, CallError>);

/// Runs `request` as run `run_id` against the sim-server through `provider` (its HTTP
/// client), as the server would with no overhead at all.
pub async fn measure(
    provider: &Arc<dyn Provider>,
    request: &Value,
    run_id: &str,
    structured: bool,
) -> Result<Ideal, BenchError> {
    let defaults = Defaults {
        offline: true,
        stage_timeout_ms: DEFAULT_STAGE_TIMEOUT_MS,
        ..Defaults::default()
    };
    let req = modes::validate(request, &defaults)
        .map_err(|e| BenchError::Run(format!("the benchmark's request is invalid: {e}")))?;
    let ctx = RunContext {
        run_id: run_id.to_string(),
        conversation_id: uuid::Uuid::now_v7().to_string(),
        message_id: uuid::Uuid::now_v7().to_string(),
        question: req.question.clone(),
        history: Vec::new(),
        new_conversation: true,
        seed: modes::common::seed_from_run_id(run_id),
        // As the server's route asks: every model for JSON, or none.
        structured: if structured {
            Structured::models(&req.models)
        } else {
            Structured::default()
        },
        material: "".into(),
    };
    let mut mode = modes::instantiate(&req, ctx).map_err(BenchError::Run)?;
    let mut pending: FuturesUnordered<BoxFuture<'static, Done>> = FuturesUnordered::new();
    let mut ideal = Ideal { critical_path: Duration::ZERO, calls: 0, slowest_call: Duration::ZERO };
    let mut finished = false;
    let mut effects = mode.start();
    // When the reply that produced `effects` arrived, on the critical path.
    let mut trigger = Duration::ZERO;
    loop {
        for effect in effects.drain(..) {
            match effect {
                Effect::Call(spec) => {
                    ideal.calls += 1;
                    let provider = provider.clone();
                    let at = trigger;
                    pending.push(
                        async move {
                            let t = Instant::now();
                            // Stream like the engine does; the deltas themselves are not needed.
                            let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
                            let request = ChatRequest {
                                schema: spec.schema,
                                structured: if structured {
                                    StructuredOutput::JsonSchema
                                } else {
                                    StructuredOutput::Off
                                },
                                ..ChatRequest::new(spec.model.clone(), spec.messages)
                            };
                            let limit = Duration::from_millis(spec.timeout_ms);
                            let result =
                                match tokio::time::timeout(limit, provider.chat(request, Some(tx)))
                                    .await
                                {
                                    Ok(r) => r,
                                    Err(_) => Err(CallError::new(
                                        CallErrorKind::Timeout,
                                        None,
                                        "no answer in time",
                                    )),
                                };
                            (spec.key, spec.model, at, t.elapsed(), result)
                        }
                        .boxed(),
                    );
                }
                Effect::Finish { .. } => finished = true,
                Effect::Fail { message } => {
                    return Err(BenchError::Run(format!("the reference run failed: {message}")))
                }
                // Events, rows, titles, review flags: the engine's work, not the models'. The
                // only timer (Delphi's global limit) is far longer than any benchmark run.
                _ => {}
            }
        }
        let Some((key, model, at, took, result)) = pending.next().await else { break };
        trigger = at + took;
        ideal.critical_path = ideal.critical_path.max(trigger);
        ideal.slowest_call = ideal.slowest_call.max(took);
        let (result, usage) = match result {
            Ok(r) => (Ok(r.text), r.usage),
            Err(e) => (Err(e), None),
        };
        let reply =
            CallReply { key, model, response_time_ms: took.as_millis() as u64, result, usage };
        effects = mode.on_reply(reply);
    }
    if !finished {
        return Err(BenchError::Run("the reference run ended without an answer".into()));
    }
    Ok(ideal)
}
