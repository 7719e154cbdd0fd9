//! The statistics of a round (numeric and qualitative), computed here and never by a model, and
//! the estimates, classification and rounds they are computed from.

use super::*;

use std::collections::BTreeMap;

use crate::modes::reading::Unparsed;

// ---- statistics -----------------------------------------------------------------------------

/// How many valid estimates gave each confidence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfidenceCounts {
    pub low: usize,
    pub medium: usize,
    pub high: usize,
}

fn count_confidence(estimates: &[&Estimate]) -> ConfidenceCounts {
    let n = |c: Confidence| estimates.iter().filter(|e| e.confidence == c).count();
    ConfidenceCounts {
        low: n(Confidence::Low),
        medium: n(Confidence::Medium),
        high: n(Confidence::High),
    }
}

/// A numeric round's statistics over its valid estimates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NumericStats {
    /// The mean estimate.
    pub mean: f64,
    /// The median estimate.
    pub median: f64,
    /// The population standard deviation.
    pub std_dev: f64,
    /// The lowest estimate.
    pub min: f64,
    /// The highest estimate.
    pub max: f64,
    /// stdDev / |mean|; infinite when the mean is 0 (JSON: null, with `highVariance`).
    #[serde(serialize_with = "finite_or_null", deserialize_with = "null_is_infinite")]
    #[schemars(with = "Option<f64>")]
    pub cv: f64,
    /// The spread is over 2 (or the mean is 0).
    pub high_variance: bool,
    /// How many estimates gave each confidence.
    pub confidence_counts: ConfidenceCounts,
}

fn finite_or_null<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

fn null_is_infinite<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

/// The seed's numeric statistics: population standard deviation, CV = stdDev/|mean|.
pub fn numeric_stats(values: &[f64], confidence: ConfidenceCounts) -> NumericStats {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = match sorted.len() {
        0 => 0.0,
        l if l % 2 == 0 => (sorted[l / 2 - 1] + sorted[l / 2]) / 2.0,
        l => sorted[l / 2],
    };
    let std_dev = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    let cv = if mean != 0.0 { std_dev / mean.abs() } else { f64::INFINITY };
    NumericStats {
        mean,
        median,
        std_dev,
        min: sorted.first().copied().unwrap_or(0.0),
        max: sorted.last().copied().unwrap_or(0.0),
        cv,
        high_variance: cv > 2.0,
        confidence_counts: confidence,
    }
}

/// How many panelists gave an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Share {
    /// The answer (as its first panelist wrote it; answers are grouped case-insensitively).
    pub answer: String,
    /// How many gave it.
    pub count: usize,
    /// Their share of the valid answers, in percent (one decimal).
    pub percentage: f64,
}

/// A qualitative round's statistics over its valid answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QualitativeStats {
    /// Most common first (ties by answer).
    pub distribution: Vec<Share>,
    /// The most common answer's share, in percent.
    pub agreement_percentage: f64,
    /// The most common answer.
    pub mode: String,
    /// How many answers gave each confidence.
    pub confidence_counts: ConfidenceCounts,
}

impl QualitativeStats {
    /// The shares in one line, most common first: `Yes 60%, No 40%`.
    pub(super) fn shares(&self) -> String {
        let d: Vec<String> = self
            .distribution
            .iter()
            .map(|d| format!("{} {}%", d.answer, fmt_num(d.percentage)))
            .collect();
        d.join(", ")
    }
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// The seed's qualitative statistics; answers are grouped case-insensitively.
pub fn qualitative_stats(answers: &[String], confidence: ConfidenceCounts) -> QualitativeStats {
    let mut groups: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for a in answers {
        groups.entry(a.to_lowercase()).or_insert_with(|| (a.clone(), 0)).1 += 1;
    }
    let total = answers.len().max(1) as f64;
    let mut distribution: Vec<Share> = groups
        .into_values()
        .map(|(answer, count)| Share {
            answer,
            count,
            percentage: round1(count as f64 * 100.0 / total),
        })
        .collect();
    distribution.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.answer.cmp(&b.answer)));
    QualitativeStats {
        agreement_percentage: distribution.first().map_or(0.0, |d| d.percentage),
        mode: distribution.first().map(|d| d.answer.clone()).unwrap_or_default(),
        distribution,
        confidence_counts: confidence,
    }
}

/// A round's statistics: numeric or qualitative.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Stats {
    Numeric(NumericStats),
    Qualitative(QualitativeStats),
}

impl Stats {
    pub(super) fn confidence_counts(&self) -> ConfidenceCounts {
        match self {
            Stats::Numeric(s) => s.confidence_counts,
            Stats::Qualitative(s) => s.confidence_counts,
        }
    }

    /// The convergence rule with the run's thresholds.
    pub fn converged(&self, cfg: &DelphiConfig) -> bool {
        match self {
            Stats::Numeric(s) => s.cv < cfg.numeric_convergence_threshold,
            Stats::Qualitative(s) => {
                s.agreement_percentage >= cfg.qualitative_convergence_threshold
            }
        }
    }

    pub(super) fn summary(&self, round: u32) -> String {
        match self {
            Stats::Numeric(s) => format!(
                "Round {round} Statistics: Mean={} Median={} StdDev={} CV={} Range={}-{}",
                fmt_num(s.mean),
                fmt_num(s.median),
                fmt_num(s.std_dev),
                fmt_num(s.cv),
                fmt_num(s.min),
                fmt_num(s.max)
            ),
            Stats::Qualitative(s) => format!(
                "Round {round} Statistics: {}. Agreement: {}%.",
                s.shares(),
                fmt_num(s.agreement_percentage)
            ),
        }
    }
}

// ---- estimates and rounds -------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EstimateValue {
    Number(f64),
    Answer(String),
    /// The answer could not be read.
    Unreadable,
}

impl EstimateValue {
    pub(super) fn as_number(&self) -> Option<f64> {
        if let EstimateValue::Number(v) = self {
            Some(*v)
        } else {
            None
        }
    }
    pub(super) fn as_answer(&self) -> Option<&str> {
        if let EstimateValue::Answer(a) = self {
            Some(a)
        } else {
            None
        }
    }
}

/// One panelist's answer in one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// 1-based position in the configured panel: stable across rounds.
    pub participant: usize,
    pub model: String,
    pub value: EstimateValue,
    pub confidence: Confidence,
    pub reasoning: String,
    pub previous: Option<EstimateValue>,
    pub changed: bool,
    /// Carried forward from the previous round (the call failed or was unreadable).
    pub carried: bool,
    /// Why this round's reply gave no answer, when it came but could not be read (its value
    /// is then unreadable, or carried forward from the previous round).
    pub unparsed: Option<Unparsed>,
    /// The reply named its confidence; when it did not, `confidence` is the default MEDIUM.
    pub confidence_stated: bool,
    pub response_time_ms: i64,
    pub text: String,
}

impl Estimate {
    pub(super) fn valid(&self) -> bool {
        !matches!(self.value, EstimateValue::Unreadable)
    }

    /// What this round's reply said (`estimate` or `answer`).
    fn said(&self, kind: QuestionType) -> Said {
        match kind {
            QuestionType::Numeric => Said::Estimate(self.value.as_number()),
            QuestionType::Qualitative => Said::Answer(self.value.as_answer().map(str::to_string)),
        }
    }

    fn marks(&self, read_from: Option<ReadFrom>) -> ReadMarks {
        ReadMarks {
            unparsed: self.unparsed,
            confidence_defaulted: !self.confidence_stated,
            read_from,
        }
    }

    /// The seed's `DelphiEstimate` (with model name: for the stored result); `read_from` is
    /// where this round's reply was read from, when it was.
    pub(super) fn full(&self, kind: QuestionType, read_from: Option<ReadFrom>) -> StoredEstimate {
        let prev = self.previous.as_ref().filter(|p| !matches!(p, EstimateValue::Unreadable));
        StoredEstimate {
            participant_index: self.participant,
            model: self.model.clone(),
            confidence: self.confidence,
            reasoning: self.reasoning.clone(),
            changed: self.changed,
            carried_forward: self.carried,
            response_time_ms: self.response_time_ms,
            marks: self.marks(read_from),
            said: self.said(kind),
            before: match kind {
                QuestionType::Numeric => {
                    SaidBefore::Estimate(prev.and_then(EstimateValue::as_number))
                }
                QuestionType::Qualitative => {
                    SaidBefore::Answer(prev.and_then(|p| p.as_answer()).map(str::to_string))
                }
            },
        }
    }

    /// The seed's anonymous `DelphiEstimateSummary` for live events.
    pub(super) fn summary(
        &self,
        kind: QuestionType,
        read_from: Option<ReadFrom>,
    ) -> EstimateSummary {
        EstimateSummary {
            participant_index: self.participant,
            confidence: self.confidence,
            changed: self.changed,
            said: self.said(kind),
            marks: self.marks(read_from),
        }
    }
}

/// What a round's reply said: a number or an answer, null when it could not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub enum Said {
    /// The estimate (a numeric question).
    #[serde(rename = "estimate")]
    Estimate(Option<f64>),
    /// The answer (a qualitative question).
    #[serde(rename = "answer")]
    Answer(Option<String>),
}

/// What the panelist said the round before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub enum SaidBefore {
    /// The previous round's estimate (a numeric question).
    #[serde(rename = "previousEstimate")]
    Estimate(Option<f64>),
    /// The previous round's answer (a qualitative question).
    #[serde(rename = "previousAnswer")]
    Answer(Option<String>),
}

/// How an estimate was read: `unparsed` (why the reply gave no answer),
/// `confidenceDefaulted` and `readFrom`, when they apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadMarks {
    /// Why this round's reply gave no answer, when it came but could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    /// The reply stated no confidence: MEDIUM is assumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confidence_defaulted: bool,
    /// Where this round's reply was read from (its JSON or its text), when it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// A panelist's estimate as a round's row keeps it (without the round and type it adds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredEstimate {
    /// The panelist's 1-based place in the configured panel (stable across rounds).
    pub participant_index: usize,
    /// The panelist's model.
    pub model: String,
    /// LOW, MEDIUM or HIGH.
    pub confidence: Confidence,
    /// The reasoning it gave.
    pub reasoning: String,
    /// The answer differs from the panelist's previous round's.
    pub changed: bool,
    /// The previous answer carried forward (this round's call failed or was unreadable).
    pub carried_forward: bool,
    /// How long its call took, in milliseconds.
    pub response_time_ms: i64,
    #[serde(flatten)]
    pub marks: ReadMarks,
    #[serde(flatten)]
    pub said: Said,
    #[serde(flatten)]
    pub before: SaidBefore,
}

/// A round's row: the estimate, its round and the question's type.
#[derive(Serialize)]
pub struct EstimateRow<'a> {
    #[serde(flatten)]
    pub estimate: &'a StoredEstimate,
    pub round: u32,
    #[serde(rename = "type")]
    pub kind: QuestionType,
}

/// An anonymous estimate in `round_complete`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EstimateSummary {
    pub participant_index: usize,
    pub confidence: Confidence,
    pub changed: bool,
    #[serde(flatten)]
    pub said: Said,
    #[serde(flatten)]
    pub marks: ReadMarks,
}

/// A round's statistics row: the statistics, the round, `type: stats` and whether it converged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsRow {
    #[serde(flatten)]
    pub stats: Stats,
    pub round: u32,
    /// `stats`.
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub converged: bool,
}

/// How the question was read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Classification {
    /// `numeric` or `qualitative`.
    #[serde(rename = "type")]
    pub kind: QuestionType,
    /// The answers a qualitative question offers; null for a numeric one, or free-form answers.
    pub options: Option<Vec<String>>,
    /// Why (the facilitator's words, or that the request set it).
    pub reasoning: String,
    /// The facilitator the backup stood in for, when the backup classified the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
    /// Why the facilitator's reply could not be read, when the fallback type was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    /// Where the facilitator's classification was read from (its JSON or its text), when it
    /// was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RoundRecord {
    pub round: u32,
    pub estimates: Vec<Estimate>,
    pub stats: Stats,
    pub converged: bool,
}

/// The final value: the last round's mean (numeric) or its most common answer (qualitative).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum FinalValue {
    Number(f64),
    Answer(String),
}

pub(super) fn stats_of(kind: QuestionType, estimates: &[Estimate]) -> Stats {
    let valid: Vec<&Estimate> = estimates.iter().filter(|e| e.valid()).collect();
    let conf = count_confidence(&valid);
    match kind {
        QuestionType::Numeric => Stats::Numeric(numeric_stats(
            &valid.iter().filter_map(|e| e.value.as_number()).collect::<Vec<_>>(),
            conf,
        )),
        QuestionType::Qualitative => Stats::Qualitative(qualitative_stats(
            &valid
                .iter()
                .filter_map(|e| e.value.as_answer().map(str::to_string))
                .collect::<Vec<_>>(),
            conf,
        )),
    }
}
