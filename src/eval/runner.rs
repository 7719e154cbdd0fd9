//! Runs an eval through the engine, as `conclave run` runs one deliberation: every arm's answer
//! to a question is a stored run, linked to the eval by a row of `eval_runs` with its grade.
//!
//! The order: first the members alone (`single:…`, which `majority` and `self-consistency`
//! vote over), then, once the best single member is known, its further self-consistency
//! samples and the mode arms (the best member takes their single-model roles: chairman,
//! foreman…). Runs go side by side, at most `concurrency` at a time per provider (the part of
//! a model id before its `/`).
//!
//! Stopping: a stop signal (Ctrl-C) cancels the runs in flight and reports what is done; the
//! budget is checked before each run starts, against what the eval has used plus what the runs
//! in flight are expected to use (the largest run of their arm so far; an arm's first run goes
//! alone), so the eval stops before a run that would take it over. A cancelled run is not
//! recorded, so resuming the eval (`--resume ID`, or the same set and settings again) runs it
//! again; every recorded answer is kept and skipped.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::arms::{mode_body, parse_arms, solo_body, Arm};
use super::grade::{grade, Grade};
use super::questions::{parse_set, prompt, Kind, Question, SetError};
use super::report::{answers_by_arm, best_single, report, Report};
use crate::engine::events::{after, watcher_channel, Frame};
use crate::engine::{Engine, EngineError, Viewer};
use crate::ids::{EvalId, RunId};
use crate::providers::oracle::{self, AnswerKey};
use crate::store::{EvalRecord, EvalRunRecord, NewEval, StoreError};

/// What `conclave eval` was asked.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// The set's name (its file) and text.
    pub set_name: String,
    pub set_text: String,
    pub members: Vec<String>,
    /// The arms, comma-separated (see [`parse_arms`]).
    pub arms: String,
    /// Self-consistency's samples per question (the single answer is the first).
    pub samples: usize,
    /// Seeds the oracle sims and the bootstrap.
    pub seed: u64,
    pub budget_tokens: Option<u64>,
    pub budget_cost: Option<f64>,
    /// Runs in flight per provider.
    pub concurrency: usize,
    /// A mode arm's own `modeConfig` settings, by mode id.
    pub mode_settings: BTreeMap<String, Map<String, Value>>,
    /// The model that grades `judge` questions.
    pub judge: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Set(#[from] SetError),
    #[error("{0}")]
    Engine(#[from] EngineError),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// How far an eval is, for its progress line.
#[derive(Debug, Clone)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
    /// Per arm run so far: (arm, correct, answered).
    pub arms: Vec<(String, usize, usize)>,
}

/// One run to make.
struct Job {
    arm: String,
    question: usize,
    sample: i32,
    body: Value,
    providers: Vec<String>,
    /// What the budget holds for it while it runs (tokens, cost).
    reserve: (u64, f64),
}

/// A run made: its rows for `eval_runs` (the arm's answer, after its judge's when it was
/// judged), or None when it was cancelled.
type Done = Result<Option<Vec<EvalRunRecord>>, EvalError>;

/// The settings that make two evals of one set the same eval (what resuming matches on).
fn settings_of(opts: &EvalOptions, arms: &[Arm]) -> Value {
    json!({
        "members": opts.members,
        "arms": arms.iter().map(Arm::name).collect::<Vec<_>>(),
        "samples": opts.samples,
        "seed": opts.seed,
        "modeSettings": opts.mode_settings,
        "judge": opts.judge,
    })
}

/// The options an eval was started with, from its stored record (to resume it by id).
pub fn options_of(record: &EvalRecord) -> Result<EvalOptions, EvalError> {
    let s = &record.settings;
    let bad =
        || EvalError::Usage(format!("eval {} has settings this version cannot read", record.id));
    let strings = |v: &Value| -> Option<Vec<String>> {
        v.as_array()?.iter().map(|x| x.as_str().map(str::to_string)).collect()
    };
    let members = strings(&s["members"]).ok_or_else(bad)?;
    let arms = strings(&s["arms"]).ok_or_else(bad)?.join(",");
    let set_text = record
        .questions
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    Ok(EvalOptions {
        set_name: record.set_name.clone(),
        set_text,
        members,
        arms,
        samples: s["samples"].as_u64().ok_or_else(bad)? as usize,
        seed: s["seed"].as_u64().ok_or_else(bad)?,
        budget_tokens: None,
        budget_cost: None,
        concurrency: 8,
        mode_settings: serde_json::from_value(s["modeSettings"].clone()).map_err(|_| bad())?,
        judge: s["judge"].as_str().map(str::to_string),
    })
}

/// Runs (or resumes) an eval until it is done, its budget is reached or `stop` resolves, and
/// answers its report. `resume`: the eval to continue; else the newest unfinished eval of the
/// same set and settings, else a new one.
pub async fn run_eval(
    engine: &Engine,
    opts: &EvalOptions,
    resume: Option<&EvalRecord>,
    stop: impl Future<Output = ()>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Report, EvalError> {
    if opts.members.is_empty() {
        return Err(EvalError::Usage("--members: name at least one model".into()));
    }
    let mut seen = HashSet::new();
    if let Some(twice) = opts.members.iter().find(|m| !seen.insert(m.as_str())) {
        return Err(EvalError::Usage(format!(
            "--members: {twice} is named twice; tell copies of one model apart by name \
             (sim/oracle-0.6-a, local/smollm2-b: a route serves them alike)"
        )));
    }
    let questions = parse_set(&opts.set_text)?;
    if opts.judge.is_none() && questions.iter().any(|q| q.kind == Kind::Judge) {
        return Err(EvalError::Usage(
            "--judge: the set has judge questions; name the model that grades them".into(),
        ));
    }
    let arms = parse_arms(&opts.arms, &opts.members).map_err(EvalError::Usage)?;
    let samples = opts.samples.max(1);
    let settings = settings_of(opts, &arms);
    let set_hash = hex(&Sha256::digest(opts.set_text.as_bytes()));
    let store = engine.store();
    let eval = match resume {
        Some(e) => e.clone(),
        None => match store.find_eval(&set_hash, &settings).await? {
            Some(e) if e.status != "completed" => e,
            _ => {
                store
                    .create_eval(NewEval {
                        id: EvalId::generate().into_string(),
                        set_name: opts.set_name.clone(),
                        set_hash,
                        questions: serde_json::to_value(&questions).unwrap_or(Value::Null),
                        settings,
                        owner: None,
                    })
                    .await?
            }
        },
    };
    store.finish_eval(&eval.id, "running", None).await?;
    let prompts: Vec<String> = questions.iter().map(prompt).collect();
    for (q, p) in questions.iter().zip(&prompts) {
        let key = AnswerKey { answer: q.answer.clone(), kind: q.kind.clone(), seed: opts.seed };
        oracle::register(p, key);
    }
    let mut rows = store.eval_runs(&eval.id).await?;
    let mut driver = Driver::new(engine, &eval.id, opts, &questions, &rows);
    let needs_all = arms.iter().any(|a| matches!(a, Arm::Majority | Arm::SelfConsistency));
    let singles: Vec<&String> = opts
        .members
        .iter()
        .filter(|m| needs_all || arms.contains(&Arm::Single((*m).clone())))
        .collect();
    let modes: Vec<_> =
        arms.iter().filter_map(|a| if let Arm::Mode(k) = a { Some(*k) } else { None }).collect();
    let consistency = arms.contains(&Arm::SelfConsistency);
    // Phase 2's size is known before the best member is: count it now for the progress line.
    driver.total_later =
        questions.len() * (modes.len() + if consistency { samples.saturating_sub(1) } else { 0 });
    let mut first = Vec::new();
    for m in &singles {
        for (i, p) in prompts.iter().enumerate() {
            first.push((format!("single:{m}"), i, 0, solo_body(m, p)));
        }
    }
    tokio::pin!(stop);
    let mut stopped = driver.run(first, &mut stop, progress).await?;
    rows = store.eval_runs(&eval.id).await?;
    let best =
        if singles.is_empty() { None } else { best_single(&opts.members, &questions, &rows) };
    if stopped.is_none() {
        let lead = best.clone().unwrap_or_else(|| opts.members[0].clone());
        let mut second = Vec::new();
        if consistency {
            for (i, p) in prompts.iter().enumerate() {
                for s in 1..samples {
                    second.push(("self-consistency".to_string(), i, s as i32, solo_body(&lead, p)));
                }
            }
        }
        for kind in &modes {
            let own = opts.mode_settings.get(kind.as_str());
            for (i, p) in prompts.iter().enumerate() {
                let body = mode_body(*kind, &opts.members, &lead, own, p);
                second.push((kind.as_str().to_string(), i, 0, body));
            }
        }
        driver.total_later = 0;
        stopped = driver.run(second, &mut stop, progress).await?;
        rows = store.eval_runs(&eval.id).await?;
    }
    let status = if stopped.is_some() { "stopped" } else { "completed" };
    store.finish_eval(&eval.id, status, stopped.clone()).await?;
    let answers = answers_by_arm(&arms, &opts.members, &questions, &rows, best.as_deref(), samples);
    Ok(report(&eval.id, &answers, best.as_deref(), opts.seed, stopped))
}

/// The report of a stored eval from its recorded answers (what the eval page shows), with
/// its questions.
pub fn stored_report(
    record: &EvalRecord,
    rows: &[EvalRunRecord],
) -> Result<(Report, Vec<Question>), EvalError> {
    let opts = options_of(record)?;
    let questions = parse_set(&opts.set_text)?;
    let arms = parse_arms(&opts.arms, &opts.members).map_err(EvalError::Usage)?;
    let singles = arms.iter().any(|a| !matches!(a, Arm::Mode(_)));
    let best = if singles { best_single(&opts.members, &questions, rows) } else { None };
    let answers = answers_by_arm(
        &arms,
        &opts.members,
        &questions,
        rows,
        best.as_deref(),
        opts.samples.max(1),
    );
    let stopped = (record.status == "stopped").then(|| record.note.clone().unwrap_or_default());
    Ok((report(&record.id, &answers, best.as_deref(), opts.seed, stopped), questions))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The scheduler of an eval's runs: bounded per provider, within the budget, stoppable.
struct Driver<'a> {
    engine: &'a Engine,
    eval_id: &'a str,
    opts: &'a EvalOptions,
    questions: &'a [Question],
    /// (arm, question id, sample) already recorded.
    recorded: HashSet<(String, String, i32)>,
    tokens: u64,
    cost: f64,
    /// The largest run (tokens, cost) of each arm so far.
    largest: HashMap<String, (u64, f64)>,
    /// Per arm: (correct, answered), for the progress line.
    tally: BTreeMap<String, (usize, usize)>,
    done: usize,
    total_later: usize,
    in_flight: Arc<Mutex<HashSet<String>>>,
}

impl<'a> Driver<'a> {
    fn new(
        engine: &'a Engine,
        eval_id: &'a str,
        opts: &'a EvalOptions,
        questions: &'a [Question],
        rows: &[EvalRunRecord],
    ) -> Self {
        let mut d = Driver {
            engine,
            eval_id,
            opts,
            questions,
            recorded: HashSet::new(),
            tokens: 0,
            cost: 0.0,
            largest: HashMap::new(),
            tally: BTreeMap::new(),
            done: 0,
            total_later: 0,
            in_flight: Arc::default(),
        };
        for r in rows {
            d.count(r);
        }
        d
    }

    fn count(&mut self, r: &EvalRunRecord) {
        self.recorded.insert((r.arm.clone(), r.question_id.clone(), r.sample));
        let t = (r.prompt_tokens + r.completion_tokens).max(0) as u64;
        let c = r.cost.unwrap_or(0.0);
        self.tokens += t;
        self.cost += c;
        let l = self.largest.entry(r.arm.clone()).or_insert((0, 0.0));
        *l = (l.0.max(t), l.1.max(c));
        if r.arm.starts_with("judge/") {
            return;
        }
        let e = self.tally.entry(r.arm.clone()).or_insert((0, 0));
        e.0 += usize::from(r.grade == Grade::Correct.as_str());
        e.1 += 1;
    }

    /// Whether a run of `arm` may start now, given what runs in flight are expected to use;
    /// reserves its expected use when it may. `Err` when the budget is spent.
    fn admit(
        &self,
        arm: &str,
        reserved: &mut (u64, f64),
        arms_in_flight: &HashSet<String>,
    ) -> Result<Option<(u64, f64)>, String> {
        let (bt, bc) = (self.opts.budget_tokens, self.opts.budget_cost);
        if bt.is_none() && bc.is_none() {
            return Ok(Some((0, 0.0)));
        }
        if bt.is_some_and(|b| self.tokens >= b) || bc.is_some_and(|b| self.cost >= b) {
            return Err(self.spent());
        }
        let Some(&(t, c)) = self.largest.get(arm) else {
            // Nothing known of this arm's runs: one at a time until one is.
            return Ok((!arms_in_flight.contains(arm)).then_some((0, 0.0)));
        };
        let over_t = bt.is_some_and(|b| self.tokens + reserved.0 + t > b);
        let over_c = bc.is_some_and(|b| self.cost + reserved.1 + c > b);
        if over_t || over_c {
            return if arms_in_flight.is_empty() { Err(self.spent()) } else { Ok(None) };
        }
        reserved.0 += t;
        reserved.1 += c;
        Ok(Some((t, c)))
    }

    fn spent(&self) -> String {
        let mut parts = Vec::new();
        if let Some(b) = self.opts.budget_tokens {
            parts.push(format!("{} of a {b}-token budget used", self.tokens));
        }
        if let Some(b) = self.opts.budget_cost {
            parts.push(format!("${:.4} of a ${b} budget used", self.cost));
        }
        format!("budget reached ({}); the next run could exceed it", parts.join(", "))
    }

    /// Runs `jobs` (those not recorded yet). Answers why it stopped early, if it did.
    async fn run(
        &mut self,
        jobs: Vec<(String, usize, i32, Value)>,
        stop: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Option<String>, EvalError> {
        let defaults = self.engine.defaults().clone();
        let mut pending: VecDeque<Job> = VecDeque::new();
        for (arm, question, sample, body) in jobs {
            let qid = &self.questions[question].id;
            if self.recorded.contains(&(arm.clone(), qid.clone(), sample)) {
                continue;
            }
            // Checked before anything runs: a mode that refuses its settings says so at once.
            let valid = crate::modes::validate(&body, &defaults)
                .map_err(|e| EvalError::Usage(format!("arm {arm}: {e}")))?;
            let mut providers: Vec<String> = valid
                .models
                .iter()
                .map(|m| m.split_once('/').map_or(m.as_str(), |(p, _)| p).to_string())
                .collect();
            providers.sort();
            providers.dedup();
            pending.push_back(Job { arm, question, sample, body, providers, reserve: (0, 0.0) });
        }
        let total = self.done + pending.len() + self.total_later;
        let limit = self.opts.concurrency.max(1);
        let mut per_provider: HashMap<String, usize> = HashMap::new();
        let mut arms_in_flight: HashMap<String, usize> = HashMap::new();
        let mut running = FuturesUnordered::new();
        let mut stopped: Option<String> = None;
        // What the runs in flight are expected to use (see `admit`).
        let mut reserved = (0u64, 0.0f64);
        let mut buffer: Vec<EvalRunRecord> = Vec::new();
        loop {
            if stopped.is_none() {
                let mut i = 0;
                // Look a little way down the queue for a run whose providers have room.
                while i < pending.len().min(256) {
                    let job = &pending[i];
                    let room = job
                        .providers
                        .iter()
                        .all(|p| per_provider.get(p).copied().unwrap_or(0) < limit);
                    if !room {
                        i += 1;
                        continue;
                    }
                    let flying: HashSet<String> = arms_in_flight
                        .iter()
                        .filter(|(_, n)| **n > 0)
                        .map(|(a, _)| a.clone())
                        .collect();
                    let reserve = match self.admit(&job.arm, &mut reserved, &flying) {
                        Ok(Some(r)) => r,
                        Ok(None) => {
                            i += 1;
                            continue;
                        }
                        Err(why) => {
                            if running.is_empty() {
                                stopped = Some(why);
                            }
                            break;
                        }
                    };
                    let Some(mut job) = pending.remove(i) else { break };
                    job.reserve = reserve;
                    for p in &job.providers {
                        *per_provider.entry(p.clone()).or_insert(0) += 1;
                    }
                    *arms_in_flight.entry(job.arm.clone()).or_insert(0) += 1;
                    running.push(execute(
                        self.engine,
                        self.eval_id,
                        self.questions,
                        self.opts.judge.as_deref(),
                        job,
                        self.in_flight.clone(),
                    ));
                }
            }
            if running.is_empty() {
                break;
            }
            tokio::select! {
                finished = running.next() => {
                    let Some((job, done)) = finished else { break };
                    for p in &job.providers {
                        if let Some(n) = per_provider.get_mut(p) {
                            *n -= 1;
                        }
                    }
                    if let Some(n) = arms_in_flight.get_mut(&job.arm) {
                        *n -= 1;
                    }
                    reserved.0 -= job.reserve.0;
                    reserved.1 -= job.reserve.1;
                    if let Some(rows) = done? {
                        for row in &rows {
                            self.count(row);
                        }
                        self.done += 1;
                        buffer.extend(rows);
                        if buffer.len() >= 64 {
                            self.engine.store().add_eval_runs(std::mem::take(&mut buffer)).await?;
                        }
                        let arms = self.tally.iter().map(|(a, (c, n))| (a.clone(), *c, *n)).collect();
                        progress(&Progress { done: self.done, total, arms });
                    }
                }
                _ = stop.as_mut(), if stopped.is_none() => {
                    stopped = Some("stopped by Ctrl-C".into());
                    let ids: Vec<String> = self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
                    for id in ids {
                        let _ = self.engine.cancel(&RunId::from_stored(id), "the eval was stopped", &Viewer::local()).await;
                    }
                }
            }
        }
        if !buffer.is_empty() {
            self.engine.store().add_eval_runs(buffer).await?;
        }
        Ok(stopped)
    }
}

/// Makes one run, waits for its end, grades its answer.
async fn execute(
    engine: &Engine,
    eval_id: &str,
    questions: &[Question],
    judge: Option<&str>,
    job: Job,
    in_flight: Arc<Mutex<HashSet<String>>>,
) -> (Job, Done) {
    let q = &questions[job.question];
    let done = async {
        let viewer = Viewer::local();
        let started = engine.start_run(&job.body, &viewer).await?;
        let id = started.run_id;
        in_flight.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_string());
        let terminal = follow(engine, &id).await;
        in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(id.as_str());
        if terminal? == "cancelled" {
            return Ok(None);
        }
        let detail = engine.result(&id, &viewer).await?;
        let mut graded = match &detail.answer {
            Some(text) => grade(text, q),
            None => super::grade::Graded { grade: Grade::Unparsed, answer: None },
        };
        let mut judged = None;
        if let (Kind::Judge, Some(judge), Some(text)) = (&q.kind, judge, &detail.answer) {
            if graded.answer.is_some() {
                let (verdict, run) = ask_judge(engine, judge, q, text).await?;
                graded.grade = match verdict {
                    Some(true) => Grade::Correct,
                    Some(false) => Grade::Wrong,
                    None => Grade::Unparsed,
                };
                judged = Some(run);
            }
        }
        let run = &detail.run;
        let mut rows = Vec::new();
        if let Some(j) = judged {
            // The judge's run, linked to the eval under `judge/ARM` (its tokens count against
            // the budget, not the arm's figures).
            rows.push(EvalRunRecord {
                eval_id: eval_id.to_string(),
                arm: format!("judge/{}", job.arm),
                question_id: q.id.clone(),
                sample: job.sample,
                run_id: j.run.id.clone(),
                grade: graded.grade.as_str().to_string(),
                answer: None,
                prompt_tokens: j.run.prompt_tokens,
                completion_tokens: j.run.completion_tokens,
                cost: j.run.cost,
                latency_ms: j.run.finished_at.map_or(0, |f| (f - j.run.created_at).max(0)),
            });
        }
        rows.push(EvalRunRecord {
            eval_id: eval_id.to_string(),
            arm: job.arm.clone(),
            question_id: q.id.clone(),
            sample: job.sample,
            run_id: id.into_string(),
            grade: graded.grade.as_str().to_string(),
            answer: graded.answer,
            prompt_tokens: run.prompt_tokens,
            completion_tokens: run.completion_tokens,
            cost: run.cost,
            latency_ms: run.finished_at.map_or(0, |f| (f - run.created_at).max(0)),
        });
        Ok(Some(rows))
    }
    .await;
    (job, done)
}

/// Asks the judge about a reply (a Solo run of its own); its verdict and its run.
async fn ask_judge(
    engine: &Engine,
    judge: &str,
    q: &Question,
    reply: &str,
) -> Result<(Option<bool>, crate::engine::RunDetail), EvalError> {
    let viewer = Viewer::local();
    let body = solo_body(judge, &super::grade::judge_prompt(q, reply));
    let started = engine.start_run(&body, &viewer).await?;
    follow(engine, &started.run_id).await?;
    let detail = engine.result(&started.run_id, &viewer).await?;
    let verdict = detail.answer.as_deref().and_then(super::grade::read_verdict);
    Ok((verdict, detail))
}

/// Waits for a run's terminal event and answers it (`complete`, `error`, `cancelled`).
pub async fn follow(engine: &Engine, id: &RunId) -> Result<String, EngineError> {
    let (tx, mut rx) = watcher_channel();
    let watcher = engine.watcher_id();
    let viewer = Viewer::local();
    engine.watch(id, 0, watcher, tx.clone(), &viewer).await?;
    let mut last_seq = 0;
    while let Some(frame) = rx.recv().await {
        let batch = match frame {
            Frame::Events(batch) => batch,
            Frame::Lagged { .. } => {
                engine.watch(id, last_seq, watcher, tx.clone(), &viewer).await?;
                continue;
            }
            _ => continue,
        };
        for f in after(&batch, last_seq) {
            last_seq = f.seq;
            if f.is_terminal() {
                engine.unwatch(id, watcher);
                return Ok(f.event.clone());
            }
        }
    }
    // The channel closed without a terminal event: read how the run ended.
    let detail = engine.result(id, &viewer).await?;
    Ok(match detail.run.status {
        crate::store::RunStatus::Completed => "complete",
        crate::store::RunStatus::Cancelled => "cancelled",
        _ => "error",
    }
    .to_string())
}
