//! Brainstorm's prompts: ideation, clustering, scoring and refinement, with the texts they show
//! (the ideas, the clusters).

use super::*;

pub const IDEATE_HEAD: &str = "You are one of several brainstormers working on a challenge.";
pub const CLUSTER_HEAD: &str = "You are the curator of a brainstorm.";
pub const SCORE_HEAD: &str = "You are scoring the idea clusters of a brainstorm.";
pub const REFINE_HEAD: &str = "You are the refiner of a brainstorm.";
pub const IDEAS_START: &str = "=== IDEAS ===";
pub const IDEAS_END: &str = "=== END OF IDEAS ===";
pub const CLUSTERS_START: &str = "=== CLUSTERS ===";
pub const CLUSTERS_END: &str = "=== END OF CLUSTERS ===";
pub const PROMISES: [&str; 3] = ["HIGH", "MEDIUM", "LOW"];

/// The ideation prompt asking for the spec's `IDEA <n>:` headings, or, given the ideas'
/// schema, for its JSON (the same instructions otherwise).
pub fn ideate_prompt(question: &str, min: usize, schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => format!(
            "Give each idea a short title and one or two sentences describing it.\n\n{}",
            s.instruction()
        ),
        None => "Write each idea as a heading and one or two sentences, in exactly this \
                 format:\n\nIDEA 1: <short title>\n<one or two sentences describing the \
                 idea>\n\nIDEA 2: <short title>\n<…>"
            .to_string(),
    };
    format!(
        "{IDEATE_HEAD} Think freely: this is the divergent step, and nobody judges yet.\n\n\
         Challenge: {question}\n\nList {min} to {MAX_IDEAS} distinct ideas. Favour quantity and \
         range over polish: bold ideas and safe ones alike, from technical, business, user and \
         unusual angles. Do not rank, judge or compare them.\n\n{format}"
    )
}

/// Every idea as the curator sees it: `[id] title — description (Model X)`, by label.
pub(super) fn ideas_text(ideas: &[&Idea]) -> String {
    let mut s = String::new();
    for i in ideas {
        let desc = i.description.replace('\n', " ");
        if desc.is_empty() {
            s.push_str(&format!("[{}] {} ({})\n", i.id, i.title, i.source_label));
        } else {
            s.push_str(&format!("[{}] {} — {} ({})\n", i.id, i.title, desc, i.source_label));
        }
    }
    s
}

/// The curator's prompt asking for the spec's `CLUSTER <n>:` blocks, or, given the clusters'
/// schema, for its JSON (the same instructions otherwise).
pub fn cluster_prompt(
    question: &str,
    ideas: &[&Idea],
    models: usize,
    k: usize,
    schema: Option<&ReplySchema>,
) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Reply with one block per cluster, in exactly this format:\n\nCLUSTER 1: \
                 <name>\nTheme: <one sentence>\nPromise: HIGH|MEDIUM|LOW\nIdeas: <id>, <id>, \
                 …\n\nEnd with `CLUSTERING SUMMARY: <one line>`."
            .to_string(),
    };
    format!(
        "{CLUSTER_HEAD} {models} brainstormers listed {} ideas for the challenge below; each \
         is shown with its id and its (anonymous) source.\n\nChallenge: {question}\n\n\
         {IDEAS_START}\n{}{IDEAS_END}\n\nGroup related ideas into 3 to {k} themed clusters of \
         2 to 10 ideas each, naming the ideas by their ids. An idea belongs to one cluster at \
         most; leave out an idea that fits no cluster. Rate each cluster's promise.\n\n{format}",
        ideas.len(),
        ideas_text(ideas)
    )
}

pub(super) fn idea_lines(ideas: &[&Idea]) -> String {
    ideas
        .iter()
        .map(|i| {
            let desc = i.description.replace('\n', " ");
            if desc.is_empty() {
                format!("- {}\n", i.title)
            } else {
                format!("- {} — {desc}\n", i.title)
            }
        })
        .collect()
}

/// The clusters as a scorer sees them: numbered 1..k with name, theme and ideas.
pub(super) fn clusters_text(clusters: &[Cluster], ideas: &[Idea]) -> String {
    let mut listed = String::new();
    for (n, c) in clusters.iter().enumerate() {
        let members: Vec<&Idea> = c.idea_ids.iter().filter_map(|id| find(ideas, id)).collect();
        listed.push_str(&format!(
            "Cluster {}: {}\nTheme: {}\nIdeas:\n{}\n",
            n + 1,
            c.display_name(),
            c.theme.as_deref().unwrap_or("(not stated)"),
            idea_lines(&members)
        ));
    }
    listed
}

/// The scorer's prompt asking for the spec's `Cluster <n>:` lines, or, given the scores'
/// schema, for its JSON (the same instructions otherwise).
pub fn score_prompt(
    question: &str,
    clusters: &[Cluster],
    ideas: &[Idea],
    schema: Option<&ReplySchema>,
) -> String {
    let format = match schema {
        Some(s) => format!(
            "Rate every cluster by its number, with a justification of one or two \
             sentences.\n\n{}",
            s.instruction()
        ),
        None => "Reply with one block per cluster, using its number, in exactly this \
                 format:\n\nCluster 1: Novelty=<1-5> Feasibility=<1-5> Impact=<1-5>\n\
                 Justification: <one or two sentences>"
            .to_string(),
    };
    format!(
        "{SCORE_HEAD} Rate each numbered cluster of ideas below for the challenge.\n\n\
         Challenge: {question}\n\n{CLUSTERS_START}\n{}{CLUSTERS_END}\n\nRate every \
         cluster on Novelty (how original), Feasibility (how practical to carry out) and Impact \
         (how much it would help), each a whole number from 1 (low) to 5 (high). {format}",
        clusters_text(clusters, ideas)
    )
}

const PROPOSAL_FORMAT: &str = "Reply in markdown, starting with the line `## Proposal: <name>`, \
     then these sections:\n### Executive Summary\n### Core Concept\n### Implementation \
     Approach\n(steps and milestones)\n### Advantages\n### Risks & Mitigations\n(a table: risk, \
     impact, mitigation)\n### Next Steps\n(3 to 5)\n### Complementary Ideas\n(how the other \
     ideas listed can complement the proposal)";

pub fn refine_prompt(
    question: &str,
    cluster: &Cluster,
    ideas: &[Idea],
    ranked: Option<&Ranked>,
) -> String {
    let members: Vec<&Idea> = cluster.idea_ids.iter().filter_map(|id| find(ideas, id)).collect();
    let scores = match ranked.filter(|r| r.score_count > 0) {
        Some(r) => format!(
            "Average scores (1-5): Novelty {}, Feasibility {}, Impact {} (total {} of 15, from \
             {} scorer{})",
            fmt2(r.average_novelty),
            fmt2(r.average_feasibility),
            fmt2(r.average_impact),
            fmt2(r.average_score),
            r.score_count,
            if r.score_count == 1 { "" } else { "s" }
        ),
        None => format!("Not scored; the curator rated its promise {}", cluster.promise),
    };
    format!(
        "{REFINE_HEAD} The brainstorm's best cluster of ideas follows; develop it into one full \
         proposal.\n\nChallenge: {question}\n\nCluster: {}\nTheme: {}\n{scores}\nIdeas:\n{}\n\
         {PROPOSAL_FORMAT}",
        cluster.display_name(),
        cluster.theme.as_deref().unwrap_or("(not stated)"),
        idea_lines(&members)
    )
}

/// Every idea grouped by its (anonymous) source, as the refiner sees them without clusters.
pub(super) fn grouped_ideas(ideas: &[Idea]) -> String {
    let mut grouped = String::new();
    for (label, group) in by_label(ideas) {
        grouped.push_str(&format!("{label}:\n{}\n", idea_lines(&group)));
    }
    grouped
}

pub fn refine_all_prompt(question: &str, ideas: &[Idea]) -> String {
    let grouped = grouped_ideas(ideas);
    format!(
        "{REFINE_HEAD} The ideas could not be grouped into clusters, so all of them follow, \
         grouped by their (anonymous) source. Pick the most promising direction and develop it \
         into one full proposal.\n\nChallenge: {question}\n\n{IDEAS_START}\n{grouped}\
         {IDEAS_END}\n\n{PROPOSAL_FORMAT}"
    )
}

fn fmt2(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{v:.2}"))
}
