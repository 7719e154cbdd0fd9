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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    let r: SpecialistPanelResult = typed(result)?;
    let s = r.synthesis?;
    let risk = match &s.top_risk {
        Some(t) => {
            format!("top risk {} ({})", t.level.as_deref().unwrap_or("?"), short(&t.domain, 40))
        }
        None => "no risk level stated".to_string(),
    };
    let summary = s.sections["executiveSummary"]
        .as_str()
        .filter(|t| !t.trim().is_empty())
        .or(s.integrated_assessment.as_deref())
        .unwrap_or("");
    Some(format!("{} specialists; {risk}: {}", r.specialists.len(), short(summary, 80)))
}

// ---- the export's report -------------------------------------------------------------------

/// A rating or an average as a reader reads it: `4`, `3.3`.
fn figure(f: f64) -> String {
    if f.fract() == 0.0 {
        format!("{f:.0}")
    } else {
        format!("{f:.1}")
    }
}

/// `Security reviewer (model)`.
fn name(title: &str, model: &str) -> String {
    format!("{title} ({model})")
}

/// The result as the export's report: the top risk, the specialists' ratings as a table
/// (specialist × criterion, a rating not read said to be unread), each one's average, the
/// specialists who did not report, the synthesis's risk matrix as a table and what else it
/// holds.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<SpecialistPanelResult>(result) else { return String::new() };
    let mut out = String::new();
    let s = r.synthesis.as_ref();
    if let Some(t) = s.and_then(|s| s.top_risk.as_ref()) {
        let level = t.level.as_deref().map_or("not stated".into(), str::to_lowercase);
        let mut line = format!("**Top risk:** {level}");
        for part in [&t.domain, &t.concern].into_iter().filter(|p| !p.trim().is_empty()) {
            line.push_str(&format!(", {}", part.trim()));
        }
        out.push_str(&format!("{line}.\n\n"));
    }
    let rows: Vec<Vec<String>> = r
        .specialists
        .iter()
        .flat_map(|sp| {
            let who = name(&sp.role_title, &sp.model);
            sp.criteria_scores.iter().map(move |c| {
                vec![
                    who.clone(),
                    c.criterion.clone(),
                    c.score.map_or("unread".into(), |s| figure(s.into())),
                    c.notes.clone().unwrap_or_default(),
                ]
            })
        })
        .collect();
    if !rows.is_empty() {
        out.push_str("**The specialists' ratings** (1 to 5):\n\n");
        out.push_str(&table(&["specialist", "criterion", "rating", "notes"], &rows, &[2]));
        out.push('\n');
    }
    if !r.specialists.is_empty() {
        out.push_str("**Average ratings:**\n\n");
        for sp in &r.specialists {
            let all = sp.criteria_scores.len() as u64;
            let read = sp.criteria_scores.iter().filter(|c| c.score.is_some()).count() as u64;
            let line = match sp.average_score.map(figure) {
                Some(a) if read < all => format!(
                    "{a} of 5, over the {} read ({} unread)",
                    count(read, "rating", "ratings"),
                    all - read
                ),
                Some(a) => format!("{a} of 5"),
                None => "no rating could be read from the report".into(),
            };
            out.push_str(&format!("- {}: {line}\n", name(&sp.role_title, &sp.model)));
        }
        out.push('\n');
    }
    if !r.failed_specialists.is_empty() {
        out.push_str("**Did not report:**\n\n");
        for f in &r.failed_specialists {
            let who = name(&f.role_title, &f.model);
            out.push_str(&format!("- {who}: the call failed ({})\n", f.error));
        }
        out.push('\n');
    }
    let Some(s) = s else { return out };
    if s.risk_matrix.is_empty() {
        out.push_str("**Risk matrix:** none could be read from the synthesis.\n\n");
    } else {
        let rows: Vec<Vec<String>> = s
            .risk_matrix
            .iter()
            .map(|r| {
                vec![
                    r.domain.clone(),
                    r.level.as_deref().map_or("not stated".into(), str::to_lowercase),
                    r.concern.clone(),
                    r.action.clone(),
                    r.sources.join(", "),
                ]
            })
            .collect();
        out.push_str("**Risk matrix:**\n\n");
        out.push_str(&table(&["area", "level", "concern", "action", "raised by"], &rows, &[]));
        out.push('\n');
    }
    let c = &s.counts;
    let n = |k: usize, one: &str, many: &str| count(k as u64, one, many);
    let by = match &s.fallback_from {
        Some(f) => format!(" by {} (in place of {f})", s.model),
        None => format!(" by {}", s.model),
    };
    out.push_str(&format!(
        "**Synthesis**{by}: {}, {} and {}.\n",
        n(c.convergent_findings, "convergent finding", "convergent findings"),
        n(c.divergent_findings, "divergent finding", "divergent findings"),
        n(c.unified_recommendations, "recommendation", "recommendations"),
    ));
    out
}
