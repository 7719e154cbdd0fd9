//! Decompose's prompts: the plan (and the reminder and the cycle re-ask), a worker's task with
//! its dependencies' outputs, and the assembly.

use super::*;

pub const PLAN_HEAD: &str = "You are the planner of a task decomposition.";
pub const REMINDER_HEAD: &str = "Your plan could not be read: it has no task in the format asked.";
pub const CYCLE_HEAD: &str = "Your plan cannot be scheduled: its dependencies form a cycle.";
pub const TASK_HEAD: &str = "You are one of the workers of a task decomposition.";
pub const ASSEMBLY_HEAD: &str = "You are the assembler of a task decomposition.";
pub const QUESTION_START: &str = "=== QUESTION ===";
pub const QUESTION_END: &str = "=== END OF QUESTION ===";
pub const OUTPUTS_START: &str = "=== OUTPUTS ===";
pub const OUTPUTS_END: &str = "=== END OF OUTPUTS ===";
pub(super) const MISSING_HEAD: &str = "Tasks without an output:";

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

/// The planner's prompt ending in the spec's format, or, given the plan's schema, in its JSON
/// (the same rules otherwise).
pub fn plan_prompt(question: &str, max_tasks: usize, schema: Option<&ReplySchema>) -> String {
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

/// The planner asked once more when no task could be read, or, given the plan's schema,
/// asking for its JSON.
pub fn reminder_prompt(max_tasks: usize, schema: Option<&ReplySchema>) -> String {
    let how = match schema {
        Some(_) => "as the single JSON object described below",
        None => "each starting with a line `TASK task_<n>:`",
    };
    format!(
        "{REMINDER_HEAD} Give the plan again: 3 to {max_tasks} sub-tasks, {how}.\n\n{}",
        plan_format_as(schema)
    )
}

/// The planner asked once more when its dependencies form a cycle, or, given the plan's
/// schema, asking for its JSON.
pub fn cycle_prompt(
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
