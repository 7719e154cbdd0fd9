//! What a panel run stores and reads back: the reports, the result, its outcome and the
//! export's report.

use super::*;
use crate::modes::common::FailedModel;

/// A finished report, as `specialist_complete` gives it (the stored row: less the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpecialistReport {
    /// The specialist's place on the panel (from 0).
    pub index: usize,
    /// Its role's key (`security_expert`, `custom_<title>`…).
    pub role_key: String,
    /// Its role's title.
    pub role_title: String,
    /// The model that wrote the report.
    pub model: String,
    /// The report's text.
    #[serde(default)]
    pub report: String,
    /// Each criterion's rating (1-5, null when unread) and notes.
    pub criteria_scores: Vec<CriterionScore>,
    /// The mean of the ratings read, to one decimal; null when none was.
    pub average_score: Option<f64>,
    /// The report's key findings.
    pub key_findings: Vec<String>,
    /// Its first three recommendations.
    pub top_recommendations: Vec<String>,
    /// At least one rating was read.
    pub parse_success: bool,
    /// Why no rating could be read (it declined, stopped while reasoning, or stated none in a
    /// form that can be read), when none could.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    /// Where the ratings were read from (the report's JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    /// How long the call took, in milliseconds.
    pub response_time_ms: i64,
}

/// A specialist whose call failed (or whose reply was empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedSpecialist {
    /// Its role's key.
    pub role_key: String,
    /// Its role's title.
    pub role_title: String,
    /// The model that was asked.
    pub model: String,
    /// Why the call failed.
    pub error: String,
}

/// A specialist's role as `panel_start` and the panel row give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PanelRole {
    /// The role's key (`security_expert`, `custom_<title>`…).
    pub role_key: String,
    /// The role's title.
    pub role_title: String,
    /// The model asked in it.
    pub model: String,
    /// The criteria it rates.
    pub criteria: Vec<String>,
}

/// `panel_start`'s data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PanelStart<'a> {
    pub roles: &'a [PanelRole],
}

/// The panel row's data.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PanelRow {
    pub material: Material,
    pub roles: Vec<PanelRole>,
    pub synthesizer_model: String,
}

/// `specialist_start`'s data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecialistStart {
    pub total_specialists: usize,
}

/// `all_specialists_complete`'s data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllSpecialistsDone<'a> {
    pub specialists: &'a [&'a SpecialistReport],
    pub failed_specialists: &'a [&'a FailedSpecialist],
    pub total_succeeded: usize,
    pub total_failed: usize,
}

/// The synthesis (its row's data; with its text, `synthesis_complete`'s data and the result's
/// `synthesis`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Synthesis {
    /// The model that wrote it.
    pub model: String,
    /// Each section's text ("" when missing).
    #[schemars(with = "Sections<'static>")]
    pub sections: Value,
    /// The items each section holds.
    pub counts: Counts,
    /// The consolidated risk matrix, row by row.
    pub risk_matrix: Vec<RiskRow>,
    /// The first row at the most severe level present; null when no row states a level.
    pub top_risk: Option<RiskRow>,
    /// How long the call took, in milliseconds.
    pub response_time_ms: i64,
    /// The synthesizer this model stood in for, when the backup wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
    /// The synthesis's text (not in its row, whose content it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrated_assessment: Option<String>,
}

/// Specialist Panel's result.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpecialistPanelResult {
    /// What the panel analysed; null when the run stored none.
    pub material: Option<Material>,
    /// The panel's roles, in order.
    pub roles: Vec<PanelRole>,
    /// The reports, in the panel's order.
    pub specialists: Vec<SpecialistReport>,
    /// The specialists whose call failed, in the panel's order.
    pub failed_specialists: Vec<FailedSpecialist>,
    /// The synthesis; null when the run stopped before it.
    pub synthesis: Option<Synthesis>,
    /// Whether some call failed, and which (`partial`, `failedModels`).
    #[serde(flatten)]
    pub failures: Failures,
}

// ---- the stored result ---------------------------------------------------------------------

/// `{material, roles, specialists, failedSpecialists, synthesis, partial, failedModels}` from
/// the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let panel: Option<PanelRow> =
        rows.iter().find(|r| r.stage_type == PANEL_STAGE).and_then(parsed);
    let (material, roles) = panel.map_or((None, Vec::new()), |p| (Some(p.material), p.roles));
    let index_of = |key: &str| roles.iter().position(|r| r.role_key == key);
    let mut specialists: Vec<SpecialistReport> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with(SPECIALIST_PREFIX))
        .filter_map(|r| Some(SpecialistReport { report: r.content.clone(), ..parsed(r)? }))
        .collect();
    specialists.sort_by_key(|s| s.index);
    let mut failed: Vec<(usize, FailedSpecialist)> = rows
        .iter()
        .filter(|r| r.stage_type == CALL_FAILED)
        .filter_map(|r| {
            let failed: FailedModel = parsed(r)?;
            let key = failed.stage.strip_prefix(SPECIALIST_PREFIX)?;
            let i = index_of(key)?;
            Some((
                i,
                FailedSpecialist {
                    role_key: key.into(),
                    role_title: roles[i].role_title.clone(),
                    model: r.model.clone().unwrap_or_default(),
                    error: r.content.clone(),
                },
            ))
        })
        .collect();
    failed.sort_by_key(|(i, _)| *i);
    let synthesis = rows.iter().find(|r| r.stage_type == SYNTHESIS_KEY).and_then(|s| {
        Some(Synthesis { integrated_assessment: Some(s.content.clone()), ..parsed(s)? })
    });
    to_json(&SpecialistPanelResult {
        material,
        roles,
        specialists,
        failed_specialists: failed.into_iter().map(|(_, f)| f).collect(),
        synthesis,
        failures: Failures::of(rows),
    })
}

pub(super) fn outcome(result: &Value) -> Option<String> {
    let s = result.get("synthesis").filter(|s| !s.is_null())?;
    let n = result["specialists"].as_array().map_or(0, Vec::len);
    let risk = match s.get("topRisk").filter(|t| !t.is_null()) {
        Some(t) => format!(
            "top risk {} ({})",
            t["level"].as_str().unwrap_or("?"),
            short(t["domain"].as_str().unwrap_or(""), 40)
        ),
        None => "no risk level stated".to_string(),
    };
    let summary = s["sections"]["executiveSummary"]
        .as_str()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| s["integratedAssessment"].as_str())
        .unwrap_or("");
    Some(format!("{n} specialists; {risk}: {}", short(summary, 80)))
}

// ---- the export's report -------------------------------------------------------------------

/// A rating or an average as a reader reads it: `4`, `3.3`.
fn figure(v: &Value) -> Option<String> {
    let f = v.as_f64()?;
    Some(if f.fract() == 0.0 { format!("{f:.0}") } else { format!("{f:.1}") })
}

/// The result as the export's report: the top risk, the specialists' ratings as a table
/// (specialist × criterion, a rating not read said to be unread), each one's average, the
/// specialists who did not report, the synthesis's risk matrix as a table and what else it
/// holds.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let mut out = String::new();
    let s = &result["synthesis"];
    if let Some(t) = s.get("topRisk").filter(|t| t.is_object()) {
        let level = t["level"].as_str().map_or("not stated".into(), str::to_lowercase);
        let mut line = format!("**Top risk:** {level}");
        for part in [&t["domain"], &t["concern"]] {
            if let Some(p) = part.as_str().filter(|p| !p.trim().is_empty()) {
                line.push_str(&format!(", {}", p.trim()));
            }
        }
        out.push_str(&format!("{line}.\n\n"));
    }
    let specialists = result["specialists"].as_array().cloned().unwrap_or_default();
    let name = |sp: &Value| {
        let title = sp["roleTitle"].as_str().unwrap_or("A specialist");
        match sp["model"].as_str() {
            Some(m) => format!("{title} ({m})"),
            None => title.to_string(),
        }
    };
    let rows: Vec<Vec<String>> = specialists
        .iter()
        .flat_map(|sp| {
            let who = name(sp);
            sp["criteriaScores"].as_array().cloned().unwrap_or_default().into_iter().map(move |c| {
                vec![
                    who.clone(),
                    c["criterion"].as_str().unwrap_or("").to_string(),
                    figure(&c["score"]).unwrap_or_else(|| "unread".into()),
                    c["notes"].as_str().unwrap_or("").to_string(),
                ]
            })
        })
        .collect();
    if !rows.is_empty() {
        out.push_str("**The specialists' ratings** (1 to 5):\n\n");
        out.push_str(&table(&["specialist", "criterion", "rating", "notes"], &rows, &[2]));
        out.push('\n');
    }
    if !specialists.is_empty() {
        out.push_str("**Average ratings:**\n\n");
        for sp in &specialists {
            let scores = sp["criteriaScores"].as_array().cloned().unwrap_or_default();
            let read = scores.iter().filter(|c| c["score"].is_number()).count() as u64;
            let line = match figure(&sp["averageScore"]) {
                Some(a) if read < scores.len() as u64 => format!(
                    "{a} of 5, over the {} read ({} unread)",
                    count(read, "rating", "ratings"),
                    scores.len() as u64 - read
                ),
                Some(a) => format!("{a} of 5"),
                None => "no rating could be read from the report".into(),
            };
            out.push_str(&format!("- {}: {line}\n", name(sp)));
        }
        out.push('\n');
    }
    let failed = result["failedSpecialists"].as_array().cloned().unwrap_or_default();
    if !failed.is_empty() {
        out.push_str("**Did not report:**\n\n");
        for f in &failed {
            let why = f["error"].as_str().map_or(String::new(), |e| format!(" ({e})"));
            out.push_str(&format!("- {}: the call failed{why}\n", name(f)));
        }
        out.push('\n');
    }
    let matrix = s["riskMatrix"].as_array().cloned().unwrap_or_default();
    if !matrix.is_empty() {
        let rows: Vec<Vec<String>> = matrix
            .iter()
            .map(|r| {
                let sources: Vec<&str> = r["sources"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                vec![
                    r["domain"].as_str().unwrap_or("").to_string(),
                    r["level"].as_str().map_or("not stated".into(), str::to_lowercase),
                    r["concern"].as_str().unwrap_or("").to_string(),
                    r["action"].as_str().unwrap_or("").to_string(),
                    sources.join(", "),
                ]
            })
            .collect();
        out.push_str("**Risk matrix:**\n\n");
        out.push_str(&table(&["area", "level", "concern", "action", "raised by"], &rows, &[]));
        out.push('\n');
    } else if s.is_object() {
        out.push_str("**Risk matrix:** none could be read from the synthesis.\n\n");
    }
    if s.is_object() {
        let c = &s["counts"];
        let n = |k: &str, one: &str, many: &str| count(c[k].as_u64().unwrap_or(0), one, many);
        let by = match (s["model"].as_str(), s["fallbackFrom"].as_str()) {
            (Some(m), Some(f)) => format!(" by {m} (in place of {f})"),
            (Some(m), None) => format!(" by {m}"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "**Synthesis**{by}: {}, {} and {}.\n",
            n("convergentFindings", "convergent finding", "convergent findings"),
            n("divergentFindings", "divergent finding", "divergent findings"),
            n("unifiedRecommendations", "recommendation", "recommendations"),
        ));
    }
    out
}
