//! `conclave bench eval`: an eval of 1,000 generated arithmetic questions through four arms of
//! stored runs (three `sim/oracle-0.6` members alone, and Council of the three) plus their
//! majority, on sim models at latency 0, in-process against a fresh SQLite file. It measures
//! what the eval itself costs: starting, following, grading and storing every run.

use std::time::{Duration, Instant};

use crate::app::start_engine;
use crate::config::Config;
use crate::eval::runner::{run_eval, EvalOptions};

/// What the bench measured.
#[derive(Debug)]
pub struct EvalFigures {
    pub questions: usize,
    pub runs_stored: usize,
    pub elapsed: Duration,
}

/// The target of the issue: 1,000 questions × 4 arms in under this.
pub const EVAL_TARGET: Duration = Duration::from_secs(30);

/// `n` questions `What is A + B?`, deterministic.
pub fn arithmetic_set(n: usize) -> String {
    let mut rng = crate::modes::common::SplitMix64::new(21);
    (0..n)
        .map(|i| {
            let (a, b) = (100 + rng.below(900), 100 + rng.below(900));
            format!(
                "{{\"id\":\"q{i}\",\"question\":\"What is {a} + {b}?\",\"answer\":\"{}\",\"kind\":\"number\"}}",
                a + b
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs the eval once in a temporary database.
pub async fn eval_bench(mut config: Config, questions: usize) -> Result<EvalFigures, String> {
    let dir = std::env::temp_dir().join(format!("conclave-bench-eval-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    config.database_url = format!("sqlite://{}", dir.join("eval.db").display());
    config.sim.latency_ms = 0;
    let engine = start_engine(&config, crate::app::Role::Cli).await.map_err(|e| e.to_string())?;
    let opts = EvalOptions {
        set_name: "bench".into(),
        set_text: arithmetic_set(questions),
        members: ["a", "b", "c"].iter().map(|m| format!("sim/oracle-0.6-{m}")).collect(),
        arms: "single,majority,council".into(),
        samples: 1,
        seed: 1,
        budget_tokens: None,
        budget_cost: None,
        concurrency: 64,
        mode_settings: Default::default(),
        judge: None,
    };
    let started = Instant::now();
    let report = run_eval(&engine, &opts, None, std::future::pending::<String>(), &mut |_| {})
        .await
        .map_err(|e| e.to_string())?;
    let elapsed = started.elapsed();
    let runs_stored =
        engine.store().eval_runs(&report.eval_id).await.map_err(|e| e.to_string())?.len();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(EvalFigures { questions, runs_stored, elapsed })
}

impl EvalFigures {
    pub fn report(&self) -> String {
        format!(
            "eval: {} questions × 4 arms (3 single members, council; majority voted from the \
             singles) on sim models at latency 0: {} runs stored in {:.1} s ({:.0} runs/s; \
             target {} s)\n",
            self.questions,
            self.runs_stored,
            self.elapsed.as_secs_f64(),
            self.runs_stored as f64 / self.elapsed.as_secs_f64().max(1e-9),
            EVAL_TARGET.as_secs()
        )
    }
}
