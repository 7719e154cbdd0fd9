//! What a Fact-Check run stores and reads back: the result from the stored rows, its outcome and
//! the export's report.

use super::*;

/// `{content, contentSource, generate, extract, claims, checks, consensus, counts, report,
/// partial, failedModels}` from the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let generate = row("generate").map(|g| {
        let mut d = g.parsed_data.clone().unwrap_or(json!({}));
        d["content"] = json!(g.content);
        d
    });
    let extract_row = row("extract");
    let mut extract = extract_row.and_then(|r| r.parsed_data.clone());
    let content = extract
        .as_ref()
        .map(|e| e["content"].clone())
        .or_else(|| generate.as_ref().map(|g| g["content"].clone()));
    let source = match &extract {
        Some(e) => e["contentSource"].clone(),
        None if generate.is_some() => json!("generated"),
        None => Value::Null,
    };
    if let Some(o) = extract.as_mut().and_then(Value::as_object_mut) {
        o.remove("content");
        o.remove("contentSource");
    }
    let claims = extract.as_ref().map_or(json!([]), |e| e["claims"].clone());
    let mut checks: Vec<Check> = rows
        .iter()
        .filter(|r| {
            r.stage_type.strip_prefix("verify_").is_some_and(|n| n.parse::<usize>().is_ok())
        })
        .filter_map(|r| serde_json::from_value(r.parsed_data.clone()?).ok())
        .collect();
    checks.sort_by_key(|c| c.checker_index);
    let consensus = row("consensus").and_then(|r| r.parsed_data.clone());
    let report = row("report").map(|r| {
        let mut d = r.parsed_data.clone().unwrap_or(json!({}));
        d["report"] = json!(r.content);
        d
    });
    let mut result = json!({
        "content": content, "contentSource": source, "generate": generate, "extract": extract,
        "claims": claims, "checks": checks,
        "consensus": consensus.as_ref().map_or(Value::Null, |c| c["consensus"].clone()),
        "counts": consensus.as_ref().map_or(Value::Null, |c| c["counts"].clone()),
        "usableCheckers": consensus.as_ref().map_or(Value::Null, |c| c["usableCheckers"].clone()),
        "report": report,
    });
    mark_from_rows(&mut result, rows);
    result
}

pub(super) fn outcome(result: &Value) -> Option<String> {
    let r = result.get("report").filter(|r| !r.is_null())?;
    let c = &result["counts"];
    let score = match &r["reliabilityScore"] {
        Value::Null => "no reliability score".to_string(),
        v => format!("reliability {v}/100"),
    };
    if c.is_null() {
        return Some(format!(
            "no checkable claims: {}",
            short(r["report"].as_str().unwrap_or(""), 60)
        ));
    }
    let noun = if c["total"] == 1 { "claim" } else { "claims" };
    Some(format!(
        "{score}: {} verified, {} disputed, {} unverifiable of {} {noun}",
        c["verified"], c["disputed"], c["unverifiable"], c["total"]
    ))
}

// ---- the export's report -------------------------------------------------------------------

/// A verdict in words.
fn verdict_word(v: &str) -> &str {
    match v {
        "VERIFIED" => "verified",
        "DISPUTED" => "disputed",
        "UNVERIFIABLE" => "unverifiable",
        other => other,
    }
}

/// The result as the export's report: the score, a table of the claims with their consensus,
/// and each checker's verdicts in a line.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let mut out = String::new();
    if let Some(score) = result["report"]["reliabilityScore"].as_i64() {
        out.push_str(&format!("**Reliability:** {score}/100\n\n"));
    }
    let claims = result["claims"].as_array().cloned().unwrap_or_default();
    let consensus = result["consensus"].as_array().cloned().unwrap_or_default();
    if claims.is_empty() {
        out.push_str("No checkable claims were found.\n");
        return out;
    }
    let rows: Vec<Vec<String>> = claims
        .iter()
        .map(|c| {
            let k = consensus.iter().find(|k| k["claimId"] == c["id"]);
            let verdict = k.and_then(|k| k["verdict"].as_str()).map_or("not checked", verdict_word);
            let how = k.map_or(String::new(), |k| {
                let votes = &k["votes"];
                let split: Vec<String> = ["VERIFIED", "DISPUTED", "UNVERIFIABLE"]
                    .iter()
                    .filter_map(|v| {
                        votes[*v]
                            .as_u64()
                            .filter(|n| *n > 0)
                            .map(|n| format!("{n} {}", verdict_word(v)))
                    })
                    .collect();
                if k["split"] == true {
                    format!(" (split: {})", split.join(", "))
                } else {
                    String::new()
                }
            });
            vec![
                c["number"].to_string(),
                c["text"].as_str().unwrap_or("").to_string(),
                format!("{verdict}{how}"),
                k.and_then(|k| k["agreementRate"].as_u64())
                    .map_or("—".into(), |a| format!("{a}%")),
                k.and_then(|k| k["consensusConfidence"].as_str())
                    .map_or("—".into(), str::to_lowercase),
                k.and_then(|k| k["correction"].as_str()).unwrap_or("—").to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["#", "claim", "verdict", "agreement", "confidence", "correction"],
        &rows,
        &[0, 3],
    ));
    let c = &result["counts"];
    let total = c["total"].as_u64().unwrap_or(claims.len() as u64);
    out.push_str(&format!(
        "\n{} verified, {} disputed, {} unverifiable of {}.\n",
        c["verified"].as_u64().unwrap_or(0),
        c["disputed"].as_u64().unwrap_or(0),
        c["unverifiable"].as_u64().unwrap_or(0),
        count(total, "claim", "claims")
    ));
    let checks = result["checks"].as_array().cloned().unwrap_or_default();
    if !checks.is_empty() {
        out.push_str("\n**The checkers:**\n\n");
        for ch in &checks {
            let model = ch["model"].as_str().unwrap_or("a checker");
            let line = if ch["failed"] == true {
                "its call failed".to_string()
            } else if ch["parseSuccess"] == false {
                "no verdict could be read from its reply".to_string()
            } else {
                let s = &ch["summary"];
                let mut l = format!(
                    "{} verified, {} disputed, {} unverifiable",
                    s["verified"].as_u64().unwrap_or(0),
                    s["disputed"].as_u64().unwrap_or(0),
                    s["unverifiable"].as_u64().unwrap_or(0)
                );
                if let Some(n) = s["unaddressed"].as_u64().filter(|n| *n > 0) {
                    l.push_str(&format!(", {} not addressed", count(n, "claim", "claims")));
                }
                l
            };
            out.push_str(&format!("- {model}: {line}\n"));
        }
    }
    out
}
