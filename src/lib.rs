//! Conclave: a self-hosted server in which a panel of LLMs deliberates.
//!
//! # Layout
//! - [`modes`]: pure deliberation logic (prompts, parsers, aggregation); no I/O.
//! - [`providers`]: OpenAI-compatible HTTP client and the sim models.
//! - [`store`]: Diesel persistence on its own threads (SQLite or PostgreSQL).
//! - [`engine`]: actors (Hub, Deliberation, ModelCall) that run deliberations and fan out events.
//! - [`web`]: REST, WebSocket and SSE interfaces and the embedded browser client.
//! - [`config`]: configuration file, environment and flags; provider routes.
//! - [`app`]: wiring: builds the server (or, for the CLI, the engine alone).
//! - [`cli`]: the terminal client's `run` and `export` commands.
//! - [`export`]: a run or a conversation as Markdown and JSON, model names hidden on request.
//! - [`attachments`]: files given to a run: read into text (or an image), checked, put into prompts.
//! - [`files`]: the files the command line reads, each with a bound.
//! - [`metrics`]: process-wide counters and their Prometheus text for `GET /metrics`.
//! - [`secrets`]: the key type that never prints; URL passwords and key echoes redacted.
//! - [`logging`]: the log, every line with Conclave tokens redacted.
//! - [`eval`]: `conclave eval`: graded question sets through panels and single models.
//! - [`bench`]: `conclave bench`: drives a real server and sim-server and prints figures.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

/// A regex compiled once, on first use, where it is written: `regex!(r"…")`, or
/// `regex!(format!(…))` for a pattern built from constants. Every module below sees it.
macro_rules! regex {
    ($pattern:expr $(,)?) => {{
        static RE: ::std::sync::OnceLock<::regex::Regex> = ::std::sync::OnceLock::new();
        RE.get_or_init(|| {
            ::regex::Regex::new(::std::convert::AsRef::<str>::as_ref(&$pattern))
                .unwrap_or_else(|e| unreachable!("a pattern of the source: {e}"))
        })
    }};
}

pub mod app;
pub mod attachments;
pub mod bench;
pub mod cli;
pub mod config;
pub mod engine;
pub mod eval;
pub mod export;
pub mod files;
pub mod ids;
pub mod logging;
pub mod metrics;
pub mod modes;
pub mod providers;
pub mod run_flags;
pub mod secrets;
pub mod store;
pub mod web;
