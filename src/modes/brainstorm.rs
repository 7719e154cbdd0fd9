//! Brainstorm mode (specs/14-brainstorm.md): every model lists ideas freely (in parallel); one
//! curator groups all of them, anonymised by source, into themed clusters; every model rates
//! each cluster's Novelty, Feasibility and Impact (in parallel); the server ranks the clusters
//! (models never do this arithmetic); one refiner turns the best cluster into a full proposal,
//! which is the answer.
//!
//! Each stage is stored the moment it completes (each ideator, the clustering, each scorer, the
//! ranking, the refinement), so a cancelled or interrupted run keeps what finished. The source
//! labels (`Model A`, `Model B`…) are a pure function of the run's seed, so a resumed run labels
//! the models the same. Replies are read only where they state an idea, a cluster or a score;
//! what is not stated is absent (an unscored cluster, a default promise marked as such), never
//! guessed.
//!
//! The ideas, the clusters and the scores are machine-read: each call carries its reply schema
//! (`brainstorm_ideas`, `brainstorm_clusters` over exactly this run's idea ids, `brainstorm_scores`
//! over the clusters' numbers), and a model whose route takes structured output is asked for
//! that JSON instead of the text format. A reply is read from its JSON when it fits, under the
//! same rules as the text, else by the text readers; each ideator, the clustering and each
//! scorer say which (`readFrom`). The proposal is text a person reads and carries none.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    create_label_map, empty_is_failure, failed_from_rows, label, mark_from_rows, title_prompt,
    Batch, Calls, FailedModel, Routed, SplitMix64, TitleTracker, TITLE_KEY,
};
use super::reading::{answer_text, bare, between, re, unmark, Unparsed};
use super::registry::{schema_of, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::ModelId;
use super::schema::{self, Asking, ReadFrom, ReplySchema};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, FieldError, Mode,
    RunContext, StageRow, ValidRequest,
};

const SIM_MODELS: [&str; 3] = ["sim/alpha", "sim/beta", "sim/gamma"];
const SEED_MODELS: [&str; 3] = ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];
const GLOBAL_TIMER: &str = "global";
const IDEATION_ORDER: i32 = 0;
const CLUSTERING_ORDER: i32 = 10;
const SCORING_ORDER: i32 = 20;
const RANKING_ORDER: i32 = 21;
const REFINEMENT_ORDER: i32 = 99;
/// Ideas kept per model; the rest of a longer list is dropped (and counted).
pub const MAX_IDEAS: usize = 10;

/// Brainstorm's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BrainstormRequest {
    /// The models that list ideas and then score the clusters, 3 to 6 (default: Council's
    /// three).
    #[schemars(length(min = 3, max = 6))]
    pub models: Option<Vec<ModelId>>,
    /// Groups the ideas into clusters (default: the first model).
    pub curator_model: Option<ModelId>,
    /// Turns the best cluster into the proposal (default: the first model).
    pub refiner_model: Option<ModelId>,
    /// Ideas each model is asked for at least (it may give up to 10): 3 to 10 (5).
    #[schemars(range(min = 3, max = 10))]
    pub min_ideas_per_model: Option<i64>,
    /// The most clusters the curator may form: 3 to 8 (6).
    #[schemars(range(min = 3, max = 8))]
    pub max_clusters: Option<i64>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 180000))]
    pub timeout_ms: Option<i64>,
    /// The whole run's time limit in milliseconds (600000): the stage in flight finishes, the
    /// stages before the refinement are skipped, and the refiner works with what exists.
    #[schemars(range(min = 60000, max = 1800000))]
    pub global_timeout_ms: Option<i64>,
}

/// The stored configuration of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BrainstormConfig {
    pub models: Vec<String>,
    pub curator_model: String,
    pub refiner_model: String,
    pub min_ideas_per_model: usize,
    pub max_clusters: usize,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
    /// The server's backup for the curator (`[fallback] facilitator`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facilitator_fallback_model: Option<String>,
    /// The server's backup for the refiner (`[fallback] chairman`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: BrainstormRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let models = request::models(
        cfg.models.as_deref(),
        "modeConfig.models",
        3..=6,
        Some("A brainstorm needs at least 3 models"),
        Some("A brainstorm has at most 6 models"),
    )?
    .unwrap_or_else(|| request::ids(if defaults.offline { &SIM_MODELS } else { &SEED_MODELS }));
    let curator_model = request::model(cfg.curator_model.as_ref(), "modeConfig.curatorModel")?
        .unwrap_or_else(|| models[0].clone());
    let refiner_model = request::model(cfg.refiner_model.as_ref(), "modeConfig.refinerModel")?
        .unwrap_or_else(|| models[0].clone());
    let min_ideas =
        request::whole(cfg.min_ideas_per_model, "modeConfig.minIdeasPerModel", 3..=10, 5)?;
    let max_clusters = request::whole(cfg.max_clusters, "modeConfig.maxClusters", 3..=8, 6)?;
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        "modeConfig.timeoutMs",
        10_000..=180_000,
        defaults.stage_timeout_ms,
    )?;
    let global_timeout_ms = request::timeout(
        cfg.global_timeout_ms,
        "modeConfig.globalTimeoutMs",
        60_000..=1_800_000,
        600_000,
    )?;
    let all = request::distinct(&[&models], &[&curator_model, &refiner_model]);
    let config = BrainstormConfig {
        facilitator_fallback_model: Fallbacks::for_role(
            &defaults.fallback.facilitator,
            &curator_model,
        ),
        chairman_fallback_model: Fallbacks::for_role(&defaults.fallback.chairman, &refiner_model),
        models,
        curator_model,
        refiner_model,
        min_ideas_per_model: min_ideas as usize,
        max_clusters: max_clusters as usize,
        timeout_ms,
        global_timeout_ms,
    };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models: all,
    })
}

/// Brainstorm in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "brainstorm",
    label: "Brainstorm",
    description: "3-6 models list ideas freely, a curator groups them into themed clusters, every model scores the clusters on novelty, feasibility and impact, and the best cluster is refined into a full proposal.",
    multi_turn: false,
    question: Question { label: "Challenge", required: Some("Question is required") },
    roles: &[
        Role {
            id: "ideator",
            label: "Brainstormers (they also score the clusters)",
            field: Some("models"),
            panel: true,
            fallback: None,
            sim_default: &SIM_MODELS,
            default: &SEED_MODELS,
        },
        // The refiner before the curator: `conclave run`'s `--chairman` names the first
        // single-model role with a backup, and the refiner is the one that writes the result.
        Role {
            id: "refiner",
            label: "Refiner",
            field: Some("refinerModel"),
            panel: false,
            fallback: Some("chairman"),
            sim_default: &[SIM_MODELS[0]],
            default: &[SEED_MODELS[0]],
        },
        Role {
            id: "curator",
            label: "Curator",
            field: Some("curatorModel"),
            panel: false,
            fallback: Some("facilitator"),
            sim_default: &[SIM_MODELS[0]],
            default: &[SEED_MODELS[0]],
        },
        Role::internal("scorer", "Scorers (the brainstormers)"),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<BrainstormRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Brainstorm::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("ideation", "listing ideas"), ("all_ideation", "every idea list in"), ("clustering", "grouping the ideas"), ("scoring", "scoring the clusters"), ("scorer", "a scorer's ratings"), ("all_scoring", "every score in"), ("refinement", "writing the proposal")],
    report: Some(report),
    example: || {
        json!({ "mode": "brainstorm", "question": "How could a small city library attract more teenagers?",
                "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma"],
                                "curatorModel": "sim/delta", "refinerModel": "sim/delta" } })
    },
    sim: Some(sim_answer),
};

// ---- prompts -------------------------------------------------------------------------------

pub const IDEATE_HEAD: &str = "You are one of several brainstormers working on a challenge.";
pub const CLUSTER_HEAD: &str = "You are the curator of a brainstorm.";
pub const SCORE_HEAD: &str = "You are scoring the idea clusters of a brainstorm.";
pub const REFINE_HEAD: &str = "You are the refiner of a brainstorm.";
pub const IDEAS_START: &str = "=== IDEAS ===";
pub const IDEAS_END: &str = "=== END OF IDEAS ===";
pub const CLUSTERS_START: &str = "=== CLUSTERS ===";
pub const CLUSTERS_END: &str = "=== END OF CLUSTERS ===";
pub const PROMISES: [&str; 3] = ["HIGH", "MEDIUM", "LOW"];

pub fn ideate_prompt(question: &str, min: usize) -> String {
    ideate_prompt_as(question, min, None)
}

/// The ideation prompt asking for the spec's `IDEA <n>:` headings, or, given the ideas'
/// schema, for its JSON (the same instructions otherwise).
pub fn ideate_prompt_as(question: &str, min: usize, schema: Option<&ReplySchema>) -> String {
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
fn ideas_text(ideas: &[&Idea]) -> String {
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

pub fn cluster_prompt(question: &str, ideas: &[&Idea], models: usize, k: usize) -> String {
    cluster_prompt_as(question, ideas, models, k, None)
}

/// The curator's prompt asking for the spec's `CLUSTER <n>:` blocks, or, given the clusters'
/// schema, for its JSON (the same instructions otherwise).
pub fn cluster_prompt_as(
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

fn idea_lines(ideas: &[&Idea]) -> String {
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
fn clusters_text(clusters: &[Cluster], ideas: &[Idea]) -> String {
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

pub fn score_prompt(question: &str, clusters: &[Cluster], ideas: &[Idea]) -> String {
    score_prompt_as(question, clusters, ideas, None)
}

/// The scorer's prompt asking for the spec's `Cluster <n>:` lines, or, given the scores'
/// schema, for its JSON (the same instructions otherwise).
pub fn score_prompt_as(
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
fn grouped_ideas(ideas: &[Idea]) -> String {
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

// ---- reading replies -----------------------------------------------------------------------

/// One idea, as parsed from a model's list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Idea {
    /// `model_<i>_idea_<k>`: i the model's position in `models`, k the order parsed.
    pub id: String,
    pub title: String,
    pub description: String,
    pub model: String,
    pub source_label: String,
}

/// A model's list as read: the ideas (at most 10) and how many more it listed.
#[derive(Debug, Clone, PartialEq)]
pub struct IdeaList {
    /// (title, description) in order.
    pub ideas: Vec<(String, String)>,
    pub dropped: usize,
}

/// A numbered heading `<word> 3:` (also `#3`, then `:`, `.` or a dash): the number and the
/// rest of the line (markup removed).
fn numbered(
    cell: &'static OnceLock<regex::Regex>,
    word: &str,
    line: &str,
) -> Option<(u64, String)> {
    let r = re(
        cell,
        &format!(
            r"(?i)^{word}\s*(?:\*\*|__)?\s*#?\s*(\d{{1,6}})\s*(?:\*\*|__)?\s*(?:[:.\-–—]\s*(.*))?$"
        ),
    );
    let c = r.captures(line)?;
    Some((c[1].parse().ok()?, unmark(c.get(2).map_or("", |m| m.as_str()))))
}

fn idea_heading(line: &str) -> Option<(u64, String)> {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    numbered(&RE, "idea", line)
}

fn cluster_heading(line: &str) -> Option<(u64, String)> {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    numbered(&RE, "cluster", line)
}

/// A rule (`---`, `***`) or a line of markup only.
fn is_rule(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && t.chars().all(|c| matches!(c, '-' | '*' | '_' | '=' | ' '))
}

/// Reads a model's ideas (its answer part only): an `IDEA <n>` heading with a title starts
/// one; its description is the lines after it up to the next heading.
pub fn read_ideas(reply: &str) -> IdeaList {
    static DESC: OnceLock<regex::Regex> = OnceLock::new();
    let desc_label = re(&DESC, r"(?i)^(?:description|desc)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?");
    let text = answer_text(reply);
    let mut all: Vec<(String, Vec<String>)> = Vec::new();
    let mut open = false;
    for raw in text.lines() {
        let line = bare(raw);
        if let Some((_, title)) = idea_heading(line) {
            let title = title.trim_matches(['"', '“', '”']).trim().to_string();
            open = !title.is_empty();
            if open {
                all.push((title, Vec::new()));
            }
            continue;
        }
        if raw.trim_start().starts_with('#') {
            // Another heading ends the description.
            open = false;
            continue;
        }
        let Some(idea) = all.last_mut().filter(|_| open) else { continue };
        if line.is_empty() || is_rule(raw) {
            continue;
        }
        let line = match desc_label.find(line) {
            Some(m) => &line[m.end()..],
            None => line,
        };
        let line = unmark(line);
        if !line.is_empty() {
            idea.1.push(line);
        }
    }
    let dropped = all.len().saturating_sub(MAX_IDEAS);
    all.truncate(MAX_IDEAS);
    IdeaList { ideas: all.into_iter().map(|(t, d)| (t, d.join("\n"))).collect(), dropped }
}

/// A promise as stated: exactly one of HIGH, MEDIUM, LOW; None for anything else (an echoed
/// `HIGH|MEDIUM|LOW` states none).
pub fn promise_of(value: &str) -> Option<&'static str> {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let found: Vec<String> = re(&RE, r"(?i)\b(high|medium|low)\b")
        .find_iter(value)
        .map(|m| m.as_str().to_uppercase())
        .collect();
    let first = found.first()?;
    if found.iter().any(|f| f != first) {
        return None;
    }
    PROMISES.into_iter().find(|p| p == first)
}

/// One cluster as the curator formed it (after the rules of the spec's "Parsing").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// `cluster_1`…, renumbered in order kept.
    pub id: String,
    /// As written ("" when the heading named none).
    pub name: String,
    pub theme: Option<String>,
    /// HIGH, MEDIUM or LOW; MEDIUM when not stated.
    pub promise: String,
    /// False when the curator stated no readable promise (MEDIUM is used).
    pub promise_stated: bool,
    pub idea_ids: Vec<String>,
}

impl Cluster {
    /// 1-based position.
    pub fn number(&self) -> usize {
        self.id.strip_prefix("cluster_").and_then(|n| n.parse().ok()).unwrap_or(0)
    }

    fn display_name(&self) -> String {
        if self.name.is_empty() {
            format!("Cluster {}", self.number())
        } else {
            self.name.clone()
        }
    }
}

/// The curator's reply as read against the ideas.
#[derive(Debug, Clone, PartialEq)]
pub struct Clustering {
    pub clusters: Vec<Cluster>,
    /// Ideas in no kept cluster, in idea order.
    pub unclustered: Vec<String>,
}

fn cluster_field(line: &str) -> Option<(String, &str)> {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let r = re(
        &RE,
        r"(?i)^(theme|promise|ideas|clustering\s+summary)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?",
    );
    let c = r.captures(line)?;
    let name = c.get(1)?.as_str().to_lowercase();
    let name = if name.starts_with("clustering") { "summary".to_string() } else { name };
    Some((name, &line[c.get(0)?.end()..]))
}

/// The ids named in an `Ideas:` value: split on commas and spaces, brackets and markup
/// dropped, matched against `known` ignoring case (the known spelling kept).
fn ids_in(value: &str, known: &[&str]) -> Vec<String> {
    value
        .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .map(|t| t.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_')))
        .filter(|t| !t.is_empty())
        .filter_map(|t| known.iter().find(|k| k.eq_ignore_ascii_case(t)).map(|k| k.to_string()))
        .collect()
}

/// A cluster as the curator stated it, before the placement rules.
struct StatedCluster {
    name: String,
    theme: Option<String>,
    /// None: no readable promise stated.
    promise: Option<&'static str>,
    /// The ids named, known ones only, in order.
    ids: Vec<String>,
}

/// Reads the curator's clusters (its answer part only): unknown ids dropped, an idea already
/// placed stays in its first cluster, empty clusters dropped, the first `k` kept and
/// renumbered; the rest of the ideas are unclustered.
pub fn read_clusters(reply: &str, ideas: &[Idea], k: usize) -> Clustering {
    struct Block {
        name: String,
        theme: Option<String>,
        promise: Option<Option<&'static str>>,
        ids: Option<Vec<String>>,
        /// `Ideas:` had an empty first line: the ids follow on the next lines.
        ids_open: bool,
    }
    let known: Vec<&str> = ideas.iter().map(|i| i.id.as_str()).collect();
    let text = answer_text(reply);
    let mut blocks: Vec<Block> = Vec::new();
    let mut open = false;
    for raw in text.lines() {
        let line = bare(raw);
        if let Some((_, name)) = cluster_heading(line) {
            blocks.push(Block { name, theme: None, promise: None, ids: None, ids_open: false });
            open = true;
            continue;
        }
        let Some(b) = blocks.last_mut().filter(|_| open) else { continue };
        if let Some((name, value)) = cluster_field(line) {
            b.ids_open = false;
            match name.as_str() {
                "summary" => open = false,
                "theme" if b.theme.is_none() => {
                    b.theme = Some(unmark(value)).filter(|v| !v.is_empty());
                }
                "promise" if b.promise.is_none() => b.promise = Some(promise_of(value)),
                "ideas" if b.ids.is_none() => {
                    let ids = ids_in(value, &known);
                    b.ids_open = unmark(value).is_empty();
                    b.ids = Some(ids);
                }
                _ => {}
            }
            continue;
        }
        if b.ids_open {
            if line.is_empty() {
                b.ids_open = false;
            } else if let Some(ids) = b.ids.as_mut() {
                ids.extend(ids_in(line, &known));
            }
        }
    }
    let stated = blocks
        .into_iter()
        .map(|b| StatedCluster {
            name: b.name,
            theme: b.theme,
            promise: b.promise.flatten(),
            ids: b.ids.unwrap_or_default(),
        })
        .collect();
    place(stated, &known, k)
}

/// The placement rules over the clusters as stated (from text or JSON alike): an id not of
/// this run is dropped, an idea already placed stays in its first cluster, empty clusters are
/// dropped, the first `k` kept and renumbered; the rest of the ideas are unclustered.
fn place(stated: Vec<StatedCluster>, known: &[&str], k: usize) -> Clustering {
    let mut placed: Vec<String> = Vec::new();
    let mut clusters: Vec<Cluster> = Vec::new();
    for b in stated {
        let mut members: Vec<String> = Vec::new();
        for id in b.ids {
            if known.contains(&id.as_str()) && !placed.contains(&id) && !members.contains(&id) {
                members.push(id);
            }
        }
        if members.is_empty() {
            continue;
        }
        if clusters.len() == k {
            // Past the first k kept clusters: its ideas stay unclustered.
            continue;
        }
        placed.extend(members.iter().cloned());
        clusters.push(Cluster {
            id: format!("cluster_{}", clusters.len() + 1),
            name: b.name.trim_matches(['"', '“', '”']).trim().to_string(),
            theme: b.theme,
            promise: b.promise.unwrap_or("MEDIUM").to_string(),
            promise_stated: b.promise.is_some(),
            idea_ids: members,
        });
    }
    let unclustered =
        known.iter().filter(|id| !placed.iter().any(|p| p == *id)).map(|s| s.to_string()).collect();
    Clustering { clusters, unclustered }
}

/// One scorer's rating of one cluster (every dimension stated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterScore {
    pub cluster_id: String,
    pub novelty: u8,
    pub feasibility: u8,
    pub impact: u8,
    /// novelty + feasibility + impact (3-15).
    pub total: u8,
    pub justification: Option<String>,
}

/// A stated 1-5 value: half up, then clamped to 1-5. None for a template echoed back (`1-5`).
fn dimension(block: &str, name: &str) -> Option<u8> {
    static NOVELTY: OnceLock<regex::Regex> = OnceLock::new();
    static FEASIBILITY: OnceLock<regex::Regex> = OnceLock::new();
    static IMPACT: OnceLock<regex::Regex> = OnceLock::new();
    let cell = match name {
        "novelty" => &NOVELTY,
        "feasibility" => &FEASIBILITY,
        _ => &IMPACT,
    };
    let r = re(
        cell,
        &format!(
            r"(?i)\b{name}\b[*_ \t]*(?:\([^)\n]{{0,20}}\))?[*_ \t]*[=:：][*_ \t]*(-?\d{{1,3}}(?:\.\d+)?)(\s*(?:[-–]|to)\s*\d)?"
        ),
    );
    let c = r.captures(block)?;
    if c.get(2).is_some() {
        return None;
    }
    let v: f64 = c[1].parse().ok()?;
    Some((v + 0.5).floor().clamp(1.0, 5.0) as u8)
}

/// Reads a scorer's ratings (its answer part only) of clusters `1..=k`: from a `Cluster <n>`
/// line to the next, the first Novelty, Feasibility and Impact values; a repeated number takes
/// the last block; a cluster missing a dimension is unscored. In cluster order.
pub fn read_scores(reply: &str, clusters: &[Cluster]) -> Vec<ClusterScore> {
    static JUST: OnceLock<regex::Regex> = OnceLock::new();
    let just =
        re(&JUST, r"(?im)^[ \t>*_#-]*justification\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?(.*)$");
    let text = answer_text(reply);
    let mut blocks: BTreeMap<u64, String> = BTreeMap::new();
    let mut current: Option<(u64, String)> = None;
    for raw in text.lines() {
        let line = bare(raw);
        if let Some((n, rest)) = cluster_line(line) {
            if let Some((m, b)) = current.take() {
                blocks.insert(m, b);
            }
            current = Some((n, rest));
            continue;
        }
        if let Some((_, b)) = current.as_mut() {
            b.push('\n');
            b.push_str(raw);
        }
    }
    if let Some((m, b)) = current.take() {
        blocks.insert(m, b);
    }
    clusters
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let block = blocks.get(&(i as u64 + 1))?;
            let n = dimension(block, "novelty")?;
            let f = dimension(block, "feasibility")?;
            let im = dimension(block, "impact")?;
            let justification =
                just.captures(block).map(|c| unmark(&c[1])).filter(|j| !j.is_empty());
            Some(ClusterScore {
                cluster_id: c.id.clone(),
                novelty: n,
                feasibility: f,
                impact: im,
                total: n + f + im,
                justification,
            })
        })
        .collect()
}

/// A `Cluster <n>` line: the number and the rest of the line (its values, when on one line).
fn cluster_line(line: &str) -> Option<(u64, String)> {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let r = re(&RE, r"(?i)^cluster\s*(?:\*\*|__)?\s*#?\s*(\d{1,6})\b(.*)$");
    let c = r.captures(line)?;
    Some((c[1].parse().ok()?, c[2].to_string()))
}

// ---- structured replies --------------------------------------------------------------------
//
// A model whose route takes structured output is asked for JSON instead of the text blocks:
// an ideator for `brainstorm_ideas` (its ideas, each a title and a description, as many as
// the text asks for), the curator for `brainstorm_clusters` (each cluster's name, theme,
// promise as one of HIGH / MEDIUM / LOW, and its ideas as ids of exactly this run), a scorer
// for `brainstorm_scores` (one rating per cluster by its number 1..k, each dimension a whole
// number from 1 to 5). A reply is read from its JSON when it fits the schema and states what
// the text would have to (an idea with a title, a cluster with an idea); else by the text
// readers above. The JSON is held to the text's rules: an idea placed twice stays in its
// first cluster, a cluster past K is dropped, a cluster rated twice takes its last rating.

/// The ideation's schema name (the sim answers it by this name).
pub const IDEAS_SCHEMA: &str = "brainstorm_ideas";
/// The clustering's schema name.
pub const CLUSTERS_SCHEMA: &str = "brainstorm_clusters";
/// A scorer's schema name.
pub const SCORES_SCHEMA: &str = "brainstorm_scores";
/// The most ideas a cluster may hold (the prompt's 2 to 10).
pub const MAX_CLUSTER_IDEAS: usize = 10;
/// Bounds of the free-text fields (a small model looping inside a string still ends).
const TITLE_CHARS: usize = 120;
const DESCRIPTION_CHARS: usize = 400;
const THEME_CHARS: usize = 300;
const JUSTIFICATION_CHARS: usize = 200;

/// An ideator's reply as JSON: the reasoning, then `min` to 10 ideas, each a short title and
/// one or two sentences.
pub fn ideas_schema(min: usize) -> Arc<ReplySchema> {
    let min = min.clamp(1, MAX_IDEAS);
    let idea = schema::object([
        ("title", schema::described(schema::text(TITLE_CHARS), "a short title")),
        (
            "description",
            schema::described(
                schema::text(DESCRIPTION_CHARS),
                "one or two sentences describing the idea",
            ),
        ),
    ]);
    ReplySchema::new(
        IDEAS_SCHEMA,
        schema::reasoned([(
            "ideas",
            schema::described(schema::list(idea, min, MAX_IDEAS), "your distinct ideas"),
        )]),
    )
}

/// The curator's reply as JSON over the ideas `ids` of this run, with at most `k` clusters:
/// the reasoning, then the clusters, each with its name, theme, ideas (ids of this run, each
/// once, 2 to 10) and promise. The counts ask what the prompt asks (3 to K clusters of 2 to 10
/// ideas), lowered where there are too few ideas to fill them.
pub fn clusters_schema<S: AsRef<str>>(ids: &[S], k: usize) -> Arc<ReplySchema> {
    let n = ids.len();
    let per_cluster = (2.min(n).max(1), MAX_CLUSTER_IDEAS.min(n).max(1));
    let count = (3.min(n / 2).max(1), k.max(1));
    let cluster = schema::object([
        ("name", schema::described(schema::text(TITLE_CHARS), "the cluster's name")),
        ("theme", schema::described(schema::text(THEME_CHARS), "its theme, in one sentence")),
        (
            "ideas",
            schema::described(
                // Not `uniqueItems`: a grammar cannot hold a model to it, and an id named twice
                // in one cluster still places the idea there (read once). CI's model wrote one.
                schema::list(schema::one_of(ids), per_cluster.0, per_cluster.1),
                "the ids of its ideas, each once",
            ),
        ),
        ("promise", schema::described(schema::one_of(&PROMISES), "how promising it is")),
    ]);
    ReplySchema::new(
        CLUSTERS_SCHEMA,
        schema::reasoned([(
            "clusters",
            schema::described(
                schema::list(cluster, count.0, count.1.max(count.0)),
                "the themed clusters; an idea belongs to one cluster at most",
            ),
        )]),
    )
}

/// A scorer's reply as JSON for `k` clusters: the reasoning, then one rating per cluster by
/// its number, each dimension a whole number from 1 to 5, its justification before the
/// numbers so the model weighs before it commits.
pub fn scores_schema(k: usize) -> Arc<ReplySchema> {
    let k = k.max(1);
    let rating = schema::object([
        (
            "cluster",
            schema::described(schema::integer(1, k as i64), "the number of the cluster rated"),
        ),
        (
            "justification",
            schema::described(schema::text(JUSTIFICATION_CHARS), "one or two sentences"),
        ),
        ("novelty", schema::described(schema::integer(1, 5), "how original")),
        ("feasibility", schema::described(schema::integer(1, 5), "how practical to carry out")),
        ("impact", schema::described(schema::integer(1, 5), "how much it would help")),
    ]);
    ReplySchema::new(
        SCORES_SCHEMA,
        schema::reasoned([(
            "scores",
            schema::described(
                schema::list(rating, k, k),
                "one rating per cluster, in the order of the clusters",
            ),
        )]),
    )
}

/// A JSON string field, trimmed.
fn json_str<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("").trim()
}

/// An ideator's reply read from its JSON when it fits `schema` and holds an idea with a
/// title (an idea without one is none, as a heading without a title is none in text), else
/// by its text ([`read_ideas`]); with where it was read from when it gave ideas.
pub fn read_ideas_reply(reply: &str, schema: &ReplySchema) -> (IdeaList, Option<ReadFrom>) {
    let from_json = schema.read(reply).and_then(|v| {
        let ideas: Vec<(String, String)> = v
            .get("ideas")?
            .as_array()?
            .iter()
            .filter_map(|i| {
                let title = json_str(i, "title").trim_matches(['"', '“', '”']).trim();
                (!title.is_empty())
                    .then(|| (title.to_string(), json_str(i, "description").to_string()))
            })
            .collect();
        (!ideas.is_empty()).then_some(IdeaList { ideas, dropped: 0 })
    });
    match from_json {
        Some(l) => (l, Some(ReadFrom::Json)),
        None => {
            let l = read_ideas(reply);
            let from = (!l.ideas.is_empty()).then_some(ReadFrom::Text);
            (l, from)
        }
    }
}

/// The curator's reply read from its JSON when it fits `schema` (the clusters under the text's
/// placement rules: an idea placed twice stays in its first cluster, the first `k` kept), else
/// by its text ([`read_clusters`]); with where it was read from when it gave a cluster.
pub fn read_clusters_reply(
    reply: &str,
    ideas: &[Idea],
    k: usize,
    schema: &ReplySchema,
) -> (Clustering, Option<ReadFrom>) {
    let known: Vec<&str> = ideas.iter().map(|i| i.id.as_str()).collect();
    let from_json = schema.read(reply).and_then(|v| {
        let stated = v
            .get("clusters")?
            .as_array()?
            .iter()
            .map(|c| StatedCluster {
                name: json_str(c, "name").to_string(),
                theme: Some(json_str(c, "theme").to_string()).filter(|t| !t.is_empty()),
                promise: PROMISES.into_iter().find(|p| *p == json_str(c, "promise")),
                ids: c
                    .get("ideas")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
            })
            .collect();
        let c = place(stated, &known, k);
        (!c.clusters.is_empty()).then_some(c)
    });
    match from_json {
        Some(c) => (c, Some(ReadFrom::Json)),
        None => {
            let c = read_clusters(reply, ideas, k);
            let from = (!c.clusters.is_empty()).then_some(ReadFrom::Text);
            (c, from)
        }
    }
}

/// A scorer's reply read from its JSON when it fits `schema` (each cluster by the last rating
/// naming its number, as a repeated block in text), else by its text ([`read_scores`]); with
/// where it was read from when it scored a cluster.
pub fn read_scores_reply(
    reply: &str,
    clusters: &[Cluster],
    schema: &ReplySchema,
) -> (Vec<ClusterScore>, Option<ReadFrom>) {
    let from_json = schema.read(reply).and_then(|v| {
        let items = v.get("scores")?.as_array()?;
        let scores: Vec<ClusterScore> = clusters
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let item =
                    items.iter().rev().find(|s| s["cluster"].as_u64() == Some(i as u64 + 1))?;
                let value =
                    |k: &str| item.get(k).and_then(Value::as_u64).filter(|v| (1..=5).contains(v));
                let (n, f, im) =
                    (value("novelty")? as u8, value("feasibility")? as u8, value("impact")? as u8);
                let justification =
                    Some(json_str(item, "justification").to_string()).filter(|j| !j.is_empty());
                Some(ClusterScore {
                    cluster_id: c.id.clone(),
                    novelty: n,
                    feasibility: f,
                    impact: im,
                    total: n + f + im,
                    justification,
                })
            })
            .collect();
        (!scores.is_empty()).then_some(scores)
    });
    match from_json {
        Some(s) => (s, Some(ReadFrom::Json)),
        None => {
            let s = read_scores(reply, clusters);
            let from = (!s.is_empty()).then_some(ReadFrom::Text);
            (s, from)
        }
    }
}

// ---- ranking (the server's arithmetic) -----------------------------------------------------

/// One cluster in the ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ranked {
    pub rank: usize,
    pub id: String,
    pub name: String,
    pub promise: String,
    /// Averages over the valid scores of the cluster, two decimals; null when unscored.
    pub average_novelty: Option<f64>,
    pub average_feasibility: Option<f64>,
    pub average_impact: Option<f64>,
    /// Average total (3-15).
    pub average_score: Option<f64>,
    pub score_count: usize,
    /// What put it above the next cluster down (`averageScore`, `averageImpact`,
    /// `averageFeasibility`, `promise`, `clusterNumber`, `scored`); null for the last.
    pub decided_by: Option<String>,
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn promise_rank(p: &str) -> u8 {
    match p {
        "HIGH" => 0,
        "MEDIUM" => 1,
        _ => 2,
    }
}

/// The ranking of `clusters` from the valid scorers' `scores`: by scores with 2 valid scorers
/// or more, else by promise (see the spec's "Computation"). Answers the list and the method.
pub fn rank(clusters: &[Cluster], scores: &[Vec<ClusterScore>]) -> (Vec<Ranked>, &'static str) {
    let by_scores = scores.len() >= 2;
    let mut list: Vec<Ranked> = clusters
        .iter()
        .map(|c| {
            let mine: Vec<&ClusterScore> =
                scores.iter().flatten().filter(|s| s.cluster_id == c.id).collect();
            let n = mine.len();
            let avg = |f: fn(&ClusterScore) -> u8| {
                (n > 0)
                    .then(|| round2(mine.iter().map(|s| f64::from(f(s))).sum::<f64>() / n as f64))
            };
            Ranked {
                rank: 0,
                id: c.id.clone(),
                name: c.name.clone(),
                promise: c.promise.clone(),
                average_novelty: avg(|s| s.novelty),
                average_feasibility: avg(|s| s.feasibility),
                average_impact: avg(|s| s.impact),
                average_score: avg(|s| s.total),
                score_count: n,
                decided_by: None,
            }
        })
        .collect();
    let number = |r: &Ranked| {
        r.id.strip_prefix("cluster_").and_then(|n| n.parse::<usize>().ok()).unwrap_or(0)
    };
    // Keys in order, each smaller = better; the name says what it compares.
    let keys = |r: &Ranked| -> Vec<(&'static str, i64)> {
        let neg = |v: Option<f64>| -((v.unwrap_or(0.0) * 100.0).round() as i64);
        let mut k = Vec::new();
        if by_scores {
            k.push(("scored", i64::from(r.score_count == 0)));
            k.push(("averageScore", neg(r.average_score)));
            k.push(("averageImpact", neg(r.average_impact)));
            k.push(("averageFeasibility", neg(r.average_feasibility)));
        }
        k.push(("promise", i64::from(promise_rank(&r.promise))));
        k.push(("clusterNumber", number(r) as i64));
        k
    };
    list.sort_by(|a, b| {
        let (ka, kb) = (keys(a), keys(b));
        ka.iter().map(|x| x.1).cmp(kb.iter().map(|x| x.1))
    });
    for i in 0..list.len() {
        list[i].rank = i + 1;
        if let Some(next) = list.get(i + 1) {
            let (ka, kb) = (keys(&list[i]), keys(next));
            list[i].decided_by =
                ka.iter().zip(&kb).find(|(a, b)| a.1 != b.1).map(|(a, _)| a.0.to_string());
        }
    }
    (list, if by_scores { "scores" } else { "promise" })
}

/// K: the most clusters asked for.
pub fn cluster_limit(max_clusters: usize, ideas: usize) -> usize {
    if ideas >= 10 {
        max_clusters
    } else {
        3.max(max_clusters.min(ideas / 2))
    }
}

fn find<'a>(ideas: &'a [Idea], id: &str) -> Option<&'a Idea> {
    ideas.iter().find(|i| i.id == id)
}

/// Ideas grouped by source label, labels in order.
fn by_label(ideas: &[Idea]) -> Vec<(String, Vec<&Idea>)> {
    let mut out: Vec<(String, Vec<&Idea>)> = Vec::new();
    let mut sorted: Vec<&Idea> = ideas.iter().collect();
    sorted.sort_by(|a, b| {
        (a.source_label.len(), &a.source_label).cmp(&(b.source_label.len(), &b.source_label))
    });
    for i in sorted {
        match out.last_mut() {
            Some((l, g)) if *l == i.source_label => g.push(i),
            _ => out.push((i.source_label.clone(), vec![i])),
        }
    }
    out
}

/// `Model A`, `Model B`… for label position `k`.
pub fn source_label(k: usize) -> String {
    label(k).replacen("Response", "Model", 1)
}

/// The answer when the refiner and its backup failed: the winning cluster (or every idea)
/// with a note.
pub fn fallback_answer(cluster: Option<&Cluster>, ideas: &[Idea]) -> String {
    let mut s = String::from(
        "The refiner could not be reached, so this is the brainstorm's best material as it \
         stands, without a written proposal.\n\n",
    );
    match cluster {
        Some(c) => {
            s.push_str(&format!("## {}\n\n", c.display_name()));
            if let Some(t) = &c.theme {
                s.push_str(&format!("{t}\n\n"));
            }
            let members: Vec<&Idea> = c.idea_ids.iter().filter_map(|id| find(ideas, id)).collect();
            s.push_str(&idea_lines(&members));
        }
        None => {
            for (label, group) in by_label(ideas) {
                s.push_str(&format!("### Ideas from {label}\n\n{}\n", idea_lines(&group)));
            }
        }
    }
    s.trim_end().to_string()
}

// ---- the state machine ---------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Ideating,
    Clustering,
    Scoring,
    Refining,
    Done,
}

pub struct Brainstorm {
    config: BrainstormConfig,
    ctx: RunContext,
    phase: Phase,
    /// Label position of each model (by request position).
    labels: Vec<String>,
    ideation: Batch,
    /// `ideation_complete` data by model position.
    ideated: Vec<Option<Value>>,
    ideas: Vec<Idea>,
    clusters: Vec<Cluster>,
    scoring: Batch,
    /// `scorer_complete` data by model position.
    scored: Vec<Option<Value>>,
    valid_scores: Vec<(usize, Vec<ClusterScore>)>,
    ranked: Vec<Ranked>,
    deadline_passed: bool,
    /// The ideation's reply schema (the same for every ideator).
    ideas_schema: Arc<ReplySchema>,
    /// The clustering's reply schema, over the ideas of this run (built when they are in).
    clusters_schema: Option<Arc<ReplySchema>>,
    /// The scorers' reply schema, over the clusters kept (built when they are read).
    scores_schema: Option<Arc<ReplySchema>>,
    title: TitleTracker,
    calls: Calls,
}

fn stage_order(stage: &str) -> i32 {
    match stage {
        "ideation" => IDEATION_ORDER,
        "clustering" => CLUSTERING_ORDER,
        "scoring" => SCORING_ORDER,
        "refinement" => REFINEMENT_ORDER,
        _ => 0,
    }
}

/// The ideation summary (`all_ideation_complete`'s data) from each model's `ideation_complete`
/// data and the failed ideation calls: the same live and from the stored rows.
pub fn ideation_summary(ideated: &[Value], failed: &[FailedModel]) -> Value {
    let mut warnings: Vec<String> = Vec::new();
    let mut total = 0;
    let mut producing = 0;
    for d in ideated {
        let n = d["ideaCount"].as_u64().unwrap_or(0) as usize;
        total += n;
        let who = format!(
            "{} ({})",
            d["sourceLabel"].as_str().unwrap_or("?"),
            d["model"].as_str().unwrap_or("?")
        );
        if n > 0 {
            producing += 1;
        }
        if n == 0 {
            let why = d["unparsed"].as_str().unwrap_or("gave no readable answer");
            warnings.push(format!("{who} listed no ideas in the expected format ({why})."));
        } else if let Some(min) = d["ideasAsked"].as_u64().filter(|m| (n as u64) < *m) {
            warnings.push(format!("{who} listed {n} ideas, fewer than the {min} asked for."));
        }
        let dropped = d["dropped"].as_u64().unwrap_or(0);
        if dropped > 0 {
            warnings.push(format!(
                "{who} listed more than {MAX_IDEAS} ideas; the last {dropped} were left out."
            ));
        }
    }
    for f in failed.iter().filter(|f| f.stage == "ideation") {
        warnings.push(format!("{} failed: {}", f.model, f.error.message));
    }
    json!({ "totalIdeas": total, "modelCount": producing, "warnings": warnings })
}

impl Brainstorm {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: BrainstormConfig = stored_config("brainstorm", config)?;
        let n = config.models.len();
        if !(2..=6).contains(&n) {
            return Err("the stored brainstorm configuration has no 2 to 6 models".into());
        }
        if !(3..=10).contains(&config.min_ideas_per_model)
            || !(3..=8).contains(&config.max_clusters)
        {
            return Err("the stored brainstorm configuration has its limits out of range".into());
        }
        let map = create_label_map(n, ctx.seed);
        let mut labels = vec![String::new(); n];
        for (k, &i) in map.iter().enumerate() {
            labels[i] = source_label(k);
        }
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        Ok(Brainstorm {
            ideas_schema: ideas_schema(config.min_ideas_per_model),
            ideation: Batch::new("ideate", n),
            scoring: Batch::new("score", n),
            ideated: vec![None; n],
            scored: vec![None; n],
            config,
            ctx,
            phase: Phase::Ideating,
            labels,
            ideas: Vec::new(),
            clusters: Vec::new(),
            valid_scores: Vec::new(),
            ranked: Vec::new(),
            deadline_passed: false,
            clusters_schema: None,
            scores_schema: None,
            title,
            calls: Calls::default(),
        })
    }

    fn call(&self, key: &str, model: &str, prompt: String, stage: &str, role: &str) -> CallSpec {
        CallSpec::new(
            key,
            model,
            vec![ChatMessage::user(prompt)],
            stage,
            role,
            self.config.timeout_ms,
        )
    }

    fn index_of(key: &str) -> Option<usize> {
        key.rsplit_once(':').and_then(|(_, n)| n.parse().ok())
    }

    fn on_ideation(&mut self, reply: &CallReply) -> Vec<Effect> {
        let Some(i) = Self::index_of(&reply.key).filter(|i| *i < self.ideated.len()) else {
            return Vec::new();
        };
        let Ok(text) = &reply.result else { return Vec::new() };
        let (list, read_from) = read_ideas_reply(text, &self.ideas_schema);
        let ms = reply.response_time_ms as i64;
        let label = self.labels[i].clone();
        let ideas: Vec<Idea> = list
            .ideas
            .iter()
            .enumerate()
            .map(|(k, (title, description))| Idea {
                id: format!("model_{i}_idea_{}", k + 1),
                title: title.clone(),
                description: description.clone(),
                model: reply.model.clone(),
                source_label: label.clone(),
            })
            .collect();
        let mut data = json!({
            "index": i, "model": reply.model, "sourceLabel": label, "ideas": ideas,
            "ideaCount": ideas.len(), "ideasAsked": self.config.min_ideas_per_model,
            "responseTimeMs": ms,
        });
        if list.dropped > 0 {
            data["dropped"] = json!(list.dropped);
        }
        if let Some(from) = read_from {
            data["readFrom"] = json!(from);
        }
        if ideas.is_empty() {
            data["unparsed"] = json!(Unparsed::of(text).describe());
        }
        self.ideated[i] = Some(data.clone());
        vec![
            Effect::Store(StageRow {
                stage_type: format!("ideation_{i}"),
                stage_order: IDEATION_ORDER,
                model: Some(reply.model.clone()),
                role: Some("ideator".into()),
                content: answer_text(text).trim().to_string(),
                parsed_data: Some(data.clone()),
                response_time_ms: Some(ms),
            }),
            Effect::emit("ideation_complete", json!({ "data": data })),
        ]
    }

    fn all_ideated(&mut self) -> Vec<Effect> {
        let datas: Vec<Value> = self.ideated.iter().flatten().cloned().collect();
        // Ideas in label order (Model A's first), so the curator's list says nothing of the
        // request order.
        let mut ideas: Vec<Idea> = Vec::new();
        for d in &datas {
            if let Ok(list) = serde_json::from_value::<Vec<Idea>>(d["ideas"].clone()) {
                ideas.extend(list);
            }
        }
        self.ideas = ideas;
        let summary = ideation_summary(&datas, &self.calls.failed());
        let producing = summary["modelCount"].as_u64().unwrap_or(0);
        let mut out = vec![Effect::emit("all_ideation_complete", json!({ "data": summary }))];
        if producing < 2 {
            self.phase = Phase::Done;
            out.extend(self.title.fail(format!(
                "Only {producing} of {} models produced ideas; a brainstorm needs at least 2.",
                self.config.models.len()
            )));
            return out;
        }
        if self.deadline_passed {
            out.extend(self.clustered(
                None,
                Vec::new(),
                Some("The time limit passed before the ideas could be clustered."),
                None,
            ));
            return out;
        }
        let k = cluster_limit(self.config.max_clusters, self.ideas.len());
        let listed: Vec<&Idea> = by_label(&self.ideas).into_iter().flat_map(|(_, g)| g).collect();
        let ids: Vec<&str> = listed.iter().map(|i| i.id.as_str()).collect();
        let asking = Asking::new(clusters_schema(&ids, k), |json| {
            cluster_prompt_as(&self.ctx.question, &listed, producing as usize, k, json)
        });
        let spec = asking
            .call(
                &self.ctx,
                "cluster",
                &self.config.curator_model,
                "clustering",
                "curator",
                self.config.timeout_ms,
            )
            .quoting([("the ideas".to_string(), ideas_text(&listed))]);
        self.clusters_schema = Some(asking.schema);
        self.phase = Phase::Clustering;
        let backup = self.config.facilitator_fallback_model.clone();
        out.push(Effect::emit(
            "clustering_start",
            json!({ "data": { "maxClusters": k, "totalIdeas": self.ideas.len() } }),
        ));
        out.push(self.calls.solo(spec, CLUSTERING_ORDER, backup.as_deref()));
        out
    }

    fn on_clustering(&mut self, routed: Routed) -> Vec<Effect> {
        let reply = &routed.reply;
        let ms = Some(reply.response_time_ms as i64);
        match &reply.result {
            Err(e) => {
                let note = match &routed.fallback_from {
                    Some(p) => format!("The curator ({p}) and its backup ({}) failed: {}; the refiner works from all the ideas.", reply.model, e.message),
                    None => format!("The curator ({}) failed: {}; the refiner works from all the ideas.", reply.model, e.message),
                };
                self.clustered(None, Vec::new(), Some(&note), None)
            }
            Ok(text) => {
                let k = cluster_limit(self.config.max_clusters, self.ideas.len());
                let schema = self.clusters_schema.clone().unwrap_or_else(|| {
                    let ids: Vec<&str> = self.ideas.iter().map(|i| i.id.as_str()).collect();
                    clusters_schema(&ids, k)
                });
                let (c, read_from) = read_clusters_reply(text, &self.ideas, k, &schema);
                let note = c.clusters.is_empty().then_some(
                    "No cluster could be read from the curator's reply; the refiner works from all the ideas.",
                );
                self.clustered(
                    Some((
                        reply.model.clone(),
                        answer_text(text).trim().to_string(),
                        ms,
                        routed.fallback_from.clone(),
                    )),
                    c.clusters,
                    note,
                    read_from,
                )
            }
        }
    }

    /// The clustering is settled (read, failed or skipped): stored, sent, and the next stage.
    fn clustered(
        &mut self,
        reply: Option<(String, String, Option<i64>, Option<String>)>,
        clusters: Vec<Cluster>,
        note: Option<&str>,
        read_from: Option<ReadFrom>,
    ) -> Vec<Effect> {
        let fallback = clusters.is_empty();
        let placed: Vec<&String> = clusters.iter().flat_map(|c| &c.idea_ids).collect();
        let unclustered: Vec<String> =
            self.ideas.iter().map(|i| i.id.clone()).filter(|id| !placed.contains(&id)).collect();
        let (model, content, ms, from) = match reply {
            Some((m, c, ms, from)) => (Some(m), c, ms, from),
            None => (None, String::new(), None, None),
        };
        let mut data = json!({
            "model": model, "clusters": clusters, "unclusteredIds": unclustered,
            "fallback": fallback, "responseTimeMs": ms,
        });
        if let Some(from) = from {
            data["fallbackFrom"] = json!(from);
        }
        if let Some(n) = note {
            data["note"] = json!(n);
        }
        if let Some(from) = read_from {
            data["readFrom"] = json!(from);
        }
        self.clusters = clusters;
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "clustering".into(),
                stage_order: CLUSTERING_ORDER,
                model: model.clone(),
                role: Some("curator".into()),
                content,
                parsed_data: Some(data.clone()),
                response_time_ms: ms,
            }),
            Effect::emit("clustering_complete", json!({ "data": data })),
        ];
        if fallback {
            out.extend(self.refine());
            return out;
        }
        if self.clusters.len() == 1 {
            out.extend(self.ranking(Some("single_cluster")));
            return out;
        }
        if self.deadline_passed {
            out.extend(self.ranking(Some("timeout")));
            return out;
        }
        self.phase = Phase::Scoring;
        out.push(Effect::emit(
            "scoring_start",
            json!({ "data": { "clusterCount": self.clusters.len() } }),
        ));
        let asking = Asking::new(scores_schema(self.clusters.len()), |json| {
            score_prompt_as(&self.ctx.question, &self.clusters, &self.ideas, json)
        });
        let listed = clusters_text(&self.clusters, &self.ideas);
        for (i, model) in self.config.models.iter().enumerate() {
            let call = asking.call(
                &self.ctx,
                self.scoring.key(i),
                model,
                "scoring",
                "scorer",
                self.config.timeout_ms,
            );
            out.push(Effect::Call(call.quoting([("the clusters".to_string(), listed.clone())])));
        }
        self.scores_schema = Some(asking.schema);
        out
    }

    fn on_score(&mut self, reply: &CallReply) -> Vec<Effect> {
        let Some(i) = Self::index_of(&reply.key).filter(|i| *i < self.scored.len()) else {
            return Vec::new();
        };
        let Ok(text) = &reply.result else { return Vec::new() };
        let schema =
            self.scores_schema.clone().unwrap_or_else(|| scores_schema(self.clusters.len()));
        let (scores, read_from) = read_scores_reply(text, &self.clusters, &schema);
        let valid = !scores.is_empty();
        let ms = reply.response_time_ms as i64;
        let mut data = json!({
            "index": i, "model": reply.model, "scores": scores, "valid": valid, "responseTimeMs": ms,
        });
        if let Some(from) = read_from {
            data["readFrom"] = json!(from);
        }
        if !valid {
            data["unparsed"] = json!(Unparsed::of(text).describe());
        }
        if valid {
            self.valid_scores.push((i, scores));
        }
        self.scored[i] = Some(data.clone());
        vec![
            Effect::Store(StageRow {
                stage_type: format!("scoring_{i}"),
                stage_order: SCORING_ORDER,
                model: Some(reply.model.clone()),
                role: Some("scorer".into()),
                content: answer_text(text).trim().to_string(),
                parsed_data: Some(data.clone()),
                response_time_ms: Some(ms),
            }),
            Effect::emit("scorer_complete", json!({ "data": data })),
        ]
    }

    /// The server's ranking (stored and sent), then the refinement. `skipped`: why no scores
    /// were asked for.
    fn ranking(&mut self, skipped: Option<&str>) -> Vec<Effect> {
        self.valid_scores.sort_by_key(|(i, _)| *i);
        let scores: Vec<Vec<ClusterScore>> =
            self.valid_scores.iter().map(|(_, s)| s.clone()).collect();
        let (ranked, method) = rank(&self.clusters, &scores);
        self.ranked = ranked;
        let mut data = json!({
            "rankedClusters": self.ranked, "rankingMethod": method, "validScorers": scores.len(),
        });
        if let Some(s) = skipped {
            data["scoringSkipped"] = json!(s);
        }
        let mut out = vec![
            Effect::Store(StageRow::computed("ranking", RANKING_ORDER, data.clone())),
            Effect::emit("all_scoring_complete", json!({ "data": data })),
        ];
        out.extend(self.refine());
        out
    }

    fn winner(&self) -> Option<&Cluster> {
        let top = self.ranked.first()?;
        self.clusters.iter().find(|c| c.id == top.id)
    }

    fn refine(&mut self) -> Vec<Effect> {
        self.phase = Phase::Refining;
        let (prompt, cluster, quoted) = match self.winner() {
            Some(c) => {
                let members: Vec<&Idea> =
                    c.idea_ids.iter().filter_map(|id| find(&self.ideas, id)).collect();
                let mut v = json!(c);
                v["ideas"] = json!(members);
                v["ranking"] = json!(self.ranked.first());
                let prompt = refine_prompt(&self.ctx.question, c, &self.ideas, self.ranked.first());
                (prompt, v, ("the cluster's ideas".to_string(), idea_lines(&members)))
            }
            None => (
                refine_all_prompt(&self.ctx.question, &self.ideas),
                Value::Null,
                ("the ideas".to_string(), grouped_ideas(&self.ideas)),
            ),
        };
        let spec = self
            .call("refine", &self.config.refiner_model.clone(), prompt, "refinement", "refiner")
            .quoting([quoted]);
        let backup = self.config.chairman_fallback_model.clone();
        vec![
            Effect::emit(
                "refinement_start",
                json!({ "data": { "cluster": cluster, "allIdeas": cluster.is_null() } }),
            ),
            self.calls.solo(spec, REFINEMENT_ORDER, backup.as_deref()),
        ]
    }

    fn on_refinement(&mut self, routed: Routed) -> Vec<Effect> {
        self.phase = Phase::Done;
        let reply = &routed.reply;
        let winner = self.winner().cloned();
        let (model, proposal, fallback, ms, from) = match &reply.result {
            Ok(text) => (
                Some(reply.model.clone()),
                answer_text(text).trim().to_string(),
                false,
                Some(reply.response_time_ms as i64),
                routed.fallback_from.clone(),
            ),
            Err(_) => (None, fallback_answer(winner.as_ref(), &self.ideas), true, None, None),
        };
        let mut data = json!({
            "model": model, "proposal": proposal, "fallback": fallback, "responseTimeMs": ms,
            "clusterId": winner.as_ref().map(|c| c.id.clone()),
            "clusterName": winner.as_ref().map(|c| c.name.clone()),
        });
        if let Some(from) = from {
            data["fallbackFrom"] = json!(from);
        }
        let mut stored = data.clone();
        if let Some(o) = stored.as_object_mut() {
            o.remove("proposal");
        }
        let mut event = json!({ "data": data });
        self.calls.mark(&mut event);
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "refinement".into(),
                stage_order: REFINEMENT_ORDER,
                model,
                role: Some("refiner".into()),
                content: proposal.clone(),
                parsed_data: Some(stored),
                response_time_ms: ms,
            }),
            Effect::emit("refinement_complete", event),
        ];
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: proposal });
        out
    }
}

impl Mode for Brainstorm {
    fn start(&mut self) -> Vec<Effect> {
        let labels: Vec<Value> = self
            .config
            .models
            .iter()
            .zip(&self.labels)
            .map(|(m, l)| json!({ "model": m, "sourceLabel": l }))
            .collect();
        let mut out = vec![
            Effect::emit(
                "brainstorm_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id,
                        "mode": "brainstorm",
                        "config": { "models": self.config.models, "curatorModel": self.config.curator_model,
                                    "refinerModel": self.config.refiner_model,
                                    "minIdeasPerModel": self.config.min_ideas_per_model,
                                    "maxClusters": self.config.max_clusters, "labels": labels } }),
            ),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: self.config.global_timeout_ms },
            Effect::emit("ideation_start", json!({})),
        ];
        let min = self.config.min_ideas_per_model;
        let asking = Asking::new(self.ideas_schema.clone(), |json| {
            ideate_prompt_as(&self.ctx.question, min, json)
        });
        for (i, model) in self.config.models.iter().enumerate() {
            out.push(Effect::Call(asking.call(
                &self.ctx,
                self.ideation.key(i),
                model,
                "ideation",
                "ideator",
                self.config.timeout_ms,
            )));
        }
        let title_model = self.config.curator_model.clone();
        out.extend(self.title.call(
            &title_model,
            title_prompt(&self.ctx.question),
            self.config.timeout_ms,
        ));
        self.calls.track(&out, stage_order);
        out
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        if reply.key == TITLE_KEY {
            return self.title.on_reply(&reply);
        }
        let (mut out, routed) = self.calls.route(empty_is_failure(reply));
        let Some(routed) = routed else { return out };
        let key = routed.reply.key.clone();
        match self.phase {
            Phase::Ideating
                if key.starts_with("ideate:") && self.ideation.accept(routed.reply.clone()) =>
            {
                out.extend(self.on_ideation(&routed.reply));
                if self.ideation.complete() {
                    out.extend(self.all_ideated());
                }
            }
            Phase::Clustering if key == "cluster" => out.extend(self.on_clustering(routed)),
            Phase::Scoring
                if key.starts_with("score:") && self.scoring.accept(routed.reply.clone()) =>
            {
                out.extend(self.on_score(&routed.reply));
                if self.scoring.complete() {
                    out.extend(self.ranking(None));
                }
            }
            Phase::Refining if key == "refine" => out.extend(self.on_refinement(routed)),
            _ => {}
        }
        self.calls.track(&out, stage_order);
        out
    }

    /// The global cap: the stage in flight finishes; the later stages before the refinement
    /// are skipped.
    fn on_timer(&mut self, key: &str) -> Vec<Effect> {
        if key == GLOBAL_TIMER {
            self.deadline_passed = true;
        }
        Vec::new()
    }
}

// ---- the stored result ---------------------------------------------------------------------

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

fn outcome(result: &Value) -> Option<String> {
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

// ---- sim answers ---------------------------------------------------------------------------

const SIM_IDEAS: [(&str, &str); 14] = [
    ("Peer ambassadors", "Recruit a few enthusiastic users to run sessions for their friends and shape the programme."),
    ("Open data dashboard", "Publish live usage figures so the community can see what works and suggest changes."),
    ("Gamified challenges", "Monthly challenges with badges and small prizes that reward trying something new."),
    ("Late-night opening", "Open two evenings a week until late, with food and a quiet study zone."),
    ("Maker space", "A corner with 3D printers, electronics kits and sewing machines, staffed by volunteers."),
    ("Partnership with schools", "Co-run projects with local schools so visits count towards coursework."),
    ("Subscription tier", "A low-cost membership with perks that funds the extras and signals commitment."),
    ("Mobile pop-ups", "Take a small van of the best offerings to parks, malls and sports events."),
    ("AI study helper", "A chatbot that answers questions and points to the right resources at any hour."),
    ("Reverse mentoring", "Young people teach older users digital skills and earn credits for it."),
    ("Esports nights", "Host tournaments on donated consoles, with rules on fair play and screen breaks."),
    ("Micro-grants", "Give small grants to projects proposed and voted on by the users themselves."),
    ("Podcast studio", "A bookable room with microphones and editing software for creators."),
    ("Feedback wall", "A physical and online wall where anyone posts ideas and sees the answers."),
];

fn sim_ideas(ask: &SimAsk, rng: &mut SplitMix64) -> String {
    let mut order: Vec<usize> = (0..SIM_IDEAS.len()).collect();
    rng.shuffle(&mut order);
    let n = 5 + rng.below(4);
    let who = ask.model;
    if ask.malformed {
        return match rng.below(3) {
            // Headings in markdown and bold, a description label: still readable.
            0 => {
                let mut s = format!("Here are my ideas ({who}, simulated):\n\n");
                for (k, &i) in order.iter().take(n).enumerate() {
                    let (t, d) = SIM_IDEAS[i];
                    s.push_str(&format!("### **Idea {}.** {t}\n- **Description:** {d}\n\n", k + 1));
                }
                s
            }
            // A plain numbered list: no IDEA headings, nothing to read.
            1 => {
                let mut s = format!("Some thoughts from {who} (simulated):\n\n");
                for (k, &i) in order.iter().take(n).enumerate() {
                    s.push_str(&format!("{}. {} - {}\n", k + 1, SIM_IDEAS[i].0, SIM_IDEAS[i].1));
                }
                s
            }
            // Too many ideas: only the first ten are kept.
            _ => {
                let mut s = String::new();
                for (k, &i) in order.iter().chain(order.iter()).take(12).enumerate() {
                    let (t, d) = SIM_IDEAS[i];
                    s.push_str(&format!(
                        "IDEA {}: {t} (variant {})\n{d}\n\n",
                        k + 1,
                        k / SIM_IDEAS.len() + 1
                    ));
                }
                s
            }
        };
    }
    let mut s = format!("[simulated ideas from {who}]\n\n");
    for (k, &i) in order.iter().take(n).enumerate() {
        let (t, d) = SIM_IDEAS[i];
        s.push_str(&format!("IDEA {}: {t}\n{d}\n", k + 1));
        if k == 0 {
            s.push_str(&ask.hostile_paragraph());
        }
        s.push('\n');
    }
    s
}

fn sim_clusters(ask: &SimAsk, rng: &mut SplitMix64) -> String {
    let listed = between(ask.prompt, IDEAS_START, IDEAS_END);
    let ideas: Vec<(&str, &str)> = listed
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix('[')?;
            let (id, rest) = rest.split_once(']')?;
            let title = rest.split(" — ").next().unwrap_or(rest).trim();
            let title = title.rsplit_once(" (Model").map_or(title, |(t, _)| t).trim();
            Some((id, title))
        })
        .collect();
    let k: usize = ask
        .prompt
        .split_once("into 3 to ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    if ask.malformed && rng.below(2) == 0 {
        return format!(
            "[simulated curation by {}] The ideas fall into a few broad themes: community, \
             technology and money. I would start with the community ones.",
            ask.model
        );
    }
    let count = k.min(3.max(ideas.len() / 3)).max(1);
    let mut groups: Vec<Vec<&str>> = vec![Vec::new(); count];
    // Leave the last idea out of every cluster now and then: it shows as unclustered.
    let leave = usize::from(ideas.len() > 6 && rng.below(2) == 0);
    for (n, (id, _)) in ideas.iter().take(ideas.len() - leave).enumerate() {
        groups[n % count].push(id);
    }
    let mut s = format!("[simulated curation by {}]\n\n", ask.model);
    for (n, g) in groups.iter().enumerate() {
        let first = ideas.iter().find(|(id, _)| Some(id) == g.first()).map_or("Ideas", |(_, t)| t);
        let promise = PROMISES[rng.below(3)];
        if ask.malformed {
            // Messy but readable: bold fields, bracketed ids, an unknown id and a repeat.
            s.push_str(&format!(
                "## **Cluster {} — {first} and friends**\n**Theme:** Ideas around {first}.\n**Promise:** {}\n**Ideas:** [{}], [model_9_idea_9], [{}]\n\n",
                n + 1,
                promise.to_lowercase(),
                g.join("], ["),
                g.first().unwrap_or(&"")
            ));
        } else {
            s.push_str(&format!(
                "CLUSTER {}: {first} and related ideas\nTheme: {}Ideas that build on {first}.\nPromise: {promise}\nIdeas: {}\n\n",
                n + 1,
                if n == 0 { ask.hostile_paragraph().replace('\n', " ") } else { String::new() },
                g.join(", ")
            ));
        }
    }
    s.push_str("CLUSTERING SUMMARY: simulated grouping in order of the list.");
    s
}

fn sim_scores(ask: &SimAsk, rng: &mut SplitMix64) -> String {
    let listed = between(ask.prompt, CLUSTERS_START, CLUSTERS_END);
    let n = listed.lines().filter(|l| cluster_line(l).is_some()).count();
    if ask.malformed && rng.below(2) == 0 {
        let mut s =
            String::from("| Cluster | Novelty | Feasibility | Impact |\n|---|---|---|---|\n");
        for c in 1..=n {
            s.push_str(&format!(
                "| {c} | {} | {} | {} |\n",
                2 + rng.below(4),
                2 + rng.below(4),
                2 + rng.below(4)
            ));
        }
        return s;
    }
    let mut s = format!("[simulated scores from {}]\n\n", ask.model);
    for c in 1..=n {
        let (nv, f, i) = (1 + rng.below(5), 1 + rng.below(5), 1 + rng.below(5));
        if ask.malformed {
            s.push_str(&format!(
                "### Cluster {c} —\n- **Novelty:** {nv}.5\n- **Feasibility:** {f}\n- **Impact:** {i}/5\n\n"
            ));
        } else {
            s.push_str(&format!(
                "Cluster {c}: Novelty={nv} Feasibility={f} Impact={i}\nJustification: {}A simulated rating of cluster {c}.\n\n",
                if c == 1 { ask.hostile_paragraph().replace('\n', " ") } else { String::new() }
            ));
        }
    }
    s
}

fn sim_proposal(ask: &SimAsk) -> String {
    let name = ask
        .prompt
        .lines()
        .find_map(|l| l.strip_prefix("Cluster: "))
        .unwrap_or("A combined direction")
        .trim();
    if ask.malformed {
        return format!(
            "[simulated proposal by {}] I would go with {name}: it is practical and can start \
             next month.",
            ask.model
        );
    }
    format!(
        "## Proposal: {name}\n\n### Executive Summary\n\n{}A simulated proposal built on the \
         cluster \"{name}\" (no real model was asked).\n\n### Core Concept\n\nCombine the \
         cluster's ideas into one programme.\n\n### Implementation Approach\n\n1. Pilot with a \
         small group (month 1).\n2. Review the results (month 3).\n3. Roll out widely (month \
         6).\n\n### Advantages\n\n- Cheap to start\n- Easy to measure\n\n### Risks & \
         Mitigations\n\n| Risk | Impact | Mitigation |\n|---|---|---|\n| Low uptake | Medium | \
         Recruit early champions |\n| Cost overrun | Low | Phase the spending |\n\n### Next \
         Steps\n\n1. Name an owner.\n2. Draft the pilot plan.\n3. Find two partners.\n\n### \
         Complementary Ideas\n\nThe cluster's other ideas can follow once the pilot works.",
        ask.hostile_paragraph()
    )
}

/// `text` cut to at most `max` characters (the sim's JSON always fits its schema).
fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// A list schema's bounds (`minItems`, `maxItems`), as the sim reads them.
fn bounds(list: &Value) -> (usize, usize) {
    let min = list["minItems"].as_u64().unwrap_or(1) as usize;
    (min, list["maxItems"].as_u64().map_or(min, |m| m as usize).max(min))
}

/// The sim ideator's ideas as JSON: the same draws as its text list, as many as asked.
fn sim_ideas_json(ask: &SimAsk, schema: &ReplySchema, rng: &mut SplitMix64) -> String {
    let mut order: Vec<usize> = (0..SIM_IDEAS.len()).collect();
    rng.shuffle(&mut order);
    let (min, max) = bounds(&schema.schema["properties"]["ideas"]);
    let n = (5 + rng.below(4)).clamp(min, max);
    let ideas: Vec<Value> = order
        .iter()
        .take(n)
        .enumerate()
        .map(|(k, &i)| {
            let (t, d) = SIM_IDEAS[i];
            let hostile =
                if k == 0 { ask.hostile_paragraph().replace('\n', " ") } else { String::new() };
            json!({ "title": cut(t, TITLE_CHARS),
                    "description": cut(format!("{d} {hostile}").trim(), DESCRIPTION_CHARS) })
        })
        .collect();
    let reasoning = format!(
        "[simulated ideas from {}] Ideas from several angles, bold and safe alike.",
        ask.model
    );
    json!({ "reasoning": cut(&reasoning, schema::REASONING_MAX_CHARS), "ideas": ideas }).to_string()
}

/// The sim curator's clusters as JSON: the ideas of the schema's list grouped in order, as its
/// text groups them, each cluster named after its first idea's title in the prompt.
fn sim_clusters_json(ask: &SimAsk, schema: &ReplySchema, rng: &mut SplitMix64) -> String {
    let list = &schema.schema["properties"]["clusters"];
    let ids: Vec<&str> = list["items"]["properties"]["ideas"]["items"]["enum"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let (per_min, per_max) = bounds(&list["items"]["properties"]["ideas"]);
    let (min, max) = bounds(list);
    let listed = between(ask.prompt, IDEAS_START, IDEAS_END);
    let title_of = |id: &str| {
        listed.lines().find_map(|l| {
            let rest = l.strip_prefix(&format!("[{id}] "))?;
            let title = rest.split(" — ").next().unwrap_or(rest);
            Some(title.rsplit_once(" (Model").map_or(title, |(t, _)| t).trim().to_string())
        })
    };
    let count = (ids.len() / 3).clamp(min, max).max(1);
    // Leave the last idea out now and then, where every cluster still has enough.
    let leave = usize::from(ids.len() > 6 && rng.below(2) == 0);
    let placed = ids.len() - leave;
    let mut groups: Vec<Vec<&str>> = vec![Vec::new(); count];
    for (n, id) in ids.iter().take(placed).enumerate() {
        if groups[n % count].len() < per_max {
            groups[n % count].push(id);
        }
    }
    // Too few ideas for a cluster each: the first ideas fill the rest (the reader keeps each
    // idea in its first cluster).
    for g in groups.iter_mut() {
        for id in &ids {
            if g.len() >= per_min {
                break;
            }
            if !g.contains(id) {
                g.push(id);
            }
        }
    }
    let clusters: Vec<Value> = groups
        .iter()
        .enumerate()
        .map(|(n, g)| {
            let first = g.first().and_then(|id| title_of(id)).unwrap_or_else(|| "Ideas".into());
            let hostile =
                if n == 0 { ask.hostile_paragraph().replace('\n', " ") } else { String::new() };
            json!({ "name": cut(&format!("{first} and related ideas"), TITLE_CHARS),
                    "theme": cut(&format!("{hostile}Ideas that build on {first}."), THEME_CHARS),
                    "ideas": g, "promise": PROMISES[rng.below(3)] })
        })
        .collect();
    let reasoning = format!("[simulated curation by {}] Grouped in order of the list.", ask.model);
    json!({ "reasoning": cut(&reasoning, schema::REASONING_MAX_CHARS), "clusters": clusters })
        .to_string()
}

/// The sim scorer's ratings as JSON: one per cluster, as its text rates them.
fn sim_scores_json(ask: &SimAsk, schema: &ReplySchema, rng: &mut SplitMix64) -> String {
    let (k, _) = bounds(&schema.schema["properties"]["scores"]);
    let scores: Vec<Value> = (1..=k)
        .map(|c| {
            let hostile =
                if c == 1 { ask.hostile_paragraph().replace('\n', " ") } else { String::new() };
            json!({ "cluster": c,
                    "justification": cut(&format!("{hostile}A simulated rating of cluster {c}."), JUSTIFICATION_CHARS),
                    "novelty": 1 + rng.below(5), "feasibility": 1 + rng.below(5),
                    "impact": 1 + rng.below(5) })
        })
        .collect();
    let reasoning = format!("[simulated scores from {}] Each cluster weighed.", ask.model);
    json!({ "reasoning": cut(&reasoning, schema::REASONING_MAX_CHARS), "scores": scores })
        .to_string()
}

fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    let mut rng = SplitMix64::new(ask.seed);
    // Asked for a schema: this mode's replies in JSON; another mode's is not ours to answer.
    match ask.schema {
        Some(s) if s.name == IDEAS_SCHEMA && p.starts_with(IDEATE_HEAD) => {
            return Some(sim_ideas_json(ask, s, &mut rng))
        }
        Some(s) if s.name == CLUSTERS_SCHEMA && p.starts_with(CLUSTER_HEAD) => {
            return Some(sim_clusters_json(ask, s, &mut rng))
        }
        Some(s) if s.name == SCORES_SCHEMA && p.starts_with(SCORE_HEAD) => {
            return Some(sim_scores_json(ask, s, &mut rng))
        }
        Some(_) => return None,
        None => {}
    }
    if p.starts_with(IDEATE_HEAD) {
        return Some(sim_ideas(ask, &mut rng));
    }
    if p.starts_with(CLUSTER_HEAD) {
        return Some(sim_clusters(ask, &mut rng));
    }
    if p.starts_with(SCORE_HEAD) {
        return Some(sim_scores(ask, &mut rng));
    }
    if p.starts_with(REFINE_HEAD) {
        return Some(sim_proposal(ask));
    }
    None
}

#[cfg(test)]
#[path = "brainstorm_tests.rs"]
mod tests;

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
    use super::report::{count, table};
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
