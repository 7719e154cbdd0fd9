//! What a Decompose run stores and reads back: the result from the stored rows, its outcome and
//! the export's report.

use super::*;

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
    static RE: OnceLock<Regex> = OnceLock::new();
    re(&RE, r"\btask_(\d+)\b").replace_all(text, "task $1").into_owned()
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
