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

use super::common::CALL_FAILED;
use super::prelude::*;
use super::reading::Unparsed;
use super::request::MAX_SHORT_CHARS;

const DEFAULT_ROLES: [RoleId; 3] =
    [RoleId::SecurityExpert, RoleId::ScalabilityArchitect, RoleId::CostAnalyst];
/// The longest material (`modeConfig.content`), in characters.
pub const MAX_MATERIAL_CHARS: usize = 100_000;
const DEFAULT_TIMEOUT_MS: u64 = 150_000;
const MAX_EXPERTISE: usize = 1_000;
const MAX_DESCRIPTION: usize = 4_000;
const MAX_PRIORITY: usize = 500;
const MAX_CRITERION: usize = 100;

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
    #[schemars(length(min = 3, max = 6), extend("x-too-few" = "must have 3 to 6 items", "x-too-many" = "must have 3 to 6 items"))]
    pub priorities: Option<Vec<Text<MAX_PRIORITY>>>,
    /// What it rates 1-5: 3 to 8 distinct criteria (each at least 3 characters, on one line,
    /// without `|`).
    #[schemars(length(min = 3, max = 8), extend("x-too-few" = "must have 3 to 8 items", "x-too-many" = "must have 3 to 8 items"))]
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
    #[schemars(length(min = 2, max = 6), extend("x-too-few" = "A panel has 2 to 6 specialists", "x-too-many" = "A panel has 2 to 6 specialists"))]
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

/// A list of a custom role (its size the schema holds): each item trimmed, at least 3 characters, distinct
/// (ignoring case and spacing); `one_line`: no line breaks and no `|` (a criterion is a
/// table cell in the reply).
fn text_list<const N: usize>(
    value: Option<&Vec<Text<N>>>,
    field: &str,
    one_line: bool,
) -> Result<Vec<String>, FieldError> {
    let list = value.ok_or_else(|| FieldError::new(field, "is required"))?;
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
    let priorities = text_list(c.priorities.as_ref(), &f("priorities"), false)?;
    let criteria = text_list(c.criteria.as_ref(), &f("criteria"), true)?;
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

fn default_panel(defaults: &Defaults) -> Vec<SpecialistConfig> {
    let models = defaults.models(SPEC.id, "specialist");
    DEFAULT_ROLES
        .iter()
        .zip(models)
        .filter_map(|(id, m)| id.library().map(|r| library_role(r, m)))
        .collect()
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, SpecialistPanelRequest) =
        request::start(body, "Question is required", false)?;
    let content = request::opt_text(cfg.content.as_ref(), "modeConfig.content")?;
    let specialists = match &cfg.specialists {
        None => default_panel(defaults),
        Some(list) => {
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
    let synthesizer_model = SPEC
        .named(cfg.synthesizer_model.as_ref(), "synthesizer")?
        .unwrap_or_else(|| specialists[0].model.clone());
    let timeout_ms = request::given(cfg.timeout_ms, DEFAULT_TIMEOUT_MS);
    let models: Vec<String> = specialists.iter().map(|s| s.model.clone()).collect();
    let chairman_fallback_model = defaults.backup(SPEC.id, "synthesizer", &synthesizer_model);
    let models = request::distinct(&[&models], &[&synthesizer_model]);
    let config = PanelConfig {
        content,
        specialists,
        synthesizer_model,
        timeout_ms,
        chairman_fallback_model,
    };
    Ok(asked.valid(SPEC.kind(), &config, models))
}

/// Specialist Panel in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "specialist_panel",
    label: "Specialist Panel",
    description: "2-6 models each analyse the material as a different expert (security, cost, scalability…) with 1-5 ratings on the role's criteria; one synthesis integrates their views.",
    multi_turn: false,
    question: Question { label: "What to assess", required: Some("Question is required") },
    roles: &[
        Role::internal("specialist", "Specialists").several(),
        Role::model("synthesizer", "Synthesizer (default: the first specialist's model)", "synthesizerModel").backed_by("chairman"),
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
    result_schema: schema_of::<SpecialistPanelResult>,
};

// ---- the material --------------------------------------------------------------------------

/// What the panel analyses: `content`, else the question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Material {
    /// `content` or `question`.
    pub source: String,
    /// Its text.
    pub text: String,
    /// Its length in characters.
    pub length: usize,
}

pub fn material(content: Option<&str>, question: &str) -> Material {
    let (source, text) = match content {
        Some(c) => ("content", c),
        None => ("question", question),
    };
    Material { source: source.into(), text: text.into(), length: text.chars().count() }
}
