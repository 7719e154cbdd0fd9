//! Model providers: an OpenAI-compatible chat-completions client and the built-in sim models.
//!
//! [`Providers`] routes a model id to the provider that serves it (longest configured prefix
//! wins; `sim/` goes to the in-process sim unless a route sends it elsewhere; everything else
//! to OpenRouter or `OPENROUTER_BASE_URL`). Providers know nothing of modes or runs: they take
//! messages and return text, streaming deltas through an optional channel.
//!
//! Each route (and the fallback) may cap its concurrent calls: a call first waits for a permit
//! of its provider's semaphore, holds it for the whole request (streaming included) and gives it
//! back when the request ends or is dropped. The wait is part of the call's future, so it counts
//! against the call's timeout and a cancelled call stops waiting. A completion with no text is
//! `Malformed` whichever provider sent it.
//!
//! Every call through [`Providers`] carries an output cap (`max_tokens`): the one configured
//! for its mode and role ([`OutputCaps`]), lowered to its route's ceiling when it has one, so
//! no server alone decides how long (and on a paid provider, how costly) an answer may run.

pub mod openai;
pub mod oracle;
pub mod sim;
pub mod sim_server;
pub mod sim_text;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Semaphore;

use crate::modes::{CallError, CallErrorKind, ChatMessage, Usage};

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
}

impl ChatRequest {
    /// A request with no output cap.
    pub fn new(model: impl Into<String>, messages: Vec<ChatMessage>) -> Self {
        ChatRequest { model: model.into(), messages, max_tokens: None }
    }
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
        match self.routes.iter().find(|r| model.starts_with(r.prefix.as_str())) {
            Some(r) => Some(r.prefix.clone()),
            None => self.fallback.as_ref().map(|_| "*".to_string()),
        }
    }

    /// The provider and provider-side model id for `model`, or a message saying why none serves it.
    pub fn resolve(&self, model: &str) -> Result<(Arc<dyn Provider>, String), String> {
        self.target(model).map(|(t, id)| (t.provider, id))
    }

    /// The output cap of a call to `model` in `mode` for `role`: the configured cap, lowered to
    /// the ceiling of the route that serves `model`.
    pub fn max_tokens(&self, mode: &str, role: &str, model: &str) -> u32 {
        self.lowered(self.caps.for_call(mode, role), model)
    }

    /// `cap`, lowered to the ceiling of the route that serves `model` (the first match, as in
    /// [`Providers::target`]).
    fn lowered(&self, cap: u32, model: &str) -> u32 {
        match self.routes.iter().find(|r| model.starts_with(r.prefix.as_str())) {
            Some(Served { max_tokens: Some(ceiling), .. }) => cap.min(*ceiling),
            _ => cap,
        }
    }

    fn target(&self, model: &str) -> Result<(Capped, String), String> {
        for route in self.routes.iter() {
            if let Some(rest) = model.strip_prefix(route.prefix.as_str()) {
                let id = if route.strip_prefix { rest.to_string() } else { model.to_string() };
                return Ok((route.target.clone(), id));
            }
        }
        match &self.fallback {
            Some(p) => Ok((p.clone(), model.to_string())),
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
        self.chat_capped(model, messages, max_tokens, deltas)
    }

    /// Runs one chat request, its answer capped at `max_tokens`, against whichever provider
    /// serves `model`, once that provider has a free permit.
    pub fn chat_capped(
        &self,
        model: &str,
        messages: Vec<ChatMessage>,
        max_tokens: u32,
        deltas: Option<UnboundedSender<String>>,
    ) -> BoxFuture<'static, Result<ChatResponse, CallError>> {
        match self.target(model) {
            Ok((Capped { provider, permits }, id)) => Box::pin(async move {
                // Held until the request ends or is dropped; the semaphore is never closed.
                let _permit = match permits {
                    Some(p) => p.acquire_owned().await.ok(),
                    None => None,
                };
                let request = ChatRequest { model: id, messages, max_tokens: Some(max_tokens) };
                let resp = provider.chat(request, deltas).await?;
                if resp.text.trim().is_empty() {
                    return Err(CallError::new(
                        CallErrorKind::Malformed,
                        None,
                        "the response holds no completion text",
                    ));
                }
                Ok(resp)
            }),
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
        let route = Route {
            prefix: "c/".into(),
            strip_prefix: false,
            provider: Arc::new(provider),
            max_concurrent_calls: max,
            max_tokens: None,
        };
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
    async fn an_empty_completion_is_malformed() {
        let sim = sim::SimProvider::new(sim::SimConfig::default());
        let route = Route {
            prefix: "sim/".into(),
            strip_prefix: false,
            provider: Arc::new(sim),
            max_concurrent_calls: None,
            max_tokens: None,
        };
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
            prefix: prefix.into(),
            strip_prefix: true,
            provider: Arc::new(Echo),
            max_concurrent_calls: None,
            max_tokens,
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
            providers.chat_capped(model, Vec::new(), cap, None)
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
