//! Blueprint's prompts: the outline, each section, and the assembly.

use super::*;

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

/// The outline prompt ending in the spec's `DOCUMENT TITLE:` / `SECTION <n>:` format, or, given
/// the outline's schema, in its JSON (the same instructions otherwise).
pub fn outline_prompt(kind: DocumentType, material: &str, schema: Option<&ReplySchema>) -> String {
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
            sec.length.name(),
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
