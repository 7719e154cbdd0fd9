//! What a tournament stores and reads back: the payloads of its events and rows, the result
//! from the stored rows and the export's report.

use super::*;

// ---- payloads (one definition for live events and stored results) --------------------------

pub use crate::modes::payload::Data;

/// `tournament_start`: the run and its contestants and judge.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Start<'a> {
    pub config: StartConfig<'a>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartConfig<'a> {
    pub contestant_models: &'a [String],
    pub judge_model: &'a str,
}

/// A contestant that answered, by its seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Contestant {
    /// Its seed: its place among the answering contestants, in request order (1 is the best).
    pub seed: usize,
    pub model: String,
    /// Its answer.
    pub response: String,
    /// How long its answer took, in milliseconds.
    pub response_time_ms: Option<i64>,
}

/// A `collect` row's parsed data: the answer's seed and the contestant's place in the request.
#[derive(Debug, Serialize, Deserialize)]
pub struct Seeding {
    pub seed: usize,
    pub contestant: usize,
}

/// A seed and its model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Seeded {
    pub seed: usize,
    pub model: String,
}

/// A pairing of round 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Matchup {
    /// Its place in the round, from 1 (byes after the matches).
    pub match_index: usize,
    pub seed_a: usize,
    /// The other seed; null for a bye.
    pub seed_b: Option<usize>,
}

/// The bracket as seeded (`bracket_seeded` and the `bracket_seed` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bracket {
    /// The rounds a full bracket takes: ⌈log2 seeds⌉.
    pub total_rounds: usize,
    /// The seeds in order.
    pub contestants: Vec<Seeded>,
    /// The seeds through to round 2 without a match.
    pub byes: Vec<usize>,
    /// Round 1's pairings, the byes included.
    pub matchups: Vec<Matchup>,
}

/// A bye's row in round 1 (never a match of the result).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ByeRow {
    pub is_bye: bool,
    pub seed: usize,
    pub round: usize,
    pub match_index: usize,
}

/// A match as presented to the judge.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Shown {
    pub match_index: usize,
    pub shown_as_a: usize,
    pub shown_as_b: usize,
}

/// `round_start`'s data.
#[derive(Debug, Serialize)]
pub struct Matchups {
    pub matchups: Vec<Shown>,
}

/// An event of a round (`round_start`, `round_complete`).
#[derive(Debug, Serialize)]
pub struct RoundEvent<T> {
    pub round: usize,
    pub data: T,
}

/// What decided a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// The judge's verdict.
    Judge,
    /// The judge's verdict when asked again (its first reply could not be read).
    JudgeRetry,
    /// A coin flip: the judge's verdict could not be read even when asked again.
    CoinFlip,
    /// The better seed advanced: the judge's call failed.
    DefaultSeed,
}

/// A decided match: `matchup_complete`'s data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchOutcome {
    /// The seed shown to the judge as Response A.
    pub shown_as_a: usize,
    /// The seed shown to the judge as Response B.
    pub shown_as_b: usize,
    /// The winner as the judge saw it: `Response A` or `Response B`.
    pub winner_label: String,
    pub winner_seed: usize,
    pub winner_model: String,
    pub loser_seed: usize,
    pub loser_model: String,
    /// The judge's reasoning, or why the judge did not decide.
    pub reasoning: String,
    pub decided_by: DecidedBy,
    /// How long the judge's (last) call took, in milliseconds.
    pub response_time_ms: i64,
    /// Where the judge's verdict was read from (its JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// A decided match with its place in the bracket (a match row's parsed data, which also keeps
/// the judge's first, unreadable reply when it was asked again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Match {
    #[serde(flatten)]
    pub outcome: MatchOutcome,
    pub round: usize,
    pub match_index: usize,
    /// Only in the stored row, never in the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub first_reply: Option<String>,
}

/// `matchup_complete`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchEvent<'a> {
    pub round: usize,
    pub match_index: usize,
    pub data: &'a MatchOutcome,
}

/// `round_complete`'s data.
#[derive(Debug, Serialize)]
pub struct RoundDone {
    pub winners: Vec<usize>,
    pub eliminated: Vec<usize>,
}

/// How the champion got through a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PathResult {
    Bye,
    Won,
}

/// A round of the champion's way to the title.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PathStep {
    pub round: usize,
    /// The seed it beat; null for a bye.
    pub opponent_seed: Option<usize>,
    pub opponent_model: Option<String>,
    pub result: PathResult,
}

/// The champion (`winner_declared`'s data and the `winner` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Champion {
    pub seed: usize,
    pub model: String,
    /// Its answer: the run's answer.
    pub response: String,
    /// Its rounds, first to last.
    pub bracket_path: Vec<PathStep>,
    pub matches_won: usize,
    /// The rounds of the bracket.
    pub total_rounds: usize,
}

/// A round's decided matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Round {
    pub round: usize,
    /// Its matches by index (byes are not matches).
    pub matches: Vec<Match>,
}

/// A tournament's result, rebuilt from its stored rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TournamentResult {
    /// The contestants that answered, by seed.
    pub contestants: Vec<Contestant>,
    /// The bracket as seeded; null when fewer than two contestants answered.
    pub bracket: Option<Bracket>,
    /// The rounds played so far, in order, each with its decided matches.
    pub rounds: Vec<Round>,
    /// The champion; null while (or when) no champion was declared.
    pub champion: Option<Champion>,
    #[serde(flatten)]
    pub failures: Failures,
}

/// `{contestants, bracket, rounds: [{round, matches}], champion, partial, failedModels}` from
/// the stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let mut contestants: Vec<Contestant> = rows
        .iter()
        .filter(|r| r.stage_type == "collect")
        .filter_map(|r| {
            let seeding: Seeding = parsed(r)?;
            Some(Contestant {
                seed: seeding.seed,
                model: r.model.clone()?,
                response: r.content.clone(),
                response_time_ms: r.response_time_ms,
            })
        })
        .collect();
    contestants.sort_by_key(|c| c.seed);
    let bracket = rows.iter().find(|r| r.stage_type == "bracket_seed").and_then(parsed);
    let mut matches: Vec<Match> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("round_") && r.stage_type.contains("_match_"))
        .filter(|r| r.parsed_data.as_ref().and_then(|p| p.get("isBye")) != Some(&Value::Bool(true)))
        .filter_map(parsed)
        .map(|m: Match| Match { first_reply: None, ..m })
        .collect();
    matches.sort_by_key(|m| (m.round, m.match_index));
    let mut rounds: Vec<Round> = Vec::new();
    for m in matches {
        match rounds.last_mut() {
            Some(last) if last.round == m.round => last.matches.push(m),
            _ => rounds.push(Round { round: m.round, matches: vec![m] }),
        }
    }
    let champion = rows.iter().find(|r| r.stage_type == "winner").and_then(parsed);
    to_json(&TournamentResult {
        contestants,
        bracket,
        rounds,
        champion,
        failures: Failures::of(rows),
    })
}

// ---- the export's report -------------------------------------------------------------------

/// A seed as a reader reads it: `seed 2 (model)`, or `seed 2` when its model is not known.
fn seed_words(seed: usize, model: Option<&str>) -> String {
    match model {
        Some(m) => format!("seed {seed} ({m})"),
        None => format!("seed {seed}"),
    }
}

/// What decided a match, in words.
fn decided_words(by: DecidedBy) -> &'static str {
    match by {
        DecidedBy::Judge => "the judge",
        DecidedBy::JudgeRetry => "the judge, asked again",
        DecidedBy::CoinFlip => "a coin flip (the judge's verdict could not be read)",
        DecidedBy::DefaultSeed => "the better seed (the judge's call failed)",
    }
}

/// The result as the export's report: the champion, then the bracket round by round (each
/// match, who won and what decided it).
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<TournamentResult>(result) else { return String::new() };
    let model_of = |n: usize| r.contestants.iter().find(|c| c.seed == n).map(|c| c.model.as_str());
    let seed = |n: usize| seed_words(n, model_of(n));
    let mut out = String::new();
    if let Some(champ) = &r.champion {
        out.push_str(&format!(
            "**Champion:** {}, {} won\n\n",
            seed_words(champ.seed, Some(&champ.model)),
            count(champ.matches_won as u64, "match", "matches")
        ));
    }
    let byes: Vec<String> = r.bracket.iter().flat_map(|b| &b.byes).map(|&s| seed(s)).collect();
    if !byes.is_empty() {
        out.push_str(&format!("Through to round 2 without a match: {}.\n\n", byes.join(", ")));
    }
    for round in &r.rounds {
        out.push_str(&format!("**Round {}**\n\n", round.round));
        let rows: Vec<Vec<String>> = round
            .matches
            .iter()
            .map(|m| {
                let o = &m.outcome;
                vec![
                    m.match_index.to_string(),
                    seed(o.shown_as_a),
                    seed(o.shown_as_b),
                    seed_words(o.winner_seed, Some(&o.winner_model)),
                    decided_words(o.decided_by).to_string(),
                    o.reasoning.clone(),
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
