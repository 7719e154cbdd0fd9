//! What a Clarity run stores and reads back: the payloads of its events and rows,
//! `load_result` and the export's report.

use super::*;

use crate::modes::reading::Unparsed;

// ---- payloads (one definition for live events and stored results) --------------------------

pub use crate::modes::payload::Data;

/// `clarity_start`: the run and the model of each persona.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Start<'a> {
    pub models: &'a BTreeMap<String, String>,
}

/// The `brief` row's parsed data (its content is the brief).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BriefRow {
    pub title: Option<String>,
    pub context: Option<String>,
}

/// The brief scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Brief {
    pub content: String,
    pub title: Option<String>,
    pub context: Option<String>,
}

/// `discussion_start`'s data.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscussionStart {
    pub max_spread: f64,
}

/// What an evaluator changed in the discussion (`discussion_complete`'s `changes`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change<'a> {
    pub role: &'a str,
    pub changed_dimensions: Vec<&'static str>,
    pub justification: Option<String>,
    /// Its revision could not be read (it keeps its first verdict).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<bool>,
    /// Why, when it answered (null when that is not known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Option<Unparsed>>,
}

/// `discussion_complete`'s data.
#[derive(Debug, Serialize)]
pub struct DiscussionDone<'a> {
    pub verdicts: &'a [Verdict],
    pub changes: Vec<Change<'a>>,
    pub disagreement: &'a Disagreement,
}

/// `arbiter_start`'s data.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArbiterStart<'a> {
    pub disputed_dimensions: &'a [String],
    pub model: String,
}

/// The Arbiter's ruling (`arbiter_complete`'s data and the `arbiter` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArbiterRuling {
    /// The model that ruled.
    pub model: String,
    /// Its score (0-10) by disputed dimension it scored.
    pub scores: BTreeMap<String, f64>,
    pub reasoning: Option<String>,
    /// How long its call took, in milliseconds.
    pub response_time_ms: u64,
    /// Why its call failed, when it did.
    pub error: Option<String>,
    /// Where its scores were read from (its JSON or its text), when any were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    /// Why no score could be read from its answer, when none was.
    pub unparsed: Option<Unparsed>,
    /// The Arbiter the backup stood in for, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// How the final score was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// The median of the evaluators' scores on each dimension, weighted.
    Median,
    /// The same after the evaluators' discussion.
    PostDiscussion,
    /// The evaluators' scores with the Arbiter's counted 1.5 times on the disputed dimensions.
    Arbiter,
}

impl Method {
    /// Its name in the answer (`post-discussion`).
    pub fn words(self) -> &'static str {
        match self {
            Method::Median => "median",
            Method::PostDiscussion => "post-discussion",
            Method::Arbiter => "arbiter",
        }
    }
}

/// A dimension's final score and how it was reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DimensionScore {
    /// The dimension's key (`evidenceQuality`).
    pub dimension: String,
    /// Its name (`Evidence Quality`).
    pub name: String,
    /// Its weight in the overall score (the weights add up to 1).
    pub weight: f64,
    /// Its final score (0-10); null when no evaluator scored it.
    pub score: Option<f64>,
    /// Each evaluator's (current) score by persona.
    pub evaluator_scores: BTreeMap<String, Option<f64>>,
    /// The Arbiter's score, when it ruled on this dimension.
    pub arbiter_score: Option<f64>,
}

/// The score (`score_complete`'s data and the `score` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    /// The weighted overall score, 0-10.
    pub score: f64,
    pub method: Method,
    /// Every dimension's final score.
    pub breakdown: Vec<DimensionScore>,
    /// The top issues (at most 5), most agreed and most severe first.
    pub critique: Vec<CritiqueItem>,
    /// The evaluators still disagreed after discussion: the run is flagged for a person.
    pub needs_human_review: bool,
    /// Why it is flagged, when it is.
    pub review_reason: Option<String>,
    pub discussion_ran: bool,
    /// The disagreement before any discussion.
    pub initial_disagreement: Disagreement,
    /// The disagreement the score was reached from.
    pub final_disagreement: Disagreement,
    /// The evaluators' verdicts as they stood at the end.
    pub verdicts: Vec<Verdict>,
}

/// A Clarity run's result, rebuilt from its stored rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClarityResult {
    /// The brief scored; null before it was stored.
    pub brief: Option<Brief>,
    /// Every evaluator's first verdict (readable or not).
    pub evaluations: Vec<Verdict>,
    /// How far the readable first verdicts were apart; null before they were all in.
    pub initial_disagreement: Option<Disagreement>,
    /// Every evaluator's revision in the discussion, when one ran.
    pub discussion: Vec<Verdict>,
    /// The Arbiter's ruling, when it was called and answered.
    pub arbiter: Option<ArbiterRuling>,
    /// The score; null before it was reached.
    pub score: Option<Score>,
    #[serde(flatten)]
    pub failures: Failures,
}

/// The clarity result from stored rows: the brief, every evaluator's verdict before and after
/// discussion, the Arbiter, and the score with its method.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let brief = of("brief").next().map(|r| {
        let b: BriefRow = parsed(r).unwrap_or_default();
        Brief { content: r.content.clone(), title: b.title, context: b.context }
    });
    to_json(&ClarityResult {
        brief,
        evaluations: of("evaluation").filter_map(parsed).collect(),
        initial_disagreement: of("disagreement").next().and_then(parsed),
        discussion: of("discussion").filter_map(parsed).collect(),
        arbiter: of("arbiter").next().and_then(parsed),
        score: of("score").next().and_then(parsed),
        failures: Failures::of(rows),
    })
}

// ---- the export's report -------------------------------------------------------------------

/// A score in words: one decimal at most (`7`, `7.5`).
fn score_words(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").unwrap_or(&s).to_string()
}

/// A persona's role (`skeptic`) by its name (`Skeptic`); the arbiter and unknown roles as is.
fn role_name(role: &str) -> String {
    match PERSONAS.iter().find(|p| p.role == role) {
        Some(p) => p.name.to_string(),
        None if role == "arbiter" => "Arbiter".to_string(),
        None => role.to_string(),
    }
}

/// A dimension's key (`evidenceQuality`) by its name (`Evidence Quality`).
fn dimension_name(key: &str) -> &str {
    DIMENSIONS.iter().find(|d| d.key == key).map_or(key, |d| d.name)
}

/// `Skeptic (model)`, or the role's name alone when the model is not known.
fn evaluator(v: &Verdict) -> String {
    let role = role_name(&v.role);
    if v.model.is_empty() {
        role
    } else {
        format!("{role} ({})", v.model)
    }
}

/// `; it declined` when a reply was not read for a reason that has words.
fn why(unparsed: Option<Unparsed>) -> String {
    unparsed.map_or(String::new(), |u| format!("; it {}", u.describe()))
}

/// The one line a list shows: the score, and whether it was flagged for review.
pub(super) fn outcome(result: &Value) -> Option<String> {
    let score = typed::<ClarityResult>(result)?.score?;
    let mut line = format!("score {:.1}/10", score.score);
    if score.needs_human_review {
        line.push_str(" · flagged for review");
    }
    Some(line)
}

/// The result as the export's report: the score and how it was reached, whether the run was
/// flagged for human review and why, the scorecards as a table (each dimension with its
/// weight, each evaluator's score, changes made in discussion, the Arbiter's ruling and the
/// final score), the scorecards that could not be read, and the top issues.
pub fn report(result: &Value) -> String {
    use crate::modes::report::table;
    let Some(r) = typed::<ClarityResult>(result) else { return String::new() };
    let mut out = String::new();
    let score = r.score.as_ref();
    if let Some(score) = score {
        let method = match score.method {
            Method::Median => "the median of the evaluators' scores on each dimension, weighted",
            Method::PostDiscussion => {
                "the median of the evaluators' scores on each dimension after their discussion, weighted"
            }
            Method::Arbiter => {
                "the evaluators' scores with the Arbiter's counted one and a half times on the disputed dimensions, weighted"
            }
        };
        out.push_str(&format!("**Clarity score:** {}/10, {method}.\n", score_words(score.score)));
        if score.needs_human_review {
            let reason = score.review_reason.as_deref().unwrap_or("").trim();
            out.push_str(&format!("\n**Flagged for human review:** {reason}\n"));
        } else {
            out.push_str(&format!(
                "\n**Not flagged for review:** the evaluators' scores were within {} points of each other on every dimension.\n",
                score_words(DISAGREEMENT_SPREAD)
            ));
        }
        out.push('\n');
    }
    // The scorecards that count: as they stood at the end, else the first readable ones.
    let current: Vec<&Verdict> = match score.map(|s| &s.verdicts) {
        Some(v) if !v.is_empty() => v.iter().collect(),
        _ => r.evaluations.iter().filter(|e| e.parse_success).collect(),
    };
    if !current.is_empty() {
        let first = |role: &str| r.evaluations.iter().find(|e| e.role == role);
        let breakdown = score.map_or(&[][..], |s| &s.breakdown);
        let of = |key: &str| breakdown.iter().find(|b| b.dimension == key);
        let arbiter: Vec<Option<f64>> =
            DIMENSIONS.iter().map(|d| of(d.key).and_then(|b| b.arbiter_score)).collect();
        let ruled = arbiter.iter().any(Option::is_some);
        let mut head: Vec<String> = vec!["dimension".into(), "weight".into()];
        head.extend(current.iter().map(|v| evaluator(v)));
        if ruled {
            head.push("Arbiter".into());
        }
        if !breakdown.is_empty() {
            head.push("final".into());
        }
        let mut rows: Vec<Vec<String>> = DIMENSIONS
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut row = vec![d.name.to_string(), format!("{:.0}%", d.weight * 100.0)];
                for v in &current {
                    let before = first(&v.role).and_then(|e| e.scores[i]);
                    row.push(match (v.scores[i], before) {
                        (Some(n), Some(b)) if n != b => {
                            format!("{} (was {})", score_words(n), score_words(b))
                        }
                        (Some(n), _) => score_words(n),
                        (None, _) => "unread".into(),
                    });
                }
                if ruled {
                    row.push(arbiter[i].map_or(String::new(), score_words));
                }
                if !breakdown.is_empty() {
                    let fin = of(d.key).and_then(|b| b.score);
                    row.push(fin.map_or("unread".into(), score_words));
                }
                row
            })
            .collect();
        let mut overall = vec!["overall".to_string(), "100%".to_string()];
        overall.extend(current.iter().map(|v| v.overall.map_or(String::new(), score_words)));
        if ruled {
            overall.push(String::new());
        }
        if let Some(s) = score.filter(|_| !breakdown.is_empty()) {
            overall.push(score_words(s.score));
        }
        rows.push(overall);
        let right: Vec<usize> = (1..head.len()).collect();
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        out.push_str(&table(&head, &rows, &right));
        if score.is_some_and(|s| s.discussion_ran) {
            out.push_str(
                "\nThe evaluators discussed their scores after reading each other's; a score they changed shows what it was.\n",
            );
        }
        out.push('\n');
    }
    let mut unread = Vec::new();
    for (list, what) in [
        (&r.evaluations, "its scorecard could not be read"),
        (&r.discussion, "its revised scorecard could not be read, so its first scores stand"),
    ] {
        for v in list.iter().filter(|v| !v.parse_success) {
            unread.push(format!("- {}: {what}{}\n", evaluator(v), why(v.unparsed)));
        }
    }
    if !unread.is_empty() {
        out.push_str("**Not read:**\n\n");
        out.push_str(&unread.concat());
        out.push('\n');
    }
    if let Some(arb) = &r.arbiter {
        let standing_in = arb
            .fallback_from
            .as_ref()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        let ruled: Vec<String> = arb
            .scores
            .iter()
            .map(|(k, v)| format!("{} {}", dimension_name(k), score_words(*v)))
            .collect();
        let said = if ruled.is_empty() {
            format!("no ruling could be read{}, so the evaluators' scores stand", why(arb.unparsed))
        } else {
            format!("ruled {}", ruled.join(", "))
        };
        out.push_str(&format!("**Arbiter** ({}{standing_in}): {said}.\n\n", arb.model));
    } else if score.is_some_and(|s| s.needs_human_review) {
        out.push_str(
            "**Arbiter:** no ruling (its call failed), so the evaluators' scores stand.\n\n",
        );
    }
    let critique = score.map_or(&[][..], |s| &s.critique);
    if !critique.is_empty() {
        out.push_str("**Top issues:**\n\n");
        for (n, c) in critique.iter().enumerate() {
            let flat = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
            let by: Vec<String> = c.flagged_by.iter().map(|r| role_name(r)).collect();
            let mut about = vec![format!("{} priority", c.priority)];
            if !by.is_empty() {
                let by = match by.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} and {last}", rest.join(", "))
                    }
                    _ => by.concat(),
                };
                about.push(format!("raised by {by}"));
            }
            let mut line = format!(
                "{}. {} ({}): {}",
                n + 1,
                dimension_name(&flat(&c.dimension)),
                about.join(", "),
                flat(&c.issue)
            );
            let fix = flat(&c.suggested_fix);
            if !fix.is_empty() {
                line.push_str(&format!("; suggested fix: {fix}"));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
