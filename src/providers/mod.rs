//! Model providers: an OpenAI-compatible chat-completions client and the built-in sim models.
//!
//! [`Providers`] routes a model id to the provider that serves it (longest configured prefix
//! wins; `sim/` goes to the in-process sim unless a route sends it elsewhere; everything else
//! to OpenRouter or `OPENROUTER_BASE_URL`). Providers know nothing of modes or runs: they take
//! messages and return text, streaming deltas through an optional channel.
//!
//! Each route (and the fallback) may cap its concurrent calls: a call first waits for a permit
//! of its provider's semaphore, holds it for the whole request (streaming included) and gives it
//! back when the request ends or is dropped. The wait is part of the call's future, so a
//! cancelled call stops waiting; a caller that times its calls from their turn waits for one
//! first ([`Providers::turn`]) and hands it in with the call ([`Ask::turn`]). A completion with
//! no text is `Malformed` whichever provider sent it.
//!
//! Every call through [`Providers`] carries an output cap (`max_tokens`): the one configured
//! for its mode and role ([`OutputCaps`]), lowered to its route's ceiling when it has one, so
//! no server alone decides how long (and on a paid provider, how costly) an answer may run.

pub mod openai;
pub mod sim;
pub mod sim_server;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Semaphore;

use crate::modes::{CallError, CallErrorKind, ChatMessage, ReplySchema, Structured, Usage};

/// A boxed, sendable future, so providers can sit behind `dyn`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One chat-completion request.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The model id as the provider knows it (route prefixes already stripped).
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// The most tokens the answer may run to, reasoning included (`None`: the server decides;
    /// calls through [`Providers`] always set it).
    pub max_tokens: Option<u32>,
    /// The JSON the reply is asked for, and how the route asks for it (see
    /// [`StructuredOutput`]); `Off` sends none.
    pub schema: Option<Arc<ReplySchema>>,
    pub structured: StructuredOutput,
}

impl ChatRequest {
    /// A request with no output cap and no schema.
    pub fn new(model: impl Into<String>, messages: Vec<ChatMessage>) -> Self {
        ChatRequest {
            model: model.into(),
            messages,
            max_tokens: None,
            schema: None,
            structured: StructuredOutput::Off,
        }
    }

    /// The schema this request sends, if any: only when its route asks for structured output.
    pub fn sent_schema(&self) -> Option<&ReplySchema> {
        self.schema.as_deref().filter(|_| self.structured != StructuredOutput::Off)
    }
}

/// How a route asks its server for a machine-read reply's JSON (`structured_output` in a
/// route's configuration).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutput {
    /// The seed's text formats, read by the text readers (the default).
    #[default]
    Off,
    /// `response_format: {"type": "json_schema", …}` with the call's schema: the server
    /// constrains the reply to it (llama.cpp, Ollama, vLLM, LM Studio, OpenAI, OpenRouter).
    JsonSchema,
    /// `response_format: {"type": "json_object"}`: the server only forces JSON; the prompt
    /// describes the fields.
    JsonObject,
}

/// Something a call's provider layer did that the run should say (an event).
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// The route's server refused `response_format`; the call was asked again without it,
    /// and the route stops sending it until the server restarts.
    StructuredRefused {
        /// The route's prefix (`local/`), or `*` for the default provider.
        route: String,
        /// The server's own message.
        message: String,
    },
}

/// One call as [`Providers::chat_capped`] makes it.
#[derive(Debug)]
pub struct Ask {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub max_tokens: u32,
    /// The reply's schema, when the mode asks this model for JSON.
    pub schema: Option<Arc<ReplySchema>>,
    /// A turn at the model's provider already waited for ([`Providers::turn`]); without one
    /// the call waits for its own.
    pub turn: Option<Turn>,
}

/// A turn at a provider that caps its concurrent calls: held, one of its permits (none when it
/// has no cap). Given back when dropped.
#[derive(Debug)]
pub struct Turn {
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Turn {
    /// Waits for one of `permits` (at once when there is no cap). The semaphore is never
    /// closed.
    async fn wait(permits: Option<Arc<Semaphore>>) -> Turn {
        match permits {
            Some(p) => Turn { _permit: p.acquire_owned().await.ok() },
            None => Turn { _permit: None },
        }
    }
}

/// Where a call's streamed text and notices go.
#[derive(Debug, Clone, Default)]
pub struct Listeners {
    pub deltas: Option<UnboundedSender<String>>,
    pub notices: Option<UnboundedSender<Notice>>,
}

/// Output caps by mode and role (the configuration file's `[max_tokens]`).
#[derive(Debug, Clone, PartialEq)]
pub struct OutputCaps {
    /// For any call no entry names.
    pub default: u32,
    /// By role (`title`, `chairman`) or by mode and role (`council.chairman`); the second wins.
    pub by_role: HashMap<String, u32>,
}

impl OutputCaps {
    /// What a panel member, chairman, foreman… may write unless configured.
    pub const DEFAULT: u32 = 2_000;
    /// What the conversation title may run to unless configured.
    pub const TITLE: u32 = 300;

    /// The cap of a call in `mode` (`council`, …) for `role` (`chairman`, `title`, …).
    pub fn for_call(&self, mode: &str, role: &str) -> u32 {
        self.by_role
            .get(&format!("{mode}.{role}"))
            .or_else(|| self.by_role.get(role))
            .copied()
            .unwrap_or(self.default)
    }
}

impl Default for OutputCaps {
    fn default() -> Self {
        OutputCaps {
            default: Self::DEFAULT,
            by_role: HashMap::from([("title".to_string(), Self::TITLE)]),
        }
    }
}

/// A successful completion.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub text: String,
    pub usage: Option<Usage>,
}

/// Whether an error answer is the server refusing `response_format` (or the schema in it):
/// a 400 or 422 whose message names it.
pub fn refuses_structured_output(e: &CallError) -> bool {
    if e.kind != CallErrorKind::Http || !matches!(e.status, Some(400 | 422)) {
        return false;
    }
    let m = e.message.to_lowercase();
    ["response_format", "json_schema", "json schema", "json_object", "grammar", "structured"]
        .iter()
        .any(|w| m.contains(w))
}

/// A provider: something that answers chat requests.
///
/// `deltas`, when given, receives text deltas as they stream in; the final [`ChatResponse`]
/// still carries the whole text. Dropping the returned future must abort the request (for HTTP
/// providers: close the connection), because that is how a cancelled run stops its calls.
pub trait Provider: Send + Sync {
    fn chat(
        &self,
        request: ChatRequest,
        deltas: Option<UnboundedSender<String>>,
    ) -> BoxFuture<'static, Result<ChatResponse, CallError>>;

    /// How many tokens a request to `model` may hold, prompt and reply together, when the
    /// server says (llama.cpp's `/props`, Ollama's `/api/show`); None when it does not.
    /// Asked once per model and remembered by the provider.
    fn context_tokens(&self, _model: &str) -> BoxFuture<'static, Option<u32>> {
        Box::pin(async { None })
    }
}

/// A configured route: model ids starting with `prefix` go to this provider.
pub struct Route {
    pub prefix: String,
    /// Remove the prefix from the model id before sending it (e.g. `ollama/llama3` -> `llama3`).
    pub strip_prefix: bool,
    pub provider: Arc<dyn Provider>,
    /// At most this many calls to this route's provider at once (`None`: no cap).
    pub max_concurrent_calls: Option<usize>,
    /// A ceiling on the output cap of every call this route serves (`None`: none).
    pub max_tokens: Option<u32>,
    /// How machine-read calls ask this route's server for JSON.
    pub structured_output: StructuredOutput,
    /// The context of this route's models in tokens, when the configuration states it (else
    /// the server is asked, see [`Provider::context_tokens`]).
    pub context_tokens: Option<u32>,
    /// Its models see images (a run's attached images are sent to them).
    pub vision: bool,
}

impl Route {
    /// A route with no caps, no structured output and no stated context.
    pub fn new(prefix: &str, provider: Arc<dyn Provider>) -> Self {
        Route {
            prefix: prefix.to_string(),
            strip_prefix: false,
            provider,
            max_concurrent_calls: None,
            max_tokens: None,
            structured_output: StructuredOutput::Off,
            context_tokens: None,
            vision: false,
        }
    }
}

/// A provider with its concurrency cap.
#[derive(Clone)]
struct Capped {
    provider: Arc<dyn Provider>,
    permits: Option<Arc<Semaphore>>,
}

impl Capped {
    fn new(provider: Arc<dyn Provider>, max: Option<usize>) -> Self {
        let permits = max.map(|n| Arc::new(Semaphore::new(n.clamp(1, Semaphore::MAX_PERMITS))));
        Capped { provider, permits }
    }
}

struct Served {
    prefix: String,
    strip_prefix: bool,
    target: Capped,
    max_tokens: Option<u32>,
    structured: StructuredOutput,
    /// Set once the server refused `response_format`: the route sends none until restart.
    structured_refused: Arc<AtomicBool>,
    context_tokens: Option<u32>,
    vision: bool,
}

/// Where a call goes: the route's provider and what the route says of the call.
#[derive(Clone)]
struct Target {
    capped: Capped,
    id: String,
    route: String,
    structured: StructuredOutput,
    refused: Option<Arc<AtomicBool>>,
}

/// Routes model ids to providers.
#[derive(Clone)]
pub struct Providers {
    routes: Arc<Vec<Served>>,
    /// Serves ids no route matches (OpenRouter or `OPENROUTER_BASE_URL`), if a key is configured.
    fallback: Option<Capped>,
    caps: Arc<OutputCaps>,
}

impl Providers {
    /// `fallback` has no cap; see [`Providers::cap_fallback`].
    pub fn new(mut routes: Vec<Route>, fallback: Option<Arc<dyn Provider>>) -> Self {
        // Longest prefix first, so `sim/slow-` can override `sim/`.
        routes.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
        let routes = routes
            .into_iter()
            .map(|r| Served {
                prefix: r.prefix,
                strip_prefix: r.strip_prefix,
                target: Capped::new(r.provider, r.max_concurrent_calls),
                max_tokens: r.max_tokens,
                structured: r.structured_output,
                structured_refused: Arc::new(AtomicBool::new(false)),
                context_tokens: r.context_tokens,
                vision: r.vision,
            })
            .collect();
        Self {
            routes: Arc::new(routes),
            fallback: fallback.map(|p| Capped::new(p, None)),
            caps: Arc::new(OutputCaps::default()),
        }
    }

    /// Replaces the default output caps.
    pub fn with_caps(mut self, caps: OutputCaps) -> Self {
        self.caps = Arc::new(caps);
        self
    }

    /// Caps the fallback provider's concurrent calls.
    pub fn cap_fallback(mut self, max: Option<usize>) -> Self {
        self.fallback = self.fallback.map(|f| Capped::new(f.provider, max));
        self
    }

    /// True when a real (non-sim) default provider is configured.
    pub fn has_fallback(&self) -> bool {
        self.fallback.is_some()
    }

    /// The route that serves `model`, by its prefix (`local/`), `*` for the default provider, or
    /// None when nothing serves it: callers that bound their own concurrency per provider count
    /// by this, as the route's `max_concurrent_calls` does.
    pub fn route_of(&self, model: &str) -> Option<String> {
        match self.served_by(model) {
            Some(r) => Some(r.prefix.clone()),
            None => self.fallback.as_ref().map(|_| "*".to_string()),
        }
    }

    /// Whether `model`'s route declares that its models see images (the default provider,
    /// which routes many models, does not).
    pub fn vision(&self, model: &str) -> bool {
        self.served_by(model).is_some_and(|r| r.vision)
    }

    /// The provider and provider-side model id for `model`, or a message saying why none serves it.
    pub fn resolve(&self, model: &str) -> Result<(Arc<dyn Provider>, String), String> {
        self.target(model).map(|t| (t.capped.provider, t.id))
    }

    /// How `model`'s route asks for JSON now (`Off` once its server refused it).
    pub fn structured_output(&self, model: &str) -> StructuredOutput {
        self.target(model).map(|t| t.structured).unwrap_or_default()
    }

    /// The models of a run (of `models`) whose machine-read calls ask for JSON.
    pub fn structured(&self, models: &[String]) -> Structured {
        Structured::models(
            models.iter().filter(|m| self.structured_output(m) != StructuredOutput::Off),
        )
    }

    /// How many tokens a request to `model` may hold (prompt and reply): its route's
    /// `context_tokens`, else what its server says, else None (nothing is fitted).
    pub fn context_tokens(&self, model: &str) -> BoxFuture<'static, Option<u32>> {
        let stated = self.served_by(model).and_then(|r| r.context_tokens);
        match (stated, self.target(model)) {
            (Some(n), _) => Box::pin(async move { Some(n) }),
            (None, Ok(t)) => t.capped.provider.context_tokens(&t.id),
            (None, Err(_)) => Box::pin(async { None }),
        }
    }

    /// The output cap of a call to `model` in `mode` for `role`: the configured cap, lowered to
    /// the ceiling of the route that serves `model`.
    pub fn max_tokens(&self, mode: &str, role: &str, model: &str) -> u32 {
        self.lowered(self.caps.for_call(mode, role), model)
    }

    /// `cap`, lowered to the ceiling of the route that serves `model` (the first match, as in
    /// [`Providers::target`]).
    fn lowered(&self, cap: u32, model: &str) -> u32 {
        match self.served_by(model) {
            Some(Served { max_tokens: Some(ceiling), .. }) => cap.min(*ceiling),
            _ => cap,
        }
    }

    /// The provider that serves `model`, with its cap, found without building a [`Target`] (a
    /// call asks it for its turn on every attempt's path).
    fn capped_of(&self, model: &str) -> Option<&Capped> {
        match self.served_by(model) {
            Some(r) => Some(&r.target),
            None => self.fallback.as_ref(),
        }
    }

    /// The route that serves `model`: the first whose prefix it starts with (None: the default
    /// provider, if any, serves it). Every question about a model's route asks this.
    fn served_by(&self, model: &str) -> Option<&Served> {
        self.routes.iter().find(|r| model.starts_with(r.prefix.as_str()))
    }

    fn target(&self, model: &str) -> Result<Target, String> {
        if let Some(route) = self.served_by(model) {
            let id = match route.strip_prefix {
                true => model[route.prefix.len()..].to_string(),
                false => model.to_string(),
            };
            let refused = route.structured_refused.load(Ordering::Relaxed);
            return Ok(Target {
                capped: route.target.clone(),
                id,
                route: route.prefix.clone(),
                structured: if refused { StructuredOutput::Off } else { route.structured },
                refused: Some(route.structured_refused.clone()),
            });
        }
        match &self.fallback {
            Some(p) => Ok(Target {
                capped: p.clone(),
                id: model.to_string(),
                route: "*".into(),
                structured: StructuredOutput::Off,
                refused: None,
            }),
            None => Err(format!(
                "no provider serves model {model:?}: set OPENROUTER_API_KEY, add a route for it in the \
                 configuration file, or use a sim model such as sim/alpha"
            )),
        }
    }

    /// Runs one chat request against whichever provider serves `model`, capped at the default
    /// output cap (for calls outside any mode's roles; a run's calls use [`Providers::chat_capped`]).
    pub fn chat(
        &self,
        model: &str,
        messages: Vec<ChatMessage>,
        deltas: Option<UnboundedSender<String>>,
    ) -> BoxFuture<'static, Result<ChatResponse, CallError>> {
        let max_tokens = self.lowered(self.caps.default, model);
        let ask = Ask { model: model.to_string(), messages, max_tokens, schema: None, turn: None };
        self.chat_capped(ask, Listeners { deltas, notices: None })
    }

    /// A turn at the provider that serves `model` if one is free now (always, when it caps
    /// nothing or nothing serves the model); None when the call would wait for one.
    pub fn try_turn(&self, model: &str) -> Option<Turn> {
        match self.capped_of(model).and_then(|c| c.permits.clone()) {
            Some(p) => p.try_acquire_owned().ok().map(|p| Turn { _permit: Some(p) }),
            None => Some(Turn { _permit: None }),
        }
    }

    /// Waits for a turn at the provider that serves `model`: at once when it caps nothing (or
    /// nothing serves the model: the call itself will say so). Dropping the wait gives up its
    /// place in the queue.
    pub fn turn(&self, model: &str) -> BoxFuture<'static, Turn> {
        Box::pin(Turn::wait(self.capped_of(model).and_then(|c| c.permits.clone())))
    }

    /// Runs one chat request, its answer capped at `ask.max_tokens`, against whichever provider
    /// serves its model, once that provider has a free permit. A schema is sent as its route
    /// asks (see [`StructuredOutput`]); a server that refuses it is asked once more without,
    /// the route stops sending it, and [`Notice::StructuredRefused`] says so.
    pub fn chat_capped(
        &self,
        ask: Ask,
        listen: Listeners,
    ) -> BoxFuture<'static, Result<ChatResponse, CallError>> {
        let Ask { model, messages, max_tokens, schema, turn } = ask;
        match self.target(&model) {
            Ok(Target { capped: Capped { provider, permits }, id, route, structured, refused }) => {
                Box::pin(async move {
                    // Held until the request ends or is dropped.
                    let _turn = match turn {
                        Some(turn) => turn,
                        None => Turn::wait(permits).await,
                    };
                    // Read now, not when the call was made: a refusal seen meanwhile holds.
                    let refused_now = refused.as_ref().is_some_and(|f| f.load(Ordering::Relaxed));
                    let structured = if schema.is_some() && !refused_now {
                        structured
                    } else {
                        StructuredOutput::Off
                    };
                    let request = ChatRequest {
                        model: id,
                        messages,
                        max_tokens: Some(max_tokens),
                        schema,
                        structured,
                    };
                    let resp = match provider.chat(request.clone(), listen.deltas.clone()).await {
                        Err(e)
                            if structured != StructuredOutput::Off
                                && refuses_structured_output(&e) =>
                        {
                            if let Some(flag) = &refused {
                                flag.store(true, Ordering::Relaxed);
                            }
                            log::warn!(
                                "route {route}: the server refused response_format ({}); asking \
                             again without it, and sending none until restart",
                                e.message
                            );
                            if let Some(tx) = &listen.notices {
                                let _ = tx.send(Notice::StructuredRefused {
                                    route: route.clone(),
                                    message: e.message.clone(),
                                });
                            }
                            let plain =
                                ChatRequest { structured: StructuredOutput::Off, ..request };
                            provider.chat(plain, listen.deltas).await?
                        }
                        other => other?,
                    };
                    if resp.text.trim().is_empty() {
                        return Err(CallError::new(
                            CallErrorKind::Malformed,
                            None,
                            "the response holds no completion text",
                        ));
                    }
                    Ok(resp)
                })
            }
            Err(message) => {
                Box::pin(
                    async move { Err(CallError::new(CallErrorKind::Transport, None, message)) },
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Answers after a pause, counting how many of its calls run at once.
    struct Counting {
        now: Arc<AtomicUsize>,
        max: Arc<AtomicUsize>,
    }

    impl Provider for Counting {
        fn chat(
            &self,
            request: ChatRequest,
            _: Option<UnboundedSender<String>>,
        ) -> BoxFuture<'static, Result<ChatResponse, CallError>> {
            let (now, max) = (self.now.clone(), self.max.clone());
            Box::pin(async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(ChatResponse { text: request.model, usage: None })
            })
        }
    }

    fn capped(max: Option<usize>) -> (Providers, Arc<AtomicUsize>) {
        let peak = Arc::new(AtomicUsize::new(0));
        let provider = Counting { now: Arc::new(AtomicUsize::new(0)), max: peak.clone() };
        let route = Route { max_concurrent_calls: max, ..Route::new("c/", Arc::new(provider)) };
        (Providers::new(vec![route], None), peak)
    }

    #[tokio::test(start_paused = true)]
    async fn a_cap_of_two_lets_two_of_five_calls_run_at_once() {
        let (providers, peak) = capped(Some(2));
        let started = tokio::time::Instant::now();
        let calls = (0..5).map(|i| providers.chat(&format!("c/{i}"), Vec::new(), None));
        let replies = futures_util::future::join_all(calls).await;
        assert!(replies.iter().all(Result::is_ok));
        assert_eq!(peak.load(Ordering::SeqCst), 2);
        assert_eq!(started.elapsed(), Duration::from_millis(300), "three waves of 100 ms");
        let (uncapped, peak) = capped(None);
        let calls = (0..5).map(|i| uncapped.chat(&format!("c/{i}"), Vec::new(), None));
        futures_util::future::join_all(calls).await;
        assert_eq!(peak.load(Ordering::SeqCst), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_wait_gives_up_its_place_and_a_timed_out_wait_is_a_timeout() {
        let (providers, _) = capped(Some(1));
        let first = tokio::spawn(providers.chat("c/a", Vec::new(), None));
        tokio::task::yield_now().await;
        let waiting = tokio::time::timeout(
            Duration::from_millis(50),
            providers.chat("c/b", Vec::new(), None),
        )
        .await;
        assert!(waiting.is_err(), "the wait for a permit counts against the timeout");
        assert!(first.await.unwrap().is_ok());
        let third = providers.chat("c/c", Vec::new(), None).await.unwrap();
        assert_eq!(third.text, "c/c", "the dropped waiter did not keep a permit");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_handed_its_turn_runs_at_once_and_gives_it_back() {
        let (providers, _) = capped(Some(1));
        let turn = providers.turn("c/a").await;
        // The one permit is held: a call that waits for its own does not start.
        let own = tokio::time::timeout(
            Duration::from_millis(50),
            providers.chat("c/b", Vec::new(), None),
        );
        assert!(own.await.is_err(), "the turn is held");
        let ask = Ask {
            model: "c/a".into(),
            messages: Vec::new(),
            max_tokens: 8,
            schema: None,
            turn: Some(turn),
        };
        let started = tokio::time::Instant::now();
        let reply = providers.chat_capped(ask, Listeners::default()).await.unwrap();
        assert_eq!((reply.text.as_str(), started.elapsed()), ("c/a", Duration::from_millis(100)));
        let next = providers.chat("c/c", Vec::new(), None).await.unwrap();
        assert_eq!(next.text, "c/c", "the turn was given back with the request");
        // A provider without a cap gives a turn at once.
        let (uncapped, _) = capped(None);
        let waited = tokio::time::timeout(Duration::from_millis(1), uncapped.turn("c/a")).await;
        assert!(waited.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_completion_is_malformed() {
        let sim = sim::SimProvider::new(sim::SimConfig::default());
        let route = Route::new("sim/", Arc::new(sim));
        let providers = Providers::new(vec![route], None);
        let e = providers.chat("sim/empty", vec![ChatMessage::user("Q?")], None).await.unwrap_err();
        assert_eq!(e.kind, CallErrorKind::Malformed);
    }

    /// Answers with the cap it was asked for.
    struct Echo;

    impl Provider for Echo {
        fn chat(
            &self,
            request: ChatRequest,
            _: Option<UnboundedSender<String>>,
        ) -> BoxFuture<'static, Result<ChatResponse, CallError>> {
            let text = format!("{:?}", request.max_tokens);
            Box::pin(async move { Ok(ChatResponse { text, usage: None }) })
        }
    }

    #[tokio::test]
    async fn every_call_carries_its_cap_lowered_to_its_routes_ceiling() {
        let route = |prefix: &str, max_tokens| Route {
            strip_prefix: true,
            max_tokens,
            ..Route::new(prefix, Arc::new(Echo))
        };
        let caps = OutputCaps {
            default: 1_000,
            by_role: HashMap::from([("title".into(), 50), ("council.chairman".into(), 4_000)]),
        };
        let providers =
            Providers::new(vec![route("a/", None), route("b/", Some(800))], Some(Arc::new(Echo)))
                .with_caps(caps);
        let asked = |mode: &str, role: &str, model: &str| {
            let cap = providers.max_tokens(mode, role, model);
            let ask = Ask {
                model: model.into(),
                messages: Vec::new(),
                max_tokens: cap,
                schema: None,
                turn: None,
            };
            providers.chat_capped(ask, Listeners::default())
        };
        assert_eq!(asked("council", "chairman", "a/m").await.unwrap().text, "Some(4000)");
        assert_eq!(asked("vote", "chairman", "a/m").await.unwrap().text, "Some(1000)");
        assert_eq!(asked("vote", "title", "a/m").await.unwrap().text, "Some(50)");
        assert_eq!(asked("council", "chairman", "b/m").await.unwrap().text, "Some(800)");
        assert_eq!(asked("council", "title", "b/m").await.unwrap().text, "Some(50)");
        assert_eq!(asked("council", "chairman", "other").await.unwrap().text, "Some(4000)");
        // Outside a run, the default cap.
        assert_eq!(providers.chat("b/m", Vec::new(), None).await.unwrap().text, "Some(800)");
        assert_eq!(providers.chat("a/m", Vec::new(), None).await.unwrap().text, "Some(1000)");
        let built_in = OutputCaps::default();
        assert_eq!(
            (built_in.for_call("jury", "juror"), built_in.for_call("jury", "title")),
            (2_000, 300)
        );
    }
}
