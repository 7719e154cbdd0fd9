//! What Debate stores and reads back: the revisions and their summary, the winner, the result
//! from the stored rows and the export's report.

use super::*;
use crate::modes::voting::{tally_report, winner_as_stored, Won};

/// A debater's decision after reading the others' answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionResponse {
    /// The debater (a member's name: `m #2` when a model sits on the panel twice).
    pub model: String,
    /// `REVISE`, `STAND` or `MERGE`; null when none was read or the call failed.
    pub decision: Option<String>,
    /// Why, in the debater's words; null when none was read.
    pub reasoning: Option<String>,
    /// Its first answer.
    pub original_response: String,
    /// Its answer after reading the others (its first answer, without reasoning, when no
    /// revision was read).
    pub revised_response: String,
    /// The first answer's length in words.
    pub original_word_count: usize,
    /// The revised answer's length in words.
    pub revised_word_count: usize,
    /// How long the revision call took, in milliseconds (0 when it failed).
    pub response_time_ms: i64,
    /// True when a decision was read from the reply.
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

/// The decisions, counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSummary {
    /// Debaters in the revision round.
    pub total_models: usize,
    /// Debaters that revised their answer.
    pub revised: usize,
    /// Debaters that stood by it.
    pub stood: usize,
    /// Debaters that merged the others' points into it.
    pub merged: usize,
    /// Debaters without a readable decision (or whose call failed).
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

/// A debate vote round's map: the revised answers' labels to their debaters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisedLabelToModel {
    /// Each label and the debater whose revised answer it stands for.
    pub revised_label_to_model: BTreeMap<String, String>,
}

/// The vote's winner (`winner_declared`'s data, and the result's `winner`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DebateWinnerResult {
    /// The winning revised answer's label in the vote.
    pub winner_label: String,
    /// Its debater.
    pub winner_model: String,
    /// The winning revised answer: the run's answer.
    #[serde(default)]
    pub winner_response: String,
    /// What its debater had decided (`REVISE`, `STAND`, `MERGE`); null when unread.
    pub winner_decision: Option<String>,
    /// Its votes.
    pub vote_count: usize,
    /// The valid votes cast.
    pub total_votes: usize,
    /// True when it won a tie.
    pub tiebroken: bool,
    /// How the tie was broken (`alphabetical`), when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiebreaker_method: Option<String>,
}

// ---- payloads (one definition for live events and stored results) --------------------------

/// An `initial_answer` row's data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerRow {
    pub response_time_ms: i64,
}

/// `revision_start`'s data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionStart<'a> {
    pub label_map: &'a BTreeMap<String, String>,
}

/// A `revision` row's data: the decision read, under its debater's index (duplicate models
/// stay distinct).
#[derive(Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RevisionRow {
    pub debater: Option<usize>,
    pub decision: Option<String>,
    pub reasoning: Option<String>,
    pub original_word_count: usize,
    pub revised_word_count: usize,
    pub revised_response: Option<String>,
    pub parse_success: bool,
    pub unparsed: Option<Unparsed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

impl RevisionRow {
    pub(super) fn of(debater: usize, rev: &RevisionResponse) -> Self {
        RevisionRow {
            debater: Some(debater),
            decision: rev.decision.clone(),
            reasoning: rev.reasoning.clone(),
            original_word_count: rev.original_word_count,
            revised_word_count: rev.revised_word_count,
            revised_response: Some(rev.revised_response.clone()),
            parse_success: rev.parse_success,
            unparsed: rev.unparsed,
            read_from: rev.read_from,
        }
    }
}

/// `revision_complete`'s data.
#[derive(Serialize)]
pub struct RevisionsDone<'a> {
    pub revisions: &'a [RevisionResponse],
    pub summary: &'a RevisionSummary,
}

/// `vote_start`'s data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VoteStart<'a> {
    pub revised_label_map: &'a BTreeMap<String, String>,
}

/// Debate's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DebateResult {
    /// The first answers, in the panel's order (members whose call failed are not in it).
    pub round1: Vec<Answer>,
    /// The labels the debaters read the others' answers under, to their members.
    pub round1_label_map: BTreeMap<String, String>,
    /// Each debater's decision after reading the others (empty when the run stopped before).
    pub revisions: Vec<RevisionResponse>,
    /// The decisions, counted; null when there were no revisions.
    pub revision_summary: Option<RevisionSummary>,
    /// The labels the revised answers were voted on under, to their members.
    pub revised_label_map: BTreeMap<String, String>,
    /// The vote round (`votes`, `tallies`, `validVoteCount`, `invalidVoteCount`, `isTie`,
    /// `tiedLabels`, `revisedLabelToModel`); null when the run stopped before it.
    pub votes: Option<Round<RevisedLabelToModel>>,
    /// The winner; null when no vote was counted.
    #[serde(serialize_with = "winner_as_stored")]
    pub winner: Option<DebateWinnerResult>,
    /// Whether some call failed, and which (`partial`, `failedModels`).
    #[serde(flatten)]
    pub failures: Failures,
}

/// `DebateResult` from stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let map_of = |t: &'static str| -> BTreeMap<String, String> {
        of(t).next().and_then(parsed).unwrap_or_default()
    };
    let round1: Vec<Answer> = of("initial_answer").map(Answer::of_row).collect();
    let revised_map = map_of("revised_label_map");
    let revision_rows: Vec<(&StageRow, RevisionRow)> =
        of("revision").filter_map(|r| Some((r, parsed(r)?))).collect();
    // Debaters whose revision call failed have no row: they keep their original answer.
    let revisions: Vec<RevisionResponse> = if of("revision_summary").next().is_none() {
        Vec::new()
    } else {
        round1
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let row = revision_rows.iter().find(|(_, d)| d.debater == Some(i));
                let pd = row.map(|(_, d)| d);
                let revised = pd
                    .and_then(|d| d.revised_response.clone())
                    .unwrap_or_else(|| plain(&a.response));
                RevisionResponse {
                    model: a.model.clone(),
                    decision: pd.and_then(|d| d.decision.clone()),
                    reasoning: pd.and_then(|d| d.reasoning.clone()),
                    original_word_count: word_count(&a.response),
                    revised_word_count: word_count(&revised),
                    original_response: a.response.clone(),
                    revised_response: revised,
                    response_time_ms: row.and_then(|(r, _)| r.response_time_ms).unwrap_or(0),
                    parse_success: pd.is_some_and(|d| d.parse_success),
                    unparsed: pd.and_then(|d| d.unparsed),
                    read_from: pd.and_then(|d| d.read_from),
                }
            })
            .collect()
    };
    let ballots = ballots_from_rows(rows, "debate_vote");
    let votes = of("debate_vote_tally").next().map(|_| {
        Round::new(&ballots, RevisedLabelToModel { revised_label_to_model: revised_map.clone() }).0
    });
    let winner = of("debate_winner").next().and_then(|r| {
        let w: DebateWinnerResult = parsed(r)?;
        Some(DebateWinnerResult { winner_response: r.content.clone(), ..w })
    });
    to_json(&DebateResult {
        round1,
        round1_label_map: map_of("round1_label_map"),
        revision_summary: (!revisions.is_empty()).then(|| summarize(&revisions)),
        revisions,
        revised_label_map: revised_map,
        votes,
        winner,
        failures: Failures::of(rows),
    })
}

// ---- the export's report -------------------------------------------------------------------

/// The result as the export's report: each debater's decision after reading the others (a
/// table, with the length of its answer before and after), then the vote on the revised
/// answers (Vote's tally: each answer, whose, its votes, the winner and how a tie was broken,
/// each vote) and what the winner's debater had done.
pub fn report(result: &Value) -> String {
    use crate::modes::report::table;
    let Some(r) = typed::<DebateResult>(result) else { return String::new() };
    let mut out = String::new();
    if let (false, Some(s)) = (r.revisions.is_empty(), &r.revision_summary) {
        let mut parts = vec![
            format!("{} revised", s.revised),
            format!("{} stood by their answer", s.stood),
            format!("{} merged", s.merged),
        ];
        if s.parse_failed > 0 {
            parts.push(format!("{} without a readable decision", s.parse_failed));
        }
        out.push_str(&format!(
            "**Revisions** after reading the others' answers: {}.\n\n",
            parts.join(", ")
        ));
        let rows: Vec<Vec<String>> = r
            .revisions
            .iter()
            .map(|r| {
                let decision = match (r.decision.as_deref(), r.unparsed) {
                    (Some("REVISE"), _) => "revised".to_string(),
                    (Some("STAND"), _) => "stood by its answer".to_string(),
                    (Some("MERGE"), _) => "merged".to_string(),
                    (Some(other), _) => other.to_lowercase(),
                    (None, Some(u)) => format!("unread (it {})", u.describe()),
                    (None, None) => "no revision (its call failed; its first answer stands)".into(),
                };
                vec![
                    r.model.clone(),
                    decision,
                    r.original_word_count.to_string(),
                    r.revised_word_count.to_string(),
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
    if let Some(votes) = &r.votes {
        let winner = r.winner.as_ref();
        let won = winner.map(|w| Won {
            label: &w.winner_label,
            model: &w.winner_model,
            votes: w.vote_count,
            total: w.total_votes,
            tiebroken: w.tiebroken,
        });
        out.push_str("**The vote on the revised answers:**\n\n");
        out.push_str(&tally_report(Some((votes, &votes.map.revised_label_to_model)), won, None));
        let done = match winner.and_then(|w| w.winner_decision.as_deref()) {
            Some("REVISE") => Some("revised its first answer after reading the others"),
            Some("STAND") => Some("stood by its first answer"),
            Some("MERGE") => Some("merged the others' points into its answer"),
            _ => None,
        };
        if let (Some(w), Some(done)) = (winner, done) {
            out.push_str(&format!("\nThe winner, {}, had {done}.\n", w.winner_model));
        }
    }
    out
}
