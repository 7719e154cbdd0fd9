//! What a tournament stores and reads back: the result from the stored rows and the export's
//! report.

use super::*;

/// `{contestants, bracket, rounds: [{round, matches}], champion, partial, failedModels}` from
/// the stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let mut contestants: Vec<Contestant> = rows
        .iter()
        .filter(|r| r.stage_type == "collect")
        .filter_map(|r| {
            let seed = r.parsed_data.as_ref()?.get("seed")?.as_u64()? as usize;
            Some(Contestant {
                seed,
                model: r.model.clone()?,
                response: r.content.clone(),
                response_time_ms: r.response_time_ms,
            })
        })
        .collect();
    contestants.sort_by_key(|c| c.seed);
    let bracket = rows
        .iter()
        .find(|r| r.stage_type == "bracket_seed")
        .and_then(|r| r.parsed_data.clone())
        .unwrap_or(Value::Null);
    let mut matches: Vec<Value> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("round_") && r.stage_type.contains("_match_"))
        .filter_map(|r| r.parsed_data.clone())
        .filter(|p| p.get("isBye") != Some(&Value::Bool(true)))
        .map(|mut p| {
            if let Some(o) = p.as_object_mut() {
                o.remove("firstReply");
            }
            p
        })
        .collect();
    matches.sort_by_key(|m| (m["round"].as_u64(), m["matchIndex"].as_u64()));
    let mut rounds: Vec<Value> = Vec::new();
    for m in &matches {
        let r = m["round"].as_u64().unwrap_or(0);
        match rounds.last_mut() {
            Some(last) if last["round"].as_u64() == Some(r) => {
                if let Some(a) = last["matches"].as_array_mut() {
                    a.push(m.clone());
                }
            }
            _ => rounds.push(json!({ "round": r, "matches": [m] })),
        }
    }
    let champion = rows
        .iter()
        .find(|r| r.stage_type == "winner")
        .and_then(|r| r.parsed_data.clone())
        .unwrap_or(Value::Null);
    let mut result = json!({ "contestants": contestants, "bracket": bracket, "rounds": rounds,
                             "champion": champion });
    mark_from_rows(&mut result, rows);
    result
}

// ---- the export's report -------------------------------------------------------------------

/// The result as the export's report: the champion, then the bracket round by round (each
/// match, who won and what decided it).
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let seed = |n: &Value, model: &Value| match model.as_str() {
        Some(m) => format!("seed {n} ({m})"),
        None => format!("seed {n}"),
    };
    let model_of = |n: &Value| {
        result["contestants"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["seed"] == *n))
            .map_or(Value::Null, |c| c["model"].clone())
    };
    let mut out = String::new();
    let champ = &result["champion"];
    if !champ.is_null() {
        out.push_str(&format!(
            "**Champion:** {}, {} won\n\n",
            seed(&champ["seed"], &champ["model"]),
            count(champ["matchesWon"].as_u64().unwrap_or(0), "match", "matches")
        ));
    }
    let byes: Vec<String> = result["bracket"]["byes"]
        .as_array()
        .map(|b| b.iter().map(|s| seed(s, &model_of(s))).collect())
        .unwrap_or_default();
    if !byes.is_empty() {
        out.push_str(&format!("Through to round 2 without a match: {}.\n\n", byes.join(", ")));
    }
    for r in result["rounds"].as_array().cloned().unwrap_or_default() {
        out.push_str(&format!("**Round {}**\n\n", r["round"]));
        let rows: Vec<Vec<String>> = r["matches"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|m| {
                let decided = match m["decidedBy"].as_str() {
                    Some("judge") => "the judge",
                    Some("judge_retry") => "the judge, asked again",
                    Some("coin_flip") => "a coin flip (the judge's verdict could not be read)",
                    Some("default_seed") => "the better seed (the judge's call failed)",
                    _ => "—",
                };
                vec![
                    m["matchIndex"].to_string(),
                    seed(&m["shownAsA"], &model_of(&m["shownAsA"])),
                    seed(&m["shownAsB"], &model_of(&m["shownAsB"])),
                    seed(&m["winnerSeed"], &m["winnerModel"]),
                    decided.to_string(),
                    m["reasoning"].as_str().unwrap_or("").to_string(),
                ]
            })
            .collect();
        out.push_str(&table(
            &["match", "shown as Response A", "shown as Response B", "winner", "decided by", "why"],
            &rows,
            &[0],
        ));
        out.push('\n');
    }
    out
}
