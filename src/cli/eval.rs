//! `conclave eval QUESTIONS.jsonl --members a,b,c [--arms …] [--json]`: the terminal side of
//! an eval. Progress, with a running estimate per arm, goes to stderr; the table (or, with
//! `--json`, the whole result) to stdout. Ctrl-C stops the eval and prints what is done.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::app::{start_engine, Role};
use crate::config::Config;
use crate::eval::arms::DEFAULT_ARMS;
use crate::eval::runner::{self, options_of, run_eval, EvalOptions, Progress};

/// `conclave eval`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    /// The question set: a JSON-lines file, or `sample` for the 80 questions shipped with
    /// Conclave. Not needed with --resume.
    pub questions: Option<String>,
    /// The models compared, comma-separated (`sim/oracle-0.6-a,sim/oracle-0.6-b`).
    #[arg(long, value_delimiter = ',')]
    pub members: Vec<String>,
    /// The arms: single (each member alone), self-consistency, majority, jury (the members
    /// judge the best member's answer; kept only when approved), and mode ids (council, vote,
    /// debate…), comma-separated.
    #[arg(long, default_value = DEFAULT_ARMS)]
    pub arms: String,
    /// Self-consistency: answers sampled from the best member per question (at least 1).
    #[arg(long, default_value_t = 5, value_parser = at_least_one())]
    pub samples: usize,
    /// Seeds the sim oracles and the bootstrap intervals.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop before exceeding this budget: a number of tokens (`200000`) or a cost in dollars
    /// (`$2.50`).
    #[arg(long)]
    pub budget: Option<String>,
    /// Runs in flight at once per provider route (the configured route that serves a model:
    /// `sim/`, `local/`, or the default provider).
    #[arg(long, default_value_t = 8, value_parser = at_least_one())]
    pub concurrency: usize,
    /// A mode arm's own settings: `MODE=JSON` (its modeConfig fields), repeatable.
    #[arg(long = "arm-config", value_name = "MODE=JSON")]
    pub arm_config: Vec<String>,
    /// The model that grades `judge` questions against their reference answers; when it is not
    /// a member, also the jury arm's foreman (who writes its report and casts no vote).
    #[arg(long)]
    pub judge: Option<String>,
    /// Only the first N questions of the set (the rest of the file is not read).
    #[arg(long, value_parser = at_least_one())]
    pub limit: Option<usize>,
    /// Continue an eval that was stopped (its set and settings are stored with it).
    #[arg(long, value_name = "EVAL_ID")]
    pub resume: Option<String>,
    /// Print the whole result as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// A budget: tokens, or dollars with a leading `$`.
pub fn parse_budget(s: &str) -> Result<(Option<u64>, Option<f64>), String> {
    let s = s.trim();
    if let Some(d) = s.strip_prefix('$') {
        return match d.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok((None, Some(v))),
            _ => Err(format!("--budget: {s:?} is not a cost in dollars")),
        };
    }
    match s.replace('_', "").parse::<u64>() {
        Ok(v) if v > 0 => Ok((Some(v), None)),
        _ => Err(format!("--budget: {s:?} is neither a number of tokens nor a $ cost")),
    }
}

fn arm_settings(list: &[String]) -> Result<BTreeMap<String, Map<String, Value>>, String> {
    let mut out = BTreeMap::new();
    for item in list {
        let (mode, json) = item
            .split_once('=')
            .ok_or_else(|| format!("--arm-config {item:?}: write MODE=JSON"))?;
        match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(m)) => {
                out.insert(mode.trim().to_string(), m);
            }
            _ => return Err(format!("--arm-config {mode}: the settings must be a JSON object")),
        }
    }
    Ok(out)
}

/// A count flag's parser: a whole number of at least 1 (clap names the flag when refusing 0).
fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
}

/// The question set's text: the sample, or the file read line by line (each line, the number
/// of questions and the whole bounded, see [`crate::eval::questions`]), up to the `limit`th
/// question. Its lines keep their numbers, so an error names the file's line.
fn read_set(name: &str, limit: Option<usize>) -> Result<String, String> {
    use crate::eval::questions::{is_question, MAX_LINE_BYTES, MAX_QUESTIONS, MAX_SET_FILE_BYTES};
    if name == "sample" {
        let text = crate::eval::SAMPLE;
        return Ok(limit.map_or_else(
            || text.to_string(),
            |n| crate::eval::questions::first_questions(text, n),
        ));
    }
    let mut text = String::new();
    let mut questions = 0;
    let path = PathBuf::from(name);
    crate::files::read_lines(
        "the question set",
        &path,
        MAX_LINE_BYTES,
        MAX_SET_FILE_BYTES,
        |_, line| {
            if is_question(line) {
                questions += 1;
                if questions > MAX_QUESTIONS {
                    return Err(format!("more than {MAX_QUESTIONS} questions"));
                }
            }
            text.push_str(line);
            text.push('\n');
            Ok(limit.is_none_or(|n| questions < n))
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(text)
}

/// Runs `conclave eval`; answers the exit code: 0 done, 1 a failure, 2 a usage error, 130
/// stopped by Ctrl-C, 3 stopped by the budget.
pub async fn eval_command(config: Config, args: EvalArgs) -> i32 {
    let mut err = std::io::stderr();
    let usage = |m: String| {
        eprintln!("conclave: {m}");
        2
    };
    let engine = match start_engine(&config, Role::Cli).await {
        Ok(e) => e,
        Err(e) => {
            eprintln!("conclave: {e}");
            return 1;
        }
    };
    let (budget_tokens, budget_cost) = match args.budget.as_deref().map(parse_budget) {
        Some(Ok(b)) => b,
        Some(Err(m)) => return usage(m),
        None => (None, None),
    };
    let (mut opts, resume) = match &args.resume {
        Some(id) => {
            let record = match engine.store().get_eval(id).await {
                Ok(Some(r)) => r,
                Ok(None) => return usage(format!("no eval {id:?}")),
                Err(e) => {
                    eprintln!("conclave: {e}");
                    return 1;
                }
            };
            match options_of(&record) {
                Ok(o) => (o, Some(record)),
                Err(e) => return usage(e.to_string()),
            }
        }
        None => {
            let Some(set) = &args.questions else {
                return usage("name a question set (a JSON-lines file, or `sample`)".into());
            };
            let set_text = match read_set(set, args.limit) {
                Ok(t) => t,
                Err(m) => return usage(m),
            };
            let mode_settings = match arm_settings(&args.arm_config) {
                Ok(s) => s,
                Err(m) => return usage(m),
            };
            let members: Vec<String> = args
                .members
                .iter()
                .map(|m| m.trim().to_string())
                .filter(|m| !m.is_empty())
                .collect();
            let opts = EvalOptions {
                set_name: set.clone(),
                set_text,
                members,
                arms: args.arms.clone(),
                samples: args.samples,
                seed: args.seed,
                budget_tokens: None,
                budget_cost: None,
                concurrency: 8,
                mode_settings,
                judge: args.judge.clone(),
            };
            (opts, None)
        }
    };
    opts.budget_tokens = budget_tokens;
    opts.budget_cost = budget_cost;
    opts.concurrency = args.concurrency;
    let started = std::time::Instant::now();
    let mut last_line = std::time::Instant::now() - std::time::Duration::from_secs(1);
    let quiet = args.quiet;
    let mut on_progress = |p: &Progress| {
        if quiet || (last_line.elapsed().as_millis() < 500 && p.done < p.total) {
            return;
        }
        last_line = std::time::Instant::now();
        let _ = writeln!(err, "{}", progress_line(p, started.elapsed().as_secs_f64()));
    };
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
        "stopped by Ctrl-C".to_string()
    };
    let report = match run_eval(&engine, &opts, resume.as_ref(), stop, &mut on_progress).await {
        Ok(r) => r,
        Err(runner::EvalError::Usage(m)) => return usage(m),
        Err(runner::EvalError::Set(e)) => return usage(format!("{}: {e}", opts.set_name)),
        Err(e) => {
            eprintln!("conclave: {e}");
            return 1;
        }
    };
    let _ = engine.store().flush().await;
    let mut out = std::io::stdout();
    if args.json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()
        );
    } else {
        let _ = write!(out, "{}", report.table());
    }
    if !quiet {
        let took = started.elapsed().as_secs_f64();
        // Only a stopped eval has anything left to resume.
        let line = match &report.stopped {
            None => format!("eval {}: done in {took:.1} s (every run stored)", report.eval_id),
            Some(why) => format!(
                "eval {}: stopped after {took:.1} s ({why}); every run so far is stored, and \
                 `conclave eval --resume {}` runs the rest",
                report.eval_id, report.eval_id
            ),
        };
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    match &report.stopped {
        None => 0,
        Some(why) if why.contains("Ctrl-C") => 130,
        Some(_) => 3,
    }
}

/// `[120/960] 12% — single:sim/a 61% (n=40) · council 70% (n=10) — 34 s left`.
pub fn progress_line(p: &Progress, elapsed_s: f64) -> String {
    let arms: Vec<String> = p
        .arms
        .iter()
        .map(|(a, c, n)| {
            // Its samples one by one: the voted answers are counted at the end.
            let a = if a == "self-consistency" { "self-consistency samples" } else { a };
            format!("{a} {:.0}% (n={n})", 100.0 * *c as f64 / (*n).max(1) as f64)
        })
        .collect();
    let left = if p.done > 0 && p.total > p.done {
        format!(" — about {:.0} s left", elapsed_s / p.done as f64 * (p.total - p.done) as f64)
    } else {
        String::new()
    };
    format!(
        "[{}/{}] {:.0}% — {}{left}",
        p.done,
        p.total,
        100.0 * p.done as f64 / p.total.max(1) as f64,
        arms.join(" · ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_tokens_or_dollars() {
        assert_eq!(parse_budget("200000"), Ok((Some(200_000), None)));
        assert_eq!(parse_budget("$2.5"), Ok((None, Some(2.5))));
        assert!(parse_budget("lots").is_err());
        assert!(parse_budget("$-1").is_err());
        assert!(parse_budget("0").is_err());
    }

    #[test]
    fn arm_settings_are_json_objects_per_mode() {
        let s = arm_settings(&["vote={\"chairmanModel\":\"sim/a\"}".into()]).unwrap();
        assert_eq!(s["vote"]["chairmanModel"], "sim/a");
        assert!(arm_settings(&["vote".into()]).is_err());
        assert!(arm_settings(&["vote=[1]".into()]).is_err());
    }

    #[test]
    fn the_progress_line_gives_a_running_estimate() {
        let p = Progress {
            eval_id: "e".into(),
            done: 10,
            total: 40,
            arms: vec![("majority".into(), 7, 10)],
        };
        let line = progress_line(&p, 5.0);
        assert!(line.starts_with("[10/40] 25%") && line.contains("majority 70% (n=10)"), "{line}");
        assert!(line.contains("15 s left"), "{line}");
    }
}
