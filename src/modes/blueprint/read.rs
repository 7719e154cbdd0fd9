//! Reading the architect's outline (in text or by its reply schema) and the checks on the written
//! sections: topic coverage, TODO markers.

use super::*;

/// A section's target length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Length {
    Short,
    Medium,
    Long,
}

impl Length {
    /// `Short`, `Medium`, `Long`.
    pub fn name(self) -> &'static str {
        match self {
            Length::Short => "Short",
            Length::Medium => "Medium",
            Length::Long => "Long",
        }
    }

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
        let named: HashSet<String> = regex!(r"(?i)\b(short|medium|long)\b")
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
    if echoed_placeholder(&v) {
        String::new()
    } else {
        v
    }
}

/// `SECTION <n>` followed by `:`, `.` or a dash: the number and the rest of the line.
pub(super) fn section_heading(line: &str) -> Option<(u64, String)> {
    let c = regex!(r"(?i)^section\s+#?\s*(\d{1,6})\s*(?:\*\*|__)?\s*[:.\-–—]\s*(.*)$")
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
    labelled(
        line,
        regex!(
            r"(?i)^(description|key\s+topics|length|source\s+coverage)\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?"
        ),
    )
}

fn summary_field(line: &str) -> Option<(String, &str)> {
    labelled(
        line,
        regex!(
            r"(?i)^(total\s+sections|estimated\s+total\s+length|key\s+themes)\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?"
        ),
    )
}

fn title_line(line: &str) -> Option<&str> {
    labelled(line, regex!(r"(?i)^(document\s+title)\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?"))
        .map(|(_, v)| v)
}

fn is_summary_marker(line: &str) -> bool {
    regex!(r"(?i)^document\s+summary\s*(?:\*\*|__)?\s*:").is_match(line)
}

/// A list line (`- x`, `* x`, `• x`, `1. x`, `2) x`): its item.
fn list_item(raw: &str) -> Option<String> {
    let c = regex!(r"^\s*(?:[-*+•·]|\d{1,3}[.)])\s+(.*)$").captures(raw)?;
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
    let total_sections_stated = total
        .as_deref()
        .and_then(|t| regex!(r"^\D{0,20}?(\d{1,6})\b").captures(t))
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
    let enough = |r: &OutlineReading| r.sections.len() >= MIN_SECTIONS;
    schema.read_reply(reply, outline_from_json, read_outline, enough)
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
    regex!(r"(?i)\[\s*todo\s*:([^\]]*)\]")
        .captures_iter(document)
        .map(|c| c[1].trim().to_string())
        .collect()
}

/// The first `n` words of a text.
pub(super) fn first_words(text: &str, n: usize) -> String {
    text.split_whitespace().take(n).collect::<Vec<_>>().join(" ")
}
