//! The built-in sim models (`sim/<name>`): offline, deterministic stand-ins for real models.
//!
//! Behaviour by name: `sim/fail…` always fails (HTTP 503), `sim/stall…` never answers (until
//! the request is dropped), `sim/malformed…` answers without the requested structure,
//! `sim/flaky…` and `sim/ratelimit…` fail each prompt's first attempt (503, 429), `sim/reset…`
//! breaks each prompt's first attempt off mid-stream (a transport error after some text; the
//! sim-server drops the connection), `sim/empty…` answers an empty completion,
//! `sim/slowstart…` is silent for [`SLOWSTART_DELAY`] (or its `start_delay_ms`) before its
//! first byte, `sim/xss…` answers normally with hostile markup in its prose, `sim/thinker…`
//! answers normally after a `<think>` trace holding a draft that differs from its answer,
//! `sim/oracle-P…` answers a registered eval question right with probability P, in the form
//! of the mode that asks it, and judges as a juror (`eval::oracle`, handed in by [`answer_first`]); other
//! names answer (see [`crate::modes::sim_text`]), subject to the configured `fail_rate` and
//! `malformed_rate`, drawn deterministically from the prompt. Answers stream over the configured
//! latency.
//!
//! Like a real server, the sim stops an answer at the request's `max_tokens` (counted as
//! [`tokens`] counts them, the reasoning trace included): a capped reply is its first words.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::mpsc::UnboundedSender;

use super::{BoxFuture, ChatRequest, ChatResponse, Provider, StructuredOutput};
use crate::modes::reading::with_reasoning;
use crate::modes::sim_text::{reasoning_trace, respond_to, seed_of};
use crate::modes::{CallError, CallErrorKind, ChatMessage, Usage};

/// Per-model settings (the configuration file's `[sim.models."sim/x"]`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SimModelConfig {
    pub latency_ms: Option<u64>,
    /// Share of prompts (0..1) this model fails on.
    pub fail_rate: f64,
    /// Share of prompts (0..1) this model answers without the requested structure.
    pub malformed_rate: f64,
    /// Never answer.
    pub stall: bool,
    /// Silence before the first byte (default 0, or [`SLOWSTART_DELAY`] for `sim/slowstart…`).
    pub start_delay_ms: Option<u64>,
}

/// How long a `sim/slowstart…` model is silent before its first byte unless configured: longer
/// than the shortest stage timeout (10 s), so at that timeout it always times out.
pub const SLOWSTART_DELAY: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// How long an answer takes, unless the model sets its own.
    pub latency_ms: u64,
    pub models: HashMap<String, SimModelConfig>,
    /// The context every sim model holds, in [`tokens`]' count: a prompt past it is refused
    /// with llama.cpp's HTTP 400, and the sim says it when asked (None: no limit, not said).
    pub context_tokens: Option<u32>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { latency_ms: 400, models: HashMap::new(), context_tokens: None }
    }
}

/// What a sim model does with one prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    Answer,
    Malformed,
    /// A well-formed but empty completion (`200` with `""`).
    Empty,
    Fail,
    Stall,
}

#[derive(Clone)]
pub struct SimProvider {
    config: Arc<SimConfig>,
    /// Attempts seen per (model, prompt), for the models that fail only their first attempt.
    attempts: Arc<Mutex<HashMap<u64, u32>>>,
}

/// The error of an attempt whose connection broke mid-stream.
pub fn simulated_reset(model: &str) -> CallError {
    CallError::new(
        CallErrorKind::Transport,
        None,
        format!("simulated connection reset of {model} mid-stream"),
    )
}

impl SimProvider {
    pub fn new(config: SimConfig) -> Self {
        SimProvider { config: Arc::new(config), attempts: Arc::new(Mutex::new(HashMap::new())) }
    }

    /// Transient failures for retry tests: `sim/flaky…` answers 503 to the first attempt at
    /// each prompt, `sim/ratelimit…` answers 429 with `Retry-After: 1`; later attempts succeed.
    pub fn transient_failure(&self, model: &str, messages: &[ChatMessage]) -> Option<CallError> {
        let name = model.strip_prefix("sim/").unwrap_or(model);
        let (status, retry_after_ms) = if name.starts_with("flaky") {
            (503, None)
        } else if name.starts_with("ratelimit") {
            (429, Some(1_000))
        } else {
            return None;
        };
        if !self.first_attempt(model, messages, "") {
            return None;
        }
        let message =
            if status == 429 { "simulated rate limit" } else { "simulated transient failure" };
        let mut e =
            CallError::new(CallErrorKind::Http, Some(status), format!("{message} of {model}"));
        e.retry_after_ms = retry_after_ms;
        Some(e)
    }

    /// Counts an attempt at this prompt (per `salt`) and says whether it was the first.
    fn first_attempt(&self, model: &str, messages: &[ChatMessage], salt: &str) -> bool {
        let last = messages.last().map(|m| m.content.as_str()).unwrap_or("");
        let key =
            if salt.is_empty() { seed_of(&[model, last]) } else { seed_of(&[model, last, salt]) };
        let mut attempts = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
        let n = attempts.entry(key).or_insert(0);
        *n += 1;
        *n == 1
    }

    /// Whether this attempt breaks off mid-stream: `sim/reset…` at each prompt's first attempt.
    /// Counts the attempt, so call it once per request.
    pub fn resets_now(&self, model: &str, messages: &[ChatMessage]) -> bool {
        let name = model.strip_prefix("sim/").unwrap_or(model);
        name.starts_with("reset") && self.first_attempt(model, messages, "reset")
    }

    /// Silence before the first byte of an answer.
    pub fn start_delay(&self, model: &str) -> Duration {
        let name = model.strip_prefix("sim/").unwrap_or(model);
        match self.model_config(model).start_delay_ms {
            Some(ms) => Duration::from_millis(ms),
            None if name.starts_with("slowstart") => SLOWSTART_DELAY,
            None => Duration::ZERO,
        }
    }

    fn model_config(&self, model: &str) -> SimModelConfig {
        self.config.models.get(model).cloned().unwrap_or_default()
    }

    pub fn latency(&self, model: &str) -> Duration {
        Duration::from_millis(self.model_config(model).latency_ms.unwrap_or(self.config.latency_ms))
    }

    /// Decides, deterministically from the model and prompt, what the model will do.
    pub fn behaviour(&self, model: &str, messages: &[ChatMessage]) -> Behaviour {
        let name = model.strip_prefix("sim/").unwrap_or(model);
        let cfg = self.model_config(model);
        if name.starts_with("stall") || cfg.stall {
            return Behaviour::Stall;
        }
        if name.starts_with("fail") {
            return Behaviour::Fail;
        }
        if name.starts_with("malformed") {
            return Behaviour::Malformed;
        }
        if name.starts_with("empty") {
            return Behaviour::Empty;
        }
        let last = messages.last().map(|m| m.content.as_str()).unwrap_or("");
        let draw = |salt: &str| (seed_of(&[model, last, salt]) % 10_000) as f64 / 10_000.0;
        if draw("fail") < cfg.fail_rate {
            Behaviour::Fail
        } else if draw("malformed") < cfg.malformed_rate {
            Behaviour::Malformed
        } else {
            Behaviour::Answer
        }
    }
}

/// Rough token count of a text (words × 1.3), for plausible usage figures.
fn tokens(text: &str) -> u64 {
    (text.split_whitespace().count() as u64 * 13).div_ceil(10)
}

/// `text` cut where a server would stop it at `max_tokens`: after as many words as the cap
/// buys by [`tokens`]' count (at least one), whitespace kept; whole when it fits.
pub fn capped(text: &str, max_tokens: Option<u32>) -> &str {
    let Some(cap) = max_tokens else { return text };
    if tokens(text) <= u64::from(cap) {
        return text;
    }
    let words = (u64::from(cap) * 10 / 13).max(1);
    let mut seen = 0u64;
    let mut in_word = false;
    for (i, ch) in text.char_indices() {
        if ch.is_whitespace() {
            if in_word {
                seen += 1;
                if seen == words {
                    return &text[..i];
                }
            }
            in_word = false;
        } else {
            in_word = true;
        }
    }
    text
}

/// What answers a sim model's chat before its mode's own sim does, when it answers at all:
/// `conclave eval`'s oracles (`sim/oracle-P`), which know the questions the eval registered.
pub type AnswerFirst = fn(&str, &[ChatMessage]) -> Option<String>;

static ANSWER_FIRST: std::sync::OnceLock<AnswerFirst> = std::sync::OnceLock::new();

/// Sets what answers before the modes' sims in this process (the first call wins).
pub fn answer_first(f: AnswerFirst) {
    let _ = ANSWER_FIRST.set(f);
}

/// What a sim model answers when it answers: an oracle's answer to a registered eval question
/// (handed in by [`answer_first`]), else the mode's format (see [`respond`]), after a
/// reasoning trace for `sim/thinker…`, cut at the request's cap.
fn reply(request: &ChatRequest, malformed: bool) -> String {
    // Asked by the server, or only by the prompt (a route that sends no schema): a sim model
    // follows its prompt as a capable model would.
    let asked_in_prompt = request
        .messages
        .last()
        .is_some_and(|m| m.content.contains(crate::modes::schema::ASKS_FOR_JSON));
    let schema = request.sent_schema().or(request.schema.as_deref().filter(|_| asked_in_prompt));
    let answer = ANSWER_FIRST
        .get()
        .and_then(|first| first(&request.model, &request.messages))
        .unwrap_or_else(|| respond_to(&request.model, &request.messages, malformed, schema));
    let name = request.model.strip_prefix("sim/").unwrap_or(&request.model);
    let text = if name.starts_with("reader") {
        reader_answer(&request.messages)
    } else if name.starts_with("thinker") {
        let trace = reasoning_trace(&request.model, &request.messages, malformed, &answer);
        with_reasoning(&trace, &answer)
    } else {
        answer
    };
    capped(&text, request.max_tokens).to_string()
}

/// What a `sim/reader…` model answers, whatever it is asked: the files it was given (by the
/// `<attachment name=…>` lines before the prompt) with their lengths, and the images it was
/// shown, so a test sees what reached the model.
fn reader_answer(messages: &[ChatMessage]) -> String {
    let Some(last) = messages.iter().rev().find(|m| m.role == "user") else {
        return "Simulated reader: no question.".into();
    };
    let mut files = Vec::new();
    let mut rest = last.content.as_str();
    while let Some(at) = rest.find("<attachment name=") {
        let after = &rest[at..];
        let head_end = after.find(">\n").unwrap_or(after.len());
        let body_start = (head_end + 2).min(after.len());
        let body_end = after.find("\n</attachment>").unwrap_or(after.len()).max(body_start);
        let chars = after[body_start..body_end].chars().count();
        files.push(format!("{} ({chars} characters)", &after["<attachment ".len()..head_end]));
        rest = &after[body_end..];
    }
    let images: usize = messages.iter().map(|m| m.images.len()).sum();
    if files.is_empty() {
        format!("Simulated reader: no attached files. Images shown: {images}.")
    } else {
        format!("Simulated reader: attached {}. Images shown: {images}.", files.join("; "))
    }
}

/// A reply of the `<think>\n…\n</think>\n\n…` shape [`with_reasoning`] gives, as a server
/// with a reasoning field sends it: `(reasoning, answer)`. A trace cut before its end has no
/// answer. `None` for a reply with no trace.
pub fn reasoning_parts(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix("<think>\n")?;
    Some(match rest.find("\n</think>\n\n") {
        Some(end) => (&rest[..end], &rest[end + "\n</think>\n\n".len()..]),
        None => (rest, ""),
    })
}

/// The first half of `text` (at a character boundary).
fn half(text: &str) -> &str {
    let mut at = text.len() / 2;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[..at]
}

pub fn simulated_failure(model: &str) -> CallError {
    CallError::new(CallErrorKind::Http, Some(503), format!("simulated failure of {model}"))
}

impl SimProvider {
    /// Answers `request` at once: what [`Provider::chat`] does after the start delay. The
    /// sim-server waits out the start delay itself, before it sends any header.
    pub fn chat_after_start(
        &self,
        request: ChatRequest,
        deltas: Option<UnboundedSender<String>>,
    ) -> BoxFuture<'static, Result<ChatResponse, CallError>> {
        self.answer(request, deltas, Duration::ZERO)
    }

    fn answer(
        &self,
        request: ChatRequest,
        deltas: Option<UnboundedSender<String>>,
        start_delay: Duration,
    ) -> BoxFuture<'static, Result<ChatResponse, CallError>> {
        let behaviour = self.behaviour(&request.model, &request.messages);
        let latency = self.latency(&request.model);
        let transient = self.transient_failure(&request.model, &request.messages);
        let reset = transient.is_none() && self.resets_now(&request.model, &request.messages);
        let cut = self.cuts_off_now(&request);
        let over = self.refuses_format(&request).or_else(|| self.over_context(&request));
        Box::pin(async move {
            if let Some(e) = over {
                return Err(e);
            }
            if let Some(e) = transient {
                tokio::time::sleep(latency / 4).await;
                return Err(e);
            }
            tokio::time::sleep(start_delay).await;
            let text = match behaviour {
                Behaviour::Stall => {
                    futures_util::future::pending::<()>().await;
                    String::new()
                }
                Behaviour::Fail => {
                    tokio::time::sleep(latency / 2).await;
                    return Err(simulated_failure(&request.model));
                }
                Behaviour::Answer if cut => half(&reply(&request, false)).to_string(),
                Behaviour::Answer => reply(&request, false),
                Behaviour::Malformed => reply(&request, true),
                Behaviour::Empty => String::new(),
            };
            match deltas {
                Some(tx) if !text.is_empty() => {
                    // A reset breaks off after the first third of the pieces.
                    let pieces = pieces(&text);
                    let sent = if reset { pieces.len().div_ceil(3) } else { pieces.len() };
                    let start = tokio::time::Instant::now();
                    for (i, piece) in pieces.into_iter().take(sent).enumerate() {
                        tokio::time::sleep_until(start + piece_due(latency, i, sent.max(1))).await;
                        let _ = tx.send(piece);
                    }
                    if reset {
                        return Err(simulated_reset(&request.model));
                    }
                }
                _ if reset => {
                    tokio::time::sleep(latency / 3).await;
                    return Err(simulated_reset(&request.model));
                }
                _ => tokio::time::sleep(latency).await,
            }
            let usage = usage(&request.messages, &text);
            Ok(ChatResponse { text, usage: Some(usage) })
        })
    }

    /// The context the sim models hold, if it has one.
    pub fn context(&self) -> Option<u32> {
        self.config.context_tokens
    }

    /// Whether this reply ends cut off: a `sim/cutoff…` model asked for JSON by a schema
    /// (`json_schema`) stops halfway through at a prompt's first attempt, as a model held to
    /// a grammar stops at its length cap before the object closes. Counts the attempt.
    pub fn cuts_off_now(&self, request: &ChatRequest) -> bool {
        let name = request.model.strip_prefix("sim/").unwrap_or(&request.model);
        name.starts_with("cutoff")
            && request.structured == StructuredOutput::JsonSchema
            && request.sent_schema().is_some()
            && self.first_attempt(&request.model, &request.messages, "cutoff")
    }

    /// A `sim/noformat…` model's server refuses `response_format` (HTTP 400), as some
    /// OpenAI-compatible servers do.
    pub fn refuses_format(&self, request: &ChatRequest) -> Option<CallError> {
        let name = request.model.strip_prefix("sim/").unwrap_or(&request.model);
        (name.starts_with("noformat") && request.structured != StructuredOutput::Off).then(|| {
            CallError::new(
                CallErrorKind::Http,
                Some(400),
                "Unsupported parameter: 'response_format' is not supported with this \
                 model.",
            )
        })
    }

    /// llama.cpp's refusal of a prompt longer than the context, when the sim has one. The
    /// prompt is counted as a real tokenizer counts English (a token per four bytes), not by
    /// the sim's usage figures.
    pub fn over_context(&self, request: &ChatRequest) -> Option<CallError> {
        let n_ctx = self.config.context_tokens?;
        let bytes: usize = request.messages.iter().map(|m| m.content.len()).sum();
        let prompt = bytes.div_ceil(4) as u64 + 8 * request.messages.len() as u64;
        (prompt > u64::from(n_ctx)).then(|| {
            CallError::new(
                CallErrorKind::Http,
                Some(400),
                format!(
                    "request ({prompt} tokens) exceeds the available context size \
                     ({n_ctx} tokens), try increasing it"
                ),
            )
        })
    }

    /// The whole answer to a request that simply answers (well-formed or, by `malformed_rate`,
    /// not): its text cut into the pieces it streams in. `None` for the models and draws that
    /// do something else (fail, stall, reset, answer empty, fail their first attempt), which
    /// take [`SimProvider::chat_after_start`]. Counts no attempt.
    pub fn plan(&self, request: &ChatRequest) -> Option<Planned> {
        let name = request.model.strip_prefix("sim/").unwrap_or(&request.model);
        if ["flaky", "ratelimit", "reset", "cutoff"].iter().any(|p| name.starts_with(p))
            || self.over_context(request).is_some()
            || self.refuses_format(request).is_some()
        {
            return None;
        }
        let malformed = match self.behaviour(&request.model, &request.messages) {
            Behaviour::Answer => false,
            Behaviour::Malformed => true,
            _ => return None,
        };
        let text = reply(request, malformed);
        if text.is_empty() {
            return None;
        }
        Some(Planned {
            pieces: pieces(&text),
            latency: self.latency(&request.model),
            usage: usage(&request.messages, &text),
            text,
        })
    }
}

/// An answer as it will stream: piece `i` of `n` is due [`piece_due`] after the first byte.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub text: String,
    pub pieces: Vec<String>,
    pub latency: Duration,
    pub usage: Usage,
}

/// An answer streams in about a dozen pieces (runs of whole words).
pub fn pieces(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    let per = words.len().div_ceil(12).max(1);
    words.chunks(per).map(|c| c.concat()).collect()
}

/// When piece `i` (0-based) of `n` is due after the answer starts: evenly over `latency`, the
/// last at `latency` itself. Deadlines from the start, not waits one after another, so waits
/// rounded up to the timer's millisecond do not add up.
pub fn piece_due(latency: Duration, i: usize, n: usize) -> Duration {
    latency.mul_f64((i + 1) as f64 / n.max(1) as f64)
}

/// Plausible usage: the prompt's and the answer's words × 1.3.
fn usage(messages: &[ChatMessage], text: &str) -> Usage {
    let prompt: String = messages.iter().map(|m| m.content.as_str()).collect();
    Usage { prompt_tokens: tokens(&prompt), completion_tokens: tokens(text), cost: None }
}

impl Provider for SimProvider {
    fn chat(
        &self,
        request: ChatRequest,
        deltas: Option<UnboundedSender<String>>,
    ) -> BoxFuture<'static, Result<ChatResponse, CallError>> {
        let start_delay = self.start_delay(&request.model);
        self.answer(request, deltas, start_delay)
    }

    fn context_tokens(&self, _model: &str) -> BoxFuture<'static, Option<u32>> {
        let n = self.config.context_tokens;
        Box::pin(async move { n })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(model: &str) -> ChatRequest {
        ChatRequest::new(model, vec![ChatMessage::user("Why?")])
    }

    #[tokio::test(start_paused = true)]
    async fn names_choose_behaviours() {
        let sim = SimProvider::new(SimConfig::default());
        let ok = sim.chat(ask("sim/alpha"), None).await.unwrap();
        assert!(ok.text.contains("simulated") && ok.usage.unwrap().completion_tokens > 0);
        let err = sim.chat(ask("sim/fail-x"), None).await.unwrap_err();
        assert_eq!((err.kind, err.status), (CallErrorKind::Http, Some(503)));
        let stalled =
            tokio::time::timeout(Duration::from_secs(3600), sim.chat(ask("sim/stall"), None)).await;
        assert!(stalled.is_err(), "a stalled model never answers");
    }

    #[tokio::test(start_paused = true)]
    async fn streaming_sends_the_whole_text_in_pieces() {
        let sim = SimProvider::new(SimConfig::default());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let resp = sim.chat(ask("sim/beta"), Some(tx)).await.unwrap();
        let mut joined = String::new();
        let mut pieces = 0;
        while let Some(d) = rx.recv().await {
            joined.push_str(&d);
            pieces += 1;
        }
        assert_eq!(joined, resp.text);
        assert!(pieces > 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reset_breaks_off_the_first_attempt_mid_stream_and_the_retry_answers() {
        let sim = SimProvider::new(SimConfig::default());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let err = sim.chat(ask("sim/reset-a"), Some(tx)).await.unwrap_err();
        assert_eq!((err.kind, err.status), (CallErrorKind::Transport, None));
        let mut partial = String::new();
        while let Some(d) = rx.recv().await {
            partial.push_str(&d);
        }
        let whole = sim.chat(ask("sim/reset-a"), None).await.unwrap().text;
        assert!(!partial.is_empty() && partial.len() < whole.len(), "some text, not all");
        assert!(whole.starts_with(&partial));
        let other = ChatRequest::new("sim/reset-a", vec![ChatMessage::user("Other?")]);
        assert!(sim.chat(other, None).await.is_err(), "the first attempt at each prompt breaks");
    }

    #[tokio::test(start_paused = true)]
    async fn empty_and_slowstart_models() {
        let sim = SimProvider::new(SimConfig::default());
        assert_eq!(sim.chat(ask("sim/empty-a"), None).await.unwrap().text, "");
        let started = tokio::time::Instant::now();
        let ok = sim.chat(ask("sim/slowstart-a"), None).await.unwrap();
        assert!(ok.text.contains("simulated"));
        assert!(started.elapsed() >= SLOWSTART_DELAY);
        let mut models = HashMap::new();
        let quick = SimModelConfig { start_delay_ms: Some(50), ..Default::default() };
        models.insert("sim/slowstart-b".to_string(), quick);
        let sim = SimProvider::new(SimConfig { latency_ms: 10, models, context_tokens: None });
        assert_eq!(sim.start_delay("sim/slowstart-b"), Duration::from_millis(50));
        assert_eq!(sim.start_delay("sim/alpha"), Duration::ZERO);
    }

    #[test]
    fn rates_are_deterministic_per_prompt() {
        let mut models = HashMap::new();
        models.insert(
            "sim/flaky".to_string(),
            SimModelConfig { fail_rate: 0.5, ..Default::default() },
        );
        let sim = SimProvider::new(SimConfig { latency_ms: 1, models, context_tokens: None });
        let outcomes: Vec<Behaviour> = (0..40)
            .map(|i| sim.behaviour("sim/flaky", &[ChatMessage::user(format!("q{i}"))]))
            .collect();
        let again: Vec<Behaviour> = (0..40)
            .map(|i| sim.behaviour("sim/flaky", &[ChatMessage::user(format!("q{i}"))]))
            .collect();
        assert_eq!(outcomes, again);
        let fails = outcomes.iter().filter(|b| **b == Behaviour::Fail).count();
        assert!((8..=32).contains(&fails), "about half fail: {fails}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_planned_answer_is_what_the_provider_streams() {
        let sim = SimProvider::new(SimConfig { latency_ms: 200, ..Default::default() });
        let request = ask("sim/alpha");
        let plan = sim.plan(&request).expect("an ordinary model answers");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let started = tokio::time::Instant::now();
        let resp = sim.chat(request, Some(tx)).await.unwrap();
        // The pieces land on their deadlines, so the answer takes its latency and no more.
        assert_eq!(started.elapsed(), Duration::from_millis(200));
        let mut streamed = Vec::new();
        while let Some(d) = rx.recv().await {
            streamed.push(d);
        }
        assert_eq!(streamed, plan.pieces);
        assert_eq!((resp.text, resp.usage), (plan.text, Some(plan.usage)));
        for model in ["sim/fail", "sim/stall", "sim/reset", "sim/flaky", "sim/empty"] {
            assert!(sim.plan(&ask(model)).is_none(), "{model} takes the general path");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_cap_cuts_the_answer_where_a_server_would() {
        let sim = SimProvider::new(SimConfig::default());
        let whole = sim.chat(ask("sim/alpha"), None).await.unwrap();
        let mut request = ask("sim/alpha");
        request.max_tokens = Some(13);
        let cut = sim.chat(request.clone(), None).await.unwrap();
        assert!(whole.text.starts_with(&cut.text) && cut.text.len() < whole.text.len());
        assert_eq!(cut.text.split_whitespace().count(), 10, "13 tokens buy 10 words");
        assert!(cut.usage.unwrap().completion_tokens <= 13);
        assert_eq!(sim.plan(&request).unwrap().text, cut.text, "streamed the same");
        // A cap the answer fits leaves it as it was.
        request.max_tokens = Some(2_000);
        assert_eq!(sim.chat(request, None).await.unwrap().text, whole.text);
        assert_eq!(capped("one two", Some(1)), "one", "at least a word");
        assert_eq!(capped("  a  b  c ", Some(2)), "  a");
    }

    #[tokio::test(start_paused = true)]
    async fn a_thinker_drafts_in_a_think_block_then_answers_differently() {
        use crate::modes::reading::split_reasoning;
        use crate::modes::voting::{parse_vote, vote_prompt};
        let sim = SimProvider::new(SimConfig::default());
        let labels: Vec<String> = (0..3).map(crate::modes::common::label).collect();
        let answers: Vec<(String, String)> =
            labels.iter().map(|l| (l.clone(), format!("answer {l}"))).collect();
        let mut differs = 0;
        for q in 0..12 {
            let prompt = vote_prompt(&format!("Question {q}?"), &answers, None);
            let request = ChatRequest::new("sim/thinker", vec![ChatMessage::user(prompt)]);
            let text = sim.chat(request, None).await.unwrap().text;
            let split = split_reasoning(&text);
            let (reasoning, answer) = (split.reasoning.unwrap(), split.answer);
            assert!(text.starts_with("<think>\nLet me think") && !split.unclosed, "{text}");
            assert_ne!(reasoning.trim(), answer.trim());
            let final_vote = parse_vote(&answer, &labels);
            assert!(final_vote.is_some(), "{answer}");
            if parse_vote(&reasoning, &labels) != final_vote {
                differs += 1;
            }
            let (trace, after) = reasoning_parts(&text).unwrap();
            assert_eq!(with_reasoning(trace, after), text, "the wire split is exact");
        }
        assert!(differs > 0, "some drafts vote otherwise than the answer");
        // Other names have no trace; a cap can end a thinker inside its trace.
        assert!(!sim.chat(ask("sim/alpha"), None).await.unwrap().text.contains("<think>"));
        let mut short = ask("sim/thinker");
        short.max_tokens = Some(5);
        let text = sim.chat(short, None).await.unwrap().text;
        assert!(split_reasoning(&text).unclosed, "{text}");
        assert_eq!(reasoning_parts(&text).map(|(_, a)| a), Some(""));
    }
}
