//! What a blueprint run stores and reads back: the sections, the result, its outcome and the
//! export's report.

use super::*;
use crate::modes::common::FailedModel;

// ---- payloads (one definition for live events and stored results) --------------------------

pub use crate::modes::payload::Data;

/// Where the material came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The request's `content`.
    Content,
    /// The question itself.
    Question,
}

/// `blueprint_start`: the run, its document type and models.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Start<'a> {
    pub document_type: DocumentType,
    pub document_type_label: &'static str,
    pub architect_model: &'a str,
    pub author_models: &'a [String],
    pub assembler_model: &'a str,
    pub material_source: Source,
}

/// The setup row's parsed data (its content is the material).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetupRow {
    pub document_type: DocumentType,
    pub source: Option<Source>,
}

/// An event naming a model (`outline_start`).
#[derive(Debug, Serialize)]
pub struct ModelStart<'a> {
    pub model: &'a str,
}

/// A section of the outline as read, with its author.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutlineSection {
    /// Its number, 1..n in order of appearance.
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
    /// The length in words (`500-1000`).
    pub target_words: String,
    /// What of the material it draws on.
    pub source_coverage: Option<String>,
    /// The author that writes it (round-robin over the authors).
    pub assigned_model: String,
}

impl OutlineSection {
    pub(super) fn of(s: &Section) -> Self {
        OutlineSection {
            number: s.number,
            reported_number: s.reported_number,
            title: s.title.clone(),
            title_defaulted: s.title_defaulted,
            description: s.description.clone(),
            key_topics: s.key_topics.clone(),
            length: s.length,
            length_defaulted: s.length_defaulted,
            target_words: s.length.words().to_string(),
            source_coverage: s.source_coverage.clone(),
            assigned_model: s.assigned_model.clone(),
        }
    }
}

/// The material as the result gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Material {
    pub source: Option<Source>,
    /// Its length in characters.
    pub characters: usize,
    pub text: String,
}

/// The outline: `outline_complete`'s data, the `outline` row and the result's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Outline {
    /// The architect.
    pub model: String,
    pub document_title: String,
    /// The outline gave no title: one was made from the material.
    pub document_title_defaulted: bool,
    pub document_type: DocumentType,
    pub document_type_label: String,
    pub sections: Vec<OutlineSection>,
    /// `Estimated total length:` as stated.
    pub estimated_length: Option<String>,
    /// `Total sections:` as stated.
    pub total_sections_stated: Option<u64>,
    pub key_themes: Vec<String>,
    /// How many sections the outline had, when more than the most a run writes.
    pub truncated_from: Option<usize>,
    /// What was repaired or assumed in the outline, for a person.
    pub warnings: Vec<String>,
    /// How long the architect's call took, in milliseconds.
    pub response_time_ms: u64,
    /// Where the outline was read from (its JSON or its text), when enough was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    /// The architect the backup stood in for, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
    /// What the architect wrote, when too few sections could be read to go on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_reply: Option<String>,
    /// Runs stored before the setup row kept the material here.
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub material: Option<Material>,
}

/// `expansion_start`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpansionStart {
    pub total_sections: usize,
}

/// A section as written, as stored and as the result lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SectionResult {
    pub section_number: usize,
    pub section_title: String,
    /// Its author.
    pub model: String,
    pub content: String,
    pub word_count: usize,
    /// The outline's key topics it names.
    pub key_topics_covered: Vec<String>,
    /// The outline's key topics it does not name.
    pub key_topics_missing: Vec<String>,
    /// How long its call took, in milliseconds.
    pub response_time_ms: Option<i64>,
}

/// A section's row (its author, text and time are the row's own), in the order its rows have
/// always had.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SectionRow {
    pub section_number: usize,
    pub section_title: String,
    pub key_topics_covered: Vec<String>,
    pub key_topics_missing: Vec<String>,
    pub word_count: usize,
}

/// A section whose author failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedSection {
    pub section_number: usize,
    pub section_title: String,
    pub model: String,
    /// Why its call failed.
    pub error: String,
}

/// The sections written and failed (`all_sections_complete`'s data, and in the result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sections {
    /// The sections written, in order.
    pub sections: Vec<SectionResult>,
    /// The sections whose author failed, in order.
    pub failed_sections: Vec<FailedSection>,
    pub total_succeeded: usize,
    pub total_failed: usize,
}

impl Sections {
    pub fn of(written: Vec<SectionResult>, failed: Vec<FailedSection>) -> Self {
        Sections {
            total_succeeded: written.len(),
            total_failed: failed.len(),
            sections: written,
            failed_sections: failed,
        }
    }
}

/// `assembly_start`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AssemblyStart<'a> {
    pub model: &'a str,
    pub condensed: bool,
    pub missing_sections: Vec<usize>,
}

/// The assembly: `assembly_complete`'s data (its row keeps the same without `document`, its
/// content) and the result's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Assembly {
    /// The model that wrote it; null when the sections were concatenated.
    pub model: Option<String>,
    /// The document: the run's answer.
    #[serde(default)]
    pub document: String,
    pub word_count: usize,
    /// The `[TODO: …]` markers in the document.
    pub todo_markers: Vec<String>,
    /// The sections went to the assembler condensed (they were too long together).
    pub condensed: bool,
    /// Set when the assembler failed and the sections were concatenated.
    pub fallback: Option<Fallback>,
    /// How long the assembler's call took, in milliseconds.
    pub response_time_ms: Option<i64>,
    /// The assembler the backup stood in for, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// The result's assembly: its row's (serde_json's `remove` put the last key in the
/// document's place), with the document at the end.
fn document_last<S: serde::Serializer>(a: &Option<Assembly>, s: S) -> Result<S::Ok, S::Error> {
    taken_last(a.as_ref(), "document").serialize(s)
}

/// A blueprint run's result, rebuilt from its stored rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlueprintResult {
    /// The source material; null before it was stored.
    pub material: Option<Material>,
    pub document_type: Option<DocumentType>,
    /// The outline; null before it was stored.
    pub outline: Option<Outline>,
    #[serde(flatten)]
    pub sections: Sections,
    /// The assembled document; null before it was written.
    #[serde(serialize_with = "document_last")]
    pub assembly: Option<Assembly>,
    #[serde(flatten)]
    pub failures: Failures,
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

// ---- the stored result ---------------------------------------------------------------------

/// `{material, documentType, outline, sections, failedSections, assembly, partial,
/// failedModels}` from the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let mut outline: Option<Outline> = row("outline").and_then(parsed);
    let planned: &[OutlineSection] = outline.as_ref().map_or(&[], |o| &o.sections);
    let mut written: Vec<SectionResult> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("section_"))
        .filter_map(|r| {
            let s: SectionRow = parsed(r)?;
            Some(SectionResult {
                section_number: s.section_number,
                section_title: s.section_title,
                model: r.model.clone()?,
                content: r.content.clone(),
                word_count: s.word_count,
                key_topics_covered: s.key_topics_covered,
                key_topics_missing: s.key_topics_missing,
                response_time_ms: r.response_time_ms,
            })
        })
        .collect();
    written.sort_by_key(|s| s.section_number);
    let mut failed: Vec<FailedSection> = rows
        .iter()
        .filter(|r| r.stage_type == CALL_FAILED)
        .filter_map(|r| {
            let f: FailedModel = parsed(r)?;
            let n: usize = f.stage.strip_prefix("section_")?.parse().ok()?;
            let title = planned.iter().find(|s| s.number == n).map(|s| s.title.clone())?;
            Some(FailedSection {
                section_number: n,
                section_title: title,
                model: f.model,
                error: f.error.message,
            })
        })
        .collect();
    failed.sort_by_key(|s| s.section_number);
    let assembly = row("assembly").and_then(|a| {
        let d: Assembly = parsed(a)?;
        Some(Assembly { document: a.content.clone(), ..d })
    });
    let setup = row(SETUP);
    let setup_data: Option<SetupRow> = setup.and_then(parsed);
    let kind =
        setup_data.as_ref().map(|s| s.document_type).or(outline.as_ref().map(|o| o.document_type));
    // Runs stored before the setup row kept the material in the outline's row.
    let old_material = outline.as_mut().and_then(|o| o.material.take());
    let material = match setup {
        Some(s) => Some(Material {
            source: setup_data.and_then(|d| d.source),
            characters: s.content.chars().count(),
            text: s.content.clone(),
        }),
        None => old_material,
    };
    to_json(&BlueprintResult {
        material,
        document_type: kind,
        outline,
        sections: Sections::of(written, failed),
        assembly,
        failures: Failures::of(rows),
    })
}

pub(super) fn outcome(result: &Value) -> Option<String> {
    let r: BlueprintResult = typed(result)?;
    let a = r.assembly?;
    let title = r.outline.as_ref().map_or("", |o| o.document_title.as_str());
    let (written, failed) = (r.sections.total_succeeded, r.sections.total_failed);
    let mut s = format!("{}: {} sections, {} words", short(title, 80), written, a.word_count);
    if failed > 0 {
        s.push_str(&format!(", {failed} missing"));
    }
    if a.fallback.is_some() {
        s.push_str(" (not assembled)");
    }
    Some(s)
}

// ---- the export's report -------------------------------------------------------------------

/// The result as the export's report: the document (its title, type and who outlined and
/// assembled it), the outline's sections as a table (length, author, words, topics covered,
/// written or failed), the key topics a section left out, the TODOs the document still holds
/// and what the outline did not state.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<BlueprintResult>(result) else { return String::new() };
    let mut out = String::new();
    let o = r.outline.as_ref();
    let planned = o.map_or(&[][..], |o| &o.sections);
    let kind = o
        .map(|o| o.document_type_label.as_str())
        .or_else(|| r.document_type.map(DocumentType::label));
    if let Some(o) = o {
        let title =
            if o.document_title_defaulted { "no title stated" } else { o.document_title.as_str() };
        let mut line = format!("**Document:** {title}");
        if let Some(k) = kind {
            line.push_str(&format!(" ({k})"));
        }
        line.push_str(&format!(", outlined by {}", o.model));
        if let Some(f) = &o.fallback_from {
            line.push_str(&format!(" in place of {f}"));
        }
        line.push_str(&format!("; {}.", count(planned.len() as u64, "section", "sections")));
        out.push_str(&format!("{line}\n\n"));
    } else if let Some(k) = kind {
        out.push_str(&format!("**Document:** {k}; no outline was written.\n\n"));
    }
    if let Some(a) = &r.assembly {
        if a.fallback.is_some() {
            out.push_str(
                "**Not assembled:** the assembler failed, so the document is the sections as \
                 written, in order.\n\n",
            );
        } else if let Some(m) = &a.model {
            let mut line = format!("**Assembled by:** {m}");
            if let Some(f) = &a.fallback_from {
                line.push_str(&format!(" (in place of {f})"));
            }
            line.push_str(&format!(", {}", count(a.word_count as u64, "word", "words")));
            if a.condensed {
                line.push_str(
                    "; the sections were too long to give whole and went to it condensed",
                );
            }
            out.push_str(&format!("{line}.\n\n"));
        }
    }
    let mut left_out = Vec::new();
    let rows: Vec<Vec<String>> = planned
        .iter()
        .map(|sec| {
            let n = sec.number;
            let length = sec.length.name().to_lowercase();
            let length = if sec.length_defaulted {
                format!("not stated ({length} used)")
            } else {
                format!("{length} ({} words)", sec.target_words)
            };
            let w = r.sections.sections.iter().find(|w| w.section_number == n);
            let f = r.sections.failed_sections.iter().find(|f| f.section_number == n);
            let author = w.map(|w| &w.model).or(f.map(|f| &f.model)).unwrap_or(&sec.assigned_model);
            let (words, topics, state) = match (w, f) {
                (Some(w), _) => {
                    let covered = w.key_topics_covered.len();
                    let missing = &w.key_topics_missing;
                    if !missing.is_empty() {
                        left_out.push(format!(
                            "- section {n} ({}): {}",
                            sec.title,
                            missing.join("; ")
                        ));
                    }
                    (
                        w.word_count.to_string(),
                        format!("{covered} of {}", covered + missing.len()),
                        "written".to_string(),
                    )
                }
                (None, Some(f)) => (String::new(), String::new(), format!("failed ({})", f.error)),
                (None, None) => (String::new(), String::new(), "not written".into()),
            };
            vec![n.to_string(), sec.title.clone(), length, author.clone(), words, topics, state]
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
    let todos = r.assembly.as_ref().map_or(&[][..], |a| &a.todo_markers);
    if !todos.is_empty() {
        let list: Vec<String> = todos.iter().map(|t| format!("- {t}")).collect();
        out.push_str(&format!("**Still to do in the document:**\n\n{}\n\n", list.join("\n")));
    }
    let warnings = o.map_or(&[][..], |o| &o.warnings);
    if !warnings.is_empty() {
        let list: Vec<String> = warnings.iter().map(|w| format!("- {w}")).collect();
        out.push_str(&format!("**About the outline:**\n\n{}\n", list.join("\n")));
    }
    out
}
