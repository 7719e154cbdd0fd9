//! Reading an evaluator's ranking of anonymised responses, and aggregating rankings fairly.
//!
//! A ranking is read only where the evaluator states one, in the answer part of its reply
//! (reasoning traces set aside, see [`super::reading`]):
//! 1. under the last ranking header (`FINAL RANKING:`, `**Final ranking**:`, `Ranking:` at the
//!    start of a line, `CLASSEMENT FINAL :`, `CLASIFICACIÓN FINAL:`, `ENDGÜLTIGE RANGFOLGE:`…):
//!    its numbered items (on separate lines or one line), else the labels of its first
//!    paragraph in the order written (`Response B > Response A = Response C`); a header's name
//!    quoted in a sentence after it, with no ranking, label or refusal following, is not a header;
//! 2. without a header: JSON, fenced or bare (a `ranking` list or map, or an array of labels on
//!    its own), a Markdown table with a rank column and a response column in either order
//!    (bold or not, bare letters in the response column), a line that is only labels joined by
//!    `>` / `=`, or a numbered list of bare labels closing the reply;
//! 3. else a final ranking stated in prose after its intro (`my ranking from best to worst is:
//!    C > A > B`, `Final answer: A first, then C, and B last`, `from worst to best: B, A, C`),
//!    only when it names every label once with nothing but ordering words around them and
//!    every position word (`first`, `last`) beside the label in that place; said worst to
//!    best, it is read reversed.
//!
//! A label merely mentioned is not a ranking, and neither is an evaluation that walks through
//! the responses in order, a template's placeholders, a draft inside `<think>` or a list cut
//! off mid-item: such a reply is unparsed, and [`super::reading::Unparsed`] says why.
//! Labels tied by the evaluator (`Response A = Response C`, `1. Response A and Response C (tie)`,
//! two items numbered alike, neighbouring items each marked `(tie)`) share a place, and are
//! stored so (`places`); an item marked tied with no neighbour tied makes the list
//! contradictory, never a strict order. A ranking that leaves labels out is *partial*.
//!
//! **Aggregation** (fractional ranking, the standard treatment of ties and partial orders):
//! each parsed ranking gives every label a position. Labels a place holds share its positions'
//! mean (a tie for first among two: 1.5 each); the labels a partial ranking leaves out share
//! the positions left after the named ones (naming only `Response A` of three: A 1, the others
//! 2.5 each). So a partial ranking says exactly what it states and no more, and every counted
//! ranking weighs the same. A label's average rank is the mean of its positions.

use std::collections::BTreeMap;
use std::sync::Arc;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::reading::{self, Unparsed};
use super::schema::{self, ReadFrom, ReplySchema};

mod formats;
use formats::*;

/// What an evaluator's reply states, as places best first (a place holds the labels tied in it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadRanking {
    pub places: Vec<Vec<String>>,
    /// Why nothing was read, when nothing was.
    pub unparsed: Option<Unparsed>,
    /// Where the ranking was read from, when one was.
    pub read_from: Option<ReadFrom>,
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

/// A label in any of the languages a final section may be written in: `Response C`,
/// `Réponse C`, `Respuesta C`, `Resposta C`, `Risposta C`, `Antwort C`. Letters must end at a
/// word boundary, so `Response AB` is never read as `Response A`.
fn label_re() -> &'static Regex {
    regex!(
        r"(?i)\b(?:response|r[ée]ponse|respuesta|resposta|risposta|antwort)[\s*_]+([a-z]{1,3})\b"
    )
}

/// Ranking headers. `final ranking` (and its translations, which all say "final") may stand
/// anywhere; a bare `Ranking:` / `My ranking:` only at the start of a line.
fn header_re() -> &'static Regex {
    regex!({
        let s = r"[\s*_]+";
        format!(
            r"(?im)(?:final{s}ranking|ranking{s}final[e]?|finales{s}ranking|classement{s}final|clasificaci[oó]n{s}final|classifica{s}finale|classifica[cç][aã]o{s}final|endg[uü]ltige{s}(?:rangfolge|reihenfolge|rangliste)|^[\s>#*_-]*(?:(?:my|overall|the){s})?(?:ranking|rangfolge|classement|clasificaci[oó]n|classifica)){s2}:",
            s2 = r"[\s*_]*"
        )
    })
}

/// The start of a numbered item: `1.`, `2)`, `**3.**`, `#1:`, `4 -`, at a line start or after
/// a space (a whole list on one line).
fn item_re() -> &'static Regex {
    regex!(r"(?m)(?:^|[\s(])[>*_#-]*\s*[*_]*#?(\d{1,2})[*_]*\s*[.):\]]")
}

/// What may stand between two labels that share a place.
fn tie_joint_re() -> &'static Regex {
    regex!(r"(?i)^[\s*_]*(?:=+|&|and|et|y|und|e|/|\+)[\s*_]*$")
}

fn tie_word_re() -> &'static Regex {
    regex!(r"(?i)\b(?:tie|tied|ties|equal|equally|ex[\s-]?aequo|empate|gleich)\b|=")
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
    // An item led by a label the run lacks places none (not the labels after it).
    let Some(first) = ms.first().filter(|m| m.label.is_some()) else { return Vec::new() };
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
            // `12.5%` is a number, not item 12.
            if section[whole.end()..].starts_with(|c: char| c.is_ascii_digit()) {
                return None;
            }
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

/// An item that says only that its label is tied (`1. Response A (tie)`, `2. Response C -
/// tied for second`): what it holds besides its label.
fn tie_mark_re() -> &'static Regex {
    regex!(
        r"(?i)^[\s*_.:,;(\[–—-]*(?:tie|tied|joint|ex[\s-]?aequo|equal)(?:\s+(?:for|at|in)(?:\s+\w+){1,2})?[\s*_.:)\]]*$"
    )
}

/// The item says its one label is tied, and with whom is left to the items around it.
fn tie_marked(body: &str, labels: &[String]) -> bool {
    let ms = mentions(body, labels);
    let [m] = ms.as_slice() else { return false };
    let rest = format!("{} {}", &body[..m.start], &body[m.end..]);
    let rest = rest.trim_start_matches(|c: char| c.is_whitespace() || "*_.".contains(c));
    tie_mark_re().is_match(rest)
}

/// The numbered items of a section as places (items numbered alike share a place, and so do
/// items next to each other that each say they are tied, `1. Response A (tie)` /
/// `2. Response C (tie)`). A label that leads two items numbered differently makes the list
/// contradictory, and so does an item tied with none next to it: a tie is never read as a
/// strict order. Items without a label before the first labelled one make it no ranking.
fn from_items(items: &[(u32, &str)], labels: &[String]) -> Result<Places, Unparsed> {
    let mut places = Places::default();
    let mut last_number = None;
    let mut last_marked = false;
    let mut marked: Vec<String> = Vec::new();
    let mut led: Vec<(String, u32)> = Vec::new();
    for (i, &(n, body)) in items.iter().enumerate() {
        let mut place = place_of(body, labels);
        if place.is_empty() && mentions(body, labels).is_empty() {
            place.extend(bare_item(body, labels));
        }
        let Some(lead) = place.first() else { continue };
        // Items naming no label before the first with one (`1. [best response]` …
        // `3. Response A`): the labels would not stand at the places they are numbered.
        if places.places.is_empty()
            && items[..i].iter().any(|(_, b)| mentions(b, labels).is_empty())
        {
            return Ok(Places::default());
        }
        if led.iter().any(|(l, at)| l == lead && *at != n) {
            return Err(Unparsed::Inconsistent);
        }
        led.push((lead.clone(), n));
        let is_marked = tie_marked(body, labels);
        if is_marked {
            marked.push(lead.clone());
        }
        if last_number == Some(n) || (is_marked && last_marked) {
            places.join_last(place);
        } else {
            places.push(place);
        }
        last_number = Some(n);
        last_marked = is_marked;
    }
    let alone = |l: &String| places.places.iter().any(|p| p.len() == 1 && p[0] == *l);
    if marked.iter().any(alone) {
        return Err(Unparsed::Inconsistent);
    }
    Ok(places)
}

/// An item that is a bare label letter (`1. C`, `2. **A**`, `3. B - short but right`), the
/// letter in capitals and alone or before a colon or a dash.
fn bare_item(body: &str, labels: &[String]) -> Option<String> {
    let re = regex!(r"^[\s*_]*([A-Z]{1,3})[\s*_]*(?:$|[.:]\s|[.:]?$|\s[-–—]\s)");
    let l = format!("Response {}", re.captures(body)?.get(1)?.as_str());
    labels.contains(&l).then_some(l)
}

/// The list stops at an item with no label yet (`3.`, `3. Resp`) and nothing after it: the
/// reply was cut off mid-ranking.
fn cut_off(section: &str, items: &[(u32, &str)], labels: &[String]) -> bool {
    let Some(&(_, body)) = items.last() else { return false };
    // An item's body is a slice of the section: what follows it.
    let end = body.as_ptr() as usize - section.as_ptr() as usize + body.len();
    let cut = body.trim().trim_matches(|c: char| "*_".contains(c)).to_lowercase();
    mentions(body, labels).is_empty()
        && section[end..].trim().is_empty()
        && (cut.is_empty() || "response ".starts_with(&cut))
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
/// A header inside a line of prose under which nothing is stated (no ranking, no label, no
/// refusal) is the header's name quoted (`the section is marked "FINAL RANKING: FINAL"`), not a
/// section: the one before it is read.
fn under_header(answer: &str, labels: &[String]) -> Result<Option<Places>, Unparsed> {
    let headers: Vec<_> = header_re().find_iter(answer).collect();
    for (i, header) in headers.iter().enumerate().rev() {
        let section = &answer[header.end()..];
        let read = section_under(section, labels);
        // What `header_re` allows before a header that starts its line.
        let before = answer[..header.start()].rsplit('\n').next().unwrap_or_default();
        let in_prose = !before.trim_start_matches(|c: char| " \t>#*_-".contains(c)).is_empty();
        let states_nothing = matches!(read, Ok(None))
            && mentions(section, labels).is_empty()
            && !reading::declines(section);
        if i == 0 || !(in_prose && states_nothing) {
            return read;
        }
    }
    Ok(None)
}

/// What a section under a header states.
fn section_under(section: &str, labels: &[String]) -> Result<Option<Places>, Unparsed> {
    let items = numbered_items(section);
    if cut_off(section, &items, labels) {
        return Err(Unparsed::NoAnswer);
    }
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

/// A label as a JSON value or a table cell states it: `"Response C"`, `"C"`, `"**C**"`;
/// `Some(None)` for a label the run does not have (`"Response F"`), `None` for no label.
fn label_shape(s: &str, labels: &[String]) -> Option<Option<String>> {
    let s = s.trim().trim_matches(|c: char| "*_`\"'.".contains(c)).trim();
    let l = if (1..=3).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphabetic()) {
        format!("Response {}", s.to_uppercase())
    } else {
        let ms = mentions(s, labels);
        let [m] = ms.as_slice() else { return None };
        if m.start > 0 || m.end < s.len() {
            return None;
        }
        return Some(m.label.clone());
    };
    Some(labels.contains(&l).then_some(l))
}

/// The run's label a JSON value or a table cell states.
fn label_in(s: &str, labels: &[String]) -> Option<String> {
    label_shape(s, labels).flatten()
}

/// Entries `(rank, label)` as places, best first: equal ranks share a place. A label given
/// twice makes them contradictory.
fn ranked_places(mut entries: Vec<(f64, String)>) -> Result<Option<Places>, Unparsed> {
    for (i, (_, l)) in entries.iter().enumerate() {
        if entries[..i].iter().any(|(_, other)| other == l) {
            return Err(Unparsed::Inconsistent);
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
    Ok((!places.places.is_empty()).then_some(places))
}

/// The entries of a JSON ranking: a list of labels (`["Response C", "A", …]`, best first), a
/// list of `{"label": …, "rank": n}`, or a map either way (`{"1": "C", "2": "A"}`,
/// `{"Response C": 1, …}`). Labels the run does not have are dropped, as in text. `None` when
/// an entry is no label at all (a list of something else is no ranking).
fn json_entries(v: &Value, labels: &[String], keyed: bool) -> Option<Vec<(f64, String)>> {
    // A rank written out must be one of the run's places (`{"Response A": 8}` is a score).
    let rank_of = |v: &Value| -> Option<f64> {
        let r = v.as_f64().or_else(|| v.as_str().and_then(|s| ordinal(s.trim())))?;
        (1.0..=labels.len() as f64).contains(&r).then_some(r)
    };
    let entries: Vec<Option<(f64, String)>> = match v {
        Value::Array(list) => list
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Some(label_shape(s, labels)?.map(|l| (i as f64 + 1.0, l))),
                Value::Object(o) => {
                    let label = ["label", "response", "id", "name"]
                        .iter()
                        .find_map(|k| o.get(*k).and_then(Value::as_str))
                        .and_then(|s| label_shape(s, labels))?;
                    // Outside a `ranking` field, a list of objects is a ranking only when
                    // each states its rank (`[{"label": "A", "score": 8}]` is none).
                    let rank = match ["rank", "position", "place"].iter().find_map(|k| o.get(*k)) {
                        Some(r) => rank_of(r)?,
                        None if keyed => i as f64 + 1.0,
                        None => return None,
                    };
                    Some(label.map(|l| (rank, l)))
                }
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?,
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| match (ordinal(k.trim()), v.as_str()) {
                (Some(rank), Some(s)) => {
                    let rank = rank_of(&Value::from(rank))?;
                    Some(label_shape(s, labels)?.map(|l| (rank, l)))
                }
                _ => Some(label_shape(k, labels)?.map(|l| (rank_of(v).unwrap_or(f64::NAN), l))),
            })
            .collect::<Option<Vec<_>>>()?,
        _ => return None,
    };
    let entries: Vec<(f64, String)> = entries.into_iter().flatten().collect();
    // A label without a rank (`{"Response C": "good"}`) makes the map no ranking.
    entries.iter().all(|(r, _)| r.is_finite()).then_some(entries)
}

/// A rank as written in a cell or key: `1`, `#1`, `1.`, `1st`, `2nd`, `(3)`.
fn ordinal(s: &str) -> Option<f64> {
    let s = s.trim_matches(|c: char| c.is_whitespace() || "#.():*_".contains(c));
    let s = ["st", "nd", "rd", "th"].iter().find_map(|suf| s.strip_suffix(suf)).unwrap_or(s);
    let n: f64 = s.parse().ok()?;
    (n.is_finite() && n >= 0.0).then_some(n)
}

/// A ranking given as JSON, fenced or bare: a `ranking` (or `final_ranking`, `order`) field
/// holding a list or map of labels ([`json_entries`]), else a JSON array of labels on its own.
/// A label listed twice makes it contradictory.
fn from_json(answer: &str, labels: &[String]) -> Result<Option<Places>, Unparsed> {
    let keys = ["final_ranking", "finalRanking", "ranking", "rankings", "order"];
    let entries = match reading::json_field(answer, &keys) {
        Some(v) => json_entries(&v, labels, true),
        None => json_arrays(answer)
            .iter()
            .rev()
            .filter(|v| v.as_array().is_some_and(|a| a.len() >= 2))
            .find_map(|v| json_entries(v, labels, false)),
    };
    match entries {
        Some(e) => ranked_places(e),
        None => Ok(None),
    }
}

/// The JSON arrays a text holds: fenced ones (```` ```json ````), and bare ones that open with
/// a string or an object (`["Response C", "Response A"]`); prose in square brackets
/// (`[Response X]`) is none.
fn json_arrays(text: &str) -> Vec<Value> {
    let mut out: Vec<Value> =
        reading::json_values(text).into_iter().filter(Value::is_array).collect();
    let mut at = 0;
    let mut tries = 0;
    while let Some(i) = text[at..].find('[').map(|i| at + i) {
        at = i + 1;
        let next = text[at..].trim_start().chars().next();
        // A list inside an object or another list (`"best": ["Response A"]`) is not one.
        let before = text[..i].trim_end();
        let inside = before.ends_with([',', '['])
            || before.strip_suffix(':').is_some_and(|b| b.trim_end().ends_with('"'));
        if !matches!(next, Some('"' | '{')) || inside || tries >= 64 {
            continue;
        }
        tries += 1;
        let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        if let Some(Ok(v)) = stream.next() {
            at = i + stream.byte_offset();
            if v.is_array() && !out.contains(&v) {
                out.push(v);
            }
        }
    }
    out
}

/// The ranking an answer states, by the first way of stating one that it uses.
fn read_answer(answer: &str, labels: &[String]) -> Result<Option<Places>, Unparsed> {
    let stated = |p: Option<Places>| p.filter(|p| !p.places.is_empty());
    if let Some(p) = stated(under_header(answer, labels)?) {
        return Ok(Some(p));
    }
    if let Some(p) = stated(from_json(answer, labels)?) {
        return Ok(Some(p));
    }
    if let Some(p) = stated(from_table(answer, labels)?) {
        return Ok(Some(p));
    }
    if let Some(p) = stated(from_chain_line(answer, labels)?) {
        return Ok(Some(p));
    }
    if let Some(p) = stated(from_closing_list(answer, labels)?) {
        return Ok(Some(p));
    }
    from_prose(answer, labels)
}

/// Reads an evaluator's ranking (see the module's documentation for what counts).
pub fn read_ranking(text: &str, labels: &[String]) -> ReadRanking {
    let split = reading::split_reasoning(text);
    let answer = split.answer.as_ref();
    let found = if split.unclosed { Ok(None) } else { read_answer(answer, labels) };
    match found {
        Ok(Some(p)) if !p.places.is_empty() => {
            ReadRanking { places: p.places, unparsed: None, read_from: Some(ReadFrom::Text) }
        }
        Err(why) => ReadRanking { places: Vec::new(), unparsed: Some(why), read_from: None },
        _ => {
            ReadRanking { places: Vec::new(), unparsed: Some(Unparsed::of(text)), read_from: None }
        }
    }
}

/// The reply schema of a ranking of `labels` (named `name`): its reasoning, then every label
/// once, best first.
pub fn ranking_schema(name: &str, labels: &[String]) -> Arc<ReplySchema> {
    let n = labels.len();
    ReplySchema::new(
        name,
        schema::reasoned([(
            "ranking",
            schema::described(
                schema::distinct(schema::one_of(labels), n, n),
                "every response label, each once, from best to worst",
            ),
        )]),
    )
}

/// Reads a ranking reply: from its JSON when it fits `schema` (its labels in the order given,
/// each a place of its own), else by its text ([`read_ranking`]).
pub fn read_ranking_reply(text: &str, labels: &[String], schema: &ReplySchema) -> ReadRanking {
    let from_json = |v: &Value| {
        let order: Vec<String> = serde_json::from_value(v.get("ranking")?.clone()).ok()?;
        order.iter().all(|l| labels.contains(l)).then(|| ReadRanking {
            places: order.into_iter().map(|l| vec![l]).collect(),
            unparsed: None,
            read_from: None,
        })
    };
    let read = |t: &str| read_ranking(t, labels);
    let (mut ranking, from) = schema.read_reply(text, from_json, read, |r| !r.places.is_empty());
    ranking.read_from = from;
    ranking
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
pub(crate) mod tests;
