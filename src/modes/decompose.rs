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

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    empty_is_failure, mark_from_rows, role_failed, title_prompt, word_count, Answered, Calls,
    Routed, SplitMix64, TitleTracker, TITLE_KEY,
};
use super::reading::{answer_text, bare, json_values, re, unmark};
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::ModelId;
use super::schema::{self, Asking, ReadFrom, ReplySchema};
use super::stated::{last_stated, Labels};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, FieldError, Mode,
    RunContext, StageRow, ValidRequest,
};

/// Council's default models: the planner (and so the assembler) is the first, the workers all
/// three.
const SIM_DEFAULTS: [&str; 3] = ["sim/alpha", "sim/beta", "sim/gamma"];
const SEED_DEFAULTS: [&str; 3] =
    ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];
const GLOBAL_TIMER: &str = "global";
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
    #[schemars(length(min = 1, max = 5))]
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
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: DecomposeRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let panel = if defaults.offline { SIM_DEFAULTS } else { SEED_DEFAULTS };
    let planner_model = request::model(cfg.planner_model.as_ref(), "modeConfig.plannerModel")?
        .unwrap_or_else(|| panel[0].to_string());
    let worker_models = request::models(
        cfg.worker_models.as_deref(),
        "modeConfig.workerModels",
        1..=MAX_WORKERS,
        Some("at least one worker model is required"),
        Some("at most 5 worker models are allowed"),
    )?
    .unwrap_or_else(|| request::ids(&panel));
    let assembler_model =
        request::model(cfg.assembler_model.as_ref(), "modeConfig.assemblerModel")?
            .unwrap_or_else(|| planner_model.clone());
    let max_tasks = request::whole(
        cfg.max_tasks,
        "modeConfig.maxTasks",
        MIN_TASKS as i64..=MAX_TASKS as i64,
        6,
    )?;
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        "modeConfig.timeoutMs",
        10_000..=300_000,
        defaults.stage_timeout_ms,
    )?;
    let global_timeout_ms = request::timeout(
        cfg.global_timeout_ms,
        "modeConfig.globalTimeoutMs",
        60_000..=1_800_000,
        600_000,
    )?;
    let models = request::distinct(&[&worker_models], &[&planner_model, &assembler_model]);
    let config = DecomposeConfig {
        facilitator_fallback_model: Fallbacks::for_role(
            &defaults.fallback.facilitator,
            &planner_model,
        ),
        chairman_fallback_model: Fallbacks::for_role(&defaults.fallback.chairman, &assembler_model),
        planner_model,
        worker_models,
        assembler_model,
        max_tasks: max_tasks as usize,
        timeout_ms,
        global_timeout_ms,
    };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models,
    })
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
        Role {
            id: "worker",
            label: "Workers (the sub-tasks, in turn)",
            field: Some("workerModels"),
            panel: true,
            fallback: None,
            sim_default: &SIM_DEFAULTS,
            default: &SEED_DEFAULTS,
        },
        // The assembler, which writes the result, comes before the planner: `conclave run`'s
        // `--chairman` names the first single-model role with a backup.
        Role {
            id: "assembler",
            label: "Assembler (default: the planner)",
            field: Some("assemblerModel"),
            panel: false,
            fallback: Some("chairman"),
            sim_default: &[],
            default: &[],
        },
        Role {
            id: "planner",
            label: "Planner (the sub-task graph)",
            field: Some("plannerModel"),
            panel: false,
            fallback: Some("facilitator"),
            sim_default: &[SIM_DEFAULTS[0]],
            default: &[SEED_DEFAULTS[0]],
        },
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
};

// ---- reading the plan ----------------------------------------------------------------------

/// How much work a task is, as the planner states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Complexity {
    Low,
    Medium,
    High,
}

impl Complexity {
    fn word(w: &str) -> Option<Complexity> {
        match w.to_ascii_uppercase().as_str() {
            "LOW" => Some(Complexity::Low),
            "MEDIUM" => Some(Complexity::Medium),
            "HIGH" => Some(Complexity::High),
            _ => None,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Complexity::Low => "LOW",
            Complexity::Medium => "MEDIUM",
            Complexity::High => "HIGH",
        }
    }
}

/// One sub-task of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// `task_<n>`, as the planner numbered it.
    pub id: String,
    pub title: String,
    pub description: String,
    /// Ids of the tasks whose outputs this one needs, in the order stated.
    pub dependencies: Vec<String>,
    pub complexity: Complexity,
    /// Lower-cased (`technical`, `creative`…); shown, not used for routing.
    pub expertise: String,
}

/// A plan as read and cleaned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlanReading {
    pub tasks: Vec<Task>,
    /// What was repaired or assumed, for a person.
    pub warnings: Vec<String>,
}

/// `task_3`, `task 3`, `Task-3`, `#3` or `3` (marks and brackets around it allowed) as
/// `task_3`; None for anything else.
pub fn task_id(token: &str) -> Option<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let t = unmark(token);
    let t = t.trim_matches(|c: char| matches!(c, '(' | ')' | '[' | ']' | '.' | ',' | ';' | ':'));
    let c = re(&RE, r"(?i)^(?:tasks?[\s_\-]*#?\s*|#\s*)?(\d{1,6})$").captures(t.trim())?;
    Some(format!("task_{}", c[1].parse::<u64>().ok()?))
}

/// `TASK <id>` opening a task (optional `:`, or a dash, then maybe its title): the id and the
/// rest of the line. `Task 3 depends on task 1` is prose, not a heading.
fn task_heading(line: &str) -> Option<(String, String)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(
        &RE,
        r"(?i)^task[\s_\-]*(?:task[\s_\-]*)?#?\s*(\d{1,6})\b\s*(?:\*\*|__)?\s*(?:[:.\-–—]\s*(?:\*\*|__)?\s*(.*))?$",
    )
    .captures(line)?;
    let id = format!("task_{}", c[1].parse::<u64>().ok()?);
    Some((id, c.get(2).map_or(String::new(), |m| stated(m.as_str()))))
}

fn is_summary(line: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(&RE, r"(?i)^execution\s+summary\b").is_match(line)
}

/// `Title:`, `Description:`… at the start of a bare line: the field and the value after it.
fn field(line: &str) -> Option<(Field, &str)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(
        &RE,
        r"(?i)^(title|description|dependencies|dependency|depends\s+on|complexity|expertise)\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?",
    )
    .captures(line)?;
    let name = c.get(1)?.as_str().to_lowercase();
    let f = match name.as_str() {
        "title" => Field::Title,
        "description" => Field::Description,
        "complexity" => Field::Complexity,
        "expertise" => Field::Expertise,
        _ => Field::Dependencies,
    };
    Some((f, &line[c.get(0)?.end()..]))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Title,
    Description,
    Dependencies,
    Complexity,
    Expertise,
}

/// A value as stated: marks removed, and empty when it only echoes a placeholder of the
/// requested format (`<short title>`).
fn stated(value: &str) -> String {
    let v = unmark(value);
    if v.starts_with('<') && v.ends_with('>') && v.matches('<').count() == 1 {
        String::new()
    } else {
        v
    }
}

/// A task's fields as written, before cleaning.
#[derive(Debug, Default)]
struct Draft {
    id: String,
    heading_title: String,
    title: Option<String>,
    description: Option<String>,
    dependencies: Option<String>,
    complexity: Option<String>,
    expertise: Option<String>,
}

/// Every id a dependency value refers to, in order, once each; None when the value names
/// none although it says something other than "none".
pub fn dependency_ids(value: &str) -> Option<Vec<String>> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let v = unmark(value);
    let mut ids: Vec<String> = Vec::new();
    for c in re(&RE, r"(?i)(?:\btasks?[\s_\-]*#?\s*|#\s*|\b)(\d{1,6})\b").captures_iter(&v) {
        if let Ok(n) = c[1].parse::<u64>() {
            let id = format!("task_{n}");
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    if !ids.is_empty() {
        return Some(ids);
    }
    let plain = v.trim().trim_end_matches('.').trim().to_lowercase();
    let none = plain.is_empty()
        || ["-", "–", "—", "n/a", "na", "none", "nil", "no", "null", "[]"]
            .contains(&plain.as_str())
        || plain.starts_with("none")
        || plain.starts_with("no dependenc");
    none.then(Vec::new)
}

/// Reads a plan (its answer part: a reasoning trace is never read), keeps at most
/// `max_tasks` tasks and cleans the dependencies. A reply with no `TASK` heading is read as a
/// JSON plan when it holds one.
pub fn read_plan(reply: &str, max_tasks: usize) -> PlanReading {
    let text = answer_text(reply);
    let mut drafts = read_headed(&text);
    if drafts.is_empty() {
        drafts = read_json(&text);
    }
    clean(drafts, max_tasks)
}

fn read_headed(text: &str) -> Vec<Draft> {
    let mut drafts: Vec<Draft> = Vec::new();
    let mut open = false;
    // The field whose value continues on the next lines: Description always, another field
    // when its label line had no value (a list of dependencies under `Dependencies:`).
    let mut spanning: Option<Field> = None;
    for raw in text.lines() {
        let line = bare(raw);
        // `- task 1` in a list under `Dependencies:` names a dependency, not a new task.
        let listed = spanning == Some(Field::Dependencies)
            && raw.trim_start().starts_with(['-', '*', '+', '•'])
            && field(line).is_none();
        if let Some((id, rest)) = task_heading(line).filter(|_| !listed) {
            drafts.push(Draft { id, heading_title: rest, ..Draft::default() });
            (open, spanning) = (true, None);
            continue;
        }
        if is_summary(line) {
            // The summary ends the tasks; one written before them ends nothing.
            if !drafts.is_empty() {
                break;
            }
            continue;
        }
        let Some(d) = drafts.last_mut().filter(|_| open) else { continue };
        if let Some((f, value)) = field(line) {
            let value = stated(value);
            let slot = match f {
                Field::Title => &mut d.title,
                Field::Description => &mut d.description,
                Field::Dependencies => &mut d.dependencies,
                Field::Complexity => &mut d.complexity,
                Field::Expertise => &mut d.expertise,
            };
            spanning = None;
            if slot.is_none() {
                if f == Field::Description || value.is_empty() {
                    spanning = Some(f);
                }
                *slot = Some(value);
            }
            continue;
        }
        if raw.trim().is_empty() {
            if spanning != Some(Field::Description) {
                spanning = None;
            }
            continue;
        }
        let slot = match spanning {
            Some(Field::Description) => d.description.as_mut(),
            Some(Field::Dependencies) => d.dependencies.as_mut(),
            Some(Field::Title) => d.title.as_mut(),
            Some(Field::Expertise) => d.expertise.as_mut(),
            Some(Field::Complexity) => d.complexity.as_mut(),
            None => None,
        };
        if let Some(v) = slot {
            let sep = if spanning == Some(Field::Description) { "\n" } else { ", " };
            if !v.is_empty() {
                v.push_str(sep);
            }
            v.push_str(&stated(line));
            if spanning != Some(Field::Description) && spanning != Some(Field::Dependencies) {
                spanning = None;
            }
        }
    }
    drafts
}

/// A plan written as JSON (`{"tasks": [{"id": "task_1", "title": …, "dependencies": […]}]}`
/// or the list alone): the last one in the reply.
fn read_json(text: &str) -> Vec<Draft> {
    let list = json_values(text).into_iter().rev().find_map(|v| match v {
        Value::Array(a) => Some(a),
        Value::Object(o) => o
            .iter()
            .find(|(k, v)| {
                ["tasks", "subtasks", "sub_tasks", "plan"].contains(&k.to_lowercase().as_str())
                    && v.is_array()
            })
            .and_then(|(_, v)| v.as_array().cloned()),
        _ => None,
    });
    let text_of = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|x| match x {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", "),
        ),
        _ => None,
    };
    list.unwrap_or_default()
        .iter()
        .filter_map(|item| {
            let o = item.as_object()?;
            let get = |names: &[&str]| {
                o.iter().find(|(k, _)| names.contains(&k.to_lowercase().as_str())).map(|(_, v)| v)
            };
            let id = task_id(&text_of(get(&["id", "task", "taskid", "task_id"]))?)?;
            Some(Draft {
                id,
                heading_title: String::new(),
                title: text_of(get(&["title", "name"])),
                description: text_of(get(&["description"])),
                dependencies: text_of(get(&["dependencies", "depends_on", "dependson"]))
                    .or(Some(String::new())),
                complexity: text_of(get(&["complexity"])).map(|c| format!("Complexity: {c}")),
                expertise: text_of(get(&["expertise"])),
            })
        })
        .collect()
}

fn complexity_labels() -> &'static Labels {
    static L: OnceLock<Labels> = OnceLock::new();
    L.get_or_init(|| Labels::new("complexity"))
}

fn clean(drafts: Vec<Draft>, max_tasks: usize) -> PlanReading {
    let mut warnings = Vec::new();
    let mut kept: Vec<Draft> = Vec::new();
    for d in drafts {
        if kept.iter().any(|k| k.id == d.id) {
            warnings.push(format!("{} appears twice in the plan: its first task is kept.", d.id));
        } else {
            kept.push(d);
        }
    }
    if kept.len() > max_tasks {
        let dropped: Vec<String> = kept.drain(max_tasks..).map(|d| d.id).collect();
        warnings.push(format!(
            "The plan has more than {max_tasks} tasks: {} dropped.",
            dropped.join(", ")
        ));
    }
    let ids: Vec<String> = kept.iter().map(|d| d.id.clone()).collect();
    let mut defaulted = Vec::new();
    let mut tasks = Vec::new();
    for d in kept {
        let mut deps = Vec::new();
        let value = d.dependencies.clone().unwrap_or_default();
        match dependency_ids(&value) {
            Some(found) => {
                for dep in found {
                    if dep == d.id {
                        warnings.push(format!("{} depended on itself: removed.", d.id));
                    } else if !ids.contains(&dep) {
                        warnings.push(format!(
                            "{} depended on {dep}, which is not in the plan: removed.",
                            d.id
                        ));
                    } else {
                        deps.push(dep);
                    }
                }
            }
            None => warnings.push(format!(
                "{}'s dependencies (\"{}\") name no task: it has none.",
                d.id,
                value.chars().take(80).collect::<String>()
            )),
        }
        let complexity = d
            .complexity
            .as_deref()
            .map(|v| {
                // The field as read, its label restored: the value is read as a stated choice.
                let line = if v.to_lowercase().starts_with("complexity") {
                    v.to_string()
                } else {
                    format!("Complexity: {v}")
                };
                last_stated(&line, complexity_labels(), Complexity::word).map(|s| s.value)
            })
            .unwrap_or(None);
        if complexity.is_none() {
            defaulted.push(d.id.clone());
        }
        let title = d
            .title
            .filter(|t| !t.is_empty())
            .or_else(|| Some(d.heading_title.clone()).filter(|t| !t.is_empty()))
            .unwrap_or_else(|| d.id.clone());
        let expertise = d
            .expertise
            .map(|e| e.trim().trim_end_matches('.').trim().to_lowercase())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "general".into());
        tasks.push(Task {
            id: d.id,
            title,
            description: d.description.unwrap_or_default().trim().to_string(),
            dependencies: deps,
            complexity: complexity.unwrap_or(Complexity::Medium),
            expertise,
        });
    }
    if !defaulted.is_empty() {
        warnings.push(format!(
            "No complexity LOW, MEDIUM or HIGH is stated for {}: MEDIUM is used.",
            defaulted.join(", ")
        ));
    }
    if (1..MIN_TASKS).contains(&tasks.len()) {
        warnings.push(format!(
            "The plan has only {} task{}, fewer than the {MIN_TASKS} asked for.",
            tasks.len(),
            if tasks.len() == 1 { "" } else { "s" }
        ));
    }
    PlanReading { tasks, warnings }
}

// ---- structured replies --------------------------------------------------------------------
//
// A planner whose route takes structured output is asked for `decompose_plan` instead of the
// `TASK` blocks: its reasoning first, then 1 to `maxTasks` tasks (the prompt asks for 3 or
// more; the reader goes on with fewer, with a warning), each with its id and its dependencies
// as enums of this run's ids (`task_1`..`task_<maxTasks>`), a title, a description, one of the
// three complexities and an expertise tag. The plan is read from its JSON when that fits the
// schema, then cleaned exactly as a text plan is: a repeated id keeps its first task, a
// dependency on itself or on an id the plan does not hold is removed, each dependency is kept
// once, an echoed placeholder states nothing, and a cycle is re-asked about. Else the text
// reader reads it. Task outputs and the assembly are text a person reads and carry no schema.

/// The plan's schema name (the sim answers it by this name).
pub const PLAN_SCHEMA: &str = "decompose_plan";
/// The longest task title, description and expertise tag.
pub const TITLE_MAX_CHARS: usize = 120;
pub const DESCRIPTION_MAX_CHARS: usize = 600;
pub const EXPERTISE_MAX_CHARS: usize = 40;
/// The complexities a task may state, as the JSON names them.
pub const COMPLEXITIES: [&str; 3] = ["LOW", "MEDIUM", "HIGH"];

/// The ids a plan of at most `max_tasks` tasks may use: `task_1`..`task_<max_tasks>`.
pub fn plan_ids(max_tasks: usize) -> Vec<String> {
    (1..=max_tasks).map(|n| format!("task_{n}")).collect()
}

/// The planner's plan as JSON for a run of at most `max_tasks` tasks: the reasoning, then the
/// tasks.
pub fn plan_schema(max_tasks: usize) -> Arc<ReplySchema> {
    let max_tasks = max_tasks.max(1);
    let ids = plan_ids(max_tasks);
    let task = schema::object([
        (
            "id",
            schema::described(
                schema::one_of(&ids),
                "the task's id: task_1 for the first task, task_2 for the second, and so on",
            ),
        ),
        ("title", schema::described(schema::text(TITLE_MAX_CHARS), "a short title")),
        (
            "description",
            schema::described(
                schema::text(DESCRIPTION_MAX_CHARS),
                "2-3 sentences on what this task must produce",
            ),
        ),
        (
            "dependencies",
            schema::described(
                schema::list(schema::one_of(&ids), 0, max_tasks - 1),
                "the ids of the tasks whose output this one needs (an empty list when it needs \
                 none)",
            ),
        ),
        ("complexity", schema::described(schema::one_of(&COMPLEXITIES), "how much work it is")),
        (
            "expertise",
            schema::described(
                schema::text(EXPERTISE_MAX_CHARS),
                "one tag, e.g. technical, creative, analytical, general",
            ),
        ),
    ]);
    ReplySchema::new(
        PLAN_SCHEMA,
        schema::reasoned([(
            "tasks",
            schema::described(
                schema::list(task, 1, max_tasks),
                &format!("3 to {max_tasks} sub-tasks in order, the first ones depending on none"),
            ),
        )]),
    )
}

/// The tasks of JSON that fits [`plan_schema`], as drafts for [`clean`] (the text's rules).
fn drafts_from_json(v: &Value) -> Option<Vec<Draft>> {
    let items = v.get("tasks")?.as_array()?;
    items
        .iter()
        .map(|t| {
            let field = |k: &str| t.get(k).and_then(Value::as_str).map(stated);
            let deps: Vec<&str> =
                t.get("dependencies")?.as_array()?.iter().filter_map(Value::as_str).collect();
            Some(Draft {
                id: task_id(t.get("id")?.as_str()?)?,
                heading_title: String::new(),
                title: field("title"),
                description: field("description"),
                dependencies: Some(deps.join(", ")),
                complexity: field("complexity"),
                expertise: field("expertise"),
            })
        })
        .collect()
}

/// Reads a planner's reply: from its JSON when it fits `schema`, cleaned as a text plan is,
/// else by its text ([`read_plan`]). Says where it was read from; None when no task was read.
pub fn read_plan_reply(
    reply: &str,
    max_tasks: usize,
    schema: &ReplySchema,
) -> (PlanReading, Option<ReadFrom>) {
    if let Some(drafts) = schema.read(reply).and_then(|v| drafts_from_json(&v)) {
        let reading = clean(drafts, max_tasks);
        if !reading.tasks.is_empty() {
            return (reading, Some(ReadFrom::Json));
        }
    }
    let reading = read_plan(reply, max_tasks);
    let from = (!reading.tasks.is_empty()).then_some(ReadFrom::Text);
    (reading, from)
}

// ---- scheduling (pure) ---------------------------------------------------------------------

/// Kahn's waves, by index into `tasks`: wave k holds, in plan order, every task not yet
/// scheduled whose dependencies are all in earlier waves. The second list holds the tasks
/// that could not be scheduled (on or behind a cycle). A dependency on an id not in the plan
/// is ignored (a cleaned plan has none).
pub fn waves_of(tasks: &[Task]) -> (Vec<Vec<usize>>, Vec<usize>) {
    let index: HashMap<&str, usize> =
        tasks.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
    let mut wave_of: Vec<Option<usize>> = vec![None; tasks.len()];
    let mut waves: Vec<Vec<usize>> = Vec::new();
    loop {
        let k = waves.len();
        let ready: Vec<usize> = (0..tasks.len())
            .filter(|&i| wave_of[i].is_none())
            .filter(|&i| {
                tasks[i].dependencies.iter().all(|d| match index.get(d.as_str()) {
                    Some(&j) => wave_of[j].is_some_and(|w| w < k),
                    None => true,
                })
            })
            .collect();
        if ready.is_empty() {
            break;
        }
        for &i in &ready {
            wave_of[i] = Some(k);
        }
        waves.push(ready);
    }
    let left = (0..tasks.len()).filter(|&i| wave_of[i].is_none()).collect();
    (waves, left)
}

/// One dependency the cycle repair dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dropped {
    pub task_id: String,
    pub dependency: String,
}

/// The plan with every dependency on a task later in plan order dropped: edges then only
/// point backwards, so the graph is acyclic whatever it was.
pub fn drop_forward(tasks: &[Task]) -> (Vec<Task>, Vec<Dropped>) {
    let pos: HashMap<&str, usize> =
        tasks.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
    let mut dropped = Vec::new();
    let fixed = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut t = t.clone();
            t.dependencies.retain(|d| {
                let keep = pos.get(d.as_str()).is_none_or(|&j| j < i);
                if !keep {
                    dropped.push(Dropped { task_id: t.id.clone(), dependency: d.clone() });
                }
                keep
            });
            t
        })
        .collect();
    (fixed, dropped)
}

/// The longest chain of dependencies (in tasks), by index: computed in wave order, a task's
/// path is the longest of its dependencies' (tie: the earliest in plan order) plus itself; the
/// longest overall wins (tie: the earliest end task in plan order).
pub fn critical_path(tasks: &[Task], waves: &[Vec<usize>]) -> Vec<usize> {
    let index: HashMap<&str, usize> =
        tasks.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
    let mut path: Vec<Vec<usize>> = vec![Vec::new(); tasks.len()];
    for wave in waves {
        for &i in wave {
            let mut deps: Vec<usize> = tasks[i]
                .dependencies
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect();
            deps.sort_unstable();
            let mut best: Option<usize> = None;
            for j in deps {
                if best.is_none_or(|b| path[j].len() > path[b].len()) {
                    best = Some(j);
                }
            }
            let mut p = best.map(|b| path[b].clone()).unwrap_or_default();
            p.push(i);
            path[i] = p;
        }
    }
    let mut best: Option<usize> = None;
    for i in 0..tasks.len() {
        if best.is_none_or(|b| path[i].len() > path[b].len()) {
            best = Some(i);
        }
    }
    best.map(|b| path[b].clone()).unwrap_or_default()
}

/// Who carries out which task: round-robin over the workers through the waves in order, plan
/// order within a wave, the counter carrying across waves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    pub task_id: String,
    pub model: String,
    pub wave: usize,
}

pub fn assign(tasks: &[Task], waves: &[Vec<usize>], workers: &[String]) -> Vec<Assignment> {
    let mut out = Vec::new();
    if workers.is_empty() {
        return out;
    }
    for (w, wave) in waves.iter().enumerate() {
        for &i in wave {
            out.push(Assignment {
                task_id: tasks[i].id.clone(),
                model: workers[out.len() % workers.len()].clone(),
                wave: w + 1,
            });
        }
    }
    out
}

/// A plan as the server runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub tasks: Vec<Task>,
    /// Ids by wave (wave 1 first).
    pub waves: Vec<Vec<String>>,
    pub critical_path: Vec<String>,
    pub max_parallelism: usize,
    pub dropped: Vec<Dropped>,
}

/// The schedule of a plan; with a cycle, the plan is repaired first when `repair`, else None.
pub fn schedule(tasks: &[Task], repair: bool) -> Option<Schedule> {
    let (waves, left) = waves_of(tasks);
    let (tasks, waves, dropped) = if left.is_empty() {
        (tasks.to_vec(), waves, Vec::new())
    } else if repair {
        let (fixed, dropped) = drop_forward(tasks);
        let (waves, _) = waves_of(&fixed);
        (fixed, waves, dropped)
    } else {
        return None;
    };
    let path = critical_path(&tasks, &waves);
    let ids = |list: &[usize]| list.iter().map(|&i| tasks[i].id.clone()).collect::<Vec<_>>();
    Some(Schedule {
        waves: waves.iter().map(|w| ids(w)).collect(),
        critical_path: ids(&path),
        max_parallelism: waves.iter().map(Vec::len).max().unwrap_or(0),
        dropped,
        tasks,
    })
}

/// The ids of a plan's tasks that cannot be scheduled (on or behind a cycle).
pub fn unschedulable(tasks: &[Task]) -> Vec<String> {
    waves_of(tasks).1.into_iter().map(|i| tasks[i].id.clone()).collect()
}

// ---- prompts -------------------------------------------------------------------------------

pub const PLAN_HEAD: &str = "You are the planner of a task decomposition.";
pub const REMINDER_HEAD: &str = "Your plan could not be read: it has no task in the format asked.";
pub const CYCLE_HEAD: &str = "Your plan cannot be scheduled: its dependencies form a cycle.";
pub const TASK_HEAD: &str = "You are one of the workers of a task decomposition.";
pub const ASSEMBLY_HEAD: &str = "You are the assembler of a task decomposition.";
pub const QUESTION_START: &str = "=== QUESTION ===";
pub const QUESTION_END: &str = "=== END OF QUESTION ===";
pub const OUTPUTS_START: &str = "=== OUTPUTS ===";
pub const OUTPUTS_END: &str = "=== END OF OUTPUTS ===";
const MISSING_HEAD: &str = "Tasks without an output:";

fn question_block(question: &str) -> String {
    format!("{QUESTION_START}\n{question}\n{QUESTION_END}")
}

/// The plan's format: the spec's `TASK task_<n>:` blocks, or, given the plan's schema, its
/// JSON.
fn plan_format_as(schema: Option<&ReplySchema>) -> String {
    match schema {
        Some(s) => s.instruction(),
        None => plan_format().to_string(),
    }
}

fn plan_format() -> &'static str {
    "Reply with every task in exactly this format:\n\n\
     TASK task_1:\n\
     Title: <short title>\n\
     Description: <2-3 sentences on what this task must produce>\n\
     Dependencies: none\n\
     Complexity: LOW|MEDIUM|HIGH\n\
     Expertise: <one tag, e.g. technical, creative, analytical, general>\n\n\
     TASK task_2:\n\
     Title: <short title>\n\
     Description: <…>\n\
     Dependencies: task_1\n\
     Complexity: LOW|MEDIUM|HIGH\n\
     Expertise: <tag>\n\n\
     …and so on. `Dependencies` lists the ids of the tasks whose output this one needs, or \
     `none`. You may end with an EXECUTION SUMMARY:, but it is not used."
}

pub fn plan_prompt(question: &str, max_tasks: usize) -> String {
    plan_prompt_as(question, max_tasks, None)
}

/// The planner's prompt ending in the spec's format, or, given the plan's schema, in its JSON
/// (the same rules otherwise).
pub fn plan_prompt_as(question: &str, max_tasks: usize, schema: Option<&ReplySchema>) -> String {
    format!(
        "{PLAN_HEAD} Split the question or task below into sub-tasks. Other models will carry \
         them out, and their outputs will be assembled into one answer.\n\n{q}\n\n\
         Rules:\n\
         - Split it into 3 to {max_tasks} sub-tasks.\n\
         - Make sub-tasks independent where possible, so that they can run in parallel; a \
         sub-task depends on another only when it needs that one's output.\n\
         - No circular dependencies.\n\
         - Each output must be self-contained: a worker sees only the question, its own task \
         and the outputs of the tasks it depends on.\n\
         - The first tasks have no dependencies.\n\n{format}",
        q = question_block(question),
        format = plan_format_as(schema),
    )
}

/// The planner asked once more when no task could be read.
pub fn reminder_prompt(max_tasks: usize) -> String {
    reminder_prompt_as(max_tasks, None)
}

/// [`reminder_prompt`], or, given the plan's schema, asking for its JSON.
pub fn reminder_prompt_as(max_tasks: usize, schema: Option<&ReplySchema>) -> String {
    let how = match schema {
        Some(_) => "as the single JSON object described below",
        None => "each starting with a line `TASK task_<n>:`",
    };
    format!(
        "{REMINDER_HEAD} Give the plan again: 3 to {max_tasks} sub-tasks, {how}.\n\n{}",
        plan_format_as(schema)
    )
}

/// The planner asked once more when its dependencies form a cycle.
pub fn cycle_prompt(unscheduled: &[String], max_tasks: usize) -> String {
    cycle_prompt_as(unscheduled, max_tasks, None)
}

/// [`cycle_prompt`], or, given the plan's schema, asking for its JSON.
pub fn cycle_prompt_as(
    unscheduled: &[String],
    max_tasks: usize,
    schema: Option<&ReplySchema>,
) -> String {
    format!(
        "{CYCLE_HEAD} These tasks could not be scheduled, because each waits (directly or \
         not) for another of them: {}.\n\nGive the whole plan again, 3 to {max_tasks} \
         sub-tasks, with no circular dependencies: a task may depend only on tasks that do not \
         depend on it.\n\n{}",
        unscheduled.join(", "),
        plan_format_as(schema)
    )
}

/// A direct dependency of a task, as its worker is told about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Given {
    pub id: String,
    pub title: String,
    /// None: the task failed.
    pub output: Option<String>,
}

pub fn task_prompt(question: &str, task: &Task, given: &[Given]) -> String {
    let mut deps = String::new();
    for g in given {
        match &g.output {
            Some(o) => deps.push_str(&format!(
                "=== OUTPUT OF {}: {} ===\n{o}\n=== END OF OUTPUT OF {} ===\n\n",
                g.id, g.title, g.id
            )),
            None => deps.push_str(&format!(
                "=== {}: {} FAILED ===\nThis task failed and produced no output. Work around \
                 the gap, and say briefly what is missing because of it.\n\n",
                g.id, g.title
            )),
        }
    }
    let deps = if deps.is_empty() {
        "Your sub-task depends on no other.\n\n".to_string()
    } else {
        format!("The outputs of the sub-tasks yours depends on:\n\n{deps}")
    };
    format!(
        "{TASK_HEAD} Other workers carry out the other sub-tasks of the question below.\n\n\
         {q}\n\n\
         Your sub-task: {id}: {title}\n{description}\n\n{deps}\
         Carry out this sub-task only, not the whole question. Make the output \
         self-contained: it will be read without the other sub-tasks' outputs beside it. \
         Reply with the output only.",
        q = question_block(question),
        id = task.id,
        title = task.title,
        description =
            if task.description.is_empty() { "(no description)" } else { &task.description },
    )
}

/// One task's output, as the assembler receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Produced {
    pub id: String,
    pub title: String,
    pub model: String,
    pub output: String,
}

/// A task without an output and why (`failed: …`, `skipped: …`).
#[derive(Debug, Clone, PartialEq)]
pub struct Missing {
    pub id: String,
    pub title: String,
    pub reason: String,
}

pub fn assembly_prompt(
    question: &str,
    tasks: &[Task],
    produced: &[Produced],
    missing: &[Missing],
) -> String {
    let plan: String = tasks
        .iter()
        .map(|t| {
            format!(
                "- {}: {} (complexity {}; depends on: {})\n",
                t.id,
                t.title,
                t.complexity.label(),
                if t.dependencies.is_empty() { "none".into() } else { t.dependencies.join(", ") }
            )
        })
        .collect();
    let outputs: String = produced
        .iter()
        .map(|p| {
            format!(
                "--- {}: {} (by {}) ---\n{}\n--- end of {} ---\n",
                p.id, p.title, p.model, p.output, p.id
            )
        })
        .collect();
    let missing = if missing.is_empty() {
        "None: every task produced its output.".to_string()
    } else {
        missing
            .iter()
            .map(|m| format!("- {}: {}: {}", m.id, m.title, m.reason))
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "{ASSEMBLY_HEAD} The question below was split into sub-tasks, carried out by several \
         workers; write the one answer the person asked for from their outputs.\n\n{q}\n\n\
         The plan:\n{plan}\n{OUTPUTS_START}\n{outputs}{OUTPUTS_END}\n\n\
         {MISSING_HEAD}\n{missing}\n\n\
         Write one coherent answer:\n\
         - An introduction, then the substance, then a conclusion.\n\
         - Transitions between the parts; no repetition; the same terms throughout.\n\
         - Where a task produced no output, say plainly what is missing; do not invent it.\n\
         - Do not mention the tasks, the workers or this process.\n\n\
         Reply with the answer only.",
        q = question_block(question),
    )
}

// ---- the state machine ---------------------------------------------------------------------

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Completed,
    Failed,
    Skipped,
}

/// A task as carried out: `task_complete`'s data, and an entry of the result's waves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub task_id: String,
    pub title: String,
    pub model: String,
    pub status: Status,
    /// "" when it failed or was skipped.
    pub output: String,
    pub word_count: usize,
    pub response_time_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Planning,
    /// The planner was asked once more (the reason is kept in `reasked`).
    Replanning,
    Running,
    Assembling,
    Done,
}

/// Why the planner was asked again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reask {
    Format,
    Cycle,
}

impl Reask {
    fn name(self) -> &'static str {
        match self {
            Reask::Format => "format",
            Reask::Cycle => "cycle",
        }
    }
}

/// The planner's first answer, kept while it is asked again.
#[derive(Debug, Clone)]
struct FirstPlan {
    reply: String,
    reading: PlanReading,
    /// Where its tasks were read from (None: none could be read).
    read_from: Option<ReadFrom>,
    model: String,
    response_time_ms: u64,
    fallback_from: Option<String>,
    reason: Reask,
}

pub struct Decompose {
    config: DecomposeConfig,
    ctx: RunContext,
    phase: Phase,
    first: Option<FirstPlan>,
    schedule: Option<Schedule>,
    assignments: Vec<Assignment>,
    /// The wave running (1-based; 0 before the first).
    wave: usize,
    /// Every task that ended, in the order it ended.
    outcomes: Vec<Outcome>,
    deadline_passed: bool,
    /// The plan's reply schema (built once for the run, from its `maxTasks`).
    plan: Arc<ReplySchema>,
    title: TitleTracker,
    calls: Calls,
}

impl Decompose {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: DecomposeConfig = stored_config("decompose", config)?;
        if !(1..=MAX_WORKERS).contains(&config.worker_models.len()) {
            return Err("the stored decompose configuration has no 1 to 5 workers".into());
        }
        if !(MIN_TASKS..=MAX_TASKS).contains(&config.max_tasks) {
            return Err("the stored decompose configuration has no maxTasks from 3 to 8".into());
        }
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        let plan = plan_schema(config.max_tasks);
        Ok(Decompose {
            plan,
            config,
            ctx,
            phase: Phase::Planning,
            first: None,
            schedule: None,
            assignments: Vec::new(),
            wave: 0,
            outcomes: Vec::new(),
            deadline_passed: false,
            title,
            calls: Calls::default(),
        })
    }

    /// A call of this run; every prompt quotes the question, named for fitting a small context.
    fn call(&self, key: &str, model: &str, messages: Vec<ChatMessage>, stage: &str) -> CallSpec {
        let role = match stage {
            "plan" => "planner",
            "assembly" => "assembler",
            _ => "worker",
        };
        CallSpec::new(key, model, messages, stage, role, self.config.timeout_ms)
            .quoting([self.question()])
    }

    /// The question as quoted material of a prompt (see [`CallSpec::quoting`]).
    fn question(&self) -> (String, String) {
        ("the question".to_string(), self.ctx.question.clone())
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.title.fail(message)
    }

    /// The plan's schema when the planner is asked for its JSON (its route takes structured
    /// output). A backup, and the planner asked again, are asked as the planner was.
    fn plan_json(&self) -> Option<&ReplySchema> {
        self.ctx.structured.json(&self.config.planner_model).then_some(self.plan.as_ref())
    }

    /// The planner's reply (or its backup's).
    fn on_plan(&mut self, routed: Routed) -> Vec<Effect> {
        let reply = &routed.reply;
        let text = match &reply.result {
            Ok(t) => t.clone(),
            Err(e) => return self.fail(role_failed("planner", &routed, e)),
        };
        let (reading, read_from) = read_plan_reply(&text, self.config.max_tasks, &self.plan);
        let reason = if reading.tasks.is_empty() {
            Some(Reask::Format)
        } else if !unschedulable(&reading.tasks).is_empty() {
            Some(Reask::Cycle)
        } else {
            None
        };
        let Some(reason) = reason else {
            return self.accept(PlanUse {
                reply: text,
                reading,
                read_from,
                model: reply.model.clone(),
                response_time_ms: reply.response_time_ms,
                fallback_from: routed.fallback_from.clone(),
                first: None,
                set_aside: None,
            });
        };
        let json = self.plan_json();
        let max = self.config.max_tasks;
        let ask = match reason {
            Reask::Format => reminder_prompt_as(max, json),
            Reask::Cycle => cycle_prompt_as(&unschedulable(&reading.tasks), max, json),
        };
        let first_plan = answer_text(&text).trim().to_string();
        let messages = vec![
            ChatMessage::user(plan_prompt_as(&self.ctx.question, max, json)),
            ChatMessage::assistant(first_plan.clone()),
            ChatMessage::user(ask),
        ];
        // Asked of the model that answered (the backup, when it stood in).
        let spec = self
            .call(REPLAN_KEY, &reply.model, messages, "plan")
            .with_schema(&self.plan)
            .quoting([("the first plan".to_string(), first_plan)]);
        self.first = Some(FirstPlan {
            reply: text,
            reading,
            read_from,
            model: reply.model.clone(),
            response_time_ms: reply.response_time_ms,
            fallback_from: routed.fallback_from.clone(),
            reason,
        });
        self.phase = Phase::Replanning;
        vec![
            Effect::emit(
                "plan_start",
                json!({ "data": { "model": reply.model, "again": reason.name() } }),
            ),
            Effect::Call(spec),
        ]
    }

    /// The planner's second answer: it replaces the first when it parses (and, asked about a
    /// cycle, is acyclic); otherwise the first is used, its cycle repaired, or the run fails
    /// when no task could be read from either.
    fn on_replan(&mut self, reply: CallReply) -> Vec<Effect> {
        let Some(first) = self.first.clone() else { return Vec::new() };
        let second = match &reply.result {
            Ok(t) => {
                let (reading, from) = read_plan_reply(t, self.config.max_tasks, &self.plan);
                Some((t.clone(), reading, from))
            }
            Err(_) => None,
        };
        let usable = second.as_ref().filter(|(_, r, _)| {
            !r.tasks.is_empty()
                && (first.reason == Reask::Format || unschedulable(&r.tasks).is_empty())
        });
        if let Some((text, reading, read_from)) = usable.cloned() {
            return self.accept(PlanUse {
                reply: text,
                reading,
                read_from,
                model: reply.model.clone(),
                response_time_ms: reply.response_time_ms,
                fallback_from: first.fallback_from.clone(),
                first: Some(first),
                set_aside: None,
            });
        }
        if first.reason == Reask::Cycle {
            return self.accept(PlanUse {
                reply: first.reply.clone(),
                reading: first.reading.clone(),
                read_from: first.read_from,
                model: first.model.clone(),
                response_time_ms: first.response_time_ms,
                fallback_from: first.fallback_from.clone(),
                first: Some(first),
                set_aside: second.map(|(t, _, from)| (t, from)),
            });
        }
        // Nothing readable twice: the plan row keeps what the planner wrote, then the run fails.
        let (text, reading) =
            second.map(|(t, r, _)| (t, r)).unwrap_or((first.reply.clone(), PlanReading::default()));
        let mut out = self.store_plan(
            &PlanUse {
                reply: text,
                reading,
                read_from: None,
                model: reply.model.clone(),
                response_time_ms: reply.response_time_ms,
                fallback_from: first.fallback_from.clone(),
                first: Some(first.clone()),
                set_aside: None,
            },
            None,
        );
        out.extend(self.fail(format!(
            "No task could be read from the planner's plan ({}), even after a reminder of the \
             format.",
            first.model
        )));
        out
    }

    /// The `plan` row and `plan_complete` (and `assignment_complete` when there is a schedule).
    fn store_plan(&mut self, plan: &PlanUse, schedule: Option<&Schedule>) -> Vec<Effect> {
        let empty = Schedule {
            tasks: Vec::new(),
            waves: Vec::new(),
            critical_path: Vec::new(),
            max_parallelism: 0,
            dropped: Vec::new(),
        };
        let s = schedule.unwrap_or(&empty);
        let mut warnings = plan.reading.warnings.clone();
        if !s.dropped.is_empty() {
            warnings.push(format!(
                "The dependencies formed a cycle: {} dependenc{} on later tasks dropped.",
                s.dropped.len(),
                if s.dropped.len() == 1 { "y" } else { "ies" }
            ));
        }
        let replanned = plan.first.as_ref().is_some_and(|f| f.reply != plan.reply);
        let mut data = json!({
            "model": plan.model, "tasks": s.tasks, "executionWaves": s.waves,
            "criticalPath": s.critical_path, "maxParallelism": s.max_parallelism,
            "warnings": warnings, "replanned": replanned,
            "reasked": plan.first.as_ref().map(|f| f.reason.name()),
            "droppedDependencies": s.dropped,
            "responseTimeMs": plan.response_time_ms,
        });
        if let Some(from) = &plan.fallback_from {
            data["fallbackFrom"] = json!(from);
        }
        // Only a plan with a task to run was read.
        if let Some(from) = plan.read_from {
            data["readFrom"] = json!(from);
        }
        let mut stored = data.clone();
        stored["assignments"] = json!(self.assignments);
        if let Some(f) = &plan.first {
            stored["firstReply"] = json!(f.reply);
            if let (true, Some(from)) = (replanned, f.read_from) {
                stored["firstReadFrom"] = json!(from);
            }
        }
        // The plan asked for again and set aside (the first plan kept): kept too, and how it
        // was read.
        if let Some((text, from)) = &plan.set_aside {
            stored["setAsideReply"] = json!(text);
            if let Some(from) = from {
                stored["setAsideReadFrom"] = json!(from);
            }
        }
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "plan".into(),
                stage_order: PLAN_ORDER,
                model: Some(plan.model.clone()),
                role: Some("planner".into()),
                content: plan.reply.clone(),
                parsed_data: Some(stored),
                response_time_ms: Some(plan.response_time_ms as i64),
            }),
            Effect::emit("plan_complete", json!({ "data": data })),
        ];
        if schedule.is_some() {
            out.push(Effect::emit(
                "assignment_complete",
                json!({ "data": { "assignments": self.assignments } }),
            ));
        }
        out
    }

    /// Runs a plan: scheduled (a cycle repaired), stored, and its first wave started.
    fn accept(&mut self, plan: PlanUse) -> Vec<Effect> {
        let Some(schedule) = schedule(&plan.reading.tasks, true) else { return Vec::new() };
        let tasks = schedule.tasks.clone();
        let index: Vec<Vec<usize>> = schedule
            .waves
            .iter()
            .map(|w| w.iter().filter_map(|id| tasks.iter().position(|t| &t.id == id)).collect())
            .collect();
        self.assignments = assign(&tasks, &index, &self.config.worker_models);
        let mut out = self.store_plan(&plan, Some(&schedule));
        self.schedule = Some(schedule);
        self.phase = Phase::Running;
        out.extend(self.next_wave());
        out
    }

    fn task(&self, id: &str) -> Option<&Task> {
        self.schedule.as_ref()?.tasks.iter().find(|t| t.id == id)
    }

    fn assignment(&self, id: &str) -> Option<&Assignment> {
        self.assignments.iter().find(|a| a.task_id == id)
    }

    fn wave_ids(&self, wave: usize) -> Vec<String> {
        self.schedule
            .as_ref()
            .and_then(|s| s.waves.get(wave.wrapping_sub(1)).cloned())
            .unwrap_or_default()
    }

    fn wave_count(&self) -> usize {
        self.schedule.as_ref().map_or(0, |s| s.waves.len())
    }

    /// The next wave, or the skipped rest and the assembly once the time limit has passed or
    /// every wave has run.
    fn next_wave(&mut self) -> Vec<Effect> {
        if self.deadline_passed {
            let mut out = self.skip_rest();
            out.extend(self.assemble());
            return out;
        }
        if self.wave >= self.wave_count() {
            return self.assemble();
        }
        self.wave += 1;
        let ids = self.wave_ids(self.wave);
        let listed: Vec<Value> = ids
            .iter()
            .map(|id| {
                json!({ "taskId": id, "title": self.task(id).map(|t| t.title.clone()),
                        "model": self.assignment(id).map(|a| a.model.clone()) })
            })
            .collect();
        let mut out = vec![Effect::emit(
            "wave_start",
            json!({ "wave": self.wave, "data": { "tasks": listed } }),
        )];
        for id in ids {
            let (Some(task), Some(a)) = (self.task(&id), self.assignment(&id)) else { continue };
            let given: Vec<Given> = task
                .dependencies
                .iter()
                .map(|d| Given {
                    id: d.clone(),
                    title: self.task(d).map_or_else(|| d.clone(), |t| t.title.clone()),
                    output: self
                        .outcomes
                        .iter()
                        .find(|o| &o.task_id == d && o.status == Status::Completed)
                        .map(|o| o.output.clone()),
                })
                .collect();
            let prompt = task_prompt(&self.ctx.question, task, &given);
            // The dependencies' outputs, named for fitting a small context.
            let quoted: Vec<(String, String)> = given
                .iter()
                .filter_map(|g| Some((format!("the output of {}", g.id), g.output.clone()?)))
                .collect();
            let call =
                self.call(&format!("task:{id}"), &a.model, vec![ChatMessage::user(prompt)], &id);
            out.push(Effect::Call(call.quoting(quoted)));
        }
        out
    }

    fn on_task(&mut self, id: &str, reply: CallReply) -> Vec<Effect> {
        let in_wave = self.wave_ids(self.wave).iter().any(|w| w == id);
        if !in_wave || self.outcomes.iter().any(|o| o.task_id == id) {
            return Vec::new();
        }
        let title = self.task(id).map_or_else(|| id.to_string(), |t| t.title.clone());
        let ms = Some(reply.response_time_ms as i64);
        let outcome = match &reply.result {
            Ok(t) => {
                let output = answer_text(t).trim().to_string();
                Outcome {
                    task_id: id.to_string(),
                    title,
                    model: reply.model.clone(),
                    status: Status::Completed,
                    word_count: word_count(&output),
                    output,
                    response_time_ms: ms,
                    error: None,
                }
            }
            Err(e) => Outcome {
                task_id: id.to_string(),
                title,
                model: reply.model.clone(),
                status: Status::Failed,
                output: String::new(),
                word_count: 0,
                response_time_ms: ms,
                error: Some(e.message.clone()),
            },
        };
        let mut out = vec![
            task_row(&outcome, self.wave),
            Effect::emit("task_complete", json!({ "wave": self.wave, "data": outcome })),
        ];
        self.outcomes.push(outcome);
        let ids = self.wave_ids(self.wave);
        let ended: Vec<&Outcome> =
            self.outcomes.iter().filter(|o| ids.contains(&o.task_id)).collect();
        if ended.len() == ids.len() {
            let completed = ended.iter().filter(|o| o.status == Status::Completed).count();
            out.push(Effect::emit(
                "wave_complete",
                json!({ "wave": self.wave,
                        "data": { "completed": completed, "failed": ended.len() - completed } }),
            ));
            out.extend(self.next_wave());
        }
        out
    }

    /// Every task of the waves not started, stored as skipped (the time limit passed).
    fn skip_rest(&mut self) -> Vec<Effect> {
        let mut out = Vec::new();
        for w in self.wave + 1..=self.wave_count() {
            for id in self.wave_ids(w) {
                let o = Outcome {
                    task_id: id.clone(),
                    title: self.task(&id).map_or_else(|| id.clone(), |t| t.title.clone()),
                    model: self.assignment(&id).map(|a| a.model.clone()).unwrap_or_default(),
                    status: Status::Skipped,
                    output: String::new(),
                    word_count: 0,
                    response_time_ms: None,
                    error: Some(format!(
                        "the run's time limit ({} s) passed before its wave",
                        self.config.global_timeout_ms / 1000
                    )),
                };
                out.push(task_row(&o, w));
                self.outcomes.push(o);
            }
        }
        self.wave = self.wave_count();
        out
    }

    /// The outcomes in schedule order (wave by wave, plan order within a wave).
    fn in_schedule_order(&self) -> Vec<&Outcome> {
        let Some(s) = &self.schedule else { return Vec::new() };
        s.waves
            .iter()
            .flatten()
            .filter_map(|id| self.outcomes.iter().find(|o| &o.task_id == id))
            .collect()
    }

    fn assemble(&mut self) -> Vec<Effect> {
        let ordered: Vec<Outcome> = self.in_schedule_order().into_iter().cloned().collect();
        let produced: Vec<Produced> = ordered
            .iter()
            .filter(|o| o.status == Status::Completed)
            .map(|o| Produced {
                id: o.task_id.clone(),
                title: o.title.clone(),
                model: o.model.clone(),
                output: o.output.clone(),
            })
            .collect();
        if produced.is_empty() {
            let n = self.schedule.as_ref().map_or(0, |s| s.tasks.len());
            return self.fail(format!(
                "No task produced an output ({n} planned: each failed or was skipped); the plan \
                 is kept."
            ));
        }
        let missing: Vec<Missing> = ordered
            .iter()
            .filter(|o| o.status != Status::Completed)
            .map(|o| Missing {
                id: o.task_id.clone(),
                title: o.title.clone(),
                reason: match o.status {
                    Status::Skipped => "skipped: the run's time limit passed first".into(),
                    _ => format!("failed ({})", o.error.as_deref().unwrap_or("no output")),
                },
            })
            .collect();
        let tasks = self.schedule.as_ref().map(|s| s.tasks.clone()).unwrap_or_default();
        let prompt = assembly_prompt(&self.ctx.question, &tasks, &produced, &missing);
        let quoted: Vec<(String, String)> = produced
            .iter()
            .map(|p| (format!("the output of {}", p.id), p.output.clone()))
            .collect();
        let spec = self
            .call(
                "assembly",
                &self.config.assembler_model.clone(),
                vec![ChatMessage::user(prompt)],
                "assembly",
            )
            .quoting(quoted);
        self.phase = Phase::Assembling;
        let skipped: Vec<&str> = ordered
            .iter()
            .filter(|o| o.status == Status::Skipped)
            .map(|o| o.task_id.as_str())
            .collect();
        let backup = self.config.chairman_fallback_model.clone();
        vec![
            Effect::emit(
                "assembly_start",
                json!({ "data": { "model": self.config.assembler_model, "skipped": skipped } }),
            ),
            self.calls.solo(spec, ASSEMBLY_ORDER, backup.as_deref()),
        ]
    }

    fn on_assembly(&mut self, routed: Routed) -> Vec<Effect> {
        self.phase = Phase::Done;
        let reply = &routed.reply;
        let (response, fallback, model, ms) = match &reply.result {
            Ok(t) => (
                answer_text(t).trim().to_string(),
                None,
                Some(reply.model.clone()),
                Some(reply.response_time_ms as i64),
            ),
            Err(_) => {
                let ordered: Vec<&Outcome> = self.in_schedule_order();
                (concatenated(&ordered), Some("concatenated"), None, None)
            }
        };
        let mut data = json!({ "model": model, "response": response, "fallback": fallback,
                               "responseTimeMs": ms });
        if let (Some(from), None) = (&routed.fallback_from, fallback) {
            data["fallbackFrom"] = json!(from);
        }
        self.calls.answered(
            Answered {
                stage: "assembly",
                order: ASSEMBLY_ORDER,
                role: "assembler",
                model,
                event: "assembly_complete",
                data,
                text_key: "response",
                answer: response,
                response_time_ms: ms,
            },
            &mut self.title,
        )
    }

    /// A call's stage → the stage order of its rows: the plan 0, a task its wave, the
    /// assembly 99.
    fn order_of(&self) -> impl Fn(&str) -> i32 {
        let waves: Vec<(String, i32)> =
            self.assignments.iter().map(|a| (a.task_id.clone(), a.wave as i32)).collect();
        move |stage: &str| match stage {
            "plan" => PLAN_ORDER,
            "assembly" => ASSEMBLY_ORDER,
            s => waves.iter().find(|(id, _)| id == s).map_or(PLAN_ORDER, |(_, w)| *w),
        }
    }
}

/// The plan a run goes on with (or stores before it fails).
struct PlanUse {
    reply: String,
    reading: PlanReading,
    /// Where its tasks were read from (None: none could be read).
    read_from: Option<ReadFrom>,
    model: String,
    response_time_ms: u64,
    fallback_from: Option<String>,
    first: Option<FirstPlan>,
    /// The reply asked for again, when it was set aside for the first (it still had a cycle,
    /// or could not be read): its text and where it was read from.
    set_aside: Option<(String, Option<ReadFrom>)>,
}

/// A task's row: its id as the stage type, its wave as the stage order.
fn task_row(o: &Outcome, wave: usize) -> Effect {
    let mut parsed = json!({ "taskId": o.task_id, "title": o.title, "wave": wave,
                             "status": o.status, "wordCount": o.word_count });
    if let Some(e) = &o.error {
        parsed["error"] = json!(e);
    }
    Effect::Store(StageRow {
        stage_type: o.task_id.clone(),
        stage_order: wave as i32,
        model: Some(o.model.clone()).filter(|m| !m.is_empty()),
        role: Some("worker".into()),
        content: o.output.clone(),
        parsed_data: Some(parsed),
        response_time_ms: o.response_time_ms,
    })
}

/// The answer when the assembler and its backup failed: the outputs in schedule order, each
/// under `## <id>: <title>`, separated by `---`.
pub fn concatenated(ordered: &[&Outcome]) -> String {
    ordered
        .iter()
        .filter(|o| o.status == Status::Completed)
        .map(|o| format!("## {}: {}\n\n{}", o.task_id, o.title, o.output))
        .collect::<Vec<_>>()
        .join("\n\n---\n\n")
}

impl Mode for Decompose {
    fn start(&mut self) -> Vec<Effect> {
        let c = &self.config;
        let mut out = vec![
            Effect::emit(
                "decompose_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id,
                        "mode": "decompose",
                        "config": { "plannerModel": c.planner_model, "workerModels": c.worker_models,
                                    "assemblerModel": c.assembler_model, "maxTasks": c.max_tasks,
                                    "timeoutMs": c.timeout_ms, "globalTimeoutMs": c.global_timeout_ms } }),
            ),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: c.global_timeout_ms },
            Effect::emit("plan_start", json!({ "data": { "model": c.planner_model } })),
        ];
        // Asked for the plan's JSON when the planner's route takes it (the backup takes the
        // same prompt: it is asked as the planner is).
        let (q, max) = (&self.ctx.question, self.config.max_tasks);
        let asking = Asking::new(self.plan.clone(), |json| plan_prompt_as(q, max, json));
        let spec = asking
            .call(
                &self.ctx,
                "plan",
                &self.config.planner_model,
                "plan",
                "planner",
                self.config.timeout_ms,
            )
            .quoting([self.question()]);
        let backup = self.config.facilitator_fallback_model.clone();
        out.push(self.calls.solo(spec, PLAN_ORDER, backup.as_deref()));
        let model = self.config.planner_model.clone();
        out.extend(self.title.call(
            &model,
            title_prompt(&self.ctx.question),
            self.config.timeout_ms,
        ));
        out
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        if reply.key == TITLE_KEY {
            return self.title.on_reply(&reply);
        }
        let (mut out, routed) = self.calls.route(empty_is_failure(reply));
        let Some(routed) = routed else { return out };
        let key = routed.reply.key.clone();
        let task = key.strip_prefix("task:").map(str::to_string);
        out.extend(match (self.phase, task) {
            (Phase::Planning, _) if key == "plan" => self.on_plan(routed),
            (Phase::Replanning, _) if key == REPLAN_KEY => self.on_replan(routed.reply),
            (Phase::Running, Some(id)) => self.on_task(&id, routed.reply),
            (Phase::Assembling, _) if key == "assembly" => self.on_assembly(routed),
            _ => Vec::new(),
        });
        let order = self.order_of();
        self.calls.track(&out, order);
        out
    }

    /// The global cap: the wave (or call) in flight finishes, later tasks are skipped and the
    /// assembly follows.
    fn on_timer(&mut self, key: &str) -> Vec<Effect> {
        if key == GLOBAL_TIMER {
            self.deadline_passed = true;
        }
        Vec::new()
    }
}

// ---- the stored result ---------------------------------------------------------------------

/// `{plan, assignments, waves, assembly, stats, partial, failedModels}` from the stored rows,
/// as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let mut plan = row("plan").and_then(|r| r.parsed_data.clone());
    let assignments = plan
        .as_mut()
        .and_then(Value::as_object_mut)
        .and_then(|o| o.remove("assignments"))
        .unwrap_or(json!([]));
    let is_task = |t: &str| t.strip_prefix("task_").is_some_and(|n| n.parse::<u64>().is_ok());
    let outcomes: Vec<Outcome> = rows
        .iter()
        .filter(|r| is_task(&r.stage_type))
        .filter_map(|r| {
            let d = r.parsed_data.as_ref()?;
            Some(Outcome {
                task_id: r.stage_type.clone(),
                title: d["title"].as_str()?.to_string(),
                model: r.model.clone().unwrap_or_default(),
                status: serde_json::from_value(d["status"].clone()).ok()?,
                output: r.content.clone(),
                word_count: d["wordCount"].as_u64().unwrap_or(0) as usize,
                response_time_ms: r.response_time_ms,
                error: d["error"].as_str().map(str::to_string),
            })
        })
        .collect();
    let planned: Vec<Vec<String>> = plan
        .as_ref()
        .and_then(|p| serde_json::from_value(p["executionWaves"].clone()).ok())
        .unwrap_or_default();
    let waves: Vec<Value> = planned
        .iter()
        .enumerate()
        .filter_map(|(i, ids)| {
            let tasks: Vec<&Outcome> =
                ids.iter().filter_map(|id| outcomes.iter().find(|o| &o.task_id == id)).collect();
            (!tasks.is_empty()).then(|| json!({ "wave": i + 1, "tasks": tasks }))
        })
        .collect();
    let count = |s: Status| outcomes.iter().filter(|o| o.status == s).count();
    let stats = plan.as_ref().map(|p| {
        json!({
            "tasks": p["tasks"].as_array().map_or(0, Vec::len),
            "waves": planned.len(),
            "maxParallelism": p["maxParallelism"],
            "criticalPath": p["criticalPath"].as_array().map_or(0, Vec::len),
            "completed": count(Status::Completed),
            "failed": count(Status::Failed),
            "skipped": count(Status::Skipped),
        })
    });
    let assembly = row("assembly").map(|a| {
        let mut d = a.parsed_data.clone().unwrap_or(json!({}));
        d["response"] = json!(a.content);
        d
    });
    let mut result = json!({
        "plan": plan, "assignments": assignments, "waves": waves, "assembly": assembly,
        "stats": stats,
    });
    mark_from_rows(&mut result, rows);
    result
}

fn outcome(result: &Value) -> Option<String> {
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

// ---- sim answers ---------------------------------------------------------------------------

const SIM_TASKS: [(&str, &str, &str, &str); 8] = [
    (
        "Understand the need",
        "State who asks and what a good answer must cover.",
        "LOW",
        "analytical",
    ),
    ("Survey the options", "List the main options and what each involves.", "MEDIUM", "technical"),
    ("Weigh the options", "Compare the options on cost, risk and effort.", "HIGH", "analytical"),
    ("Check the constraints", "Name the limits of time, money and skills.", "MEDIUM", "general"),
    ("Draft the plan", "Turn the chosen option into concrete steps.", "HIGH", "technical"),
    ("Estimate the budget", "Give rough figures for each step.", "MEDIUM", "analytical"),
    ("Name the risks", "List what could go wrong and how to catch it early.", "MEDIUM", "general"),
    ("Write the summary", "Say in a few lines what to do first.", "LOW", "creative"),
];

/// Each sim task's dependencies (1-based task numbers), always on earlier tasks.
const SIM_DEPS: [&[usize]; 8] = [&[], &[], &[1, 2], &[1], &[3, 4], &[4], &[3], &[5, 6]];

fn sim_plan(n: usize, cyclic: bool, messy: bool, who: &str) -> String {
    let mut s = format!("[simulated plan from {who}]\n\n");
    for (i, (title, desc, cx, ex)) in SIM_TASKS.iter().take(n).enumerate() {
        let mut deps: Vec<usize> = SIM_DEPS[i].iter().copied().filter(|&d| d <= n).collect();
        if cyclic && i == 1 {
            // task_2 waits for task_3, which waits for task_2.
            deps.push(3);
        }
        let list = |sep: &str, prefix: &str| {
            deps.iter().map(|d| format!("{prefix}{d}")).collect::<Vec<_>>().join(sep)
        };
        if messy {
            s.push_str(&format!(
                "### **Task {} — {title}**\n- **Description:** {desc}\n- **Depends on:** {}\n- **Complexity:** {}\n\n",
                i + 1,
                if deps.is_empty() { "n/a".to_string() } else { list(" and ", "#") },
                if i % 3 == 2 { "fairly high" } else { cx },
            ));
        } else {
            s.push_str(&format!(
                "TASK task_{}:\nTitle: {title}\nDescription: {desc} Keep it self-contained.\nDependencies: {}\nComplexity: {cx}\nExpertise: {ex}\n\n",
                i + 1,
                if deps.is_empty() { "none".to_string() } else { list(", ", "task_") },
            ));
        }
    }
    if !messy {
        s.push_str("EXECUTION SUMMARY:\nWave 1 holds the tasks without dependencies.");
    }
    s
}

/// The sim plan of `n` tasks as JSON that fits [`plan_schema`]: the same tasks, dependencies,
/// complexities and expertise as its text plan (`cyclic`: task_2 waits for task_3, which
/// waits for task_2).
fn sim_plan_json(n: usize, cyclic: bool, ask: &SimAsk) -> String {
    let tasks: Vec<Value> = SIM_TASKS
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, (title, desc, cx, ex))| {
            let mut deps: Vec<usize> = SIM_DEPS[i].iter().copied().filter(|&d| d <= n).collect();
            if cyclic && i == 1 {
                deps.push(3);
            }
            let deps: Vec<String> = deps.iter().map(|d| format!("task_{d}")).collect();
            json!({ "id": format!("task_{}", i + 1), "title": title,
                    "description": format!("{desc} Keep it self-contained."),
                    "dependencies": deps, "complexity": cx, "expertise": ex })
        })
        .collect();
    let reasoning: String = format!(
        "{}[simulated plan from {}] Understand the need first, then the options, then the plan.",
        ask.hostile_paragraph(),
        ask.model
    )
    .chars()
    .take(schema::REASONING_MAX_CHARS)
    .collect();
    json!({ "reasoning": reasoning, "tasks": tasks }).to_string()
}

fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    let who = ask.model;
    let mut rng = SplitMix64::new(ask.seed);
    let first_ask = p.starts_with(PLAN_HEAD);
    let plan_asked = first_ask || p.starts_with(REMINDER_HEAD) || p.starts_with(CYCLE_HEAD);
    // Only the plan carries a schema of ours.
    if ask.schema.is_some_and(|s| s.name != PLAN_SCHEMA || !plan_asked) {
        return None;
    }
    if plan_asked {
        static MAX: OnceLock<Regex> = OnceLock::new();
        // Asked for JSON, the most tasks the schema allows; else as the prompt says.
        let listed = ask
            .schema
            .and_then(|s| s.schema.pointer("/properties/tasks/maxItems")?.as_u64())
            .map(|m| m as usize);
        let max = listed
            .or_else(|| {
                re(&MAX, r"3 to (\d+) sub-tasks").captures(p).and_then(|c| c[1].parse().ok())
            })
            .unwrap_or(6)
            .clamp(MIN_TASKS, MAX_TASKS);
        let n = 4.max(max - rng.below(2)).min(max);
        // Planners by name, for the paths a plan can take: `sim/cyclic…` plans a cycle when
        // first asked, `sim/loop…` every time; `sim/prose…` answers in prose when first asked,
        // `sim/planless…` every time.
        let name = who.strip_prefix("sim/").unwrap_or(who);
        if name.starts_with("planless") || (first_ask && name.starts_with("prose")) {
            return Some(format!(
                "[simulated plan from {who}] I would start by understanding the need, then \
                 survey the options, weigh them and write a plan with a budget."
            ));
        }
        let cyclic = name.starts_with("loop") || (first_ask && name.starts_with("cyclic"));
        if ask.schema.is_some() {
            return Some(sim_plan_json(n, cyclic, ask));
        }
        return Some(sim_plan(n, cyclic, ask.malformed, who));
    }
    if p.starts_with(TASK_HEAD) {
        static HEAD: OnceLock<Regex> = OnceLock::new();
        let c = re(&HEAD, r"Your sub-task: (task_\d+): (.*)").captures(p)?;
        let title = c[2].trim().to_string();
        static DEP: OnceLock<Regex> = OnceLock::new();
        let used: Vec<String> = re(&DEP, r"=== OUTPUT OF task_\d+: (.*) ===")
            .captures_iter(p)
            .map(|c| c[1].to_lowercase())
            .collect();
        let mut s = String::new();
        if ask.malformed {
            s.push_str("Sure! Here is my part.\n\n");
        }
        s.push_str(&format!(
            "### {title}\n\n[simulated output from {who}] {}{}\n\n{}- First point on {}.\n- \
             Second point, with its reason.\n- A limit to keep in mind.\n",
            if used.is_empty() {
                "This part stands on its own.".to_string()
            } else {
                format!("This part builds on the work to {}.", used.join(" and to "))
            },
            if p.contains(" FAILED ===") {
                " One input is missing, so this part says so."
            } else {
                ""
            },
            ask.hostile_paragraph(),
            title.to_lowercase(),
        ));
        if rng.below(3) == 0 {
            s.push_str("\nFigures here are estimates.\n");
        }
        return Some(s);
    }
    if p.starts_with(ASSEMBLY_HEAD) {
        static OUT: OnceLock<Regex> = OnceLock::new();
        let body = p
            .split_once(OUTPUTS_START)
            .and_then(|(_, r)| r.split_once(OUTPUTS_END))
            .map_or("", |(b, _)| b);
        let parts: Vec<(String, String)> = re(
            &OUT,
            r"(?s)--- (task_\d+): (.*?) \(by [^\n]*\) ---\n(.*?)\n--- end of task_\d+ ---",
        )
        .captures_iter(body)
        .map(|c| {
            // The worker's own heading and preamble give way to the assembler's.
            let kept: Vec<&str> =
                c[3].lines().filter(|l| !l.starts_with('#') && !l.starts_with("Sure!")).collect();
            (c[2].to_string(), kept.join("\n"))
        })
        .collect();
        let missing: Vec<String> = p
            .split_once(MISSING_HEAD)
            .map(|(_, r)| {
                r.lines()
                    .skip(1)
                    .map_while(|l| l.strip_prefix("- "))
                    .filter_map(|l| l.split(": ").nth(1).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let mut s = String::new();
        if ask.malformed {
            s.push_str("Here is the combined answer:\n\n");
        }
        s.push_str(&format!(
            "[simulated answer by {who}]\n\nThis answer brings {} parts together into one plan.\n\n{}",
            parts.len(),
            ask.hostile_paragraph()
        ));
        for (i, (title, text)) in parts.iter().enumerate() {
            s.push_str(&format!("## {title}\n\n"));
            if i > 0 {
                s.push_str("Building on the above, ");
            }
            s.push_str(text.trim());
            s.push_str("\n\n");
        }
        if !missing.is_empty() {
            s.push_str(&format!(
                "**Gaps:** nothing could be said about {}.\n\n",
                missing.join(", ").to_lowercase()
            ));
        }
        s.push_str(
            "## In short\n\nStart with the first step above and revisit the plan as you learn.",
        );
        return Some(s);
    }
    None
}

#[cfg(test)]
#[path = "decompose_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// A task's number as the planner gave it (`task_3` → `3`).
fn task_number(id: &str) -> String {
    id.strip_prefix("task_").unwrap_or(id).to_string()
}

/// A sentence with the task ids in it (`task_3`) as a reader writes them (`task 3`).
fn plain_ids(text: &str) -> String {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(&RE, r"\btask_(\d+)\b").replace_all(text, "task $1").into_owned()
}

/// The result as the export's report: the plan (how many sub-tasks, waves, who planned it and
/// whether it was asked again), who assembled the answer, the sub-tasks as a table (depends
/// on, wave, worker, complexity, done or failed and why), the critical path and what was
/// repaired in the plan.
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
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
