//! Specialist Panel's sim answers: a specialist's report in text or JSON, and a synthesis.

use super::*;

/// The criteria a specialist's system message lists.
fn asked_criteria(system: &str) -> Vec<String> {
    let Some((_, rest)) = system.split_once(CRITERIA_LEAD) else { return Vec::new() };
    rest.lines().skip(1).map_while(|l| l.strip_prefix("- ")).map(str::to_string).collect()
}

/// The role title a specialist's system message names.
fn asked_title(system: &str) -> &str {
    system
        .strip_prefix("You are the ")
        .and_then(|r| r.split_once(&format!(" {SPECIALIST_HEAD}")))
        .map_or("Specialist", |(t, _)| t)
}

const SIM_NOTES: [&str; 5] = [
    "a serious gap that needs work before going ahead",
    "weak in places; several open questions",
    "adequate, with the usual caveats",
    "solid, a few details to confirm",
    "strong; nothing of concern found",
];

fn sim_report(ask: &SimAsk, system: &str) -> String {
    let mut rng = SplitMix64::new(ask.seed ^ crate::modes::common::seed_from_run_id(system));
    let who = ask.model;
    let title = asked_title(system);
    let criteria = asked_criteria(system);
    let scores: Vec<usize> = criteria.iter().map(|_| 1 + rng.below(5)).collect();
    if ask.malformed {
        return format!(
            "[simulated report from {who} as {title}] Overall the plan looks reasonable from \
             where I sit. A few areas could be stronger, but I would not hold it up; I'd call it \
             decent on most counts."
        );
    }
    let weakest = scores
        .iter()
        .enumerate()
        .min_by_key(|(_, s)| **s)
        .and_then(|(i, _)| criteria.get(i))
        .cloned()
        .unwrap_or_else(|| "the main criterion".into());
    let rows: Vec<String> = criteria
        .iter()
        .zip(&scores)
        .map(|(c, s)| format!("| {c} | {s}/5 | {} |", SIM_NOTES[s - 1]))
        .collect();
    format!(
        "[simulated report from {who} as {title}]\n\n### Key Findings\n\n\
         1. {weakest} is the weakest point from a {title}'s view.\n\
         2. The material states its goal clearly, but not how success is measured.\n\
         3. Two assumptions are left unchecked and should be tested early.\n\n\
         ### Risk Assessment\n\n| Criterion | Rating (1-5) | Notes |\n|---|---|---|\n{}\n\n\
         ### Top 3 Recommendations\n\n1. Address {weakest} before anything else.\n\
         2. Write down the assumptions and test the riskiest one first.\n\
         3. Review the plan again once the first milestone is reached.\n\n\
         ### Detailed Analysis\n\n{}Seen as a {title}, the material is a reasonable start. \
         (This text is simulated: no real model was asked.) The ratings above follow the \
         criteria in order; {weakest} needs the most work.",
        rows.join("\n"),
        ask.hostile_paragraph()
    )
}

fn sim_synthesis(ask: &SimAsk) -> String {
    let mut rng = SplitMix64::new(ask.seed);
    let who = ask.model;
    let titles: Vec<String> = ask
        .prompt
        .lines()
        .filter_map(|l| l.strip_prefix(REPORT_START))
        .filter_map(|l| l.trim().rsplit_once(" ("))
        .map(|(t, _)| t.trim().to_string())
        .collect();
    if ask.malformed {
        return format!(
            "[simulated synthesis from {who}] The specialists broadly agree the plan is workable. \
             Fix the weakest points first, then proceed."
        );
    }
    let a = titles.first().cloned().unwrap_or_else(|| "Specialist A".into());
    let b = titles.get(1).cloned().unwrap_or_else(|| "Specialist B".into());
    let first = ["Critical", "High"][rng.below(2)];
    let domains = ["Security", "Operations", "Cost", "Scalability", "Data"];
    let k = rng.below(domains.len());
    let domain = |i: usize| domains[(k + i) % domains.len()];
    let rows = [
        format!(
            "| {} | {first} | Unchecked assumptions in the plan | Test them before the first milestone | {a}, {b} |",
            domain(0)
        ),
        format!(
            "| {} | Medium | Success is not measured | Define metrics and review them | {a} |",
            domain(1)
        ),
        format!("| {} | Low | Documentation is thin | Write a short runbook | {b} |", domain(2)),
    ];
    format!(
        "[simulated synthesis from {who}]\n\n### Executive Summary\n\n{}The panel finds the \
         material workable with {} fixes first. (This text is simulated: no real model was \
         asked.)\n\n### Convergent Findings\n\n1. Unchecked assumptions are the main risk \
         ({a}, {b}).\n2. Success needs measurable criteria ({a}, {b}).\n\n\
         ### Divergent Findings\n\n| Finding | One View | Other View | Suggested Resolution |\n\
         |---|---|---|---|\n| Pace of the rollout | {a}: slow down | {b}: keep the date | Ship \
         in two stages |\n\n### Consolidated Risk Matrix\n\n| Domain | Level | Concern | Action | \
         Source Roles |\n|---|---|---|---|---|\n{}\n\n### Unified Recommendations\n\n\
         1. Test the riskiest assumption first.\n2. Define success metrics.\n3. Write a runbook.",
        ask.hostile_paragraph(),
        first.to_lowercase(),
        rows.join("\n"),
    )
}

/// The sim specialist's report as JSON that fits `schema`: the same draws as its text report,
/// each criterion the schema names rated once.
/// A criterion's rating in the report's JSON.
#[derive(Serialize)]
struct SimRating {
    rating: usize,
    notes: &'static str,
}

/// A report as its schema asks for it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SimReport {
    reasoning: String,
    key_findings: [String; 3],
    ratings: serde_json::Map<String, Value>,
    top_recommendations: [String; 3],
    detailed_analysis: String,
}

fn sim_report_json(ask: &SimAsk, system: &str, schema: &ReplySchema) -> String {
    let mut rng = SplitMix64::new(ask.seed ^ crate::modes::common::seed_from_run_id(system));
    let who = ask.model;
    let title = asked_title(system);
    let criteria = schema::keys_of(&schema.schema["properties"]["ratings"]);
    let scores: Vec<usize> = criteria.iter().map(|_| 1 + rng.below(5)).collect();
    let weakest = scores
        .iter()
        .enumerate()
        .min_by_key(|(_, s)| **s)
        .and_then(|(i, _)| criteria.get(i))
        .cloned()
        .unwrap_or_else(|| "the main criterion".into());
    let ratings: serde_json::Map<String, Value> = criteria
        .iter()
        .zip(&scores)
        .map(|(c, &rating)| {
            (c.clone(), to_json(&SimRating { rating, notes: SIM_NOTES[rating - 1] }))
        })
        .collect();
    let analysis: String = format!(
        "{}Seen as a {title}, the material is a reasonable start. (This text is simulated: no \
         real model was asked.) The ratings follow the criteria in order; {weakest} needs the \
         most work.",
        ask.hostile_paragraph()
    )
    .chars()
    .take(ANALYSIS_CHARS)
    .collect();
    let clip = |t: String| -> String { t.chars().take(ITEM_CHARS).collect() };
    to_json(&SimReport {
        reasoning: format!(
            "[simulated report from {who} as {title}] Each criterion was weighed in turn."
        )
        .chars()
        .take(schema::REASONING_MAX_CHARS)
        .collect(),
        key_findings: [
            clip(format!("{weakest} is the weakest point from a {title}'s view.")),
            "The material states its goal clearly, but not how success is measured.".into(),
            "Two assumptions are left unchecked and should be tested early.".into(),
        ],
        ratings,
        top_recommendations: [
            clip(format!("Address {weakest} before anything else.")),
            "Write down the assumptions and test the riskiest one first.".into(),
            "Review the plan again once the first milestone is reached.".into(),
        ],
        detailed_analysis: analysis,
    })
    .to_string()
}

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    // Asked for a schema: this mode's report in JSON; another mode's is not ours to answer.
    match ask.schema {
        Some(s) if s.name == REPORT_SCHEMA => {
            let system = ask.messages.iter().find(|m| m.role == "system")?;
            if !system.content.contains(SPECIALIST_HEAD) {
                return None;
            }
            return Some(sim_report_json(ask, &system.content, s));
        }
        Some(_) => return None,
        None => {}
    }
    if ask.prompt.starts_with(SYNTHESIS_HEAD) {
        return Some(sim_synthesis(ask));
    }
    let system = ask.messages.iter().find(|m| m.role == "system")?;
    if !system.content.contains(SPECIALIST_HEAD) || !ask.prompt.contains(MATERIAL_START) {
        return None;
    }
    Some(sim_report(ask, &system.content))
}
