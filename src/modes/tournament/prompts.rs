//! Tournament's prompts: the judge's prompt for a match and the stricter one it is asked again with.

use super::*;

pub const JUDGE_HEAD: &str = "You are the judge of one match in a tournament of answers.";
pub const STRICT_HEAD: &str = "Your previous verdict could not be read.";

pub(super) fn material(question: &str, a: &str, b: &str) -> String {
    format!(
        "Question: {question}\n\n=== Response A ===\n{a}\n=== End of Response A ===\n\n\
         === Response B ===\n{b}\n=== End of Response B ==="
    )
}

/// The judge's prompt ending in the spec's `REASONING:`/`WINNER:` lines, or, given the
/// judgement's schema, in its JSON (the same instructions otherwise).
pub fn judge_prompt(question: &str, a: &str, b: &str, schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => format!("Explain your decision in 2-3 sentences.\n\n{}", s.instruction()),
        None => "Explain your decision in 2-3 sentences, then end your reply with exactly these \
                 two lines:\nREASONING: <your reasoning>\nWINNER: Response A  (or: WINNER: \
                 Response B)"
            .to_string(),
    };
    format!(
        "{JUDGE_HEAD} Two anonymous responses to the same question follow; decide which one is \
         better.\n\n{}\n\nWeigh accuracy, completeness, clarity and practical value. {format}",
        material(question, a, b)
    )
}

/// The strict re-ask demanding the two lines, or, given the judgement's schema, its JSON.
pub fn strict_prompt(question: &str, a: &str, b: &str, schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Reply with exactly two lines and nothing else:\nREASONING: <one sentence>\n\
                 WINNER: Response A or WINNER: Response B"
            .to_string(),
    };
    format!(
        "{JUDGE_HEAD} {STRICT_HEAD} Read the two responses again.\n\n{}\n\n{format}",
        material(question, a, b)
    )
}
