//! Vote mode (specs/02-vote.md): answer, vote anonymously for the single best answer, the
//! plurality winner's original answer is the result; the chairman breaks ties, and the first
//! tied label alphabetically wins if the chairman cannot. A chairman whose tiebreak call fails
//! is replaced once by the configured backup (`[fallback] chairman`) before that rule applies.

mod machine;
mod result;
mod sim;

pub use machine::*;
pub use result::*;

use super::common::{answer_of, create_label_map, label, named, with_history, Answer};
use super::prelude::*;
use super::sim_text::text_answer;
use super::voting::{
    ballot_rows, ballots_from_rows, cast, first_alphabetically, read_vote_reply, tally,
    tiebreaker_prompt, vote_prompt, vote_schema, Ballot, Round, Tally, VoteRow,
};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VoteConfig {
    pub models: Vec<String>,
    pub chairman_model: String,
    pub timeout_ms: u64,
    /// The server's backup chairman for the tiebreak (`[fallback] chairman`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

/// Vote's `modeConfig`.
// Its `title`s are for the page's form (docs/protocol.md, `GET /api/modes`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VoteRequest {
    /// 3 to 7 models that answer and then vote (the same model twice is two voters).
    #[schemars(title = "Voting models", length(min = 3, max = 7), extend("x-too-few" = "Vote mode requires at least 3 models", "x-too-many" = "Maximum 7 models allowed"))]
    pub models: Option<Vec<ModelId>>,
    /// Breaks a tie among the tied answers (default: the first model); may also vote.
    #[schemars(title = "Tie-breaking chairman")]
    pub chairman_model: Option<ModelId>,
    /// Per-stage timeout in milliseconds.
    #[schemars(title = "Per-stage timeout", range(min = 10000, max = 600000))]
    pub timeout_ms: Option<i64>,
}

/// `{question, conversationId?, modeConfig?: {models (3-7), chairmanModel, timeoutMs}}`.
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, VoteRequest) = request::start(body, "Question is required", false)?;
    let models = SPEC.panel_of(cfg.models.as_deref(), "voter", defaults)?;
    let chairman_model =
        SPEC.named(cfg.chairman_model.as_ref(), "chairman")?.unwrap_or_else(|| models[0].clone());
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let all = request::distinct(&[&models], &[&chairman_model]);
    let chairman_fallback_model = defaults.backup(SPEC.id, "chairman", &chairman_model);
    let config = VoteConfig { models, chairman_model, timeout_ms, chairman_fallback_model };
    Ok(asked.valid(SPEC.kind(), &config, all))
}

/// Vote in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "vote",
    label: "Vote",
    description: "Every model answers, then votes for the best anonymised answer; the plurality wins and the chairman breaks ties.",
    multi_turn: true,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[
        Role::panel("voter", "Voters", "models"),
        Role::model("chairman", "Chairman (tiebreak)", "chairmanModel").backed_up(),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<VoteRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Vote::new(config, ctx)?)),
    load_result,
    outcome: super::registry::winner_outcome,
    stages: &[("vote_round", "the vote")],
    report: Some(report),
    example: || json!({ "mode": "vote", "question": "Which database should a team of five use?" }),
    sim: Some(|ask| text_answer(ask, &[sim::vote])),
    result_schema: schema_of::<VoteResult>,
};

#[cfg(test)]
mod tests;
