//! What a Clarity run stores and reads back: `load_result` and the export's report.

use super::*;

use serde_json::{json, Value};

use crate::modes::common::mark_from_rows;
use crate::modes::reading::Unparsed;
use crate::modes::StageRow;

/// The clarity result from stored rows: the brief, every evaluator's verdict before and after
/// discussion, the Arbiter, and the score with its method.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let pd = |r: &StageRow| r.parsed_data.clone().unwrap_or(Value::Null);
    let brief = of("brief").next().map(
        |r| json!({ "content": r.content, "title": pd(r)["title"], "context": pd(r)["context"] }),
    );
    let evaluations: Vec<Value> = of("evaluation").map(pd).collect();
    let discussion: Vec<Value> = of("discussion").map(pd).collect();
    let score = of("score").next().map(pd);
    let mut result = json!({
        "brief": brief,
        "evaluations": evaluations,
        "initialDisagreement": of("disagreement").next().map(pd),
        "discussion": discussion,
        "arbiter": of("arbiter").next().map(pd),
        "score": score,
    });
    mark_from_rows(&mut result, rows);
    result
}

// ---- the export's report -------------------------------------------------------------------

/// A score in words: one decimal at most (`7`, `7.5`).
fn score_words(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").unwrap_or(&s).to_string()
}

/// A persona's role (`skeptic`) by its name (`Skeptic`); the arbiter and unknown roles as is.
fn role_name(role: &str) -> String {
    match PERSONAS.iter().find(|p| p.role == role) {
        Some(p) => p.name.to_string(),
        None if role == "arbiter" => "Arbiter".to_string(),
        None => role.to_string(),
    }
}

/// A dimension's key (`evidenceQuality`) by its name (`Evidence Quality`).
fn dimension_name(key: &str) -> &str {
    DIMENSIONS.iter().find(|d| d.key == key).map_or(key, |d| d.name)
}

/// The result as the export's report: the score and how it was reached, whether the run was
/// flagged for human review and why, the scorecards as a table (each dimension with its
/// weight, each evaluator's score, changes made in discussion, the Arbiter's ruling and the
/// final score), the scorecards that could not be read, and the top issues.
pub fn report(result: &Value) -> String {
    use crate::modes::report::table;
    let mut out = String::new();
    let score = &result["score"];
    if let Some(total) = score["score"].as_f64() {
        let method = match score["method"].as_str() {
            Some("median") => "the median of the evaluators' scores on each dimension, weighted",
            Some("post_discussion") => {
                "the median of the evaluators' scores on each dimension after their discussion, weighted"
            }
            Some("arbiter") => {
                "the evaluators' scores with the Arbiter's counted one and a half times on the disputed dimensions, weighted"
            }
            _ => "the dimensions' scores, weighted",
        };
        out.push_str(&format!("**Clarity score:** {}/10, {method}.\n", score_words(total)));
        if score["needsHumanReview"] == true {
            let reason = score["reviewReason"].as_str().unwrap_or("").trim();
            out.push_str(&format!("\n**Flagged for human review:** {reason}\n"));
        } else if score["needsHumanReview"] == false {
            out.push_str(&format!(
                "\n**Not flagged for review:** the evaluators' scores were within {} points of each other on every dimension.\n",
                score_words(DISAGREEMENT_SPREAD)
            ));
        }
        out.push('\n');
    }
    let evaluations = result["evaluations"].as_array().cloned().unwrap_or_default();
    // The scorecards that count: as they stood at the end, else the first readable ones.
    let current: Vec<Value> = match score["verdicts"].as_array() {
        Some(v) if !v.is_empty() => v.clone(),
        _ => evaluations.iter().filter(|e| e["parseSuccess"] == true).cloned().collect(),
    };
    if !current.is_empty() {
        let first = |role: &Value| evaluations.iter().find(|e| e["role"] == *role);
        let breakdown = score["breakdown"].as_array().cloned().unwrap_or_default();
        let arbiter: Vec<Option<f64>> = DIMENSIONS
            .iter()
            .map(|d| {
                breakdown
                    .iter()
                    .find(|b| b["dimension"] == d.key)
                    .and_then(|b| b["arbiterScore"].as_f64())
            })
            .collect();
        let ruled = arbiter.iter().any(Option::is_some);
        let mut head: Vec<String> = vec!["dimension".into(), "weight".into()];
        for v in &current {
            let role = role_name(v["role"].as_str().unwrap_or("evaluator"));
            head.push(match v["model"].as_str().filter(|m| !m.is_empty()) {
                Some(m) => format!("{role} ({m})"),
                None => role,
            });
        }
        if ruled {
            head.push("Arbiter".into());
        }
        if !breakdown.is_empty() {
            head.push("final".into());
        }
        let mut rows: Vec<Vec<String>> = DIMENSIONS
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut row = vec![d.name.to_string(), format!("{:.0}%", d.weight * 100.0)];
                for v in &current {
                    let now = v["scores"][d.key].as_f64();
                    let before = first(&v["role"]).and_then(|e| e["scores"][d.key].as_f64());
                    row.push(match (now, before) {
                        (Some(n), Some(b)) if n != b => {
                            format!("{} (was {})", score_words(n), score_words(b))
                        }
                        (Some(n), _) => score_words(n),
                        (None, _) => "unread".into(),
                    });
                }
                if ruled {
                    row.push(arbiter[i].map_or(String::new(), score_words));
                }
                if !breakdown.is_empty() {
                    let fin = breakdown
                        .iter()
                        .find(|b| b["dimension"] == d.key)
                        .and_then(|b| b["score"].as_f64());
                    row.push(fin.map_or("unread".into(), score_words));
                }
                row
            })
            .collect();
        let mut overall = vec!["overall".to_string(), "100%".to_string()];
        for v in &current {
            overall.push(v["overall"].as_f64().map_or(String::new(), score_words));
        }
        if ruled {
            overall.push(String::new());
        }
        if !breakdown.is_empty() {
            overall.push(score["score"].as_f64().map_or(String::new(), score_words));
        }
        rows.push(overall);
        let right: Vec<usize> = (1..head.len()).collect();
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        out.push_str(&table(&head, &rows, &right));
        if score["discussionRan"] == true {
            out.push_str(
                "\nThe evaluators discussed their scores after reading each other's; a score they changed shows what it was.\n",
            );
        }
        out.push('\n');
    }
    let mut unread = Vec::new();
    for (list, what) in [
        (&result["evaluations"], "its scorecard could not be read"),
        (
            &result["discussion"],
            "its revised scorecard could not be read, so its first scores stand",
        ),
    ] {
        for v in list.as_array().into_iter().flatten().filter(|v| v["parseSuccess"] == false) {
            let role = role_name(v["role"].as_str().unwrap_or("evaluator"));
            let who = match v["model"].as_str().filter(|m| !m.is_empty()) {
                Some(m) => format!("{role} ({m})"),
                None => role,
            };
            let why = serde_json::from_value::<Unparsed>(v["unparsed"].clone())
                .map_or(String::new(), |u| format!("; it {}", u.describe()));
            unread.push(format!("- {who}: {what}{why}\n"));
        }
    }
    if !unread.is_empty() {
        out.push_str("**Not read:**\n\n");
        out.push_str(&unread.concat());
        out.push('\n');
    }
    let arb = &result["arbiter"];
    if let Some(model) = arb["model"].as_str() {
        let standing_in = arb["fallbackFrom"]
            .as_str()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        let ruled: Vec<String> = arb["scores"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| {
                        Some(format!("{} {}", dimension_name(k), score_words(v.as_f64()?)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let said = if ruled.is_empty() {
            let why = serde_json::from_value::<Unparsed>(arb["unparsed"].clone())
                .map_or(String::new(), |u| format!("; it {}", u.describe()));
            format!("no ruling could be read{why}, so the evaluators' scores stand")
        } else {
            format!("ruled {}", ruled.join(", "))
        };
        out.push_str(&format!("**Arbiter** ({model}{standing_in}): {said}.\n\n"));
    } else if score["needsHumanReview"] == true {
        out.push_str(
            "**Arbiter:** no ruling (its call failed), so the evaluators' scores stand.\n\n",
        );
    }
    let critique = score["critique"].as_array().cloned().unwrap_or_default();
    if !critique.is_empty() {
        out.push_str("**Top issues:**\n\n");
        for (n, c) in critique.iter().enumerate() {
            let flat = |k: &str| {
                c[k].as_str().unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ")
            };
            let by: Vec<String> = c["flaggedBy"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).map(role_name).collect())
                .unwrap_or_default();
            let mut about = Vec::new();
            if let Some(p) = c["priority"].as_str() {
                about.push(format!("{p} priority"));
            }
            if !by.is_empty() {
                let by = match by.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} and {last}", rest.join(", "))
                    }
                    _ => by.concat(),
                };
                about.push(format!("raised by {by}"));
            }
            let about =
                if about.is_empty() { String::new() } else { format!(" ({})", about.join(", ")) };
            let mut line = format!(
                "{}. {}{about}: {}",
                n + 1,
                dimension_name(&flat("dimension")),
                flat("issue")
            );
            let fix = flat("suggestedFix");
            if !fix.is_empty() {
                line.push_str(&format!("; suggested fix: {fix}"));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
