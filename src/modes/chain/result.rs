//! What a chain stores and reads back: the step rows, the result, its outcome and the export's
//! report.

use super::*;

// ---- payloads (one definition for live events and stored results) --------------------------

/// A completed or skipped step, as the result lists it (and as the run keeps it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    /// The step's number, from 1.
    pub step: usize,
    /// The model that wrote (or was to write) this step's version.
    pub model: String,
    /// What the step was asked to do.
    pub mandate: Mandate,
    /// The mandate's name for a person (`Security review`).
    pub mandate_display: String,
    /// A custom mandate in its own words, when the step had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_mandate: Option<String>,
    /// The completed step whose version this one improved; null for the first completed step.
    pub based_on_step: Option<usize>,
    /// The step's full version (empty when skipped).
    pub content: String,
    /// Words in this version (the server's count; 0 when skipped).
    pub word_count: usize,
    /// Words in the version it improved (0 for a first draft).
    pub previous_word_count: usize,
    /// `wordCount` minus `previousWordCount` (0 when skipped).
    pub word_count_delta: i64,
    /// The `[Editor's Note: …]` spans of the reply, their words only.
    pub editor_notes: Vec<String>,
    /// How long the step's call took, in milliseconds; null when it never answered.
    pub response_time_ms: Option<i64>,
    /// True when the step was skipped (its call failed, or the run's time limit passed).
    pub skipped: bool,
    /// Why it was skipped (`global timeout`, or the call's error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// The steps in the chain (kept in the stored row, not in the result's list).
    #[serde(skip)]
    #[schemars(skip)]
    pub total_steps: usize,
}

impl StepResult {
    /// Its row's data: the whole step as the run first kept it (`totalSteps` last) without
    /// what the row holds itself (its model, content and response time), each taken key's place
    /// gone to the last key, as rows have always been written.
    pub(super) fn row_data(&self) -> Value {
        let mut v = to_json(self);
        if let Some(m) = v.as_object_mut() {
            m.insert("totalSteps".into(), self.total_steps.into());
            for taken in ["model", "content", "responseTimeMs"] {
                m.swap_remove(taken);
            }
        }
        v
    }

    /// The step again from its row: the row's data with what the row holds.
    fn from_row(row: &StageRow) -> Option<StepResult> {
        let mut v = row.parsed_data.clone()?;
        let m = v.as_object_mut()?;
        m.insert("model".into(), row.model.clone().unwrap_or_default().into());
        m.insert("content".into(), row.content.clone().into());
        m.insert("responseTimeMs".into(), row.response_time_ms.into());
        let total_steps = usize::deserialize(m.get("totalSteps")?).ok()?;
        let step = StepResult::deserialize(&v).ok()?;
        Some(StepResult { total_steps, ..step })
    }
}

/// The plan row's data (`chain_plan`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanData {
    pub total_steps: usize,
}

/// A step of the plan, as `chain_start` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedStep {
    pub step: usize,
    pub model: String,
    pub mandate: Mandate,
    pub mandate_display: String,
}

/// `chain_start`'s data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainStart {
    pub total_steps: usize,
    pub steps: Vec<PlannedStep>,
}

/// `chain_step_start`'s data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepStart {
    pub step: usize,
    pub model: String,
    pub mandate: Mandate,
    pub based_on_step: Option<usize>,
    pub skipped_before: Vec<usize>,
}

/// `chain_step_skipped`'s and `chain_step_complete`'s data: the step and what it did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepEvent<T> {
    pub step: usize,
    pub data: T,
}

/// What `chain_step_skipped` says of the step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSkipped {
    pub model: String,
    pub mandate: Mandate,
    pub reason: String,
}

/// What `chain_step_complete` says of the step.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Completed {
    pub model: String,
    pub mandate: Mandate,
    pub mandate_display: String,
    pub content: String,
    pub word_count: usize,
    pub previous_word_count: usize,
    pub word_count_delta: i64,
    pub editor_notes: Vec<String>,
    pub response_time_ms: Option<i64>,
}

impl Completed {
    pub(super) fn of(s: &StepResult) -> Self {
        Completed {
            model: s.model.clone(),
            mandate: s.mandate,
            mandate_display: s.mandate_display.clone(),
            content: s.content.clone(),
            word_count: s.word_count,
            previous_word_count: s.previous_word_count,
            word_count_delta: s.word_count_delta,
            editor_notes: s.editor_notes.clone(),
            response_time_ms: s.response_time_ms,
        }
    }
}

/// A completed step's length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepWords {
    /// The step's number.
    pub step: usize,
    /// Words in its version.
    pub word_count: usize,
}

/// `chain_complete`'s data (and the head of the result): the final version and the progression.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChainSummary {
    /// The last completed step, whose version is the answer; null when none completed.
    pub final_step: Option<usize>,
    /// That step's version; null when no step completed.
    pub final_content: Option<String>,
    /// How many steps completed.
    pub completed_steps: usize,
    /// The numbers of the skipped steps.
    pub skipped_steps: Vec<usize>,
    /// Each completed step's length, in order.
    pub word_count_progression: Vec<StepWords>,
}

/// The chain's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChainResult {
    #[serde(flatten)]
    pub summary: ChainSummary,
    /// Every step that completed or was skipped, in order (steps never run are absent).
    pub steps: Vec<StepResult>,
    /// The steps the chain was planned with.
    pub total_steps: usize,
    /// Whether some call failed, and which (`partial`, `failedModels`).
    #[serde(flatten)]
    pub failures: Failures,
}

/// The summary of `steps`: the last completed one's version, when there is one.
pub(super) fn summary(steps: &[StepResult]) -> ChainSummary {
    let done: Vec<&StepResult> = steps.iter().filter(|s| !s.skipped).collect();
    let last = done.last();
    ChainSummary {
        final_step: last.map(|l| l.step),
        final_content: last.map(|l| l.content.clone()),
        completed_steps: done.len(),
        // A result with no completed step has always listed none skipped either.
        skipped_steps: match last {
            Some(_) => steps.iter().filter(|s| s.skipped).map(|s| s.step).collect(),
            None => Vec::new(),
        },
        word_count_progression: done
            .iter()
            .map(|s| StepWords { step: s.step, word_count: s.word_count })
            .collect(),
    }
}

/// `{finalStep, finalContent, completedSteps, skippedSteps, wordCountProgression, steps,
/// totalSteps, partial, failedModels}` from the stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let mut steps: Vec<StepResult> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("chain_step_"))
        .filter_map(StepResult::from_row)
        .collect();
    steps.sort_by_key(|s| s.step);
    // The plan row (stored at the start), else the steps (runs stored before it existed).
    let planned = rows
        .iter()
        .find(|r| r.stage_type == PLAN)
        .and_then(parsed::<PlanData>)
        .map(|p| p.total_steps);
    let total = planned.or(steps.first().map(|s| s.total_steps)).unwrap_or(0);
    to_json(&ChainResult {
        summary: summary(&steps),
        steps,
        total_steps: total,
        failures: Failures::of(rows),
    })
}

/// How many steps completed, and the final version's length and opening.
pub(super) fn outcome(result: &Value) -> Option<String> {
    let r: ChainResult = typed(result)?;
    let text = r.summary.final_content?;
    Some(format!(
        "{} of {} steps, {} words: {}",
        r.summary.completed_steps,
        r.total_steps,
        word_count(&text),
        short(&text, 100)
    ))
}

// ---- the export's report -------------------------------------------------------------------

/// What a step was asked to do: its mandate and what that asks for (a custom mandate in its
/// own words).
fn asked_to(step: &StepResult) -> String {
    let name = &step.mandate_display;
    let focus = match (&step.custom_mandate, step.mandate) {
        (Some(c), _) => c.as_str(),
        (None, Mandate::Custom) => "",
        (None, m) => m.focus(),
    };
    match (name.is_empty(), focus.is_empty()) {
        (false, false) => format!("{name}: {focus}"),
        (false, true) => name.clone(),
        _ => focus.to_string(),
    }
}

/// A step's words (and the change from the version it improved); blank when it was skipped.
fn words(step: &StepResult) -> String {
    match (step.skipped, step.based_on_step) {
        (true, _) => String::new(),
        (false, Some(_)) => format!("{} ({:+})", step.word_count, step.word_count_delta),
        (false, None) => step.word_count.to_string(),
    }
}

/// How a step ended: done, or skipped and why.
fn ended(step: &StepResult) -> String {
    if !step.skipped {
        return "done".to_string();
    }
    match step.skip_reason.as_deref() {
        Some("global timeout") => "skipped: the run's time limit passed first".into(),
        Some(why) => format!("skipped: its call failed ({why})"),
        None => "skipped".into(),
    }
}

/// The result as the export's report: the final version's step, then each step as a table
/// row (its model, what it was asked to do, its length, done or skipped and why), the steps
/// never run, and the editors' notes.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<ChainResult>(result) else { return String::new() };
    let mut out = String::new();
    let steps = &r.steps;
    let total = if r.total_steps > 0 { r.total_steps } else { steps.len() } as u64;
    let done = steps.iter().filter(|s| !s.skipped).count();
    if let Some(k) = r.summary.final_step {
        let by = steps
            .iter()
            .find(|s| s.step == k)
            .map_or(String::new(), |s| format!(" ({}, {})", s.mandate_display, s.model));
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
        .map(|s| vec![s.step.to_string(), s.model.clone(), asked_to(s), words(s), ended(s)])
        .collect();
    out.push_str(&table(&["step", "model", "asked to", "words", "result"], &rows, &[0, 3]));
    let missing = total.saturating_sub(steps.len() as u64);
    if missing > 0 {
        out.push_str(&format!("\n{} of the {total} never ran.\n", count(missing, "step", "steps")));
    }
    let notes: Vec<String> = steps
        .iter()
        .flat_map(|s| s.editor_notes.iter().map(|n| format!("- step {}: {n}", s.step)))
        .collect();
    if !notes.is_empty() {
        out.push_str(&format!("\n**Editor's notes:**\n\n{}\n", notes.join("\n")));
    }
    out
}
