//! Reading the specialists' and the synthesizer's replies: sections, lists, tables, ratings, the
//! risk matrix, and the report's reply schema and its JSON reader.

use super::*;

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
    let inner = regex!(r"^\d{1,2}[.)]\s+").replace(inner, "");
    let inner = regex!(r"\s*\([^)]*\)\s*$").replace(&inner, "");
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
    let t = line.trim_start();
    let m = regex!(r"^(?:\d{1,3}[.)]|[-*•])(?:\s+|$)").find(t)?;
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
    let m = regex!(r"-?\d+(?:\.\d+)?").find(text)?;
    let v: f64 = m.as_str().parse().ok()?;
    if !(1.0..=5.0).contains(&v) {
        return None;
    }
    Some((v + 0.5).floor() as u8)
}

/// One criterion's rating as read from a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CriterionScore {
    /// The criterion, as the role states it.
    pub criterion: String,
    /// 1-5, or null when the report states none (or one outside 1-5).
    pub score: Option<u8>,
    /// What the report says beside the rating; null when nothing.
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
    let c =
        regex!(r"^(-?\d+(?:\.\d+)?)(?:\s*/\s*5(?:\.0)?)?(?:\s*(?:[-–—,;(.:]|\*\*)\s*(.*)|\s*)$")
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
pub(super) const ITEM_CHARS: usize = 300;
pub(super) const ANALYSIS_CHARS: usize = 3_500;

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RiskRow {
    /// The area at risk.
    pub domain: String,
    /// Critical, High, Medium or Low: the most severe one the cell names; null when it names
    /// none.
    pub level: Option<String>,
    /// The concern.
    pub concern: String,
    /// The action the synthesis recommends.
    pub action: String,
    /// The specialists who raised it.
    pub sources: Vec<String>,
}

/// The most severe level a text names (`High`, `**CRITICAL**`, `Medium-High` → High).
pub fn level_of(text: &str) -> Option<&'static str> {
    let found: Vec<String> = regex!(r"(?i)\b(critical|high|medium|low)\b")
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

/// A synthesis's sections, each one's text ("" when missing).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sections<'a> {
    /// What the specialists agree on.
    pub convergent_findings: &'a str,
    /// Where they differ (a table).
    pub divergent_findings: &'a str,
    /// The consolidated risk matrix (a table).
    pub consolidated_risk_matrix: &'a str,
    /// The unified recommendations.
    pub unified_recommendations: &'a str,
    /// The executive summary.
    pub executive_summary: &'a str,
}

/// The items a synthesis's sections hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Convergent findings (list items).
    pub convergent_findings: usize,
    /// Divergent findings (table body rows).
    pub divergent_findings: usize,
    /// Rows of the risk matrix.
    pub risk_matrix: usize,
    /// Unified recommendations (list items).
    pub unified_recommendations: usize,
}

/// A synthesis as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisReading {
    /// Each section's text ("" when missing): a [`Sections`], kept as JSON so that a reader
    /// takes a section by its key.
    pub sections: Value,
    /// List items (table body rows for divergent findings and the risk matrix).
    pub counts: Counts,
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
        counts: Counts {
            convergent_findings: count(&s[0]),
            divergent_findings: body_rows(&s[1]),
            risk_matrix: risk_matrix.len(),
            unified_recommendations: count(&s[3]),
        },
        sections: to_json(&Sections {
            convergent_findings: &s[0],
            divergent_findings: &s[1],
            consolidated_risk_matrix: &s[2],
            unified_recommendations: &s[3],
            executive_summary: &s[4],
        }),
        top_risk: top_risk(&risk_matrix),
        risk_matrix,
    }
}
