//! What Council stores and reads back: the stage payloads, the result from the stored rows
//! and the export's report.

use super::*;

// ---- payloads (one definition for live events and stored results) --------------------------

/// A stage-1 answer (`{model, response, responseTimeMs}`), shared with the other modes.
pub type Stage1Response = crate::modes::common::Answer;

/// An evaluator's ranking: its text, and what it states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stage2Response {
    /// The evaluator.
    pub model: String,
    /// Its reply.
    pub ranking: String,
    /// The labels in the stated order (tied ones in the order written); empty when the
    /// evaluator stated no ranking.
    pub parsed_ranking: Vec<String>,
    /// The stated places, best first; a place holds the labels tied in it.
    #[serde(default)]
    pub places: Vec<Vec<String>>,
    /// The ranking names only some of the labels (the others share the places left).
    #[serde(default)]
    pub partial: bool,
    /// Why no ranking was read, when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    /// Where the ranking was read from (its JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    /// How long the call took, in milliseconds.
    pub response_time_ms: i64,
}

impl Stage2Response {
    /// The evaluator's places (rows stored before places were recorded hold only the order).
    pub(super) fn places(&self) -> Vec<Vec<String>> {
        if self.places.is_empty() {
            self.parsed_ranking.iter().map(|l| vec![l.clone()]).collect()
        } else {
            self.places.clone()
        }
    }
}

/// What a `stage2` row stores as parsed data (the seed's `parsedRanking`, and how it was read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Stage2Row {
    pub parsed_ranking: Vec<String>,
    pub places: Vec<Vec<String>>,
    pub partial: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

impl Stage2Row {
    pub(super) fn of(r: &Stage2Response) -> Self {
        Stage2Row {
            parsed_ranking: r.parsed_ranking.clone(),
            places: r.places.clone(),
            partial: r.partial,
            unparsed: r.unparsed,
            read_from: r.read_from,
        }
    }
}

/// A `label_map` row's data (the row's model is the label's member).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelRow {
    pub label: String,
}

/// A `stage3` row's data, when the backup wrote the synthesis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FallbackRow {
    pub fallback_from: String,
}

/// `stage1_start`'s data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage1Start<'a> {
    pub conversation_id: &'a str,
    pub message_id: &'a str,
}

/// `stage2_complete`'s data: the rankings and their aggregate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stage2Complete<'a> {
    pub data: &'a [Stage2Response],
    pub metadata: Stage2Metadata,
}

/// A label's place in the aggregate ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AggregateRanking {
    /// The member whose answer the label stands for.
    pub model: String,
    /// The answer's label (`Response A`…).
    pub label: String,
    /// Its average place over the rankings counted (1 is best).
    pub average_rank: f64,
    /// Rankings counted for this label (every parsed ranking places every label).
    pub rankings_count: usize,
    /// Of those, the rankings that named it; the rest placed it by the partial rule.
    pub named_count: usize,
}

/// What the rankings say together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stage2Metadata {
    /// Each label and the member whose answer it stands for.
    pub label_to_model: BTreeMap<String, String>,
    /// The labels by average place, best first.
    pub aggregate_rankings: Vec<AggregateRanking>,
    /// Evaluators whose ranking was read and counted.
    pub rankings_counted: usize,
    /// Of those, the ones that named only some labels.
    pub partial_rankings: usize,
    /// Evaluators that answered but stated no ranking (left out of the aggregate).
    pub unparsed_rankings: usize,
}

/// The synthesis (`{model, response, responseTimeMs, fallbackFrom?}`): `model` is the one that
/// wrote it, and `fallbackFrom` the chairman it stood in for when the backup wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stage3Response {
    /// The model that wrote it.
    pub model: String,
    /// The synthesis.
    pub response: String,
    /// How long the call took, in milliseconds.
    pub response_time_ms: i64,
    /// The chairman the backup stood in for, when the backup wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// Council's result (the seed's `CouncilResult`, without `title`, which lives on the
/// conversation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CouncilResult {
    /// Each member's answer.
    pub stage1: Vec<Stage1Response>,
    /// Each member's ranking of the anonymised answers.
    pub stage2: Vec<Stage2Response>,
    /// The rankings together; null when the run stopped before the ranking.
    pub stage2_metadata: Option<Stage2Metadata>,
    /// The chairman's synthesis; null when the run stopped before it.
    pub stage3: Option<Stage3Response>,
    /// Whether some call failed, and which (`partial`, `failedModels`).
    #[serde(flatten)]
    pub failures: Failures,
}

/// Rebuilds the result from stored rows, with the same payload shapes as the live events.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let stage1: Vec<Stage1Response> = of("stage1").map(Stage1Response::of_row).collect();
    let label_to_model: BTreeMap<String, String> = of("label_map")
        .map(|r| {
            let l = parsed::<LabelRow>(r).map_or_else(|| r.content.clone(), |d| d.label);
            (l, r.model.clone().unwrap_or_default())
        })
        .collect();
    let stage2: Vec<Stage2Response> = of("stage2")
        .map(|r| {
            let d: Stage2Row = parsed(r).unwrap_or_default();
            Stage2Response {
                model: r.model.clone().unwrap_or_default(),
                ranking: r.content.clone(),
                parsed_ranking: d.parsed_ranking,
                places: d.places,
                partial: d.partial,
                unparsed: d.unparsed,
                read_from: d.read_from,
                response_time_ms: r.response_time_ms.unwrap_or(0),
            }
        })
        .collect();
    let stage3 = of("stage3").next().map(|r| Stage3Response {
        model: r.model.clone().unwrap_or_default(),
        response: r.content.clone(),
        response_time_ms: r.response_time_ms.unwrap_or(0),
        fallback_from: parsed::<FallbackRow>(r).map(|d| d.fallback_from),
    });
    to_json(&CouncilResult {
        stage2_metadata: (!label_to_model.is_empty()).then(|| metadata(&stage2, &label_to_model)),
        stage1,
        stage2,
        stage3,
        failures: Failures::of(rows),
    })
}

// ---- the export's report -------------------------------------------------------------------

/// An average place in words: at most two decimals (`1`, `1.5`, `2.33`).
fn average_words(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The result as the export's report: the aggregate ranking as a table (rank, answer, whose,
/// average place), each member's ranking in a line, and who wrote the synthesis.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<CouncilResult>(result) else { return String::new() };
    let mut out = String::new();
    let meta = r.stage2_metadata.as_ref();
    let whose = |label: &str| match meta.and_then(|m| m.label_to_model.get(label)) {
        Some(m) if !m.is_empty() => format!("{label} ({m})"),
        _ => label.to_string(),
    };
    match meta.filter(|m| !m.aggregate_rankings.is_empty()) {
        Some(meta) => {
            out.push_str(&format!(
                "**Aggregate ranking** (the average place each answer was given, over {}):\n\n",
                count(meta.rankings_counted as u64, "ranking", "rankings")
            ));
            // Equal averages share a rank.
            let (mut rank, mut last) = (0, None);
            let rows: Vec<Vec<String>> = meta
                .aggregate_rankings
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    if last != Some(a.average_rank) {
                        rank = i + 1;
                        last = Some(a.average_rank);
                    }
                    vec![
                        rank.to_string(),
                        a.label.clone(),
                        a.model.clone(),
                        average_words(a.average_rank),
                    ]
                })
                .collect();
            out.push_str(&table(&["rank", "answer", "model", "average place"], &rows, &[0, 3]));
            if meta.partial_rankings > 0 {
                out.push_str(&format!(
                    "\n{} named only some of the answers; the answers left out share the places left.\n",
                    count(meta.partial_rankings as u64, "ranking", "rankings")
                ));
            }
            out.push('\n');
        }
        None if !r.stage2.is_empty() => {
            out.push_str("**No aggregate ranking:** no member's ranking could be read.\n\n");
        }
        None => {}
    }
    if !r.stage2.is_empty() {
        out.push_str("**Each member's ranking**, best first:\n\n");
        for s in &r.stage2 {
            let model = if s.model.is_empty() { "a member" } else { &s.model };
            let places = s.places();
            if places.is_empty() {
                let why = s.unparsed.map_or(String::new(), |u| format!("; it {}", u.describe()));
                out.push_str(&format!("- {model}: no ranking could be read{why}\n"));
                continue;
            }
            let said: Vec<String> = places
                .iter()
                .map(|p| {
                    let tied: Vec<String> = p.iter().map(|l| whose(l)).collect();
                    if tied.len() > 1 {
                        format!("{} (tied)", tied.join(" and "))
                    } else {
                        tied.join("")
                    }
                })
                .collect();
            let partial = if s.partial { " (names only some answers)" } else { "" };
            out.push_str(&format!("- {model}: {}{partial}\n", said.join(", then ")));
        }
        out.push('\n');
    }
    if let Some(chair) = r.stage3.as_ref().filter(|c| !c.model.is_empty()) {
        let standing_in = chair
            .fallback_from
            .as_ref()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        out.push_str(&format!(
            "**Synthesis** written by the chairman, {}{standing_in}.\n",
            chair.model
        ));
    }
    out
}
