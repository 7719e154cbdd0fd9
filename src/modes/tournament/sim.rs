//! The sim's answers for Tournament: the judge's verdict, as text or as the judgement's JSON.

use super::*;

/// The judgement's JSON, as the sim writes it.
#[derive(Serialize)]
struct Judgement {
    reasoning: String,
    winner: String,
}

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    if !p.starts_with(JUDGE_HEAD) {
        return None;
    }
    let mut rng = SplitMix64::new(ask.seed);
    let side = if rng.below(2) == 0 { "A" } else { "B" };
    let other = if side == "A" { "B" } else { "A" };
    match ask.schema {
        // Asked for the judgement's JSON: the same verdict, as JSON that fits.
        Some(s) if s.name == JUDGEMENT_SCHEMA => {
            let reasoning: String = format!(
                "{}Response {side} is more accurate, more complete and more useful in practice \
                 than Response {other}. [simulated judgement by {}]",
                ask.hostile_paragraph(),
                ask.model
            )
            .chars()
            .take(schema::REASONING_MAX_CHARS)
            .collect();
            let judgement = Judgement { reasoning, winner: format!("Response {side}") };
            return Some(to_json(&judgement).to_string());
        }
        Some(_) => return None,
        None => {}
    }
    if p.contains(STRICT_HEAD) {
        return Some(format!(
            "REASONING: {}Response {side} is the more complete and practical of the two.\nWINNER: Response {side}",
            ask.hostile_paragraph()
        ));
    }
    let prose = format!(
        "Response {side} is more accurate and covers the question more completely, with \
         concrete steps a reader can follow. Response {other} is clear but leaves out practical \
         detail. [simulated judgement by {}]",
        ask.model
    );
    if ask.malformed {
        return Some(match rng.below(3) {
            // No verdict line: only the closing paragraph names a side.
            0 => format!("{prose}\n\nOverall I prefer Response {side}."),
            // A table and an echoed template: unreadable, the judge is asked again.
            1 => format!(
                "| Criterion | A | B |\n|---|---|---|\n| Accuracy | 4 | 3 |\n\n{prose}\n\nWINNER: Response A|B"
            ),
            _ => format!("**Reasoning:** {}{prose}\n\n**Winner:** {side}.", ask.hostile_paragraph()),
        });
    }
    Some(format!(
        "{prose}\n\nREASONING: {}Response {side} is more accurate, more complete and more useful in practice.\nWINNER: Response {side}",
        ask.hostile_paragraph()
    ))
}
