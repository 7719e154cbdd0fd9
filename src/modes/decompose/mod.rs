//! Decompose mode (specs/13-decompose.md): a planner splits a complex question into 3-`maxTasks`
//! sub-tasks with dependencies; the server cleans the plan and schedules it (dependency waves,
//! the critical path, round-robin workers); the waves run in sequence, a wave's tasks in
//! parallel, each worker seeing the question, its task and its direct dependencies' outputs;
//! one assembler turns the outputs into one answer, stating the gaps.
//!
//! The plan, each task and the assembly are stored the moment they complete (a task's row at
//! its wave's number, so rows come back wave by wave), so a cancelled or interrupted run keeps
//! (and a resumed one replays) every finished step. The plan is read only where it states a
//! task: a missing title is the task's id, a complexity it does not state is MEDIUM with a
//! warning, a dependency that names no task is left out with a warning; nothing is guessed. A
//! plan whose dependencies form a cycle is never run as written: the planner is asked once
//! more, and failing that every dependency on a later task is dropped (always a DAG). A
//! planner whose route takes structured output is asked for the plan as JSON
//! (`decompose_plan`: ids and dependencies as enums of this run's task ids), read from it when
//! it fits the schema and else from its text, under the same rules; the plan's data says which
//! (`readFrom`).

use super::common::{word_count, Assembled, Fallback};
use super::prelude::*;
use super::reading::{json_values, unmark};
use super::runner::GLOBAL_TIMER;
use super::stated::{last_stated, Labels};
use std::collections::HashMap;

mod machine;
mod prompts;
mod read;
mod result;
mod schedule;
mod sim;

pub use machine::*;
pub use prompts::*;
pub use read::*;
pub use result::*;
pub use schedule::*;
use sim::*;

const PLAN_ORDER: i32 = 0;
/// After every wave (there are at most [`MAX_TASKS`]).
const ASSEMBLY_ORDER: i32 = 99;
/// The key of the planner's second call (a format reminder, or the cycle it must remove).
const REPLAN_KEY: &str = "plan:again";
pub const MIN_TASKS: usize = 3;
pub const MAX_TASKS: usize = 8;
pub const MAX_WORKERS: usize = 5;

/// Decompose's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DecomposeRequest {
    /// Splits the question into sub-tasks with their dependencies (default: the first Council
    /// model).
    pub planner_model: Option<ModelId>,
    /// Carry out the sub-tasks, round-robin through the waves (1 to 5; a model listed twice
    /// takes two turns; default: Council's three).
    #[schemars(length(min = 1, max = 5), extend("x-too-few" = "at least one worker model is required", "x-too-many" = "at most 5 worker models are allowed"))]
    pub worker_models: Option<Vec<ModelId>>,
    /// Assembles the outputs into one answer (default: the planner).
    pub assembler_model: Option<ModelId>,
    /// The most sub-tasks a plan may have: 3 to 8 (6).
    #[schemars(range(min = 3, max = 8))]
    pub max_tasks: Option<i64>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 300000))]
    pub timeout_ms: Option<i64>,
    /// The whole run's time limit in milliseconds (600000): the wave in flight finishes, the
    /// later tasks are skipped and the assembly follows.
    #[schemars(range(min = 60000, max = 1800000))]
    pub global_timeout_ms: Option<i64>,
}

/// The stored configuration of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DecomposeConfig {
    pub planner_model: String,
    pub worker_models: Vec<String>,
    pub assembler_model: String,
    pub max_tasks: usize,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
    /// The server's backup for the planner (`[fallback] facilitator`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facilitator_fallback_model: Option<String>,
    /// The server's backup for the assembler (`[fallback] chairman`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, DecomposeRequest) = request::start(body, "Question is required", false)?;
    let planner_model = SPEC.model_of(cfg.planner_model.as_ref(), "planner", defaults)?;
    let worker_models = SPEC.panel_of(cfg.worker_models.as_deref(), "worker", defaults)?;
    let assembler_model = SPEC
        .named(cfg.assembler_model.as_ref(), "assembler")?
        .unwrap_or_else(|| planner_model.clone());
    let max_tasks = cfg.max_tasks.unwrap_or(6);
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let global_timeout_ms = request::given(cfg.global_timeout_ms, 600_000);
    let models = request::distinct(&[&worker_models], &[&planner_model, &assembler_model]);
    let config = DecomposeConfig {
        facilitator_fallback_model: defaults.backup(SPEC.id, "planner", &planner_model),
        chairman_fallback_model: defaults.backup(SPEC.id, "assembler", &assembler_model),
        planner_model,
        worker_models,
        assembler_model,
        max_tasks: max_tasks as usize,
        timeout_ms,
        global_timeout_ms,
    };
    Ok(asked.valid(SPEC.kind(), &config, models))
}

/// Decompose in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "decompose",
    label: "Decompose",
    description: "A planner splits a complex question into a graph of sub-tasks, workers carry them out wave by wave (independent ones in parallel), and an assembler turns the outputs into one answer.",
    multi_turn: false,
    question: Question {
        label: "The complex question or task",
        required: Some("Question is required"),
    },
    roles: &[
        Role::panel("worker", "Workers (the sub-tasks, in turn)", "workerModels"),
        // The assembler, which writes the result, comes before the planner: `conclave run`'s
        // `--chairman` names the first single-model role with a backup.
        Role::model("assembler", "Assembler (default: the planner)", "assemblerModel").backed_by("chairman"),
        Role::model("planner", "Planner (the sub-task graph)", "plannerModel").backed_by("facilitator"),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<DecomposeRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Decompose::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("plan", "the plan"), ("assignment", "workers assigned"), ("wave", "a wave of sub-tasks"), ("task", "a sub-task"), ("assembly", "assembling the answer")],
    report: Some(report),
    example: || {
        json!({ "mode": "decompose",
                "question": "Plan the launch of a small online bakery: market, menu, pricing, website and a first-month budget.",
                "modeConfig": { "maxTasks": 6 } })
    },
    sim: Some(sim_answer),
    result_schema: schema_of::<DecomposeResult>,
};

#[cfg(test)]
mod tests;
