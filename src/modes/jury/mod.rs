//! Jury mode (seed 03): jurors score existing content on five dimensions and give a verdict,
//! each `juror_complete` published as that juror finishes; scores, ranges and the majority
//! verdict (with the seed's conservative tie rules) are computed here, in Rust; the foreman
//! writes the report around them.
//!
//! Decisions where the seed is silent: a juror is `parseSuccess` when at least one dimension
//! parsed (an out-of-range score nulls only its own dimension); when no verdict parses and no
//! score either, the majority verdict defaults to REVISE (the conservative middle) and the
//! summary says so; the dimension analysis's consensus is "Strong agreement" for a spread of
//! at most 2 points, "Mixed" for 3-4 and "Disagreement" beyond; the final verdict is the
//! majority verdict computed here (the foreman is told it and writes the report); a failing
//! foreman is replaced once by the configured backup (`[fallback] foreman`), and the report
//! then says `fallbackFrom`.

mod machine;
mod prompts;
mod read;
mod result;
mod sim;

pub use machine::*;
pub use prompts::*;
pub use read::*;
pub use result::*;
use sim::sim_answer;

use super::common::member_names;
use super::prelude::*;
use super::reading::{between, json_field, json_values, split_reasoning, Unparsed};
use super::request::MAX_TEXT_CHARS;
use super::sim_text::text_answer;
use super::stated::{last_stated, Labels};

/// The five dimensions, as the prompts name them.
pub const DIMENSIONS: [&str; 5] =
    ["Accuracy", "Completeness", "Clarity", "Relevance", "Actionability"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JuryConfig {
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_question: Option<String>,
    pub juror_models: Vec<String>,
    pub foreman_model: String,
    pub timeout_ms: u64,
    /// The server's backup foreman (`[fallback] foreman`), when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreman_fallback_model: Option<String>,
}

/// Jury's `modeConfig`.
// Its `title`s and `x-` keys are for the page's form (docs/protocol.md, `GET /api/modes`);
// `required` marks `content` there, and `validate` refuses a request without it.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(extend("x-question" = {
    "label": "What the jury should do",
    "placeholder": "Evaluate this API documentation",
    "rows": 1
}))]
pub struct JuryRequest {
    /// The request the content answers, shown to the jurors.
    #[schemars(title = "Original question (optional)", extend("x-rows" = 1))]
    pub original_question: Option<Text<MAX_TEXT_CHARS>>,
    /// What the jurors score on accuracy, completeness, clarity, relevance and actionability.
    #[schemars(title = "Content to evaluate", required, extend("x-rows" = 8))]
    pub content: Option<Text<MAX_CONTENT_CHARS>>,
    /// 3 to 6 models that each score the content and give a verdict.
    #[schemars(length(min = 3, max = 6), extend("x-too-few" = "Jury mode requires at least 3 juror models", "x-too-many" = "Maximum 6 juror models allowed"))]
    pub juror_models: Option<Vec<ModelId>>,
    /// Writes the verdict report; must not be a juror.
    #[schemars(extend("x-not-in" = {
        "field": "jurorModels",
        "message": "The foreman cannot also be a juror"
    }))]
    pub foreman_model: Option<ModelId>,
    /// Per-stage timeout in milliseconds.
    #[schemars(title = "Per-stage timeout", range(min = 10000, max = 300000))]
    pub timeout_ms: Option<i64>,
}

/// `{question, mode:"jury", modeConfig: {content, originalQuestion?, jurorModels (3-6),
/// foremanModel (not a juror), timeoutMs (10 000-300 000)}}`.
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, JuryRequest) =
        request::start(body, "Content to evaluate is required", true)?;
    let content = request::required(
        cfg.content.as_ref(),
        "modeConfig.content",
        "Content to evaluate is required",
    )?;
    let original_question =
        request::opt_text(cfg.original_question.as_ref(), "modeConfig.originalQuestion")?;
    let juror_models = SPEC.panel_of(cfg.juror_models.as_deref(), "juror", defaults)?;
    let foreman_model = match &cfg.foreman_model {
        None => defaults.model(SPEC.id, "foreman"),
        Some(m) if m.0.trim().is_empty() => {
            return Err(FieldError::new("modeConfig.foremanModel", "Foreman model is required"))
        }
        Some(m) => m.0.trim().to_string(),
    };
    if juror_models.contains(&foreman_model) {
        return Err(FieldError::new(
            "modeConfig.foremanModel",
            "Foreman model must not be one of the juror models",
        ));
    }
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let models = request::distinct(&[&juror_models], &[&foreman_model]);
    let foreman_fallback_model = defaults.backup(SPEC.id, "foreman", &foreman_model);
    let config = JuryConfig {
        content,
        original_question,
        juror_models,
        foreman_model,
        timeout_ms,
        foreman_fallback_model,
    };
    Ok(asked.valid(SPEC.kind(), &config, models))
}

/// Jury in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "jury",
    label: "Jury",
    description: "Jurors score existing content on five dimensions and give a verdict; the foreman writes the verdict report.",
    multi_turn: false,
    question: Question { label: "What to evaluate", required: Some("Content to evaluate is required") },
    roles: &[
        Role::panel("juror", "Jurors", "jurorModels"),
        Role::model("foreman", "Foreman", "foremanModel").backed_up(),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<JuryRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Jury::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("present", "presenting the content"), ("deliberation", "the jurors' deliberation"), ("verdict", "the foreman's verdict")],
    report: Some(report),
    example: || {
        json!({ "mode": "jury", "question": "Evaluate this API documentation",
                "modeConfig": { "content": "## GET /api/users\nReturns users. Accepts limit and offset." } })
    },
    sim: Some(|ask| sim_answer(ask).or_else(|| text_answer(ask, &[sim::juror, sim::foreman]))),
    result_schema: schema_of::<JuryResult>,
};

#[cfg(test)]
mod tests;
