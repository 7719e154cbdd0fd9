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

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    empty_is_failure, mark_from_rows, role_failed, title_prompt, word_count, Answered, Calls,
    Routed, SplitMix64, TitleTracker, CALL_FAILED, TITLE_KEY,
};
use super::reading::answer_text;
use super::reading::{bare, between, re, unbold};
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::{ModelId, Text, MAX_CONTENT_CHARS};
use super::schema::{self, Asking, ReadFrom, ReplySchema};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, FieldError, Mode,
    RunContext, StageRow, ValidRequest,
};

/// Council's default models: the architect and assembler are the first, the authors all three.
const SIM_DEFAULTS: [&str; 3] = ["sim/alpha", "sim/beta", "sim/gamma"];
const SEED_DEFAULTS: [&str; 3] =
    ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];
const OUTLINE_ORDER: i32 = 0;
/// The row of the document type and the material, stored at the start (content: the material).
const SETUP: &str = "blueprint_setup";
/// After section 20, the most a run writes.
const ASSEMBLY_ORDER: i32 = 99;
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
    /// architecture_blueprint (default), technical_design_document, implementation_roadmap,
    /// cost_analysis_report, security_assessment or custom (generic guidance).
    #[schemars(with = "DocumentType")]
    pub document_type: Option<DocumentType>,
    /// Outlines the document: its title and 6-12 sections.
    pub architect_model: Option<ModelId>,
    /// Write the sections, all at once: section 1 goes to the first, section 2 to the second…
    /// and round again (1 to 6; a model listed twice takes two turns).
    #[schemars(length(min = 1, max = 6))]
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
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: BlueprintRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let content = match &cfg.content {
        None => None,
        Some(c) => Some(
            c.trimmed()
                .ok_or_else(|| FieldError::new("modeConfig.content", "must not be empty"))?,
        ),
    };
    let panel = if defaults.offline { SIM_DEFAULTS } else { SEED_DEFAULTS };
    let architect_model =
        request::model(cfg.architect_model.as_ref(), "modeConfig.architectModel")?
            .unwrap_or_else(|| panel[0].to_string());
    let author_models = request::models(
        cfg.author_models.as_deref(),
        "modeConfig.authorModels",
        1..=MAX_AUTHORS,
        Some("at least one author model is required"),
        Some("at most 6 author models are allowed"),
    )?
    .unwrap_or_else(|| request::ids(&panel));
    let assembler_model =
        request::model(cfg.assembler_model.as_ref(), "modeConfig.assemblerModel")?
            .unwrap_or_else(|| architect_model.clone());
    let timeout_ms =
        request::timeout(cfg.timeout_ms, "modeConfig.timeoutMs", 10_000..=600_000, 300_000)?;
    let models = request::distinct(&[&author_models], &[&architect_model, &assembler_model]);
    let config = BlueprintConfig {
        content,
        document_type: cfg.document_type.unwrap_or_default(),
        facilitator_fallback_model: Fallbacks::for_role(
            &defaults.fallback.facilitator,
            &architect_model,
        ),
        chairman_fallback_model: Fallbacks::for_role(&defaults.fallback.chairman, &assembler_model),
        architect_model,
        author_models,
        assembler_model,
        timeout_ms,
    };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models,
    })
}

/// Blueprint in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "blueprint",
    label: "Blueprint",
    description: "An architect outlines a long document in 6-12 sections, authors write the sections in parallel, and an assembler turns them into one coherent document.",
    multi_turn: false,
    question: Question { label: "What document to write", required: Some("Question is required") },
    roles: &[
        Role {
            id: "author",
            label: "Authors (one section each, in turn)",
            field: Some("authorModels"),
            panel: true,
            fallback: None,
            sim_default: &SIM_DEFAULTS,
            default: &SEED_DEFAULTS,
        },
        // The assembler, which writes the result, comes before the architect: `conclave run`'s
        // `--chairman` names the first single-model role with a backup.
        Role {
            id: "assembler",
            label: "Assembler (default: the architect)",
            field: Some("assemblerModel"),
            panel: false,
            fallback: Some("chairman"),
            sim_default: &[],
            default: &[],
        },
        Role {
            id: "architect",
            label: "Architect (the outline)",
            field: Some("architectModel"),
            panel: false,
            fallback: Some("facilitator"),
            sim_default: &[SIM_DEFAULTS[0]],
            default: &[SEED_DEFAULTS[0]],
        },
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
};

// ---- reading the outline -------------------------------------------------------------------

/// A section's target length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Length {
    Short,
    Medium,
    Long,
}

impl Length {
    /// The target in words, as the prompts state it.
    pub fn words(self) -> &'static str {
        match self {
            Length::Short => "200-500",
            Length::Medium => "500-1000",
            Length::Long => "1000-2000",
        }
    }

    /// The one length a value names; None when it names none, or more than one.
    pub fn named_in(value: &str) -> Option<Length> {
        static RE: OnceLock<Regex> = OnceLock::new();
        let named: HashSet<String> = re(&RE, r"(?i)\b(short|medium|long)\b")
            .find_iter(value)
            .map(|m| m.as_str().to_lowercase())
            .collect();
        if named.len() != 1 {
            return None;
        }
        match named.iter().next().map(String::as_str) {
            Some("short") => Some(Length::Short),
            Some("medium") => Some(Length::Medium),
            Some("long") => Some(Length::Long),
            _ => None,
        }
    }
}

/// One section of the outline, renumbered 1..n in order of appearance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Section {
    pub number: usize,
    /// The number the architect gave it.
    pub reported_number: u64,
    /// The heading's title; `Section <n>` when the heading gave none (`titleDefaulted`).
    pub title: String,
    pub title_defaulted: bool,
    pub description: Option<String>,
    pub key_topics: Vec<String>,
    pub length: Length,
    /// The outline named no single length: Medium was used.
    pub length_defaulted: bool,
    pub source_coverage: Option<String>,
    /// Filled in when the sections are assigned.
    pub assigned_model: String,
}

/// An outline as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutlineReading {
    pub document_title: String,
    pub document_title_defaulted: bool,
    pub sections: Vec<Section>,
    /// How many section headings there were, when more than [`MAX_SECTIONS`].
    pub truncated_from: Option<usize>,
    /// `Total sections:` as stated.
    pub total_sections_stated: Option<u64>,
    /// `Estimated total length:` as stated.
    pub estimated_length: Option<String>,
    pub key_themes: Vec<String>,
}

/// A value as stated: [`clean`], and empty when it is only a placeholder of the requested
/// format echoed back (`<title>`, `<section title>`), which states nothing.
fn stated(value: &str) -> String {
    let v = unbold(value);
    let placeholder = v.starts_with('<')
        && v.ends_with('>')
        && v.matches('<').count() == 1
        && v.matches('>').count() == 1;
    if placeholder {
        String::new()
    } else {
        v
    }
}

/// `SECTION <n>` followed by `:`, `.` or a dash: the number and the rest of the line.
fn section_heading(line: &str) -> Option<(u64, String)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(&RE, r"(?i)^section\s+#?\s*(\d{1,6})\s*(?:\*\*|__)?\s*[:.\-–—]\s*(.*)$")
        .captures(line)?;
    Some((c[1].parse().ok()?, stated(&c[2])))
}

/// `Label:` at the start of a bare line (bold allowed around the label): its name in lower
/// case, single-spaced, and the value after it.
fn labelled<'a>(line: &'a str, labels: &Regex) -> Option<(String, &'a str)> {
    let c = labels.captures(line)?;
    let name = c.get(1)?.as_str().split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    Some((name, &line[c.get(0)?.end()..]))
}

fn section_field(line: &str) -> Option<(String, &str)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    labelled(
        line,
        re(
            &RE,
            r"(?i)^(description|key\s+topics|length|source\s+coverage)\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?",
        ),
    )
}

fn summary_field(line: &str) -> Option<(String, &str)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    labelled(
        line,
        re(
            &RE,
            r"(?i)^(total\s+sections|estimated\s+total\s+length|key\s+themes)\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?",
        ),
    )
}

fn title_line(line: &str) -> Option<&str> {
    static RE: OnceLock<Regex> = OnceLock::new();
    labelled(line, re(&RE, r"(?i)^(document\s+title)\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?"))
        .map(|(_, v)| v)
}

fn is_summary_marker(line: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(&RE, r"(?i)^document\s+summary\s*(?:\*\*|__)?\s*:").is_match(line)
}

/// A list line (`- x`, `* x`, `• x`, `1. x`, `2) x`): its item.
fn list_item(raw: &str) -> Option<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(&RE, r"^\s*(?:[-*+•·]|\d{1,3}[.)])\s+(.*)$").captures(raw)?;
    // Bold inside an item (`**Sync**: how edits merge`) is markup, not part of the topic.
    Some(stated(&c[1].replace("**", "").replace("__", "")))
}

/// Items of a comma- or semicolon-separated value, trimmed, empty ones left out.
fn split_list(value: &str, separators: &[char]) -> Vec<String> {
    value
        .split(separators)
        .map(|t| stated(t).trim_end_matches('.').trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

#[derive(Default)]
struct Block {
    number: u64,
    title: String,
    description: Option<String>,
    /// The comma-separated rest of the `Key Topics:` line.
    topics: Option<Vec<String>>,
    /// The list lines after it: when there are any, they are the key topics.
    topic_list: Vec<String>,
    length: Option<String>,
    coverage: Option<String>,
}

/// Reads an outline (its answer part: a reasoning trace is never read).
pub fn read_outline(reply: &str) -> OutlineReading {
    let text = answer_text(reply);
    let mut title: Option<String> = None;
    let mut blocks: Vec<Block> = Vec::new();
    let mut open = false;
    // Past `DOCUMENT SUMMARY:`, a `SECTION <n>:` line lists a section already given.
    let mut summary_seen = false;
    // Reading the list of key topics after a `Key Topics:` line of the last block.
    let mut in_topics = false;
    // The multi-line field of the last block whose label line had no value.
    let mut spanning: Option<&'static str> = None;
    let (mut total, mut estimated, mut themes) = (None, None, None);
    for raw in text.lines() {
        let line = bare(raw);
        if title.is_none() {
            if let Some(t) = title_line(line) {
                title = Some(stated(t));
                continue;
            }
        }
        if let Some((name, value)) = summary_field(line) {
            // Summary fields: their last line wins, wherever it stands.
            let v = unbold(value);
            match name.as_str() {
                "total sections" => total = Some(v),
                "estimated total length" => estimated = Some(v),
                _ => themes = Some(v),
            }
            (in_topics, spanning) = (false, None);
            continue;
        }
        if let Some((number, title)) = section_heading(line).filter(|_| !summary_seen) {
            blocks.push(Block { number, title, ..Block::default() });
            (open, in_topics, spanning) = (true, false, None);
            continue;
        }
        if is_summary_marker(line) {
            summary_seen = true;
            (open, in_topics, spanning) = (false, false, None);
            continue;
        }
        let Some(b) = blocks.last_mut().filter(|_| open) else { continue };
        if let Some((name, value)) = section_field(line) {
            let value = stated(value);
            (in_topics, spanning) = (false, None);
            match name.as_str() {
                "description" if b.description.is_none() => {
                    if value.is_empty() {
                        spanning = Some("description");
                    }
                    b.description = Some(value);
                }
                "source coverage" if b.coverage.is_none() => {
                    if value.is_empty() {
                        spanning = Some("coverage");
                    }
                    b.coverage = Some(value);
                }
                "length" if b.length.is_none() => b.length = Some(value),
                "key topics" if b.topics.is_none() => {
                    in_topics = true;
                    b.topics = Some(split_list(&value, &[',', ';']));
                }
                // A second `Key Topics:` line ends the list of the first.
                _ => {}
            }
            continue;
        }
        if raw.trim().is_empty() {
            spanning = None;
            continue;
        }
        if in_topics {
            if let Some(item) = list_item(raw) {
                if !item.is_empty() {
                    b.topic_list.push(item);
                }
                continue;
            }
            in_topics = false;
        }
        let slot = match spanning {
            Some("description") => b.description.as_mut(),
            Some("coverage") => b.coverage.as_mut(),
            _ => None,
        };
        if let Some(v) = slot {
            if !v.is_empty() {
                v.push(' ');
            }
            v.push_str(&stated(raw));
        }
    }
    finish_outline(title, blocks, total, estimated, themes)
}

fn finish_outline(
    title: Option<String>,
    blocks: Vec<Block>,
    total: Option<String>,
    estimated: Option<String>,
    themes: Option<String>,
) -> OutlineReading {
    let found = blocks.len();
    let sections: Vec<Section> = blocks
        .into_iter()
        .take(MAX_SECTIONS)
        .enumerate()
        .map(|(i, b)| {
            let length = b.length.as_deref().and_then(Length::named_in);
            let nonempty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
            Section {
                number: i + 1,
                reported_number: b.number,
                title_defaulted: b.title.is_empty(),
                title: if b.title.is_empty() { format!("Section {}", i + 1) } else { b.title },
                description: nonempty(b.description),
                key_topics: if b.topic_list.is_empty() {
                    b.topics.unwrap_or_default()
                } else {
                    b.topic_list
                },
                length: length.unwrap_or(Length::Medium),
                length_defaulted: length.is_none(),
                source_coverage: nonempty(b.coverage),
                assigned_model: String::new(),
            }
        })
        .collect();
    static NUM: OnceLock<Regex> = OnceLock::new();
    let total_sections_stated = total
        .as_deref()
        .and_then(|t| re(&NUM, r"^\D{0,20}?(\d{1,6})\b").captures(t))
        .and_then(|c| c[1].parse().ok());
    let title = title.filter(|t| !t.is_empty());
    OutlineReading {
        document_title_defaulted: title.is_none(),
        document_title: title.unwrap_or_else(|| "Untitled Document".into()),
        sections,
        truncated_from: (found > MAX_SECTIONS).then_some(found),
        total_sections_stated,
        estimated_length: estimated.filter(|e| !e.is_empty()),
        key_themes: themes.map(|t| split_list(&t, &[',', ';'])).unwrap_or_default(),
    }
}

/// What a person should know about an outline as read.
pub fn outline_warnings(o: &OutlineReading) -> Vec<String> {
    let n = o.sections.len();
    let mut w = Vec::new();
    if let Some(from) = o.truncated_from {
        w.push(format!(
            "The outline had {from} sections; only the first {MAX_SECTIONS} are written."
        ));
    } else if n > 12 {
        w.push(format!("The outline has {n} sections, more than the 6-12 asked for."));
    }
    if (MIN_SECTIONS..6).contains(&n) {
        w.push(format!("The outline has only {n} sections, fewer than the 6-12 asked for."));
    }
    if let Some(stated) = o.total_sections_stated {
        let found = o.truncated_from.unwrap_or(n);
        if stated as usize != found {
            w.push(format!("The outline says {stated} sections but lists {found}."));
        }
    }
    if o.document_title_defaulted {
        w.push("The outline states no document title.".into());
    }
    let defaulted: Vec<String> =
        o.sections.iter().filter(|s| s.length_defaulted).map(|s| s.number.to_string()).collect();
    if !defaulted.is_empty() {
        w.push(format!(
            "No single length was stated for section {}: Medium is used.",
            defaulted.join(", ")
        ));
    }
    w
}

// ---- structured replies --------------------------------------------------------------------
//
// An architect whose route takes structured output is asked for `blueprint_outline` instead
// of the text format: its reasoning first, then the document's title, 3 to 20 sections (the
// prompt asks for 6 to 12; the reader goes on from 3 and keeps 20, so the schema takes what the
// reader takes), each with its title, description, key topics, one of the three lengths and
// its source coverage, then the summary's estimated length and key themes. The outline is read
// from its JSON when that fits the schema, held to the text's rules (an echoed placeholder
// states nothing, an empty description or coverage is `null`, a missing title is defaulted,
// sections numbered 1..n in order); else by the text reader. Sections are text a person reads
// and carry no schema.

/// The outline's schema name (the sim answers it by this name).
pub const OUTLINE_SCHEMA: &str = "blueprint_outline";
/// The longest document or section title.
pub const TITLE_MAX_CHARS: usize = 200;
/// The longest section description.
pub const DESCRIPTION_MAX_CHARS: usize = 600;
/// The most key topics a section lists, and the longest one.
pub const MAX_TOPICS: usize = 10;
pub const TOPIC_MAX_CHARS: usize = 120;
/// The longest source coverage.
pub const COVERAGE_MAX_CHARS: usize = 300;
/// The longest estimated total length.
pub const ESTIMATE_MAX_CHARS: usize = 100;
/// The most key themes, and the longest one.
pub const MAX_THEMES: usize = 8;
pub const THEME_MAX_CHARS: usize = 80;
/// The lengths a section may take, as the JSON names them.
pub const LENGTHS: [&str; 3] = ["Short", "Medium", "Long"];

/// The architect's outline as JSON: the reasoning, the title, the sections, the summary.
pub fn outline_schema() -> Arc<ReplySchema> {
    let section = schema::object([
        ("title", schema::described(schema::text(TITLE_MAX_CHARS), "the section's title")),
        (
            "description",
            schema::described(
                schema::text(DESCRIPTION_MAX_CHARS),
                "what this section says, in one or two sentences",
            ),
        ),
        (
            "keyTopics",
            schema::described(
                schema::list(schema::text(TOPIC_MAX_CHARS), 0, MAX_TOPICS),
                "the topics the section covers",
            ),
        ),
        (
            "length",
            schema::described(
                schema::one_of(&LENGTHS),
                "its target length: Short = 200-500 words, Medium = 500-1000, Long = 1000-2000",
            ),
        ),
        (
            "sourceCoverage",
            schema::described(
                schema::text(COVERAGE_MAX_CHARS),
                "which part of the material it draws on",
            ),
        ),
    ]);
    ReplySchema::new(
        OUTLINE_SCHEMA,
        schema::reasoned([
            (
                "documentTitle",
                schema::described(schema::text(TITLE_MAX_CHARS), "the document's title"),
            ),
            (
                "sections",
                schema::described(
                    schema::list(section, MIN_SECTIONS, MAX_SECTIONS),
                    "6 to 12 sections in a logical order, with no overlap, together covering \
                     every part of the material",
                ),
            ),
            (
                "estimatedTotalLength",
                schema::described(
                    schema::text(ESTIMATE_MAX_CHARS),
                    "the document's estimated total length in words",
                ),
            ),
            (
                "keyThemes",
                schema::described(
                    schema::list(schema::text(THEME_MAX_CHARS), 0, MAX_THEMES),
                    "the document's key themes",
                ),
            ),
        ]),
    )
}

/// An outline from JSON that fits [`outline_schema`], under the text reader's rules.
fn outline_from_json(v: &Value) -> Option<OutlineReading> {
    let field = |o: &Value, k: &str| o.get(k).and_then(Value::as_str).map(stated);
    let items = |o: &Value, k: &str| -> Vec<String> {
        o.get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(stated)
            .filter(|t| !t.is_empty())
            .collect()
    };
    let blocks: Vec<Block> = v
        .get("sections")?
        .as_array()?
        .iter()
        .enumerate()
        .map(|(i, s)| Block {
            number: i as u64 + 1,
            title: field(s, "title").unwrap_or_default(),
            description: field(s, "description"),
            topics: None,
            topic_list: items(s, "keyTopics"),
            length: field(s, "length"),
            coverage: field(s, "sourceCoverage"),
        })
        .collect();
    let mut reading = finish_outline(
        field(v, "documentTitle"),
        blocks,
        None,
        field(v, "estimatedTotalLength"),
        None,
    );
    reading.key_themes = items(v, "keyThemes");
    Some(reading)
}

/// Reads the architect's outline: from its JSON when it fits `schema`, else by its text
/// ([`read_outline`]). Says where it was read from; None when too few sections were read to
/// go on (the run fails on it).
pub fn read_outline_reply(reply: &str, schema: &ReplySchema) -> (OutlineReading, Option<ReadFrom>) {
    if let Some(reading) = schema.read(reply).and_then(|v| outline_from_json(&v)) {
        if reading.sections.len() >= MIN_SECTIONS {
            return (reading, Some(ReadFrom::Json));
        }
    }
    let reading = read_outline(reply);
    let from = (reading.sections.len() >= MIN_SECTIONS).then_some(ReadFrom::Text);
    (reading, from)
}

// ---- computing on the sections -------------------------------------------------------------

/// The words of a text, lower-cased (runs of letters and digits).
fn words_of(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// Which key topics a section covers: a topic is covered when every one of its words of four
/// letters or more occurs in the section as a word, ignoring case. A topic with no word that
/// long (`UI`, `CI/CD`) is covered when all its words occur, so it is never covered vacuously.
pub fn topic_coverage(section: &str, topics: &[String]) -> (Vec<String>, Vec<String>) {
    let present: HashSet<String> = words_of(section).collect();
    let (mut covered, mut missing) = (Vec::new(), Vec::new());
    for t in topics {
        let all: Vec<String> = words_of(t).collect();
        let long: Vec<&String> = all.iter().filter(|w| w.chars().count() >= 4).collect();
        let needed: Vec<&String> = if long.is_empty() { all.iter().collect() } else { long };
        if !needed.is_empty() && needed.iter().all(|w| present.contains(*w)) {
            covered.push(t.clone());
        } else {
            missing.push(t.clone());
        }
    }
    (covered, missing)
}

/// Every `[TODO: …]` span of a document (up to its first `]`), its words only.
pub fn todo_markers(document: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(&RE, r"(?i)\[\s*todo\s*:([^\]]*)\]")
        .captures_iter(document)
        .map(|c| c[1].trim().to_string())
        .collect()
}

/// The first `n` words of a text.
fn first_words(text: &str, n: usize) -> String {
    text.split_whitespace().take(n).collect::<Vec<_>>().join(" ")
}

// ---- prompts -------------------------------------------------------------------------------

pub const OUTLINE_HEAD: &str = "You are the architect of a long-form document.";
pub const SECTION_HEAD: &str = "You are one of the authors of a long-form document.";
pub const ASSEMBLY_HEAD: &str = "You are the editor who assembles a long-form document.";
pub const MATERIAL_START: &str = "=== SOURCE MATERIAL ===";
pub const MATERIAL_END: &str = "=== END OF SOURCE MATERIAL ===";
pub const OUTLINE_START: &str = "=== OUTLINE ===";
pub const OUTLINE_END: &str = "=== END OF OUTLINE ===";
pub const SECTIONS_START: &str = "=== SECTIONS ===";
pub const SECTIONS_END: &str = "=== END OF SECTIONS ===";

fn material_block(material: &str) -> String {
    format!("{MATERIAL_START}\n{material}\n{MATERIAL_END}")
}

pub fn outline_prompt(kind: DocumentType, material: &str) -> String {
    outline_prompt_as(kind, material, None)
}

/// The outline prompt ending in the spec's `DOCUMENT TITLE:` / `SECTION <n>:` format, or, given
/// the outline's schema, in its JSON (the same instructions otherwise).
pub fn outline_prompt_as(
    kind: DocumentType,
    material: &str,
    schema: Option<&ReplySchema>,
) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Reply in exactly this format:\n\n\
                 DOCUMENT TITLE: <title>\n\n\
                 SECTION 1: <section title>\n\
                 Description: <what this section says, in one or two sentences>\n\
                 Key Topics:\n- <topic>\n- <topic>\n\
                 Length: Short|Medium|Long\n\
                 Source Coverage: <which part of the material it draws on>\n\n\
                 SECTION 2: <section title>\n…and so on for every section.\n\n\
                 DOCUMENT SUMMARY:\n\
                 Total sections: <number>\n\
                 Estimated total length: <words>\n\
                 Key themes: <theme>, <theme>, <theme>"
            .to_string(),
    };
    format!(
        "{OUTLINE_HEAD} Plan a {label} from the source material below.\n\n\
         A {label} covers {guidance}.\n\n{material}\n\n\
         Rules:\n\
         - 6 to 12 sections, in a logical order, with no overlap between them.\n\
         - Together the sections cover every part of the material.\n\
         - Give each section a target length: Short = 200-500 words, Medium = 500-1000 words, \
         Long = 1000-2000 words.\n\n{format}",
        label = kind.label(),
        guidance = kind.guidance(),
        material = material_block(material),
    )
}

/// The outline as the server renders it from the parsed sections, for authors and assembler.
pub fn render_outline(title: &str, sections: &[Section]) -> String {
    let mut s = format!("Document title: {title}\n");
    for sec in sections {
        s.push_str(&format!(
            "\nSection {}: {} ({}, {} words)\n",
            sec.number,
            sec.title,
            match sec.length {
                Length::Short => "Short",
                Length::Medium => "Medium",
                Length::Long => "Long",
            },
            sec.length.words()
        ));
        if let Some(d) = &sec.description {
            s.push_str(&format!("  Description: {d}\n"));
        }
        if !sec.key_topics.is_empty() {
            s.push_str(&format!("  Key topics: {}\n", sec.key_topics.join("; ")));
        }
        if let Some(c) = &sec.source_coverage {
            s.push_str(&format!("  Source coverage: {c}\n"));
        }
    }
    s
}

pub fn section_prompt(
    kind: DocumentType,
    title: &str,
    outline: &str,
    sec: &Section,
    material: &str,
) -> String {
    let topics = if sec.key_topics.is_empty() {
        "(none listed)".to_string()
    } else {
        sec.key_topics.iter().map(|t| format!("- {t}")).collect::<Vec<_>>().join("\n")
    };
    format!(
        "{SECTION_HEAD} The document is a {label} titled \"{title}\"; a {label} covers \
         {guidance}.\n\n{OUTLINE_START}\n{outline}{OUTLINE_END}\n\n\
         Write ONLY section {n}: {stitle}.\n\
         Description: {description}\n\
         Key topics:\n{topics}\n\
         Target length: {words} words.\n\n{material}\n\n\
         Rules:\n\
         - Open with the heading `## Section {n}: {stitle}`.\n\
         - Cover every key topic above, under `###` subheadings.\n\
         - Write only this section: other sections are written by others. Refer to them as \
         \"See Section X\".\n\
         - Where the material lacks information you need, write [Requires additional input] \
         rather than inventing it.\n\n\
         Reply with the section's text only.",
        label = kind.label(),
        guidance = kind.guidance(),
        n = sec.number,
        stitle = sec.title,
        description = sec.description.as_deref().unwrap_or("(not given)"),
        words = sec.length.words(),
        material = material_block(material),
    )
}

/// One section as the assembler receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub number: usize,
    pub title: String,
    pub model: String,
    pub text: String,
}

pub fn assembly_prompt(
    kind: DocumentType,
    title: &str,
    outline: &str,
    material: &str,
    written: &[Written],
    missing: &[&Section],
    condensed: bool,
) -> String {
    let sections: String = written
        .iter()
        .map(|w| {
            format!(
                "--- Section {}: {} (by {}) ---\n{}\n--- end of section {} ---\n",
                w.number, w.title, w.model, w.text, w.number
            )
        })
        .collect();
    let missing = if missing.is_empty() {
        "None: every section was written.".to_string()
    } else {
        missing
            .iter()
            .map(|s| format!("- Section {}: {}", s.number, s.title))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let note = if condensed {
        "\n\nThe sections were too long to send whole: each is given as its first 200 words and \
         its key topics. Write each section out in full from them."
    } else {
        ""
    };
    format!(
        "{ASSEMBLY_HEAD} The document is a {label} titled \"{title}\".\n\n\
         {OUTLINE_START}\n{outline}{OUTLINE_END}\n\n{material}\n\n\
         {SECTIONS_START}\n{sections}{SECTIONS_END}{note}\n\n\
         Sections that are missing (their authors failed):\n{missing}\n\n\
         Assemble one coherent document:\n\
         - Make terms consistent across sections.\n\
         - Turn every \"See Section X\" into a real reference to that section.\n\
         - Add transitions between sections and remove duplicated content.\n\
         - Start with an executive summary of 3 to 5 paragraphs, then a table of contents, then \
         every section in order.\n\
         - Write [TODO: what is missing] wherever a section is missing or a planned key topic is \
         not covered.\n\n\
         Reply with the whole document only.",
        label = kind.label(),
        material = material_block(material),
    )
}

// ---- the state machine ---------------------------------------------------------------------

/// A section as written, as stored and as the result lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SectionResult {
    pub section_number: usize,
    pub section_title: String,
    pub model: String,
    pub content: String,
    pub word_count: usize,
    pub key_topics_covered: Vec<String>,
    pub key_topics_missing: Vec<String>,
    pub response_time_ms: Option<i64>,
}

/// A section whose author failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedSection {
    pub section_number: usize,
    pub section_title: String,
    pub model: String,
    pub error: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Outlining,
    Expanding,
    Assembling,
    Done,
}

pub struct Blueprint {
    config: BlueprintConfig,
    ctx: RunContext,
    phase: Phase,
    material: String,
    title_text: String,
    sections: Vec<Section>,
    written: Vec<SectionResult>,
    failed: Vec<FailedSection>,
    condensed: bool,
    /// The outline's reply schema (built once for the run).
    outline: Arc<ReplySchema>,
    title: TitleTracker,
    calls: Calls,
}

fn stage_order(stage: &str) -> i32 {
    match stage {
        "outline" => OUTLINE_ORDER,
        "assembly" => ASSEMBLY_ORDER,
        s => s.strip_prefix("section_").and_then(|n| n.parse().ok()).unwrap_or(0),
    }
}

/// `outline_complete`'s data: what was read, with each section's author; the same in the result.
fn outline_data(
    model: &str,
    kind: DocumentType,
    reading: &OutlineReading,
    sections: &[Section],
    ms: u64,
    read_from: Option<ReadFrom>,
) -> Value {
    let list: Vec<Value> = sections
        .iter()
        .map(|s| {
            json!({ "number": s.number, "reportedNumber": s.reported_number, "title": s.title,
                    "titleDefaulted": s.title_defaulted, "description": s.description,
                    "keyTopics": s.key_topics, "length": s.length,
                    "lengthDefaulted": s.length_defaulted, "targetWords": s.length.words(),
                    "sourceCoverage": s.source_coverage, "assignedModel": s.assigned_model })
        })
        .collect();
    let mut data = json!({
        "model": model, "documentTitle": reading.document_title,
        "documentTitleDefaulted": reading.document_title_defaulted,
        "documentType": kind, "documentTypeLabel": kind.label(), "sections": list,
        "estimatedLength": reading.estimated_length, "totalSectionsStated": reading.total_sections_stated,
        "keyThemes": reading.key_themes, "truncatedFrom": reading.truncated_from,
        "warnings": outline_warnings(reading), "responseTimeMs": ms,
    });
    // Only an outline with enough sections to go on was read.
    if let Some(from) = read_from {
        data["readFrom"] = json!(from);
    }
    data
}

impl Blueprint {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: BlueprintConfig = stored_config("blueprint", config)?;
        if !(1..=MAX_AUTHORS).contains(&config.author_models.len()) {
            return Err("the stored blueprint configuration has no 1 to 6 authors".into());
        }
        let material = config.content.clone().unwrap_or_else(|| ctx.question.clone());
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        Ok(Blueprint {
            config,
            ctx,
            phase: Phase::Outlining,
            material,
            title_text: String::new(),
            sections: Vec::new(),
            written: Vec::new(),
            failed: Vec::new(),
            condensed: false,
            outline: outline_schema(),
            title,
            calls: Calls::default(),
        })
    }

    fn kind(&self) -> DocumentType {
        self.config.document_type
    }

    fn on_outline(&mut self, routed: Routed) -> Vec<Effect> {
        let reply = &routed.reply;
        let text = match &reply.result {
            Ok(t) => t.clone(),
            Err(e) => {
                self.phase = Phase::Done;
                return self.title.fail(role_failed("architect", &routed, e));
            }
        };
        let (reading, read_from) = read_outline_reply(&text, &self.outline);
        let authors = &self.config.author_models;
        let mut sections = reading.sections.clone();
        for (i, s) in sections.iter_mut().enumerate() {
            s.assigned_model = authors[i % authors.len()].clone();
        }
        let mut data = outline_data(
            &reply.model,
            self.kind(),
            &reading,
            &sections,
            reply.response_time_ms,
            read_from,
        );
        if let Some(from) = &routed.fallback_from {
            data["fallbackFrom"] = json!(from);
        }
        if sections.len() < MIN_SECTIONS {
            // Too little could be read to go on: what the architect wrote is shown instead.
            data["rawReply"] = json!(answer_text(&text).trim());
        }
        // The material is in the setup row (stored at the start), not here.
        let stored = data.clone();
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "outline".into(),
                stage_order: OUTLINE_ORDER,
                model: Some(reply.model.clone()),
                role: Some("architect".into()),
                content: text,
                parsed_data: Some(stored),
                response_time_ms: Some(reply.response_time_ms as i64),
            }),
            Effect::emit("outline_complete", json!({ "data": data })),
        ];
        if sections.len() < MIN_SECTIONS {
            self.phase = Phase::Done;
            out.extend(self.title.fail(format!(
                "The architect's outline ({}) has {} section{} that could be read; at least {MIN_SECTIONS} are needed.",
                reply.model,
                sections.len(),
                if sections.len() == 1 { "" } else { "s" }
            )));
            return out;
        }
        self.title_text = reading.document_title.clone();
        self.sections = sections;
        self.phase = Phase::Expanding;
        let outline = render_outline(&self.title_text, &self.sections);
        out.push(Effect::emit("expansion_start", json!({ "totalSections": self.sections.len() })));
        // Every section at once: the engine queues them under the provider's concurrency cap.
        for s in &self.sections {
            let prompt = section_prompt(self.kind(), &self.title_text, &outline, s, &self.material);
            let call = CallSpec::new(
                format!("section:{}", s.number),
                &s.assigned_model,
                vec![ChatMessage::user(prompt)],
                &format!("section_{}", s.number),
                "author",
                self.config.timeout_ms,
            );
            out.push(Effect::Call(call.quoting([material(&self.material)])));
        }
        out
    }

    fn on_section(&mut self, n: usize, reply: CallReply) -> Vec<Effect> {
        let Some(sec) = self.sections.get(n - 1).cloned() else { return Vec::new() };
        if self.written.iter().any(|w| w.section_number == n)
            || self.failed.iter().any(|f| f.section_number == n)
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        match &reply.result {
            Ok(t) => {
                let content = answer_text(t).trim().to_string();
                let (covered, missing) = topic_coverage(&content, &sec.key_topics);
                let s = SectionResult {
                    section_number: n,
                    section_title: sec.title.clone(),
                    model: reply.model.clone(),
                    word_count: word_count(&content),
                    content,
                    key_topics_covered: covered,
                    key_topics_missing: missing,
                    response_time_ms: Some(reply.response_time_ms as i64),
                };
                out.push(section_row(&s));
                out.push(Effect::emit("section_complete", json!({ "data": s })));
                self.written.push(s);
            }
            Err(e) => {
                let f = FailedSection {
                    section_number: n,
                    section_title: sec.title.clone(),
                    model: reply.model.clone(),
                    error: e.message.clone(),
                };
                out.push(Effect::emit("section_failed", json!({ "data": f })));
                self.failed.push(f);
            }
        }
        if self.written.len() + self.failed.len() == self.sections.len() {
            out.extend(self.all_written());
        }
        out
    }

    fn all_written(&mut self) -> Vec<Effect> {
        self.written.sort_by_key(|s| s.section_number);
        self.failed.sort_by_key(|s| s.section_number);
        let mut out = vec![Effect::emit(
            "all_sections_complete",
            json!({ "data": sections_summary(&self.written, &self.failed) }),
        )];
        if self.written.is_empty() {
            self.phase = Phase::Done;
            out.extend(self.title.fail(format!(
                "Every author failed: none of the {} sections was written.",
                self.sections.len()
            )));
            return out;
        }
        self.phase = Phase::Assembling;
        let total: usize = self.written.iter().map(|s| s.content.chars().count()).sum();
        self.condensed = total > CONDENSE_ABOVE_CHARS;
        let written: Vec<Written> = self
            .written
            .iter()
            .map(|s| {
                let sec = &self.sections[s.section_number - 1];
                let text = if self.condensed {
                    format!(
                        "{} […]\nKey topics: {}",
                        first_words(&s.content, CONDENSED_WORDS),
                        sec.key_topics.join("; ")
                    )
                } else {
                    s.content.clone()
                };
                Written {
                    number: s.section_number,
                    title: s.section_title.clone(),
                    model: s.model.clone(),
                    text,
                }
            })
            .collect();
        let missing: Vec<&Section> =
            self.failed.iter().filter_map(|f| self.sections.get(f.section_number - 1)).collect();
        let prompt = assembly_prompt(
            self.kind(),
            &self.title_text,
            &render_outline(&self.title_text, &self.sections),
            &self.material,
            &written,
            &missing,
            self.condensed,
        );
        // The sections, then the material, named for fitting a small context.
        let quoted: Vec<(String, String)> = written
            .iter()
            .map(|w| (format!("Section {}: {}", w.number, w.title), w.text.clone()))
            .chain([material(&self.material)])
            .collect();
        let spec = CallSpec::new(
            "assembly",
            &self.config.assembler_model,
            vec![ChatMessage::user(prompt)],
            "assembly",
            "assembler",
            self.config.timeout_ms,
        )
        .quoting(quoted);
        let backup = self.config.chairman_fallback_model.clone();
        out.push(Effect::emit(
            "assembly_start",
            json!({ "model": self.config.assembler_model, "condensed": self.condensed,
                    "missingSections": self.failed.iter().map(|f| f.section_number).collect::<Vec<_>>() }),
        ));
        out.push(self.calls.solo(spec, ASSEMBLY_ORDER, backup.as_deref()));
        out
    }

    fn on_assembly(&mut self, routed: Routed) -> Vec<Effect> {
        self.phase = Phase::Done;
        let reply = &routed.reply;
        let (document, fallback, model, ms) = match &reply.result {
            Ok(t) => (
                answer_text(t).trim().to_string(),
                None,
                Some(reply.model.clone()),
                Some(reply.response_time_ms as i64),
            ),
            Err(_) => (
                concatenated(&self.title_text, &self.sections, &self.written),
                Some("concatenated"),
                None,
                None,
            ),
        };
        let mut data = json!({
            "model": model, "document": document, "wordCount": word_count(&document),
            "todoMarkers": todo_markers(&document), "condensed": self.condensed,
            "fallback": fallback, "responseTimeMs": ms,
        });
        if let (Some(from), None) = (&routed.fallback_from, fallback) {
            data["fallbackFrom"] = json!(from);
        }
        self.calls.answered(
            Answered {
                stage: "assembly",
                order: ASSEMBLY_ORDER,
                role: "assembler",
                model,
                event: "assembly_complete",
                data,
                text_key: "document",
                answer: document,
                response_time_ms: ms,
            },
            &mut self.title,
        )
    }
}

/// The answer when the assembler and its backup failed: the title, then every section in
/// order under its heading, a missing one as a TODO marker.
pub fn concatenated(title: &str, sections: &[Section], written: &[SectionResult]) -> String {
    let mut doc = format!("# {title}\n");
    for sec in sections {
        doc.push_str(&format!("\n## Section {}: {}\n\n", sec.number, sec.title));
        match written.iter().find(|w| w.section_number == sec.number) {
            Some(w) => doc.push_str(&strip_heading(&w.content, sec.number)),
            None => doc.push_str(&format!("[TODO: Section {} ({}) failed]", sec.number, sec.title)),
        }
        doc.push('\n');
    }
    doc
}

/// A section's text without the `## Section <n>: …` heading it was asked to open with (the
/// concatenation writes its own).
fn strip_heading(text: &str, n: usize) -> String {
    let mut lines = text.lines();
    let first = lines.clone().find(|l| !l.trim().is_empty()).unwrap_or("");
    match section_heading(bare(first)) {
        Some((k, _)) if k == n as u64 => {
            let rest: Vec<&str> =
                lines.by_ref().skip_while(|l| l.trim().is_empty()).skip(1).collect();
            rest.join("\n").trim().to_string()
        }
        _ => text.trim().to_string(),
    }
}

/// The source material as quoted material of a prompt (see [`CallSpec::quoting`]).
fn material(text: &str) -> (String, String) {
    ("the source material".to_string(), text.to_string())
}

fn section_row(s: &SectionResult) -> Effect {
    let mut parsed = json!(s);
    if let Some(o) = parsed.as_object_mut() {
        for k in ["model", "content", "responseTimeMs"] {
            o.remove(k);
        }
    }
    Effect::Store(StageRow {
        stage_type: format!("section_{}", s.section_number),
        stage_order: s.section_number as i32,
        model: Some(s.model.clone()),
        role: Some("author".into()),
        content: s.content.clone(),
        parsed_data: Some(parsed),
        response_time_ms: s.response_time_ms,
    })
}

/// `all_sections_complete`'s data.
fn sections_summary(written: &[SectionResult], failed: &[FailedSection]) -> Value {
    json!({ "sections": written, "failedSections": failed,
            "totalSucceeded": written.len(), "totalFailed": failed.len() })
}

impl Mode for Blueprint {
    fn start(&mut self) -> Vec<Effect> {
        let kind = self.kind();
        let mut out = vec![
            Effect::emit(
                "blueprint_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id,
                        "mode": "blueprint", "documentType": kind, "documentTypeLabel": kind.label(),
                        "architectModel": self.config.architect_model,
                        "authorModels": self.config.author_models,
                        "assemblerModel": self.config.assembler_model,
                        "materialSource": if self.config.content.is_some() { "content" } else { "question" } }),
            ),
            // The document type and the material, so a run whose architect fails still has
            // them when it is reloaded.
            Effect::Store(StageRow {
                stage_type: SETUP.into(),
                stage_order: OUTLINE_ORDER,
                model: None,
                role: None,
                content: self.material.clone(),
                parsed_data: Some(json!({ "documentType": kind,
                    "source": if self.config.content.is_some() { "content" } else { "question" } })),
                response_time_ms: None,
            }),
            Effect::emit("outline_start", json!({ "model": self.config.architect_model })),
        ];
        // Asked for the outline's JSON when the architect's route takes it (the backup takes
        // the same prompt: it is asked as the architect is).
        let asking =
            Asking::new(self.outline.clone(), |json| outline_prompt_as(kind, &self.material, json));
        let spec = asking
            .call(
                &self.ctx,
                "outline",
                &self.config.architect_model,
                "outline",
                "architect",
                self.config.timeout_ms,
            )
            .quoting([material(&self.material)]);
        let backup = self.config.facilitator_fallback_model.clone();
        out.push(self.calls.solo(spec, OUTLINE_ORDER, backup.as_deref()));
        let model = self.config.architect_model.clone();
        out.extend(self.title.call(
            &model,
            title_prompt(&self.ctx.question),
            self.config.timeout_ms,
        ));
        out
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        if reply.key == TITLE_KEY {
            return self.title.on_reply(&reply);
        }
        let (mut out, routed) = self.calls.route(empty_is_failure(reply));
        let Some(routed) = routed else { return out };
        let key = routed.reply.key.clone();
        let section = key.strip_prefix("section:").and_then(|n| n.parse::<usize>().ok());
        out.extend(match (self.phase, section) {
            (Phase::Outlining, _) if key == "outline" => self.on_outline(routed),
            (Phase::Expanding, Some(n)) => self.on_section(n, routed.reply),
            (Phase::Assembling, _) if key == "assembly" => self.on_assembly(routed),
            _ => Vec::new(),
        });
        self.calls.track(&out, stage_order);
        out
    }
}

// ---- the stored result ---------------------------------------------------------------------

/// `{material, documentType, outline, sections, failedSections, assembly, partial,
/// failedModels}` from the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let outline = row("outline").and_then(|o| o.parsed_data.clone());
    let planned: Vec<(usize, String)> = outline
        .as_ref()
        .and_then(|o| o["sections"].as_array())
        .map(|list| {
            list.iter()
                .filter_map(|s| {
                    Some((s["number"].as_u64()? as usize, s["title"].as_str()?.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut written: Vec<SectionResult> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("section_"))
        .filter_map(|r| {
            let mut v = r.parsed_data.clone()?;
            v["model"] = json!(r.model);
            v["content"] = json!(r.content);
            v["responseTimeMs"] = json!(r.response_time_ms);
            serde_json::from_value(v).ok()
        })
        .collect();
    written.sort_by_key(|s| s.section_number);
    let mut failed: Vec<FailedSection> = rows
        .iter()
        .filter(|r| r.stage_type == CALL_FAILED)
        .filter_map(|r| {
            let f: super::common::FailedModel =
                serde_json::from_value(r.parsed_data.clone()?).ok()?;
            let n: usize = f.stage.strip_prefix("section_")?.parse().ok()?;
            let title = planned.iter().find(|(k, _)| *k == n).map(|(_, t)| t.clone())?;
            Some(FailedSection {
                section_number: n,
                section_title: title,
                model: f.model,
                error: f.error.message,
            })
        })
        .collect();
    failed.sort_by_key(|s| s.section_number);
    let assembly = row("assembly").map(|a| {
        let mut d = a.parsed_data.clone().unwrap_or(json!({}));
        d["document"] = json!(a.content);
        d
    });
    let setup = row(SETUP);
    let kind = setup
        .and_then(|s| s.parsed_data.as_ref())
        .or(outline.as_ref())
        .map(|o| o["documentType"].clone())
        .unwrap_or(Value::Null);
    let mut outline = outline;
    // Runs stored before the setup row kept the material in the outline's row.
    let old_material =
        outline.as_mut().and_then(|o| o.as_object_mut()).and_then(|o| o.remove("material"));
    let material = match setup {
        Some(s) => json!({
            "source": s.parsed_data.as_ref().map_or(Value::Null, |d| d["source"].clone()),
            "characters": s.content.chars().count(), "text": s.content,
        }),
        None => old_material.unwrap_or(Value::Null),
    };
    let mut result = json!({
        "material": material,
        "documentType": kind,
        "outline": outline,
        "sections": written,
        "failedSections": failed,
        "totalSucceeded": written.len(),
        "totalFailed": failed.len(),
        "assembly": assembly,
    });
    mark_from_rows(&mut result, rows);
    result
}

fn outcome(result: &Value) -> Option<String> {
    let a = result.get("assembly").filter(|a| !a.is_null())?;
    let title = result.pointer("/outline/documentTitle").and_then(Value::as_str).unwrap_or("");
    let failed = result["totalFailed"].as_u64().unwrap_or(0);
    let written = result["totalSucceeded"].as_u64().unwrap_or(0);
    let mut s = format!("{}: {} sections, {} words", short(title, 80), written, a["wordCount"]);
    if failed > 0 {
        s.push_str(&format!(", {failed} missing"));
    }
    if a["fallback"] == "concatenated" {
        s.push_str(" (not assembled)");
    }
    Some(s)
}

// ---- sim answers ---------------------------------------------------------------------------

const SIM_PARTS: [(&str, &str, [&str; 3]); 9] = [
    (
        "Context and Goals",
        "Why the system exists and what it must achieve.",
        ["Problem statement", "Goals", "Constraints"],
    ),
    (
        "Requirements",
        "What the system must do and how well.",
        ["Functional requirements", "Quality attributes", "Assumptions"],
    ),
    (
        "System Overview",
        "The system at a glance and its main parts.",
        ["Components", "Responsibilities", "Boundaries"],
    ),
    (
        "Data Model",
        "The data the system keeps and how it flows.",
        ["Entities", "Storage", "Data flows"],
    ),
    (
        "Interfaces",
        "How the parts and the outside world talk to each other.",
        ["Public API", "Events", "Versioning"],
    ),
    ("Deployment", "Where and how the system runs.", ["Environments", "Scaling", "Monitoring"]),
    (
        "Security",
        "How the system and its data are protected.",
        ["Authentication", "Authorisation", "Threats"],
    ),
    (
        "Risks and Trade-offs",
        "The decisions taken and what they cost.",
        ["Alternatives considered", "Risks", "Mitigations"],
    ),
    ("Delivery Plan", "How the work is staged.", ["Milestones", "Team", "Open questions"]),
];

/// The sim architect's outline as JSON that fits [`outline_schema`]: the same sections, lengths
/// and summary as its text outline.
fn sim_outline_json(ask: &SimAsk) -> String {
    let mut rng = SplitMix64::new(ask.seed);
    let cut = |s: &str, n: usize| -> String { s.chars().take(n).collect() };
    let material = between(ask.prompt, MATERIAL_START, MATERIAL_END);
    let n = 6 + rng.below(3);
    let sections: Vec<Value> = SIM_PARTS
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, (title, desc, topics))| {
            json!({ "title": title, "description": desc, "keyTopics": topics,
                    "length": LENGTHS[rng.below(3)],
                    "sourceCoverage": if i == 0 { "the whole material" } else { "the parts of the material on this subject" } })
        })
        .collect();
    let reasoning = format!(
        "{}[simulated outline from {}] The material reads best from its goals to its delivery, \
         one concern per section.",
        ask.hostile_paragraph(),
        ask.model
    );
    json!({
        "reasoning": cut(&reasoning, schema::REASONING_MAX_CHARS),
        "documentTitle": cut(&first_words(material, 6), TITLE_MAX_CHARS),
        "sections": sections,
        "estimatedTotalLength": format!("{} words", n * 600),
        "keyThemes": ["clarity", "reliability", "delivery"],
    })
    .to_string()
}

fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    // Asked for the outline's JSON: the outline, as JSON that fits; no other schema is ours.
    if let Some(s) = ask.schema {
        return (s.name == OUTLINE_SCHEMA && p.starts_with(OUTLINE_HEAD))
            .then(|| sim_outline_json(ask));
    }
    let mut rng = SplitMix64::new(ask.seed);
    let who = ask.model;
    if p.starts_with(OUTLINE_HEAD) {
        let material = between(p, MATERIAL_START, MATERIAL_END);
        let subject: String = first_words(material, 6);
        let n = 6 + rng.below(3);
        let mut s = format!("[simulated outline from {who}]\n\n");
        if ask.malformed {
            // A half-followed format: bold headings with dashes, topics on one line, no
            // lengths, no summary.
            s.push_str(&format!("Sure! Here is an outline.\n\n**Document Title:** {subject}\n\n"));
            for (i, (title, desc, topics)) in SIM_PARTS.iter().take(n).enumerate() {
                s.push_str(&format!(
                    "**Section {} — {title}**\n- Description: {desc}\n- Key Topics: {}\n\n",
                    i + 1,
                    topics.join(", ")
                ));
            }
            return Some(s);
        }
        s.push_str(&format!("DOCUMENT TITLE: {subject}\n\n"));
        let lengths = ["Short", "Medium", "Long"];
        for (i, (title, desc, topics)) in SIM_PARTS.iter().take(n).enumerate() {
            s.push_str(&format!(
                "SECTION {}: {title}\nDescription: {desc}\nKey Topics:\n{}\nLength: {}\nSource Coverage: {}\n\n",
                i + 1,
                topics.iter().map(|t| format!("- {t}")).collect::<Vec<_>>().join("\n"),
                lengths[rng.below(3)],
                if i == 0 { "the whole material" } else { "the parts of the material on this subject" }
            ));
        }
        s.push_str(&format!(
            "DOCUMENT SUMMARY:\nTotal sections: {n}\nEstimated total length: {} words\nKey themes: clarity, reliability, delivery",
            n * 600
        ));
        return Some(s);
    }
    if p.starts_with(SECTION_HEAD) {
        static HEAD: OnceLock<Regex> = OnceLock::new();
        let c = re(&HEAD, r"Write ONLY section (\d+): (.*)").captures(p)?;
        let (n, title) = (c[1].to_string(), c[2].trim_end_matches('.').to_string());
        let topics: Vec<String> = p
            .split_once("Key topics:\n")
            .map(|(_, rest)| {
                rest.lines().map_while(|l| l.strip_prefix("- ")).map(str::to_string).collect()
            })
            .unwrap_or_default();
        // Now and then a planned topic is left out, so coverage has something to report.
        let skip = if topics.len() > 1 && rng.below(3) == 0 {
            Some(rng.below(topics.len()))
        } else {
            None
        };
        let mut s = String::new();
        if ask.malformed {
            s.push_str(&format!("Sure! Here is section {n}, as requested.\n\n{title}\n\n"));
        } else {
            s.push_str(&format!("## Section {n}: {title}\n\n"));
        }
        s.push_str(&format!(
            "[simulated section from {who}] This section sets out {} for the document.\n\n{}",
            title.to_lowercase(),
            ask.hostile_paragraph()
        ));
        for (i, t) in topics.iter().enumerate() {
            if Some(i) == skip {
                continue;
            }
            s.push_str(&format!(
                "### {t}\n\n{t} is treated here in the depth the material allows. The approach \
                 is stated, its reasons are given and its limits are named. See Section 1 for \
                 the context.\n\n"
            ));
        }
        if rng.below(2) == 0 {
            s.push_str("Budget figures: [Requires additional input]\n");
        }
        return Some(s);
    }
    if p.starts_with(ASSEMBLY_HEAD) {
        static TITLE: OnceLock<Regex> = OnceLock::new();
        let title = re(&TITLE, r#"titled "(.*)"\."#)
            .captures(p)
            .map_or(String::new(), |c| c[1].to_string());
        let body = between(p, SECTIONS_START, SECTIONS_END);
        static SEC: OnceLock<Regex> = OnceLock::new();
        let sec = re(
            &SEC,
            r"(?s)--- Section (\d+): (.*?) \(by [^\n]*\) ---\n(.*?)\n--- end of section \d+ ---",
        );
        let mut parts: Vec<(usize, String, String)> = sec
            .captures_iter(body)
            .filter_map(|c| Some((c[1].parse().ok()?, c[2].to_string(), c[3].to_string())))
            .collect();
        let missing: Vec<(usize, String)> = p
            .split_once("Sections that are missing (their authors failed):\n")
            .map(|(_, rest)| {
                rest.lines()
                    .map_while(|l| l.strip_prefix("- Section "))
                    .filter_map(|l| {
                        let (n, t) = l.split_once(": ")?;
                        Some((n.parse().ok()?, t.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (n, t) in &missing {
            parts.push((*n, t.clone(), format!("[TODO: Section {n} ({t}) was not written]")));
        }
        parts.sort_by_key(|(n, _, _)| *n);
        let toc: Vec<String> = parts.iter().map(|(n, t, _)| format!("{n}. {t}")).collect();
        let mut s = String::new();
        if ask.malformed {
            s.push_str("Here is the assembled document:\n\n");
        }
        s.push_str(&format!(
            "# {title}\n\n[simulated assembly by {who}]\n\n## Executive Summary\n\n{}This \
             document brings {} sections together into one plan.\n\nIt states the goals, the \
             design and the risks in turn.\n\nWhere information was missing it says so.\n\n\
             ## Table of Contents\n\n{}\n\n",
            ask.hostile_paragraph(),
            parts.len(),
            toc.join("\n")
        ));
        for (_, _, text) in parts {
            s.push_str(&text);
            s.push_str("\n\n");
        }
        return Some(s.trim_end().to_string());
    }
    None
}

#[cfg(test)]
#[path = "blueprint_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// The result as the export's report: the document (its title, type and who outlined and
/// assembled it), the outline's sections as a table (length, author, words, topics covered,
/// written or failed), the key topics a section left out, the TODOs the document still holds
/// and what the outline did not state.
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
    let mut out = String::new();
    let o = &result["outline"];
    let planned = o["sections"].as_array().cloned().unwrap_or_default();
    let kind = o["documentTypeLabel"].as_str().map(str::to_string).or_else(|| {
        serde_json::from_value::<DocumentType>(result["documentType"].clone())
            .ok()
            .map(|k| k.label().to_string())
    });
    if o.is_object() {
        let title = match o["documentTitle"].as_str() {
            Some(t) if o["documentTitleDefaulted"] != true => t.to_string(),
            _ => "no title stated".to_string(),
        };
        let mut line = format!("**Document:** {title}");
        if let Some(k) = &kind {
            line.push_str(&format!(" ({k})"));
        }
        if let Some(m) = o["model"].as_str() {
            line.push_str(&format!(", outlined by {m}"));
            if let Some(f) = o["fallbackFrom"].as_str() {
                line.push_str(&format!(" in place of {f}"));
            }
        }
        line.push_str(&format!("; {}.", count(planned.len() as u64, "section", "sections")));
        out.push_str(&format!("{line}\n\n"));
    } else if let Some(k) = &kind {
        out.push_str(&format!("**Document:** {k}; no outline was written.\n\n"));
    }
    let a = &result["assembly"];
    if a.is_object() {
        let words = a["wordCount"].as_u64().map(|w| count(w, "word", "words"));
        if a["fallback"] == "concatenated" {
            out.push_str(
                "**Not assembled:** the assembler failed, so the document is the sections as \
                 written, in order.\n\n",
            );
        } else if let Some(m) = a["model"].as_str() {
            let mut line = format!("**Assembled by:** {m}");
            if let Some(f) = a["fallbackFrom"].as_str() {
                line.push_str(&format!(" (in place of {f})"));
            }
            if let Some(w) = &words {
                line.push_str(&format!(", {w}"));
            }
            if a["condensed"] == true {
                line.push_str(
                    "; the sections were too long to give whole and went to it condensed",
                );
            }
            out.push_str(&format!("{line}.\n\n"));
        }
    }
    let written = result["sections"].as_array().cloned().unwrap_or_default();
    let failed = result["failedSections"].as_array().cloned().unwrap_or_default();
    let of = |list: &[Value], n: u64| {
        list.iter().find(|s| s["sectionNumber"].as_u64() == Some(n)).cloned()
    };
    let mut left_out = Vec::new();
    let rows: Vec<Vec<String>> = planned
        .iter()
        .enumerate()
        .map(|(i, sec)| {
            let n = sec["number"].as_u64().unwrap_or(i as u64 + 1);
            let title = sec["title"].as_str().unwrap_or("").to_string();
            let length = sec["length"].as_str().unwrap_or("").to_lowercase();
            let length = match (sec["lengthDefaulted"] == true, sec["targetWords"].as_str()) {
                (true, _) => format!("not stated ({length} used)"),
                (false, Some(w)) => format!("{length} ({w} words)"),
                (false, None) => length,
            };
            let (w, f) = (of(&written, n), of(&failed, n));
            let author = w
                .as_ref()
                .or(f.as_ref())
                .and_then(|x| x["model"].as_str())
                .or(sec["assignedModel"].as_str())
                .unwrap_or("")
                .to_string();
            let (words, topics, state) = match (&w, &f) {
                (Some(w), _) => {
                    let covered = w["keyTopicsCovered"].as_array().map_or(0, Vec::len);
                    let missing: Vec<&str> = w["keyTopicsMissing"]
                        .as_array()
                        .map(|m| m.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    if !missing.is_empty() {
                        left_out.push(format!("- section {n} ({title}): {}", missing.join("; ")));
                    }
                    (
                        w["wordCount"].as_u64().map_or(String::new(), |c| c.to_string()),
                        format!("{covered} of {}", covered + missing.len()),
                        "written".to_string(),
                    )
                }
                (None, Some(f)) => (
                    String::new(),
                    String::new(),
                    match f["error"].as_str() {
                        Some(e) => format!("failed ({e})"),
                        None => "failed".into(),
                    },
                ),
                (None, None) => (String::new(), String::new(), "not written".into()),
            };
            vec![n.to_string(), title, length, author, words, topics, state]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(
            &["#", "section", "length", "author", "words", "key topics covered", "state"],
            &rows,
            &[0, 4],
        ));
        out.push('\n');
    }
    if !left_out.is_empty() {
        out.push_str(&format!("**Key topics a section left out:**\n\n{}\n\n", left_out.join("\n")));
    }
    let todos: Vec<&str> = a["todoMarkers"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !todos.is_empty() {
        let list: Vec<String> = todos.iter().map(|t| format!("- {t}")).collect();
        out.push_str(&format!("**Still to do in the document:**\n\n{}\n\n", list.join("\n")));
    }
    let warnings: Vec<&str> = o["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !warnings.is_empty() {
        let list: Vec<String> = warnings.iter().map(|w| format!("- {w}")).collect();
        out.push_str(&format!("**About the outline:**\n\n{}\n", list.join("\n")));
    }
    out
}
