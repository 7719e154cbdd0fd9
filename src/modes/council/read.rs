//! Reading the members' rankings and aggregating them into the stage-2 metadata.

use super::*;

// ---- parsing and aggregation ----------------------------------------------------------------

/// Reads an evaluator's ranking (see [`super::ranking`]: only a stated ranking counts).
pub use super::ranking::parse_ranking;

/// Average position of each label over the evaluators whose ranking parsed, by the fractional
/// rule of [`super::ranking`] (tied labels share their places' mean; labels a partial ranking
/// leaves out share the places left); sorted best first (ties by label). `label_to_model`
/// names each label's member.
pub fn aggregate_rankings(
    stage2: &[Stage2Response],
    label_to_model: &BTreeMap<String, String>,
) -> Vec<AggregateRanking> {
    let labels: Vec<String> = label_to_model.keys().cloned().collect();
    let rankings: Vec<Vec<Vec<String>>> = stage2.iter().map(Stage2Response::places).collect();
    ranking::aggregate(&rankings, &labels)
        .into_iter()
        .map(|s| AggregateRanking {
            model: label_to_model.get(&s.label).cloned().unwrap_or_default(),
            label: s.label,
            average_rank: s.average_rank,
            rankings_count: s.rankings_count,
            named_count: s.named_count,
        })
        .collect()
}

pub(super) fn metadata(
    stage2: &[Stage2Response],
    label_to_model: &BTreeMap<String, String>,
) -> Stage2Metadata {
    let counted = stage2.iter().filter(|r| !r.parsed_ranking.is_empty()).count();
    Stage2Metadata {
        label_to_model: label_to_model.clone(),
        aggregate_rankings: aggregate_rankings(stage2, label_to_model),
        rankings_counted: counted,
        partial_rankings: stage2.iter().filter(|r| r.partial).count(),
        unparsed_rankings: stage2.len() - counted,
    }
}

/// An evaluator's reply as a [`Stage2Response`], read from its JSON when it fits `schema`.
pub(super) fn stage2_response(
    model: String,
    text: String,
    labels: &[String],
    schema: &ReplySchema,
    ms: u64,
) -> Stage2Response {
    let read = ranking::read_ranking_reply(&text, labels, schema);
    Stage2Response {
        model,
        parsed_ranking: read.order(),
        partial: read.partial(labels.len()),
        places: read.places,
        unparsed: read.unparsed,
        read_from: read.read_from,
        ranking: text,
        response_time_ms: ms as i64,
    }
}
