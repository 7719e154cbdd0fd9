//! A choice a reply *states* under a label (`VERDICT: REJECT`, `**Decision:** merge`,
//! `VEREDICTO: APROBAR`, a `### Verdict` heading with the word alone on the next line), as
//! opposed to one it only mentions ("I would not approve", "revise or stand?").
//!
//! Read on the answer part of a reply (see `reading::answer_text`). A labelled value does not
//! count when:
//! - the word after the label is not one of the choices (`Verdict: not approved`,
//!   `Decision: I can't say`);
//! - the sentence before the label negates or hedges it (`no verdict: APPROVE would be
//!   premature`, `if I had to give a verdict: …`);
//! - the word is offered with alternatives (`[APPROVE|REVISE|REJECT]`, `APPROVE or REVISE`),
//!   asked (`APPROVE?`) or qualified by what follows (`APPROVE would be…`, `REVISE if…`).
//!
//! The last stated value wins: a model quoting a template or the content before its own
//! answer is read by its answer.

use regex::Regex;

/// A value stated in a text, and the byte offset just after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stated<T> {
    pub value: T,
    pub end: usize,
}

/// The two patterns that find a label: inline (`LABEL: WORD`) and a heading alone on its line.
pub struct Labels {
    inline: Regex,
    heading: Regex,
}

impl Labels {
    /// `labels`: a regex alternation of the label's spellings (no capture groups), matched
    /// case-insensitively as whole words.
    pub fn new(labels: &str) -> Labels {
        let build = |p: String| Regex::new(&p).unwrap_or_else(|_| unreachable!());
        Labels {
            // The label, markup or quotes, a separator (`:`, `：`, `=`, a table's `|`, a
            // dash), markup, an optional `[`, an optional option letter (`b)`), the word.
            inline: build(format!(
                r#"(?i)\b(?:{labels})\b[*_ \t"'`]*(?:[:：=|]|[-–—])[ \t*_"'`]*\[?[ \t*_]*(?:[a-c]\)[ \t]*)?(\p{{L}}+)"#
            )),
            // `### Verdict`, `**Decision**`, `Verdict:` alone on a line.
            heading: build(format!(
                r"(?im)^[ \t]*(?:#{{1,6}}[ \t]*)?(?:\*\*|__)?[ \t]*(?:{labels})[ \t]*[:：]?[ \t]*(?:\*\*|__)?[ \t]*[:：]?[ \t]*\r?$"
            )),
        }
    }
}

fn negation_re() -> &'static Regex {
    regex!(
        r"(?i)\b(?:no|not|never|cannot|can\s+not|without|neither|nor|if|whether|unless|would|could|should|might|may|ni|non|pas|ne|sans|nicht|kein\w*|weder|ohne|não|nao|nem|sin|senza|se|si|wenn|ob|falls)\b|n['’]t\b"
    )
}

fn alternative_re() -> &'static Regex {
    regex!(
        r#"(?i)^(?:\||/|,|;|\bor\b|\bnor\b|\band\b|\bvs\b\.?|\bversus\b|\bo\b|\bou\b|\boder\b|\by\b|\bet\b|\bund\b|\be\b|\bni\b|\bnoch\b)[ \t*_\["'`]*(\p{L}+)"#
    )
}

fn hedge_re() -> &'static Regex {
    regex!(
        r"(?i)^(?:\?|(?:would|could|might|may|should|is|isn['’]t|was|seems?|if|unless|when|whether|only|not|maybe|perhaps|probably|possibly)\b)"
    )
}

fn lone_word_re() -> &'static Regex {
    regex!(r#"^[ \t>*_\["'`]*(\p{L}+)[ \t*_\]"'`.!]*$"#)
}

/// The start of the sentence holding `at`: after the last line break or `.`, `!`, `?`, `;`.
fn sentence_start(text: &str, at: usize) -> usize {
    text[..at].rfind(['\n', '.', '!', '?', ';']).map_or(0, |i| i + 1)
}

/// The value is offered with alternatives, asked or qualified by what follows it.
fn qualified<T>(after: &str, word: &impl Fn(&str) -> Option<T>) -> bool {
    let line = after.split('\n').next().unwrap_or("");
    let rest = line.trim_start_matches([' ', '\t', '*', '_', ']', ')', '"', '\'', '`']);
    if hedge_re().is_match(rest) {
        return true;
    }
    alternative_re()
        .captures(rest)
        .and_then(|c| c.get(1))
        .is_some_and(|w| word(w.as_str()).is_some())
}

/// The last value `answer` states under one of `labels`; `word` maps a word (any case) to
/// a value, or to `None` when it is not one of the choices.
pub fn last_stated<T>(
    answer: &str,
    labels: &Labels,
    word: impl Fn(&str) -> Option<T>,
) -> Option<Stated<T>> {
    let mut best: Option<(usize, Stated<T>)> = None;
    let mut keep = |start: usize, s: Stated<T>| {
        if best.as_ref().is_none_or(|(b, _)| start >= *b) {
            best = Some((start, s));
        }
    };
    for c in labels.inline.captures_iter(answer) {
        let (Some(whole), Some(w)) = (c.get(0), c.get(1)) else { continue };
        let Some(value) = word(w.as_str()) else { continue };
        let prefix = &answer[sentence_start(answer, whole.start())..whole.start()];
        if negation_re().is_match(prefix) || qualified(&answer[w.end()..], &word) {
            continue;
        }
        keep(w.start(), Stated { value, end: w.end() });
    }
    for m in labels.heading.find_iter(answer) {
        // The next non-empty line, holding the word alone.
        let mut pos = m.end();
        let line = loop {
            let rest = &answer[pos..];
            let rest_start = pos + (rest.len() - rest.trim_start_matches(['\n', '\r']).len());
            if rest_start >= answer.len() {
                break None;
            }
            let line_end = answer[rest_start..].find('\n').map_or(answer.len(), |i| rest_start + i);
            let line = &answer[rest_start..line_end];
            if line.trim().is_empty() {
                pos = line_end;
                continue;
            }
            break Some((rest_start, line));
        };
        let Some((line_start, line)) = line else { continue };
        let Some(w) = lone_word_re().captures(line.trim_end_matches('\r')).and_then(|c| c.get(1))
        else {
            continue;
        };
        let Some(value) = word(w.as_str()) else { continue };
        // A list of choices under the heading (`APPROVE` / `REVISE` / `REJECT`, one a line)
        // states none of them.
        let after = &answer[line_start + line.len()..];
        let listed = after.lines().map(str::trim).find(|l| !l.is_empty()).is_some_and(|l| {
            lone_word_re()
                .captures(l)
                .and_then(|c| c.get(1))
                .is_some_and(|n| word(n.as_str()).is_some())
        });
        if !listed {
            keep(line_start + w.start(), Stated { value, end: line_start + w.end() });
        }
    }
    best.map(|(_, s)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yes_no(w: &str) -> Option<bool> {
        match w.to_lowercase().as_str() {
            "yes" | "oui" => Some(true),
            "no" | "non" => Some(false),
            _ => None,
        }
    }

    fn read(text: &str) -> Option<bool> {
        let labels = Labels::new(r"answer|final\s+answer|réponse");
        last_stated(text, &labels, yes_no).map(|s| s.value)
    }

    #[test]
    fn stated_values_are_read_and_mentions_are_not() {
        assert_eq!(read("ANSWER: yes"), Some(true));
        assert_eq!(read("**Final answer:** **No**."), Some(false));
        assert_eq!(read("RÉPONSE : OUI"), Some(true));
        assert_eq!(read("| Answer | no | because |"), Some(false));
        assert_eq!(read("### Answer\n\n**Yes**\n"), Some(true));
        assert_eq!(read("ANSWER: [yes]"), Some(true));
        assert_eq!(read("Either way, answer: no"), Some(false));
        assert_eq!(read("ANSWER: yes\nlater ANSWER: no"), Some(false), "the last counts");
        for t in [
            "ANSWER: [yes|no]",
            "Answer: yes or no, I cannot tell",
            "Answer: yes/no",
            "No answer: yes would be premature.",
            "If I had to give an answer: yes",
            "Answer: yes?",
            "Answer: yes would be too strong",
            "Answer: not yes",
            "I say yes. No answer though",
            "### Answer\nI think yes",
            "### Answer\n### Notes\nyes",
            "### Answer\nyes\nno\n",
        ] {
            assert_eq!(read(t), None, "{t}");
        }
    }

    fn verdict(w: &str) -> Option<u8> {
        ["approve", "revise", "reject"]
            .iter()
            .position(|v| w.eq_ignore_ascii_case(v))
            .map(|i| i as u8)
    }

    proptest::proptest! {
        /// Issue 33 point 11: where a reply states no labelled value (a template's
        /// alternatives, a label followed by prose, a draft inside `<think>`, refusals), none
        /// is read, whatever choice words it mentions.
        #[test]
        fn text_that_states_no_value_reads_as_none(
            text in crate::modes::ranking::tests::unstated(),
            mention in proptest::sample::select(vec![
                "", "Verdict: approve or reject, I cannot tell.", "My verdict: revise?",
                "No verdict: REJECT would be unfair.", "Verdict: [approve/revise/reject]",
                "Verdict: I would approve if the errors were fixed.",
            ]),
        ) {
            let text = format!("{text}\n{mention}");
            let answer = crate::modes::reading::answer_text(&text);
            static LABELS: std::sync::OnceLock<Labels> = std::sync::OnceLock::new();
            let labels = LABELS.get_or_init(|| Labels::new(r"verdict|vote|final\s+answer"));
            let read = last_stated(&answer, labels, verdict).map(|s| s.value);
            proptest::prop_assert_eq!(read, None, "{}", text);
        }
    }

    #[test]
    fn the_end_is_just_after_the_word() {
        let labels = Labels::new("answer");
        let t = "Answer: yes\nrest";
        let s = last_stated(t, &labels, yes_no).unwrap();
        assert_eq!(&t[s.end..], "\nrest");
    }
}
