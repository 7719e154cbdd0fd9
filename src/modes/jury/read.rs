//! Reading a juror's reply: the five scores, the verdict and the recommendations, from its
//! text or its schema's JSON, into a [`JurorAssessment`].

use super::*;

// ---- parsing --------------------------------------------------------------------------------

/// A value per dimension (scores, averages or ranges), serialised with the seed's names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Dims<T> {
    pub accuracy: T,
    pub completeness: T,
    pub clarity: T,
    pub relevance: T,
    pub actionability: T,
}

impl<T: Clone> Dims<T> {
    pub fn from_fn(mut f: impl FnMut(usize) -> T) -> Self {
        Dims {
            accuracy: f(0),
            completeness: f(1),
            clarity: f(2),
            relevance: f(3),
            actionability: f(4),
        }
    }

    pub fn get(&self, i: usize) -> &T {
        match i {
            0 => &self.accuracy,
            1 => &self.completeness,
            2 => &self.clarity,
            3 => &self.relevance,
            _ => &self.actionability,
        }
    }
}

pub type DimensionScores = Dims<Option<i64>>;

/// The lowest and highest score the jurors gave a dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Range {
    pub min: i64,
    pub max: i64,
}

/// What one place in a reply says about a dimension: `None` when it holds no score, else the
/// stated score (`Some(None)` when it is out of the 1-10 range, which nulls the dimension).
type Found = Option<Option<i64>>;

fn inline_res() -> &'static [Regex; 5] {
    static RE: OnceLock<[Regex; 5]> = OnceLock::new();
    RE.get_or_init(|| {
        DIMENSIONS.map(|d| {
            // `Accuracy: 8`, `**Accuracy**: 8/10`, `Accuracy — 7.5`, `Accuracy score = 9`,
            // `**Accuracy:** **8**`, `Accuracy (8/10)`.
            Regex::new(&format!(
                r"(?i)\b{d}\b[*_]*[ \t]*(?:score)?[*_]*[ \t]*[:=—–(-][ \t*_]*(-?\d+(?:\.\d+)?)"
            ))
            .unwrap_or_else(|_| unreachable!())
        })
    })
}

fn heading_score_re() -> &'static Regex {
    regex!(r"(?i)\bscore[*_]*[ \t]*[:=—–-][ \t*_]*(-?\d+(?:\.\d+)?)")
}

fn tail_re() -> &'static Regex {
    // What may follow a number: a scale (`/10`, ` out of 10`, ` of 10`) or a range (`-8`).
    regex!(r"(?i)^[ \t*_]*(?:(?:/|out[ \t]+of\b|of\b)[ \t*_]*(\d+(?:\.\d+)?)|([-–][ \t]*\d))")
}

/// A score: null outside 1-10 (`0.99`, `10.5`, `11`), else rounded to the nearest integer
/// (`7.5` → 8).
fn score_of(text: &str) -> Option<i64> {
    let v: f64 = text.parse().ok()?;
    (1.0..=10.0).contains(&v).then_some(v.round() as i64)
}

/// A stated number read with what follows it: `8`, `8/10`, `8 out of 10` are scores; a
/// range (`7-8`) or another scale (`4/5`) states none.
fn score_at(number: &str, after: &str) -> Found {
    if let Some(c) = tail_re().captures(after) {
        if c.get(2).is_some() {
            return None;
        }
        if c.get(1).is_some_and(|d| d.as_str().parse::<f64>().ok() != Some(10.0)) {
            return None;
        }
    }
    Some(score_of(number))
}

fn number_re() -> &'static Regex {
    regex!(r"^-?\d+(?:\.\d+)?")
}

/// A table cell or JSON string holding a score: `8`, `**8/10**`, `8 out of 10`.
fn cell_score(cell: &str) -> Found {
    let t = cell.trim().trim_start_matches(['*', '_', ' ']);
    let m = number_re().find(t)?;
    let after = &t[m.end()..];
    // Only a number (with its scale) and markup or a note: not `8 jurors`.
    let rest = tail_re().find(after).map_or(after, |s| &after[s.end()..]);
    let rest = rest.trim_start_matches(['*', '_', ' ']);
    if !(rest.is_empty() || rest.starts_with(['(', '-', '–', '—', ',', '.', ';'])) {
        return None;
    }
    score_at(m.as_str(), after)
}

/// The dimension a cell or key names: `Accuracy`, `**Clarity**`, `3. Relevance`, `accuracy
/// score`.
fn dimension_of(name: &str) -> Option<usize> {
    let t = name.trim().trim_matches(['*', '_', ' ', ':']);
    let t = t.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ')').trim();
    let t = t.trim_matches(['*', '_', ' ', ':']).to_lowercase();
    let t = t.strip_suffix(" score").unwrap_or(&t);
    DIMENSIONS.iter().position(|d| d.eq_ignore_ascii_case(t))
}

fn table_cells(line: &str) -> Option<Vec<&str>> {
    let t = line.trim();
    if !t.contains('|') {
        return None;
    }
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    Some(t.split('|').map(str::trim).collect())
}

fn is_rule(cells: &[&str]) -> bool {
    cells.iter().all(|c| c.contains('-') && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
}

/// Scores in Markdown tables, the last row naming a dimension winning: rows (`| Accuracy |
/// 8 | … |`, the score under the header's `Score` column, else just after the name) or
/// columns (a header naming the dimensions over a row of scores).
fn table_scores(answer: &str) -> [Found; 5] {
    let mut out = [None; 5];
    let lines: Vec<&str> = answer.lines().collect();
    let mut header: Option<Vec<&str>> = None;
    for (i, line) in lines.iter().enumerate() {
        let Some(cells) = table_cells(line) else {
            header = None;
            continue;
        };
        if is_rule(&cells) {
            continue;
        }
        if lines.get(i + 1).and_then(|l| table_cells(l)).is_some_and(|c| is_rule(&c)) {
            header = Some(cells);
            continue;
        }
        if let Some(d) = cells.first().and_then(|c| dimension_of(c)) {
            let col = header
                .as_ref()
                .and_then(|h| h.iter().position(|c| c.to_lowercase().contains("score")))
                .filter(|&k| k > 0)
                .unwrap_or(1);
            if let Some(f) = cells.get(col).and_then(|c| cell_score(c)) {
                out[d] = Some(f);
            }
        } else if let Some(h) = &header {
            for (k, name) in h.iter().enumerate() {
                if let (Some(d), Some(f)) =
                    (dimension_of(name), cells.get(k).and_then(|c| cell_score(c)))
                {
                    out[d] = Some(f);
                }
            }
        }
    }
    out
}

/// A JSON score: a number, a string (`"8/10"`) or an object with a `score`.
fn json_score(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_f64().and_then(|x| score_of(&x.to_string())),
        Value::String(s) => cell_score(s).flatten(),
        Value::Object(o) => {
            o.iter().find(|(k, _)| k.eq_ignore_ascii_case("score")).and_then(|(_, v)| json_score(v))
        }
        _ => None,
    }
}

/// Scores in the last JSON value that has any: `{"scores": {"accuracy": 8, …}}`, the
/// dimensions at the top level, or a list of `{"dimension": …, "score": …}`.
fn json_scores(answer: &str) -> [Found; 5] {
    let field = |o: &serde_json::Map<String, Value>, key: &str| {
        o.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.clone())
    };
    for v in json_values(answer).into_iter().rev() {
        let mut out: [Found; 5] = [None; 5];
        let scores = match &v {
            Value::Object(o) => field(o, "scores").unwrap_or_else(|| v.clone()),
            _ => v.clone(),
        };
        match &scores {
            Value::Object(o) => {
                for (k, s) in o {
                    if let Some(d) = dimension_of(k) {
                        out[d] = Some(json_score(s));
                    }
                }
            }
            Value::Array(items) => {
                for item in items.iter().filter_map(Value::as_object) {
                    let name = field(item, "dimension").or_else(|| field(item, "name"));
                    if let Some(d) = name.as_ref().and_then(Value::as_str).and_then(dimension_of) {
                        out[d] = Some(field(item, "score").as_ref().and_then(json_score));
                    }
                }
            }
            _ => {}
        }
        if out.iter().any(Option::is_some) {
            return out;
        }
    }
    [None; 5]
}

/// The last inline `Dimension: N` that states a score.
fn inline_score(answer: &str, i: usize) -> Found {
    inline_res()[i]
        .captures_iter(answer)
        .filter_map(|c| {
            let m = c.get(1)?;
            score_at(m.as_str(), &answer[m.end()..])
        })
        .last()
}

/// A `Score: N` on one of the three lines under a line naming the dimension (a heading per
/// dimension), before any line naming another dimension or another heading.
fn heading_score(answer: &str, i: usize) -> Found {
    let lines: Vec<&str> = answer.lines().collect();
    let names = |l: &str| {
        let lower = l.to_lowercase();
        (0..5).filter(|&k| contains_word(&lower, &DIMENSIONS[k].to_lowercase())).collect::<Vec<_>>()
    };
    let mut found = None;
    for (n, line) in lines.iter().enumerate() {
        if names(line) != [i] {
            continue;
        }
        for next in lines.iter().skip(n + 1).take(3) {
            if next.trim_start().starts_with('#') || !names(next).is_empty() {
                break;
            }
            if let Some(m) = heading_score_re().captures(next).and_then(|c| c.get(1)) {
                if let Some(f) = score_at(m.as_str(), &next[m.end()..]) {
                    found = Some(f);
                }
                break;
            }
        }
    }
    found
}

fn contains_word(haystack: &str, word: &str) -> bool {
    haystack.match_indices(word).any(|(at, _)| {
        let before = haystack[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after = haystack[at + word.len()..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        before && after
    })
}

/// Reads the five scores from the answer part of a reply (a draft scorecard in a `<think>`
/// block never counts; a reply whose reasoning never closed has none). Per dimension, the
/// first form that states it: JSON, else the last table row (or column) naming it, else the
/// last inline `Dimension: N`, else a `Score: N` under a line naming it. The last match of a
/// form wins, so a model that quotes a template or the content before its own scorecard is
/// read by its scorecard. A stated number outside 1-10 nulls its dimension; a range (`7-8`)
/// or another scale (`4/5`) is not a score.
pub fn parse_scores(text: &str) -> DimensionScores {
    let split = split_reasoning(text);
    if split.unclosed {
        return Dims::default();
    }
    let answer = split.answer.as_ref();
    let json = json_scores(answer);
    let table = table_scores(answer);
    Dims::from_fn(|i| {
        json[i]
            .or(table[i])
            .or_else(|| inline_score(answer, i))
            .or_else(|| heading_score(answer, i))
            .flatten()
    })
}

/// A verdict on the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Approve,
    Revise,
    Reject,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "APPROVE",
            Verdict::Revise => "REVISE",
            Verdict::Reject => "REJECT",
        }
    }

    /// The seed's thresholds: >= 7 APPROVE, >= 4 REVISE, else REJECT.
    pub fn from_average(avg: f64) -> Self {
        if avg >= 7.0 {
            Verdict::Approve
        } else if avg >= 4.0 {
            Verdict::Revise
        } else {
            Verdict::Reject
        }
    }
}

/// A verdict word, in English or a few other languages (`APROBAR`, `REJETER`, `ABLEHNEN`).
fn verdict_word(word: &str) -> Option<Verdict> {
    match word.to_lowercase().as_str() {
        "approve" | "approved" | "aprobar" | "aprobado" | "aprovar" | "aprovado" | "approuver"
        | "approuvé" | "approvare" | "approvato" | "annehmen" | "angenommen" | "genehmigen"
        | "genehmigt" | "goedkeuren" | "goedgekeurd" | "zatwierdzić" => Some(Verdict::Approve),
        "revise" | "revisar" | "réviser" | "reviser" | "rivedere" | "revisionare"
        | "überarbeiten" | "ueberarbeiten" | "herzien" | "poprawić" => Some(Verdict::Revise),
        "reject" | "rejected" | "rechazar" | "rechazado" | "rejeitar" | "rejeitado" | "rejeter"
        | "rejeté" | "respingere" | "respinto" | "rifiutare" | "ablehnen" | "abgelehnt"
        | "afwijzen" | "afgewezen" | "odrzucić" => Some(Verdict::Reject),
        _ => None,
    }
}

fn verdict_labels() -> &'static Labels {
    static L: OnceLock<Labels> = OnceLock::new();
    L.get_or_init(|| {
        Labels::new(
            r"(?:(?:final|my|the\s+jury's)\s+)?verdict(?:\s+final)?|final_?verdict|veredicto(?:\s+final)?|veredito(?:\s+final)?|verdetto(?:\s+finale)?|(?:end)?urteil|oordeel|werdykt",
        )
    })
}

/// Reads a verdict, only where the answer part of the reply states one: the last labelled
/// `VERDICT: X` (also `**Final verdict:** Reject`, `| Verdict | APPROVE |`, a `### Verdict`
/// heading with the word alone under it, `VEREDICTO: APROBAR`, `VERDICT : REJETER`,
/// `URTEIL: ABLEHNEN`), else a JSON `{"verdict": "approve"}`. A verdict word that is only
/// mentioned ("I would not approve", "neither approve nor reject", `[APPROVE|REVISE|REJECT]`)
/// is none, and so is anything inside a reasoning block.
pub fn parse_verdict(text: &str) -> Option<Verdict> {
    let split = split_reasoning(text);
    if split.unclosed {
        return None;
    }
    let answer = split.answer.as_ref();
    if let Some(s) = last_stated(answer, verdict_labels(), verdict_word) {
        return Some(s.value);
    }
    let v = json_field(answer, &["verdict", "finalVerdict", "final_verdict"])?;
    let word = v.as_str()?.trim().trim_matches(['*', '_', '[', ']', '.', ' ']);
    verdict_word(word)
}

/// Items (numbered or bulleted lines) of the last section whose heading contains `heading`.
/// Read on the answer part of the reply: a draft inside a reasoning block has none.
pub fn section_items(text: &str, heading: &str) -> Vec<String> {
    let split = split_reasoning(text);
    if split.unclosed {
        return Vec::new();
    }
    let lines: Vec<&str> = split.answer.lines().collect();
    let h = heading.to_lowercase();
    let is_heading = |l: &str| {
        let t = l.trim();
        t.starts_with('#') || (t.starts_with("**") && t.ends_with("**") && t.len() > 4)
    };
    let Some(start) = lines.iter().rposition(|l| is_heading(l) && l.to_lowercase().contains(&h))
    else {
        return Vec::new();
    };
    let item_re = item_re();
    lines[start + 1..]
        .iter()
        .take_while(|l| !is_heading(l))
        .filter_map(|l| {
            item_re.captures(l).and_then(|c| c.get(1)).map(|m| m.as_str().trim().to_string())
        })
        .filter(|s| !s.is_empty() && !s.starts_with('['))
        .collect()
}

fn item_re() -> &'static Regex {
    regex!(r"^\s*(?:\d+[.)]|[-*•])\s+(.+)$")
}

/// Mean of present values, rounded to one decimal.
pub(super) fn mean(values: &[i64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some(((values.iter().sum::<i64>() as f64 / values.len() as f64) * 10.0).round() / 10.0)
}

pub fn average(scores: &DimensionScores) -> Option<f64> {
    let v: Vec<i64> = (0..5).filter_map(|i| *scores.get(i)).collect();
    mean(&v)
}

// ---- payloads -------------------------------------------------------------------------------

/// A juror's assessment (`juror_complete`'s data, and a juror of the result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JurorAssessment {
    /// The juror (`model #2` for a second juror of one model).
    pub model: String,
    /// The juror's whole assessment.
    pub assessment_text: String,
    /// The scores it gave, 1 to 10 (null where none could be read).
    pub scores: DimensionScores,
    /// The average of its scores, when it gave any.
    pub average: Option<f64>,
    /// Its verdict, when one could be read.
    pub verdict: Option<Verdict>,
    /// Its recommendations.
    pub recommendations: Vec<String>,
    /// How long its call took, in milliseconds.
    pub response_time_ms: i64,
    /// Some of its scores could be read.
    pub parse_success: bool,
    /// Why the verdict or the scores (whichever is missing) could not be read: the juror
    /// `refused`, stopped in `reasoning_only`, or wrote `no_answer` in a readable form. Null
    /// when both were read.
    #[serde(default)]
    pub unparsed: Option<Unparsed>,
    /// Where the scores and verdict were read from (`json` or `text`), when any was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

pub fn assess(model: &str, text: &str, response_time_ms: i64) -> JurorAssessment {
    let scores = parse_scores(text);
    let parse_success = (0..5).any(|i| scores.get(i).is_some());
    let verdict = parse_verdict(text);
    JurorAssessment {
        model: model.to_string(),
        assessment_text: text.to_string(),
        average: average(&scores),
        verdict,
        recommendations: section_items(text, "recommendation"),
        scores,
        response_time_ms,
        parse_success,
        unparsed: (!parse_success || verdict.is_none()).then(|| Unparsed::of(text)),
        read_from: (parse_success || verdict.is_some()).then_some(ReadFrom::Text),
    }
}

/// The name of a juror's reply schema.
pub const JUROR_SCHEMA: &str = "jury_verdict";

/// The five dimensions as the schema and the stored scores name them.
pub(super) const DIMENSION_KEYS: [&str; 5] =
    ["accuracy", "completeness", "clarity", "relevance", "actionability"];

/// The verdict words, as the seed writes them.
const VERDICT_WORDS: [&str; 3] = ["APPROVE", "REVISE", "REJECT"];

/// At most this many recommendations, each at most this long: enough for the seed's
/// "numbered list of specific improvements", bounded so a small model looping in a list or a
/// string still closes the object within its output cap.
const MAX_RECOMMENDATIONS: usize = 5;
const RECOMMENDATION_MAX_CHARS: usize = 200;

/// A juror's reply schema: its reasoning (the justifications and deliberation notes the seed
/// asks for), a whole score from 1 to 10 per dimension, the verdict word, and the
/// recommendations. The same for every run (the dimensions and verdicts are the seed's), built
/// once per run.
pub fn juror_schema() -> Arc<ReplySchema> {
    let scores = schema::object(DIMENSION_KEYS.map(|k| (k, schema::integer(1, 10))));
    ReplySchema::new(
        JUROR_SCHEMA,
        schema::reasoned([
            (
                "scores",
                schema::described(
                    scores,
                    "a score from 1 (terrible) to 10 (exceptional) per dimension",
                ),
            ),
            (
                "verdict",
                schema::described(
                    schema::one_of(&VERDICT_WORDS),
                    "APPROVE (average >= 7), REVISE (average 4-6.9) or REJECT (average < 4)",
                ),
            ),
            (
                "recommendations",
                schema::described(
                    schema::list(schema::text(RECOMMENDATION_MAX_CHARS), 0, MAX_RECOMMENDATIONS),
                    "if REVISE or REJECT: the specific improvements needed (none if APPROVE)",
                ),
            ),
        ]),
    )
}

/// What a juror's JSON states, when it fits the schema and every score and the verdict read as
/// the text reader reads them (a score outside 1-10 or a word that is no verdict is refused,
/// and the text reader then has its say). Recommendations are kept as stated, blank ones left
/// out; the text reader's rule against `[placeholders]` is for the seed's template, which a
/// JSON reply has no copy of.
fn json_assessment(v: &Value) -> Option<(DimensionScores, Verdict, Vec<String>)> {
    let scores = v.get("scores")?;
    let read: Vec<i64> = DIMENSION_KEYS
        .iter()
        .map(|k| scores.get(*k).and_then(Value::as_i64).filter(|s| (1..=10).contains(s)))
        .collect::<Option<_>>()?;
    let verdict = v.get("verdict").and_then(Value::as_str).and_then(verdict_word)?;
    let recommendations = v
        .get("recommendations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty())
        .collect();
    Some((Dims::from_fn(|i| Some(read[i])), verdict, recommendations))
}

/// A juror's reply read from its JSON when it fits `schema` ([`json_assessment`]), else by the
/// text readers ([`assess`]); `read_from` says which, when anything was read.
pub fn assess_reply(
    model: &str,
    text: &str,
    response_time_ms: i64,
    schema: &ReplySchema,
) -> JurorAssessment {
    let from_json = |v: &Value| {
        let (scores, verdict, recommendations) = json_assessment(v)?;
        Some(JurorAssessment {
            model: model.to_string(),
            assessment_text: String::new(),
            average: average(&scores),
            verdict: Some(verdict),
            recommendations,
            scores,
            response_time_ms,
            parse_success: true,
            unparsed: None,
            read_from: None,
        })
    };
    let read = |t: &str| assess(model, t, response_time_ms);
    let usable = |a: &JurorAssessment| a.parse_success || a.verdict.is_some();
    let (mut assessment, from) = schema.read_reply(text, from_json, read, usable);
    // What the juror wrote, whichever way it was read.
    assessment.assessment_text = text.to_string();
    assessment.read_from = from;
    assessment
}
