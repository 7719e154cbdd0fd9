//! The sim's answers for Fact-Check: the content, the claims, the verifications (text or JSON)
//! and the report.

use super::*;

/// The sentences of a text that state a number (the sim's "checkable claims").
pub(super) fn sim_claims(content: &str) -> Vec<String> {
    // A sentence ends at `.`, `!` or `?` followed by a space or the end: the point of `2.1` is
    // no sentence's end.
    let mut sentences: Vec<&str> = Vec::new();
    let mut start = 0;
    let bytes = content.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if matches!(b, b'.' | b'!' | b'?')
            && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace())
        {
            sentences.push(&content[start..=i]);
            start = i + 1;
        }
    }
    sentences.push(&content[start..]);
    sentences
        .into_iter()
        .map(str::trim)
        .filter(|s| s.chars().any(|c| c.is_ascii_digit()) && s.len() > 12 && !s.contains('<'))
        .map(|s| s.replace('\n', " "))
        .take(8)
        .collect()
}

/// A claim of the sim extractor's JSON reply.
#[derive(Serialize)]
struct SimClaim {
    claim: String,
    context: String,
    #[serde(rename = "type")]
    claim_type: &'static str,
}

/// The sim extractor's JSON reply.
#[derive(Serialize)]
struct SimClaims {
    reasoning: String,
    claims: Vec<SimClaim>,
}

/// A verification of the sim checker's JSON reply.
#[derive(Serialize)]
struct SimVerification {
    claim: u64,
    evidence: String,
    verdict: &'static str,
    correction: &'static str,
    confidence: &'static str,
}

/// The sim checker's JSON reply.
#[derive(Serialize)]
struct SimVerifications {
    reasoning: String,
    verifications: Vec<SimVerification>,
}

/// The sim's JSON for this mode's schemas: the claims are the content's sentences that state
/// a number (as in text), and every listed claim is judged.
fn sim_json(ask: &SimAsk, schema: &ReplySchema) -> Option<String> {
    let p = ask.prompt;
    let who = ask.model;
    let mut rng = SplitMix64::new(ask.seed);
    let hostile = ask.hostile_paragraph();
    let reasoning = |why: &str| -> String {
        format!("[simulated reasoning from {who}] {why} {}", hostile.trim())
            .trim()
            .chars()
            .take(schema::REASONING_MAX_CHARS)
            .collect()
    };
    let cut = |s: &str, n: usize| -> String { s.chars().take(n).collect() };
    let reply = match schema.name.as_str() {
        CLAIMS_SCHEMA if p.starts_with(EXTRACT_HEAD) => {
            let found = sim_claims(between(p, CONTENT_START, CONTENT_END));
            let claims: Vec<SimClaim> = found
                .iter()
                .take(MAX_CLAIMS)
                .map(|c| SimClaim {
                    claim: cut(c, CLAIM_MAX_CHARS),
                    context: cut(c, CONTEXT_MAX_CHARS),
                    claim_type: TYPES[rng.below(3)],
                })
                .collect();
            let reasoning =
                reasoning("The sentences that state a figure or a date can be checked.");
            to_json(&SimClaims { reasoning, claims })
        }
        VERIFICATIONS_SCHEMA if p.starts_with(VERIFY_HEAD) => {
            let listed = between(p, CLAIMS_START, CLAIMS_END);
            let verifications: Vec<SimVerification> = listed
                .lines()
                .filter_map(|l| numbered("claim", l).map(|(n, _)| n))
                .map(|n| {
                    let (verdict, correction) = match rng.below(10) {
                        0..=5 => ("VERIFIED", "N/A"),
                        6..=7 => ("DISPUTED", "The figure is stated differently in the sources."),
                        _ => ("UNVERIFIABLE", "N/A"),
                    };
                    SimVerification {
                        claim: n,
                        evidence: format!(
                            "Simulated evidence for claim {n}; no source was consulted."
                        ),
                        verdict,
                        correction,
                        confidence: CONFIDENCES[rng.below(3)],
                    }
                })
                .collect();
            let reasoning = reasoning("Each claim weighed against what is commonly recorded.");
            to_json(&SimVerifications { reasoning, verifications })
        }
        _ => return None,
    };
    Some(reply.to_string())
}

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    if let Some(schema) = ask.schema {
        return sim_json(ask, schema);
    }
    let p = ask.prompt;
    let who = ask.model;
    let mut rng = SplitMix64::new(ask.seed);
    if p.starts_with(GENERATE_HEAD) {
        if ask.malformed {
            return Some(format!("[simulated answer from {who}] It depends; opinions differ."));
        }
        return Some(format!(
            "[simulated answer from {who}]\n\nThe Eiffel Tower was completed in 1889 for the \
             World's Fair in Paris. It is about 330 metres tall. It was the tallest man-made \
             structure in the world until 1930, when the Chrysler Building passed it. About 7 \
             million people visit it every year.\n\n{}Many consider it beautiful. (This answer is \
             simulated: no real model was asked.)",
            ask.hostile_paragraph()
        ));
    }
    if p.starts_with(EXTRACT_HEAD) {
        let content = between(p, CONTENT_START, CONTENT_END);
        let found = sim_claims(content);
        if found.is_empty() {
            return Some("CLAIMS: NONE".into());
        }
        if ask.malformed {
            return Some(format!(
                "[simulated extraction from {who}] The text makes a few claims, mostly about \
                 dates and sizes: {}",
                found.join(" ")
            ));
        }
        let mut s = String::new();
        for (i, c) in found.iter().enumerate() {
            let t = TYPES[rng.below(3)];
            s.push_str(&format!("**CLAIM {}:** {c}\nContext: {c}\nType: {t}\n\n", i + 1));
        }
        s.push_str(&format!("EXTRACTION SUMMARY: {} claims.", found.len()));
        return Some(s);
    }
    if p.starts_with(VERIFY_HEAD) {
        let listed = between(p, CLAIMS_START, CLAIMS_END);
        let numbers: Vec<u64> =
            listed.lines().filter_map(|l| numbered("claim", l).map(|(n, _)| n)).collect();
        if ask.malformed {
            return Some(format!(
                "[simulated check from {who}] Most of this looks right to me, though I am not \
                 sure about the height."
            ));
        }
        let mut s = format!("[simulated check from {who}]\n\n");
        for n in numbers {
            let roll = rng.below(10);
            let (verdict, correction) = match roll {
                0..=5 => ("VERIFIED", "N/A"),
                6..=7 => ("DISPUTED", "The figure is stated differently in the sources."),
                _ => ("UNVERIFIABLE", "N/A"),
            };
            let confidence = CONFIDENCES[rng.below(3)];
            s.push_str(&format!(
                "VERIFICATION {n}: {verdict}\nEvidence: Simulated evidence for claim {n}; no \
                 source was consulted.\nCorrection: {correction}\nConfidence: {confidence}\n\n"
            ));
        }
        s.push_str(&ask.hostile_paragraph());
        return Some(s);
    }
    if p.starts_with(REPORT_HEAD) {
        if ask.malformed {
            return Some(format!(
                "[simulated report from {who}] Broadly reliable, with a few shaky figures."
            ));
        }
        let score = 50 + rng.below(46);
        return Some(format!(
            "[simulated report from {who}]\n\n## Content Summary\n\n{}The content makes dated, \
             numeric claims.\n\n## Overall Reliability Score: {score}/100\n\nMost claims held up \
             under the checks.\n\n## Evidence Table\n\nAs computed by the server.\n\n\
             ## Detailed Findings\n\nSee the verdicts per claim.\n\n## Annotated Content\n\nThe \
             text with its verdicts.\n\n## Methodology\n\nIndependent checkers, majority \
             consensus. (This report is simulated: no real model was asked.)",
            ask.hostile_paragraph()
        ));
    }
    None
}
