//! What a Decompose run stores and reads back: the payloads of its events and rows, the result
//! from the stored rows, its outcome and the export's report.

use super::*;

// ---- payloads (one definition for live events and stored results) --------------------------

pub use crate::modes::payload::Data;

/// An event of a wave (`wave_start`, `task_complete`, `wave_complete`).
#[derive(Debug, Serialize)]
pub struct WaveEvent<T> {
    pub wave: usize,
    pub data: T,
}

/// `decompose_start`: the run and its configuration.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Start<'a> {
    pub config: StartConfig<'a>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartConfig<'a> {
    pub planner_model: &'a str,
    pub worker_models: &'a [String],
    pub assembler_model: &'a str,
    pub max_tasks: usize,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
}

/// Why the planner was asked again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Reask {
    /// No task could be read from its first plan.
    Format,
    /// The dependencies of its first plan formed a cycle.
    Cycle,
}

/// `plan_start`'s data: the planner, and why it is asked again when it is.
#[derive(Debug, Serialize)]
pub struct PlanStart<'a> {
    pub model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub again: Option<Reask>,
}

/// The plan as run: `plan_complete`'s data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanData {
    /// The model that wrote the plan.
    pub model: String,
    /// The sub-tasks in plan order (with the dependencies a cycle repair dropped left out).
    pub tasks: Vec<Task>,
    /// The task ids of each wave, in order: a wave's tasks run at once.
    pub execution_waves: Vec<Vec<String>>,
    /// The longest chain of dependent tasks, first to last.
    pub critical_path: Vec<String>,
    /// The most tasks of one wave.
    pub max_parallelism: usize,
    /// What was repaired or assumed in the plan, for a person.
    pub warnings: Vec<String>,
    /// The planner was asked again and its second plan was run.
    pub replanned: bool,
    /// Why the planner was asked again; null when it was not.
    pub reasked: Option<Reask>,
    /// The dependencies the cycle repair dropped.
    pub dropped_dependencies: Vec<Dropped>,
    /// How long the planner's call took, in milliseconds.
    pub response_time_ms: u64,
    /// The planner the backup stood in for, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
    /// Where the tasks were read from (its JSON or its text), when any were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// The `plan` row's parsed data, and the result's plan (without the assignments, which the
/// result gives on their own).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    #[serde(flatten)]
    pub data: PlanData,
    /// Only in the stored row.
    #[serde(default)]
    #[schemars(skip)]
    pub assignments: Vec<Assignment>,
    /// The planner's first reply, when it was asked again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_reply: Option<String>,
    /// Where the first plan's tasks were read from, when the second plan replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_read_from: Option<ReadFrom>,
    /// The second plan, when it was set aside for the first (it still had a cycle, or could
    /// not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_aside_reply: Option<String>,
    /// Where the set-aside plan's tasks were read from, when any were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_aside_read_from: Option<ReadFrom>,
}

/// `assignment_complete`'s data.
#[derive(Debug, Serialize)]
pub struct Assignments<'a> {
    pub assignments: &'a [Assignment],
}

/// A task of `wave_start`: its title and worker.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed<'a> {
    pub task_id: &'a str,
    pub title: Option<String>,
    pub model: Option<String>,
}

/// `wave_start`'s data.
#[derive(Debug, Serialize)]
pub struct WaveTasks<'a> {
    pub tasks: Vec<Listed<'a>>,
}

/// `wave_complete`'s data.
#[derive(Debug, Serialize)]
pub struct WaveDone {
    pub completed: usize,
    pub failed: usize,
}

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Completed,
    Failed,
    /// Not run: the run's time limit passed before its wave.
    Skipped,
}

/// A task as carried out: `task_complete`'s data, and an entry of the result's waves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Its id (`task_3`).
    pub task_id: String,
    pub title: String,
    /// Its worker.
    pub model: String,
    pub status: Status,
    /// Its output; "" when it failed or was skipped.
    pub output: String,
    pub word_count: usize,
    /// How long its call took, in milliseconds; null when it was skipped.
    pub response_time_ms: Option<i64>,
    /// Why it failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A task row's parsed data.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRow {
    pub task_id: String,
    pub title: String,
    pub wave: usize,
    pub status: Status,
    #[serde(default)]
    pub word_count: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `assembly_start`'s data.
#[derive(Debug, Serialize)]
pub struct AssemblyStart<'a> {
    pub model: &'a str,
    pub skipped: Vec<&'a str>,
}

/// The assembly: `assembly_complete`'s data (its row keeps the same without `response`, its
/// content) and the result's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Assembly {
    /// The model that wrote it; null when the outputs were concatenated.
    pub model: Option<String>,
    /// The answer.
    #[serde(default)]
    pub response: String,
    /// Set when the assembler failed and the outputs were concatenated.
    pub fallback: Option<Fallback>,
    /// How long the assembler's call took, in milliseconds.
    pub response_time_ms: Option<i64>,
    /// The assembler the backup stood in for, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// The result's plan: its row's, less the assignments (which the result gives on their own).
fn plan_of_row<S: serde::Serializer>(plan: &Option<Plan>, s: S) -> Result<S::Ok, S::Error> {
    plan.as_ref().map(|p| without(p, "assignments")).serialize(s)
}

/// The result's assembly: its row's, with the answer at the end.
fn answer_last<S: serde::Serializer>(a: &Option<Assembly>, s: S) -> Result<S::Ok, S::Error> {
    taken_last(a.as_ref(), "response").serialize(s)
}

/// A wave's tasks as carried out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Wave {
    /// The wave's number, from 1.
    pub wave: usize,
    pub tasks: Vec<Outcome>,
}

/// Counts over the plan and its tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    /// Sub-tasks planned.
    pub tasks: usize,
    /// Waves planned.
    pub waves: usize,
    /// The most tasks of one wave.
    pub max_parallelism: usize,
    /// The critical path's length, in tasks.
    pub critical_path: usize,
    pub completed: usize,
    pub failed: usize,
    pub skipped: usize,
}

/// A Decompose run's result, rebuilt from its stored rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecomposeResult {
    /// The plan as run; null before one was stored.
    #[serde(serialize_with = "plan_of_row")]
    pub plan: Option<Plan>,
    /// Who carries out which task (round-robin over the workers, wave by wave).
    pub assignments: Vec<Assignment>,
    /// The waves that ran, each with its tasks as carried out.
    pub waves: Vec<Wave>,
    /// The assembled answer; null before it was written.
    #[serde(serialize_with = "answer_last")]
    pub assembly: Option<Assembly>,
    /// Counts over the plan; null without a plan.
    pub stats: Option<Stats>,
    #[serde(flatten)]
    pub failures: Failures,
}

/// `{plan, assignments, waves, assembly, stats, partial, failedModels}` from the stored rows,
/// as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let plan: Option<Plan> = row("plan").and_then(parsed);
    let assignments = plan.as_ref().map(|p| p.assignments.clone()).unwrap_or_default();
    let is_task = |t: &str| t.strip_prefix("task_").is_some_and(|n| n.parse::<u64>().is_ok());
    let outcomes: Vec<Outcome> = rows
        .iter()
        .filter(|r| is_task(&r.stage_type))
        .filter_map(|r| {
            let d: TaskRow = parsed(r)?;
            Some(Outcome {
                task_id: r.stage_type.clone(),
                title: d.title,
                model: r.model.clone().unwrap_or_default(),
                status: d.status,
                output: r.content.clone(),
                word_count: d.word_count,
                response_time_ms: r.response_time_ms,
                error: d.error,
            })
        })
        .collect();
    let planned: &[Vec<String>] = plan.as_ref().map_or(&[], |p| &p.data.execution_waves);
    let waves: Vec<Wave> = planned
        .iter()
        .enumerate()
        .filter_map(|(i, ids)| {
            let tasks: Vec<Outcome> = ids
                .iter()
                .filter_map(|id| outcomes.iter().find(|o| &o.task_id == id).cloned())
                .collect();
            (!tasks.is_empty()).then_some(Wave { wave: i + 1, tasks })
        })
        .collect();
    let count = |s: Status| outcomes.iter().filter(|o| o.status == s).count();
    let stats = plan.as_ref().map(|p| Stats {
        tasks: p.data.tasks.len(),
        waves: planned.len(),
        max_parallelism: p.data.max_parallelism,
        critical_path: p.data.critical_path.len(),
        completed: count(Status::Completed),
        failed: count(Status::Failed),
        skipped: count(Status::Skipped),
    });
    let assembly = row("assembly").and_then(|a| {
        let d: Assembly = parsed(a)?;
        Some(Assembly { response: a.content.clone(), ..d })
    });
    to_json(&DecomposeResult {
        plan,
        assignments,
        waves,
        assembly,
        stats,
        failures: Failures::of(rows),
    })
}

pub(super) fn outcome(result: &Value) -> Option<String> {
    let r: DecomposeResult = typed(result)?;
    let (a, s) = (r.assembly?, r.stats?);
    let mut line = format!(
        "{} of {} sub-tasks in {} wave{}",
        s.completed,
        s.tasks,
        s.waves,
        if s.waves == 1 { "" } else { "s" }
    );
    let missing = s.failed + s.skipped;
    if missing > 0 {
        line.push_str(&format!(" ({missing} missing)"));
    }
    if a.fallback.is_some() {
        line.push_str(", not assembled");
    }
    Some(format!("{line}: {}", short(&a.response, 70)))
}

// ---- the export's report -------------------------------------------------------------------

/// A task's number as the planner gave it (`task_3` → `3`).
fn task_number(id: &str) -> String {
    id.strip_prefix("task_").unwrap_or(id).to_string()
}

/// A sentence with the task ids in it (`task_3`) as a reader writes them (`task 3`).
fn plain_ids(text: &str) -> String {
    regex!(r"\btask_(\d+)\b").replace_all(text, "task $1").into_owned()
}

/// A task's cell of the report's result column: done (and its words), failed or skipped (and
/// why), or not run.
fn what_became_of(o: Option<&Outcome>) -> String {
    let Some(o) = o else { return "not run".into() };
    match (o.status, &o.error) {
        (Status::Completed, _) => {
            format!("done ({})", crate::modes::report::count(o.word_count as u64, "word", "words"))
        }
        (Status::Failed, None) => "failed".into(),
        (Status::Failed, Some(e)) => format!("failed ({e})"),
        (Status::Skipped, None) => "skipped".into(),
        (Status::Skipped, Some(e)) => format!("skipped: {e}"),
    }
}

/// The result as the export's report: the plan (how many sub-tasks, waves, who planned it and
/// whether it was asked again), who assembled the answer, the sub-tasks as a table (depends
/// on, wave, worker, complexity, done or failed and why), the critical path and what was
/// repaired in the plan.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<DecomposeResult>(result) else { return String::new() };
    let mut out = String::new();
    let plan = r.plan.as_ref().map(|p| &p.data);
    let tasks = plan.map_or(&[][..], |p| &p.tasks);
    if let Some(plan) = plan {
        let mut line = format!("**Plan:** {}", count(tasks.len() as u64, "sub-task", "sub-tasks"));
        let waves = plan.execution_waves.len() as u64;
        if waves > 0 {
            line.push_str(&format!(" in {}", count(waves, "wave", "waves")));
        }
        if plan.max_parallelism > 1 {
            line.push_str(&format!(", at most {} at once", plan.max_parallelism));
        }
        line.push_str(&format!("; planned by {}", plan.model));
        if let Some(f) = &plan.fallback_from {
            line.push_str(&format!(" in place of {f}"));
        }
        out.push_str(&format!("{line}.\n\n"));
        if let Some(reask) = plan.reasked {
            let why = match reask {
                Reask::Format => "its first plan could not be read",
                Reask::Cycle => "the dependencies of its first plan formed a cycle",
            };
            let kept =
                if plan.replanned { "its second plan was run" } else { "its first plan was kept" };
            out.push_str(&format!("The planner was asked again because {why}; {kept}.\n\n"));
        }
    }
    if let Some(a) = &r.assembly {
        if a.fallback.is_some() {
            out.push_str(
                "**Not assembled:** the assembler failed, so the answer is the sub-tasks' outputs \
                 in order.\n\n",
            );
        } else if let Some(m) = &a.model {
            match &a.fallback_from {
                Some(f) => out.push_str(&format!("**Assembled by:** {m} (in place of {f}).\n\n")),
                None => out.push_str(&format!("**Assembled by:** {m}.\n\n")),
            }
        }
    }
    let title_of = |id: &str| {
        tasks
            .iter()
            .find(|t| t.id == id)
            .map_or_else(|| format!("task {}", task_number(id)), |t| plain_ids(&t.title))
    };
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            let id = t.id.as_str();
            let ran = r
                .waves
                .iter()
                .find_map(|w| w.tasks.iter().find(|o| o.task_id == id).map(|o| (w.wave, o)));
            let o = ran.map(|(_, o)| o);
            let asg = r.assignments.iter().find(|x| x.task_id == id);
            let deps: Vec<String> = t.dependencies.iter().map(|d| task_number(d)).collect();
            let wave = ran
                .map(|(w, _)| w)
                .or_else(|| asg.map(|x| x.wave))
                .map_or(String::new(), |w| w.to_string());
            let worker = o
                .map(|o| o.model.as_str())
                .filter(|m| !m.is_empty())
                .or_else(|| asg.map(|x| x.model.as_str()))
                .unwrap_or("")
                .to_string();
            vec![
                task_number(id),
                title_of(id),
                deps.join(", "),
                wave,
                worker,
                t.complexity.label().to_lowercase(),
                what_became_of(o),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(
            &["#", "sub-task", "depends on", "wave", "worker", "complexity", "result"],
            &rows,
            &[0, 3],
        ));
        out.push('\n');
    }
    let path: Vec<String> = plan
        .map_or(&[][..], |p| &p.critical_path)
        .iter()
        .map(|id| format!("{} ({})", title_of(id), task_number(id)))
        .collect();
    if !path.is_empty() {
        out.push_str(&format!(
            "**Critical path** ({}): {}.\n\n",
            count(path.len() as u64, "sub-task", "sub-tasks"),
            path.join(" → ")
        ));
    }
    let warnings: Vec<String> = plan
        .map_or(&[][..], |p| &p.warnings)
        .iter()
        .map(|w| format!("- {}", plain_ids(w)))
        .collect();
    if !warnings.is_empty() {
        out.push_str(&format!("**About the plan:**\n\n{}\n", warnings.join("\n")));
    }
    out
}
