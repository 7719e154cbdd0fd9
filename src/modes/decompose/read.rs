//! Reading the plan: the tasks, their complexity and dependencies from the headed text or the
//! plan's JSON (`decompose_plan`), cleaned by the stated rules.

use super::*;

/// How much work a task is, as the planner states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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

    pub(super) fn label(self) -> &'static str {
        match self {
            Complexity::Low => "LOW",
            Complexity::Medium => "MEDIUM",
            Complexity::High => "HIGH",
        }
    }
}

/// One sub-task of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    let t = unmark(token);
    let t = t.trim_matches(|c: char| matches!(c, '(' | ')' | '[' | ']' | '.' | ',' | ';' | ':'));
    let c = regex!(r"(?i)^(?:tasks?[\s_\-]*#?\s*|#\s*)?(\d{1,6})$").captures(t.trim())?;
    Some(format!("task_{}", c[1].parse::<u64>().ok()?))
}

/// `TASK <id>` opening a task (optional `:`, or a dash, then maybe its title): the id and the
/// rest of the line. `Task 3 depends on task 1` is prose, not a heading.
fn task_heading(line: &str) -> Option<(String, String)> {
    let c = regex!(r"(?i)^task[\s_\-]*(?:task[\s_\-]*)?#?\s*(\d{1,6})\b\s*(?:\*\*|__)?\s*(?:[:.\-–—]\s*(?:\*\*|__)?\s*(.*))?$")
    .captures(line)?;
    let id = format!("task_{}", c[1].parse::<u64>().ok()?);
    Some((id, c.get(2).map_or(String::new(), |m| stated(m.as_str()))))
}

fn is_summary(line: &str) -> bool {
    regex!(r"(?i)^execution\s+summary\b").is_match(line)
}

/// `Title:`, `Description:`… at the start of a bare line: the field and the value after it.
fn field(line: &str) -> Option<(Field, &str)> {
    let c = regex!(r"(?i)^(title|description|dependencies|dependency|depends\s+on|complexity|expertise)\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?")
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
    if echoed_placeholder(&v) {
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
    let v = unmark(value);
    let mut ids: Vec<String> = Vec::new();
    for c in regex!(r"(?i)(?:\btasks?[\s_\-]*#?\s*|#\s*|\b)(\d{1,6})\b").captures_iter(&v) {
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
    let from_json = |v: &Value| drafts_from_json(v).map(|drafts| clean(drafts, max_tasks));
    let read = |t: &str| read_plan(t, max_tasks);
    schema.read_reply(reply, from_json, read, |r| !r.tasks.is_empty())
}
