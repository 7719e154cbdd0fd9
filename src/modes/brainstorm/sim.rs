//! The sim's answers for Brainstorm: ideas, clusters, scores (text or JSON) and the proposal.

use super::*;

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

/// A sim reply in JSON: its reasoning, then its list under `key`.
fn reply_json<T: Serialize>(reasoning: &str, key: &str, list: &[T]) -> String {
    let mut reply = serde_json::Map::new();
    reply.insert("reasoning".into(), cut(reasoning, schema::REASONING_MAX_CHARS).into());
    reply.insert(key.into(), to_json(list));
    Value::Object(reply).to_string()
}

#[derive(Serialize)]
struct SimIdea {
    title: String,
    description: String,
}

#[derive(Serialize)]
struct SimCluster<'a> {
    name: String,
    theme: String,
    ideas: &'a [&'a str],
    promise: &'static str,
}

#[derive(Serialize)]
struct SimScore {
    cluster: usize,
    justification: String,
    novelty: usize,
    feasibility: usize,
    impact: usize,
}

/// The sim ideator's ideas as JSON: the same draws as its text list, as many as asked.
fn sim_ideas_json(ask: &SimAsk, schema: &ReplySchema, rng: &mut SplitMix64) -> String {
    let mut order: Vec<usize> = (0..SIM_IDEAS.len()).collect();
    rng.shuffle(&mut order);
    let (min, max) = bounds(&schema.schema["properties"]["ideas"]);
    let n = (5 + rng.below(4)).clamp(min, max);
    let ideas: Vec<SimIdea> = order
        .iter()
        .take(n)
        .enumerate()
        .map(|(k, &i)| {
            let (t, d) = SIM_IDEAS[i];
            let hostile =
                if k == 0 { ask.hostile_paragraph().replace('\n', " ") } else { String::new() };
            SimIdea {
                title: cut(t, TITLE_CHARS),
                description: cut(format!("{d} {hostile}").trim(), DESCRIPTION_CHARS),
            }
        })
        .collect();
    let reasoning = format!(
        "[simulated ideas from {}] Ideas from several angles, bold and safe alike.",
        ask.model
    );
    reply_json(&reasoning, "ideas", &ideas)
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
    let clusters: Vec<SimCluster> = groups
        .iter()
        .enumerate()
        .map(|(n, g)| {
            let first = g.first().and_then(|id| title_of(id)).unwrap_or_else(|| "Ideas".into());
            let hostile =
                if n == 0 { ask.hostile_paragraph().replace('\n', " ") } else { String::new() };
            SimCluster {
                name: cut(&format!("{first} and related ideas"), TITLE_CHARS),
                theme: cut(&format!("{hostile}Ideas that build on {first}."), THEME_CHARS),
                ideas: g,
                promise: PROMISES[rng.below(3)],
            }
        })
        .collect();
    let reasoning = format!("[simulated curation by {}] Grouped in order of the list.", ask.model);
    reply_json(&reasoning, "clusters", &clusters)
}

/// The sim scorer's ratings as JSON: one per cluster, as its text rates them.
fn sim_scores_json(ask: &SimAsk, schema: &ReplySchema, rng: &mut SplitMix64) -> String {
    let (k, _) = bounds(&schema.schema["properties"]["scores"]);
    let scores: Vec<SimScore> = (1..=k)
        .map(|c| {
            let hostile =
                if c == 1 { ask.hostile_paragraph().replace('\n', " ") } else { String::new() };
            SimScore {
                cluster: c,
                justification: cut(
                    &format!("{hostile}A simulated rating of cluster {c}."),
                    JUSTIFICATION_CHARS,
                ),
                novelty: 1 + rng.below(5),
                feasibility: 1 + rng.below(5),
                impact: 1 + rng.below(5),
            }
        })
        .collect();
    let reasoning = format!("[simulated scores from {}] Each cluster weighed.", ask.model);
    reply_json(&reasoning, "scores", &scores)
}

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
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
