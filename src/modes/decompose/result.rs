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
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Wave<'a> {
    /// The wave's number, from 1.
    pub wave: usize,
    pub tasks: Vec<&'a Outcome>,
}

/// Counts over the plan and its tasks.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecomposeResult<'a> {
    /// The plan as run; null before one was stored.
    #[serde(serialize_with = "plan_of_row")]
    pub plan: Option<Plan>,
    /// Who carries out which task (round-robin over the workers, wave by wave).
    pub assignments: Vec<Assignment>,
    /// The waves that ran, each with its tasks as carried out.
    pub waves: Vec<Wave<'a>>,
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
            let tasks: Vec<&Outcome> =
                ids.iter().filter_map(|id| outcomes.iter().find(|o| &o.task_id == id)).collect();
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
    let a = result.get("assembly").filter(|a| !a.is_null())?;
    let s = &result["stats"];
    let mut line = format!(
        "{} of {} sub-tasks in {} wave{}",
        s["completed"],
        s["tasks"],
        s["waves"],
        if s["waves"] == 1 { "" } else { "s" }
    );
    let missing = s["failed"].as_u64().unwrap_or(0) + s["skipped"].as_u64().unwrap_or(0);
    if missing > 0 {
        line.push_str(&format!(" ({missing} missing)"));
    }
    if a["fallback"] == "concatenated" {
        line.push_str(", not assembled");
    }
    Some(format!("{line}: {}", short(a["response"].as_str().unwrap_or(""), 70)))
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

/// The result as the export's report: the plan (how many sub-tasks, waves, who planned it and
/// whether it was asked again), who assembled the answer, the sub-tasks as a table (depends
/// on, wave, worker, complexity, done or failed and why), the critical path and what was
/// repaired in the plan.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let mut out = String::new();
    let plan = &result["plan"];
    let tasks = plan["tasks"].as_array().cloned().unwrap_or_default();
    let waves = plan["executionWaves"].as_array().map_or(0, Vec::len) as u64;
    if plan.is_object() {
        let mut line = format!("**Plan:** {}", count(tasks.len() as u64, "sub-task", "sub-tasks"));
        if waves > 0 {
            line.push_str(&format!(" in {}", count(waves, "wave", "waves")));
        }
        if let Some(p) = plan["maxParallelism"].as_u64().filter(|p| *p > 1) {
            line.push_str(&format!(", at most {p} at once"));
        }
        if let Some(m) = plan["model"].as_str() {
            line.push_str(&format!("; planned by {m}"));
            if let Some(f) = plan["fallbackFrom"].as_str() {
                line.push_str(&format!(" in place of {f}"));
            }
        }
        out.push_str(&format!("{line}.\n\n"));
        let why = match plan["reasked"].as_str() {
            Some("format") => Some("its first plan could not be read"),
            Some("cycle") => Some("the dependencies of its first plan formed a cycle"),
            _ => None,
        };
        if let Some(why) = why {
            let kept = if plan["replanned"] == true {
                "its second plan was run"
            } else {
                "its first plan was kept"
            };
            out.push_str(&format!("The planner was asked again because {why}; {kept}.\n\n"));
        }
    }
    let a = &result["assembly"];
    if a.is_object() {
        if a["fallback"] == "concatenated" {
            out.push_str(
                "**Not assembled:** the assembler failed, so the answer is the sub-tasks' outputs \
                 in order.\n\n",
            );
        } else if let Some(m) = a["model"].as_str() {
            match a["fallbackFrom"].as_str() {
                Some(f) => out.push_str(&format!("**Assembled by:** {m} (in place of {f}).\n\n")),
                None => out.push_str(&format!("**Assembled by:** {m}.\n\n")),
            }
        }
    }
    let outcomes: Vec<Value> = result["waves"]
        .as_array()
        .map(|w| {
            w.iter()
                .flat_map(|w| {
                    let n = w["wave"].clone();
                    w["tasks"].as_array().cloned().unwrap_or_default().into_iter().map(move |t| {
                        let mut t = t;
                        t["wave"] = n.clone();
                        t
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let assignments = result["assignments"].as_array().cloned().unwrap_or_default();
    let title_of = |id: &str| {
        tasks
            .iter()
            .find(|t| t["id"] == id)
            .and_then(|t| t["title"].as_str())
            .map_or_else(|| format!("task {}", task_number(id)), plain_ids)
    };
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            let id = t["id"].as_str().unwrap_or("");
            let o = outcomes.iter().find(|o| o["taskId"] == id);
            let asg = assignments.iter().find(|x| x["taskId"] == id);
            let deps: Vec<String> = t["dependencies"]
                .as_array()
                .map(|d| d.iter().filter_map(Value::as_str).map(task_number).collect())
                .unwrap_or_default();
            let wave = o
                .and_then(|o| o["wave"].as_u64())
                .or_else(|| asg.and_then(|x| x["wave"].as_u64()))
                .map_or(String::new(), |w| w.to_string());
            let worker = o
                .and_then(|o| o["model"].as_str())
                .filter(|m| !m.is_empty())
                .or_else(|| asg.and_then(|x| x["model"].as_str()))
                .unwrap_or("")
                .to_string();
            let error = o.and_then(|o| o["error"].as_str());
            let state = match o.and_then(|o| o["status"].as_str()) {
                Some("completed") => match o.and_then(|o| o["wordCount"].as_u64()) {
                    Some(w) => format!("done ({})", count(w, "word", "words")),
                    None => "done".into(),
                },
                Some("failed") => error.map_or("failed".into(), |e| format!("failed ({e})")),
                Some("skipped") => error.map_or("skipped".into(), |e| format!("skipped: {e}")),
                _ => "not run".into(),
            };
            vec![
                task_number(id),
                title_of(id),
                deps.join(", "),
                wave,
                worker,
                t["complexity"].as_str().unwrap_or("").to_lowercase(),
                state,
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
    let path: Vec<String> = plan["criticalPath"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(Value::as_str)
                .map(|id| format!("{} ({})", title_of(id), task_number(id)))
                .collect()
        })
        .unwrap_or_default();
    if !path.is_empty() {
        out.push_str(&format!(
            "**Critical path** ({}): {}.\n\n",
            count(path.len() as u64, "sub-task", "sub-tasks"),
            path.join(" → ")
        ));
    }
    let warnings: Vec<String> = plan["warnings"]
        .as_array()
        .map(|w| {
            w.iter().filter_map(Value::as_str).map(|w| format!("- {}", plain_ids(w))).collect()
        })
        .unwrap_or_default();
    if !warnings.is_empty() {
        out.push_str(&format!("**About the plan:**\n\n{}\n", warnings.join("\n")));
    }
    out
}
