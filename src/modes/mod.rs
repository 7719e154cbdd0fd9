//! Pure deliberation logic: one folder per mode plus shared helpers ([`runner`] runs what every
//! mode repeats).
//!
//! A mode is a state machine with no I/O, no clock and no global randomness. The engine tells
//! it which model replies arrived; it answers with [`Effect`]s: model calls to start, events to
//! publish, stage rows to store, the conversation title, and finally the answer or a failure.
//! Nothing in here may import actix, reqwest, diesel or tokio: if a test of a mode needs a
//! runtime, the mode is doing I/O it should not.

pub mod blueprint;
pub mod brainstorm;
pub mod chain;
pub mod clarity;
pub mod common;
pub mod confidence_weighted;
pub mod council;
pub mod debate;
pub mod decompose;
pub mod defaults;
pub mod delphi;
#[cfg(feature = "demo-mode")]
pub mod demo;
pub mod fact_check;
#[cfg(test)]
mod golden;
pub mod jury;
pub mod numbers;
pub mod payload;
pub mod peer_review;
pub mod prelude;
pub mod ranking;
pub mod reading;
pub mod red_team;
pub mod registry;
pub mod report;
pub mod request;
pub mod runner;
/// Reply schemas: the JSON a machine-read call may be answered in.
pub mod schema;
pub mod sim_text;
pub mod solo;
pub mod specialist_panel;
/// Reading a labelled choice (`VERDICT: X`, `DECISION: STAND`) where a reply states it.
pub mod stated;
#[cfg(test)]
pub mod testkit;
pub mod tournament;
pub mod vote;
pub mod voting;

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use schema::{ReadFrom, ReplySchema};

/// One chat message sent to a model (OpenAI chat-completions shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
    /// Images shown with the text (the user's attached images, to a model whose route has
    /// `vision`): sent as image parts after the text. Never journaled or stored: a resumed run
    /// adds them again from its attachments.
    #[serde(skip)]
    pub images: Vec<Image>,
}

/// An image in a [`ChatMessage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// `image/png`, `image/jpeg` or `image/webp`.
    pub media_type: String,
    pub bytes: Arc<[u8]>,
}

impl ChatMessage {
    fn new(role: &str, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: content.into(), images: Vec::new() }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }
    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }
}

/// A model call the mode wants made. The engine runs it (with streaming and a timeout) and
/// hands the outcome back through [`Mode::on_reply`] with the same `key`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallSpec {
    /// Unique within the run, chosen by the mode (e.g. `stage1:0`, `title`).
    pub key: String,
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// The stage this call belongs to (`stage1`, `stage2`, `stage3`, `title`), for progress events.
    pub stage: String,
    /// The participant's role (`council`, `chairman`, `title`), for progress events.
    pub role: String,
    pub timeout_ms: u64,
    /// The reply's schema, for every call whose reply the server reads (None for text a person
    /// reads): sent as `response_format` when the model's route takes structured output, and
    /// named in the call's `call_start` event. The prompt asks for it when the run's
    /// [`RunContext::structured`] names the model.
    #[serde(skip)]
    pub schema: Option<Arc<ReplySchema>>,
    /// The longest material the prompt quotes (earlier answers, reports), each as it stands in
    /// the messages: what is cut first, and said to be cut, when the prompt would not fit its
    /// model's context.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub material: Vec<Material>,
}

/// A piece of quoted material in a prompt (see [`CallSpec::material`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Material {
    /// What it is, in words for a person (`Response A`, `the jurors' assessments`).
    pub name: String,
    /// The text exactly as it stands in the messages (shared: an attached file's text may be
    /// megabytes, quoted by every call of a run).
    pub text: Arc<str>,
}

impl CallSpec {
    pub fn new(
        key: impl Into<String>,
        model: &str,
        messages: Vec<ChatMessage>,
        stage: &str,
        role: &str,
        timeout_ms: u64,
    ) -> Self {
        CallSpec {
            key: key.into(),
            model: model.to_string(),
            messages,
            stage: stage.to_string(),
            role: role.to_string(),
            timeout_ms,
            schema: None,
            material: Vec::new(),
        }
    }

    /// The reply is read by the server, by `schema` where it fits (see [`CallSpec::schema`]).
    pub fn with_schema(mut self, schema: &Arc<ReplySchema>) -> Self {
        self.schema = Some(schema.clone());
        self
    }

    /// Names the quoted material of the prompt (see [`CallSpec::material`]); empty texts are
    /// left out.
    pub fn quoting(mut self, material: impl IntoIterator<Item = (String, String)>) -> Self {
        self.material.extend(
            material
                .into_iter()
                .filter(|(_, text)| !text.trim().is_empty())
                .map(|(name, text)| Material { name, text: text.into() }),
        );
        self
    }
}

/// Token usage and cost reported by a provider for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// In the provider's currency (OpenRouter: USD), when the response carries it.
    pub cost: Option<f64>,
}

impl Usage {
    /// `self` and `other` together: their tokens summed, and a cost when either has one.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
            cost: match (self.cost, other.cost) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
            },
        }
    }
}

/// Why a model call failed, as classified by the provider layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CallErrorKind {
    Timeout,
    /// The server answered with a non-success HTTP status.
    Http,
    /// Connection refused, reset, DNS, TLS...
    Transport,
    /// The server answered 2xx but the body was not a usable completion.
    Malformed,
    /// The run was cancelled while the call was in flight.
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallError {
    pub kind: CallErrorKind,
    /// HTTP status, for `Http`.
    pub status: Option<u16>,
    /// Human-readable message (the provider's own message for HTTP errors).
    pub message: String,
    /// The provider's `Retry-After`, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl CallError {
    pub fn new(kind: CallErrorKind, status: Option<u16>, message: impl Into<String>) -> Self {
        CallError { kind, status, message: message.into(), retry_after_ms: None }
    }
}

/// The outcome of one [`CallSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct CallReply {
    pub key: String,
    pub model: String,
    pub response_time_ms: u64,
    pub result: Result<String, CallError>,
    pub usage: Option<Usage>,
}

/// One row of `deliberation_stages`, as the mode wants it stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageRow {
    pub stage_type: String,
    pub stage_order: i32,
    pub model: Option<String>,
    pub role: Option<String>,
    pub content: String,
    pub parsed_data: Option<Value>,
    pub response_time_ms: Option<i64>,
}

impl StageRow {
    /// A row holding `content`, with no model, role, data or time yet: a mode adds what the
    /// stage has (`StageRow::new("stage2", 2, &text).by(&model, "council").data(&row).took(ms)`).
    pub fn new(
        stage_type: impl Into<String>,
        stage_order: i32,
        content: impl Into<String>,
    ) -> Self {
        StageRow {
            stage_type: stage_type.into(),
            stage_order,
            model: None,
            role: None,
            content: content.into(),
            parsed_data: None,
            response_time_ms: None,
        }
    }

    /// Written by `model` in `role`.
    pub fn by(self, model: &str, role: &str) -> Self {
        self.model(Some(model.to_string())).role(role)
    }

    /// Written by this model (None: by the server, standing in for one).
    pub fn model(mut self, model: Option<String>) -> Self {
        self.model = model;
        self
    }

    /// Written in this role.
    pub fn role(mut self, role: &str) -> Self {
        self.role = Some(role.to_string());
        self
    }

    /// What the mode read from the content, or keeps beside it.
    pub fn data<T: Serialize + ?Sized>(self, data: &T) -> Self {
        self.parsed(to_json(data))
    }

    /// The same as [`StageRow::data`], for data that is JSON already.
    pub fn parsed(mut self, data: Value) -> Self {
        self.parsed_data = Some(data);
        self
    }

    /// How long its call took, in milliseconds (None: no call).
    pub fn took(mut self, response_time_ms: impl Into<Option<i64>>) -> Self {
        self.response_time_ms = response_time_ms.into();
        self
    }

    /// A row of data computed by the mode (a label map, a tally, a summary): no model, the
    /// JSON text as content and the same value as parsed data.
    pub fn computed(stage_type: &str, stage_order: i32, data: Value) -> Self {
        StageRow::new(stage_type, stage_order, data.to_string()).parsed(data)
    }
}

/// What a mode asks the engine to do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Start a model call; its reply comes back through [`Mode::on_reply`].
    Call(CallSpec),
    /// Publish an event to watchers (seed event names and payloads).
    Emit { event: String, data: Value },
    /// Store a stage row (written as soon as the effect is executed).
    Store(StageRow),
    /// Set the conversation's title.
    SetTitle(String),
    /// The deliberation produced its answer (the assistant message content). Calls still in
    /// flight (a title, say) are awaited and their replies still delivered before `complete`.
    Finish { answer: String },
    /// The deliberation failed; calls in flight are dropped and `error` is published.
    Fail { message: String },
    /// Flag the run for a person to review (Clarity's `needs_human_review`), with the reason.
    FlagForReview { reason: String },
    /// Call [`Mode::on_timer`] with `key` after `after_ms` (modes have no clock of their own:
    /// a time limit is a timer the engine keeps).
    Timer { key: String, after_ms: u64 },
}

impl Effect {
    pub fn emit(event: &str, data: Value) -> Self {
        Effect::Emit { event: event.to_string(), data }
    }

    /// An event with nothing to say but that it happened (a stage's start): `{}`.
    pub fn empty(event: &str) -> Self {
        Effect::Emit { event: event.to_string(), data: Value::Object(Default::default()) }
    }

    /// An event whose payload is a typed struct (its fields in order are the JSON's keys).
    pub fn event<T: Serialize + ?Sized>(event: &str, data: &T) -> Self {
        Effect::Emit { event: event.to_string(), data: to_json(data) }
    }
}

/// A typed payload, result or parsed row data as the JSON events and rows carry. Only a map
/// with keys that are not strings could fail to convert, and no payload has one.
pub fn to_json<T: Serialize + ?Sized>(data: &T) -> Value {
    serde_json::to_value(data).unwrap_or(Value::Null)
}

/// Everything a mode knows about the run it drives. Built by the engine.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub run_id: String,
    pub conversation_id: String,
    /// The assistant message the stages belong to.
    pub message_id: String,
    pub question: String,
    /// Earlier messages of the conversation, oldest first, not yet truncated.
    pub history: Vec<ChatMessage>,
    /// True when the conversation is new (a title is generated only then).
    pub new_conversation: bool,
    /// Seed for label shuffles, derived from the run id ([`common::seed_from_run_id`]).
    pub seed: u64,
    /// The models whose routes take structured output: their machine-read calls ask for JSON.
    pub structured: Structured,
    /// The text of the files the run was given, as it precedes each prompt (empty when none): a
    /// mode that holds its models to what the user's material states reads the files here.
    pub material: Arc<str>,
}

/// The models of a run whose routes take structured output (`structured_output` other than
/// `off`): a mode asks them for its reply schema's JSON instead of its text format. Fixed when
/// the run starts and journaled with it, so a resumed run asks as it asked before.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Structured(BTreeSet<String>);

impl Structured {
    /// These models answer in JSON.
    pub fn models<S: AsRef<str>>(models: impl IntoIterator<Item = S>) -> Self {
        Structured(models.into_iter().map(|m| m.as_ref().to_string()).collect())
    }

    /// Whether `model` is asked for JSON.
    pub fn json(&self, model: &str) -> bool {
        self.0.contains(model)
    }

    /// The prompt `model` is asked: `json` (its stage's JSON form) when it answers in JSON,
    /// else `text` (the seed's format).
    pub fn pick<'a, T: ?Sized>(&self, model: &str, text: &'a T, json: &'a T) -> &'a T {
        if self.json(model) {
            json
        } else {
            text
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A deliberation mode's state machine.
pub trait Mode: Send {
    /// The first effects of the run (its first batch of calls and start events).
    fn start(&mut self) -> Vec<Effect>;
    /// One call finished (successfully or not). Called once per [`CallSpec`] started.
    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect>;
    /// A timer the mode asked for ran out (never called after the run ended).
    fn on_timer(&mut self, _key: &str) -> Vec<Effect> {
        Vec::new()
    }
}

/// The modes Conclave knows.
pub use registry::{instantiate, load_result, ModeKind};

/// A client's mistake in a request, naming the offending field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: &str, message: impl Into<String>) -> Self {
        Self { field: field.to_string(), message: message.into() }
    }
}

/// What validation needs to know about the server.
#[derive(Debug, Clone, Default)]
pub struct Defaults {
    /// True when no real provider key is configured: default models are sim models.
    pub offline: bool,
    /// Per-stage timeout when the request does not set one.
    pub stage_timeout_ms: u64,
    /// Backup models for the single-model roles (the configuration's `[fallback]`).
    pub fallback: Fallbacks,
    /// The configuration's `[defaults]` over the built-in table ([`defaults::TABLE`]).
    pub default_models: defaults::ModelDefaults,
}

impl Defaults {
    /// The models of `mode`'s `role` when a request names none.
    pub fn models(&self, mode: &str, role: &str) -> Vec<String> {
        self.default_models.models(mode, role, self.offline)
    }

    /// Whether a run that names no models would run on some sim model: a role of some mode
    /// defaults to one (offline, the built-in table's; a `[defaults]` entry may name one too).
    pub fn sim_by_default(&self) -> bool {
        ModeKind::all().into_iter().any(|k| {
            let spec = k.spec();
            spec.roles
                .iter()
                .any(|r| self.models(spec.id, r.id).iter().any(|m| m.starts_with("sim/")))
        })
    }

    /// The model of `mode`'s single-model `role` when a request names none.
    pub fn model(&self, mode: &str, role: &str) -> String {
        self.models(mode, role).into_iter().next().unwrap_or_default()
    }

    /// The model of `mode`'s `role` when a request names none and its built-in default is
    /// another role's model (`derived`), unless `[defaults]` names one.
    pub fn model_or(&self, mode: &str, role: &str, derived: &str) -> String {
        self.default_models.overridden(mode, role).unwrap_or_else(|| derived.to_string())
    }

    /// The backup a run may use for `mode`'s `role` whose model is `primary` (see
    /// [`Fallbacks::for_role`]).
    pub fn backup(&self, mode: &str, role: &str, primary: &str) -> Option<String> {
        self.fallback.for_role(mode, role, primary)
    }
}

pub use defaults::Fallbacks;

/// A request that passed its mode's validation, with defaults filled in.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidRequest {
    pub mode: ModeKind,
    pub question: String,
    pub conversation_id: Option<String>,
    /// The mode's normalised configuration (models, chairman, timeouts...), as stored with the run.
    pub config: Value,
    /// Every model id the run may call, for routing checks before anything runs.
    pub models: Vec<String>,
}

/// Validates a start request (`mode` defaults to `council`): the keys, types and sizes every
/// mode shares ([`request::check_fields`]), then the mode's own rules.
pub fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let obj = body
        .as_object()
        .ok_or_else(|| FieldError::new("body", "the request must be a JSON object"))?;
    let mode = match obj.get("mode") {
        None | Some(Value::Null) => ModeKind::default_mode(),
        Some(Value::String(s)) => ModeKind::parse(s).ok_or_else(|| {
            let known: Vec<&str> = ModeKind::all().iter().map(|m| m.as_str()).collect();
            let shown: String = s.chars().take(request::MAX_ID_CHARS).collect();
            FieldError::new(
                "mode",
                format!("unknown mode {shown:?}; known modes: {}", known.join(", ")),
            )
        })?,
        Some(_) => return Err(FieldError::new("mode", "must be a string")),
    };
    // Unknown keys, wrong types, over-long texts and numbers out of range, named, before
    // the mode looks.
    let empty_text = request::check_fields(obj, mode)?;
    let valid = (mode.spec().validate)(body, defaults)?;
    empty_text.map_or(Ok(valid), Err)
}
