//! Voting shared by Vote and Debate: the debate spec's vote prompt, `parseVote`, tallies with
//! ties, and the alphabetical tie rule.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{CallReply, Effect, StageRow};

/// The debate spec's vote-on-revised prompt, verbatim (Vote mode uses it too).
pub fn vote_prompt(question: &str, labeled: &[(String, String)]) -> String {
    let mut p = String::from(
        "After a round of deliberation, all respondents have finalized their answers. Vote for the single best response.\n\n",
    );
    p.push_str(&format!("Question: {question}\n\n"));
    for (l, response) in labeled {
        p.push_str(&format!("--- {l} ---\n{response}\n\n"));
    }
    p.push_str(VOTE_INSTRUCTIONS);
    p
}

const VOTE_INSTRUCTIONS: &str = "Consider: accuracy, completeness, clarity, helpfulness, and practical value.\n\n\
You MUST end your response with your vote in this exact format:\n\
VOTE: Response X\n\n\
where X is the letter of your chosen response. You may provide brief reasoning before the vote, but the last line MUST be your vote.";

/// Vote mode's tiebreaker prompt (the spec gives none): the chairman sees only the tied
/// responses, under their labels, and answers in the same vote format.
pub fn tiebreaker_prompt(question: &str, tied: &[(String, String)]) -> String {
    let mut p = String::from(
        "You are the chairman of a panel whose vote ended in a tie. Choose the single best response among the tied ones.\n\n",
    );
    p.push_str(&format!("Question: {question}\n\n"));
    for (l, response) in tied {
        p.push_str(&format!("--- {l} ---\n{response}\n\n"));
    }
    p.push_str(VOTE_INSTRUCTIONS);
    p
}

fn vote_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // `VOTE: Response B`, `**VOTE:** Response B`, `Vote: **Response B**`.
    RE.get_or_init(|| {
        Regex::new(r"(?i)vote[*_\s]*:[*_\s]*response\s+([a-z]{1,2})\b")
            .unwrap_or_else(|_| unreachable!())
    })
}

fn mention_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)\bresponse\s+([a-z]{1,2})\b").unwrap_or_else(|_| unreachable!())
    })
}

/// Reads a vote: the last `VOTE: Response X` line (the model's own, after any quoted template);
/// failing that, the last mention of one of the run's labels. A `VOTE:` for a label the run
/// does not have is an invalid vote (`None`).
pub fn parse_vote(text: &str, labels: &[String]) -> Option<String> {
    let canonical = |letters: &str| format!("Response {}", letters.to_uppercase());
    if let Some(cap) = vote_re().captures_iter(text).last() {
        let l = canonical(cap.get(1)?.as_str());
        return labels.contains(&l).then_some(l);
    }
    mention_re()
        .captures_iter(text)
        .filter_map(|c| c.get(1).map(|m| canonical(m.as_str())))
        .filter(|l| labels.contains(l))
        .last()
}

/// The count of a vote round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    /// Votes per label (labels with no vote are absent).
    pub tallies: BTreeMap<String, usize>,
    pub valid_vote_count: usize,
    pub invalid_vote_count: usize,
    pub is_tie: bool,
    /// Labels with the most votes (one unless tied).
    pub winners: Vec<String>,
    /// The tied labels, alphabetical (empty unless tied).
    pub tied_labels: Vec<String>,
}

/// Counts votes (`None` = invalid). No valid vote gives no winner.
pub fn tally(votes: &[Option<String>]) -> Tally {
    let mut tallies: BTreeMap<String, usize> = BTreeMap::new();
    for v in votes.iter().flatten() {
        *tallies.entry(v.clone()).or_default() += 1;
    }
    let valid = votes.iter().filter(|v| v.is_some()).count();
    let max = tallies.values().copied().max().unwrap_or(0);
    // BTreeMap keys are sorted, so `winners` is alphabetical.
    let winners: Vec<String> =
        tallies.iter().filter(|(_, n)| **n == max && max > 0).map(|(l, _)| l.clone()).collect();
    let is_tie = winners.len() > 1;
    Tally {
        tied_labels: if is_tie { winners.clone() } else { Vec::new() },
        tallies,
        valid_vote_count: valid,
        invalid_vote_count: votes.len() - valid,
        is_tie,
        winners,
    }
}

/// One voter's ballot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ballot {
    pub model: String,
    pub vote_text: String,
    pub voted_for: Option<String>,
    pub response_time_ms: i64,
}

/// Ballots from a round's replies: voters whose call failed cast none; a reply whose vote
/// does not parse is an invalid ballot.
pub fn cast(replies: Vec<CallReply>, labels: &[String]) -> Vec<Ballot> {
    replies
        .into_iter()
        .filter_map(|r| {
            let text = r.result.ok()?;
            Some(Ballot {
                model: r.model,
                voted_for: parse_vote(&text, labels),
                vote_text: text,
                response_time_ms: r.response_time_ms as i64,
            })
        })
        .collect()
}

/// One row per ballot (`parsedData.votedFor`).
pub fn ballot_rows(ballots: &[Ballot], stage_type: &str, stage_order: i32) -> Vec<Effect> {
    ballots
        .iter()
        .map(|b| {
            Effect::Store(StageRow {
                stage_type: stage_type.into(),
                stage_order,
                model: Some(b.model.clone()),
                role: Some("voter".into()),
                content: b.vote_text.clone(),
                parsed_data: Some(json!({ "votedFor": b.voted_for })),
                response_time_ms: Some(b.response_time_ms),
            })
        })
        .collect()
}

/// Ballots back from their rows.
pub fn ballots_from_rows(rows: &[StageRow], stage_type: &str) -> Vec<Ballot> {
    rows.iter()
        .filter(|r| r.stage_type == stage_type)
        .map(|r| Ballot {
            model: r.model.clone().unwrap_or_default(),
            vote_text: r.content.clone(),
            voted_for: r
                .parsed_data
                .as_ref()
                .and_then(|d| d.get("votedFor"))
                .and_then(Value::as_str)
                .map(str::to_string),
            response_time_ms: r.response_time_ms.unwrap_or(0),
        })
        .collect()
}

/// A round's result as the modes publish it: `{votes, tallies, <map_key>: labels→models,
/// validVoteCount, invalidVoteCount, isTie, tiedLabels}` (Vote calls the map `labelToModel`,
/// Debate `revisedLabelToModel`), with the tally it was built from.
pub fn round(ballots: &[Ballot], map_key: &str, map: &BTreeMap<String, String>) -> (Value, Tally) {
    let t = tally(&ballots.iter().map(|b| b.voted_for.clone()).collect::<Vec<_>>());
    let mut v = json!({
        "votes": ballots,
        "tallies": t.tallies,
        "validVoteCount": t.valid_vote_count,
        "invalidVoteCount": t.invalid_vote_count,
        "isTie": t.is_tie,
        "tiedLabels": t.tied_labels,
    });
    v[map_key] = json!(map);
    (v, t)
}

/// The first label alphabetically by label letter (`Response B` before `Response AA`).
pub fn first_alphabetically(labels: &[String]) -> Option<String> {
    labels.iter().min_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b))).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::common::label;
    use proptest::prelude::*;

    fn labels(n: usize) -> Vec<String> {
        (0..n).map(label).collect()
    }

    #[test]
    fn reads_the_last_vote_line() {
        let l = labels(3);
        assert_eq!(parse_vote("B is clearer.\n\nVOTE: Response B", &l), Some("Response B".into()));
        assert_eq!(parse_vote("**VOTE:** Response C", &l), Some("Response C".into()));
        assert_eq!(parse_vote("vote: **response a**\n", &l), Some("Response A".into()));
        // A quoted template first, the real vote last.
        let quoted = "The format is:\nVOTE: Response X\n\nMy choice: VOTE: Response A";
        assert_eq!(parse_vote(quoted, &l), Some("Response A".into()));
        // Trailing commentary after the vote.
        assert_eq!(
            parse_vote("VOTE: Response B\n\n(Close call with A.)", &l),
            Some("Response B".into())
        );
    }

    #[test]
    fn falls_back_to_the_last_known_label_and_rejects_unknown_votes() {
        let l = labels(3);
        assert_eq!(
            parse_vote("Response A is good but Response C is best.", &l),
            Some("Response C".into())
        );
        assert_eq!(
            parse_vote("VOTE: Response F", &l),
            None,
            "a vote for a label that does not exist is invalid"
        );
        assert_eq!(parse_vote("I abstain.", &l), None);
    }

    #[test]
    fn tallies_find_plurality_and_ties() {
        let v = |s: &str| Some(s.to_string());
        let t = tally(&[v("Response B"), v("Response A"), v("Response B"), None]);
        assert_eq!((t.valid_vote_count, t.invalid_vote_count, t.is_tie), (3, 1, false));
        assert_eq!(t.winners, vec!["Response B"]);
        let tie = tally(&[v("Response C"), v("Response A"), v("Response B")]);
        assert!(tie.is_tie);
        assert_eq!(tie.tied_labels, vec!["Response A", "Response B", "Response C"]);
        assert_eq!(first_alphabetically(&tie.tied_labels), Some("Response A".into()));
        assert!(tally(&[None, None]).winners.is_empty());
        assert_eq!(
            first_alphabetically(&["Response AA".into(), "Response B".into()]),
            Some("Response B".into())
        );
    }

    proptest! {
        #[test]
        fn parse_vote_never_panics_and_only_returns_known_labels(text in "\\PC{0,300}", n in 1usize..8) {
            let l = labels(n);
            if let Some(v) = parse_vote(&text, &l) {
                prop_assert!(l.contains(&v));
            }
        }
    }
}
