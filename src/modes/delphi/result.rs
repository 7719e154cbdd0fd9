//! What a Delphi run stores and reads back: `load_result` and the export's report.

use super::*;

use serde_json::{json, Value};

use crate::modes::common::mark_from_rows;
use crate::modes::reading::Unparsed;
use crate::modes::StageRow;

/// `DelphiResult` from stored rows; estimates carry model names (the run is over).
pub fn load_result(rows: &[StageRow]) -> Value {
    let classification: Option<Classification> = rows
        .iter()
        .find(|r| r.stage_type == "classify")
        .and_then(|r| r.parsed_data.clone())
        .and_then(|v| serde_json::from_value(v).ok());
    let mut rounds = Vec::new();
    for n in 1..=5u32 {
        let stats = rows.iter().find(|r| r.stage_type == format!("round_{n}_stats"));
        // A round that failed (too few valid estimates) has no statistics, but what its
        // panelists wrote is stored and shown.
        if stats.is_none() && !rows.iter().any(|r| r.stage_type == format!("round_{n}")) {
            break;
        }
        let pd = stats.and_then(|s| s.parsed_data.clone()).unwrap_or(Value::Null);
        let converged = pd["converged"].as_bool().unwrap_or(false);
        let mut st = pd.clone();
        if let Some(o) = st.as_object_mut() {
            for k in ["round", "type", "converged"] {
                o.remove(k);
            }
        }
        let estimates: Vec<Value> = rows
            .iter()
            .filter(|r| r.stage_type == format!("round_{n}"))
            .filter_map(|r| {
                let mut e = r.parsed_data.clone()?;
                if let Some(o) = e.as_object_mut() {
                    o.remove("round");
                    o.remove("type");
                    // What the panelist wrote, kept whole beside what was read from it.
                    o.insert("text".into(), json!(r.content));
                }
                Some(e)
            })
            .collect();
        rounds.push(json!({ "roundNumber": n, "estimates": estimates, "stats": st, "converged": converged }));
    }
    let synthesis = rows.iter().find(|r| r.stage_type == "synthesis");
    let report = synthesis.map(|r| {
        let pd = r.parsed_data.clone().unwrap_or(Value::Null);
        let mut report = json!({
            "facilitatorModel": r.model, "report": r.content, "totalRounds": pd["totalRounds"],
            "converged": pd["converged"], "convergenceRound": pd["convergenceRound"],
            "immediateConsensus": pd["convergenceRound"] == json!(1),
            "finalValue": pd["finalValue"], "responseTimeMs": r.response_time_ms,
        });
        if let Some(from) = pd.get("fallbackFrom") {
            report["fallbackFrom"] = from.clone();
        }
        report
    });
    let convergence_round =
        rounds.iter().find(|r| r["converged"] == true).map(|r| r["roundNumber"].clone());
    let mut result = json!({
        "classification": classification,
        "rounds": rounds,
        "converged": rounds.last().is_some_and(|r| r["converged"] == true),
        "convergenceRound": convergence_round,
        "finalValue": report.as_ref().map(|r| r["finalValue"].clone()),
        "report": report,
    });
    mark_from_rows(&mut result, rows);
    result
}

// ---- the export's report -------------------------------------------------------------------

/// A share as a percentage (`12.5%`, `100%`).
fn percent_words(v: f64) -> String {
    format!("{}%", fmt_num((v * 10.0).round() / 10.0))
}

/// A stored estimate or answer as the reader read it; None when it was not read.
fn value_words(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n.as_f64().map(fmt_num),
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// A round's statistics in a sentence.
fn stats_words(stats: &Value, converged: bool) -> Option<String> {
    let verdict = if converged { "converged" } else { "not converged" };
    if let Some(dist) = stats["distribution"].as_array().filter(|d| !d.is_empty()) {
        let shares: Vec<String> = dist
            .iter()
            .filter_map(|d| {
                Some(format!(
                    "{} {}",
                    d["answer"].as_str()?,
                    percent_words(d["percentage"].as_f64()?)
                ))
            })
            .collect();
        let agreement = stats["agreementPercentage"].as_f64().map(percent_words)?;
        return Some(format!("Agreement {agreement} ({}): {verdict}.", shares.join(", ")));
    }
    let n = |k: &str| stats[k].as_f64().map(fmt_num);
    let (mean, median, sd) = (n("mean")?, n("median")?, n("stdDev")?);
    let mut line = format!("Mean {mean}, median {median}, standard deviation {sd}");
    if let (Some(lo), Some(hi)) = (n("min"), n("max")) {
        line.push_str(&format!(", range {lo} to {hi}"));
    }
    match stats["cv"].as_f64() {
        Some(cv) => line.push_str(&format!(
            "; the spread (standard deviation over the mean) is {}",
            percent_words(cv * 100.0)
        )),
        None => line.push_str("; the spread cannot be measured against a mean of 0"),
    }
    if stats["highVariance"] == true {
        line.push_str(", a high variance");
    }
    Some(format!("{line}: {verdict}."))
}

/// The result as the export's report: the consensus (the final value, and the round it
/// converged in or that it did not), how the question was read, then each round's estimates
/// as a table (panelist, estimate or answer, confidence, what changed) with its statistics.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let mut out = String::new();
    let rounds = result["rounds"].as_array().cloned().unwrap_or_default();
    let qualitative = result["classification"]["type"] == "qualitative"
        || rounds.iter().any(|r| r["stats"]["distribution"].is_array());
    // The final value: the report's, else the last round's (the same rule: its mean or its
    // most common answer).
    let last_stats = rounds.last().map(|r| &r["stats"]);
    let final_value = value_words(&result["finalValue"]).or_else(|| {
        let s = last_stats?;
        if qualitative {
            value_words(&s["mode"])
        } else {
            value_words(&s["mean"])
        }
    });
    let how =
        if qualitative { "the answer most panelists gave" } else { "the mean of the estimates" };
    if let Some(v) = final_value {
        match result["convergenceRound"].as_u64() {
            Some(n) => out.push_str(&format!(
                "**Consensus:** {v}, converged in round {n} ({how} in that round).\n"
            )),
            None => out.push_str(&format!(
                "**Final value:** {v}, without convergence after {} ({how} in the last round).\n",
                count(rounds.len() as u64, "round", "rounds")
            )),
        }
    }
    let c = &result["classification"];
    if let Some(kind) = c["type"].as_str() {
        let options: Vec<&str> = c["options"]
            .as_array()
            .map(|o| o.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut line = if options.is_empty() {
            format!("**Question** read as {kind}.")
        } else {
            format!("**Question** read as {kind}, with the options {}.", options.join(", "))
        };
        if c["unparsed"].is_string() {
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
    let previous_key = if qualitative { "previousAnswer" } else { "previousEstimate" };
    for r in &rounds {
        let estimates = r["estimates"].as_array().cloned().unwrap_or_default();
        let Some(n) = r["roundNumber"].as_u64() else { continue };
        out.push_str(&format!("**Round {n}**\n\n"));
        if !estimates.is_empty() {
            let rows: Vec<Vec<String>> = estimates
                .iter()
                .map(|e| {
                    let why = serde_json::from_value::<Unparsed>(e["unparsed"].clone()).ok();
                    let value = value_words(&e[value_key]);
                    let confidence = if e["confidenceDefaulted"] == true {
                        "not stated".to_string()
                    } else {
                        e["confidence"].as_str().map(str::to_lowercase).unwrap_or_default()
                    };
                    let note = if e["carriedForward"] == true {
                        match why {
                            Some(u) => format!(
                                "carried over from the previous round: this round's reply was unread (it {})",
                                u.describe()
                            ),
                            None => "carried over from the previous round: no reply".to_string(),
                        }
                    } else if value.is_none() {
                        why.map_or(String::new(), |u| format!("it {}", u.describe()))
                    } else if n > 1 {
                        match (e["changed"] == true, value_words(&e[previous_key])) {
                            (true, Some(p)) => format!("changed from {p}"),
                            (true, None) => "changed".to_string(),
                            (false, _) => "unchanged".to_string(),
                        }
                    } else {
                        String::new()
                    };
                    vec![
                        e["model"].as_str().unwrap_or("").to_string(),
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
        let converged = r["converged"] == true;
        match stats_words(&r["stats"], converged) {
            Some(line) => out.push_str(&format!("{line}\n\n")),
            None => out.push_str("Too few estimates could be read for the round to count.\n\n"),
        }
    }
    if let Some(model) = result["report"]["facilitatorModel"].as_str() {
        let standing_in = result["report"]["fallbackFrom"]
            .as_str()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        out.push_str(&format!("**Report** written by the facilitator, {model}{standing_in}.\n"));
    }
    out
}
