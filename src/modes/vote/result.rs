//! What Vote stores and reads back: the winner's payload, the result from the stored rows
//! and the export's report.

use super::*;

/// `winner_declared`'s data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VoteWinnerResult {
    pub winner_label: String,
    pub winner_model: String,
    pub winner_response: String,
    pub vote_count: usize,
    pub total_votes: usize,
    pub tiebroken: bool,
    /// `chairman` or `alphabetical`, when tiebroken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiebreaker_method: Option<String>,
}

/// Vote's result from its stored rows: `{stage1, labelToModel, voteRound, tiebreaker, winner}`.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let stage1: Vec<Answer> = of("initial_answer")
        .map(|r| Answer {
            model: r.model.clone().unwrap_or_default(),
            response: r.content.clone(),
            response_time_ms: r.response_time_ms.unwrap_or(0),
        })
        .collect();
    let label_to_model: BTreeMap<String, String> = of("label_map")
        .next()
        .and_then(|r| r.parsed_data.clone())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let ballots = ballots_from_rows(rows, "vote");
    let vote_round = (!ballots.is_empty() || of("vote_tally").next().is_some())
        .then(|| round(&ballots, "labelToModel", &label_to_model).0);
    let tiebreaker = of("tiebreaker").next().map(|r| {
        let mut t = json!({ "model": r.model, "voteText": r.content,
                "votedFor": r.parsed_data.as_ref().and_then(|d| d.get("votedFor")).cloned() });
        if let Some(from) = r.parsed_data.as_ref().and_then(|d| d.get("fallbackFrom")) {
            t["fallbackFrom"] = from.clone();
        }
        t
    });
    let winner = of("vote_winner").next().map(|r| {
        let mut w = r.parsed_data.clone().unwrap_or(json!({}));
        w["winnerResponse"] = json!(r.content);
        w
    });
    let mut result = json!({ "stage1": stage1, "labelToModel": label_to_model,
            "voteRound": vote_round, "tiebreaker": tiebreaker, "winner": winner });
    mark_from_rows(&mut result, rows);
    result
}

// ---- the export's report -------------------------------------------------------------------

/// The result as the export's report: the tally (each answer, whose it was, its votes), the
/// winner and how it was decided, and each voter's vote.
pub fn report(result: &Value) -> String {
    crate::modes::voting::tally_report(
        &result["voteRound"],
        &result["winner"],
        &result["tiebreaker"],
    )
}
