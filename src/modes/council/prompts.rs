//! Council's prompts: the ranking (as text or as its schema's JSON) and the chairman's
//! synthesis.

use super::*;

// ---- prompts (verbatim from the seed) -------------------------------------------------------

/// The ranking prompt asking for the seed's `FINAL RANKING:` section, or, given the stage's
/// schema, for its JSON instead (the same instructions otherwise).
pub fn ranking_prompt(
    question: &str,
    labeled: &[(String, String)],
    schema: Option<&ReplySchema>,
) -> String {
    let mut p = String::from(
        "You are an expert evaluator. Below is a question and several responses from different sources. Your task is to evaluate each response and rank them from best to worst.\n\n",
    );
    p.push_str(&format!("Question: {question}\n\n"));
    p.push_str(&response_blocks(labeled));
    p.push_str(
        "Instructions:\n\
1. Evaluate each response for accuracy, completeness, clarity, and helpfulness.\n\
2. Consider the strengths and weaknesses of each response.\n\
3. Provide your ranking from best to worst.\n\
\n",
    );
    match schema {
        Some(schema) => p.push_str(&schema.instruction()),
        None => p.push_str(
            "CRITICAL: You MUST end your response with a section titled \"FINAL RANKING:\" followed by a numbered list. Each item must be ONLY the response label (e.g., \"Response A\"). Example:\n\
\n\
FINAL RANKING:\n\
1. Response C\n\
2. Response A\n\
3. Response B\n\
\n\
Do not include any other text in the FINAL RANKING section.",
        ),
    }
    p
}

/// The seed's synthesis prompt (answers under their real model names).
pub fn synthesis_prompt(
    question: &str,
    stage1: &[Stage1Response],
    stage2: &[Stage2Response],
) -> String {
    let mut p = String::from(
        "You are a chairman synthesizing the best possible answer from multiple AI model responses and their peer evaluations.\n\n",
    );
    p.push_str(&format!("Original Question: {question}\n\nSTAGE 1 — Individual Responses:\n\n"));
    for r in stage1 {
        p.push_str(&format!("--- {} ---\n{}\n\n", r.model, answer_text(&r.response)));
    }
    p.push_str("STAGE 2 — Peer Rankings:\n\n");
    for r in stage2 {
        p.push_str(&format!("--- Evaluator: {} ---\n{}\n\n", r.model, readable(&r.ranking)));
    }
    p.push_str(
        "Synthesize the best possible answer to the original question. Consider:\n\
1. The individual responses and their unique insights\n\
2. The peer rankings and which responses were consistently rated highly\n\
3. Areas of agreement and disagreement across responses\n\
4. Any important nuances or caveats that individual responses captured\n\
\n\
Provide a comprehensive, well-structured synthesis that represents the collective intelligence of all the models.",
    );
    p
}
