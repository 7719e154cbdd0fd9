//! Delphi mode (seed 05): the facilitator classifies the question (NUMERIC or QUALITATIVE);
//! panelists answer independently, then in later rounds see only aggregate statistics and
//! their own previous answer, until the estimates converge or the rounds run out; the
//! facilitator writes the report. Every statistic is computed here, never by a model.
//!
//! Decisions where the seed is silent: `options` without `questionType` means a qualitative
//! question with those options (no classification call); a qualitative question with no
//! options takes free-form answers, grouped case-insensitively; a panelist whose round-1 answer
//! could not be read stays on the panel (with no previous answer) while one whose call failed
//! is dropped; a round-2+ answer that cannot be read counts as a failure (previous answer
//! carried forward); the numeric final value is the last round's mean (the seed's example);
//! the facilitator may not sit on the panel; the 600 s global cap is `globalTimeoutMs`. A
//! facilitator call (classification or report) that fails is repeated once on the configured
//! backup (`[fallback] facilitator`), which may sit on the panel (it never answers as a
//! panelist); the classification or report it writes says `fallbackFrom`.
//!
//! Structured replies: a model whose route takes structured output is asked for the
//! classification and its estimates as JSON (`delphi_classify`, `delphi_estimate`,
//! `delphi_answer`; see the section below) with the seed's instructions otherwise unchanged;
//! the report is text a person reads. The classification and each round's estimate say where
//! they were read from (`readFrom`); an estimate carried forward says nothing, as it was not
//! read this round.

use super::prelude::*;
use super::request::MAX_SHORT_CHARS;
use super::sim_text::text_answer;

mod machine;
mod prompts;
mod read;
mod read_answers;
mod read_json;
mod result;
mod sim;
mod stats;

pub use machine::*;
pub use prompts::*;
pub use read::*;
pub use read_answers::*;
pub use read_json::*;
pub use result::*;
pub(crate) use sim::*;
pub use stats::*;

#[cfg(test)]
mod tests;

/// Rounds need at least this many valid estimates.
pub const MIN_ESTIMATES: usize = 3;

/// Whether a question asks for a number or for one of some choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QuestionType {
    Numeric,
    Qualitative,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DelphiConfig {
    pub panelist_models: Vec<String>,
    pub facilitator_model: String,
    pub max_rounds: u32,
    pub numeric_convergence_threshold: f64,
    pub qualitative_convergence_threshold: f64,
    pub question_type: Option<QuestionType>,
    pub options: Option<Vec<String>>,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
    /// The server's backup facilitator (`[fallback] facilitator`), when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facilitator_fallback_model: Option<String>,
}

/// The `stage_order` of a Delphi stage's calls (`classify`, `round_N`, `synthesis`).
fn stage_order(stage: &str) -> i32 {
    match stage.strip_prefix("round_").and_then(|n| n.parse::<i32>().ok()) {
        Some(n) => 2 * n - 1,
        None if stage == "classify" => 0,
        None => 99,
    }
}

/// Delphi's `modeConfig`.
// In its form's order; its `title`s and `x-` keys are for the page's form (docs/protocol.md,
// `GET /api/modes`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(extend("x-question" = {
    "label": "Question",
    "placeholder": "How many software engineers will be employed globally by 2030?"
}))]
pub struct DelphiRequest {
    /// 3 to 7 models that estimate anonymously, round after round.
    #[schemars(length(min = 3, max = 7), extend("x-too-few" = "Delphi mode requires at least 3 panelist models", "x-too-many" = "Maximum 7 panelist models allowed"))]
    pub panelist_models: Option<Vec<ModelId>>,
    /// Classifies the question and writes the report; must not be a panelist.
    #[schemars(extend("x-not-in" = {
        "field": "panelistModels",
        "message": "The facilitator cannot also be a panelist"
    }))]
    pub facilitator_model: Option<ModelId>,
    /// Whether the answer is a number or one of some options (default: the facilitator decides).
    #[schemars(title = "Question type", extend("x-enum-labels" = {
        "": "Let the facilitator classify it",
        "numeric": "Numeric",
        "qualitative": "Qualitative"
    }))]
    pub question_type: Option<QuestionType>,
    /// The choices of a qualitative question (2 to 10).
    #[schemars(
        title = "Answer options (qualitative, one per line, optional)",
        length(min = 2, max = 10),
        extend("x-too-few" = "at least 2 options are required", "x-too-many" = "at most 10 options are allowed")
    )]
    pub options: Option<Vec<Text<MAX_SHORT_CHARS>>>,
    /// The most rounds (2 to 5; default 5).
    #[schemars(title = "Maximum rounds", range(min = 2, max = 5))]
    pub max_rounds: Option<i64>,
    /// Numeric questions converge when the spread (coefficient of variation) falls to this
    /// (0.01 to 1; default 0.15).
    #[schemars(
        title = "Numeric convergence: CV below",
        range(min = 0.01, max = 1.0),
        extend("x-step" = 0.01)
    )]
    pub numeric_convergence_threshold: Option<f64>,
    /// Qualitative questions converge when this share of the panel agrees, in % (50 to 100;
    /// default 75).
    #[schemars(
        title = "Qualitative convergence: agreement % at least",
        range(min = 50.0, max = 100.0),
        extend("x-step" = 1)
    )]
    pub qualitative_convergence_threshold: Option<f64>,
    /// Per-round timeout in milliseconds.
    #[schemars(title = "Per-round timeout", range(min = 30000, max = 180000))]
    pub timeout_ms: Option<i64>,
    /// The whole run's time limit in milliseconds (default 600 000).
    #[schemars(title = "Whole-run time cap", range(min = 10000, max = 3600000))]
    pub global_timeout_ms: Option<i64>,
}

/// `{question, mode:"delphi", modeConfig?: {panelistModels (3-7), facilitatorModel, maxRounds
/// (2-5), numericConvergenceThreshold (0.01-1), qualitativeConvergenceThreshold (50-100),
/// questionType, options (2-10), timeoutMs (30 000-180 000), globalTimeoutMs}}`.
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, DelphiRequest) = request::start(body, "Question is required", false)?;
    let panelist_models = SPEC.panel_of(cfg.panelist_models.as_deref(), "panelist", defaults)?;
    let facilitator_model =
        SPEC.model_of(cfg.facilitator_model.as_ref(), "facilitator", defaults)?;
    if panelist_models.contains(&facilitator_model) {
        return Err(FieldError::new(
            "modeConfig.facilitatorModel",
            "The facilitator must not be one of the panelists",
        ));
    }
    let max_rounds = request::given(cfg.max_rounds, 5) as u32;
    let numeric_convergence_threshold = cfg.numeric_convergence_threshold.unwrap_or(0.15);
    let qualitative_convergence_threshold = cfg.qualitative_convergence_threshold.unwrap_or(75.0);
    let question_type = cfg.question_type;
    let options: Option<Vec<ModelId>> =
        cfg.options.map(|o| o.into_iter().map(|t| ModelId(t.0)).collect());
    let options = match request::panel(options.as_deref(), "modeConfig.options")? {
        // The seed: a numeric override ignores options.
        Some(_) if question_type == Some(QuestionType::Numeric) => None,
        other => other,
    };
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let global_timeout_ms = request::given(cfg.global_timeout_ms, 600_000);
    let models = request::distinct(&[&panelist_models], &[&facilitator_model]);
    let facilitator_fallback_model = defaults.backup(SPEC.id, "facilitator", &facilitator_model);
    let config = DelphiConfig {
        panelist_models,
        facilitator_model,
        max_rounds,
        numeric_convergence_threshold,
        qualitative_convergence_threshold,
        question_type,
        options,
        timeout_ms,
        global_timeout_ms,
        facilitator_fallback_model,
    };
    Ok(asked.valid(SPEC.kind(), &config, models))
}

/// Delphi in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "delphi",
    label: "Delphi",
    description: "Anonymous estimation rounds on aggregate statistics until the panel converges; the facilitator reports.",
    multi_turn: false,
    question: Question { label: "Question to estimate", required: Some("Question is required") },
    roles: &[
        Role::panel("panelist", "Panelists", "panelistModels"),
        Role::model("facilitator", "Facilitator", "facilitatorModel").backed_up(),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<DelphiRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Delphi::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("delphi", "")],
    report: Some(report),
    example: || {
        json!({ "mode": "delphi", "question": "How many software engineers will be employed globally by 2030?" })
    },
    sim: Some(|ask| {
        let text = [delphi_classify, delphi_numeric, delphi_qualitative, delphi_report];
        sim_answer(ask).or_else(|| text_answer(ask, &text))
    }),
    result_schema: schema_of::<DelphiResult>,
};
