//! Process-wide counters for `GET /metrics`, and their Prometheus text exposition.
//!
//! What is counted here happens far from the web layer (in ModelCall actors, the Hub, each
//! WebSocket session), so the registry is one `static`, like the registries of the Prometheus
//! client libraries, rather than a handle threaded through every actor. It holds counts of what
//! this process did since it started; figures that live in the database (runs by mode and
//! status) are read at scrape time and passed to [`Registry::render`].
//!
//! The hot paths stay lock-free: a token dropped, a lagging watcher or a socket opening is one
//! atomic add. A finished model call takes one short lock to find its model's entry (a call
//! lasts from tens of milliseconds to minutes, so the lock is never contended in practice).
//!
//! Labels carry no secrets, user names, run ids or question text: only model ids, error kinds,
//! HTTP statuses and the fixed names below. Model ids come from requests, so at most
//! [`MAX_MODEL_LABELS`] distinct ones get their own label; the rest are counted as
//! [`OTHER_MODEL`]. This module does no I/O.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::modes::{CallErrorKind, CallReply};
use crate::store::RunCount;

/// Upper bounds (seconds) of the model-call latency histogram's buckets: from a fast cached
/// answer to a long reasoning call near the default timeout.
pub const DURATION_BUCKETS: [f64; 12] =
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0];

/// How many distinct model ids get a label of their own; later ones are counted as
/// [`OTHER_MODEL`], so requests naming ever new models cannot grow the output without bound.
pub const MAX_MODEL_LABELS: usize = 200;

/// The model label of every model beyond the first [`MAX_MODEL_LABELS`].
pub const OTHER_MODEL: &str = "other";

/// The `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

static REGISTRY: Registry = Registry::new();

/// The process's registry.
pub fn global() -> &'static Registry {
    &REGISTRY
}

/// Which feed a lagging watcher was told to resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// A run's events.
    Run,
    /// The dashboard's list of runs.
    Dashboard,
}

/// Everything counted for one model label.
#[derive(Default)]
struct ModelStats {
    /// Calls per latency bucket (not cumulative; the last slot is over the largest bound).
    buckets: [AtomicU64; DURATION_BUCKETS.len() + 1],
    duration_ms_sum: AtomicU64,
    calls: AtomicU64,
    retries: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    /// The bits of an `f64`: the sum of the costs providers reported.
    cost_bits: AtomicU64,
    cost_seen: AtomicBool,
    /// Failed calls by error kind and HTTP status (failures are rare: a lock is fine).
    errors: Mutex<BTreeMap<(&'static str, Option<u16>), u64>>,
}

/// Counters of this process (see the module documentation).
pub struct Registry {
    models: Mutex<BTreeMap<String, Arc<ModelStats>>>,
    ws_open: AtomicI64,
    ws_total: AtomicU64,
    events_dropped: AtomicU64,
    /// Client messages a WebSocket dropped for coming too fast.
    ws_messages_dropped: AtomicU64,
    lagged_run: AtomicU64,
    lagged_dashboard: AtomicU64,
    /// Runs started by this process, by mode (six modes: a lock is fine).
    runs_started: Mutex<BTreeMap<&'static str, u64>>,
    runs_resumed: AtomicU64,
    commit_failures: AtomicU64,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

/// Counts one open WebSocket connection for as long as it lives.
#[must_use = "the connection counts as open until this is dropped"]
pub struct WsConnection {
    registry: &'static Registry,
}

impl Drop for WsConnection {
    fn drop(&mut self) {
        self.registry.ws_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The label of an error kind, as the events spell it.
fn kind_label(kind: CallErrorKind) -> &'static str {
    match kind {
        CallErrorKind::Timeout => "timeout",
        CallErrorKind::Http => "http",
        CallErrorKind::Transport => "transport",
        CallErrorKind::Malformed => "malformed",
        CallErrorKind::Cancelled => "cancelled",
    }
}

impl Registry {
    /// An empty registry (the process has [`global`]; tests make their own).
    pub const fn new() -> Self {
        Registry {
            models: Mutex::new(BTreeMap::new()),
            ws_open: AtomicI64::new(0),
            ws_total: AtomicU64::new(0),
            events_dropped: AtomicU64::new(0),
            ws_messages_dropped: AtomicU64::new(0),
            lagged_run: AtomicU64::new(0),
            lagged_dashboard: AtomicU64::new(0),
            runs_started: Mutex::new(BTreeMap::new()),
            runs_resumed: AtomicU64::new(0),
            commit_failures: AtomicU64::new(0),
        }
    }

    /// A run was started here.
    pub fn run_started(&self, mode: &'static str) {
        let mut started = self.runs_started.lock().unwrap_or_else(PoisonError::into_inner);
        *started.entry(mode).or_default() += 1;
    }

    /// A run left by a dead process was resumed here.
    pub fn run_resumed(&self) {
        self.runs_resumed.fetch_add(1, Ordering::Relaxed);
    }

    /// The database refused a run's step (it is tried again).
    pub fn commit_failed(&self) {
        self.commit_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// The entry of `model`'s label, made on first use while fewer than
    /// [`MAX_MODEL_LABELS`] exist.
    fn model(&self, model: &str) -> Arc<ModelStats> {
        let mut models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(stats) = models.get(model) {
            return stats.clone();
        }
        let own = models.len() - usize::from(models.contains_key(OTHER_MODEL));
        let label = if own < MAX_MODEL_LABELS { model } else { OTHER_MODEL };
        models.entry(label.to_string()).or_default().clone()
    }

    /// A model call ended, successfully or not (a cancelled run's calls are dropped before
    /// they end and are not counted): its latency, its error, and the tokens and cost its
    /// reply reported.
    pub fn call_finished(&self, reply: &CallReply) {
        let stats = self.model(&reply.model);
        let seconds = reply.response_time_ms as f64 / 1000.0;
        let bucket =
            DURATION_BUCKETS.iter().position(|&b| seconds <= b).unwrap_or(DURATION_BUCKETS.len());
        stats.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        stats.duration_ms_sum.fetch_add(reply.response_time_ms, Ordering::Relaxed);
        stats.calls.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = &reply.result {
            let status = if e.kind == CallErrorKind::Http { e.status } else { None };
            let mut errors = stats.errors.lock().unwrap_or_else(PoisonError::into_inner);
            *errors.entry((kind_label(e.kind), status)).or_default() += 1;
        }
        if let Some(usage) = &reply.usage {
            stats.prompt_tokens.fetch_add(usage.prompt_tokens, Ordering::Relaxed);
            stats.completion_tokens.fetch_add(usage.completion_tokens, Ordering::Relaxed);
            if let Some(cost) = usage.cost.filter(|c| c.is_finite() && *c >= 0.0) {
                stats.cost_seen.store(true, Ordering::Relaxed);
                // No atomic f64 add: swap in the new sum unless another call got there first.
                let _ = stats.cost_bits.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                    Some((f64::from_bits(b) + cost).to_bits())
                });
            }
        }
    }

    /// An attempt of a call to `model` failed and is retried.
    pub fn call_retried(&self, model: &str) {
        self.model(model).retries.fetch_add(1, Ordering::Relaxed);
    }

    /// A WebSocket connection opened; it counts as open until the answer is dropped.
    pub fn ws_opened(&'static self) -> WsConnection {
        self.ws_open.fetch_add(1, Ordering::Relaxed);
        self.ws_total.fetch_add(1, Ordering::Relaxed);
        WsConnection { registry: self }
    }

    /// `n` token events were not sent to a watcher whose buffer was full.
    pub fn tokens_dropped(&self, n: usize) {
        self.events_dropped.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// A WebSocket client's message was dropped for coming too fast (see `web::limits::Flood`).
    pub fn ws_message_dropped(&self) {
        self.ws_messages_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// A watcher whose buffer was full was unsubscribed and told to resume.
    pub fn watcher_lagged(&self, feed: Feed) {
        let counter = match feed {
            Feed::Run => &self.lagged_run,
            Feed::Dashboard => &self.lagged_dashboard,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Token events dropped so far.
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped.load(Ordering::Relaxed)
    }

    /// Watchers of `feed` told to resume so far.
    pub fn watchers_lagged(&self, feed: Feed) -> u64 {
        match feed {
            Feed::Run => self.lagged_run.load(Ordering::Relaxed),
            Feed::Dashboard => self.lagged_dashboard.load(Ordering::Relaxed),
        }
    }

    /// The text exposition of every metric, with `runs` (read from the database) as the
    /// `conclave_runs` gauge.
    pub fn render(&self, runs: &[RunCount]) -> String {
        let models: Vec<(String, Arc<ModelStats>)> = self
            .models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(m, s)| (m.clone(), s.clone()))
            .collect();
        let mut out = Exposition::default();

        out.family("conclave_runs", "gauge", "Runs in the database, by mode and status.");
        for r in runs {
            out.sample("conclave_runs", &[("mode", &r.mode), ("status", &r.status)], r.count);
        }

        let name = "conclave_runs_started_total";
        out.family(name, "counter", "Runs started by this process, by mode.");
        let started = self.runs_started.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for (mode, n) in started {
            out.sample(name, &[("mode", mode)], n);
        }
        let name = "conclave_runs_resumed_total";
        out.family(name, "counter", "Runs left by a dead process that this one resumed.");
        out.sample(name, &[], self.runs_resumed.load(Ordering::Relaxed));
        let name = "conclave_store_commit_failures_total";
        out.family(name, "counter", "Writes of a run's step the database refused (retried).");
        out.sample(name, &[], self.commit_failures.load(Ordering::Relaxed));

        let name = "conclave_model_call_duration_seconds";
        out.family(name, "histogram", "Model calls by how long they took, retries included.");
        for (model, s) in &models {
            let mut cumulative = 0;
            for (i, bound) in DURATION_BUCKETS.iter().enumerate() {
                cumulative += s.buckets[i].load(Ordering::Relaxed);
                let le = bound.to_string();
                out.sample(&format!("{name}_bucket"), &[("model", model), ("le", &le)], cumulative);
            }
            cumulative += s.buckets[DURATION_BUCKETS.len()].load(Ordering::Relaxed);
            out.sample(&format!("{name}_bucket"), &[("model", model), ("le", "+Inf")], cumulative);
            let sum = s.duration_ms_sum.load(Ordering::Relaxed) as f64 / 1000.0;
            out.sample(&format!("{name}_sum"), &[("model", model)], sum);
            out.sample(&format!("{name}_count"), &[("model", model)], cumulative);
        }

        let name = "conclave_model_call_errors_total";
        out.family(name, "counter", "Model calls that failed, by kind (and status for http).");
        for (model, s) in &models {
            let errors = s.errors.lock().unwrap_or_else(PoisonError::into_inner).clone();
            for ((kind, status), n) in errors {
                let status = status.map(|s| s.to_string()).unwrap_or_default();
                out.sample(name, &[("model", model), ("kind", kind), ("status", &status)], n);
            }
        }

        let name = "conclave_model_call_retries_total";
        out.family(name, "counter", "Failed attempts of model calls that were tried again.");
        for (model, s) in &models {
            out.sample(name, &[("model", model)], s.retries.load(Ordering::Relaxed));
        }

        let name = "conclave_tokens_total";
        out.family(name, "counter", "Tokens the providers reported for model calls.");
        for (model, s) in &models {
            let prompt = s.prompt_tokens.load(Ordering::Relaxed);
            let completion = s.completion_tokens.load(Ordering::Relaxed);
            out.sample(name, &[("model", model), ("kind", "prompt")], prompt);
            out.sample(name, &[("model", model), ("kind", "completion")], completion);
        }

        let name = "conclave_cost_total";
        out.family(
            name,
            "counter",
            "Cost the providers reported for model calls (OpenRouter: USD).",
        );
        for (model, s) in models.iter().filter(|(_, s)| s.cost_seen.load(Ordering::Relaxed)) {
            let cost = f64::from_bits(s.cost_bits.load(Ordering::Relaxed));
            out.sample(name, &[("model", model)], cost);
        }

        let name = "conclave_websocket_connections";
        out.family(name, "gauge", "WebSocket connections open now.");
        out.sample(name, &[], self.ws_open.load(Ordering::Relaxed));
        let name = "conclave_websocket_connections_total";
        out.family(name, "counter", "WebSocket connections opened.");
        out.sample(name, &[], self.ws_total.load(Ordering::Relaxed));

        let name = "conclave_events_dropped_total";
        out.family(name, "counter", "Token events not sent to watchers whose buffer was full.");
        out.sample(name, &[], self.events_dropped());
        let name = "conclave_websocket_messages_dropped_total";
        out.family(
            name,
            "counter",
            "Client messages dropped for coming faster than the rate limit.",
        );
        out.sample(name, &[], self.ws_messages_dropped.load(Ordering::Relaxed));
        let name = "conclave_watchers_lagged_total";
        out.family(name, "counter", "Watchers unsubscribed for a full buffer and told to resume.");
        out.sample(name, &[("feed", "run")], self.watchers_lagged(Feed::Run));
        out.sample(name, &[("feed", "dashboard")], self.watchers_lagged(Feed::Dashboard));
        out.text
    }
}

/// Writes the text format: `# HELP` and `# TYPE` per family, then `name{labels} value` lines.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{label}=\"{}\"", escape_label(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// A label value as the text format wants it: backslash, double quote and line feed escaped.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::{CallError, Usage};

    static LOCAL: Registry = Registry::new();

    fn reply(model: &str, ms: u64, result: Result<String, CallError>) -> CallReply {
        let usage = result.is_ok().then_some(Usage {
            prompt_tokens: 10,
            completion_tokens: 4,
            cost: Some(0.25),
        });
        CallReply { key: "k".into(), model: model.into(), response_time_ms: ms, result, usage }
    }

    /// The value of the sample `series` (name and labels exactly as written).
    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn calls_fill_cumulative_buckets_errors_tokens_and_cost() {
        let r = Registry::new();
        r.call_finished(&reply("m/a", 40, Ok("x".into())));
        r.call_finished(&reply("m/a", 700, Ok("x".into())));
        r.call_finished(&reply("m/a", 500_000, Ok("x".into())));
        let http = CallError::new(CallErrorKind::Http, Some(503), "down");
        r.call_finished(&reply("m/a", 3_000, Err(http)));
        let timeout = CallError::new(CallErrorKind::Timeout, Some(999), "late");
        r.call_finished(&reply("m/a", 3_000, Err(timeout)));
        r.call_retried("m/a");
        let text = r.render(&[]);
        let h = "conclave_model_call_duration_seconds";
        assert_eq!(value(&text, &format!("{h}_bucket{{model=\"m/a\",le=\"0.05\"}}")), Some(1.0));
        assert_eq!(value(&text, &format!("{h}_bucket{{model=\"m/a\",le=\"0.5\"}}")), Some(1.0));
        assert_eq!(value(&text, &format!("{h}_bucket{{model=\"m/a\",le=\"1\"}}")), Some(2.0));
        assert_eq!(value(&text, &format!("{h}_bucket{{model=\"m/a\",le=\"5\"}}")), Some(4.0));
        assert_eq!(value(&text, &format!("{h}_bucket{{model=\"m/a\",le=\"120\"}}")), Some(4.0));
        assert_eq!(value(&text, &format!("{h}_bucket{{model=\"m/a\",le=\"+Inf\"}}")), Some(5.0));
        assert_eq!(value(&text, &format!("{h}_count{{model=\"m/a\"}}")), Some(5.0));
        assert_eq!(value(&text, &format!("{h}_sum{{model=\"m/a\"}}")), Some(506.74));
        let e = "conclave_model_call_errors_total";
        assert_eq!(
            value(&text, &format!("{e}{{model=\"m/a\",kind=\"http\",status=\"503\"}}")),
            Some(1.0)
        );
        assert_eq!(
            value(&text, &format!("{e}{{model=\"m/a\",kind=\"timeout\",status=\"\"}}")),
            Some(1.0),
            "only http errors carry a status"
        );
        assert_eq!(value(&text, "conclave_model_call_retries_total{model=\"m/a\"}"), Some(1.0));
        assert_eq!(
            value(&text, "conclave_tokens_total{model=\"m/a\",kind=\"prompt\"}"),
            Some(30.0)
        );
        assert_eq!(
            value(&text, "conclave_tokens_total{model=\"m/a\",kind=\"completion\"}"),
            Some(12.0)
        );
        assert_eq!(value(&text, "conclave_cost_total{model=\"m/a\"}"), Some(0.75));
    }

    #[test]
    fn a_model_without_reported_cost_has_no_cost_sample() {
        let r = Registry::new();
        let mut free = reply("m/free", 100, Ok("x".into()));
        free.usage = Some(Usage { prompt_tokens: 1, completion_tokens: 1, cost: None });
        r.call_finished(&free);
        let text = r.render(&[]);
        assert!(text.contains("# TYPE conclave_cost_total counter"));
        assert!(!text.contains("conclave_cost_total{model=\"m/free\"}"), "{text}");
    }

    #[test]
    fn model_labels_are_capped_and_the_rest_counted_as_other() {
        let r = Registry::new();
        for i in 0..MAX_MODEL_LABELS + 50 {
            r.call_retried(&format!("m/{i}"));
        }
        r.call_retried("m/0");
        r.call_retried("m/new");
        let text = r.render(&[]);
        let labels = text.lines().filter(|l| l.starts_with("conclave_model_call_retries_total{"));
        assert_eq!(labels.count(), MAX_MODEL_LABELS + 1);
        assert_eq!(value(&text, "conclave_model_call_retries_total{model=\"m/0\"}"), Some(2.0));
        assert_eq!(value(&text, "conclave_model_call_retries_total{model=\"other\"}"), Some(51.0));
        assert_eq!(
            value(
                &text,
                &format!("conclave_model_call_retries_total{{model=\"m/{MAX_MODEL_LABELS}\"}}")
            ),
            None
        );
    }

    #[test]
    fn the_connection_gauge_follows_the_guards() {
        let text = |r: &Registry| r.render(&[]);
        let a = LOCAL.ws_opened();
        let b = LOCAL.ws_opened();
        assert_eq!(value(&text(&LOCAL), "conclave_websocket_connections"), Some(2.0));
        drop(a);
        assert_eq!(value(&text(&LOCAL), "conclave_websocket_connections"), Some(1.0));
        drop(b);
        assert_eq!(value(&text(&LOCAL), "conclave_websocket_connections"), Some(0.0));
        assert_eq!(value(&text(&LOCAL), "conclave_websocket_connections_total"), Some(2.0));
    }

    #[test]
    fn runs_and_hub_counters_are_rendered_with_escaped_labels() {
        let r = Registry::new();
        r.tokens_dropped(2);
        r.watcher_lagged(Feed::Dashboard);
        let runs = [RunCount { mode: "council".into(), status: "a\"b\\c\nd".into(), count: 3 }];
        let text = r.render(&runs);
        assert_eq!(
            value(&text, "conclave_runs{mode=\"council\",status=\"a\\\"b\\\\c\\nd\"}"),
            Some(3.0)
        );
        assert_eq!(value(&text, "conclave_events_dropped_total"), Some(2.0));
        assert_eq!(value(&text, "conclave_watchers_lagged_total{feed=\"run\"}"), Some(0.0));
        assert_eq!(value(&text, "conclave_watchers_lagged_total{feed=\"dashboard\"}"), Some(1.0));
        for line in text.lines() {
            assert!(
                line.starts_with("# HELP ")
                    || line.starts_with("# TYPE ")
                    || line.starts_with("conclave_"),
                "{line}"
            );
        }
    }
}
