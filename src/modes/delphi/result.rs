//! What a Delphi run stores and reads back: `load_result`, its outcome and the export's report.

use super::*;

// ---- payloads (one definition for live events and stored results) --------------------------

/// `delphi_start`'s data: the question's type when the request set it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DelphiStart<'a> {
    pub conversation_id: &'a str,
    pub message_id: &'a str,
    pub question_type: Option<QuestionType>,
}

/// `round_start`'s data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundStart {
    pub round: u32,
}

/// `round_complete`'s data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundComplete<'a> {
    pub round: u32,
    pub data: RoundData<'a>,
}

/// What `round_complete` says: the anonymous estimates, the statistics, the convergence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundData<'a> {
    pub estimates: Vec<EstimateSummary>,
    pub stats: &'a Stats,
    pub converged: bool,
}

/// `convergence_reached`'s and `max_rounds_reached`'s data (the latter with its reason).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundsEnd<'a> {
    pub round: u32,
    pub stats: &'a Stats,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

/// The facilitator's report (`synthesis_complete`'s data, and the result's `report`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelphiReport {
    /// The model that wrote it.
    pub facilitator_model: String,
    /// The report's text.
    pub report: String,
    /// How many rounds were held.
    pub total_rounds: usize,
    /// Whether the last round converged.
    pub converged: bool,
    /// The first round that converged; null when none did.
    pub convergence_round: Option<u32>,
    /// The first round converged.
    pub immediate_consensus: bool,
    /// The last round's mean (numeric) or most common answer (qualitative).
    pub final_value: FinalValue,
    /// How long the facilitator's call took, in milliseconds.
    pub response_time_ms: i64,
    /// The facilitator this report's model stood in for, when the backup wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// The `synthesis` row's data (the report is the row's content).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisRow {
    pub total_rounds: usize,
    pub converged: bool,
    pub convergence_round: Option<u32>,
    pub final_value: FinalValue,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

impl DelphiReport {
    /// The report from its text, its model and time, and its row's data.
    pub(super) fn of(model: &str, text: &str, response_time_ms: i64, row: SynthesisRow) -> Self {
        DelphiReport {
            facilitator_model: model.to_string(),
            report: text.to_string(),
            total_rounds: row.total_rounds,
            converged: row.converged,
            convergence_round: row.convergence_round,
            immediate_consensus: row.convergence_round == Some(1),
            final_value: row.final_value,
            response_time_ms,
            fallback_from: row.fallback_from,
        }
    }
}

/// A panelist's estimate in the result: as stored, with the reply's whole text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResultEstimate {
    #[serde(flatten)]
    pub estimate: StoredEstimate,
    /// What the panelist wrote, kept whole beside what was read from it.
    pub text: String,
}

/// A round in the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoundResult {
    /// The round's number, from 1.
    pub round_number: u32,
    /// Each panelist's estimate, in panel order.
    pub estimates: Vec<ResultEstimate>,
    /// The round's statistics; null when too few estimates could be read for it to count.
    pub stats: Option<Stats>,
    /// Whether the round converged.
    pub converged: bool,
}

/// Delphi's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelphiResult {
    /// How the question was read; null when the run stopped before.
    pub classification: Option<Classification>,
    /// The rounds held.
    pub rounds: Vec<RoundResult>,
    /// Whether the last round converged.
    pub converged: bool,
    /// The first round that converged; null when none did.
    pub convergence_round: Option<u32>,
    /// The report's final value; null without a report.
    pub final_value: Option<FinalValue>,
    /// The facilitator's report; null when the run stopped before it.
    pub report: Option<DelphiReport>,
    /// Whether some call failed, and which (`partial`, `failedModels`).
    #[serde(flatten)]
    pub failures: Failures,
}

/// `DelphiResult` from stored rows; estimates carry model names (the run is over).
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: String| rows.iter().filter(move |r| r.stage_type == t);
    let classification = of("classify".into()).next().and_then(parsed::<Classification>);
    let mut rounds = Vec::new();
    for n in 1..=5u32 {
        let stats = of(format!("round_{n}_stats")).next();
        // A round that failed (too few valid estimates) has no statistics, but what its
        // panelists wrote is stored and shown.
        if stats.is_none() && of(format!("round_{n}")).next().is_none() {
            break;
        }
        let stats = stats.and_then(parsed::<StatsRow>);
        let estimates = of(format!("round_{n}"))
            .filter_map(|r| Some(ResultEstimate { estimate: parsed(r)?, text: r.content.clone() }))
            .collect();
        rounds.push(RoundResult {
            round_number: n,
            estimates,
            converged: stats.as_ref().is_some_and(|s| s.converged),
            stats: stats.map(|s| s.stats),
        });
    }
    let report = of("synthesis".into()).next().and_then(|r| {
        let model = r.model.as_deref().unwrap_or_default();
        Some(DelphiReport::of(model, &r.content, r.response_time_ms.unwrap_or(0), parsed(r)?))
    });
    to_json(&DelphiResult {
        classification,
        converged: rounds.last().is_some_and(|r| r.converged),
        convergence_round: rounds.iter().find(|r| r.converged).map(|r| r.round_number),
        final_value: report.as_ref().map(|r| r.final_value.clone()),
        rounds,
        report,
        failures: Failures::of(rows),
    })
}

/// The final value, and the round it converged in or that it did not.
pub(super) fn outcome(result: &Value) -> Option<String> {
    let r: DelphiResult = typed(result)?;
    let value = match r.final_value? {
        FinalValue::Number(n) => fmt_num(n),
        FinalValue::Answer(a) => a,
    };
    Some(match r.convergence_round {
        Some(round) => format!("{value} (converged in round {round})"),
        None => format!("{value} (no convergence)"),
    })
}

// ---- the export's report -------------------------------------------------------------------

/// A share as a percentage (`12.5%`, `100%`).
fn percent_words(v: f64) -> String {
    format!("{}%", fmt_num((v * 10.0).round() / 10.0))
}

/// An answer as the report shows it; None when it is blank.
fn answer_words(a: &str) -> Option<String> {
    (!a.trim().is_empty()).then(|| a.to_string())
}

/// What a panelist said, a number or an answer as the question asks; None when it was not
/// read.
fn said_words(said: &Said, qualitative: bool) -> Option<String> {
    match (said, qualitative) {
        (Said::Estimate(v), false) => v.map(fmt_num),
        (Said::Answer(a), true) => a.as_deref().and_then(answer_words),
        _ => None,
    }
}

/// What a panelist said the round before, as [`said_words`].
fn said_before_words(before: &SaidBefore, qualitative: bool) -> Option<String> {
    match (before, qualitative) {
        (SaidBefore::Estimate(v), false) => v.map(fmt_num),
        (SaidBefore::Answer(a), true) => a.as_deref().and_then(answer_words),
        _ => None,
    }
}

/// A numeric round's statistics: the mean, median, standard deviation, range and spread.
fn numeric_words(s: &NumericStats) -> String {
    let mut line = format!(
        "Mean {}, median {}, standard deviation {}, range {} to {}",
        fmt_num(s.mean),
        fmt_num(s.median),
        fmt_num(s.std_dev),
        fmt_num(s.min),
        fmt_num(s.max)
    );
    if s.cv.is_finite() {
        line.push_str(&format!(
            "; the spread (standard deviation over the mean) is {}",
            percent_words(s.cv * 100.0)
        ));
    } else {
        line.push_str("; the spread cannot be measured against a mean of 0");
    }
    if s.high_variance {
        line.push_str(", a high variance");
    }
    line
}

/// A round's statistics in a sentence; None for a qualitative round with no answer.
fn stats_words(stats: &Stats, converged: bool) -> Option<String> {
    let line = match stats {
        Stats::Numeric(s) => numeric_words(s),
        Stats::Qualitative(q) if q.distribution.is_empty() => return None,
        Stats::Qualitative(q) => {
            let agreement = percent_words(q.agreement_percentage);
            format!("Agreement {agreement} ({})", q.shares())
        }
    };
    let verdict = if converged { "converged" } else { "not converged" };
    Some(format!("{line}: {verdict}."))
}

/// An estimate's note: carried over (and why), unread (and why), or changed from what.
fn estimate_note(e: &StoredEstimate, round: u32, read: bool, qualitative: bool) -> String {
    let why = e.marks.unparsed;
    if e.carried_forward {
        match why {
            Some(u) => format!(
                "carried over from the previous round: this round's reply was unread (it {})",
                u.describe()
            ),
            None => "carried over from the previous round: no reply".to_string(),
        }
    } else if !read {
        why.map_or(String::new(), |u| format!("it {}", u.describe()))
    } else if round > 1 {
        match (e.changed, said_before_words(&e.before, qualitative)) {
            (true, Some(p)) => format!("changed from {p}"),
            (true, None) => "changed".to_string(),
            (false, _) => "unchanged".to_string(),
        }
    } else {
        String::new()
    }
}

/// The result as the export's report: the consensus (the final value, and the round it
/// converged in or that it did not), how the question was read, then each round's estimates
/// as a table (panelist, estimate or answer, confidence, what changed) with its statistics.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<DelphiResult>(result) else { return String::new() };
    let mut out = String::new();
    let qualitative =
        r.classification.as_ref().is_some_and(|c| c.kind == QuestionType::Qualitative)
            || r.rounds.iter().any(|r| matches!(r.stats, Some(Stats::Qualitative(_))));
    // The final value: the report's, else the last round's (the same rule: its mean or its
    // most common answer).
    let final_value = match &r.final_value {
        Some(FinalValue::Number(n)) => Some(fmt_num(*n)),
        Some(FinalValue::Answer(a)) => answer_words(a),
        None => None,
    }
    .or_else(|| match (r.rounds.last()?.stats.as_ref()?, qualitative) {
        (Stats::Qualitative(q), true) => answer_words(&q.mode),
        (Stats::Numeric(s), false) => Some(fmt_num(s.mean)),
        _ => None,
    });
    let how =
        if qualitative { "the answer most panelists gave" } else { "the mean of the estimates" };
    if let Some(v) = final_value {
        match r.convergence_round {
            Some(n) => out.push_str(&format!(
                "**Consensus:** {v}, converged in round {n} ({how} in that round).\n"
            )),
            None => out.push_str(&format!(
                "**Final value:** {v}, without convergence after {} ({how} in the last round).\n",
                count(r.rounds.len() as u64, "round", "rounds")
            )),
        }
    }
    if let Some(c) = &r.classification {
        let kind = match c.kind {
            QuestionType::Numeric => "numeric",
            QuestionType::Qualitative => "qualitative",
        };
        let options = c.options.as_deref().unwrap_or_default();
        let mut line = if options.is_empty() {
            format!("**Question** read as {kind}.")
        } else {
            format!("**Question** read as {kind}, with the options {}.", options.join(", "))
        };
        if c.unparsed.is_some() {
            line.push_str(
                " (The facilitator's classification could not be read; this is the fallback.)",
            );
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&line);
        out.push('\n');
    }
    if !out.is_empty() {
        out.push('\n');
    }
    let value_key = if qualitative { "answer" } else { "estimate" };
    for round in &r.rounds {
        let n = round.round_number;
        out.push_str(&format!("**Round {n}**\n\n"));
        if !round.estimates.is_empty() {
            let rows: Vec<Vec<String>> = round
                .estimates
                .iter()
                .map(|e| {
                    let e = &e.estimate;
                    let value = said_words(&e.said, qualitative);
                    let note = estimate_note(e, n, value.is_some(), qualitative);
                    let confidence = if e.marks.confidence_defaulted {
                        "not stated".to_string()
                    } else {
                        e.confidence.as_str().to_lowercase()
                    };
                    vec![
                        e.model.clone(),
                        value.unwrap_or_else(|| "unread".to_string()),
                        confidence,
                        note,
                    ]
                })
                .collect();
            let right: &[usize] = if qualitative { &[] } else { &[1] };
            out.push_str(&table(&["panelist", value_key, "confidence", "note"], &rows, right));
            out.push('\n');
        }
        match round.stats.as_ref().and_then(|s| stats_words(s, round.converged)) {
            Some(line) => out.push_str(&format!("{line}\n\n")),
            None => out.push_str("Too few estimates could be read for the round to count.\n\n"),
        }
    }
    if let Some(report) = &r.report {
        let standing_in = report
            .fallback_from
            .as_ref()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        out.push_str(&format!(
            "**Report** written by the facilitator, {}{standing_in}.\n",
            report.facilitator_model
        ));
    }
    out
}
