//! Debate's sim answers: a revision in JSON for the revision schema (`ModeSpec::sim`), and
//! the text sim's revision.

use super::*;
use crate::modes::sim_text::{labeled_blocks, seed_of, Prompt};

/// A revision as the revision schema asks for it.
#[derive(Serialize)]
struct SimRevision {
    reasoning: String,
    decision: &'static str,
    revised_response: String,
}

/// A sim model's revision of its original answer in `prompt`: the decision, the reason and the
/// revised response. Each model leans to one decision, nudged by the prompt, so debates show a
/// mix; a STAND repeats the original, a REVISE or MERGE adds to it.
fn revise(model: &str, prompt: &str) -> (&'static str, String, String) {
    let own = between(prompt, "YOUR ORIGINAL RESPONSE:\n", "\n\nOTHER RESPONSES:");
    let labels: Vec<String> = labeled_blocks(prompt).into_iter().map(|(l, _)| l).collect();
    let other = labels.first().cloned().unwrap_or_else(|| "another response".into());
    let lean = (seed_of(&[model, "lean"]) % 3) as usize;
    let nudge = (seed_of(&[model, prompt]) % 4) as usize;
    let decision = DECISIONS[if nudge == 0 { (lean + 1) % 3 } else { lean }];
    let (reason, body) = match decision {
        "STAND" => ("My original answer already covers the points the others raise.".to_string(), own.to_string()),
        "MERGE" => (
            format!("Each response has strengths; combining {} gives the most complete answer.", labels.join(", ")),
            format!("{own}\n\nMerged in from the other responses: their examples and caveats, which round out the answer."),
        ),
        _ => (
            format!("{other} made a point my answer missed."),
            format!("{own}\n\nRevised after reading {other}: one more consideration is how the choice holds up over time."),
        ),
    };
    (decision, reason, body)
}

/// Debate's sim answer to its revision schema (None for any other prompt or schema): the text
/// sim's revision in JSON.
pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    let schema = ask.schema.filter(|s| s.name == REVISION_SCHEMA)?;
    let (decision, reason, body) = revise(ask.model, ask.prompt);
    let hostile = ask.hostile_paragraph();
    let reply = to_json(&SimRevision {
        reasoning: format!("[simulated revision from {}] {hostile}{reason}", ask.model)
            .chars()
            .take(schema::REASONING_MAX_CHARS)
            .collect(),
        decision,
        revised_response: body.chars().take(REVISED_RESPONSE_MAX_CHARS).collect(),
    });
    debug_assert!(schema.validate(&reply).is_ok());
    Some(reply.to_string())
}

pub(crate) fn revision(p: &Prompt) -> Option<String> {
    if !p.last.starts_with("You previously answered a question.") {
        return None;
    }
    if p.malformed {
        let own = between(p.last, "YOUR ORIGINAL RESPONSE:\n", "\n\nOTHER RESPONSES:");
        return Some(format!(
            "[simulated revision from {}] I have read the others.\n\n{own}",
            p.model
        ));
    }
    let (decision, reason, body) = revise(p.model, p.last);
    Some(format!(
        "[simulated revision from {}]\n\nDECISION: {decision}\nREASONING: {reason}{}\n\nREVISED RESPONSE:\n{}{body}",
        p.model,
        p.hostile_inline(),
        p.hostile_paragraph()
    ))
}
