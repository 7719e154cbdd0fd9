//! `conclave bench clarity`: runs Clarity panels in-process against sim models whose every call
//! takes a realistic latency, and reports wall-clock latency per panel against the PRD's 15 s
//! budget, with the ratio to a single-judge baseline (one scoring call through the same
//! provider path) measured in the same run.

use crate::engine::Viewer;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::app::{start_engine, AppError, Role};
use crate::config::Config;
use crate::engine::events::{watcher_channel, Frame};
use crate::engine::EngineError;
use crate::modes::clarity::{evaluation_prompt, ClarityConfig, Discussion, PERSONAS};
use crate::modes::ChatMessage;

/// The PRD's latency budget for a whole panel.
pub const CLARITY_BUDGET: Duration = Duration::from_secs(15);

const BRIEF: &str = "# The UK four-day work week\n\nTrials in 2022 across 61 companies reported stable \
productivity and lower burnout. Critics argue the sample was self-selected and the trial too short. \
This brief weighs the evidence and the trade-offs for employers and workers.";

#[derive(Debug)]
pub struct Figures {
    pub panels: Vec<(Duration, String)>,
    pub baseline: Vec<Duration>,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

impl Figures {
    /// The report `conclave bench clarity` prints.
    pub fn report(&self, latency_ms: u64) -> String {
        let mut panels: Vec<Duration> = self.panels.iter().map(|(d, _)| *d).collect();
        panels.sort();
        let mut base = self.baseline.clone();
        base.sort();
        let (p50, p95, b50) =
            (percentile(&panels, 0.5), percentile(&panels, 0.95), percentile(&base, 0.5));
        let mut out = format!(
            "clarity latency against sim models ({latency_ms} ms per call), {} panels\n",
            panels.len()
        );
        for (i, (d, method)) in self.panels.iter().enumerate() {
            out.push_str(&format!(
                "  panel {:>2}: {:>6.2} s  ({method})\n",
                i + 1,
                d.as_secs_f64()
            ));
        }
        out.push_str(&format!(
            "p50 {:.2} s, p95 {:.2} s, budget {:.0} s: p95 is {:.0}% of the budget\n",
            p50.as_secs_f64(),
            p95.as_secs_f64(),
            CLARITY_BUDGET.as_secs_f64(),
            p95.as_secs_f64() * 100.0 / CLARITY_BUDGET.as_secs_f64()
        ));
        out.push_str(&format!(
            "single-judge baseline (one scoring call, same run): p50 {:.2} s; panel/baseline ratio {:.2}\n",
            b50.as_secs_f64(),
            if b50.is_zero() { 0.0 } else { p50.as_secs_f64() / b50.as_secs_f64() }
        ));
        out
    }
}

/// Runs `runs` panels one after another (and as many baseline calls).
pub async fn clarity(
    mut config: Config,
    runs: usize,
    latency_ms: u64,
) -> Result<Figures, AppError> {
    config.sim.latency_ms = latency_ms;
    let dir = std::env::temp_dir().join(format!("conclave-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    config.database_url = format!("sqlite://{}", dir.join("bench.db").display());
    let engine = start_engine(&config, Role::Cli).await?;
    let mut figures = Figures { panels: Vec::new(), baseline: Vec::new() };
    for i in 0..runs {
        let body = json!({ "mode": "clarity", "modeConfig": { "content": format!("{BRIEF}\n\nVariant {i}.") } });
        let t = Instant::now();
        let started = match engine.start_run(&body, &Viewer::local()).await {
            Ok(s) => s,
            Err(EngineError::Store(e)) => return Err(AppError::Store(e)),
            Err(e) => {
                log::error!("bench run failed to start: {e}");
                continue;
            }
        };
        let (tx, mut rx) = watcher_channel();
        let _ = engine.watch(&started.run_id, 0, engine.watcher_id(), tx, &Viewer::local()).await;
        let mut method = String::from("?");
        'watch: while let Some(Frame::Events(batch)) = rx.recv().await {
            for f in batch.iter() {
                if f.event == "score_complete" {
                    let v: serde_json::Value = serde_json::from_str(&f.json).unwrap_or_default();
                    method = v["data"]["data"]["method"].as_str().unwrap_or("?").to_string();
                }
                if f.is_terminal() {
                    break 'watch;
                }
            }
        }
        figures.panels.push((t.elapsed(), method));
        // The baseline: one judge scoring the same brief through the same provider path.
        let cfg = ClarityConfig {
            content: BRIEF.into(),
            context: None,
            title: None,
            models: Default::default(),
            discussion: Discussion::Auto,
            timeout_ms: 60_000,
        };
        let messages = vec![ChatMessage::user(evaluation_prompt(&cfg, &PERSONAS[2], None))];
        let t = Instant::now();
        let _ = engine.providers().chat("sim/haiku", messages, None).await;
        figures.baseline.push(t.elapsed());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(figures)
}
