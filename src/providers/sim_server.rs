//! `conclave sim-server`: the sim models over the OpenAI-compatible HTTP API, so tests and
//! benchmarks drive the real HTTP client path.
//!
//! `POST /v1/chat/completions` (streaming and not), `GET /v1/models`, and `GET /sim/stats`:
//! counters of requests, completed answers, and streams whose client went away before the end
//! (`aborted`), which is how a test sees a cancelled run drop its connections.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::{web, App, HttpResponse, HttpServer};
use bytes::Bytes;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::sim::{simulated_failure, Behaviour, SimProvider};
use super::{BoxFuture, ChatRequest, ChatResponse, Provider};
use crate::modes::{CallError, ChatMessage};

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    completed: AtomicU64,
    aborted: AtomicU64,
}

/// A cheap, cloneable view of the server's counters.
#[derive(Clone, Default)]
pub struct SimStats(Arc<Counters>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StatsSnapshot {
    pub requests: u64,
    pub completed: u64,
    pub aborted: u64,
}

impl SimStats {
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.0.requests.load(Ordering::SeqCst),
            completed: self.0.completed.load(Ordering::SeqCst),
            aborted: self.0.aborted.load(Ordering::SeqCst),
        }
    }
}

/// Counts a stream as aborted unless it reached its end.
struct StreamGuard {
    stats: SimStats,
    finished: bool,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.stats.0.aborted.fetch_add(1, Ordering::SeqCst);
        }
    }
}

struct State {
    sim: SimProvider,
    stats: SimStats,
}

/// Binds the sim-server to `listener`; the returned server must be awaited (or spawned).
pub fn build(listener: TcpListener, sim: SimProvider) -> std::io::Result<(Server, SimStats)> {
    let stats = SimStats::default();
    let state = web::Data::new(State { sim, stats: stats.clone() });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(web::JsonConfig::default().limit(8 << 20).error_handler(|err, _| {
                let body = json!({ "error": { "message": format!("invalid request: {err}") } });
                actix_web::error::InternalError::from_response(
                    err,
                    HttpResponse::BadRequest().json(body),
                )
                .into()
            }))
            .route("/v1/chat/completions", web::post().to(completions))
            .route("/v1/models", web::get().to(models))
            .route("/sim/stats", web::get().to(stats_route))
    })
    .workers(2)
    .disable_signals()
    .shutdown_timeout(1)
    .listen(listener)?
    .run();
    Ok((server, stats))
}

fn bad_request(message: &str) -> HttpResponse {
    HttpResponse::BadRequest().json(json!({ "error": { "message": message } }))
}

fn failure(e: &CallError) -> HttpResponse {
    let status = actix_web::http::StatusCode::from_u16(e.status.unwrap_or(500))
        .unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR);
    HttpResponse::build(status).json(json!({ "error": { "message": e.message } }))
}

fn usage_json(r: &ChatResponse) -> Value {
    match r.usage {
        Some(u) => {
            json!({ "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                           "total_tokens": u.prompt_tokens + u.completion_tokens })
        }
        None => Value::Null,
    }
}

fn chunk(model: &str, delta: Value) -> Bytes {
    let v = json!({ "object": "chat.completion.chunk", "model": model,
                    "choices": [{ "index": 0, "delta": delta }] });
    Bytes::from(format!("data: {v}\n\n"))
}

async fn completions(state: web::Data<State>, body: web::Json<Value>) -> HttpResponse {
    state.stats.0.requests.fetch_add(1, Ordering::SeqCst);
    let Some(model) = body.get("model").and_then(Value::as_str).map(str::to_string) else {
        return bad_request("`model` is required");
    };
    let messages: Vec<ChatMessage> = match body.get("messages").cloned().map(serde_json::from_value)
    {
        Some(Ok(m)) => m,
        _ => return bad_request("`messages` must be a list of {role, content}"),
    };
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if let Some(e) = state.sim.transient_failure(&model, &messages) {
        let mut resp = failure(&e);
        if let Some(ms) = e.retry_after_ms {
            if let Ok(v) =
                actix_web::http::header::HeaderValue::from_str(&(ms / 1000).max(1).to_string())
            {
                resp.headers_mut().insert(actix_web::http::header::RETRY_AFTER, v);
            }
        }
        return resp;
    }
    if state.sim.behaviour(&model, &messages) == Behaviour::Fail {
        tokio::time::sleep(state.sim.latency(&model) / 2).await;
        return failure(&simulated_failure(&model));
    }
    let request = ChatRequest { model: model.clone(), messages };
    if !stream {
        return match state.sim.chat(request, None).await {
            Ok(r) => {
                state.stats.0.completed.fetch_add(1, Ordering::SeqCst);
                HttpResponse::Ok().json(json!({
                    "object": "chat.completion", "model": model,
                    "choices": [{ "index": 0, "message": { "role": "assistant", "content": r.text },
                                  "finish_reason": "stop" }],
                    "usage": usage_json(&r),
                }))
            }
            Err(e) => failure(&e),
        };
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let answer = state.sim.chat(request, Some(tx));
    let guard = StreamGuard { stats: state.stats.clone(), finished: false };
    let body = futures_util::stream::unfold(
        StreamState { answer: Some(answer), rx, outcome: None, guard, model, done: false },
        next_chunk,
    );
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .streaming(body)
}

/// How often a stream with nothing to say sends a comment line.
const KEEPALIVE: std::time::Duration = std::time::Duration::from_millis(100);

struct StreamState {
    answer: Option<BoxFuture<'static, Result<ChatResponse, CallError>>>,
    rx: mpsc::UnboundedReceiver<String>,
    outcome: Option<Result<ChatResponse, CallError>>,
    guard: StreamGuard,
    model: String,
    done: bool,
}

/// The next piece of an answer's SSE stream: deltas as they come, then usage and `[DONE]`.
async fn next_chunk(mut st: StreamState) -> Option<(Result<Bytes, actix_web::Error>, StreamState)> {
    if st.done {
        return None;
    }
    loop {
        if st.answer.is_none() {
            // The answer is complete: drain what is left, then close.
            if let Ok(d) = st.rx.try_recv() {
                let c = chunk(&st.model, json!({ "content": d }));
                return Some((Ok(c), st));
            }
            let tail = match st.outcome.take() {
                Some(Ok(r)) => {
                    let usage = json!({ "object": "chat.completion.chunk", "model": st.model,
                                        "choices": [], "usage": usage_json(&r) });
                    format!("data: {usage}\n\ndata: [DONE]\n\n")
                }
                Some(Err(e)) => {
                    format!("data: {}\n\n", json!({ "error": { "message": e.message } }))
                }
                None => "data: [DONE]\n\n".to_string(),
            };
            st.done = true;
            st.guard.finished = true;
            st.guard.stats.0.completed.fetch_add(1, Ordering::SeqCst);
            return Some((Ok(Bytes::from(tail)), st));
        }
        let answer = st.answer.as_mut()?;
        tokio::select! {
            biased;
            // Like real providers, comment lines keep a slow stream alive; writing them is
            // also how the server notices a client that went away.
            _ = tokio::time::sleep(KEEPALIVE) => {
                return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), st));
            }
            d = st.rx.recv() => {
                if let Some(d) = d {
                    let c = chunk(&st.model, json!({ "content": d }));
                    return Some((Ok(c), st));
                }
            }
            outcome = answer => {
                st.outcome = Some(outcome);
                st.answer = None;
            }
        }
    }
}

async fn models() -> HttpResponse {
    let data: Vec<Value> = [
        "sim/alpha",
        "sim/beta",
        "sim/gamma",
        "sim/delta",
        "sim/fail",
        "sim/stall",
        "sim/malformed",
    ]
    .iter()
    .map(|id| json!({ "id": id, "object": "model", "owned_by": "conclave-sim" }))
    .collect();
    HttpResponse::Ok().json(json!({ "object": "list", "data": data }))
}

async fn stats_route(state: web::Data<State>) -> HttpResponse {
    HttpResponse::Ok().json(state.stats.snapshot())
}
