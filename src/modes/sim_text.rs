//! What the sim models say: pure functions from (model, messages) to text.
//!
//! [`respond`] gives a title prompt its title, then asks every mode's own sim
//! (`ModeSpec::sim`), then fills in a reply schema, and falls back to a plain answer. A mode
//! whose sims read text prompts lists them in its `ModeSpec::sim` through [`text_answer`]: each
//! recogniser spots one prompt format and answers in it. Everything is deterministic: the same
//! model and prompt give the same text, and each model name has its own tendencies (which
//! answers it prefers, how much it writes).
//!
//! `sim/xss…` models answer like the others but with [`XSS_PAYLOAD`] in their prose (never in
//! the lines a mode's parser reads), so the browser client's sanitiser can be tested on runs
//! that complete normally.

use crate::modes::common::SplitMix64;
use crate::modes::registry::SimAsk;
use crate::modes::{ChatMessage, ReplySchema};

/// A seed from several strings: FNV-1a, then a SplitMix64 step so that texts differing in
/// one character give unrelated seeds (plain FNV keeps the high bits of similar texts close,
/// and the sim orders answers by these seeds).
pub fn seed_of(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.as_bytes().iter().chain(std::iter::once(&0xff)) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    SplitMix64::new(h).next_u64()
}

/// Hostile HTML and markdown that `sim/xss…` models put in their prose: each piece would run
/// `window.__xss=1` if a client rendered model output unsanitised. One line, so it can sit in a
/// `REASONING:` line or a JSON string.
pub const XSS_PAYLOAD: &str = "<script>window.__xss=1</script> \
    <img src=x onerror=\"window.__xss=1\"> [click me](javascript:window.__xss=1) \
    <a href=\"javascript:window.__xss=1\">link</a> <iframe src=\"javascript:window.__xss=1\"></iframe> \
    <div onclick=\"window.__xss=1\" onmouseover=\"window.__xss=1\">hover</div> \
    <svg onload=\"window.__xss=1\"></svg>";

/// What a `sim/xss…` title starts with. Titles lose quotes and underscores when they are
/// cleaned, so the handler spells `__xss` another way.
pub const XSS_TITLE: &str = "<img src=x onerror=window[atob('X194c3M=')]=1>";

/// Whether a model id names a `sim/xss…` model (with or without the `sim/` prefix, as a
/// sim-server route may strip it).
pub fn is_hostile(model: &str) -> bool {
    model.strip_prefix("sim/").unwrap_or(model).starts_with("xss")
}

/// The input a recogniser sees.
pub struct Prompt<'a> {
    pub model: &'a str,
    pub messages: &'a [ChatMessage],
    /// The last user message.
    pub last: &'a str,
    /// Answer without the requested structure.
    pub malformed: bool,
    /// Put [`XSS_PAYLOAD`] in the prose (a `sim/xss…` model).
    pub hostile: bool,
}

/// [`XSS_PAYLOAD`] as a paragraph of its own (ending in a blank line) when `hostile`; else
/// nothing.
pub(crate) fn hostile_paragraph(hostile: bool) -> String {
    if hostile {
        format!("{XSS_PAYLOAD}\n\n")
    } else {
        String::new()
    }
}

/// [`XSS_PAYLOAD`] to append to a line of prose when `hostile`; else nothing.
pub(crate) fn hostile_inline(hostile: bool) -> String {
    if hostile {
        format!(" {XSS_PAYLOAD}")
    } else {
        String::new()
    }
}

impl Prompt<'_> {
    /// The payload as a paragraph of its own, for a hostile model; else nothing.
    pub(crate) fn hostile_paragraph(&self) -> String {
        hostile_paragraph(self.hostile)
    }

    /// The payload to append to a line of prose, for a hostile model; else nothing.
    pub(crate) fn hostile_inline(&self) -> String {
        hostile_inline(self.hostile)
    }

    /// Like [`Prompt::hostile_inline`], escaped for the inside of a JSON string.
    pub(crate) fn hostile_json(&self) -> String {
        let quoted = serde_json::Value::from(self.hostile_inline()).to_string();
        quoted[1..quoted.len() - 1].to_string()
    }
}

/// Answers a text prompt it recognises (a mode's prompt format), else None.
pub(crate) type Recogniser = fn(&Prompt) -> Option<String>;

/// A mode's answer to a prompt asked for in text (no reply schema): the first of
/// `recognisers` that knows the prompt answers. For a mode's [`ModeSpec::sim`] whose sims read
/// the prompt as text (`Prompt`), next to its JSON answers.
///
/// [`ModeSpec::sim`]: crate::modes::registry::ModeSpec::sim
pub(crate) fn text_answer(ask: &SimAsk, recognisers: &[Recogniser]) -> Option<String> {
    if ask.schema.is_some() {
        return None;
    }
    let p = Prompt {
        model: ask.model,
        messages: ask.messages,
        last: ask.prompt,
        malformed: ask.malformed,
        hostile: ask.hostile,
    };
    recognisers.iter().find_map(|r| r(&p))
}

/// The sim's reply to a chat.
pub fn respond(model: &str, messages: &[ChatMessage], malformed: bool) -> String {
    respond_to(model, messages, malformed, None)
}

/// The sim's reply to a chat whose reply may be asked for as `schema`'s JSON: a mode's own
/// answer to a schema it knows (see `ModeSpec::sim`), else JSON drawn from the schema
/// ([`json_reply`]). A malformed answer ignores the schema, as a server that only asks for
/// JSON (and a model that ignores it) would.
pub fn respond_to(
    model: &str,
    messages: &[ChatMessage],
    malformed: bool,
    schema: Option<&ReplySchema>,
) -> String {
    let last =
        messages.iter().rev().find(|m| m.role == "user").map(|m| m.content.as_str()).unwrap_or("");
    let p = Prompt { model, messages, last, malformed, hostile: is_hostile(model) };
    if let Some(t) = title(&p) {
        return t;
    }
    let schema = schema.filter(|_| !malformed);
    // A mode that answers its own prompts offline (see `ModeSpec::sim`).
    let ask = SimAsk {
        model,
        prompt: last,
        messages,
        seed: seed_of(&[model, last, "mode"]),
        malformed,
        hostile: p.hostile,
        schema,
    };
    let own = crate::modes::registry::MODES.iter().filter_map(|m| m.sim).find_map(|sim| sim(&ask));
    if let Some(own) = own {
        return own;
    }
    if let Some(schema) = schema {
        return json_reply(&p, schema);
    }
    answer(&p)
}

/// JSON that fits `schema`, drawn deterministically from the model and prompt: enums and
/// numbers by chance, free text as a simulated note (with the hostile payload for a
/// `sim/xss…` model).
pub fn json_reply(p: &Prompt, schema: &ReplySchema) -> String {
    let mut r = rng(p, &schema.name);
    let model = p.model.to_string();
    let hostile = p.hostile_inline();
    let words = move |field: &str| {
        format!("[simulated {field} from {model}] weighing what was asked.{hostile}")
    };
    crate::modes::schema::sample(&schema.schema, &mut r, &words).to_string()
}

pub(crate) fn rng(p: &Prompt, salt: &str) -> SplitMix64 {
    SplitMix64::new(seed_of(&[p.model, p.last, salt]))
}

pub(crate) fn pick<'a>(r: &mut SplitMix64, items: &[&'a str]) -> &'a str {
    items[r.below(items.len())]
}

/// Words of the question worth repeating (longer than three letters).
fn keywords(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| w.chars().count() > 3)
        .map(str::to_string)
        .collect()
}

fn title(p: &Prompt) -> Option<String> {
    if !p.last.starts_with("Generate a brief title") {
        return None;
    }
    let quoted = p.last.split('"').nth(1).unwrap_or(p.last);
    const QUESTION_WORDS: &[&str] = &[
        "what", "which", "when", "where", "does", "should", "would", "could", "have", "many",
        "much", "will", "there", "this", "that", "with", "from", "into", "about", "your", "their",
    ];
    let mut words: Vec<String> = keywords(quoted)
        .into_iter()
        .filter(|w| !QUESTION_WORDS.contains(&w.to_lowercase().as_str()))
        .collect();
    let mut seen = std::collections::HashSet::new();
    words.retain(|w| seen.insert(w.to_lowercase()));
    if words.is_empty() {
        words = vec!["Open".into(), "Question".into()];
    }
    let mut r = rng(p, "title");
    let n = 3 + r.below(3);
    let t: Vec<String> = words
        .into_iter()
        .take(n)
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
        })
        .collect();
    if p.hostile {
        return Some(format!("{XSS_TITLE} {}", t.join(" ")));
    }
    Some(t.join(" "))
}

/// Labels (`Response X`) from `--- Response X ---` lines, with the text under each.
pub(crate) fn labeled_blocks(prompt: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in prompt.lines() {
        let t = line.trim();
        if let Some(inner) = t.strip_prefix("--- ").and_then(|s| s.strip_suffix(" ---")) {
            if inner.starts_with("Response ") {
                out.push((inner.to_string(), String::new()));
                continue;
            }
        }
        if t.starts_with("Instructions:") || t.starts_with("Consider: accuracy") {
            break;
        }
        if let Some(last) = out.last_mut() {
            last.1.push_str(line);
            last.1.push('\n');
        }
    }
    out
}

/// The text between two markers of a prompt.
pub(crate) fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    section(text, start, end).map_or("", str::trim)
}

/// The text after `start` up to the next `end` (or to its end), when `start` is in it.
pub(crate) fn section<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = text.split_once(start)?.1;
    Some(rest.split_once(end).map_or(rest, |(inner, _)| inner))
}

fn answer(p: &Prompt) -> String {
    let mut r = rng(p, "answer");
    let question = p.last.trim();
    let earlier = p
        .messages
        .iter()
        .rev()
        .filter(|m| m.role == "user")
        .nth(1)
        .map(|m| m.content.lines().next().unwrap_or("").trim().to_string());
    const FILLER: &[&str] = &[
        "what", "which", "when", "where", "does", "should", "would", "could", "have", "about",
        "there",
    ];
    let keys: Vec<String> = keywords(question)
        .into_iter()
        .filter(|w| !FILLER.contains(&w.to_lowercase().as_str()))
        .collect();
    let topic = if keys.is_empty() {
        "this".to_string()
    } else {
        keys.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
    };
    let mut s = format!("[simulated answer from {}]\n\n", p.model);
    if let Some(e) = earlier {
        s.push_str(&format!("Following on from the earlier question (\"{e}\"): "));
    }
    let stance = pick(
        &mut r,
        &[
            "The short answer is that it depends on context",
            "There is a fairly clear answer here",
            "Experts disagree, but the weight of evidence points one way",
            "It helps to separate the question into parts",
        ],
    );
    s.push_str(&format!("{stance}. On {topic}, the key considerations are:\n\n"));
    let points = [
        "what you are optimising for (speed, cost, or simplicity)",
        "the constraints you cannot change",
        "how the choice holds up as things grow",
        "the risks of getting it wrong and how reversible it is",
        "what people with experience in this area tend to recommend",
    ];
    let n = 2 + (seed_of(&[p.model]) % 3) as usize;
    for i in 0..n {
        s.push_str(&format!(
            "{}. Consider {}.\n",
            i + 1,
            points[(r.below(points.len()) + i) % points.len()]
        ));
    }
    if p.hostile {
        s.push_str(&format!("\n{XSS_PAYLOAD}\n"));
    }
    s.push_str(&format!(
        "\nIn summary, for \"{}\" a careful, context-aware answer beats a universal rule.",
        question.lines().next().unwrap_or("")
    ));
    s
}

/// The reasoning trace a `sim/thinker…` model writes before `answer`: a first draft that
/// differs from it (what a model of another name would answer, in the same format, so a
/// parser that read the trace would find the draft's vote or ranking), then a note that the
/// draft was dropped.
pub fn reasoning_trace(
    model: &str,
    messages: &[ChatMessage],
    malformed: bool,
    answer: &str,
) -> String {
    let draft = (1..=8)
        .map(|i| respond(&format!("{model}~draft{i}"), messages, malformed))
        .find(|d| d.trim() != answer.trim())
        .unwrap_or_else(|| format!("(a draft that said too little about: {})", answer.trim()));
    format!(
        "Let me think this through before answering.\n\nA first draft:\n\n{}\n\n\
         On a second look the draft does not hold up, so the answer below replaces it.",
        draft.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::council::{parse_ranking, ranking_prompt};

    #[test]
    fn rankings_parse_and_models_disagree() {
        let labeled: Vec<(String, String)> = (0..4)
            .map(|i| (crate::modes::common::label(i), format!("answer number {i}")))
            .collect();
        let prompt = ranking_prompt("Q?", &labeled, None);
        let labels: Vec<String> = labeled.iter().map(|(l, _)| l.clone()).collect();
        let mut orders = std::collections::HashSet::new();
        for m in ["sim/alpha", "sim/beta", "sim/gamma", "sim/delta"] {
            let text = respond(m, &[ChatMessage::user(prompt.clone())], false);
            let parsed = parse_ranking(&text, &labels);
            assert_eq!(parsed.len(), 4, "{text}");
            orders.insert(parsed);
        }
        assert!(orders.len() > 1, "the panel does not rank in lockstep");
        let bad = respond("sim/alpha", &[ChatMessage::user(prompt)], true);
        assert!(parse_ranking(&bad, &labels).is_empty(), "{bad}");
    }

    #[test]
    fn answers_are_deterministic_simulated_and_follow_up_aware() {
        let q = [ChatMessage::user("How do I scale a database?")];
        let a = respond("sim/alpha", &q, false);
        assert_eq!(a, respond("sim/alpha", &q, false));
        assert_ne!(a, respond("sim/beta", &q, false));
        assert!(a.contains("simulated"));
        let follow = [
            ChatMessage::user("How do I scale a database?"),
            ChatMessage::assistant(a.clone()),
            ChatMessage::user("And caching?"),
        ];
        assert!(respond("sim/alpha", &follow, false).contains("How do I scale a database?"));
    }

    #[test]
    fn panels_vary_split_votes_ties_decision_mixes_and_dissent() {
        use crate::modes::{debate, jury, voting};
        let panel = ["sim/alpha", "sim/beta", "sim/gamma"];
        let labels: Vec<String> = (0..3).map(crate::modes::common::label).collect();
        let (mut unanimous, mut split, mut tie) = (0, 0, 0);
        let mut decisions = std::collections::HashSet::new();
        let mut dissent = 0;
        for q in 0..40 {
            let answers: Vec<(String, String)> =
                labels.iter().map(|l| (l.clone(), format!("answer {l} to question {q}"))).collect();
            let prompt = voting::vote_prompt(&format!("question {q}"), &answers, None);
            let votes: Vec<Option<String>> = panel
                .iter()
                .map(|m| {
                    voting::parse_vote(
                        &respond(m, &[ChatMessage::user(prompt.clone())], false),
                        &labels,
                    )
                })
                .collect();
            let t = voting::tally(&votes);
            match (t.is_tie, t.tallies.values().max()) {
                (true, _) => tie += 1,
                (false, Some(3)) => unanimous += 1,
                _ => split += 1,
            }
            let rev =
                debate::revision_prompt(&format!("question {q}"), "my answer", &answers[1..], None);
            for m in panel {
                decisions.extend(
                    debate::parse_revision(&respond(m, &[ChatMessage::user(rev.clone())], false))
                        .decision,
                );
            }
            let eval = jury::evaluation_prompt(&format!("content number {q}"), None, None);
            let verdicts: std::collections::HashSet<_> = panel
                .iter()
                .map(|m| {
                    jury::parse_verdict(&respond(m, &[ChatMessage::user(eval.clone())], false))
                })
                .collect();
            if verdicts.len() > 1 {
                dissent += 1;
            }
        }
        assert!(
            unanimous > 0 && split > 0 && tie > 0,
            "unanimous {unanimous}, split {split}, tie {tie}"
        );
        assert_eq!(decisions.len(), 3, "REVISE, STAND and MERGE all occur: {decisions:?}");
        assert!(dissent > 0 && dissent < 40, "some juries disagree: {dissent}/40");
    }

    #[test]
    fn titles_are_short_and_plain() {
        let t = respond(
            "sim/alpha",
            &[ChatMessage::user(crate::modes::common::title_prompt(
                "What are the trade-offs of microservices?",
            ))],
            false,
        );
        let n = t.split_whitespace().count();
        assert!((1..=5).contains(&n), "{t}");
        assert!(!t.contains('"') && !t.contains("simulated"), "{t}");
    }

    #[test]
    fn xss_models_keep_every_format_readable_and_carry_the_payload() {
        use crate::modes::{common, council, debate, delphi, jury, voting};
        let ask = |model: &str, prompt: &str| respond(model, &[ChatMessage::user(prompt)], false);
        assert!(is_hostile("sim/xss") && is_hostile("xss-7") && !is_hostile("sim/alpha"));
        let labeled: Vec<(String, String)> =
            (0..3).map(|i| (common::label(i), format!("answer {i}"))).collect();
        let labels: Vec<String> = labeled.iter().map(|(l, _)| l.clone()).collect();
        for model in ["sim/xss", "sim/xss-b", "xss-c"] {
            let answer = ask(model, "How do I scale a database?");
            assert!(answer.contains(XSS_PAYLOAD), "{answer}");
            let ranking = ask(model, &council::ranking_prompt("Q?", &labeled, None));
            assert!(ranking.contains(XSS_PAYLOAD));
            assert_eq!(council::parse_ranking(&ranking, &labels).len(), 3, "{ranking}");
            let vote = ask(model, &voting::vote_prompt("Q?", &labeled, None));
            assert!(vote.contains(XSS_PAYLOAD));
            assert!(voting::parse_vote(&vote, &labels).is_some(), "{vote}");
            let rev = ask(model, &debate::revision_prompt("Q?", "my answer", &labeled[1..], None));
            let parsed = debate::parse_revision(&rev);
            assert!(parsed.decision.is_some(), "{rev}");
            assert!(parsed.reasoning.is_some_and(|r| r.contains(XSS_PAYLOAD)), "{rev}");
            assert!(parsed.revised_response.is_some_and(|r| r.contains(XSS_PAYLOAD)), "{rev}");
            let juror = ask(model, &jury::evaluation_prompt("Some content to judge.", None, None));
            assert!(juror.contains(XSS_PAYLOAD));
            let scores = jury::parse_scores(&juror);
            assert!((0..5).all(|i| scores.get(i).is_some()), "{juror}");
            assert!(jury::parse_verdict(&juror).is_some(), "{juror}");
            let classify =
                ask(model, &delphi::classify_prompt("How many cats live in Rome?", None));
            let c = delphi::parse_classification(&classify).expect("classification");
            assert!(c.reasoning.contains(XSS_PAYLOAD), "{classify}");
            let estimate =
                ask(model, &delphi::round1_numeric_prompt("How many cats live in Rome?", None));
            assert!(estimate.contains(XSS_PAYLOAD));
            assert!(delphi::parse_estimate(&estimate).is_some(), "{estimate}");
            let title = common::clean_title(
                &ask(model, &common::title_prompt("What are the trade-offs of microservices?")),
                "q",
            );
            assert!(title.starts_with(XSS_TITLE), "{title}");
        }
        assert!(!ask("sim/alpha", "How do I scale a database?").contains("<script>"));
    }
}
