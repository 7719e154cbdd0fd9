//! Reading an evaluator's ranking of anonymised responses, and aggregating rankings fairly.
//!
//! A ranking is read only where the evaluator states one, in the answer part of its reply
//! (reasoning traces set aside, see [`super::reading`]):
//! 1. under the last ranking header (`FINAL RANKING:`, `**Final ranking**:`, `Ranking:` at the
//!    start of a line, `CLASSEMENT FINAL :`, `CLASIFICACIÓN FINAL:`, `ENDGÜLTIGE RANGFOLGE:`…):
//!    its numbered items (on separate lines or one line), else the labels of its first
//!    paragraph in the order written (`Response B > Response A = Response C`);
//! 2. without a header: a JSON `ranking` array (in a code fence or bare), a Markdown table with
//!    a rank column, a line that is only labels joined by `>` / `=`, or a numbered list of bare
//!    labels closing the reply.
//!
//! A label merely mentioned is not a ranking, and neither is an evaluation that walks through
//! the responses in order: such a reply is unparsed, and [`super::reading::Unparsed`] says why.
//! Labels tied by the evaluator (`Response A = Response C`, `1. Response A and Response C (tie)`,
//! two items numbered alike) share a place. A ranking that leaves labels out is *partial*.
//!
//! **Aggregation** (fractional ranking, the standard treatment of ties and partial orders):
//! each parsed ranking gives every label a position. Labels a place holds share its positions'
//! mean (a tie for first among two: 1.5 each); the labels a partial ranking leaves out share
//! the positions left after the named ones (naming only `Response A` of three: A 1, the others
//! 2.5 each). So a partial ranking says exactly what it states and no more, and every counted
//! ranking weighs the same. A label's average rank is the mean of its positions.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::reading::{self, Unparsed};

/// What an evaluator's reply states, as places best first (a place holds the labels tied in it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadRanking {
    pub places: Vec<Vec<String>>,
    /// Why nothing was read, when nothing was.
    pub unparsed: Option<Unparsed>,
}

impl ReadRanking {
    /// The labels in stated order (tied labels in the order written).
    pub fn order(&self) -> Vec<String> {
        self.places.iter().flatten().cloned().collect()
    }

    /// The ranking names fewer labels than the run has.
    pub fn partial(&self, label_count: usize) -> bool {
        let named = self.places.iter().map(Vec::len).sum::<usize>();
        named > 0 && named < label_count
    }

    pub fn has_ties(&self) -> bool {
        self.places.iter().any(|p| p.len() > 1)
    }
}

fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|_| unreachable!())
}

/// A label in any of the languages a final section may be written in: `Response C`,
/// `Réponse C`, `Respuesta C`, `Resposta C`, `Risposta C`, `Antwort C`. Letters must end at a
/// word boundary, so `Response AB` is never read as `Response A`.
fn label_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        compile(
            r"(?i)\b(?:response|r[ée]ponse|respuesta|resposta|risposta|antwort)[\s*_]+([a-z]{1,3})\b",
        )
    })
}

/// Ranking headers. `final ranking` (and its translations, which all say "final") may stand
/// anywhere; a bare `Ranking:` / `My ranking:` only at the start of a line.
fn header_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        let s = r"[\s*_]+";
        compile(&format!(
            r"(?im)(?:final{s}ranking|ranking{s}final[e]?|finales{s}ranking|classement{s}final|clasificaci[oó]n{s}final|classifica{s}finale|classifica[cç][aã]o{s}final|endg[uü]ltige{s}(?:rangfolge|reihenfolge|rangliste)|^[\s>#*_-]*(?:(?:my|overall|the){s})?(?:ranking|rangfolge|classement|clasificaci[oó]n|classifica)){s2}:",
            s2 = r"[\s*_]*"
        ))
    })
}

/// The start of a numbered item: `1.`, `2)`, `**3.**`, `#1:`, `4 -`, at a line start or after
/// a space (a whole list on one line).
fn item_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| compile(r"(?m)(?:^|[\s(])[>*_#-]*\s*[*_]*#?(\d{1,2})[*_]*\s*[.):\]]"))
}

/// What may stand between two labels that share a place.
fn tie_joint_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| compile(r"(?i)^[\s*_]*(?:=+|&|and|et|y|und|e|/|\+)[\s*_]*$"))
}

fn tie_word_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        compile(r"(?i)\b(?:tie|tied|ties|equal|equally|ex[\s-]?aequo|empate|gleich)\b|=")
    })
}

/// One label mention: where it stands and its canonical form (`Response C`), if it is one
/// of the run's labels.
struct Mention {
    start: usize,
    end: usize,
    label: Option<String>,
}

fn mentions(text: &str, labels: &[String]) -> Vec<Mention> {
    label_re()
        .captures_iter(text)
        .filter_map(|c| {
            let whole = c.get(0)?;
            let canonical = format!("Response {}", c.get(1)?.as_str().to_uppercase());
            Some(Mention {
                start: whole.start(),
                end: whole.end(),
                label: labels.contains(&canonical).then_some(canonical),
            })
        })
        .collect()
}

/// Places built so far; a label is placed once (its first place wins).
#[derive(Default)]
struct Places {
    places: Vec<Vec<String>>,
}

impl Places {
    fn placed(&self, l: &str) -> bool {
        self.places.iter().flatten().any(|p| p == l)
    }

    /// Adds labels as one place (those already placed are skipped).
    fn push(&mut self, labels: Vec<String>) {
        let mut fresh: Vec<String> = Vec::new();
        for l in labels {
            if !self.placed(&l) && !fresh.contains(&l) {
                fresh.push(l);
            }
        }
        if !fresh.is_empty() {
            self.places.push(fresh);
        }
    }

    fn join_last(&mut self, labels: Vec<String>) {
        let fresh: Vec<String> = labels.into_iter().filter(|l| !self.placed(l)).collect();
        match self.places.last_mut() {
            Some(last) => last.extend(fresh),
            None if !fresh.is_empty() => self.places.push(fresh),
            None => {}
        }
    }
}

/// The labels an item (or a line) holds as one place: the first label, with the following
/// ones that are joined to it as a tie.
fn place_of(text: &str, labels: &[String]) -> Vec<String> {
    let ms = mentions(text, labels);
    let Some(first) = ms.first() else { return Vec::new() };
    let tie_marked = tie_word_re().is_match(text);
    let mut out: Vec<String> = first.label.iter().cloned().collect();
    for pair in ms.windows(2) {
        let between = &text[pair[0].end..pair[1].start];
        if tie_joint_re().is_match(between) || (tie_marked && between.trim().len() <= 12) {
            out.extend(pair[1].label.iter().cloned());
        } else {
            break;
        }
    }
    out
}

/// Numbered items in a section: `(number, text of the item)`.
fn numbered_items(section: &str) -> Vec<(u32, &str)> {
    let starts: Vec<(usize, usize, u32)> = item_re()
        .captures_iter(section)
        .filter_map(|c| {
            let whole = c.get(0)?;
            let n = c.get(1)?.as_str().parse().ok()?;
            Some((whole.start(), whole.end(), n))
        })
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, &(_, body_start, n))| {
            let end = starts.get(i + 1).map_or(section.len(), |s| s.0);
            // An item runs to the next item or the end of its line.
            let body = &section[body_start..end];
            let body = body.split('\n').next().unwrap_or(body);
            (n, body)
        })
        .collect()
}

/// The numbered items of a section as places (items numbered alike share a place). A label
/// that leads two items numbered differently makes the list contradictory.
fn from_items(items: &[(u32, &str)], labels: &[String]) -> Result<Places, Unparsed> {
    let mut places = Places::default();
    let mut last_number = None;
    let mut led: Vec<(String, u32)> = Vec::new();
    for &(n, body) in items {
        let place = place_of(body, labels);
        let Some(lead) = place.first() else { continue };
        if led.iter().any(|(l, at)| l == lead && *at != n) {
            return Err(Unparsed::Inconsistent);
        }
        led.push((lead.clone(), n));
        if last_number == Some(n) {
            places.join_last(place);
        } else {
            places.push(place);
        }
        last_number = Some(n);
    }
    Ok(places)
}

/// Labels written in a chain (`Response B > Response A = Response C`, `Response B, then
/// Response A`): `=` and other tie joints share a place, anything else moves to the next.
fn from_chain(text: &str, labels: &[String]) -> Places {
    let ms = mentions(text, labels);
    let mut places = Places::default();
    for (i, m) in ms.iter().enumerate() {
        let Some(l) = m.label.clone() else { continue };
        let tied = i > 0 && tie_joint_re().is_match(&text[ms[i - 1].end..m.start]);
        if tied {
            places.join_last(vec![l]);
        } else {
            places.push(vec![l]);
        }
    }
    places
}

/// The section under the last header: numbered items, else the chain of its first paragraph.
fn under_header(answer: &str, labels: &[String]) -> Result<Option<Places>, Unparsed> {
    let Some(header) = header_re().find_iter(answer).last() else { return Ok(None) };
    let section = &answer[header.end()..];
    let items = numbered_items(section);
    let places = from_items(&items, labels)?;
    if !places.places.is_empty() {
        return Ok(Some(places));
    }
    Ok(chain_under(section, labels))
}

/// The first paragraph under a header, read as a chain when it is nothing but labels and the
/// words that order them (`Response B, then Response A, and last Response C`,
/// `Response A = Response C > Response B`). Prose that could order them either way
/// (`Response B is worse than Response A`) is not read.
fn chain_under(section: &str, labels: &[String]) -> Option<Places> {
    let section = section.trim_start();
    let para = section.split("\n\n").next().unwrap_or(section);
    let ms = mentions(para, labels);
    if ms.is_empty() || reading::declines(para) {
        return None;
    }
    let mut rest = String::new();
    let mut at = 0;
    for m in &ms {
        rest.push_str(&para[at..m.start]);
        rest.push(' ');
        at = m.end;
    }
    rest.push_str(&para[at..]);
    let ordering_only = rest
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .all(|w| CHAIN_WORDS.contains(&w.to_lowercase().as_str()));
    ordering_only.then(|| from_chain(para, labels))
}

/// Words that may stand beside labels in a chain: they order the labels, and none reverses
/// the order they are written in.
const CHAIN_WORDS: &[&str] = &[
    "then", "followed", "by", "and", "last", "lastly", "finally", "next", "first", "second",
    "third", "fourth", "fifth", "sixth", "best", "worst", "is", "the", "a", "at", "top", "bottom",
    "in", "place", "ranked", "rank", "tie", "tied", "equal", "equally", "both", "puis", "enfin",
    "et", "luego", "y", "dann", "und", "e", "poi",
];

/// A ranking given as JSON: `{"ranking": ["Response C", "A", …]}` or a list of
/// `{"label": …, "rank": n}`.
fn from_json(answer: &str, labels: &[String]) -> Option<Places> {
    let keys = ["final_ranking", "finalRanking", "ranking", "rankings", "order"];
    let list = reading::json_field(answer, &keys)?;
    let list = list.as_array()?;
    let canonical = |s: &str| -> Option<String> {
        let s = s.trim();
        let l = if s.len() <= 3 && s.chars().all(|c| c.is_ascii_alphabetic()) {
            format!("Response {}", s.to_uppercase())
        } else {
            let m = mentions(s, labels).into_iter().next()?;
            m.label?
        };
        labels.contains(&l).then_some(l)
    };
    let mut entries: Vec<(f64, String)> = Vec::new();
    for (i, item) in list.iter().enumerate() {
        match item {
            Value::String(s) => entries.extend(canonical(s).map(|l| (i as f64 + 1.0, l))),
            Value::Object(o) => {
                let label = ["label", "response", "id", "name"]
                    .iter()
                    .find_map(|k| o.get(*k).and_then(Value::as_str))
                    .and_then(canonical);
                let rank = ["rank", "position", "place"]
                    .iter()
                    .find_map(|k| o.get(*k).and_then(Value::as_f64))
                    .unwrap_or(i as f64 + 1.0);
                entries.extend(label.map(|l| (rank, l)));
            }
            _ => {}
        }
    }
    entries.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut places = Places::default();
    let mut last = None;
    for (rank, l) in entries {
        if last == Some(rank) {
            places.join_last(vec![l]);
        } else {
            places.push(vec![l]);
        }
        last = Some(rank);
    }
    (!places.places.is_empty()).then_some(places)
}

/// A Markdown table whose header names a rank column: `| Rank | Response |` rows.
fn from_table(answer: &str, labels: &[String]) -> Option<Places> {
    let lines: Vec<&str> = answer.lines().map(str::trim).collect();
    let head = lines.iter().rposition(|l| {
        l.starts_with('|') && {
            let low = l.to_lowercase();
            low.contains("rank") || low.contains("place") || low.contains("position")
        }
    })?;
    let cells = |l: &str| -> Vec<String> {
        l.trim_matches('|')
            .split('|')
            .map(|c| c.replace(['*', '_'], "").trim().to_string())
            .collect()
    };
    let header = cells(lines[head]);
    let rank_col = header.iter().position(|c| {
        let c = c.to_lowercase();
        c.contains("rank") || c.contains("place") || c.contains("position")
    })?;
    let mut entries: Vec<(f64, String)> = Vec::new();
    for l in lines[head + 1..].iter().take_while(|l| l.starts_with('|')) {
        let row = cells(l);
        let Some(rank) = row.get(rank_col).and_then(|c| {
            c.trim_start_matches('#').trim_end_matches(['.', ')']).parse::<f64>().ok()
        }) else {
            continue;
        };
        let found: Vec<String> = row
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != rank_col)
            .flat_map(|(_, c)| mentions(c, labels).into_iter().filter_map(|m| m.label))
            .collect();
        if let [one] = found.as_slice() {
            entries.push((rank, one.clone()));
        }
    }
    entries.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut places = Places::default();
    let mut last = None;
    for (rank, l) in entries {
        if last == Some(rank) {
            places.join_last(vec![l]);
        } else {
            places.push(vec![l]);
        }
        last = Some(rank);
    }
    (!places.places.is_empty()).then_some(places)
}

/// The last line that is nothing but two or more labels joined by `>` or `=`.
fn from_chain_line(answer: &str, labels: &[String]) -> Option<Places> {
    answer.lines().rev().find_map(|line| {
        let ms = mentions(line, labels);
        if ms.len() < 2 || ms.iter().any(|m| m.label.is_none()) {
            return None;
        }
        let blank = |s: &str| s.chars().all(|c| c.is_whitespace() || "*_`.:-".contains(c));
        if !blank(&line[..ms[0].start]) || !blank(&line[ms[ms.len() - 1].end..]) {
            return None;
        }
        let strict = ms.windows(2).all(|w| {
            let between = line[w[0].end..w[1].start]
                .trim_matches(|c: char| c.is_whitespace() || c == '*' || c == '_');
            matches!(between, ">" | ">>" | "≥" | ">=" | "=" | "==" | "»" | "→" | "->")
        });
        strict.then(|| from_chain(line, labels))
    })
}

/// A numbered list of bare labels that closes the reply (the prompt's format without its
/// header): each item only a label (markup and a trailing full stop allowed).
fn from_closing_list(answer: &str, labels: &[String]) -> Option<Places> {
    let lines: Vec<&str> =
        answer.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>();
    let bare = |line: &str| -> Option<(u32, String)> {
        let c = item_re().captures(line)?;
        let whole = c.get(0)?;
        if whole.start() > 0 && !line[..whole.start()].trim().is_empty() {
            return None;
        }
        let n: u32 = c.get(1)?.as_str().parse().ok()?;
        let rest = &line[whole.end()..];
        let ms = mentions(rest, labels);
        let [m] = ms.as_slice() else { return None };
        let outside = format!("{}{}", &rest[..m.start], &rest[m.end..]);
        outside
            .trim_matches(|c: char| c.is_whitespace() || "*_`.".contains(c))
            .is_empty()
            .then(|| m.label.clone())
            .flatten()
            .map(|l| (n, l))
    };
    let tail: Vec<(u32, String)> = lines.iter().rev().map_while(|l| bare(l)).collect();
    if tail.len() < 2 {
        return None;
    }
    let mut places = Places::default();
    let mut last = None;
    for (n, l) in tail.into_iter().rev() {
        if last == Some(n) {
            places.join_last(vec![l]);
        } else {
            places.push(vec![l]);
        }
        last = Some(n);
    }
    Some(places)
}

/// Reads an evaluator's ranking (see the module's documentation for what counts).
pub fn read_ranking(text: &str, labels: &[String]) -> ReadRanking {
    let split = reading::split_reasoning(text);
    let answer = split.answer.as_ref();
    let found = if split.unclosed {
        Ok(None)
    } else {
        under_header(answer, labels).map(|p| {
            p.filter(|p| !p.places.is_empty())
                .or_else(|| from_json(answer, labels))
                .or_else(|| from_table(answer, labels))
                .or_else(|| from_chain_line(answer, labels))
                .or_else(|| from_closing_list(answer, labels))
        })
    };
    match found {
        Ok(Some(p)) if !p.places.is_empty() => ReadRanking { places: p.places, unparsed: None },
        Err(why) => ReadRanking { places: Vec::new(), unparsed: Some(why) },
        _ => ReadRanking { places: Vec::new(), unparsed: Some(Unparsed::of(text)) },
    }
}

/// The labels of a stated ranking in order (empty when none is stated).
pub fn parse_ranking(text: &str, labels: &[String]) -> Vec<String> {
    read_ranking(text, labels).order()
}

/// One label's standing over the counted rankings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Standing {
    pub label: String,
    pub average_rank: f64,
    /// Rankings counted (each gives every label a position).
    pub rankings_count: usize,
    /// Of those, the ones that named this label (the rest placed it by the partial rule).
    pub named_count: usize,
}

/// Each label's position in one ranking, by the fractional rule in the module's documentation.
pub fn positions(places: &[Vec<String>], labels: &[String]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let mut next = 1usize;
    for place in places {
        let place: Vec<&String> = place.iter().filter(|l| labels.contains(l)).collect();
        if place.is_empty() {
            continue;
        }
        let k = place.len();
        let mean = next as f64 + (k as f64 - 1.0) / 2.0;
        for l in place {
            out.insert(l.clone(), mean);
        }
        next += k;
    }
    let unnamed: Vec<&String> = labels.iter().filter(|l| !out.contains_key(*l)).collect();
    if !unnamed.is_empty() && next > 1 {
        let mean = next as f64 + (unnamed.len() as f64 - 1.0) / 2.0;
        for l in unnamed {
            out.insert(l.clone(), mean);
        }
    }
    out
}

/// Average positions of every label over the rankings that parsed (empty rankings are left
/// out), best first, ties by label; rounded to two decimals.
pub fn aggregate(rankings: &[Vec<Vec<String>>], labels: &[String]) -> Vec<Standing> {
    let counted: Vec<&Vec<Vec<String>>> =
        rankings.iter().filter(|r| r.iter().flatten().any(|l| labels.contains(l))).collect();
    if counted.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<Standing> = labels
        .iter()
        .map(|l| {
            let ps: Vec<f64> =
                counted.iter().filter_map(|r| positions(r, labels).get(l).copied()).collect();
            let named = counted.iter().filter(|r| r.iter().flatten().any(|x| x == l)).count();
            let avg = ps.iter().sum::<f64>() / ps.len().max(1) as f64;
            Standing {
                label: l.clone(),
                average_rank: (avg * 100.0).round() / 100.0,
                rankings_count: ps.len(),
                named_count: named,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        a.average_rank.total_cmp(&b.average_rank).then_with(|| a.label.cmp(&b.label))
    });
    out
}

#[cfg(test)]
#[path = "ranking_tests.rs"]
mod tests;
