//! What a Fact-Check run stores and reads back: the result from the stored rows, its outcome and
//! the export's report.

use super::*;

// ---- payloads (one definition for live events and stored results) --------------------------

pub use crate::modes::payload::Data;

/// What the run checks with (`factcheck_start`'s `config`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartConfig {
    pub content_source: &'static str,
    pub extractor_model: String,
    pub checker_models: Vec<String>,
    pub reporter_model: String,
    pub max_content_length: usize,
    /// When no content was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generator_model: Option<String>,
    /// When the generator is also a checker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bias_warning: Option<String>,
}

/// The run's first event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FactCheckStart {
    pub config: StartConfig,
}

/// `generate_complete`'s data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateEvent {
    pub model: String,
    pub content: String,
    pub response_time_ms: i64,
}

/// The generate row's parsed data (the content is the row's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Generated {
    pub model: String,
    pub response_time_ms: i64,
}

/// The generator's answer in the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenerateResult {
    /// The generator's model.
    pub model: String,
    pub response_time_ms: i64,
    /// The content it wrote (what was checked, before any cut).
    pub content: String,
}

/// Claims by type, in the order of the types; a type with none is left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub struct TypeBreakdown {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistic: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub technical: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causal: Option<usize>,
    /// Claims with no type (or one not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untyped: Option<usize>,
}

/// The extraction (`extract_complete`'s data; the stored row adds the content and its source).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Extracted {
    /// The extractor's model.
    pub model: String,
    /// The checkable claims, in order.
    pub claims: Vec<Claim>,
    /// The claims by type.
    pub type_breakdown: TypeBreakdown,
    /// The content was cut to `maxContentLength` characters before it was read.
    pub truncated: bool,
    /// Claims could be read from the reply (or it stated there were none).
    pub parse_success: bool,
    pub response_time_ms: i64,
    /// The extractor the backup stood in for, when the backup listed the claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
    /// Whether the claims were read from the reply's JSON or its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    /// Claims the extractor listed that the content does not state (a figure, or most of their
    /// words, not in it), as it worded them: set aside, not checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_in_content: Vec<String>,
    /// In the stored row only (the result gives it at its top).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub content: Option<String>,
    /// In the stored row only (the result gives it at its top).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub content_source: Option<String>,
}

/// `verify_start`'s data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyStart {
    pub checker_count: usize,
    pub claim_count: usize,
}

/// The consensus (`all_checkers_complete`'s data and the computed row's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsensusData {
    pub consensus: Vec<Consensus>,
    pub counts: Counts,
    pub usable_checkers: usize,
}

/// The report's summary of the counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportSummary {
    pub verified: usize,
    pub disputed: usize,
    pub unverifiable: usize,
    /// When the content was cut: how much of it was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The report (`report_complete`'s data; the stored row leaves the text out, see
/// [`Report::row`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The reporter's model; null for the server's own report.
    pub model: Option<String>,
    /// The report (in the live event; the result gives it last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub report: Option<String>,
    /// The reliability score (0 to 100) the reporter stated, if it did.
    pub reliability_score: Option<u32>,
    /// The consensus counts.
    pub summary: ReportSummary,
    /// The reporter and its backup failed: the report is the server's table.
    pub fallback: bool,
    /// The reporter's time; null for the server's own report.
    pub response_time_ms: Option<i64>,
    /// The reporter the backup stood in for, when the backup wrote the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

impl Report {
    /// The keys in the order stored rows (and results rebuilt from them) have always had:
    /// `report` taken out of the live data by `Map::remove`, which under `preserve_order`
    /// moves the last key (`fallbackFrom`, else `responseTimeMs`) into its place.
    fn swapped(&self) -> serde_json::Map<String, Value> {
        let live = Report { report: Some(String::new()), ..self.clone() };
        match without(&live, "report") {
            Value::Object(o) => o,
            _ => serde_json::Map::new(),
        }
    }

    /// The stored row's parsed data.
    pub(super) fn row(&self) -> Value {
        Value::Object(self.swapped())
    }
}

/// The report in the result: as stored, with its text last.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct ReportResult {
    #[serde(flatten)]
    pub report: Report,
    /// The report's text (the reporter's, the server's table, or the note that there were no
    /// claims).
    #[serde(rename = "report")]
    pub text: String,
}

impl Serialize for ReportResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut keys = self.report.swapped();
        keys.insert("report".into(), self.text.clone().into());
        keys.serialize(s)
    }
}

// ---- the stored result ---------------------------------------------------------------------

/// A fact-check's result: the content, its claims, each checker's verdicts, each claim's
/// consensus and the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FactCheckResult {
    /// The content checked (cut to `maxContentLength`); null before it was known.
    pub content: Option<String>,
    /// `user_provided` or `generated`.
    pub content_source: Option<String>,
    /// The generator's answer, when the content was generated.
    pub generate: Option<GenerateResult>,
    /// The extraction.
    pub extract: Option<Extracted>,
    /// The checkable claims.
    pub claims: Vec<Claim>,
    /// Each checker's check, in checker order.
    pub checks: Vec<Check>,
    /// Each claim's consensus, in claim order; null before the checks were done.
    pub consensus: Option<Vec<Consensus>>,
    /// The verdict counts over the consensus.
    pub counts: Option<Counts>,
    /// The checkers whose check counted.
    pub usable_checkers: Option<usize>,
    /// The report.
    pub report: Option<ReportResult>,
    #[serde(flatten)]
    pub failures: Failures,
}

/// `{content, contentSource, generate, extract, claims, checks, consensus, counts,
/// usableCheckers, report, partial, failedModels}` from the stored rows, as the events gave
/// them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let generate = row("generate").and_then(|g| {
        let d: Generated = parsed(g)?;
        Some(GenerateResult {
            model: d.model,
            response_time_ms: d.response_time_ms,
            content: g.content.clone(),
        })
    });
    let stored: Option<Extracted> = row("extract").and_then(parsed);
    let (content, source) = match &stored {
        Some(e) => (e.content.clone(), e.content_source.clone()),
        None => (
            generate.as_ref().map(|g| g.content.clone()),
            generate.as_ref().map(|_| "generated".into()),
        ),
    };
    let extract = stored.map(|e| Extracted { content: None, content_source: None, ..e });
    let claims = extract.as_ref().map_or_else(Vec::new, |e| e.claims.clone());
    let mut checks: Vec<Check> = rows
        .iter()
        .filter(|r| {
            r.stage_type.strip_prefix("verify_").is_some_and(|n| n.parse::<usize>().is_ok())
        })
        .filter_map(parsed)
        .collect();
    checks.sort_by_key(|c| c.checker_index);
    let consensus: Option<ConsensusData> = row("consensus").and_then(parsed);
    let report = row("report")
        .and_then(|r| Some(ReportResult { report: parsed(r)?, text: r.content.clone() }));
    to_json(&FactCheckResult {
        content,
        content_source: source,
        generate,
        extract,
        claims,
        checks,
        consensus: consensus.as_ref().map(|c| c.consensus.clone()),
        counts: consensus.as_ref().map(|c| c.counts.clone()),
        usable_checkers: consensus.as_ref().map(|c| c.usable_checkers),
        report,
        failures: Failures::of(rows),
    })
}

pub(super) fn outcome(result: &Value) -> Option<String> {
    let r: FactCheckResult = typed(result)?;
    let rep = r.report.as_ref()?;
    let score = match rep.report.reliability_score {
        None => "no reliability score".to_string(),
        Some(v) => format!("reliability {v}/100"),
    };
    let Some(c) = &r.counts else {
        return Some(format!("no checkable claims: {}", short(&rep.text, 60)));
    };
    let noun = if c.total == 1 { "claim" } else { "claims" };
    Some(format!(
        "{score}: {} verified, {} disputed, {} unverifiable of {} {noun}",
        c.verified, c.disputed, c.unverifiable, c.total
    ))
}

// ---- the export's report -------------------------------------------------------------------

/// A verdict in words.
fn verdict_word(v: &str) -> &str {
    match v {
        "VERIFIED" => "verified",
        "DISPUTED" => "disputed",
        "UNVERIFIABLE" => "unverifiable",
        other => other,
    }
}

/// How a claim's consensus was reached, after its verdict: ` (split: 2 verified, 1 disputed)`
/// when the checkers split, else nothing.
fn split_words(k: &Consensus) -> String {
    if !k.split {
        return String::new();
    }
    let v = &k.votes;
    let split: Vec<String> = ["VERIFIED", "DISPUTED", "UNVERIFIABLE"]
        .iter()
        .zip([v.verified, v.disputed, v.unverifiable])
        .filter(|(_, n)| *n > 0)
        .map(|(v, n)| format!("{n} {}", verdict_word(v)))
        .collect();
    format!(" (split: {})", split.join(", "))
}

/// A checker's verdicts in a line: `2 verified, 1 disputed, 0 unverifiable`, or why it gave
/// none.
fn check_words(ch: &Check) -> String {
    use crate::modes::report::count;
    if ch.failed {
        return "its call failed".to_string();
    }
    if !ch.parse_success {
        return "no verdict could be read from its reply".to_string();
    }
    let (verified, disputed, unverifiable, unaddressed) = ch
        .summary
        .map_or((0, 0, 0, 0), |s| (s.verified, s.disputed, s.unverifiable, s.unaddressed));
    let mut l = format!("{verified} verified, {disputed} disputed, {unverifiable} unverifiable");
    if unaddressed > 0 {
        l.push_str(&format!(", {} not addressed", count(unaddressed as u64, "claim", "claims")));
    }
    l
}

/// The result as the export's report: the score, a table of the claims with their consensus,
/// and each checker's verdicts in a line.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<FactCheckResult>(result) else { return String::new() };
    let mut out = String::new();
    if let Some(score) = r.report.as_ref().and_then(|rep| rep.report.reliability_score) {
        out.push_str(&format!("**Reliability:** {score}/100\n\n"));
    }
    if r.claims.is_empty() {
        out.push_str("No checkable claims were found.\n");
        return out;
    }
    let consensus = r.consensus.as_deref().unwrap_or_default();
    let rows: Vec<Vec<String>> = r
        .claims
        .iter()
        .map(|c| {
            let k = consensus.iter().find(|k| k.claim_id == c.id);
            let verdict = k.map_or("not checked", |k| verdict_word(&k.verdict));
            vec![
                c.number.to_string(),
                c.text.clone(),
                format!("{verdict}{}", k.map_or(String::new(), split_words)),
                k.map_or("—".into(), |k| format!("{}%", k.agreement_rate)),
                k.map_or("—".into(), |k| k.consensus_confidence.to_lowercase()),
                k.and_then(|k| k.correction.clone()).unwrap_or_else(|| "—".into()),
            ]
        })
        .collect();
    out.push_str(&table(
        &["#", "claim", "verdict", "agreement", "confidence", "correction"],
        &rows,
        &[0, 3],
    ));
    let total = r.counts.as_ref().map_or(r.claims.len(), |c| c.total);
    let c = r.counts.unwrap_or_default();
    out.push_str(&format!(
        "\n{} verified, {} disputed, {} unverifiable of {}.\n",
        c.verified,
        c.disputed,
        c.unverifiable,
        count(total as u64, "claim", "claims")
    ));
    if !r.checks.is_empty() {
        out.push_str("\n**The checkers:**\n\n");
        for ch in &r.checks {
            out.push_str(&format!("- {}: {}\n", ch.model, check_words(ch)));
        }
    }
    out
}
