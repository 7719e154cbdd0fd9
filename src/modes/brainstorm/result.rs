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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ideas {
    #[serde(flatten)]
    pub summary: IdeationSummary,
    /// Each ideator's list, in request order.
    pub models: Vec<Ideation>,
}

/// Brainstorm's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    let r: BrainstormResult = typed(result)?;
    let f = r.refinement.as_ref()?;
    let name = f.cluster_name.as_deref();
    if f.fallback {
        return Some(match name {
            Some(n) => format!("No proposal written (the refiner failed); best cluster: \"{n}\""),
            None => "No proposal written (the refiner failed)".to_string(),
        });
    }
    // The proposal itself is the answer shown under this line: the line says where it came from.
    Some(match name {
        Some(n) => {
            let how = match r.ranking.as_ref().map(|k| k.ranking_method.as_str()) {
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
fn average_words(f: f64) -> String {
    let s = format!("{f:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
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
fn promise_words(promise: &str, stated: bool) -> String {
    let p = promise.to_lowercase();
    if !stated {
        format!("not stated ({p} used)")
    } else {
        p
    }
}

/// A cluster's name, or `Cluster 2` when the curator gave none.
fn name_or_number(name: &str, number: usize) -> String {
    if name.is_empty() {
        format!("Cluster {number}")
    } else {
        name.to_string()
    }
}

/// How the clusters were ranked, in words: `by the panel's scores (from 3 scorers)`.
fn method_words(ranking: &Ranking) -> String {
    use crate::modes::report::count;
    match (ranking.ranking_method.as_str(), ranking.scoring_skipped.as_deref()) {
        ("scores", _) => format!(
            "by the panel's scores (from {})",
            count(ranking.valid_scorers as u64, "scorer", "scorers")
        ),
        (_, Some("single_cluster")) => {
            "by the curator's promise (there was one cluster, so none was scored)".into()
        }
        (_, Some("timeout")) => {
            "by the curator's promise (the time limit passed before the scoring)".into()
        }
        _ => "by the curator's promise (fewer than two scorers' scores could be read)".into(),
    }
}

/// The result as the export's report: the ideas and who gave them, the clusters in rank order
/// as a table (ideas, promise, average novelty, feasibility, impact and total, what put each
/// above the next), how they were ranked, the ideas left out of every cluster, the scorers
/// whose scores could not be read, and where the proposal came from.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let Some(r) = typed::<BrainstormResult>(result) else { return String::new() };
    let mut out = String::new();
    let models = &r.ideas.models;
    let all_ideas: Vec<&Idea> = models.iter().flat_map(|m| &m.ideas).collect();
    if !models.is_empty() {
        let by: Vec<String> = models
            .iter()
            .map(|m| format!("{} ({}) {}", m.source_label, m.model, m.idea_count))
            .collect();
        out.push_str(&format!(
            "**Ideas:** {} from {}: {}.\n\n",
            count(all_ideas.len() as u64, "idea", "ideas"),
            count(models.len() as u64, "model", "models"),
            by.join(", ")
        ));
    }
    let clustering = r.clustering.as_ref();
    let clusters = clustering.map_or(&[][..], |c| &c.clusters);
    let cluster_of = |id: &str| clusters.iter().find(|c| c.id == id);
    let ideas_in = |id: &str| cluster_of(id).map_or(0, |c| c.idea_ids.len());
    if let Some(ranking) = r.ranking.as_ref().filter(|k| !k.ranked_clusters.is_empty()) {
        out.push_str(&format!(
            "**The clusters, in rank order**, ranked {}:\n\n",
            method_words(ranking)
        ));
        let rows: Vec<Vec<String>> = ranking
            .ranked_clusters
            .iter()
            .map(|k| {
                let stated = cluster_of(&k.id).is_none_or(|c| c.promise_stated);
                let avg = |a: Option<f64>| match a {
                    Some(a) => average_words(a),
                    None if k.score_count == 0 => "not scored".into(),
                    None => String::new(),
                };
                vec![
                    k.rank.to_string(),
                    name_or_number(&k.name, cluster_number(&k.id)),
                    ideas_in(&k.id).to_string(),
                    promise_words(&k.promise, stated),
                    avg(k.average_novelty),
                    avg(k.average_feasibility),
                    avg(k.average_impact),
                    avg(k.average_score),
                    k.decided_by.as_deref().map_or("", decided_words).to_string(),
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
                let number = c.number().max(i + 1);
                vec![
                    number.to_string(),
                    name_or_number(&c.name, number),
                    c.idea_ids.len().to_string(),
                    promise_words(&c.promise, c.promise_stated),
                ]
            })
            .collect();
        out.push_str(&table(&["#", "cluster", "ideas", "promise"], &rows, &[0, 2]));
        out.push('\n');
    }
    if let Some(note) = clustering.and_then(|c| c.note.as_ref()) {
        out.push_str(&format!("**Clustering:** {note}\n\n"));
    }
    let left_out: Vec<String> = clustering
        .map_or(&[][..], |c| &c.unclustered_ids)
        .iter()
        .filter_map(|id| all_ideas.iter().find(|i| i.id == *id))
        .map(|i| format!("- {} ({})", i.title, i.source_label))
        .collect();
    if !left_out.is_empty() && !clusters.is_empty() {
        out.push_str(&format!(
            "**Ideas left out of every cluster** ({}):\n\n{}\n\n",
            left_out.len(),
            left_out.join("\n")
        ));
    }
    let unread: Vec<String> = r
        .scores
        .iter()
        .filter(|s| !s.valid)
        .map(|s| {
            let why = s.unparsed.as_ref().map_or(String::new(), |u| format!(" (it {u})"));
            format!("- {}: no score could be read{why}", s.model)
        })
        .collect();
    if !unread.is_empty() {
        out.push_str(&format!("**Scores not counted:**\n\n{}\n\n", unread.join("\n")));
    }
    let warnings: Vec<String> = r.ideas.summary.warnings.iter().map(|w| format!("- {w}")).collect();
    if !warnings.is_empty() {
        out.push_str(&format!("**About the ideas:**\n\n{}\n\n", warnings.join("\n")));
    }
    if let Some(f) = &r.refinement {
        let from = match f.cluster_name.as_deref() {
            Some("") => "the best cluster".to_string(),
            Some(n) => format!("the cluster \u{201c}{n}\u{201d}"),
            None => "all the ideas (no cluster could be read)".to_string(),
        };
        if f.fallback {
            out.push_str(&format!(
                "**No proposal:** the refiner failed, so the answer gives {from} as it stands.\n"
            ));
        } else {
            let by = match (&f.model, &f.fallback_from) {
                (Some(m), Some(b)) => format!(" by {m} (in place of {b})"),
                (Some(m), None) => format!(" by {m}"),
                _ => String::new(),
            };
            out.push_str(&format!("**Proposal:** written{by} from {from}.\n"));
        }
    }
    out
}
