//! What Vote stores and reads back: the winner's payload, the result from the stored rows
//! and the export's report.

use super::*;
use crate::modes::voting::{tally_report, winner_as_stored, Won};

/// The labels' models in a vote round (`labelToModel`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelToModel {
    /// Each label and the model whose answer it stands for.
    pub label_to_model: BTreeMap<String, String>,
}

/// `tiebreaker_start`'s data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TiebreakerStart<'a> {
    pub tied_labels: &'a [String],
    pub model: &'a str,
}

/// `tiebreaker_complete`'s data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TiebreakerComplete<'a> {
    pub model: &'a str,
    pub vote_text: Option<&'a str>,
    pub voted_for: Option<String>,
    pub method: &'static str,
    pub winner_label: &'a str,
    pub error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// The chairman's tiebreak as the result keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tiebreaker {
    /// The model that broke the tie.
    pub model: Option<String>,
    /// Its reply.
    pub vote_text: String,
    /// The tied label it chose; null when none could be read.
    pub voted_for: Option<String>,
    /// The chairman the backup stood in for, when the backup answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// `winner_declared`'s data, and the result's `winner`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VoteWinnerResult {
    /// The winning answer's label.
    pub winner_label: String,
    /// The model that wrote it.
    pub winner_model: String,
    /// The winning answer.
    #[serde(default)]
    pub winner_response: String,
    /// Its votes.
    pub vote_count: usize,
    /// The valid votes of the round.
    pub total_votes: usize,
    /// The vote was tied and the tie broken.
    pub tiebroken: bool,
    /// `chairman` or `alphabetical`, when tiebroken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiebreaker_method: Option<String>,
}

/// Vote's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VoteResult {
    /// Each model's answer.
    pub stage1: Vec<Answer>,
    /// Each label and the model whose answer it stands for.
    pub label_to_model: BTreeMap<String, String>,
    /// The vote; null when the run stopped before it.
    pub vote_round: Option<Round<LabelToModel>>,
    /// The chairman's tiebreak; null when the vote was not tied.
    pub tiebreaker: Option<Tiebreaker>,
    /// The winner; null when none was declared.
    #[serde(serialize_with = "winner_as_stored")]
    pub winner: Option<VoteWinnerResult>,
    /// Whether some call failed, and which (`partial`, `failedModels`).
    #[serde(flatten)]
    pub failures: Failures,
}

/// Vote's result from its stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let stage1: Vec<Answer> = of("initial_answer").map(Answer::of_row).collect();
    let label_to_model: BTreeMap<String, String> =
        of("label_map").next().and_then(parsed).unwrap_or_default();
    let ballots = ballots_from_rows(rows, "vote");
    let vote_round = (!ballots.is_empty() || of("vote_tally").next().is_some())
        .then(|| Round::new(&ballots, LabelToModel { label_to_model: label_to_model.clone() }).0);
    let tiebreaker = of("tiebreaker").next().map(|r| {
        let d: VoteRow = parsed(r).unwrap_or_default();
        Tiebreaker {
            model: r.model.clone(),
            vote_text: r.content.clone(),
            voted_for: d.voted_for,
            fallback_from: d.fallback_from,
        }
    });
    let winner = of("vote_winner").next().and_then(|r| {
        let w: VoteWinnerResult = parsed(r)?;
        Some(VoteWinnerResult { winner_response: r.content.clone(), ..w })
    });
    to_json(&VoteResult {
        stage1,
        label_to_model,
        vote_round,
        tiebreaker,
        winner,
        failures: Failures::of(rows),
    })
}

// ---- the export's report -------------------------------------------------------------------

/// The result as the export's report: the tally (each answer, whose it was, its votes), the
/// winner and how it was decided, and each voter's vote.
pub fn report(result: &Value) -> String {
    let Some(r) = typed::<VoteResult>(result) else { return String::new() };
    let won = r.winner.as_ref().map(|w| Won {
        label: &w.winner_label,
        model: &w.winner_model,
        votes: w.vote_count,
        total: w.total_votes,
        tiebroken: w.tiebroken,
    });
    let chairman = r.tiebreaker.as_ref().and_then(|t| t.model.as_deref());
    tally_report(r.vote_round.as_ref().map(|v| (v, &v.map.label_to_model)), won, chairman)
}
