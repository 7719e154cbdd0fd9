//! Peer Review's prompts: each reviewer's (with its rubric) and the consolidator's, which carries
//! the server's statistics.

use super::*;

pub const REVIEW_HEAD: &str = "You are an expert reviewer in an independent peer review.";
pub const CONSOLIDATE_HEAD: &str = "You are the consolidator of an independent peer review.";
pub const WORK_START: &str = "=== WORK UNDER REVIEW ===";
pub const WORK_END: &str = "=== END OF WORK ===";
const STATS_START: &str = "=== SERVER STATISTICS (final) ===";
const STATS_END: &str = "=== END OF STATISTICS ===";

/// The work under review: `content`, else the question.
pub fn work<'a>(content: Option<&'a str>, question: &'a str) -> &'a str {
    content.unwrap_or(question)
}

fn rubric_text(r: &Rubric) -> String {
    let mut s = format!("Rubric: {} — {}\n", r.name, r.description);
    for c in &r.criteria {
        s.push_str(&format!("- {} (weight {}): {}\n", c.name, c.weight, c.description));
    }
    s
}

pub(super) const SCALE: &str =
    "Scale: 1 = critical deficiencies, 2 = significant weaknesses, 3 = adequate, \
4 = good, 5 = excellent.";
pub(super) const SEVERITY_TEXT: &str =
    "Severities: CRITICAL (blocks progress), MAJOR (fix now), MINOR (fix \
when convenient), SUGGESTION (optional).";

/// The review prompt asking for the spec's sections, or, given the review's schema, for its
/// JSON (the work, rubric, scale and severities stated the same).
pub fn review_prompt(
    question: &str,
    work: &str,
    rubric: &Rubric,
    schema: Option<&ReplySchema>,
) -> String {
    let first = rubric.criteria.first().map_or("Criterion", |c| c.name.as_str());
    let format = match schema {
        Some(s) => s.instruction(),
        None => format!(
            "Reply in exactly this format:\n\n\
             ### Scores\n\n| Criterion | Score (1-5) | Weight | Justification |\n|---|---|---|---|\n\
             | {first} | <1-5> | <weight> | <one or two sentences> |\n\
             (one row per criterion, named exactly as in the rubric, every criterion scored)\n\n\
             ### Findings\n\nAt least 3, each:\n\n#### FINDING 1: <title>\nCategory: <a criterion>\n\
             Severity: CRITICAL|MAJOR|MINOR|SUGGESTION\nLocation: <where in the work>\n\
             Description: <what is wrong>\nImpact: <what it causes>\nRecommendation: <what to do>\n\n\
             ### Strengths\n\n- 3 to 5 items\n\n### Summary\n\n<a short overall assessment>"
        ),
    };
    format!(
        "{REVIEW_HEAD} Review the work below on your own, against the rubric.\n\n\
         Request: {question}\n\n{WORK_START}\n{work}\n{WORK_END}\n\n\
         Review type: {}\n{}\n{SCALE}\n{SEVERITY_TEXT}\n\n{format}",
        rubric.name,
        rubric_text(rubric)
    )
}

pub fn consolidation_prompt(
    question: &str,
    work: &str,
    rubric: &Rubric,
    reviews: &[Review],
    statistics: &Statistics,
) -> String {
    let mut listed = String::new();
    for r in reviews {
        listed.push_str(&format!(
            "### Reviewer {} ({})\n\n{}\n\n",
            r.reviewer_index,
            r.model,
            quoted_review(r)
        ));
    }
    format!(
        "{CONSOLIDATE_HEAD} {} reviewers reviewed the work below independently; write the \
         consolidated report.\n\nRequest: {question}\n\n{WORK_START}\n{work}\n{WORK_END}\n\n\
         Review type: {}\n{}\n{SCALE}\n{SEVERITY_TEXT}\n\n## The reviews\n\n{listed}\
         {STATS_START}\n{}\n{STATS_END}\n\nThese statistics were computed by the server from the \
         reviewers' scores. They are final: quote them, do not recompute them.\n\n\
         Reply in exactly this format:\n\n## Consensus Scores\n(each criterion with the server's \
         mean and agreement)\n### Consensus Findings\n(findings raised by 2 or more reviewers, \
         naming them)\n### Unique Findings\n(raised by one reviewer; judge their credibility)\n\
         ### Disputed Assessments\n(where reviewers disagree, and why)\n\
         ## Inter-Reviewer Agreement\n## Prioritized Action Items\nAt most 15, numbered, ordered \
         by severity, then by how many reviewers raised it, then by criterion weight; each \
         like:\n1. [CRITICAL] <what to do> — Effort: Low|Medium|High\n## Executive Summary",
        reviews.len(),
        rubric.name,
        rubric_text(rubric),
        stats_text(statistics)
    )
}

/// A review as the consolidator reads it: a JSON review as its fields.
pub(super) fn quoted_review(r: &Review) -> String {
    readable(&r.review_text).trim().to_string()
}

/// The statistics as the consolidator reads them.
fn stats_text(s: &Statistics) -> String {
    let mut t = String::new();
    // A figure as JSON writes it (`4.0`, `3.5`), `n/a` when there is none.
    let num = |v: Option<f64>| v.map_or("n/a".to_string(), |v| Value::from(v).to_string());
    for c in &s.consensus_scores {
        let scores: Vec<String> =
            c.scores.iter().map(|x| format!("R{}={}", x.reviewer_index, x.score)).collect();
        t.push_str(&format!(
            "- {} (weight {}): scores [{}], mean {}, std dev {}, agreement {}{}\n",
            c.criterion,
            c.weight,
            scores.join(", "),
            num(c.average),
            num(c.stddev),
            c.agreement.as_deref().unwrap_or("n/a"),
            if c.disputed { ", DISPUTED" } else { "" }
        ));
    }
    for o in &s.reviewer_overall_scores {
        t.push_str(&format!(
            "- Reviewer {} ({}) overall: {}\n",
            o.reviewer_index,
            o.model,
            num(o.overall_score)
        ));
    }
    t.push_str(&format!(
        "- Consensus overall (weighted): {}\n- Average of reviewer overalls: {}\n- Mean std dev: {}\n",
        num(s.consensus_overall),
        num(s.average_overall_score),
        num(s.mean_std_dev)
    ));
    let f = &s.finding_totals;
    t.push_str(&format!(
        "- Findings: {} CRITICAL, {} MAJOR, {} MINOR, {} SUGGESTION ({} in all)",
        f.critical, f.major, f.minor, f.suggestion, f.total
    ));
    t
}
