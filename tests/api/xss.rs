//! `sim/xss…` models: every mode completes and parses as usual, with hostile markup in the
//! prose, in-process and through the sim-server.

use conclave::modes::sim_text::{XSS_PAYLOAD, XSS_TITLE};
use serde_json::{json, Value};

use crate::helpers::*;

const SCRIPT: &str = "<script>window.__xss=1</script>";

async fn run(app: &TestApp, request: Value) -> Value {
    let started = app.start(request).await;
    let id = started["runId"].as_str().unwrap();
    let run = app.wait_done(id).await;
    assert_eq!(run["status"], "completed", "{run}");
    check_exports(app, id, &run["mode"]).await;
    run
}

/// The hostile markup of a run's models is in its exports as text: the Markdown holds no tag
/// and no link that runs script, and no export may be sniffed into another type.
async fn check_exports(app: &TestApp, id: &str, mode: &Value) {
    let base = format!("{}/api/deliberations/{id}/export", app.base);
    for format in ["md", "json"] {
        let resp = app.http.get(format!("{base}?format={format}")).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let nosniff = resp.headers().get("x-content-type-options").map(|v| v.to_str().unwrap());
        assert_eq!(nosniff, Some("nosniff"), "{format}");
        let text = resp.text().await.unwrap();
        if format == "json" {
            continue;
        }
        assert!(
            text.contains("&lt;script>window.__xss=1&lt;/script>"),
            "{mode}: the payload is there"
        );
        let lower = text.to_lowercase();
        for live in ["<script", "<img", "<iframe", "<svg", "<div", "<a ", "](javascript:"] {
            assert!(!lower.contains(live), "{mode}: {live} in the Markdown export:\n{text}");
        }
    }
}

fn has_payload(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.contains(XSS_PAYLOAD))
}

fn all<'a>(v: &'a Value, what: &str) -> &'a Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("{what} is not a list: {v}"))
}

async fn check_every_mode(app: &TestApp) {
    assert!(XSS_PAYLOAD.contains(SCRIPT));
    let council = run(
        app,
        json!({ "mode": "council", "question": "Is hostile markup rendered?",
                "councilModels": ["sim/xss-a", "sim/xss-b", "sim/xss-c"], "chairmanModel": "sim/xss-a" }),
    )
    .await;
    let r = &council["result"];
    assert!(all(&r["stage1"], "stage1").iter().all(|s| has_payload(&s["response"])));
    for s in all(&r["stage2"], "stage2") {
        assert_eq!(all(&s["parsedRanking"], "parsedRanking").len(), 3, "{s}");
    }
    assert!(has_payload(&council["answer"]), "{}", council["answer"]);
    assert!(council["title"].as_str().unwrap().starts_with(XSS_TITLE), "{}", council["title"]);

    let vote = run(
        app,
        json!({ "mode": "vote", "question": "Which markup is safest?",
                "modeConfig": { "models": ["sim/xss-a", "sim/xss-b", "sim/xss-c"], "chairmanModel": "sim/xss-d" } }),
    )
    .await;
    assert_eq!(vote["result"]["voteRound"]["validVoteCount"], 3, "{}", vote["result"]);
    assert!(has_payload(&vote["answer"]));

    let jury = run(
        app,
        json!({ "mode": "jury", "question": "Evaluate this page",
                "modeConfig": { "content": "A page about sanitisers.",
                                "jurorModels": ["sim/xss-a", "sim/xss-b", "sim/xss-c"], "foremanModel": "sim/xss-d" } }),
    )
    .await;
    for j in all(&jury["result"]["jurors"], "jurors") {
        assert_eq!(j["parseSuccess"], true, "{j}");
        assert!(j["verdict"].is_string() && has_payload(&j["assessmentText"]), "{j}");
    }
    assert!(has_payload(&jury["answer"]));

    let debate = run(
        app,
        json!({ "mode": "debate", "question": "Should pages trust model output?",
                "modeConfig": { "models": ["sim/xss-a", "sim/xss-b", "sim/xss-c", "sim/xss-d"] } }),
    )
    .await;
    for rev in all(&debate["result"]["revisions"], "revisions") {
        assert_eq!(rev["parseSuccess"], true, "{rev}");
        assert!(rev["decision"].is_string() && has_payload(&rev["reasoning"]), "{rev}");
    }
    assert_eq!(debate["result"]["votes"]["validVoteCount"], 4, "{}", debate["result"]["votes"]);
    assert!(has_payload(&debate["answer"]));

    let delphi = run(
        app,
        json!({ "mode": "delphi", "question": "How many sanitiser bugs ship each year?",
                "modeConfig": { "panelistModels": ["sim/xss-a", "sim/xss-b", "sim/xss-c", "sim/xss-e"],
                                "facilitatorModel": "sim/xss-d", "maxRounds": 3 } }),
    )
    .await;
    let d = &delphi["result"];
    assert_eq!(d["classification"]["type"], "numeric", "{d}");
    assert!(has_payload(&d["classification"]["reasoning"]));
    for round in all(&d["rounds"], "rounds") {
        for e in all(&round["estimates"], "estimates") {
            assert!(e["estimate"].is_number(), "{e}");
        }
    }
    assert!(has_payload(&delphi["answer"]));

    let clarity = run(
        app,
        json!({ "mode": "clarity", "modeConfig": { "content": "A brief on sanitising model output.",
                "models": { "skeptic": "sim/xss-a", "advocate": "sim/xss-b", "generalist": "sim/xss-c", "arbiter": "sim/xss-d" } } }),
    )
    .await;
    let c = &clarity["result"];
    for e in all(&c["evaluations"], "evaluations") {
        assert_eq!(e["parseSuccess"], true, "{e}");
        assert!(e["critique"].as_str().unwrap().contains(SCRIPT), "{e}");
    }
    assert!(c["score"]["score"].is_number());
    assert!(clarity["answer"].as_str().unwrap().contains(SCRIPT), "{}", clarity["answer"]);

    let red_team = run(
        app,
        json!({ "mode": "red_team", "question": "Harden this login handler",
                "modeConfig": { "content": "def login(user, pw): return db.check(user, pw)",
                                "generatorModel": "sim/xss-a", "attackerModel": "sim/xss-b",
                                "synthesizerModel": "sim/xss-c", "rounds": 1 } }),
    )
    .await;
    let r = &red_team["result"];
    assert!(has_payload(&r["generate"]["structuredContent"]), "{}", r["generate"]);
    let attack = &r["rounds"][0]["attack"];
    assert_eq!(attack["parseSuccess"], true, "{attack}");
    assert!(!all(&attack["findings"], "findings").is_empty(), "{attack}");
    assert!(has_payload(&red_team["answer"]), "{}", red_team["answer"]);

    let chain = run(
        app,
        json!({ "mode": "chain", "question": "Write a guide to sanitising HTML",
                "modeConfig": { "steps": [ { "model": "sim/xss-a", "mandate": "draft" },
                                           { "model": "sim/xss-b", "mandate": "polish_format" } ] } }),
    )
    .await;
    let steps = all(&chain["result"]["steps"], "steps");
    assert!(steps.iter().all(|s| has_payload(&s["content"])), "{steps:?}");
    assert!(has_payload(&chain["answer"]), "{}", chain["answer"]);

    let blueprint = run(
        app,
        json!({ "mode": "blueprint", "question": "Design doc for a sanitiser",
                "modeConfig": { "architectModel": "sim/xss-a", "authorModels": ["sim/xss-b", "sim/xss-c"],
                                "assemblerModel": "sim/xss-d" } }),
    )
    .await;
    let b = &blueprint["result"];
    let sections = all(&b["sections"], "sections");
    assert!(sections.len() >= 6, "{b}");
    assert!(sections.iter().all(|s| has_payload(&s["content"])), "{sections:?}");
    assert!(has_payload(&blueprint["answer"]), "{}", blueprint["answer"]);

    let peer_review = run(
        app,
        json!({ "mode": "peer_review", "question": "Review our HTML sanitiser",
                "modeConfig": { "content": "Model output is inserted with innerHTML after a regex strips <script>.",
                                "reviewType": "code_review",
                                "reviewerModels": ["sim/xss-a", "sim/xss-b"], "consolidatorModel": "sim/xss-c" } }),
    )
    .await;
    let p = &peer_review["result"];
    for r in all(&p["reviews"], "reviews") {
        assert_eq!(r["parseSuccess"], true, "{r}");
        assert!(has_payload(&r["reviewText"]), "{r}");
        assert!(!all(&r["findings"], "findings").is_empty(), "{r}");
    }
    assert!(p["statistics"]["consensusOverall"].is_number(), "{}", p["statistics"]);
    assert!(!all(&p["consolidation"]["actionItems"], "actionItems").is_empty(), "{p}");
    assert!(has_payload(&peer_review["answer"]), "{}", peer_review["answer"]);
    let fact_check = run(
        app,
        json!({ "mode": "fact_check", "question": "What is the history of the HTML sanitiser?",
                "modeConfig": { "generatorModel": "sim/xss-a",
                                "checkerModels": ["sim/xss-b", "sim/xss-c"], "reporterModel": "sim/xss-a" } }),
    )
    .await;
    let f = &fact_check["result"];
    assert!(has_payload(&f["content"]), "{f}");
    assert!(!all(&f["claims"], "claims").is_empty(), "{f}");
    for c in all(&f["checks"], "checks") {
        assert_eq!(c["parseSuccess"], true, "{c}");
    }
    assert!(f["report"]["reliabilityScore"].is_number(), "{f}");
    assert!(has_payload(&fact_check["answer"]), "{}", fact_check["answer"]);
    let panel = run(
        app,
        json!({ "mode": "specialist_panel", "question": "Assess our plan to sanitise model output",
                "modeConfig": { "specialists": [ { "roleId": "security_expert", "model": "sim/xss-a" },
                                                 { "roleId": "ux_designer", "model": "sim/xss-b" } ],
                                "synthesizerModel": "sim/xss-c" } }),
    )
    .await;
    let specialists = all(&panel["result"]["specialists"], "specialists");
    assert_eq!(specialists.len(), 2);
    for s in specialists {
        assert_eq!(s["parseSuccess"], true, "{s}");
        assert!(has_payload(&s["report"]), "{s}");
    }
    let synthesis = &panel["result"]["synthesis"];
    assert!(synthesis["topRisk"].is_object(), "{synthesis}");
    assert!(has_payload(&synthesis["sections"]["executiveSummary"]), "{synthesis}");
    assert!(has_payload(&panel["answer"]), "{}", panel["answer"]);

    let cw = run(
        app,
        json!({ "mode": "confidence_weighted", "question": "How do I sanitise model output?",
                "modeConfig": { "models": ["sim/xss-a", "sim/xss-b"], "synthesisModel": "sim/xss-c" } }),
    )
    .await;
    let answers = all(&cw["result"]["answers"], "answers");
    assert_eq!(answers.len(), 2);
    for a in answers {
        assert_eq!(a["parsedSuccessfully"], true, "{a}");
        assert!(has_payload(&a["response"]), "{a}");
    }
    assert_eq!(all(&cw["result"]["weights"]["weights"], "weights").len(), 2);
    assert!(has_payload(&cw["result"]["synthesis"]["synthesis"]), "{}", cw["result"]);
    assert!(has_payload(&cw["answer"]), "{}", cw["answer"]);

    let tournament = run(
        app,
        json!({ "mode": "tournament", "question": "How should a page show model output?",
                "modeConfig": { "contestantModels": ["sim/xss-a", "sim/xss-b", "sim/xss-c", "sim/xss-d", "sim/xss-e"],
                                "judgeModel": "sim/xss-j" } }),
    )
    .await;
    let t = &tournament["result"];
    let matches: Vec<Value> = all(&t["rounds"], "rounds")
        .iter()
        .flat_map(|r| all(&r["matches"], "matches"))
        .cloned()
        .collect();
    assert_eq!(matches.len(), 4, "{t}");
    assert!(matches.iter().any(|m| has_payload(&m["reasoning"])), "{matches:?}");
    assert!(has_payload(&t["champion"]["response"]), "{t}");
    assert!(has_payload(&tournament["answer"]), "{}", tournament["answer"]);

    // Solo: the one reply is the answer, markup and all, as text.
    let solo = run(
        app,
        json!({ "mode": "solo", "question": "How should a page show model output?",
                "modeConfig": { "model": "sim/xss-a" } }),
    )
    .await;
    assert!(has_payload(&solo["answer"]), "{}", solo["answer"]);

    let brainstorm = run(
        app,
        json!({ "mode": "brainstorm", "question": "How should a page show model output?",
                "modeConfig": { "models": ["sim/xss-a", "sim/xss-b", "sim/xss-c"],
                                "curatorModel": "sim/xss-d", "refinerModel": "sim/xss-e" } }),
    )
    .await;
    let b = &brainstorm["result"];
    let lists = all(&b["ideas"]["models"], "models");
    assert_eq!(lists.len(), 3);
    assert!(lists.iter().all(|m| m["ideaCount"].as_u64() > Some(0)), "{b}");
    let descriptions: Vec<Value> = lists
        .iter()
        .flat_map(|m| all(&m["ideas"], "ideas").iter().map(|i| i["description"].clone()))
        .collect();
    assert!(descriptions.iter().any(has_payload), "{b}");
    assert!(!all(&b["clustering"]["clusters"], "clusters").is_empty(), "{b}");
    assert!(all(&b["scores"], "scores").iter().all(|s| s["valid"] == true), "{b}");
    assert!(has_payload(&brainstorm["answer"]), "{}", brainstorm["answer"]);

    let decompose = run(
        app,
        json!({ "mode": "decompose", "question": "How should a page show model output safely?",
                "modeConfig": { "plannerModel": "sim/xss-p", "workerModels": ["sim/xss-a", "sim/xss-b"],
                                "assemblerModel": "sim/xss-c" } }),
    )
    .await;
    let d = &decompose["result"];
    let tasks: Vec<Value> =
        all(&d["waves"], "waves").iter().flat_map(|w| all(&w["tasks"], "tasks")).cloned().collect();
    assert!(tasks.len() >= 4, "{d}");
    assert!(tasks.iter().all(|t| has_payload(&t["output"])), "{tasks:?}");
    assert!(has_payload(&d["assembly"]["response"]), "{d}");
    assert!(has_payload(&decompose["answer"]), "{}", decompose["answer"]);
}

#[actix_web::test]
async fn every_mode_completes_with_xss_models_in_process() {
    let app = spawn_app().await;
    check_every_mode(&app).await;
    let (_, models) = app.get("/api/models").await;
    for name in ["sim/xss…", "sim/flaky…", "sim/ratelimit…"] {
        assert!(models["simBehaviours"][name].is_string(), "{name}: {models}");
    }
    app.stop().await;
}

#[actix_web::test]
async fn every_mode_completes_with_xss_models_through_the_sim_server() {
    let app = spawn_with(Options { sim_over_http: true, ..Options::default() }).await;
    check_every_mode(&app).await;
    app.stop().await;
}
