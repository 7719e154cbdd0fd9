//! What Debate stores and reads back: the revisions and their summary, the winner, the result
//! from the stored rows and the export's report.

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionResponse {
    pub model: String,
    pub decision: Option<String>,
    pub reasoning: Option<String>,
    pub original_response: String,
    pub revised_response: String,
    pub original_word_count: usize,
    pub revised_word_count: usize,
    pub response_time_ms: i64,
    pub parse_success: bool,
    /// Why no decision was read from the debater's reply: `refused`, `reasoning_only` or
    /// `no_answer`. Null when one was, or when the call failed (no reply to read).
    #[serde(default)]
    pub unparsed: Option<Unparsed>,
    /// Where the decision was read from (the reply's JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// A round-one answer as others read it and as it stands in for a revision: without its
/// reasoning.
pub(super) fn plain(response: &str) -> String {
    answer_text(response).into_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSummary {
    pub total_models: usize,
    pub revised: usize,
    pub stood: usize,
    pub merged: usize,
    pub parse_failed: usize,
}

pub fn summarize(revisions: &[RevisionResponse]) -> RevisionSummary {
    let count = |d: &str| revisions.iter().filter(|r| r.decision.as_deref() == Some(d)).count();
    RevisionSummary {
        total_models: revisions.len(),
        revised: count("REVISE"),
        stood: count("STAND"),
        merged: count("MERGE"),
        parse_failed: revisions.iter().filter(|r| r.decision.is_none()).count(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DebateWinnerResult {
    pub winner_label: String,
    pub winner_model: String,
    pub winner_response: String,
    pub winner_decision: Option<String>,
    pub vote_count: usize,
    pub total_votes: usize,
    pub tiebroken: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiebreaker_method: Option<String>,
}

/// `DebateResult` from stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let map_of = |t: &'static str| -> BTreeMap<String, String> {
        of(t)
            .next()
            .and_then(|r| r.parsed_data.clone())
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    };
    let round1: Vec<Answer> = of("initial_answer")
        .map(|r| Answer {
            model: r.model.clone().unwrap_or_default(),
            response: r.content.clone(),
            response_time_ms: r.response_time_ms.unwrap_or(0),
        })
        .collect();
    let revised_map = map_of("revised_label_map");
    let revision_rows: Vec<&StageRow> = of("revision").collect();
    // Debaters whose revision call failed have no row: they keep their original answer.
    let revisions: Vec<RevisionResponse> = if of("revision_summary").next().is_none() {
        Vec::new()
    } else {
        round1
            .iter()
            .enumerate()
            .map(|(i, a)| {
                // Rows carry the debater's index: duplicate models stay distinct.
                let row = revision_rows.iter().find(|r| {
                    r.parsed_data.as_ref().and_then(|d| d.get("debater")).and_then(Value::as_u64)
                        == Some(i as u64)
                });
                let pd = row.and_then(|r| r.parsed_data.clone()).unwrap_or(Value::Null);
                let s = |k: &str| pd.get(k).and_then(Value::as_str).map(str::to_string);
                let revised = s("revisedResponse").unwrap_or_else(|| plain(&a.response));
                RevisionResponse {
                    model: a.model.clone(),
                    decision: s("decision"),
                    reasoning: s("reasoning"),
                    original_word_count: word_count(&a.response),
                    revised_word_count: word_count(&revised),
                    original_response: a.response.clone(),
                    revised_response: revised,
                    response_time_ms: row.and_then(|r| r.response_time_ms).unwrap_or(0),
                    parse_success: pd.get("parseSuccess").and_then(Value::as_bool).unwrap_or(false),
                    unparsed: serde_json::from_value(pd["unparsed"].clone()).unwrap_or(None),
                    read_from: serde_json::from_value(pd["readFrom"].clone()).unwrap_or(None),
                }
            })
            .collect()
    };
    let ballots = ballots_from_rows(rows, "debate_vote");
    let votes = of("debate_vote_tally")
        .next()
        .map(|_| round(&ballots, "revisedLabelToModel", &revised_map).0);
    let winner = of("debate_winner").next().map(|r| {
        let mut w = r.parsed_data.clone().unwrap_or(json!({}));
        w["winnerResponse"] = json!(r.content);
        w
    });
    let mut result = json!({
        "round1": round1,
        "round1LabelMap": map_of("round1_label_map"),
        "revisions": revisions,
        "revisionSummary": (!revisions.is_empty()).then(|| summarize(&revisions)),
        "revisedLabelMap": revised_map,
        "votes": votes,
        "winner": winner,
    });
    mark_from_rows(&mut result, rows);
    result
}

// ---- the export's report -------------------------------------------------------------------

/// The result as the export's report: each debater's decision after reading the others (a
/// table, with the length of its answer before and after), then the vote on the revised
/// answers (Vote's tally: each answer, whose, its votes, the winner and how a tie was broken,
/// each vote) and what the winner's debater had done.
pub fn report(result: &Value) -> String {
    use crate::modes::report::table;
    let mut out = String::new();
    let revisions = result["revisions"].as_array().cloned().unwrap_or_default();
    if !revisions.is_empty() {
        let s = &result["revisionSummary"];
        let n = |k: &str| s[k].as_u64().unwrap_or(0);
        let mut parts = vec![
            format!("{} revised", n("revised")),
            format!("{} stood by their answer", n("stood")),
            format!("{} merged", n("merged")),
        ];
        if n("parseFailed") > 0 {
            parts.push(format!("{} without a readable decision", n("parseFailed")));
        }
        out.push_str(&format!(
            "**Revisions** after reading the others' answers: {}.\n\n",
            parts.join(", ")
        ));
        let rows: Vec<Vec<String>> = revisions
            .iter()
            .map(|r| {
                let decision = match r["decision"].as_str() {
                    Some("REVISE") => "revised".to_string(),
                    Some("STAND") => "stood by its answer".to_string(),
                    Some("MERGE") => "merged".to_string(),
                    Some(other) => other.to_lowercase(),
                    None => match serde_json::from_value::<Unparsed>(r["unparsed"].clone()) {
                        Ok(u) => format!("unread (it {})", u.describe()),
                        Err(_) => "no revision (its call failed; its first answer stands)".into(),
                    },
                };
                let words = |k: &str| r[k].as_u64().map_or(String::new(), |n| n.to_string());
                vec![
                    r["model"].as_str().unwrap_or("").to_string(),
                    decision,
                    words("originalWordCount"),
                    words("revisedWordCount"),
                ]
            })
            .collect();
        out.push_str(&table(
            &["debater", "decision", "words before", "words after"],
            &rows,
            &[2, 3],
        ));
        out.push('\n');
    }
    let votes = &result["votes"];
    if votes.is_object() {
        let mut round = votes.clone();
        round["labelToModel"] = votes["revisedLabelToModel"].clone();
        if !round["labelToModel"].is_object() {
            round["labelToModel"] = result["revisedLabelMap"].clone();
        }
        let winner = &result["winner"];
        out.push_str("**The vote on the revised answers:**\n\n");
        out.push_str(&crate::modes::voting::tally_report(&round, winner, &Value::Null));
        let done = match winner["winnerDecision"].as_str() {
            Some("REVISE") => Some("revised its first answer after reading the others"),
            Some("STAND") => Some("stood by its first answer"),
            Some("MERGE") => Some("merged the others' points into its answer"),
            _ => None,
        };
        if let (Some(model), Some(done)) = (winner["winnerModel"].as_str(), done) {
            out.push_str(&format!("\nThe winner, {model}, had {done}.\n"));
        }
    }
    out
}
