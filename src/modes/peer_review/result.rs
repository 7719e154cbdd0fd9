//! What a peer review stores and reads back: the reviews, the server's statistics, the result,
//! its outcome and the export's report.

use super::*;

pub(super) fn round_to(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    ((v * f) + 1e-9).round() / f
}

/// A reviewer's overall score: Σ score·weight / Σ weight over its stated scores.
pub fn overall(scores: &[Score]) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for s in scores {
        if let Some(v) = s.score {
            num += f64::from(v) * f64::from(s.weight);
            den += f64::from(s.weight);
        }
    }
    (den > 0.0).then(|| num / den)
}

/// Agreement from a standard deviation (two decimals).
pub fn agreement(sd: f64) -> &'static str {
    if sd < 0.5 {
        "High"
    } else if sd <= 1.5 {
        "Medium"
    } else {
        "Low"
    }
}

/// A reviewer's score for a criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewerScore {
    pub reviewer_index: usize,
    /// 1-5.
    pub score: u32,
}

/// The reviewers' agreement on a criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsensusScore {
    pub criterion: String,
    /// Its weight in the rubric, 1-5.
    pub weight: u32,
    /// The reviewers that scored it.
    pub scores: Vec<ReviewerScore>,
    /// The mean score (one decimal); null when no reviewer scored it.
    pub average: Option<f64>,
    /// The standard deviation (two decimals); null when fewer than two scored it.
    pub stddev: Option<f64>,
    /// `High` (below 0.5), `Medium` (to 1.5) or `Low`; null without a standard deviation.
    pub agreement: Option<String>,
    /// The standard deviation is above 1.5.
    pub disputed: bool,
}

/// A reviewer's weighted overall score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewerOverall {
    pub reviewer_index: usize,
    pub model: String,
    /// Σ score·weight / Σ weight over its stated scores (one decimal); null when it stated none.
    pub overall_score: Option<f64>,
}

/// The findings of every review by severity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub struct FindingTotals {
    pub critical: usize,
    pub major: usize,
    pub minor: usize,
    pub suggestion: usize,
    /// Every finding.
    #[serde(rename = "total")]
    pub total: usize,
}

/// The server's statistics over the reviews (models never do this arithmetic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Statistics {
    /// Each rubric criterion, in rubric order.
    pub consensus_scores: Vec<ConsensusScore>,
    /// Each review's overall score.
    pub reviewer_overall_scores: Vec<ReviewerOverall>,
    /// The criteria's mean scores weighted by the rubric (one decimal, out of 5); null when no
    /// criterion was scored.
    pub consensus_overall: Option<f64>,
    /// The mean of the reviewers' overall scores (one decimal).
    pub average_overall_score: Option<f64>,
    /// The mean of the criteria's standard deviations (two decimals).
    pub mean_std_dev: Option<f64>,
    pub finding_totals: FindingTotals,
}

/// The server's statistics over the reviews (models never do this arithmetic).
pub fn statistics(reviews: &[Review], rubric: &Rubric) -> Statistics {
    let mut consensus = Vec::new();
    let (mut wsum, mut wmean) = (0.0, 0.0);
    let mut sds = Vec::new();
    for c in &rubric.criteria {
        let scored: Vec<(usize, u32)> = reviews
            .iter()
            .filter_map(|r| {
                r.scores
                    .iter()
                    .find(|s| s.criterion == c.name)
                    .and_then(|s| s.score)
                    .map(|v| (r.reviewer_index, v))
            })
            .collect();
        let n = scored.len() as f64;
        let mean = (!scored.is_empty())
            .then(|| scored.iter().map(|(_, v)| f64::from(*v)).sum::<f64>() / n);
        let sd = mean.filter(|_| scored.len() >= 2).map(|m| {
            let var = scored.iter().map(|(_, v)| (f64::from(*v) - m).powi(2)).sum::<f64>() / n;
            round_to(var.sqrt(), 2)
        });
        if let Some(m) = mean {
            wsum += f64::from(c.weight);
            wmean += m * f64::from(c.weight);
        }
        if let Some(sd) = sd {
            sds.push(sd);
        }
        consensus.push(ConsensusScore {
            criterion: c.name.clone(),
            weight: c.weight,
            scores: scored
                .iter()
                .map(|&(reviewer_index, score)| ReviewerScore { reviewer_index, score })
                .collect(),
            average: mean.map(|m| round_to(m, 1)),
            stddev: sd,
            agreement: sd.map(|sd| agreement(sd).to_string()),
            disputed: sd.is_some_and(|sd| sd > 1.5),
        });
    }
    let overalls: Vec<ReviewerOverall> = reviews
        .iter()
        .map(|r| ReviewerOverall {
            reviewer_index: r.reviewer_index,
            model: r.model.clone(),
            overall_score: overall(&r.scores).map(|o| round_to(o, 1)),
        })
        .collect();
    let stated: Vec<f64> = reviews.iter().filter_map(|r| overall(&r.scores)).collect();
    let severe =
        |s: &str| reviews.iter().flat_map(|r| &r.findings).filter(|f| f.severity == s).count();
    let [critical, major, minor, suggestion] = SEVERITIES.map(severe);
    Statistics {
        consensus_scores: consensus,
        reviewer_overall_scores: overalls,
        consensus_overall: (wsum > 0.0).then(|| round_to(wmean / wsum, 1)),
        average_overall_score: (!stated.is_empty())
            .then(|| round_to(stated.iter().sum::<f64>() / stated.len() as f64, 1)),
        mean_std_dev: (!sds.is_empty())
            .then(|| round_to(sds.iter().sum::<f64>() / sds.len() as f64, 2)),
        finding_totals: FindingTotals {
            critical,
            major,
            minor,
            suggestion,
            total: reviews.iter().map(|r| r.findings.len()).sum(),
        },
    }
}
/// One completed review, as `reviewer_complete` gives it and the result lists it (its row
/// keeps the same without `reviewText`, which is its content).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Review {
    /// 1-based, in the order of `reviewerModels`.
    pub reviewer_index: usize,
    pub model: String,
    /// The review as written (its reasoning trace left out).
    pub review_text: String,
    /// One per rubric criterion, in rubric order.
    pub scores: Vec<Score>,
    /// Its weighted overall score (one decimal, out of 5); null when it stated no score.
    pub overall_score: Option<f64>,
    pub findings: Vec<Finding>,
    pub strengths: Vec<String>,
    /// Its scores could be read.
    pub parse_success: bool,
    /// Why no score could be read (it declined, stopped while reasoning, or stated none in a
    /// form that can be read), when none could.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    /// Where the scores were read from (the review's JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    /// How long its call took, in milliseconds.
    pub response_time_ms: i64,
}

/// A reviewer whose call failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedReviewer {
    pub reviewer_index: usize,
    pub model: String,
    /// Why its call failed.
    pub error: String,
}

// ---- payloads (one definition for live events and stored results) --------------------------

pub use crate::modes::payload::Data;

/// `review_start`: the run, its review type and rubric.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Start<'a> {
    pub review_type: &'static str,
    pub rubric: &'a Rubric,
}

/// The `review_setup` row's parsed data (its content is the work under review).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Setup {
    pub review_type: String,
    pub rubric: Rubric,
    /// Where the work came from: `content` or `question`.
    pub source: String,
}

/// `reviewers_start`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewersStart {
    pub total_reviewers: usize,
}

/// A failed reviewer's row.
#[derive(Debug, Serialize)]
pub struct FailedRow<'a> {
    #[serde(flatten)]
    pub reviewer: &'a FailedReviewer,
    pub failed: bool,
}

/// The `review_stats` row's parsed data.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsRow<T> {
    pub statistics: T,
    pub failed_reviewers: Vec<FailedReviewer>,
}

/// `all_reviewers_complete`'s data.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllReviewed<'a> {
    pub reviews: &'a [Review],
    pub failed_reviewers: &'a [FailedReviewer],
    pub statistics: &'a Statistics,
}

/// The consolidation: `consolidation_complete`'s data (its row keeps the same without
/// `consolidatedReport`, its content) and the result's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Consolidation {
    /// The consolidator.
    pub model: String,
    /// The consolidated report: the run's answer.
    #[serde(default)]
    pub consolidated_report: String,
    /// The prioritised action items of the report.
    pub action_items: Vec<ActionItem>,
    /// How long its call took, in milliseconds.
    pub response_time_ms: u64,
    /// The consolidator the backup stood in for, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// The result's consolidation: its row's, with the report at the end.
fn report_last<S: serde::Serializer>(c: &Option<Consolidation>, s: S) -> Result<S::Ok, S::Error> {
    taken_last(c.as_ref(), "consolidatedReport").serialize(s)
}

// ---- the stored result ---------------------------------------------------------------------

/// A peer review's result, rebuilt from its stored rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeerReviewResult {
    /// The work under review.
    pub work: Option<String>,
    /// The review type (`architecture_review`, ..., `custom`).
    pub review_type: Option<String>,
    /// The rubric the reviews were scored against.
    pub rubric: Option<Rubric>,
    /// The reviews that arrived, by reviewer index.
    pub reviews: Vec<Review>,
    /// The reviewers whose call failed.
    pub failed_reviewers: Vec<FailedReviewer>,
    /// The server's statistics; null before every reviewer had answered.
    pub statistics: Option<Statistics>,
    /// The consolidation; null before it was written.
    #[serde(serialize_with = "report_last")]
    pub consolidation: Option<Consolidation>,
    #[serde(flatten)]
    pub failures: Failures,
}

/// `{work, reviewType, rubric, reviews, failedReviewers, statistics, consolidation, partial,
/// failedModels}` from the stored rows, as the events gave them (the work, review type and
/// rubric from the `review_setup` row stored at the start).
pub fn load_result(rows: &[StageRow]) -> Value {
    let mut reviews: Vec<Review> = Vec::new();
    let mut failed: Vec<FailedReviewer> = Vec::new();
    for r in rows.iter().filter(|r| {
        r.stage_type.strip_prefix("review_").is_some_and(|n| n.parse::<usize>().is_ok())
    }) {
        let Some(mut data) = r.parsed_data.clone() else { continue };
        if data["failed"] == true {
            if let Ok(f) = serde_json::from_value::<FailedReviewer>(data) {
                failed.push(f);
            }
            continue;
        }
        data["reviewText"] = Value::from(answer_text(&r.content).trim());
        if let Ok(review) = serde_json::from_value::<Review>(data) {
            reviews.push(review);
        }
    }
    reviews.sort_by_key(|r| r.reviewer_index);
    failed.sort_by_key(|r| r.reviewer_index);
    let stats = rows.iter().find(|r| r.stage_type == "review_stats");
    let statistics = stats.and_then(parsed).map(|s: StatsRow<Statistics>| s.statistics);
    let consolidation = rows.iter().find(|r| r.stage_type == "consolidation").and_then(|r| {
        let c: Consolidation = parsed(r)?;
        Some(Consolidation { consolidated_report: r.content.clone(), ..c })
    });
    let setup = rows.iter().find(|r| r.stage_type == SETUP);
    let setup_data: Option<Setup> = setup.and_then(parsed);
    to_json(&PeerReviewResult {
        work: setup.map(|r| r.content.clone()),
        review_type: setup_data.as_ref().map(|s| s.review_type.clone()),
        rubric: setup_data.map(|s| s.rubric),
        reviews,
        failed_reviewers: failed,
        statistics,
        consolidation,
        failures: Failures::of(rows),
    })
}

pub(super) fn outcome(result: &Value) -> Option<String> {
    let r: PeerReviewResult = typed(result)?;
    let c = r.consolidation.as_ref()?;
    let score = match r.statistics.and_then(|s| s.consensus_overall) {
        None => "no consensus score".to_string(),
        Some(v) => format!("consensus {}/5", Value::from(v)),
    };
    Some(format!(
        "{} reviews, {score}, {} action items: {}",
        r.reviews.len(),
        c.action_items.len(),
        short(&c.consolidated_report, 60)
    ))
}

// ---- the export's report -------------------------------------------------------------------

/// A score or an average as a reader reads it: `4`, `3.5`.
fn figure(f: f64) -> String {
    if f.fract() == 0.0 {
        format!("{f:.0}")
    } else {
        format!("{f}")
    }
}

/// An action item's text without the severity tag it opens with and the effort it closes
/// with (both have their own columns).
fn action_text(item: &ActionItem) -> String {
    let text = if item.severity.is_some() {
        regex!(r"^(?:\*\*|__)?\[[^\]\n]{1,40}\](?:\*\*|__)?\s*").replace(&item.text, "")
    } else {
        item.text.as_str().into()
    };
    if item.effort.is_some() {
        let effort = regex!(
            r"(?i)\s*(?:[—–-]\s*)?\(?\s*effort\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?\s*(?:low|medium|high)\b\s*\)?\s*$"
        );
        effort.replace(&text, "").trim().to_string()
    } else {
        text.trim().to_string()
    }
}

/// `reviewer 2 (model)`.
fn who(index: usize, model: &str) -> String {
    format!("reviewer {index} ({model})")
}

/// The result as the export's report: the consensus, the reviewers' scores per criterion as a
/// table (with each criterion's average and agreement, and each reviewer's weighted overall),
/// the reviewers whose scores could not be read or who failed, the findings by severity, and
/// the consolidator's action items as a table.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<PeerReviewResult>(result) else { return String::new() };
    let mut out = String::new();
    let stats = r.statistics.as_ref();
    if let Some(c) = stats.and_then(|s| s.consensus_overall) {
        let rubric = r.rubric.as_ref().map_or(String::new(), |r| format!(" {}", r.name));
        let mut line =
            format!("**Consensus:** {} of 5 overall, weighted by the{rubric} rubric", figure(c));
        if let Some(sd) = stats.and_then(|s| s.mean_std_dev) {
            line.push_str(&format!(
                "; {} agreement between the reviewers (mean standard deviation {sd:.2})",
                agreement(sd).to_lowercase()
            ));
        }
        out.push_str(&format!("{line}.\n\n"));
    }
    let consensus = stats.map_or(&[][..], |s| &s.consensus_scores);
    // The criteria: the rubric's, else those the reviews scored.
    let mut criteria: Vec<(&str, u32)> =
        r.rubric.iter().flat_map(|r| &r.criteria).map(|c| (c.name.as_str(), c.weight)).collect();
    if let (true, Some(first)) = (criteria.is_empty(), r.reviews.first()) {
        criteria = first.scores.iter().map(|s| (s.criterion.as_str(), s.weight)).collect();
    }
    if !r.reviews.is_empty() && !criteria.is_empty() {
        let mut head: Vec<String> = vec!["criterion".into(), "weight".into()];
        head.extend(r.reviews.iter().map(|r| who(r.reviewer_index, &r.model)));
        head.extend(["average".to_string(), "agreement".to_string()]);
        let mut rows: Vec<Vec<String>> = criteria
            .iter()
            .map(|&(name, weight)| {
                let mut row = vec![name.to_string(), weight.to_string()];
                for r in &r.reviews {
                    let s = r.scores.iter().find(|s| s.criterion == name).and_then(|s| s.score);
                    row.push(s.map_or_else(|| "unread".into(), |s| s.to_string()));
                }
                let k = consensus.iter().find(|k| k.criterion == name);
                row.push(k.and_then(|k| k.average).map(figure).unwrap_or_default());
                row.push(match k.and_then(|k| k.agreement.as_ref().map(|a| (a, k.disputed))) {
                    Some((a, true)) => format!("{}, disputed", a.to_lowercase()),
                    Some((a, false)) => a.to_lowercase(),
                    None => String::new(),
                });
                row
            })
            .collect();
        let mut overall = vec!["overall (weighted)".to_string(), String::new()];
        overall.extend(r.reviews.iter().map(|r| r.overall_score.map_or("unread".into(), figure)));
        overall.push(stats.and_then(|s| s.consensus_overall).map(figure).unwrap_or_default());
        overall.push(String::new());
        rows.push(overall);
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        let right: Vec<usize> = (1..head.len() - 1).collect();
        out.push_str("**The reviewers' scores** (1 to 5):\n\n");
        out.push_str(&table(&head, &rows, &right));
        out.push('\n');
    }
    let mut notes: Vec<String> = r
        .reviews
        .iter()
        .filter(|r| !r.parse_success)
        .map(|r| {
            format!("- {}: no score could be read from the review", who(r.reviewer_index, &r.model))
        })
        .collect();
    for f in &r.failed_reviewers {
        notes.push(format!("- {}: the call failed ({})", who(f.reviewer_index, &f.model), f.error));
    }
    if !notes.is_empty() {
        out.push_str(&format!("{}\n\n", notes.join("\n")));
    }
    if let Some(t) = stats.map(|s| &s.finding_totals) {
        let by = [t.critical, t.major, t.minor, t.suggestion];
        let parts: Vec<String> = SEVERITIES
            .iter()
            .zip(by)
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| match *s {
                "SUGGESTION" => count(n as u64, "suggestion", "suggestions"),
                other => format!("{n} {}", other.to_lowercase()),
            })
            .collect();
        let split =
            if parts.is_empty() { String::new() } else { format!(": {}", parts.join(", ")) };
        out.push_str(&format!(
            "**Findings:** {} in all the reviews{split}.\n\n",
            count(t.total as u64, "finding", "findings")
        ));
    }
    if let Some(c) = &r.consolidation {
        let by = match &c.fallback_from {
            Some(f) => format!(" (by {}, in place of {f})", c.model),
            None => format!(" (by {})", c.model),
        };
        if c.action_items.is_empty() {
            out.push_str(&format!(
                "**Action items{by}:** none could be read from the consolidated report.\n"
            ));
        } else {
            let rows: Vec<Vec<String>> = c
                .action_items
                .iter()
                .enumerate()
                .map(|(i, it)| {
                    let stated = |v: &Option<String>| {
                        v.as_deref().map_or("not stated".into(), str::to_lowercase)
                    };
                    vec![
                        (i + 1).to_string(),
                        stated(&it.severity),
                        action_text(it),
                        stated(&it.effort),
                    ]
                })
                .collect();
            out.push_str(&format!("**Action items{by}:**\n\n"));
            out.push_str(&table(&["#", "severity", "action", "effort"], &rows, &[0]));
        }
    }
    out
}
