//! Watching runs live: WebSocket start, late and reconnecting watchers, SSE resumption.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::*;

const COUNCIL_SEQUENCE: [&str; 8] = [
    "stage1_start",
    "stage1_complete",
    "stage2_start",
    "stage2_complete",
    "stage3_start",
    "stage3_complete",
    "title_complete",
    "complete",
];

#[actix_web::test]
async fn a_websocket_client_starts_a_council_and_sees_the_seed_sequence() {
    let app = spawn_with(Options { sim_latency_ms: 100, ..Options::default() }).await;
    let mut ws = app.ws().await;
    ws.send(
        json!({ "type": "start", "id": 7, "request": council_request("Why is the sky blue?") }),
    )
    .await;
    let (started, _) = ws.until("started", None).await;
    assert_eq!(started["id"], 7);
    let run = started["runId"].as_str().unwrap().to_string();
    let events = ws.events_until_end(&run).await;
    assert_contiguous(&events, 1);
    assert_eq!(stage_events(&events), COUNCIL_SEQUENCE);
    let first = &events[0];
    assert_eq!(first["data"]["conversationId"], started["conversationId"]);
    assert_eq!(first["data"]["messageId"], started["messageId"]);
    let s1 = events.iter().find(|e| e["event"] == "stage1_complete").unwrap();
    assert_eq!(s1["data"]["data"].as_array().unwrap().len(), 3);
    assert!(s1["data"]["data"][0]["responseTimeMs"].is_number());
    let s2 = events.iter().find(|e| e["event"] == "stage2_complete").unwrap();
    assert!(s2["data"]["metadata"]["labelToModel"].is_object());
    let calls = events.iter().filter(|e| e["event"] == "call_complete").count();
    assert_eq!(calls, 8, "3 answers, 3 rankings, chairman, title");
    assert!(events.iter().any(|e| e["event"] == "token"), "answers stream as token events");
    // Stage 3's live payload equals what GET rebuilds from the stored rows.
    let (_, stored) = app.get(&format!("/api/deliberations/{run}")).await;
    let s3 = events.iter().find(|e| e["event"] == "stage3_complete").unwrap();
    assert_eq!(s3["data"]["data"], stored["result"]["stage3"]);
    assert_eq!(s2["data"]["data"], stored["result"]["stage2"]);
    assert_eq!(s2["data"]["metadata"], stored["result"]["stage2Metadata"]);
    ws.close().await;
    app.stop().await;
}

#[actix_web::test]
async fn a_late_watcher_and_a_reconnecting_one_miss_nothing_and_repeat_nothing() {
    let app = spawn_with(Options { sim_latency_ms: 150, ..Options::default() }).await;
    let mut a = app.ws().await;
    a.send(json!({ "type": "start", "request": council_request("Late watchers?") })).await;
    let (started, _) = a.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    // B joins once stage 1 is over.
    let (_, _) = a.until("event", Some("stage1_complete")).await;
    let mut b = app.ws().await;
    b.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    // C watches from the start, reads a few events, drops, and reconnects with `since`.
    let mut c = app.ws().await;
    c.send(json!({ "type": "watch", "run": run })).await;
    let mut c_seen = Vec::new();
    for _ in 0..4 {
        c_seen.push(c.next().await);
    }
    c.close().await;
    let last = c_seen.last().unwrap()["seq"].as_i64().unwrap();
    let mut c2 = app.ws().await;
    c2.send(json!({ "type": "watch", "run": run, "since": last })).await;
    let c_rest = c2.events_until_end(&run).await;
    c_seen.extend(c_rest);

    let a_rest = a.events_until_end(&run).await;
    let b_all = b.events_until_end(&run).await;
    assert_contiguous(&b_all, 1);
    assert_contiguous(&c_seen, 1);
    assert_eq!(stage_events(&b_all), COUNCIL_SEQUENCE);
    assert_eq!(b_all.last(), a_rest.last());
    assert_eq!(b_all, c_seen, "the reconnecting watcher saw exactly what the late one saw");
    // After the run ends, a watch replays it (from memory or the database).
    let mut d = app.ws().await;
    d.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    let d_all = d.events_until_end(&run).await;
    assert_eq!(d_all, b_all);
    for ws in [a, b, c2, d] {
        ws.close().await;
    }
    app.stop().await;
}

#[actix_web::test]
async fn watching_an_unknown_run_is_an_error_not_silence() {
    let app = spawn_app().await;
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": "nope", "id": 1 })).await;
    let v = ws.next().await;
    assert_eq!(v["type"], "error");
    assert_eq!(v["run"], "nope");
    assert_eq!(v["id"], 1);
    ws.send(json!({ "type": "frobnicate" })).await;
    assert_eq!(ws.next().await["type"], "error");
    ws.send(json!("not an object")).await;
    assert_eq!(ws.next().await["type"], "error");
    ws.close().await;
    app.stop().await;
}

#[actix_web::test]
async fn the_dashboard_lists_live_runs_and_their_progress() {
    let app = spawn_with(Options { sim_latency_ms: 100, ..Options::default() }).await;
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "dashboard" })).await;
    let snapshot = ws.next().await;
    assert_eq!(snapshot["type"], "dashboard");
    let started = app.start(council_request("Dashboard?")).await;
    let run = started["runId"].as_str().unwrap();
    let mut statuses = Vec::new();
    let mut last = Value::Null;
    while let Some(v) = ws.next_within(Duration::from_secs(10)).await {
        if v["type"] == "dashboard_update" && v["run"]["id"] == run {
            statuses.push(v["run"]["status"].as_str().unwrap().to_string());
            if v["run"]["status"] != "running" {
                last = v["run"].clone();
                break;
            }
            assert!(v["run"].get("outcome").is_none(), "no outcome while it runs: {v}");
        }
    }
    assert_eq!(statuses.first().map(String::as_str), Some("running"));
    assert_eq!(statuses.last().map(String::as_str), Some("completed"));
    // The run's end tells the dashboard its outcome: the one line its result page shows.
    let stored = app.wait_done(run).await;
    assert!(stored["outcome"].is_string(), "{stored}");
    assert_eq!(last["outcome"], stored["outcome"], "{last}");
    ws.close().await;
    app.stop().await;
}

fn parse_sse(text: &str) -> Vec<(i64, String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut id = None;
            let mut event = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = v.parse().ok();
                } else if let Some(v) = line.strip_prefix("event: ") {
                    event = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).ok();
                }
            }
            Some((id?, event?, data?))
        })
        .collect()
}

#[actix_web::test]
async fn sse_streams_a_run_and_resumes_from_last_event_id() {
    let app = spawn_with(Options { sim_latency_ms: 80, ..Options::default() }).await;
    let started = app.start(council_request("SSE?")).await;
    let run = started["runId"].as_str().unwrap();
    let url = format!("{}/api/deliberations/{run}/events", app.base);
    let resp = app.http.get(&url).send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let all = parse_sse(&resp.text().await.unwrap());
    let seqs: Vec<i64> = all.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    assert_eq!(all.last().unwrap().1, "complete");
    assert_eq!(all[0].2["run"], run);
    // Resume after event 5: everything after it, nothing before.
    let resp = app.http.get(&url).header("Last-Event-ID", "5").send().await.unwrap();
    let rest = parse_sse(&resp.text().await.unwrap());
    assert_eq!(rest.first().unwrap().0, 6);
    assert_eq!(rest.len(), all.len() - 5);
    let resp = app.http.get(&url).header("Last-Event-ID", "x").send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let resp =
        app.http.get(format!("{}/api/deliberations/none/events", app.base)).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    app.stop().await;
}

#[actix_web::test]
async fn unwatch_then_watch_from_zero_replays_the_run_on_the_same_socket() {
    let app = spawn_with(Options { sim_latency_ms: 20, ..Options::default() }).await;
    let started = app.start(council_request("Replay after unwatch?")).await;
    let run = started["runId"].as_str().unwrap().to_string();
    app.wait_done(&run).await;
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    let first = ws.events_until_end(&run).await;
    assert_contiguous(&first, 1);
    // Without an unwatch the socket never gets an event twice.
    // The reply to a watch with an id follows whatever that watch sent: nothing, here.
    ws.send(json!({ "type": "watch", "run": run, "since": 0, "id": 9 })).await;
    assert_eq!(ws.next().await, json!({ "type": "watching", "run": run, "id": 9 }));
    ws.send(json!({ "type": "unwatch", "run": run })).await;
    ws.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    let again = ws.events_until_end(&run).await;
    assert_eq!(again, first, "the whole run again, from seq 1");
    // `since` still applies to a watch after an unwatch.
    ws.send(json!({ "type": "unwatch", "run": run })).await;
    ws.send(json!({ "type": "watch", "run": run, "since": 5 })).await;
    let tail = ws.events_until_end(&run).await;
    assert_eq!(tail[..], first[5..]);
    ws.close().await;
    app.stop().await;
}

#[actix_web::test]
async fn unwatching_a_live_run_drops_what_was_queued_and_a_rewatch_starts_clean() {
    let app = spawn_with(Options { sim_latency_ms: 120, ..Options::default() }).await;
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": council_request("Rewatch a live run?") })).await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    for _ in 0..3 {
        let v = ws.next().await;
        assert_eq!(v["run"], run.as_str());
    }
    ws.send(json!({ "type": "unwatch", "run": run })).await;
    ws.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    // Frames already on the wire before the unwatch may still arrive; once the replay starts
    // (seq 1 again), the old subscription's leftovers never cut into it.
    let first = loop {
        let v = ws.next().await;
        assert_ne!(v["event"], "complete", "the replay never started: {v}");
        if v["seq"] == 1 {
            break v;
        }
    };
    let mut events = vec![first];
    events.extend(ws.events_until_end(&run).await);
    assert_contiguous(&events, 1);
    assert_eq!(stage_events(&events), COUNCIL_SEQUENCE);
    ws.close().await;
    app.stop().await;
}

#[actix_web::test]
async fn the_dashboard_shows_each_call_going_from_running_to_ok_and_how_the_run_ended() {
    let app = spawn_with(Options { sim_latency_ms: 100, ..Options::default() }).await;
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "dashboard" })).await;
    assert_eq!(ws.next().await["type"], "dashboard");
    let started = app.start(council_request("Dashboard calls?")).await;
    let run = started["runId"].as_str().unwrap();
    // Every state each call key was seen in, in order, and the last summary.
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut last = Value::Null;
    let mut live_checked = false;
    while let Some(v) = ws.next_within(Duration::from_secs(10)).await {
        if v["type"] != "dashboard_update" || v["run"]["id"] != run {
            continue;
        }
        for c in v["run"]["calls"].as_array().unwrap() {
            let states = seen.entry(c["key"].as_str().unwrap().to_string()).or_default();
            let state = c["state"].as_str().unwrap().to_string();
            if states.last() != Some(&state) {
                states.push(state);
            }
            assert_ne!(c["stage"], "title", "the title call is not listed: {c}");
        }
        if !live_checked && !v["run"]["calls"].as_array().unwrap().is_empty() {
            // The REST list's `live` carries the same progress.
            let (_, list) = app.get("/api/deliberations").await;
            let entry = list["live"].as_array().unwrap().iter().find(|r| r["id"] == run).cloned();
            assert!(entry.is_some_and(|r| r["calls"].is_array()), "{list}");
            live_checked = true;
        }
        last = v["run"].clone();
        if last["status"] != "running" {
            break;
        }
    }
    assert!(live_checked);
    assert_eq!(last["status"], "completed", "{last}");
    let keys: Vec<&str> = seen.keys().map(String::as_str).collect();
    assert_eq!(keys.len(), 7, "3 answers, 3 rankings and the chairman: {keys:?}");
    for (key, states) in &seen {
        assert_eq!(states.first().map(String::as_str), Some("running"), "{key}: {states:?}");
        assert_eq!(states.last().map(String::as_str), Some("ok"), "{key}: {states:?}");
    }
    for c in last["calls"].as_array().unwrap() {
        assert!(c["responseTimeMs"].as_u64().is_some(), "{c}");
        assert!(c["model"].as_str().unwrap().starts_with("sim/"));
    }
    assert_eq!(last["owner"], "tester", "the signed-in user who started it");
    assert_eq!(last["visibility"], "team");
    let finished = last["finishedAt"].as_i64().expect("finishedAt");
    assert!(finished >= last["createdAt"].as_i64().unwrap());
    let (_, stored) = app.get(&format!("/api/deliberations/{run}")).await;
    assert_eq!(last["finishedAt"], stored["finishedAt"]);
    assert!(last["title"].is_string());
    assert_eq!(last["title"], stored["title"]);
    ws.close().await;
    app.stop().await;
}

/// The text a call streams adds up to exactly its answer: the last chunk is not lost when the
/// reply arrives with it, in-process and through the sim-server's SSE stream.
#[actix_web::test]
async fn streamed_tokens_add_up_to_each_answer_exactly() {
    for sim_over_http in [false, true] {
        let app =
            spawn_with(Options { sim_latency_ms: 150, sim_over_http, ..Options::default() }).await;
        let mut ws = app.ws().await;
        ws.send(json!({ "type": "start", "request": council_request("Why is the sky blue?") }))
            .await;
        let (started, _) = ws.until("started", None).await;
        let run = started["runId"].as_str().unwrap().to_string();
        let events = ws.events_until_end(&run).await;
        let mut streamed: std::collections::HashMap<String, String> = Default::default();
        let mut model_of: std::collections::HashMap<String, Value> = Default::default();
        for e in &events {
            let d = &e["data"];
            match e["event"].as_str().unwrap() {
                "token" => streamed
                    .entry(d["key"].as_str().unwrap().to_string())
                    .or_default()
                    .push_str(d["delta"].as_str().unwrap()),
                "call_start" => {
                    model_of.insert(d["key"].as_str().unwrap().into(), d["model"].clone());
                }
                _ => {}
            }
        }
        let s1 = events.iter().find(|e| e["event"] == "stage1_complete").unwrap();
        let answers = s1["data"]["data"].as_array().unwrap();
        for key in ["stage1:0", "stage1:1", "stage1:2"] {
            let answer = answers.iter().find(|a| a["model"] == model_of[key]).unwrap();
            assert_eq!(
                streamed.get(key).map(String::as_str),
                answer["response"].as_str(),
                "{key} (over http: {sim_over_http})"
            );
        }
        let s3 = events.iter().find(|e| e["event"] == "stage3_complete").unwrap();
        assert_eq!(
            streamed.get("stage3").map(String::as_str),
            s3["data"]["data"]["response"].as_str()
        );
        ws.close().await;
        app.stop().await;
    }
}
