//! Every mode against a real model: llama.cpp's `llama-server` with SmolLM2-135M-Instruct
//! (`scripts/real-model.sh start`), through the real Conclave server, a real WebSocket and the
//! REST API. A 135M model often ignores the formats, so these tests assert what a user relies
//! on whatever it writes: the run ends (completed, or failed with a reason a person can read),
//! every call's tokens are recorded, and everything reported as parsed is stated in the text it
//! was read from; what was not read is marked unparsed, with the raw text kept.
//!
//! They run when `CONCLAVE_REAL_MODEL_URL` names the server's OpenAI-compatible base URL
//! (`http://127.0.0.1:8093/v1`), and are skipped with a printed reason otherwise;
//! `CONCLAVE_REQUIRE_REAL_MODEL=1` (set by `.ci/run`) makes a missing server a failure.

use std::time::Duration;

use conclave::modes::reading::answer_text;
use serde_json::{json, Value};

use crate::helpers::*;

const MODEL: &str = "local/smollm2";
/// The same model under another name, for the roles that may not sit on the panel (Jury's
/// foreman, Delphi's facilitator): llama-server serves its one model whatever it is called.
const CHAIR: &str = "local/smollm2-chair";

/// The server's base URL, or None (with the reason printed) when these tests must be skipped.
async fn real_model() -> Option<String> {
    let required = std::env::var("CONCLAVE_REQUIRE_REAL_MODEL").is_ok_and(|v| v == "1");
    let Some(url) = std::env::var("CONCLAVE_REAL_MODEL_URL").ok().filter(|u| !u.is_empty()) else {
        assert!(!required, "CONCLAVE_REQUIRE_REAL_MODEL=1 but CONCLAVE_REAL_MODEL_URL is not set");
        eprintln!(
            "skipping the real-model test: CONCLAVE_REAL_MODEL_URL is not set \
             (start one with scripts/real-model.sh start)"
        );
        return None;
    };
    conclave::providers::openai::install_crypto();
    let health = format!("{}/health", url.trim_end_matches('/').trim_end_matches("/v1"));
    let up = reqwest::get(&health).await.map(|r| r.status().is_success()).unwrap_or(false);
    if !up {
        assert!(!required, "CONCLAVE_REQUIRE_REAL_MODEL=1 but {health} does not answer");
        eprintln!("skipping the real-model test: {health} does not answer");
        return None;
    }
    Some(url)
}

/// A test app whose `local/` models are served by the real model server.
async fn app_for(url: &str) -> TestApp {
    // Read from TOML, as a user's configuration file would give it.
    let route: conclave::config::RouteConfig = toml::from_str(&format!(
        "prefix = \"local/\"\nbase_url = \"{url}\"\nmax_concurrent_calls = 3\nmax_tokens = 256\n"
    ))
    .expect("route");
    spawn_with(Options { stage_timeout_ms: 600_000, routes: vec![route], ..Options::default() })
        .await
}

/// Runs a request over the WebSocket; answers the stored run and its events.
async fn run(app: &TestApp, request: Value) -> (Value, Vec<Value>) {
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": request })).await;
    let started = loop {
        let v = ws.next().await;
        match v["type"].as_str() {
            Some("started") => break v,
            Some("error") => panic!("the start was refused: {v}"),
            _ => {}
        }
    };
    let run = started["runId"].as_str().expect("runId").to_string();
    let events = tokio::time::timeout(Duration::from_secs(600), ws.events_until_end(&run))
        .await
        .expect("the run ends within 10 minutes");
    ws.close().await;
    assert_contiguous(&events, 1);
    let (status, stored) = app.get(&format!("/api/deliberations/{run}")).await;
    assert_eq!(status, 200, "{stored}");
    (stored, events)
}

/// What every run must show, whatever the model wrote.
fn check_run(mode: &str, stored: &Value, events: &[Value]) {
    let status = stored["status"].as_str().unwrap_or("");
    match status {
        "completed" => {
            assert!(stored["answer"].as_str().is_some_and(|a| !a.trim().is_empty()), "{stored}")
        }
        "failed" => {
            let error = stored["error"].as_str().unwrap_or("");
            assert!(!error.is_empty(), "a failed {mode} run says why: {stored}");
            for word in ["panic", "internal error", "unwrap"] {
                assert!(!error.to_lowercase().contains(word), "{mode}: {error}");
            }
        }
        other => panic!("{mode} run ended {other}: {stored}"),
    }
    // `partial` agrees with the failed calls it lists.
    if let Some(p) = stored["result"].get("partial") {
        let failed = stored["result"]["failedModels"].as_array().map_or(0, Vec::len);
        assert_eq!(p.as_bool(), Some(failed > 0), "{mode}: {}", stored["result"]);
    }
    // Every call that answered reports its tokens, and the run's totals are their sums.
    let (mut prompt, mut completion) = (0u64, 0u64);
    let mut answered = 0;
    for e in events.iter().filter(|e| e["event"] == "call_complete") {
        let d = &e["data"];
        if d["ok"] == true {
            answered += 1;
            let u = &d["usage"];
            let p = u["promptTokens"].as_u64().unwrap_or(0);
            let c = u["completionTokens"].as_u64().unwrap_or(0);
            assert!(p > 0 && c > 0, "{mode}: call {} recorded no tokens: {d}", d["key"]);
            prompt += p;
            completion += c;
        }
    }
    assert!(answered > 0, "{mode}: no call answered");
    assert_eq!(stored["usage"]["promptTokens"].as_u64(), Some(prompt), "{mode}");
    assert_eq!(stored["usage"]["completionTokens"].as_u64(), Some(completion), "{mode}");
    let calls = events.iter().filter(|e| e["event"] == "call_complete").count();
    eprintln!(
        "real model, {mode}: {status}; {answered}/{calls} calls answered, {prompt} prompt and \
         {completion} completion tokens{}",
        stored["error"].as_str().map(|e| format!("; error: {e}")).unwrap_or_default()
    );
}

/// The text a parser read (its reasoning trace set aside), lower-cased.
fn said(text: &str) -> String {
    answer_text(text).to_lowercase()
}

/// A label a parser reported is written in the text it came from.
fn states_label(text: &str, label: &str) -> bool {
    let letter = label.trim_start_matches("Response ").to_lowercase();
    let t = said(text);
    let words = ["response", "réponse", "reponse", "respuesta", "resposta", "risposta", "antwort"];
    words.iter().any(|w| t.contains(&format!("{w} {letter}")))
        || regex::Regex::new(&format!(r"(?i)\b(?:vote|voto|stimme)\W*{letter}\b"))
            .is_ok_and(|re| re.is_match(&t))
        || regex::Regex::new(&format!(r#""{letter}""#)).is_ok_and(|re| re.is_match(&t))
}

/// A number a parser reported is written in the text it came from: its significant digits
/// appear among the text's digits (`34 million` and `34,000,000` both hold `34`).
fn states_number(text: &str, n: f64) -> bool {
    let digits: String = said(text).chars().filter(char::is_ascii_digit).collect();
    let sig = format!("{:e}", n.abs());
    let mantissa = sig.split('e').next().unwrap_or("").replace('.', "");
    let mantissa = mantissa.trim_end_matches('0');
    mantissa.is_empty() || digits.contains(mantissa)
}

/// With `CONCLAVE_REAL_MODEL_SHOW=1`, prints what the model wrote beside what was read from it,
/// for a person to judge the parsers by.
fn show(what: &str, text: &str, read: &Value) {
    if std::env::var("CONCLAVE_REAL_MODEL_SHOW").is_ok_and(|v| v == "1") {
        eprintln!("---- {what}: read {read}\n{}\n", text.trim());
    }
}

fn count(kind: &str, parsed: usize, unparsed: usize) {
    eprintln!("real model, {kind}: {parsed} parsed, {unparsed} unparsed");
}

#[actix_web::test]
async fn council_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "council", "question": "Why is the sky blue? Answer in two sentences.",
                "councilModels": [MODEL, MODEL, MODEL], "chairmanModel": MODEL }),
    )
    .await;
    check_run("council", &stored, &events);
    let result = &stored["result"];
    let stage2 = result["stage2"].as_array().cloned().unwrap_or_default();
    let (mut parsed, mut unparsed) = (0, 0);
    for r in &stage2 {
        let text = r["ranking"].as_str().unwrap_or("");
        let order = r["parsedRanking"].as_array().cloned().unwrap_or_default();
        show("ranking", text, &json!({ "places": r["places"], "unparsed": r["unparsed"] }));
        if order.is_empty() {
            unparsed += 1;
            assert!(r["unparsed"].is_string(), "an unread ranking says why: {r}");
        } else {
            parsed += 1;
            for l in &order {
                assert!(states_label(text, l.as_str().unwrap_or("")), "{l} is not in: {text}");
            }
        }
    }
    count("council rankings", parsed, unparsed);
    if !stage2.is_empty() {
        let meta = &result["stage2Metadata"];
        assert_eq!(meta["rankingsCounted"], json!(parsed));
        assert_eq!(meta["unparsedRankings"], json!(unparsed));
        // Three members of one model are told apart.
        let members: Vec<&str> = result["stage1"]
            .as_array()
            .map(|a| a.iter().filter_map(|s| s["model"].as_str()).collect())
            .unwrap_or_default();
        assert!(members.iter().all(|m| m.starts_with("local/smollm2 #")), "{members:?}");
    }
    // The title is a title, not a cut sentence.
    let title = stored["title"].as_str().unwrap_or("");
    assert!(!title.is_empty() && title.split_whitespace().count() <= 8, "{title}");
    app.stop().await;
}

#[actix_web::test]
async fn vote_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "vote", "question": "Which is the best first programming language?",
                "modeConfig": { "models": [MODEL, MODEL, MODEL], "chairmanModel": MODEL } }),
    )
    .await;
    check_run("vote", &stored, &events);
    let votes = stored["result"]["voteRound"]["votes"].as_array().cloned().unwrap_or_default();
    let (mut parsed, mut unparsed) = (0, 0);
    for v in &votes {
        let text = v["voteText"].as_str().unwrap_or("");
        show("vote", text, &json!({ "votedFor": v["votedFor"], "unparsed": v["unparsed"] }));
        match v["votedFor"].as_str() {
            Some(l) => {
                parsed += 1;
                assert!(states_label(text, l), "{l} is not in: {text}");
            }
            None => {
                unparsed += 1;
                assert!(v["unparsed"].is_string(), "an invalid ballot says why: {v}");
            }
        }
    }
    count("vote ballots", parsed, unparsed);
    if stored["status"] == "failed" {
        assert_eq!(parsed, 0, "a vote with valid ballots does not fail: {stored}");
    }
    app.stop().await;
}

#[actix_web::test]
async fn jury_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "jury", "question": "Evaluate this answer",
                "modeConfig": { "content": "The capital of Australia is Sydney, its largest city.",
                                "originalQuestion": "What is the capital of Australia?",
                                "jurorModels": [MODEL, MODEL, MODEL], "foremanModel": CHAIR } }),
    )
    .await;
    check_run("jury", &stored, &events);
    let jurors = stored["result"]["jurors"].as_array().cloned().unwrap_or_default();
    let (mut verdicts, mut no_verdict, mut scores, mut no_score) = (0, 0, 0, 0);
    for j in &jurors {
        let text = j["assessmentText"].as_str().unwrap_or("");
        show(
            "juror",
            text,
            &json!({ "verdict": j["verdict"], "scores": j["scores"], "unparsed": j["unparsed"] }),
        );
        match j["verdict"].as_str() {
            Some(v) => {
                verdicts += 1;
                let stem = &v.to_lowercase()[..5];
                let t = said(text);
                let stated = t.contains(stem)
                    || [
                        "aprob", "rejet", "rechaz", "ablehn", "genehm", "révis", "revis", "überarb",
                    ]
                    .iter()
                    .any(|w| t.contains(w));
                assert!(stated, "verdict {v} is not in: {text}");
            }
            None => no_verdict += 1,
        }
        if let Some(map) = j["scores"].as_object() {
            for s in map.values() {
                match s.as_f64() {
                    Some(n) => {
                        scores += 1;
                        assert!(states_number(text, n), "score {n} is not in: {text}");
                    }
                    None => no_score += 1,
                }
            }
        }
    }
    count("jury verdicts", verdicts, no_verdict);
    count("jury scores", scores, no_score);
    app.stop().await;
}

#[actix_web::test]
async fn debate_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "debate", "question": "Should schools start later in the morning?",
                "modeConfig": { "models": [MODEL, MODEL, MODEL] } }),
    )
    .await;
    check_run("debate", &stored, &events);
    let result = &stored["result"];
    let revisions = result["revisions"].as_array().cloned().unwrap_or_default();
    let (mut decided, mut undecided) = (0, 0);
    for r in &revisions {
        show(
            "revision",
            r["revisedResponse"].as_str().unwrap_or(""),
            &json!({ "decision": r["decision"], "unparsed": r["unparsed"] }),
        );
        match r["decision"].as_str() {
            Some(d) => {
                decided += 1;
                assert!(matches!(d, "REVISE" | "STAND" | "MERGE"), "{d}");
            }
            None => undecided += 1,
        }
    }
    count("debate decisions", decided, undecided);
    let votes = result["votes"]["votes"].as_array().cloned().unwrap_or_default();
    let (mut parsed, mut unparsed) = (0, 0);
    for v in &votes {
        let text = v["voteText"].as_str().unwrap_or("");
        show("debate vote", text, &json!({ "votedFor": v["votedFor"], "unparsed": v["unparsed"] }));
        match v["votedFor"].as_str() {
            Some(l) => {
                parsed += 1;
                assert!(states_label(text, l), "{l} is not in: {text}");
            }
            None => unparsed += 1,
        }
    }
    count("debate votes", parsed, unparsed);
    app.stop().await;
}

#[actix_web::test]
async fn delphi_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "delphi", "question": "How many people live in Tokyo's metropolitan area?",
                "modeConfig": { "panelistModels": [MODEL, MODEL, MODEL], "facilitatorModel": CHAIR,
                                "maxRounds": 2 } }),
    )
    .await;
    check_run("delphi", &stored, &events);
    let (mut parsed, mut unparsed) = (0, 0);
    for round in stored["result"]["rounds"].as_array().cloned().unwrap_or_default() {
        for e in round["estimates"].as_array().cloned().unwrap_or_default() {
            let text = e["text"].as_str().unwrap_or("");
            show(
                "estimate",
                text,
                &json!({ "estimate": e["estimate"], "confidence": e["confidence"], "unparsed": e["unparsed"] }),
            );
            match e["estimate"].as_f64() {
                Some(n) => {
                    parsed += 1;
                    if !text.is_empty() {
                        assert!(states_number(text, n), "estimate {n} is not in: {text}");
                    }
                }
                None => unparsed += 1,
            }
        }
    }
    count("delphi estimates", parsed, unparsed);
    app.stop().await;
}

#[actix_web::test]
async fn clarity_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "clarity", "question": "Score this brief",
                "modeConfig": { "content": "Brief: build a mobile app that lets residents report potholes with a photo and location; the city fixes them within 14 days. Budget 80k. Launch in spring.",
                                "models": { "skeptic": MODEL, "advocate": MODEL,
                                            "generalist": MODEL, "arbiter": MODEL } } }),
    )
    .await;
    check_run("clarity", &stored, &events);
    let (mut parsed, mut unparsed) = (0, 0);
    for v in stored["result"]["evaluations"].as_array().cloned().unwrap_or_default() {
        show(
            "scorecard",
            v["critique"].as_str().unwrap_or(""),
            &json!({ "scores": v["scores"], "unparsed": v["unparsed"] }),
        );
        if v["parseSuccess"] == true {
            parsed += 1;
        } else {
            unparsed += 1;
        }
    }
    count("clarity scorecards", parsed, unparsed);
    app.stop().await;
}

#[actix_web::test]
async fn red_team_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "red_team", "question": "Review this login handler for security flaws.",
                "modeConfig": { "content": "def login(user, pw):\n    q = \"SELECT * FROM users WHERE name='\" + user + \"' AND pw='\" + pw + \"'\"\n    return db.execute(q).fetchone() is not None",
                                "generatorModel": MODEL, "attackerModel": CHAIR, "rounds": 1 } }),
    )
    .await;
    check_run("red_team", &stored, &events);
    let (mut parsed, mut unparsed) = (0, 0);
    for round in stored["result"]["rounds"].as_array().cloned().unwrap_or_default() {
        let attack = &round["attack"];
        let findings = attack["findings"].as_array().cloned().unwrap_or_default();
        show(
            "attack",
            attack["reportedSummary"].as_str().unwrap_or(""),
            &json!({
            "findings": findings.len(), "noFlaws": attack["noFlaws"], "parseSuccess": attack["parseSuccess"] }),
        );
        // What was read is consistent: numbered 1..k, a level each, the counts their sum.
        for (i, f) in findings.iter().enumerate() {
            assert_eq!(f["number"], i + 1);
            assert!(
                matches!(f["severity"].as_str(), Some("CRITICAL" | "HIGH" | "MEDIUM" | "LOW")),
                "{f}"
            );
        }
        let counted: u64 = attack["severityCounts"]
            .as_object()
            .map_or(0, |c| c.values().filter_map(Value::as_u64).sum());
        assert_eq!(counted as usize, findings.len());
        if attack["parseSuccess"] == true {
            parsed += 1;
        } else {
            unparsed += 1;
        }
        if let Some(d) = round["defense"].as_object() {
            let n = ["accepted", "rebutted", "unaddressed"]
                .iter()
                .filter_map(|k| d[*k].as_u64())
                .sum::<u64>();
            assert_eq!(n as usize, findings.len(), "every finding has one verdict");
        }
    }
    count("red team attack reports", parsed, unparsed);
    if let Some(s) = stored["result"]["synthesis"].as_object() {
        let level = s["hardeningConfidence"].as_str();
        assert!(level.is_none_or(|l| ["High", "Medium", "Low"].contains(&l)), "{level:?}");
        if let Some(l) = level {
            let answer = said(stored["answer"].as_str().unwrap_or(""));
            let stated = answer.contains("confidence") && answer.contains(&l.to_lowercase());
            assert!(stated, "{l} is not stated: {answer}");
        }
    }
    app.stop().await;
}

#[actix_web::test]
async fn peer_review_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "peer_review", "question": "Review this design for an upload service.",
                "modeConfig": { "content": "Uploads go from the browser to one API server, which writes them to a local disk and records them in one PostgreSQL instance. A nightly cron job copies the disk to S3.",
                                "reviewType": "architecture_review",
                                "reviewerModels": [MODEL, MODEL], "consolidatorModel": CHAIR } }),
    )
    .await;
    check_run("peer_review", &stored, &events);
    let result = &stored["result"];
    let (mut parsed, mut unparsed) = (0, 0);
    for r in result["reviews"].as_array().cloned().unwrap_or_default() {
        let text = r["reviewText"].as_str().unwrap_or("");
        show(
            "peer review",
            text,
            &json!({ "scores": r["scores"], "findings": r["findings"].as_array().map_or(0, Vec::len), "parseSuccess": r["parseSuccess"] }),
        );
        // Every score read is on the scale and written in the review next to its criterion.
        for s in r["scores"].as_array().cloned().unwrap_or_default() {
            if let Some(v) = s["score"].as_u64() {
                assert!((1..=5).contains(&v), "{s}");
                let name = s["criterion"].as_str().unwrap_or("").to_lowercase();
                assert!(said(text).contains(&name), "{name} is not in: {text}");
            }
        }
        for (i, f) in r["findings"].as_array().cloned().unwrap_or_default().iter().enumerate() {
            assert_eq!(f["number"], i + 1);
            assert!(
                matches!(
                    f["severity"].as_str(),
                    Some("CRITICAL" | "MAJOR" | "MINOR" | "SUGGESTION")
                ),
                "{f}"
            );
        }
        if r["parseSuccess"] == true {
            parsed += 1;
        } else {
            unparsed += 1;
        }
    }
    count("peer reviews", parsed, unparsed);
    if let Some(s) = result["statistics"].as_object() {
        for c in s["consensusScores"].as_array().cloned().unwrap_or_default() {
            if let Some(sd) = c["stddev"].as_f64() {
                assert!((0.0..=2.0).contains(&sd), "{c}");
            }
        }
    }
    if stored["status"] == "completed" {
        assert_eq!(stored["answer"], result["consolidation"]["consolidatedReport"]);
    }
    app.stop().await;
}

#[actix_web::test]
async fn fact_check_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "fact_check", "question": "Fact-check this paragraph.",
                "modeConfig": { "content": "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is about 330 metres tall. It was the tallest structure in the world until 1930.",
                                "extractorModel": MODEL, "checkerModels": [MODEL, CHAIR],
                                "reporterModel": CHAIR } }),
    )
    .await;
    check_run("fact_check", &stored, &events);
    let result = &stored["result"];
    let claims = result["claims"].as_array().cloned().unwrap_or_default();
    show(
        "fact-check extraction",
        result["extract"]["model"].as_str().unwrap_or(""),
        &json!({ "claims": claims, "parseSuccess": result["extract"]["parseSuccess"] }),
    );
    for (i, c) in claims.iter().enumerate() {
        assert_eq!(c["id"], format!("claim_{}", i + 1));
        assert!(
            c["type"].is_null()
                || c["type"].as_str().is_some_and(|t| t.chars().all(|ch| ch.is_ascii_uppercase())),
            "{c}"
        );
    }
    let (mut parsed, mut unparsed) = (0, 0);
    for k in result["checks"].as_array().cloned().unwrap_or_default() {
        show("fact-check check", k["model"].as_str().unwrap_or(""), &k["verifications"]);
        // One verification per claim; an unaddressed claim is never given a verdict of its own.
        let vs = k["verifications"].as_array().cloned().unwrap_or_default();
        if k["failed"] != true {
            assert_eq!(vs.len(), claims.len(), "{k}");
        }
        for v in &vs {
            assert!(
                v["addressed"] == true
                    || (v["verdict"] == "UNVERIFIABLE" && v["confidence"] == "LOW"),
                "{v}"
            );
            assert!(v["correction"].is_null() || v["verdict"] == "DISPUTED", "{v}");
        }
        if k["parseSuccess"] == true {
            parsed += 1;
        } else {
            unparsed += 1;
        }
    }
    count("fact-check checks", parsed, unparsed);
    for c in result["consensus"].as_array().cloned().unwrap_or_default() {
        assert!(c["agreementRate"].as_u64().is_some_and(|a| a <= 100), "{c}");
    }
    if stored["status"] == "completed" {
        assert_eq!(stored["answer"], result["report"]["report"]);
        let score = &result["report"]["reliabilityScore"];
        assert!(score.is_null() || score.as_u64().is_some_and(|s| s <= 100), "{score}");
    }
    app.stop().await;
}

#[actix_web::test]
async fn chain_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "chain", "question": "Write three sentences on why backups matter.",
                "modeConfig": { "steps": [ { "model": MODEL, "mandate": "draft" },
                                           { "model": CHAIR, "mandate": "polish_format" } ] } }),
    )
    .await;
    check_run("chain", &stored, &events);
    let result = &stored["result"];
    let (mut done, mut skipped) = (0, 0);
    for s in result["steps"].as_array().cloned().unwrap_or_default() {
        let content = s["content"].as_str().unwrap_or("");
        show(
            "chain step",
            content,
            &json!({ "wordCount": s["wordCount"], "editorNotes": s["editorNotes"], "skipped": s["skipped"] }),
        );
        if s["skipped"] == true {
            skipped += 1;
            continue;
        }
        done += 1;
        // The server's counts are the text's own; every note listed is written in it.
        assert_eq!(s["wordCount"].as_u64(), Some(content.split_whitespace().count() as u64));
        let delta =
            s["wordCount"].as_i64().unwrap_or(0) - s["previousWordCount"].as_i64().unwrap_or(0);
        assert_eq!(s["wordCountDelta"].as_i64(), Some(delta));
        for n in s["editorNotes"].as_array().cloned().unwrap_or_default() {
            assert!(content.contains(n.as_str().unwrap_or("")), "{n} is not in: {content}");
        }
    }
    count("chain steps completed", done, skipped);
    if stored["status"] == "completed" {
        assert_eq!(stored["answer"], result["finalContent"]);
    }
    app.stop().await;
}

#[actix_web::test]
async fn blueprint_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "blueprint", "question": "Design doc for a home backup service",
                "modeConfig": { "content": "Back up three laptops nightly to a NAS, keep 30 days of versions, copy weekly to the cloud, alert on failure.",
                                "architectModel": MODEL, "authorModels": [MODEL, CHAIR],
                                "assemblerModel": CHAIR } }),
    )
    .await;
    check_run("blueprint", &stored, &events);
    let result = &stored["result"];
    let outline = &result["outline"];
    let planned = outline["sections"].as_array().cloned().unwrap_or_default();
    show(
        "blueprint outline",
        outline["documentTitle"].as_str().unwrap_or(""),
        &json!({ "sections": planned.len(), "warnings": outline["warnings"] }),
    );
    // What was read is consistent: numbered 1..n, a length each (Medium when none was named),
    // authors in rotation.
    for (i, s) in planned.iter().enumerate() {
        assert_eq!(s["number"], i + 1);
        assert!(matches!(s["length"].as_str(), Some("Short" | "Medium" | "Long")), "{s}");
        if s["lengthDefaulted"] == true {
            assert_eq!(s["length"], "Medium");
        }
        assert_eq!(s["assignedModel"], [MODEL, CHAIR][i % 2]);
    }
    let (mut written, mut failed) = (0, 0);
    for s in result["sections"].as_array().cloned().unwrap_or_default() {
        let content = s["content"].as_str().unwrap_or("");
        written += 1;
        show(
            "blueprint section",
            content,
            &json!({ "wordCount": s["wordCount"], "covered": s["keyTopicsCovered"], "missing": s["keyTopicsMissing"] }),
        );
        assert_eq!(s["wordCount"].as_u64(), Some(content.split_whitespace().count() as u64));
        let lower = content.to_lowercase();
        for t in s["keyTopicsCovered"].as_array().cloned().unwrap_or_default() {
            for w in t.as_str().unwrap_or("").split(|c: char| !c.is_alphanumeric()) {
                if w.chars().count() >= 4 {
                    assert!(lower.contains(&w.to_lowercase()), "{t} is not covered by: {content}");
                }
            }
        }
        let n = s["sectionNumber"].as_u64().unwrap_or(0) as usize;
        let topics = planned.get(n.wrapping_sub(1)).map(|p| p["keyTopics"].clone());
        let both = s["keyTopicsCovered"].as_array().map_or(0, Vec::len)
            + s["keyTopicsMissing"].as_array().map_or(0, Vec::len);
        assert_eq!(Some(both), topics.and_then(|t| t.as_array().map(Vec::len)));
    }
    failed += result["failedSections"].as_array().map_or(0, Vec::len);
    count("blueprint sections written", written, failed);
    if stored["status"] == "completed" {
        let document = result["assembly"]["document"].as_str().unwrap_or("");
        assert_eq!(stored["answer"].as_str(), Some(document));
        for m in result["assembly"]["todoMarkers"].as_array().cloned().unwrap_or_default() {
            assert!(document.contains(m.as_str().unwrap_or("")), "{m} is not in the document");
        }
    } else {
        assert!(planned.len() < 3 || written == 0, "{stored}");
    }
    app.stop().await;
}

#[actix_web::test]
async fn specialist_panel_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "specialist_panel", "question": "Assess this plan for a small web shop.",
                "modeConfig": { "content": "Move the shop from one VM to a managed Kubernetes cluster next month; keep the database on the VM; deploy by hand.",
                                "specialists": [ { "roleId": "security_expert", "model": MODEL },
                                                 { "roleId": "cost_analyst", "model": CHAIR } ],
                                "synthesizerModel": MODEL } }),
    )
    .await;
    check_run("specialist_panel", &stored, &events);
    let result = &stored["result"];
    let (mut parsed, mut unparsed) = (0, 0);
    for s in result["specialists"].as_array().cloned().unwrap_or_default() {
        let report = s["report"].as_str().unwrap_or("");
        show(
            "specialist report",
            report,
            &json!({ "role": s["roleKey"], "scores": s["criteriaScores"], "average": s["averageScore"] }),
        );
        // Every rating read is on the scale and its criterion is named in the report beside a
        // number: nothing is inferred from prose.
        let squash = |t: &str| t.split_whitespace().collect::<String>();
        let text = squash(&said(report));
        let mut ratings = Vec::new();
        for c in s["criteriaScores"].as_array().cloned().unwrap_or_default() {
            if let Some(score) = c["score"].as_u64() {
                assert!((1..=5).contains(&score), "{c}");
                let name = squash(&c["criterion"].as_str().unwrap_or("").to_lowercase());
                assert!(text.contains(&name), "{name} is not named in: {report}");
                ratings.push(score as f64);
            }
        }
        assert_eq!(s["parseSuccess"], !ratings.is_empty(), "{s}");
        match s["averageScore"].as_f64() {
            Some(a) => {
                let mean = ratings.iter().sum::<f64>() / ratings.len() as f64;
                assert!((a - mean).abs() <= 0.05, "{a} is not the mean of {ratings:?}");
            }
            None => assert!(ratings.is_empty()),
        }
        assert!(s["topRecommendations"].as_array().is_some_and(|r| r.len() <= 3));
        if s["parseSuccess"] == true {
            parsed += 1;
        } else {
            unparsed += 1;
        }
    }
    count("specialist reports", parsed, unparsed);
    if let Some(s) = result["synthesis"].as_object() {
        show(
            "synthesis",
            s["integratedAssessment"].as_str().unwrap_or(""),
            &json!({
            "counts": s["counts"], "topRisk": s["topRisk"] }),
        );
        let answer = said(s["integratedAssessment"].as_str().unwrap_or(""));
        for row in s["riskMatrix"].as_array().cloned().unwrap_or_default() {
            if let Some(l) = row["level"].as_str() {
                assert!(["Critical", "High", "Medium", "Low"].contains(&l), "{row}");
                assert!(answer.contains(&l.to_lowercase()), "{l} is not stated");
            }
        }
        assert_eq!(stored["answer"], s["integratedAssessment"]);
    }
    app.stop().await;
}

#[actix_web::test]
async fn confidence_weighted_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "confidence_weighted", "question": "What is caffeine's half-life in adults?",
                "modeConfig": { "models": [MODEL, CHAIR], "synthesisModel": CHAIR } }),
    )
    .await;
    check_run("confidence_weighted", &stored, &events);
    let result = &stored["result"];
    let (mut parsed, mut unparsed) = (0, 0);
    // The replies as the models wrote them, by index (from the streamed tokens).
    let mut texts: std::collections::HashMap<String, String> = Default::default();
    for e in events.iter().filter(|e| e["event"] == "token") {
        let key = e["data"]["key"].as_str().unwrap_or("").to_string();
        texts.entry(key).or_default().push_str(e["data"]["delta"].as_str().unwrap_or(""));
    }
    for a in result["answers"].as_array().cloned().unwrap_or_default() {
        let c = a["confidence"].as_f64().unwrap_or(-1.0);
        assert!((0.0..=1.0).contains(&c), "{a}");
        let text = texts.get(&format!("answer:{}", a["index"])).cloned().unwrap_or_default();
        show(
            "confidence-weighted answer",
            &text,
            &json!({ "confidence": c, "parsed": a["parsedSuccessfully"], "reasoning": a["confidenceReasoning"] }),
        );
        if a["parsedSuccessfully"] == true {
            parsed += 1;
            // A stated confidence is written in the reply (when the tokens were seen).
            if !text.is_empty() && a["clamped"] == false {
                let s = said(&text);
                assert!(states_number(&text, c), "{c} is not in: {s}");
            }
        } else {
            unparsed += 1;
            assert_eq!(c, 0.5, "an unstated confidence is the default: {a}");
        }
        assert!(!a["response"].as_str().unwrap_or("").trim().is_empty(), "{a}");
    }
    count("confidences", parsed, unparsed);
    if let Some(w) = result["weights"]["weights"].as_array() {
        let sum: f64 = w.iter().map(|x| x["normalizedWeight"].as_f64().unwrap_or(0.0)).sum();
        assert!((sum - 1.0).abs() < 1e-9, "{w:?}");
    }
    if stored["status"] == "completed" {
        assert_eq!(stored["answer"], result["synthesis"]["synthesis"]);
    }
    app.stop().await;
}

#[actix_web::test]
async fn tournament_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "tournament", "question": "Name one good habit for writing maintainable code, in two sentences.",
                "modeConfig": { "contestantModels": [MODEL, MODEL, MODEL, MODEL], "judgeModel": CHAIR } }),
    )
    .await;
    check_run("tournament", &stored, &events);
    let result = &stored["result"];
    let (mut read, mut unread) = (0, 0);
    for round in result["rounds"].as_array().cloned().unwrap_or_default() {
        for m in round["matches"].as_array().cloned().unwrap_or_default() {
            show("tournament match", m["reasoning"].as_str().unwrap_or(""), &m);
            let (a, b, w) = (&m["shownAsA"], &m["shownAsB"], &m["winnerSeed"]);
            // The winner is one of the two shown, under the label it was shown as.
            let label = if w == a { "Response A" } else { "Response B" };
            assert!(w == a || w == b, "{m}");
            assert_eq!(m["winnerLabel"], label, "{m}");
            match m["decidedBy"].as_str() {
                Some("judge" | "judge_retry") => read += 1,
                Some("coin_flip" | "default_seed") => unread += 1,
                other => panic!("decidedBy {other:?}: {m}"),
            }
        }
    }
    count("tournament matches judged", read, unread);
    if stored["status"] == "completed" {
        assert_eq!(stored["answer"], result["champion"]["response"]);
        let seed = result["champion"]["seed"].as_u64().unwrap_or(0) as usize;
        assert_eq!(result["contestants"][seed.saturating_sub(1)]["response"], stored["answer"]);
    }
    app.stop().await;
}

#[actix_web::test]
async fn brainstorm_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "brainstorm", "question": "How could a small library attract more teenagers?",
                "modeConfig": { "models": [MODEL, MODEL, CHAIR], "curatorModel": CHAIR,
                                "refinerModel": CHAIR, "minIdeasPerModel": 3, "maxClusters": 3 } }),
    )
    .await;
    check_run("brainstorm", &stored, &events);
    let result = &stored["result"];
    let (mut read, mut unread) = (0, 0);
    for m in result["ideas"]["models"].as_array().cloned().unwrap_or_default() {
        show("brainstorm ideas", m["model"].as_str().unwrap_or(""), &m);
        let n = m["ideaCount"].as_u64().unwrap_or(0);
        assert!(n <= 10, "{m}");
        for (k, idea) in m["ideas"].as_array().cloned().unwrap_or_default().iter().enumerate() {
            assert_eq!(idea["id"], format!("model_{}_idea_{}", m["index"], k + 1));
            assert!(!idea["title"].as_str().unwrap_or("").trim().is_empty(), "{idea}");
        }
        if n > 0 {
            read += 1
        } else {
            unread += 1
        }
    }
    count("brainstorm idea lists read", read, unread);
    if let Some(c) = result["clustering"].as_object() {
        show("brainstorm clusters", c["model"].as_str().unwrap_or(""), &result["clustering"]);
        for cl in c["clusters"].as_array().cloned().unwrap_or_default() {
            assert!(!cl["ideaIds"].as_array().unwrap().is_empty(), "{cl}");
        }
    }
    let (mut valid, mut invalid) = (0, 0);
    for s in result["scores"].as_array().cloned().unwrap_or_default() {
        for x in s["scores"].as_array().cloned().unwrap_or_default() {
            for d in ["novelty", "feasibility", "impact"] {
                assert!((1..=5).contains(&x[d].as_u64().unwrap_or(0)), "{x}");
            }
        }
        if s["valid"] == true {
            valid += 1
        } else {
            invalid += 1
        }
    }
    count("brainstorm scorers read", valid, invalid);
    if stored["status"] == "completed" {
        assert_eq!(stored["answer"], result["refinement"]["proposal"]);
    }
    app.stop().await;
}

#[actix_web::test]
async fn decompose_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url).await;
    let (stored, events) = run(
        &app,
        json!({ "mode": "decompose", "question": "Plan a one-day team offsite: venue, agenda and budget.",
                "modeConfig": { "plannerModel": CHAIR, "workerModels": [MODEL, MODEL],
                                "assemblerModel": CHAIR, "maxTasks": 4 } }),
    )
    .await;
    check_run("decompose", &stored, &events);
    let result = &stored["result"];
    let plan = &result["plan"];
    let tasks = plan["tasks"].as_array().cloned().unwrap_or_default();
    show("decompose plan", plan["firstReply"].as_str().unwrap_or(""), &json!(tasks));
    count("decompose plans read", usize::from(!tasks.is_empty()), usize::from(tasks.is_empty()));
    // Whatever the model wrote, the plan the server ran is a DAG within maxTasks, each task in
    // exactly one wave after all its dependencies.
    assert!(tasks.len() <= 4, "{plan}");
    let waves: Vec<Vec<String>> =
        serde_json::from_value(plan["executionWaves"].clone()).unwrap_or_default();
    assert_eq!(waves.iter().map(Vec::len).sum::<usize>(), tasks.len(), "{plan}");
    let wave_of = |id: &str| waves.iter().position(|w| w.iter().any(|x| x == id));
    for t in &tasks {
        for d in t["dependencies"].as_array().cloned().unwrap_or_default() {
            assert!(wave_of(d.as_str().unwrap()) < wave_of(t["id"].as_str().unwrap()), "{t}");
        }
        assert!(["LOW", "MEDIUM", "HIGH"].contains(&t["complexity"].as_str().unwrap_or("")));
    }
    if stored["status"] == "completed" {
        assert_eq!(stored["answer"], result["assembly"]["response"]);
    }
    app.stop().await;
}

/// `conclave eval` of the sample set's first questions on the real model: each member alone
/// and their majority. Prints the table (run with `--nocapture`), whatever it shows; asserts
/// only what holds for any model: every arm answered every question, grades add up, tokens
/// were recorded, and every answer graded is a stored run.
#[actix_web::test]
async fn eval_of_the_sample_set_on_the_real_model() {
    let Some(url) = real_model().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("conclave.toml");
    std::fs::write(
        &config,
        format!(
            "[[routes]]\nprefix = \"local/\"\nbase_url = \"{url}\"\nmax_concurrent_calls = 3\nmax_tokens = 256\n"
        ),
    )
    .unwrap();
    let db = format!("sqlite://{}", dir.path().join("eval.db").display());
    let members = "local/smollm2-a,local/smollm2-b,local/smollm2-c";
    let questions = "8";
    let eval = |extra: &[&str]| {
        crate::cli::conclave()
            .env("CONCLAVE_CONFIG", &config)
            .env("DATABASE_URL", &db)
            .args(["eval", "sample", "--members", members, "--arms", "single,majority"])
            .args(["--limit", questions, "--concurrency", "3"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = eval(&["--json", "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for a in v["arms"].as_array().unwrap() {
        assert_eq!(a["n"], 8, "{a}");
        assert!(a["correct"].as_u64() <= a["n"].as_u64());
        assert!(a["promptTokens"].as_i64().unwrap() > 0, "{a}");
    }
    // The table of the same eval: resumed by id, nothing is left to run.
    let id = v["evalId"].as_str().unwrap();
    let table = crate::cli::conclave()
        .env("CONCLAVE_CONFIG", &config)
        .env("DATABASE_URL", &db)
        .args(["eval", "--resume", id, "--quiet"])
        .output()
        .unwrap();
    assert!(table.status.success());
    println!("conclave eval on the real model:\n{}", String::from_utf8_lossy(&table.stdout));

    // The jury arm on the real model, within a budget its jurors' calls must wait for: the
    // tokens of every run the eval made, read from the database, stay within it.
    let db = format!("sqlite://{}", dir.path().join("jury.db").display());
    let out = crate::cli::conclave()
        .env("CONCLAVE_CONFIG", &config)
        .env("DATABASE_URL", &db)
        .args(["eval", "sample", "--members", members, "--arms", "single,jury", "--limit", "2"])
        .args(["--arm-config", r#"jury={"foremanModel":"local/smollm2-f"}"#])
        .args(["--budget", "12000", "--json", "--quiet"])
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 3)), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let store = conclave::store::Store::start(&db).unwrap();
    let runs = store.list_runs(1000).await.unwrap();
    let total: i64 = runs.iter().map(|r| r.prompt_tokens + r.completion_tokens).sum();
    assert!(total <= 12_000, "{total} tokens of a 12000-token budget");
    if let Some(jury) = v["arms"].as_array().unwrap().iter().find(|a| a["arm"] == "jury") {
        let j = &jury["jury"];
        if jury["n"].as_u64() > Some(0) {
            assert!(j["verdictsRight"].as_u64() <= j["judged"].as_u64(), "{jury}");
            assert!(j["approvedCorrect"].as_u64() <= j["approved"].as_u64(), "{jury}");
        }
    }
    println!(
        "jury arm on the real model ({total} of 12000 tokens): {}",
        serde_json::to_string_pretty(&v).unwrap()
    );
}
