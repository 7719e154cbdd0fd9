//! Voting shared by Vote and Debate: the debate spec's vote prompt, `parseVote`, tallies with
//! ties, and the alphabetical tie rule.

use std::collections::BTreeMap;
use std::sync::Arc;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::common::response_blocks;
use super::payload::parsed;
use super::reading::{self, Unparsed};
use super::schema::{self, ReadFrom, ReplySchema};
use super::{CallReply, Effect, StageRow};

/// The vote prompt asking for the spec's `VOTE:` line, or, given the round's schema, for its
/// JSON instead (the same instructions otherwise).
pub fn vote_prompt(
    question: &str,
    labeled: &[(String, String)],
    schema: Option<&ReplySchema>,
) -> String {
    let mut p = String::from(
        "After a round of deliberation, all respondents have finalized their answers. Vote for the single best response.\n\n",
    );
    p.push_str(&format!("Question: {question}\n\n"));
    p.push_str(&response_blocks(labeled));
    p.push_str(&vote_instructions(schema));
    p
}

const VOTE_CRITERIA: &str =
    "Consider: accuracy, completeness, clarity, helpfulness, and practical value.\n\n";

const VOTE_FORMAT: &str = "You MUST end your response with your vote in this exact format:\n\
VOTE: Response X\n\n\
where X is the letter of your chosen response. You may provide brief reasoning before the vote, but the last line MUST be your vote.";

fn vote_instructions(schema: Option<&ReplySchema>) -> String {
    match schema {
        Some(s) => format!("{VOTE_CRITERIA}{}", s.instruction()),
        None => format!("{VOTE_CRITERIA}{VOTE_FORMAT}"),
    }
}

/// Vote mode's tiebreaker prompt (the spec gives none): the chairman sees only the tied
/// responses, under their labels, and answers in the same vote format, or in the JSON of the
/// tiebreak's schema when given one.
pub fn tiebreaker_prompt(
    question: &str,
    tied: &[(String, String)],
    schema: Option<&ReplySchema>,
) -> String {
    let mut p = String::from(
        "You are the chairman of a panel whose vote ended in a tie. Choose the single best response among the tied ones.\n\n",
    );
    p.push_str(&format!("Question: {question}\n\n"));
    p.push_str(&response_blocks(tied));
    p.push_str(&vote_instructions(schema));
    p
}

/// The reply schema of a vote among `labels` (named `name`): its reasoning, then the label.
pub fn vote_schema(name: &str, labels: &[String]) -> Arc<ReplySchema> {
    ReplySchema::new(
        name,
        schema::reasoned([(
            "vote",
            schema::described(schema::one_of(labels), "the label of the single best response"),
        )]),
    )
}

/// Reads a vote: from its JSON when it fits `schema`, else by its text ([`read_vote`]); with
/// where it was read from when it was.
pub fn read_vote_reply(
    text: &str,
    labels: &[String],
    schema: &ReplySchema,
) -> (Result<String, Unparsed>, Option<ReadFrom>) {
    let from_json = |v: &Value| {
        let vote = v.get("vote").and_then(Value::as_str).filter(|l| labels.iter().any(|x| x == l));
        vote.map(|l| Ok(l.to_string()))
    };
    schema.read_reply(text, from_json, |t| read_vote(t, labels), Result::is_ok)
}

fn vote_re() -> &'static Regex {
    // `VOTE: Response B`, `**VOTE:** Response B`, `Vote: **Response B**`, `VOTE: B.`, and the
    // same headed in another language (`VOTO: Respuesta B`, `VOTE : Réponse B`, `STIMME: Antwort B`).
    regex!(
        r"(?im)\b(?:vote|voto|stimme|votaci[oó]n|vota[cç][aã]o)[*_\s]*:[*_\s]*(?:(response|r[ée]ponse|respuesta|resposta|risposta|antwort)[*_\s]+)?([a-z]{1,2})\b([^\n]*)$"
    )
}

fn mention_re() -> &'static Regex {
    regex!(
        r"(?i)\b(?:response|r[ée]ponse|respuesta|resposta|risposta|antwort)[*_\s]+([a-z]{1,2})\b"
    )
}

fn stated_re() -> &'static Regex {
    // A vote said in words: `My vote is Response B`, `I vote for Response B`, `I choose
    // Response B`, `The best response is Response B`, `Final answer: B`. Each phrase is
    // contiguous, so `I can't choose…` or `I would not vote for…` never match. A bare label is
    // a capital letter standing alone (`I vote for B.`), so `I choose a…` is no vote.
    regex!(
        r"(?i)\b(?:my\s+vote\s+(?:is|goes\s+to)|i\s+vote\s+for|i\s+choose|i\s+pick|i\s+select|the\s+best\s+response\s+is|(?:my\s+)?final\s+answer(?:\s+is)?\s*:?)[\s:*_-]*(?:(?:response|r[ée]ponse|respuesta)[*_\s]+([a-z]{1,2})\b|(?-i:([A-Z]{1,2}))\b(?:[\s*_.!)]*(?m:$)|[\s*_]*[.!,;]))"
    )
}

fn canonical(letters: &str) -> String {
    format!("Response {}", letters.to_uppercase())
}

/// A label as a JSON value states it: `"Response B"`, `"B"`.
fn json_label(v: &Value) -> Option<String> {
    let s = v.as_str()?.trim();
    if s.len() <= 2 && s.chars().all(|c| c.is_ascii_alphabetic()) {
        Some(canonical(s))
    } else {
        let c = mention_re().captures(s)?;
        // The value is the label, not a sentence that mentions one.
        (c.get(0)?.as_str().len() == s.trim_end_matches('.').len())
            .then(|| canonical(c.get(1).map_or("", |m| m.as_str())))
    }
}

/// A vote given as JSON, fenced or bare: a `vote` (`choice`, `winner`, `best_response`…) field
/// holding a label, a list of one label, or `{"label": …}`; else a JSON array of one label on
/// its own (```` ```json\n["Response B"]\n``` ````). Two labels where one is asked for are
/// contradictory; a label the run does not have is no vote.
fn json_vote(answer: &str, labels: &[String]) -> Option<Result<String, Unparsed>> {
    let keys = [
        "vote",
        "final_vote",
        "finalVote",
        "choice",
        "winner",
        "best_response",
        "bestResponse",
        "best",
        "selected",
        "selection",
    ];
    let v = reading::json_field(answer, &keys).or_else(|| {
        reading::json_values(answer)
            .into_iter()
            .rev()
            .find(|v| v.as_array().is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_string)))
    })?;
    let found: Vec<String> = match &v {
        Value::Array(items) => items.iter().map(json_label).collect::<Option<Vec<_>>>()?,
        Value::Object(o) => vec![["label", "response", "id", "name"]
            .iter()
            .find_map(|k| o.get(*k))
            .and_then(json_label)?],
        other => vec![json_label(other)?],
    };
    match found.as_slice() {
        [one] => labels.contains(one).then(|| Ok(one.clone())),
        _ if found.iter().any(|l| labels.contains(l)) => Some(Err(Unparsed::Inconsistent)),
        _ => None,
    }
}

/// Reads a vote, or says why there is none. Only a stated vote counts, read from the answer
/// part of the reply (reasoning traces set aside):
/// 1. the last `VOTE:` line (the model's own, after any quoted template), with the label
///    spelled out or as a bare letter (`VOTE: B`); a line that names a second label
///    (`VOTE: Response A or Response B`) is contradictory; a `VOTE:` for a label the run does
///    not have is an invalid vote;
/// 2. else a vote in JSON, fenced or bare (see `json_vote`);
/// 3. else the last vote said in words (`My vote is Response B`, `I vote for Response B`,
///    `Final answer: B`), a bare letter only in capitals and standing alone (`I vote for C.`).
///
/// A label merely mentioned (`I abstain; Response A and C are both good`) is no vote.
pub fn read_vote(text: &str, labels: &[String]) -> Result<String, Unparsed> {
    let split = reading::split_reasoning(text);
    if split.unclosed {
        return Err(Unparsed::ReasoningOnly);
    }
    let answer = split.answer.as_ref();
    if let Some(cap) = vote_re().captures_iter(answer).last() {
        let spelled = cap.get(1).is_some();
        let letters = cap.get(2).map_or("", |m| m.as_str());
        let rest = cap.get(3).map_or("", |m| m.as_str());
        // A bare letter must stand alone (`VOTE: B.`), or `VOTE: I think…` would be a vote for I.
        let alone =
            rest.trim_start().chars().next().is_none_or(|c| {
                matches!(c, '.' | '!' | ')' | '*' | '_' | ',' | ';' | '(' | '-' | '—')
            });
        if spelled || alone {
            let l = canonical(letters);
            let others = mention_re()
                .captures_iter(rest)
                .filter_map(|c| c.get(1).map(|m| canonical(m.as_str())))
                .any(|o| o != l && labels.contains(&o));
            if others && !rest.to_lowercase().contains("over") {
                return Err(Unparsed::Inconsistent);
            }
            return if labels.contains(&l) { Ok(l) } else { Err(Unparsed::NoAnswer) };
        }
    }
    match json_vote(answer, labels) {
        Some(Ok(l)) => return Ok(l),
        Some(Err(why)) => return Err(why),
        None => {}
    }
    if let Some(l) = stated_re()
        .captures_iter(answer)
        .filter_map(|c| c.get(1).or(c.get(2)).map(|m| canonical(m.as_str())))
        .filter(|l| labels.contains(l))
        .last()
    {
        return Ok(l);
    }
    Err(Unparsed::of(text))
}

/// The stated vote, if any (see [`read_vote`]).
pub fn parse_vote(text: &str, labels: &[String]) -> Option<String> {
    read_vote(text, labels).ok()
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

impl Tally {
    /// Why a round with no valid vote fails, when it has none: `unreadable` when ballots came
    /// back and none named a response, else that no ballot came back (every voter's call
    /// failed), which no reader could have mended.
    pub fn no_winner(&self, unreadable: &'static str) -> Option<&'static str> {
        match (self.valid_vote_count, self.invalid_vote_count) {
            (0, 0) => Some("No vote came back: every voter's call failed."),
            (0, _) => Some(unreadable),
            _ => None,
        }
    }
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ballot {
    /// The voter.
    pub model: String,
    /// Its reply.
    pub vote_text: String,
    /// The label it voted for; null when no vote was read.
    pub voted_for: Option<String>,
    /// Why no vote was read, when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    /// Where the vote was read from (its JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    /// How long the call took, in milliseconds.
    pub response_time_ms: i64,
}

/// A vote's row data (a ballot's, and the chairman's tiebreak with `fallbackFrom`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VoteRow {
    pub voted_for: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// Ballots from a round's replies: voters whose call failed cast none; a reply whose vote
/// does not parse is an invalid ballot. Read from their JSON where it fits `schema`.
pub fn cast(replies: Vec<CallReply>, labels: &[String], schema: &ReplySchema) -> Vec<Ballot> {
    replies
        .into_iter()
        .filter_map(|r| {
            let text = r.result.ok()?;
            let (read, read_from) = read_vote_reply(&text, labels, schema);
            Some(Ballot {
                model: r.model,
                voted_for: read.clone().ok(),
                unparsed: read.err(),
                read_from,
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
            Effect::Store(
                StageRow::new(stage_type, stage_order, b.vote_text.clone())
                    .by(&b.model, "voter")
                    .data(&VoteRow {
                        voted_for: b.voted_for.clone(),
                        unparsed: b.unparsed,
                        read_from: b.read_from.filter(|_| b.unparsed.is_none()),
                        fallback_from: None,
                    })
                    .took(b.response_time_ms),
            )
        })
        .collect()
}

/// Ballots back from their rows.
pub fn ballots_from_rows(rows: &[StageRow], stage_type: &str) -> Vec<Ballot> {
    rows.iter()
        .filter(|r| r.stage_type == stage_type)
        .map(|r| {
            let d: VoteRow = parsed(r).unwrap_or_default();
            Ballot {
                model: r.model.clone().unwrap_or_default(),
                vote_text: r.content.clone(),
                voted_for: d.voted_for,
                unparsed: d.unparsed,
                read_from: d.read_from,
                response_time_ms: r.response_time_ms.unwrap_or(0),
            }
        })
        .collect()
}

/// A round's result as the modes publish it: the ballots, their count, then the labels'
/// models under the mode's name for them (`M`: Vote's `labelToModel`, Debate's
/// `revisedLabelToModel`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Round<M> {
    /// Each voter's ballot (voters whose call failed cast none).
    pub votes: Vec<Ballot>,
    /// Votes per label (labels with no vote are absent).
    pub tallies: BTreeMap<String, usize>,
    /// Ballots that named a label of the round.
    pub valid_vote_count: usize,
    /// Ballots that did not.
    pub invalid_vote_count: usize,
    /// More than one label has the most votes.
    pub is_tie: bool,
    /// The tied labels, alphabetical (empty unless tied).
    pub tied_labels: Vec<String>,
    /// Each label and the model whose answer it stands for.
    #[serde(flatten)]
    pub map: M,
}

impl<M> Round<M> {
    /// The round of `ballots`, with the tally it was built from.
    pub fn new(ballots: &[Ballot], map: M) -> (Self, Tally) {
        let t = tally(&ballots.iter().map(|b| b.voted_for.clone()).collect::<Vec<_>>());
        let round = Round {
            votes: ballots.to_vec(),
            tallies: t.tallies.clone(),
            valid_vote_count: t.valid_vote_count,
            invalid_vote_count: t.invalid_vote_count,
            is_tie: t.is_tie,
            tied_labels: t.tied_labels.clone(),
            map,
        };
        (round, t)
    }
}

/// The first label alphabetically by label letter (`Response B` before `Response AA`).
pub fn first_alphabetically(labels: &[String]) -> Option<String> {
    labels.iter().min_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b))).cloned()
}

/// The winner as a vote round's report names it.
pub struct Won<'a> {
    pub label: &'a str,
    pub model: &'a str,
    pub votes: usize,
    pub total: usize,
    pub tiebroken: bool,
}

/// A vote round as the export's report: a table of the answers (label, whose, votes, the
/// winner marked), the winner and how a tie was broken (by `chairman` when one voted, else by
/// the labels' order), and each voter's vote. `round` comes with its labels' members.
pub fn tally_report<M>(
    round: Option<(&Round<M>, &BTreeMap<String, String>)>,
    won: Option<Won>,
    chairman: Option<&str>,
) -> String {
    use super::report::{count, table};
    let mut out = String::new();
    if let Some((round, labels)) = round {
        let mut rows: Vec<(usize, Vec<String>)> = labels
            .iter()
            .map(|(label, model)| {
                let n = round.tallies.get(label).copied().unwrap_or(0);
                let mark =
                    if won.as_ref().is_some_and(|w| w.label == label) { " (winner)" } else { "" };
                (n, vec![label.clone(), model.clone(), format!("{n}{mark}")])
            })
            .collect();
        // Most votes first; the labels' order breaks ties.
        rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1[0].cmp(&b.1[0])));
        if !rows.is_empty() {
            let rows: Vec<Vec<String>> = rows.into_iter().map(|(_, r)| r).collect();
            out.push_str(&table(&["answer", "model", "votes"], &rows, &[2]));
            out.push('\n');
        }
    }
    match won {
        Some(w) => {
            out.push_str(&format!(
                "**Winner:** {} ({}), {} of {}",
                w.label,
                w.model,
                w.votes,
                count(w.total as u64, "vote", "votes")
            ));
            if w.tiebroken {
                let by = match chairman {
                    Some(m) => format!("the chairman ({m})"),
                    None => "the labels' order".to_string(),
                };
                out.push_str(&format!("; the tie was broken by {by}"));
            }
            out.push_str(".\n");
        }
        None => out.push_str("**No winner:** no valid vote named an answer.\n"),
    }
    let Some((round, _)) = round else { return out };
    if !round.votes.is_empty() {
        out.push_str("\n**The votes:**\n\n");
        for v in &round.votes {
            match &v.voted_for {
                Some(l) => out.push_str(&format!("- {} voted for {l}\n", v.model)),
                None => out.push_str(&format!("- {}: no readable vote\n", v.model)),
            }
        }
    }
    if round.invalid_vote_count > 0 {
        out.push_str(&format!(
            "\n{} did not count.\n",
            count(round.invalid_vote_count as u64, "vote", "votes")
        ));
    }
    out
}

// ---- the winner as its row keeps it ---------------------------------------------------------

/// The result's winner (`serialize_with`), Vote's and Debate's: as its row keeps it (the row's
/// content, `winnerResponse`, taken out: its place went to the last key, `tiebreakerMethod` else
/// `tiebroken`), then its response last.
pub fn winner_as_stored<W: Serialize, S: serde::Serializer>(
    w: &Option<W>,
    s: S,
) -> Result<S::Ok, S::Error> {
    super::payload::taken_last(w.as_ref(), "winnerResponse").serialize(s)
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
    fn a_mention_is_no_vote_and_unknown_votes_are_rejected() {
        let l = labels(3);
        assert_eq!(parse_vote("Response A is good but Response C is best.", &l), None);
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

    #[test]
    fn votes_as_real_models_write_them() {
        let l = labels(3);
        let ok = |s: &str| Ok(format!("Response {s}"));
        let cases: Vec<(&str, Result<String, Unparsed>)> = vec![
            // Refusals and hedges that mention labels.
            ("I abstain; Response A and C are both good", Err(Unparsed::Refused)),
            ("I can't choose between Response A and Response B.", Err(Unparsed::Refused)),
            ("VOTE: none — I abstain", Err(Unparsed::Refused)),
            // Reasoning traces: the draft inside never counts.
            ("<think>VOTE: Response A… no, C is better.</think>\nVOTE: Response C", ok("C")),
            ("<think>I lean to VOTE: Response B", Err(Unparsed::ReasoningOnly)),
            ("Thinking it over.</think>VOTE: Response B", ok("B")),
            // Structured and half-followed formats.
            ("```json\n{\"vote\": \"Response B\", \"reason\": \"clearest\"}\n```", ok("B")),
            ("{\"vote\": \"C\"}", ok("C")),
            ("VOTE: B.", ok("B")),
            ("VOTE: I think B is best", Err(Unparsed::NoAnswer)),
            ("VOTE: Response B (it is the clearest)", ok("B")),
            ("VOTE: Response B over Response A", ok("B")),
            ("VOTE: Response A or Response B", Err(Unparsed::Inconsistent)),
            ("After weighing them, my vote goes to Response C.", ok("C")),
            ("I would not vote for Response A. I vote for Response B.", ok("B")),
            // Another language.
            ("Análisis…\n\nVOTO: Respuesta C", ok("C")),
            ("VOTE : Réponse A", ok("A")),
            ("STIMME: Antwort B", ok("B")),
        ];
        for (text, expected) in cases {
            assert_eq!(read_vote(text, &l), expected, "{text}");
        }
    }

    /// Issue 28 point 4: a vote stated in JSON (fenced or bare, object or array) or in prose,
    /// each with the twin that must not be read.
    #[test]
    fn the_finished_vote_reader_reads_what_is_stated_and_nothing_else() {
        let l = labels(3);
        let ok = |s: &str| Ok(format!("Response {s}"));
        let cases: Vec<(&str, Result<String, Unparsed>)> = vec![
            ("```json\n[\"Response B\"]\n```", ok("B")),
            ("```\n{\"best_response\": \"C\"}\n```", ok("C")),
            (
                "My pick, as asked: {\"reasoning\": \"clearest\", \"vote\": [\"Response A\"]}",
                ok("A"),
            ),
            ("{\"vote\": {\"label\": \"Response C\", \"why\": \"complete\"}}", ok("C")),
            ("{\"vote\": [\"Response A\", \"Response B\"]}", Err(Unparsed::Inconsistent)),
            ("```json\n[\"Response A\", \"Response C\"]\n```", Err(Unparsed::Inconsistent)),
            ("{\"vote\": \"Response F\"}", Err(Unparsed::NoAnswer)),
            ("{\"vote\": \"Response X\"}", Err(Unparsed::NoAnswer)),
            (
                "{\"vote\": \"Response B is clear but Response A is complete\"}",
                Err(Unparsed::NoAnswer),
            ),
            ("<think>{\"vote\": \"Response A\"}</think>", Err(Unparsed::ReasoningOnly)),
            // In prose, with the label spelled out or as its capital letter.
            ("<think>VOTE: Response A</think>\nFinal answer: Response C", ok("C")),
            ("All three are fine.\n\nMy final answer: B", ok("B")),
            ("I vote for C.", ok("C")),
            ("I choose A, since it is complete.", ok("A")),
            ("I choose a response that is complete.", Err(Unparsed::NoAnswer)),
            ("I vote for D.", Err(Unparsed::NoAnswer)),
            (
                "Final answer: I cannot pick one; Response A and Response B tie.",
                Err(Unparsed::Refused),
            ),
            (
                "Response A is thorough, Response B is short, Response C is wrong.",
                Err(Unparsed::NoAnswer),
            ),
        ];
        let mut wrong = Vec::new();
        for (text, expected) in cases {
            let read = read_vote(text, &l);
            if read != expected {
                wrong.push(format!("{text:?}: read {read:?}, want {expected:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn recorded_smollm2_votes_read_as_a_careful_person_would() {
        let corpus: Vec<Value> =
            serde_json::from_str(include_str!("corpus/votes_smollm2.json")).unwrap_or_default();
        assert!(corpus.len() >= 10);
        for case in corpus {
            let text = case["text"].as_str().unwrap_or("");
            let n = case["labels"].as_u64().unwrap_or(3) as usize;
            let expected = case["vote"].as_str().map(str::to_string);
            assert_eq!(parse_vote(text, &labels(n)), expected, "{}: {text}", case["note"]);
        }
    }

    proptest! {
        /// Nothing inside a closed `<think>` block changes the vote stated after it.
        #[test]
        fn a_closed_trace_never_changes_the_vote(inside in "[A-Za-z .:\n]{0,200}", draft in 0usize..4, fin in 0usize..4) {
            let l = labels(4);
            let after = format!("VOTE: {}", l[fin]);
            let text = format!("<think>{inside}\nVOTE: {}</think>\n{after}", l[draft]);
            prop_assert_eq!(read_vote(&text, &l), Ok(l[fin].clone()));
        }

        /// Issue 33 point 11: text that states no vote reads as no vote, whatever labels
        /// and numbers it mentions.
        #[test]
        fn text_that_states_no_vote_reads_as_unparsed(text in crate::modes::ranking::tests::unstated()) {
            prop_assert!(read_vote(&text, &labels(3)).is_err(), "{}", text);
        }

        #[test]
        fn parse_vote_never_panics_and_only_returns_known_labels(text in "\\PC{0,300}", n in 1usize..8) {
            let l = labels(n);
            if let Some(v) = parse_vote(&text, &l) {
                prop_assert!(l.contains(&v));
            }
        }
    }
}
