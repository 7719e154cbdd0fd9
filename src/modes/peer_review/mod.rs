//! Peer Review mode (specs/10-peer-review.md): every reviewer scores the work against a
//! rubric (1-5 per criterion) and lists severity-rated findings and strengths, in parallel;
//! the server computes the agreement statistics (models never do this arithmetic); one
//! consolidator writes the consolidated report with prioritised action items.
//!
//! Each review is stored the moment it arrives, the statistics when the last one is in, so a
//! cancelled or interrupted run keeps (and a resumed one replays) every finished review.
//! Replies are read only where they state a score, a finding field or an action item; what
//! is not stated is reported as such (`score: null`, `parseSuccess: false`,
//! `severityDefaulted`, `criterion: null`, `effort: null`), never guessed.

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
pub use sim::*;

use super::prelude::*;
use super::reading::{unmark, Unparsed};
use super::request::MAX_SHORT_CHARS;

const MAX_CRITERION_NAME: usize = 100;
const MAX_RUBRIC_TEXT: usize = 2000;
const CONSOLIDATION_KEY: &str = "consolidation";
/// The row of the work, review type and rubric, stored at the start (content: the work).
const SETUP: &str = "review_setup";

/// The rubric a review is scored against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewType {
    #[default]
    ArchitectureReview,
    CodeReview,
    DesignSpecReview,
    ComplianceAudit,
    BusinessPlanReview,
    // The request's `customRubric` (a doc comment here would make the schema a oneOf).
    Custom,
}

impl ReviewType {
    pub fn key(self) -> &'static str {
        match self {
            ReviewType::ArchitectureReview => "architecture_review",
            ReviewType::CodeReview => "code_review",
            ReviewType::DesignSpecReview => "design_spec_review",
            ReviewType::ComplianceAudit => "compliance_audit",
            ReviewType::BusinessPlanReview => "business_plan_review",
            ReviewType::Custom => "custom",
        }
    }

    /// The built-in rubric (None for `custom`).
    pub fn rubric(self) -> Option<Rubric> {
        let (name, description, criteria): (&str, &str, &[(&str, u32, &str)]) = match self {
            ReviewType::ArchitectureReview => (
                "Architecture Review",
                "A review of a system's architecture: its structure, its qualities and its risks.",
                &[
                    ("Scalability", 5, "Handles growth in load, data and users without redesign."),
                    (
                        "Security",
                        5,
                        "Protects data and access; threats are identified and mitigated.",
                    ),
                    (
                        "Maintainability",
                        4,
                        "Clear boundaries and structure that a team can change safely.",
                    ),
                    (
                        "Cost Efficiency",
                        3,
                        "Resources and services match the need; costs are understood.",
                    ),
                    ("Reliability", 4, "Tolerates failures, recovers, and degrades gracefully."),
                    ("Performance", 3, "Latency and throughput meet the requirements."),
                ],
            ),
            ReviewType::CodeReview => (
                "Code Review",
                "A review of source code for correctness, quality and safety.",
                &[
                    ("Correctness", 5, "Does what it is meant to, including edge cases."),
                    (
                        "Readability",
                        4,
                        "Names, structure and comments make the code easy to follow.",
                    ),
                    (
                        "Security",
                        5,
                        "No injection, leaks, unsafe input handling or secrets in code.",
                    ),
                    ("Performance", 3, "No needless work, allocations or slow algorithms."),
                    ("Test Coverage", 4, "Behaviour and edge cases are covered by tests."),
                    ("Error Handling", 4, "Failures are detected, reported and recovered from."),
                ],
            ),
            ReviewType::DesignSpecReview => (
                "Design Spec Review",
                "A review of a design or product specification before it is built.",
                &[
                    ("Completeness", 5, "Every requirement, flow and edge case is specified."),
                    (
                        "Feasibility",
                        4,
                        "Can be built with the time, people and technology at hand.",
                    ),
                    ("User Impact", 4, "Serves its users' needs and improves their experience."),
                    ("Technical Accuracy", 5, "Technical statements and choices are correct."),
                    ("Risk Assessment", 3, "Risks are named, weighed and mitigated."),
                ],
            ),
            ReviewType::ComplianceAudit => (
                "Compliance Audit",
                "An audit of policies and controls against the regulations that apply.",
                &[
                    (
                        "Regulatory Coverage",
                        5,
                        "Every applicable regulation and requirement is addressed.",
                    ),
                    (
                        "Gap Identification",
                        5,
                        "Gaps between practice and requirement are found and named.",
                    ),
                    (
                        "Evidence Quality",
                        4,
                        "Claims of compliance are backed by verifiable evidence.",
                    ),
                    ("Control Effectiveness", 4, "Controls work as intended and are monitored."),
                ],
            ),
            ReviewType::BusinessPlanReview => (
                "Business Plan Review",
                "A review of a business plan's market, finances and execution.",
                &[
                    (
                        "Market Analysis",
                        4,
                        "The market, its size and its customers are understood.",
                    ),
                    (
                        "Financial Viability",
                        5,
                        "Revenue, costs and funding add up to a sustainable business.",
                    ),
                    ("Competitive Advantage", 4, "A clear, defensible edge over the alternatives."),
                    ("Risk Assessment", 4, "Risks are named, weighed and mitigated."),
                    (
                        "Execution Plan",
                        3,
                        "Milestones, team and resources make the plan achievable.",
                    ),
                ],
            ),
            ReviewType::Custom => return None,
        };
        Some(Rubric {
            name: name.into(),
            description: description.into(),
            criteria: criteria
                .iter()
                .map(|(n, w, d)| Criterion {
                    name: (*n).into(),
                    weight: *w,
                    description: (*d).into(),
                })
                .collect(),
        })
    }
}

/// One criterion of a custom rubric.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CriterionRequest {
    /// The criterion's name, as reviewers must repeat it (at least 2 characters, distinct).
    pub name: Option<Text<MAX_CRITERION_NAME>>,
    /// What it judges, in one line for the prompt (at least 10 characters).
    pub description: Option<Text<MAX_RUBRIC_TEXT>>,
    /// How much it counts in the overall score: 1 to 5.
    #[schemars(range(min = 1, max = 5))]
    pub weight: Option<i64>,
}

/// A rubric of one's own, for `reviewType: custom`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RubricRequest {
    /// Custom rubric only: its name (at least three characters).
    pub name: Option<Text<MAX_SHORT_CHARS>>,
    /// Custom rubric only: what the review is for (at least ten characters).
    pub description: Option<Text<MAX_RUBRIC_TEXT>>,
    /// Custom rubric only: 3 to 10 criteria, each `{name, description, weight}` with a
    /// distinct name and a weight from 1 to 5.
    #[schemars(length(min = 3, max = 10), extend("x-too-few" = "A rubric has 3 to 10 criteria", "x-too-many" = "A rubric has 3 to 10 criteria"))]
    pub criteria: Option<Vec<CriterionRequest>>,
}

/// Peer Review's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PeerReviewRequest {
    /// The work to review (a design, code, a plan). Without it the question itself is the work.
    pub content: Option<Text<MAX_CONTENT_CHARS>>,
    /// The rubric the reviews are scored against (custom: your own, as customRubric).
    #[serde(default)]
    #[schemars(extend("x-enum-labels" = {
        "architecture_review": "Architecture review",
        "code_review": "Code review",
        "design_spec_review": "Design specification review",
        "compliance_audit": "Compliance audit",
        "business_plan_review": "Business plan review",
        "custom": "Custom rubric"
    }))]
    pub review_type: ReviewType,
    /// The reviewers, 2 to 6 (a model listed twice reviews twice).
    #[schemars(length(min = 2, max = 6), extend("x-too-few" = "A peer review needs at least 2 reviewers", "x-too-many" = "A peer review has at most 6 reviewers"))]
    pub reviewer_models: Option<Vec<ModelId>>,
    /// Writes the consolidated report (default: the first reviewer).
    pub consolidator_model: Option<ModelId>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 600000))]
    pub timeout_ms: Option<i64>,
    /// Only with reviewType custom: `{name, description, criteria: [{name, description,
    /// weight}]}`.
    pub custom_rubric: Option<RubricRequest>,
}

/// One rubric criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Criterion {
    pub name: String,
    pub weight: u32,
    pub description: String,
}

/// A rubric, built in or custom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Rubric {
    pub name: String,
    pub description: String,
    pub criteria: Vec<Criterion>,
}

/// The stored configuration of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PeerReviewConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub review_type: ReviewType,
    pub rubric: Rubric,
    pub reviewer_models: Vec<String>,
    pub consolidator_model: String,
    pub timeout_ms: u64,
    /// The server's backup for the consolidator (`[fallback] foreman`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreman_fallback_model: Option<String>,
}

/// A name compared ignoring case and spacing.
pub fn norm(name: &str) -> String {
    name.chars().filter(|c| !c.is_whitespace()).flat_map(char::to_lowercase).collect()
}

fn custom_rubric(r: &RubricRequest) -> Result<Rubric, FieldError> {
    const F: &str = "modeConfig.customRubric";
    let text = |t: &Option<Text<MAX_RUBRIC_TEXT>>| t.as_ref().and_then(|t| t.trimmed());
    let name = r.name.as_ref().and_then(|t| t.trimmed()).unwrap_or_default();
    if name.chars().count() < 3 {
        return Err(FieldError::new(&format!("{F}.name"), "is required: at least 3 characters"));
    }
    let description = text(&r.description).unwrap_or_default();
    if description.chars().count() < 10 {
        return Err(FieldError::new(
            &format!("{F}.description"),
            "is required: at least 10 characters",
        ));
    }
    let list = r.criteria.as_deref().unwrap_or(&[]);
    if !(3..=10).contains(&list.len()) {
        return Err(FieldError::new(&format!("{F}.criteria"), "A rubric has 3 to 10 criteria"));
    }
    let mut criteria: Vec<Criterion> = Vec::with_capacity(list.len());
    for (i, c) in list.iter().enumerate() {
        let field = |f: &str| format!("{F}.criteria[{i}].{f}");
        let name = c.name.as_ref().and_then(|t| t.trimmed()).unwrap_or_default();
        if name.chars().count() < 2 {
            return Err(FieldError::new(&field("name"), "is required: at least 2 characters"));
        }
        // The name is read back from table cells and `name: n` lines.
        if name.contains(['|', '\n', '\r', ':']) {
            return Err(FieldError::new(
                &field("name"),
                "must not contain '|', ':' or line breaks (reviewers repeat it in a table)",
            ));
        }
        if let Some(j) = criteria.iter().position(|k| norm(&k.name) == norm(&name)) {
            return Err(FieldError::new(
                &field("name"),
                format!("repeats criterion {j} ({}); names must be distinct", criteria[j].name),
            ));
        }
        let description = text(&c.description).unwrap_or_default();
        if description.chars().count() < 10 {
            return Err(FieldError::new(
                &field("description"),
                "is required: at least 10 characters",
            ));
        }
        let weight = match c.weight {
            None => return Err(FieldError::new(&field("weight"), "is required: 1 to 5")),
            Some(w) => w as u32,
        };
        criteria.push(Criterion { name, weight, description: description.replace('\n', " ") });
    }
    Ok(Rubric { name, description, criteria })
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, PeerReviewRequest) = request::start(body, "Question is required", false)?;
    let content = request::opt_text(cfg.content.as_ref(), "modeConfig.content")?;
    let review_type = cfg.review_type;
    let rubric = match (review_type.rubric(), &cfg.custom_rubric) {
        (Some(r), None) => r,
        (None, Some(c)) => custom_rubric(c)?,
        (None, None) => {
            return Err(FieldError::new(
                "modeConfig.customRubric",
                "is required with reviewType custom",
            ))
        }
        (Some(_), Some(_)) => {
            return Err(FieldError::new(
                "modeConfig.customRubric",
                "is only allowed with reviewType custom",
            ))
        }
    };
    let reviewer_models = SPEC.panel_of(cfg.reviewer_models.as_deref(), "reviewer", defaults)?;
    let consolidator_model = SPEC
        .named(cfg.consolidator_model.as_ref(), "consolidator")?
        .unwrap_or_else(|| reviewer_models[0].clone());
    let timeout_ms = request::given(cfg.timeout_ms, 150_000);
    let models = request::distinct(&[&reviewer_models], &[&consolidator_model]);
    let foreman_fallback_model = defaults.backup(SPEC.id, "consolidator", &consolidator_model);
    let config = PeerReviewConfig {
        content,
        review_type,
        rubric,
        reviewer_models,
        consolidator_model,
        timeout_ms,
        foreman_fallback_model,
    };
    Ok(asked.valid(SPEC.kind(), &config, models))
}

/// Peer Review in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "peer_review",
    label: "Peer Review",
    description: "2-6 reviewers score the work against a rubric and list findings; the server measures their agreement; a consolidated report with prioritised action items.",
    multi_turn: false,
    question: Question { label: "What to review", required: Some("Question is required") },
    roles: &[
        Role::panel("reviewer", "Reviewers", "reviewerModels"),
        Role::model("consolidator", "Consolidator (default: the first reviewer)", "consolidatorModel").backed_by("foreman"),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<PeerReviewRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(PeerReview::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("reviewers", "the reviews"), ("reviewer", "a review"), ("all_reviewers", "every review in"), ("consolidation", "consolidating the reviews")],
    report: Some(report),
    example: || {
        json!({ "mode": "peer_review", "question": "Review the architecture of our upload service.",
                "modeConfig": { "content": "Uploads go from the browser to one API server, which writes them to a local disk and records them in a single PostgreSQL instance. A nightly cron job copies the disk to S3.",
                                "reviewType": "architecture_review",
                                "reviewerModels": ["sim/alpha", "sim/beta"] } })
    },
    sim: Some(sim_answer),
    result_schema: schema_of::<PeerReviewResult>,
};
