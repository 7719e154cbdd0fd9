//! Vote's sim answers: the text sim's ballot (and a chairman's tiebreak pick) for the vote
//! prompts, which Debate's vote is answered by too.

use crate::modes::sim_text::{labeled_blocks, seed_of, Prompt};

pub(crate) fn vote(p: &Prompt) -> Option<String> {
    let tiebreak = p.last.starts_with("You are the chairman of a panel whose vote ended in a tie");
    if !(p.last.starts_with("After a round of deliberation") || tiebreak) {
        return None;
    }
    if p.malformed {
        return Some(format!(
            "[simulated vote from {}] They are all reasonable; I cannot pick one.",
            p.model
        ));
    }
    let blocks = labeled_blocks(p.last);
    let choice = blocks
        .iter()
        .max_by_key(|(_, text)| seed_of(&[p.model, text.trim()]))
        .map(|(l, _)| l.clone())
        .unwrap_or_else(|| "Response A".into());
    let why = if tiebreak {
        "Of the tied responses, this one is the most practical."
    } else {
        "It is the most complete and practical answer."
    };
    Some(format!(
        "[simulated vote from {}]\n\n{}{choice}: {why}\n\nVOTE: {choice}",
        p.model,
        p.hostile_paragraph()
    ))
}
