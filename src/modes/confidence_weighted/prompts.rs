//! Confidence-Weighted's prompts: the answer (with its stated confidence) and the weighted synthesis.

use super::*;

/// Words only the answer prompt holds (the sim recognises it by them).
pub const ANSWER_HEAD: &str = "then rate honestly how confident you are in it.";
/// The synthesis prompt's first words.
pub const SYNTHESIS_HEAD: &str =
    "You are writing one answer from several answers weighted by their authors' confidence.";

/// The answer prompt asking for the spec's `RESPONSE:` / `CONFIDENCE:` format, or, given the
/// stage's schema, for its JSON instead (the same instructions otherwise).
pub fn answer_prompt(question: &str, schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Reply in exactly this format:\n\nRESPONSE:\n<your answer>\n\nCONFIDENCE: <a \
                 number from 0.0 to 1.0>\nCONFIDENCE_REASONING: <one or two sentences>"
            .to_string(),
    };
    format!(
        "{question}\n\n---\nAnswer the question above, {ANSWER_HEAD} A confidence of 0.0 means a \
         guess and 1.0 means certain. Then say in one or two sentences what you know for sure \
         and what you are unsure of.\n\n{format}"
    )
}

/// One answer as the synthesis prompt shows it.
pub struct Weighted<'a> {
    pub model: &'a str,
    pub response: &'a str,
    pub weight: &'a Weight,
}

pub fn synthesis_prompt(question: &str, answers: &[Weighted], temperature: f64) -> String {
    let mut p = format!("{SYNTHESIS_HEAD}\n\nQuestion: {question}\n\n");
    p.push_str("The answers, highest weight first:\n\n");
    for a in answers {
        let flag = if a.weight.is_outlier {
            " — OUTLIER confidence: scrutinise this answer more than its weight suggests"
        } else {
            ""
        };
        p.push_str(&format!(
            "--- {} (weight {:.2}%, stated confidence {:.2}){flag} ---\n{}\n\n",
            a.model,
            a.weight.weight_percent,
            a.weight.raw_confidence,
            readable(a.response)
        ));
    }
    p.push_str(&format!("Weight table (softmax of the confidences, temperature {temperature}):\n"));
    for a in answers {
        p.push_str(&format!(
            "- {}: confidence {:.2} → weight {:.2}%{}\n",
            a.model,
            a.weight.raw_confidence,
            a.weight.weight_percent,
            if a.weight.is_outlier { " (outlier)" } else { "" }
        ));
    }
    p.push_str(
        "\nInstructions:\n\
1. Let each answer influence the result in proportion to its weight: an answer at 40% counts about twice one at 20%.\n\
2. A confident answer can still be wrong: check the claims, do not just adopt the heaviest answer.\n\
3. Where a high-weight and a low-weight answer contradict each other, reason out which is right and say why.\n\
4. Flag miscalibration: a model whose stated confidence does not match the quality of its answer.\n\n\
Reply in exactly this format:\n\nSYNTHESIS:\n<the answer to the question>\n\n\
CONFIDENCE CALIBRATION NOTES:\n<a short note per model on how well its confidence matched its answer>",
    );
    p
}
