//! Clarity mode (specs/clarity-mode.md, seeds/clarity-panel-prd.md): three personas (Skeptic,
//! Advocate, Generalist) score a brief on seven weighted dimensions in parallel; a discussion
//! round lets them revise after seeing each other's verdicts (skipped when all agree within a
//! point, by default); an Arbiter settles dimensions still disputed (spread > 2), weighted 1.5x
//! there, and the run is flagged for human review. The final score, its method and the
//! consolidated top-5 critique are computed here.
//!
//! Decisions where the PRD is silent: scores are read from the reply's JSON object (the last
//! parseable one), else from `Dimension: N` lines; an evaluator needs at least four readable
//! dimensions to count, and the panel needs two; the overall score renormalises the weights of
//! dimensions that have a score; the method is `median` (no discussion), `post_discussion`
//! (the medians of the revised scores) or `arbiter`; if the Arbiter fails the run still
//! completes on the post-discussion medians and stays flagged for review. A failing Arbiter
//! is first replaced once by the configured backup (`[fallback] arbiter`); the arbiter entry
//! then says `fallbackFrom`.

use super::prelude::*;
use super::request::{MAX_SHORT_CHARS, MAX_TEXT_CHARS};
use super::sim_text::text_answer;
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
pub(crate) use sim::*;

#[cfg(test)]
mod tests;

/// One scoring dimension.
pub struct Dimension {
    pub key: &'static str,
    pub name: &'static str,
    pub weight: f64,
    pub guideline: &'static str,
}

/// The PRD's seven dimensions and weights (summing to 1).
pub const DIMENSIONS: [Dimension; 7] = [
    Dimension { key: "firstPrinciplesCoherence", name: "First-Principles Coherence", weight: 0.20, guideline: "Reasoning builds from clear foundations: 9-10 every conclusion traces to stated premises; 5 some leaps; 0-2 assertions without foundations." },
    Dimension { key: "internalConsistency", name: "Internal Consistency", weight: 0.15, guideline: "No contradictions between sections: 9-10 none; 5 minor tensions; 0-2 sections contradict each other." },
    Dimension { key: "evidenceQuality", name: "Evidence Quality", weight: 0.15, guideline: "Sources are credible, relevant, properly cited: 9-10 every key claim sourced; 5 some unsupported claims; 0-2 no evidence." },
    Dimension { key: "accessibility", name: "Accessibility", weight: 0.15, guideline: "Clear language for the intended reader: 9-10 plain and precise; 5 some jargon; 0-2 impenetrable." },
    Dimension { key: "objectivity", name: "Objectivity", weight: 0.15, guideline: "Balanced perspectives, no obvious bias: 9-10 strongest version of each side; 5 tilted; 0-2 one-sided." },
    Dimension { key: "factualAccuracy", name: "Factual Accuracy", weight: 0.10, guideline: "Claims are verifiable and correctly stated: 9-10 all correct; 5 some errors; 0-2 largely wrong." },
    Dimension { key: "biasDetection", name: "Bias Detection", weight: 0.10, guideline: "Free of subtle framing bias and selective emphasis: 9-10 none found; 5 noticeable framing; 0-2 pervasive." },
];

/// Disagreement: a spread above this on any dimension or overall.
pub const DISAGREEMENT_SPREAD: f64 = 2.0;
/// `discussion: "auto"` skips the round when every spread is at most this.
pub const AGREEMENT_SPREAD: f64 = 1.0;
/// The Arbiter's weight on disputed dimensions.
pub const ARBITER_WEIGHT: f64 = 1.5;

/// An evaluator persona.
pub struct Persona {
    pub role: &'static str,
    pub name: &'static str,
    pub system_prompt: &'static str,
    pub focus: &'static [&'static str],
}

pub const PERSONAS: [Persona; 3] = [
    Persona {
        role: "skeptic",
        name: "Skeptic",
        system_prompt: "You are the Skeptic on a panel that scores policy briefs. You challenge every claim, flag unsupported assertions and ask of each one: what is the evidence? You are not contrarian for its own sake: a well-supported claim earns a high score. You weigh Evidence Quality, Factual Accuracy and First-Principles Coherence most heavily.",
        focus: &["evidenceQuality", "factualAccuracy", "firstPrinciplesCoherence"],
    },
    Persona {
        role: "advocate",
        name: "Advocate",
        system_prompt: "You are the Advocate on a panel that scores policy briefs. You make sure each position appears in its strongest form, catch strawmanning and check that the brief is balanced. You weigh Objectivity, Bias Detection and Internal Consistency most heavily.",
        focus: &["objectivity", "biasDetection", "internalConsistency"],
    },
    Persona {
        role: "generalist",
        name: "Generalist",
        system_prompt: "You are the Generalist on a panel that scores policy briefs. You read as an average, intelligent reader would: you check that the brief is accessible, flag jargon and unexplained terms, and notice where the argument is hard to follow. You weigh Accessibility, Internal Consistency and First-Principles Coherence most heavily.",
        focus: &["accessibility", "internalConsistency", "firstPrinciplesCoherence"],
    },
];

pub const ARBITER_PROMPT: &str = "You are the Arbiter of a panel that scores policy briefs. Three evaluators disagree on some dimensions even after discussing them. You read the brief yourself, weigh their positions and give a definitive score for each disputed dimension, with detailed reasoning.";

const SIM_DEFAULT: &str = "sim/haiku";

/// When the evaluators discuss their scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Discussion {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClarityConfig {
    pub content: String,
    pub context: Option<String>,
    pub title: Option<String>,
    /// skeptic, advocate, generalist, arbiter.
    pub models: BTreeMap<String, String>,
    pub discussion: Discussion,
    pub timeout_ms: u64,
}

/// The key of the stored configuration naming the server's backup Arbiter (`[fallback]
/// arbiter`), when one is configured. Kept beside [`ClarityConfig`] rather than in it, as
/// other code builds that struct for its prompts.
const ARBITER_FALLBACK_KEY: &str = "arbiterFallbackModel";

/// The `stage_order` of a Clarity stage's calls.
fn stage_order(stage: &str) -> i32 {
    match stage {
        "evaluation" => 1,
        "discussion" => 3,
        _ => 4,
    }
}

/// The model of each of Clarity's four roles.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClarityModels {
    /// Looks for what does not hold up.
    pub skeptic: Option<ModelId>,
    /// Looks for what works.
    pub advocate: Option<ModelId>,
    /// Reads as the intended audience would.
    pub generalist: Option<ModelId>,
    /// Settles the dimensions the evaluators still disagree on.
    pub arbiter: Option<ModelId>,
}

/// Clarity's `modeConfig`.
// Its `title`s and `x-` keys are for the page's form (docs/protocol.md, `GET /api/modes`);
// `required` marks `content` there, and `validate` refuses a request without it.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(extend("x-question" = {
    "label": "Instruction (optional)",
    "placeholder": "Score this brief",
    "rows": 1,
    "after": "context"
}))]
pub struct ClarityRequest {
    /// Scored by the Skeptic, the Advocate and the Generalist on seven weighted dimensions.
    #[schemars(title = "Brief to score", required, extend("x-rows" = 8))]
    pub content: Option<Text<MAX_CONTENT_CHARS>>,
    /// Shown to the evaluators above the brief.
    #[schemars(title = "Title (optional)")]
    pub title: Option<Text<MAX_SHORT_CHARS>>,
    /// What the evaluators should know about the brief's setting.
    #[schemars(title = "Context (optional)", extend("x-rows" = 1))]
    pub context: Option<Text<MAX_TEXT_CHARS>>,
    /// Each role's model (default: a fast model for all four).
    pub models: Option<ClarityModels>,
    /// Whether the evaluators see each other's scores and may revise theirs.
    #[schemars(title = "Discussion round", extend(
        "default" = "auto",
        "x-enum-labels" = {
            "auto": "Auto: skip when everyone is within a point",
            "always": "Always",
            "never": "Never"
        }
    ))]
    pub discussion: Option<Discussion>,
    /// Per-stage timeout in milliseconds.
    #[schemars(title = "Per-stage timeout", range(min = 10000, max = 300000))]
    pub timeout_ms: Option<i64>,
}

/// `{question?, mode:"clarity", modeConfig: {content, context?, title?, models?: {skeptic,
/// advocate, generalist, arbiter}, discussion?: auto|always|never, timeoutMs?}}`.
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let cfg: ClarityRequest = request::typed(&request::mode_config(body, true)?, "modeConfig")?;
    let content = request::required(
        cfg.content.as_ref(),
        "modeConfig.content",
        "Content to score is required",
    )?;
    let question = match body.get("question") {
        None | Some(Value::Null) => "Score this brief".to_string(),
        _ => request::question(body, "Question is required")?,
    };
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let context = request::opt_text(cfg.context.as_ref(), "modeConfig.context")?;
    let title = request::opt_text(cfg.title.as_ref(), "modeConfig.title")?;
    let given = cfg.models.unwrap_or_default();
    let mut models = BTreeMap::new();
    for (role, id) in [
        ("skeptic", &given.skeptic),
        ("advocate", &given.advocate),
        ("generalist", &given.generalist),
        ("arbiter", &given.arbiter),
    ] {
        models.insert(role.to_string(), SPEC.model_of(id.as_ref(), role, defaults)?);
    }
    let discussion = cfg.discussion.unwrap_or(Discussion::Auto);
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let all = request::distinct(&[], &models.values().map(String::as_str).collect::<Vec<_>>());
    let arbiter_fallback_model =
        models.get("arbiter").and_then(|arbiter| defaults.backup(SPEC.id, "arbiter", arbiter));
    let config = ClarityConfig { content, context, title, models, discussion, timeout_ms };
    let mut config = serde_json::to_value(&config).unwrap_or(Value::Null);
    if let (Some(backup), Some(o)) = (arbiter_fallback_model, config.as_object_mut()) {
        o.insert(ARBITER_FALLBACK_KEY.into(), json!(backup));
    }
    Ok(ValidRequest { mode: SPEC.kind(), question, conversation_id, config, models: all })
}

/// Clarity in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "clarity",
    label: "Clarity",
    description: "A Skeptic, an Advocate and a Generalist score a brief on seven weighted dimensions; an Arbiter settles lasting disagreement, which is flagged for human review.",
    multi_turn: false,
    question: Question { label: "What to score (optional)", required: None },
    roles: &[
        Role::model("skeptic", "Skeptic", "models.skeptic"),
        Role::model("advocate", "Advocate", "models.advocate"),
        Role::model("generalist", "Generalist", "models.generalist"),
        Role::model("arbiter", "Arbiter", "models.arbiter").backed_up(),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<ClarityRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Clarity::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("discussion", "the evaluators' discussion"), ("arbiter", "the arbiter's ruling")],
    report: Some(report),
    example: || {
        json!({ "mode": "clarity", "modeConfig": { "content": "Brief: a mobile app for reporting potholes with a photo; the city fixes them within 14 days." } })
    },
    sim: Some(|ask| {
        sim_answer(ask).or_else(|| text_answer(ask, &[clarity_evaluate, clarity_arbitrate]))
    }),
    result_schema: schema_of::<ClarityResult>,
};
