//! What a red-team run stores and reads back: its rounds and totals, the result, its outcome
//! and the export's report.

use super::*;

// ---- payloads (one definition for live events and stored results) --------------------------

pub use crate::modes::payload::Data;

/// `attack_start`'s and `defend_start`'s payload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RoundStart {
    pub round: u32,
}

/// `attack_complete`'s and `defend_complete`'s payload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundData<T> {
    pub round: u32,
    pub data: T,
}

/// The run's first event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RedTeamStart {
    pub total_rounds: u32,
}

/// How many of something there are at each severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub struct SeverityCounts {
    pub critical: usize,
    pub high: usize,
    pub medium: usize,
    pub low: usize,
}

/// The material laid out by the generator (`generate_complete`'s data, and the stored row's
/// parsed data, which holds the material instead of the text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Generated {
    /// The generator's model.
    pub model: String,
    /// The content the rounds attack: the generator's structured version of the material, or
    /// the material itself when the generator failed.
    pub structured_content: Option<String>,
    /// The generator failed and the material went on as it was.
    pub fallback: bool,
    pub response_time_ms: u64,
    /// In the stored row only (the result gives it at its top).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub material: Option<Material>,
}

/// An attack (`attack_complete`'s data and the stored row's parsed data).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Attack {
    /// The attacker's model.
    pub model: String,
    /// The findings read from the attacker's report, numbered 1..k.
    pub findings: Vec<Finding>,
    /// The findings at each severity.
    pub severity_counts: SeverityCounts,
    /// The summary the attacker wrote, if any.
    pub reported_summary: Option<String>,
    /// The overall risk as the attacker put it, if it did.
    pub overall_risk: Option<String>,
    /// The attacker said it found no flaws (the rounds end).
    pub no_flaws: bool,
    /// The report could be read.
    pub parse_success: bool,
    /// Why a report that came back could not be read (it declined, stopped while reasoning, or
    /// stated no finding in a form that can be read), when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    /// The attacker's call failed (the rounds end).
    pub failed: bool,
    pub response_time_ms: u64,
    /// Whether the report was read from its JSON or its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// A defense (`defend_complete`'s data, with the revised content; the stored row gives its
/// length instead, see [`Defense::row`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Defense {
    /// The defender's (the generator's) model.
    pub model: String,
    /// One response per finding, in finding order.
    pub responses: Vec<Response>,
    /// Findings accepted (and revised for).
    pub accepted: usize,
    /// Findings rebutted.
    pub rebutted: usize,
    /// Findings the defense did not answer.
    pub unaddressed: usize,
    /// The content after this round (in the live event; the stored row gives its length
    /// instead, and the result gives it last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub revised_content: Option<String>,
    /// The defender gave a revised content (else the content went on as it was).
    pub revised_content_found: bool,
    /// The defender's call failed.
    pub failed: bool,
    pub response_time_ms: u64,
    /// Whether the defense was read from its JSON or its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

impl Defense {
    /// The keys in the order stored rows (and results rebuilt from them) have always had:
    /// `revisedContent` taken out of the live data by `Map::remove`, which under
    /// `preserve_order` moves the last key (`readFrom`, else `responseTimeMs`) into its place.
    fn swapped(&self) -> serde_json::Map<String, Value> {
        let live = Defense { revised_content: Some(String::new()), ..self.clone() };
        match without(&live, "revisedContent") {
            Value::Object(o) => o,
            _ => serde_json::Map::new(),
        }
    }

    /// The stored row's parsed data: the revised content's length in place of the text.
    pub(super) fn row(&self, revised_content_length: usize) -> Value {
        let mut keys = self.swapped();
        keys.insert("revisedContentLength".into(), revised_content_length.into());
        Value::Object(keys)
    }
}

/// Totals over every round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Findings over every round.
    pub findings: usize,
    /// Those findings at each severity.
    pub by_severity: SeverityCounts,
    /// Findings the defender accepted.
    pub accepted: usize,
    /// Findings the defender rebutted.
    pub rebutted: usize,
    /// Findings no defense answered.
    pub unaddressed: usize,
    /// The accepted findings at each severity.
    pub accepted_by_severity: SeverityCounts,
}

/// The hardened output (`synthesize_complete`'s data and the stored row's parsed data).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Synthesis {
    /// The model that wrote it.
    pub model: String,
    /// The hardened content.
    pub hardened_output: String,
    /// The synthesizer's summary of the audit, if it wrote one.
    pub audit_summary: Option<String>,
    /// How confident the synthesizer is in the hardening, as it put it.
    pub hardening_confidence: Option<String>,
    /// Totals over every round.
    pub totals: Totals,
    /// Why the rounds ended early: `no flaws`, `attacker failed` or `global timeout`.
    pub stop_reason: Option<String>,
    pub response_time_ms: u64,
    /// The synthesizer the backup stood in for, when the backup wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// One round's findings and the responses to them (every finding unaddressed until the
/// defense answers).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Round {
    pub(super) round: u32,
    pub(super) findings: Vec<Finding>,
    pub(super) responses: Vec<Response>,
}

/// Every finding without a response.
pub(super) fn unaddressed(findings: &[Finding]) -> Vec<Response> {
    read_defense("", findings).responses
}

/// Totals over every round: findings, by severity, verdicts, accepted by severity.
pub(super) fn totals(rounds: &[Round]) -> Totals {
    let all: Vec<&Response> = rounds.iter().flat_map(|r| r.responses.iter()).collect();
    let count = |v: &str| all.iter().filter(|r| r.verdict == v).count();
    Totals {
        findings: all.len(),
        by_severity: severity_counts(all.iter().map(|r| r.severity.as_str())),
        accepted: count("ACCEPT"),
        rebutted: count("REBUT"),
        unaddressed: count("UNADDRESSED"),
        accepted_by_severity: severity_counts(
            all.iter().filter(|r| r.verdict == "ACCEPT").map(|r| r.severity.as_str()),
        ),
    }
}

// ---- the stored result ---------------------------------------------------------------------

/// A round of the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResultRound {
    /// The round's number, from 1.
    pub round: u32,
    /// The attack.
    pub attack: Attack,
    /// The defense; null when the rounds ended before it.
    pub defense: Option<ResultDefense>,
}

/// A defense in the result: as it went out live (in its stored row's order), with the content
/// as revised so far last.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultDefense {
    #[serde(flatten)]
    pub defense: Defense,
    /// The content after this round: the defender's revision, else the content carried on.
    pub revised_content: String,
}

impl Serialize for ResultDefense {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut keys = self.defense.swapped();
        keys.insert("revisedContent".into(), self.revised_content.clone().into());
        keys.serialize(s)
    }
}

/// A red-team run's result: the material, its structured version, each round's attack and
/// defense, the totals and the hardened output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RedTeamResult {
    /// What the run red-teamed (null before the generator answered).
    pub material: Option<Material>,
    /// The generator's structured version of the material.
    pub generate: Option<Generated>,
    /// Each round, in order.
    pub rounds: Vec<ResultRound>,
    /// Totals over every round.
    pub totals: Totals,
    /// The hardened output; null when the synthesis is missing.
    pub synthesis: Option<Synthesis>,
    #[serde(flatten)]
    pub failures: Failures,
}

/// `{material, generate, rounds: [{round, attack, defense}], totals, synthesis, partial,
/// failedModels}` from the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let gen = row("generate");
    let stored: Option<Generated> = gen.and_then(parsed);
    let material = stored.as_ref().and_then(|g| g.material.clone());
    let generate = gen.zip(stored).map(|(g, d)| Generated {
        structured_content: Some(g.content.clone()),
        material: None,
        ..d
    });
    let mut current = gen.map(|g| g.content.clone()).unwrap_or_default();
    let mut rounds: Vec<Round> = Vec::new();
    let mut list: Vec<ResultRound> = Vec::new();
    for r in 1..=3u32 {
        let Some(attack) = row(&format!("attack_round_{r}")).and_then(parsed::<Attack>) else {
            break;
        };
        let findings = attack.findings.clone();
        let mut round = Round { round: r, responses: unaddressed(&findings), findings };
        let mut defense = None;
        if let Some((d, data)) =
            row(&format!("defend_round_{r}")).and_then(|d| Some((d, parsed::<Defense>(d)?)))
        {
            // The revised text is the reply's own (read again, by the schema it was read by),
            // else the content carried forward.
            if data.revised_content_found {
                let schema = defense_schema(round.findings.len(), current.chars().count());
                if let Some(t) =
                    read_defense_reply(&d.content, &round.findings, &schema).0.revised_content
                {
                    current = t;
                }
            }
            round.responses = data.responses.clone();
            defense = Some(ResultDefense { defense: data, revised_content: current.clone() });
        }
        list.push(ResultRound { round: r, attack, defense });
        rounds.push(round);
    }
    to_json(&RedTeamResult {
        material,
        generate,
        rounds: list,
        totals: totals(&rounds),
        synthesis: row("synthesis").and_then(parsed),
        failures: Failures::of(rows),
    })
}

pub(super) fn outcome(result: &Value) -> Option<String> {
    let r: RedTeamResult = typed(result)?;
    let s = r.synthesis.as_ref()?;
    let t = &r.totals;
    let confidence = s.hardening_confidence.as_deref().unwrap_or("not stated");
    Some(format!(
        "{} findings ({} accepted, {} rebutted, {} unaddressed); hardening confidence {confidence}: {}",
        t.findings,
        t.accepted,
        t.rebutted,
        t.unaddressed,
        short(&s.hardened_output, 60)
    ))
}

// ---- the export's report -------------------------------------------------------------------

/// A severity as a reader reads it: `critical`, or `not stated (medium used)` when the attacker
/// stated none.
fn severity_words(f: &Finding) -> String {
    let s = f.severity.to_lowercase();
    if f.severity_defaulted {
        format!("not stated ({s} used)")
    } else if s.is_empty() {
        "not stated".into()
    } else {
        s
    }
}

/// `2 critical, 1 high` from severity counts (the levels with none left out).
fn by_severity(c: &SeverityCounts) -> String {
    SEVERITIES
        .iter()
        .zip([c.critical, c.high, c.medium, c.low])
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{n} {}", s.to_lowercase()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The defender's verdict on one finding and what it said: `accepted` with the revision,
/// `rebutted` with the reasoning.
fn defense_words(response: Option<&Response>, defended: bool) -> (String, String) {
    let Some(r) = response else {
        let v = if defended { "not answered" } else { "no defense" };
        return (v.into(), String::new());
    };
    let text = |t: &Option<String>| t.clone().unwrap_or_default();
    match r.verdict.as_str() {
        "ACCEPT" => ("accepted".into(), text(&r.revision)),
        "REBUT" if r.verdict_defaulted => {
            ("rebutted (no verdict stated)".into(), text(&r.reasoning))
        }
        "REBUT" => ("rebutted".into(), text(&r.reasoning)),
        _ => ("not answered".into(), String::new()),
    }
}

/// The result as the export's report: who hardened the content and how confidently, why the
/// rounds ended early, each round's findings as a table (severity, finding, where, the
/// defender's verdict and answer), and the totals.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<RedTeamResult>(result) else { return String::new() };
    let mut out = String::new();
    if let Some(s) = &r.synthesis {
        let confidence =
            s.hardening_confidence.as_deref().map_or("not stated".into(), str::to_lowercase);
        out.push_str(&format!(
            "**Hardened output:** by {}; hardening confidence {confidence}.\n\n",
            s.model
        ));
        let stop = match s.stop_reason.as_deref() {
            Some("no flaws") => Some("the attacker found no flaws"),
            Some("attacker failed") => Some("the attacker's call failed"),
            Some("global timeout") => Some("the run's time limit passed"),
            _ => None,
        };
        if let Some(why) = stop {
            out.push_str(&format!("**The rounds ended early:** {why}.\n\n"));
        }
    }
    for round in &r.rounds {
        let (a, d) = (&round.attack, round.defense.as_ref().map(|d| &d.defense));
        let defender = d.map_or(String::new(), |d| format!(", defender {}", d.model));
        out.push_str(&format!("**Round {}** (attacker {}{defender})\n\n", round.round, a.model));
        if a.failed {
            out.push_str("The attacker's call failed.\n\n");
            continue;
        }
        if a.findings.is_empty() {
            out.push_str(if a.no_flaws {
                "The attacker found no flaws.\n\n"
            } else {
                "No finding could be read from the attacker's report.\n\n"
            });
            continue;
        }
        let responses = d.map_or(&[][..], |d| &d.responses);
        let rows: Vec<Vec<String>> = a
            .findings
            .iter()
            .map(|f| {
                let resp = responses.iter().find(|x| x.finding == f.number);
                let (verdict, answer) = defense_words(resp, d.is_some());
                vec![
                    f.number.to_string(),
                    severity_words(f),
                    f.title.clone(),
                    f.location.clone().unwrap_or_default(),
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
        if let Some(risk) = &a.overall_risk {
            notes.push(format!("Overall risk as the attacker put it: {}.", risk.to_lowercase()));
        }
        match d {
            Some(d) if d.failed => {
                notes.push("The defender's call failed: the findings went unanswered.".into())
            }
            Some(d) if !d.revised_content_found => notes.push(
                "The defender gave no revised content: the content went on as it was.".into(),
            ),
            Some(_) => notes.push("The defender revised the content.".into()),
            None => {}
        }
        if !notes.is_empty() {
            out.push_str(&format!("{}\n\n", notes.join(" ")));
        }
    }
    let t = &r.totals;
    if t.findings > 0 {
        let severities = by_severity(&t.by_severity);
        let severities =
            if severities.is_empty() { String::new() } else { format!(" ({severities})") };
        out.push_str(&format!(
            "**Totals:** {}{severities}: {} accepted, {} rebutted, {} not answered.\n",
            count(t.findings as u64, "finding", "findings"),
            t.accepted,
            t.rebutted,
            t.unaddressed,
        ));
    }
    out
}
