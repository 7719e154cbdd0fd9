//! Runs an eval through the engine, as `conclave run` runs one deliberation: every arm's answer
//! to a question is a stored run, linked to the eval by a row of `eval_runs` with its grade.
//!
//! The order: first the members alone (`single:…`, which `majority`, `self-consistency` and
//! `jury` need), then, once the best single member is known, its further self-consistency
//! samples, the jury's runs on its answers, and the mode arms (the best member takes their
//! single-model roles: chairman, foreman…). Runs go side by side, at most `concurrency` at a
//! time per provider route (the configured route that serves a model, as the server bounds its
//! own calls). Before anything runs, every arm's body is checked against its mode and every
//! model it names against the routes, so a bad setting is said at once.
//!
//! Stopping: a stop signal (Ctrl-C) cancels the runs in flight and reports what is done. The
//! budget is kept call by call ([`Budget`], the engine's spending guard given to every run of
//! the eval): a model call starts only when what is spent, the worst case of every call in
//! flight and its own worst case (prompt bytes, template, output cap) fit; it waits while calls
//! in flight hold the room it needs; when it would not fit even alone its run is cancelled and
//! the eval stops. A call whose use is not known (a timeout, a stopped stream, no usage
//! reported) counts its worst case; an attempt the provider turned away counts nothing; a
//! retried attempt is counted and the next must fit. So a token budget is never passed; a cost
//! budget is weighed at each model's price bound once it is known (see [`Budget`]). A run also
//! starts only when the largest run of its arm so far still fits (an arm's first run goes
//! alone), so few runs are cut off half done. A cancelled run is not recorded, so resuming the
//! eval (`--resume ID`, or the same set and settings again) runs it again; every recorded
//! answer is kept and skipped, and its tokens count against the budget given then.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::arms::{jury_body, mode_body, parse_arms, solo_body, Arm};
use super::grade::{grade, Grade};
use super::oracle::{self, AnswerKey};
use super::questions::{parse_set, prompt, Kind, Question, SetError};
use super::report::{answers_by_arm, best_single, report, Report};
use crate::engine::events::{after, watcher_channel, Frame, Terminal};
use crate::engine::spend::{Admit, CallSize, SpendGuard, Used};
use crate::engine::{Engine, EngineError, Viewer};
use crate::ids::{EvalId, RunId};
use crate::store::{EvalRecord, EvalRunRecord, EvalStatus, NewEval, StoreError};

mod budget;
use budget::*;

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
    /// The eval's id (known once it is stored: the first report comes before any run).
    pub eval_id: String,
    pub done: usize,
    pub total: usize,
    /// Per arm run so far: (arm, correct, answered).
    pub arms: Vec<(String, usize, usize)>,
}

/// One run to plan: its arm, question (index), sample and start body, and for a jury run the
/// answer it judges.
struct Planned {
    arm: String,
    question: usize,
    sample: i32,
    body: Value,
    given: Option<Given>,
}

impl Planned {
    fn new(arm: String, question: usize, sample: i32, body: Value) -> Self {
        Planned { arm, question, sample, body, given: None }
    }
}

/// The answer a jury run judges: the best single member's, as graded.
#[derive(Debug, Clone)]
struct Given {
    grade: Grade,
}

/// One run to make.
struct Job {
    plan: Planned,
    /// The routes its models go through (what the concurrency bound counts).
    providers: Vec<String>,
    /// What the budget holds for it while it runs (tokens, cost).
    reserve: (u64, f64),
}

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

/// Runs (or resumes) an eval until it is done, its budget is reached or `stop` resolves (to
/// the reason it is stopped, `stopped by Ctrl-C`), and answers its report. `resume`: the eval
/// to continue; else the newest unfinished eval of the same set and settings, else a new one.
/// `progress` hears first when the eval is stored (nothing run yet), then after each run.
pub async fn run_eval(
    engine: &Engine,
    opts: &EvalOptions,
    resume: Option<&EvalRecord>,
    stop: impl Future<Output = String>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Report, EvalError> {
    // The oracles answer (and judge) before the modes' sims in this process.
    oracle::install();
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
    // The jury's foreman writes its report and casts no vote; it must not be a juror.
    let foreman = opts.judge.as_deref().filter(|j| !opts.members.iter().any(|m| m == j));
    // Before anything is stored: an arm that cannot run as asked leaves nothing behind.
    probe(engine, &arms, opts, foreman)?;
    let samples = opts.samples.max(1);
    let settings = settings_of(opts, &arms);
    let set_hash = hex(&Sha256::digest(opts.set_text.as_bytes()));
    let store = engine.store();
    let eval = match resume {
        Some(e) => e.clone(),
        None => match store.find_eval(&set_hash, &settings).await? {
            Some(e) if e.status != EvalStatus::Completed => e,
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
    store.finish_eval(&eval.id, EvalStatus::Running, None).await?;
    let prompts: Vec<String> = questions.iter().map(prompt).collect();
    for (q, p) in questions.iter().zip(&prompts) {
        let key = AnswerKey { answer: q.answer.clone(), kind: q.kind.clone(), seed: opts.seed };
        oracle::register(p, key);
    }
    let mut rows = store.eval_runs(&eval.id).await?;
    let mut driver = Driver::new(engine, &eval.id, opts, &questions, &rows);
    let needs_all =
        arms.iter().any(|a| matches!(a, Arm::Majority | Arm::SelfConsistency | Arm::Jury));
    let singles: Vec<&String> = opts
        .members
        .iter()
        .filter(|m| needs_all || arms.contains(&Arm::Single((*m).clone())))
        .collect();
    let modes: Vec<_> =
        arms.iter().filter_map(|a| if let Arm::Mode(k) = a { Some(*k) } else { None }).collect();
    let consistency = arms.contains(&Arm::SelfConsistency);
    let jury = arms.contains(&Arm::Jury);
    let jury_settings = opts.mode_settings.get("jury");
    // Phase 2's size is known before the best member is: count it now for the progress line.
    driver.total_later = questions.len()
        * (modes.len()
            + usize::from(jury)
            + if consistency { samples.saturating_sub(1) } else { 0 });
    let mut first = Vec::new();
    for m in &singles {
        for (i, p) in prompts.iter().enumerate() {
            first.push(Planned::new(format!("single:{m}"), i, 0, solo_body(m, p)));
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
                    let body = solo_body(&lead, p);
                    second.push(Planned::new("self-consistency".into(), i, s as i32, body));
                }
            }
        }
        for kind in &modes {
            let own = opts.mode_settings.get(kind.as_str());
            for (i, p) in prompts.iter().enumerate() {
                let body = mode_body(*kind, &opts.members, &lead, own, p);
                second.push(Planned::new(kind.as_str().to_string(), i, 0, body));
            }
        }
        if jury {
            // Each question's given answer is the best member's single reply, as it stands.
            let given_rows: HashMap<&str, &EvalRunRecord> = rows
                .iter()
                .filter(|r| r.arm == format!("single:{lead}") && r.sample == 0)
                .map(|r| (r.question_id.as_str(), r))
                .collect();
            for (i, (q, p)) in questions.iter().zip(&prompts).enumerate() {
                let Some(row) = given_rows.get(q.id.as_str()) else { continue };
                if driver.recorded.contains(&("jury".into(), q.id.clone(), 0)) {
                    continue;
                }
                let run = RunId::from_stored(row.run_id.clone());
                // A given run that can no longer be read is judged as no answer.
                let text = engine.result(&run, &Viewer::local()).await.ok().and_then(|d| d.answer);
                let given = Given { grade: Grade::parse(&row.grade).unwrap_or(Grade::Unparsed) };
                let text = text
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or_else(|| "(The model gave no answer to this question.)".to_string());
                let body = jury_body(&opts.members, foreman, jury_settings, p, &text);
                second.push(Planned {
                    given: Some(given),
                    ..Planned::new("jury".into(), i, 0, body)
                });
            }
        }
        driver.total_later = 0;
        stopped = driver.run(second, &mut stop, progress).await?;
        rows = store.eval_runs(&eval.id).await?;
    }
    let status = if stopped.is_some() { EvalStatus::Stopped } else { EvalStatus::Completed };
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
    let stopped =
        (record.status == EvalStatus::Stopped).then(|| record.note.clone().unwrap_or_default());
    Ok((report(&record.id, &answers, best.as_deref(), opts.seed, stopped), questions))
}

/// A recorded run's tokens.
fn run_tokens(r: &EvalRunRecord) -> u64 {
    (r.prompt_tokens + r.completion_tokens).max(0) as u64
}

/// Checks, before anything runs, that every arm's body is one its mode accepts and that every
/// model it names is served, so a bad `--arm-config` or an unserved model is said at once, not
/// after the single members have run.
fn probe(
    engine: &Engine,
    arms: &[Arm],
    opts: &EvalOptions,
    foreman: Option<&str>,
) -> Result<(), EvalError> {
    let (lead, q) = (&opts.members[0], "What is 2 + 2?");
    for arm in arms {
        let body = match arm {
            Arm::Single(m) => solo_body(m, q),
            Arm::Mode(k) => {
                mode_body(*k, &opts.members, lead, opts.mode_settings.get(k.as_str()), q)
            }
            Arm::Jury => jury_body(&opts.members, foreman, opts.mode_settings.get("jury"), q, "4"),
            // They vote over the members' single answers: every member must be served.
            Arm::Majority | Arm::SelfConsistency => {
                for m in &opts.members {
                    engine.providers().resolve(m).map_err(|e| {
                        EvalError::Usage(format!("arm {}: member {m}: {e}", arm.name()))
                    })?;
                }
                continue;
            }
        };
        let refused = |e: String| {
            let hint = if *arm == Arm::Jury && e.contains("oreman") {
                "; name the jury's foreman, who must not be a member, with --judge MODEL or \
                 --arm-config jury='{\"foremanModel\":\"MODEL\"}'"
            } else {
                ""
            };
            EvalError::Usage(format!("arm {}: {e}{hint}", arm.name()))
        };
        let valid =
            crate::modes::validate(&body, engine.defaults()).map_err(|e| refused(e.to_string()))?;
        // A mode arm measures the members: a mode whose panel is not a list of models (Chain's
        // steps, Specialist Panel's specialists) would otherwise run its own default models.
        let missing: Vec<&str> = match arm {
            Arm::Mode(_) | Arm::Jury => opts
                .members
                .iter()
                .filter(|m| !valid.models.contains(m))
                .map(String::as_str)
                .collect(),
            _ => Vec::new(),
        };
        if !missing.is_empty() {
            return Err(EvalError::Usage(format!(
                "arm {0}: {1} would not take part: {0} mode has no list of models to put the \
                 members in, or its settings leave them out; name its panel with \
                 --arm-config '{0}={{…}}' (see `conclave run {0} --help`)",
                arm.name(),
                missing.join(", ")
            )));
        }
        for m in &valid.models {
            engine.providers().resolve(m).map_err(|e| {
                let role = if Some(m.as_str()) == body["modeConfig"]["foremanModel"].as_str() {
                    format!("the foreman: {e}")
                } else {
                    e
                };
                refused(role)
            })?;
        }
    }
    if let Some(j) = &opts.judge {
        engine.providers().resolve(j).map_err(|e| EvalError::Usage(format!("--judge: {e}")))?;
    }
    Ok(())
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
    /// The largest run (tokens, cost) of each arm so far.
    largest: HashMap<String, (u64, f64)>,
    /// Per arm: (correct, answered), for the progress line.
    tally: BTreeMap<String, (usize, usize)>,
    done: usize,
    total_later: usize,
    in_flight: Arc<Mutex<HashSet<String>>>,
    budget: Arc<Budget>,
}

impl<'a> Driver<'a> {
    fn new(
        engine: &'a Engine,
        eval_id: &'a str,
        opts: &'a EvalOptions,
        questions: &'a [Question],
        rows: &[EvalRunRecord],
    ) -> Self {
        // What was recorded before counts against the budget given now.
        let spent =
            rows.iter().fold((0, 0.0), |(t, c), r| (t + run_tokens(r), c + r.cost.unwrap_or(0.0)));
        let mut d = Driver {
            engine,
            eval_id,
            opts,
            questions,
            recorded: HashSet::new(),
            largest: HashMap::new(),
            tally: BTreeMap::new(),
            done: 0,
            total_later: 0,
            in_flight: Arc::default(),
            budget: Arc::new(Budget::new(opts.budget_tokens, opts.budget_cost, spent)),
        };
        for r in rows {
            d.count(r);
        }
        d
    }

    fn count(&mut self, r: &EvalRunRecord) {
        self.recorded.insert((r.arm.clone(), r.question_id.clone(), r.sample));
        let (t, c) = (run_tokens(r), r.cost.unwrap_or(0.0));
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
        let (tokens, cost) = self.budget.spent();
        if bt.is_some_and(|b| tokens >= b) || bc.is_some_and(|b| cost >= b) {
            return Err(self.spent());
        }
        let Some(&(t, c)) = self.largest.get(arm) else {
            // Nothing known of this arm's runs: one at a time until one is.
            return Ok((!arms_in_flight.contains(arm)).then_some((0, 0.0)));
        };
        let over_t = bt.is_some_and(|b| tokens + reserved.0 + t > b);
        let over_c = bc.is_some_and(|b| cost + reserved.1 + c > b);
        if over_t || over_c {
            return if arms_in_flight.is_empty() { Err(self.spent()) } else { Ok(None) };
        }
        reserved.0 += t;
        reserved.1 += c;
        Ok(Some((t, c)))
    }

    fn spent(&self) -> String {
        format!("budget reached: {}; the next run could exceed it", self.budget.used())
    }

    /// Cancels the runs in flight; they answer `cancelled` and are not recorded.
    async fn cancel_all(&self, reason: &str) {
        let ids: Vec<String> =
            self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
        for id in ids {
            let _ = self.engine.cancel(&RunId::from_stored(id), reason, &Viewer::local()).await;
        }
    }

    /// Runs `jobs` (those not recorded yet). Answers why it stopped early, if it did.
    async fn run(
        &mut self,
        jobs: Vec<Planned>,
        stop: &mut std::pin::Pin<&mut impl Future<Output = String>>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Option<String>, EvalError> {
        let defaults = self.engine.defaults().clone();
        let mut pending: VecDeque<Job> = VecDeque::new();
        for plan in jobs {
            let qid = &self.questions[plan.question].id;
            if self.recorded.contains(&(plan.arm.clone(), qid.clone(), plan.sample)) {
                continue;
            }
            // Checked before anything runs: a mode that refuses its settings says so at once.
            let valid = crate::modes::validate(&plan.body, &defaults)
                .map_err(|e| EvalError::Usage(format!("arm {}: {e}", plan.arm)))?;
            let providers = self.engine.providers();
            let mut routes: Vec<String> = valid
                .models
                .iter()
                .map(|m| providers.route_of(m).unwrap_or_else(|| m.clone()))
                .collect();
            routes.sort();
            routes.dedup();
            pending.push_back(Job { plan, providers: routes, reserve: (0, 0.0) });
        }
        let total = self.done + pending.len() + self.total_later;
        // Where it starts (a resumed eval's recorded runs, or none), before anything runs.
        let arms = self.tally.iter().map(|(a, (c, n))| (a.clone(), *c, *n)).collect();
        progress(&Progress { eval_id: self.eval_id.to_string(), done: self.done, total, arms });
        let limit = self.opts.concurrency.max(1);
        let mut per_provider: HashMap<String, usize> = HashMap::new();
        let mut arms_in_flight: HashMap<String, usize> = HashMap::new();
        let mut running = FuturesUnordered::new();
        let mut stopped: Option<String> = None;
        let mut budget_stop = false;
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
                    let reserve = match self.admit(&job.plan.arm, &mut reserved, &flying) {
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
                    *arms_in_flight.entry(job.plan.arm.clone()).or_insert(0) += 1;
                    running.push(execute(
                        self.engine,
                        self.eval_id,
                        self.questions,
                        self.opts.judge.as_deref(),
                        job,
                        self.in_flight.clone(),
                        self.budget.clone(),
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
                    if let Some(n) = arms_in_flight.get_mut(&job.plan.arm) {
                        *n -= 1;
                    }
                    reserved.0 -= job.reserve.0;
                    reserved.1 -= job.reserve.1;
                    match done? {
                        Finished::Recorded(rows) => {
                            for row in &rows {
                                self.count(row);
                            }
                            self.done += 1;
                            buffer.extend(rows);
                            if buffer.len() >= 64 {
                                self.engine.store().add_eval_runs(std::mem::take(&mut buffer)).await?;
                            }
                            let arms = self.tally.iter().map(|(a, (c, n))| (a.clone(), *c, *n)).collect();
                            progress(&Progress {
                                eval_id: self.eval_id.to_string(),
                                done: self.done,
                                total,
                                arms,
                            });
                        }
                        // Not recorded (a resume runs it again); what it used is counted by the
                        // budget. A call the budget refused stops the eval.
                        Finished::Cancelled => {
                            if self.budget.refused() && !budget_stop {
                                budget_stop = true;
                                stopped = Some(String::new());
                                self.cancel_all("the eval's budget was reached").await;
                            }
                        }
                    }
                }
                why = stop.as_mut(), if stopped.is_none() => {
                    stopped = Some(why);
                    self.cancel_all("the eval was stopped").await;
                }
            }
        }
        if !buffer.is_empty() {
            self.engine.store().add_eval_runs(buffer).await?;
        }
        if budget_stop {
            stopped = Some(self.budget.stop_note());
        }
        Ok(stopped)
    }
}

/// How a run of the eval ended.
enum Finished {
    /// Its rows for `eval_runs` (the arm's answer, after its judge's when it was judged).
    Recorded(Vec<EvalRunRecord>),
    /// Cancelled, with what it had used.
    Cancelled,
}

type Done = Result<Finished, EvalError>;

/// Makes one run, waits for its end, grades its answer.
async fn execute(
    engine: &Engine,
    eval_id: &str,
    questions: &[Question],
    judge: Option<&str>,
    job: Job,
    in_flight: Arc<Mutex<HashSet<String>>>,
    budget: Arc<Budget>,
) -> (Job, Done) {
    let q = &questions[job.plan.question];
    let done = async {
        let viewer = Viewer::local();
        let started =
            engine.start_eval_run(&job.plan.body, &viewer, eval_id, budget.guard()).await?;
        let id = started.run_id;
        in_flight.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_string());
        let terminal = follow(engine, &id).await;
        in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(id.as_str());
        if terminal? == Terminal::Cancelled {
            return Ok(Finished::Cancelled);
        }
        let detail = engine.result(&id, &viewer).await?;
        let mut graded = match (&job.plan.given, &detail.answer) {
            (Some(given), _) => jury_grade(
                given,
                &detail.result,
                detail.run.status == crate::store::RunStatus::Completed,
            ),
            (None, Some(text)) => grade(text, q),
            (None, None) => super::grade::Graded { grade: Grade::Unparsed, answer: None },
        };
        let mut judged = None;
        if let (Kind::Judge, Some(judge), Some(text), None) =
            (&q.kind, judge, &detail.answer, &job.plan.given)
        {
            if graded.answer.is_some() {
                let Some((verdict, run)) =
                    ask_judge(engine, eval_id, judge, q, text, budget.clone()).await?
                else {
                    return Ok(Finished::Cancelled);
                };
                graded.grade = match verdict {
                    Some(true) => Grade::Correct,
                    Some(false) => Grade::Wrong,
                    None => Grade::Unparsed,
                };
                judged = Some(run);
            }
        }
        let run = &detail.run;
        let arm = &job.plan.arm;
        let mut rows = Vec::new();
        if let Some(j) = judged {
            // The judge's run, linked to the eval under `judge/ARM` (its tokens count against
            // the budget, not the arm's figures).
            rows.push(EvalRunRecord {
                eval_id: eval_id.to_string(),
                arm: format!("judge/{arm}"),
                question_id: q.id.clone(),
                sample: job.plan.sample,
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
            arm: arm.clone(),
            question_id: q.id.clone(),
            sample: job.plan.sample,
            run_id: id.into_string(),
            grade: graded.grade.as_str().to_string(),
            answer: graded.answer,
            prompt_tokens: run.prompt_tokens,
            completion_tokens: run.completion_tokens,
            cost: run.cost,
            latency_ms: run.finished_at.map_or(0, |f| (f - run.created_at).max(0)),
        });
        Ok(Finished::Recorded(rows))
    }
    .await;
    (job, done)
}

/// A jury run's grade: the given answer's own grade when the jury approved it, withheld when it
/// asked for a revision or rejected it, unparsed when its jurors stated no verdict. Its stored
/// `answer` is the verdict (`approve`, `revise`, `reject`), what the jury's figures count.
fn jury_grade(given: &Given, result: &Value, completed: bool) -> super::grade::Graded {
    // Only the jurors' own `VERDICT:` lines count: a verdict Jury mode inferred from their
    // scores, or one of a run that failed, is no verdict here.
    let s = &result["jurorSummary"];
    let verdict = s["majorityVerdict"]
        .as_str()
        .filter(|_| completed && s["verdictSource"] == "votes")
        .map(str::to_lowercase);
    let grade = match verdict.as_deref() {
        Some("approve") => given.grade,
        Some(_) => Grade::Withheld,
        None => Grade::Unparsed,
    };
    super::grade::Graded { grade, answer: verdict }
}

/// Asks the judge about a reply (a Solo run of its own); its verdict and its run, or None
/// when its run was cancelled.
async fn ask_judge(
    engine: &Engine,
    eval_id: &str,
    judge: &str,
    q: &Question,
    reply: &str,
    budget: Arc<Budget>,
) -> Result<Option<(Option<bool>, crate::engine::RunDetail)>, EvalError> {
    let viewer = Viewer::local();
    let body = solo_body(judge, &super::grade::judge_prompt(q, reply));
    let started = engine.start_eval_run(&body, &viewer, eval_id, budget.guard()).await?;
    if follow(engine, &started.run_id).await? == Terminal::Cancelled {
        return Ok(None);
    }
    let detail = engine.result(&started.run_id, &viewer).await?;
    let verdict = detail.answer.as_deref().and_then(super::grade::read_verdict);
    Ok(Some((verdict, detail)))
}

/// Waits for a run's terminal event and answers how it ended.
pub async fn follow(engine: &Engine, id: &RunId) -> Result<Terminal, EngineError> {
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
                return Ok(Terminal::of(&f.event).unwrap_or(Terminal::Error));
            }
        }
    }
    // The channel closed without a terminal event: read how the run ended.
    let detail = engine.result(id, &viewer).await?;
    Ok(Terminal::of_status(detail.run.status))
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
