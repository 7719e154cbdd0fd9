//! Peer Review's sim answers: reviews in text or JSON and a consolidation.

use super::*;

fn carried(prompt: &str) -> &str {
    prompt
        .split_once(WORK_START)
        .and_then(|(_, rest)| rest.split_once(WORK_END))
        .map_or("", |(c, _)| c.trim())
}

/// The rubric's criteria as the prompt lists them (`- Name (weight n): …`).
pub fn prompt_criteria(prompt: &str) -> Vec<(String, u32)> {
    let r = regex!(r"^- (.+) \(weight (\d)\): ");
    let rubric_part = prompt.split_once("Rubric: ").map_or("", |(_, rest)| rest);
    rubric_part
        .lines()
        .skip(1)
        .map_while(|l| r.captures(l))
        .filter_map(|c| Some((c[1].to_string(), c[2].parse().ok()?)))
        .collect()
}

const SIM_FINDINGS: [(&str, &str, &str, &str); 6] = [
    (
        "Single point of failure",
        "CRITICAL",
        "one component carries every request",
        "Run a second instance behind a load balancer.",
    ),
    (
        "No backup restore test",
        "MAJOR",
        "backups exist but nobody has restored one",
        "Restore a backup every month and time it.",
    ),
    (
        "Secrets in configuration",
        "MAJOR",
        "credentials sit in plain configuration files",
        "Move them to a secret store.",
    ),
    (
        "Sparse monitoring",
        "MINOR",
        "only uptime is watched",
        "Alert on latency and error rates too.",
    ),
    (
        "Unclear ownership",
        "MINOR",
        "nobody owns the nightly job",
        "Name an owner and document the job.",
    ),
    (
        "Document the data flow",
        "SUGGESTION",
        "the flow is only in people's heads",
        "Draw and keep a diagram next to the code.",
    ),
];

/// The sim reviewer's review as JSON that fits `schema`: the same draws as its text review.
fn sim_review_json(ask: &SimAsk, schema: &ReplySchema) -> Option<String> {
    let p = ask.prompt;
    let mut rng = SplitMix64::new(ask.seed);
    // The rubric's criteria as the schema names them.
    let criteria = schema::keys_of(&schema.schema["properties"]["scores"]);
    if criteria.is_empty() {
        return None;
    }
    let lean = rng.below(3) as i64 - 1;
    let scores: serde_json::Map<String, Value> = criteria
        .iter()
        .map(|name| {
            let score = (3 + lean + rng.below(3) as i64 - 1).clamp(1, 5);
            let s = SimScore { score, justification: format!("The work is judged on {name}.") };
            (name.clone(), to_json(&s))
        })
        .collect();
    let mut picks: Vec<usize> = (0..SIM_FINDINGS.len()).collect();
    rng.shuffle(&mut picks);
    let location = if carried(p).is_empty() { "the request" } else { "the described design" };
    let findings: Vec<SimFinding> = picks
        .iter()
        .take(3 + rng.below(2))
        .map(|&k| {
            let (title, severity, what, fix) = SIM_FINDINGS[k];
            let category = &criteria[rng.below(criteria.len())];
            SimFinding {
                title,
                category: category.clone(),
                severity,
                location,
                description: format!("In this work {what}."),
                impact: "Outages or lost data when it goes wrong.",
                recommendation: fix,
            }
        })
        .collect();
    let summary: String = format!(
        "{}A sound start with gaps to close before it grows. (This review is simulated: no real \
         model was asked.)",
        ask.hostile_paragraph()
    )
    .chars()
    .take(SUMMARY_CHARS)
    .collect();
    let reply = SimReview {
        reasoning: format!(
            "[simulated review from {}] Each criterion was weighed against the work.",
            ask.model
        ),
        scores,
        findings,
        strengths: ["The scope is clear.", "The parts are simple.", "The costs are low."],
        summary,
    };
    Some(to_json(&reply).to_string())
}

/// A criterion's score in the sim's review JSON.
#[derive(Serialize)]
struct SimScore {
    score: i64,
    justification: String,
}

/// A finding of the sim's review JSON.
#[derive(Serialize)]
struct SimFinding {
    title: &'static str,
    category: String,
    severity: &'static str,
    location: &'static str,
    description: String,
    impact: &'static str,
    recommendation: &'static str,
}

/// The sim's review JSON (its scores in the schema's order of the criteria).
#[derive(Serialize)]
struct SimReview {
    reasoning: String,
    scores: serde_json::Map<String, Value>,
    findings: Vec<SimFinding>,
    strengths: [&'static str; 3],
    summary: String,
}

/// A finding's title in a consolidation prompt: a text review's `FINDING <n>: <title>`
/// heading, or a JSON review's `Title:` field as it reads.
fn quoted_finding_title(line: &str) -> Option<String> {
    if let Some((_, t)) = finding_heading(bare(line)) {
        return Some(t);
    }
    let t = line.trim().strip_prefix("Title: ")?.trim();
    (!t.is_empty()).then(|| t.to_string())
}

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    let who = ask.model;
    // Asked for a schema: this mode's review in JSON; another mode's is not ours to answer.
    match ask.schema {
        Some(s) if s.name == REVIEW_SCHEMA && p.starts_with(REVIEW_HEAD) => {
            return sim_review_json(ask, s)
        }
        Some(_) => return None,
        None => {}
    }
    let mut rng = SplitMix64::new(ask.seed);
    if p.starts_with(REVIEW_HEAD) {
        let criteria = prompt_criteria(p);
        if ask.malformed {
            return Some(format!(
                "[simulated review from {who}] Overall this looks reasonable; maybe a 4 out of 5? \
                 Security could be better and there might be a scaling issue, but it is hard to say."
            ));
        }
        let lean = rng.below(3) as i64 - 1;
        let mut s = format!("[simulated review from {who}]\n\n### Scores\n\n| Criterion | Score (1-5) | Weight | Justification |\n|---|---|---|---|\n");
        for (name, weight) in &criteria {
            let score = (3 + lean + rng.below(3) as i64 - 1).clamp(1, 5);
            s.push_str(&format!(
                "| {name} | {score} | {weight} | The work is judged on {name}. |\n"
            ));
        }
        let mut picks: Vec<usize> = (0..SIM_FINDINGS.len()).collect();
        rng.shuffle(&mut picks);
        s.push_str("\n### Findings\n\n");
        for (n, &k) in picks.iter().take(3 + rng.below(2)).enumerate() {
            let (title, severity, what, fix) = SIM_FINDINGS[k];
            let category =
                criteria.get(rng.below(criteria.len().max(1))).map_or("General", |c| c.0.as_str());
            s.push_str(&format!(
                "#### FINDING {}: {title}\n**Category:** {category}\n**Severity:** {severity}\n\
                 **Location:** {}\n**Description:** In this work {what}.\n**Impact:** Outages or \
                 lost data when it goes wrong.\n**Recommendation:** {fix}\n\n",
                n + 1,
                if carried(p).is_empty() { "the request" } else { "the described design" }
            ));
        }
        s.push_str(&format!(
            "### Strengths\n\n- The scope is clear.\n- The parts are simple.\n- The costs are low.\n\n\
             ### Summary\n\n{}A sound start with gaps to close before it grows. (This review is \
             simulated: no real model was asked.)",
            ask.hostile_paragraph()
        ));
        return Some(s);
    }
    if p.starts_with(CONSOLIDATE_HEAD) {
        if ask.malformed {
            return Some(format!(
                "[simulated consolidation from {who}] The reviewers broadly agree the work is \
                 fine with a few issues. Fix the big ones first."
            ));
        }
        let mut titles: Vec<(String, String)> = Vec::new();
        for l in p.lines() {
            if let Some(t) = quoted_finding_title(l) {
                if !titles.iter().any(|(x, _)| *x == t) {
                    let sev = SIM_FINDINGS.iter().find(|f| f.0 == t).map_or("MINOR", |f| f.1);
                    titles.push((t, sev.to_string()));
                }
            }
        }
        titles.sort_by_key(|(_, s)| SEVERITIES.iter().position(|x| x == s));
        let mut items = String::new();
        for (i, (t, sev)) in titles.iter().take(15).enumerate() {
            let effort = ["Low", "Medium", "High"][rng.below(3)];
            items.push_str(&format!("{}. [{sev}] Address: {t} — Effort: {effort}\n", i + 1));
        }
        return Some(format!(
            "[simulated consolidation from {who}]\n\n## Consensus Scores\n\nAs computed by the \
             server.\n\n### Consensus Findings\n\nThe reviewers who raised the same issues agree \
             on them.\n\n### Unique Findings\n\nThe rest are credible but single-sourced.\n\n\
             ### Disputed Assessments\n\nNone of note.\n\n## Inter-Reviewer Agreement\n\nSee the \
             statistics.\n\n## Prioritized Action Items\n\n{items}\n## Executive Summary\n\n{}The \
             work is a reasonable base; close the critical and major items first. (This text is \
             simulated: no real model was asked.)",
            ask.hostile_paragraph()
        ));
    }
    None
}
