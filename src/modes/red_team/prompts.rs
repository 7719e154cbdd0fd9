//! Red Team's prompts: generate, attack, defend and synthesize, and the content a prompt carries.

use super::*;

pub const GENERATE_HEAD: &str = "You are the GENERATOR in a red-team exercise.";
pub const ATTACK_HEAD: &str = "You are the ATTACKER in a red-team exercise.";
pub const DEFEND_HEAD: &str = "You are the DEFENDER in a red-team exercise.";
pub const SYNTHESIZE_HEAD: &str = "You are the SYNTHESIZER of a red-team exercise.";
/// The content a prompt carries sits between these lines (the sim reads it back).
pub const CONTENT_START: &str = "=== CONTENT ===";
pub const CONTENT_END: &str = "=== END CONTENT ===";

fn enclosed(text: &str) -> String {
    format!("{CONTENT_START}\n{text}\n{CONTENT_END}")
}

pub fn generate_prompt(question: &str, m: &Material) -> String {
    let note = m.note.as_deref().map(|n| format!("\n{n}\n")).unwrap_or_default();
    format!(
        "{GENERATE_HEAD}\n\nRequest: {question}\n\nLay the material below out in numbered sections \
         (`## 1. …`, `## 2. …`) so that findings can point at them. Keep code whole, in fenced \
         blocks. Do not add, drop or change any substance: only structure it.\n{note}\n{}",
        enclosed(&m.text)
    )
}

fn finding_text(f: &Finding) -> String {
    let mut s = format!("FINDING {}: {}\nSeverity: {}\n", f.number, f.title, f.severity);
    for (label, v) in [
        ("Location", &f.location),
        ("Vulnerability", &f.vulnerability),
        ("Exploit Scenario", &f.exploit_scenario),
    ] {
        if let Some(v) = v {
            s.push_str(&format!("{label}: {v}\n"));
        }
    }
    s
}

/// The previous round rebuilt per finding: what it claimed and how it was answered.
pub(super) fn previous_round_text(findings: &[Finding], responses: &[Response]) -> String {
    let mut s = String::new();
    for f in findings {
        s.push_str(&finding_text(f));
        match responses.iter().find(|r| r.finding == f.number) {
            Some(r) => {
                s.push_str(&format!("Defense verdict: {}\n", r.verdict));
                if let Some(why) = &r.reasoning {
                    s.push_str(&format!("Defense reasoning: {why}\n"));
                }
                if let Some(rev) = &r.revision {
                    s.push_str(&format!("Defense revision: {rev}\n"));
                }
            }
            None => s.push_str("Defense verdict: UNADDRESSED\n"),
        }
        s.push('\n');
    }
    s
}

/// The attack prompt asking for the spec's finding blocks, or, given the attack's schema, for
/// its JSON (the same instructions otherwise).
pub fn attack_prompt(
    question: &str,
    round: u32,
    content: &str,
    previous: Option<&str>,
    schema: Option<&ReplySchema>,
) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Report each finding exactly so:\n\nFINDING <n>: <title>\n\
                 Severity: CRITICAL|HIGH|MEDIUM|LOW\nLocation: <where>\n\
                 Vulnerability: <what is wrong>\nExploit Scenario: <how it is exploited>\n\n\
                 Then:\nSUMMARY:\nCritical: n, High: n, Medium: n, Low: n\n\
                 Overall risk: <text>\n\nIf you find nothing, reply with the line FINDINGS: NONE"
            .to_string(),
    };
    let earlier = match previous {
        Some(p) => format!(
            "\n\nThis is round {round}. The previous round's findings and the defense:\n\n{p}\n\
             Look for NEW weaknesses, or explain why a defense falls short. Do not repeat \
             findings that were settled."
        ),
        None => String::new(),
    };
    format!(
        "{ATTACK_HEAD}\n\nRequest: {question}\n\nFind the weaknesses of the content below: flaws, \
         vulnerabilities, wrong assumptions, missing cases.{earlier}\n\n{}\n\n{format}",
        enclosed(content)
    )
}

/// What the defend prompt lists: the findings one by one, else the raw report.
fn listed_findings(findings: &[Finding], raw: &str) -> String {
    if findings.is_empty() {
        format!("The attacker's report (its findings could not be read one by one):\n\n{raw}")
    } else {
        findings.iter().map(finding_text).collect::<Vec<_>>().join("\n")
    }
}

/// The defend prompt asking for the spec's response blocks and revised content, or, given
/// the defense's schema, for its JSON (the same instructions otherwise).
pub fn defend_prompt(
    question: &str,
    content: &str,
    findings: &[Finding],
    raw: &str,
    schema: Option<&ReplySchema>,
) -> String {
    let listed = listed_findings(findings, raw);
    let format = match schema {
        Some(s) => format!(
            "Answer every finding, then give the complete revised content (all of it, with the \
             accepted fixes applied).\n\n{}",
            s.instruction()
        ),
        None => "Answer every finding exactly so:\n\nRESPONSE TO FINDING <n>: <title>\n\
                 Verdict: ACCEPT|REBUT\nReasoning: <why>\nRevision: <the change, or N/A for a \
                 rebuttal>\n\nThen a line DEFENSE SUMMARY: with a short summary, and last a line \
                 REVISED CONTENT: followed by the complete revised content (all of it, with the \
                 accepted fixes applied)."
            .to_string(),
    };
    format!(
        "{DEFEND_HEAD}\n\nRequest: {question}\n\nYour content:\n\n{}\n\nThe attacker's findings:\n\n\
         {listed}\n\n{format}",
        enclosed(content)
    )
}

pub fn synthesize_prompt(
    question: &str,
    structured: &str,
    final_content: &str,
    history: &str,
    audit: &str,
) -> String {
    format!(
        "{SYNTHESIZE_HEAD}\n\nRequest: {question}\n\nThe structured original:\n\n{structured}\n\n\
         The final revision:\n\n{}\n\nEvery round's findings and responses:\n\n{history}\n\n\
         Audit table (title | severity | verdict | round):\n{audit}\n\n\
         Write `## Hardened Output`: the final content with the accepted fixes applied, valid \
         rebuttals respected and weak defenses strengthened. Then `## Vulnerability Audit Summary`: \
         every finding and what became of it, ending with the lines `Remaining Risks: <text>` and \
         `Hardening Confidence: High|Medium|Low`.",
        enclosed(final_content)
    )
}

/// The content a prompt carries.
pub(super) fn carried(prompt: &str) -> &str {
    prompt
        .split_once(CONTENT_START)
        .and_then(|(_, rest)| rest.split_once(CONTENT_END))
        .map_or("", |(c, _)| c.trim())
}
