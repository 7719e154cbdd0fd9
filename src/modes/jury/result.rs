//! What Jury stores and reads back: the majority verdict and the jurors' summary, the
//! foreman's report, the result from the stored rows and the export's report.

use super::*;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoteTally {
    pub approve: usize,
    pub revise: usize,
    pub reject: usize,
}

/// The majority verdict with the seed's conservative ties: APPROVE–REJECT → REVISE,
/// APPROVE–REVISE → REVISE, REVISE–REJECT → REJECT, three-way → REVISE. None without votes.
pub fn majority_verdict(verdicts: &[Option<Verdict>]) -> (Option<Verdict>, VoteTally) {
    let count = |v: Verdict| verdicts.iter().filter(|x| **x == Some(v)).count();
    let t = VoteTally {
        approve: count(Verdict::Approve),
        revise: count(Verdict::Revise),
        reject: count(Verdict::Reject),
    };
    let max = t.approve.max(t.revise).max(t.reject);
    if max == 0 {
        return (None, t);
    }
    let (a, v, r) = (t.approve == max, t.revise == max, t.reject == max);
    let verdict = match (a, v, r) {
        (true, false, false) => Verdict::Approve,
        (false, true, false) => Verdict::Revise,
        (false, false, true) => Verdict::Reject,
        (false, true, true) => Verdict::Reject,
        _ => Verdict::Revise,
    };
    (Some(verdict), t)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JurorSummary {
    /// Jurors asked (including ones whose call failed).
    pub juror_count: usize,
    pub successful_jurors: usize,
    /// None when no juror's verdict or scores could be read: the panel reached no verdict,
    /// and none is made up for it.
    pub majority_verdict: Option<Verdict>,
    /// `votes`, `scores` (no verdict parsed: inferred from the average) or `none`.
    pub verdict_source: String,
    pub vote_tally: VoteTally,
    pub dimension_averages: Dims<Option<f64>>,
    pub dimension_ranges: Dims<Option<Range>>,
    pub overall_average: Option<f64>,
    pub warnings: Vec<String>,
}

pub fn summarize(juror_count: usize, jurors: &[JurorAssessment]) -> JurorSummary {
    let scored: Vec<&JurorAssessment> = jurors.iter().filter(|j| j.parse_success).collect();
    let column =
        |i: usize| -> Vec<i64> { scored.iter().filter_map(|j| *j.scores.get(i)).collect() };
    let dimension_averages = Dims::from_fn(|i| mean(&column(i)));
    let dimension_ranges = Dims::from_fn(|i| {
        let c = column(i);
        Some(Range { min: *c.iter().min()?, max: *c.iter().max()? })
    });
    let avgs: Vec<f64> = (0..5).filter_map(|i| *dimension_averages.get(i)).collect();
    let overall_average = (!avgs.is_empty())
        .then(|| ((avgs.iter().sum::<f64>() / avgs.len() as f64) * 10.0).round() / 10.0);
    let (majority, vote_tally) =
        majority_verdict(&jurors.iter().map(|j| j.verdict).collect::<Vec<_>>());
    let mut warnings = Vec::new();
    if scored.is_empty() {
        warnings
            .push("No juror's scores could be parsed: dimension averages are null.".to_string());
    }
    let (majority_verdict, verdict_source) = match (majority, overall_average) {
        (Some(v), _) => (Some(v), "votes"),
        (None, Some(avg)) => {
            warnings.push("No verdict could be parsed: the majority verdict is inferred from the average score.".into());
            (Some(Verdict::from_average(avg)), "scores")
        }
        (None, None) => {
            warnings.push(
                "Neither verdicts nor scores could be read: the panel reached no verdict.".into(),
            );
            (None, "none")
        }
    };
    JurorSummary {
        juror_count,
        successful_jurors: jurors.len(),
        majority_verdict,
        verdict_source: verdict_source.into(),
        vote_tally,
        dimension_averages,
        dimension_ranges,
        overall_average,
        warnings,
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DimensionAnalysisRow {
    pub dimension: String,
    pub avg_score: f64,
    pub min_score: i64,
    pub max_score: i64,
    pub consensus: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForemanReport {
    pub model: String,
    pub report_text: String,
    pub final_verdict: Option<Verdict>,
    pub dimension_analysis: Vec<DimensionAnalysisRow>,
    pub key_strengths: Vec<String>,
    pub key_weaknesses: Vec<String>,
    pub recommendations: Vec<String>,
    pub dissenting_opinions: Vec<String>,
    pub response_time_ms: i64,
    /// The foreman this report's model stood in for, when the backup wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

fn consensus(spread: i64) -> &'static str {
    match spread {
        0..=2 => "Strong agreement",
        3..=4 => "Mixed",
        _ => "Disagreement",
    }
}

/// The dissent section: its items, or its sentences when it has no list.
pub(super) fn dissent(text: &str) -> Vec<String> {
    let items = section_items(text, "dissent");
    if !items.is_empty() {
        return items;
    }
    let split = split_reasoning(text);
    if split.unclosed {
        return Vec::new();
    }
    let lines: Vec<&str> = split.answer.lines().collect();
    let Some(start) = lines
        .iter()
        .rposition(|l| l.trim().starts_with('#') && l.to_lowercase().contains("dissent"))
    else {
        return Vec::new();
    };
    let body: Vec<&str> = lines[start + 1..]
        .iter()
        .take_while(|l| !l.trim().starts_with('#'))
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    if body.is_empty() {
        Vec::new()
    } else {
        vec![body.join(" ")]
    }
}

pub fn foreman_report(
    model: &str,
    text: &str,
    response_time_ms: i64,
    summary: &JurorSummary,
) -> ForemanReport {
    let dimension_analysis = (0..5)
        .filter_map(|i| {
            let avg = (*summary.dimension_averages.get(i))?;
            let r = (*summary.dimension_ranges.get(i))?;
            Some(DimensionAnalysisRow {
                dimension: DIMENSIONS[i].to_string(),
                avg_score: avg,
                min_score: r.min,
                max_score: r.max,
                consensus: consensus(r.max - r.min).to_string(),
            })
        })
        .collect();
    ForemanReport {
        model: model.to_string(),
        report_text: text.to_string(),
        final_verdict: summary.majority_verdict,
        dimension_analysis,
        key_strengths: section_items(text, "strength"),
        key_weaknesses: section_items(text, "weakness"),
        recommendations: section_items(text, "recommendation"),
        dissenting_opinions: dissent(text),
        response_time_ms,
        fallback_from: None,
    }
}

/// `JuryResult` from stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let presentation = of("present").next().map(|r| {
        let q =
            r.parsed_data.as_ref().and_then(|d| d.get("originalQuestion")).filter(|v| !v.is_null());
        match q {
            Some(q) => json!({ "content": r.content, "originalQuestion": q }),
            None => json!({ "content": r.content }),
        }
    });
    let jurors: Vec<JurorAssessment> = of("deliberation")
        .map(|r| {
            let pd = r.parsed_data.clone().unwrap_or(Value::Null);
            JurorAssessment {
                model: r.model.clone().unwrap_or_default(),
                assessment_text: r.content.clone(),
                scores: serde_json::from_value(pd["scores"].clone()).unwrap_or_default(),
                average: pd["average"].as_f64(),
                verdict: serde_json::from_value(pd["verdict"].clone()).ok(),
                recommendations: serde_json::from_value(pd["recommendations"].clone())
                    .unwrap_or_default(),
                response_time_ms: r.response_time_ms.unwrap_or(0),
                parse_success: pd["parseSuccess"].as_bool().unwrap_or(false),
                unparsed: serde_json::from_value(pd["unparsed"].clone()).unwrap_or(None),
                read_from: serde_json::from_value(pd["readFrom"].clone()).unwrap_or(None),
            }
        })
        .collect();
    let summary: Option<JurorSummary> = of("juror_summary")
        .next()
        .and_then(|r| r.parsed_data.clone())
        .and_then(|v| serde_json::from_value(v).ok());
    let foreman = of("verdict").next().map(|r| {
        let mut f = r.parsed_data.clone().unwrap_or(json!({}));
        f["reportText"] = json!(r.content);
        f
    });
    let mut result = json!({
        "presentation": presentation,
        "jurors": jurors,
        "jurorSummary": summary,
        "foreman": foreman,
        "majorityVerdict": summary.as_ref().map(|s| s.majority_verdict),
        "voteTally": summary.as_ref().map(|s| s.vote_tally),
        "dimensionAverages": summary.as_ref().map(|s| s.dimension_averages.clone()),
    });
    mark_from_rows(&mut result, rows);
    result
}

// ---- the export's report -------------------------------------------------------------------

/// A stored verdict (`APPROVE`) as a word (`approve`).
fn verdict_in_words(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_lowercase)
}

/// A one-decimal figure (`7.6`, `8.0`).
fn one_decimal(v: &Value) -> Option<String> {
    v.as_f64().filter(|x| x.is_finite()).map(|x| format!("{x:.1}"))
}

/// The result as the export's report: the panel's verdict and how it was reached, a table of
/// the jurors (their score per dimension, average and verdict, with the panel's averages and
/// ranges), the jurors whose assessment could not be read, and the foreman's report (strengths,
/// weaknesses, recommendations, dissent).
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let mut out = String::new();
    let summary = &result["jurorSummary"];
    let foreman = &result["foreman"];
    let verdict = verdict_in_words(&foreman["finalVerdict"])
        .or_else(|| verdict_in_words(&summary["majorityVerdict"]));
    if summary.is_object() {
        let t = &summary["voteTally"];
        let tally = format!(
            "{} approve, {} revise, {} reject",
            t["approve"].as_u64().unwrap_or(0),
            t["revise"].as_u64().unwrap_or(0),
            t["reject"].as_u64().unwrap_or(0)
        );
        match (verdict.as_deref(), summary["verdictSource"].as_str()) {
            (Some(v), Some("scores")) => out.push_str(&format!(
                "**Verdict:** {v}, inferred from the average score (no juror's verdict could be read).\n"
            )),
            (Some(v), _) => out.push_str(&format!("**Verdict:** {v} (the jurors' votes: {tally}).\n")),
            (None, _) => out.push_str(
                "**No verdict:** neither the jurors' verdicts nor their scores could be read.\n",
            ),
        }
        if let Some(avg) = one_decimal(&summary["overallAverage"]) {
            out.push_str(&format!("\n**Overall average:** {avg}/10\n"));
        }
        out.push('\n');
    }
    let jurors = result["jurors"].as_array().cloned().unwrap_or_default();
    if !jurors.is_empty() {
        let dims: Vec<String> = DIMENSIONS.iter().map(|d| d.to_lowercase()).collect();
        let mut head = vec!["juror"];
        head.extend(dims.iter().map(String::as_str));
        head.extend(["average", "verdict"]);
        let mut rows: Vec<Vec<String>> = jurors
            .iter()
            .map(|j| {
                let mut row = vec![j["model"].as_str().unwrap_or("").to_string()];
                for d in &dims {
                    let score = &j["scores"][d];
                    row.push(score.as_i64().map_or("unread".into(), |s| s.to_string()));
                }
                row.push(one_decimal(&j["average"]).unwrap_or_default());
                row.push(verdict_in_words(&j["verdict"]).unwrap_or("unread".into()));
                row
            })
            .collect();
        if summary.is_object() {
            let mut avg = vec!["panel average".to_string()];
            let mut range = vec!["range".to_string()];
            for key in &dims {
                avg.push(one_decimal(&summary["dimensionAverages"][key]).unwrap_or_default());
                let r = &summary["dimensionRanges"][key];
                range.push(match (r["min"].as_i64(), r["max"].as_i64()) {
                    (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
                    (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
                    _ => String::new(),
                });
            }
            avg.push(one_decimal(&summary["overallAverage"]).unwrap_or_default());
            avg.push(verdict.clone().unwrap_or_default());
            range.extend([String::new(), String::new()]);
            rows.push(avg);
            rows.push(range);
        }
        out.push_str(&table(&head, &rows, &[1, 2, 3, 4, 5, 6]));
        let unread: Vec<String> = jurors
            .iter()
            .filter(|j| j["parseSuccess"] != true || j["verdict"].is_null())
            .map(|j| {
                let model = j["model"].as_str().unwrap_or("a juror");
                let what = match (j["parseSuccess"] == true, j["verdict"].is_null()) {
                    (false, true) => "neither scores nor a verdict could be read",
                    (false, false) => "no scores could be read",
                    _ => "no verdict could be read",
                };
                let why = serde_json::from_value::<Unparsed>(j["unparsed"].clone())
                    .map_or(String::new(), |u| format!("; it {}", u.describe()));
                format!("- {model}: {what}{why}\n")
            })
            .collect();
        if !unread.is_empty() {
            out.push_str("\n**Could not be read in full:**\n\n");
            out.push_str(&unread.concat());
        }
        if let (Some(asked), Some(done)) =
            (summary["jurorCount"].as_u64(), summary["successfulJurors"].as_u64())
        {
            if done < asked {
                out.push_str(&format!(
                    "\n{} of {} answered.\n",
                    done,
                    count(asked, "juror", "jurors")
                ));
            }
        }
        out.push('\n');
    }
    if let Some(model) = foreman["model"].as_str().filter(|m| !m.is_empty()) {
        let standing_in = foreman["fallbackFrom"]
            .as_str()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        let said = match verdict_in_words(&foreman["finalVerdict"]) {
            Some(v) => format!(": final verdict {v}"),
            None => String::new(),
        };
        out.push_str(&format!("**Foreman's report** by {model}{standing_in}{said}.\n"));
        for (key, lead) in [
            ("keyStrengths", "Key strengths"),
            ("keyWeaknesses", "Key weaknesses"),
            ("recommendations", "Recommendations"),
            ("dissentingOpinions", "Dissenting opinions"),
        ] {
            let items: Vec<String> = foreman[key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
                        .filter(|t| !t.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            if !items.is_empty() {
                out.push_str(&format!("\n{lead}:\n\n"));
                for i in items {
                    out.push_str(&format!("- {i}\n"));
                }
            }
        }
    }
    out
}
