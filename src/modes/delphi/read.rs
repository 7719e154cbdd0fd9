//! Reading a panelist's text reply: the labels it may use, its estimate, its confidence and
//! its reasoning.

use super::*;

use crate::modes::numbers;
use crate::modes::reading;

// ---- parsing --------------------------------------------------------------------------------
//
// A reply states its answer only in these forms, read from its answer part (reasoning blocks
// set aside; a reply whose reasoning never closed states nothing), in this order:
//
// 1. A labelled line: `ESTIMATE: 40`, `**Final estimate:** 40`, `1. Your numeric estimate: 40`,
//    `ESTIMACIÓN: 40`, `ESTIMATION : 40`, `SCHÄTZUNG: 40`, an upper-case `ESTIMATE:` inside a
//    line (not `YOUR PREVIOUS ESTIMATE:`), a table row or column headed `Estimate`, or a
//    heading `## Final Estimate` over the value. The last such line decides, unless it only
//    repeats the prompt's placeholder (`[number]`): when what it says cannot be read, the
//    reply is unparsed (an earlier or vaguer statement is not tried instead).
// 2. A JSON object's field: `{"estimate": 34000000, "confidence": "high", "reasoning": "…"}`.
// 3. For a number only: a line `Estimated <what>: 40`, then a labelled `ANSWER:` line.
// 4. A sentence that states it with the value right after: `My estimate is about 40`, `The
//    answer is 4`, `I estimate ~40`, `estimate ≈ 40`; for a choice among options, also
//    `I choose Option 2`.
//
// Anything else, such as a number somewhere in prose, is not an answer: the reply is unparsed
// and the reason ([`Unparsed`]) is stored with its text.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::Low => "LOW",
            Confidence::Medium => "MEDIUM",
            Confidence::High => "HIGH",
        }
    }
}

/// Words that may stand before a label: `Final estimate:`, `My answer:`, `Your numeric
/// estimate:` (models echo the prompt's list), `Ma réponse :`.
const QUALIFIERS: &[&str] = &[
    "final",
    "my",
    "your",
    "our",
    "the",
    "best",
    "revised",
    "updated",
    "new",
    "overall",
    "numeric",
    "numerical",
    "point",
    "current",
    "own",
    "ma",
    "mon",
    "mi",
    "la",
    "le",
    "il",
    "mia",
    "mio",
    "minha",
    "meu",
    "meine",
    "mein",
    "die",
    "der",
    "votre",
    "su",
];

const ESTIMATE_LABELS: &[&str] = &[
    "estimate",
    "estimation",
    "estimación",
    "estimacion",
    "estimativa",
    "estimativo",
    "schätzung",
    "schaetzung",
    "stima",
];
const ANSWER_LABELS: &[&str] =
    &["answer", "réponse", "reponse", "respuesta", "resposta", "risposta", "antwort"];
const CHOICE_LABELS: &[&str] = &[
    "chosen option",
    "selected option",
    "recommended option",
    "choice",
    "recommendation",
    "elección",
    "choix",
    "wahl",
    "escolha",
    "scelta",
];
const CONFIDENCE_LABELS: &[&str] = &[
    "confidence level",
    "level of confidence",
    "confidence",
    "niveau de confiance",
    "confiance",
    "nivel de confianza",
    "confianza",
    "nível de confiança",
    "confiança",
    "livello di fiducia",
    "livello di confidenza",
    "fiducia",
    "confidenza",
    "konfidenzniveau",
    "vertrauensniveau",
    "konfidenz",
    "vertrauen",
    "sicherheit",
];
const REASONING_LABELS: &[&str] = &[
    "reasoning",
    "rationale",
    "justification",
    "raisonnement",
    "razonamiento",
    "justificación",
    "begründung",
    "raciocínio",
    "justificativa",
    "ragionamento",
    "motivazione",
];
const TYPE_LABELS: &[&str] = &["question type", "type", "tipo", "typ"];
const OPTIONS_LABELS: &[&str] =
    &["answer options", "options", "opciones", "opções", "opcoes", "opzioni", "optionen"];

const ESTIMATE_KEYS: &[&str] = &[
    "estimate",
    "final_estimate",
    "finalEstimate",
    "best_estimate",
    "bestEstimate",
    "point_estimate",
    "estimation",
    "estimación",
    "schätzung",
    "stima",
    "estimativa",
    "value",
    "answer",
];
pub(super) const ANSWER_KEYS: &[&str] =
    &["answer", "final_answer", "finalAnswer", "choice", "option", "recommendation", "respuesta"];
const CONFIDENCE_KEYS: &[&str] =
    &["confidence", "confidence_level", "confidenceLevel", "confianza", "confiance"];
const REASONING_KEYS: &[&str] =
    &["reasoning", "rationale", "explanation", "justification", "razonamiento"];

/// Spaces within a line (French typography puts a no-break space before a colon).
fn is_gap(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{a0}' | '\u{202f}')
}

/// Markup around a label: spaces, quotes, emphasis.
fn is_mark(c: char) -> bool {
    is_gap(c) || "\"'`*_".contains(c)
}

fn skip(s: &str, mut i: usize, f: impl Fn(char) -> bool) -> usize {
    while let Some(c) = s[i..].chars().next().filter(|c| f(*c)) {
        i += c.len_utf8();
    }
    i
}

/// `name` at byte `i` of `s`, in any case (a space in it stands for any run of spaces): the
/// byte after it.
fn name_at(s: &str, i: usize, name: &str) -> Option<usize> {
    let mut j = i;
    for n in name.chars() {
        if n == ' ' {
            let k = skip(s, j, is_gap);
            if k == j {
                return None;
            }
            j = k;
            continue;
        }
        let c = s[j..].chars().next()?;
        if !c.to_lowercase().eq(n.to_lowercase()) {
            return None;
        }
        j += c.len_utf8();
    }
    Some(j)
}

/// List marks, quotes, headings and numbering before a label: `- `, `> `, `## `, `1. `, `2) `.
fn skip_lead(line: &str) -> usize {
    let mut i = 0;
    loop {
        let j = skip(line, i, |c| is_gap(c) || ">*_#•+|-–".contains(c));
        let d = skip(line, j, |c| c.is_ascii_digit());
        let numbered = (1..=2).contains(&(d - j))
            && line[d..].starts_with(['.', ')'])
            && line[d + 1..].chars().next().is_none_or(is_gap);
        let next = if numbered { d + 1 } else { j };
        if next == i {
            return i;
        }
        i = next;
    }
}

/// The ways one label is written: at the start of a line, in any case, after list marks,
/// markup and qualifiers (`**Final estimate:**`, `1. Your numeric estimate:`, `ESTIMACIÓN :`),
/// with a parenthesis that may give a unit (`ESTIMATE (in millions):`); in upper case inside a
/// line (`… so ESTIMATE: 40`); alone in a table cell or a heading. Matched by hand: a set of
/// case-insensitive regexes for these took a noticeable time to build on a run's first reply.
pub(super) struct Family {
    names: &'static [&'static str],
    upper: Vec<String>,
}

impl Family {
    fn new(names: &'static [&'static str]) -> Family {
        Family { names, upper: names.iter().map(|n| n.to_uppercase()).collect() }
    }

    /// The label at byte `i` (after markup and qualifiers): the byte after it (and its
    /// markup and parenthesis), and the parenthesis.
    fn label_at<'a>(&self, s: &'a str, i: usize) -> Option<(usize, Option<&'a str>)> {
        let mut i = skip(s, i, is_mark);
        loop {
            if let Some(end) = self.names.iter().filter_map(|n| name_at(s, i, n)).max() {
                let end = if s[end..].starts_with('s') { end + 1 } else { end };
                if s[end..].starts_with(char::is_alphanumeric) {
                    return None; // `Estimated`, `Typed`
                }
                let mut j = skip(s, end, is_mark);
                let mut unit = None;
                if s[j..].starts_with('(') {
                    let close = s[j..].find([')', '\n']).filter(|&k| k <= 61)?;
                    if !s[j + close..].starts_with(')') {
                        return None;
                    }
                    unit = Some(&s[j + 1..j + close]);
                    j = skip(s, j + close + 1, is_mark);
                }
                return Some((j, unit));
            }
            let after = QUALIFIERS
                .iter()
                .find_map(|q| name_at(s, i, q).filter(|&e| s[e..].starts_with(is_gap)))?;
            i = skip(s, after, is_gap);
        }
    }

    /// The label at the start of `line`: the byte after its separator, and its parenthesis.
    fn at_start<'a>(&self, line: &'a str) -> Option<(usize, Option<&'a str>)> {
        let (j, unit) = self.label_at(line, skip_lead(line))?;
        let c = line[j..].chars().next().filter(|c| ":=≈~：".contains(*c))?;
        Some((j + c.len_utf8(), unit))
    }

    /// A table cell or heading holding only the label (and a colon): its parenthesis.
    fn alone<'a>(&self, cell: &'a str) -> Option<Option<&'a str>> {
        let (j, unit) = self.label_at(cell, 0)?;
        cell[j..].chars().all(|c| c == ':' || is_mark(c)).then_some(unit)
    }

    /// Upper-case labels inside a line, in order: (where the label starts, the byte after its
    /// colon).
    fn inline(&self, line: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for u in &self.upper {
            for (at, _) in line.match_indices(u.as_str()) {
                let before = line[..at].chars().next_back();
                if !before.is_none_or(|c| is_gap(c) || "([{,;.!?*_".contains(c)) {
                    continue;
                }
                let j = skip(line, at + u.len(), |c| c == '*' || c == '_');
                let j = skip(line, j, is_gap);
                if let Some(c) = line[j..].chars().next().filter(|c| matches!(c, ':' | '：')) {
                    out.push((at, j + c.len_utf8()));
                }
            }
        }
        out.sort_unstable();
        out
    }
}

pub(super) struct Labels {
    estimate: Family,
    pub(super) answer: Family,
    pub(super) choice: Family,
    confidence: Family,
    reasoning: Family,
    pub(super) kind: Family,
    pub(super) options: Family,
}

impl Labels {
    fn families(&self) -> [&Family; 7] {
        [
            &self.estimate,
            &self.answer,
            &self.choice,
            &self.confidence,
            &self.reasoning,
            &self.kind,
            &self.options,
        ]
    }

    fn is_label_line(&self, line: &str) -> bool {
        self.families().iter().any(|f| f.at_start(line).is_some())
    }
}

pub(super) fn labels() -> &'static Labels {
    static L: OnceLock<Labels> = OnceLock::new();
    L.get_or_init(|| Labels {
        estimate: Family::new(ESTIMATE_LABELS),
        answer: Family::new(ANSWER_LABELS),
        choice: Family::new(CHOICE_LABELS),
        confidence: Family::new(CONFIDENCE_LABELS),
        reasoning: Family::new(REASONING_LABELS),
        kind: Family::new(TYPE_LABELS),
        options: Family::new(OPTIONS_LABELS),
    })
}

/// Where a label stands and what follows it.
#[derive(Debug, Clone)]
pub(super) struct Hit {
    /// The value: the rest of the line up to another label (or the next line, when the
    /// label's line holds nothing else).
    pub(super) value: String,
    /// What the label's parenthesis says (`in millions`).
    unit: Option<String>,
    /// The line of the label and the byte where its value starts.
    pub(super) line: usize,
    pub(super) col: usize,
    /// The value stands on a line of its own under the label (`## Estimate` then `42
    /// million`): only hedging words may stand before a number in it.
    strict: bool,
}

/// The value up to the next upper-case label on its line (`40 CONFIDENCE: HIGH`).
pub(super) fn cut(value: &str) -> &str {
    let next =
        labels().families().iter().filter_map(|f| f.inline(value).first().map(|h| h.0)).min();
    &value[..next.unwrap_or(value.len())]
}

/// A value with the markup around it removed: `**40**`, `[40]`, `"Go"`.
pub(super) fn clean(value: &str) -> &str {
    let t = value.trim().trim_matches(|c: char| "*_`\"'“”".contains(c) || c.is_whitespace());
    let t = t.strip_prefix('[').and_then(|x| x.strip_suffix(']')).unwrap_or(t);
    t.trim()
}

/// The prompt's template repeated instead of filled in: `[number]`, `[LOW|MEDIUM|HIGH]`,
/// `[your answer or option number]`, `<number>`.
pub(super) fn placeholder(value: &str) -> bool {
    let t = value.trim().trim_matches(|c: char| "*_`.".contains(c) || c.is_whitespace());
    t.is_empty() || t.contains('|') || echoed_placeholder(t)
}

fn table_cells(line: &str) -> Option<Vec<&str>> {
    let t = line.trim();
    let inner = t.strip_prefix('|')?;
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    Some(inner.split('|').map(str::trim).collect())
}

fn is_separator_row(line: &str) -> bool {
    table_cells(line).is_some_and(|cells| {
        cells.iter().all(|c| {
            let c = c.trim_matches(':');
            c.len() >= 2 && c.chars().all(|x| x == '-')
        })
    })
}

/// A label in a table: a row `| Estimate | 40 |`, or a column headed `Estimate` over exactly
/// one row of values.
fn table_hit(lines: &[&str], i: usize, fam: &Family) -> Option<Hit> {
    let cells = table_cells(lines[i])?;
    let (k, unit) = cells.iter().enumerate().find_map(|(k, c)| Some((k, fam.alone(c)?)))?;
    let unit = unit.map(str::to_string);
    if lines.get(i + 1).is_some_and(|l| is_separator_row(l)) {
        let data = lines.get(i + 2).and_then(|l| table_cells(l))?;
        if lines.get(i + 3).is_some_and(|l| table_cells(l).is_some()) {
            return None; // several rows of values: no one value
        }
        let value = data.get(k)?.to_string();
        return Some(Hit { value, unit, line: i + 2, col: 0, strict: false });
    }
    let value = cells.get(k + 1)?.to_string();
    Some(Hit { value, unit, line: i, col: 0, strict: false })
}

/// Whether the words before an upper-case label make it the prompt's echo of the previous
/// round (`YOUR PREVIOUS ESTIMATE:`).
fn echoes_previous(before: &str) -> bool {
    let last = before.trim_end().rsplit(|c: char| !c.is_alphanumeric()).next().unwrap_or("");
    ["previous", "prior", "old", "initial", "last", "earlier"]
        .iter()
        .any(|w| last.eq_ignore_ascii_case(w))
}

/// A heading (`## Final Estimate`) or a line in bold (`**Estimate**`) holding only the label.
fn is_heading(line: &str, fam: &Family) -> bool {
    let t = line.trim();
    let marked = t.starts_with('#') || (t.starts_with("**") && t.ends_with("**") && t.len() > 4);
    marked && fam.alone(t.trim_start_matches('#')).is_some()
}

/// Every place the label stands in `text`, in order.
fn hits(text: &str, fam: &Family) -> Vec<Hit> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if table_cells(line).is_some() {
            out.extend(table_hit(&lines, i, fam));
            continue;
        }
        let start = fam.at_start(line);
        let from = start.map_or(0, |(end, _)| end);
        // Not `YOUR PREVIOUS ESTIMATE:` (a round-2 prompt repeated).
        let inline = fam
            .inline(&line[from..])
            .into_iter()
            .rfind(|(at, _)| !echoes_previous(&line[..from + at]))
            .map(|(_, end)| from + end);
        let heading = start.is_none() && inline.is_none() && is_heading(line, fam);
        let (col, unit) = match (inline, &start) {
            (Some(col), _) => (col, None),
            (None, Some((_, unit))) => (from, unit.map(str::to_string)),
            (None, None) if heading => (line.len(), None),
            (None, None) => continue,
        };
        let mut value = cut(&line[col..]).to_string();
        let mut strict = false;
        if clean(&value).is_empty() {
            // `ESTIMATE:` alone on its line, or a heading: the value is on the next one.
            if let Some(next) = lines[i + 1..].iter().find(|l| !l.trim().is_empty()) {
                if !labels().is_label_line(next) {
                    value = cut(next).to_string();
                    strict = true;
                }
            }
        }
        out.push(Hit { value, unit, line: i, col, strict });
    }
    out
}

/// The label's last statement that is not a placeholder: the one that decides.
pub(super) fn stated(text: &str, fam: &Family) -> Option<Hit> {
    hits(text, fam).into_iter().rev().find(|h| !placeholder(&h.value))
}

/// The answer part of a reply; None when its reasoning never closed.
pub(super) fn answer_part(text: &str) -> Option<String> {
    let split = reading::split_reasoning(text);
    (!split.unclosed).then(|| split.answer.into_owned())
}

fn read_hit(hit: &Hit) -> Option<numbers::Stated> {
    let lead = if hit.strict { numbers::Lead::Strict } else { numbers::Lead::Label };
    let mut s = numbers::read_stated(clean(&hit.value), lead)?;
    // `ESTIMATE (in millions): 42`.
    if let Some(f) = hit.unit.as_deref().and_then(numbers::scale_in) {
        if s.scale == 1.0 {
            s.value = numbers::scale_by(s.value, f);
            s.range = s.range.map(|(a, b)| (numbers::scale_by(a, f), numbers::scale_by(b, f)));
        }
    }
    s.value.is_finite().then_some(s)
}

fn json_number(v: &Value) -> Option<numbers::Stated> {
    match v {
        Value::Number(n) => n.as_f64().filter(|x| x.is_finite()).map(|value| numbers::Stated {
            value,
            range: None,
            percent: false,
            scale: 1.0,
        }),
        Value::String(s) => numbers::read_stated(s, numbers::Lead::Label),
        _ => None,
    }
}

fn estimated_line() -> &'static Regex {
    regex!(r"(?im)^(?:[\s>*_#•+\-–]|\d{1,2}[.)]\s)*[*_\s]*estimated(?:\s+[^\s:]+){1,10}?[*_\s]*:")
}

/// Sentences that state an estimate, ending right before the value.
fn stated_estimate_re() -> &'static Regex {
    regex!(
        r"(?imx)
        \b(?:my|our)\s+(?:(?:final|best|revised|updated|overall|current|own|point|numeric)\s+)*
            (?:estimate|guess|answer|prediction|forecast)\s*(?:is\b|would\s+be\b|will\s+be\b|remains\b|stands\s+at\b|:)
        | (?:^|[.!?]\s)\s*(?:(?:so|thus|therefore|hence|overall|finally|in\s+conclusion|in\s+short|in\s+summary)\s*,?\s+)?
            (?:the\s+)?(?:(?:final|best)\s+)?(?:estimate|answer)\s+(?:is|would\s+be|will\s+be)\b
        | \bI(?:\s+would|'d|’d)?\s+estimate\s+(?:that\s+)?
            (?:(?:it|this|the\s+(?:number|total|value|figure))\s+(?:at|to\s+be|is|will\s+be|would\s+be)\s+
              |there\s+(?:are|is|will\s+be|would\s+be)\s+)?
        | \b(?:estimate|answer)\s*[≈=]"
    )
}

/// The last sentence stating a value: the rest of its line.
pub(super) fn stated_sentence<'a>(text: &'a str, re: &Regex) -> Option<&'a str> {
    let m = re.find_iter(text).last()?;
    let rest = &text[m.end()..];
    Some(&rest[..rest.find('\n').unwrap_or(rest.len())])
}

/// Reads an estimate (see the rules above). A range (`35-45`, `35 to 45`) gives its midpoint
/// and says so; a stated most likely value within it wins.
pub fn parse_estimate(text: &str) -> Option<(f64, Option<String>)> {
    let answer = answer_part(text)?;
    let l = labels();
    let s = if let Some(h) = stated(&answer, &l.estimate) {
        read_hit(&h)
    } else if let Some(v) = reading::json_field(&answer, ESTIMATE_KEYS) {
        json_number(&v)
    } else if let Some(m) = estimated_line().find_iter(&answer).last() {
        let rest = &answer[m.end()..];
        let value = cut(&rest[..rest.find('\n').unwrap_or(rest.len())]);
        numbers::read_stated(clean(value), numbers::Lead::Label)
    } else if let Some(h) = stated(&answer, &l.answer) {
        read_hit(&h)
    } else {
        stated_sentence(&answer, stated_estimate_re())
            .and_then(|v| numbers::read_stated(v, numbers::Lead::Strict))
    }?;
    if !s.value.is_finite() {
        return None;
    }
    let note = s.range.map(|(a, b)| {
        format!(
            "range {} to {} given; the midpoint {} was used",
            fmt_num(a),
            fmt_num(b),
            fmt_num(s.value)
        )
    });
    Some((s.value, note))
}

fn level_of(word: &str) -> Option<Confidence> {
    match word {
        "high" | "élevée" | "élevé" | "elevee" | "eleve" | "haute" | "haut" | "alta" | "alto"
        | "hoch" | "elevata" | "elevato" => Some(Confidence::High),
        "medium" | "med" | "moderate" | "mid" | "moyenne" | "moyen" | "media" | "medio"
        | "média" | "médio" | "mittel" | "mittlere" | "moderata" | "moderato" => {
            Some(Confidence::Medium)
        }
        "low" | "faible" | "basse" | "bas" | "baja" | "bajo" | "baixa" | "baixo" | "niedrig"
        | "gering" | "bassa" | "basso" => Some(Confidence::Low),
        _ => None,
    }
}

/// One confidence level, named first: `HIGH`, `very high`, `Moderate`, `ÉLEVÉE`. Two levels
/// (`MEDIUM-HIGH`, `low to medium`) or a number (`80%`) name none.
fn level(value: &str) -> Option<Confidence> {
    let words: Vec<String> = value
        .split(|c: char| !c.is_alphanumeric() && c != '%' && c != '.')
        .map(|w| w.trim_matches('.').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    let mut it = words.iter().skip_while(|w| {
        ["very", "quite", "fairly", "rather", "relatively", "reasonably", "très", "muy", "sehr"]
            .contains(&w.as_str())
    });
    let first = level_of(it.next()?)?;
    let mut rest =
        it.skip_while(|w| ["to", "or", "and", "à", "a", "bis", "ou", "o"].contains(&w.as_str()));
    if rest.next().is_some_and(|w| level_of(w).is_some()) {
        return None;
    }
    Some(first)
}

/// The stated confidence and whether it was stated: MEDIUM (and `false`) when the reply names
/// no one level.
pub fn parse_confidence(text: &str) -> (Confidence, bool) {
    let Some(answer) = answer_part(text) else { return (Confidence::Medium, false) };
    let value = match stated(&answer, &labels().confidence) {
        Some(h) => Some(cut(&h.value).to_string()),
        None => reading::json_field(&answer, CONFIDENCE_KEYS)
            .and_then(|v| v.as_str().map(str::to_string)),
    };
    match value.as_deref().map(clean).and_then(level) {
        Some(c) => (c, true),
        None => (Confidence::Medium, false),
    }
}

/// The reasoning after the last `REASONING:` label, up to the next labelled line (or the JSON
/// `reasoning` field); empty when there is none.
pub fn parse_reasoning(text: &str) -> String {
    let Some(answer) = answer_part(text) else { return String::new() };
    let l = labels();
    if let Some(h) = stated(&answer, &l.reasoning) {
        if h.col > 0 {
            let lines: Vec<&str> = answer.lines().collect();
            let mut out = vec![cut(&lines[h.line][h.col..]).trim()];
            for line in &lines[h.line + 1..] {
                if l.families()
                    .iter()
                    .any(|f| !std::ptr::eq(*f, &l.reasoning) && f.at_start(line).is_some())
                {
                    break;
                }
                out.push(line);
            }
            return out.join("\n").trim().trim_matches(['*', '_']).trim().to_string();
        }
        return clean(&h.value).to_string();
    }
    match reading::json_field(&answer, REASONING_KEYS) {
        Some(Value::String(s)) => s.trim().to_string(),
        _ => String::new(),
    }
}
