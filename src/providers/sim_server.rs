//! `conclave sim-server`: the sim models over the OpenAI-compatible HTTP API, so tests and
//! benchmarks drive the real HTTP client path.
//!
//! `POST /v1/chat/completions` (streaming and not), `GET /v1/models`, and `GET /sim/stats`:
//! counters of requests, completed answers, streams whose client went away before the end
//! (`aborted`, which is how a test sees a cancelled run drop its connections), connections the
//! server broke off on purpose (`resets`, for `sim/reset…`), and requests in flight now and at
//! most at once (`inFlight`, `maxInFlight`, how a test sees a concurrency cap hold).
//!
//! The wire shapes of the faults: `sim/slowstart…` sends nothing (not even headers) until its
//! start delay has passed; `sim/reset…` sends part of its answer, then closes the connection
//! without ending the response; `sim/empty…` answers `200` with empty content.
//!
//! A request's `max_tokens` (or `max_completion_tokens`) caps the answer as in-process. A
//! `sim/thinker…` model sends its trace as a reasoning model's server does, apart from the
//! answer: in `reasoning_content` deltas before the `content` ones, or in the message's
//! `reasoning_content`.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::{web, App, HttpResponse, HttpServer};
use bytes::Bytes;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::sim::{
    piece_due, pieces, reasoning_parts, simulated_failure, Behaviour, Planned, SimProvider,
};
use super::{BoxFuture, ChatRequest, ChatResponse, StructuredOutput};
use crate::modes::{CallError, CallErrorKind, ChatMessage, ReplySchema, Usage};

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    completed: AtomicU64,
    aborted: AtomicU64,
    resets: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

/// A cheap, cloneable view of the server's counters.
#[derive(Clone, Default)]
pub struct SimStats(Arc<Counters>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsSnapshot {
    pub requests: u64,
    pub completed: u64,
    pub aborted: u64,
    pub resets: u64,
    pub in_flight: u64,
    pub max_in_flight: u64,
}

impl SimStats {
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.0.requests.load(Ordering::SeqCst),
            completed: self.0.completed.load(Ordering::SeqCst),
            aborted: self.0.aborted.load(Ordering::SeqCst),
            resets: self.0.resets.load(Ordering::SeqCst),
            in_flight: self.0.in_flight.load(Ordering::SeqCst),
            max_in_flight: self.0.max_in_flight.load(Ordering::SeqCst),
        }
    }
}

/// A request in flight, from its arrival until its last byte is produced or it is dropped.
///
/// It ends *before* the last byte goes out, so a client that starts its next request only once
/// the previous one has ended never makes the server count both at once.
struct InFlight {
    stats: SimStats,
    ended: bool,
}

impl InFlight {
    fn begin(stats: &SimStats) -> Self {
        let now = stats.0.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.0.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight { stats: stats.clone(), ended: false }
    }

    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.stats.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.end();
    }
}

/// Counts a stream as aborted unless it reached its end (or was reset on purpose).
struct StreamGuard {
    flight: InFlight,
    finished: bool,
}

impl StreamGuard {
    /// The stream ends as meant (a reset on purpose included): no longer in flight, and not
    /// counted as aborted.
    fn end(&mut self) {
        self.finished = true;
        self.flight.end();
    }

    /// The stream reached its end and counts as completed.
    fn complete(&mut self) {
        self.end();
        self.flight.stats.0.completed.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.flight.stats.0.aborted.fetch_add(1, Ordering::SeqCst);
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
            .app_data(web::JsonConfig::default().limit(64 << 20).error_handler(|err, _| {
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
            .route("/props", web::get().to(props))
    })
    .workers(2)
    // Each streamed piece leaves when it is due, as a provider's do.
    .tcp_nodelay(true)
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

fn usage_json(usage: Option<Usage>) -> Value {
    match usage {
        Some(u) => {
            json!({ "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                           "total_tokens": u.prompt_tokens + u.completion_tokens })
        }
        None => Value::Null,
    }
}

/// The end of a stream that answered: its usage, then `[DONE]`.
fn usage_tail(model: &str, usage: Option<Usage>) -> String {
    let usage = json!({ "object": "chat.completion.chunk", "model": model, "choices": [],
                        "usage": usage_json(usage) });
    format!("data: {usage}\n\ndata: [DONE]\n\n")
}

fn chunk(model: &str, delta: Value) -> Bytes {
    let v = json!({ "object": "chat.completion.chunk", "model": model,
                    "choices": [{ "index": 0, "delta": delta }] });
    Bytes::from(format!("data: {v}\n\n"))
}

/// Messages as an OpenAI-compatible server reads them: `content` a text, or a list of parts
/// (`text` parts joined, `image_url` parts with a `data:` URL kept as images).
fn read_messages(value: Value) -> Option<Vec<ChatMessage>> {
    let Value::Array(items) = value else { return None };
    items
        .into_iter()
        .map(|item| {
            let role = item.get("role")?.as_str()?;
            let mut message = match role {
                "system" => ChatMessage::system(""),
                "assistant" => ChatMessage::assistant(""),
                _ => ChatMessage::user(""),
            };
            message.role = role.to_string();
            match item.get("content")? {
                Value::String(text) => message.content = text.clone(),
                Value::Array(parts) => {
                    for part in parts {
                        match part.get("type").and_then(Value::as_str) {
                            Some("text") => message.content.push_str(part.get("text")?.as_str()?),
                            Some("image_url") => {
                                let url = part.pointer("/image_url/url")?.as_str()?;
                                message.images.push(image_of(url)?);
                            }
                            _ => return None,
                        }
                    }
                }
                _ => return None,
            }
            Some(message)
        })
        .collect()
}

fn image_of(url: &str) -> Option<crate::modes::Image> {
    use base64::Engine as _;
    let rest = url.strip_prefix("data:")?;
    let (media_type, data) = rest.split_once(";base64,")?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(data).ok()?;
    Some(crate::modes::Image { media_type: media_type.to_string(), bytes: bytes.into() })
}

async fn completions(state: web::Data<State>, body: web::Json<Value>) -> HttpResponse {
    state.stats.0.requests.fetch_add(1, Ordering::SeqCst);
    let mut flight = InFlight::begin(&state.stats);
    let mut body = body.into_inner();
    let Some(model) = body.get("model").and_then(Value::as_str).map(str::to_string) else {
        return bad_request("`model` is required");
    };
    let Some(messages) = body.get_mut("messages").and_then(|m| read_messages(m.take())) else {
        return bad_request("`messages` must be a list of {role, content}");
    };
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let max_tokens = ["max_tokens", "max_completion_tokens"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_u64))
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
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
    // Nothing at all (not even headers) before the start delay has passed.
    tokio::time::sleep(state.sim.start_delay(&model)).await;
    let (schema, structured) = match response_format(&body) {
        Ok(f) => f,
        Err(e) => return failure(&e),
    };
    let request = ChatRequest { model: model.clone(), messages, max_tokens, schema, structured };
    if let Some(e) = state.sim.refuses_format(&request).or_else(|| state.sim.over_context(&request))
    {
        return failure(&e);
    }
    if !stream {
        return match state.sim.chat_after_start(request, None).await {
            Err(e) if e.kind == CallErrorKind::Transport => {
                flight.end();
                broken_body(&state.stats)
            }
            Ok(r) => {
                state.stats.0.completed.fetch_add(1, Ordering::SeqCst);
                let message = match reasoning_parts(&r.text) {
                    Some((reasoning, answer)) => json!({ "role": "assistant", "content": answer,
                                                         "reasoning_content": reasoning }),
                    None => json!({ "role": "assistant", "content": r.text }),
                };
                HttpResponse::Ok().json(json!({
                    "object": "chat.completion", "model": model,
                    "choices": [{ "index": 0, "message": message, "finish_reason": "stop" }],
                    "usage": usage_json(r.usage),
                }))
            }
            Err(e) => failure(&e),
        };
    }
    let guard = StreamGuard { flight, finished: false };
    if let Some(plan) = state.sim.plan(&request) {
        return HttpResponse::Ok()
            .content_type("text/event-stream")
            .insert_header(("Cache-Control", "no-cache"))
            .streaming(planned_stream(plan, &model, guard));
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let answer = state.sim.chat_after_start(request, Some(tx));
    let body = futures_util::stream::unfold(
        StreamState { answer: Some(answer), rx, outcome: None, guard, model, done: false },
        next_chunk,
    );
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .streaming(body)
}

/// A `200` whose body breaks off after its first bytes: the connection is closed without
/// ending the response, as when a proxy or the provider drops it.
fn broken_body(stats: &SimStats) -> HttpResponse {
    stats.0.resets.fetch_add(1, Ordering::SeqCst);
    let start = Bytes::from_static(b"{\"object\":\"chat.completion\",\"choices\":[{\"index\":0,");
    let body = futures_util::stream::iter([
        Ok(start),
        Err(actix_web::error::ErrorInternalServerError("simulated connection reset")),
    ]);
    HttpResponse::Ok().content_type("application/json").streaming(body)
}

/// An answer known in whole ([`SimProvider::plan`]), streamed on its pieces' deadlines: every
/// chunk is rendered before the first goes out, and one timer serves the whole stream, so a
/// piece costs the sim-server little more than its write (it stands in for a provider on
/// another machine, whose work is not the benchmark's to count).
fn planned_stream(
    plan: Planned,
    model: &str,
    guard: StreamGuard,
) -> impl futures_util::Stream<Item = Result<Bytes, actix_web::Error>> {
    // A trace goes in reasoning deltas, the answer after it in content ones.
    let deltas: Vec<Value> = match reasoning_parts(&plan.text) {
        Some((reasoning, answer)) => pieces(reasoning)
            .into_iter()
            .map(|p| json!({ "reasoning_content": p }))
            .chain(pieces(answer).into_iter().map(|p| json!({ "content": p })))
            .collect(),
        None => plan.pieces.into_iter().map(|p| json!({ "content": p })).collect(),
    };
    let n = deltas.len();
    let tail = Bytes::from(usage_tail(model, Some(plan.usage)));
    let start = tokio::time::Instant::now();
    let chunks: Vec<_> = deltas
        .into_iter()
        .enumerate()
        .map(|(i, delta)| (start + piece_due(plan.latency, i, n), chunk(model, delta)))
        .collect();
    let state = PlannedStream {
        chunks: chunks.into_iter().peekable(),
        tail: Some(tail),
        last_write: start,
        timer: Box::pin(tokio::time::sleep_until(start)),
        guard,
    };
    futures_util::stream::unfold(state, |mut st| async move {
        let Some(&(due, _)) = st.chunks.peek() else {
            let tail = st.tail.take()?;
            st.guard.complete();
            return Some((Ok(tail), st));
        };
        // Like real providers, a comment line keeps a slow stream alive.
        let wake = due.min(st.last_write + KEEPALIVE);
        st.timer.as_mut().reset(wake);
        st.timer.as_mut().await;
        st.last_write = wake;
        if wake < due {
            return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), st));
        }
        let (_, chunk) = st.chunks.next()?;
        Some((Ok(chunk), st))
    })
}

struct PlannedStream {
    /// Each chunk with when it is due.
    chunks: std::iter::Peekable<std::vec::IntoIter<(tokio::time::Instant, Bytes)>>,
    tail: Option<Bytes>,
    last_write: tokio::time::Instant,
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    guard: StreamGuard,
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
            st.done = true;
            st.guard.end();
            let tail = match st.outcome.take() {
                Some(Err(e)) if e.kind == CallErrorKind::Transport => {
                    // Break the connection off mid-response: actix closes it on a body error.
                    st.guard.flight.stats.0.resets.fetch_add(1, Ordering::SeqCst);
                    let reset =
                        actix_web::error::ErrorInternalServerError("simulated connection reset");
                    return Some((Err(reset), st));
                }
                Some(Ok(r)) => usage_tail(&st.model, r.usage),
                Some(Err(e)) => {
                    format!("data: {}\n\n", json!({ "error": { "message": e.message } }))
                }
                None => "data: [DONE]\n\n".to_string(),
            };
            st.guard.flight.stats.0.completed.fetch_add(1, Ordering::SeqCst);
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
        "sim/flaky",
        "sim/ratelimit",
        "sim/reset",
        "sim/empty",
        "sim/slowstart",
        "sim/thinker",
    ]
    .iter()
    .map(|id| json!({ "id": id, "object": "model", "owned_by": "conclave-sim" }))
    .collect();
    HttpResponse::Ok().json(json!({ "object": "list", "data": data }))
}

/// The request's `response_format`: a `json_schema` one's schema, or a `json_object` one
/// (no schema: the sim answers as usual), or none.
fn response_format(
    body: &Value,
) -> Result<(Option<Arc<ReplySchema>>, StructuredOutput), CallError> {
    let Some(format) = body.get("response_format").filter(|f| !f.is_null()) else {
        return Ok((None, StructuredOutput::Off));
    };
    let bad = |m: &str| CallError::new(CallErrorKind::Http, Some(400), m.to_string());
    match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => {
            let spec = format.get("json_schema").ok_or_else(|| {
                bad("response_format: a json_schema format needs its `json_schema`")
            })?;
            let schema = spec
                .get("schema")
                .filter(|s| s.is_object())
                .ok_or_else(|| bad("response_format: `json_schema.schema` must be an object"))?;
            let name = spec.get("name").and_then(Value::as_str).unwrap_or("reply");
            Ok((Some(ReplySchema::new(name, schema.clone())), StructuredOutput::JsonSchema))
        }
        Some("json_object") => Ok((None, StructuredOutput::JsonObject)),
        Some("text") => Ok((None, StructuredOutput::Off)),
        _ => Err(bad("response_format: `type` must be text, json_object or json_schema")),
    }
}

/// llama.cpp's `/props`, as far as Conclave reads it: a slot's context, when the sim has one.
async fn props(state: web::Data<State>) -> HttpResponse {
    match state.sim.context() {
        Some(n) => {
            HttpResponse::Ok().json(json!({ "default_generation_settings": { "n_ctx": n } }))
        }
        None => HttpResponse::NotFound().finish(),
    }
}

async fn stats_route(state: web::Data<State>) -> HttpResponse {
    HttpResponse::Ok().json(state.stats.snapshot())
}
