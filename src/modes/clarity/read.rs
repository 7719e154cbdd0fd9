//! Reading a reply: the scores, critique and issues of a verdict (from its JSON object, else its
//! `Dimension: N` lines), the reply schemas, and the Arbiter's ruling.

use super::*;

use std::collections::BTreeMap;

use crate::modes::reading::{split_reasoning, Unparsed};

// ---- parsing --------------------------------------------------------------------------------

/// The scans still looking for their closing `}` that are in one string state. A scan's
/// brace depth is its key plus `shift`, so a brace moves all of them at once; scans of equal
/// depth share an entry, and a scan ends (its depth reaches 0) only from the smallest key.
#[derive(Default)]
struct Scans {
    shift: i64,
    by_key: BTreeMap<i64, Vec<usize>>,
    len: usize,
}

impl Scans {
    /// Both sets of scans, which from here on read the text alike. The smaller moves into the
    /// larger, so no scan moves more than O(log n) times over a text.
    fn merge(a: Scans, b: Scans) -> Scans {
        let (mut big, small) = if a.len >= b.len { (a, b) } else { (b, a) };
        big.len += small.len;
        for (key, ids) in small.by_key {
            big.by_key.entry(key + small.shift - big.shift).or_default().extend(ids);
        }
        big
    }
}

/// A `{` of a reply, as a scan starting there reads the text: braces counted outside `"`
/// strings, `\` escaping the next byte inside them.
struct Opening {
    start: usize,
    /// The `}` that brings the scan back to depth 0, if any.
    end: Option<usize>,
    /// An earlier `{` whose scan is outside a string here and still open (the innermost):
    /// were its text JSON, this `{` would open one of its values, ending at the same `}`.
    around: Option<usize>,
}

/// Every `{` of `text` with where its own scan ends, in one pass: O(n log n), where a scan
/// per `{` is O(n²). A scan from each `{` is in one of three string states (outside, inside,
/// just after a `\` inside); scans in the same state react alike to every byte, so they are
/// moved as a set, and a set takes a brace in O(log n). Braces, quotes and backslashes are
/// ASCII, so bytes are read as characters.
fn openings(text: &str) -> Vec<Opening> {
    let mut found: Vec<Opening> = Vec::new();
    let (mut outside, mut inside, mut escaped) =
        (Scans::default(), Scans::default(), Scans::default());
    for (i, b) in text.bytes().enumerate() {
        if b == b'\\' {
            // Outside a string a backslash is nothing; inside it escapes the next byte.
            std::mem::swap(&mut inside, &mut escaped);
            continue;
        }
        // Any other byte ends an escape.
        let unescaped = std::mem::take(&mut escaped);
        if b == b'"' {
            let opened = Scans::merge(std::mem::take(&mut outside), unescaped);
            outside = std::mem::replace(&mut inside, opened);
            continue;
        }
        inside = Scans::merge(std::mem::take(&mut inside), unescaped);
        if b == b'{' {
            outside.shift += 1;
            let around = outside.by_key.first_key_value().and_then(|(_, ids)| ids.first());
            found.push(Opening { start: i, end: None, around: around.copied() });
            outside.by_key.entry(1 - outside.shift).or_default().push(found.len() - 1);
            outside.len += 1;
        } else if b == b'}' {
            outside.shift -= 1;
            for id in outside.by_key.remove(&-outside.shift).unwrap_or_default() {
                found[id].end = Some(i);
                outside.len -= 1;
            }
        }
    }
    found
}

/// The last JSON object with `scores` in a text (code fences, commentary and a quoted
/// template before it allowed): the model's own answer comes last.
///
/// Exactly: each `{`, from the last back, is taken with the text up to the `}` that closes it
/// when scanning from that `{` alone (braces counted outside `"` strings, `\` escaping inside
/// them); the first such text that parses as a JSON object whose `scores` is an object is it.
/// So an object nested in another counts on its own, and the one that opens last wins.
pub fn last_json_object(text: &str) -> Option<Value> {
    find_last_object(text, |s| serde_json::from_str(s).ok())
}

/// `last_json_object`, with the parser given: tests count what it is handed.
///
/// The parsing stays linear in the text: a candidate that cannot name `scores` (neither
/// `scores` nor a `\`, which could spell it, in it) is not parsed, and the `around` of a
/// candidate that is not JSON cannot be JSON either, so it is not parsed. What is left to
/// parse more than once is (short of crafted escapes, which can hide an `around`) JSON
/// objects nested in each other, at most 128 deep (serde_json's limit): each byte is parsed
/// at most about 128 times.
pub(super) fn find_last_object(
    text: &str,
    mut parse: impl FnMut(&str) -> Option<Value>,
) -> Option<Value> {
    let found = openings(text);
    let bytes = text.as_bytes();
    let hints: Vec<usize> = (0..bytes.len())
        .filter(|&i| bytes[i] == b'\\' || bytes[i..].starts_with(b"scores"))
        .collect();
    let mut not_json = vec![false; found.len()];
    for (id, o) in found.iter().enumerate().rev() {
        let Some(end) = o.end else { continue };
        if !not_json[id] {
            let first_hint = hints.partition_point(|&h| h < o.start);
            if hints.get(first_hint).is_none_or(|&h| h > end) {
                continue;
            }
            match parse(&text[o.start..=end]) {
                Some(v) if v.get("scores").is_some_and(Value::is_object) => return Some(v),
                Some(_) => continue,
                None => {}
            }
        }
        if let Some(around) = o.around {
            not_json[around] = true;
        }
    }
    None
}

fn score_value(v: &Value) -> Option<f64> {
    let n = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().trim_end_matches("/10").trim().parse().ok()?,
        _ => return None,
    };
    (0.0..=10.0).contains(&n).then(|| (n * 10.0).round() / 10.0)
}

/// The score a `Name: N` line (or table row `| Name | N |`) states after its name: `7`,
/// `8/10`, `**6.5**`, `7 out of 10`. A range (`7-8`, the guideline's `9-10`) or another scale
/// (`4/5`) states none.
fn line_score(line_rest: &str) -> Option<f64> {
    let rest = line_rest.trim_start_matches([' ', ':', '-', '—', '–', '=', '|', '*', '_', '`']);
    // A minus sign just before the number (`: -3`) makes it negative: no score.
    if line_rest[..line_rest.len() - rest.len()].ends_with(['-', '–'])
        && rest.starts_with(|c: char| c.is_ascii_digit())
    {
        return None;
    }
    let rest = rest.trim();
    let len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (num, after) = rest.split_at(len);
    let num = num.trim_end_matches('.');
    if num.is_empty() {
        return None;
    }
    let after = after.trim_start_matches(['*', '_', ' ']);
    // A range: `7-8`, `7 – 8`.
    let range = after.strip_prefix(['-', '–']);
    if range.is_some_and(|r| r.trim_start().starts_with(|c: char| c.is_ascii_digit())) {
        return None;
    }
    let scale = after
        .strip_prefix('/')
        .or_else(|| after.strip_prefix("out of"))
        .map(|s| s.trim_start_matches(['*', '_', ' ']));
    if let Some(scale) = scale {
        let n = scale.find(|c: char| !c.is_ascii_digit()).unwrap_or(scale.len());
        if scale[..n] != *"10" {
            return None;
        }
    }
    score_value(&Value::String(num.to_string()))
}

/// Scores by dimension, from the answer part of a reply: the last JSON object with `scores`,
/// else `Dimension: N` lines or table rows (the last line naming a dimension wins). A draft
/// scorecard in a `<think>` block never counts; a reply whose reasoning never closed has
/// none.
pub fn parse_scores(text: &str) -> ([Option<f64>; 7], Option<Value>) {
    let split = split_reasoning(text);
    if split.unclosed {
        return ([None; 7], None);
    }
    let text = split.answer.as_ref();
    if let Some(obj) = last_json_object(text) {
        let scores = &obj["scores"];
        let s = std::array::from_fn(|i| {
            let d = &DIMENSIONS[i];
            scores.get(d.key).or_else(|| scores.get(d.name)).and_then(score_value)
        });
        return (s, Some(obj));
    }
    let s = std::array::from_fn(|i| {
        let d = &DIMENSIONS[i];
        text.lines().rev().find_map(|line| {
            let l = line.trim().trim_start_matches(['-', '*', ' ', '|']).replace("**", "");
            let lower = l.to_lowercase();
            let rest = [d.name.to_lowercase(), d.key.to_lowercase()]
                .iter()
                .find_map(|n| lower.strip_prefix(n.as_str()).map(|r| r.to_string()))?;
            line_score(&rest)
        })
    });
    (s, None)
}

/// One issue an evaluator raised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Issue {
    pub dimension: String,
    pub issue: String,
    pub suggested_fix: String,
    pub quote: String,
    pub severity: String,
}

pub(super) fn issues_of(obj: Option<&Value>) -> Vec<Issue> {
    let Some(list) = obj.and_then(|o| o.get("issues")).and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|i| {
            let s = |k: &str| i.get(k).and_then(Value::as_str).unwrap_or("").trim().to_string();
            let issue = s("issue");
            (!issue.is_empty()).then(|| Issue {
                dimension: s("dimension"),
                issue,
                suggested_fix: s("suggestedFix"),
                quote: s("quote"),
                severity: match s("severity").to_lowercase().as_str() {
                    "high" => "high".into(),
                    "low" => "low".into(),
                    _ => "medium".into(),
                },
            })
        })
        .take(20)
        .collect()
}

/// An evaluator's scorecard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The evaluator's persona (`skeptic`, `advocate`, `generalist`).
    pub role: String,
    pub model: String,
    /// Its score (0-10) by dimension key; null for a dimension it did not score.
    #[serde(with = "score_map")]
    #[schemars(with = "BTreeMap<String, Option<f64>>")]
    pub scores: [Option<f64>; 7],
    pub overall: Option<f64>,
    pub critique: String,
    pub issues: Vec<Issue>,
    pub justification: Option<String>,
    pub response_time_ms: i64,
    pub parse_success: bool,
    /// Why the scorecard could not be read (fewer than four scores): `refused`,
    /// `reasoning_only` or `no_answer`. Null when it was.
    #[serde(default)]
    pub unparsed: Option<Unparsed>,
    /// Where the scorecard was read from (the reply's JSON or its text), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// Scores as `{dimensionKey: score}` in JSON.
mod score_map {
    use super::DIMENSIONS;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(s: &[Option<f64>; 7], ser: S) -> Result<S::Ok, S::Error> {
        let m: BTreeMap<&str, Option<f64>> =
            DIMENSIONS.iter().zip(s).map(|(d, v)| (d.key, *v)).collect();
        m.serialize(ser)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<[Option<f64>; 7], D::Error> {
        let m = BTreeMap::<String, Option<f64>>::deserialize(de)?;
        Ok(std::array::from_fn(|i| m.get(DIMENSIONS[i].key).copied().flatten()))
    }
}

/// The weighted overall score over the dimensions that have a score, one decimal.
pub fn weighted(scores: &[Option<f64>; 7]) -> Option<f64> {
    let (sum, weight) = DIMENSIONS
        .iter()
        .zip(scores)
        .filter_map(|(d, s)| s.map(|s| (d.weight * s, d.weight)))
        .fold((0.0, 0.0), |(a, w), (x, y)| (a + x, w + y));
    (weight > 0.0).then(|| ((sum / weight) * 10.0).round() / 10.0)
}

/// An evaluator's scorecard read by the text readers (the JSON object the spec's format asks
/// for, found in any prose, else `Dimension: N` lines); None when the call failed.
pub fn read_verdict(role: &str, reply: &CallReply) -> Option<Verdict> {
    Some(text_verdict(role, reply, reply.result.as_ref().ok()?))
}

/// [`read_verdict`] of `text`, `reply`'s text or none.
fn text_verdict(role: &str, reply: &CallReply, text: &str) -> Verdict {
    let (scores, obj) = parse_scores(text);
    let readable = scores.iter().filter(|s| s.is_some()).count();
    let s =
        |k: &str| obj.as_ref().and_then(|o| o.get(k)).and_then(Value::as_str).map(str::to_string);
    // Without a critique field, the start of the answer (never of the reasoning).
    let answer = split_reasoning(text).answer;
    Verdict {
        role: role.to_string(),
        model: reply.model.clone(),
        overall: weighted(&scores),
        critique: s("critique").unwrap_or_else(|| answer.chars().take(600).collect()),
        issues: issues_of(obj.as_ref()),
        justification: s("justification"),
        scores,
        response_time_ms: reply.response_time_ms as i64,
        parse_success: readable >= 4,
        unparsed: (readable < 4).then(|| Unparsed::of(text)),
        read_from: (readable >= 4).then_some(ReadFrom::Text),
    }
}

/// The name of an evaluator's first scorecard's schema.
pub const SCORECARD_SCHEMA: &str = "clarity_scorecard";
/// The name of a revised scorecard's schema (the discussion round's).
pub const DISCUSSION_SCHEMA: &str = "clarity_discussion";
/// The name of the Arbiter's ruling's schema.
pub const RULING_SCHEMA: &str = "clarity_ruling";

/// The free-text fields' bounds: a critique or justification is "a short paragraph", an
/// issue's fields a sentence or a quote; at most [`MAX_ISSUES`] issues (the consolidated
/// critique keeps five). Bounded so a small model looping in a string or a list still closes
/// the object within its output cap.
pub(super) const PARAGRAPH_MAX_CHARS: usize = 600;
pub(super) const SENTENCE_MAX_CHARS: usize = 300;
const MAX_ISSUES: usize = 5;

/// A score from 0 to 10 for each of `keys`, the dimension keys the prompt lists beside their
/// names (a description per score would only repeat that list).
fn scores_schema<'a>(keys: impl IntoIterator<Item = &'a str>) -> serde_json::Value {
    schema::object(keys.into_iter().map(|k| (k, schema::number(0.0, 10.0))))
}

/// An evaluator's scorecard schema: its reasoning, a 0-10 score per dimension, the critique,
/// the issues (each naming one of the dimensions, its severity one of the three words) and,
/// for the discussion round, why it revised or kept its scores.
fn scorecard_schema(name: &str, discussion: bool) -> Arc<ReplySchema> {
    let keys: Vec<&str> = DIMENSIONS.iter().map(|d| d.key).collect();
    let issue = schema::object([
        ("dimension", schema::described(schema::one_of(&keys), "the dimension concerned")),
        ("issue", schema::described(schema::text(SENTENCE_MAX_CHARS), "what is wrong")),
        ("suggestedFix", schema::described(schema::text(SENTENCE_MAX_CHARS), "how to fix it")),
        (
            "quote",
            schema::described(
                schema::text(SENTENCE_MAX_CHARS),
                "the exact words of the brief concerned",
            ),
        ),
        ("severity", schema::one_of(&["high", "medium", "low"])),
    ]);
    let mut fields = vec![
        (
            "scores",
            schema::described(
                scores_schema(keys.iter().copied()),
                "your score from 0 to 10 per dimension",
            ),
        ),
        (
            "critique",
            schema::described(
                schema::text(PARAGRAPH_MAX_CHARS),
                "a short paragraph explaining your scores",
            ),
        ),
        (
            "issues",
            schema::described(
                schema::list(issue, 0, MAX_ISSUES),
                "the brief's problems, most important first",
            ),
        ),
    ];
    if discussion {
        fields.push((
            "justification",
            schema::described(
                schema::text(PARAGRAPH_MAX_CHARS),
                "why you revised or kept your scores",
            ),
        ));
    }
    ReplySchema::new(name, schema::reasoned(fields))
}

/// The first round's scorecard schema (the same for every run and persona).
pub fn evaluation_schema() -> Arc<ReplySchema> {
    scorecard_schema(SCORECARD_SCHEMA, false)
}

/// The discussion round's scorecard schema: the first's, with a `justification`.
pub fn discussion_schema() -> Arc<ReplySchema> {
    scorecard_schema(DISCUSSION_SCHEMA, true)
}

/// The Arbiter's ruling schema: its reasoning, then a 0-10 score for exactly the disputed
/// dimensions.
pub fn ruling_schema(disputed: &[String]) -> Arc<ReplySchema> {
    ReplySchema::new(
        RULING_SCHEMA,
        schema::reasoned([(
            "scores",
            schema::described(
                scores_schema(disputed.iter().map(String::as_str)),
                "your definitive score from 0 to 10 for each disputed dimension",
            ),
        )]),
    )
}

/// A scorecard from a reply's JSON (one fitting the schema), when every score reads as the text
/// reader reads it (0 to 10, one decimal): all seven dimensions, so it always counts.
fn json_verdict(role: &str, reply: &CallReply, obj: &Value) -> Option<Verdict> {
    let given = obj.get("scores")?;
    let read: Vec<f64> =
        DIMENSIONS.iter().map(|d| given.get(d.key).and_then(score_value)).collect::<Option<_>>()?;
    let scores: [Option<f64>; 7] = std::array::from_fn(|i| Some(read[i]));
    let s = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    Some(Verdict {
        role: role.to_string(),
        model: reply.model.clone(),
        overall: weighted(&scores),
        critique: s("critique").unwrap_or_default(),
        issues: issues_of(Some(obj)),
        justification: s("justification"),
        scores,
        response_time_ms: reply.response_time_ms as i64,
        parse_success: true,
        unparsed: None,
        read_from: Some(ReadFrom::Json),
    })
}

/// An evaluator's scorecard read from its JSON when it fits `schema`, else by the text
/// readers ([`read_verdict`]); None when the call failed.
pub fn read_verdict_reply(role: &str, reply: &CallReply, schema: &ReplySchema) -> Option<Verdict> {
    let text = reply.result.as_ref().ok()?;
    let from_json = |obj: &Value| json_verdict(role, reply, obj);
    let from_text = |t: &str| text_verdict(role, reply, t);
    let (mut verdict, from) = schema.read_reply(text, from_json, from_text, |v| v.parse_success);
    verdict.read_from = from;
    Some(verdict)
}

/// What the Arbiter ruled: its score per disputed dimension it scored, its reasoning, and
/// where they were read from (None when no disputed dimension was scored).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ruling {
    pub scores: BTreeMap<String, f64>,
    pub reasoning: Option<String>,
    pub read_from: Option<ReadFrom>,
}

/// The Arbiter's reply read from its JSON when it fits `schema` (every disputed dimension
/// scored 0-10), else by the text reader, which keeps the disputed dimensions it finds.
pub fn read_ruling(text: &str, disputed: &[String], schema: &ReplySchema) -> Ruling {
    let from_json = |obj: &Value| {
        let given = obj.get("scores")?;
        let scores = disputed
            .iter()
            .map(|k| given.get(k).and_then(score_value).map(|s| (k.clone(), s)))
            .collect::<Option<BTreeMap<_, _>>>()?;
        let reasoning = obj.get(schema::REASONING).and_then(Value::as_str).map(str::to_string);
        Some(Ruling { scores, reasoning, read_from: None })
    };
    let from_text = |text: &str| {
        let (scores, obj) = parse_scores(text);
        let scores: BTreeMap<String, f64> = DIMENSIONS
            .iter()
            .zip(scores)
            .filter(|(dim, _)| disputed.iter().any(|k| k == dim.key))
            .filter_map(|(dim, s)| s.map(|s| (dim.key.to_string(), s)))
            .collect();
        let reasoning = obj.as_ref().and_then(|o| o.get("reasoning")).and_then(Value::as_str);
        Ruling { scores, reasoning: reasoning.map(str::to_string), read_from: None }
    };
    let (mut ruling, from) =
        schema.read_reply(text, from_json, from_text, |r| !r.scores.is_empty());
    ruling.read_from = from;
    ruling
}
