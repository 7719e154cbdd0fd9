//! Clarity's sim answers: its schemas in JSON (`ModeSpec::sim`) and the text sim's recognisers
//! for its prompts (its `ModeSpec::sim` tries them through `sim_text::text_answer`).

use super::*;

use crate::modes::reading::between;
use crate::modes::sim_text::{self, rng, seed_of, Prompt};

// ---- the sim ----------------------------------------------------------------------------------

/// Clarity's sim answer to its three schemas (None for any other prompt or schema): the text
/// sim's evaluators and Arbiter in JSON. The brief sets the level, each persona leans on its
/// focus (for about half the briefs the Skeptic finds the evidence far weaker than the others
/// do), a discussion moves each score toward the panel's middle and the Arbiter rules the
/// median, so runs take each path (median, post-discussion, arbiter) as they do in text.
pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    let schema = ask.schema.filter(|s| {
        [SCORECARD_SCHEMA, DISCUSSION_SCHEMA, RULING_SCHEMA].contains(&s.name.as_str())
    })?;
    let reply = if schema.name == RULING_SCHEMA {
        sim_ruling(ask, schema)
    } else {
        sim_scorecard(ask, schema.name == DISCUSSION_SCHEMA)
    };
    debug_assert!(schema.validate(&reply).is_ok(), "{reply}");
    Some(reply.to_string())
}

/// The scores the panel gave dimension `key`, read back from the prompt's `SCORES BY
/// EVALUATOR:` lines (`- Name (key): skeptic 7, advocate 8, generalist -`).
fn panel_scores(prompt: &str, key: &str) -> Vec<f64> {
    let line = prompt.lines().find(|l| l.contains(&format!("({key}):"))).unwrap_or("");
    let mut v: Vec<f64> = line
        .split(": ")
        .nth(1)
        .unwrap_or("")
        .split(", ")
        .filter_map(|x| x.split(' ').nth(1)?.parse().ok())
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// `text` cut to a schema's `maxLength` (in characters, as the schema counts them).
fn cut(text: String, max: usize) -> String {
    text.chars().take(max).collect()
}

/// An evaluator's sim scorecard, its persona read from the system prompt (as the text sim
/// reads it) and its brief from the prompt, so the JSON and text sims score a brief alike.
fn sim_scorecard(ask: &SimAsk, discussion: bool) -> Value {
    use crate::modes::sim_text::seed_of;
    let system =
        ask.messages.iter().find(|m| m.role == "system").map_or("", |m| m.content.as_str());
    let who = PERSONAS
        .iter()
        .find(|p| system.starts_with(p.system_prompt))
        .map_or("Generalist", |p| p.name);
    let end = if discussion { "\nSCORES BY EVALUATOR:" } else { "\nDIMENSIONS:" };
    let brief = between(ask.prompt, "BRIEF:\n", end);
    let level = 5.0 + (seed_of(&[brief]) % 4) as f64;
    let contested = seed_of(&[brief, "contested"]).is_multiple_of(2);
    let mut r = SplitMix64::new(ask.seed);
    let mut scores = serde_json::Map::new();
    for (i, d) in DIMENSIONS.iter().enumerate() {
        let bias = clarity_bias(who, i, contested);
        let mut score: f64 = (level + bias + r.below(3) as f64 - 1.0).clamp(0.0, 10.0);
        if discussion {
            if let Some(mid) = panel_middle(ask.prompt, d.key) {
                let pull = if who == "Skeptic" { 0.3 } else { 0.6 };
                score = (score + (mid - score) * pull).round();
            }
        }
        scores.insert(d.key.to_string(), Value::from(score));
    }
    let quote =
        cut(brief.split_whitespace().take(8).collect::<Vec<_>>().join(" "), SENTENCE_MAX_CHARS);
    let (dim, issue, fix) = clarity_issue(who);
    let (shared_dim, shared_issue, shared_fix) = CLARITY_SHARED_ISSUE;
    let level_word = if level >= 7.0 { "solid" } else { "uneven" };
    let item = |dimension: &str, issue: &str, fix: &str, severity: &str| Issue {
        dimension: dimension.to_string(),
        issue: issue.to_string(),
        suggested_fix: fix.to_string(),
        quote: quote.clone(),
        severity: severity.to_string(),
    };
    to_json(&SimScorecard {
        reasoning: cut(format!("[simulated {who} scorecard from {}] {}Weighing the brief against each dimension's guideline.", ask.model, ask.hostile_paragraph()), schema::REASONING_MAX_CHARS),
        scores,
        critique: cut(format!("As the {who} I find the brief {level_word}. {}", ask.hostile_paragraph()).trim_end().to_string(), PARAGRAPH_MAX_CHARS),
        issues: vec![
            item(dim, issue, fix, "high"),
            item(shared_dim, shared_issue, shared_fix, "medium"),
        ],
        justification: discussion
            .then_some("I moved toward the panel where their reasons were convincing."),
    })
}

/// An evaluator's sim scorecard as JSON (its scores in the dimensions' order).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SimScorecard {
    reasoning: String,
    scores: serde_json::Map<String, Value>,
    critique: String,
    issues: Vec<Issue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    justification: Option<&'static str>,
}

/// The sim Arbiter's ruling as JSON (its scores in the schema's order).
#[derive(Serialize)]
struct SimRuling {
    reasoning: String,
    scores: serde_json::Map<String, Value>,
}

/// The sim Arbiter's ruling: the panel's median on each dimension its schema asks for (the
/// schema names exactly the disputed ones).
fn sim_ruling(ask: &SimAsk, schema: &ReplySchema) -> Value {
    let keys = schema.schema["properties"]["scores"]["properties"].as_object();
    let scores: serde_json::Map<String, Value> = keys
        .into_iter()
        .flatten()
        .map(|(k, _)| (k.clone(), Value::from(panel_middle(ask.prompt, k).unwrap_or(5.0))))
        .collect();
    to_json(&SimRuling {
        reasoning: cut(format!("[simulated arbitration from {}] {}Weighing the evaluators' positions against the brief itself.", ask.model, ask.hostile_paragraph()), schema::REASONING_MAX_CHARS),
        scores,
    })
}

// ---- the text sim's recognisers (tried by `sim_text::text_answer`) -------------------------

/// The persona a Clarity call speaks as, from its system prompt.
fn persona(p: &Prompt) -> &'static str {
    let system = p.messages.iter().find(|m| m.role == "system").map_or("", |m| m.content.as_str());
    ["Skeptic", "Advocate", "Generalist", "Arbiter"]
        .into_iter()
        .find(|n| system.starts_with(&format!("You are the {n}")))
        .unwrap_or("Generalist")
}

const CLARITY_KEYS: [&str; 7] = [
    "firstPrinciplesCoherence",
    "internalConsistency",
    "evidenceQuality",
    "accessibility",
    "objectivity",
    "factualAccuracy",
    "biasDetection",
];

/// How a Clarity evaluator's persona leans on dimension `i` (the text and JSON sims alike).
fn clarity_bias(who: &str, i: usize, contested: bool) -> f64 {
    match (who, i) {
        ("Skeptic", 2) if contested => -4.0,
        ("Skeptic", 2 | 5) => -1.0,
        ("Advocate", 4 | 6) => 1.0,
        ("Generalist", 3) => -1.0,
        _ => 0.0,
    }
}

/// A Clarity persona's own issue: its dimension, the issue and the suggested fix.
fn clarity_issue(who: &str) -> (&'static str, &'static str, &'static str) {
    match who {
        "Skeptic" => (
            "evidenceQuality",
            "Key claims are not supported by cited sources",
            "Cite a credible source for each key claim",
        ),
        "Advocate" => (
            "objectivity",
            "The opposing position is presented in a weak form",
            "State the strongest version of the opposing argument",
        ),
        _ => (
            "accessibility",
            "Technical terms are used without explanation",
            "Define terms on first use",
        ),
    }
}

/// The issue every sim Clarity evaluator raises besides its own.
const CLARITY_SHARED_ISSUE: (&str, &str, &str) = (
    "firstPrinciplesCoherence",
    "The conclusion does not follow clearly from the stated premises",
    "Spell out the steps from premises to conclusion",
);

pub(crate) fn clarity_evaluate(p: &Prompt) -> Option<String> {
    let discussion = p.last.starts_with("CLARITY DISCUSSION");
    if !(p.last.starts_with("CLARITY EVALUATION") || discussion) {
        return None;
    }
    if p.malformed {
        return Some("This brief is interesting; I have mixed feelings about it overall.".into());
    }
    let who = persona(p);
    let brief = sim_text::between(p.last, "BRIEF:\n", "\nDIMENSIONS:");
    let brief = if brief.is_empty() {
        sim_text::between(p.last, "BRIEF:\n", "\nSCORES BY EVALUATOR:")
    } else {
        brief
    };
    // 5..8: the brief's quality.
    let level = 5.0 + (seed_of(&[brief]) % 4) as f64;
    // For about half the briefs the Skeptic finds the evidence far weaker than the others do.
    let contested = seed_of(&[brief, "contested"]).is_multiple_of(2);
    let mut r = rng(p, "clarity");
    let mut scores = Vec::new();
    for (i, k) in CLARITY_KEYS.iter().enumerate() {
        let bias = clarity_bias(who, i, contested);
        let mut score: f64 = (level + bias + r.below(3) as f64 - 1.0).clamp(0.0, 10.0);
        if discussion {
            // Move toward the panel's middle: the others' scores are in the prompt.
            if let Some(mid) = panel_middle(p.last, k) {
                let pull = if who == "Skeptic" { 0.3 } else { 0.6 };
                score = (score + (mid - score) * pull).round();
            }
        }
        scores.push(format!("\"{k}\": {score}"));
    }
    let quote: String = brief.split_whitespace().take(8).collect::<Vec<_>>().join(" ");
    let (dim, issue, fix) = clarity_issue(who);
    let shared = CLARITY_SHARED_ISSUE;
    let justification = if discussion {
        ", \"justification\": \"I moved toward the panel where their reasons were convincing.\""
    } else {
        ""
    };
    Some(format!(
        "[simulated {who} scorecard from {model}]\n{prose}{{\"scores\": {{{scores}}}, \"critique\": \"As the {who} I find the brief {level_word}.{hostile}\", \"issues\": [{{\"dimension\": \"{dim}\", \"issue\": \"{issue}\", \"suggestedFix\": \"{fix}{hostile}\", \"quote\": \"{quote}\", \"severity\": \"high\"}}, {{\"dimension\": \"{}\", \"issue\": \"{}\", \"suggestedFix\": \"{}\", \"quote\": \"{quote}\", \"severity\": \"medium\"}}]{justification}}}",
        shared.0,
        shared.1,
        shared.2,
        model = p.model,
        scores = scores.join(", "),
        level_word = if level >= 7.0 { "solid" } else { "uneven" },
        prose = p.hostile_paragraph(),
        hostile = p.hostile_json(),
    ))
}

/// The panel's middle score for dimension `key` (the upper middle of an even count); None when
/// the prompt lists none.
fn panel_middle(prompt: &str, key: &str) -> Option<f64> {
    let scores = panel_scores(prompt, key);
    scores.get(scores.len() / 2).copied()
}

pub(crate) fn clarity_arbitrate(p: &Prompt) -> Option<String> {
    if !p.last.starts_with("CLARITY ARBITRATION") {
        return None;
    }
    let disputed = sim_text::between(p.last, "DISPUTED DIMENSIONS: ", "\n");
    let mut scores = Vec::new();
    for k in CLARITY_KEYS.iter().filter(|k| disputed.contains(&format!("`{k}`"))) {
        let mid = panel_middle(p.last, k).unwrap_or(5.0);
        scores.push(format!("\"{k}\": {mid}"));
    }
    Some(format!(
        "[simulated arbitration from {}]\n{{\"scores\": {{{}}}, \"reasoning\": \"Weighing the evaluators' positions against the brief itself.{}\"}}",
        p.model,
        scores.join(", "),
        p.hostile_json()
    ))
}
