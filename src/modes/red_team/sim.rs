//! Red Team's sim answers: generated content, attacks and defenses in text or JSON, and a synthesis.

use super::*;

const SIM_FLAWS: [(&str, &str, &str, &str); 6] = [
    (
        "Unvalidated input",
        "HIGH",
        "user-supplied fields are used without checks",
        "send a crafted value that the code trusts",
    ),
    (
        "Injection through string building",
        "CRITICAL",
        "queries or commands are built by string formatting",
        "close the quote and append a command of one's own",
    ),
    (
        "Secrets in plain text",
        "HIGH",
        "credentials are stored or compared in plain text",
        "read the store or a log and reuse the secret",
    ),
    (
        "No rate limiting",
        "MEDIUM",
        "repeated attempts are not slowed or counted",
        "guess passwords by brute force",
    ),
    (
        "Error messages leak detail",
        "LOW",
        "failures say which part was wrong",
        "enumerate valid names from the errors",
    ),
    (
        "Missing audit trail",
        "MEDIUM",
        "nothing records who did what",
        "act without leaving a trace",
    ),
];

/// `text` cut to the `maxLength` of `field` in an object schema (the sim's JSON always fits).
pub(super) fn fit(schema: &ReplySchema, field: &str, text: &str) -> String {
    let max = schema.schema["properties"][field]["maxLength"].as_u64().unwrap_or(u64::MAX);
    text.chars().take(max.min(usize::MAX as u64) as usize).collect()
}

/// A sim attacker's finding, as the attack schema asks for it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SimFinding {
    title: &'static str,
    severity: &'static str,
    location: String,
    vulnerability: String,
    exploit_scenario: String,
}

/// The sim attacker's JSON reply.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SimAttack {
    reasoning: String,
    findings: Vec<SimFinding>,
    overall_risk: &'static str,
}

/// A sim defender's response to one finding.
#[derive(Serialize)]
struct SimResponse {
    finding: u64,
    verdict: &'static str,
    reasoning: &'static str,
    revision: String,
}

/// The sim defender's JSON reply: the schema's fields in order, responses only where the
/// schema asks for them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SimDefense {
    reasoning: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    responses: Option<Vec<SimResponse>>,
    summary: String,
    revised_content: String,
}

/// The sim attacker's findings as JSON: the same draws as its text report.
fn sim_attack_json(ask: &SimAsk, schema: &ReplySchema) -> String {
    let mut rng = SplitMix64::new(ask.seed);
    let later = ask.prompt.contains("This is round ");
    let n = if later { rng.below(3) } else { 1 + rng.below(3) };
    let mut picks: Vec<usize> = (0..SIM_FLAWS.len()).collect();
    if n > 0 {
        rng.shuffle(&mut picks);
    }
    let findings: Vec<SimFinding> = picks
        .iter()
        .take(n)
        .map(|&k| {
            let (title, severity, vuln, exploit) = SIM_FLAWS[k];
            SimFinding {
                title,
                severity,
                location: format!("Section {}", 1 + rng.below(2)),
                vulnerability: format!("The {vuln}."),
                exploit_scenario: format!("An attacker could {exploit}."),
            }
        })
        .collect();
    let critical = findings.iter().any(|f| f.severity == "CRITICAL");
    let reasoning = format!(
        "{}[simulated attack from {}] Each section was read for untrusted input, secrets and \
         missing limits.",
        ask.hostile_paragraph(),
        ask.model
    );
    let reply = SimAttack {
        reasoning: fit(schema, schema::REASONING, &reasoning),
        findings,
        overall_risk: match (n, critical) {
            (0, _) => "Low: nothing found",
            (_, true) => "High, fix before release",
            _ => "Moderate",
        },
    };
    to_json(&reply).to_string()
}

/// The sim defender's answer as JSON: each finding the prompt lists accepted (two times in
/// three) or rebutted, and the content it carries with the accepted fixes noted.
fn sim_defense_json(ask: &SimAsk, schema: &ReplySchema) -> String {
    let mut rng = SplitMix64::new(ask.seed);
    let p = ask.prompt;
    let titles: Vec<(u64, String)> = p.lines().filter_map(|l| finding_heading(bare(l))).collect();
    let k = schema.schema["properties"]["responses"]["maxItems"].as_u64().unwrap_or(0);
    let mut fixes = Vec::new();
    let responses: Vec<SimResponse> = (1..=k)
        .map(|n| {
            let title = titles
                .iter()
                .find(|(m, _)| *m == n)
                .map_or_else(|| format!("finding {n}"), |(_, t)| t.clone());
            if rng.below(3) > 0 {
                let revision = format!("Guard against: {title}.");
                fixes.push(title);
                SimResponse {
                    finding: n,
                    verdict: "ACCEPT",
                    reasoning: "The finding is valid.",
                    revision,
                }
            } else {
                SimResponse {
                    finding: n,
                    verdict: "REBUT",
                    reasoning: "The section already handles this case.",
                    revision: String::new(),
                }
            }
        })
        .collect();
    let mut revised = carried(p).to_string();
    for f in &fixes {
        revised.push_str(&format!("\n- Hardening: {f} addressed."));
    }
    let reasoning = format!(
        "{}[simulated defense from {}] Each finding was weighed against the content.",
        ask.hostile_paragraph(),
        ask.model
    );
    let reply = SimDefense {
        reasoning: fit(schema, schema::REASONING, &reasoning),
        responses: schema.schema["properties"].get("responses").is_some().then_some(responses),
        summary: format!("Accepted {} of {k} findings.", fixes.len()),
        revised_content: fit(schema, "revisedContent", revised.trim()),
    };
    to_json(&reply).to_string()
}

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    // Asked for a schema: this mode's own in JSON; another mode's is not ours to answer.
    match ask.schema {
        Some(s) if s.name == ATTACK_SCHEMA && p.starts_with(ATTACK_HEAD) => {
            return Some(sim_attack_json(ask, s))
        }
        Some(s) if s.name == DEFENSE_SCHEMA && p.starts_with(DEFEND_HEAD) => {
            return Some(sim_defense_json(ask, s))
        }
        Some(_) => return None,
        None => {}
    }
    let mut rng = SplitMix64::new(ask.seed);
    let who = ask.model;
    if p.starts_with(GENERATE_HEAD) {
        if ask.malformed {
            return Some(format!("[simulated structure from {who}] Looks fine to me as it is."));
        }
        let body = carried(p);
        let mut s = format!("[simulated structure from {who}]\n\n## 1. Material\n\n");
        if body.contains('\n') || body.contains('{') {
            s.push_str(&format!("```\n{body}\n```\n"));
        } else {
            s.push_str(body);
            s.push('\n');
        }
        s.push_str(&format!(
            "\n## 2. Scope\n\n{}The material above, as given.",
            ask.hostile_paragraph()
        ));
        return Some(s);
    }
    if p.starts_with(ATTACK_HEAD) {
        if ask.malformed {
            return Some(format!(
                "[simulated attack from {who}] There may be some issues with input handling and \
                 perhaps the secrets, but overall it is hard to say."
            ));
        }
        let later = p.contains("This is round ");
        let n = if later { rng.below(3) } else { 1 + rng.below(3) };
        if n == 0 {
            return Some(format!("[simulated attack from {who}]\n\nFINDINGS: NONE"));
        }
        let mut picks: Vec<usize> = (0..SIM_FLAWS.len()).collect();
        rng.shuffle(&mut picks);
        let mut s = format!("[simulated attack from {who}]\n\n{}", ask.hostile_paragraph());
        let mut sev = Vec::new();
        for (i, &k) in picks.iter().take(n).enumerate() {
            let (title, severity, vuln, exploit) = SIM_FLAWS[k];
            sev.push(severity);
            s.push_str(&format!(
                "### FINDING {}: {title}\n**Severity:** {severity}\n**Location:** Section {}\n\
                 **Vulnerability:** The {vuln}.\n**Exploit Scenario:** An attacker could {exploit}.\n\n",
                i + 1,
                1 + rng.below(2)
            ));
        }
        let c = |l: &str| sev.iter().filter(|s| **s == l).count();
        s.push_str(&format!(
            "SUMMARY:\nCritical: {}, High: {}, Medium: {}, Low: {}\nOverall risk: {}",
            c("CRITICAL"),
            c("HIGH"),
            c("MEDIUM"),
            c("LOW"),
            if c("CRITICAL") > 0 { "High, fix before release" } else { "Moderate" }
        ));
        return Some(s);
    }
    if p.starts_with(DEFEND_HEAD) {
        let content = carried(p);
        if ask.malformed {
            return Some(format!("[simulated defense from {who}] I think it holds up. All good."));
        }
        let titles: Vec<(u64, String)> =
            p.lines().filter_map(|l| finding_heading(bare(l))).collect();
        let mut s = format!("[simulated defense from {who}]\n\n{}", ask.hostile_paragraph());
        let mut fixes = Vec::new();
        for (n, title) in &titles {
            let accept = rng.below(3) > 0;
            let (verdict, reasoning, revision) = if accept {
                fixes.push(title.clone());
                ("ACCEPT", "The finding is valid.".to_string(), format!("Guard against: {title}."))
            } else {
                ("REBUT", "The section already handles this case.".to_string(), "N/A".to_string())
            };
            s.push_str(&format!(
                "RESPONSE TO FINDING {n}: {title}\nVerdict: {verdict}\nReasoning: {reasoning}\nRevision: {revision}\n\n"
            ));
        }
        s.push_str(&format!(
            "DEFENSE SUMMARY: accepted {} of {} findings.\n\nREVISED CONTENT:\n{content}\n",
            fixes.len(),
            titles.len()
        ));
        for f in fixes {
            s.push_str(&format!("\n- Hardening: {f} addressed."));
        }
        return Some(s);
    }
    if p.starts_with(SYNTHESIZE_HEAD) {
        let content = carried(p);
        if ask.malformed {
            return Some(format!(
                "[simulated synthesis from {who}] Here is the final version.\n\n{content}"
            ));
        }
        let level = ["High", "Medium", "Low"][rng.below(3)];
        return Some(format!(
            "[simulated synthesis from {who}]\n\n## Hardened Output\n\n{content}\n\n\
             ## Vulnerability Audit Summary\n\n{}Every finding was weighed; accepted fixes are applied \
             above. (This text is simulated: no real model was asked.)\n\n\
             Remaining Risks: untested edge cases.\nHardening Confidence: {level}",
            ask.hostile_paragraph()
        ));
    }
    None
}
