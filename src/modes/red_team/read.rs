//! Reading the attacker's, defender's and synthesizer's replies: the text readers, the reply
//! schemas and their JSON readers.

use super::*;

pub const SEVERITIES: [&str; 4] = ["CRITICAL", "HIGH", "MEDIUM", "LOW"];

/// One finding of an attack report, renumbered 1..k in report order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The finding's number in the round (1..k, in report order).
    pub number: usize,
    /// The number the attacker gave it.
    pub reported_number: u64,
    pub title: String,
    /// CRITICAL, HIGH, MEDIUM or LOW.
    pub severity: String,
    /// The attacker stated no severity and MEDIUM was used.
    pub severity_defaulted: bool,
    /// Where in the content the weakness is, as the attacker put it.
    pub location: Option<String>,
    /// What the weakness is.
    pub vulnerability: Option<String>,
    /// How an attacker could use it.
    pub exploit_scenario: Option<String>,
}

/// An attack report as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttackReading {
    pub findings: Vec<Finding>,
    pub reported_summary: Option<String>,
    pub overall_risk: Option<String>,
    pub no_flaws: bool,
    pub parse_success: bool,
}

/// `label:` at the start of a bare line (markup allowed around the label); the value after it.
fn field<'a>(line: &'a str, labels: &Regex) -> Option<(String, &'a str)> {
    let c = labels.captures(line)?;
    let name = c.get(1)?.as_str().to_lowercase();
    let end = c.get(0)?.end();
    Some((name, &line[end..]))
}

pub(super) fn finding_heading(line: &str) -> Option<(u64, String)> {
    let c = regex!(r"(?i)^finding\s*#?\s*(\d{1,6})\s*(?:\*\*|__)?\s*[:.\-–—]\s*(.*)$")
        .captures(line)?;
    Some((c[1].parse().ok()?, unbold(&c[2])))
}

fn attack_field(line: &str) -> Option<(String, &str)> {
    field(
        line,
        regex!(
            r"(?i)^(severity|location|vulnerability|exploit\s+scenario)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?"
        ),
    )
}

fn is_summary(line: &str) -> bool {
    regex!(r"(?i)^summary\s*(?:\*\*|__)?\s*:").is_match(line)
}

/// The most severe level a value names; None when it names none.
pub fn severity_of(value: &str) -> Option<&'static str> {
    let found: Vec<&str> = regex!(r"(?i)\b(critical|high|medium|low)\b")
        .find_iter(value)
        .map(|m| m.as_str())
        .collect();
    SEVERITIES.into_iter().find(|s| found.iter().any(|f| f.eq_ignore_ascii_case(s)))
}

/// A heading and the `Label: value` fields under it (names lower-case, single-spaced).
struct FieldBlock<H> {
    head: H,
    fields: Vec<(String, String)>,
}

impl<H> FieldBlock<H> {
    fn has(&self, name: &str) -> bool {
        self.fields.iter().any(|(n, _)| n == name)
    }

    /// A field's value, trimmed, when not empty.
    fn get(&self, name: &str) -> Option<String> {
        let v = self.fields.iter().find(|(n, _)| n == name)?.1.trim();
        (!v.is_empty()).then(|| v.to_string())
    }
}

/// Blocks from a `heading` line to the next heading or an `ends` line. Within a block a
/// field's first occurrence wins; the fields in `multi` span lines until the next field.
fn read_blocks<H>(
    lines: &[&str],
    heading: impl Fn(&str) -> Option<H>,
    field: impl Fn(&str) -> Option<(String, &str)>,
    ends: impl Fn(&str) -> bool,
    multi: &[&str],
) -> Vec<FieldBlock<H>> {
    let mut blocks: Vec<FieldBlock<H>> = Vec::new();
    let mut open = false;
    // The index of the multi-line field being read in the last block.
    let mut spanning: Option<usize> = None;
    for raw in lines {
        let line = bare(raw);
        if let Some(head) = heading(line) {
            blocks.push(FieldBlock { head, fields: Vec::new() });
            (open, spanning) = (true, None);
            continue;
        }
        if ends(line) {
            (open, spanning) = (false, None);
            continue;
        }
        let Some(b) = blocks.last_mut().filter(|_| open) else { continue };
        if let Some((name, value)) = field(line) {
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            spanning = None;
            if !b.has(&name) {
                if multi.contains(&name.as_str()) {
                    spanning = Some(b.fields.len());
                }
                b.fields.push((name, unbold(value)));
            }
            continue;
        }
        if let Some(v) = spanning.and_then(|i| b.fields.get_mut(i)) {
            if !v.1.is_empty() {
                v.1.push('\n');
            }
            v.1.push_str(raw.trim_end());
        }
    }
    blocks
}

/// Reads an attack report (its answer part: a reasoning trace is never read).
pub fn read_attack(reply: &str) -> AttackReading {
    let text = answer_text(reply);
    let lines: Vec<&str> = text.lines().collect();
    let none_re = regex!(r"(?i)^findings\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*none\b");
    let none_stated = lines.iter().any(|l| none_re.is_match(bare(l)));
    let summary_at = lines.iter().position(|l| is_summary(bare(l)));
    let blocks = read_blocks(
        &lines,
        finding_heading,
        attack_field,
        is_summary,
        &["vulnerability", "exploit scenario"],
    );
    let findings: Vec<Finding> = blocks
        .into_iter()
        .filter(|b| b.has("severity") || b.has("location") || b.has("vulnerability"))
        .enumerate()
        .map(|(i, b)| {
            let named = b.get("severity").as_deref().and_then(severity_of);
            Finding {
                number: i + 1,
                reported_number: b.head.0,
                title: b.head.1.clone(),
                severity: named.unwrap_or("MEDIUM").to_string(),
                severity_defaulted: named.is_none(),
                location: b.get("location"),
                vulnerability: b.get("vulnerability"),
                exploit_scenario: b.get("exploit scenario"),
            }
        })
        .collect();
    let reported_summary = summary_at.map(|i| lines[i..].join("\n").trim().to_string());
    let risk_re = regex!(r"(?i)^overall\s+risk\s*(?:\*\*|__)?\s*:\s*(.*)$");
    let overall_risk = lines
        .iter()
        .rev()
        .find_map(|l| risk_re.captures(bare(l)).map(|c| unbold(&c[1])))
        .filter(|r| !r.is_empty());
    let no_flaws = findings.is_empty() && none_stated;
    AttackReading {
        parse_success: !findings.is_empty() || no_flaws,
        findings,
        reported_summary,
        overall_risk,
        no_flaws,
    }
}

/// Counts of findings by severity (every level present, in order of severity).
pub fn severity_counts<'a>(severities: impl Iterator<Item = &'a str>) -> SeverityCounts {
    let mut counts = SeverityCounts::default();
    for s in severities {
        match s {
            "CRITICAL" => counts.critical += 1,
            "HIGH" => counts.high += 1,
            "MEDIUM" => counts.medium += 1,
            "LOW" => counts.low += 1,
            _ => {}
        }
    }
    counts
}

// ---- structured replies --------------------------------------------------------------------

/// The attack's reply schema's name (the sim answers it by this name).
pub const ATTACK_SCHEMA: &str = "red_team_attack";
/// The defense's reply schema's name.
pub const DEFENSE_SCHEMA: &str = "red_team_defense";
/// The most findings an attack may list as JSON: a grammar-bound small model stops there
/// instead of looping, and a real report rarely holds more.
pub const MAX_JSON_FINDINGS: usize = 12;
/// Bounds of the free-text fields (a small model looping inside a string still ends).
pub(super) const TITLE_CHARS: usize = 120;
const LOCATION_CHARS: usize = 200;
const PROSE_CHARS: usize = 800;
const SUMMARY_CHARS: usize = 400;

/// The verdicts a defense may give a finding.
pub const VERDICTS: [&str; 2] = ["ACCEPT", "REBUT"];

/// The attack as JSON: the reasoning, then every finding with its severity (one of the four
/// levels) and fields, then the overall risk. An empty list states that nothing was found
/// (the text's `FINDINGS: NONE`).
pub fn attack_schema() -> Arc<ReplySchema> {
    let finding = schema::object([
        ("title", schema::described(schema::text(TITLE_CHARS), "a short name for the weakness")),
        ("severity", schema::described(schema::one_of(&SEVERITIES), "how severe the weakness is")),
        (
            "location",
            schema::described(schema::text(LOCATION_CHARS), "where it is (a section number)"),
        ),
        ("vulnerability", schema::described(schema::text(PROSE_CHARS), "what is wrong")),
        (
            "exploitScenario",
            schema::described(schema::text(PROSE_CHARS), "how an attacker exploits it"),
        ),
    ]);
    ReplySchema::new(
        ATTACK_SCHEMA,
        schema::reasoned([
            (
                "findings",
                schema::described(
                    schema::list(finding, 0, MAX_JSON_FINDINGS),
                    "every weakness you found, most severe first; an empty list if you found none",
                ),
            ),
            (
                "overallRisk",
                schema::described(schema::text(SUMMARY_CHARS), "the overall risk, in a sentence"),
            ),
        ]),
    )
    .listing("findings")
}

/// The longest revised content a defense's JSON may carry: room to grow the content it
/// revises (twice its length, at least 4,000 characters), and still a bound.
pub fn revised_max_chars(current_chars: usize) -> usize {
    current_chars.saturating_mul(2).max(4_000)
}

/// The defense as JSON against `findings` findings, revising content of `current_chars`
/// characters: the reasoning, one response per finding (its number 1..k, ACCEPT or REBUT, why,
/// and the change), a summary, and the complete revised content. Without findings read one by
/// one (the defender gets the raw report), there are no responses to give.
pub fn defense_schema(findings: usize, current_chars: usize) -> Arc<ReplySchema> {
    let mut fields = Vec::new();
    if findings > 0 {
        let response = schema::object([
            (
                "finding",
                schema::described(
                    schema::integer(1, findings as i64),
                    "the number of the finding you answer",
                ),
            ),
            (
                "verdict",
                schema::described(
                    schema::one_of(&VERDICTS),
                    "ACCEPT if the finding is valid and you fix it, REBUT if it is not",
                ),
            ),
            ("reasoning", schema::described(schema::text(PROSE_CHARS), "why")),
            (
                "revision",
                schema::described(
                    schema::text(PROSE_CHARS),
                    "the change you make, or an empty string for a rebuttal",
                ),
            ),
        ]);
        fields.push((
            "responses",
            schema::described(
                schema::list(response, findings, findings),
                "one response to every finding, in the order of the findings",
            ),
        ));
    }
    fields.push((
        "summary",
        schema::described(schema::text(SUMMARY_CHARS), "a short summary of your defense"),
    ));
    fields.push((
        "revisedContent",
        schema::described(
            schema::text(revised_max_chars(current_chars)),
            "the complete revised content, all of it, with the accepted fixes applied",
        ),
    ));
    ReplySchema::new(DEFENSE_SCHEMA, schema::reasoned(fields)).listing("responses")
}

/// A JSON string field, trimmed, when not empty.
fn json_text(v: &Value, key: &str) -> Option<String> {
    let t = v.get(key)?.as_str()?.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// Reads an attack report: from its JSON when it fits `schema` (its findings in order,
/// numbered 1..k; none listed is no flaws), or from the findings complete before a cut when
/// its JSON stopped inside the list (`json_cut`: never "no flaws", a cut list holds at least
/// one), else by its text ([`read_attack`]). Says where it was read from; None when nothing
/// was read (`parseSuccess: false`).
pub fn read_attack_reply(reply: &str, schema: &ReplySchema) -> (AttackReading, Option<ReadFrom>) {
    let from_json = |v: &Value| {
        let findings = v
            .get("findings")?
            .as_array()?
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let severity = f.get("severity")?.as_str()?;
                let severity = SEVERITIES.into_iter().find(|s| *s == severity)?;
                Some(Finding {
                    number: i + 1,
                    reported_number: i as u64 + 1,
                    title: json_text(f, "title").unwrap_or_default(),
                    severity: severity.to_string(),
                    severity_defaulted: false,
                    location: json_text(f, "location"),
                    vulnerability: json_text(f, "vulnerability"),
                    exploit_scenario: json_text(f, "exploitScenario"),
                })
            })
            .collect::<Option<Vec<Finding>>>()?;
        let no_flaws = findings.is_empty();
        Some(AttackReading {
            findings,
            reported_summary: None,
            overall_risk: json_text(v, "overallRisk"),
            no_flaws,
            parse_success: true,
        })
    };
    schema.read_reply(reply, from_json, read_attack, |r| r.parse_success)
}

/// A revision that says there is none (`N/A`, `none`, `-`, empty).
pub(super) fn no_revision(r: &str) -> bool {
    matches!(r.to_lowercase().trim_end_matches('.'), "" | "n/a" | "na" | "none" | "-" | "—")
}

/// Reads a defense against `findings`: from its JSON when it fits `schema` (each finding
/// answered by the first response naming its number, as in text; the revised content), from
/// the responses complete before the cut when its JSON was cut off at its token cap (the
/// findings after it unaddressed, no revised content), else by its text ([`read_defense`]). Says where it was read from; None when it answered no
/// finding and gave no revised content.
pub fn read_defense_reply(
    reply: &str,
    findings: &[Finding],
    schema: &ReplySchema,
) -> (DefenseReading, Option<ReadFrom>) {
    let from_json = |v: &Value| {
        let given: Vec<&Value> =
            v.get("responses").and_then(Value::as_array).into_iter().flatten().collect();
        let responses = findings
            .iter()
            .map(|f| {
                let base = Response {
                    finding: f.number,
                    title: f.title.clone(),
                    severity: f.severity.clone(),
                    verdict: "UNADDRESSED".into(),
                    verdict_defaulted: false,
                    reasoning: None,
                    revision: None,
                };
                let answer = given.iter().find(|r| r["finding"].as_u64() == Some(f.number as u64));
                let Some(a) = answer else { return base };
                let verdict =
                    a["verdict"].as_str().and_then(|v| VERDICTS.into_iter().find(|x| *x == v));
                Response {
                    verdict: verdict.unwrap_or("REBUT").into(),
                    verdict_defaulted: verdict.is_none(),
                    reasoning: json_text(a, "reasoning"),
                    revision: json_text(a, "revision").filter(|r| !no_revision(r)),
                    ..base
                }
            })
            .collect();
        Some(DefenseReading { responses, revised_content: json_text(v, "revisedContent") })
    };
    let answered = |r: &DefenseReading| {
        r.responses.iter().any(|x| x.verdict != "UNADDRESSED") || r.revised_content.is_some()
    };
    schema.read_reply(reply, from_json, |t| read_defense(t, findings), answered)
}

/// The defender's answer to one finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// The finding's number (1..k).
    pub finding: usize,
    /// The finding's title.
    pub title: String,
    /// The finding's severity.
    pub severity: String,
    /// ACCEPT, REBUT or UNADDRESSED (no response matched the finding).
    pub verdict: String,
    /// The response stated no verdict and REBUT was used.
    pub verdict_defaulted: bool,
    /// Why the defender accepted or rebutted it.
    pub reasoning: Option<String>,
    /// The change made for an accepted finding.
    pub revision: Option<String>,
}

/// A defense as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DefenseReading {
    /// One per finding, in finding order.
    pub responses: Vec<Response>,
    /// The complete revised content, when the reply gave one.
    pub revised_content: Option<String>,
}

fn response_heading(line: &str) -> Option<(Option<u64>, String)> {
    let c = regex!(
        r"(?i)^response\s+to\s+finding\s*#?\s*(\d{1,6})?\s*(?:\*\*|__)?\s*(?:[:.\-–—]\s*(.*))?$"
    )
    .captures(line)?;
    let number = c.get(1).and_then(|n| n.as_str().parse().ok());
    let title = c.get(2).map(|t| unbold(t.as_str())).unwrap_or_default();
    if number.is_none() && title.is_empty() {
        return None;
    }
    Some((number, title))
}

fn defense_field(line: &str) -> Option<(String, &str)> {
    field(line, regex!(r"(?i)^(verdict|reasoning|revision)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?"))
}

fn revised_marker(line: &str) -> Option<usize> {
    regex!(r"(?i)^revised\s+content\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?").find(line).map(|m| m.end())
}

fn is_defense_summary(line: &str) -> bool {
    regex!(r"(?i)^defen[cs]e\s+summary\s*(?:\*\*|__)?\s*:").is_match(line)
}

/// ACCEPT or REBUT, whichever the value names first.
fn verdict_of(value: &str) -> Option<&'static str> {
    let v = value.to_uppercase();
    match (v.find("ACCEPT"), v.find("REBUT")) {
        (Some(a), Some(r)) => Some(if a < r { "ACCEPT" } else { "REBUT" }),
        (Some(_), None) => Some("ACCEPT"),
        (None, Some(_)) => Some("REBUT"),
        (None, None) => None,
    }
}

/// Reads a defense against `findings` (its answer part).
pub fn read_defense(reply: &str, findings: &[Finding]) -> DefenseReading {
    let text = answer_text(reply);
    let lines: Vec<&str> = text.lines().collect();
    // The revised content: everything after the marker on the last marker line.
    let mut revised_content = None;
    let mut end = lines.len();
    if let Some((i, at)) = lines.iter().enumerate().rev().find_map(|(i, l)| {
        let b = bare(l);
        revised_marker(b).map(|m| (i, l.len() - b.len() + m))
    }) {
        let mut rest = lines[i][at..].to_string();
        for l in &lines[i + 1..] {
            rest.push('\n');
            rest.push_str(l);
        }
        let rest = rest.trim();
        revised_content = (!rest.is_empty()).then(|| rest.to_string());
        end = i;
    }
    let answered = read_blocks(
        &lines[..end],
        response_heading,
        defense_field,
        is_defense_summary,
        &["reasoning", "revision"],
    );
    // Each finding takes the first response naming its number, else the first with its title
    // (a response naming another finding's number is that finding's). Queues by number and by
    // title keep this linear, however many blocks an adversarial reply holds.
    use std::collections::{HashMap, HashSet, VecDeque};
    let numbers: HashSet<u64> = findings.iter().map(|f| f.number as u64).collect();
    let mut by_number: HashMap<u64, VecDeque<usize>> = HashMap::new();
    let mut by_title: HashMap<String, VecDeque<usize>> = HashMap::new();
    for (j, a) in answered.iter().enumerate() {
        match a.head.0.filter(|n| numbers.contains(n)) {
            Some(n) => by_number.entry(n).or_default().push_back(j),
            None => by_title.entry(a.head.1.to_lowercase()).or_default().push_back(j),
        }
    }
    let mut matched: Vec<Option<usize>> = findings
        .iter()
        .map(|f| by_number.get_mut(&(f.number as u64)).and_then(VecDeque::pop_front))
        .collect();
    for (f, slot) in findings.iter().zip(matched.iter_mut()) {
        let title = f.title.trim().to_lowercase();
        if slot.is_none() && !title.is_empty() {
            *slot = by_title.get_mut(&title).and_then(VecDeque::pop_front);
        }
    }
    let responses = findings
        .iter()
        .zip(matched)
        .map(|(f, m)| {
            let base = Response {
                finding: f.number,
                title: f.title.clone(),
                severity: f.severity.clone(),
                verdict: "UNADDRESSED".into(),
                verdict_defaulted: false,
                reasoning: None,
                revision: None,
            };
            let Some(j) = m else { return base };
            let a = &answered[j];
            let verdict = a.get("verdict").as_deref().and_then(verdict_of);
            let revision = a.get("revision").filter(|r| !no_revision(r));
            Response {
                verdict: verdict.unwrap_or("REBUT").into(),
                verdict_defaulted: verdict.is_none(),
                reasoning: a.get("reasoning"),
                revision,
                ..base
            }
        })
        .collect();
    DefenseReading { responses, revised_content }
}

/// A synthesis as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisReading {
    pub hardened_output: String,
    pub audit_summary: Option<String>,
    pub hardening_confidence: Option<String>,
}

fn heading_named(line: &str, name: &str) -> bool {
    let t = line.trim();
    if !t.starts_with('#') && !t.starts_with("**") && !t.starts_with("__") {
        return false;
    }
    let inner = bare(t).trim_end().trim_end_matches(['*', '_', ':']).trim();
    inner.eq_ignore_ascii_case(name)
}

/// Reads the synthesis (its answer part).
pub fn read_synthesis(reply: &str) -> SynthesisReading {
    let text = answer_text(reply);
    let lines: Vec<&str> = text.lines().collect();
    let hardened = lines.iter().position(|l| heading_named(l, "hardened output"));
    let audit = lines.iter().position(|l| heading_named(l, "vulnerability audit summary"));
    let join = |from: usize, to: usize| lines[from..to].join("\n").trim().to_string();
    let hardened_output = match (hardened, audit) {
        (Some(h), Some(a)) if a > h => join(h + 1, a),
        (Some(h), _) => join(h + 1, lines.len()),
        (None, Some(a)) if a > 0 => join(0, a),
        _ => text.trim().to_string(),
    };
    let audit_summary = audit.map(|a| join(a + 1, lines.len())).filter(|s| !s.is_empty());
    let conf = regex!(r"(?i)^hardening\s+confidence\s*(?:\*\*|__)?\s*:\s*(.*)$");
    let hardening_confidence = lines
        .iter()
        .rev()
        .find_map(|l| conf.captures(bare(l)).map(|c| unbold(&c[1])))
        .and_then(|v| {
            let word = v.split(|c: char| !c.is_alphabetic()).next().unwrap_or("").to_lowercase();
            match word.as_str() {
                "high" => Some("High".to_string()),
                "medium" => Some("Medium".to_string()),
                "low" => Some("Low".to_string()),
                _ => None,
            }
        });
    SynthesisReading { hardened_output, audit_summary, hardening_confidence }
}
