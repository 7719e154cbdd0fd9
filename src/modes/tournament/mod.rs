//! Tournament mode (specs/11-tournament.md): every contestant answers; the answering ones, in
//! request order, are seeds 1..n of a single-elimination bracket; a judge picks the better of
//! two anonymous answers in each match (a round's matches in parallel, rounds in sequence); the
//! champion's own answer is the answer.
//!
//! The bracket and every match's presentation order and coin flip are pure functions of the
//! seeds and the run id, so a resumed run draws them the same. Each match is stored the moment
//! it is decided, so a cancelled or interrupted run keeps every finished match.

use super::common::empty_is_failure;
use super::prelude::*;

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

/// Tournament's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TournamentRequest {
    /// The contestants, 4 to 8, in seed order (a model listed twice is two contestants).
    #[schemars(length(min = 4, max = 8), extend("x-too-few" = "A tournament needs at least 4 contestants", "x-too-many" = "A tournament has at most 8 contestants"))]
    pub contestant_models: Option<Vec<ModelId>>,
    /// Judges every match; must not be a contestant.
    pub judge_model: Option<ModelId>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 300000))]
    pub timeout_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TournamentConfig {
    pub contestant_models: Vec<String>,
    pub judge_model: String,
    pub timeout_ms: u64,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, TournamentRequest) = request::start(body, "Question is required", false)?;
    let contestant_models =
        SPEC.panel_of(cfg.contestant_models.as_deref(), "contestant", defaults)?;
    let judge_model = SPEC.model_of(cfg.judge_model.as_ref(), "judge", defaults)?;
    if contestant_models.contains(&judge_model) {
        return Err(FieldError::new(
            "modeConfig.judgeModel",
            format!("the judge ({judge_model}) must not be a contestant"),
        ));
    }
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let models = request::distinct(&[&contestant_models], &[&judge_model]);
    let config = TournamentConfig { contestant_models, judge_model, timeout_ms };
    Ok(asked.valid(SPEC.kind(), &config, models))
}

/// Tournament in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "tournament",
    label: "Tournament",
    description: "4-8 models answer; a judge compares them two at a time in a single-elimination bracket; the champion's own answer is the answer.",
    multi_turn: false,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[
        Role::panel("contestant", "Contestants", "contestantModels"),
        Role::model("judge", "Judge", "judgeModel"),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<TournamentRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Tournament::new(config, ctx)?)),
    load_result,
    outcome: |r| {
        let c = typed::<TournamentResult>(r)?.champion?;
        Some(format!(
            "Seed {} ({}) won {} of {} rounds: {}",
            c.seed,
            c.model,
            c.matches_won,
            c.total_rounds,
            short(&c.response, 80)
        ))
    },
    stages: &[("collect", "the contestants' answers")],
    report: Some(report),
    example: || {
        json!({ "mode": "tournament", "question": "What is the best way to learn a new programming language?",
                "modeConfig": { "contestantModels": ["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon", "sim/zeta"],
                                "judgeModel": "sim/delta" } })
    },
    sim: Some(sim_answer),
    result_schema: schema_of::<TournamentResult>,
};

#[cfg(test)]
mod tests;
