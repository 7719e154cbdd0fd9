//! Specialist Panel mode (specs/08-specialist-panel.md): 2-6 specialists analyse the same
//! material in parallel, each under its own expert role (a library role or a custom one), and
//! report findings with 1-5 ratings on the role's criteria; one synthesizer then integrates
//! the reports (agreements, conflicts, a risk matrix, recommendations, an executive summary)
//! without ranking them.
//!
//! Each report is stored the moment it arrives, so a cancelled or interrupted run keeps (and a
//! resumed one replays) every finished report. Replies are read only where they state what is
//! asked: a rating is the number a reply gives a criterion, never one inferred from its prose;
//! what cannot be read is `null` (and `parseSuccess: false` when no rating could be read), and
//! the report still goes to the synthesizer as it was written.

use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    empty_is_failure, mark_from_rows, role_failed, title_prompt, Calls, Routed, SplitMix64,
    TitleTracker, CALL_FAILED, TITLE_KEY,
};
use super::reading::re;
use super::reading::{answer_text, readable};
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::{ModelId, Text, MAX_SHORT_CHARS};
use super::schema::{self, ReadFrom, ReplySchema};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, FieldError, Mode,
    RunContext, StageRow, ValidRequest,
};

/// Council's default models: the default panel's three specialists, the first also
/// synthesizing.
const SIM_MODELS: [&str; 3] = ["sim/alpha", "sim/beta", "sim/gamma"];
const SEED_MODELS: [&str; 3] = ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];
const DEFAULT_ROLES: [RoleId; 3] =
    [RoleId::SecurityExpert, RoleId::ScalabilityArchitect, RoleId::CostAnalyst];
/// The longest material (`modeConfig.content`), in characters.
pub const MAX_MATERIAL_CHARS: usize = 100_000;
const DEFAULT_TIMEOUT_MS: u64 = 150_000;
const MAX_EXPERTISE: usize = 1_000;
const MAX_DESCRIPTION: usize = 4_000;
const MAX_PRIORITY: usize = 500;
const MAX_CRITERION: usize = 100;

const PANEL_ORDER: i32 = 0;
const SPECIALIST_ORDER: i32 = 1;
const SYNTHESIS_ORDER: i32 = 2;
/// The computed row stored at the start: the material and the panel's roles.
const PANEL_STAGE: &str = "panel";
const SPECIALIST_PREFIX: &str = "specialist_";
const SYNTHESIS_KEY: &str = "synthesis";

// ---- the role library ----------------------------------------------------------------------

/// A specialist's role: one of the library's, or `custom` with a `customRole`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoleId {
    SecurityExpert,
    CostAnalyst,
    ScalabilityArchitect,
    UxDesigner,
    DevopsEngineer,
    ComplianceOfficer,
    PerformanceEngineer,
    DataArchitect,
    // The specialist's `customRole` (a doc comment here would make the schema a oneOf).
    Custom,
}

/// A library role: what its prompt says and the criteria its report rates.
pub struct LibraryRole {
    pub id: RoleId,
    pub key: &'static str,
    pub title: &'static str,
    pub expertise: &'static str,
    pub lens: &'static str,
    pub priorities: [&'static str; 4],
    pub criteria: [&'static str; 5],
}

/// The eight library roles (prompt text written for Conclave; criteria as the spec names them).
pub static LIBRARY: [LibraryRole; 8] = [
    LibraryRole {
        id: RoleId::SecurityExpert,
        key: "security_expert",
        title: "Security Expert",
        expertise: "application security, identity and access management, threat modelling and secure infrastructure",
        lens: "Assume a motivated attacker: every input, credential, dependency and network path is a way in until it is shown not to be.",
        priorities: [
            "Exploitable weaknesses and how an attacker would chain them",
            "Protection of sensitive data at rest and in transit",
            "Least privilege for people, services and credentials",
            "Detecting, containing and recovering from a breach",
        ],
        criteria: [
            "Authentication & Authorization",
            "Data Protection",
            "Input Validation",
            "Attack Surface",
            "Incident Response Readiness",
        ],
    },
    LibraryRole {
        id: RoleId::CostAnalyst,
        key: "cost_analyst",
        title: "Cost Analyst",
        expertise: "cloud pricing, total cost of ownership, FinOps and build-versus-buy decisions",
        lens: "Follow the money over three years: what it costs to build, to run and to leave, and when it pays back.",
        priorities: [
            "Recurring infrastructure spend and what drives it",
            "People and operational effort, on-call and maintenance included",
            "How the costs grow as usage grows",
            "Commitments and dependencies that are expensive to exit",
        ],
        criteria: [
            "Infrastructure Costs",
            "Operational Costs",
            "Scaling Cost Curve",
            "Vendor Lock-in Risk",
            "ROI Timeline",
        ],
    },
    LibraryRole {
        id: RoleId::ScalabilityArchitect,
        key: "scalability_architect",
        title: "Scalability Architect",
        expertise: "distributed systems, capacity planning, data partitioning and resilience engineering",
        lens: "Picture ten times today's load, and then one component failing at the worst possible moment.",
        priorities: [
            "Bottlenecks that cap growth",
            "State and data that cannot be spread across nodes",
            "Failure isolation and graceful degradation",
            "Predictable latency at peak load",
        ],
        criteria: [
            "Horizontal Scalability",
            "Data Layer Scalability",
            "Fault Tolerance",
            "Latency Under Load",
            "Resource Efficiency",
        ],
    },
    LibraryRole {
        id: RoleId::UxDesigner,
        key: "ux_designer",
        title: "UX Designer",
        expertise: "interaction design, accessibility standards (WCAG), information architecture and usability research",
        lens: "Look through the eyes of a first-time user who is busy, distracted or relies on assistive technology.",
        priorities: [
            "Whether people can finish their main tasks without help",
            "Access for people with disabilities",
            "Clear structure, wording and navigation",
            "Recovering from mistakes without losing work",
        ],
        criteria: [
            "Usability",
            "Accessibility",
            "Information Architecture",
            "Visual Clarity",
            "Error Recovery",
        ],
    },
    LibraryRole {
        id: RoleId::DevopsEngineer,
        key: "devops_engineer",
        title: "DevOps Engineer",
        expertise: "CI/CD pipelines, infrastructure as code, observability and incident management",
        lens: "Ask how this is shipped, watched and repaired at 3 a.m. by someone who did not build it.",
        priorities: [
            "Repeatable, automated releases with a safe rollback",
            "Visibility into health through metrics, logs and alerts",
            "Infrastructure defined and reviewed as code",
            "Environments that behave the same from development to production",
        ],
        criteria: [
            "Deployment Automation",
            "Monitoring Coverage",
            "Incident Response",
            "Infrastructure as Code",
            "Environment Parity",
        ],
    },
    LibraryRole {
        id: RoleId::ComplianceOfficer,
        key: "compliance_officer",
        title: "Compliance Officer",
        expertise: "data-protection law (GDPR, CCPA), industry frameworks (SOC 2, ISO 27001, HIPAA), audit and governance",
        lens: "Read it as an auditor or a regulator would: what must be provable, to whom, and with what evidence.",
        priorities: [
            "Obligations under the laws and standards that apply",
            "Lawful handling of personal data and people's rights over it",
            "Records that show who did what, and when",
            "Policies and documentation an auditor can follow",
        ],
        criteria: [
            "Regulatory Coverage",
            "Data Privacy",
            "Audit Trail",
            "Consent Management",
            "Documentation Completeness",
        ],
    },
    LibraryRole {
        id: RoleId::PerformanceEngineer,
        key: "performance_engineer",
        title: "Performance Engineer",
        expertise: "profiling, load testing, caching strategies and database tuning",
        lens: "Measure before believing: where does the time go on the slowest request, and what does each request cost?",
        priorities: [
            "Response time at the median and in the tail",
            "The throughput the system sustains before it degrades",
            "Memory and CPU spent per unit of work",
            "Cache and database efficiency on the hot paths",
        ],
        criteria: [
            "Response Latency",
            "Throughput",
            "Memory Efficiency",
            "Cache Hit Ratio",
            "Database Performance",
        ],
    },
    LibraryRole {
        id: RoleId::DataArchitect,
        key: "data_architect",
        title: "Data Architect",
        expertise: "data modelling, database design, data pipelines and data governance",
        lens: "Treat the data as the part of the system that outlives the code: its shape, its correctness and its history.",
        priorities: [
            "A schema that fits the domain and the queries it must serve",
            "Correctness guaranteed by constraints and transactions",
            "Queries and indexes that stay efficient as the data grows",
            "Safe, reversible schema and data migrations",
        ],
        criteria: [
            "Schema Design",
            "Data Integrity",
            "Query Efficiency",
            "Migration Strategy",
            "Data Quality",
        ],
    },
];

impl RoleId {
    /// The library role of this id (None for `custom`).
    pub fn library(self) -> Option<&'static LibraryRole> {
        LIBRARY.iter().find(|r| r.id == self)
    }
}

// ---- the request ---------------------------------------------------------------------------

/// A role of your own, for a specialist whose `roleId` is `custom`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CustomRoleRequest {
    /// The role's title (at least 3 characters), e.g. "Accessibility Auditor".
    #[schemars(length(min = 3))]
    pub title: Option<Text<MAX_SHORT_CHARS>>,
    /// Its areas of expertise (at least 10 characters).
    #[schemars(length(min = 10))]
    pub expertise_areas: Option<Text<MAX_EXPERTISE>>,
    /// How the role looks at the material (at least 20 characters).
    #[schemars(length(min = 20))]
    pub description: Option<Text<MAX_DESCRIPTION>>,
    /// What it cares about most, in order: 3 to 6 distinct priorities.
    #[schemars(length(min = 3, max = 6))]
    pub priorities: Option<Vec<Text<MAX_PRIORITY>>>,
    /// What it rates 1-5: 3 to 8 distinct criteria (each at least 3 characters, on one line,
    /// without `|`).
    #[schemars(length(min = 3, max = 8))]
    pub criteria: Option<Vec<Text<MAX_CRITERION>>>,
}

/// One specialist of a request.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SpecialistRequest {
    /// The role: security_expert, cost_analyst, scalability_architect, ux_designer,
    /// devops_engineer, compliance_officer, performance_engineer, data_architect or custom.
    #[schemars(with = "RoleId")]
    pub role_id: Option<RoleId>,
    /// The model that plays it (the same model may play two roles).
    pub model: Option<ModelId>,
    /// Only with `custom`: `{title, expertiseAreas, description, priorities, criteria}`.
    pub custom_role: Option<CustomRoleRequest>,
}

/// Specialist Panel's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SpecialistPanelRequest {
    /// The material to analyse (a plan, a design, code). Without it the question itself is
    /// the material.
    pub content: Option<Text<MAX_MATERIAL_CHARS>>,
    /// The panel: 2 to 6 specialists, each a role from the library and a model (default: a
    /// security expert, a scalability architect and a cost analyst on three models). Leave it
    /// empty for the default panel. A role of your own (role custom, with its customRole) is
    /// given through the API or the CLI.
    #[schemars(length(min = 2, max = 6))]
    pub specialists: Option<Vec<SpecialistRequest>>,
    /// Writes the integrated assessment (default: the first specialist's model).
    pub synthesizer_model: Option<ModelId>,
    /// Per-call timeout in milliseconds (by default two and a half minutes).
    #[schemars(range(min = 10000, max = 600000))]
    pub timeout_ms: Option<i64>,
}

/// One specialist as stored with the run: its role in full, so a stored run reads the same
/// whatever the library says later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SpecialistConfig {
    /// `security_expert`…, or `custom_<title slug>`: unique in a panel.
    pub role_key: String,
    pub role_id: RoleId,
    pub model: String,
    pub title: String,
    pub expertise_areas: String,
    pub description: String,
    pub priorities: Vec<String>,
    pub criteria: Vec<String>,
}

/// The stored configuration of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PanelConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub specialists: Vec<SpecialistConfig>,
    pub synthesizer_model: String,
    pub timeout_ms: u64,
    /// The server's backup for the synthesizer (`[fallback] chairman`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

/// `custom_<title>`: lower case, every character that is not a letter or digit an `_`.
pub fn custom_key(title: &str) -> String {
    let slug: String = title
        .trim()
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect();
    format!("custom_{slug}")
}

/// A name compared as the parser compares criteria: ignoring case and white space.
fn loose(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).flat_map(char::to_lowercase).collect()
}

fn library_role(r: &LibraryRole, model: String) -> SpecialistConfig {
    SpecialistConfig {
        role_key: r.key.into(),
        role_id: r.id,
        model,
        title: r.title.into(),
        expertise_areas: r.expertise.into(),
        description: r.lens.into(),
        priorities: r.priorities.iter().map(|s| s.to_string()).collect(),
        criteria: r.criteria.iter().map(|s| s.to_string()).collect(),
    }
}

/// A text field of a custom role: present, trimmed, at least `min` characters.
fn min_text<const N: usize>(
    value: Option<&Text<N>>,
    field: &str,
    min: usize,
) -> Result<String, FieldError> {
    let t = value.and_then(Text::trimmed).ok_or_else(|| FieldError::new(field, "is required"))?;
    if t.chars().count() < min {
        return Err(FieldError::new(field, format!("must be at least {min} characters")));
    }
    Ok(t)
}

/// A list of a custom role: `range` items, each trimmed, at least 3 characters, distinct
/// (ignoring case and spacing); `one_line`: no line breaks and no `|` (a criterion is a
/// table cell in the reply).
fn text_list<const N: usize>(
    value: Option<&Vec<Text<N>>>,
    field: &str,
    range: std::ops::RangeInclusive<usize>,
    one_line: bool,
) -> Result<Vec<String>, FieldError> {
    let list = value.ok_or_else(|| FieldError::new(field, "is required"))?;
    if !range.contains(&list.len()) {
        return Err(FieldError::new(
            field,
            format!("must have {} to {} items", range.start(), range.end()),
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let t = item.0.trim().to_string();
        if t.chars().count() < 3 {
            return Err(FieldError::new(field, format!("item {i} must be at least 3 characters")));
        }
        if one_line && (t.contains('\n') || t.contains('\r') || t.contains('|')) {
            return Err(FieldError::new(
                field,
                format!("item {i} must be one line without `|` (it is a row of a table)"),
            ));
        }
        if out.iter().any(|o| loose(o) == loose(&t)) {
            return Err(FieldError::new(field, format!("item {i} repeats an earlier item")));
        }
        out.push(t);
    }
    Ok(out)
}

fn custom_role(
    c: &CustomRoleRequest,
    field: &str,
    model: String,
) -> Result<SpecialistConfig, FieldError> {
    let f = |name: &str| format!("{field}.{name}");
    let title = min_text(c.title.as_ref(), &f("title"), 3)?;
    let expertise_areas = min_text(c.expertise_areas.as_ref(), &f("expertiseAreas"), 10)?;
    let description = min_text(c.description.as_ref(), &f("description"), 20)?;
    let priorities = text_list(c.priorities.as_ref(), &f("priorities"), 3..=6, false)?;
    let criteria = text_list(c.criteria.as_ref(), &f("criteria"), 3..=8, true)?;
    Ok(SpecialistConfig {
        role_key: custom_key(&title),
        role_id: RoleId::Custom,
        model,
        title,
        expertise_areas,
        description,
        priorities,
        criteria,
    })
}

fn default_panel(offline: bool) -> Vec<SpecialistConfig> {
    let models = if offline { SIM_MODELS } else { SEED_MODELS };
    DEFAULT_ROLES
        .iter()
        .zip(models)
        .filter_map(|(id, m)| id.library().map(|r| library_role(r, m.to_string())))
        .collect()
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: SpecialistPanelRequest =
        request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let content = match &cfg.content {
        None => None,
        Some(c) => Some(
            c.trimmed()
                .ok_or_else(|| FieldError::new("modeConfig.content", "must not be empty"))?,
        ),
    };
    let specialists = match &cfg.specialists {
        None => default_panel(defaults.offline),
        Some(list) => {
            if !(2..=6).contains(&list.len()) {
                return Err(FieldError::new(
                    "modeConfig.specialists",
                    "A panel has 2 to 6 specialists",
                ));
            }
            let mut panel: Vec<SpecialistConfig> = Vec::with_capacity(list.len());
            for (i, s) in list.iter().enumerate() {
                let field = |f: &str| format!("modeConfig.specialists[{i}].{f}");
                let model = request::model(s.model.as_ref(), &field("model"))?
                    .ok_or_else(|| FieldError::new(&field("model"), "is required"))?;
                let role_id = s.role_id.ok_or_else(|| {
                    let known: Vec<&str> = LIBRARY.iter().map(|r| r.key).collect();
                    FieldError::new(
                        &field("roleId"),
                        format!("is required; known roles: {}, custom", known.join(", ")),
                    )
                })?;
                let specialist = match (role_id.library(), &s.custom_role) {
                    (Some(_), Some(_)) => {
                        return Err(FieldError::new(
                            &field("customRole"),
                            "is only allowed with roleId custom",
                        ))
                    }
                    (Some(r), None) => library_role(r, model),
                    (None, Some(c)) => custom_role(c, &field("customRole"), model)?,
                    (None, None) => {
                        return Err(FieldError::new(
                            &field("customRole"),
                            "is required with roleId custom",
                        ))
                    }
                };
                if let Some(j) = panel.iter().position(|p| p.role_key == specialist.role_key) {
                    let what = match role_id {
                        RoleId::Custom => field("customRole.title"),
                        _ => field("roleId"),
                    };
                    return Err(FieldError::new(
                        &what,
                        format!(
                            "role {} is already on the panel (specialist {j}); each role once",
                            specialist.role_key
                        ),
                    ));
                }
                panel.push(specialist);
            }
            panel
        }
    };
    let synthesizer_model =
        request::model(cfg.synthesizer_model.as_ref(), "modeConfig.synthesizerModel")?
            .unwrap_or_else(|| specialists[0].model.clone());
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        "modeConfig.timeoutMs",
        10_000..=600_000,
        DEFAULT_TIMEOUT_MS,
    )?;
    let models: Vec<String> = specialists.iter().map(|s| s.model.clone()).collect();
    let chairman_fallback_model =
        Fallbacks::for_role(&defaults.fallback.chairman, &synthesizer_model);
    let models = request::distinct(&[&models], &[&synthesizer_model]);
    let config = PanelConfig {
        content,
        specialists,
        synthesizer_model,
        timeout_ms,
        chairman_fallback_model,
    };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models,
    })
}

/// Specialist Panel in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "specialist_panel",
    label: "Specialist Panel",
    description: "2-6 models each analyse the material as a different expert (security, cost, scalability…) with 1-5 ratings on the role's criteria; one synthesis integrates their views.",
    multi_turn: false,
    question: Question { label: "What to assess", required: Some("Question is required") },
    roles: &[
        Role {
            id: "specialist",
            label: "Specialists",
            field: None,
            panel: true,
            fallback: None,
            sim_default: &SIM_MODELS,
            default: &SEED_MODELS,
        },
        Role {
            id: "synthesizer",
            label: "Synthesizer (default: the first specialist's model)",
            field: Some("synthesizerModel"),
            panel: false,
            fallback: Some("chairman"),
            sim_default: &[],
            default: &[],
        },
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<SpecialistPanelRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(SpecialistPanel::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("specialist", "a specialist's report"), ("all_specialists", "every specialist has reported"), ("synthesis", "the synthesis")],
    report: Some(report),
    example: || {
        json!({ "mode": "specialist_panel", "question": "Assess our plan to move the web shop to Kubernetes.",
                "modeConfig": {
                    "content": "Move the shop's three services from two VMs to a managed Kubernetes cluster; keep PostgreSQL on a managed instance; deploy with GitHub Actions.",
                    "specialists": [
                        { "roleId": "security_expert", "model": "sim/alpha" },
                        { "roleId": "devops_engineer", "model": "sim/beta" },
                        { "roleId": "custom", "model": "sim/gamma", "customRole": {
                            "title": "Support Lead", "expertiseAreas": "customer support and incident communication",
                            "description": "Judges the plan by what customers notice during and after the move.",
                            "priorities": ["No downtime customers see", "Clear status updates", "A fast way back"],
                            "criteria": ["Customer Impact", "Communication Plan", "Rollback Clarity"] } } ],
                    "synthesizerModel": "sim/alpha" } })
    },
    sim: Some(sim_answer),
};

// ---- the material --------------------------------------------------------------------------

/// What the panel analyses: `content`, else the question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Material {
    /// `content` or `question`.
    pub source: String,
    pub text: String,
    pub length: usize,
}

pub fn material(content: Option<&str>, question: &str) -> Material {
    let (source, text) = match content {
        Some(c) => ("content", c),
        None => ("question", question),
    };
    Material { source: source.into(), text: text.into(), length: text.chars().count() }
}

// ---- reading replies -----------------------------------------------------------------------

/// The sections a specialist's report is asked for.
pub const REPORT_SECTIONS: [&str; 4] =
    ["Key Findings", "Risk Assessment", "Top 3 Recommendations", "Detailed Analysis"];
/// The sections a synthesis is asked for.
pub const SYNTHESIS_SECTIONS: [&str; 5] = [
    "Convergent Findings",
    "Divergent Findings",
    "Consolidated Risk Matrix",
    "Unified Recommendations",
    "Executive Summary",
];
/// Risk levels, most severe first.
pub const LEVELS: [&str; 4] = ["Critical", "High", "Medium", "Low"];

/// `**x**` / `__x__` markup removed from both ends of a text.
fn unbold(value: &str) -> &str {
    let mut v = value.trim();
    loop {
        let t = v
            .trim_start_matches("**")
            .trim_start_matches("__")
            .trim_end_matches("**")
            .trim_end_matches("__")
            .trim();
        if t.len() == v.len() {
            return t;
        }
        v = t;
    }
}

/// The name of a heading line (`## Key Findings`, `**Key Findings:**`, `### 2. Risk
/// Assessment (1-5)`), or None for a line that is not a heading.
pub fn heading_name(line: &str) -> Option<String> {
    let t = line.trim();
    let inner = if t.starts_with('#') {
        t.trim_start_matches('#').trim()
    } else if (t.starts_with("**") && t.trim_end_matches(':').trim_end().ends_with("**"))
        || (t.starts_with("__") && t.trim_end_matches(':').trim_end().ends_with("__"))
    {
        t
    } else {
        return None;
    };
    let inner = unbold(inner.trim_end_matches(':').trim_end());
    let inner = inner.trim_end_matches(':').trim();
    static NUM: OnceLock<Regex> = OnceLock::new();
    let inner = re(&NUM, r"^\d{1,2}[.)]\s+").replace(inner, "");
    static PAREN: OnceLock<Regex> = OnceLock::new();
    let inner = re(&PAREN, r"\s*\([^)]*\)\s*$").replace(&inner, "");
    let name = inner.split_whitespace().collect::<Vec<_>>().join(" ");
    (!name.is_empty()).then_some(name)
}

/// Each of `names`' sections of a text: from its heading to the next heading of one of
/// `names`. A section named twice: the last one counts. Missing: None.
pub fn sections(text: &str, names: &[&str]) -> Vec<Option<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut starts: Vec<(usize, usize)> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(h) = heading_name(l) {
            if let Some(k) = names.iter().position(|n| n.eq_ignore_ascii_case(&h)) {
                starts.push((i, k));
            }
        }
    }
    let mut out = vec![None; names.len()];
    for (j, &(i, k)) in starts.iter().enumerate() {
        let end = starts.get(j + 1).map_or(lines.len(), |s| s.0);
        out[k] = Some(lines[i + 1..end].join("\n").trim().to_string());
    }
    out
}

/// A list item's marker (`1.`, `1)`, `-`, `*`, `•`) and the text after it.
fn list_item(line: &str) -> Option<&str> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let t = line.trim_start();
    let m = re(&RE, r"^(?:\d{1,3}[.)]|[-*•])(?:\s+|$)").find(t)?;
    Some(t[m.end()..].trim())
}

/// The items of a list: lines starting with a marker (removed); other lines continue the
/// item before them (lines before the first item are not items). A text with no marker at all
/// is one item per non-empty line.
pub fn list_items(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if !lines.iter().any(|l| list_item(l).is_some()) {
        return lines.iter().map(|l| l.to_string()).collect();
    }
    let mut items: Vec<String> = Vec::new();
    for l in lines {
        match list_item(l) {
            Some(t) => items.push(t.to_string()),
            None => {
                if let Some(last) = items.last_mut() {
                    if !last.is_empty() {
                        last.push(' ');
                    }
                    last.push_str(l);
                }
            }
        }
    }
    items
}

/// The cells of a table row (`| a | b |`, or `a | b` without the outer bars), or None for a
/// line that is not one.
fn table_cells(line: &str) -> Option<Vec<String>> {
    let t = line.trim();
    if !t.contains('|') {
        return None;
    }
    let inner = t.strip_prefix('|').unwrap_or(t);
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let cells: Vec<String> = inner.split('|').map(|c| c.trim().to_string()).collect();
    (cells.len() >= 2).then_some(cells)
}

fn is_separator(cells: &[String]) -> bool {
    cells.iter().all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
}

/// A table of a text: its header cells (when a separator row follows them) and its body rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    pub header: Option<Vec<String>>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// The first column whose header contains the first of `words` that any header contains
    /// (ignoring case), if any: `["concern", "risk"]` finds `Concern` before `Risk Level`.
    fn column(&self, words: &[&str]) -> Option<usize> {
        let h: Vec<String> = self.header.as_ref()?.iter().map(|c| c.to_lowercase()).collect();
        words.iter().find_map(|w| h.iter().position(|c| c.contains(w)))
    }
}

/// Every table of a text: runs of consecutive table lines. A run whose second line is a
/// separator (`|---|---|`) has a header; separators are never rows.
pub fn tables(text: &str) -> Vec<Table> {
    let mut out: Vec<Table> = Vec::new();
    let mut run: Vec<Vec<String>> = Vec::new();
    let flush = |run: &mut Vec<Vec<String>>, out: &mut Vec<Table>| {
        if run.is_empty() {
            return;
        }
        let has_header = run.len() >= 2 && is_separator(&run[1]) && !is_separator(&run[0]);
        let header = has_header.then(|| run[0].clone());
        let rows = run
            .iter()
            .skip(if has_header { 2 } else { 0 })
            .filter(|r| !is_separator(r))
            .cloned()
            .collect();
        out.push(Table { header, rows });
        run.clear();
    };
    for line in text.lines() {
        match table_cells(line) {
            Some(cells) => run.push(cells),
            None => flush(&mut run, &mut out),
        }
    }
    flush(&mut run, &mut out);
    out
}

/// A rating as stated: the first number of a text, rounded half up; None when there is no
/// number or it is outside 1-5.
pub fn rating_of(text: &str) -> Option<u8> {
    // The prompt's own placeholder (`<1-5>`, `1-5`) echoed back, or a range, is not a rating.
    if crate::modes::reading::no_single_value(text) {
        return None;
    }
    static RE: OnceLock<Regex> = OnceLock::new();
    let m = re(&RE, r"-?\d+(?:\.\d+)?").find(text)?;
    let v: f64 = m.as_str().parse().ok()?;
    if !(1.0..=5.0).contains(&v) {
        return None;
    }
    Some((v + 0.5).floor() as u8)
}

/// One criterion's rating as read from a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CriterionScore {
    pub criterion: String,
    /// 1-5, or null when the report states none (or one outside 1-5).
    pub score: Option<u8>,
    pub notes: Option<String>,
}

/// `<criterion>: <n>` on its own line (bullets and bold allowed), the number followed by
/// nothing, `/5`, or a separator: the rating and the notes after it.
fn rating_line(line: &str, criterion: &str) -> Option<(Option<u8>, Option<String>)> {
    let t = line.trim_start().trim_start_matches(['-', '*', '•', '>']).trim_start();
    let t = unbold(t);
    let (name, rest) = t.split_once(':')?;
    if loose(unbold(name)) != loose(criterion) {
        return None;
    }
    let rest = unbold(rest.trim_start().trim_start_matches("**").trim_start());
    static RE: OnceLock<Regex> = OnceLock::new();
    let c =
        re(&RE, r"^(-?\d+(?:\.\d+)?)(?:\s*/\s*5(?:\.0)?)?(?:\s*(?:[-–—,;(.:]|\*\*)\s*(.*)|\s*)$")
            .captures(rest)?;
    let notes = c
        .get(2)
        .map(|n| n.as_str().trim().trim_end_matches(')').trim().to_string())
        .filter(|n| !n.is_empty());
    Some((rating_of(&c[1]), notes))
}

/// The rating of each criterion: the last table row whose first cell (without `**`) is the
/// criterion (ignoring case and spacing), the rating from the table's `Rating`/`Score` column
/// (else the second cell) and the notes from its `Notes` column (else the next cell); without
/// such a row, the last `<criterion>: <n>` line.
pub fn read_scores(answer: &str, criteria: &[String]) -> Vec<CriterionScore> {
    let tables = tables(answer);
    criteria
        .iter()
        .map(|criterion| {
            let key = loose(criterion);
            let from_table = tables.iter().rev().find_map(|t| {
                let row = t.rows.iter().rev().find(|r| loose(unbold(&r[0])) == key)?;
                let at = t.column(&["rating", "score"]).filter(|&c| c > 0).unwrap_or(1);
                let notes_at = t.column(&["note"]).filter(|&c| c > 0).unwrap_or(at + 1);
                let score = row.get(at).and_then(|c| rating_of(c));
                let notes =
                    row.get(notes_at).map(|n| unbold(n).to_string()).filter(|n| !n.is_empty());
                Some((score, notes))
            });
            let (score, notes) = from_table
                .or_else(|| answer.lines().rev().find_map(|l| rating_line(l, criterion)))
                .unwrap_or((None, None));
            CriterionScore { criterion: criterion.clone(), score, notes }
        })
        .collect()
}

/// A specialist's report as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportReading {
    pub criteria_scores: Vec<CriterionScore>,
    /// The mean of the ratings read, to one decimal; null when none was.
    pub average_score: Option<f64>,
    pub key_findings: Vec<String>,
    /// The first three.
    pub top_recommendations: Vec<String>,
    /// At least one rating was read.
    pub parse_success: bool,
    /// Where the report was read from (its JSON or its text), when a rating was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// Reads a specialist's report (its answer part: a reasoning trace is never read).
pub fn read_report(reply: &str, criteria: &[String]) -> ReportReading {
    let text = answer_text(reply);
    let s = sections(&text, &REPORT_SECTIONS);
    let criteria_scores = read_scores(&text, criteria);
    let average_score = average(&criteria_scores);
    let key_findings = s[0].as_deref().map(list_items).unwrap_or_default();
    let mut top_recommendations = s[2].as_deref().map(list_items).unwrap_or_default();
    top_recommendations.truncate(3);
    let parse_success = average_score.is_some();
    ReportReading {
        parse_success,
        criteria_scores,
        average_score,
        key_findings,
        top_recommendations,
        read_from: parse_success.then_some(ReadFrom::Text),
    }
}

/// The mean of the ratings read, to one decimal; None when none was.
fn average(scores: &[CriterionScore]) -> Option<f64> {
    let read: Vec<f64> = scores.iter().filter_map(|c| c.score).map(f64::from).collect();
    (!read.is_empty()).then(|| (read.iter().sum::<f64>() / read.len() as f64 * 10.0).round() / 10.0)
}

// ---- structured replies --------------------------------------------------------------------

/// The report's reply schema's name (the sim answers it by this name).
pub const REPORT_SCHEMA: &str = "specialist_panel_report";
/// Bounds of the report's free-text fields (a small model looping inside a string still ends):
/// a rating's notes are a sentence, a finding or a recommendation a few.
const NOTES_CHARS: usize = 200;
const ITEM_CHARS: usize = 300;
const ANALYSIS_CHARS: usize = 3_500;

/// A specialist's report as JSON: the reasoning, 3-8 key findings, one 1-5 rating per
/// criterion of the role (each criterion by its name, as the table names it), three
/// recommendations and the detailed analysis, in the order of the text format's sections.
pub fn report_schema(criteria: &[String]) -> Arc<ReplySchema> {
    let rating = schema::object([
        (
            "rating",
            schema::described(
                schema::integer(1, 5),
                "5 = strong, no concern; 1 = a serious weakness",
            ),
        ),
        ("notes", schema::described(schema::text(NOTES_CHARS), "why, in a sentence")),
    ]);
    ReplySchema::new(
        REPORT_SCHEMA,
        schema::reasoned([
            (
                "keyFindings",
                schema::described(
                    schema::list(schema::text(ITEM_CHARS), 3, 8),
                    "3 to 8 findings, most important first",
                ),
            ),
            (
                "ratings",
                schema::described(
                    schema::keyed(criteria, rating),
                    "every criterion listed above by its name, in that order, with its rating",
                ),
            ),
            (
                "topRecommendations",
                schema::described(
                    schema::list(schema::text(ITEM_CHARS), 3, 3),
                    "three recommendations, most important first",
                ),
            ),
            (
                "detailedAnalysis",
                schema::described(
                    schema::text(ANALYSIS_CHARS),
                    "200 to 500 words from your perspective",
                ),
            ),
        ]),
    )
}

/// The non-empty strings of a JSON list, trimmed.
fn json_items(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Reads a specialist's report: from its JSON when it fits `schema` (every criterion rated
/// under its own name, once), else by its text ([`read_report`]).
pub fn read_report_reply(reply: &str, criteria: &[String], schema: &ReplySchema) -> ReportReading {
    let Some(v) = schema.read(reply) else { return read_report(reply, criteria) };
    let criteria_scores: Vec<CriterionScore> = criteria
        .iter()
        .map(|c| {
            let given = v["ratings"].get(c.as_str());
            let score = given
                .and_then(|r| r["rating"].as_u64())
                .filter(|n| (1..=5).contains(n))
                .map(|n| n as u8);
            let notes = given
                .and_then(|r| r["notes"].as_str())
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            CriterionScore { criterion: c.clone(), score, notes }
        })
        .collect();
    let average_score = average(&criteria_scores);
    let parse_success = average_score.is_some();
    let mut top_recommendations = json_items(&v["topRecommendations"]);
    top_recommendations.truncate(3);
    ReportReading {
        parse_success,
        average_score,
        key_findings: json_items(&v["keyFindings"]),
        top_recommendations,
        criteria_scores,
        read_from: parse_success.then_some(ReadFrom::Json),
    }
}

/// One row of the consolidated risk matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RiskRow {
    pub domain: String,
    /// Critical, High, Medium or Low: the most severe one the cell names; null when it names
    /// none.
    pub level: Option<String>,
    pub concern: String,
    pub action: String,
    pub sources: Vec<String>,
}

/// The most severe level a text names (`High`, `**CRITICAL**`, `Medium-High` → High).
pub fn level_of(text: &str) -> Option<&'static str> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let found: Vec<String> = re(&RE, r"(?i)\b(critical|high|medium|low)\b")
        .find_iter(text)
        .map(|m| m.as_str().to_lowercase())
        .collect();
    LEVELS.into_iter().find(|l| found.iter().any(|f| f.eq_ignore_ascii_case(l)))
}

/// The risk matrix rows of a section: its tables' body rows, cells found by their column
/// headers (domain, level/severity, concern/risk, action/mitigation, source/role), else by
/// position.
pub fn read_risk_matrix(section: &str) -> Vec<RiskRow> {
    let mut out = Vec::new();
    for t in tables(section) {
        let col = |words: &[&str], default: usize| t.column(words).unwrap_or(default);
        let domain = col(&["domain", "area"], 0);
        let level = col(&["level", "severity", "priority"], 1);
        let concern = col(&["concern", "risk", "issue"], 2);
        let action = col(&["action", "mitigation", "recommend"], 3);
        let sources = col(&["source", "role", "raised"], 4);
        for r in &t.rows {
            let cell = |i: usize| r.get(i).map(|c| unbold(c).to_string()).unwrap_or_default();
            if r.iter().all(|c| c.is_empty()) {
                continue;
            }
            out.push(RiskRow {
                domain: cell(domain),
                level: r.get(level).and_then(|c| level_of(c)).map(str::to_string),
                concern: cell(concern),
                action: cell(action),
                sources: cell(sources)
                    .split([',', ';'])
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect(),
            });
        }
    }
    out
}

/// The first row at the most severe level present.
pub fn top_risk(rows: &[RiskRow]) -> Option<RiskRow> {
    LEVELS.iter().find_map(|l| rows.iter().find(|r| r.level.as_deref() == Some(l))).cloned()
}

/// A synthesis as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisReading {
    /// Each section's text ("" when missing).
    pub sections: Value,
    /// List items (table body rows for divergent findings and the risk matrix).
    pub counts: Value,
    pub risk_matrix: Vec<RiskRow>,
    pub top_risk: Option<RiskRow>,
}

/// Reads a synthesis (its answer part).
pub fn read_synthesis(reply: &str) -> SynthesisReading {
    let text = answer_text(reply);
    let s: Vec<String> =
        sections(&text, &SYNTHESIS_SECTIONS).into_iter().map(Option::unwrap_or_default).collect();
    let risk_matrix = read_risk_matrix(&s[2]);
    let body_rows = |t: &str| tables(t).iter().map(|t| t.rows.len()).sum::<usize>();
    let count = |t: &str| if t.is_empty() { 0 } else { list_items(t).len() };
    SynthesisReading {
        sections: json!({
            "convergentFindings": s[0], "divergentFindings": s[1],
            "consolidatedRiskMatrix": s[2], "unifiedRecommendations": s[3],
            "executiveSummary": s[4],
        }),
        counts: json!({
            "convergentFindings": count(&s[0]), "divergentFindings": body_rows(&s[1]),
            "riskMatrix": risk_matrix.len(), "unifiedRecommendations": count(&s[3]),
        }),
        top_risk: top_risk(&risk_matrix),
        risk_matrix,
    }
}

// ---- prompts -------------------------------------------------------------------------------

/// Opens each specialist's system message (the sim knows a specialist by it).
pub const SPECIALIST_HEAD: &str = "on a panel of specialists";
pub const CRITERIA_LEAD: &str = "The criteria you rate, each from 1 to 5";
pub const SYNTHESIS_HEAD: &str = "You are the SYNTHESIZER of a specialist panel.";
pub const MATERIAL_START: &str = "=== MATERIAL ===";
pub const MATERIAL_END: &str = "=== END MATERIAL ===";
pub const REPORT_START: &str = "=== REPORT:";
pub const REPORT_END: &str = "=== END REPORT ===";

pub fn specialist_system(s: &SpecialistConfig) -> String {
    specialist_system_as(s, None)
}

/// The specialist's system message asking for the four sections, or, given its report's
/// schema, for its JSON (the role, priorities and criteria stated the same).
pub fn specialist_system_as(s: &SpecialistConfig, schema: Option<&ReplySchema>) -> String {
    let priorities: Vec<String> =
        s.priorities.iter().enumerate().map(|(i, p)| format!("{}. {p}", i + 1)).collect();
    let criteria: Vec<String> = s.criteria.iter().map(|c| format!("- {c}")).collect();
    let format = match schema {
        Some(schema) => schema.instruction(),
        None => {
            let rows: Vec<String> =
                s.criteria.iter().map(|c| format!("| {c} | <1-5> | <why> |")).collect();
            format!(
                "Reply in exactly these four sections:\n\n\
                 ### Key Findings\n3 to 8 numbered findings, most important first.\n\n\
                 ### Risk Assessment\nA markdown table with the columns Criterion, Rating (1-5) \
                 and Notes, one row per criterion above, named exactly as written:\n\
                 | Criterion | Rating (1-5) | Notes |\n|---|---|---|\n{rows}\n\n\
                 ### Top 3 Recommendations\nThree numbered recommendations, most important \
                 first.\n\n### Detailed Analysis\n200 to 500 words from your perspective.",
                rows = rows.join("\n"),
            )
        }
    };
    format!(
        "You are the {title} {SPECIALIST_HEAD}. Each specialist analyses the same material \
         through a different expert lens; the others cover their own fields, so stay within \
         yours.\n\nYour expertise: {expertise}.\nYour lens: {lens}\n\nYour priorities, in \
         order:\n{priorities}\n\n{CRITERIA_LEAD} (5 = strong, no concern; 1 = a serious \
         weakness):\n{criteria}\n\n{format}",
        title = s.title,
        expertise = s.expertise_areas.trim_end_matches('.'),
        lens = s.description,
        priorities = priorities.join("\n"),
        criteria = criteria.join("\n"),
    )
}

fn request_line(question: &str, m: &Material) -> String {
    if m.source == "content" {
        format!("The request: {question}\n\n")
    } else {
        String::new()
    }
}

pub fn specialist_user(question: &str, m: &Material) -> String {
    format!(
        "{}Analyse this material from your perspective:\n\n{MATERIAL_START}\n{}\n{MATERIAL_END}",
        request_line(question, m),
        m.text
    )
}

/// A report as the synthesizer gets it.
pub struct ReportIn<'a> {
    pub title: &'a str,
    pub model: &'a str,
    pub report: &'a str,
}

pub fn synthesis_prompt(
    question: &str,
    m: &Material,
    reports: &[ReportIn],
    missing: &[ReportIn],
) -> String {
    let reports: Vec<String> = reports
        .iter()
        .map(|r| {
            format!("{REPORT_START} {} ({}) ===\n{}\n{REPORT_END}", r.title, r.model, r.report)
        })
        .collect();
    let missing = if missing.is_empty() {
        String::new()
    } else {
        let names: Vec<String> =
            missing.iter().map(|r| format!("- {} ({})", r.title, r.model)).collect();
        format!(
            "\n\nThese specialists' reports are missing (their calls failed); do not invent \
             their views, and say which perspectives are not covered:\n{}",
            names.join("\n")
        )
    };
    format!(
        "{SYNTHESIS_HEAD} {n} specialists analysed the same material, each through their own \
         expert role. Their views complement each other: do not rank them or pick a winner; \
         integrate them.\n\n{req}{MATERIAL_START}\n{text}\n{MATERIAL_END}\n\n{reports}{missing}\n\n\
         Reply in exactly these sections:\n\n\
         ### Convergent Findings\nNumbered findings that at least two specialists agree on, \
         naming those specialists.\n\n\
         ### Divergent Findings\nA table with the columns Finding, One View, Other View, \
         Suggested Resolution.\n\n\
         ### Consolidated Risk Matrix\nA table with the columns Domain, Level, Concern, Action, \
         Source Roles; Level is one of Critical, High, Medium, Low; most severe first.\n\n\
         ### Unified Recommendations\nAt most 10 numbered recommendations.\n\n\
         ### Executive Summary\nA short paragraph for a decision maker.",
        n = reports.len(),
        req = request_line(question, m),
        text = m.text,
        reports = reports.join("\n\n"),
    )
}

// ---- the state machine ---------------------------------------------------------------------

/// A finished report, as `specialist_complete` gives it (the stored row: less the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecialistReport {
    pub index: usize,
    pub role_key: String,
    pub role_title: String,
    pub model: String,
    pub report: String,
    pub criteria_scores: Vec<CriterionScore>,
    pub average_score: Option<f64>,
    pub key_findings: Vec<String>,
    pub top_recommendations: Vec<String>,
    pub parse_success: bool,
    /// Where the ratings were read from (the report's JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    pub response_time_ms: i64,
}

/// A specialist whose call failed (or whose reply was empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedSpecialist {
    pub role_key: String,
    pub role_title: String,
    pub model: String,
    pub error: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Reported(Box<SpecialistReport>),
    Failed(FailedSpecialist),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Analysing,
    Synthesizing,
    Done,
}

pub struct SpecialistPanel {
    config: PanelConfig,
    ctx: RunContext,
    material: Material,
    outcomes: Vec<Option<Outcome>>,
    /// Each specialist's report schema (its role's criteria), by specialist.
    schemas: Vec<Arc<ReplySchema>>,
    phase: Phase,
    title: TitleTracker,
    calls: Calls,
}

fn stage_order(stage: &str) -> i32 {
    if stage.starts_with(SPECIALIST_PREFIX) {
        SPECIALIST_ORDER
    } else if stage == SYNTHESIS_KEY {
        SYNTHESIS_ORDER
    } else {
        PANEL_ORDER
    }
}

/// The roles as `panel_start` and the panel row give them.
fn roles_of(specialists: &[SpecialistConfig]) -> Vec<Value> {
    specialists
        .iter()
        .map(|s| {
            json!({ "roleKey": s.role_key, "roleTitle": s.title, "model": s.model,
                         "criteria": s.criteria })
        })
        .collect()
}

impl SpecialistPanel {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: PanelConfig = stored_config("specialist_panel", config)?;
        if !(2..=6).contains(&config.specialists.len()) {
            return Err(
                "the stored specialist_panel configuration has no 2 to 6 specialists".into()
            );
        }
        let material = material(config.content.as_deref(), &ctx.question);
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        let n = config.specialists.len();
        let schemas = config.specialists.iter().map(|s| report_schema(&s.criteria)).collect();
        Ok(SpecialistPanel {
            config,
            ctx,
            material,
            outcomes: vec![None; n],
            schemas,
            phase: Phase::Analysing,
            title,
            calls: Calls::default(),
        })
    }

    fn reports(&self) -> Vec<&SpecialistReport> {
        self.outcomes
            .iter()
            .filter_map(|o| match o {
                Some(Outcome::Reported(r)) => Some(r.as_ref()),
                _ => None,
            })
            .collect()
    }

    fn failures(&self) -> Vec<&FailedSpecialist> {
        self.outcomes
            .iter()
            .filter_map(|o| match o {
                Some(Outcome::Failed(f)) => Some(f),
                _ => None,
            })
            .collect()
    }

    fn on_specialist(&mut self, i: usize, reply: CallReply) -> Vec<Effect> {
        let s = self.config.specialists[i].clone();
        let mut out = Vec::new();
        let outcome = match &reply.result {
            Ok(text) => {
                let report = answer_text(text).trim().to_string();
                let reading = read_report_reply(&report, &s.criteria, &self.schemas[i]);
                let r = SpecialistReport {
                    index: i,
                    role_key: s.role_key.clone(),
                    role_title: s.title.clone(),
                    model: reply.model.clone(),
                    report,
                    criteria_scores: reading.criteria_scores,
                    average_score: reading.average_score,
                    key_findings: reading.key_findings,
                    top_recommendations: reading.top_recommendations,
                    parse_success: reading.parse_success,
                    read_from: reading.read_from,
                    response_time_ms: reply.response_time_ms as i64,
                };
                let mut parsed = json!(r);
                if let Some(o) = parsed.as_object_mut() {
                    o.remove("report");
                }
                out.push(Effect::Store(StageRow {
                    stage_type: format!("{SPECIALIST_PREFIX}{}", s.role_key),
                    stage_order: SPECIALIST_ORDER,
                    model: Some(r.model.clone()),
                    role: Some(s.role_key.clone()),
                    content: r.report.clone(),
                    parsed_data: Some(parsed),
                    response_time_ms: Some(r.response_time_ms),
                }));
                out.push(Effect::emit("specialist_complete", json!({ "data": r })));
                Outcome::Reported(Box::new(r))
            }
            Err(e) => Outcome::Failed(FailedSpecialist {
                role_key: s.role_key.clone(),
                role_title: s.title.clone(),
                model: reply.model.clone(),
                error: e.message.clone(),
            }),
        };
        self.outcomes[i] = Some(outcome);
        if self.outcomes.iter().all(Option::is_some) {
            out.extend(self.all_complete());
        }
        out
    }

    /// Every specialist has answered or failed: the synthesis starts, or the run fails.
    fn all_complete(&mut self) -> Vec<Effect> {
        let reports = self.reports();
        let failures = self.failures();
        let mut out = vec![Effect::emit(
            "all_specialists_complete",
            json!({ "data": { "specialists": reports, "failedSpecialists": failures,
                              "totalSucceeded": reports.len(), "totalFailed": failures.len() } }),
        )];
        let (succeeded, total) = (reports.len(), self.outcomes.len());
        if succeeded < 2 {
            self.phase = Phase::Done;
            out.extend(self.title.fail(format!(
                "Only {succeeded} of {total} specialists reported; a synthesis needs at least 2."
            )));
            return out;
        }
        // A JSON report reads as its fields.
        let texts: Vec<String> = reports.iter().map(|r| readable(&r.report).into_owned()).collect();
        let reports_in: Vec<ReportIn> = reports
            .iter()
            .zip(&texts)
            .map(|(r, text)| ReportIn { title: &r.role_title, model: &r.model, report: text })
            .collect();
        let missing: Vec<ReportIn> = failures
            .iter()
            .map(|f| ReportIn { title: &f.role_title, model: &f.model, report: "" })
            .collect();
        let prompt = synthesis_prompt(&self.ctx.question, &self.material, &reports_in, &missing);
        let material = std::iter::once(("the material".to_string(), self.material.text.clone()))
            .chain(
                reports
                    .iter()
                    .zip(&texts)
                    .map(|(r, text)| (format!("the {}'s report", r.role_title), text.clone())),
            )
            .collect::<Vec<_>>();
        let spec = CallSpec::new(
            SYNTHESIS_KEY,
            &self.config.synthesizer_model,
            vec![ChatMessage::user(prompt)],
            SYNTHESIS_KEY,
            "synthesizer",
            self.config.timeout_ms,
        )
        .quoting(material);
        self.phase = Phase::Synthesizing;
        let backup = self.config.chairman_fallback_model.clone();
        out.push(Effect::emit("synthesis_start", json!({})));
        out.push(self.calls.solo(spec, SYNTHESIS_ORDER, backup.as_deref()));
        out
    }

    fn on_synthesis(&mut self, routed: Routed) -> Vec<Effect> {
        self.phase = Phase::Done;
        let text = match &routed.reply.result {
            Ok(t) => answer_text(t).trim().to_string(),
            Err(e) => return self.title.fail(role_failed("synthesizer", &routed, e)),
        };
        let reply = &routed.reply;
        let reading = read_synthesis(&text);
        let mut data = json!({
            "model": reply.model, "sections": reading.sections, "counts": reading.counts,
            "riskMatrix": reading.risk_matrix, "topRisk": reading.top_risk,
            "responseTimeMs": reply.response_time_ms,
        });
        if let Some(from) = &routed.fallback_from {
            data["fallbackFrom"] = json!(from);
        }
        let row = Effect::Store(StageRow {
            stage_type: SYNTHESIS_KEY.into(),
            stage_order: SYNTHESIS_ORDER,
            model: Some(reply.model.clone()),
            role: Some("synthesizer".into()),
            content: text.clone(),
            parsed_data: Some(data.clone()),
            response_time_ms: Some(reply.response_time_ms as i64),
        });
        data["integratedAssessment"] = json!(text);
        let mut event = json!({ "data": data });
        self.calls.mark(&mut event);
        let mut out = vec![row, Effect::emit("synthesis_complete", event)];
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: text });
        out
    }
}

impl Mode for SpecialistPanel {
    fn start(&mut self) -> Vec<Effect> {
        let roles = roles_of(&self.config.specialists);
        let mut out = vec![
            Effect::emit(
                "panel_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id,
                        "mode": "specialist_panel", "roles": roles }),
            ),
            Effect::Store(StageRow::computed(
                PANEL_STAGE,
                PANEL_ORDER,
                json!({ "material": self.material, "roles": roles,
                        "synthesizerModel": self.config.synthesizer_model }),
            )),
            Effect::emit(
                "specialist_start",
                json!({ "totalSpecialists": self.config.specialists.len() }),
            ),
        ];
        let user = specialist_user(&self.ctx.question, &self.material);
        for (i, s) in self.config.specialists.iter().enumerate() {
            // The system message states the reply's format: the sections, or the report's
            // JSON for a model whose route takes structured output.
            let schema = &self.schemas[i];
            let (text, json) = (specialist_system(s), specialist_system_as(s, Some(schema)));
            let system = self.ctx.structured.pick(&s.model, &text, &json);
            let call = CallSpec::new(
                format!("specialist:{i}"),
                &s.model,
                vec![ChatMessage::system(system.as_str()), ChatMessage::user(user.clone())],
                &format!("{SPECIALIST_PREFIX}{}", s.role_key),
                "specialist",
                self.config.timeout_ms,
            )
            .with_schema(schema)
            .quoting([("the material".to_string(), self.material.text.clone())]);
            out.push(Effect::Call(call));
        }
        let model = self.config.synthesizer_model.clone();
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
        let key = routed.reply.key.clone();
        let index = key.strip_prefix("specialist:").and_then(|n| n.parse::<usize>().ok());
        match (self.phase, index) {
            (Phase::Analysing, Some(i))
                if i < self.outcomes.len() && self.outcomes[i].is_none() =>
            {
                out.extend(self.on_specialist(i, routed.reply));
            }
            (Phase::Synthesizing, None) if key == SYNTHESIS_KEY => {
                out.extend(self.on_synthesis(routed));
            }
            _ => {}
        }
        self.calls.track(&out, stage_order);
        out
    }
}

// ---- the stored result ---------------------------------------------------------------------

/// `{material, roles, specialists, failedSpecialists, synthesis, partial, failedModels}` from
/// the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let panel =
        rows.iter().find(|r| r.stage_type == PANEL_STAGE).and_then(|r| r.parsed_data.as_ref());
    let roles: Vec<Value> = panel.and_then(|p| p["roles"].as_array().cloned()).unwrap_or_default();
    let index_of = |key: &str| roles.iter().position(|r| r["roleKey"] == key);
    let mut specialists: Vec<SpecialistReport> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with(SPECIALIST_PREFIX))
        .filter_map(|r| {
            let mut v = r.parsed_data.clone()?;
            v["report"] = json!(r.content);
            serde_json::from_value(v).ok()
        })
        .collect();
    specialists.sort_by_key(|s| s.index);
    let mut failed: Vec<(usize, FailedSpecialist)> = rows
        .iter()
        .filter(|r| r.stage_type == CALL_FAILED)
        .filter_map(|r| {
            let stage = r.parsed_data.as_ref()?["stage"].as_str()?;
            let key = stage.strip_prefix(SPECIALIST_PREFIX)?;
            let i = index_of(key)?;
            Some((
                i,
                FailedSpecialist {
                    role_key: key.into(),
                    role_title: roles[i]["roleTitle"].as_str().unwrap_or(key).into(),
                    model: r.model.clone().unwrap_or_default(),
                    error: r.content.clone(),
                },
            ))
        })
        .collect();
    failed.sort_by_key(|(i, _)| *i);
    let synthesis = rows.iter().find(|r| r.stage_type == SYNTHESIS_KEY).map(|s| {
        let mut d = s.parsed_data.clone().unwrap_or(json!({}));
        d["integratedAssessment"] = json!(s.content);
        d
    });
    let mut result = json!({
        "material": panel.map(|p| p["material"].clone()),
        "roles": roles,
        "specialists": specialists,
        "failedSpecialists": failed.into_iter().map(|(_, f)| f).collect::<Vec<_>>(),
        "synthesis": synthesis,
    });
    mark_from_rows(&mut result, rows);
    result
}

fn outcome(result: &Value) -> Option<String> {
    let s = result.get("synthesis").filter(|s| !s.is_null())?;
    let n = result["specialists"].as_array().map_or(0, Vec::len);
    let risk = match s.get("topRisk").filter(|t| !t.is_null()) {
        Some(t) => format!(
            "top risk {} ({})",
            t["level"].as_str().unwrap_or("?"),
            short(t["domain"].as_str().unwrap_or(""), 40)
        ),
        None => "no risk level stated".to_string(),
    };
    let summary = s["sections"]["executiveSummary"]
        .as_str()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| s["integratedAssessment"].as_str())
        .unwrap_or("");
    Some(format!("{n} specialists; {risk}: {}", short(summary, 80)))
}

// ---- sim answers ---------------------------------------------------------------------------

/// The criteria a specialist's system message lists.
fn asked_criteria(system: &str) -> Vec<String> {
    let Some((_, rest)) = system.split_once(CRITERIA_LEAD) else { return Vec::new() };
    rest.lines().skip(1).map_while(|l| l.strip_prefix("- ")).map(str::to_string).collect()
}

/// The role title a specialist's system message names.
fn asked_title(system: &str) -> &str {
    system
        .strip_prefix("You are the ")
        .and_then(|r| r.split_once(&format!(" {SPECIALIST_HEAD}")))
        .map_or("Specialist", |(t, _)| t)
}

const SIM_NOTES: [&str; 5] = [
    "a serious gap that needs work before going ahead",
    "weak in places; several open questions",
    "adequate, with the usual caveats",
    "solid, a few details to confirm",
    "strong; nothing of concern found",
];

fn sim_report(ask: &SimAsk, system: &str) -> String {
    let mut rng = SplitMix64::new(ask.seed ^ super::common::seed_from_run_id(system));
    let who = ask.model;
    let title = asked_title(system);
    let criteria = asked_criteria(system);
    let scores: Vec<usize> = criteria.iter().map(|_| 1 + rng.below(5)).collect();
    if ask.malformed {
        return format!(
            "[simulated report from {who} as {title}] Overall the plan looks reasonable from \
             where I sit. A few areas could be stronger, but I would not hold it up; I'd call it \
             decent on most counts."
        );
    }
    let weakest = scores
        .iter()
        .enumerate()
        .min_by_key(|(_, s)| **s)
        .and_then(|(i, _)| criteria.get(i))
        .cloned()
        .unwrap_or_else(|| "the main criterion".into());
    let rows: Vec<String> = criteria
        .iter()
        .zip(&scores)
        .map(|(c, s)| format!("| {c} | {s}/5 | {} |", SIM_NOTES[s - 1]))
        .collect();
    format!(
        "[simulated report from {who} as {title}]\n\n### Key Findings\n\n\
         1. {weakest} is the weakest point from a {title}'s view.\n\
         2. The material states its goal clearly, but not how success is measured.\n\
         3. Two assumptions are left unchecked and should be tested early.\n\n\
         ### Risk Assessment\n\n| Criterion | Rating (1-5) | Notes |\n|---|---|---|\n{}\n\n\
         ### Top 3 Recommendations\n\n1. Address {weakest} before anything else.\n\
         2. Write down the assumptions and test the riskiest one first.\n\
         3. Review the plan again once the first milestone is reached.\n\n\
         ### Detailed Analysis\n\n{}Seen as a {title}, the material is a reasonable start. \
         (This text is simulated: no real model was asked.) The ratings above follow the \
         criteria in order; {weakest} needs the most work.",
        rows.join("\n"),
        ask.hostile_paragraph()
    )
}

fn sim_synthesis(ask: &SimAsk) -> String {
    let mut rng = SplitMix64::new(ask.seed);
    let who = ask.model;
    let titles: Vec<String> = ask
        .prompt
        .lines()
        .filter_map(|l| l.strip_prefix(REPORT_START))
        .filter_map(|l| l.trim().rsplit_once(" ("))
        .map(|(t, _)| t.trim().to_string())
        .collect();
    if ask.malformed {
        return format!(
            "[simulated synthesis from {who}] The specialists broadly agree the plan is workable. \
             Fix the weakest points first, then proceed."
        );
    }
    let a = titles.first().cloned().unwrap_or_else(|| "Specialist A".into());
    let b = titles.get(1).cloned().unwrap_or_else(|| "Specialist B".into());
    let first = ["Critical", "High"][rng.below(2)];
    let domains = ["Security", "Operations", "Cost", "Scalability", "Data"];
    let k = rng.below(domains.len());
    let domain = |i: usize| domains[(k + i) % domains.len()];
    let rows = [
        format!(
            "| {} | {first} | Unchecked assumptions in the plan | Test them before the first milestone | {a}, {b} |",
            domain(0)
        ),
        format!(
            "| {} | Medium | Success is not measured | Define metrics and review them | {a} |",
            domain(1)
        ),
        format!("| {} | Low | Documentation is thin | Write a short runbook | {b} |", domain(2)),
    ];
    format!(
        "[simulated synthesis from {who}]\n\n### Executive Summary\n\n{}The panel finds the \
         material workable with {} fixes first. (This text is simulated: no real model was \
         asked.)\n\n### Convergent Findings\n\n1. Unchecked assumptions are the main risk \
         ({a}, {b}).\n2. Success needs measurable criteria ({a}, {b}).\n\n\
         ### Divergent Findings\n\n| Finding | One View | Other View | Suggested Resolution |\n\
         |---|---|---|---|\n| Pace of the rollout | {a}: slow down | {b}: keep the date | Ship \
         in two stages |\n\n### Consolidated Risk Matrix\n\n| Domain | Level | Concern | Action | \
         Source Roles |\n|---|---|---|---|---|\n{}\n\n### Unified Recommendations\n\n\
         1. Test the riskiest assumption first.\n2. Define success metrics.\n3. Write a runbook.",
        ask.hostile_paragraph(),
        first.to_lowercase(),
        rows.join("\n"),
    )
}

/// The sim specialist's report as JSON that fits `schema`: the same draws as its text report,
/// each criterion the schema names rated once.
fn sim_report_json(ask: &SimAsk, system: &str, schema: &ReplySchema) -> String {
    let mut rng = SplitMix64::new(ask.seed ^ super::common::seed_from_run_id(system));
    let who = ask.model;
    let title = asked_title(system);
    let criteria = schema::keys_of(&schema.schema["properties"]["ratings"]);
    let scores: Vec<usize> = criteria.iter().map(|_| 1 + rng.below(5)).collect();
    let weakest = scores
        .iter()
        .enumerate()
        .min_by_key(|(_, s)| **s)
        .and_then(|(i, _)| criteria.get(i))
        .cloned()
        .unwrap_or_else(|| "the main criterion".into());
    let ratings: serde_json::Map<String, Value> = criteria
        .iter()
        .zip(&scores)
        .map(|(c, s)| (c.clone(), json!({ "rating": s, "notes": SIM_NOTES[s - 1] })))
        .collect();
    let analysis: String = format!(
        "{}Seen as a {title}, the material is a reasonable start. (This text is simulated: no \
         real model was asked.) The ratings follow the criteria in order; {weakest} needs the \
         most work.",
        ask.hostile_paragraph()
    )
    .chars()
    .take(ANALYSIS_CHARS)
    .collect();
    let clip = |t: String| -> String { t.chars().take(ITEM_CHARS).collect() };
    json!({
        "reasoning": format!("[simulated report from {who} as {title}] Each criterion was weighed in turn.")
            .chars().take(schema::REASONING_MAX_CHARS).collect::<String>(),
        "keyFindings": [
            clip(format!("{weakest} is the weakest point from a {title}'s view.")),
            "The material states its goal clearly, but not how success is measured.",
            "Two assumptions are left unchecked and should be tested early.",
        ],
        "ratings": ratings,
        "topRecommendations": [
            clip(format!("Address {weakest} before anything else.")),
            "Write down the assumptions and test the riskiest one first.",
            "Review the plan again once the first milestone is reached.",
        ],
        "detailedAnalysis": analysis,
    })
    .to_string()
}

fn sim_answer(ask: &SimAsk) -> Option<String> {
    // Asked for a schema: this mode's report in JSON; another mode's is not ours to answer.
    match ask.schema {
        Some(s) if s.name == REPORT_SCHEMA => {
            let system = ask.messages.iter().find(|m| m.role == "system")?;
            if !system.content.contains(SPECIALIST_HEAD) {
                return None;
            }
            return Some(sim_report_json(ask, &system.content, s));
        }
        Some(_) => return None,
        None => {}
    }
    if ask.prompt.starts_with(SYNTHESIS_HEAD) {
        return Some(sim_synthesis(ask));
    }
    let system = ask.messages.iter().find(|m| m.role == "system")?;
    if !system.content.contains(SPECIALIST_HEAD) || !ask.prompt.contains(MATERIAL_START) {
        return None;
    }
    Some(sim_report(ask, &system.content))
}

#[cfg(test)]
#[path = "specialist_panel_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// A rating or an average as a reader reads it: `4`, `3.3`.
fn figure(v: &Value) -> Option<String> {
    let f = v.as_f64()?;
    Some(if f.fract() == 0.0 { format!("{f:.0}") } else { format!("{f:.1}") })
}

/// The result as the export's report: the top risk, the specialists' ratings as a table
/// (specialist × criterion, a rating not read said to be unread), each one's average, the
/// specialists who did not report, the synthesis's risk matrix as a table and what else it
/// holds.
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
    let mut out = String::new();
    let s = &result["synthesis"];
    if let Some(t) = s.get("topRisk").filter(|t| t.is_object()) {
        let level = t["level"].as_str().map_or("not stated".into(), str::to_lowercase);
        let mut line = format!("**Top risk:** {level}");
        for part in [&t["domain"], &t["concern"]] {
            if let Some(p) = part.as_str().filter(|p| !p.trim().is_empty()) {
                line.push_str(&format!(", {}", p.trim()));
            }
        }
        out.push_str(&format!("{line}.\n\n"));
    }
    let specialists = result["specialists"].as_array().cloned().unwrap_or_default();
    let name = |sp: &Value| {
        let title = sp["roleTitle"].as_str().unwrap_or("A specialist");
        match sp["model"].as_str() {
            Some(m) => format!("{title} ({m})"),
            None => title.to_string(),
        }
    };
    let rows: Vec<Vec<String>> = specialists
        .iter()
        .flat_map(|sp| {
            let who = name(sp);
            sp["criteriaScores"].as_array().cloned().unwrap_or_default().into_iter().map(move |c| {
                vec![
                    who.clone(),
                    c["criterion"].as_str().unwrap_or("").to_string(),
                    figure(&c["score"]).unwrap_or_else(|| "unread".into()),
                    c["notes"].as_str().unwrap_or("").to_string(),
                ]
            })
        })
        .collect();
    if !rows.is_empty() {
        out.push_str("**The specialists' ratings** (1 to 5):\n\n");
        out.push_str(&table(&["specialist", "criterion", "rating", "notes"], &rows, &[2]));
        out.push('\n');
    }
    if !specialists.is_empty() {
        out.push_str("**Average ratings:**\n\n");
        for sp in &specialists {
            let scores = sp["criteriaScores"].as_array().cloned().unwrap_or_default();
            let read = scores.iter().filter(|c| c["score"].is_number()).count() as u64;
            let line = match figure(&sp["averageScore"]) {
                Some(a) if read < scores.len() as u64 => format!(
                    "{a} of 5, over the {} read ({} unread)",
                    count(read, "rating", "ratings"),
                    scores.len() as u64 - read
                ),
                Some(a) => format!("{a} of 5"),
                None => "no rating could be read from the report".into(),
            };
            out.push_str(&format!("- {}: {line}\n", name(sp)));
        }
        out.push('\n');
    }
    let failed = result["failedSpecialists"].as_array().cloned().unwrap_or_default();
    if !failed.is_empty() {
        out.push_str("**Did not report:**\n\n");
        for f in &failed {
            let why = f["error"].as_str().map_or(String::new(), |e| format!(" ({e})"));
            out.push_str(&format!("- {}: the call failed{why}\n", name(f)));
        }
        out.push('\n');
    }
    let matrix = s["riskMatrix"].as_array().cloned().unwrap_or_default();
    if !matrix.is_empty() {
        let rows: Vec<Vec<String>> = matrix
            .iter()
            .map(|r| {
                let sources: Vec<&str> = r["sources"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                vec![
                    r["domain"].as_str().unwrap_or("").to_string(),
                    r["level"].as_str().map_or("not stated".into(), str::to_lowercase),
                    r["concern"].as_str().unwrap_or("").to_string(),
                    r["action"].as_str().unwrap_or("").to_string(),
                    sources.join(", "),
                ]
            })
            .collect();
        out.push_str("**Risk matrix:**\n\n");
        out.push_str(&table(&["area", "level", "concern", "action", "raised by"], &rows, &[]));
        out.push('\n');
    } else if s.is_object() {
        out.push_str("**Risk matrix:** none could be read from the synthesis.\n\n");
    }
    if s.is_object() {
        let c = &s["counts"];
        let n = |k: &str, one: &str, many: &str| count(c[k].as_u64().unwrap_or(0), one, many);
        let by = match (s["model"].as_str(), s["fallbackFrom"].as_str()) {
            (Some(m), Some(f)) => format!(" by {m} (in place of {f})"),
            (Some(m), None) => format!(" by {m}"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "**Synthesis**{by}: {}, {} and {}.\n",
            n("convergentFindings", "convergent finding", "convergent findings"),
            n("divergentFindings", "divergent finding", "divergent findings"),
            n("unifiedRecommendations", "recommendation", "recommendations"),
        ));
    }
    out
}
