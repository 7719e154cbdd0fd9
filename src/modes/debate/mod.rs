//! Debate mode (seed 04): answer; each model sees the others' answers (anonymised) and may
//! REVISE, STAND or MERGE; everyone votes on the revised answers under a new label map; the
//! plurality winner's revised answer is the result, ties going to the first label
//! alphabetically (no chairman: peers only).

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

use super::common::{
    answer_of, create_label_map, label, member_names, named, response_blocks, word_count, Answer,
};
use super::prelude::*;
use super::reading::{between, json_values, split_reasoning, Unparsed};
use super::sim_text::text_answer;
use super::stated::{last_stated, Labels};
use super::voting::{
    ballot_rows, ballots_from_rows, cast, first_alphabetically, vote_prompt, vote_schema, Round,
};
use std::collections::BTreeMap;

/// Mixed into the run seed so the vote's label map is a fresh shuffle.
const VOTE_SALT: u64 = 0x5eed_0fd0_be7e;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DebateConfig {
    pub models: Vec<String>,
    pub timeout_ms: u64,
}

/// Debate's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DebateRequest {
    /// 3 to 6 models that answer, revise after reading the others, and vote.
    #[schemars(length(min = 3, max = 6), extend("x-too-few" = "Debate mode requires at least 3 models", "x-too-many" = "Maximum 6 models allowed"))]
    pub models: Option<Vec<ModelId>>,
    /// Per-stage timeout in milliseconds.
    #[schemars(title = "Per-stage timeout", range(min = 10000, max = 600000))]
    pub timeout_ms: Option<i64>,
}

/// `{question, modeConfig?: {models (3-6), timeoutMs}}`; follow-ups are refused by the engine
/// (Debate is not multi-turn).
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, DebateRequest) = request::start(body, "Question is required", false)?;
    let models = SPEC.panel_of(cfg.models.as_deref(), "respondent", defaults)?;
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let all = request::distinct(&[&models], &[]);
    let config = DebateConfig { models, timeout_ms };
    Ok(asked.valid(SPEC.kind(), &config, all))
}

/// Debate in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "debate",
    label: "Debate",
    description: "Every model answers, revises after reading the others anonymously, then votes on the revised answers.",
    multi_turn: false,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[
        Role::panel("respondent", "Debaters", "models"),
        Role::internal("debater", "Revisions"),
        Role::internal("voter", "Votes"),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<DebateRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Debate::new(config, ctx)?)),
    load_result,
    outcome: super::registry::winner_outcome,
    stages: &[("revision", "the revisions"), ("vote", "the vote")],
    report: Some(report),
    example: || json!({ "mode": "debate", "question": "Should companies adopt a 4-day work week?" }),
    sim: Some(|ask| sim_answer(ask).or_else(|| text_answer(ask, &[sim::revision]))),
    result_schema: schema_of::<DebateResult>,
};

#[cfg(test)]
mod tests;
