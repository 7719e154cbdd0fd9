//! Reading a model's reply as a careful person would, before any mode's parser looks for its
//! answer: reasoning traces are set aside, fenced JSON is found, and a reply that declines to
//! answer is recognised as such.
//!
//! The contract every parser keeps: an answer is reported only when the text states it. When
//! it does not, the parser reports nothing and says why ([`Unparsed`]); the raw text is kept
//! and shown. A mention is never a vote.

use std::borrow::Cow;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A reply split into its reasoning trace and the answer the model gave after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'a> {
    /// The text outside every reasoning block: what parsers read and what is passed on.
    pub answer: Cow<'a, str>,
    /// The reasoning, blocks joined by a blank line, when there was any.
    pub reasoning: Option<String>,
    /// A reasoning block was opened and never closed: the model stopped while thinking (or
    /// hit its output cap), and whatever answer it had in mind is not in the text.
    pub unclosed: bool,
}

/// The names of reasoning blocks: `<think>` (DeepSeek-R1, Qwen3), `<thinking>`, `<reasoning>`.
const TAGS: [&str; 3] = ["think", "thinking", "reasoning"];

fn open_re() -> &'static Regex {
    regex!(format!(r"(?i)<({})\s*>", TAGS.join("|")))
}

fn close_re() -> &'static Regex {
    regex!(format!(r"(?i)</\s*({})\s*>", TAGS.join("|")))
}

/// Splits a reply into reasoning and answer.
///
/// - A closed block (`<think>…</think>`, any of [`TAGS`], any case) is reasoning, wherever it
///   stands; blocks of one name may not nest, so the first closing tag of the same name ends it.
/// - A closing tag with no opening one before it (servers whose chat template opens the block
///   in the prompt) makes everything before it reasoning.
/// - An opening tag never closed makes everything after it reasoning, and `unclosed` is set.
pub fn split_reasoning(text: &str) -> Split<'_> {
    if !text.contains('<') {
        return Split { answer: Cow::Borrowed(text), reasoning: None, unclosed: false };
    }
    let mut answer = String::new();
    let mut reasoning: Vec<&str> = Vec::new();
    let mut unclosed = false;
    let mut rest = text;
    // A leading closing tag with no opening one: the template opened the block.
    if let Some(close) = close_re().find(rest) {
        let opened_before = open_re().find(&rest[..close.start()]).is_some();
        if !opened_before {
            reasoning.push(rest[..close.start()].trim());
            rest = &rest[close.end()..];
        }
    }
    while let Some(open) = open_re().captures(rest) {
        let Some(whole) = open.get(0) else { break };
        let name = open.get(1).map_or("think", |m| m.as_str()).to_lowercase();
        answer.push_str(&rest[..whole.start()]);
        let after = &rest[whole.end()..];
        let close = close_re()
            .captures_iter(after)
            .find(|c| c.get(1).is_some_and(|n| n.as_str().eq_ignore_ascii_case(&name)));
        match close.and_then(|c| c.get(0)) {
            Some(end) => {
                reasoning.push(after[..end.start()].trim());
                rest = &after[end.end()..];
            }
            None => {
                reasoning.push(after.trim());
                unclosed = true;
                rest = "";
                break;
            }
        }
    }
    answer.push_str(rest);
    if reasoning.is_empty() {
        return Split { answer: Cow::Borrowed(text), reasoning: None, unclosed: false };
    }
    let joined: Vec<&str> = reasoning.into_iter().filter(|r| !r.is_empty()).collect();
    Split {
        answer: Cow::Owned(answer.trim().to_string()),
        reasoning: (!joined.is_empty()).then(|| joined.join("\n\n")),
        unclosed,
    }
}

/// The answer part of a reply (reasoning blocks removed): what a parser reads and what is
/// handed on to other models or kept as the conversation's reply.
pub fn answer_text(text: &str) -> Cow<'_, str> {
    split_reasoning(text).answer
}

/// Wraps a reasoning trace the provider sent in its own field (`reasoning`,
/// `reasoning_content`) in a `<think>` block before the answer, so a reply has one shape
/// whichever way its provider sends reasoning: stored whole, read without it, shown folded.
pub fn with_reasoning(reasoning: &str, answer: &str) -> String {
    if reasoning.trim().is_empty() {
        return answer.to_string();
    }
    format!("<think>\n{}\n</think>\n\n{answer}", reasoning.trim())
}

/// A reply as a person, or a model it is quoted to, reads it: a structured reply (its answer
/// is one JSON object) becomes a line per field in the object's order (`Reasoning: …`,
/// `Ranking:` and its items numbered beneath), reasoning blocks left out; any other reply is
/// its answer text as it stands.
pub fn readable(text: &str) -> Cow<'_, str> {
    let answer = answer_text(text);
    let trimmed = answer.trim();
    let body = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|b| b.trim_end().strip_suffix("```"))
        .map_or(trimmed, str::trim);
    if !body.starts_with('{') {
        return answer;
    }
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(body) else { return answer };
    let mut out = String::new();
    for (k, v) in &fields {
        write_field(&mut out, &field_words(k), v, 0);
    }
    Cow::Owned(out.trim_end().to_string())
}

/// `final_ranking` / `finalRanking` as `Final ranking`.
pub fn field_words(key: &str) -> String {
    // A key that is already words (a rubric criterion: `Cost Efficiency`) stays as written.
    if key.contains(' ') {
        return key.to_string();
    }
    let mut words = String::new();
    for (i, c) in key.chars().enumerate() {
        if c == '_' || c == '-' {
            words.push(' ');
        } else if c.is_uppercase() && i > 0 {
            words.push(' ');
            words.extend(c.to_lowercase());
        } else if i == 0 {
            words.extend(c.to_uppercase());
        } else {
            words.push(c);
        }
    }
    words
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "yes" } else { "no" }.to_string()),
        Value::Null => Some("—".to_string()),
        _ => None,
    }
}

fn write_field(out: &mut String, name: &str, v: &Value, depth: usize) {
    let pad = "  ".repeat(depth);
    if let Some(s) = scalar(v) {
        out.push_str(&format!(
            "{pad}{name}: {s}
"
        ));
        return;
    }
    out.push_str(&format!(
        "{pad}{name}:
"
    ));
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                match scalar(item) {
                    Some(s) => out.push_str(&format!(
                        "{pad}{}. {s}
",
                        i + 1
                    )),
                    None => write_field(out, &format!("{}", i + 1), item, depth + 1),
                }
            }
        }
        Value::Object(o) => {
            for (k, item) in o {
                write_field(out, &field_words(k), item, depth + 1);
            }
        }
        _ => {}
    }
}

/// Why a reply gave no answer a parser could report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Unparsed {
    /// The model declined: it refused, abstained or said it cannot answer.
    Refused,
    /// The model only thought: its reasoning never closed, or nothing followed it.
    ReasoningOnly,
    /// The reply says something, but not the answer in a form that can be read.
    NoAnswer,
    /// The reply states contradictory answers (a label ranked twice, two different votes in
    /// its final section): a careful reader would not pick one.
    Inconsistent,
}

impl Unparsed {
    /// Why `text` (a whole reply) gave no answer.
    pub fn of(text: &str) -> Self {
        let split = split_reasoning(text);
        if split.unclosed || (split.reasoning.is_some() && split.answer.trim().is_empty()) {
            Unparsed::ReasoningOnly
        } else if declines(&split.answer) {
            Unparsed::Refused
        } else {
            Unparsed::NoAnswer
        }
    }

    /// Words for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Unparsed::Refused => "declined to answer",
            Unparsed::ReasoningOnly => "stopped while reasoning",
            Unparsed::NoAnswer => "gave no readable answer",
            Unparsed::Inconsistent => "gave contradictory answers",
        }
    }
}

fn decline_re() -> &'static Regex {
    regex!(
        r"(?ix)
            \bI\s*(?:'m|\s+am)\s+(?:not\s+able|unable|not\s+comfortable|not\s+in\s+a\s+position)\s+to\b
            | \bI\s+(?:can(?:not|'t|’t)|can\s+not|won(?:'t|’t)|will\s+not|must\s+decline|decline|refuse|have\s+to\s+decline)\b
            | \bI\s+(?:abstain|pass)\b
            | \bI\s*(?:'d|’d|\s+would)\s+rather\s+not\b
            | \b(?:abstain(?:ing)?|no\s+vote|no\s+ranking|no\s+verdict|no\s+estimate)\b
            | \bunable\s+to\s+(?:rank|vote|decide|choose|estimate|judge|evaluate|assess|determine|answer)\b
            | \bnot\s+possible\s+to\s+(?:rank|vote|decide|choose|estimate|judge|determine)\b
            "
    )
}

/// The text says the model declines (refuses, abstains, cannot answer). Only a hint for
/// *why* nothing was parsed: a reply that declines and then states an answer anyway is read
/// by its stated answer.
pub fn declines(text: &str) -> bool {
    decline_re().is_match(text)
}

/// Every JSON object or array in a text, in order: the contents of fenced code blocks
/// (```` ```json ```` or plain), then, when no fence held one, each outermost `{…}` that
/// parses on its own. What a model writes after its JSON comes later in the list.
pub fn json_values(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let Some(end) = after[body_start..].find("```") else { break };
        let body = after[body_start..body_start + end].trim();
        if let Ok(v) = serde_json::from_str::<Value>(body) {
            if v.is_object() || v.is_array() {
                out.push(v);
            }
        }
        rest = &after[body_start + end + 3..];
    }
    if out.is_empty() {
        out.extend(bare_objects(text));
    }
    out
}

/// The complete objects of the list under `key` in a JSON object cut off before its end, as a
/// reply is when it reaches its token cap inside its JSON: `{"reasoning": "…", "items": [{…},
/// {…}, {"a": 1, "b` gives the first two. `text` must open with the object (a code fence before
/// it is passed over); the key counts only at the object's top level, never inside a string or
/// a nested value. None when the text is no such object or the list holds no complete object.
pub fn cut_list_items(text: &str, key: &str) -> Option<Vec<Value>> {
    let text = text.trim_start();
    let text = match text.strip_prefix("```") {
        Some(rest) => &rest[rest.find('\n')? + 1..],
        None => text,
    };
    let text = text.trim_start();
    if !text.starts_with('{') {
        return None;
    }
    let bytes = text.as_bytes();
    // The brackets open, innermost last: a `}` that closes a `[` is no JSON.
    let mut open: Vec<u8> = Vec::new();
    let (mut in_str, mut escaped, mut str_start) = (false, false, 0);
    // The last string closed at the object's top level, the key its `:` made of it, and whether
    // the list under `key` is open.
    let (mut last_str, mut pending): (Option<&str>, Option<&str>) = (None, None);
    let mut in_list = false;
    let mut item_start = None;
    let mut items = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => {
                    in_str = false;
                    if open.len() == 1 {
                        last_str = Some(&text[str_start + 1..i]);
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => (in_str, str_start) = (true, i),
            b':' if open.len() == 1 => pending = last_str.take(),
            b',' if open.len() == 1 => (last_str, pending) = (None, None),
            b'{' | b'[' => {
                if open.len() == 1 && b == b'[' && pending == Some(key) {
                    in_list = true;
                }
                open.push(b);
                if in_list && open.len() == 3 && b == b'{' {
                    item_start = Some(i);
                }
            }
            b'}' | b']' => {
                let opener = if b == b'}' { b'{' } else { b'[' };
                if open.pop() != Some(opener) {
                    return None;
                }
                let depth = open.len();
                if in_list && depth == 2 && b == b'}' {
                    if let Some(start) = item_start.take() {
                        items.push(serde_json::from_str::<Value>(&text[start..=i]).ok()?);
                    }
                }
                if in_list && depth == 1 {
                    // The list closed: every item of it is here, and the cut comes later.
                    in_list = false;
                }
                if depth == 0 {
                    // The object closed: it was not cut off.
                    return None;
                }
            }
            _ => {}
        }
    }
    (!items.is_empty()).then_some(items)
}

/// The outermost `{…}` spans that parse as JSON objects, in order. Braces are counted
/// outside JSON strings; a `{` that never closes is passed over, so a stray brace in prose
/// does not hide the object after it. Linear in the text: each span is parsed once (spans
/// nested in another are not tried on their own), and nesting past serde_json's limit fails
/// fast.
fn bare_objects(text: &str) -> Vec<Value> {
    bare_objects_with(text, |span| serde_json::from_str::<Value>(span).ok())
}

/// [`bare_objects`] with the parser given: tests count what it is handed.
fn bare_objects_with(text: &str, mut parse: impl FnMut(&str) -> Option<Value>) -> Vec<Value> {
    let bytes = text.as_bytes();
    let mut open: Vec<usize> = Vec::new();
    // Matched spans not inside another matched span, by start.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let (mut in_str, mut escaped) = (false, false);
    for (i, &b) in bytes.iter().enumerate() {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            // Quotes count only inside braces: prose may hold a lone `"`.
            b'"' if !open.is_empty() => in_str = true,
            b'{' => open.push(i),
            b'}' => {
                if let Some(start) = open.pop() {
                    while spans.last().is_some_and(|&(s, _)| s > start) {
                        spans.pop();
                    }
                    spans.push((start, i));
                }
            }
            _ => {}
        }
    }
    spans.into_iter().filter_map(|(s, e)| parse(&text[s..=e]).filter(Value::is_object)).collect()
}

/// The value under the first of `keys` (case-insensitive) in the last JSON object of the
/// text that has one of them.
pub fn json_field(text: &str, keys: &[&str]) -> Option<Value> {
    json_values(text).into_iter().rev().find_map(|v| {
        let obj = v.as_object()?;
        keys.iter().find_map(|k| {
            obj.iter().find(|(name, _)| name.eq_ignore_ascii_case(k)).map(|(_, v)| v.clone())
        })
    })
}

/// Whether a value as written states no single value: the prompt's placeholder echoed back
/// (`<1-5>`, `<a number from 0.0 to 1.0>`, `[score]`) or a range (`3-4`, `0.6 to 0.8`,
/// `5-6 hours`). A reader takes neither's first number as the value.
pub fn no_single_value(text: &str) -> bool {
    regex!(r"(?i)^[\s*_`'\x22]*(?:<[^>]*>?|\[[^\]]*[a-z][^\]]*\]|\d+(?:[.,]\d+)?\s*%?\s*(?:[-–—]|to\b)\s*\d)")
    .is_match(text)
}

/// Whether a value only echoes a placeholder of the format a prompt asked for, and so states
/// nothing: all of it in angle brackets (`<short title>`, `<…>`), or in square brackets with
/// no figure and a template's word (`[Your idea]`, `[short title]`, `[number]`). Markup and
/// quotes around it are set aside; a bracketed name (`[Solar roads]`) is a value.
pub fn echoed_placeholder(value: &str) -> bool {
    let t = value.trim().trim_matches(|c: char| "*_`.\"'“”".contains(c) || c.is_whitespace());
    if let Some(inner) = t.strip_prefix('<').and_then(|x| x.strip_suffix('>')) {
        return !inner.contains(['<', '>']);
    }
    let Some(inner) = t.strip_prefix('[').and_then(|x| x.strip_suffix(']')) else {
        return false;
    };
    let lower = inner.to_lowercase();
    !inner.contains(['[', ']'])
        && !inner.chars().any(|c| c.is_ascii_digit())
        && [
            "your",
            "title",
            "description",
            "describing",
            "number",
            "answer",
            "option",
            "reasoning",
            "estimate",
            "comma-separated",
            "sentence",
            "value",
            "insert",
        ]
        .iter()
        .any(|w| lower.contains(w))
}

/// The text between the first `start` marker and the next `end` after it, trimmed ("" when
/// either is missing): what a sim model reads back from its prompt's delimited blocks.
pub fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    text.split_once(start).and_then(|(_, rest)| rest.split_once(end)).map_or("", |(m, _)| m.trim())
}

/// A line without its leading white space, bullets, `#`, `>`, `**` and `__`: what a marker
/// line (`SECTION 2:`, `**Severity:** HIGH`) says once a model's markdown is set aside.
pub fn bare(line: &str) -> &str {
    let mut s = line.trim_start();
    loop {
        let t = s
            .trim_start_matches(['#', '>', '•', '·'])
            .trim_start_matches("**")
            .trim_start_matches("__")
            .trim_start();
        let t = match t.strip_prefix(['-', '*', '+']) {
            Some(rest) if rest.starts_with(char::is_whitespace) => rest.trim_start(),
            _ => t,
        };
        if t.len() == s.len() {
            return s;
        }
        s = t;
    }
}

/// A value with the bold (`**`, `__`) around it removed.
pub fn unbold(value: &str) -> String {
    unwrap_marks(value, false)
}

/// A value with the bold and the code marks (`` ` ``) around it removed.
pub fn unmark(value: &str) -> String {
    unwrap_marks(value, true)
}

fn unwrap_marks(value: &str, code: bool) -> String {
    let mut v = value.trim();
    loop {
        let mut t = v.trim_start_matches("**").trim_start_matches("__");
        if code {
            t = t.trim_start_matches('`');
        }
        let mut t = t.trim_end_matches("**").trim_end_matches("__");
        if code {
            t = t.trim_end_matches('`');
        }
        let t = t.trim();
        if t.len() == v.len() {
            return t.to_string();
        }
        v = t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn a_cut_off_list_gives_its_complete_items_and_nothing_else() {
        let cut = r#"{"reasoning": "the \"items\": [{\"a\": 9}] are", "items": [{"a": 1, "b": "}"}, {"a": 2, "b": [1, {"c": 3}]}, {"a": 3, "b"#;
        let items = cut_list_items(cut, "items").unwrap();
        assert_eq!(items, vec![json!({"a": 1, "b": "}"}), json!({"a": 2, "b": [1, {"c": 3}]})]);
        // In a fence, opened and never closed.
        let fenced = format!("```json\n{cut}");
        assert_eq!(cut_list_items(&fenced, "items").unwrap().len(), 2);
        // A list that closed before the cut: all of it.
        let closed = r#"{"items": [{"a": 1}], "note": "and then"#;
        assert_eq!(cut_list_items(closed, "items").unwrap(), vec![json!({"a": 1})]);
        for (text, why) in [
            (r#"{"items": [{"a": 1}]}"#, "a whole object is not cut off"),
            (r#"{"items": [{"a": 1, "b"#, "no complete item"),
            (r#"{"reasoning": "\"items\": [{\"a\": 1}, "#, "the key inside a string"),
            (r#"{"other": {"items": [{"a": 1}, {"#, "the key below the top level"),
            (r#"{"other": [{"a": 1}, {"#, "another list"),
            (r#"Sure! {"items": [{"a": 1}, {"#, "prose before the object"),
            (r#"{"items": [{"a": 1}}, {"#, "a broken item"),
            ("", "nothing"),
        ] {
            assert_eq!(cut_list_items(text, "items"), None, "{why}: {text}");
        }
    }

    #[test]
    fn closed_blocks_are_set_aside_wherever_they_stand() {
        let s = split_reasoning("<think>Draft: VOTE: Response A</think>\n\nVOTE: Response B");
        assert_eq!(s.answer, "VOTE: Response B");
        assert_eq!(s.reasoning.as_deref(), Some("Draft: VOTE: Response A"));
        assert!(!s.unclosed);
        let s = split_reasoning("Intro <THINKING>hmm</Thinking> then <reasoning>x</reasoning> end");
        assert_eq!(s.answer, "Intro  then  end");
        assert_eq!(s.reasoning.as_deref(), Some("hmm\n\nx"));
    }

    #[test]
    fn an_unclosed_block_leaves_no_answer() {
        let s =
            split_reasoning("<think>I think Response A is best, so FINAL RANKING: 1. Response A");
        assert_eq!(s.answer, "");
        assert!(s.unclosed);
        assert_eq!(Unparsed::of("<think>still going"), Unparsed::ReasoningOnly);
    }

    #[test]
    fn a_closing_tag_alone_ends_a_block_the_template_opened() {
        let s = split_reasoning("draft says 12\n</think>\nESTIMATE: 40");
        assert_eq!(s.answer, "ESTIMATE: 40");
        assert_eq!(s.reasoning.as_deref(), Some("draft says 12"));
    }

    #[test]
    fn text_without_tags_is_borrowed_untouched() {
        let s = split_reasoning("plain answer, 3 < 4");
        assert!(matches!(s.answer, Cow::Borrowed("plain answer, 3 < 4")));
        assert_eq!(s.reasoning, None);
    }

    #[test]
    fn provider_reasoning_takes_the_same_shape() {
        let text = with_reasoning("weighing A and B", "VOTE: Response B");
        let s = split_reasoning(&text);
        assert_eq!(s.answer, "VOTE: Response B");
        assert_eq!(s.reasoning.as_deref(), Some("weighing A and B"));
        assert_eq!(with_reasoning("  ", "x"), "x");
    }

    #[test]
    fn declining_is_recognised_in_its_common_forms() {
        for t in [
            "I can't rank these fairly; Response A and B are both strong.",
            "I abstain; Response A and C are both good",
            "I cannot approve or reject this without the full text.",
            "I cannot estimate this; the 2020 data is missing.",
            "I'm unable to choose between them.",
            "I won’t vote on this.",
            "As an AI, I am not able to judge this.",
            "I'd rather not rate this.",
            "I would rather not say which is better.",
        ] {
            assert!(declines(t), "{t}");
            assert_eq!(Unparsed::of(t), Unparsed::Refused, "{t}");
        }
        for t in [
            "Response A is clearer. VOTE: Response A",
            "The canal opened in 1914.",
            "I'd rather use a queue than a lock.",
        ] {
            assert!(!declines(t), "{t}");
        }
        assert_eq!(Unparsed::of("Response A is nice."), Unparsed::NoAnswer);
    }

    #[test]
    fn json_is_found_in_fences_and_bare() {
        let t = "Here:\n```json\n{\"vote\": \"Response B\"}\n```\nThanks";
        assert_eq!(json_field(t, &["vote"]), Some(Value::String("Response B".into())));
        let t = r#"My answer {"Ranking": ["Response C", "Response A"]} and {"x": "}"}"#;
        assert_eq!(json_values(t).len(), 2);
        assert_eq!(
            json_field(t, &["ranking"]).map(|v| v.to_string()).as_deref(),
            Some(r#"["Response C","Response A"]"#)
        );
        assert!(json_values("no json { here").is_empty());
        // A stray brace before the object does not hide it.
        let t = "I think { the answer is {\"vote\": \"Response B\"}";
        assert_eq!(json_field(t, &["vote"]), Some(Value::String("Response B".into())));
    }

    #[test]
    fn each_byte_is_handed_to_the_json_parser_at_most_once() {
        // Trying every `{` on its own was quadratic: seconds on 40 KB, even in a release build.
        for text in [
            "{\"a\":".repeat(20_000) + "1" + &"}".repeat(20_000),
            "{".repeat(50_000) + &"}".repeat(10),
            "{x} ".repeat(10_000) + "{\"vote\": \"B\"}",
            "{\"a\": \"}\"} {".repeat(5_000),
        ] {
            let mut handed = 0;
            let found = bare_objects_with(&text, |span| {
                handed += span.len();
                serde_json::from_str::<Value>(span).ok()
            });
            assert!(handed <= text.len(), "{handed} bytes parsed of {}", text.len());
            let _ = found;
        }
        let found = bare_objects(&("{x} ".repeat(100) + "{\"vote\": \"B\"}"));
        assert_eq!(found, vec![serde_json::json!({ "vote": "B" })]);
    }

    proptest! {
        /// No input makes the reader panic, and the answer never holds a closed block's text.
        #[test]
        fn any_text_splits_without_panicking(s in "\\PC{0,200}") {
            let split = split_reasoning(&s);
            let _ = Unparsed::of(&s);
            let _ = json_values(&s);
            prop_assert!(split.answer.len() <= s.len());
        }

        /// Whatever a closed `<think>` block holds, the answer after it is the same.
        #[test]
        fn a_closed_block_never_changes_the_answer(inside in "\\PC{0,120}", after in "[A-Za-z0-9 :.]{0,60}") {
            prop_assume!(!inside.to_lowercase().contains("think>") && !inside.to_lowercase().contains("<think"));
            let text = format!("<think>{inside}</think>{after}");
            let split = split_reasoning(&text);
            prop_assert_eq!(split.answer.as_ref(), after.trim());
        }
    }

    #[test]
    fn an_echoed_placeholder_states_nothing_and_a_bracketed_value_does() {
        for echo in [
            "<short title>",
            "**<…>**",
            "[Your idea idea]",
            "\"[short title]\"",
            "[number]",
            "[your answer or option number].",
            "`<one or two sentences describing the idea>`",
        ] {
            assert!(echoed_placeholder(echo), "{echo}");
        }
        for value in
            ["Solar roads", "[Solar roads]", "[3]", "[5 years]", "<b>bold</b>", "a <tag>", ""]
        {
            assert!(!echoed_placeholder(value), "{value}");
        }
    }

    #[test]
    fn a_structured_reply_reads_as_fields_and_prose_as_it_is() {
        let json = r#"<think>x</think>{"reasoning": "C explains why", "finalRanking": ["Response C", "Response A"], "score": 7, "ok": true}"#;
        assert_eq!(
            readable(json),
            "Reasoning: C explains why\nFinal ranking:\n1. Response C\n2. Response A\nScore: 7\nOk: yes"
        );
        let nested = r#"```json
{"claims": [{"claim_text": "Paris is in France", "type": "place"}]}
```"#;
        assert_eq!(
            readable(nested),
            "Claims:\n  1:\n    Claim text: Paris is in France\n    Type: place"
        );
        assert_eq!(readable("<think>a</think>Plain answer {not json}"), "Plain answer {not json}");
        assert_eq!(readable("{broken"), "{broken");
    }

    #[test]
    fn tags_are_the_documented_ones() {
        for t in TAGS {
            let s = format!("<{t}>x</{t}>y");
            assert_eq!(split_reasoning(&s).answer, "y");
        }
    }
}
