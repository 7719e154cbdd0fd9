//! Fact-Check's prompts: generating the content, extracting the claims, verifying them and the
//! reliability report.

use super::*;

pub const GENERATE_HEAD: &str = "You are writing a factual answer that will be fact-checked.";
pub const EXTRACT_HEAD: &str = "You are the claim extractor of a fact-check.";
pub const VERIFY_HEAD: &str = "You are an independent fact-checker.";
pub const REPORT_HEAD: &str = "You are the reporter of a fact-check.";
pub const CONTENT_START: &str = "=== CONTENT ===";
pub const CONTENT_END: &str = "=== END OF CONTENT ===";
pub const CLAIMS_START: &str = "=== CLAIMS ===";
pub const CLAIMS_END: &str = "=== END OF CLAIMS ===";

pub const TYPES: [&str; 6] =
    ["STATISTIC", "DATE", "ATTRIBUTION", "TECHNICAL", "COMPARISON", "CAUSAL"];
pub const VERDICTS: [&str; 3] = ["VERIFIED", "DISPUTED", "UNVERIFIABLE"];
pub const CONFIDENCES: [&str; 3] = ["HIGH", "MEDIUM", "LOW"];

pub fn generate_prompt(question: &str) -> String {
    format!(
        "{GENERATE_HEAD} Answer the question below thoroughly, rich in concrete facts, figures, \
         dates, names and causes, each stated plainly so it can be checked.\n\nQuestion: {question}"
    )
}

/// The extraction prompt asking for the spec's `CLAIM <n>:` blocks, or, given the stage's
/// schema, for its JSON instead (the same instructions otherwise).
pub fn extract_prompt(content: &str, schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Reply with one block per claim, numbered from 1, in exactly this format:\n\n\
                 CLAIM 1: <the claim as worded in the content>\nContext: <the sentence it is \
                 in>\nType: STATISTIC|DATE|ATTRIBUTION|TECHNICAL|COMPARISON|CAUSAL\n\n\
                 End with `EXTRACTION SUMMARY: <one line>`. If there is no checkable claim, reply \
                 only `CLAIMS: NONE`."
            .to_string(),
    };
    format!(
        "{EXTRACT_HEAD} List every checkable claim in the content below: figures, dates, causes, \
         comparisons, attributions and technical statements. Leave out opinions, hedges, \
         definitions and predictions.\n\n{CONTENT_START}\n{content}\n{CONTENT_END}\n\n{format}"
    )
}

fn claims_text(claims: &[Claim]) -> String {
    let mut s = String::new();
    for c in claims {
        s.push_str(&format!("CLAIM {}: {}\n", c.number, c.text));
        if let Some(ctx) = &c.context {
            s.push_str(&format!("Context: {ctx}\n"));
        }
        s.push_str(&format!("Type: {}\n\n", c.claim_type.as_deref().unwrap_or("UNTYPED")));
    }
    s
}

/// The verification prompt asking for the spec's `VERIFICATION <n>:` blocks, or, given the
/// stage's schema, for its JSON instead (the same instructions otherwise).
pub fn verify_prompt(content: &str, claims: &[Claim], schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Reply with one block per claim, using its number, in exactly this format:\n\n\
                 VERIFICATION 1: VERIFIED|DISPUTED|UNVERIFIABLE\nEvidence: <what you know that \
                 supports or contradicts it>\nCorrection: <the correct statement if DISPUTED, \
                 else N/A>\nConfidence: HIGH|MEDIUM|LOW"
            .to_string(),
    };
    format!(
        "{VERIFY_HEAD} Judge each numbered claim below on your own knowledge; the content is \
         given for context only.\n\n{CONTENT_START}\n{content}\n{CONTENT_END}\n\n{CLAIMS_START}\n\
         {}{CLAIMS_END}\n\n{format}",
        claims_text(claims)
    )
}

pub(super) fn consensus_text(
    claims: &[Claim],
    consensus: &[Consensus],
    checks: &[Check],
) -> String {
    let mut s = String::new();
    for (c, k) in claims.iter().zip(consensus) {
        s.push_str(&format!(
            "CLAIM {}: {}\nConsensus: {} ({}% agreement, confidence {})\n",
            c.number, c.text, k.verdict, k.agreement_rate, k.consensus_confidence
        ));
        for check in checks.iter().filter(|x| x.parse_success) {
            if let Some(v) = check.verifications.iter().find(|v| v.claim_id == c.id) {
                s.push_str(&format!(
                    "- Checker {} ({}): {} ({}); evidence: {}\n",
                    check.checker_index + 1,
                    check.model,
                    v.verdict,
                    v.confidence,
                    v.evidence.as_deref().unwrap_or("none given")
                ));
            }
        }
        if let Some(corr) = &k.correction {
            s.push_str(&format!("Correction: {corr}\n"));
        }
        s.push('\n');
    }
    s
}

pub fn report_prompt(
    content: &str,
    claims: &[Claim],
    consensus: &[Consensus],
    checks: &[Check],
    counts: &Counts,
) -> String {
    format!(
        "{REPORT_HEAD} Independent checkers judged the claims of the content below; the server \
         formed each claim's consensus. Write the reliability report.\n\n{CONTENT_START}\n\
         {content}\n{CONTENT_END}\n\n{CLAIMS_START}\n{}{CLAIMS_END}\n\nCounts: {} verified, {} \
         disputed, {} unverifiable ({} claims).\n\nReply with these sections:\n\
         ## Content Summary\n## Overall Reliability Score: <a number from 0 to 100>\n(justify \
         it: 90-100 highly reliable, 70-89 mostly reliable, 50-69 mixed, 30-49 many errors, 0-29 \
         unreliable)\n## Evidence Table\n## Detailed Findings\n(grouped by verdict)\n\
         ## Annotated Content\n(the text with [VERIFIED], [DISPUTED] or [UNVERIFIABLE] after \
         each claim)\n## Methodology",
        consensus_text(claims, consensus, checks),
        counts.verified,
        counts.disputed,
        counts.unverifiable,
        counts.total
    )
}
