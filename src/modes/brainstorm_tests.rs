//! Brainstorm driven with fake replies, and its parsers on recorded-style and adversarial
//! outputs.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    calls, ctx, emitted, err, events, failed, finished, ok, rows, stage_calls,
};
use crate::modes::validate;

fn config(models: &[&str]) -> Value {
    json!({ "models": models, "curatorModel": "cur", "refinerModel": "ref",
            "minIdeasPerModel": 3, "maxClusters": 6, "timeoutMs": 120000,
            "globalTimeoutMs": 600000, "chairmanFallbackModel": "spare",
            "facilitatorFallbackModel": "spare2" })
}

fn mode(models: &[&str]) -> Brainstorm {
    Brainstorm::new(&config(models), ctx("How could a library attract teenagers?", vec![], true))
        .unwrap()
}

fn idea(i: usize, k: usize) -> Idea {
    Idea {
        id: format!("model_{i}_idea_{k}"),
        title: format!("idea {i}.{k}"),
        description: format!("about {i}.{k}"),
        model: format!("m{i}"),
        source_label: source_label(i),
    }
}

fn ideas(models: usize, each: usize) -> Vec<Idea> {
    (0..models).flat_map(|i| (1..=each).map(move |k| idea(i, k))).collect()
}

fn cluster(n: usize, promise: &str, ids: &[&str]) -> Cluster {
    Cluster {
        id: format!("cluster_{n}"),
        name: format!("C{n}"),
        theme: None,
        promise: promise.into(),
        promise_stated: true,
        idea_ids: ids.iter().map(|s| s.to_string()).collect(),
    }
}

const IDEAS: &str = "<think>IDEA 1: a thought, not an idea\nIDEA 2: another</think>\
Here are my ideas.\n\n**IDEA 1: Peer ambassadors**\nTeens run sessions for their friends.\n\
They shape the programme.\n\n### Idea 2 - Late opening\n- Description: Open until 10pm.\n\n\
IDEA 3.\nA heading without a title is no idea.\n\n## Closing thoughts\nThese span many angles.\n\n\
idea #4: __Maker space__\n---\n3D printers and kits.\n";

#[test]
fn ideas_are_read_where_stated_and_think_blocks_never_count() {
    let l = read_ideas(IDEAS);
    let titles: Vec<&str> = l.ideas.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(titles, ["Peer ambassadors", "Late opening", "Maker space"]);
    assert_eq!(l.ideas[0].1, "Teens run sessions for their friends.\nThey shape the programme.");
    assert_eq!(l.ideas[1].1, "Open until 10pm.");
    assert_eq!(l.ideas[2].1, "3D printers and kits.");
    assert_eq!(l.dropped, 0);
    // More than ten: the first ten are kept, the rest counted.
    let many: String = (1..=13).map(|n| format!("IDEA {n}: t{n}\nd{n}\n")).collect();
    let l = read_ideas(&many);
    assert_eq!((l.ideas.len(), l.dropped), (10, 3));
    assert_eq!(l.ideas[9].0, "t10");
}

#[test]
fn refusals_json_tables_and_lists_give_no_ideas() {
    for text in [
        "I can't help with brainstorming this.",
        "```json\n{\"ideas\": [{\"title\": \"Peer ambassadors\"}]}\n```",
        "| # | Idea |\n|---|---|\n| 1 | Peer ambassadors |",
        "1. Peer ambassadors - teens run sessions\n2. Late opening",
        "<think>IDEA 1: Only in my head\nstill thinking",
        "IDEA 1:\nIDEA 2: \n",
    ] {
        assert!(read_ideas(text).ideas.is_empty(), "{text}");
    }
}

#[test]
fn clusters_follow_the_placement_rules() {
    let all = ideas(2, 3);
    let reply = "<think>CLUSTER 1: Draft\nIdeas: model_0_idea_1, model_0_idea_2</think>\
**CLUSTER 1: Community**\nTheme: People first.\nTheme: ignored second theme\nPromise: **High**\n\
Ideas: [MODEL_0_IDEA_1], model_1_idea_1 model_9_idea_9\n\n\
## Cluster 2 - Tech\nPromise: HIGH|MEDIUM|LOW\nIdeas: model_0_idea_1, model_0_idea_2\n\n\
CLUSTER 3: Empty\nIdeas: model_7_idea_1, model_0_idea_1\n\n\
Cluster 4. Money\n- **Theme:** Funding.\n- **Promise:** low\n- **Ideas:**\n- model_1_idea_2\n- model_1_idea_3 (Subscription)\n\n\
CLUSTER 5: Over the limit\nIdeas: model_0_idea_3\n\n\
CLUSTERING SUMMARY: four themes\nIdeas: model_0_idea_3\n";
    let c = read_clusters(reply, &all, 3);
    let names: Vec<&str> = c.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["Community", "Tech", "Money"]);
    assert_eq!(
        c.clusters.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["cluster_1", "cluster_2", "cluster_3"]
    );
    assert_eq!(c.clusters[0].idea_ids, ["model_0_idea_1", "model_1_idea_1"]);
    assert_eq!(c.clusters[0].theme.as_deref(), Some("People first."));
    assert_eq!((c.clusters[0].promise.as_str(), c.clusters[0].promise_stated), ("HIGH", true));
    // The idea placed first stays there; the echoed template states no promise.
    assert_eq!(c.clusters[1].idea_ids, ["model_0_idea_2"]);
    assert_eq!((c.clusters[1].promise.as_str(), c.clusters[1].promise_stated), ("MEDIUM", false));
    assert_eq!(c.clusters[2].idea_ids, ["model_1_idea_2", "model_1_idea_3"]);
    assert_eq!(c.clusters[2].promise, "LOW");
    // Past K, and after the summary, nothing is placed.
    assert_eq!(c.unclustered, ["model_0_idea_3"]);
}

#[test]
fn no_readable_cluster_is_an_empty_clustering() {
    let all = ideas(2, 3);
    for text in [
        "The ideas group into community and technology themes.",
        "I cannot do that.",
        "CLUSTER 1: Names only\nIdeas: idea one, idea two",
        "{\"clusters\": [{\"name\": \"A\", \"ideas\": [\"model_0_idea_1\"]}]}",
    ] {
        let c = read_clusters(text, &all, 6);
        assert!(c.clusters.is_empty(), "{text}");
        assert_eq!(c.unclustered.len(), 6);
    }
}

#[test]
fn scores_are_read_per_block_rounded_clamped_and_never_guessed() {
    let cs = vec![
        cluster(1, "HIGH", &["a"]),
        cluster(2, "LOW", &["b"]),
        cluster(3, "MEDIUM", &["c"]),
        cluster(4, "MEDIUM", &["d"]),
    ];
    let reply = "<think>Cluster 4: Novelty=5 Feasibility=5 Impact=5</think>\
Cluster 1: Novelty=3.5 Feasibility=7 Impact=0\n**Justification:** Bold and cheap.\n\n\
### Cluster 2 —\n- **Novelty:** 2\n- **Feasibility:** 4\n\n\
Cluster 3: Novelty=1 Feasibility=1 Impact=1\nCluster 3: Novelty=2 Feasibility (1-5): 3 Impact: 4/5\n\n\
Cluster 4: Novelty=<1-5> Feasibility=1-5 Impact=5\nCluster 9: Novelty=5 Feasibility=5 Impact=5\n";
    let s = read_scores(reply, &cs);
    assert_eq!(s.len(), 2, "{s:?}");
    assert_eq!((s[0].novelty, s[0].feasibility, s[0].impact, s[0].total), (4, 5, 1, 10));
    assert_eq!(s[0].justification.as_deref(), Some("Bold and cheap."));
    // Cluster 2 misses Impact: unscored. Cluster 3's last block wins. Cluster 4's template.
    assert_eq!(s[1].cluster_id, "cluster_3");
    assert_eq!((s[1].novelty, s[1].feasibility, s[1].impact), (2, 3, 4));
    for text in [
        "| Cluster | Novelty | Feasibility | Impact |\n|---|---|---|---|\n| 1 | 4 | 3 | 5 |",
        "I won't rate these.",
        "Novelty=4 Feasibility=4 Impact=4",
        "<think>Cluster 1: Novelty=4 Feasibility=4 Impact=4</think>",
    ] {
        assert!(read_scores(text, &cs).is_empty(), "{text}");
    }
}

fn score(c: &str, n: u8, f: u8, i: u8) -> ClusterScore {
    ClusterScore {
        cluster_id: c.into(),
        novelty: n,
        feasibility: f,
        impact: i,
        total: n + f + i,
        justification: None,
    }
}

#[test]
fn the_ranking_follows_the_tie_rules() {
    let cs = vec![
        cluster(1, "LOW", &["a"]),
        cluster(2, "HIGH", &["b"]),
        cluster(3, "MEDIUM", &["c"]),
        cluster(4, "HIGH", &["d"]),
        cluster(5, "HIGH", &["e"]),
    ];
    // 1 and 2 tie on total; 2 has more impact. 3 and 4 tie on total and impact; 4 is more
    // feasible. 5 is unscored.
    let a = vec![
        score("cluster_1", 5, 3, 2),
        score("cluster_2", 3, 3, 4),
        score("cluster_3", 3, 2, 4),
        score("cluster_4", 3, 2, 4),
    ];
    let b = vec![
        score("cluster_1", 5, 3, 2),
        score("cluster_2", 3, 3, 4),
        score("cluster_3", 3, 2, 4),
        score("cluster_4", 2, 3, 4),
    ];
    let (r, method) = rank(&cs, &[a.clone(), b]);
    assert_eq!(method, "scores");
    let ids: Vec<&str> = r.iter().map(|x| x.id.as_str()).collect();
    assert_eq!(ids, ["cluster_2", "cluster_1", "cluster_4", "cluster_3", "cluster_5"]);
    assert_eq!(r[0].decided_by.as_deref(), Some("averageImpact"));
    assert_eq!(r[1].decided_by.as_deref(), Some("averageScore"));
    assert_eq!(r[2].decided_by.as_deref(), Some("averageFeasibility"));
    assert_eq!(r[3].decided_by.as_deref(), Some("scored"));
    assert_eq!(r[4].decided_by, None);
    assert_eq!((r[4].score_count, r[4].average_score), (0, None));
    assert_eq!((r[2].average_feasibility, r[3].average_novelty), (Some(2.5), Some(3.0)));
    assert_eq!(r.iter().map(|x| x.rank).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    // Averages keep two decimals.
    let (r, _) = rank(
        &cs[..1],
        &[
            vec![score("cluster_1", 1, 1, 1)],
            vec![score("cluster_1", 2, 1, 1)],
            vec![score("cluster_1", 2, 1, 1)],
        ],
    );
    assert_eq!(r[0].average_novelty, Some(1.67));
    // One valid scorer: promise, then number.
    let (r, method) = rank(&cs, &[a]);
    assert_eq!(method, "promise");
    let ids: Vec<&str> = r.iter().map(|x| x.id.as_str()).collect();
    assert_eq!(ids, ["cluster_2", "cluster_4", "cluster_5", "cluster_3", "cluster_1"]);
    assert_eq!(r[0].decided_by.as_deref(), Some("clusterNumber"));
    assert_eq!(r[2].decided_by.as_deref(), Some("promise"));
}

#[test]
fn the_cluster_limit_shrinks_with_few_ideas() {
    assert_eq!(cluster_limit(6, 10), 6);
    assert_eq!(cluster_limit(6, 9), 4);
    assert_eq!(cluster_limit(8, 4), 3);
    assert_eq!(cluster_limit(3, 40), 3);
    assert_eq!(cluster_limit(5, 0), 3);
}

proptest! {
    /// No parser panics, and none reports what the text does not hold: ids are known ones,
    /// each placed once; scores lie in 1-5 and sum to the total; at most ten ideas.
    #[test]
    fn parsers_never_invent(text in "(?s)(IDEA [0-9]: [a-z ]{0,8}\n|CLUSTER [0-9]: [a-z]{0,6}\n|Ideas: (model_[0-2]_idea_[1-3][, ]{0,2}){0,4}\n|Promise: (HIGH|low|x)\n|Cluster [0-9]: Novelty=[0-9.-]{1,3} Feasibility: [0-9]{1,2} Impact=[0-9]\n|.{0,20}\n){0,14}") {
        let all = ideas(3, 3);
        let l = read_ideas(&text);
        prop_assert!(l.ideas.len() <= MAX_IDEAS);
        prop_assert!(l.ideas.iter().all(|(t, _)| !t.is_empty()));
        let c = read_clusters(&text, &all, 4);
        prop_assert!(c.clusters.len() <= 4);
        let mut seen: Vec<&String> = c.clusters.iter().flat_map(|c| &c.idea_ids).collect();
        prop_assert!(c.clusters.iter().all(|c| !c.idea_ids.is_empty() && PROMISES.contains(&c.promise.as_str())));
        seen.extend(&c.unclustered);
        seen.sort();
        let mut known: Vec<&String> = all.iter().map(|i| &i.id).collect();
        known.sort();
        prop_assert_eq!(seen, known, "every idea placed once or unclustered");
        let cs = vec![cluster(1, "HIGH", &["a"]), cluster(2, "LOW", &["b"])];
        for s in read_scores(&text, &cs) {
            for v in [s.novelty, s.feasibility, s.impact] {
                prop_assert!((1..=5).contains(&v));
            }
            prop_assert_eq!(s.total, s.novelty + s.feasibility + s.impact);
        }
    }

    /// Whatever a closed `<think>` block holds, the reading of the reply after it is the same.
    #[test]
    fn a_closed_think_block_never_changes_the_reading(inside in "(?s)(IDEA 1: x\n|CLUSTER 1: y\nIdeas: model_0_idea_1\n|Cluster 1: Novelty=5 Feasibility=5 Impact=5\n|[a-z ]{0,10}\n){0,6}") {
        let all = ideas(1, 2);
        let cs = vec![cluster(1, "HIGH", &["model_0_idea_1"])];
        let after = "IDEA 1: Real\nCLUSTER 1: Real\nIdeas: model_0_idea_2\nCluster 1: Novelty=2 Feasibility=3 Impact=4";
        let with = format!("<think>{inside}</think>{after}");
        prop_assert_eq!(read_ideas(&with), read_ideas(after));
        prop_assert_eq!(read_clusters(&with, &all, 3), read_clusters(after, &all, 3));
        prop_assert_eq!(read_scores(&with, &cs), read_scores(after, &cs));
    }
}

// ---- validation ----------------------------------------------------------------------------

fn defaults() -> Defaults {
    Defaults { offline: true, stage_timeout_ms: 120_000, fallback: Default::default() }
}

fn field_of(cfg: Value) -> String {
    let body = json!({ "mode": "brainstorm", "question": "q", "modeConfig": cfg });
    validate(&body, &defaults()).unwrap_err().field
}

#[test]
fn every_rule_is_a_400_naming_its_field_and_defaults_fill_in() {
    assert_eq!(field_of(json!({ "models": ["a", "b"] })), "modeConfig.models");
    assert_eq!(
        field_of(json!({ "models": ["a", "b", "c", "d", "e", "f", "g"] })),
        "modeConfig.models"
    );
    assert_eq!(field_of(json!({ "models": ["a", "", "c"] })), "modeConfig.models");
    assert_eq!(field_of(json!({ "curatorModel": " " })), "modeConfig.curatorModel");
    assert_eq!(field_of(json!({ "refinerModel": "" })), "modeConfig.refinerModel");
    assert_eq!(field_of(json!({ "minIdeasPerModel": 2 })), "modeConfig.minIdeasPerModel");
    assert_eq!(field_of(json!({ "minIdeasPerModel": 11 })), "modeConfig.minIdeasPerModel");
    assert_eq!(field_of(json!({ "maxClusters": 2 })), "modeConfig.maxClusters");
    assert_eq!(field_of(json!({ "maxClusters": 9 })), "modeConfig.maxClusters");
    assert_eq!(field_of(json!({ "timeoutMs": 9999 })), "modeConfig.timeoutMs");
    assert_eq!(field_of(json!({ "timeoutMs": 180001 })), "modeConfig.timeoutMs");
    assert_eq!(field_of(json!({ "globalTimeoutMs": 59999 })), "modeConfig.globalTimeoutMs");
    assert_eq!(field_of(json!({ "globalTimeoutMs": 1800001 })), "modeConfig.globalTimeoutMs");
    assert_eq!(field_of(json!({ "bogus": 1 })), "modeConfig.bogus");
    let body = json!({ "mode": "brainstorm", "question": " " });
    assert_eq!(validate(&body, &defaults()).unwrap_err().field, "question");
    let ok = validate(&json!({ "mode": "brainstorm", "question": "q" }), &defaults()).unwrap();
    assert_eq!(ok.config["models"], json!(SIM_MODELS));
    assert_eq!(ok.config["curatorModel"], "sim/alpha");
    assert_eq!(ok.config["refinerModel"], "sim/alpha");
    assert_eq!(ok.config["minIdeasPerModel"], 5);
    assert_eq!(ok.config["maxClusters"], 6);
    assert_eq!(ok.config["timeoutMs"], 120000);
    assert_eq!(ok.config["globalTimeoutMs"], 600000);
    let backups = Defaults {
        fallback: Fallbacks {
            chairman: Some("sim/c".into()),
            facilitator: Some("sim/f".into()),
            ..Fallbacks::default()
        },
        ..defaults()
    };
    let ok = validate(&json!({ "mode": "brainstorm", "question": "q" }), &backups).unwrap();
    assert_eq!(ok.config["chairmanFallbackModel"], "sim/c");
    assert_eq!(ok.config["facilitatorFallbackModel"], "sim/f");
}

// ---- the state machine ---------------------------------------------------------------------

/// Drives a run: `answer(call)` gives each reply (None: the call fails); the title last.
fn drive(m: &mut Brainstorm, answer: impl Fn(&CallSpec) -> Option<String>) -> Vec<Effect> {
    let mut all = m.start();
    let mut pending = stage_calls(&all);
    while !pending.is_empty() {
        let c = pending.remove(0);
        let out = m.on_reply(match answer(&c) {
            Some(t) => ok(&c, &t),
            None => err(&c),
        });
        pending.extend(stage_calls(&out));
        all.extend(out);
    }
    for c in calls(&all).into_iter().filter(|c| c.key == "title") {
        all.extend(m.on_reply(ok(&c, "Library Ideas")));
    }
    all
}

fn ideas_of(model: &str) -> String {
    (1..=4).map(|k| format!("IDEA {k}: {model} idea {k}\nWhy {model} {k} works.\n\n")).collect()
}

const CLUSTERS: &str = "CLUSTER 1: People\nTheme: community.\nPromise: LOW\n\
Ideas: model_0_idea_1, model_1_idea_1, model_2_idea_1\n\n\
CLUSTER 2: Tech\nTheme: tools.\nPromise: HIGH\nIdeas: model_0_idea_2, model_1_idea_2\n\n\
CLUSTER 3: Money\nPromise: MEDIUM\nIdeas: model_0_idea_3, model_2_idea_3\n\nCLUSTERING SUMMARY: 3";

/// A good run's answers: cluster 1 scores best.
fn good(c: &CallSpec) -> Option<String> {
    Some(match c.role.as_str() {
        "ideator" => ideas_of(&c.model),
        "curator" => CLUSTERS.into(),
        "scorer" => "Cluster 1: Novelty=5 Feasibility=4 Impact=5\nJustification: strong.\n\
Cluster 2: Novelty=3 Feasibility=3 Impact=3\nCluster 3: Novelty=2 Feasibility=2 Impact=2"
            .into(),
        _ => format!("## Proposal: People\nBuilt by {}.", c.model),
    })
}

fn all_emitted(all: &[Effect], name: &str) -> Vec<Value> {
    all.iter()
        .filter_map(|e| match e {
            Effect::Emit { event, data } if event == name => Some(data.clone()),
            _ => None,
        })
        .collect()
}

fn stored(all: &[Effect]) -> Vec<StageRow> {
    let mut r = rows(all);
    r.sort_by_key(|r| r.stage_order);
    r
}

#[test]
fn a_run_goes_ideate_cluster_score_rank_refine_and_reloads_as_it_ran() {
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, good);
    let names: Vec<String> = events(&all);
    assert_eq!(
        names,
        [
            "brainstorm_start",
            "ideation_start",
            "ideation_complete",
            "ideation_complete",
            "ideation_complete",
            "all_ideation_complete",
            "clustering_start",
            "clustering_complete",
            "scoring_start",
            "scorer_complete",
            "scorer_complete",
            "scorer_complete",
            "all_scoring_complete",
            "refinement_start",
            "refinement_complete",
            "title_complete"
        ]
    );
    let start = emitted(&all, "brainstorm_start").unwrap();
    assert_eq!(start["mode"], "brainstorm");
    assert_eq!(start["config"]["maxClusters"], 6);
    let ideation = all_emitted(&all, "ideation_complete");
    assert_eq!(ideation[0]["data"]["ideaCount"], 4);
    assert_eq!(ideation[1]["data"]["ideas"][0]["id"], "model_1_idea_1");
    let summary = emitted(&all, "all_ideation_complete").unwrap();
    assert_eq!(summary["data"], json!({ "totalIdeas": 12, "modelCount": 3, "warnings": [] }));
    // The curator sees ids, titles and labels, never the models.
    let cur = calls(&all).into_iter().find(|c| c.role == "curator").unwrap();
    let p = &cur.messages[0].content;
    assert!(p.contains("[model_0_idea_1] m0 idea 1 — Why m0 1 works. (Model "), "{p}");
    assert!(!p.contains("(m0)") && p.contains("3 to 6 themed clusters"), "{p}");
    let clustering = emitted(&all, "clustering_complete").unwrap();
    assert_eq!(clustering["data"]["fallback"], false);
    assert_eq!(clustering["data"]["clusters"].as_array().unwrap().len(), 3);
    assert_eq!(clustering["data"]["unclusteredIds"].as_array().unwrap().len(), 5);
    let ranking = emitted(&all, "all_scoring_complete").unwrap();
    assert_eq!(ranking["data"]["rankingMethod"], "scores");
    assert_eq!(ranking["data"]["rankedClusters"][0]["id"], "cluster_1");
    assert_eq!(ranking["data"]["rankedClusters"][0]["averageScore"], 14.0);
    let rs = emitted(&all, "refinement_start").unwrap();
    assert_eq!(rs["data"]["cluster"]["name"], "People");
    assert_eq!(rs["data"]["cluster"]["ideas"].as_array().unwrap().len(), 3);
    let refine = calls(&all).into_iter().find(|c| c.role == "refiner").unwrap();
    assert!(refine.messages[0].content.contains("Novelty 5.00, Feasibility 4.00, Impact 5.00"));
    let done = emitted(&all, "refinement_complete").unwrap();
    assert_eq!(done["data"]["clusterId"], "cluster_1");
    assert_eq!(done["partial"], false);
    assert_eq!(finished(&all).unwrap(), "## Proposal: People\nBuilt by ref.");
    // The stored rows give back what went out.
    let result = load_result(&stored(&all));
    let mut summary_with = summary["data"].clone();
    summary_with["models"] = json!(ideation.iter().map(|e| e["data"].clone()).collect::<Vec<_>>());
    assert_eq!(result["ideas"], summary_with);
    assert_eq!(result["clustering"], clustering["data"]);
    let scores: Vec<Value> =
        all_emitted(&all, "scorer_complete").iter().map(|e| e["data"].clone()).collect();
    assert_eq!(result["scores"], json!(scores));
    assert_eq!(result["ranking"], ranking["data"]);
    assert_eq!(result["refinement"], done["data"]);
    assert_eq!(
        (result["partial"].clone(), result["failedModels"].clone()),
        (json!(false), json!([]))
    );
    let line = (SPEC.outcome)(&result).unwrap();
    assert!(
        line == "Proposal from the cluster \"People\", ranked first by the panel's scores",
        "{line}"
    );
    let kinds: Vec<String> = stored(&all).into_iter().map(|r| r.stage_type).collect();
    for k in ["ideation_0", "clustering", "scoring_2", "ranking", "refinement"] {
        assert!(kinds.iter().any(|x| x == k), "{k}: {kinds:?}");
    }
}

#[test]
fn labels_come_from_the_run_seed_so_a_replay_labels_the_same() {
    let labels = |run: &str| {
        let mut c = ctx("q", vec![], false);
        c.run_id = run.into();
        c.seed = crate::modes::common::seed_from_run_id(run);
        let mut m = Brainstorm::new(&config(&["a", "b", "c", "d", "e"]), c).unwrap();
        let start = m.start();
        emitted(&start, "brainstorm_start").unwrap()["config"]["labels"].clone()
    };
    assert_eq!(labels("run-7"), labels("run-7"));
    let mut sorted: Vec<String> = labels("run-7")
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["sourceLabel"].as_str().unwrap().to_string())
        .collect();
    sorted.sort();
    assert_eq!(sorted, ["Model A", "Model B", "Model C", "Model D", "Model E"]);
    assert!((0..20).any(|i| labels(&format!("r{i}")) != labels("run-7")), "shuffled by run");
    // The ideas carry the label their model got.
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, good);
    let given = emitted(&all, "brainstorm_start").unwrap()["config"]["labels"].clone();
    for e in all_emitted(&all, "ideation_complete") {
        let i = e["data"]["index"].as_u64().unwrap() as usize;
        assert_eq!(e["data"]["sourceLabel"], given[i]["sourceLabel"]);
        assert_eq!(e["data"]["ideas"][0]["sourceLabel"], given[i]["sourceLabel"]);
    }
}

#[test]
fn fewer_than_two_producing_models_fail_the_run() {
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| match c.model.as_str() {
        "m0" => Some(ideas_of("m0")),
        "m1" => None,
        _ => Some("I can't help brainstorm this.".into()),
    });
    let msg = failed(&all).unwrap();
    assert!(msg.contains("Only 1 of 3 models produced ideas"), "{msg}");
    let summary = emitted(&all, "all_ideation_complete").unwrap();
    let warnings = summary["data"]["warnings"].to_string();
    assert!(warnings.contains("listed no ideas") && warnings.contains("m1 failed"), "{warnings}");
    assert!(warnings.contains("declined to answer"), "{warnings}");
    let result = load_result(&stored(&all));
    assert_eq!(result["ideas"]["warnings"], summary["data"]["warnings"]);
    assert_eq!(result["partial"], true);
    assert!(result["clustering"].is_null() && result["refinement"].is_null());
}

#[test]
fn a_failed_curator_falls_back_then_the_refiner_gets_every_idea() {
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| if c.role == "curator" { None } else { good(c) });
    let starts = all_emitted(&all, "fallback_start");
    assert_eq!(starts[0]["key"], "cluster:backup");
    assert_eq!(starts[0]["model"], "spare2");
    let clustering = emitted(&all, "clustering_complete").unwrap();
    assert_eq!(clustering["data"]["fallback"], true);
    assert!(clustering["data"]["note"].as_str().unwrap().contains("its backup (spare2)"));
    assert!(emitted(&all, "scoring_start").is_none(), "scoring is skipped");
    assert!(emitted(&all, "all_scoring_complete").is_none());
    let rs = emitted(&all, "refinement_start").unwrap();
    assert_eq!(
        (rs["data"]["cluster"].clone(), rs["data"]["allIdeas"].clone()),
        (Value::Null, json!(true))
    );
    let refine = calls(&all).into_iter().find(|c| c.role == "refiner").unwrap();
    let p = &refine.messages[0].content;
    assert!(p.contains("Model A:\n- ") && p.contains("Model C:\n- "), "{p}");
    let done = emitted(&all, "refinement_complete").unwrap();
    assert_eq!(
        (done["data"]["clusterId"].clone(), done["partial"].clone()),
        (Value::Null, json!(true))
    );
    let result = load_result(&stored(&all));
    assert_eq!(result["clustering"], clustering["data"]);
    assert_eq!(result["failedModels"].as_array().unwrap().len(), 2);
    assert!((SPEC.outcome)(&result).unwrap().starts_with("Proposal from all the ideas"));
    // A curator that answers without clusters: the same path, with no failure.
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| {
        if c.role == "curator" {
            Some("Broadly: people and tech.".into())
        } else {
            good(c)
        }
    });
    let clustering = emitted(&all, "clustering_complete").unwrap();
    assert_eq!(
        (clustering["data"]["fallback"].clone(), clustering["data"]["model"].clone()),
        (json!(true), json!("cur"))
    );
    assert_eq!(emitted(&all, "refinement_complete").unwrap()["partial"], false);
}

#[test]
fn one_cluster_skips_scoring_and_few_valid_scorers_rank_by_promise() {
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| {
        if c.role == "curator" {
            Some("CLUSTER 1: Only\nPromise: HIGH\nIdeas: model_0_idea_1, model_1_idea_1".into())
        } else {
            good(c)
        }
    });
    assert!(emitted(&all, "scoring_start").is_none());
    let r = emitted(&all, "all_scoring_complete").unwrap();
    assert_eq!(r["data"]["scoringSkipped"], "single_cluster");
    assert_eq!(r["data"]["rankingMethod"], "promise");
    assert_eq!(emitted(&all, "refinement_complete").unwrap()["data"]["clusterName"], "Only");
    // One scorer reads, one fails, one is unreadable: promise decides (cluster 2 is HIGH).
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| match (c.role.as_str(), c.model.as_str()) {
        ("scorer", "m1") => None,
        ("scorer", "m2") => Some("| Cluster | Novelty |\n| 1 | 5 |".into()),
        _ => good(c),
    });
    let scorers = all_emitted(&all, "scorer_complete");
    assert_eq!(scorers.len(), 2, "a failed scorer sends no scorer_complete");
    assert_eq!(scorers.iter().filter(|s| s["data"]["valid"] == true).count(), 1);
    let r = emitted(&all, "all_scoring_complete").unwrap();
    assert_eq!(r["data"]["rankingMethod"], "promise");
    assert_eq!(r["data"]["validScorers"], 1);
    assert_eq!(r["data"]["rankedClusters"][0]["id"], "cluster_2");
    assert_eq!(r["data"]["rankedClusters"][2]["averageScore"], 14.0, "averages still shown");
    assert_eq!(emitted(&all, "refinement_complete").unwrap()["data"]["clusterId"], "cluster_2");
    let result = load_result(&stored(&all));
    assert_eq!(result["ranking"], r["data"]);
    assert_eq!(result["failedModels"][0]["stage"], "scoring");
}

#[test]
fn a_failed_refiner_falls_back_then_the_answer_is_the_winning_cluster() {
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| if c.role == "refiner" { None } else { good(c) });
    assert_eq!(all_emitted(&all, "fallback_start")[0]["key"], "refine:backup");
    let done = emitted(&all, "refinement_complete").unwrap();
    assert_eq!(
        (done["data"]["fallback"].clone(), done["partial"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(done["data"]["model"], Value::Null);
    let answer = finished(&all).unwrap();
    assert!(
        answer.contains("The refiner could not be reached") && answer.contains("## People"),
        "{answer}"
    );
    assert!(answer.contains("- m0 idea 1 — Why m0 1 works."), "{answer}");
    let result = load_result(&stored(&all));
    assert_eq!(result["refinement"], done["data"]);
    assert!((SPEC.outcome)(&result).unwrap().contains("refiner failed"));
    // The backup answers: its model, with the primary named.
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| if c.model == "ref" { None } else { good(c) });
    let done = emitted(&all, "refinement_complete").unwrap();
    assert_eq!(
        (done["data"]["model"].clone(), done["data"]["fallbackFrom"].clone()),
        (json!("spare"), json!("ref"))
    );
    assert_eq!(load_result(&stored(&all))["refinement"], done["data"]);
}

#[test]
fn the_global_timeout_lets_the_stage_finish_then_skips_to_the_refinement() {
    // During ideation: no clustering, the refiner gets every idea.
    let mut m = mode(&["m0", "m1", "m2"]);
    let start = m.start();
    let ideate = stage_calls(&start);
    assert!(start.contains(&Effect::Timer { key: "global".into(), after_ms: 600000 }));
    m.on_reply(ok(&ideate[0], &ideas_of("m0")));
    m.on_timer("global");
    m.on_reply(ok(&ideate[1], &ideas_of("m1")));
    let out = m.on_reply(ok(&ideate[2], &ideas_of("m2")));
    let c = emitted(&out, "clustering_complete").unwrap();
    assert_eq!(
        (c["data"]["fallback"].clone(), c["data"]["model"].clone()),
        (json!(true), Value::Null)
    );
    assert!(c["data"]["note"].as_str().unwrap().contains("time limit"));
    assert_eq!(stage_calls(&out)[0].role, "refiner");
    // During clustering: no scoring; the best cluster by promise is refined.
    let mut m = mode(&["m0", "m1", "m2"]);
    let ideate = stage_calls(&m.start());
    let out: Vec<Effect> =
        ideate.iter().flat_map(|c| m.on_reply(ok(c, &ideas_of(&c.model)))).collect();
    let cur = stage_calls(&out);
    m.on_timer("global");
    let out = m.on_reply(ok(&cur[0], CLUSTERS));
    let r = emitted(&out, "all_scoring_complete").unwrap();
    assert_eq!(
        (r["data"]["scoringSkipped"].clone(), r["data"]["rankingMethod"].clone()),
        (json!("timeout"), json!("promise"))
    );
    assert_eq!(emitted(&out, "refinement_start").unwrap()["data"]["cluster"]["id"], "cluster_2");
    // During scoring: the scores finish and count.
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = {
        let mut all = m.start();
        let mut pending = stage_calls(&all);
        while let Some(c) = pending.first().cloned() {
            pending.remove(0);
            if c.role == "scorer" {
                m.on_timer("global");
            }
            let out = m.on_reply(ok(&c, &good(&c).unwrap()));
            pending.extend(stage_calls(&out));
            all.extend(out);
        }
        all
    };
    let r = emitted(&all, "all_scoring_complete").unwrap();
    assert_eq!(r["data"]["rankingMethod"], "scores");
    assert!(finished(&all).is_some());
}

#[test]
fn replies_after_the_stage_or_twice_change_nothing() {
    let mut m = mode(&["m0", "m1", "m2"]);
    let ideate = stage_calls(&m.start());
    let first = m.on_reply(ok(&ideate[0], &ideas_of("m0")));
    assert_eq!(events(&first), ["ideation_complete"]);
    assert!(m.on_reply(ok(&ideate[0], &ideas_of("m0"))).is_empty());
    let stray = CallSpec::new("score:0", "m0", vec![], "scoring", "scorer", 1);
    assert!(m.on_reply(ok(&stray, "Cluster 1: Novelty=5 Feasibility=5 Impact=5")).is_empty());
    assert!(Brainstorm::new(&json!({ "models": ["a"] }), ctx("q", vec![], false)).is_err());
}

#[test]
fn sim_answers_follow_the_format_and_the_messy_ones_do_not_mislead() {
    let ask = |prompt: &str, malformed: bool, seed: u64| {
        let s = SimAsk { model: "sim/beta", prompt, messages: &[], seed, malformed, hostile: true };
        sim_answer(&s).unwrap()
    };
    let text = ask(&ideate_prompt("q", 5), false, 3);
    let l = read_ideas(&text);
    assert!((5..=8).contains(&l.ideas.len()), "{text}");
    assert!(l.ideas.iter().all(|(t, _)| !t.contains('<')), "hostile text never in a title");
    assert!(text.contains("<script") || text.contains("<img"));
    // Messy ideation: readable, unreadable or over ten, never a guess.
    let outcomes: Vec<usize> =
        (0..12).map(|s| read_ideas(&ask(&ideate_prompt("q", 5), true, s)).ideas.len()).collect();
    assert!(outcomes.contains(&0) && outcomes.contains(&10), "{outcomes:?}");
    let all = ideas(3, 4);
    let listed: Vec<&Idea> = all.iter().collect();
    let cp = cluster_prompt("q", &listed, 3, 6);
    let c = read_clusters(&ask(&cp, false, 1), &all, 6);
    assert!(c.clusters.len() >= 3, "{c:?}");
    let messy: Vec<usize> =
        (0..12).map(|s| read_clusters(&ask(&cp, true, s), &all, 6).clusters.len()).collect();
    assert!(messy.contains(&0) && messy.iter().any(|n| *n >= 3), "{messy:?}");
    let sp = score_prompt("q", &c.clusters, &all);
    assert_eq!(read_scores(&ask(&sp, false, 2), &c.clusters).len(), c.clusters.len());
    let messy: Vec<usize> =
        (0..12).map(|s| read_scores(&ask(&sp, true, s), &c.clusters).len()).collect();
    assert!(messy.contains(&0) && messy.contains(&c.clusters.len()), "{messy:?}");
    let rp = refine_prompt("q", &c.clusters[0], &all, None);
    assert!(ask(&rp, false, 1).starts_with(&format!("## Proposal: {}", c.clusters[0].name)));
    assert!(sim_answer(&SimAsk {
        model: "m",
        prompt: "other",
        messages: &[],
        seed: 1,
        malformed: false,
        hostile: false
    })
    .is_none());
}
