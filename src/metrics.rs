//! Process-wide counters for `GET /metrics`, exposed in the Prometheus text format by the
//! `prometheus-client` crate.
//!
//! What is counted here happens far from the web layer (in ModelCall actors, the Hub, each
//! WebSocket session), so the registry is one `static`, like the registries of the Prometheus
//! client libraries, rather than a handle threaded through every actor. It holds counts of what
//! this process did since it started; figures that live in the database (runs by mode and
//! status) are read at scrape time and passed to [`Registry::render`].
//!
//! The hot paths stay lock-free: a token dropped, a lagging watcher or a socket opening is one
//! atomic add on a metric handle kept here (a clone of the one the crate's registry encodes). A
//! finished model call takes one short lock to find its model's handles and the histogram's own
//! (a call lasts from tens of milliseconds to minutes, so neither is contended in practice).
//!
//! Labels carry no secrets, user names, run ids or question text: only model ids, error kinds,
//! HTTP statuses and the fixed names below. Model ids come from requests, so at most
//! [`MAX_MODEL_LABELS`] distinct ones get their own label; the rest are counted as
//! [`OTHER_MODEL`]. This module does no I/O.
//!
//! The exposition is the crate's Prometheus text format (version 0.0.4), not its OpenMetrics
//! one: OpenMetrics names a counter's family without its `_total`, so the gauge
//! `conclave_websocket_connections` and the counter `conclave_websocket_connections_total`
//! would be one family twice, which OpenMetrics forbids. In the Prometheus format a counter's
//! family is its sample's name, so every name is what it was. The crate appends `_total` to a
//! counter's name itself: counters are registered without it.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError};

use prometheus_client::encoding::{prometheus_text, EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Metric, Registry as Families};

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

/// The `Content-Type` of what [`Registry::render`] writes: the Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabel {
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    model: String,
    kind: &'static str,
    /// The HTTP status of an `http` error; empty for the other kinds.
    status: Option<u16>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    model: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabel {
    mode: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeedLabel {
    feed: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    mode: String,
    status: String,
}

/// The sum of the costs providers reported (an `f64` in an `AtomicU64`'s bits).
type Cost = Counter<f64, AtomicU64>;

/// A metric whose `# HELP` and `# TYPE` are written before its first sample too, as they
/// always were here (the crate leaves an empty [`Family`] out of the output).
#[derive(Debug)]
struct Declared(Box<dyn Metric>);

impl EncodeMetric for Declared {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}

/// One model label's handles on the families' metrics, made when the label is first used.
struct ModelStats {
    label: ModelLabel,
    duration: Histogram,
    retries: Counter,
    prompt_tokens: Counter,
    completion_tokens: Counter,
    /// Made on the first cost reported, so a model without one has no cost sample.
    cost: OnceLock<Cost>,
}

/// Counters of this process (see the module documentation).
pub struct Registry {
    /// What [`Registry::render`] encodes: clones of the metrics below, in the output's order.
    families: Families,
    models: Mutex<BTreeMap<String, Arc<ModelStats>>>,
    durations: Family<ModelLabel, Histogram, fn() -> Histogram>,
    /// Failed calls by error kind and HTTP status (failures are rare: the family's lock is fine).
    errors: Family<ErrorLabels, Counter>,
    retries: Family<ModelLabel, Counter>,
    tokens: Family<TokenLabels, Counter>,
    cost: Family<ModelLabel, Cost>,
    /// Runs started by this process, by mode (six modes: the family's lock is fine).
    runs_started: Family<ModeLabel, Counter>,
    runs_resumed: Counter,
    commit_failures: Counter,
    ws_open: Gauge,
    ws_total: Counter,
    events_dropped: Counter,
    /// Client messages a WebSocket dropped for coming too fast.
    ws_messages_dropped: Counter,
    lagged_run: Counter,
    lagged_dashboard: Counter,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

/// Counts one open WebSocket connection for as long as it lives.
#[must_use = "the connection counts as open until this is dropped"]
pub struct WsConnection {
    open: Gauge,
}

impl Drop for WsConnection {
    fn drop(&mut self) {
        self.open.dec();
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
    pub fn new() -> Self {
        let histogram: fn() -> Histogram = || Histogram::new(DURATION_BUCKETS);
        let lagged: Family<FeedLabel, Counter> = Family::default();
        let mut r = Registry {
            families: Families::default(),
            models: Mutex::new(BTreeMap::new()),
            durations: Family::new_with_constructor(histogram),
            errors: Family::default(),
            retries: Family::default(),
            tokens: Family::default(),
            cost: Family::default(),
            runs_started: Family::default(),
            runs_resumed: Counter::default(),
            commit_failures: Counter::default(),
            ws_open: Gauge::default(),
            ws_total: Counter::default(),
            events_dropped: Counter::default(),
            ws_messages_dropped: Counter::default(),
            lagged_run: lagged.get_or_create_owned(&FeedLabel { feed: "run" }),
            lagged_dashboard: lagged.get_or_create_owned(&FeedLabel { feed: "dashboard" }),
        };
        // Names and help texts as the exposition always had them: the crate adds `_total` to
        // a counter's name, and the full stop to each help text. The gauge of open WebSocket
        // connections and the counter of those opened share a stem, which the Prometheus text
        // format allows (`conclave_websocket_connections` and `..._total` are two families).
        let families: [(&str, &str, Box<dyn Metric>); 13] = [
            (
                "conclave_runs_started",
                "Runs started by this process, by mode",
                Box::new(r.runs_started.clone()),
            ),
            (
                "conclave_runs_resumed",
                "Runs left by a dead process that this one resumed",
                Box::new(r.runs_resumed.clone()),
            ),
            (
                "conclave_store_commit_failures",
                "Writes of a run's step the database refused (retried)",
                Box::new(r.commit_failures.clone()),
            ),
            (
                "conclave_model_call_duration_seconds",
                "Model calls by how long they took, retries included",
                Box::new(r.durations.clone()),
            ),
            (
                "conclave_model_call_errors",
                "Model calls that failed, by kind (and status for http)",
                Box::new(r.errors.clone()),
            ),
            (
                "conclave_model_call_retries",
                "Failed attempts of model calls that were tried again",
                Box::new(r.retries.clone()),
            ),
            (
                "conclave_tokens",
                "Tokens the providers reported for model calls",
                Box::new(r.tokens.clone()),
            ),
            (
                "conclave_cost",
                "Cost the providers reported for model calls (OpenRouter: USD)",
                Box::new(r.cost.clone()),
            ),
            (
                "conclave_websocket_connections",
                "WebSocket connections open now",
                Box::new(r.ws_open.clone()),
            ),
            (
                "conclave_websocket_connections",
                "WebSocket connections opened",
                Box::new(r.ws_total.clone()),
            ),
            (
                "conclave_events_dropped",
                "Token events not sent to watchers whose buffer was full",
                Box::new(r.events_dropped.clone()),
            ),
            (
                "conclave_websocket_messages_dropped",
                "Client messages dropped for coming faster than the rate limit",
                Box::new(r.ws_messages_dropped.clone()),
            ),
            (
                "conclave_watchers_lagged",
                "Watchers unsubscribed for a full buffer and told to resume",
                Box::new(lagged),
            ),
        ];
        for (name, help, metric) in families {
            r.families.register(name, help, Declared(metric));
        }
        r
    }

    /// A run was started here.
    pub fn run_started(&self, mode: &'static str) {
        self.runs_started.get_or_create(&ModeLabel { mode }).inc();
    }

    /// A run left by a dead process was resumed here.
    pub fn run_resumed(&self) {
        self.runs_resumed.inc();
    }

    /// The database refused a run's step (it is tried again).
    pub fn commit_failed(&self) {
        self.commit_failures.inc();
    }

    /// The handles of `model`'s label, made on first use while fewer than
    /// [`MAX_MODEL_LABELS`] exist.
    fn model(&self, model: &str) -> Arc<ModelStats> {
        let mut models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(stats) = models.get(model) {
            return stats.clone();
        }
        let own = models.len() - usize::from(models.contains_key(OTHER_MODEL));
        let label = if own < MAX_MODEL_LABELS { model } else { OTHER_MODEL };
        models.entry(label.to_string()).or_insert_with(|| Arc::new(self.stats(label))).clone()
    }

    /// A new label's samples: its histogram, retries and tokens start at zero.
    fn stats(&self, model: &str) -> ModelStats {
        let label = ModelLabel { model: model.to_string() };
        let tokens =
            |kind| self.tokens.get_or_create_owned(&TokenLabels { model: model.into(), kind });
        ModelStats {
            duration: self.durations.get_or_create_owned(&label),
            retries: self.retries.get_or_create_owned(&label),
            prompt_tokens: tokens("prompt"),
            completion_tokens: tokens("completion"),
            cost: OnceLock::new(),
            label,
        }
    }

    /// A model call ended, successfully or not (a cancelled run's calls are dropped before
    /// they end and are not counted): its latency, its error, and the tokens and cost its
    /// reply reported.
    pub fn call_finished(&self, reply: &CallReply) {
        let stats = self.model(&reply.model);
        stats.duration.observe(reply.response_time_ms as f64 / 1000.0);
        if let Err(e) = &reply.result {
            let status = if e.kind == CallErrorKind::Http { e.status } else { None };
            let model = stats.label.model.clone();
            self.errors
                .get_or_create(&ErrorLabels { model, kind: kind_label(e.kind), status })
                .inc();
        }
        if let Some(usage) = &reply.usage {
            stats.prompt_tokens.inc_by(usage.prompt_tokens);
            stats.completion_tokens.inc_by(usage.completion_tokens);
            if let Some(cost) = usage.cost.filter(|c| c.is_finite() && *c >= 0.0) {
                let counter =
                    stats.cost.get_or_init(|| self.cost.get_or_create_owned(&stats.label));
                counter.inc_by(cost);
            }
        }
    }

    /// An attempt of a call to `model` failed and is retried.
    pub fn call_retried(&self, model: &str) {
        self.model(model).retries.inc();
    }

    /// A WebSocket connection opened; it counts as open until the answer is dropped.
    pub fn ws_opened(&self) -> WsConnection {
        self.ws_open.inc();
        self.ws_total.inc();
        WsConnection { open: self.ws_open.clone() }
    }

    /// `n` token events were not sent to a watcher whose buffer was full.
    pub fn tokens_dropped(&self, n: usize) {
        self.events_dropped.inc_by(n as u64);
    }

    /// A WebSocket client's message was dropped for coming too fast (see `web::limits::Flood`).
    pub fn ws_message_dropped(&self) {
        self.ws_messages_dropped.inc();
    }

    /// A watcher whose buffer was full was unsubscribed and told to resume.
    pub fn watcher_lagged(&self, feed: Feed) {
        match feed {
            Feed::Run => &self.lagged_run,
            Feed::Dashboard => &self.lagged_dashboard,
        }
        .inc();
    }

    /// Token events dropped so far.
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped.get()
    }

    /// Watchers of `feed` told to resume so far.
    pub fn watchers_lagged(&self, feed: Feed) -> u64 {
        match feed {
            Feed::Run => self.lagged_run.get(),
            Feed::Dashboard => self.lagged_dashboard.get(),
        }
    }

    /// The text exposition of every metric, with `runs` (read from the database) as the
    /// `conclave_runs` gauge.
    pub fn render(&self, runs: &[RunCount]) -> String {
        let gauge: Family<RunLabels, Gauge> = Family::default();
        for r in runs {
            gauge
                .get_or_create(&RunLabels { mode: r.mode.clone(), status: r.status.clone() })
                .set(r.count);
        }
        let mut scraped = Families::default();
        scraped.register(
            "conclave_runs",
            "Runs in the database, by mode and status",
            Declared(Box::new(gauge)),
        );
        let mut text = String::new();
        // The database's figures first, then this process's, as one exposition. The encoders
        // fail only when their writer does, and a String never does.
        let written = prometheus_text::encode(&mut text, &scraped)
            .and_then(|()| prometheus_text::encode(&mut text, &self.families));
        if written.is_err() {
            log::error!("the metrics' text could not be written; /metrics answers what was");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::{CallError, Usage};

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
        let r = Registry::new();
        let text = |r: &Registry| r.render(&[]);
        let a = r.ws_opened();
        let b = r.ws_opened();
        assert_eq!(value(&text(&r), "conclave_websocket_connections"), Some(2.0));
        drop(a);
        assert_eq!(value(&text(&r), "conclave_websocket_connections"), Some(1.0));
        drop(b);
        assert_eq!(value(&text(&r), "conclave_websocket_connections"), Some(0.0));
        assert_eq!(value(&text(&r), "conclave_websocket_connections_total"), Some(2.0));
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
