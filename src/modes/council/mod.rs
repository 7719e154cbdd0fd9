//! Council mode (seed 01): every member answers, every member ranks the anonymised answers,
//! the chairman synthesises. A title is generated alongside the synthesis for new
//! conversations.
//!
//! Decisions where the seed is silent:
//! - Every council member ranks in stage 2, including one whose stage-1 answer failed (the
//!   seed: "All council models rank"); a member that fails to rank is simply absent.
//! - The title call goes to the chairman. Its `title_complete` is held until
//!   `stage3_complete` has gone out, so the seed's event order holds whichever finishes first.
//! - A new conversation whose run fails still gets a fallback title (the question's first
//!   words), without a `title_complete` event.
//! - A failing chairman is replaced once by the configured backup (`[fallback] chairman`),
//!   with the same prompt; `stage3` then says `fallbackFrom`. The title stays with the
//!   primary chairman (a failed title falls back to the question anyway).

mod machine;
mod prompts;
mod read;
mod result;
mod sim;

pub use machine::*;
pub use prompts::*;
pub use read::*;
pub use result::*;

use super::common::{answer_of, create_label_map, label, named, response_blocks, with_history};
use super::prelude::*;
use super::ranking;
use super::reading::Unparsed;
use super::sim_text::text_answer;
use std::collections::BTreeMap;

/// The normalised configuration stored with a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CouncilConfig {
    pub council_models: Vec<String>,
    pub chairman_model: String,
    pub timeout_ms: u64,
    /// The server's backup chairman (`[fallback] chairman`), when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

/// Council's settings: in `modeConfig`, or at the top level of the request (the seed's shape).
// Its `title`s and `x-` keys are for the page's form (docs/protocol.md, `GET /api/modes`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(extend("x-question" = {"placeholder": "Ask the council a question…"}))]
pub struct CouncilRequest {
    /// 2 to 6 models that answer and rank each other's answers (the same model twice is two
    /// members).
    #[schemars(title = "Council models", length(min = 2, max = 6))]
    pub council_models: Option<Vec<ModelId>>,
    /// Writes the synthesis; may also sit on the council.
    pub chairman_model: Option<ModelId>,
    /// Per-stage timeout in milliseconds.
    #[schemars(title = "Per-stage timeout", range(min = 10000, max = 600000))]
    pub timeout_ms: Option<i64>,
}

/// The keys Council takes at the top level of a request as well as in `modeConfig`.
const TOP_LEVEL: &[&str] = &["councilModels", "chairmanModel", "timeoutMs"];

/// Validates a council request (the seed's schema, plus `timeoutMs`). Its settings may sit at
/// the top level (the seed's shape) or in `modeConfig`, not both; errors name them where
/// they were given.
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let in_config = request::mode_config(body, false)?;
    let at_top: serde_json::Map<String, Value> = TOP_LEVEL
        .iter()
        .filter_map(|k| body.get(*k).filter(|v| !v.is_null()).map(|v| (k.to_string(), v.clone())))
        .collect();
    let (cfg, prefix) = match (at_top.is_empty(), in_config.is_empty()) {
        (false, false) => {
            return Err(FieldError::new(
                "modeConfig",
                "give Council's settings at the top level or in modeConfig, not both",
            ))
        }
        (false, true) => (at_top, ""),
        _ => (in_config, "modeConfig."),
    };
    let cfg: CouncilRequest = request::typed(&cfg, "modeConfig")?;
    let name = |k: &str| format!("{prefix}{k}");
    let council_models = request::panel(cfg.council_models.as_deref(), &name("councilModels"))?
        .unwrap_or_else(|| defaults.models(SPEC.id, "council"));
    let chairman_model = request::model(cfg.chairman_model.as_ref(), &name("chairmanModel"))?
        .unwrap_or_else(|| defaults.model(SPEC.id, "chairman"));
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let models = request::distinct(&[&council_models], &[&chairman_model]);
    let chairman_fallback_model = defaults.backup(SPEC.id, "chairman", &chairman_model);
    let config =
        CouncilConfig { council_models, chairman_model, timeout_ms, chairman_fallback_model };
    Ok(request::Asked { question, conversation_id }.valid(SPEC.kind(), &config, models))
}

/// Council in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "council",
    label: "Council",
    description:
        "Every member answers, every member ranks the anonymised answers, the chairman synthesises.",
    multi_turn: true,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[
        Role::panel("council", "Council members", "councilModels"),
        Role::model("chairman", "Chairman", "chairmanModel").backed_up(),
        Role::internal("title", "Title"),
    ],
    top_level: TOP_LEVEL,
    schema: schema_of::<CouncilRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Council::new(config, ctx)?)),
    load_result,
    outcome: |r| r.pointer("/stage3/response").and_then(Value::as_str).map(|t| short(t, 160)),
    stages: &[],
    report: Some(report),
    example: || json!({ "mode": "council", "question": "Monolith or microservices for a team of five?" }),
    sim: Some(|ask| text_answer(ask, &[sim::ranking, sim::synthesis])),
    result_schema: schema_of::<CouncilResult>,
};

#[cfg(test)]
mod tests;
