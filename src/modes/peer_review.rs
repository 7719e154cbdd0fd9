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

use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    empty_is_failure, mark_from_rows, role_failed, title_prompt, Batch, Calls, Routed, SplitMix64,
    TitleTracker, TITLE_KEY,
};
use super::reading::{answer_text, readable};
use super::reading::{bare, re, unmark};
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::{ModelId, Text, MAX_CONTENT_CHARS, MAX_SHORT_CHARS};
use super::schema::{self, Asking, ReadFrom, ReplySchema};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, FieldError, Mode,
    RunContext, StageRow, ValidRequest,
};

const SIM_REVIEWERS: [&str; 3] = ["sim/alpha", "sim/beta", "sim/gamma"];
const SEED_REVIEWERS: [&str; 3] =
    ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];
const MAX_CRITERION_NAME: usize = 100;
const MAX_RUBRIC_TEXT: usize = 2000;
const REVIEW_ORDER: i32 = 1;
const STATS_ORDER: i32 = 2;
const CONSOLIDATION_ORDER: i32 = 3;
const CONSOLIDATION_KEY: &str = "consolidation";
/// The row of the work, review type and rubric, stored at the start (content: the work).
const SETUP: &str = "review_setup";

/// The rubric a review is scored against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewType {
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
    #[schemars(length(min = 3, max = 10))]
    pub criteria: Option<Vec<CriterionRequest>>,
}

/// Peer Review's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PeerReviewRequest {
    /// The work to review (a design, code, a plan). Without it the question itself is the work.
    pub content: Option<Text<MAX_CONTENT_CHARS>>,
    /// The rubric: architecture_review (default), code_review, design_spec_review,
    /// compliance_audit, business_plan_review, or custom with a customRubric.
    #[schemars(with = "ReviewType")]
    pub review_type: Option<ReviewType>,
    /// The reviewers, 2 to 6 (a model listed twice reviews twice).
    #[schemars(length(min = 2, max = 6))]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Criterion {
    pub name: String,
    pub weight: u32,
    pub description: String,
}

/// A rubric, built in or custom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
            Some(w) if (1..=5).contains(&w) => w as u32,
            Some(_) => {
                return Err(FieldError::new(&field("weight"), "must be a whole number from 1 to 5"))
            }
        };
        criteria.push(Criterion { name, weight, description: description.replace('\n', " ") });
    }
    Ok(Rubric { name, description, criteria })
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: PeerReviewRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let content = match &cfg.content {
        None => None,
        Some(c) => Some(
            c.trimmed()
                .ok_or_else(|| FieldError::new("modeConfig.content", "must not be empty"))?,
        ),
    };
    let review_type = cfg.review_type.unwrap_or(ReviewType::ArchitectureReview);
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
    let reviewer_models = request::models(
        cfg.reviewer_models.as_deref(),
        "modeConfig.reviewerModels",
        2..=6,
        Some("A peer review needs at least 2 reviewers"),
        Some("A peer review has at most 6 reviewers"),
    )?
    .unwrap_or_else(|| {
        request::ids(if defaults.offline { &SIM_REVIEWERS } else { &SEED_REVIEWERS })
    });
    let consolidator_model =
        request::model(cfg.consolidator_model.as_ref(), "modeConfig.consolidatorModel")?
            .unwrap_or_else(|| reviewer_models[0].clone());
    let timeout_ms =
        request::timeout(cfg.timeout_ms, "modeConfig.timeoutMs", 10_000..=600_000, 150_000)?;
    let models = request::distinct(&[&reviewer_models], &[&consolidator_model]);
    let foreman_fallback_model =
        Fallbacks::for_role(&defaults.fallback.foreman, &consolidator_model);
    let config = PeerReviewConfig {
        content,
        review_type,
        rubric,
        reviewer_models,
        consolidator_model,
        timeout_ms,
        foreman_fallback_model,
    };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models,
    })
}

/// Peer Review in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "peer_review",
    label: "Peer Review",
    description: "2-6 reviewers score the work against a rubric and list findings; the server measures their agreement; a consolidated report with prioritised action items.",
    multi_turn: false,
    question: Question { label: "What to review", required: Some("Question is required") },
    roles: &[
        Role {
            id: "reviewer",
            label: "Reviewers",
            field: Some("reviewerModels"),
            panel: true,
            fallback: None,
            sim_default: &SIM_REVIEWERS,
            default: &SEED_REVIEWERS,
        },
        Role {
            id: "consolidator",
            label: "Consolidator (default: the first reviewer)",
            field: Some("consolidatorModel"),
            panel: false,
            fallback: Some("foreman"),
            sim_default: &[],
            default: &[],
        },
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
};

// ---- prompts -------------------------------------------------------------------------------

pub const REVIEW_HEAD: &str = "You are an expert reviewer in an independent peer review.";
pub const CONSOLIDATE_HEAD: &str = "You are the consolidator of an independent peer review.";
pub const WORK_START: &str = "=== WORK UNDER REVIEW ===";
pub const WORK_END: &str = "=== END OF WORK ===";
const STATS_START: &str = "=== SERVER STATISTICS (final) ===";
const STATS_END: &str = "=== END OF STATISTICS ===";

/// The work under review: `content`, else the question.
pub fn work<'a>(content: Option<&'a str>, question: &'a str) -> &'a str {
    content.unwrap_or(question)
}

fn rubric_text(r: &Rubric) -> String {
    let mut s = format!("Rubric: {} — {}\n", r.name, r.description);
    for c in &r.criteria {
        s.push_str(&format!("- {} (weight {}): {}\n", c.name, c.weight, c.description));
    }
    s
}

const SCALE: &str = "Scale: 1 = critical deficiencies, 2 = significant weaknesses, 3 = adequate, \
4 = good, 5 = excellent.";
const SEVERITY_TEXT: &str = "Severities: CRITICAL (blocks progress), MAJOR (fix now), MINOR (fix \
when convenient), SUGGESTION (optional).";

pub fn review_prompt(question: &str, work: &str, rubric: &Rubric) -> String {
    review_prompt_as(question, work, rubric, None)
}

/// The review prompt asking for the spec's sections, or, given the review's schema, for its
/// JSON (the work, rubric, scale and severities stated the same).
pub fn review_prompt_as(
    question: &str,
    work: &str,
    rubric: &Rubric,
    schema: Option<&ReplySchema>,
) -> String {
    let first = rubric.criteria.first().map_or("Criterion", |c| c.name.as_str());
    let format = match schema {
        Some(s) => s.instruction(),
        None => format!(
            "Reply in exactly this format:\n\n\
             ### Scores\n\n| Criterion | Score (1-5) | Weight | Justification |\n|---|---|---|---|\n\
             | {first} | <1-5> | <weight> | <one or two sentences> |\n\
             (one row per criterion, named exactly as in the rubric, every criterion scored)\n\n\
             ### Findings\n\nAt least 3, each:\n\n#### FINDING 1: <title>\nCategory: <a criterion>\n\
             Severity: CRITICAL|MAJOR|MINOR|SUGGESTION\nLocation: <where in the work>\n\
             Description: <what is wrong>\nImpact: <what it causes>\nRecommendation: <what to do>\n\n\
             ### Strengths\n\n- 3 to 5 items\n\n### Summary\n\n<a short overall assessment>"
        ),
    };
    format!(
        "{REVIEW_HEAD} Review the work below on your own, against the rubric.\n\n\
         Request: {question}\n\n{WORK_START}\n{work}\n{WORK_END}\n\n\
         Review type: {}\n{}\n{SCALE}\n{SEVERITY_TEXT}\n\n{format}",
        rubric.name,
        rubric_text(rubric)
    )
}

/// The review's reply schema's name (the sim answers it by this name).
pub const REVIEW_SCHEMA: &str = "peer_review_review";
/// The most findings a review may list as JSON (the prompt asks for at least 3).
pub const MAX_JSON_FINDINGS: usize = 10;
/// Bounds of the review's free-text fields (a small model looping inside a string still ends).
/// A justification is one or two sentences: six of them at their bound are what SmolLM2 spent
/// most of a 400-token reply on when they allowed 300 characters.
const TITLE_CHARS: usize = 120;
const JUSTIFICATION_CHARS: usize = 200;
const SHORT_CHARS: usize = 300;
const PROSE_CHARS: usize = 600;
const SUMMARY_CHARS: usize = 1_000;

/// A review as JSON against `rubric`: the reasoning, one 1-5 score per criterion (named as
/// the rubric names it), at least 3 findings (their category a criterion, their severity one
/// of the four), 3-5 strengths and a summary, in the order of the text format's sections.
pub fn review_schema(rubric: &Rubric) -> Arc<ReplySchema> {
    let names: Vec<&str> = rubric.criteria.iter().map(|c| c.name.as_str()).collect();
    let score = schema::object([
        ("score", schema::described(schema::integer(1, 5), "on the scale above")),
        (
            "justification",
            schema::described(schema::text(JUSTIFICATION_CHARS), "one or two sentences"),
        ),
    ]);
    let finding = schema::object([
        ("title", schema::described(schema::text(TITLE_CHARS), "a short name for the finding")),
        ("category", schema::described(schema::one_of(&names), "the criterion it concerns")),
        ("severity", schema::described(schema::one_of(&SEVERITIES), "how severe it is")),
        ("location", schema::described(schema::text(SHORT_CHARS), "where in the work")),
        ("description", schema::described(schema::text(PROSE_CHARS), "what is wrong")),
        ("impact", schema::described(schema::text(PROSE_CHARS), "what it causes")),
        ("recommendation", schema::described(schema::text(PROSE_CHARS), "what to do")),
    ]);
    ReplySchema::new(
        REVIEW_SCHEMA,
        schema::reasoned([
            (
                "scores",
                schema::described(
                    schema::keyed(&names, score),
                    "every rubric criterion by its name, in rubric order, with its score",
                ),
            ),
            (
                "findings",
                schema::described(
                    schema::list(finding, 3, MAX_JSON_FINDINGS),
                    "at least 3 findings, most severe first",
                ),
            ),
            (
                "strengths",
                schema::described(
                    schema::list(schema::text(SHORT_CHARS), 3, 5),
                    "3 to 5 strengths",
                ),
            ),
            (
                "summary",
                schema::described(schema::text(SUMMARY_CHARS), "a short overall assessment"),
            ),
        ]),
    )
}

pub fn consolidation_prompt(
    question: &str,
    work: &str,
    rubric: &Rubric,
    reviews: &[Review],
    statistics: &Value,
) -> String {
    let mut listed = String::new();
    for r in reviews {
        listed.push_str(&format!(
            "### Reviewer {} ({})\n\n{}\n\n",
            r.reviewer_index,
            r.model,
            quoted_review(r)
        ));
    }
    format!(
        "{CONSOLIDATE_HEAD} {} reviewers reviewed the work below independently; write the \
         consolidated report.\n\nRequest: {question}\n\n{WORK_START}\n{work}\n{WORK_END}\n\n\
         Review type: {}\n{}\n{SCALE}\n{SEVERITY_TEXT}\n\n## The reviews\n\n{listed}\
         {STATS_START}\n{}\n{STATS_END}\n\nThese statistics were computed by the server from the \
         reviewers' scores. They are final: quote them, do not recompute them.\n\n\
         Reply in exactly this format:\n\n## Consensus Scores\n(each criterion with the server's \
         mean and agreement)\n### Consensus Findings\n(findings raised by 2 or more reviewers, \
         naming them)\n### Unique Findings\n(raised by one reviewer; judge their credibility)\n\
         ### Disputed Assessments\n(where reviewers disagree, and why)\n\
         ## Inter-Reviewer Agreement\n## Prioritized Action Items\nAt most 15, numbered, ordered \
         by severity, then by how many reviewers raised it, then by criterion weight; each \
         like:\n1. [CRITICAL] <what to do> — Effort: Low|Medium|High\n## Executive Summary",
        reviews.len(),
        rubric.name,
        rubric_text(rubric),
        stats_text(statistics)
    )
}

/// A review as the consolidator reads it: a JSON review as its fields.
fn quoted_review(r: &Review) -> String {
    readable(&r.review_text).trim().to_string()
}

/// The statistics as the consolidator reads them.
fn stats_text(s: &Value) -> String {
    let mut t = String::new();
    let num = |v: &Value| if v.is_null() { "n/a".to_string() } else { v.to_string() };
    for c in s["consensusScores"].as_array().into_iter().flatten() {
        let scores: Vec<String> = c["scores"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| format!("R{}={}", x["reviewerIndex"], x["score"]))
            .collect();
        t.push_str(&format!(
            "- {} (weight {}): scores [{}], mean {}, std dev {}, agreement {}{}\n",
            c["criterion"].as_str().unwrap_or(""),
            c["weight"],
            scores.join(", "),
            num(&c["average"]),
            num(&c["stddev"]),
            c["agreement"].as_str().unwrap_or("n/a"),
            if c["disputed"] == true { ", DISPUTED" } else { "" }
        ));
    }
    for o in s["reviewerOverallScores"].as_array().into_iter().flatten() {
        t.push_str(&format!(
            "- Reviewer {} ({}) overall: {}\n",
            o["reviewerIndex"],
            o["model"].as_str().unwrap_or(""),
            num(&o["overallScore"])
        ));
    }
    t.push_str(&format!(
        "- Consensus overall (weighted): {}\n- Average of reviewer overalls: {}\n- Mean std dev: {}\n",
        num(&s["consensusOverall"]),
        num(&s["averageOverallScore"]),
        num(&s["meanStdDev"])
    ));
    let f = &s["findingTotals"];
    t.push_str(&format!(
        "- Findings: {} CRITICAL, {} MAJOR, {} MINOR, {} SUGGESTION ({} in all)",
        f["CRITICAL"], f["MAJOR"], f["MINOR"], f["SUGGESTION"], f["total"]
    ));
    t
}

// ---- reading replies -----------------------------------------------------------------------

pub const SEVERITIES: [&str; 4] = ["CRITICAL", "MAJOR", "MINOR", "SUGGESTION"];

/// One criterion's score as a review states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    pub criterion: String,
    /// 1-5; null when the review states none (or one outside 1-5).
    pub score: Option<u32>,
    pub weight: u32,
    pub justification: Option<String>,
}

/// One finding of a review, renumbered 1..k in review order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub number: usize,
    pub reported_number: u64,
    pub title: String,
    /// The `Category:` as written.
    pub category: Option<String>,
    /// The rubric criterion the category names; null when it names none (or several).
    pub criterion: Option<String>,
    pub severity: String,
    pub severity_defaulted: bool,
    pub location: Option<String>,
    pub description: Option<String>,
    pub impact: Option<String>,
    pub recommendation: Option<String>,
}

/// A review as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewReading {
    /// One per rubric criterion, in rubric order.
    pub scores: Vec<Score>,
    pub findings: Vec<Finding>,
    pub strengths: Vec<String>,
    pub parse_success: bool,
    /// Where the scores were read from (the review's JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// A section heading's name (`### Scores`, `**Strengths:**`), lower-case, when the line is one.
fn section(line: &str) -> Option<String> {
    let t = unmark(bare(line).trim_end_matches(':').trim_end_matches("**").trim_end_matches(':'));
    let t = t.to_lowercase();
    ["scores", "findings", "strengths", "summary"].contains(&t.as_str()).then_some(t)
}

fn is_markdown_heading(raw: &str) -> bool {
    raw.trim_start().starts_with('#')
}

/// The first number of a text, rounded half up, when it lies in 1-5.
pub fn score_of(text: &str) -> Option<u32> {
    if crate::modes::reading::no_single_value(text) {
        return None;
    }
    static RE: OnceLock<Regex> = OnceLock::new();
    let m = re(&RE, r"-?\d+(?:[.,]\d+)?").find(text)?;
    let v: f64 = m.as_str().replace(',', ".").parse().ok()?;
    if !(1.0..=5.0).contains(&v) {
        return None;
    }
    Some((v + 1e-9).round() as u32)
}

/// The cells of a table row (`| a | b |`), markup removed; None for other lines and rules.
fn cells(line: &str) -> Option<Vec<String>> {
    let t = line.trim();
    if !t.starts_with('|') {
        return None;
    }
    let inner = t.trim_start_matches('|').trim_end_matches('|');
    let cells: Vec<String> = inner.split('|').map(unmark).collect();
    if cells.iter().all(|c| c.chars().all(|ch| matches!(ch, '-' | ':' | ' '))) {
        return None;
    }
    Some(cells)
}

/// A table's separator row (`|---|:---:|`).
fn is_rule(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('|') && t.contains('-') && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// Scores as stated: per criterion the last table row naming it, else the last
/// `<criterion>: <n>` line.
fn read_scores(lines: &[&str], rubric: &Rubric) -> Vec<Score> {
    // Columns from the header of the table a row is in (a row followed by a `|---|` rule):
    // `Score` and `Justification`/`Why`; a table whose header names no score gives none.
    let mut score_col: Option<usize> = Some(1);
    let mut just_col: Option<usize> = Some(3);
    let mut found: Vec<Option<(Option<u32>, Option<String>)>> = vec![None; rubric.criteria.len()];
    for (at, line) in lines.iter().enumerate() {
        let Some(cells) = cells(line) else {
            if !is_rule(line) {
                // Outside a table: the next one starts with the defaults.
                (score_col, just_col) = (Some(1), Some(3));
            }
            continue;
        };
        if lines.get(at + 1).is_some_and(|next| is_rule(next)) {
            let lower: Vec<String> = cells.iter().map(|c| c.to_lowercase()).collect();
            score_col = lower.iter().position(|c| c.contains("score"));
            just_col = lower
                .iter()
                .position(|c| c.contains("justif") || c.contains("rationale") || c.contains("why"));
            continue;
        }
        let first = norm(cells.first().map_or("", String::as_str));
        if let Some(i) = rubric.criteria.iter().position(|c| norm(&c.name) == first) {
            let score = score_col.and_then(|k| cells.get(k)).and_then(|c| score_of(c));
            let justification = just_col
                .filter(|k| Some(*k) != score_col && *k > 0)
                .and_then(|k| cells.get(k))
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty());
            found[i] = Some((score, justification));
        }
    }
    static LINE: OnceLock<Regex> = OnceLock::new();
    let line_re =
        re(&LINE, r"^(.{2,100}?)\s*(?:\*\*|__)?\s*:(?:\s*(?:\*\*|__))*\s*(-?\d+(?:[.,]\d+)?)");
    rubric
        .criteria
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (score, justification) = found[i].clone().unwrap_or_else(|| {
                let stated = lines.iter().rev().find_map(|l| {
                    let caps = line_re.captures(bare(l))?;
                    (norm(&unmark(&caps[1])) == norm(&c.name)).then(|| score_of(&caps[2]))
                });
                (stated.flatten(), None)
            });
            Score { criterion: c.name.clone(), score, weight: c.weight, justification }
        })
        .collect()
}

/// The most severe level a value names; None when it names none.
pub fn severity_of(value: &str) -> Option<&'static str> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let found: Vec<String> = re(&RE, r"(?i)\b(critical|major|minor|suggestion)\b")
        .find_iter(value)
        .map(|m| m.as_str().to_uppercase())
        .collect();
    SEVERITIES.into_iter().find(|s| found.iter().any(|f| f == s))
}

/// The rubric criterion a category names: the one it equals, else the only one it contains.
pub fn criterion_of(category: &str, rubric: &Rubric) -> Option<String> {
    let c = norm(category);
    if let Some(k) = rubric.criteria.iter().find(|k| norm(&k.name) == c) {
        return Some(k.name.clone());
    }
    let named: Vec<&Criterion> =
        rubric.criteria.iter().filter(|k| c.contains(&norm(&k.name))).collect();
    match named.as_slice() {
        [one] => Some(one.name.clone()),
        _ => None,
    }
}

fn finding_heading(line: &str) -> Option<(u64, String)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(&RE, r"(?i)^finding\s*#?\s*(\d{1,6})\s*(?:\*\*|__)?\s*(?:[:.\-–—]\s*(.*))?$")
        .captures(line)?;
    Some((c[1].parse().ok()?, unmark(c.get(2).map_or("", |m| m.as_str()))))
}

const SPANNING: [&str; 3] = ["description", "impact", "recommendation"];

fn finding_field(line: &str) -> Option<(String, &str)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(
        &RE,
        r"(?i)^(category|severity|location|description|impact|recommendation)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?",
    )
    .captures(line)?;
    let name = c.get(1)?.as_str().to_lowercase();
    Some((name, &line[c.get(0)?.end()..]))
}

fn read_findings(lines: &[&str], rubric: &Rubric) -> Vec<Finding> {
    struct Block {
        number: u64,
        title: String,
        fields: Vec<(String, String)>,
    }
    let mut blocks: Vec<Block> = Vec::new();
    let mut open = false;
    let mut spanning: Option<usize> = None;
    for raw in lines {
        let line = bare(raw);
        if let Some((number, title)) = finding_heading(line) {
            blocks.push(Block { number, title, fields: Vec::new() });
            (open, spanning) = (true, None);
            continue;
        }
        if is_markdown_heading(raw) || section(raw).is_some() {
            (open, spanning) = (false, None);
            continue;
        }
        let Some(b) = blocks.last_mut().filter(|_| open) else { continue };
        if let Some((name, value)) = finding_field(line) {
            spanning = None;
            if !b.fields.iter().any(|(n, _)| *n == name) {
                if SPANNING.contains(&name.as_str()) {
                    spanning = Some(b.fields.len());
                }
                b.fields.push((name, unmark(value)));
            }
            continue;
        }
        if let Some(v) = spanning.and_then(|i| b.fields.get_mut(i)) {
            if !raw.trim().is_empty() {
                if !v.1.is_empty() {
                    v.1.push('\n');
                }
                v.1.push_str(raw.trim());
            }
        }
    }
    blocks
        .into_iter()
        .filter(|b| !b.title.is_empty() || !b.fields.is_empty())
        .enumerate()
        .map(|(i, b)| {
            let get = |name: &str| {
                b.fields
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.trim().to_string())
                    .filter(|v| !v.is_empty())
            };
            let named = get("severity").as_deref().and_then(severity_of);
            let category = get("category");
            Finding {
                number: i + 1,
                reported_number: b.number,
                title: b.title.clone(),
                criterion: category.as_deref().and_then(|c| criterion_of(c, rubric)),
                category,
                severity: named.unwrap_or("MINOR").to_string(),
                severity_defaulted: named.is_none(),
                location: get("location"),
                description: get("description"),
                impact: get("impact"),
                recommendation: get("recommendation"),
            }
        })
        .collect()
}

/// A list item's text (`- x`, `* x`, `1. x`, `2) x`), when the line is one.
fn list_item(raw: &str) -> Option<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(&RE, r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(.+)$").captures(raw)?;
    let t = unmark(&c[1]);
    (!t.is_empty()).then_some(t)
}

fn read_strengths(lines: &[&str]) -> Vec<String> {
    let mut under = false;
    let mut out = Vec::new();
    for raw in lines {
        if let Some(name) = section(raw) {
            under = name == "strengths";
            continue;
        }
        if is_markdown_heading(raw) || finding_heading(bare(raw)).is_some() {
            under = false;
            continue;
        }
        if under {
            if let Some(item) = list_item(raw) {
                out.push(item);
            }
        }
    }
    out
}

/// Reads a review (its answer part: a reasoning trace is never read).
pub fn read_review(reply: &str, rubric: &Rubric) -> ReviewReading {
    let text = answer_text(reply);
    let lines: Vec<&str> = text.lines().collect();
    let scores = read_scores(&lines, rubric);
    let parse_success = scores.iter().any(|s| s.score.is_some());
    ReviewReading {
        scores,
        findings: read_findings(&lines, rubric),
        strengths: read_strengths(&lines),
        parse_success,
        read_from: parse_success.then_some(ReadFrom::Text),
    }
}

/// A JSON string field, trimmed, when not empty.
fn json_text(v: &Value, key: &str) -> Option<String> {
    let t = v.get(key)?.as_str()?.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// Reads a review: from its JSON when it fits `schema` (every criterion scored under its own
/// name, once; findings numbered 1..k in order), else by its text ([`read_review`]).
pub fn read_review_reply(reply: &str, rubric: &Rubric, schema: &ReplySchema) -> ReviewReading {
    let Some(v) = schema.read(reply) else { return read_review(reply, rubric) };
    let scores: Vec<Score> = rubric
        .criteria
        .iter()
        .map(|c| {
            let s = v["scores"].get(c.name.as_str());
            Score {
                criterion: c.name.clone(),
                score: s
                    .and_then(|s| s["score"].as_u64())
                    .filter(|n| (1..=5).contains(n))
                    .map(|n| n as u32),
                weight: c.weight,
                justification: s.and_then(|s| json_text(s, "justification")),
            }
        })
        .collect();
    let findings: Vec<Finding> = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, f)| {
            let category = json_text(f, "category");
            let severity =
                f["severity"].as_str().and_then(|s| SEVERITIES.into_iter().find(|x| *x == s));
            Finding {
                number: i + 1,
                reported_number: i as u64 + 1,
                title: json_text(f, "title").unwrap_or_default(),
                criterion: category.as_deref().and_then(|c| criterion_of(c, rubric)),
                category,
                severity: severity.unwrap_or("MINOR").to_string(),
                severity_defaulted: severity.is_none(),
                location: json_text(f, "location"),
                description: json_text(f, "description"),
                impact: json_text(f, "impact"),
                recommendation: json_text(f, "recommendation"),
            }
        })
        .collect();
    let strengths: Vec<String> = v["strengths"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    let parse_success = scores.iter().any(|s| s.score.is_some());
    ReviewReading {
        scores,
        findings,
        strengths,
        parse_success,
        read_from: parse_success.then_some(ReadFrom::Json),
    }
}

/// One prioritised action item of the consolidated report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionItem {
    /// The first bracketed tag's severity; null when it names none.
    pub severity: Option<String>,
    pub text: String,
    /// `Effort: Low|Medium|High`; null when not stated.
    pub effort: Option<String>,
}

/// The numbered items under `Prioritized Action Items` (answer part only).
pub fn read_action_items(reply: &str) -> Vec<ActionItem> {
    static HEAD: OnceLock<Regex> = OnceLock::new();
    static ITEM: OnceLock<Regex> = OnceLock::new();
    static TAG: OnceLock<Regex> = OnceLock::new();
    static EFFORT: OnceLock<Regex> = OnceLock::new();
    let head = re(&HEAD, r"(?i)^prioriti[sz]ed\s+action\s+items\b");
    let item = re(&ITEM, r"^\s*(?:\*\*|__)?\d{1,3}[.)](?:\*\*|__)?\s+(.+)$");
    let tag = re(&TAG, r"\[([^\]\n]{1,40})\]");
    let effort =
        re(&EFFORT, r"(?i)\beffort\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?\s*(low|medium|high)\b");
    let text = answer_text(reply);
    let mut under = false;
    let mut out: Vec<ActionItem> = Vec::new();
    for raw in text.lines() {
        let line = bare(raw);
        if head.is_match(line) {
            under = true;
            continue;
        }
        if is_markdown_heading(raw) {
            under = false;
            continue;
        }
        if !under {
            continue;
        }
        if let Some(c) = item.captures(raw) {
            let body = c[1].trim().to_string();
            let severity = tag.captures(&body).and_then(|t| severity_of(&t[1]).map(str::to_string));
            let effort_at = effort.captures_iter(&body).last();
            let effort_word = effort_at.as_ref().map(|e| {
                let w = e[1].to_lowercase();
                format!("{}{}", w[..1].to_uppercase(), &w[1..])
            });
            out.push(ActionItem { severity, text: unmark(&body), effort: effort_word });
        }
    }
    out
}

// ---- statistics ----------------------------------------------------------------------------

fn round_to(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    ((v * f) + 1e-9).round() / f
}

/// A reviewer's overall score: Σ score·weight / Σ weight over its stated scores.
pub fn overall(scores: &[Score]) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for s in scores {
        if let Some(v) = s.score {
            num += f64::from(v) * f64::from(s.weight);
            den += f64::from(s.weight);
        }
    }
    (den > 0.0).then(|| num / den)
}

/// Agreement from a standard deviation (two decimals).
pub fn agreement(sd: f64) -> &'static str {
    if sd < 0.5 {
        "High"
    } else if sd <= 1.5 {
        "Medium"
    } else {
        "Low"
    }
}

/// The server's statistics over the reviews (models never do this arithmetic).
pub fn statistics(reviews: &[Review], rubric: &Rubric) -> Value {
    let mut consensus = Vec::new();
    let (mut wsum, mut wmean) = (0.0, 0.0);
    let mut sds = Vec::new();
    for c in &rubric.criteria {
        let scored: Vec<(usize, u32)> = reviews
            .iter()
            .filter_map(|r| {
                r.scores
                    .iter()
                    .find(|s| s.criterion == c.name)
                    .and_then(|s| s.score)
                    .map(|v| (r.reviewer_index, v))
            })
            .collect();
        let n = scored.len() as f64;
        let mean = (!scored.is_empty())
            .then(|| scored.iter().map(|(_, v)| f64::from(*v)).sum::<f64>() / n);
        let sd = mean.filter(|_| scored.len() >= 2).map(|m| {
            let var = scored.iter().map(|(_, v)| (f64::from(*v) - m).powi(2)).sum::<f64>() / n;
            round_to(var.sqrt(), 2)
        });
        if let Some(m) = mean {
            wsum += f64::from(c.weight);
            wmean += m * f64::from(c.weight);
        }
        if let Some(sd) = sd {
            sds.push(sd);
        }
        consensus.push(json!({
            "criterion": c.name, "weight": c.weight,
            "scores": scored.iter().map(|(i, v)| json!({ "reviewerIndex": i, "score": v })).collect::<Vec<_>>(),
            "average": mean.map(|m| round_to(m, 1)), "stddev": sd,
            "agreement": sd.map(agreement), "disputed": sd.is_some_and(|sd| sd > 1.5),
        }));
    }
    let overalls: Vec<(usize, &str, Option<f64>)> =
        reviews.iter().map(|r| (r.reviewer_index, r.model.as_str(), overall(&r.scores))).collect();
    let stated: Vec<f64> = overalls.iter().filter_map(|o| o.2).collect();
    let mut totals = serde_json::Map::new();
    for s in SEVERITIES {
        let n = reviews.iter().flat_map(|r| &r.findings).filter(|f| f.severity == s).count();
        totals.insert(s.into(), json!(n));
    }
    totals.insert("total".into(), json!(reviews.iter().map(|r| r.findings.len()).sum::<usize>()));
    json!({
        "consensusScores": consensus,
        "reviewerOverallScores": overalls.iter().map(|(i, m, o)| json!({
            "reviewerIndex": i, "model": m, "overallScore": o.map(|o| round_to(o, 1)) })).collect::<Vec<_>>(),
        "consensusOverall": (wsum > 0.0).then(|| round_to(wmean / wsum, 1)),
        "averageOverallScore": (!stated.is_empty()).then(|| round_to(stated.iter().sum::<f64>() / stated.len() as f64, 1)),
        "meanStdDev": (!sds.is_empty()).then(|| round_to(sds.iter().sum::<f64>() / sds.len() as f64, 2)),
        "findingTotals": totals,
    })
}

// ---- the state machine ---------------------------------------------------------------------

/// One completed review, as `reviewer_complete` gives it and the result lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Review {
    /// 1-based, in the order of `reviewerModels`.
    pub reviewer_index: usize,
    pub model: String,
    pub review_text: String,
    pub scores: Vec<Score>,
    pub overall_score: Option<f64>,
    pub findings: Vec<Finding>,
    pub strengths: Vec<String>,
    pub parse_success: bool,
    /// Where the scores were read from (the review's JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    pub response_time_ms: i64,
}

/// A reviewer whose call failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedReviewer {
    pub reviewer_index: usize,
    pub model: String,
    pub error: String,
}

fn review_of(
    index: usize,
    model: &str,
    raw: &str,
    rubric: &Rubric,
    schema: &ReplySchema,
    ms: i64,
) -> Review {
    let reading = read_review_reply(raw, rubric, schema);
    Review {
        reviewer_index: index,
        model: model.to_string(),
        review_text: answer_text(raw).trim().to_string(),
        overall_score: overall(&reading.scores).map(|o| round_to(o, 1)),
        scores: reading.scores,
        findings: reading.findings,
        strengths: reading.strengths,
        parse_success: reading.parse_success,
        read_from: reading.read_from,
        response_time_ms: ms,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Reviewing,
    Consolidating,
    Done,
}

pub struct PeerReview {
    config: PeerReviewConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    reviews: Vec<Review>,
    failed_reviewers: Vec<FailedReviewer>,
    statistics: Value,
    /// The review's reply schema (the run's rubric), shared by every reviewer.
    review_schema: Arc<ReplySchema>,
    title: TitleTracker,
    calls: Calls,
}

fn stage_order(stage: &str) -> i32 {
    match stage {
        "review" => REVIEW_ORDER,
        "consolidation" => CONSOLIDATION_ORDER,
        _ => 0,
    }
}

impl PeerReview {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: PeerReviewConfig = stored_config("peer_review", config)?;
        if !(2..=6).contains(&config.reviewer_models.len()) {
            return Err("the stored peer_review configuration has no 2 to 6 reviewers".into());
        }
        if config.rubric.criteria.is_empty() {
            return Err("the stored peer_review configuration has an empty rubric".into());
        }
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        let batch = Batch::new("review", config.reviewer_models.len());
        let review_schema = review_schema(&config.rubric);
        Ok(PeerReview {
            review_schema,
            config,
            ctx,
            phase: Phase::Reviewing,
            batch,
            reviews: Vec::new(),
            failed_reviewers: Vec::new(),
            statistics: Value::Null,
            title,
            calls: Calls::default(),
        })
    }

    fn work(&self) -> &str {
        work(self.config.content.as_deref(), &self.ctx.question)
    }

    /// One reviewer's reply, stored and announced on arrival.
    fn on_review(&mut self, reply: &CallReply) -> Vec<Effect> {
        let Some(i) = reply.key.strip_prefix("review:").and_then(|n| n.parse::<usize>().ok())
        else {
            return Vec::new();
        };
        let index = i + 1;
        let ms = reply.response_time_ms as i64;
        let model = self.config.reviewer_models.get(i).cloned().unwrap_or_default();
        match &reply.result {
            Ok(text) => {
                let review = review_of(
                    index,
                    &reply.model,
                    text,
                    &self.config.rubric,
                    &self.review_schema,
                    ms,
                );
                let mut parsed = json!(review);
                if let Some(o) = parsed.as_object_mut() {
                    o.remove("reviewText");
                }
                let out = vec![
                    Effect::Store(StageRow {
                        stage_type: format!("review_{index}"),
                        stage_order: REVIEW_ORDER,
                        model: Some(reply.model.clone()),
                        role: Some("reviewer".into()),
                        content: text.clone(),
                        parsed_data: Some(parsed),
                        response_time_ms: Some(ms),
                    }),
                    Effect::emit("reviewer_complete", json!({ "data": review })),
                ];
                self.reviews.push(review);
                out
            }
            Err(e) => {
                let failed =
                    FailedReviewer { reviewer_index: index, model, error: e.message.clone() };
                let mut data = json!(failed);
                data["failed"] = json!(true);
                self.failed_reviewers.push(failed);
                vec![Effect::Store(StageRow {
                    stage_type: format!("review_{index}"),
                    stage_order: REVIEW_ORDER,
                    model: Some(reply.model.clone()),
                    role: Some("reviewer".into()),
                    content: e.message.clone(),
                    parsed_data: Some(data),
                    response_time_ms: Some(ms),
                })]
            }
        }
    }

    fn all_reviewed(&mut self) -> Vec<Effect> {
        self.reviews.sort_by_key(|r| r.reviewer_index);
        self.failed_reviewers.sort_by_key(|r| r.reviewer_index);
        if self.reviews.len() < 2 {
            self.phase = Phase::Done;
            return self.title.fail(format!(
                "Only {} of {} reviews arrived; a peer review needs at least 2. The reviews that \
                 arrived are kept.",
                self.reviews.len(),
                self.config.reviewer_models.len()
            ));
        }
        self.statistics = statistics(&self.reviews, &self.config.rubric);
        let stats_row =
            json!({ "statistics": self.statistics, "failedReviewers": self.failed_reviewers });
        let prompt = consolidation_prompt(
            &self.ctx.question,
            self.work(),
            &self.config.rubric,
            &self.reviews,
            &self.statistics,
        );
        let material =
            std::iter::once(("the work under review".to_string(), self.work().to_string()))
                .chain(
                    self.reviews.iter().map(|r| {
                        (format!("Reviewer {}'s review", r.reviewer_index), quoted_review(r))
                    }),
                )
                .collect::<Vec<_>>();
        let spec = CallSpec::new(
            CONSOLIDATION_KEY,
            &self.config.consolidator_model,
            vec![ChatMessage::user(prompt)],
            "consolidation",
            "consolidator",
            self.config.timeout_ms,
        )
        .quoting(material);
        self.phase = Phase::Consolidating;
        let backup = self.config.foreman_fallback_model.clone();
        vec![
            Effect::Store(StageRow::computed("review_stats", STATS_ORDER, stats_row)),
            Effect::emit(
                "all_reviewers_complete",
                json!({ "data": { "reviews": self.reviews, "failedReviewers": self.failed_reviewers,
                                  "statistics": self.statistics } }),
            ),
            Effect::emit("consolidation_start", json!({})),
            self.calls.solo(spec, CONSOLIDATION_ORDER, backup.as_deref()),
        ]
    }

    fn on_consolidation(&mut self, routed: Routed) -> Vec<Effect> {
        self.phase = Phase::Done;
        let text = match &routed.reply.result {
            Ok(t) => t.clone(),
            Err(e) => {
                return self.title.fail(format!(
                    "{}; the reviews and statistics are kept.",
                    role_failed("consolidator", &routed, e)
                ))
            }
        };
        let reply = &routed.reply;
        let report = answer_text(&text).trim().to_string();
        let mut data = json!({
            "model": reply.model, "consolidatedReport": report,
            "actionItems": read_action_items(&text), "responseTimeMs": reply.response_time_ms,
        });
        if let Some(from) = &routed.fallback_from {
            data["fallbackFrom"] = json!(from);
        }
        let mut stored = data.clone();
        if let Some(o) = stored.as_object_mut() {
            o.remove("consolidatedReport");
        }
        let mut event = json!({ "data": data });
        self.calls.mark(&mut event);
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "consolidation".into(),
                stage_order: CONSOLIDATION_ORDER,
                model: Some(reply.model.clone()),
                role: Some("consolidator".into()),
                content: report.clone(),
                parsed_data: Some(stored),
                response_time_ms: Some(reply.response_time_ms as i64),
            }),
            Effect::emit("consolidation_complete", event),
        ];
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: report });
        out
    }
}

impl Mode for PeerReview {
    fn start(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::emit(
                "review_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id,
                        "mode": "peer_review", "reviewType": self.config.review_type.key(),
                        "rubric": self.config.rubric }),
            ),
            Effect::Store(StageRow {
                stage_type: SETUP.into(),
                stage_order: 0,
                model: None,
                role: None,
                content: self.work().to_string(),
                parsed_data: Some(json!({ "reviewType": self.config.review_type.key(),
                                          "rubric": self.config.rubric,
                                          "source": if self.config.content.is_some() { "content" } else { "question" } })),
                response_time_ms: None,
            }),
            Effect::emit(
                "reviewers_start",
                json!({ "totalReviewers": self.config.reviewer_models.len() }),
            ),
        ];
        let asking = Asking::new(self.review_schema.clone(), |json| {
            review_prompt_as(&self.ctx.question, self.work(), &self.config.rubric, json)
        });
        for (i, model) in self.config.reviewer_models.iter().enumerate() {
            let call = asking
                .call(
                    &self.ctx,
                    self.batch.key(i),
                    model,
                    "review",
                    "reviewer",
                    self.config.timeout_ms,
                )
                .quoting([("the work under review".to_string(), self.work().to_string())]);
            out.push(Effect::Call(call));
        }
        let model = self.config.consolidator_model.clone();
        out.extend(self.title.call(
            &model,
            title_prompt(&self.ctx.question),
            self.config.timeout_ms,
        ));
        self.calls.track(&out, stage_order);
        out
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        if reply.key == TITLE_KEY {
            return self.title.on_reply(&reply);
        }
        let (mut out, routed) = self.calls.route(empty_is_failure(reply));
        let Some(routed) = routed else { return out };
        match self.phase {
            Phase::Reviewing
                if routed.reply.key.starts_with("review:")
                    && self.batch.accept(routed.reply.clone()) =>
            {
                out.extend(self.on_review(&routed.reply));
                if self.batch.complete() {
                    out.extend(self.all_reviewed());
                }
            }
            Phase::Consolidating if routed.reply.key == CONSOLIDATION_KEY => {
                out.extend(self.on_consolidation(routed));
            }
            _ => {}
        }
        self.calls.track(&out, stage_order);
        out
    }
}

// ---- the stored result ---------------------------------------------------------------------

/// `{work, reviewType, rubric, reviews, failedReviewers, statistics, consolidation, partial,
/// failedModels}` from the stored rows, as the events gave them (the work, review type and
/// rubric from the `review_setup` row stored at the start).
pub fn load_result(rows: &[StageRow]) -> Value {
    let mut reviews: Vec<Review> = Vec::new();
    let mut failed: Vec<FailedReviewer> = Vec::new();
    for r in rows.iter().filter(|r| {
        r.stage_type.strip_prefix("review_").is_some_and(|n| n.parse::<usize>().is_ok())
    }) {
        let Some(mut data) = r.parsed_data.clone() else { continue };
        if data["failed"] == true {
            if let Ok(f) = serde_json::from_value::<FailedReviewer>(strip(data, &["failed"])) {
                failed.push(f);
            }
            continue;
        }
        data["reviewText"] = json!(answer_text(&r.content).trim());
        if let Ok(review) = serde_json::from_value::<Review>(data) {
            reviews.push(review);
        }
    }
    reviews.sort_by_key(|r| r.reviewer_index);
    failed.sort_by_key(|r| r.reviewer_index);
    let stats = rows.iter().find(|r| r.stage_type == "review_stats");
    let statistics = stats.and_then(|s| s.parsed_data.as_ref()).map(|p| p["statistics"].clone());
    let consolidation = rows.iter().find(|r| r.stage_type == "consolidation").map(|r| {
        let mut d = r.parsed_data.clone().unwrap_or(json!({}));
        d["consolidatedReport"] = json!(r.content);
        d
    });
    let setup = rows.iter().find(|r| r.stage_type == SETUP);
    let setup_data = setup.and_then(|r| r.parsed_data.clone());
    let mut result = json!({
        "work": setup.map(|r| r.content.clone()),
        "reviewType": setup_data.as_ref().map(|s| s["reviewType"].clone()),
        "rubric": setup_data.as_ref().map(|s| s["rubric"].clone()),
        "reviews": reviews, "failedReviewers": failed,
        "statistics": statistics, "consolidation": consolidation,
    });
    mark_from_rows(&mut result, rows);
    result
}

fn strip(mut v: Value, keys: &[&str]) -> Value {
    if let Some(o) = v.as_object_mut() {
        for k in keys {
            o.remove(*k);
        }
    }
    v
}

fn outcome(result: &Value) -> Option<String> {
    let c = result.get("consolidation").filter(|c| !c.is_null())?;
    let s = &result["statistics"];
    let score = match &s["consensusOverall"] {
        Value::Null => "no consensus score".to_string(),
        v => format!("consensus {v}/5"),
    };
    Some(format!(
        "{} reviews, {score}, {} action items: {}",
        result["reviews"].as_array().map_or(0, Vec::len),
        c["actionItems"].as_array().map_or(0, Vec::len),
        short(c["consolidatedReport"].as_str().unwrap_or(""), 60)
    ))
}

// ---- sim answers ---------------------------------------------------------------------------

fn carried(prompt: &str) -> &str {
    prompt
        .split_once(WORK_START)
        .and_then(|(_, rest)| rest.split_once(WORK_END))
        .map_or("", |(c, _)| c.trim())
}

/// The rubric's criteria as the prompt lists them (`- Name (weight n): …`).
pub fn prompt_criteria(prompt: &str) -> Vec<(String, u32)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let r = re(&RE, r"^- (.+) \(weight (\d)\): ");
    let rubric_part = prompt.split_once("Rubric: ").map_or("", |(_, rest)| rest);
    rubric_part
        .lines()
        .skip(1)
        .map_while(|l| r.captures(l))
        .filter_map(|c| Some((c[1].to_string(), c[2].parse().ok()?)))
        .collect()
}

const SIM_FINDINGS: [(&str, &str, &str, &str); 6] = [
    (
        "Single point of failure",
        "CRITICAL",
        "one component carries every request",
        "Run a second instance behind a load balancer.",
    ),
    (
        "No backup restore test",
        "MAJOR",
        "backups exist but nobody has restored one",
        "Restore a backup every month and time it.",
    ),
    (
        "Secrets in configuration",
        "MAJOR",
        "credentials sit in plain configuration files",
        "Move them to a secret store.",
    ),
    (
        "Sparse monitoring",
        "MINOR",
        "only uptime is watched",
        "Alert on latency and error rates too.",
    ),
    (
        "Unclear ownership",
        "MINOR",
        "nobody owns the nightly job",
        "Name an owner and document the job.",
    ),
    (
        "Document the data flow",
        "SUGGESTION",
        "the flow is only in people's heads",
        "Draw and keep a diagram next to the code.",
    ),
];

/// The sim reviewer's review as JSON that fits `schema`: the same draws as its text review.
fn sim_review_json(ask: &SimAsk, schema: &ReplySchema) -> Option<String> {
    let p = ask.prompt;
    let mut rng = SplitMix64::new(ask.seed);
    // The rubric's criteria as the schema names them.
    let criteria = schema::keys_of(&schema.schema["properties"]["scores"]);
    if criteria.is_empty() {
        return None;
    }
    let lean = rng.below(3) as i64 - 1;
    let scores: serde_json::Map<String, Value> = criteria
        .iter()
        .map(|name| {
            let score = (3 + lean + rng.below(3) as i64 - 1).clamp(1, 5);
            let s = json!({ "score": score,
                            "justification": format!("The work is judged on {name}.") });
            (name.clone(), s)
        })
        .collect();
    let mut picks: Vec<usize> = (0..SIM_FINDINGS.len()).collect();
    rng.shuffle(&mut picks);
    let location = if carried(p).is_empty() { "the request" } else { "the described design" };
    let findings: Vec<Value> = picks
        .iter()
        .take(3 + rng.below(2))
        .map(|&k| {
            let (title, severity, what, fix) = SIM_FINDINGS[k];
            let category = &criteria[rng.below(criteria.len())];
            json!({ "title": title, "category": category, "severity": severity,
                    "location": location, "description": format!("In this work {what}."),
                    "impact": "Outages or lost data when it goes wrong.", "recommendation": fix })
        })
        .collect();
    let summary: String = format!(
        "{}A sound start with gaps to close before it grows. (This review is simulated: no real \
         model was asked.)",
        ask.hostile_paragraph()
    )
    .chars()
    .take(SUMMARY_CHARS)
    .collect();
    let reply = json!({
        "reasoning": format!("[simulated review from {}] Each criterion was weighed against the work.", ask.model),
        "scores": scores,
        "findings": findings,
        "strengths": ["The scope is clear.", "The parts are simple.", "The costs are low."],
        "summary": summary,
    });
    Some(reply.to_string())
}

/// A finding's title in a consolidation prompt: a text review's `FINDING <n>: <title>`
/// heading, or a JSON review's `Title:` field as it reads.
fn quoted_finding_title(line: &str) -> Option<String> {
    if let Some((_, t)) = finding_heading(bare(line)) {
        return Some(t);
    }
    let t = line.trim().strip_prefix("Title: ")?.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    let who = ask.model;
    // Asked for a schema: this mode's review in JSON; another mode's is not ours to answer.
    match ask.schema {
        Some(s) if s.name == REVIEW_SCHEMA && p.starts_with(REVIEW_HEAD) => {
            return sim_review_json(ask, s)
        }
        Some(_) => return None,
        None => {}
    }
    let mut rng = SplitMix64::new(ask.seed);
    if p.starts_with(REVIEW_HEAD) {
        let criteria = prompt_criteria(p);
        if ask.malformed {
            return Some(format!(
                "[simulated review from {who}] Overall this looks reasonable; maybe a 4 out of 5? \
                 Security could be better and there might be a scaling issue, but it is hard to say."
            ));
        }
        let lean = rng.below(3) as i64 - 1;
        let mut s = format!("[simulated review from {who}]\n\n### Scores\n\n| Criterion | Score (1-5) | Weight | Justification |\n|---|---|---|---|\n");
        for (name, weight) in &criteria {
            let score = (3 + lean + rng.below(3) as i64 - 1).clamp(1, 5);
            s.push_str(&format!(
                "| {name} | {score} | {weight} | The work is judged on {name}. |\n"
            ));
        }
        let mut picks: Vec<usize> = (0..SIM_FINDINGS.len()).collect();
        rng.shuffle(&mut picks);
        s.push_str("\n### Findings\n\n");
        for (n, &k) in picks.iter().take(3 + rng.below(2)).enumerate() {
            let (title, severity, what, fix) = SIM_FINDINGS[k];
            let category =
                criteria.get(rng.below(criteria.len().max(1))).map_or("General", |c| c.0.as_str());
            s.push_str(&format!(
                "#### FINDING {}: {title}\n**Category:** {category}\n**Severity:** {severity}\n\
                 **Location:** {}\n**Description:** In this work {what}.\n**Impact:** Outages or \
                 lost data when it goes wrong.\n**Recommendation:** {fix}\n\n",
                n + 1,
                if carried(p).is_empty() { "the request" } else { "the described design" }
            ));
        }
        s.push_str(&format!(
            "### Strengths\n\n- The scope is clear.\n- The parts are simple.\n- The costs are low.\n\n\
             ### Summary\n\n{}A sound start with gaps to close before it grows. (This review is \
             simulated: no real model was asked.)",
            ask.hostile_paragraph()
        ));
        return Some(s);
    }
    if p.starts_with(CONSOLIDATE_HEAD) {
        if ask.malformed {
            return Some(format!(
                "[simulated consolidation from {who}] The reviewers broadly agree the work is \
                 fine with a few issues. Fix the big ones first."
            ));
        }
        let mut titles: Vec<(String, String)> = Vec::new();
        for l in p.lines() {
            if let Some(t) = quoted_finding_title(l) {
                if !titles.iter().any(|(x, _)| *x == t) {
                    let sev = SIM_FINDINGS.iter().find(|f| f.0 == t).map_or("MINOR", |f| f.1);
                    titles.push((t, sev.to_string()));
                }
            }
        }
        titles.sort_by_key(|(_, s)| SEVERITIES.iter().position(|x| x == s));
        let mut items = String::new();
        for (i, (t, sev)) in titles.iter().take(15).enumerate() {
            let effort = ["Low", "Medium", "High"][rng.below(3)];
            items.push_str(&format!("{}. [{sev}] Address: {t} — Effort: {effort}\n", i + 1));
        }
        return Some(format!(
            "[simulated consolidation from {who}]\n\n## Consensus Scores\n\nAs computed by the \
             server.\n\n### Consensus Findings\n\nThe reviewers who raised the same issues agree \
             on them.\n\n### Unique Findings\n\nThe rest are credible but single-sourced.\n\n\
             ### Disputed Assessments\n\nNone of note.\n\n## Inter-Reviewer Agreement\n\nSee the \
             statistics.\n\n## Prioritized Action Items\n\n{items}\n## Executive Summary\n\n{}The \
             work is a reasonable base; close the critical and major items first. (This text is \
             simulated: no real model was asked.)",
            ask.hostile_paragraph()
        ));
    }
    None
}

#[cfg(test)]
#[path = "peer_review_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// A score or an average as a reader reads it: `4`, `3.5`.
fn figure(v: &Value) -> Option<String> {
    let f = v.as_f64()?;
    Some(if f.fract() == 0.0 { format!("{f:.0}") } else { format!("{f}") })
}

/// An action item's text without the severity tag it opens with and the effort it closes
/// with (both have their own columns).
fn action_text(item: &Value) -> String {
    static TAG: OnceLock<Regex> = OnceLock::new();
    static EFFORT: OnceLock<Regex> = OnceLock::new();
    let text = item["text"].as_str().unwrap_or("");
    let text = if item["severity"].is_string() {
        re(&TAG, r"^(?:\*\*|__)?\[[^\]\n]{1,40}\](?:\*\*|__)?\s*").replace(text, "").into_owned()
    } else {
        text.to_string()
    };
    if item["effort"].is_string() {
        let effort = re(
            &EFFORT,
            r"(?i)\s*(?:[—–-]\s*)?\(?\s*effort\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?\s*(?:low|medium|high)\b\s*\)?\s*$",
        );
        effort.replace(&text, "").trim().to_string()
    } else {
        text.trim().to_string()
    }
}

/// The result as the export's report: the consensus, the reviewers' scores per criterion as a
/// table (with each criterion's average and agreement, and each reviewer's weighted overall),
/// the reviewers whose scores could not be read or who failed, the findings by severity, and
/// the consolidator's action items as a table.
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
    let mut out = String::new();
    let stats = &result["statistics"];
    if let Some(c) = figure(&stats["consensusOverall"]) {
        let rubric = result["rubric"]["name"].as_str().map_or(String::new(), |n| format!(" {n}"));
        let mut line = format!("**Consensus:** {c} of 5 overall, weighted by the{rubric} rubric");
        if let Some(sd) = stats["meanStdDev"].as_f64() {
            line.push_str(&format!(
                "; {} agreement between the reviewers (mean standard deviation {sd:.2})",
                agreement(sd).to_lowercase()
            ));
        }
        out.push_str(&format!("{line}.\n\n"));
    }
    let reviews = result["reviews"].as_array().cloned().unwrap_or_default();
    let consensus = stats["consensusScores"].as_array().cloned().unwrap_or_default();
    // The criteria: the rubric's, else those the reviews scored.
    let mut criteria: Vec<(String, Value)> = result["rubric"]["criteria"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| Some((c["name"].as_str()?.to_string(), c["weight"].clone())))
                .collect()
        })
        .unwrap_or_default();
    if criteria.is_empty() {
        if let Some(first) = reviews.first() {
            criteria = first["scores"]
                .as_array()
                .map(|s| {
                    s.iter()
                        .filter_map(|s| {
                            Some((s["criterion"].as_str()?.to_string(), s["weight"].clone()))
                        })
                        .collect()
                })
                .unwrap_or_default();
        }
    }
    let who = |r: &Value| {
        let n = r["reviewerIndex"].as_u64().map_or(String::new(), |n| format!(" {n}"));
        match r["model"].as_str() {
            Some(m) => format!("reviewer{n} ({m})"),
            None => format!("reviewer{n}"),
        }
    };
    if !reviews.is_empty() && !criteria.is_empty() {
        let mut head: Vec<String> = vec!["criterion".into(), "weight".into()];
        head.extend(reviews.iter().map(who));
        head.extend(["average".to_string(), "agreement".to_string()]);
        let mut rows: Vec<Vec<String>> = criteria
            .iter()
            .map(|(name, weight)| {
                let mut row = vec![name.clone(), figure(weight).unwrap_or_default()];
                for r in &reviews {
                    let s = r["scores"]
                        .as_array()
                        .and_then(|s| s.iter().find(|s| s["criterion"] == name.as_str()));
                    row.push(
                        s.and_then(|s| figure(&s["score"])).unwrap_or_else(|| "unread".into()),
                    );
                }
                let k = consensus.iter().find(|k| k["criterion"] == name.as_str());
                row.push(k.and_then(|k| figure(&k["average"])).unwrap_or_default());
                let agreement = match k.and_then(|k| k["agreement"].as_str()) {
                    Some(a) if k.is_some_and(|k| k["disputed"] == true) => {
                        format!("{}, disputed", a.to_lowercase())
                    }
                    Some(a) => a.to_lowercase(),
                    None => String::new(),
                };
                row.push(agreement);
                row
            })
            .collect();
        let mut overall = vec!["overall (weighted)".to_string(), String::new()];
        overall.extend(
            reviews.iter().map(|r| figure(&r["overallScore"]).unwrap_or_else(|| "unread".into())),
        );
        overall.push(figure(&stats["consensusOverall"]).unwrap_or_default());
        overall.push(String::new());
        rows.push(overall);
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        let right: Vec<usize> = (1..head.len() - 1).collect();
        out.push_str("**The reviewers' scores** (1 to 5):\n\n");
        out.push_str(&table(&head, &rows, &right));
        out.push('\n');
    }
    let mut notes: Vec<String> = reviews
        .iter()
        .filter(|r| r["parseSuccess"] == false)
        .map(|r| format!("- {}: no score could be read from the review", who(r)))
        .collect();
    for f in result["failedReviewers"].as_array().cloned().unwrap_or_default() {
        let why = f["error"].as_str().map_or(String::new(), |e| format!(" ({e})"));
        notes.push(format!("- {}: the call failed{why}", who(&f)));
    }
    if !notes.is_empty() {
        out.push_str(&format!("{}\n\n", notes.join("\n")));
    }
    let totals = &stats["findingTotals"];
    if let Some(n) = totals["total"].as_u64() {
        let parts: Vec<String> = SEVERITIES
            .iter()
            .filter_map(|s| {
                let n = totals[*s].as_u64().filter(|n| *n > 0)?;
                Some(match *s {
                    "SUGGESTION" => count(n, "suggestion", "suggestions"),
                    other => format!("{n} {}", other.to_lowercase()),
                })
            })
            .collect();
        let split =
            if parts.is_empty() { String::new() } else { format!(": {}", parts.join(", ")) };
        out.push_str(&format!(
            "**Findings:** {} in all the reviews{split}.\n\n",
            count(n, "finding", "findings")
        ));
    }
    let c = &result["consolidation"];
    if c.is_object() {
        let items = c["actionItems"].as_array().cloned().unwrap_or_default();
        let by = match (c["model"].as_str(), c["fallbackFrom"].as_str()) {
            (Some(m), Some(f)) => format!(" (by {m}, in place of {f})"),
            (Some(m), None) => format!(" (by {m})"),
            _ => String::new(),
        };
        if items.is_empty() {
            out.push_str(&format!(
                "**Action items{by}:** none could be read from the consolidated report.\n"
            ));
        } else {
            let rows: Vec<Vec<String>> = items
                .iter()
                .enumerate()
                .map(|(i, it)| {
                    vec![
                        (i + 1).to_string(),
                        it["severity"].as_str().map_or("not stated".into(), str::to_lowercase),
                        action_text(it),
                        it["effort"].as_str().map_or("not stated".into(), str::to_lowercase),
                    ]
                })
                .collect();
            out.push_str(&format!("**Action items{by}:**\n\n"));
            out.push_str(&table(&["#", "severity", "action", "effort"], &rows, &[0]));
        }
    }
    out
}
