//! What a Brainstorm run stores and reads back: the result from the stored rows, its outcome and
//! the export's report.

use super::*;

fn indexed(rows: &[StageRow], prefix: &str) -> Vec<Value> {
    let mut list: Vec<Value> = rows
        .iter()
        .filter(|r| r.stage_type.strip_prefix(prefix).is_some_and(|n| n.parse::<usize>().is_ok()))
        .filter_map(|r| r.parsed_data.clone())
        .collect();
    list.sort_by_key(|d| d["index"].as_u64());
    list
}

/// `{ideas: {models, totalIdeas, modelCount, warnings}, clustering, scores, ranking,
/// refinement, partial, failedModels}` from the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let ideated = indexed(rows, "ideation_");
    let mut ideas = ideation_summary(&ideated, &failed_from_rows(rows));
    ideas["models"] = json!(ideated);
    let clustering = row("clustering").and_then(|r| r.parsed_data.clone());
    let scores = indexed(rows, "scoring_");
    let ranking = row("ranking").and_then(|r| r.parsed_data.clone());
    let refinement = row("refinement").map(|r| {
        let mut d = r.parsed_data.clone().unwrap_or(json!({}));
        d["proposal"] = json!(r.content);
        d
    });
    let mut result = json!({
        "ideas": ideas, "clustering": clustering, "scores": scores, "ranking": ranking,
        "refinement": refinement,
    });
    mark_from_rows(&mut result, rows);
    result
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
