//! What a chain stores and reads back: the step rows, the result, and the export's report.

use super::*;

/// A completed or skipped step, as stored and as the result lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    pub step: usize,
    pub model: String,
    pub mandate: Mandate,
    pub mandate_display: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_mandate: Option<String>,
    pub based_on_step: Option<usize>,
    pub content: String,
    pub word_count: usize,
    pub previous_word_count: usize,
    pub word_count_delta: i64,
    pub editor_notes: Vec<String>,
    pub response_time_ms: Option<i64>,
    pub skipped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    pub total_steps: usize,
}

/// `chain_complete`'s data: the final version and the progression.
pub(super) fn summary(steps: &[StepResult], last: &StepResult) -> Value {
    let done: Vec<&StepResult> = steps.iter().filter(|s| !s.skipped).collect();
    json!({
        "finalStep": last.step, "finalContent": last.content, "completedSteps": done.len(),
        "skippedSteps": steps.iter().filter(|s| s.skipped).map(|s| s.step).collect::<Vec<_>>(),
        "wordCountProgression": done.iter().map(|s| json!({ "step": s.step, "wordCount": s.word_count })).collect::<Vec<_>>(),
    })
}

/// `{steps, finalStep, finalContent, totalSteps, completedSteps, skippedSteps,
/// wordCountProgression, partial, failedModels}` from the stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let mut steps: Vec<StepResult> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("chain_step_"))
        .filter_map(|r| {
            let mut v = r.parsed_data.clone()?;
            v["model"] = json!(r.model);
            v["content"] = json!(r.content);
            v["responseTimeMs"] = json!(r.response_time_ms);
            serde_json::from_value(v).ok()
        })
        .collect();
    steps.sort_by_key(|s| s.step);
    // The plan row (stored at the start), else the steps (runs stored before it existed).
    let planned = rows
        .iter()
        .find(|r| r.stage_type == PLAN)
        .and_then(|r| r.parsed_data.as_ref()?.get("totalSteps")?.as_u64())
        .map(|n| n as usize);
    let total = planned.or(steps.first().map(|s| s.total_steps)).unwrap_or(0);
    let last = steps.iter().rev().find(|s| !s.skipped).cloned();
    let mut result = match &last {
        Some(l) => summary(&steps, l),
        None => json!({ "finalStep": null, "finalContent": null, "completedSteps": 0,
                        "skippedSteps": [], "wordCountProgression": [] }),
    };
    let list: Vec<Value> = steps
        .iter()
        .map(|s| {
            let mut v = json!(s);
            if let Some(o) = v.as_object_mut() {
                o.remove("totalSteps");
            }
            v
        })
        .collect();
    result["steps"] = json!(list);
    result["totalSteps"] = json!(total);
    mark_from_rows(&mut result, rows);
    result
}

// ---- the export's report -------------------------------------------------------------------

/// What a step was asked to do: its mandate and what that asks for (a custom mandate in its
/// own words).
fn asked_to(step: &Value) -> String {
    let mandate: Option<Mandate> = serde_json::from_value(step["mandate"].clone()).ok();
    let name = step["mandateDisplay"]
        .as_str()
        .map(str::to_string)
        .or_else(|| mandate.map(|m| m.display().to_string()))
        .unwrap_or_default();
    let focus = match (step["customMandate"].as_str(), mandate) {
        (Some(c), _) => c.to_string(),
        (None, Some(m)) if m != Mandate::Custom => m.focus().to_string(),
        _ => String::new(),
    };
    match (name.is_empty(), focus.is_empty()) {
        (false, false) => format!("{name}: {focus}"),
        (false, true) => name,
        _ => focus,
    }
}

/// The result as the export's report: the final version's step, then each step as a table
/// row (its model, what it was asked to do, its length, done or skipped and why), the steps
/// never run, and the editors' notes.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let mut out = String::new();
    let steps = result["steps"].as_array().cloned().unwrap_or_default();
    let total = result["totalSteps"].as_u64().filter(|n| *n > 0).unwrap_or(steps.len() as u64);
    let done = steps.iter().filter(|s| s["skipped"] == false).count() as u64;
    if let Some(k) = result["finalStep"].as_u64() {
        let last = steps.iter().find(|s| s["step"].as_u64() == Some(k));
        let by = last
            .map(|s| {
                let parts: Vec<&str> =
                    [&s["mandateDisplay"], &s["model"]].iter().filter_map(|v| v.as_str()).collect();
                if parts.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", parts.join(", "))
                }
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "**Final version:** step {k} of {total}{by}; {done} of {} completed.\n\n",
            count(total, "step", "steps")
        ));
    } else if !steps.is_empty() || total > 0 {
        out.push_str("**No step completed.**\n\n");
    }
    if steps.is_empty() {
        return out;
    }
    let rows: Vec<Vec<String>> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let skipped = s["skipped"] == true;
            let words = match (skipped, s["wordCount"].as_u64()) {
                (true, _) | (_, None) => String::new(),
                (false, Some(w)) => match (s["basedOnStep"].as_u64(), s["wordCountDelta"].as_i64())
                {
                    (Some(_), Some(d)) => format!("{w} ({d:+})"),
                    _ => w.to_string(),
                },
            };
            let state = if skipped {
                match s["skipReason"].as_str() {
                    Some("global timeout") => "skipped: the run's time limit passed first".into(),
                    Some(why) => format!("skipped: its call failed ({why})"),
                    None => "skipped".into(),
                }
            } else {
                "done".to_string()
            };
            vec![
                s["step"].as_u64().unwrap_or(i as u64 + 1).to_string(),
                s["model"].as_str().unwrap_or("").to_string(),
                asked_to(s),
                words,
                state,
            ]
        })
        .collect();
    out.push_str(&table(&["step", "model", "asked to", "words", "result"], &rows, &[0, 3]));
    let missing = total.saturating_sub(steps.len() as u64);
    if missing > 0 {
        out.push_str(&format!("\n{} of the {total} never ran.\n", count(missing, "step", "steps")));
    }
    let notes: Vec<String> = steps
        .iter()
        .flat_map(|s| {
            let k = s["step"].as_u64().unwrap_or(0);
            s["editorNotes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(move |n| n.as_str().map(|n| format!("- step {k}: {n}")))
        })
        .collect();
    if !notes.is_empty() {
        out.push_str(&format!("\n**Editor's notes:**\n\n{}\n", notes.join("\n")));
    }
    out
}
