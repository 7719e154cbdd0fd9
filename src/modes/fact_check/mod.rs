//! Fact-Check mode (specs/15-fact-check.md): the content (given, or generated from the
//! question) is cut into numbered, typed, checkable claims; every checker judges every claim
//! on its own, in parallel; the server forms each claim's consensus (models never do this
//! arithmetic); one reporter writes the reliability report.
//!
//! Each stage is stored the moment it completes (generate, extract, each checker, the
//! consensus, the report), so a cancelled or interrupted run keeps what finished. Replies are
//! read only where they state a claim, a verdict, a confidence or a score; what is not stated
//! is reported as such (`type: null`, `parseSuccess: false`, `addressed: false`,
//! `confidenceStated: false`, `reliabilityScore: null`), never guessed.
//!
//! Structured replies: an extractor or checker whose route takes structured output is asked
//! for JSON (`fact_check_claims`, `fact_check_verifications`) instead of the text blocks, read
//! under the same rules, and the extraction and each check say where they were read from
//! (`readFrom`). The generated content and the report are text a person reads.

use super::prelude::*;
use super::reading::{between, unmark};
use super::runner::GLOBAL_TIMER;

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

const GENERATE_ORDER: i32 = 0;
const EXTRACT_ORDER: i32 = 1;
const VERIFY_ORDER: i32 = 10;
const CONSENSUS_ORDER: i32 = 11;
const REPORT_ORDER: i32 = 99;

/// Fact-Check's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FactCheckRequest {
    /// The text to fact-check. Without it the generator answers the question and its answer
    /// is checked.
    pub content: Option<Text<MAX_CONTENT_CHARS>>,
    /// Answers the question when no content is given (default: the first Council model).
    pub generator_model: Option<ModelId>,
    /// Lists the checkable claims (default: the first Council model).
    pub extractor_model: Option<ModelId>,
    /// The checkers, 1 to 4 distinct models; each judges every claim on its own (default:
    /// Council's three).
    #[schemars(length(min = 1, max = 4), extend("x-too-few" = "A fact-check needs at least 1 checker", "x-too-many" = "A fact-check has at most 4 checkers"))]
    pub checker_models: Option<Vec<ModelId>>,
    /// Writes the reliability report (default: the first Council model).
    pub reporter_model: Option<ModelId>,
    /// Longer content is cut to this many characters, with a note: 500 to 50000 (20000).
    #[schemars(range(min = 500, max = 50000))]
    pub max_content_length: Option<i64>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 180000))]
    pub timeout_ms: Option<i64>,
    /// The whole run's time limit in milliseconds (600000): the stage in flight finishes, the
    /// report follows if the checks are done, else the run fails.
    #[schemars(range(min = 60000, max = 1800000))]
    pub global_timeout_ms: Option<i64>,
}

/// The stored configuration of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FactCheckConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub generator_model: String,
    pub extractor_model: String,
    pub checker_models: Vec<String>,
    pub reporter_model: String,
    pub max_content_length: usize,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
    /// The server's backup for the extractor (`[fallback] facilitator`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facilitator_fallback_model: Option<String>,
    /// The server's backup for the reporter (`[fallback] chairman`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

/// A text compared ignoring case and spacing.
pub fn norm(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).flat_map(char::to_lowercase).collect()
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, FactCheckRequest) = request::start(body, "Question is required", false)?;
    let content = request::opt_text(cfg.content.as_ref(), "modeConfig.content")?;
    let generator_model = SPEC.model_of(cfg.generator_model.as_ref(), "generator", defaults)?;
    let extractor_model = SPEC.model_of(cfg.extractor_model.as_ref(), "extractor", defaults)?;
    let reporter_model = SPEC.model_of(cfg.reporter_model.as_ref(), "reporter", defaults)?;
    let checker_models = SPEC.panel_of(cfg.checker_models.as_deref(), "checker", defaults)?;
    for (i, m) in checker_models.iter().enumerate() {
        if let Some(j) = checker_models[..i].iter().position(|x| x == m) {
            return Err(FieldError::new(
                "modeConfig.checkerModels",
                format!(
                    "item {i} repeats item {j} ({m}); the checks must be independent, so each \
                     checker is a different model"
                ),
            ));
        }
    }
    let max_content_length = cfg.max_content_length.unwrap_or(20_000);
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let global_timeout_ms = request::given(cfg.global_timeout_ms, 600_000);
    let singles: Vec<&str> = if content.is_none() {
        vec![&generator_model, &extractor_model, &reporter_model]
    } else {
        vec![&extractor_model, &reporter_model]
    };
    let models = request::distinct(&[&checker_models], &singles);
    let config = FactCheckConfig {
        content,
        facilitator_fallback_model: defaults.backup(SPEC.id, "extractor", &extractor_model),
        chairman_fallback_model: defaults.backup(SPEC.id, "reporter", &reporter_model),
        generator_model,
        extractor_model,
        checker_models,
        reporter_model,
        max_content_length: max_content_length as usize,
        timeout_ms,
        global_timeout_ms,
    };
    Ok(asked.valid(SPEC.kind(), &config, models))
}

/// Fact-Check in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "fact_check",
    label: "Fact-Check",
    description: "Checkable claims are extracted from the content (or a generated answer), 1-4 checkers judge each one independently, the server forms a majority consensus, and a reliability report follows.",
    multi_turn: false,
    question: Question { label: "What to fact-check", required: Some("Question is required") },
    roles: &[
        Role::panel("checker", "Checkers", "checkerModels"),
        Role::model("generator", "Generator (answers the question when no content is given)", "generatorModel"),
        // The reporter before the extractor: `conclave run`'s `--chairman` names the first
        // single-model role with a backup, and the reporter is the one that writes the result.
        Role::model("reporter", "Reporter", "reporterModel").backed_by("chairman"),
        Role::model("extractor", "Extractor", "extractorModel").backed_by("facilitator"),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<FactCheckRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(FactCheck::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("extract", "reading the claims"), ("verify", "checking the claims"), ("checker", "a checker's verdicts"), ("all_checkers", "every check in"), ("report", "the report")],
    report: Some(report),
    example: || {
        json!({ "mode": "fact_check", "question": "Fact-check this paragraph.",
                "modeConfig": { "content": "The Eiffel Tower was completed in 1889 for the World's Fair. It is 330 metres tall and was the tallest man-made structure in the world until 1930.",
                                "checkerModels": ["sim/alpha", "sim/beta", "sim/gamma"] } })
    },
    sim: Some(sim_answer),
    result_schema: schema_of::<FactCheckResult>,
};

#[cfg(test)]
mod tests;
