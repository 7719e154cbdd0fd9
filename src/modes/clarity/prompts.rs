//! Clarity's prompts: the evaluation, the discussion and the Arbiter's ruling (each with its
//! JSON variant) and the title.

use super::*;

// ---- prompts --------------------------------------------------------------------------------

fn brief_block(cfg: &ClarityConfig) -> String {
    let mut b = String::new();
    if let Some(t) = &cfg.title {
        b.push_str(&format!("TITLE: {t}\n\n"));
    }
    if let Some(c) = &cfg.context {
        b.push_str(&format!("CONTEXT:\n{c}\n\n"));
    }
    b.push_str(&format!("BRIEF:\n{}\n", cfg.content));
    b
}

pub(super) fn dimension_list() -> String {
    DIMENSIONS
        .iter()
        .map(|d| {
            format!("- {} (`{}`, weight {:.0}%): {}", d.name, d.key, d.weight * 100.0, d.guideline)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) const FORMAT: &str = "Reply with one JSON object and nothing after it:\n\
{\"scores\": {\"firstPrinciplesCoherence\": 0-10, \"internalConsistency\": 0-10, \"evidenceQuality\": 0-10, \"accessibility\": 0-10, \"objectivity\": 0-10, \"factualAccuracy\": 0-10, \"biasDetection\": 0-10},\n \
\"critique\": \"a short paragraph explaining your scores\",\n \
\"issues\": [{\"dimension\": \"<dimension key>\", \"issue\": \"what is wrong\", \"suggestedFix\": \"how to fix it\", \"quote\": \"the exact words of the brief concerned\", \"severity\": \"high|medium|low\"}]}";

/// The evaluation prompt asking for the spec's JSON in words ([`FORMAT`]), or, given the
/// stage's schema, for the schema's fields instead (the same instructions otherwise).
pub fn evaluation_prompt(
    cfg: &ClarityConfig,
    persona: &Persona,
    schema: Option<&ReplySchema>,
) -> String {
    let format = schema.map_or_else(|| FORMAT.to_string(), ReplySchema::instruction);
    format!(
        "CLARITY EVALUATION\n\nScore the brief below on seven dimensions, each from 0 to 10, from your perspective as the {}.\n\n{}\nDIMENSIONS:\n{}\n\nYour focus dimensions: {}.\n\n{format}",
        persona.name,
        brief_block(cfg),
        dimension_list(),
        persona.focus.join(", ")
    )
}

fn positions(verdicts: &[Verdict]) -> String {
    DIMENSIONS
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let s: Vec<String> = verdicts
                .iter()
                .map(|v| {
                    format!("{} {}", v.role, v.scores[i].map_or("-".into(), |x| format!("{x}")))
                })
                .collect();
            format!("- {} ({}): {}", d.name, d.key, s.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The critiques the discussion prompt quotes, one line per evaluator.
pub(super) fn critiques(verdicts: &[Verdict]) -> String {
    verdicts.iter().map(|v| format!("{}: {}", v.role, v.critique)).collect::<Vec<_>>().join("\n")
}

/// The discussion prompt asking for the spec's JSON in words, or, given the stage's schema,
/// for the schema's fields instead (its `justification` among them).
pub fn discussion_prompt(
    cfg: &ClarityConfig,
    persona: &Persona,
    verdicts: &[Verdict],
    schema: Option<&ReplySchema>,
) -> String {
    let format = schema.map_or_else(
        || format!("{FORMAT}\nAdd \"justification\": \"why you revised or kept your scores\" to the object."),
        ReplySchema::instruction,
    );
    format!(
        "CLARITY DISCUSSION\n\nYou are the {}. The panel has scored the brief below. Given the other evaluators' perspectives, would you revise any scores? Explain your reasoning.\n\n{}\nSCORES BY EVALUATOR:\n{}\n\nCRITIQUES:\n{}\n\n{format}",
        persona.name,
        brief_block(cfg),
        positions(verdicts),
        critiques(verdicts)
    )
}

/// The arbiter's prompt asking for the spec's JSON in words, or, given the stage's schema (its
/// scores exactly the disputed dimensions), for the schema's fields instead.
pub fn arbiter_prompt(
    cfg: &ClarityConfig,
    verdicts: &[Verdict],
    disputed: &[String],
    summary: &str,
    schema: Option<&ReplySchema>,
) -> String {
    let format = schema.map_or_else(
        || "Reply with one JSON object:\n{\"scores\": {\"<dimension key>\": 0-10}, \"reasoning\": \"your detailed reasoning\"}".to_string(),
        ReplySchema::instruction,
    );
    let names: Vec<String> = disputed
        .iter()
        .filter_map(|k| DIMENSIONS.iter().find(|d| d.key == k))
        .map(|d| format!("{} (`{}`)", d.name, d.key))
        .collect();
    format!(
        "CLARITY ARBITRATION\n\n{}\nSCORES BY EVALUATOR:\n{}\n\nDISPUTED DIMENSIONS: {}\n\nDISCUSSION SUMMARY:\n{summary}\n\n\
Give a definitive 0-10 score for each disputed dimension. {format}",
        brief_block(cfg),
        positions(verdicts),
        names.join(", ")
    )
}

pub fn title_prompt(content: &str) -> String {
    let preview: String = content.chars().take(200).collect();
    format!(
        "Generate a brief title (3-5 words) for a clarity review of this brief:\n\n\"{preview}\"\n\n\
         Reply with ONLY the title. No quotes, no punctuation, no explanation."
    )
}
