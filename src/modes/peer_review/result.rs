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
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
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
    let c = result.get("consolidation").filter(|c| !c.is_null())?;
    let s = &result["statistics"];
    let score = match &s["consensusOverall"] {
        Value::Null => "no consensus score".to_string(),
        v => format!("consensus {v}/5"),
    };
    Some(format!(
        "{} reviews, {score}, {} action items: {}",
        result["reviews"].as_array().map_or(0, Vec::len),
        c["actionItems"].as_array().map_or(0, Vec::len),
        short(c["consolidatedReport"].as_str().unwrap_or(""), 60)
    ))
}

// ---- the export's report -------------------------------------------------------------------

/// A score or an average as a reader reads it: `4`, `3.5`.
fn figure(v: &Value) -> Option<String> {
    let f = v.as_f64()?;
    Some(if f.fract() == 0.0 { format!("{f:.0}") } else { format!("{f}") })
}

/// An action item's text without the severity tag it opens with and the effort it closes
/// with (both have their own columns).
fn action_text(item: &Value) -> String {
    let text = item["text"].as_str().unwrap_or("");
    let text = if item["severity"].is_string() {
        regex!(r"^(?:\*\*|__)?\[[^\]\n]{1,40}\](?:\*\*|__)?\s*").replace(text, "").into_owned()
    } else {
        text.to_string()
    };
    if item["effort"].is_string() {
        let effort = regex!(
            r"(?i)\s*(?:[—–-]\s*)?\(?\s*effort\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?\s*(?:low|medium|high)\b\s*\)?\s*$"
        );
        effort.replace(&text, "").trim().to_string()
    } else {
        text.trim().to_string()
    }
}

/// The result as the export's report: the consensus, the reviewers' scores per criterion as a
/// table (with each criterion's average and agreement, and each reviewer's weighted overall),
/// the reviewers whose scores could not be read or who failed, the findings by severity, and
/// the consolidator's action items as a table.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let mut out = String::new();
    let stats = &result["statistics"];
    if let Some(c) = figure(&stats["consensusOverall"]) {
        let rubric = result["rubric"]["name"].as_str().map_or(String::new(), |n| format!(" {n}"));
        let mut line = format!("**Consensus:** {c} of 5 overall, weighted by the{rubric} rubric");
        if let Some(sd) = stats["meanStdDev"].as_f64() {
            line.push_str(&format!(
                "; {} agreement between the reviewers (mean standard deviation {sd:.2})",
                agreement(sd).to_lowercase()
            ));
        }
        out.push_str(&format!("{line}.\n\n"));
    }
    let reviews = result["reviews"].as_array().cloned().unwrap_or_default();
    let consensus = stats["consensusScores"].as_array().cloned().unwrap_or_default();
    // The criteria: the rubric's, else those the reviews scored.
    let mut criteria: Vec<(String, Value)> = result["rubric"]["criteria"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| Some((c["name"].as_str()?.to_string(), c["weight"].clone())))
                .collect()
        })
        .unwrap_or_default();
    if criteria.is_empty() {
        if let Some(first) = reviews.first() {
            criteria = first["scores"]
                .as_array()
                .map(|s| {
                    s.iter()
                        .filter_map(|s| {
                            Some((s["criterion"].as_str()?.to_string(), s["weight"].clone()))
                        })
                        .collect()
                })
                .unwrap_or_default();
        }
    }
    let who = |r: &Value| {
        let n = r["reviewerIndex"].as_u64().map_or(String::new(), |n| format!(" {n}"));
        match r["model"].as_str() {
            Some(m) => format!("reviewer{n} ({m})"),
            None => format!("reviewer{n}"),
        }
    };
    if !reviews.is_empty() && !criteria.is_empty() {
        let mut head: Vec<String> = vec!["criterion".into(), "weight".into()];
        head.extend(reviews.iter().map(who));
        head.extend(["average".to_string(), "agreement".to_string()]);
        let mut rows: Vec<Vec<String>> = criteria
            .iter()
            .map(|(name, weight)| {
                let mut row = vec![name.clone(), figure(weight).unwrap_or_default()];
                for r in &reviews {
                    let s = r["scores"]
                        .as_array()
                        .and_then(|s| s.iter().find(|s| s["criterion"] == name.as_str()));
                    row.push(
                        s.and_then(|s| figure(&s["score"])).unwrap_or_else(|| "unread".into()),
                    );
                }
                let k = consensus.iter().find(|k| k["criterion"] == name.as_str());
                row.push(k.and_then(|k| figure(&k["average"])).unwrap_or_default());
                let agreement = match k.and_then(|k| k["agreement"].as_str()) {
                    Some(a) if k.is_some_and(|k| k["disputed"] == true) => {
                        format!("{}, disputed", a.to_lowercase())
                    }
                    Some(a) => a.to_lowercase(),
                    None => String::new(),
                };
                row.push(agreement);
                row
            })
            .collect();
        let mut overall = vec!["overall (weighted)".to_string(), String::new()];
        overall.extend(
            reviews.iter().map(|r| figure(&r["overallScore"]).unwrap_or_else(|| "unread".into())),
        );
        overall.push(figure(&stats["consensusOverall"]).unwrap_or_default());
        overall.push(String::new());
        rows.push(overall);
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        let right: Vec<usize> = (1..head.len() - 1).collect();
        out.push_str("**The reviewers' scores** (1 to 5):\n\n");
        out.push_str(&table(&head, &rows, &right));
        out.push('\n');
    }
    let mut notes: Vec<String> = reviews
        .iter()
        .filter(|r| r["parseSuccess"] == false)
        .map(|r| format!("- {}: no score could be read from the review", who(r)))
        .collect();
    for f in result["failedReviewers"].as_array().cloned().unwrap_or_default() {
        let why = f["error"].as_str().map_or(String::new(), |e| format!(" ({e})"));
        notes.push(format!("- {}: the call failed{why}", who(&f)));
    }
    if !notes.is_empty() {
        out.push_str(&format!("{}\n\n", notes.join("\n")));
    }
    let totals = &stats["findingTotals"];
    if let Some(n) = totals["total"].as_u64() {
        let parts: Vec<String> = SEVERITIES
            .iter()
            .filter_map(|s| {
                let n = totals[*s].as_u64().filter(|n| *n > 0)?;
                Some(match *s {
                    "SUGGESTION" => count(n, "suggestion", "suggestions"),
                    other => format!("{n} {}", other.to_lowercase()),
                })
            })
            .collect();
        let split =
            if parts.is_empty() { String::new() } else { format!(": {}", parts.join(", ")) };
        out.push_str(&format!(
            "**Findings:** {} in all the reviews{split}.\n\n",
            count(n, "finding", "findings")
        ));
    }
    let c = &result["consolidation"];
    if c.is_object() {
        let items = c["actionItems"].as_array().cloned().unwrap_or_default();
        let by = match (c["model"].as_str(), c["fallbackFrom"].as_str()) {
            (Some(m), Some(f)) => format!(" (by {m}, in place of {f})"),
            (Some(m), None) => format!(" (by {m})"),
            _ => String::new(),
        };
        if items.is_empty() {
            out.push_str(&format!(
                "**Action items{by}:** none could be read from the consolidated report.\n"
            ));
        } else {
            let rows: Vec<Vec<String>> = items
                .iter()
                .enumerate()
                .map(|(i, it)| {
                    vec![
                        (i + 1).to_string(),
                        it["severity"].as_str().map_or("not stated".into(), str::to_lowercase),
                        action_text(it),
                        it["effort"].as_str().map_or("not stated".into(), str::to_lowercase),
                    ]
                })
                .collect();
            out.push_str(&format!("**Action items{by}:**\n\n"));
            out.push_str(&table(&["#", "severity", "action", "effort"], &rows, &[0]));
        }
    }
    out
}
