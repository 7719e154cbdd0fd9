//! Reading the replies: ideas, clusters and scores from their text or their JSON, and the reply
//! schemas (`brainstorm_ideas`, `brainstorm_clusters`, `brainstorm_scores`).

use super::*;

/// One idea, as parsed from a model's list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Idea {
    /// `model_<i>_idea_<k>`: i the model's position in `models`, k the order parsed.
    pub id: String,
    /// The idea's title.
    pub title: String,
    /// What it is, in a sentence or two.
    pub description: String,
    /// The model that listed it.
    pub model: String,
    /// That model's anonymous label (`Model A`…).
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
fn numbered(r: &Regex, line: &str) -> Option<(u64, String)> {
    let c = r.captures(line)?;
    Some((c[1].parse().ok()?, unmark(c.get(2).map_or("", |m| m.as_str()))))
}

/// The pattern of a numbered heading that starts with `word`.
fn numbered_heading(word: &str) -> String {
    format!(r"(?i)^{word}\s*(?:\*\*|__)?\s*#?\s*(\d{{1,6}})\s*(?:\*\*|__)?\s*(?:[:.\-–—]\s*(.*))?$")
}

fn idea_heading(line: &str) -> Option<(u64, String)> {
    numbered(regex!(numbered_heading("idea")), line)
}

fn cluster_heading(line: &str) -> Option<(u64, String)> {
    numbered(regex!(numbered_heading("cluster")), line)
}

/// A rule (`---`, `***`) or a line of markup only.
fn is_rule(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && t.chars().all(|c| matches!(c, '-' | '*' | '_' | '=' | ' '))
}

/// Reads a model's ideas (its answer part only): an `IDEA <n>` heading with a title starts
/// one; its description is the lines after it up to the next heading. A title or a line that
/// only echoes the prompt's placeholder (`<short title>`, `[Your idea]`) states nothing.
pub fn read_ideas(reply: &str) -> IdeaList {
    let desc_label = regex!(r"(?i)^(?:description|desc)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?");
    let text = answer_text(reply);
    let mut all: Vec<(String, Vec<String>)> = Vec::new();
    let mut open = false;
    for raw in text.lines() {
        let line = bare(raw);
        if let Some((_, title)) = idea_heading(line) {
            let title = title.trim_matches(['"', '“', '”']).trim().to_string();
            // A heading whose title only echoes the prompt's `<short title>` names no idea.
            open = !title.is_empty() && !echoed_placeholder(&title);
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
        if !line.is_empty() && !echoed_placeholder(&line) {
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
    let found: Vec<String> = regex!(r"(?i)\b(high|medium|low)\b")
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// `cluster_1`…, renumbered in order kept.
    pub id: String,
    /// As written ("" when the heading named none).
    pub name: String,
    /// What joins its ideas; null when not stated.
    pub theme: Option<String>,
    /// HIGH, MEDIUM or LOW; MEDIUM when not stated.
    pub promise: String,
    /// False when the curator stated no readable promise (MEDIUM is used).
    pub promise_stated: bool,
    /// Its ideas' ids.
    pub idea_ids: Vec<String>,
}

/// A cluster's 1-based position from its id (`cluster_2` is 2); 0 for an id not of that form.
pub fn cluster_number(id: &str) -> usize {
    id.strip_prefix("cluster_").and_then(|n| n.parse().ok()).unwrap_or(0)
}

impl Cluster {
    /// 1-based position.
    pub fn number(&self) -> usize {
        cluster_number(&self.id)
    }

    pub(super) fn display_name(&self) -> String {
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
    let r = regex!(
        r"(?i)^(theme|promise|ideas|clustering\s+summary)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?"
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterScore {
    /// The cluster scored.
    pub cluster_id: String,
    /// How new the idea is, 1-5.
    pub novelty: u8,
    /// How doable, 1-5.
    pub feasibility: u8,
    /// How much it would change, 1-5.
    pub impact: u8,
    /// novelty + feasibility + impact (3-15).
    pub total: u8,
    /// Why, in the scorer's words; null when not stated.
    pub justification: Option<String>,
}

impl ClusterScore {
    /// `cluster`'s score from its novelty, feasibility and impact (each 1-5), totalled.
    fn of(cluster: &Cluster, [novelty, feasibility, impact]: [u8; 3], why: Option<String>) -> Self {
        let total = novelty + feasibility + impact;
        let cluster_id = cluster.id.clone();
        ClusterScore { cluster_id, novelty, feasibility, impact, total, justification: why }
    }
}

/// A stated 1-5 value: half up, then clamped to 1-5. None for a template echoed back (`1-5`).
fn dimension(block: &str, name: &str) -> Option<u8> {
    let pattern = || {
        format!(
            r"(?i)\b{name}\b[*_ \t]*(?:\([^)\n]{{0,20}}\))?[*_ \t]*[=:：][*_ \t]*(-?\d{{1,3}}(?:\.\d+)?)(\s*(?:[-–]|to)\s*\d)?"
        )
    };
    let r = match name {
        "novelty" => regex!(pattern()),
        "feasibility" => regex!(pattern()),
        _ => regex!(pattern()),
    };
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
    let just = regex!(r"(?im)^[ \t>*_#-]*justification\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?(.*)$");
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
            let value = |name: &str| dimension(block, name);
            let dims = [value("novelty")?, value("feasibility")?, value("impact")?];
            let justification =
                just.captures(block).map(|c| unmark(&c[1])).filter(|j| !j.is_empty());
            Some(ClusterScore::of(c, dims, justification))
        })
        .collect()
}

/// A `Cluster <n>` line: the number and the rest of the line (its values, when on one line).
pub(super) fn cluster_line(line: &str) -> Option<(u64, String)> {
    let r = regex!(r"(?i)^cluster\s*(?:\*\*|__)?\s*#?\s*(\d{1,6})\b(.*)$");
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
pub(super) const TITLE_CHARS: usize = 120;
pub(super) const DESCRIPTION_CHARS: usize = 400;
pub(super) const THEME_CHARS: usize = 300;
pub(super) const JUSTIFICATION_CHARS: usize = 200;

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
    .listing("ideas")
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
    .listing("scores")
}

/// A JSON string field, trimmed.
fn json_str<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("").trim()
}

/// An ideator's reply read from its JSON when it fits `schema` and holds an idea with a
/// title (an idea without one is none, as a heading without a title is none in text), or
/// from the ideas complete before a cut when its JSON stopped inside the list (`json_cut`),
/// else by its text ([`read_ideas`]); with where it was read from when it gave ideas.
pub fn read_ideas_reply(reply: &str, schema: &ReplySchema) -> (IdeaList, Option<ReadFrom>) {
    let from_json = |v: &Value| {
        let ideas: Vec<(String, String)> = v
            .get("ideas")?
            .as_array()?
            .iter()
            .filter_map(|i| {
                let title = json_str(i, "title").trim_matches(['"', '“', '”']).trim();
                let description = json_str(i, "description");
                let description = if echoed_placeholder(description) { "" } else { description };
                (!title.is_empty() && !echoed_placeholder(title))
                    .then(|| (title.to_string(), description.to_string()))
            })
            .collect();
        Some(IdeaList { ideas, dropped: 0 })
    };
    schema.read_reply(reply, from_json, read_ideas, |l| !l.ideas.is_empty())
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
    let from_json = |v: &Value| {
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
        Some(place(stated, &known, k))
    };
    let read = |t: &str| read_clusters(t, ideas, k);
    schema.read_reply(reply, from_json, read, |c| !c.clusters.is_empty())
}

/// A scorer's reply read from its JSON when it fits `schema` (each cluster by the last rating
/// naming its number, as a repeated block in text), or from the ratings complete before a cut
/// when its JSON stopped inside the list (`json_cut`: the clusters after it are unscored, as
/// a cluster a text reply skips), else by its text ([`read_scores`]); with where it was read
/// from when it scored a cluster.
pub fn read_scores_reply(
    reply: &str,
    clusters: &[Cluster],
    schema: &ReplySchema,
) -> (Vec<ClusterScore>, Option<ReadFrom>) {
    let from_json = |v: &Value| {
        let items = v.get("scores")?.as_array()?;
        let scores: Vec<ClusterScore> = clusters
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let item =
                    items.iter().rev().find(|s| s["cluster"].as_u64() == Some(i as u64 + 1))?;
                let value =
                    |k: &str| item.get(k).and_then(Value::as_u64).filter(|v| (1..=5).contains(v));
                let dims = [value("novelty")?, value("feasibility")?, value("impact")?];
                let justification =
                    Some(json_str(item, "justification").to_string()).filter(|j| !j.is_empty());
                Some(ClusterScore::of(c, dims.map(|d| d as u8), justification))
            })
            .collect();
        Some(scores)
    };
    let read = |t: &str| read_scores(t, clusters);
    schema.read_reply(reply, from_json, read, |s| !s.is_empty())
}
