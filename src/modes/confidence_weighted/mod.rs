//! Confidence-Weighted mode (specs/12-confidence-weighted.md): every model answers and rates
//! its own confidence; the server turns the stated confidences into softmax weights; one
//! synthesizer writes an answer that favours the heavier answers and notes how well each
//! model's confidence seems calibrated. Multi-turn: a follow-up carries the last 10 turns
//! into both prompts, and the earlier answers are the syntheses.
//!
//! Decisions where the spec is silent:
//! - A reply with no answer text once its markers are read (only a confidence line, say) is a
//!   failed call ("no answer in the reply"), like an empty one; so is a synthesis reply with no
//!   synthesis text (the backup is then tried).
//! - A fraction with another denominator (`4/5`, `8 out of 10`) is read as the fraction it
//!   states; the bare-number rules apply only to a number with no suffix.
//! - The title call goes to the synthesis model at the start.
//! - Each answer is stored the moment it arrives, the weights when every answer is in, so a
//!   cancelled or interrupted run keeps what finished.
//! - Structured replies: a respondent whose route takes structured output is asked for
//!   `confidence_weighted_answer` (its reasoning, answer, confidence from 0 to 1 and what it is
//!   sure of) instead of the `RESPONSE:` format. Its answer holds at least one character, so a
//!   server held to the schema cannot leave it empty. A JSON confidence has no scale to read, so
//!   it is held to 0-1: one outside it does not fit, and the reply goes to the text reader. The
//!   answer says where its confidence was read from (`readFrom`), none when none was stated.
//!   The synthesis is text a person reads.

use super::common::{empty_is_failure, member_names, with_history};
use super::prelude::*;
use super::{CallError, CallErrorKind};

mod machine;
mod prompts;
mod read;
mod result;
mod sim;

pub use machine::*;
pub use prompts::*;
pub use read::*;
pub use result::*;
use sim::*;

pub const MIN_MODELS: usize = 2;
pub const MAX_MODELS: usize = 6;
pub const TEMPERATURE_RANGE: std::ops::RangeInclusive<f64> = 0.1..=5.0;
pub const DEFAULT_TEMPERATURE: f64 = 1.0;
/// Confidences above this or below [`OUTLIER_LOW`] are flagged for extra scrutiny.
pub const OUTLIER_HIGH: f64 = 0.95;
pub const OUTLIER_LOW: f64 = 0.1;
/// The confidence of a reply that states none.
pub const DEFAULT_CONFIDENCE: f64 = 0.5;

/// Confidence-Weighted's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfidenceWeightedRequest {
    /// The respondents: 2 to 6 models that each answer and rate their own confidence (a model
    /// listed twice answers twice and gets two weights).
    #[schemars(length(min = 2, max = 6), extend("x-too-few" = "Confidence-Weighted needs at least 2 models", "x-too-many" = "Confidence-Weighted takes at most 6 models"))]
    pub models: Option<Vec<ModelId>>,
    /// Writes the weighted synthesis (default: the first model); it may also answer.
    pub synthesis_model: Option<ModelId>,
    /// Softmax temperature turning confidences into weights: 0.1 is near winner-take-all, 5
    /// near equal weights (default 1.0).
    #[schemars(range(min = 0.1, max = 5.0))]
    pub temperature: Option<f64>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 300000))]
    pub timeout_ms: Option<i64>,
}

/// The normalised configuration stored with a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfidenceWeightedConfig {
    pub models: Vec<String>,
    pub synthesis_model: String,
    pub temperature: f64,
    pub timeout_ms: u64,
    /// The server's backup for the synthesizer (`[fallback] chairman`), when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthesis_fallback_model: Option<String>,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, ConfidenceWeightedRequest) =
        request::start(body, "Question is required", false)?;
    let models = SPEC.panel_of(cfg.models.as_deref(), "respondent", defaults)?;
    let synthesis_model =
        SPEC.model_or(cfg.synthesis_model.as_ref(), "synthesizer", defaults, &models[0])?;
    let temperature = cfg.temperature.unwrap_or(DEFAULT_TEMPERATURE);
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let synthesis_fallback_model = defaults.backup(SPEC.id, "synthesizer", &synthesis_model);
    let all = request::distinct(&[&models], &[&synthesis_model]);
    let config = ConfidenceWeightedConfig {
        models,
        synthesis_model,
        temperature,
        timeout_ms,
        synthesis_fallback_model,
    };
    Ok(asked.valid(SPEC.kind(), &config, all))
}

/// Confidence-Weighted in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "confidence_weighted",
    label: "Confidence-Weighted",
    description: "Each model answers and rates its own confidence; the server turns the confidences into softmax weights; one model writes a synthesis that favours the heavier answers.",
    multi_turn: true,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[
        Role::panel("respondent", "Respondents", "models"),
        Role::model("synthesizer", "Synthesizer", "synthesisModel").backed_by("chairman"),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<ConfidenceWeightedRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(ConfidenceWeighted::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("answers", "the answers"), ("answer", "an answer with its confidence"), ("all_answers", "every answer in"), ("synthesis", "the weighted synthesis")],
    report: Some(report),
    example: || {
        json!({ "mode": "confidence_weighted", "question": "What is caffeine's half-life in adults?",
                "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma"],
                                "synthesisModel": "sim/alpha", "temperature": 1.0 } })
    },
    sim: Some(sim_answer),
    result_schema: schema_of::<ConfidenceWeightedResult>,
};

#[cfg(test)]
mod tests;
