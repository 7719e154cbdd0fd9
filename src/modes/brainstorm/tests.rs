//! Brainstorm driven with fake replies, and its parsers on recorded-style and adversarial
//! outputs.

use crate::modes::Fallbacks;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    all_emitted, assert_contains_all, calls, ctx, drive_on_sim_text, emitted, events, failed,
    fields, finished, first_asked, offline_defaults, ok, readable_report, rows, sim_ask,
    stage_calls, validate_config,
};
use crate::modes::validate;
use crate::modes::Mode;

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
fn a_heading_that_echoes_the_template_names_no_idea() {
    // SmolLM2-135M, asked for `IDEA 1: <short title>`, wrote the template back garbled.
    for text in [
        "IDEA 1: [Your idea idea]\n[Your description]",
        "IDEA 1: <short title>\n<one or two sentences describing the idea>\n\nIDEA 2: <short title>\n<…>",
        "**IDEA 1:** *[Short title]*",
    ] {
        assert!(read_ideas(text).ideas.is_empty(), "{text}");
    }
    // A bracketed name is a title; a description line that echoes the template is no line of it.
    let l = read_ideas(
        "IDEA 1: [Solar roads]\n<one or two sentences describing the idea>\nPanels under glass.",
    );
    assert_eq!(l.ideas, vec![("[Solar roads]".to_string(), "Panels under glass.".to_string())]);
    let s = ideas_schema(3);
    let json = r#"{"reasoning": "r", "ideas": [{"title": "<short title>", "description": "x"},
        {"title": "Night buses", "description": "[Your description]"}, {"title": "Free Sundays", "description": "No fare."}]}"#;
    let (l, from) = read_ideas_reply(json, &s);
    assert_eq!(from, Some(ReadFrom::Json));
    assert_eq!(
        l.ideas,
        vec![
            ("Night buses".to_string(), String::new()),
            ("Free Sundays".to_string(), "No fare.".to_string())
        ]
    );
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

fn field_of(cfg: Value) -> String {
    validate_config("brainstorm", cfg).unwrap_err().field
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
    assert_eq!(validate(&body, &offline_defaults()).unwrap_err().field, "question");
    let ok =
        validate(&json!({ "mode": "brainstorm", "question": "q" }), &offline_defaults()).unwrap();
    assert_eq!(ok.config["models"], json!(["sim/alpha", "sim/beta", "sim/gamma"]));
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
        ..offline_defaults()
    };
    let ok = validate(&json!({ "mode": "brainstorm", "question": "q" }), &backups).unwrap();
    assert_eq!(ok.config["chairmanFallbackModel"], "sim/c");
    assert_eq!(ok.config["facilitatorFallbackModel"], "sim/f");
}

// ---- the state machine ---------------------------------------------------------------------

/// Drives a run: `answer(call)` gives each reply (None: the call fails); the title last.
fn drive(m: &mut Brainstorm, answer: impl Fn(&CallSpec) -> Option<String>) -> Vec<Effect> {
    let start = m.start();
    let first = stage_calls(&start);
    crate::modes::testkit::drive_from(m, start, first, first_asked, answer, "Library Ideas")
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
    assert_eq!(fields(&result, ["partial", "failedModels"]), [json!(false), json!([])]);
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
        let s = SimAsk { malformed, ..sim_ask("sim/beta", prompt, seed, true, None) };
        sim_answer(&s).unwrap()
    };
    let text = ask(&ideate_prompt("q", 5, None), false, 3);
    let l = read_ideas(&text);
    assert!((5..=8).contains(&l.ideas.len()), "{text}");
    assert!(l.ideas.iter().all(|(t, _)| !t.contains('<')), "hostile text never in a title");
    assert!(text.contains("<script") || text.contains("<img"));
    // Messy ideation: readable, unreadable or over ten, never a guess.
    let outcomes: Vec<usize> = (0..12)
        .map(|s| read_ideas(&ask(&ideate_prompt("q", 5, None), true, s)).ideas.len())
        .collect();
    assert!(outcomes.contains(&0) && outcomes.contains(&10), "{outcomes:?}");
    let all = ideas(3, 4);
    let listed: Vec<&Idea> = all.iter().collect();
    let cp = cluster_prompt("q", &listed, 3, 6, None);
    let c = read_clusters(&ask(&cp, false, 1), &all, 6);
    assert!(c.clusters.len() >= 3, "{c:?}");
    let messy: Vec<usize> =
        (0..12).map(|s| read_clusters(&ask(&cp, true, s), &all, 6).clusters.len()).collect();
    assert!(messy.contains(&0) && messy.iter().any(|n| *n >= 3), "{messy:?}");
    let sp = score_prompt("q", &c.clusters, &all, None);
    assert_eq!(read_scores(&ask(&sp, false, 2), &c.clusters).len(), c.clusters.len());
    let messy: Vec<usize> =
        (0..12).map(|s| read_scores(&ask(&sp, true, s), &c.clusters).len()).collect();
    assert!(messy.contains(&0) && messy.contains(&c.clusters.len()), "{messy:?}");
    let rp = refine_prompt("q", &c.clusters[0], &all, None);
    assert!(ask(&rp, false, 1).starts_with(&format!("## Proposal: {}", c.clusters[0].name)));
    assert!(sim_answer(&sim_ask("m", "other", 1, false, None)).is_none());
}

// ---- structured replies --------------------------------------------------------------------

/// A brainstorm whose `json` models are asked for JSON (their routes take structured output).
fn structured_mode(models: &[&str], json: &[&str]) -> Brainstorm {
    let mut c = ctx("How could a library attract teenagers?", vec![], true);
    c.structured = crate::modes::Structured::models(json);
    Brainstorm::new(&config(models), c).unwrap()
}

fn idea_ids(all: &[Idea]) -> Vec<&str> {
    all.iter().map(|i| i.id.as_str()).collect()
}

fn keys(s: &ReplySchema) -> Vec<String> {
    s.schema["properties"].as_object().unwrap().keys().cloned().collect()
}

#[test]
fn the_ideas_schema_asks_for_the_ideas_asked_and_opens_with_the_reasoning() {
    let s = ideas_schema(4);
    assert_eq!(s.name, IDEAS_SCHEMA);
    assert_eq!(keys(&s), ["reasoning", "ideas"], "the reasoning comes first");
    let list = &s.schema["properties"]["ideas"];
    assert_eq!((list["minItems"].as_u64(), list["maxItems"].as_u64()), (Some(4), Some(10)));
    let item = |t: &str| json!({ "title": t, "description": "why it works" });
    let of = |n: usize| json!({ "reasoning": "", "ideas": (0..n).map(|k| item(&format!("t{k}"))).collect::<Vec<_>>() });
    for n in [4, 7, 10] {
        assert!(s.validate(&of(n)).is_ok(), "{n}");
        assert_eq!(read_ideas_reply(&of(n).to_string(), &s).0.ideas.len(), n);
    }
    let long = "x".repeat(TITLE_CHARS + 1);
    for bad in [
        of(3),
        of(11),
        json!({ "ideas": [item("a"), item("b"), item("c"), item("d")] }),
        json!({ "reasoning": "", "ideas": [item("a"), item("b"), item("c"), { "title": "d" }] }),
        json!({ "reasoning": "", "ideas": [item("a"), item("b"), item("c"), item(&long)] }),
        json!({ "reasoning": "", "ideas": [item("a"), item("b"), item("c"), item("d")], "score": 1 }),
    ] {
        assert!(s.validate(&bad).is_err(), "{bad}");
    }
}

#[test]
fn the_clusters_schema_takes_exactly_this_runs_idea_ids() {
    let all = ideas(3, 3);
    let ids = idea_ids(&all);
    let s = clusters_schema(&ids, 4);
    assert_eq!(s.name, CLUSTERS_SCHEMA);
    assert_eq!(keys(&s), ["reasoning", "clusters"]);
    let list = &s.schema["properties"]["clusters"];
    assert_eq!((list["minItems"].as_u64(), list["maxItems"].as_u64()), (Some(3), Some(4)));
    let members = &list["items"]["properties"]["ideas"];
    assert_eq!(members["items"]["enum"], json!(ids));
    assert!(members.get("uniqueItems").is_none(), "no rule a grammar cannot keep: {members}");
    assert_eq!(list["items"]["properties"]["promise"]["enum"], json!(PROMISES));
    let c = |ideas: &[&str], promise: &str| json!({ "name": "N", "theme": "T", "ideas": ideas, "promise": promise });
    let reply = |cs: Vec<Value>| json!({ "reasoning": "r", "clusters": cs });
    let good = reply(vec![
        c(&["model_0_idea_1", "model_1_idea_1"], "HIGH"),
        c(&["model_0_idea_2", "model_2_idea_2"], "LOW"),
        c(&["model_2_idea_3", "model_1_idea_3", "model_0_idea_3"], "MEDIUM"),
    ]);
    assert!(s.validate(&good).is_ok());
    let (read, from) = read_clusters_reply(&good.to_string(), &all, 4, &s);
    assert_eq!((read.clusters.len(), from), (3, Some(ReadFrom::Json)));
    let two = |p: &str| c(&["model_0_idea_1", "model_1_idea_1"], p);
    for bad in [
        // An idea of no run, another spelling, one idea only.
        reply(vec![c(&["model_0_idea_1", "model_9_idea_9"], "HIGH"), two("LOW"), two("LOW")]),
        reply(vec![c(&["MODEL_0_IDEA_1", "model_1_idea_1"], "HIGH"), two("LOW"), two("LOW")]),
        reply(vec![c(&["model_0_idea_1"], "HIGH"), two("LOW"), two("LOW")]),
        // A promise outside the three, too few or too many clusters.
        reply(vec![two("VERY HIGH"), two("LOW"), two("LOW")]),
        reply(vec![two("HIGH"), two("LOW")]),
        reply(vec![two("HIGH"), two("LOW"), two("LOW"), two("LOW"), two("LOW")]),
    ] {
        assert!(s.validate(&bad).is_err(), "{bad}");
    }
    // An id named twice in one cluster (as CI's model wrote) fits, and places the idea once;
    // an idea named in two clusters stays in the first.
    let twice = reply(vec![
        c(&["model_0_idea_1", "model_1_idea_1", "model_1_idea_1"], "HIGH"),
        c(&["model_0_idea_2", "model_0_idea_1"], "LOW"),
        c(&["model_2_idea_3", "model_1_idea_3"], "MEDIUM"),
    ]);
    assert!(s.validate(&twice).is_ok());
    let (read, from) = read_clusters_reply(&twice.to_string(), &all, 4, &s);
    assert_eq!(from, Some(ReadFrom::Json));
    assert_eq!(read.clusters[0].idea_ids, ["model_0_idea_1", "model_1_idea_1"]);
    assert_eq!(read.clusters[1].idea_ids, ["model_0_idea_2"]);
    // More than ten ideas in a cluster is refused too.
    let many = ideas(4, 3);
    let ids = idea_ids(&many);
    let s = clusters_schema(&ids, 6);
    let c11 = c(&ids[..11], "HIGH");
    let c10 = c(&ids[..10], "HIGH");
    let pair = c(&ids[10..12], "LOW");
    assert!(s.validate(&reply(vec![c10, pair.clone(), pair.clone()])).is_ok());
    assert!(s.validate(&reply(vec![c11, pair.clone(), pair])).is_err());
    // Too few ideas to fill three clusters of two: the counts come down to what can be.
    let few = ideas(2, 1);
    let s = clusters_schema(&idea_ids(&few), 3);
    let list = &s.schema["properties"]["clusters"];
    assert_eq!((list["minItems"].as_u64(), list["maxItems"].as_u64()), (Some(1), Some(3)));
    let members = &list["items"]["properties"]["ideas"];
    assert_eq!((members["minItems"].as_u64(), members["maxItems"].as_u64()), (Some(2), Some(2)));
}

#[test]
fn the_scores_schema_takes_the_cluster_numbers_and_whole_scores_from_1_to_5() {
    let s = scores_schema(3);
    assert_eq!(s.name, SCORES_SCHEMA);
    assert_eq!(keys(&s), ["reasoning", "scores"]);
    let item = &s.schema["properties"]["scores"]["items"];
    let fields: Vec<&String> = item["properties"].as_object().unwrap().keys().collect();
    assert_eq!(fields, ["cluster", "justification", "novelty", "feasibility", "impact"]);
    assert_eq!(
        (
            item["properties"]["cluster"]["minimum"].as_u64(),
            item["properties"]["cluster"]["maximum"].as_u64()
        ),
        (Some(1), Some(3))
    );
    let r = |c: Value, n: Value| json!({ "cluster": c, "justification": "j", "novelty": n, "feasibility": 3, "impact": 5 });
    let reply = |rs: Vec<Value>| json!({ "reasoning": "", "scores": rs });
    let good = reply(vec![r(json!(1), json!(1)), r(json!(2), json!(5)), r(json!(3), json!(3))]);
    assert!(s.validate(&good).is_ok());
    let cs = vec![cluster(1, "HIGH", &["a"]), cluster(2, "LOW", &["b"]), cluster(3, "LOW", &["c"])];
    assert_eq!(read_scores_reply(&good.to_string(), &cs, &s).0.len(), 3);
    for bad in [
        reply(vec![r(json!(0), json!(3)), r(json!(2), json!(3)), r(json!(3), json!(3))]),
        reply(vec![r(json!(1), json!(3)), r(json!(2), json!(3)), r(json!(4), json!(3))]),
        reply(vec![r(json!(1), json!(0)), r(json!(2), json!(3)), r(json!(3), json!(3))]),
        reply(vec![r(json!(1), json!(6)), r(json!(2), json!(3)), r(json!(3), json!(3))]),
        reply(vec![r(json!(1), json!(3.5)), r(json!(2), json!(3)), r(json!(3), json!(3))]),
        reply(vec![r(json!(1), json!("4")), r(json!(2), json!(3)), r(json!(3), json!(3))]),
        reply(vec![r(json!(1), json!(3)), r(json!(2), json!(3))]),
    ] {
        assert!(s.validate(&bad).is_err(), "{bad}");
    }
}

#[test]
fn ideas_are_read_from_json_when_it_fits_else_from_text() {
    let s = ideas_schema(3);
    let item = |t: &str, d: &str| json!({ "title": t, "description": d });
    let reply = |items: Vec<Value>| json!({ "reasoning": "angles", "ideas": items }).to_string();
    let (l, from) = read_ideas_reply(
        &reply(vec![
            item(" Peer ambassadors ", "Teens run sessions."),
            item("\"Late opening\"", ""),
            item("  ", "A description without a title is no idea."),
        ]),
        &s,
    );
    assert_eq!(from, Some(ReadFrom::Json));
    assert_eq!(
        l.ideas,
        [
            ("Peer ambassadors".to_string(), "Teens run sessions.".to_string()),
            ("Late opening".to_string(), String::new())
        ]
    );
    assert_eq!(l.dropped, 0);
    // Fenced, after a closed reasoning block.
    let three = reply(vec![item("a", "1"), item("b", "2"), item("c", "3")]);
    let fenced = format!("<think>IDEA 1: no</think>```json\n{three}\n```");
    assert_eq!(read_ideas_reply(&fenced, &s).0.ideas.len(), 3);
    assert_eq!(read_ideas_reply(&fenced, &s).1, Some(ReadFrom::Json));
    // Only blank titles: no idea from JSON, none from text either.
    let blank = reply(vec![item("", "x"), item(" ", "y"), item("", "z")]);
    assert_eq!(read_ideas_reply(&blank, &s), (IdeaList { ideas: vec![], dropped: 0 }, None));
    // A reply whose JSON fits states its ideas there: headings written before it are not read
    // in place of the blank titles it gives.
    let both = format!("{IDEAS}\n{blank}");
    assert_eq!(read_ideas_reply(&both, &s), (IdeaList { ideas: vec![], dropped: 0 }, None));
    // Eleven ideas do not fit the schema and the text reader reads no JSON: unparsed.
    let eleven = reply((0..11).map(|k| item(&format!("t{k}"), "d")).collect());
    assert_eq!(read_ideas_reply(&eleven, &s).1, None);
    // A model that ignored the schema and wrote the text format.
    let (l, from) = read_ideas_reply(IDEAS, &s);
    assert_eq!((l.ideas.len(), from), (3, Some(ReadFrom::Text)));
    // Cut off at its token cap inside its list: the ideas complete before the cut.
    let cut = r#"{"reasoning": "", "ideas": [{"title": "a", "description": "b"}, {"title": "c"#;
    let (l, from) = read_ideas_reply(cut, &s);
    assert_eq!(from, Some(ReadFrom::JsonCut));
    assert_eq!(l.ideas, [("a".to_string(), "b".to_string())]);
    // Cut inside its first idea, or JSON only inside an unclosed reasoning block: nothing.
    for nothing in [
        r#"{"reasoning": "", "ideas": [{"title": "a", "descr"#,
        format!("<think>{three}").as_str(),
        "I would rather not.",
    ] {
        assert_eq!(read_ideas_reply(nothing, &s).1, None, "{nothing}");
        assert!(read_ideas_reply(nothing, &s).0.ideas.is_empty());
    }
}

#[test]
fn clusters_are_read_from_json_under_the_texts_placement_rules_else_from_text() {
    let all = ideas(3, 3);
    let s = clusters_schema(&idea_ids(&all), 3);
    let c = |name: &str, theme: &str, ids: &[&str], promise: &str| json!({ "name": name, "theme": theme, "ideas": ids, "promise": promise });
    let reply = |cs: Vec<Value>| json!({ "reasoning": "", "clusters": cs }).to_string();
    // An idea placed twice stays in its first cluster; a cluster left empty is dropped and
    // the next one renumbered.
    let (read, from) = read_clusters_reply(
        &reply(vec![
            c(" People ", "community.", &["model_0_idea_1", "model_1_idea_1"], "HIGH"),
            c("Again", "", &["model_1_idea_1", "model_0_idea_1"], "LOW"),
            c("Tech", "  ", &["model_0_idea_2", "model_0_idea_1"], "MEDIUM"),
        ]),
        &all,
        3,
        &s,
    );
    assert_eq!(from, Some(ReadFrom::Json));
    assert_eq!(read.clusters.len(), 2);
    assert_eq!(
        read.clusters[0],
        Cluster {
            id: "cluster_1".into(),
            name: "People".into(),
            theme: Some("community.".into()),
            promise: "HIGH".into(),
            promise_stated: true,
            idea_ids: vec!["model_0_idea_1".into(), "model_1_idea_1".into()],
        }
    );
    assert_eq!(read.clusters[1].id, "cluster_2");
    assert_eq!((read.clusters[1].name.as_str(), read.clusters[1].theme.as_deref()), ("Tech", None));
    assert_eq!(read.clusters[1].idea_ids, ["model_0_idea_2"]);
    assert_eq!(read.unclustered.len(), 6);
    // An idea of no run: the JSON does not fit and the text states nothing: unparsed.
    let foreign = reply(vec![
        c("A", "", &["model_0_idea_1", "model_7_idea_1"], "HIGH"),
        c("B", "", &["model_0_idea_2", "model_1_idea_2"], "LOW"),
        c("C", "", &["model_0_idea_3", "model_1_idea_3"], "LOW"),
    ]);
    let (read, from) = read_clusters_reply(&foreign, &all, 3, &s);
    assert_eq!((read.clusters.len(), from), (0, None));
    // JSON that does not fit, with the text blocks after it: the text reader reads them.
    let mixed = format!("{foreign}\n\n{CLUSTERS}");
    let all3 = ideas(3, 4);
    let s3 = clusters_schema(&idea_ids(&all3), 6);
    let (read, from) = read_clusters_reply(&mixed, &all3, 6, &s3);
    assert_eq!((read.clusters.len(), from), (3, Some(ReadFrom::Text)));
    assert_eq!(read, read_clusters(CLUSTERS, &all3, 6));
}

#[test]
fn scores_are_read_from_json_when_it_fits_else_from_text() {
    let cs = vec![cluster(1, "HIGH", &["a"]), cluster(2, "LOW", &["b"]), cluster(3, "LOW", &["c"])];
    let s = scores_schema(3);
    let r = |c: u64, n: u64, f: u64, i: u64, j: &str| json!({ "cluster": c, "justification": j, "novelty": n, "feasibility": f, "impact": i });
    let reply = |rs: Vec<Value>| json!({ "reasoning": "", "scores": rs }).to_string();
    // Cluster 1 rated twice takes its last rating (as a repeated block in text); cluster 3 is
    // not rated and is unscored.
    let (scores, from) = read_scores_reply(
        &reply(vec![r(1, 1, 1, 1, "first"), r(2, 5, 4, 3, " bold "), r(1, 2, 3, 4, "")]),
        &cs,
        &s,
    );
    assert_eq!(from, Some(ReadFrom::Json));
    assert_eq!(
        scores,
        [
            ClusterScore {
                cluster_id: "cluster_1".into(),
                novelty: 2,
                feasibility: 3,
                impact: 4,
                total: 9,
                justification: None
            },
            ClusterScore {
                cluster_id: "cluster_2".into(),
                novelty: 5,
                feasibility: 4,
                impact: 3,
                total: 12,
                justification: Some("bold".into())
            },
        ]
    );
    // Out of range: refused, and the text reader reads no JSON.
    let bad = reply(vec![r(1, 6, 1, 1, ""), r(2, 1, 1, 1, ""), r(3, 1, 1, 1, "")]);
    assert_eq!(read_scores_reply(&bad, &cs, &s), (vec![], None));
    // The text format, asked for JSON: read as text.
    let text = "Cluster 2: Novelty=4 Feasibility=4 Impact=4\nJustification: fine.";
    let (scores, from) = read_scores_reply(text, &cs, &s);
    assert_eq!((scores.len(), from), (1, Some(ReadFrom::Text)));
    assert_eq!(scores, read_scores(text, &cs));
    // Cut off at its token cap in the third rating: the two before it; cluster 3 unscored.
    let whole = reply(vec![r(1, 2, 3, 4, "a"), r(2, 5, 4, 3, "b"), r(3, 1, 1, 1, "c")]);
    let cut = &whole[..whole.rfind("\"cluster\"").unwrap() + 3];
    let (scores, from) = read_scores_reply(cut, &cs, &s);
    assert_eq!(from, Some(ReadFrom::JsonCut), "{cut}");
    let ids: Vec<&str> = scores.iter().map(|c| c.cluster_id.as_str()).collect();
    assert_eq!(ids, ["cluster_1", "cluster_2"]);
    // A complete rating out of range before the cut reads nothing from it.
    let bad = cut.replacen("\"novelty\":2", "\"novelty\":9", 1);
    assert_ne!(bad, cut);
    assert_eq!(read_scores_reply(&bad, &cs, &s), (vec![], None));
}

proptest! {
    /// Whatever JSON the ideas' schema allows is read from it: every idea with a title, as
    /// stated (trimmed), in order.
    #[test]
    fn any_ideas_the_schema_allows_are_read_without_loss(
        seed in any::<u64>(),
        min in 3usize..=10,
        words in "\\PC{0,30}",
    ) {
        let s = ideas_schema(min);
        let n = std::cell::Cell::new(0);
        let mut rng = SplitMix64::new(seed);
        // Every string different, so an idea lost or reordered shows.
        let v = schema::sample(&s.schema, &mut rng, &|f| {
            n.set(n.get() + 1);
            format!("{words} {f} {}", n.get())
        });
        prop_assert!(s.validate(&v).is_ok());
        let (l, from) = read_ideas_reply(&v.to_string(), &s);
        prop_assert_eq!(from, Some(ReadFrom::Json));
        let stated: Vec<(String, String)> = v["ideas"].as_array().unwrap().iter().map(|i| {
            (i["title"].as_str().unwrap().trim().trim_matches(['"', '“', '”']).trim().to_string(),
             i["description"].as_str().unwrap().trim().to_string())
        }).collect();
        prop_assert_eq!(l.ideas, stated);
    }

    /// Whatever JSON the clusters' schema allows is read from it: every cluster as stated,
    /// each idea once, in the first cluster naming it, a cluster left with none dropped.
    #[test]
    fn any_clusters_the_schema_allows_are_read_without_loss(
        seed in any::<u64>(),
        models in 2usize..=4,
        each in 1usize..=6,
        max in 3usize..=8,
    ) {
        let all = ideas(models, each);
        let k = cluster_limit(max, all.len());
        let s = clusters_schema(&idea_ids(&all), k);
        let mut rng = SplitMix64::new(seed);
        let v = schema::sample(&s.schema, &mut rng, &|f| format!("the {f}"));
        prop_assert!(s.validate(&v).is_ok());
        let (read, from) = read_clusters_reply(&v.to_string(), &all, k, &s);
        prop_assert_eq!(from, Some(ReadFrom::Json));
        let mut placed: Vec<String> = Vec::new();
        let mut expected: Vec<(String, String, Vec<String>)> = Vec::new();
        for c in v["clusters"].as_array().unwrap() {
            // Each idea once: not placed before, nor named earlier in this cluster.
            let mut ids: Vec<String> = Vec::new();
            for i in c["ideas"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_string()) {
                if !placed.contains(&i) && !ids.contains(&i) {
                    ids.push(i);
                }
            }
            if ids.is_empty() {
                continue;
            }
            placed.extend(ids.clone());
            let field = |k: &str| c[k].as_str().unwrap().to_string();
            expected.push((field("name"), field("promise"), ids));
        }
        let got: Vec<(String, String, Vec<String>)> = read
            .clusters
            .iter()
            .map(|c| (c.name.clone(), c.promise.clone(), c.idea_ids.clone()))
            .collect();
        prop_assert_eq!(got, expected);
        prop_assert!(read.clusters.iter().all(|c| c.promise_stated && c.theme.is_some()));
        prop_assert_eq!(read.unclustered.len() + placed.len(), all.len());
    }

    /// Whatever JSON the scores' schema allows is read from it: each cluster by the last
    /// rating naming it, every value as stated.
    #[test]
    fn any_scores_the_schema_allows_are_read_without_loss(seed in any::<u64>(), k in 1usize..=8) {
        let cs: Vec<Cluster> = (1..=k).map(|n| cluster(n, "HIGH", &["a"])).collect();
        let s = scores_schema(k);
        let mut rng = SplitMix64::new(seed);
        let v = schema::sample(&s.schema, &mut rng, &|f| format!("the {f}"));
        let (scores, from) = read_scores_reply(&v.to_string(), &cs, &s);
        prop_assert_eq!(from, Some(ReadFrom::Json));
        let items = v["scores"].as_array().unwrap();
        let expected: Vec<(String, u64, u64, u64)> = (1..=k as u64)
            .filter_map(|n| {
                let i = items.iter().rev().find(|i| i["cluster"] == n)?;
                let v = |d: &str| i[d].as_u64();
                Some((format!("cluster_{n}"), v("novelty")?, v("feasibility")?, v("impact")?))
            })
            .collect();
        let got: Vec<(String, u64, u64, u64)> = scores
            .iter()
            .map(|s| {
                let (n, f, i) = (s.novelty.into(), s.feasibility.into(), s.impact.into());
                (s.cluster_id.clone(), n, f, i)
            })
            .collect();
        prop_assert_eq!(got, expected);
        prop_assert!(scores.iter().all(|s| s.total == s.novelty + s.feasibility + s.impact));
    }
}

#[test]
fn the_json_prompts_keep_the_instructions_and_swap_the_format() {
    let all = ideas(3, 4);
    let listed: Vec<&Idea> = all.iter().collect();
    let ids = idea_ids(&all);
    let cs = vec![cluster(1, "HIGH", &["model_0_idea_1"]), cluster(2, "LOW", &["model_1_idea_1"])];
    let pairs = [
        (ideate_prompt("q", 4, None), ideate_prompt("q", 4, Some(&ideas_schema(4))), "IDEA 1:"),
        (
            cluster_prompt("q", &listed, 3, 6, None),
            cluster_prompt("q", &listed, 3, 6, Some(&clusters_schema(&ids, 6))),
            "CLUSTER 1:",
        ),
        (
            score_prompt("q", &cs, &all, None),
            score_prompt("q", &cs, &all, Some(&scores_schema(2))),
            "Novelty=<1-5>",
        ),
    ];
    for (text, json, format) in pairs {
        // The same head and material; the format asked differs.
        let head = text.split("\n\n").take(2).collect::<Vec<_>>().join("\n\n");
        assert!(json.starts_with(&head), "{json}");
        assert!(text.contains(format) && !text.contains("JSON"), "{text}");
        assert!(json.contains(schema::ASKS_FOR_JSON) && !json.contains(format), "{json}");
        assert!(json.contains("- \"reasoning\": your reasoning, briefly"), "{json}");
    }
    let json = cluster_prompt("q", &listed, 3, 6, Some(&clusters_schema(&ids, 6)));
    assert_contains_all(
        &json,
        &[
            "[model_0_idea_1] idea 0.1 — about 0.1 (Model A)",
            "Group related ideas into 3 to 6 themed clusters",
        ],
    );
    assert!(json.contains(r#""model_2_idea_4""#) && json.contains(r#""HIGH", "MEDIUM", "LOW""#));
    let json = score_prompt("q", &cs, &all, Some(&scores_schema(2)));
    assert!(json.contains("Cluster 2: C2\nTheme: (not stated)\nIdeas:\n- idea 1.1 — about 1.1"));
    assert!(json.contains("a whole number from 1 to 5"), "{json}");
    assert!(ideate_prompt("q", 4, Some(&ideas_schema(4))).contains("a list of 4 to 10 items"));
}

#[test]
fn every_machine_read_call_carries_its_schema_and_the_prompt_its_route_takes() {
    // No route takes structured output: the text prompts, the schemas still named (the engine
    // sends them only where a route takes them), each reading said to be from text.
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, good);
    let cs = calls(&all);
    let schema_of = |role: &str| -> Vec<Option<String>> {
        cs.iter()
            .filter(|c| c.role == role)
            .map(|c| c.schema.as_ref().map(|s| s.name.clone()))
            .collect()
    };
    assert_eq!(schema_of("ideator"), vec![Some(IDEAS_SCHEMA.to_string()); 3]);
    assert_eq!(schema_of("curator"), [Some(CLUSTERS_SCHEMA.to_string())]);
    assert_eq!(schema_of("scorer"), vec![Some(SCORES_SCHEMA.to_string()); 3]);
    assert_eq!(schema_of("refiner"), [None], "the proposal is text a person reads");
    assert!(cs
        .iter()
        .filter(|c| c.schema.is_some())
        .all(|c| !c.messages[0].content.contains("JSON")));
    // The quoted material is named, as it stands in the prompt, for fitting a small context.
    for c in cs.iter().filter(|c| c.role != "ideator" && c.key != "title") {
        assert_eq!(c.material.len(), 1, "{}", c.role);
        assert!(c.messages[0].content.contains(&*c.material[0].text), "{}", c.role);
    }
    let curator = cs.iter().find(|c| c.role == "curator").unwrap();
    assert_eq!(curator.material[0].name, "the ideas");
    assert!(curator.material[0].text.starts_with("[model_"));
    for name in ["ideation_complete", "clustering_complete", "scorer_complete"] {
        for e in all_emitted(&all, name) {
            assert_eq!(e["data"]["readFrom"], "text", "{name}: {e}");
        }
    }
    // An unread reply says nothing of where it was read from.
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| match (c.role.as_str(), c.model.as_str()) {
        ("ideator", "m2") | ("scorer", "m1") => Some("No.".into()),
        _ => good(c),
    });
    let unread: Vec<Value> = all_emitted(&all, "ideation_complete")
        .into_iter()
        .chain(all_emitted(&all, "scorer_complete"))
        .filter(|e| {
            e["data"]["model"] == "m2" && e["data"]["ideaCount"] == 0
                || e["data"]["model"] == "m1" && e["data"]["valid"] == false
        })
        .collect();
    assert_eq!(unread.len(), 2, "{unread:?}");
    assert!(unread.iter().all(|e| e["data"].get("readFrom").is_none()), "{unread:?}");
}

/// A good run's answers in JSON for the calls asking for it (text for the others).
fn good_json(c: &CallSpec) -> Option<String> {
    let asks_json = c.messages[0].content.contains(schema::ASKS_FOR_JSON);
    if !asks_json {
        return good(c);
    }
    Some(match c.role.as_str() {
        "ideator" => {
            let m = &c.model;
            let ideas: Vec<Value> = (1..=4)
                .map(|k| json!({ "title": format!("{m} idea {k}"), "description": format!("Why {m} {k} works.") }))
                .collect();
            json!({ "reasoning": "angles", "ideas": ideas }).to_string()
        }
        "curator" => json!({ "reasoning": "themes", "clusters": [
            { "name": "People", "theme": "community.", "promise": "LOW",
              "ideas": ["model_0_idea_1", "model_1_idea_1", "model_2_idea_1"] },
            { "name": "Tech", "theme": "tools.", "promise": "HIGH", "ideas": ["model_0_idea_2", "model_1_idea_2"] },
            { "name": "Money", "theme": "", "promise": "MEDIUM", "ideas": ["model_0_idea_3", "model_2_idea_3"] } ] }).to_string(),
        "scorer" => json!({ "reasoning": "weighed", "scores": [
            { "cluster": 1, "justification": "strong.", "novelty": 5, "feasibility": 4, "impact": 5 },
            { "cluster": 2, "justification": "", "novelty": 3, "feasibility": 3, "impact": 3 },
            { "cluster": 3, "justification": "", "novelty": 2, "feasibility": 2, "impact": 2 } ] }).to_string(),
        _ => unreachable!("{}", c.role),
    })
}

#[test]
fn a_run_whose_routes_take_json_reads_from_it_as_the_text_run_reads() {
    let models = ["m0", "m1", "m2"];
    // m2 is asked in text; the curator, m0 and m1 in JSON.
    let mut m = structured_mode(&models, &["m0", "m1", "cur"]);
    let all = drive(&mut m, good_json);
    for c in calls(&all).iter().filter(|c| c.schema.is_some()) {
        let json = c.messages[0].content.contains(schema::ASKS_FOR_JSON);
        assert_eq!(json, c.model != "m2", "{} {}", c.role, c.model);
    }
    let from = |name: &str| -> Vec<(String, Value)> {
        all_emitted(&all, name)
            .iter()
            .map(|e| {
                (
                    e["data"]["model"].as_str().unwrap_or("").to_string(),
                    e["data"]["readFrom"].clone(),
                )
            })
            .collect()
    };
    for name in ["ideation_complete", "scorer_complete"] {
        for (model, read) in from(name) {
            assert_eq!(read, if model == "m2" { "text" } else { "json" }, "{name} {model}");
        }
    }
    assert_eq!(from("clustering_complete"), [("cur".to_string(), json!("json"))]);
    // Read from JSON, the run is the text run's: the same ideas, clusters, scores and winner.
    let mut t = mode(&models);
    let text = drive(&mut t, good);
    let stripped = |a: &[Effect], name: &str| -> Vec<Value> {
        let mut v = all_emitted(a, name);
        v.iter_mut().for_each(strip_read_from);
        v
    };
    for name in [
        "ideation_complete",
        "all_ideation_complete",
        "clustering_complete",
        "scorer_complete",
        "all_scoring_complete",
        "refinement_start",
    ] {
        assert_eq!(stripped(&all, name), stripped(&text, name), "{name}");
    }
    assert_eq!(finished(&all), finished(&text));
    // Stored with each row, and the result rebuilt from the rows is what went out.
    let stored_rows = stored(&all);
    let row = |t: &str| {
        stored_rows.iter().find(|r| r.stage_type == t).unwrap().parsed_data.clone().unwrap()
    };
    assert_eq!(row("ideation_0")["readFrom"], "json");
    assert_eq!(row("ideation_2")["readFrom"], "text");
    assert_eq!(row("clustering")["readFrom"], "json");
    assert_eq!(row("scoring_1")["readFrom"], "json");
    let result = load_result(&stored_rows);
    assert_eq!(result["clustering"], emitted(&all, "clustering_complete").unwrap()["data"]);
    let scores: Vec<Value> =
        all_emitted(&all, "scorer_complete").iter().map(|e| e["data"].clone()).collect();
    assert_eq!(result["scores"], json!(scores));
}

fn strip_read_from(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("readFrom");
            o.values_mut().for_each(strip_read_from);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_read_from),
        _ => {}
    }
}

#[test]
fn a_brainstorm_on_the_sim_reads_every_machine_read_reply_from_json() {
    let models = ["sim/alpha", "sim/beta", "sim/xss-gamma", "sim/delta"];
    let mut read = 0;
    for n in 0..6 {
        let cfg = json!({ "models": models, "curatorModel": "sim/delta", "refinerModel": "sim/alpha",
                          "minIdeasPerModel": 3 + n, "maxClusters": 3 + n % 4, "timeoutMs": 120000,
                          "globalTimeoutMs": 600000 });
        let mut c =
            ctx(&format!("Challenge {n}: how could a library attract teenagers?"), vec![], false);
        c.structured = crate::modes::Structured::models(models);
        let mut m = Brainstorm::new(&cfg, c).unwrap();
        let all = drive_on_sim_text(&mut m);
        assert!(finished(&all).is_some(), "{:?}", failed(&all));
        let machine: Vec<StageRow> = rows(&all)
            .into_iter()
            .filter(|r| ["ideator", "curator", "scorer"].contains(&r.role.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(machine.len(), 4 + 1 + 4, "every stage ran");
        for r in &machine {
            let pd = r.parsed_data.as_ref().unwrap();
            assert_eq!(pd["readFrom"], "json", "{}: {pd}", r.stage_type);
        }
        let ideated = all_emitted(&all, "ideation_complete");
        assert!(
            ideated.iter().all(|e| e["data"]["ideaCount"].as_u64() >= Some(3 + n)),
            "{ideated:?}"
        );
        read += machine.len();
        let ranking = emitted(&all, "all_scoring_complete").unwrap();
        assert_eq!(ranking["data"]["rankingMethod"], "scores");
    }
    assert_eq!(read, 6 * 9);
}

#[test]
fn the_sim_answers_its_own_schemas_in_json_and_no_other() {
    let all = ideas(3, 4);
    let listed: Vec<&Idea> = all.iter().collect();
    let ids = idea_ids(&all);
    let (is, cs_schema) = (ideas_schema(5), clusters_schema(&ids, 6));
    let ip = ideate_prompt("q", 5, Some(&is));
    let cp = cluster_prompt("q", &listed, 3, 6, Some(&cs_schema));
    let ask = |prompt: &str, schema: Option<&ReplySchema>, seed: u64, hostile: bool| {
        sim_answer(&sim_ask("sim/beta", prompt, seed, hostile, schema))
    };
    for seed in 0..12 {
        let hostile = seed % 2 == 1;
        let reply = ask(&ip, Some(&is), seed, hostile).unwrap();
        let (l, from) = read_ideas_reply(&reply, &is);
        assert_eq!(from, Some(ReadFrom::Json), "{reply}");
        assert!((5..=8).contains(&l.ideas.len()));
        assert!(l.ideas.iter().all(|(t, _)| !t.contains('<')), "hostile text never in a title");
        let reply = ask(&cp, Some(&cs_schema), seed, hostile).unwrap();
        let (c, from) = read_clusters_reply(&reply, &all, 6, &cs_schema);
        assert_eq!(from, Some(ReadFrom::Json), "{reply}");
        assert!(c.clusters.len() >= 3 && c.clusters.iter().all(|c| c.idea_ids.len() >= 2), "{c:?}");
        assert!(!c.clusters[0].name.starts_with("Ideas"), "named after an idea: {c:?}");
        let ss = scores_schema(c.clusters.len());
        let sp = score_prompt("q", &c.clusters, &all, Some(&ss));
        let reply = ask(&sp, Some(&ss), seed, hostile).unwrap();
        let (s, from) = read_scores_reply(&reply, &c.clusters, &ss);
        assert_eq!((s.len(), from), (c.clusters.len(), Some(ReadFrom::Json)), "{reply}");
    }
    // Asked for the most ideas: ten.
    let ten = ideas_schema(10);
    let reply = ask(&ideate_prompt("q", 10, Some(&ten)), Some(&ten), 1, false).unwrap();
    assert_eq!(read_ideas_reply(&reply, &ten).0.ideas.len(), 10);
    // Another mode's schema is not ours; a schema on another prompt of this mode neither.
    let other = ReplySchema::new("council_ranking", schema::reasoned([]));
    assert_eq!(ask(&ip, Some(&other), 1, false), None);
    assert_eq!(ask(&cp, Some(&is), 1, false), None);
}

#[test]
fn the_curators_prompt_of_many_long_ideas_fits_a_small_context_by_cutting_the_ideas() {
    // Six ideators of ten long ideas each: on a 4,096-token slot the curator's prompt would
    // not fit; what the engine cuts is the list of ideas it names, never the instructions or
    // the JSON format with its ids.
    let models = ["m0", "m1", "m2", "m3", "m4", "m5"];
    let mut c = ctx("How could a library attract teenagers?", vec![], false);
    c.structured = crate::modes::Structured::models(["cur"]);
    let mut cfg = config(&models);
    cfg["minIdeasPerModel"] = json!(10);
    let mut m = Brainstorm::new(&cfg, c).unwrap();
    let ideators = stage_calls(&m.start());
    let long =
        "It draws teenagers in with something they already love, and costs little. ".repeat(5);
    let mut out = Vec::new();
    for call in &ideators {
        let reply: String =
            (1..=10).map(|k| format!("IDEA {k}: {} idea {k}\n{long}\n\n", call.model)).collect();
        out.extend(m.on_reply(ok(call, &reply)));
    }
    let curator = stage_calls(&out).into_iter().find(|c| c.role == "curator").unwrap();
    let before = crate::engine::fit::estimate(&curator.messages, 1.0);
    assert!(before > 4_096, "the prompt is too long as it stands: {before}");
    let fitted = crate::engine::fit::fit(&curator.messages, &curator.material, 4_096, 2_000, 1.0);
    assert!(fitted.fits, "{:?}", fitted.cuts);
    assert!(!fitted.cuts.is_empty(), "the ideas were cut");
    assert!(fitted.cuts.iter().all(|c| c.what == "the ideas"), "{:?}", fitted.cuts);
    let prompt = &fitted.messages[0].content;
    assert_contains_all(
        prompt,
        &[
            CLUSTER_HEAD,
            "Group related ideas into 3 to 6 themed clusters of 2 to 10 ideas each",
            schema::ASKS_FOR_JSON,
            r#""model_5_idea_10""#,
        ],
    );
}

// ---- the export's report -------------------------------------------------------------------

/// The report of `result`, checked to show no JSON, missing value, id, protocol word or key.
fn readable(result: &Value) -> String {
    readable_report(result, report, &["cluster_", "_idea_", "HIGH", "LOW", "single_"])
}

#[test]
fn the_report_tables_the_clusters_in_rank_order_and_the_ideas_left_out() {
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, good);
    let r = readable(&load_result(&stored(&all)));
    assert_contains_all(
        &r,
        &[
            "|---",
            "**Ideas:** 12 ideas from 3 models: Model ",
            "(m0) 4",
            "**The clusters, in rank order**, ranked by the panel's scores (from 3 scorers):",
            "| 1 | People | 3 | low | 5 | 4 | 5 | 14 | total |",
            "| 2 | Tech | 2 | high | 3 | 3 | 3 | 9 | total |",
            "| 3 | Money | 2 | medium | 2 | 2 | 2 | 6 | — |",
            "**Ideas left out of every cluster** (5):",
            "- m0 idea 4 (Model ",
            "**Proposal:** written by ref from the cluster “People”.",
        ],
    );

    // Few valid scorers: ranked by promise, the unreadable scorer named.
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| match (c.role.as_str(), c.model.as_str()) {
        ("scorer", "m1") => None,
        ("scorer", "m2") => Some("| Cluster | Novelty |\n| 1 | 5 |".into()),
        _ => good(c),
    });
    let r = readable(&load_result(&stored(&all)));
    assert_contains_all(
        &r,
        &[
            "ranked by the curator's promise (fewer than two",
            "| 1 | Tech | 2 | high |",
            "- m2: no score could be read (it gave no readable answer)",
        ],
    );
}

#[test]
fn an_empty_or_partial_result_reports_what_there_is() {
    assert_eq!(report(&json!({})), "");
    // The curator failed: no clusters, the proposal from all the ideas.
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| if c.role == "curator" { None } else { good(c) });
    let r = readable(&load_result(&stored(&all)));
    assert_contains_all(
        &r,
        &[
            "**Clustering:** The curator (cur) and its backup (spare2) failed",
            "from all the ideas (no cluster could be read)",
        ],
    );
    assert!(!r.contains("left out"), "{r}");
    // Too few ideas: the run failed after the ideation.
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| match c.model.as_str() {
        "m0" => Some(ideas_of("m0")),
        "m1" => None,
        _ => Some("I can't help brainstorm this.".into()),
    });
    let r = readable(&load_result(&stored(&all)));
    assert!(r.contains("**About the ideas:**") && r.contains("declined to answer"), "{r}");
    // One cluster, not scored.
    let mut m = mode(&["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| {
        if c.role == "curator" {
            Some("CLUSTER 1: Only\nIdeas: model_0_idea_1, model_1_idea_1".into())
        } else {
            good(c)
        }
    });
    let r = readable(&load_result(&stored(&all)));
    assert_contains_all(
        &r,
        &[
            "there was one cluster, so none was scored",
            "| 1 | Only | 2 | not stated (medium used) | not scored | not scored |",
        ],
    );
}
