//! Configuration: command-line flags and environment first, then the configuration file
//! (`conclave.toml`, or `--config PATH` / `CONCLAVE_CONFIG`), then defaults.
//!
//! Builds the provider routes from it; knows nothing of HTTP or actors.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::modes::defaults::{ModelDefaults, OneOrMany};
use crate::modes::Fallbacks;
use crate::providers::openai::{OpenAiCompatible, TokenField};
use crate::providers::sim::{SimConfig, SimModelConfig, SimProvider};
use crate::providers::{OutputCaps, Provider, Providers, Route, StructuredOutput};
use crate::secrets::{redact_config_text, Secret};

pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
pub const DEFAULT_DATABASE_URL: &str = "sqlite://conclave.db";
pub const DEFAULT_OPENROUTER_BASE_URL: &str = "https://openrouter.ai/api/v1";
pub const DEFAULT_STAGE_TIMEOUT_MS: u64 = 120_000;
/// Concurrent calls to OpenRouter (or `OPENROUTER_BASE_URL`) unless configured.
pub const DEFAULT_OPENROUTER_MAX_CONCURRENT_CALLS: usize = 16;
/// What Redis channel and key names start with unless `redis_prefix` says otherwise.
pub const DEFAULT_REDIS_PREFIX: &str = "conclave";
/// The largest output cap accepted (tokens): above any model's real limit, so a larger
/// number is a typo, not a wish.
pub const MAX_OUTPUT_TOKENS: i64 = 200_000;

/// The roles each mode gives its calls, from the mode registry: what a `[max_tokens]` key may
/// name, alone (`chairman`) or after its mode (`council.chairman`).
fn call_roles() -> Vec<(&'static str, Vec<&'static str>)> {
    crate::modes::registry::MODES
        .iter()
        .map(|m| (m.id, m.roles.iter().map(|r| r.id).collect()))
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Unreadable, or larger than [`crate::files::MAX_CONFIG_BYTES`].
    #[error(transparent)]
    Read(#[from] crate::files::FileError),
    #[error("the configuration file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("configuration: {0}")]
    Invalid(String),
}

/// A route in the configuration file: model ids starting with `prefix` go to an
/// OpenAI-compatible server.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    pub prefix: String,
    /// e.g. `http://127.0.0.1:11434/v1` for Ollama.
    pub base_url: String,
    /// The key itself (prefer `api_key_env`); it never prints.
    pub api_key: Option<Secret>,
    /// The environment variable holding the key.
    pub api_key_env: Option<String>,
    /// Send `llama3` for `ollama/llama3` (default true).
    #[serde(default = "yes")]
    pub strip_prefix: bool,
    /// At most this many calls to this route at once; more wait their turn (default: no cap).
    #[serde(default)]
    pub max_concurrent_calls: Option<usize>,
    /// A ceiling on every call's output cap on this route (default: none).
    #[serde(default)]
    pub max_tokens: Option<i64>,
    /// The field the cap is sent in: `max_tokens` (default) or `max_completion_tokens`.
    #[serde(default)]
    pub max_tokens_field: Option<TokenField>,
    /// Treat the server as OpenRouter (ask for each call's cost) or not; default: by host.
    #[serde(default)]
    pub openrouter: Option<bool>,
    /// How machine-read calls ask this server for JSON: `off` (default, the text formats),
    /// `json_schema` (the reply schema as `response_format`) or `json_object`.
    #[serde(default)]
    pub structured_output: StructuredOutput,
    /// The context of this route's models in tokens (prompt and reply); default: what the
    /// server says (llama.cpp's `/props`, Ollama's `/api/show`), else prompts are not fitted.
    #[serde(default)]
    pub context_tokens: Option<i64>,
    /// This route's models see images: a run's attached images are sent to them (default
    /// false: a run that attaches an image to one of its models is refused before any call).
    #[serde(default)]
    pub vision: bool,
}

fn yes() -> bool {
    true
}

/// The sim section of the configuration file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SimSection {
    pub latency_ms: Option<u64>,
    /// At most this many in-process sim calls at once (default: no cap).
    pub max_concurrent_calls: Option<usize>,
    /// Whether the sim models are asked for JSON, as a route's `structured_output`.
    #[serde(default)]
    pub structured_output: StructuredOutput,
    /// A context the sim models hold (in the sim's token count) and refuse prompts past, as
    /// llama.cpp does; default: none.
    pub context_tokens: Option<i64>,
    #[serde(default)]
    pub models: HashMap<String, SimModelConfig>,
}

/// The configuration file, every field optional.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub bind: Option<String>,
    pub database_url: Option<String>,
    pub stage_timeout_ms: Option<u64>,
    pub openrouter_base_url: Option<String>,
    /// At most this many calls to OpenRouter at once (default 16).
    pub openrouter_max_concurrent_calls: Option<usize>,
    #[serde(default)]
    pub sim: SimSection,
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// Interval between WebSocket pings, and how long a silent client is kept.
    pub heartbeat_interval_ms: Option<u64>,
    pub client_timeout_ms: Option<u64>,
    /// How long a WebSocket may stay open without signing in (default 10 000).
    pub sign_in_timeout_ms: Option<u64>,
    /// WebSockets one client address may hold open without signing in (default 16).
    pub max_unauthenticated_sockets_per_address: Option<usize>,
    /// Attempts per model call, the first included (1 = no retries); default 4.
    pub retry_max_attempts: Option<u32>,
    /// First backoff delay; it doubles per attempt (with jitter) unless the provider says
    /// `Retry-After`. Default 500.
    pub retry_base_delay_ms: Option<u64>,
    /// On SIGTERM / Ctrl-C, how long running deliberations may take to finish (default 30 000).
    pub shutdown_grace_ms: Option<u64>,
    /// How long a running run's lease lasts without a heartbeat (default 10 000); after it,
    /// another process (or this one after a restart) resumes the run.
    pub lease_ms: Option<u64>,
    /// Runs one user may have running at once (default 8).
    pub max_runs_per_user: Option<usize>,
    /// Runs one user may start per minute (default 30).
    pub max_starts_per_minute: Option<usize>,
    /// `[fallback]`: backup models for the single-model roles (`chairman`, `foreman`,
    /// `facilitator`, `arbiter`).
    #[serde(default)]
    pub fallback: Fallbacks,
    /// `[defaults]`: a role's models when a request names none, by the role's id
    /// (`"jury.juror" = ["a", "b"]`, `"jury.foreman" = "c"`), over the built-in table
    /// ([`crate::modes::defaults::TABLE`]).
    #[serde(default)]
    pub defaults: BTreeMap<String, OneOrMany>,
    /// Redis for several instances on one database (`REDIS_URL` wins): run events, the
    /// dashboard and cancels cross instances over its pub/sub. Unset: a single instance.
    pub redis_url: Option<String>,
    /// What this deployment's channel and key names start with (default `conclave`), so
    /// deployments sharing one Redis stay apart.
    pub redis_prefix: Option<String>,
    /// `[max_tokens]`: output caps: `default`, by role (`title = 300`) and by mode and role
    /// (`"council.chairman" = 4000`).
    #[serde(default)]
    pub max_tokens: BTreeMap<String, i64>,
    /// `[attachments]`: size limits of attached files.
    #[serde(default)]
    pub attachments: AttachmentsSection,
}

/// The `[attachments]` section: every field optional (see [`crate::attachments::Limits`]).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AttachmentsSection {
    /// The largest file, in MB (default 10).
    pub max_file_mb: Option<f64>,
    /// All of a run's files together, in MB (default 25).
    pub max_run_mb: Option<f64>,
    /// The most pages a PDF may have (default 200).
    pub max_pdf_pages: Option<u32>,
}

/// Values given on the command line or in the environment (they win over the file).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub config_path: Option<PathBuf>,
    pub bind: Option<String>,
    pub database_url: Option<String>,
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind: String,
    pub database_url: String,
    pub stage_timeout_ms: u64,
    pub openrouter_api_key: Option<Secret>,
    pub openrouter_base_url: String,
    pub openrouter_max_concurrent_calls: usize,
    pub sim: SimConfig,
    /// Cap on concurrent in-process sim calls.
    pub sim_max_concurrent_calls: Option<usize>,
    /// Whether the in-process sim models are asked for JSON.
    pub sim_structured_output: StructuredOutput,
    pub routes: Vec<RouteConfig>,
    pub heartbeat_interval: Duration,
    pub client_timeout: Duration,
    /// See [`FileConfig::sign_in_timeout_ms`].
    pub sign_in_timeout: Duration,
    /// See [`FileConfig::max_unauthenticated_sockets_per_address`].
    pub max_unauthenticated_per_address: usize,
    pub token_flush: Duration,
    /// How long an ended run's events stay in memory for late watchers.
    pub retention: Duration,
    /// How long a title may still arrive after the answer before the run completes without it.
    pub finish_grace: Duration,
    pub retry: crate::engine::retry::RetryPolicy,
    /// On SIGTERM / Ctrl-C, how long running deliberations may take to finish.
    pub shutdown_grace: Duration,
    /// Per-user limits on starting runs.
    pub user_limits: crate::engine::limits::UserLimits,
    /// The time the rate limiters go by (the system's; tests move one by hand).
    pub clock: crate::engine::limits::Clock,
    /// Backup models for the single-model roles.
    pub fallback: Fallbacks,
    /// Default models by role (`[defaults]`, checked).
    pub default_models: ModelDefaults,
    /// See [`FileConfig::lease_ms`]; heartbeats go out every third of it.
    pub lease: Duration,
    /// See [`FileConfig::redis_url`]; `None` runs a single instance with no Redis at all.
    pub redis_url: Option<String>,
    pub redis_prefix: String,
    /// Every call's output cap, by mode and role.
    pub max_tokens: OutputCaps,
    /// Size limits of attached files.
    pub attachments: crate::attachments::Limits,
}

impl Config {
    /// Defaults only (no file, no environment): what tests start from.
    pub fn defaults() -> Self {
        Config {
            bind: DEFAULT_BIND.into(),
            database_url: DEFAULT_DATABASE_URL.into(),
            stage_timeout_ms: DEFAULT_STAGE_TIMEOUT_MS,
            openrouter_api_key: None,
            openrouter_base_url: DEFAULT_OPENROUTER_BASE_URL.into(),
            openrouter_max_concurrent_calls: DEFAULT_OPENROUTER_MAX_CONCURRENT_CALLS,
            sim: SimConfig::default(),
            sim_max_concurrent_calls: None,
            sim_structured_output: StructuredOutput::Off,
            routes: Vec::new(),
            heartbeat_interval: Duration::from_secs(5),
            client_timeout: Duration::from_secs(30),
            sign_in_timeout: Duration::from_secs(10),
            max_unauthenticated_per_address: 16,
            token_flush: Duration::from_millis(100),
            retention: Duration::from_secs(600),
            finish_grace: Duration::from_secs(10),
            retry: crate::engine::retry::RetryPolicy::default(),
            shutdown_grace: Duration::from_secs(30),
            user_limits: crate::engine::limits::UserLimits::default(),
            clock: crate::engine::limits::Clock::default(),
            fallback: Fallbacks::default(),
            default_models: ModelDefaults::default(),
            lease: Duration::from_secs(10),
            redis_url: None,
            redis_prefix: DEFAULT_REDIS_PREFIX.into(),
            max_tokens: OutputCaps::default(),
            attachments: crate::attachments::Limits::default(),
        }
    }

    /// Reads the file (if any) and the environment, then applies `overrides`.
    pub fn load(overrides: &Overrides) -> Result<Self, ConfigError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let path =
            overrides.config_path.clone().or_else(|| env("CONCLAVE_CONFIG").map(PathBuf::from));
        let file = match &path {
            Some(p) => read_file(p)?,
            None if Path::new("conclave.toml").exists() => read_file(Path::new("conclave.toml"))?,
            None => FileConfig::default(),
        };
        let sim_latency = match env("CONCLAVE_SIM_LATENCY_MS") {
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                ConfigError::Invalid(format!(
                    "CONCLAVE_SIM_LATENCY_MS must be a number of milliseconds, not {v:?}"
                ))
            })?),
            None => None,
        };
        let mut c = Self::from_parts(
            file,
            overrides,
            env("OPENROUTER_API_KEY"),
            env("OPENROUTER_BASE_URL"),
            sim_latency,
        )?;
        if let Some(url) = env("REDIS_URL") {
            c.redis_url = Some(check_redis_url(url)?);
        }
        Ok(c)
    }

    /// Merges the sources in precedence order (separate from `load` so tests need no env).
    pub fn from_parts(
        file: FileConfig,
        overrides: &Overrides,
        api_key: Option<String>,
        base_url: Option<String>,
        sim_latency_ms: Option<u64>,
    ) -> Result<Self, ConfigError> {
        let mut c = Config::defaults();
        c.bind = overrides.bind.clone().or(file.bind).unwrap_or(c.bind);
        c.database_url =
            overrides.database_url.clone().or(file.database_url).unwrap_or(c.database_url);
        c.stage_timeout_ms = file.stage_timeout_ms.unwrap_or(c.stage_timeout_ms);
        if !(1_000..=3_600_000).contains(&c.stage_timeout_ms) {
            return Err(ConfigError::Invalid(
                "stage_timeout_ms must be between 1000 and 3600000".into(),
            ));
        }
        c.openrouter_api_key = api_key.map(Secret::from);
        c.openrouter_base_url =
            base_url.or(file.openrouter_base_url).unwrap_or(c.openrouter_base_url);
        if let Some(ms) = sim_latency_ms.or(file.sim.latency_ms) {
            c.sim.latency_ms = ms;
        }
        c.sim.models = file.sim.models;
        let cap_ok = |n: Option<usize>| n.is_none_or(|n| (1..=10_000).contains(&n));
        if !cap_ok(file.openrouter_max_concurrent_calls) || !cap_ok(file.sim.max_concurrent_calls) {
            return Err(ConfigError::Invalid(
                "max_concurrent_calls must be between 1 and 10000".into(),
            ));
        }
        c.attachments = attachment_limits(&file.attachments)?;
        c.sim_max_concurrent_calls = file.sim.max_concurrent_calls;
        c.sim_structured_output = file.sim.structured_output;
        if let Some(n) = file.sim.context_tokens {
            c.sim.context_tokens = Some(context_count("[sim] context_tokens", n)?);
        }
        if let Some(n) = file.openrouter_max_concurrent_calls {
            c.openrouter_max_concurrent_calls = n;
        }
        for r in &file.routes {
            if r.prefix.is_empty() {
                return Err(ConfigError::Invalid("a route has an empty prefix".into()));
            }
            if !cap_ok(r.max_concurrent_calls) {
                return Err(ConfigError::Invalid(format!(
                    "route {:?}: max_concurrent_calls must be between 1 and 10000",
                    r.prefix
                )));
            }
            if !(r.base_url.starts_with("http://") || r.base_url.starts_with("https://")) {
                return Err(ConfigError::Invalid(format!(
                    "route {:?}: base_url must start with http:// or https://",
                    r.prefix
                )));
            }
            if let Some(n) = r.max_tokens {
                token_count(&format!("route {:?}: max_tokens", r.prefix), n)?;
            }
            if let Some(n) = r.context_tokens {
                context_count(&format!("route {:?}: context_tokens", r.prefix), n)?;
            }
        }
        c.max_tokens = output_caps(&file.max_tokens)?;
        c.routes = file.routes;
        if let Some(ms) = file.heartbeat_interval_ms {
            c.heartbeat_interval = Duration::from_millis(ms.max(100));
        }
        if let Some(ms) = file.client_timeout_ms {
            c.client_timeout = Duration::from_millis(ms.max(200));
        }
        if let Some(ms) = file.sign_in_timeout_ms {
            c.sign_in_timeout = Duration::from_millis(ms.clamp(100, 600_000));
        }
        if let Some(n) = file.max_unauthenticated_sockets_per_address {
            if !(1..=100_000).contains(&n) {
                return Err(ConfigError::Invalid(
                    "max_unauthenticated_sockets_per_address must be 1 to 100000".into(),
                ));
            }
            c.max_unauthenticated_per_address = n;
        }
        if let Some(n) = file.retry_max_attempts {
            if !(1..=10).contains(&n) {
                return Err(ConfigError::Invalid(
                    "retry_max_attempts must be between 1 and 10".into(),
                ));
            }
            c.retry.max_attempts = n;
        }
        if let Some(n) = file.max_runs_per_user {
            if !(1..=10_000).contains(&n) {
                return Err(ConfigError::Invalid("max_runs_per_user must be 1 to 10000".into()));
            }
            c.user_limits.concurrent_runs = n;
        }
        if let Some(n) = file.max_starts_per_minute {
            if !(1..=100_000).contains(&n) {
                return Err(ConfigError::Invalid(
                    "max_starts_per_minute must be 1 to 100000".into(),
                ));
            }
            c.user_limits.starts_per_minute = n;
        }
        if let Some(ms) = file.shutdown_grace_ms {
            c.shutdown_grace = Duration::from_millis(ms.min(3_600_000));
        }
        if let Some(ms) = file.lease_ms {
            if !(300..=600_000).contains(&ms) {
                return Err(ConfigError::Invalid("lease_ms must be between 300 and 600000".into()));
            }
            c.lease = Duration::from_millis(ms);
        }
        if let Some(ms) = file.retry_base_delay_ms {
            c.retry.base_delay = Duration::from_millis(ms.clamp(10, 60_000));
        }
        c.redis_url =
            file.redis_url.filter(|u| !u.trim().is_empty()).map(check_redis_url).transpose()?;
        if let Some(prefix) = file.redis_prefix {
            let valid = !prefix.is_empty()
                && prefix.len() <= 64
                && prefix.chars().all(|ch| ch.is_ascii_alphanumeric() || "_-.".contains(ch));
            if !valid {
                return Err(ConfigError::Invalid(
                    "redis_prefix must be 1 to 64 letters, digits, '_', '-' or '.'".into(),
                ));
            }
            c.redis_prefix = prefix;
        }
        c.fallback = file.fallback;
        c.default_models =
            ModelDefaults::from_config(file.defaults).map_err(ConfigError::Invalid)?;
        let backups =
            c.fallback.configured().into_iter().map(|(k, m)| (format!("fallback.{k}"), m));
        for (key, model) in backups.chain(c.default_models.configured()) {
            if !c.serves(model) {
                return Err(ConfigError::Invalid(format!(
                    "{key}: no provider serves model {model:?} (use a sim model, a routed \
                     prefix, or set OPENROUTER_API_KEY)"
                )));
            }
        }
        crate::modes::defaults::check_usable(&c.mode_defaults()).map_err(ConfigError::Invalid)?;
        Ok(c)
    }

    /// What request validation needs to know of this configuration.
    pub fn mode_defaults(&self) -> crate::modes::Defaults {
        crate::modes::Defaults {
            offline: self.offline(),
            stage_timeout_ms: self.stage_timeout_ms,
            fallback: self.fallback.clone(),
            default_models: self.default_models.clone(),
        }
    }

    /// Whether some provider would serve `model` (the routing rule of [`Config::providers`],
    /// without building any client), so a misspelt backup is refused at start-up rather than
    /// failing every fallback at run time.
    fn serves(&self, model: &str) -> bool {
        !model.trim().is_empty()
            && (model.starts_with("sim/")
                || self.routes.iter().any(|r| model.starts_with(r.prefix.as_str()))
                || self.openrouter_api_key.is_some())
    }

    /// True when no real provider is configured: default models are sim models.
    pub fn offline(&self) -> bool {
        self.openrouter_api_key.is_none()
    }

    /// Builds the model routes: configured routes, `sim/` in-process (unless a route takes
    /// it), and OpenRouter (or `OPENROUTER_BASE_URL`) for the rest when a key is set.
    pub fn providers(&self) -> Providers {
        let mut routes: Vec<Route> = self
            .routes
            .iter()
            .map(|r| {
                let key = r.api_key.clone().or_else(|| {
                    r.api_key_env.as_ref().and_then(|k| std::env::var(k).ok()).map(Secret::from)
                });
                let mut client = OpenAiCompatible::new(&r.base_url, key)
                    .token_field(r.max_tokens_field.unwrap_or_default());
                if let Some(yes) = r.openrouter {
                    client = client.openrouter(yes);
                }
                Route {
                    prefix: r.prefix.clone(),
                    strip_prefix: r.strip_prefix,
                    provider: Arc::new(client) as Arc<dyn Provider>,
                    max_concurrent_calls: r.max_concurrent_calls,
                    // Checked by `from_parts`.
                    max_tokens: r.max_tokens.and_then(|n| u32::try_from(n).ok()),
                    structured_output: r.structured_output,
                    context_tokens: r.context_tokens.and_then(|n| u32::try_from(n).ok()),
                    vision: r.vision,
                }
            })
            .collect();
        if !routes.iter().any(|r| r.prefix == "sim/") {
            routes.push(Route {
                max_concurrent_calls: self.sim_max_concurrent_calls,
                structured_output: self.sim_structured_output,
                // The sim models take images (and say how many they were shown).
                vision: true,
                ..Route::new("sim/", Arc::new(SimProvider::new(self.sim.clone())))
            });
        }
        let fallback = self.openrouter_api_key.as_ref().map(|key| {
            Arc::new(OpenAiCompatible::new(&self.openrouter_base_url, Some(key.clone())))
                as Arc<dyn Provider>
        });
        Providers::new(routes, fallback)
            .cap_fallback(Some(self.openrouter_max_concurrent_calls))
            .with_caps(self.max_tokens.clone())
    }
}

/// The `[attachments]` limits, checked: a file from 1 KB to 1 GB, a run at least one file.
fn attachment_limits(
    section: &AttachmentsSection,
) -> Result<crate::attachments::Limits, ConfigError> {
    let mut limits = crate::attachments::Limits::default();
    let bytes = |what: &str, mb: f64| {
        if (0.001..=1024.0).contains(&mb) {
            Ok((mb * crate::attachments::MB as f64) as u64)
        } else {
            Err(ConfigError::Invalid(format!(
                "[attachments] {what} must be between 0.001 and 1024"
            )))
        }
    };
    if let Some(mb) = section.max_file_mb {
        limits.file_bytes = bytes("max_file_mb", mb)?;
    }
    if let Some(mb) = section.max_run_mb {
        limits.run_bytes = bytes("max_run_mb", mb)?;
    }
    if limits.run_bytes < limits.file_bytes {
        return Err(ConfigError::Invalid(
            "[attachments] max_run_mb must be at least max_file_mb".into(),
        ));
    }
    if let Some(pages) = section.max_pdf_pages {
        if !(1..=100_000).contains(&pages) {
            return Err(ConfigError::Invalid(
                "[attachments] max_pdf_pages must be between 1 and 100000".into(),
            ));
        }
        limits.pdf_pages = pages;
    }
    Ok(limits)
}

/// A context size from the file, checked: 256 to 100 million tokens.
fn context_count(what: &str, n: i64) -> Result<u32, ConfigError> {
    match u32::try_from(n) {
        Ok(n) if (256..=100_000_000).contains(&n) => Ok(n),
        _ => Err(ConfigError::Invalid(format!(
            "{what} must be between 256 and 100000000 tokens, not {n}"
        ))),
    }
}

/// A token count from the file, checked: 1 to [`MAX_OUTPUT_TOKENS`].
fn token_count(what: &str, n: i64) -> Result<u32, ConfigError> {
    match u32::try_from(n) {
        Ok(n) if (1..=MAX_OUTPUT_TOKENS).contains(&i64::from(n)) => Ok(n),
        _ => Err(ConfigError::Invalid(format!(
            "{what} must be a number of tokens from 1 to {MAX_OUTPUT_TOKENS}, not {n}"
        ))),
    }
}

/// The `[max_tokens]` table: `default`, roles, and `mode.role` keys naming a role the mode
/// has (see [`call_roles`]), over the built-in caps (2 000, and 300 for the title).
fn output_caps(table: &BTreeMap<String, i64>) -> Result<OutputCaps, ConfigError> {
    let mut caps = OutputCaps::default();
    let call_roles = call_roles();
    for (key, &n) in table {
        let cap = token_count(&format!("max_tokens.{key:?}"), n)?;
        if key == "default" {
            caps.default = cap;
            continue;
        }
        let known = match key.split_once('.') {
            Some((mode, role)) => {
                call_roles.iter().any(|(m, roles)| *m == mode && roles.contains(&role))
            }
            None => call_roles.iter().any(|(_, roles)| roles.contains(&key.as_str())),
        };
        if !known {
            let listed: Vec<String> = call_roles
                .iter()
                .map(|(mode, roles)| format!("{mode}: {}", roles.join(", ")))
                .collect();
            return Err(ConfigError::Invalid(format!(
                "max_tokens.{key:?} names no role: use `default`, a role or `mode.role` ({})",
                listed.join("; ")
            )));
        }
        caps.by_role.insert(key.clone(), cap);
    }
    Ok(caps)
}

/// Redis over TCP (`redis://`), TLS (`rediss://`, over rustls) or a Unix socket.
fn check_redis_url(url: String) -> Result<String, ConfigError> {
    let url = url.trim().to_string();
    if ["redis://", "rediss://", "redis+unix://", "unix://"].iter().any(|s| url.starts_with(s)) {
        Ok(url)
    } else {
        Err(ConfigError::Invalid(format!(
            "REDIS_URL / redis_url must start with redis://, rediss:// (TLS) or redis+unix://, \
             not {:?}",
            url.split("://").next().unwrap_or_default()
        )))
    }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text =
        crate::files::read_text("the configuration file", path, crate::files::MAX_CONFIG_BYTES)?;
    // The message quotes the line at fault, which may be `database_url` with its password.
    // It may also quote a key (`api_key = "sk-…"`), in its own words or the line's.
    toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: redact_config_text(&e.to_string(), &text),
    })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
