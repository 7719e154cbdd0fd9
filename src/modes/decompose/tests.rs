//! Decompose driven with fake replies: the plan read from recorded and adversarial texts, the
//! scheduler's waves, critical path and cycle repair (with property tests on random graphs),
//! the waves run in order with failures, the time limit, the backups, and the stored result
//! equal to what went out live.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    self, all_emitted, assert_contains_all, call_keyed, ctx, drive_on_sim_text, emitted, events,
    failed, fields, finished, machine_read_stages, offline_defaults, ok, quotes_its_material,
    readable_report, rows, schema_name, sim_ask, sim_call_ask, stage_calls,
};
use crate::modes::validate;
use crate::modes::Mode;

const PLAN: &str = "\
Here is my plan.

TASK task_1:
Title: Market research
Description: Size the local market for an online bakery.
Name the main competitors.
Dependencies: none
Complexity: MEDIUM
Expertise: Analytical

TASK task_2:
Title: Menu
Description: Propose a first menu of ten items.
Dependencies: none
Complexity: LOW
Expertise: creative

TASK task_3:
Title: Pricing
Description: Price the menu from the market research.
Dependencies: task_1, task_2
Complexity: HIGH
Expertise: analytical

TASK task_4:
Title: Budget
Description: A first-month budget.
Dependencies: task_3
Complexity: MEDIUM
Expertise: general

EXECUTION SUMMARY:
Wave 1: task_1, task_2
TASK task_9: not a task";

fn config(workers: &[&str]) -> Value {
    json!({ "plannerModel": "plan", "workerModels": workers, "assemblerModel": "asm",
            "maxTasks": 6, "timeoutMs": 120000, "globalTimeoutMs": 600000 })
}

fn decompose(cfg: Value) -> Decompose {
    Decompose::new(&cfg, ctx("Launch an online bakery", vec![], true)).unwrap()
}

fn t(id: &str, deps: &[&str]) -> Task {
    Task {
        id: id.into(),
        title: id.into(),
        description: String::new(),
        dependencies: deps.iter().map(|d| d.to_string()).collect(),
        complexity: Complexity::Medium,
        expertise: "general".into(),
    }
}

/// Drives a run to its end (see [`testkit::drive`]): batches answered last first, so arrival
/// order differs from plan order.
fn drive(m: &mut Decompose, answer: impl Fn(&CallSpec) -> Option<String>) -> Vec<Effect> {
    testkit::drive(m, answer, "Bakery Launch")
}

fn answer_all(c: &CallSpec) -> Option<String> {
    match c.key.trim_end_matches(":backup") {
        "plan" => Some(PLAN.into()),
        "assembly" => Some("<think>draft</think>The bakery plan, in one answer.".into()),
        k => Some(format!("Output of {k}.")),
    }
}

/// The rows as the store hands them back: by stage order, then as written.
fn stored(all: &[Effect]) -> Vec<StageRow> {
    let mut r = rows(all);
    r.sort_by_key(|r| r.stage_order);
    r
}

/// The stored rows give back exactly what went out live.
fn assert_reloads(all: &[Effect]) {
    let r = load_result(&stored(all));
    if let Some(p) = emitted(all, "plan_complete") {
        for (k, v) in p["data"].as_object().unwrap() {
            assert_eq!(&r["plan"][k], v, "plan.{k}");
        }
    }
    if let Some(a) = emitted(all, "assignment_complete") {
        assert_eq!(r["assignments"], a["data"]["assignments"]);
    }
    for e in all_emitted(all, "task_complete") {
        let wave = r["waves"].as_array().unwrap().iter().find(|w| w["wave"] == e["wave"]).unwrap();
        let task = wave["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["taskId"] == e["data"]["taskId"])
            .unwrap_or_else(|| panic!("{e} not stored"));
        assert_eq!(task, &e["data"]);
    }
    // Within a wave, tasks come back in plan order whatever order they finished in.
    for w in r["waves"].as_array().unwrap() {
        let ids: Vec<&str> =
            w["tasks"].as_array().unwrap().iter().map(|t| t["taskId"].as_str().unwrap()).collect();
        let planned = &r["plan"]["executionWaves"][w["wave"].as_u64().unwrap() as usize - 1];
        let planned: Vec<&str> =
            planned.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert!(ids.iter().all(|id| planned.contains(id)));
        let mut sorted = ids.clone();
        sorted.sort_by_key(|id| planned.iter().position(|p| p == id));
        assert_eq!(ids, sorted);
    }
    if let Some(a) = emitted(all, "assembly_complete") {
        assert_eq!(r["assembly"], a["data"]);
        assert_eq!(r["partial"], a["partial"]);
        assert_eq!(r["failedModels"], a["failedModels"]);
        assert_eq!(finished(all).as_deref(), a["data"]["response"].as_str());
    }
}

// ---- reading the plan ----------------------------------------------------------------------

#[test]
fn a_recorded_style_plan_is_read_field_by_field() {
    let p = read_plan(PLAN, 6);
    assert_eq!(p.tasks.len(), 4, "the summary ends the tasks: {p:?}");
    assert_eq!(p.tasks[0].title, "Market research");
    assert_eq!(
        p.tasks[0].description,
        "Size the local market for an online bakery.\nName the main competitors."
    );
    assert_eq!(p.tasks[0].expertise, "analytical");
    assert_eq!(p.tasks[2].dependencies, ["task_1", "task_2"]);
    assert_eq!(p.tasks[2].complexity, Complexity::High);
    assert_eq!(p.tasks[1].complexity, Complexity::Low);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn markdown_bold_bullets_and_id_spellings_are_read() {
    let text = "\
## **TASK Task-1:** Gather facts
- **Description:** Collect the facts.
- **Depends on:** n/a
- **Complexity:** **high**

### Task #2 — Analyse
* __Title:__ Analysis
* Description: Analyse them.
* Dependencies: #1
* Complexity: low
* Expertise: Technical.

**TASK 3**
Title: `Report`
Dependencies:
- task 1
- Task-2
Complexity: LOW|MEDIUM|HIGH
";
    let p = read_plan(text, 6);
    assert_eq!(
        p.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["task_1", "task_2", "task_3"]
    );
    assert_eq!(p.tasks[0].title, "Gather facts", "the heading's title when no Title: line");
    assert_eq!(p.tasks[0].complexity, Complexity::High);
    assert!(p.tasks[0].dependencies.is_empty());
    assert_eq!(p.tasks[1].title, "Analysis", "a Title: line wins over the heading");
    assert_eq!(p.tasks[1].dependencies, ["task_1"]);
    assert_eq!(p.tasks[1].expertise, "technical");
    assert_eq!(p.tasks[2].title, "Report");
    assert_eq!(p.tasks[2].dependencies, ["task_1", "task_2"], "a list under the label");
    assert_eq!(p.tasks[2].complexity, Complexity::Medium, "an echoed template states nothing");
    assert_eq!(p.tasks[2].expertise, "general");
    assert!(
        p.warnings.iter().any(|w| w.contains("No complexity") && w.contains("task_3")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn ids_and_dependencies_normalise() {
    for t in ["task_3", "task 3", "Task-3", "#3", "3", "TASK_03", "**task_3**", "`3`", "(task 3)"] {
        assert_eq!(task_id(t).as_deref(), Some("task_3"), "{t}");
    }
    for t in ["", "three", "task", "3a", "step 3", "task_3 and 4"] {
        assert_eq!(task_id(t), None, "{t}");
    }
    let ids = |v: &str| dependency_ids(v);
    assert_eq!(ids("task_1, task_2"), Some(vec!["task_1".into(), "task_2".into()]));
    assert_eq!(ids("Task 2 and #1, task_2"), Some(vec!["task_2".into(), "task_1".into()]));
    assert_eq!(ids("1, 3"), Some(vec!["task_1".into(), "task_3".into()]));
    assert_eq!(ids("tasks 1 and 3"), Some(vec!["task_1".into(), "task_3".into()]));
    for none in ["none", "None.", "n/a", "-", "", "  ", "None (first task)", "**none**"] {
        assert_eq!(ids(none), Some(vec![]), "{none:?}");
    }
    assert_eq!(ids("the research one"), None, "says something but names no task");
    assert_eq!(ids("Q3 figures"), None, "a number inside a word is not an id");
}

#[test]
fn repeats_extra_tasks_self_and_unknown_dependencies_are_cleaned_with_warnings() {
    let text = "\
TASK 1:\nTitle: A\nDependencies: task_1, task_7\n\
TASK 2:\nTitle: B\nDependencies: 1\n\
TASK 1:\nTitle: A again\n\
TASK 3:\nTitle: C\nDependencies: the first one\n\
TASK 4:\nTitle: D\nDependencies: 4, 5\n\
TASK 5:\nTitle: E\n";
    let p = read_plan(text, 4);
    let ids: Vec<&str> = p.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["task_1", "task_2", "task_3", "task_4"]);
    assert_eq!(p.tasks[0].title, "A", "the first of a repeated id is kept");
    assert!(p.tasks[0].dependencies.is_empty());
    assert!(p.tasks[3].dependencies.is_empty(), "task_5 was dropped: unknown");
    let w = p.warnings.join("\n");
    assert_contains_all(
        &w,
        &[
            "task_1 appears twice",
            "more than 4 tasks: task_5 dropped",
            "task_1 depended on itself",
            "task_1 depended on task_7",
            "task_3's dependencies (\"the first one\") name no task",
            "task_4 depended on task_5, which is not in the plan",
        ],
    );
}

#[test]
fn think_blocks_refusals_tables_and_prose_give_no_tasks() {
    let hidden = "<think>TASK task_1:\nTitle: secret\n</think>I cannot help with planning this.";
    assert!(read_plan(hidden, 6).tasks.is_empty());
    let think_then = format!("<think>TASK task_7:\nTitle: draft</think>\n{PLAN}");
    let p = read_plan(&think_then, 6);
    assert_eq!(p.tasks.len(), 4);
    assert!(p.tasks.iter().all(|t| t.id != "task_7"));
    assert!(read_plan("I'm sorry, but I can't help with that.", 6).tasks.is_empty());
    let table =
        "| id | title | deps |\n|---|---|---|\n| task_1 | A | none |\n| task_2 | B | task_1 |";
    assert!(read_plan(table, 6).tasks.is_empty(), "a table is not read as a plan");
    assert!(read_plan("Task 3 depends on task 1, so do it later.", 6).tasks.is_empty());
    // A task with only a heading: its id is its title; nothing else is made up.
    let bare_heading = read_plan("TASK task_2", 6);
    assert_eq!(bare_heading.tasks[0].title, "task_2");
    assert_eq!(bare_heading.tasks[0].description, "");
    assert!(bare_heading.warnings.iter().any(|w| w.contains("only 1 task")));
}

#[test]
fn a_json_plan_is_read_when_there_is_no_heading() {
    let text = r#"Sure:
```json
{"tasks": [
  {"id": "task_1", "title": "Facts", "description": "Collect.", "dependencies": [], "complexity": "LOW", "expertise": "Research"},
  {"id": 2, "title": "Draft", "dependencies": ["task_1"], "complexity": "extreme"},
  {"title": "no id"}
]}
```"#;
    let p = read_plan(text, 6);
    assert_eq!(p.tasks.len(), 2);
    assert_eq!(p.tasks[0].complexity, Complexity::Low);
    assert_eq!(p.tasks[0].expertise, "research");
    assert_eq!(p.tasks[1].id, "task_2");
    assert_eq!(p.tasks[1].dependencies, ["task_1"]);
    assert_eq!(p.tasks[1].complexity, Complexity::Medium);
}

// ---- scheduling ----------------------------------------------------------------------------

#[test]
fn waves_critical_path_and_assignments_follow_the_rules() {
    let tasks = vec![
        t("task_1", &[]),
        t("task_2", &[]),
        t("task_3", &["task_1", "task_2"]),
        t("task_4", &["task_1"]),
        t("task_5", &["task_4"]),
        t("task_6", &[]),
    ];
    let s = schedule(&tasks, false).unwrap();
    assert_eq!(
        s.waves,
        vec![vec!["task_1", "task_2", "task_6"], vec!["task_3", "task_4"], vec!["task_5"]]
    );
    assert_eq!(s.max_parallelism, 3);
    assert_eq!(s.critical_path, ["task_1", "task_4", "task_5"]);
    let idx: Vec<Vec<usize>> = vec![vec![0, 1, 5], vec![2, 3], vec![4]];
    let a = assign(&s.tasks, &idx, &["x".into(), "y".into()]);
    let got: Vec<(&str, &str, usize)> =
        a.iter().map(|a| (a.task_id.as_str(), a.model.as_str(), a.wave)).collect();
    assert_eq!(
        got,
        [
            ("task_1", "x", 1),
            ("task_2", "y", 1),
            ("task_6", "x", 1),
            ("task_3", "y", 2),
            ("task_4", "x", 2),
            ("task_5", "y", 3)
        ],
        "the counter carries across waves"
    );
    // Ties: the earliest dependency, then the earliest end task.
    let tie = vec![t("task_1", &[]), t("task_2", &[]), t("task_3", &["task_2", "task_1"])];
    assert_eq!(schedule(&tie, false).unwrap().critical_path, ["task_1", "task_3"]);
    let flat = vec![t("task_1", &[]), t("task_2", &[])];
    assert_eq!(schedule(&flat, false).unwrap().critical_path, ["task_1"]);
}

#[test]
fn a_cycle_is_refused_unless_repaired_and_the_repair_drops_forward_edges() {
    let tasks = vec![
        t("task_1", &[]),
        t("task_2", &["task_3"]),
        t("task_3", &["task_2", "task_1"]),
        t("task_4", &["task_3"]),
    ];
    assert_eq!(unschedulable(&tasks), ["task_2", "task_3", "task_4"]);
    assert!(schedule(&tasks, false).is_none());
    let s = schedule(&tasks, true).unwrap();
    assert_eq!(s.dropped, [Dropped { task_id: "task_2".into(), dependency: "task_3".into() }]);
    assert_eq!(s.waves, vec![vec!["task_1", "task_2"], vec!["task_3"], vec!["task_4"]]);
}

/// A random plan: `n` tasks, each with dependencies on any others (cycles allowed).
fn graph() -> impl Strategy<Value = Vec<Task>> {
    (1usize..12).prop_flat_map(|n| {
        proptest::collection::vec(proptest::collection::vec(0..n, 0..4), n).prop_map(move |deps| {
            deps.iter()
                .enumerate()
                .map(|(i, ds)| {
                    let mut d: Vec<String> = Vec::new();
                    for &j in ds {
                        let id = format!("task_{}", j + 1);
                        if j != i && !d.contains(&id) {
                            d.push(id);
                        }
                    }
                    let refs: Vec<&str> = d.iter().map(String::as_str).collect();
                    t(&format!("task_{}", i + 1), &refs)
                })
                .collect()
        })
    })
}

proptest! {
    /// On any graph: the repaired schedule runs every task exactly once, each after all its
    /// dependencies; the waves are minimal (a task is in wave k > 1 only because a dependency
    /// is in wave k-1); the critical path is a real chain of dependencies as long as there are
    /// waves; a schedule without repair exists exactly when the graph has no cycle, and then it
    /// drops nothing.
    #[test]
    fn schedules_of_random_graphs_keep_every_rule(tasks in graph(), workers in 1usize..6) {
        let acyclic = unschedulable(&tasks).is_empty();
        prop_assert_eq!(schedule(&tasks, false).is_some(), acyclic);
        let s = schedule(&tasks, true).unwrap();
        prop_assert!(unschedulable(&s.tasks).is_empty(), "the repair always yields a DAG");
        if acyclic {
            prop_assert!(s.dropped.is_empty());
            prop_assert_eq!(&s.tasks, &tasks);
        }
        for d in &s.dropped {
            let pos = |id: &str| tasks.iter().position(|t| t.id == id).unwrap();
            prop_assert!(pos(&d.dependency) > pos(&d.task_id), "only forward edges are dropped");
        }
        let wave_of = |id: &str| s.waves.iter().position(|w| w.iter().any(|x| x == id));
        let mut seen: Vec<&String> = s.waves.iter().flatten().collect();
        prop_assert_eq!(seen.len(), tasks.len());
        seen.sort();
        seen.dedup();
        prop_assert_eq!(seen.len(), tasks.len(), "each task exactly once");
        for task in &s.tasks {
            let w = wave_of(&task.id).unwrap();
            for d in &task.dependencies {
                prop_assert!(wave_of(d).unwrap() < w, "{} after {}", task.id, d);
            }
            if w > 0 {
                prop_assert!(task.dependencies.iter().any(|d| wave_of(d) == Some(w - 1)), "waves are minimal");
            }
        }
        for wave in &s.waves {
            let order: Vec<usize> = wave.iter().map(|id| s.tasks.iter().position(|t| &t.id == id).unwrap()).collect();
            prop_assert!(order.windows(2).all(|p| p[0] < p[1]), "plan order within a wave");
        }
        prop_assert_eq!(s.critical_path.len(), s.waves.len());
        for pair in s.critical_path.windows(2) {
            let next = s.tasks.iter().find(|t| t.id == pair[1]).unwrap();
            prop_assert!(next.dependencies.contains(&pair[0]), "a real path");
        }
        prop_assert_eq!(s.max_parallelism, s.waves.iter().map(Vec::len).max().unwrap_or(0));
        let names: Vec<String> = (0..workers).map(|i| format!("w{i}")).collect();
        let idx: Vec<Vec<usize>> = s.waves.iter().map(|w| w.iter().map(|id| s.tasks.iter().position(|t| &t.id == id).unwrap()).collect()).collect();
        let a = assign(&s.tasks, &idx, &names);
        prop_assert_eq!(a.len(), tasks.len());
        for (k, x) in a.iter().enumerate() {
            prop_assert_eq!(&x.model, &names[k % workers]);
            prop_assert_eq!(Some(x.wave - 1), wave_of(&x.task_id));
        }
    }

    /// No text makes the plan reader panic, exceed `maxTasks`, repeat an id or keep a
    /// dependency on itself or on a task not in the plan.
    #[test]
    fn plans_read_from_any_text_keep_their_invariants(
        lines in proptest::collection::vec(
            prop_oneof![
                "(?s).{0,40}",
                "(TASK|Task|## Task|\\*\\*TASK|- Task) (task_|task |#|Task-)?[0-9]{1,3}(:|\\*\\*|)[ a-z]{0,8}",
                "(Title|Description|Dependencies|Depends on|Complexity|Expertise): ?[a-zA-Z0-9_ ,#;]{0,20}",
                "(none|n/a|-|task_[0-9]|LOW|MEDIUM|HIGH|LOW\\|HIGH)",
                "EXECUTION SUMMARY:",
                "<think>|</think>",
                "[{}\\[\\]\":, a-z0-9_]{0,30}",
            ],
            0..50,
        ),
        max in 3usize..=8,
    ) {
        let text = lines.join("\n");
        let p = read_plan(&text, max);
        prop_assert!(p.tasks.len() <= max);
        let ids: Vec<&str> = p.tasks.iter().map(|t| t.id.as_str()).collect();
        for (i, task) in p.tasks.iter().enumerate() {
            prop_assert!(!ids[..i].contains(&task.id.as_str()));
            prop_assert!(!task.title.is_empty());
            for d in &task.dependencies {
                prop_assert!(d != &task.id && ids.contains(&d.as_str()));
            }
        }
        let _ = schedule(&p.tasks, true);
    }

    #[test]
    fn id_readers_never_panic(s in "(?s).{0,60}") {
        let _ = task_id(&s);
        let _ = dependency_ids(&s);
    }
}

// ---- the run -------------------------------------------------------------------------------

#[test]
fn a_run_plans_schedules_runs_the_waves_in_order_and_assembles() {
    let mut m = decompose(config(&["a", "b"]));
    let start = m.start();
    assert_eq!(events(&start), ["decompose_start", "plan_start"]);
    assert!(start.iter().any(|e| matches!(e, Effect::Timer { after_ms: 600000, .. })));
    let plan_call = stage_calls(&start)[0].clone();
    assert_eq!(
        (plan_call.key.as_str(), plan_call.model.as_str(), plan_call.role.as_str()),
        ("plan", "plan", "planner")
    );
    let p = &plan_call.messages[0].content;
    assert!(p.contains("Launch an online bakery") && p.contains("3 to 6 sub-tasks"));
    assert!(p.contains("No circular dependencies") && p.contains("TASK task_1:"));
    let out = m.on_reply(ok(&plan_call, PLAN));
    assert_eq!(events(&out), ["plan_complete", "assignment_complete", "wave_start"]);
    let plan = emitted(&out, "plan_complete").unwrap()["data"].clone();
    assert_eq!(plan["executionWaves"], json!([["task_1", "task_2"], ["task_3"], ["task_4"]]));
    assert_eq!(plan["criticalPath"], json!(["task_1", "task_3", "task_4"]));
    assert_eq!(plan["maxParallelism"], 2);
    assert_eq!(plan["replanned"], false);
    assert_eq!(plan["tasks"][2]["dependencies"], json!(["task_1", "task_2"]));
    let assigned = &emitted(&out, "assignment_complete").unwrap()["data"]["assignments"];
    assert_eq!(assigned[3], json!({ "taskId": "task_4", "model": "b", "wave": 3 }));
    let wave1 = stage_calls(&out);
    assert_eq!(
        wave1.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(),
        ["task:task_1", "task:task_2"]
    );
    assert_eq!(wave1[0].stage, "task_1");
    assert!(!wave1[0].messages[0].content.contains("=== OUTPUT OF"));
    // Wave 2 starts only when both of wave 1 have ended, and sees both outputs.
    let o2 = m.on_reply(ok(&wave1[1], "The menu: bread."));
    assert_eq!(events(&o2), ["task_complete"]);
    assert_eq!(rows(&o2)[0].stage_order, 1);
    let o1 = m.on_reply(ok(&wave1[0], "<think>hmm</think>Market: 40k people."));
    assert_eq!(events(&o1), ["task_complete", "wave_complete", "wave_start"]);
    assert_eq!(emitted(&o1, "task_complete").unwrap()["data"]["output"], "Market: 40k people.");
    assert_eq!(
        emitted(&o1, "wave_complete").unwrap(),
        json!({ "wave": 1, "data": { "completed": 2, "failed": 0 } })
    );
    let w2 = stage_calls(&o1);
    assert_eq!(w2.len(), 1);
    let p3 = &w2[0].messages[0].content;
    assert!(p3.contains("=== OUTPUT OF task_1: Market research ===\nMarket: 40k people."), "{p3}");
    assert!(p3.contains("The menu: bread.") && p3.contains("Your sub-task: task_3: Pricing"));
    assert!(!p3.contains("hmm"), "a reasoning trace is not handed on");

    let mut m = decompose(config(&["a", "b"]));
    let all = drive(&mut m, answer_all);
    assert_eq!(
        events(&all),
        [
            "decompose_start",
            "plan_start",
            "plan_complete",
            "assignment_complete",
            "wave_start",
            "task_complete",
            "task_complete",
            "wave_complete",
            "wave_start",
            "task_complete",
            "wave_complete",
            "wave_start",
            "task_complete",
            "wave_complete",
            "assembly_start",
            "assembly_complete",
            "title_complete",
        ]
    );
    assert_eq!(finished(&all).as_deref(), Some("The bakery plan, in one answer."));
    let asm = call_keyed(&all, "assembly");
    let ap = &asm.messages[0].content;
    assert!(ap.contains("- task_3: Pricing (complexity HIGH; depends on: task_1, task_2)"), "{ap}");
    assert!(ap.find("--- task_1").unwrap() < ap.find("--- task_2").unwrap());
    assert!(ap.find("--- task_2").unwrap() < ap.find("--- task_4").unwrap());
    assert!(ap.contains("None: every task produced its output."));
    let r = load_result(&stored(&all));
    assert_eq!(
        r["stats"],
        json!({ "tasks": 4, "waves": 3, "maxParallelism": 2, "criticalPath": 3,
                                   "completed": 4, "failed": 0, "skipped": 0 })
    );
    assert_eq!(r["waves"][0]["tasks"][0]["taskId"], "task_1", "plan order, not arrival order");
    assert_eq!(r["partial"], false);
    let types: Vec<(String, i32)> =
        stored(&all).iter().map(|r| (r.stage_type.clone(), r.stage_order)).collect();
    assert_eq!(types.first(), Some(&("plan".to_string(), 0)));
    assert!(types.contains(&("task_4".into(), 3)));
    assert_eq!(types.last(), Some(&("assembly".to_string(), 99)));
    assert_reloads(&all);
    assert_eq!(
        (SPEC.outcome)(&r).unwrap(),
        "4 of 4 sub-tasks in 3 waves: The bakery plan, in one answer."
    );
}

/// Drives `m` with prose for a plan and [`PLAN`] when asked again: every effect and the ask.
fn plan_after_prose(m: &mut Decompose, prose: &str) -> (Vec<Effect>, CallSpec) {
    let all = drive(m, |c| match c.key.as_str() {
        "plan" => Some(prose.into()),
        k if k == REPLAN_KEY => Some(PLAN.into()),
        _ => answer_all(c),
    });
    let again = call_keyed(&all, REPLAN_KEY);
    (all, again)
}

/// The `task_complete` event of the task `id`.
fn task_completed(all: &[Effect], id: &str) -> Value {
    all_emitted(all, "task_complete").into_iter().find(|e| e["data"]["taskId"] == id).unwrap()
}

#[test]
fn a_failed_task_leaves_a_gap_its_dependants_are_told_about() {
    let mut m = decompose(config(&["a", "dead"]));
    // task_2 goes to the second worker and fails; task_3 depends on it.
    let all = drive(&mut m, |c| {
        if c.model == "dead" && c.key == "task:task_2" {
            None
        } else {
            answer_all(c)
        }
    });
    let t2 = task_completed(&all, "task_2");
    assert_eq!(t2["data"]["status"], "failed");
    assert_eq!(t2["data"]["output"], "");
    assert_eq!(
        all_emitted(&all, "wave_complete")[0]["data"],
        json!({ "completed": 1, "failed": 1 })
    );
    let p3 = call_keyed(&all, "task:task_3");
    assert!(p3.messages[0].content.contains("=== task_2: Menu FAILED ==="));
    let asm = call_keyed(&all, "assembly");
    assert!(asm.messages[0].content.contains("- task_2: Menu: failed (down)"));
    let done = emitted(&all, "assembly_complete").unwrap();
    assert_eq!(done["partial"], true);
    assert_eq!(done["failedModels"][0]["stage"], "task_2");
    let r = load_result(&stored(&all));
    assert_eq!(r["stats"]["failed"], 1);
    let failed_row = stored(&all).into_iter().find(|r| r.stage_type == "call_failed").unwrap();
    assert_eq!(failed_row.stage_order, 1, "at its task's wave");
    assert_reloads(&all);

    // An empty reply is a failure too.
    let mut m = decompose(config(&["a"]));
    let all = drive(&mut m, |c| {
        if c.key == "task:task_4" {
            Some("<think>x</think>  ".into())
        } else {
            answer_all(c)
        }
    });
    let t4 = task_completed(&all, "task_4");
    assert_eq!(t4["data"]["error"], "empty reply");
    assert_reloads(&all);
}

#[test]
fn no_output_at_all_fails_the_run_with_the_plan_kept() {
    let mut m = decompose(config(&["a"]));
    let all = drive(&mut m, |c| if c.key.starts_with("task:") { None } else { answer_all(c) });
    assert!(failed(&all).unwrap().contains("No task produced an output"), "{:?}", failed(&all));
    assert!(emitted(&all, "assembly_start").is_none());
    let r = load_result(&stored(&all));
    assert_eq!(r["plan"]["tasks"].as_array().unwrap().len(), 4);
    assert_eq!(r["stats"]["failed"], 4);
    assert_eq!(r["assembly"], Value::Null);
    assert_reloads(&all);
}

#[test]
fn the_time_limit_lets_the_wave_finish_skips_the_rest_and_assembles() {
    let mut m = decompose(config(&["a", "b"]));
    let start = m.start();
    let out = m.on_reply(ok(&stage_calls(&start)[0], PLAN));
    let wave1 = stage_calls(&out);
    assert!(m.on_timer("global").is_empty());
    let mut all = out.clone();
    all.extend(m.on_reply(ok(&wave1[0], "Market.")));
    let last = m.on_reply(ok(&wave1[1], "Menu."));
    assert_eq!(events(&last), ["task_complete", "wave_complete", "assembly_start"]);
    assert_eq!(
        emitted(&last, "assembly_start").unwrap()["data"]["skipped"],
        json!(["task_3", "task_4"])
    );
    let skipped: Vec<StageRow> = rows(&last)
        .into_iter()
        .filter(|r| r.parsed_data.as_ref().unwrap()["status"] == "skipped")
        .collect();
    assert_eq!(
        skipped.iter().map(|r| (r.stage_type.as_str(), r.stage_order)).collect::<Vec<_>>(),
        [("task_3", 2), ("task_4", 3)]
    );
    let asm = call_keyed(&last, "assembly");
    assert!(asm.messages[0].content.contains("task_3: Pricing: skipped"));
    all.extend(last);
    all.extend(m.on_reply(ok(&asm, "Answer with gaps.")));
    let mut every = start;
    every.extend(all);
    let r = load_result(&stored(&every));
    assert_eq!(r["stats"]["skipped"], 2);
    assert_eq!(r["waves"][1]["tasks"][0]["status"], "skipped");
    assert_eq!(finished(&every).as_deref(), Some("Answer with gaps."));
    assert_reloads(&every);

    // The limit passing while the planner works: every task is skipped and the run fails.
    let mut m = decompose(config(&["a"]));
    let start = m.start();
    m.on_timer("global");
    let out = m.on_reply(ok(&stage_calls(&start)[0], PLAN));
    assert!(failed(&out).unwrap().contains("No task produced an output"));
    assert_eq!(load_result(&stored(&out))["stats"]["skipped"], 4);
}

#[test]
fn the_planner_falls_back_and_an_unreadable_plan_is_asked_once_more() {
    let mut cfg = config(&["a"]);
    cfg["facilitatorFallbackModel"] = json!("spare");
    let mut m = decompose(cfg.clone());
    let all = drive(&mut m, |c| match c.model.as_str() {
        "plan" => None,
        _ => answer_all(c),
    });
    let p = emitted(&all, "plan_complete").unwrap()["data"].clone();
    assert_eq!((p["model"].as_str(), p["fallbackFrom"].as_str()), (Some("spare"), Some("plan")));
    assert!(finished(&all).is_some());
    assert_reloads(&all);

    // Planner and backup fail: the run fails.
    let mut m = decompose(cfg);
    let all = drive(&mut m, |c| if c.key.starts_with("plan") { None } else { answer_all(c) });
    assert!(failed(&all).unwrap().contains("The planner (plan) and its backup (spare) failed"));

    // Prose first, the format when reminded: the second plan is used.
    let mut m = decompose(config(&["a"]));
    let (all, again) = plan_after_prose(&mut m, "I would first look at the market, then the menu.");
    assert_eq!(again.messages.len(), 3);
    assert_eq!(again.messages[1].role, "assistant");
    assert!(again.messages[2].content.starts_with(REMINDER_HEAD));
    let p = emitted(&all, "plan_complete").unwrap()["data"].clone();
    assert_eq!(fields(&p, ["replanned", "reasked"]), [json!(true), json!("format")]);
    let plan_row = stored(&all).into_iter().find(|r| r.stage_type == "plan").unwrap();
    assert_eq!(plan_row.content, PLAN);
    assert!(plan_row.parsed_data.unwrap()["firstReply"]
        .as_str()
        .unwrap()
        .contains("look at the market"));
    assert!(finished(&all).is_some());
    assert_reloads(&all);

    // Prose twice: the run fails, the plan row keeping the reply.
    let mut m = decompose(config(&["a"]));
    let all = drive(&mut m, |c| {
        if c.key.starts_with("plan") {
            Some("No plan, sorry.".into())
        } else {
            answer_all(c)
        }
    });
    assert!(failed(&all).unwrap().contains("even after a reminder"));
    let r = load_result(&stored(&all));
    assert_eq!(r["plan"]["tasks"], json!([]));
    assert_eq!(
        stage_calls(&all).iter().filter(|c| c.key.starts_with("plan")).count(),
        2,
        "asked once more, no more"
    );
}

const CYCLIC: &str = "\
TASK task_1:\nTitle: A\nDependencies: none\n\
TASK task_2:\nTitle: B\nDependencies: task_3\n\
TASK task_3:\nTitle: C\nDependencies: task_2, task_1\n";

#[test]
fn a_cycle_is_asked_about_once_then_replaced_or_repaired_never_run_as_written() {
    // The planner fixes it.
    let mut m = decompose(config(&["a"]));
    let all = drive(&mut m, |c| match c.key.as_str() {
        "plan" => Some(CYCLIC.into()),
        k if k == REPLAN_KEY => Some(PLAN.into()),
        _ => answer_all(c),
    });
    let again = call_keyed(&all, REPLAN_KEY);
    assert!(again.messages[2].content.contains("task_2, task_3"), "{}", again.messages[2].content);
    let p = emitted(&all, "plan_complete").unwrap()["data"].clone();
    assert_eq!(fields(&p, ["replanned", "reasked"]), [json!(true), json!("cycle")]);
    assert_eq!(p["tasks"].as_array().unwrap().len(), 4);
    assert_eq!(p["droppedDependencies"], json!([]));
    assert_reloads(&all);

    // It answers with a cycle again: the first plan runs with its forward edges dropped.
    let mut m = decompose(config(&["a"]));
    let all =
        drive(
            &mut m,
            |c| if c.key.starts_with("plan") { Some(CYCLIC.into()) } else { answer_all(c) },
        );
    let p = emitted(&all, "plan_complete").unwrap()["data"].clone();
    assert_eq!(p["replanned"], false);
    assert_eq!(p["droppedDependencies"], json!([{ "taskId": "task_2", "dependency": "task_3" }]));
    assert_eq!(p["executionWaves"], json!([["task_1", "task_2"], ["task_3"]]));
    assert!(p["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("cycle")));
    // The plan asked for again is kept beside the first, with how it was read.
    let plan = rows(&all).into_iter().find(|r| r.stage_type == "plan").unwrap();
    let stored = plan.parsed_data.unwrap();
    assert_eq!((plan.content.as_str(), stored["firstReply"].as_str()), (CYCLIC, Some(CYCLIC)));
    assert_eq!(stored["setAsideReply"], CYCLIC);
    assert_eq!(
        (stored["readFrom"].as_str(), stored["setAsideReadFrom"].as_str()),
        (Some("text"), Some("text"))
    );
    let started: Vec<String> =
        all_emitted(&all, "wave_start").iter().map(|w| w["data"]["tasks"].to_string()).collect();
    assert_eq!(started.len(), 2);
    assert!(finished(&all).is_some());
    assert_reloads(&all);

    // The re-ask fails: the repaired first plan runs.
    let mut m = decompose(config(&["a"]));
    let all = drive(&mut m, |c| match c.key.as_str() {
        "plan" => Some(CYCLIC.into()),
        k if k == REPLAN_KEY => None,
        _ => answer_all(c),
    });
    assert_eq!(
        emitted(&all, "plan_complete").unwrap()["data"]["droppedDependencies"][0]["taskId"],
        "task_2"
    );
    assert!(finished(&all).is_some());
    assert_eq!(emitted(&all, "assembly_complete").unwrap()["partial"], true);
    assert_reloads(&all);
}

#[test]
fn the_assembler_falls_back_then_the_outputs_are_concatenated() {
    let mut cfg = config(&["a"]);
    cfg["chairmanFallbackModel"] = json!("spare");
    let mut m = decompose(cfg.clone());
    let all = drive(&mut m, |c| if c.model == "asm" { None } else { answer_all(c) });
    let a = emitted(&all, "assembly_complete").unwrap();
    assert_eq!(
        (a["data"]["model"].as_str(), a["data"]["fallbackFrom"].as_str()),
        (Some("spare"), Some("asm"))
    );
    assert_eq!(a["partial"], true);
    assert_reloads(&all);

    let mut m = decompose(cfg);
    let all = drive(&mut m, |c| {
        if c.key.starts_with("assembly") || c.key == "task:task_2" {
            None
        } else {
            answer_all(c)
        }
    });
    let a = emitted(&all, "assembly_complete").unwrap();
    assert_eq!(a["data"]["fallback"], "concatenated");
    assert_eq!(a["data"]["model"], Value::Null);
    let answer = finished(&all).unwrap();
    assert_eq!(
        answer,
        "## task_1: Market research\n\nOutput of task:task_1.\n\n---\n\n## task_3: Pricing\n\nOutput of task:task_3.\n\n---\n\n## task_4: Budget\n\nOutput of task:task_4."
    );
    let failed_models: Vec<&str> = a["failedModels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["stage"].as_str().unwrap())
        .collect();
    assert_eq!(failed_models, ["task_2", "assembly", "assembly"]);
    let r = load_result(&stored(&all));
    assert!((SPEC.outcome)(&r)
        .unwrap()
        .contains("3 of 4 sub-tasks in 3 waves (1 missing), not assembled"));
    assert_reloads(&all);
}

#[test]
fn late_and_unknown_replies_change_nothing() {
    let mut m = decompose(config(&["a"]));
    let start = m.start();
    let plan = stage_calls(&start)[0].clone();
    let out = m.on_reply(ok(&plan, PLAN));
    let w1 = stage_calls(&out);
    let mut stray = w1[0].clone();
    stray.key = "task:task_4".into();
    assert!(m.on_reply(ok(&stray, "early")).is_empty(), "a task not in the running wave");
    assert!(m.on_reply(ok(&plan, PLAN)).is_empty(), "the plan again");
    m.on_reply(ok(&w1[0], "x"));
    assert!(m.on_reply(ok(&w1[0], "again")).is_empty(), "a task twice");
}

#[test]
fn requests_are_checked_field_by_field() {
    let d = offline_defaults();
    let body = |cfg: Value| json!({ "mode": "decompose", "question": "q", "modeConfig": cfg });
    let ok = validate(&body(json!({})), &d).unwrap();
    assert_eq!(
        ok.config,
        json!({ "plannerModel": "sim/alpha", "workerModels": ["sim/alpha", "sim/beta", "sim/gamma"],
                "assemblerModel": "sim/alpha", "maxTasks": 6, "timeoutMs": 120000,
                "globalTimeoutMs": 600000 })
    );
    let same =
        validate(&body(json!({ "workerModels": ["x", "x"], "plannerModel": "p" })), &d).unwrap();
    assert_eq!(same.config["workerModels"], json!(["x", "x"]), "one worker may take every task");
    assert_eq!(same.config["assemblerModel"], "p");
    let cases = [
        (json!({ "workerModels": [] }), "modeConfig.workerModels"),
        (json!({ "workerModels": ["a", "b", "c", "d", "e", "f"] }), "modeConfig.workerModels"),
        (json!({ "workerModels": ["a", " "] }), "modeConfig.workerModels"),
        (json!({ "plannerModel": "" }), "modeConfig.plannerModel"),
        (json!({ "assemblerModel": " " }), "modeConfig.assemblerModel"),
        (json!({ "maxTasks": 2 }), "modeConfig.maxTasks"),
        (json!({ "maxTasks": 9 }), "modeConfig.maxTasks"),
        (json!({ "maxTasks": "six" }), "modeConfig.maxTasks"),
        (json!({ "timeoutMs": 9999 }), "modeConfig.timeoutMs"),
        (json!({ "timeoutMs": 300001 }), "modeConfig.timeoutMs"),
        (json!({ "globalTimeoutMs": 59999 }), "modeConfig.globalTimeoutMs"),
        (json!({ "globalTimeoutMs": 1800001 }), "modeConfig.globalTimeoutMs"),
        (json!({ "workers": ["a"] }), "modeConfig.workers"),
    ];
    for (cfg, field) in cases {
        let e = validate(&body(cfg.clone()), &d).unwrap_err();
        assert_eq!(e.field, field, "{cfg}: {e}");
    }
    let e = validate(&json!({ "mode": "decompose", "question": "" }), &d).unwrap_err();
    assert_eq!(e.field, "question");
    let mut with = d.clone();
    with.fallback.facilitator = Some("spare".into());
    with.fallback.chairman = Some("sim/alpha".into());
    let v = validate(&body(json!({})), &with).unwrap();
    assert_eq!(v.config["facilitatorFallbackModel"], "spare");
    assert!(v.config.get("chairmanFallbackModel").is_none(), "not the assembler itself");
    assert!(Decompose::new(&json!({ "plannerModel": "p" }), ctx("q", vec![], false)).is_err());
    let mut bad = config(&["a"]);
    bad["maxTasks"] = json!(20);
    assert!(Decompose::new(&bad, ctx("q", vec![], false)).is_err());
}

fn sim_drive(planner: &str, seed: u64, malformed: bool, hostile: bool) -> Vec<Effect> {
    let mut cfg = config(&["sim/a", "sim/b", "sim/a"]);
    cfg["plannerModel"] = json!(planner);
    cfg["assemblerModel"] = json!("sim/c");
    let mut m = decompose(cfg);
    drive(&mut m, |c| {
        sim_answer(&sim_call_ask(
            c,
            &c.messages.last().unwrap().content,
            seed + c.key.len() as u64,
            malformed,
            hostile,
            None,
        ))
    })
}

#[test]
fn the_sim_plans_works_and_assembles_in_format_and_now_and_then_messily() {
    for seed in 0..6u64 {
        for malformed in [false, true] {
            let all = sim_drive("sim/alpha", seed, malformed, seed == 3);
            let answer = finished(&all).unwrap_or_else(|| panic!("{:?}", failed(&all)));
            let p = emitted(&all, "plan_complete").unwrap()["data"].clone();
            let n = p["tasks"].as_array().unwrap().len();
            assert!((4..=6).contains(&n), "{p}");
            assert!(p["executionWaves"].as_array().unwrap().len() >= 2, "{p}");
            assert_eq!(p["replanned"], false);
            assert!(answer.contains("simulated answer") && answer.contains("In short"));
            assert_eq!(answer.matches("## ").count(), n + 1, "{answer}");
            if seed == 3 {
                assert!(answer.contains("<script>"));
            }
            if malformed {
                assert!(
                    p["warnings"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|w| w.as_str().unwrap().contains("No complexity")),
                    "{p}"
                );
            }
            assert_reloads(&all);
        }
    }
    // The planners by name: a cycle fixed when asked, a cycle repaired, prose reminded.
    let all = sim_drive("sim/cyclic", 1, false, false);
    let p = emitted(&all, "plan_complete").unwrap()["data"].clone();
    assert_eq!(fields(&p, ["replanned", "reasked"]), [json!(true), json!("cycle")]);
    let all = sim_drive("sim/loop", 1, false, false);
    let p = emitted(&all, "plan_complete").unwrap()["data"].clone();
    assert_eq!(p["droppedDependencies"].as_array().unwrap().len(), 1, "{p}");
    assert!(finished(&all).is_some());
    let all = sim_drive("sim/prose", 1, false, false);
    assert_eq!(emitted(&all, "plan_complete").unwrap()["data"]["reasked"], "format");
    assert!(finished(&all).is_some());
    let all = sim_drive("sim/planless", 1, false, false);
    assert!(failed(&all).is_some());
    let other = sim_ask("sim/a", "Write a poem.", 1, false, None);
    assert_eq!(sim_answer(&other), None);
}

// ---- structured replies --------------------------------------------------------------------

/// A run whose planner is asked for JSON (its route takes structured output).
fn structured(cfg: Value) -> Decompose {
    let mut c = ctx("Launch an online bakery", vec![], true);
    c.structured = crate::modes::Structured::models(["plan"]);
    Decompose::new(&cfg, c).unwrap()
}

fn json_task(id: &str, deps: &[&str], complexity: &str) -> Value {
    json!({ "id": id, "title": format!("Title of {id}"), "description": format!("What {id} produces."),
            "dependencies": deps, "complexity": complexity, "expertise": "Analytical" })
}

fn json_plan(tasks: Vec<Value>) -> String {
    json!({ "reasoning": "research first, then price", "tasks": tasks }).to_string()
}

/// The four tasks of [`PLAN`], as JSON.
fn four_tasks() -> Vec<Value> {
    vec![
        json_task("task_1", &[], "MEDIUM"),
        json_task("task_2", &[], "LOW"),
        json_task("task_3", &["task_1", "task_2"], "HIGH"),
        json_task("task_4", &["task_3"], "MEDIUM"),
    ]
}

#[test]
fn the_plan_schema_takes_this_runs_ids_and_refuses_the_rest() {
    let s = plan_schema(4);
    assert_eq!(s.name, PLAN_SCHEMA);
    let keys: Vec<&String> = s.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "tasks"], "the reasoning comes first");
    let tasks = &s.schema["properties"]["tasks"];
    assert_eq!((tasks["minItems"].as_u64(), tasks["maxItems"].as_u64()), (Some(1), Some(4)));
    let item = &tasks["items"]["properties"];
    let ids = json!(["task_1", "task_2", "task_3", "task_4"]);
    assert_eq!(item["id"]["enum"], ids);
    assert_eq!(item["dependencies"]["items"]["enum"], ids);
    assert_eq!(item["dependencies"]["maxItems"], 3);
    assert_eq!(item["complexity"]["enum"], json!(["LOW", "MEDIUM", "HIGH"]));
    let order: Vec<&String> = item.as_object().unwrap().keys().collect();
    assert_eq!(order, ["id", "title", "description", "dependencies", "complexity", "expertise"]);
    let fits = |tasks: Vec<Value>| {
        s.validate(&serde_json::from_str::<Value>(&json_plan(tasks)).unwrap()).is_ok()
    };
    assert!(fits(four_tasks()));
    // One task: the reader goes on with fewer than 3, with a warning.
    assert!(fits(vec![json_task("task_1", &[], "LOW")]));
    // A repeated id, a dependency on itself or on a task the plan lacks are this run's ids:
    // the schema takes them and the reader cleans them, as in text.
    assert!(fits(vec![
        json_task("task_1", &["task_1", "task_4"], "LOW"),
        json_task("task_1", &[], "LOW")
    ]));
    for bad in [
        // An id outside the run's, a spelling the reader would normalise, a foreign dependency.
        vec![json_task("task_5", &[], "LOW")],
        vec![json_task("task 1", &[], "LOW")],
        vec![json_task("task_1", &["task_9"], "LOW")],
        vec![json_task("task_1", &["1"], "LOW")],
        // A complexity outside the three.
        vec![json_task("task_1", &[], "EXTREME")],
        vec![json_task("task_1", &[], "low")],
        // No task, too many tasks, too many dependencies.
        vec![],
        (1..=5).map(|i| json_task(&format!("task_{}", i.min(4)), &[], "LOW")).collect(),
        vec![json_task("task_1", &["task_2", "task_3", "task_4", "task_2"], "LOW")],
    ] {
        assert!(!fits(bad.clone()), "{bad:?}");
    }
    let mut missing = json_task("task_1", &[], "LOW");
    missing.as_object_mut().unwrap().remove("dependencies");
    assert!(!fits(vec![missing]));
    let mut foreign = json_task("task_1", &[], "LOW");
    foreign["wave"] = json!(1);
    assert!(!fits(vec![foreign]));
    let long = json_task("task_1", &[], "LOW");
    let mut long = long;
    long["title"] = json!("x".repeat(TITLE_MAX_CHARS + 1));
    assert!(!fits(vec![long]));
    // The run's own bound: ids up to its maxTasks.
    assert_eq!(
        plan_schema(8).schema["properties"]["tasks"]["items"]["properties"]["id"]["enum"][7],
        "task_8"
    );
}

#[test]
fn a_plan_is_read_from_json_when_it_fits_and_cleaned_as_text_is() {
    let s = plan_schema(6);
    let (j, from) = read_plan_reply(&json_plan(four_tasks()), 6, &s);
    assert_eq!(from, Some(ReadFrom::Json));
    let (t, text_from) = read_plan_reply(PLAN, 6, &s);
    assert_eq!(text_from, Some(ReadFrom::Text));
    let shape = |p: &PlanReading| -> Vec<(String, Vec<String>, Complexity)> {
        p.tasks.iter().map(|t| (t.id.clone(), t.dependencies.clone(), t.complexity)).collect()
    };
    assert_eq!(shape(&j), shape(&t));
    assert_eq!(j.tasks[0].title, "Title of task_1");
    assert_eq!(j.tasks[0].description, "What task_1 produces.");
    assert_eq!(j.tasks[0].expertise, "analytical", "lower-cased, as in text");
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);

    // The text's rules: a repeated id keeps its first task, a dependency on itself or on a task
    // not in the plan is removed, each dependency once, tasks past maxTasks dropped, an echoed
    // placeholder or an empty field states nothing.
    let mut first = json_task("task_1", &["task_1", "task_6"], "LOW");
    first["title"] = json!("<text>");
    first["expertise"] = json!(" ");
    let reply = json_plan(vec![
        first,
        json_task("task_2", &["task_1", "task_1"], "HIGH"),
        json_task("task_1", &[], "HIGH"),
        json_task("task_3", &["task_2"], "MEDIUM"),
        json_task("task_4", &[], "MEDIUM"),
    ]);
    let (p, from) = read_plan_reply(&format!("<think>hmm</think>```json\n{reply}\n```"), 3, &s);
    assert_eq!(from, Some(ReadFrom::Json));
    let ids: Vec<&str> = p.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["task_1", "task_2", "task_3"]);
    assert_eq!((p.tasks[0].title.as_str(), p.tasks[0].expertise.as_str()), ("task_1", "general"));
    assert_eq!(p.tasks[0].complexity, Complexity::Low, "the first of a repeated id is kept");
    assert!(p.tasks[0].dependencies.is_empty());
    assert_eq!(p.tasks[1].dependencies, ["task_1"]);
    let w = p.warnings.join("\n");
    assert_contains_all(
        &w,
        &[
            "task_1 appears twice",
            "more than 3 tasks: task_4 dropped",
            "task_1 depended on itself",
            "task_1 depended on task_6, which is not in the plan",
        ],
    );
    // A cycle is read as stated (the run asks about it); it is never hidden.
    let (p, from) = read_plan_reply(
        &json_plan(vec![
            json_task("task_1", &["task_2"], "LOW"),
            json_task("task_2", &["task_1"], "LOW"),
        ]),
        6,
        &s,
    );
    assert_eq!(from, Some(ReadFrom::Json));
    assert_eq!(unschedulable(&p.tasks), ["task_1", "task_2"]);

    // JSON that does not fit: the text reader, which reads a lenient JSON plan as before.
    let unfit = json_plan(vec![
        json_task("task_1", &[], "EXTREME"),
        json_task("task_9", &["task_1"], "LOW"),
    ]);
    let (p, from) = read_plan_reply(&unfit, 6, &s);
    assert_eq!(from, Some(ReadFrom::Text));
    assert_eq!(p.tasks.len(), 2);
    assert_eq!(p.tasks[0].complexity, Complexity::Medium, "EXTREME is no complexity");
    // Neither fits nor reads: nothing, and no readFrom.
    for nothing in [
        r#"{"reasoning": "", "tasks": [{"id": "task_1", "title": "A""#.to_string(),
        format!("<think>{}", json_plan(four_tasks())),
        "I would look at the market first.".to_string(),
    ] {
        let (p, from) = read_plan_reply(&nothing, 6, &s);
        assert_eq!((p.tasks.len(), from), (0, None), "{nothing}");
    }
}

proptest! {
    /// Whatever JSON the schema allows is read whole once cleaned: every first task of an id,
    /// with its title, description, complexity, expertise, and its dependencies on other tasks
    /// of the plan, each once, in order; every removal said in a warning.
    #[test]
    fn any_plan_the_schema_allows_is_read_without_loss(seed in any::<u64>(), max in 3usize..=8) {
        let s = plan_schema(max);
        let n = std::cell::Cell::new(0u64);
        let words = |f: &str| { n.set(n.get() + 1); format!("{f} {seed:x} {}", n.get()) };
        let mut rng = SplitMix64::new(seed);
        let mut v = schema::sample(&s.schema, &mut rng, &words);
        // More tasks than the sampler's fewest, with dependencies drawn from the run's ids.
        let item = &s.schema["properties"]["tasks"]["items"];
        let ids = plan_ids(max);
        for _ in 0..rng.below(max) {
            let mut t = schema::sample(item, &mut rng, &words);
            let deps: Vec<&String> = (0..rng.below(max)).map(|_| &ids[rng.below(max)]).collect();
            t["dependencies"] = json!(deps);
            v["tasks"].as_array_mut().unwrap().push(t);
        }
        prop_assert!(s.validate(&v).is_ok(), "{}", v);
        let (p, from) = read_plan_reply(&v.to_string(), max, &s);
        prop_assert_eq!(from, Some(ReadFrom::Json));
        let stated = v["tasks"].as_array().unwrap();
        let mut firsts: Vec<&Value> = Vec::new();
        for t in stated {
            if !firsts.iter().any(|f| f["id"] == t["id"]) {
                firsts.push(t);
            }
        }
        prop_assert_eq!(p.tasks.len(), firsts.len());
        let kept: Vec<&str> = firsts.iter().map(|t| t["id"].as_str().unwrap()).collect();
        for (got, x) in p.tasks.iter().zip(&firsts) {
            prop_assert_eq!(json!(got.id), x["id"].clone());
            prop_assert_eq!(json!(got.title), x["title"].clone());
            prop_assert_eq!(json!(got.description), x["description"].clone());
            prop_assert_eq!(json!(got.complexity), x["complexity"].clone());
            prop_assert_eq!(json!(got.expertise), x["expertise"].clone());
            let mut deps: Vec<&str> = Vec::new();
            for d in x["dependencies"].as_array().unwrap().iter().filter_map(Value::as_str) {
                if d != got.id && kept.contains(&d) && !deps.contains(&d) {
                    deps.push(d);
                }
            }
            prop_assert_eq!(&got.dependencies, &deps);
            let removed = x["dependencies"].as_array().unwrap().iter().any(|d| d == &x["id"] || !kept.contains(&d.as_str().unwrap()));
            prop_assert_eq!(removed, p.warnings.iter().any(|w| w.starts_with(&format!("{} depended on", got.id))));
        }
        prop_assert_eq!(firsts.len() < stated.len(), p.warnings.iter().any(|w| w.contains("appears twice")));
    }
}

#[test]
fn the_json_prompts_keep_the_rules_and_swap_the_format() {
    let s = plan_schema(5);
    let (json, text) = (plan_prompt("q?", 5, Some(&s)), plan_prompt("q?", 5, None));
    for kept in [
        PLAN_HEAD,
        "=== QUESTION ===\nq?\n=== END OF QUESTION ===",
        "- Split it into 3 to 5 sub-tasks.",
        "- No circular dependencies.",
        "- The first tasks have no dependencies.",
    ] {
        assert!(json.contains(kept) && text.contains(kept), "{kept}");
    }
    assert!(json.contains("Reply with a single JSON object") && !json.contains("TASK task_1:"));
    assert!(json.contains(r#""task_1", "task_2", "task_3", "task_4", "task_5""#), "{json}");
    assert!(json.find("\"reasoning\"").unwrap() < json.find("\"tasks\"").unwrap());
    assert!(text.contains("TASK task_1:\nTitle: <short title>") && !text.contains("JSON"));
    let (json, text) = (reminder_prompt(5, Some(&s)), reminder_prompt(5, None));
    assert!(json.starts_with(REMINDER_HEAD) && json.contains("Reply with a single JSON object"));
    assert!(!json.contains("TASK task_<n>:"));
    assert!(text.contains("each starting with a line `TASK task_<n>:`") && !text.contains("JSON"));
    let ids = ["task_2".to_string(), "task_3".to_string()];
    let (json, text) = (cycle_prompt(&ids, 5, Some(&s)), cycle_prompt(&ids, 5, None));
    for p in [&json, &text] {
        assert!(p.starts_with(CYCLE_HEAD) && p.contains("task_2, task_3"));
    }
    assert!(json.contains("Reply with a single JSON object") && !json.contains("TASK task_1:"));
    assert!(text.contains("TASK task_1:"));
}

#[test]
fn a_planner_that_takes_json_is_asked_for_it_and_read_from_it() {
    let mut m = structured(config(&["a", "b"]));
    let all = drive(&mut m, |c| match c.key.as_str() {
        "plan" => Some(json_plan(four_tasks())),
        _ => answer_all(c),
    });
    let plan = call_keyed(&all, "plan");
    assert_eq!(schema_name(&plan), Some(PLAN_SCHEMA));
    let p = &plan.messages[0].content;
    assert!(p.contains("Reply with a single JSON object") && !p.contains("TASK task_1:"));
    let d = emitted(&all, "plan_complete").unwrap()["data"].clone();
    assert_eq!(d["readFrom"], "json");
    assert_eq!(d["executionWaves"], json!([["task_1", "task_2"], ["task_3"], ["task_4"]]));
    let row = stored(&all).into_iter().find(|r| r.stage_type == "plan").unwrap();
    assert_eq!(row.parsed_data.unwrap()["readFrom"], "json");
    // Task outputs and the assembly are text a person reads: no schema; the outputs they
    // quote are named, for fitting a small context.
    let calls = stage_calls(&all);
    let pricing = calls.iter().find(|c| c.key == "task:task_3").unwrap();
    assert!(pricing.schema.is_none());
    let names: Vec<&str> = pricing.material.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["the question", "the output of task_1", "the output of task_2"]);
    assert!(quotes_its_material(pricing));
    let asm = calls.iter().find(|c| c.key == "assembly").unwrap();
    assert!(asm.schema.is_none());
    assert_eq!(asm.material.len(), 5);
    assert_eq!(asm.material[0].name, "the question");
    assert_eq!(plan.material.len(), 1);
    assert!(p.contains(&*plan.material[0].text));
    assert!(quotes_its_material(asm));
    assert!(finished(&all).is_some());
    assert_reloads(&all);

    // A planner whose route takes no structured output: the text prompt, the schema still
    // named (the engine sends it only where the route takes it), read from the text.
    let mut m = decompose(config(&["a"]));
    let all = drive(&mut m, answer_all);
    let plan = call_keyed(&all, "plan");
    assert_eq!(schema_name(&plan), Some(PLAN_SCHEMA));
    assert!(plan.messages[0].content.contains("TASK task_1:"));
    assert_eq!(emitted(&all, "plan_complete").unwrap()["data"]["readFrom"], "text");
}

#[test]
fn a_json_planner_asked_again_is_asked_for_json_and_each_reading_is_said() {
    // A cycle in JSON: asked again in JSON, with the schema; the second plan replaces it.
    let cyclic = json_plan(vec![
        json_task("task_1", &[], "LOW"),
        json_task("task_2", &["task_3"], "LOW"),
        json_task("task_3", &["task_2", "task_1"], "LOW"),
    ]);
    let mut m = structured(config(&["a"]));
    let all = drive(&mut m, |c| match c.key.as_str() {
        "plan" => Some(cyclic.clone()),
        k if k == REPLAN_KEY => Some(json_plan(four_tasks())),
        _ => answer_all(c),
    });
    let again = call_keyed(&all, REPLAN_KEY);
    assert_eq!(schema_name(&again), Some(PLAN_SCHEMA));
    assert!(again.messages[0].content.contains("Reply with a single JSON object"));
    let ask = &again.messages[2].content;
    assert!(ask.starts_with(CYCLE_HEAD) && ask.contains("task_2, task_3"));
    // The question and the first plan are named, for fitting a small context.
    let names: Vec<&str> = again.material.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["the question", "the first plan"]);
    assert!(again
        .material
        .iter()
        .all(|m| again.messages.iter().any(|x| x.content.contains(&*m.text))));
    assert!(ask.contains("Reply with a single JSON object") && !ask.contains("TASK task_1:"));
    let d = emitted(&all, "plan_complete").unwrap()["data"].clone();
    assert_eq!(fields(&d, ["replanned", "readFrom"]), [json!(true), json!("json")]);
    let row = stored(&all).into_iter().find(|r| r.stage_type == "plan").unwrap();
    assert_eq!(row.parsed_data.unwrap()["firstReadFrom"], "json");
    assert_reloads(&all);

    // Prose, then the text format when reminded in JSON: read from the text.
    let mut m = structured(config(&["a"]));
    let (all, again) = plan_after_prose(&mut m, "I would look at the market first.");
    assert!(again.messages[2].content.starts_with(REMINDER_HEAD));
    let d = emitted(&all, "plan_complete").unwrap()["data"].clone();
    assert_eq!(fields(&d, ["reasked", "readFrom"]), [json!("format"), json!("text")]);
    let row = stored(&all).into_iter().find(|r| r.stage_type == "plan").unwrap();
    assert!(row.parsed_data.unwrap().get("firstReadFrom").is_none(), "the prose was not read");

    // Nothing read twice: no readFrom, the run fails.
    let mut m = structured(config(&["a"]));
    let all = drive(&mut m, |c| c.key.starts_with("plan").then(|| "No plan.".to_string()));
    assert!(failed(&all).is_some());
    assert!(emitted(&all, "plan_complete").unwrap()["data"].get("readFrom").is_none());
}

#[test]
fn a_decompose_run_on_the_sim_reads_its_plan_from_json() {
    for (planner, max) in
        [("sim/alpha", 6), ("sim/xss-beta", 4), ("sim/cyclic-a", 8), ("sim/alpha", 3)]
    {
        let mut cfg = config(&["sim/a", "sim/b"]);
        cfg["plannerModel"] = json!(planner);
        cfg["assemblerModel"] = json!("sim/c");
        cfg["maxTasks"] = json!(max);
        let mut c = ctx("Launch an online bakery", vec![], true);
        c.structured = crate::modes::Structured::models([planner, "sim/a", "sim/b", "sim/c"]);
        let mut m = Decompose::new(&cfg, c).unwrap();
        let all = drive_on_sim_text(&mut m);
        assert!(finished(&all).is_some(), "{:?}", failed(&all));
        let d = emitted(&all, "plan_complete").unwrap()["data"].clone();
        assert_eq!(d["readFrom"], "json", "{d}");
        let n = d["tasks"].as_array().unwrap().len();
        assert!(n <= max && n >= 3.min(max), "{d}");
        assert!(d["warnings"].as_array().unwrap().is_empty(), "{d}");
        // The cyclic planner is asked again, in JSON, and its second plan is read from it.
        assert_eq!(d["replanned"], planner.starts_with("sim/cyclic"), "{d}");
        assert_eq!(machine_read_stages(&all), ["plan"]);
        assert_reloads(&all);
    }
}

#[test]
fn the_sim_planner_answers_its_schema_in_json_and_no_other() {
    for max in 3..=8 {
        let s = plan_schema(max);
        let prompt = plan_prompt("q", max, Some(&s));
        for (seed, hostile) in (0..6u64).zip([false, true].into_iter().cycle()) {
            let ask = sim_ask("sim/alpha", &prompt, seed, hostile, Some(&s));
            let reply = sim_answer(&ask).unwrap();
            let (p, from) = read_plan_reply(&reply, max, &s);
            assert_eq!(from, Some(ReadFrom::Json), "{reply}");
            assert!(p.tasks.len() <= max && p.warnings.is_empty(), "{:?}", p.warnings);
            assert!(unschedulable(&p.tasks).is_empty());
        }
    }
    let other = ReplySchema::new("blueprint_outline", schema::reasoned([]));
    let s = plan_schema(6);
    let prompt = plan_prompt("q", 6, Some(&s));
    for (prompt, schema) in [(prompt.as_str(), &other), ("You are one of the workers", &s)] {
        let ask = sim_ask("sim/alpha", prompt, 1, false, Some(schema));
        assert_eq!(sim_answer(&ask), None);
    }
}

// ---- the export's report -------------------------------------------------------------------

/// The report of `result`, checked to show no JSON, missing value, task id or result key.
fn readable(result: &Value) -> String {
    readable_report(result, report, &["task_", "TASK", "HIGH", "completed"])
}

#[test]
fn the_report_tables_the_sub_tasks_and_gives_the_critical_path() {
    let plan = PLAN.replace("Dependencies: task_3", "Dependencies: task_3, task_7");
    let mut m = decompose(config(&["a", "dead"]));
    let all = drive(&mut m, |c| match c.key.as_str() {
        "plan" => Some(plan.clone()),
        "task:task_2" => None,
        _ => answer_all(c),
    });
    let r = readable(&load_result(&stored(&all)));
    assert_contains_all(
        &r,
        &[
            "|---",
            "**Plan:** 4 sub-tasks in 3 waves, at most 2 at once; planned by plan.",
            "**Assembled by:** asm.",
            "| 1 | Market research | — | 1 | a | medium | done (3 words) |",
            "| 2 | Menu | — | 1 | dead | low | failed (down) |",
            "| 3 | Pricing | 1, 2 | 2 | a | high | done (3 words) |",
            "| 4 | Budget | 3 | 3 |",
            "**Critical path** (3 sub-tasks): Market research (1) → Pricing (3) → Budget (4).",
            "- task 4 depended on task 7, which is not in the plan: removed.",
        ],
    );

    // The time limit: the waves not started are skipped, and said why.
    let mut m = decompose(config(&["a", "b"]));
    let start = m.start();
    let out = m.on_reply(ok(&stage_calls(&start)[0], PLAN));
    let wave1 = stage_calls(&out);
    m.on_timer("global");
    let mut all = start;
    all.extend(out);
    all.extend(m.on_reply(ok(&wave1[0], "Market.")));
    let last = m.on_reply(ok(&wave1[1], "Menu."));
    let asm = call_keyed(&last, "assembly");
    all.extend(last);
    all.extend(m.on_reply(ok(&asm, "Answer with gaps.")));
    let r = readable(&load_result(&stored(&all)));
    assert!(
        r.contains("| 3 | Pricing | 1, 2 | 2 | a | high | skipped: the run's time limit (600 s) passed before its wave |"),
        "{r}"
    );
}

#[test]
fn an_empty_or_partial_result_reports_what_there_is() {
    assert_eq!(report(&json!({})), "");
    // No output at all: the plan and every task failed, nothing assembled.
    let mut m = decompose(config(&["a"]));
    let all = drive(&mut m, |c| if c.key.starts_with("task:") { None } else { answer_all(c) });
    let r = readable(&load_result(&stored(&all)));
    assert!(r.contains("|---") && r.contains("failed (down)") && !r.contains("Assembled"), "{r}");
    // A plan as far as it was stored: a task with no title, no outcome yet.
    let plan = PLAN.replace("Title: Menu\n", "");
    let mut m = decompose(config(&["a", "b"]));
    let mut all = m.start();
    all.extend(m.on_reply(ok(&stage_calls(&all)[0], &plan)));
    let r = readable(&load_result(&stored(&all)));
    assert!(r.contains("| 2 | task 2 | — | 1 | b | low | not run |"), "{r}");
}
