//! What Jury stores and reads back: the majority verdict and the jurors' summary, the
//! foreman's report, the result from the stored rows and the export's report.

use super::*;

/// The jurors' verdicts, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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

/// What the jurors said together (`all_jurors_complete`'s data and the `juror_summary` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JurorSummary {
    /// Jurors asked (including ones whose call failed).
    pub juror_count: usize,
    /// Jurors that answered.
    pub successful_jurors: usize,
    /// None when no juror's verdict or scores could be read: the panel reached no verdict,
    /// and none is made up for it.
    pub majority_verdict: Option<Verdict>,
    /// `votes`, `scores` (no verdict parsed: inferred from the average) or `none`.
    pub verdict_source: String,
    /// The verdicts, counted.
    pub vote_tally: VoteTally,
    /// Each dimension's average score (one decimal), over the jurors whose scores were read.
    pub dimension_averages: Dims<Option<f64>>,
    /// Each dimension's lowest and highest score.
    pub dimension_ranges: Dims<Option<Range>>,
    /// The average of the dimension averages (one decimal).
    pub overall_average: Option<f64>,
    /// What could not be read, in words.
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

/// A dimension as the foreman's report weighs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DimensionAnalysisRow {
    /// The dimension's name.
    pub dimension: String,
    /// The jurors' average score.
    pub avg_score: f64,
    /// The lowest score given.
    pub min_score: i64,
    /// The highest score given.
    pub max_score: i64,
    /// How far the jurors agreed (`Strong agreement`, `Mixed`, `Disagreement`).
    pub consensus: String,
}

/// The foreman's report (`verdict_complete`'s data, and the result's `foreman`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForemanReport {
    /// The model that wrote it.
    pub model: String,
    /// The report's text.
    #[serde(default)]
    pub report_text: String,
    /// The panel's verdict (the jurors' majority); null when none was reached.
    pub final_verdict: Option<Verdict>,
    /// Each scored dimension: average, range and agreement.
    pub dimension_analysis: Vec<DimensionAnalysisRow>,
    /// The report's strengths section, an item a line.
    pub key_strengths: Vec<String>,
    /// Its weaknesses section.
    pub key_weaknesses: Vec<String>,
    /// Its recommendations section.
    pub recommendations: Vec<String>,
    /// Its dissenting opinions.
    pub dissenting_opinions: Vec<String>,
    /// How long the foreman's call took, in milliseconds.
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

/// The dissent section: its items, or its sentences when it has no list. A line in square
/// brackets is the prompt's template echoed back (`[If any juror's verdict differed…]`), not a
/// dissent, as in [`section_items`].
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
        .filter(|l| !l.is_empty() && !l.starts_with('['))
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

// ---- payloads (one definition for live events and stored results) --------------------------

/// The report as the rows have always kept it (the row's content, `reportText`, taken out of
/// it: its place went to the last key, `fallbackFrom` else `responseTimeMs`); the result's
/// report then has its text last.
fn foreman_as_stored<S: serde::Serializer>(
    f: &Option<ForemanReport>,
    s: S,
) -> Result<S::Ok, S::Error> {
    taken_last(f.as_ref(), "reportText").serialize(s)
}

/// A juror's `deliberation` row data: the assessment without the model, text and time the row
/// holds itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JurorRow {
    pub scores: DimensionScores,
    pub average: Option<f64>,
    pub verdict: Option<Verdict>,
    pub recommendations: Vec<String>,
    pub parse_success: bool,
    pub unparsed: Option<Unparsed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

impl JurorRow {
    pub(super) fn of(a: &JurorAssessment) -> Self {
        JurorRow {
            scores: a.scores.clone(),
            average: a.average,
            verdict: a.verdict,
            recommendations: a.recommendations.clone(),
            parse_success: a.parse_success,
            unparsed: a.unparsed,
            read_from: a.read_from,
        }
    }
}

/// The content under review (`present_complete`'s data, and the result's `presentation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Presentation {
    /// The content the jurors assessed.
    pub content: String,
    /// The question it answers, when the request gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_question: Option<String>,
}

/// The `present` row's data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PresentRow {
    #[serde(default)]
    pub original_question: Option<String>,
}

/// Jury's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JuryResult {
    /// The content under review; null when the run stored none.
    pub presentation: Option<Presentation>,
    /// Each juror's assessment, in the order they came in.
    pub jurors: Vec<JurorAssessment>,
    /// What the jurors said together; null when the run stopped before.
    pub juror_summary: Option<JurorSummary>,
    /// The foreman's report; null when the run stopped before it.
    #[serde(serialize_with = "foreman_as_stored")]
    pub foreman: Option<ForemanReport>,
    /// The jurors' majority verdict (as in `jurorSummary`); null when none was reached.
    pub majority_verdict: Option<Verdict>,
    /// The verdicts, counted (as in `jurorSummary`).
    pub vote_tally: Option<VoteTally>,
    /// Each dimension's average score (as in `jurorSummary`).
    pub dimension_averages: Option<Dims<Option<f64>>>,
    /// Whether some call failed, and which (`partial`, `failedModels`).
    #[serde(flatten)]
    pub failures: Failures,
}

/// `JuryResult` from stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let presentation = of("present").next().map(|r| Presentation {
        content: r.content.clone(),
        original_question: parsed::<PresentRow>(r).unwrap_or_default().original_question,
    });
    let jurors: Vec<JurorAssessment> = of("deliberation")
        .map(|r| {
            let pd: JurorRow = parsed(r).unwrap_or_default();
            JurorAssessment {
                model: r.model.clone().unwrap_or_default(),
                assessment_text: r.content.clone(),
                scores: pd.scores,
                average: pd.average,
                verdict: pd.verdict,
                recommendations: pd.recommendations,
                response_time_ms: r.response_time_ms.unwrap_or(0),
                parse_success: pd.parse_success,
                unparsed: pd.unparsed,
                read_from: pd.read_from,
            }
        })
        .collect();
    let summary: Option<JurorSummary> = of("juror_summary").next().and_then(parsed);
    let foreman = of("verdict").next().and_then(|r| {
        let f: ForemanReport = parsed(r)?;
        Some(ForemanReport { report_text: r.content.clone(), ..f })
    });
    to_json(&JuryResult {
        presentation,
        jurors,
        majority_verdict: summary.as_ref().and_then(|s| s.majority_verdict),
        vote_tally: summary.as_ref().map(|s| s.vote_tally),
        dimension_averages: summary.as_ref().map(|s| s.dimension_averages.clone()),
        juror_summary: summary,
        foreman,
        failures: Failures::of(rows),
    })
}

// ---- the export's report -------------------------------------------------------------------

/// A verdict (`APPROVE`) as a word (`approve`).
fn verdict_in_words(v: Option<Verdict>) -> Option<String> {
    v.map(|v| v.as_str().to_lowercase())
}

/// A one-decimal figure (`7.6`, `8.0`).
fn one_decimal(v: Option<f64>) -> Option<String> {
    v.filter(|x| x.is_finite()).map(|x| format!("{x:.1}"))
}

/// The one line a list shows: the verdict, with the average score when there is one.
pub(super) fn outcome(result: &Value) -> Option<String> {
    let r: JuryResult = typed(result)?;
    let s = r.juror_summary?;
    let verdict = r.foreman.and_then(|f| f.final_verdict).or(s.majority_verdict);
    let verdict = verdict.map_or("no verdict", Verdict::as_str);
    Some(match s.overall_average {
        Some(avg) => format!("{verdict} · average {avg:.1}/10"),
        None => verdict.to_string(),
    })
}

/// The result as the export's report: the panel's verdict and how it was reached, a table of
/// the jurors (their score per dimension, average and verdict, with the panel's averages and
/// ranges), the jurors whose assessment could not be read, and the foreman's report (strengths,
/// weaknesses, recommendations, dissent).
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<JuryResult>(result) else { return String::new() };
    let mut out = String::new();
    let summary = r.juror_summary.as_ref();
    let foreman = r.foreman.as_ref();
    let verdict = verdict_in_words(foreman.and_then(|f| f.final_verdict))
        .or_else(|| verdict_in_words(summary.and_then(|s| s.majority_verdict)));
    if let Some(s) = summary {
        let t = &s.vote_tally;
        let tally = format!("{} approve, {} revise, {} reject", t.approve, t.revise, t.reject);
        match (verdict.as_deref(), s.verdict_source.as_str()) {
            (Some(v), "scores") => out.push_str(&format!(
                "**Verdict:** {v}, inferred from the average score (no juror's verdict could be read).\n"
            )),
            (Some(v), _) => out.push_str(&format!("**Verdict:** {v} (the jurors' votes: {tally}).\n")),
            (None, _) => out.push_str(
                "**No verdict:** neither the jurors' verdicts nor their scores could be read.\n",
            ),
        }
        if let Some(avg) = one_decimal(s.overall_average) {
            out.push_str(&format!("\n**Overall average:** {avg}/10\n"));
        }
        out.push('\n');
    }
    if !r.jurors.is_empty() {
        let dims: Vec<String> = DIMENSIONS.iter().map(|d| d.to_lowercase()).collect();
        let mut head = vec!["juror"];
        head.extend(dims.iter().map(String::as_str));
        head.extend(["average", "verdict"]);
        let mut rows: Vec<Vec<String>> = r
            .jurors
            .iter()
            .map(|j| {
                let mut row = vec![j.model.clone()];
                for i in 0..DIMENSIONS.len() {
                    row.push(j.scores.get(i).map_or("unread".into(), |s| s.to_string()));
                }
                row.push(one_decimal(j.average).unwrap_or_default());
                row.push(verdict_in_words(j.verdict).unwrap_or("unread".into()));
                row
            })
            .collect();
        if let Some(s) = summary {
            let mut avg = vec!["panel average".to_string()];
            let mut range = vec!["range".to_string()];
            for i in 0..DIMENSIONS.len() {
                avg.push(one_decimal(*s.dimension_averages.get(i)).unwrap_or_default());
                range.push(match s.dimension_ranges.get(i) {
                    Some(Range { min, max }) if min == max => min.to_string(),
                    Some(Range { min, max }) => format!("{min}–{max}"),
                    None => String::new(),
                });
            }
            avg.push(one_decimal(s.overall_average).unwrap_or_default());
            avg.push(verdict.clone().unwrap_or_default());
            range.extend([String::new(), String::new()]);
            rows.push(avg);
            rows.push(range);
        }
        out.push_str(&table(&head, &rows, &[1, 2, 3, 4, 5, 6]));
        let unread: Vec<String> = r
            .jurors
            .iter()
            .filter(|j| !j.parse_success || j.verdict.is_none())
            .map(|j| {
                let what = match (j.parse_success, j.verdict.is_none()) {
                    (false, true) => "neither scores nor a verdict could be read",
                    (false, false) => "no scores could be read",
                    _ => "no verdict could be read",
                };
                let why = j.unparsed.map_or(String::new(), |u| format!("; it {}", u.describe()));
                format!("- {}: {what}{why}\n", j.model)
            })
            .collect();
        if !unread.is_empty() {
            out.push_str("\n**Could not be read in full:**\n\n");
            out.push_str(&unread.concat());
        }
        if let Some(s) = summary.filter(|s| s.successful_jurors < s.juror_count) {
            out.push_str(&format!(
                "\n{} of {} answered.\n",
                s.successful_jurors,
                count(s.juror_count as u64, "juror", "jurors")
            ));
        }
        out.push('\n');
    }
    if let Some(f) = foreman.filter(|f| !f.model.is_empty()) {
        let standing_in = f
            .fallback_from
            .as_ref()
            .map_or(String::new(), |b| format!(", the backup standing in for {b}"));
        let said = match verdict_in_words(f.final_verdict) {
            Some(v) => format!(": final verdict {v}"),
            None => String::new(),
        };
        out.push_str(&format!("**Foreman's report** by {}{standing_in}{said}.\n", f.model));
        for (items, lead) in [
            (&f.key_strengths, "Key strengths"),
            (&f.key_weaknesses, "Key weaknesses"),
            (&f.recommendations, "Recommendations"),
            (&f.dissenting_opinions, "Dissenting opinions"),
        ] {
            let items: Vec<String> = items
                .iter()
                .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|t| !t.is_empty())
                .collect();
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
