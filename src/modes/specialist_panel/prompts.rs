//! Specialist Panel's prompts: each specialist's system and user prompt, and the synthesis.

use super::*;

/// Opens each specialist's system message (the sim knows a specialist by it).
pub const SPECIALIST_HEAD: &str = "on a panel of specialists";
pub const CRITERIA_LEAD: &str = "The criteria you rate, each from 1 to 5";
pub const SYNTHESIS_HEAD: &str = "You are the SYNTHESIZER of a specialist panel.";
pub const MATERIAL_START: &str = "=== MATERIAL ===";
pub const MATERIAL_END: &str = "=== END MATERIAL ===";
pub const REPORT_START: &str = "=== REPORT:";
pub const REPORT_END: &str = "=== END REPORT ===";

/// The specialist's system message asking for the four sections, or, given its report's
/// schema, for its JSON (the role, priorities and criteria stated the same).
pub fn specialist_system(s: &SpecialistConfig, schema: Option<&ReplySchema>) -> String {
    let priorities: Vec<String> =
        s.priorities.iter().enumerate().map(|(i, p)| format!("{}. {p}", i + 1)).collect();
    let criteria: Vec<String> = s.criteria.iter().map(|c| format!("- {c}")).collect();
    let format = match schema {
        Some(schema) => schema.instruction(),
        None => {
            let rows: Vec<String> =
                s.criteria.iter().map(|c| format!("| {c} | <1-5> | <why> |")).collect();
            format!(
                "Reply in exactly these four sections:\n\n\
                 ### Key Findings\n3 to 8 numbered findings, most important first.\n\n\
                 ### Risk Assessment\nA markdown table with the columns Criterion, Rating (1-5) \
                 and Notes, one row per criterion above, named exactly as written:\n\
                 | Criterion | Rating (1-5) | Notes |\n|---|---|---|\n{rows}\n\n\
                 ### Top 3 Recommendations\nThree numbered recommendations, most important \
                 first.\n\n### Detailed Analysis\n200 to 500 words from your perspective.",
                rows = rows.join("\n"),
            )
        }
    };
    format!(
        "You are the {title} {SPECIALIST_HEAD}. Each specialist analyses the same material \
         through a different expert lens; the others cover their own fields, so stay within \
         yours.\n\nYour expertise: {expertise}.\nYour lens: {lens}\n\nYour priorities, in \
         order:\n{priorities}\n\n{CRITERIA_LEAD} (5 = strong, no concern; 1 = a serious \
         weakness):\n{criteria}\n\n{format}",
        title = s.title,
        expertise = s.expertise_areas.trim_end_matches('.'),
        lens = s.description,
        priorities = priorities.join("\n"),
        criteria = criteria.join("\n"),
    )
}

fn request_line(question: &str, m: &Material) -> String {
    if m.source == "content" {
        format!("The request: {question}\n\n")
    } else {
        String::new()
    }
}

pub fn specialist_user(question: &str, m: &Material) -> String {
    format!(
        "{}Analyse this material from your perspective:\n\n{MATERIAL_START}\n{}\n{MATERIAL_END}",
        request_line(question, m),
        m.text
    )
}

/// A report as the synthesizer gets it.
pub struct ReportIn<'a> {
    pub title: &'a str,
    pub model: &'a str,
    pub report: &'a str,
}

pub fn synthesis_prompt(
    question: &str,
    m: &Material,
    reports: &[ReportIn],
    missing: &[ReportIn],
) -> String {
    let reports: Vec<String> = reports
        .iter()
        .map(|r| {
            format!("{REPORT_START} {} ({}) ===\n{}\n{REPORT_END}", r.title, r.model, r.report)
        })
        .collect();
    let missing = if missing.is_empty() {
        String::new()
    } else {
        let names: Vec<String> =
            missing.iter().map(|r| format!("- {} ({})", r.title, r.model)).collect();
        format!(
            "\n\nThese specialists' reports are missing (their calls failed); do not invent \
             their views, and say which perspectives are not covered:\n{}",
            names.join("\n")
        )
    };
    format!(
        "{SYNTHESIS_HEAD} {n} specialists analysed the same material, each through their own \
         expert role. Their views complement each other: do not rank them or pick a winner; \
         integrate them.\n\n{req}{MATERIAL_START}\n{text}\n{MATERIAL_END}\n\n{reports}{missing}\n\n\
         Reply in exactly these sections:\n\n\
         ### Convergent Findings\nNumbered findings that at least two specialists agree on, \
         naming those specialists.\n\n\
         ### Divergent Findings\nA table with the columns Finding, One View, Other View, \
         Suggested Resolution.\n\n\
         ### Consolidated Risk Matrix\nA table with the columns Domain, Level, Concern, Action, \
         Source Roles; Level is one of Critical, High, Medium, Low; most severe first.\n\n\
         ### Unified Recommendations\nAt most 10 numbered recommendations.\n\n\
         ### Executive Summary\nA short paragraph for a decision maker.",
        n = reports.len(),
        req = request_line(question, m),
        text = m.text,
        reports = reports.join("\n\n"),
    )
}
