//! Model providers: an OpenAI-compatible chat-completions client and the built-in sim models.
//!
//! [`Providers`] routes a model id to the provider that serves it (longest configured prefix
//! wins; `sim/` goes to the in-process sim unless a route sends it elsewhere; everything else
//! to OpenRouter or `OPENROUTER_BASE_URL`). Providers know nothing of modes or runs: they take
//! messages and return text, streaming deltas through an optional channel.

pub mod openai;
pub mod sim;
pub mod sim_server;
pub mod sim_text;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use crate::modes::{CallError, CallErrorKind, ChatMessage, Usage};

/// A boxed, sendable future, so providers can sit behind `dyn`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One chat-completion request.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The model id as the provider knows it (route prefixes already stripped).
    pub model: String,
    pub messages: Vec<ChatMessage>,
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
}

/// Routes model ids to providers.
#[derive(Clone)]
pub struct Providers {
    routes: Arc<Vec<Route>>,
    /// Serves ids no route matches (OpenRouter or `OPENROUTER_BASE_URL`), if a key is configured.
    fallback: Option<Arc<dyn Provider>>,
}

impl Providers {
    pub fn new(mut routes: Vec<Route>, fallback: Option<Arc<dyn Provider>>) -> Self {
        // Longest prefix first, so `sim/slow-` can override `sim/`.
        routes.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
        Self { routes: Arc::new(routes), fallback }
    }

    /// True when a real (non-sim) default provider is configured.
    pub fn has_fallback(&self) -> bool {
        self.fallback.is_some()
    }

    /// The provider and provider-side model id for `model`, or a message saying why none serves it.
    pub fn resolve(&self, model: &str) -> Result<(Arc<dyn Provider>, String), String> {
        for route in self.routes.iter() {
            if let Some(rest) = model.strip_prefix(route.prefix.as_str()) {
                let id = if route.strip_prefix { rest.to_string() } else { model.to_string() };
                return Ok((route.provider.clone(), id));
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

    /// Runs one chat request against whichever provider serves `model`.
    pub fn chat(
        &self,
        model: &str,
        messages: Vec<ChatMessage>,
        deltas: Option<UnboundedSender<String>>,
    ) -> BoxFuture<'static, Result<ChatResponse, CallError>> {
        match self.resolve(model) {
            Ok((provider, id)) => provider.chat(ChatRequest { model: id, messages }, deltas),
            Err(message) => {
                Box::pin(
                    async move { Err(CallError::new(CallErrorKind::Transport, None, message)) },
                )
            }
        }
    }
}
