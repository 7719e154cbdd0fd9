//! Reading a reviewer's reply (scores, findings, strengths; in text or by its reply schema) and the
//! consolidator's action items.

use super::*;

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
pub(super) const SUMMARY_CHARS: usize = 1_000;

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

// ---- reading replies -----------------------------------------------------------------------

pub const SEVERITIES: [&str; 4] = ["CRITICAL", "MAJOR", "MINOR", "SUGGESTION"];

/// One criterion's score as a review states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    pub criterion: String,
    /// 1-5; null when the review states none (or one outside 1-5).
    pub score: Option<u32>,
    pub weight: u32,
    pub justification: Option<String>,
}

/// One finding of a review, renumbered 1..k in review order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    let m = regex!(r"-?\d+(?:[.,]\d+)?").find(text)?;
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
    let line_re =
        regex!(r"^(.{2,100}?)\s*(?:\*\*|__)?\s*:(?:\s*(?:\*\*|__))*\s*(-?\d+(?:[.,]\d+)?)");
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
    let found: Vec<String> = regex!(r"(?i)\b(critical|major|minor|suggestion)\b")
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

pub(super) fn finding_heading(line: &str) -> Option<(u64, String)> {
    let c = regex!(r"(?i)^finding\s*#?\s*(\d{1,6})\s*(?:\*\*|__)?\s*(?:[:.\-–—]\s*(.*))?$")
        .captures(line)?;
    Some((c[1].parse().ok()?, unmark(c.get(2).map_or("", |m| m.as_str()))))
}

const SPANNING: [&str; 3] = ["description", "impact", "recommendation"];

fn finding_field(line: &str) -> Option<(String, &str)> {
    let c = regex!(r"(?i)^(category|severity|location|description|impact|recommendation)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?")
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
    let c = regex!(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(.+)$").captures(raw)?;
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionItem {
    /// The first bracketed tag's severity; null when it names none.
    pub severity: Option<String>,
    pub text: String,
    /// `Effort: Low|Medium|High`; null when not stated.
    pub effort: Option<String>,
}

/// The numbered items under `Prioritized Action Items` (answer part only).
pub fn read_action_items(reply: &str) -> Vec<ActionItem> {
    let head = regex!(r"(?i)^prioriti[sz]ed\s+action\s+items\b");
    let item = regex!(r"^\s*(?:\*\*|__)?\d{1,3}[.)](?:\*\*|__)?\s+(.+)$");
    let tag = regex!(r"\[([^\]\n]{1,40})\]");
    let effort =
        regex!(r"(?i)\beffort\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?\s*(low|medium|high)\b");
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
