//! The crash-and-restart test: `kill -9` the real server while a run of every mode is in
//! flight, start it again on the same database, and check that each run resumes from its last
//! stored step and finishes, that a watcher reconnecting with the last sequence number it saw
//! follows it to the end, and that no stage row or event is lost or written twice. On SQLite,
//! and on PostgreSQL when it is reachable (required in CI).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cli::add_user;
use crate::helpers::{ServerProcess, Ws};

/// One run of each mode, with panels of sim models.
pub(crate) fn requests() -> Vec<Value> {
    let panel = json!(["sim/alpha", "sim/beta", "sim/gamma"]);
    vec![
        json!({ "mode": "council", "question": "Is a crash a reason to lose work?",
                "councilModels": panel, "chairmanModel": "sim/delta" }),
        json!({ "mode": "vote", "question": "Which database for a small team?",
                "modeConfig": { "models": panel, "chairmanModel": "sim/delta" } }),
        json!({ "mode": "jury", "question": "Evaluate this API documentation",
                "modeConfig": { "content": "## GET /api/users\nReturns users.",
                                "jurorModels": panel, "foremanModel": "sim/delta" } }),
        json!({ "mode": "debate", "question": "Should companies adopt a 4-day work week?",
                "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma", "sim/delta"] } }),
        json!({ "mode": "delphi", "question": "How many engineers will there be by 2030?",
                "modeConfig": { "panelistModels": ["sim/alpha", "sim/beta", "sim/gamma"],
                                "facilitatorModel": "sim/delta", "maxRounds": 3 } }),
        json!({ "mode": "clarity", "modeConfig": { "content":
                "# The four-day week\n\nTrials reported stable productivity and lower burnout." } }),
        json!({ "mode": "red_team", "question": "Review this login handler.",
                "modeConfig": { "content": "fn login(u, p) { db.query(\"... '\" + u + \"'\") }",
                                "rounds": 2 } }),
        json!({ "mode": "chain", "question": "Write a short guide to backing up a home server." }),
        json!({ "mode": "blueprint", "question": "Design doc for our collaborative editor",
                "modeConfig": { "authorModels": ["sim/alpha", "sim/beta"] } }),
        json!({ "mode": "peer_review", "question": "Review our upload service.",
                "modeConfig": { "content": "One API server writes uploads to a local disk; a nightly job copies them to S3.",
                                "reviewerModels": panel, "consolidatorModel": "sim/delta" } }),
        json!({ "mode": "specialist_panel", "question": "Assess our plan to move to Kubernetes.",
                "modeConfig": { "content": "Three services, one managed cluster, GitHub Actions." } }),
        json!({ "mode": "tournament", "question": "What is the best way to learn a new language?",
                "modeConfig": { "contestantModels": ["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon", "sim/zeta"],
                                "judgeModel": "sim/delta" } }),
        json!({ "mode": "confidence_weighted", "question": "What is caffeine's half-life in adults?",
                "modeConfig": { "models": panel, "synthesisModel": "sim/delta" } }),
        json!({ "mode": "fact_check", "question": "Fact-check this paragraph.",
                "modeConfig": { "content": "The Eiffel Tower was completed in 1889. It is 330 metres tall.",
                                "checkerModels": panel } }),
        json!({ "mode": "brainstorm", "question": "How could a library attract more teenagers?",
                "modeConfig": { "models": panel, "curatorModel": "sim/delta", "refinerModel": "sim/delta" } }),
        json!({ "mode": "decompose", "question": "Plan the launch of a small online bakery.",
                "modeConfig": { "workerModels": ["sim/alpha", "sim/beta"], "maxTasks": 6 } }),
    ]
}

/// What a watcher saw of one run: events by sequence number.
#[derive(Default)]
struct Seen {
    events: BTreeMap<i64, Value>,
    ended: bool,
    /// The highest number seen, token events included: what a client resumes from.
    last_seq: i64,
}

impl Seen {
    fn last_seq(&self) -> i64 {
        self.last_seq
    }

    fn add(&mut self, v: &Value) {
        let seq = v["seq"].as_i64().expect("seq");
        assert!(!self.events.contains_key(&seq), "seq {seq} delivered twice: {v}");
        if matches!(v["event"].as_str(), Some("complete" | "error" | "cancelled")) {
            self.ended = true;
        }
        self.events.insert(seq, v.clone());
    }

    fn count(&self, event: &str) -> usize {
        self.events.values().filter(|e| e["event"] == event).count()
    }
}

/// Reads events into `seen` until `enough` holds or `limit` passes.
async fn follow(
    ws: &mut Ws,
    seen: &mut HashMap<String, Seen>,
    limit: Duration,
    enough: impl Fn(&HashMap<String, Seen>) -> bool,
) {
    let deadline = Instant::now() + limit;
    while !enough(seen) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let state: Vec<String> = seen
                .iter()
                .map(|(run, s)| {
                    let last = s.events.values().next_back().map(|e| e["event"].to_string());
                    format!(
                        "{run}: {} events, last {last:?}, last seq {}",
                        s.events.len(),
                        s.last_seq
                    )
                })
                .collect();
            panic!("gave up waiting after {limit:?}:\n{}", state.join("\n"));
        }
        // (The server's pings restart `next_within`'s wait: bound the whole read.)
        let Ok(Some(v)) = tokio::time::timeout(left, ws.next_within(left)).await else { continue };
        if v["type"] != "event" {
            continue;
        }
        if let Some(s) = seen.get_mut(v["run"].as_str().unwrap_or("")) {
            let seq = v["seq"].as_i64().expect("seq");
            assert!(seq > s.last_seq, "seq {seq} after {}: {v}", s.last_seq);
            s.last_seq = seq;
            if v["event"] != "token" {
                s.add(&v);
            }
        }
    }
}

async fn kill_mid_run_and_resume(db: &str) {
    let dir = tempfile::tempdir().unwrap();
    // Calls take 600 ms (on a loaded machine a shorter run can end before the watch reaches
    // it); a lease runs out 1 s after its last heartbeat.
    std::fs::write(
        dir.path().join("conclave.toml"),
        "lease_ms = 1000\nmax_runs_per_user = 100\n[sim]\nlatency_ms = 600\n",
    )
    .unwrap();
    conclave::providers::openai::install_crypto();
    let token = add_user(db, "ops", true);
    let http = crate::helpers::client_with(&token);
    let first = ServerProcess::start(dir.path(), db, "first");
    let mut runs = Vec::new();
    for body in requests() {
        let r = http.post(format!("{}/api/deliberations", first.url)).json(&body).send().await;
        let r = r.unwrap();
        assert_eq!(r.status().as_u16(), 202);
        let v: Value = r.json().await.unwrap();
        runs.push((v["runId"].as_str().unwrap().to_string(), body["mode"].clone()));
    }
    // A run given a file: its calls after the restart are given it too (the last step's
    // answer, a `sim/reader`'s, says what reached it).
    let (content_type, upload) = crate::attachments::multipart(&[(
        "brief.md",
        "text/markdown",
        b"# Brief\n\nKeep backups off-site.\n",
    )]);
    let r =
        http.post(format!("{}/api/attachments", first.url)).header("content-type", content_type);
    let up: Value = r.body(upload).send().await.unwrap().json().await.unwrap();
    let step = |model: &str, mandate: &str| json!({ "model": model, "mandate": mandate });
    let with_file = json!({ "mode": "chain", "question": "Write a backup guide from the brief.",
        "attachments": [up["attachments"][0]["id"]],
        "modeConfig": { "steps": [step("sim/reader-a", "draft"), step("sim/reader-b", "structure_depth"),
                                  step("sim/reader-c", "accuracy_completeness"), step("sim/reader-d", "polish_format")] } });
    let r = http.post(format!("{}/api/deliberations", first.url)).json(&with_file).send().await;
    let v: Value = r.unwrap().json().await.unwrap();
    let file_run = v["runId"].as_str().expect("the run with a file started").to_string();
    runs.push((file_run.clone(), json!("chain")));
    let mut ws = first.ws(&token).await;
    let mut seen: HashMap<String, Seen> = HashMap::new();
    for (run, _) in &runs {
        ws.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
        seen.insert(run.clone(), Seen::default());
    }
    // Wait until every run has finished at least one model call and streamed text past its
    // last stored event (a token event is numbered but never stored), then kill the server.
    follow(&mut ws, &mut seen, Duration::from_secs(30), |seen| {
        // (A run that already ended cannot stream past its end: the count of runs caught
        // mid-flight is checked below.)
        seen.values().all(|s| {
            s.ended
                || (s.count("call_complete") >= 1
                    && s.events.keys().next_back().is_some_and(|last| s.last_seq > *last))
        })
    })
    .await;
    drop(first);
    drop(ws);
    let before: HashMap<String, i64> =
        seen.iter().map(|(k, s)| (k.clone(), s.last_seq())).collect();
    // Which runs the kill caught mid-flight is what the database holds, not what the watcher
    // had read: on a loaded machine a run may have stored its end before its last events
    // reached the watcher, and such a run is not resumed.
    let mut mid_run: Vec<String> = Vec::new();
    {
        let store = conclave::store::Store::start(db).unwrap();
        for (run, _) in &runs {
            let record = store.get_run(run).await.unwrap().expect("the run is stored");
            if record.status == conclave::store::RunStatus::Running {
                mid_run.push(run.clone());
            }
        }
    }
    assert!(mid_run.len() >= 5, "the kill caught most runs mid-flight ({})", mid_run.len());

    // Start again; reconnect and resume each watch from the last sequence number seen.
    let second = ServerProcess::start(dir.path(), db, "second");
    let mut ws = second.ws(&token).await;
    for (run, seq) in &before {
        ws.send(json!({ "type": "watch", "run": run, "since": seq })).await;
    }
    follow(&mut ws, &mut seen, Duration::from_secs(90), |seen| seen.values().all(|s| s.ended))
        .await;
    let log = std::fs::read_to_string(dir.path().join("second.log")).unwrap_or_default();

    // Replaying each run from the start gives exactly what the watcher saw across the crash.
    let mut replay = second.ws(&token).await;
    for (run, mode) in &runs {
        let s = &seen[run];
        assert_eq!(s.events.values().last().unwrap()["event"], "complete", "{mode} run {run}");
        let resumed = if mid_run.contains(run) { 1 } else { 0 };
        assert_eq!(s.count("resumed"), resumed, "{mode}: resumed events\n{log}");
        replay.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
        let stored = replay.events_until_end(run).await;
        let stored: Vec<&Value> = stored.iter().filter(|e| e["event"] != "token").collect();
        let seqs: Vec<i64> = stored.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
        // Token events take sequence numbers but are not stored: the rest rise strictly.
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{mode}: stored seqs rise: {seqs:?}");
        let watched: Vec<&Value> = s.events.values().collect();
        assert_eq!(stored, watched, "{mode}: what was watched live is what is stored");

        // The result is whole and each stage row is there once.
        let r = http.get(format!("{}/api/deliberations/{run}", second.url)).send().await.unwrap();
        let view: Value = r.json().await.unwrap();
        assert_eq!(view["status"], "completed", "{mode}: {view}");
        assert!(view["answer"].as_str().is_some_and(|a| !a.is_empty()), "{mode}: an answer");
        let store = conclave::store::Store::start(db).unwrap();
        // The outcome stored with its end (what lists show) counts the stages from before the
        // crash too: it is the one the whole result gives.
        let record = store.get_run(run).await.unwrap().unwrap();
        assert!(view["outcome"].is_string(), "{mode}: {view}");
        assert_eq!(json!(record.outcome), view["outcome"], "{mode}: the listed outcome");
        let rows = store.get_stages(view["messageId"].as_str().unwrap()).await.unwrap();
        let mut distinct = HashSet::new();
        for row in &rows {
            let key = serde_json::to_string(&row.row).unwrap();
            assert!(distinct.insert(key), "{mode}: a stage row stored twice: {:?}", row.row);
        }
        let positions: Vec<i32> = rows.iter().map(|r| r.position).collect();
        let mut sorted = positions.clone();
        sorted.sort();
        assert_eq!(sorted, (0..rows.len() as i32).collect::<Vec<_>>(), "{mode}: positions");
        check_whole(mode.as_str().unwrap(), &view["result"]);
        if *run == file_run {
            assert_eq!(view["attachments"][0]["name"], "brief.md", "{view}");
            let answer = view["answer"].as_str().unwrap_or("");
            assert!(
                answer.contains("name=\"brief.md\""),
                "the resumed calls had the file: {answer}"
            );
        }
    }
}

/// Every stage a completed run of `mode` has is in its result.
fn check_whole(mode: &str, r: &Value) {
    let len = |v: &Value| v.as_array().map_or(0, Vec::len);
    match mode {
        "council" => {
            assert_eq!(len(&r["stage1"]), 3, "{r}");
            assert_eq!(len(&r["stage2"]), 3, "{r}");
            assert!(r["stage3"]["response"].is_string(), "{r}");
        }
        "vote" => assert!(r["winner"].is_object() && len(&r["stage1"]) == 3, "{r}"),
        "jury" => assert!(len(&r["jurors"]) == 3 && r["foreman"].is_object(), "{r}"),
        "debate" => assert!(len(&r["revisions"]) == 4 && r["winner"].is_object(), "{r}"),
        "delphi" => assert!(len(&r["rounds"]) >= 1 && r["report"].is_object(), "{r}"),
        "clarity" => assert!(len(&r["evaluations"]) == 3 && r["score"].is_object(), "{r}"),
        "red_team" => assert!(r["generate"].is_object() && r["synthesis"].is_object(), "{r}"),
        "chain" => assert!(len(&r["steps"]) == 4 && r["finalContent"].is_string(), "{r}"),
        "confidence_weighted" => {
            assert!(len(&r["answers"]) == 3 && len(&r["weights"]["weights"]) == 3, "{r}");
            assert!(r["synthesis"]["synthesis"].is_string(), "{r}");
        }
        "blueprint" => assert!(
            len(&r["sections"]) >= 6
                && len(&r["sections"]) == len(&r["outline"]["sections"])
                && r["assembly"]["document"].is_string(),
            "{r}"
        ),
        "peer_review" => {
            assert_eq!(len(&r["reviews"]), 3, "{r}");
            assert!(r["statistics"]["consensusScores"].is_array(), "{r}");
            assert!(r["consolidation"]["consolidatedReport"].is_string(), "{r}");
            assert!(r["work"].is_string() && r["rubric"].is_object(), "{r}");
        }
        "specialist_panel" => {
            assert!(len(&r["specialists"]) == 3 && len(&r["failedSpecialists"]) == 0, "{r}");
            assert!(r["synthesis"]["integratedAssessment"].is_string(), "{r}");
            assert_eq!(r["material"]["source"], "content", "{r}");
        }
        "tournament" => {
            assert!(len(&r["contestants"]) == 5 && r["bracket"]["totalRounds"] == 3, "{r}");
            let matches: usize =
                r["rounds"].as_array().unwrap().iter().map(|x| len(&x["matches"])).sum();
            assert_eq!((len(&r["rounds"]), matches), (3, 4), "{r}");
            assert!(r["champion"]["response"].is_string(), "{r}");
        }
        "fact_check" => {
            assert_eq!(r["contentSource"], "user_provided", "{r}");
            assert!(r["content"].is_string() && r["report"]["report"].is_string(), "{r}");
            assert!(len(&r["checks"]) == 3 || len(&r["claims"]) == 0, "{r}");
        }
        "brainstorm" => {
            assert_eq!(len(&r["ideas"]["models"]), 3, "{r}");
            assert!(len(&r["clustering"]["clusters"]) >= 3 && len(&r["scores"]) == 3, "{r}");
            assert_eq!(r["refinement"]["clusterId"], r["ranking"]["rankedClusters"][0]["id"]);
            assert!(r["refinement"]["proposal"].is_string(), "{r}");
        }
        "decompose" => {
            let ran: usize = r["waves"].as_array().unwrap().iter().map(|w| len(&w["tasks"])).sum();
            assert!(ran == len(&r["plan"]["tasks"]) && ran >= 4, "{r}");
            assert_eq!(len(&r["waves"]), len(&r["plan"]["executionWaves"]), "{r}");
            assert!(r["assembly"]["response"].is_string(), "{r}");
        }
        other => panic!("unknown mode {other}"),
    }
}

#[actix_web::test]
async fn every_mode_resumes_after_the_server_is_killed_mid_run_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("crash.db").display());
    kill_mid_run_and_resume(&db).await;
}

#[actix_web::test]
async fn every_mode_resumes_after_the_server_is_killed_mid_run_on_postgresql() {
    let Some(url) = crate::postgres::fresh_database() else { return };
    kill_mid_run_and_resume(&url).await;
    crate::postgres::drop_database(&url);
}
