//! What a red-team run stores and reads back: its rounds and totals, the result, its outcome
//! and the export's report.

use super::*;

/// One round as it went out live (`attack_complete`'s and `defend_complete`'s data).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Round {
    pub(super) round: u32,
    pub(super) findings: Vec<Finding>,
    pub(super) attack: Value,
    pub(super) defense: Option<Value>,
    pub(super) responses: Vec<Response>,
}

/// Every finding without a response.
pub(super) fn unaddressed(findings: &[Finding]) -> Vec<Response> {
    read_defense("", findings).responses
}

/// Totals over every round: findings, by severity, verdicts, accepted by severity.
pub(super) fn totals(rounds: &[Round]) -> Value {
    let all: Vec<&Response> = rounds.iter().flat_map(|r| r.responses.iter()).collect();
    let count = |v: &str| all.iter().filter(|r| r.verdict == v).count();
    json!({
        "findings": all.len(),
        "bySeverity": severity_counts(all.iter().map(|r| r.severity.as_str())),
        "accepted": count("ACCEPT"), "rebutted": count("REBUT"), "unaddressed": count("UNADDRESSED"),
        "acceptedBySeverity": severity_counts(
            all.iter().filter(|r| r.verdict == "ACCEPT").map(|r| r.severity.as_str())),
    })
}

// ---- the stored result ---------------------------------------------------------------------

/// `{material, generate, rounds: [{round, attack, defense}], totals, synthesis, partial,
/// failedModels}` from the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let gen = row("generate");
    let material = gen.and_then(|g| g.parsed_data.as_ref()).map(|p| p["material"].clone());
    let generate = gen.map(|g| {
        let mut d = g.parsed_data.clone().unwrap_or(json!({}));
        if let Some(o) = d.as_object_mut() {
            o.remove("material");
        }
        d["structuredContent"] = json!(g.content);
        d
    });
    let mut current = gen.map(|g| g.content.clone()).unwrap_or_default();
    let mut rounds: Vec<Round> = Vec::new();
    for r in 1..=3u32 {
        let Some(a) = row(&format!("attack_round_{r}")) else { break };
        let attack = a.parsed_data.clone().unwrap_or(Value::Null);
        let findings: Vec<Finding> =
            serde_json::from_value(attack["findings"].clone()).unwrap_or_default();
        let mut round =
            Round { round: r, responses: unaddressed(&findings), findings, attack, defense: None };
        if let Some(d) = row(&format!("defend_round_{r}")) {
            let mut data = d.parsed_data.clone().unwrap_or(json!({}));
            let responses: Vec<Response> =
                serde_json::from_value(data["responses"].clone()).unwrap_or_default();
            // The revised text is the reply's own (read again, by the schema it was read by),
            // else the content carried forward.
            if data["revisedContentFound"] == true {
                let schema = defense_schema(round.findings.len(), current.chars().count());
                if let Some(t) =
                    read_defense_reply(&d.content, &round.findings, &schema).0.revised_content
                {
                    current = t;
                }
            }
            if let Some(o) = data.as_object_mut() {
                o.remove("revisedContentLength");
            }
            data["revisedContent"] = json!(current);
            round.responses = responses;
            round.defense = Some(data);
        }
        rounds.push(round);
    }
    let synthesis = row("synthesis").map(|s| s.parsed_data.clone().unwrap_or(Value::Null));
    let list: Vec<Value> = rounds
        .iter()
        .map(|r| json!({ "round": r.round, "attack": r.attack, "defense": r.defense }))
        .collect();
    let mut result = json!({
        "material": material, "generate": generate, "rounds": list,
        "totals": totals(&rounds), "synthesis": synthesis,
    });
    mark_from_rows(&mut result, rows);
    result
}

pub(super) fn outcome(result: &Value) -> Option<String> {
    let s = result.get("synthesis").filter(|s| !s.is_null())?;
    let t = &result["totals"];
    let confidence = s["hardeningConfidence"].as_str().unwrap_or("not stated");
    Some(format!(
        "{} findings ({} accepted, {} rebutted, {} unaddressed); hardening confidence {confidence}: {}",
        t["findings"],
        t["accepted"],
        t["rebutted"],
        t["unaddressed"],
        short(s["hardenedOutput"].as_str().unwrap_or(""), 60)
    ))
}

// ---- the export's report -------------------------------------------------------------------

/// A severity as a reader reads it: `critical`, or `not stated (medium used)` when the attacker
/// stated none.
fn severity_words(f: &Value) -> String {
    let s = f["severity"].as_str().unwrap_or("").to_lowercase();
    if f["severityDefaulted"] == true {
        format!("not stated ({s} used)")
    } else if s.is_empty() {
        "not stated".into()
    } else {
        s
    }
}

/// `2 critical, 1 high` from severity counts (the levels with none left out).
fn by_severity(counts: &Value) -> String {
    SEVERITIES
        .iter()
        .filter_map(|s| {
            counts[*s].as_u64().filter(|n| *n > 0).map(|n| format!("{n} {}", s.to_lowercase()))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The defender's verdict on one finding and what it said: `accepted` with the revision,
/// `rebutted` with the reasoning.
fn defense_words(response: Option<&Value>, defended: bool) -> (String, String) {
    let Some(r) = response else {
        let v = if defended { "not answered" } else { "no defense" };
        return (v.into(), String::new());
    };
    let text = |k: &str| r[k].as_str().unwrap_or("").to_string();
    match r["verdict"].as_str() {
        Some("ACCEPT") => ("accepted".into(), text("revision")),
        Some("REBUT") if r["verdictDefaulted"] == true => {
            ("rebutted (no verdict stated)".into(), text("reasoning"))
        }
        Some("REBUT") => ("rebutted".into(), text("reasoning")),
        _ => ("not answered".into(), String::new()),
    }
}

/// The result as the export's report: who hardened the content and how confidently, why the
/// rounds ended early, each round's findings as a table (severity, finding, where, the
/// defender's verdict and answer), and the totals.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let mut out = String::new();
    let s = &result["synthesis"];
    if s.is_object() {
        let confidence =
            s["hardeningConfidence"].as_str().map_or("not stated".into(), str::to_lowercase);
        match s["model"].as_str() {
            Some(m) => out.push_str(&format!(
                "**Hardened output:** by {m}; hardening confidence {confidence}.\n\n"
            )),
            None => out.push_str(&format!("**Hardening confidence:** {confidence}.\n\n")),
        }
        let stop = match s["stopReason"].as_str() {
            Some("no flaws") => Some("the attacker found no flaws"),
            Some("attacker failed") => Some("the attacker's call failed"),
            Some("global timeout") => Some("the run's time limit passed"),
            _ => None,
        };
        if let Some(why) = stop {
            out.push_str(&format!("**The rounds ended early:** {why}.\n\n"));
        }
    }
    let rounds = result["rounds"].as_array().cloned().unwrap_or_default();
    for (i, r) in rounds.iter().enumerate() {
        let number = r["round"].as_u64().unwrap_or(i as u64 + 1);
        let (a, d) = (&r["attack"], &r["defense"]);
        let mut lead = format!("**Round {number}**");
        let who: Vec<String> = [("attacker", &a["model"]), ("defender", &d["model"])]
            .iter()
            .filter_map(|(role, m)| m.as_str().map(|m| format!("{role} {m}")))
            .collect();
        if !who.is_empty() {
            lead.push_str(&format!(" ({})", who.join(", ")));
        }
        out.push_str(&format!("{lead}\n\n"));
        let findings = a["findings"].as_array().cloned().unwrap_or_default();
        if a["failed"] == true {
            out.push_str("The attacker's call failed.\n\n");
            continue;
        }
        if findings.is_empty() {
            out.push_str(if a["noFlaws"] == true {
                "The attacker found no flaws.\n\n"
            } else {
                "No finding could be read from the attacker's report.\n\n"
            });
            continue;
        }
        let responses = d["responses"].as_array().cloned().unwrap_or_default();
        let rows: Vec<Vec<String>> = findings
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let n = f["number"].as_u64().unwrap_or(k as u64 + 1);
                let resp = responses.iter().find(|x| x["finding"].as_u64() == Some(n));
                let (verdict, answer) = defense_words(resp, d.is_object());
                vec![
                    n.to_string(),
                    severity_words(f),
                    f["title"].as_str().unwrap_or("").to_string(),
                    f["location"].as_str().unwrap_or("").to_string(),
                    verdict,
                    answer,
                ]
            })
            .collect();
        out.push_str(&table(
            &["#", "severity", "finding", "where", "defense", "the defender's answer"],
            &rows,
            &[0],
        ));
        out.push('\n');
        let mut notes = Vec::new();
        if let Some(risk) = a["overallRisk"].as_str() {
            notes.push(format!("Overall risk as the attacker put it: {}.", risk.to_lowercase()));
        }
        if d["failed"] == true {
            notes.push("The defender's call failed: the findings went unanswered.".into());
        } else if d.is_object() && d["revisedContentFound"] == false {
            notes.push(
                "The defender gave no revised content: the content went on as it was.".into(),
            );
        } else if d.is_object() {
            notes.push("The defender revised the content.".into());
        }
        if !notes.is_empty() {
            out.push_str(&format!("{}\n\n", notes.join(" ")));
        }
    }
    let t = &result["totals"];
    if let Some(n) = t["findings"].as_u64().filter(|n| *n > 0) {
        let severities = by_severity(&t["bySeverity"]);
        let severities =
            if severities.is_empty() { String::new() } else { format!(" ({severities})") };
        out.push_str(&format!(
            "**Totals:** {}{severities}: {} accepted, {} rebutted, {} not answered.\n",
            count(n, "finding", "findings"),
            t["accepted"].as_u64().unwrap_or(0),
            t["rebutted"].as_u64().unwrap_or(0),
            t["unaddressed"].as_u64().unwrap_or(0),
        ));
    }
    out
}
