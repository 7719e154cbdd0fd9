//! Brainstorm mode (specs/14-brainstorm.md): every model lists ideas freely (in parallel); one
//! curator groups all of them, anonymised by source, into themed clusters; every model rates
//! each cluster's Novelty, Feasibility and Impact (in parallel); the server ranks the clusters
//! (models never do this arithmetic); one refiner turns the best cluster into a full proposal,
//! which is the answer.
//!
//! Each stage is stored the moment it completes (each ideator, the clustering, each scorer, the
//! ranking, the refinement), so a cancelled or interrupted run keeps what finished. The source
//! labels (`Model A`, `Model B`…) are a pure function of the run's seed, so a resumed run labels
//! the models the same. Replies are read only where they state an idea, a cluster or a score;
//! what is not stated is absent (an unscored cluster, a default promise marked as such), never
//! guessed.
//!
//! The ideas, the clusters and the scores are machine-read: each call carries its reply schema
//! (`brainstorm_ideas`, `brainstorm_clusters` over exactly this run's idea ids, `brainstorm_scores`
//! over the clusters' numbers), and a model whose route takes structured output is asked for
//! that JSON instead of the text format. A reply is read from its JSON when it fits, under the
//! same rules as the text, else by the text readers; each ideator, the clustering and each
//! scorer say which (`readFrom`). The proposal is text a person reads and carries none.

use super::common::{create_label_map, label, FailedModel};
use super::payload::failed_from_rows;
use super::prelude::*;
use super::reading::{between, unmark, Unparsed};
use super::runner::GLOBAL_TIMER;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

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

const IDEATION_ORDER: i32 = 0;
const CLUSTERING_ORDER: i32 = 10;
const SCORING_ORDER: i32 = 20;
const RANKING_ORDER: i32 = 21;
const REFINEMENT_ORDER: i32 = 99;
/// Ideas kept per model; the rest of a longer list is dropped (and counted).
pub const MAX_IDEAS: usize = 10;

/// Brainstorm's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BrainstormRequest {
    /// The models that list ideas and then score the clusters, 3 to 6 (default: Council's
    /// three).
    #[schemars(length(min = 3, max = 6), extend("x-too-few" = "A brainstorm needs at least 3 models", "x-too-many" = "A brainstorm has at most 6 models"))]
    pub models: Option<Vec<ModelId>>,
    /// Groups the ideas into clusters (default: the first model).
    pub curator_model: Option<ModelId>,
    /// Turns the best cluster into the proposal (default: the first model).
    pub refiner_model: Option<ModelId>,
    /// Ideas each model is asked for at least (it may give up to 10): 3 to 10 (5).
    #[schemars(range(min = 3, max = 10))]
    pub min_ideas_per_model: Option<i64>,
    /// The most clusters the curator may form: 3 to 8 (6).
    #[schemars(range(min = 3, max = 8))]
    pub max_clusters: Option<i64>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 180000))]
    pub timeout_ms: Option<i64>,
    /// The whole run's time limit in milliseconds (600000): the stage in flight finishes, the
    /// stages before the refinement are skipped, and the refiner works with what exists.
    #[schemars(range(min = 60000, max = 1800000))]
    pub global_timeout_ms: Option<i64>,
}

/// The stored configuration of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BrainstormConfig {
    pub models: Vec<String>,
    pub curator_model: String,
    pub refiner_model: String,
    pub min_ideas_per_model: usize,
    pub max_clusters: usize,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
    /// The server's backup for the curator (`[fallback] facilitator`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facilitator_fallback_model: Option<String>,
    /// The server's backup for the refiner (`[fallback] chairman`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, BrainstormRequest) = request::start(body, "Question is required", false)?;
    let models = SPEC.panel_of(cfg.models.as_deref(), "ideator", defaults)?;
    let curator_model =
        SPEC.model_or(cfg.curator_model.as_ref(), "curator", defaults, &models[0])?;
    let refiner_model =
        SPEC.model_or(cfg.refiner_model.as_ref(), "refiner", defaults, &models[0])?;
    let min_ideas = cfg.min_ideas_per_model.unwrap_or(5);
    let max_clusters = cfg.max_clusters.unwrap_or(6);
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let global_timeout_ms = request::given(cfg.global_timeout_ms, 600_000);
    let all = request::distinct(&[&models], &[&curator_model, &refiner_model]);
    let config = BrainstormConfig {
        facilitator_fallback_model: defaults.backup(SPEC.id, "curator", &curator_model),
        chairman_fallback_model: defaults.backup(SPEC.id, "refiner", &refiner_model),
        models,
        curator_model,
        refiner_model,
        min_ideas_per_model: min_ideas as usize,
        max_clusters: max_clusters as usize,
        timeout_ms,
        global_timeout_ms,
    };
    Ok(asked.valid(SPEC.kind(), &config, all))
}

/// Brainstorm in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "brainstorm",
    label: "Brainstorm",
    description: "3-6 models list ideas freely, a curator groups them into themed clusters, every model scores the clusters on novelty, feasibility and impact, and the best cluster is refined into a full proposal.",
    multi_turn: false,
    question: Question { label: "Challenge", required: Some("Question is required") },
    roles: &[
        Role::panel("ideator", "Brainstormers (they also score the clusters)", "models"),
        // The refiner before the curator: `conclave run`'s `--chairman` names the first
        // single-model role with a backup, and the refiner is the one that writes the result.
        Role::model("refiner", "Refiner", "refinerModel").backed_by("chairman"),
        Role::model("curator", "Curator", "curatorModel").backed_by("facilitator"),
        Role::internal("scorer", "Scorers (the brainstormers)"),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<BrainstormRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Brainstorm::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("ideation", "listing ideas"), ("all_ideation", "every idea list in"), ("clustering", "grouping the ideas"), ("scoring", "scoring the clusters"), ("scorer", "a scorer's ratings"), ("all_scoring", "every score in"), ("refinement", "writing the proposal")],
    report: Some(report),
    example: || {
        json!({ "mode": "brainstorm", "question": "How could a small city library attract more teenagers?",
                "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma"],
                                "curatorModel": "sim/delta", "refinerModel": "sim/delta" } })
    },
    sim: Some(sim_answer),
    result_schema: schema_of::<BrainstormResult>,
};

#[cfg(test)]
mod tests;
