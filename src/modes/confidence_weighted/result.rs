//! What a Confidence-Weighted run stores and reads back: the result from the stored rows and
//! the export's report.

use super::*;

/// `{answers, weights, synthesis, partial, failedModels}` from the stored rows: the answers in
/// request order, the weights and synthesis as their events carried them (null when the run
/// stopped before them).
pub fn load_result(rows: &[StageRow]) -> Value {
    let schema = answer_schema();
    let mut answers: Vec<AnswerData> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("answer_"))
        .filter_map(|r| {
            let mut v = r.parsed_data.clone()?;
            // The answer is read again from the stored reply, as it was read live.
            v["response"] = json!(read_answer_reply(0, "", &r.content, 0, &schema).response);
            serde_json::from_value(v).ok()
        })
        .collect();
    answers.sort_by_key(|a| a.index);
    let weights = rows
        .iter()
        .find(|r| r.stage_type == "weights")
        .and_then(|r| r.parsed_data.clone())
        .unwrap_or(Value::Null);
    let synthesis = rows.iter().find(|r| r.stage_type == "synthesis").map(|r| {
        let p = r.parsed_data.clone().unwrap_or(Value::Null);
        let mut v = json!({ "model": r.model, "synthesis": r.content,
                            "calibrationNotes": p.get("calibrationNotes").cloned().unwrap_or(json!("")),
                            "highestWeight": p.get("highestWeight").cloned().unwrap_or(Value::Null),
                            "lowestWeight": p.get("lowestWeight").cloned().unwrap_or(Value::Null),
                            "singleAnswer": p.get("singleAnswer").cloned().unwrap_or(json!(false)),
                            "responseTimeMs": r.response_time_ms });
        if let Some(f) = p.get("fallbackFrom") {
            v["fallbackFrom"] = f.clone();
        }
        v
    });
    let mut result = json!({ "answers": answers, "weights": weights, "synthesis": synthesis });
    mark_from_rows(&mut result, rows);
    result
}

// ---- the export's report -------------------------------------------------------------------

/// A percentage with at most `places` decimals (`90%`, `45.26%`).
fn percent(v: f64, places: usize) -> String {
    let s = format!("{v:.places$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
    format!("{s}%")
}

/// The result as the export's report: how the weights were made, a table of the answers
/// (heaviest first: whose, the confidence it stated, its weight, whether a confidence was
/// stated), who wrote the synthesis, and the synthesizer's notes on calibration.
pub fn report(result: &Value) -> String {
    use crate::modes::report::table;
    let mut out = String::new();
    let answers = result["answers"].as_array().cloned().unwrap_or_default();
    let weights = &result["weights"];
    let list = weights["weights"].as_array().cloned().unwrap_or_default();
    let answer_of = |index: &Value| answers.iter().find(|a| a["index"] == *index);
    if let Some(heaviest) = list.first() {
        let t = weights["temperature"]
            .as_f64()
            .map_or(String::new(), |t| format!(" at temperature {}", fmt_temperature(t)));
        let at = heaviest["weightPercent"]
            .as_f64()
            .map_or(String::new(), |w| format!(", at {}", percent(w, 2)));
        out.push_str(&format!(
            "**Weights** from the confidence each model stated (a softmax{t}): the heaviest answer is {}'s{at}.\n\n",
            heaviest["model"].as_str().unwrap_or("one model"),
        ));
    }
    // Heaviest first when weighed; else the answers in the order asked.
    let rows_of: Vec<(Value, Option<Value>)> = if list.is_empty() {
        answers.iter().map(|a| (a.clone(), None)).collect()
    } else {
        list.iter()
            .filter_map(|w| Some((answer_of(&w["index"])?.clone(), Some(w.clone()))))
            .collect()
    };
    let mut defaulted = false;
    let rows: Vec<Vec<String>> = rows_of
        .iter()
        .map(|(a, w)| {
            let stated = a["parsedSuccessfully"] == true;
            let confidence = match a["confidence"].as_f64().filter(|_| stated) {
                Some(c) => {
                    let mut s = percent(c * 100.0, 1);
                    if c > OUTLIER_HIGH {
                        s.push_str(" (unusually high)");
                    } else if c < OUTLIER_LOW {
                        s.push_str(" (unusually low)");
                    }
                    s
                }
                None => "not stated".to_string(),
            };
            let said = match (stated, a["clamped"] == true) {
                (true, true) => "yes, outside the scale and held to it",
                (true, false) => "yes",
                (false, _) => {
                    defaulted = true;
                    "no"
                }
            };
            vec![
                a["model"].as_str().unwrap_or("").to_string(),
                confidence,
                w.as_ref()
                    .and_then(|w| w["weightPercent"].as_f64())
                    .map_or(String::new(), |p| percent(p, 2)),
                said.to_string(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(
            &["model", "confidence", "weight", "confidence stated"],
            &rows,
            &[1, 2],
        ));
        if defaulted {
            out.push_str(&format!(
                "\nAn answer that stated no confidence was weighed at the default of {}.\n",
                percent(DEFAULT_CONFIDENCE * 100.0, 1)
            ));
        }
        out.push('\n');
    }
    let s = &result["synthesis"];
    if s["singleAnswer"] == true {
        let who = answers.first().and_then(|a| a["model"].as_str()).unwrap_or("one model");
        out.push_str(&format!(
            "**Synthesis:** only {who} answered, so its answer stands as the synthesis.\n"
        ));
    } else if let Some(model) = s["model"].as_str().filter(|m| !m.is_empty()) {
        let standing_in = s["fallbackFrom"]
            .as_str()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        out.push_str(&format!(
            "**Synthesis** written by {model}{standing_in}, favouring the heavier answers.\n"
        ));
    }
    let notes = s["calibrationNotes"].as_str().unwrap_or("").trim();
    if !notes.is_empty() {
        out.push_str("\n**Calibration notes** from the synthesizer:\n\n");
        for line in notes.lines() {
            // Quoted as written, without the headings a model may open a line with.
            let t = line.trim_start();
            let line =
                if t.starts_with('#') { t.trim_start_matches('#').trim_start() } else { line };
            out.push_str(&format!("> {line}\n").replace("> \n", ">\n"));
        }
    }
    out
}

/// A temperature as set (`1`, `0.5`).
fn fmt_temperature(t: f64) -> String {
    let s = format!("{t:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
