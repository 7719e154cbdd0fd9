//! What a Confidence-Weighted run stores and reads back: the result from the stored rows and
//! the export's report.

use super::*;

// ---- payloads (one definition for live events and stored results) --------------------------

/// One answer's weight (`weights_calculated`'s entries).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Weight {
    /// The answer's place in the request's model list (from 0).
    pub index: usize,
    /// The model that wrote the answer.
    pub model: String,
    /// The confidence it stated (0 to 1; the default when it stated none).
    pub raw_confidence: f64,
    /// Its softmax weight (the weights sum to 1).
    pub normalized_weight: f64,
    /// The weight as a percentage, rounded to two decimals.
    pub weight_percent: f64,
    /// The stated confidence is unusually high or low.
    pub is_outlier: bool,
}

/// `synthesis_complete`'s data, and the result's `synthesis`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisData {
    /// The model that wrote it; null when a single answer stands as the synthesis.
    pub model: Option<String>,
    /// The synthesis: the run's answer.
    pub synthesis: String,
    /// The synthesizer's notes on how well each model's confidence seems calibrated.
    pub calibration_notes: String,
    /// The heaviest answer's weight.
    pub highest_weight: Option<Weight>,
    /// The lightest answer's weight.
    pub lowest_weight: Option<Weight>,
    /// Only one model answered, and its answer stands as the synthesis.
    pub single_answer: bool,
    /// How long the synthesis call took, in milliseconds; null for a single answer.
    pub response_time_ms: Option<i64>,
    /// The synthesis model the backup stood in for, when the backup wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// The synthesis row's data: the synthesis without what the row holds itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisRow {
    #[serde(default)]
    pub calibration_notes: String,
    #[serde(default)]
    pub highest_weight: Option<Weight>,
    #[serde(default)]
    pub lowest_weight: Option<Weight>,
    #[serde(default)]
    pub single_answer: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

impl SynthesisRow {
    pub(super) fn of(s: &SynthesisData) -> Self {
        SynthesisRow {
            calibration_notes: s.calibration_notes.clone(),
            highest_weight: s.highest_weight.clone(),
            lowest_weight: s.lowest_weight.clone(),
            single_answer: s.single_answer,
            fallback_from: s.fallback_from.clone(),
        }
    }
}

/// `weights_calculated`'s data (and the `weights` row), and the result's `weights`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WeightsData {
    /// Every answer's weight, heaviest first (ties in request order).
    pub weights: Vec<Weight>,
    /// The softmax temperature the weights were made at.
    pub temperature: f64,
    /// How many answers stated an unusually high or low confidence.
    pub outlier_count: usize,
}

impl WeightsData {
    pub(super) fn of(weights: &[Weight], temperature: f64) -> Self {
        WeightsData {
            weights: weights.to_vec(),
            temperature,
            outlier_count: weights.iter().filter(|w| w.is_outlier).count(),
        }
    }
}

/// `all_answers_complete`'s data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswersCount {
    pub count: usize,
    pub failed_count: usize,
}

pub use crate::modes::payload::{Data, Failures, Marked};

/// The models of `confidence_start`'s config.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartConfig<'a> {
    pub models: &'a [String],
    pub synthesis_model: &'a str,
    pub temperature: f64,
}

/// `confidence_start`'s data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfidenceStart<'a> {
    pub config: StartConfig<'a>,
}

/// Confidence-Weighted's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfidenceWeightedResult {
    /// The answers that came in, in request order.
    pub answers: Vec<AnswerData>,
    /// The weights made from the stated confidences; null when the run stopped before them.
    pub weights: Option<WeightsData>,
    /// The synthesis; null when the run stopped before it.
    pub synthesis: Option<SynthesisData>,
    /// Whether some call failed, and which (`partial`, `failedModels`).
    #[serde(flatten)]
    pub failures: Failures,
}

/// `{answers, weights, synthesis, partial, failedModels}` from the stored rows: the answers in
/// request order, the weights and synthesis as their events carried them (null when the run
/// stopped before them).
pub fn load_result(rows: &[StageRow]) -> Value {
    let schema = answer_schema();
    let mut answers: Vec<AnswerData> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("answer_"))
        .filter_map(|r| {
            let mut a: AnswerData = parsed(r)?;
            // The answer is read again from the stored reply, as it was read live.
            a.response = read_answer_reply(0, "", &r.content, 0, &schema).response;
            Some(a)
        })
        .collect();
    answers.sort_by_key(|a| a.index);
    let weights = rows.iter().find(|r| r.stage_type == "weights").and_then(parsed);
    let synthesis = rows.iter().find(|r| r.stage_type == "synthesis").map(|r| {
        let p: SynthesisRow = parsed(r).unwrap_or_default();
        SynthesisData {
            model: r.model.clone(),
            synthesis: r.content.clone(),
            calibration_notes: p.calibration_notes,
            highest_weight: p.highest_weight,
            lowest_weight: p.lowest_weight,
            single_answer: p.single_answer,
            response_time_ms: r.response_time_ms,
            fallback_from: p.fallback_from,
        }
    });
    to_json(&ConfidenceWeightedResult { answers, weights, synthesis, failures: Failures::of(rows) })
}

// ---- the export's report -------------------------------------------------------------------

/// A percentage with at most `places` decimals (`90%`, `45.26%`).
fn percent(v: f64, places: usize) -> String {
    let s = format!("{v:.places$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
    format!("{s}%")
}

/// The result as the export's report: how the weights were made, a table of the answers
/// (heaviest first: whose, the confidence it stated, its weight, whether a confidence was
/// stated), who wrote the synthesis, and the synthesizer's notes on calibration.
pub fn report(result: &Value) -> String {
    use crate::modes::report::table;
    let Some(r) = typed::<ConfidenceWeightedResult>(result) else { return String::new() };
    let mut out = String::new();
    let list = r.weights.as_ref().map_or(&[][..], |w| &w.weights);
    if let (Some(heaviest), Some(w)) = (list.first(), &r.weights) {
        out.push_str(&format!(
            "**Weights** from the confidence each model stated (a softmax at temperature {}): the heaviest answer is {}'s, at {}.\n\n",
            fmt_temperature(w.temperature),
            heaviest.model,
            percent(heaviest.weight_percent, 2),
        ));
    }
    // Heaviest first when weighed; else the answers in the order asked.
    let rows_of: Vec<(&AnswerData, Option<&Weight>)> = if list.is_empty() {
        r.answers.iter().map(|a| (a, None)).collect()
    } else {
        list.iter()
            .filter_map(|w| Some((r.answers.iter().find(|a| a.index == w.index)?, Some(w))))
            .collect()
    };
    let mut defaulted = false;
    let rows: Vec<Vec<String>> = rows_of
        .iter()
        .map(|(a, w)| {
            let confidence = if a.parsed_successfully {
                let c = a.confidence;
                let mut s = percent(c * 100.0, 1);
                if c > OUTLIER_HIGH {
                    s.push_str(" (unusually high)");
                } else if c < OUTLIER_LOW {
                    s.push_str(" (unusually low)");
                }
                s
            } else {
                "not stated".to_string()
            };
            let said = match (a.parsed_successfully, a.clamped) {
                (true, true) => "yes, outside the scale and held to it",
                (true, false) => "yes",
                (false, _) => {
                    defaulted = true;
                    "no"
                }
            };
            vec![
                a.model.clone(),
                confidence,
                w.map_or(String::new(), |w| percent(w.weight_percent, 2)),
                said.to_string(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(
            &["model", "confidence", "weight", "confidence stated"],
            &rows,
            &[1, 2],
        ));
        if defaulted {
            out.push_str(&format!(
                "\nAn answer that stated no confidence was weighed at the default of {}.\n",
                percent(DEFAULT_CONFIDENCE * 100.0, 1)
            ));
        }
        out.push('\n');
    }
    let Some(s) = &r.synthesis else { return out };
    if s.single_answer {
        let who = r.answers.first().map_or("one model", |a| a.model.as_str());
        out.push_str(&format!(
            "**Synthesis:** only {who} answered, so its answer stands as the synthesis.\n"
        ));
    } else if let Some(model) = s.model.as_deref().filter(|m| !m.is_empty()) {
        let standing_in = s
            .fallback_from
            .as_ref()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        out.push_str(&format!(
            "**Synthesis** written by {model}{standing_in}, favouring the heavier answers.\n"
        ));
    }
    let notes = s.calibration_notes.trim();
    if !notes.is_empty() {
        out.push_str("\n**Calibration notes** from the synthesizer:\n\n");
        for line in notes.lines() {
            // Quoted as written, without the headings a model may open a line with.
            let t = line.trim_start();
            let line =
                if t.starts_with('#') { t.trim_start_matches('#').trim_start() } else { line };
            out.push_str(&format!("> {line}\n").replace("> \n", ">\n"));
        }
    }
    out
}

/// The one line a list shows: the start of the synthesis.
pub(super) fn outcome(result: &Value) -> Option<String> {
    let synthesis = typed::<ConfidenceWeightedResult>(result)?.synthesis?;
    Some(short(&synthesis.synthesis, 160))
}

/// A temperature as set (`1`, `0.5`).
fn fmt_temperature(t: f64) -> String {
    let s = format!("{t:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
