//! Chain mode (specs/07-chain.md): 2-6 steps strictly in sequence, each one model with one
//! mandate; step 1 drafts from the question alone, each later step gets only the question, the
//! latest completed version and its mandate, and returns a full improved version. A failed
//! later step is skipped (the next one is told); the answer is the last completed version.
//!
//! Each step is stored the moment it completes or is skipped, so a cancelled or interrupted
//! run keeps (and a resumed one replays) every finished step. Nothing of a reply is parsed but
//! its `[Editor's Note: …]` spans; word counts are the server's.

mod machine;
mod prompts;
mod read;
mod result;
mod sim;
#[cfg(test)]
mod tests;

pub use machine::*;
pub use prompts::*;
pub use read::*;
pub use result::*;
use sim::*;

use super::common::word_count;
use super::prelude::*;

/// The row of the chain's plan, stored at the start.
const PLAN: &str = "chain_plan";
const MAX_CUSTOM_MANDATE: usize = 2000;

/// A step's mandate, from the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mandate {
    Draft,
    StructureDepth,
    AccuracyCompleteness,
    PolishFormat,
    SecurityReview,
    CostAnalysis,
    Accessibility,
    Performance,
    // The step's `customMandate`, verbatim (a doc comment here would make the schema a oneOf).
    Custom,
}

impl Mandate {
    pub fn key(self) -> &'static str {
        self.info().0
    }

    pub fn display(self) -> &'static str {
        self.info().1
    }

    /// What the prompt asks the step to focus on (Custom: its own text).
    pub fn focus(self) -> &'static str {
        self.info().2
    }

    fn info(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Mandate::Draft => ("draft", "Draft", "cover every aspect of the request"),
            Mandate::StructureDepth => (
                "structure_depth",
                "Structure & Depth",
                "reorder for flow, add the sections that are missing, deepen the thin parts and fix the heading hierarchy",
            ),
            Mandate::AccuracyCompleteness => (
                "accuracy_completeness",
                "Accuracy & Completeness",
                "check every claim, fill the gaps, and add caveats and edge cases",
            ),
            Mandate::PolishFormat => (
                "polish_format",
                "Polish & Format",
                "improve readability and grammar, make the formatting consistent and smooth the transitions",
            ),
            Mandate::SecurityReview => (
                "security_review",
                "Security Review",
                "point out risky patterns and vulnerabilities and add hardening advice",
            ),
            Mandate::CostAnalysis => (
                "cost_analysis",
                "Cost Analysis",
                "add cost estimates, pricing, return on investment and the total cost of ownership",
            ),
            Mandate::Accessibility => (
                "accessibility",
                "Accessibility",
                "add WCAG notes and make the language and the design inclusive",
            ),
            Mandate::Performance => (
                "performance",
                "Performance",
                "find the bottlenecks, add estimates and suggest optimisations",
            ),
            Mandate::Custom => ("custom", "Custom", ""),
        }
    }
}

/// One step of a request.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepRequest {
    /// The model that writes this step's version.
    pub model: Option<ModelId>,
    /// What this step improves: draft, structure_depth, accuracy_completeness, polish_format,
    /// security_review, cost_analysis, accessibility, performance or custom.
    #[schemars(with = "Mandate")]
    pub mandate: Option<Mandate>,
    /// The mandate in your own words (1-2 000 characters): only with `custom`.
    pub custom_mandate: Option<Text<MAX_CUSTOM_MANDATE>>,
}

/// Chain's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChainRequest {
    /// The steps, in order: 2 to 6, each a model and a mandate (default: draft, structure &
    /// depth, accuracy & completeness, polish & format on four models). Each is an object
    /// `{model, mandate, customMandate?}`: leave this empty for the default chain.
    #[schemars(length(min = 2, max = 6), extend("x-too-few" = "A chain has 2 to 6 steps", "x-too-many" = "A chain has 2 to 6 steps"))]
    pub steps: Option<Vec<StepRequest>>,
    /// Per-step timeout in milliseconds.
    #[schemars(range(min = 10000, max = 180000))]
    pub timeout_ms: Option<i64>,
    /// When this many milliseconds have passed, the step in flight finishes and the remaining
    /// steps are skipped (default 600 000).
    #[schemars(range(min = 60000, max = 1800000))]
    pub global_timeout_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepConfig {
    pub model: String,
    pub mandate: Mandate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_mandate: Option<String>,
}

impl StepConfig {
    fn focus(&self) -> &str {
        self.custom_mandate.as_deref().unwrap_or(self.mandate.focus())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChainConfig {
    pub steps: Vec<StepConfig>,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
}

fn default_steps(defaults: &Defaults) -> Vec<StepConfig> {
    let mut models = defaults.models(SPEC.id, "drafter");
    models.extend(defaults.models(SPEC.id, "improver"));
    [Mandate::Draft, Mandate::StructureDepth, Mandate::AccuracyCompleteness, Mandate::PolishFormat]
        .into_iter()
        .zip(models)
        .map(|(mandate, model)| StepConfig { model, mandate, custom_mandate: None })
        .collect()
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, ChainRequest) = request::start(body, "Question is required", false)?;
    let steps = match &cfg.steps {
        None => default_steps(defaults),
        Some(list) => {
            let mut steps = Vec::with_capacity(list.len());
            for (i, s) in list.iter().enumerate() {
                let field = |f: &str| format!("modeConfig.steps[{i}].{f}");
                let model = request::model(s.model.as_ref(), &field("model"))?
                    .ok_or_else(|| FieldError::new(&field("model"), "is required"))?;
                let known: Vec<&str> = MANDATES.iter().map(|m| m.key()).collect();
                let mandate = s.mandate.ok_or_else(|| {
                    FieldError::new(
                        &field("mandate"),
                        format!("is required; known mandates: {}", known.join(", ")),
                    )
                })?;
                let custom_mandate = match (&s.custom_mandate, mandate) {
                    (Some(c), Mandate::Custom) => Some(c.trimmed().ok_or_else(|| {
                        FieldError::new(&field("customMandate"), "must not be empty")
                    })?),
                    (None, Mandate::Custom) => {
                        return Err(FieldError::new(
                            &field("customMandate"),
                            "is required with the custom mandate",
                        ))
                    }
                    (Some(_), _) => {
                        return Err(FieldError::new(
                            &field("customMandate"),
                            "is only allowed with the custom mandate",
                        ))
                    }
                    (None, _) => None,
                };
                steps.push(StepConfig { model, mandate, custom_mandate });
            }
            steps
        }
    };
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let global_timeout_ms = request::given(cfg.global_timeout_ms, 600_000);
    let models: Vec<String> = steps.iter().map(|s| s.model.clone()).collect();
    let config = ChainConfig { steps, timeout_ms, global_timeout_ms };
    Ok(asked.valid(SPEC.kind(), &config, request::distinct(&[&models], &[])))
}

const MANDATES: [Mandate; 9] = [
    Mandate::Draft,
    Mandate::StructureDepth,
    Mandate::AccuracyCompleteness,
    Mandate::PolishFormat,
    Mandate::SecurityReview,
    Mandate::CostAnalysis,
    Mandate::Accessibility,
    Mandate::Performance,
    Mandate::Custom,
];

/// Chain in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "chain",
    label: "Chain",
    description: "2-6 models in sequence, each improving the previous version under its own mandate (draft, structure, accuracy, polish…); the last version is the answer.",
    multi_turn: false,
    question: Question { label: "What to write", required: Some("Question is required") },
    roles: &[
        Role::internal("drafter", "Step 1 (draft)"),
        Role::internal("improver", "Steps 2-6 (improve)").several(),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<ChainRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Chain::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("chain_step", "a step of the chain"), ("chain", "the chain")],
    report: Some(report),
    example: || {
        json!({ "mode": "chain", "question": "Write a short guide to backing up a home server.",
                "modeConfig": { "steps": [
                    { "model": "sim/alpha", "mandate": "draft" },
                    { "model": "sim/beta", "mandate": "security_review" },
                    { "model": "sim/gamma", "mandate": "polish_format" } ] } })
    },
    sim: Some(sim_answer),
    result_schema: schema_of::<ChainResult>,
};
