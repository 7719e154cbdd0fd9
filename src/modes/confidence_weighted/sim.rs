//! The sim's answers for Confidence-Weighted: an answer with a stated confidence (text or JSON)
//! and a synthesis.

use super::*;

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    // Asked for another mode's schema: not this mode's prompt.
    if ask.schema.is_some_and(|s| s.name != ANSWER_SCHEMA) {
        return None;
    }
    if ask.prompt.starts_with(SYNTHESIS_HEAD) {
        return Some(sim_synthesis(ask));
    }
    let (question, _) =
        ask.prompt.split_once(&format!("\n\n---\nAnswer the question above, {ANSWER_HEAD}"))?;
    let mut rng = SplitMix64::new(ask.seed);
    let confidence = 40 + rng.below(60);
    let who = ask.model;
    let first: String = question.chars().take(80).collect();
    let body = format!(
        "[simulated answer from {who}] On \"{first}\": the short answer depends on a few facts, \
         which this answer states in turn.\n\n{}- The main point, stated plainly.\n- A caveat \
         worth knowing.",
        ask.hostile_paragraph()
    );
    if ask.schema.is_some() {
        let reply = SimReply {
            reasoning: format!(
                "[simulated reasoning from {who}] The main point is well known; the caveat is \
                 less certain."
            ),
            response: body.trim_end(),
            confidence: confidence as f64 / 100.0,
            confidence_reasoning: "I know the main point well; the caveat is where I am less \
                                   sure.",
        };
        return Some(to_json(&reply).to_string());
    }
    if ask.malformed {
        return Some(match rng.below(3) {
            0 => format!("Sure! {body}\n\n**Confidence:** {confidence}%\n\nI'm fairly sure of the main point."),
            1 => format!("{body}\n\nI would say I'm moderately confident in this."),
            _ => format!(
                "<think>Let me weigh this.</think>\n## Response:\n{body}\n\n- Confidence: {}/10\n- Confidence reasoning: the caveat is the part I am least sure of.",
                confidence / 10
            ),
        });
    }
    Some(format!(
        "RESPONSE:\n{body}\n\nCONFIDENCE: 0.{confidence:02}\nCONFIDENCE_REASONING: I know the main \
         point well; the caveat is where I am less sure."
    ))
}

fn sim_synthesis(ask: &SimAsk) -> String {
    let models: Vec<&str> = ask
        .prompt
        .lines()
        .filter_map(|l| l.strip_prefix("--- "))
        .filter_map(|l| l.split(" (weight ").next())
        .collect();
    let heaviest = models.first().copied().unwrap_or("the first answer");
    let body = format!(
        "[simulated synthesis by {}] Weighing the answers by their stated confidence, the main \
         point stands, as {heaviest} put it most confidently; the caveat the others raise is \
         kept.\n\n{}",
        ask.model,
        ask.hostile_paragraph()
    );
    let notes: Vec<String> = models
        .iter()
        .map(|m| format!("- {m}: its confidence looks about right for what it said."))
        .collect();
    if ask.malformed {
        return format!("Here is the combined answer.\n\n{body}");
    }
    format!("SYNTHESIS:\n{body}\n\nCONFIDENCE CALIBRATION NOTES:\n{}", notes.join("\n"))
}

/// A structured answer as the sim writes it (`confidence_weighted_answer`'s fields).
#[derive(Serialize)]
struct SimReply<'a> {
    reasoning: String,
    response: &'a str,
    confidence: f64,
    confidence_reasoning: &'a str,
}
