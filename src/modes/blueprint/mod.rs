//! Blueprint mode (specs/09-blueprint.md): the architect outlines a long-form document (a
//! title and 6-12 sections, each with a description, key topics, a target length and the part
//! of the material it draws on); every section is then written at once, section i by author
//! `i mod n`, each author seeing the whole outline but writing only its own; the assembler
//! turns the sections into one document, with `[TODO: …]` where something is missing.
//!
//! The outline, each section and the assembly are stored the moment they complete, so a
//! cancelled or interrupted run keeps (and a resumed one replays) every finished step. The
//! outline is read only where it states its fields: a section's missing description or source
//! coverage is `null`, a length it does not name is Medium with `lengthDefaulted`, a missing
//! title is "Untitled Document" with `documentTitleDefaulted`; nothing is guessed. An
//! architect whose route takes structured output is asked for the outline as JSON
//! (`blueprint_outline`), read from it when it fits the schema and else from its text; the
//! outline's data says which (`readFrom`).

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

use super::common::{word_count, Assembled, Fallback, CALL_FAILED};
use super::prelude::*;
use super::reading::{between, unbold};
use std::collections::HashSet;

/// The row of the document type and the material, stored at the start (content: the material).
const SETUP: &str = "blueprint_setup";
pub const MAX_SECTIONS: usize = 20;
/// Fewer sections than this and the run fails (the outline is kept).
pub const MIN_SECTIONS: usize = 3;
/// Above this many characters of sections together, each goes to the assembler condensed.
pub const CONDENSE_ABOVE_CHARS: usize = 400_000;
/// A condensed section: its first this many words (and its key topics).
pub const CONDENSED_WORDS: usize = 200;
pub const MAX_AUTHORS: usize = 6;

/// The kind of document to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DocumentType {
    #[default]
    ArchitectureBlueprint,
    TechnicalDesignDocument,
    ImplementationRoadmap,
    CostAnalysisReport,
    SecurityAssessment,
    Custom,
}

impl DocumentType {
    pub fn label(self) -> &'static str {
        self.info().0
    }

    /// What the architect and the authors are told a document of this type covers.
    pub fn guidance(self) -> &'static str {
        self.info().1
    }

    fn info(self) -> (&'static str, &'static str) {
        match self {
            DocumentType::ArchitectureBlueprint => (
                "Architecture Blueprint",
                "the system's context and goals, its components and their responsibilities, data flows, interfaces, deployment, quality attributes (scalability, reliability, security) and the decisions taken with their trade-offs",
            ),
            DocumentType::TechnicalDesignDocument => (
                "Technical Design Document",
                "the problem and requirements, the proposed design in detail, data models and APIs, alternatives considered, testing, rollout and open questions",
            ),
            DocumentType::ImplementationRoadmap => (
                "Implementation Roadmap",
                "phases and milestones, their deliverables and dependencies, the team and resources, timelines, risks and how progress is measured",
            ),
            DocumentType::CostAnalysisReport => (
                "Cost Analysis Report",
                "the cost drivers, one-off and running costs, the options compared, the return on investment, the total cost of ownership and the assumptions behind every figure",
            ),
            DocumentType::SecurityAssessment => (
                "Security Assessment",
                "the scope and assets, the threat model, the findings with their severity, the controls in place, the recommendations and the residual risk",
            ),
            DocumentType::Custom => (
                "Custom Document",
                "whatever the material calls for, organised so that a reader new to the subject can follow it",
            ),
        }
    }
}

/// Blueprint's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BlueprintRequest {
    /// The source material the document is written from (notes, a specification, a
    /// transcript). Without it the question itself is the material.
    pub content: Option<Text<MAX_CONTENT_CHARS>>,
    /// The kind of document: it decides what the outline covers.
    #[serde(default)]
    #[schemars(extend("x-enum-labels" = {
        "architecture_blueprint": "Architecture blueprint",
        "technical_design_document": "Technical design document",
        "implementation_roadmap": "Implementation roadmap",
        "cost_analysis_report": "Cost analysis report",
        "security_assessment": "Security assessment",
        "custom": "Other (generic guidance)"
    }))]
    pub document_type: DocumentType,
    /// Outlines the document: its title and 6-12 sections.
    pub architect_model: Option<ModelId>,
    /// Write the sections, all at once: section 1 goes to the first, section 2 to the second…
    /// and round again (1 to 6; a model listed twice takes two turns).
    #[schemars(length(min = 1, max = 6), extend("x-too-few" = "at least one author model is required", "x-too-many" = "at most 6 author models are allowed"))]
    pub author_models: Option<Vec<ModelId>>,
    /// Assembles the sections into one document (default: the architect).
    pub assembler_model: Option<ModelId>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 600000))]
    pub timeout_ms: Option<i64>,
}

/// The stored configuration of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BlueprintConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub document_type: DocumentType,
    pub architect_model: String,
    pub author_models: Vec<String>,
    pub assembler_model: String,
    pub timeout_ms: u64,
    /// The server's backup for the architect (`[fallback] facilitator`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facilitator_fallback_model: Option<String>,
    /// The server's backup for the assembler (`[fallback] chairman`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let (asked, cfg): (_, BlueprintRequest) = request::start(body, "Question is required", false)?;
    let content = request::opt_text(cfg.content.as_ref(), "modeConfig.content")?;
    let architect_model = SPEC.model_of(cfg.architect_model.as_ref(), "architect", defaults)?;
    let author_models = SPEC.panel_of(cfg.author_models.as_deref(), "author", defaults)?;
    let assembler_model = SPEC
        .named(cfg.assembler_model.as_ref(), "assembler")?
        .unwrap_or_else(|| architect_model.clone());
    let timeout_ms = request::given(cfg.timeout_ms, 300_000);
    let models = request::distinct(&[&author_models], &[&architect_model, &assembler_model]);
    let config = BlueprintConfig {
        content,
        document_type: cfg.document_type,
        facilitator_fallback_model: defaults.backup(SPEC.id, "architect", &architect_model),
        chairman_fallback_model: defaults.backup(SPEC.id, "assembler", &assembler_model),
        architect_model,
        author_models,
        assembler_model,
        timeout_ms,
    };
    Ok(asked.valid(SPEC.kind(), &config, models))
}

/// Blueprint in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "blueprint",
    label: "Blueprint",
    description: "An architect outlines a long document in 6-12 sections, authors write the sections in parallel, and an assembler turns them into one coherent document.",
    multi_turn: false,
    question: Question { label: "What document to write", required: Some("Question is required") },
    roles: &[
        Role::panel("author", "Authors (one section each, in turn)", "authorModels"),
        // The assembler, which writes the result, comes before the architect: `conclave run`'s
        // `--chairman` names the first single-model role with a backup.
        Role::model("assembler", "Assembler (default: the architect)", "assemblerModel").backed_by("chairman"),
        Role::model("architect", "Architect (the outline)", "architectModel").backed_by("facilitator"),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<BlueprintRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Blueprint::new(config, ctx)?)),
    load_result,
    outcome,
    // No models and no settings but the material: `GET /api/models` reads the defaults off it.
    stages: &[("outline", "the outline"), ("expansion", "writing the sections"), ("section", "a section written"), ("all_sections", "every section written"), ("assembly", "assembling the document")],
    report: Some(report),
    example: || {
        json!({ "mode": "blueprint", "question": "Design doc for our collaborative editor",
                "modeConfig": { "content": "A web editor where several people edit one document at once. Needs offline edits, presence cursors, comments and a history of versions. Team of four, six months." } })
    },
    sim: Some(sim_answer),
    result_schema: schema_of::<BlueprintResult>,
};
