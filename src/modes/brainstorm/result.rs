//! What a Brainstorm run stores and reads back: the result from the stored rows, its outcome and
//! the export's report.

use super::*;

// ---- payloads (one definition for live events, stored rows and the result) ------------------

/// `brainstorm_start`'s data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrainstormStart<'a> {
    pub config: StartConfig<'a>,
}

/// The configuration `brainstorm_start` tells.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartConfig<'a> {
    pub models: &'a [String],
    pub curator_model: &'a str,
    pub refiner_model: &'a str,
    pub min_ideas_per_model: usize,
    pub max_clusters: usize,
    pub labels: Vec<SourceLabel<'a>>,
}

/// A model and its anonymous label.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceLabel<'a> {
    pub model: &'a str,
    pub source_label: &'a str,
}

/// An ideator's list (`ideation_complete`'s data and its `ideation_<i>` row).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct Ideation {
    /// The ideator's position in the request's `models`.
    pub index: usize,
    /// The ideator.
    pub model: String,
    /// Its anonymous label (`Model A`, `Model B`…).
    pub source_label: String,
    /// The ideas read from its reply (at most 10).
    pub ideas: Vec<Idea>,
    /// How many ideas were read.
    pub idea_count: usize,
    /// The fewest ideas it was asked for.
    pub ideas_asked: usize,
    /// How long its call took, in milliseconds.
    pub response_time_ms: i64,
    /// Ideas past the tenth, left out; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<usize>,
    /// Whether the ideas were read from the reply's JSON or its text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    /// Why no idea could be read, in words; absent when some were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<String>,
}

/// The ideation in sum (`all_ideation_complete`'s data).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdeationSummary {
    /// Ideas listed, all ideators together.
    pub total_ideas: usize,
    /// Ideators that listed at least one idea.
    pub model_count: usize,
    /// What went wrong with the lists (too few, too many, none, a failed call), in words.
    pub warnings: Vec<String>,
}

/// `clustering_start`'s data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusteringStart {
    pub max_clusters: usize,
    pub total_ideas: usize,
}

/// The clustering (`clustering_complete`'s data and the `clustering` row).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusteringData {
    /// The curator (or its backup); null when none was asked or it failed.
    pub model: Option<String>,
    /// The clusters kept, in the curator's order.
    pub clusters: Vec<Cluster>,
    /// The ideas in no cluster.
    pub unclustered_ids: Vec<String>,
    /// True when no cluster could be had: the refiner works from all the ideas.
    pub fallback: bool,
    /// How long the curator's call took, in milliseconds; null without a reply.
    pub response_time_ms: Option<i64>,
    /// The curator its backup stood in for, when the backup answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
    /// Why there are no clusters, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Whether the clusters were read from the reply's JSON or its text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// `scoring_start`'s data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoringStart {
    pub cluster_count: usize,
}

/// A scorer's ratings (`scorer_complete`'s data and its `scoring_<i>` row).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct Scoring {
    /// The scorer's position in the request's `models`.
    pub index: usize,
    /// The scorer.
    pub model: String,
    /// Its scores, a cluster each; empty when none could be read.
    pub scores: Vec<ClusterScore>,
    /// True when its scores were read (and count in the ranking).
    pub valid: bool,
    /// How long its call took, in milliseconds.
    pub response_time_ms: i64,
    /// Whether the scores were read from the reply's JSON or its text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    /// Why no score could be read, in words; absent when they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<String>,
}

/// The server's ranking (`all_scoring_complete`'s data and the `ranking` row).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct Ranking {
    /// The clusters, best first.
    pub ranked_clusters: Vec<Ranked>,
    /// `scores` (2 valid scorers or more) or `promise`.
    pub ranking_method: String,
    /// Scorers whose scores were read.
    pub valid_scorers: usize,
    /// Why no scores were asked for (`single_cluster`, `timeout`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scoring_skipped: Option<String>,
}

/// `refinement_start`'s data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefinementStart<'a> {
    pub cluster: Option<Winner<'a>>,
    pub all_ideas: bool,
}

/// The winning cluster as the refiner gets it: with its ideas and its ranking.
#[derive(Serialize)]
pub struct Winner<'a> {
    #[serde(flatten)]
    pub cluster: &'a Cluster,
    pub ideas: Vec<&'a Idea>,
    pub ranking: Option<&'a Ranked>,
}

/// The refinement (`refinement_complete`'s data; the `refinement` row keeps it without the
/// proposal, which is the row's content).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct Refinement {
    /// The refiner (or its backup); null when both failed.
    pub model: Option<String>,
    /// The proposal: the answer.
    pub proposal: String,
    /// True when the refiner failed and the proposal is the best material as it stands.
    pub fallback: bool,
    /// How long the refiner's call took, in milliseconds; null when it failed.
    pub response_time_ms: Option<i64>,
    /// The cluster refined; null when the refiner worked from all the ideas.
    pub cluster_id: Option<String>,
    /// Its name.
    pub cluster_name: Option<String>,
    /// The refiner its backup stood in for, when the backup answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// The refinement as the rows have always kept it (the row's content, the proposal, taken out
/// of it: its place went to the last key, `fallbackFrom` else `clusterName`); the result's
/// refinement then has its proposal last.
fn refinement_as_stored<S: serde::Serializer>(
    r: &Option<Refinement>,
    s: S,
) -> Result<S::Ok, S::Error> {
    taken_last(r.as_ref(), "proposal").serialize(s)
}

/// The ideation in the result: the summary, then every ideator's list.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Ideas {
    #[serde(flatten)]
    pub summary: IdeationSummary,
    /// Each ideator's list, in request order.
    pub models: Vec<Ideation>,
}

/// Brainstorm's result.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrainstormResult {
    /// The ideas listed, in sum and by ideator.
    pub ideas: Ideas,
    /// The clustering; null when the run stopped before it.
    pub clustering: Option<ClusteringData>,
    /// Each scorer's ratings, in request order.
    pub scores: Vec<Scoring>,
    /// The server's ranking of the clusters; null when there was none.
    pub ranking: Option<Ranking>,
    /// The refinement with its proposal; null when the run stopped before it.
    #[serde(serialize_with = "refinement_as_stored")]
    pub refinement: Option<Refinement>,
    /// Whether some call failed, and which (`partial`, `failedModels`).
    #[serde(flatten)]
    pub failures: Failures,
}

/// The stored rows `<prefix><i>` read as `T`, by `index`.
fn indexed<T: DeserializeOwned>(rows: &[StageRow], prefix: &str, index: fn(&T) -> usize) -> Vec<T> {
    let mut list: Vec<T> = rows
        .iter()
        .filter(|r| r.stage_type.strip_prefix(prefix).is_some_and(|n| n.parse::<usize>().is_ok()))
        .filter_map(parsed)
        .collect();
    list.sort_by_key(index);
    list
}

/// `BrainstormResult` from the stored rows, as the events gave it.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let models: Vec<Ideation> = indexed(rows, "ideation_", |d| d.index);
    let failed = failed_from_rows(rows);
    to_json(&BrainstormResult {
        ideas: Ideas { summary: ideation_summary(&models, &failed), models },
        clustering: row("clustering").and_then(parsed),
        scores: indexed(rows, "scoring_", |d: &Scoring| d.index),
        ranking: row("ranking").and_then(parsed),
        refinement: row("refinement")
            .and_then(|r| Some(Refinement { proposal: r.content.clone(), ..parsed(r)? })),
        failures: Failures::new(failed),
    })
}

pub(super) fn outcome(result: &Value) -> Option<String> {
    let r = result.get("refinement").filter(|r| !r.is_null())?;
    let name = r["clusterName"].as_str();
    if r["fallback"] == true {
        return Some(match name {
            Some(n) => format!("No proposal written (the refiner failed); best cluster: \"{n}\""),
            None => "No proposal written (the refiner failed)".to_string(),
        });
    }
    // The proposal itself is the answer shown under this line: the line says where it came from.
    Some(match name {
        Some(n) => {
            let how = match result["ranking"]["rankingMethod"].as_str() {
                Some("scores") => "ranked first by the panel's scores",
                _ => "ranked first by its promise",
            };
            format!("Proposal from the cluster \"{n}\", {how}")
        }
        None => "Proposal from all the ideas (no clusters could be read)".to_string(),
    })
}

// ---- the export's report -------------------------------------------------------------------

/// An average as a reader reads it: `4.33`, `3.5`, `14`.
fn average_words(v: &Value) -> Option<String> {
    let f = v.as_f64()?;
    let s = format!("{f:.2}");
    Some(s.trim_end_matches('0').trim_end_matches('.').to_string())
}

/// What put a cluster above the next one down, in words.
fn decided_words(key: &str) -> &'static str {
    match key {
        "scored" => "being scored",
        "averageScore" => "total",
        "averageImpact" => "impact",
        "averageFeasibility" => "feasibility",
        "promise" => "promise",
        "clusterNumber" => "the curator's order",
        _ => "",
    }
}

/// A promise as a reader reads it: `high`, or `not stated (medium used)`.
fn promise_words(promise: &Value, stated: bool) -> String {
    let p = promise.as_str().unwrap_or("").to_lowercase();
    if !stated {
        format!("not stated ({p} used)")
    } else {
        p
    }
}

/// The result as the export's report: the ideas and who gave them, the clusters in rank order
/// as a table (ideas, promise, average novelty, feasibility, impact and total, what put each
/// above the next), how they were ranked, the ideas left out of every cluster, the scorers
/// whose scores could not be read, and where the proposal came from.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let mut out = String::new();
    let ideas = &result["ideas"];
    let models = ideas["models"].as_array().cloned().unwrap_or_default();
    let all_ideas: Vec<Value> =
        models.iter().flat_map(|m| m["ideas"].as_array().cloned().unwrap_or_default()).collect();
    if !models.is_empty() {
        let by: Vec<String> = models
            .iter()
            .map(|m| {
                let who = match (m["sourceLabel"].as_str(), m["model"].as_str()) {
                    (Some(l), Some(x)) => format!("{l} ({x})"),
                    (Some(l), None) => l.to_string(),
                    (None, Some(x)) => x.to_string(),
                    (None, None) => "a model".to_string(),
                };
                format!("{who} {}", m["ideaCount"].as_u64().unwrap_or(0))
            })
            .collect();
        out.push_str(&format!(
            "**Ideas:** {} from {}: {}.\n\n",
            count(all_ideas.len() as u64, "idea", "ideas"),
            count(models.len() as u64, "model", "models"),
            by.join(", ")
        ));
    }
    let clustering = &result["clustering"];
    let clusters = clustering["clusters"].as_array().cloned().unwrap_or_default();
    let cluster_of = |id: &Value| clusters.iter().find(|c| c["id"] == *id);
    let name_of = |c: &Value, number: usize| match c["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => n.to_string(),
        None => format!("Cluster {number}"),
    };
    let number_of = |id: &Value| {
        id.as_str()
            .and_then(|i| i.strip_prefix("cluster_"))
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0)
    };
    let ideas_in = |id: &Value| {
        cluster_of(id).and_then(|c| c["ideaIds"].as_array()).map_or(0, Vec::len) as u64
    };
    let ranking = &result["ranking"];
    let ranked = ranking["rankedClusters"].as_array().cloned().unwrap_or_default();
    if !ranked.is_empty() {
        let method = match (ranking["rankingMethod"].as_str(), ranking["scoringSkipped"].as_str()) {
            (Some("scores"), _) => format!(
                "by the panel's scores (from {})",
                count(ranking["validScorers"].as_u64().unwrap_or(0), "scorer", "scorers")
            ),
            (_, Some("single_cluster")) => {
                "by the curator's promise (there was one cluster, so none was scored)".into()
            }
            (_, Some("timeout")) => {
                "by the curator's promise (the time limit passed before the scoring)".into()
            }
            _ => "by the curator's promise (fewer than two scorers' scores could be read)".into(),
        };
        out.push_str(&format!("**The clusters, in rank order**, ranked {method}:\n\n"));
        let rows: Vec<Vec<String>> = ranked
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let number = number_of(&r["id"]);
                let stated = cluster_of(&r["id"]).is_none_or(|c| c["promiseStated"] != false);
                let avg = |k: &str| match average_words(&r[k]) {
                    Some(a) => a,
                    None if r["scoreCount"].as_u64() == Some(0) => "not scored".into(),
                    None => String::new(),
                };
                vec![
                    r["rank"].as_u64().unwrap_or(i as u64 + 1).to_string(),
                    name_of(r, number),
                    ideas_in(&r["id"]).to_string(),
                    promise_words(&r["promise"], stated),
                    avg("averageNovelty"),
                    avg("averageFeasibility"),
                    avg("averageImpact"),
                    avg("averageScore"),
                    r["decidedBy"].as_str().map_or("", decided_words).to_string(),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "rank",
                "cluster",
                "ideas",
                "promise",
                "novelty",
                "feasibility",
                "impact",
                "total (3 to 15)",
                "ahead of the next on",
            ],
            &rows,
            &[0, 2, 4, 5, 6, 7],
        ));
        out.push('\n');
    } else if !clusters.is_empty() {
        // Clustered, not yet ranked: the clusters as the curator formed them.
        out.push_str("**The clusters** (not ranked):\n\n");
        let rows: Vec<Vec<String>> = clusters
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let number = number_of(&c["id"]).max(i + 1);
                vec![
                    number.to_string(),
                    name_of(c, number),
                    ideas_in(&c["id"]).to_string(),
                    promise_words(&c["promise"], c["promiseStated"] != false),
                ]
            })
            .collect();
        out.push_str(&table(&["#", "cluster", "ideas", "promise"], &rows, &[0, 2]));
        out.push('\n');
    }
    if let Some(note) = clustering["note"].as_str() {
        out.push_str(&format!("**Clustering:** {note}\n\n"));
    }
    let left_out: Vec<String> = clustering["unclusteredIds"]
        .as_array()
        .map(|ids| {
            ids.iter()
                .filter_map(|id| all_ideas.iter().find(|i| i["id"] == *id))
                .map(|i| {
                    let title = i["title"].as_str().unwrap_or("");
                    match i["sourceLabel"].as_str() {
                        Some(l) => format!("- {title} ({l})"),
                        None => format!("- {title}"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    if !left_out.is_empty() && !clusters.is_empty() {
        out.push_str(&format!(
            "**Ideas left out of every cluster** ({}):\n\n{}\n\n",
            left_out.len(),
            left_out.join("\n")
        ));
    }
    let unread: Vec<String> = result["scores"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter(|s| s["valid"] == false)
                .map(|s| {
                    let why =
                        s["unparsed"].as_str().map_or(String::new(), |u| format!(" (it {u})"));
                    format!(
                        "- {}: no score could be read{why}",
                        s["model"].as_str().unwrap_or("a scorer")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if !unread.is_empty() {
        out.push_str(&format!("**Scores not counted:**\n\n{}\n\n", unread.join("\n")));
    }
    let warnings: Vec<String> = ideas["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).map(|w| format!("- {w}")).collect())
        .unwrap_or_default();
    if !warnings.is_empty() {
        out.push_str(&format!("**About the ideas:**\n\n{}\n\n", warnings.join("\n")));
    }
    let r = &result["refinement"];
    if r.is_object() {
        let from = match r["clusterName"].as_str() {
            Some(n) if !n.is_empty() => format!("the cluster \u{201c}{n}\u{201d}"),
            Some(_) => "the best cluster".to_string(),
            None => "all the ideas (no cluster could be read)".to_string(),
        };
        if r["fallback"] == true {
            out.push_str(&format!(
                "**No proposal:** the refiner failed, so the answer gives {from} as it stands.\n"
            ));
        } else {
            let by = match (r["model"].as_str(), r["fallbackFrom"].as_str()) {
                (Some(m), Some(f)) => format!(" by {m} (in place of {f})"),
                (Some(m), None) => format!(" by {m}"),
                _ => String::new(),
            };
            out.push_str(&format!("**Proposal:** written{by} from {from}.\n"));
        }
    }
    out
}
