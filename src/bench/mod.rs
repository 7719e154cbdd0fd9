//! `conclave bench`: the figures of "Speed, measured", printed as a table (never timed tests:
//! machines here are shared and noisy, so nothing asserts a timing).
//!
//! Each scenario starts its own `conclave sim-server` and `conclave serve` (this very binary,
//! as child processes, on ephemeral ports, with a temporary SQLite file and a configuration
//! that routes `sim/` to the sim-server over HTTP), drives the server over WebSocket and REST
//! like a client would, and prints each figure beside the ideal measured in the same run.
//!
//! The ideal of a run is its critical path: the sum over its stages of the slowest model
//! latency. It is measured, not assumed: [`ideal`] drives the same mode state machine, with the
//! same run id (so the same prompts, shuffles and sim answers), straight against the sim-server
//! with no engine, database or socket in between, and sums the measured call times along the
//! chain of calls that started each stage. "Overhead" is the rest: everything Conclave adds.
//!
//! # Layout
//! - [`harness`]: the child processes, their configuration files and what is read off them
//!   (URLs, the API token, peak RSS).
//! - [`client`]: the WebSocket and REST client that starts and watches runs.
//! - [`ideal`]: the reference executor whose critical path is the ideal.
//! - [`scenarios`]: the five scenarios, each answering rows of the table.
//! - [`report`]: rows, the table and small statistics.
//! - [`clarity`]: `conclave bench clarity`, Clarity panels in-process (not one of the five).
//!
//! Nothing here is used by the server: the module only drives it from outside.

pub mod clarity;
pub mod client;
pub mod eval;
pub mod harness;
pub mod ideal;
pub mod report;
pub mod scenarios;

use std::time::Duration;

pub use clarity::{Figures, CLARITY_BUDGET};
pub use report::{Report, Row};

/// Why a benchmark could not produce its figures.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{0}")]
    Child(String),
    #[error("HTTP: {0}")]
    Http(String),
    #[error("WebSocket: {0}")]
    Ws(String),
    #[error("database: {0}")]
    Db(String),
    #[error("{0}")]
    Run(String),
    #[error("usage: {0}")]
    Usage(String),
}

impl BenchError {
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
        let what = what.into();
        move |source| BenchError::Io { what, source }
    }
}

/// One of the five scenarios of "Speed, measured".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// 1. One Council run at a time: overhead per run.
    Overhead,
    /// 2. Many Council runs at once: tail latency and memory.
    Concurrent,
    /// 3. Latency 0, concurrency until it saturates: completed runs per second.
    Throughput,
    /// 4. One run, many watchers: fan-out delivery.
    Watchers,
    /// 5. Each mode once with realistic latencies.
    Modes,
    /// 6. A run's start with a 10 MB text file attached, against one without.
    Attachments,
}

impl Scenario {
    pub const ALL: [Scenario; 6] = [
        Scenario::Overhead,
        Scenario::Concurrent,
        Scenario::Throughput,
        Scenario::Watchers,
        Scenario::Modes,
        Scenario::Attachments,
    ];

    pub fn number(self) -> u8 {
        match self {
            Scenario::Overhead => 1,
            Scenario::Concurrent => 2,
            Scenario::Throughput => 3,
            Scenario::Watchers => 4,
            Scenario::Modes => 5,
            Scenario::Attachments => 6,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Overhead => "overhead",
            Scenario::Concurrent => "concurrent",
            Scenario::Throughput => "throughput",
            Scenario::Watchers => "watchers",
            Scenario::Modes => "modes",
            Scenario::Attachments => "attachments",
        }
    }

    /// `1`..`6` or the scenario's name.
    pub fn parse(s: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|sc| sc.name() == s || sc.number().to_string() == s)
    }
}

/// The sizes of a run of the benchmark: the issue's, or reduced ones for a smoke test.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Scenarios 1, 2 and 4: the latency of every sim call.
    pub latency: Duration,
    /// Scenario 1: Council runs, one after another.
    pub sequential_runs: usize,
    /// Scenario 2: Council runs at once.
    pub concurrent_runs: usize,
    /// Scenario 2: runs whose ideal is measured again, one at a time, after the load.
    pub ideal_samples: usize,
    /// Scenario 3: each concurrency level is measured for this long (after a settling second).
    pub throughput_window: Duration,
    /// Scenario 3: the concurrency levels tried, until throughput stops growing.
    pub throughput_levels: &'static [usize],
    /// Scenario 4: WebSocket clients watching one run.
    pub watchers: usize,
    /// Scenario 5: the median latency of a frontier model; a fast model's is half of it.
    pub mode_latency_median: Duration,
    /// Scenario 6: runs started with the file and without it, alternately (each).
    pub attachment_runs: usize,
    /// Every scenario: the server's sim route asks for machine-read replies as JSON, and the
    /// ideal sends the same schemas (the JSON path measured against its own ideal).
    pub structured: bool,
}

impl Sizes {
    pub fn full() -> Self {
        Sizes {
            latency: Duration::from_millis(200),
            sequential_runs: 20,
            concurrent_runs: 1000,
            ideal_samples: 10,
            throughput_window: Duration::from_secs(5),
            throughput_levels: &[16, 32, 64, 128, 256, 512],
            watchers: 10_000,
            mode_latency_median: Duration::from_millis(3000),
            attachment_runs: 20,
            structured: false,
        }
    }

    /// Small enough for CI (under a minute for scenarios 1 and 2 on a debug build).
    pub fn quick() -> Self {
        Sizes {
            latency: Duration::from_millis(200),
            sequential_runs: 5,
            concurrent_runs: 50,
            ideal_samples: 3,
            throughput_window: Duration::from_secs(2),
            throughput_levels: &[8, 32],
            watchers: 500,
            mode_latency_median: Duration::from_millis(300),
            attachment_runs: 5,
            structured: false,
        }
    }
}

/// What `conclave bench` was asked.
#[derive(Debug, Clone, Default)]
pub struct BenchArgs {
    /// Scenario names or numbers; empty: all five. `clarity` alone runs the Clarity bench.
    pub scenarios: Vec<String>,
    pub quick: bool,
    /// `clarity`: panels to run.
    pub runs: usize,
    /// `clarity`: latency of every sim call.
    pub latency_ms: u64,
    /// Machine-read replies asked for as JSON (see [`Sizes::structured`]).
    pub structured: bool,
}

/// Runs the scenarios asked for and answers the report.
pub fn run(scenarios: &[Scenario], sizes: Sizes) -> Result<Report, BenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(BenchError::io("cannot start the benchmark's runtime"))?;
    crate::providers::openai::install_crypto();
    harness::raise_fd_limit();
    let mut report = Report::default();
    for &scenario in scenarios {
        log::info!("scenario {} ({}) ...", scenario.number(), scenario.name());
        let started = std::time::Instant::now();
        let part = runtime.block_on(scenarios::run(scenario, sizes))?;
        log::info!(
            "scenario {} done in {:.1} s\n{}",
            scenario.number(),
            started.elapsed().as_secs_f64(),
            part.render()
        );
        report.extend(part);
    }
    Ok(report)
}
