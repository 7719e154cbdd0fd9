//! Exports and share links: every mode's export in JSON (read back to the same run and result
//! the API gives) and Markdown (readable: no stage ids, no raw JSON), who may export what, the
//! share link's life cycle and what it never grants, the CLI's `conclave export`, and the same
//! on PostgreSQL.

use serde_json::{json, Value};

use crate::cli::conclave;
use crate::helpers::*;

async fn get_text(client: &reqwest::Client, url: String) -> (u16, String, String) {
    let r = client.get(url).send().await.expect("get");
    let status = r.status().as_u16();
    let ctype = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap_or("").to_string())
        .unwrap_or_default();
    (status, ctype, r.text().await.unwrap_or_default())
}

/// Lines of `md` outside fenced code blocks.
fn prose_lines(md: &str) -> Vec<&str> {
    let mut fenced = false;
    md.lines()
        .filter(|l| {
            let t = l.trim_start();
            if t.starts_with("```") || t.starts_with("~~~") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The result the stage rows of a JSON export rebuild (as `GET /api/deliberations/{id}`
/// gives it, the conversation's title aside).
fn rebuilt_result(doc: &Value) -> Value {
    let mode = conclave::modes::ModeKind::parse(doc["run"]["mode"].as_str().unwrap()).unwrap();
    let rows: Vec<conclave::modes::StageRow> =
        serde_json::from_value(doc["stages"].clone()).expect("stage rows read back");
    conclave::modes::load_result(mode, &rows)
}

fn without_title(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("title");
    }
    v
}

/// Checks a run's exports against the API's view of it.
async fn check_exports(app: &TestApp, run_id: &str) {
    let (_, api) = app.get(&format!("/api/deliberations/{run_id}")).await;
    let base = format!("{}/api/deliberations/{run_id}/export", app.base);

    // JSON: the same run record and result, and stage rows that rebuild that result.
    let (status, ctype, text) = get_text(&app.http, format!("{base}?format=json")).await;
    assert_eq!(status, 200, "{text}");
    assert!(ctype.starts_with("application/json"), "{ctype}");
    let doc: Value = serde_json::from_str(&text).expect("the JSON export parses");
    assert_eq!(doc["format"], "conclave.run");
    assert_eq!(doc["run"], api, "{}: the export's run is the API's", api["mode"]);
    assert_eq!(
        without_title(rebuilt_result(&doc)),
        without_title(api["result"].clone()),
        "{}: the stage rows rebuild the result",
        api["mode"]
    );
    assert!(doc.get("events").is_none(), "events only when asked");
    let (_, _, with_events) = get_text(&app.http, format!("{base}?format=json&events=true")).await;
    let with_events: Value = serde_json::from_str(&with_events).unwrap();
    let events = with_events["events"].as_array().expect("events when asked");
    assert_eq!(events.last().unwrap()["event"], "complete", "{}", api["mode"]);

    // Markdown: the question, the answer, the outcome, every model and stage in words.
    let (status, ctype, md) = get_text(&app.http, format!("{base}?format=md")).await;
    assert_eq!(status, 200);
    assert!(ctype.starts_with("text/markdown"), "{ctype}");
    let mode = api["mode"].as_str().unwrap();
    let label = conclave::modes::ModeKind::parse(mode).unwrap().spec().label;
    assert!(md.contains(&format!("**Mode:** {label}")), "{mode}: {md}");
    assert!(md.contains("## Question") && md.contains("## Answer"), "{mode}: {md}");
    let first_line = api["question"].as_str().unwrap().lines().next().unwrap().trim();
    assert!(md.contains(first_line), "{mode}: the question is there");
    if let Some(outcome) = api["outcome"].as_str() {
        assert!(md.contains(outcome.split_whitespace().next().unwrap()), "{mode}: {outcome}");
    }
    let answer = api["answer"].as_str().unwrap_or("");
    let answer = conclave::modes::reading::answer_text(answer);
    let words: Vec<&str> = answer.split_whitespace().filter(|w| w.len() > 3).take(3).collect();
    for w in words {
        assert!(md.contains(w), "{mode}: the answer's {w:?} is in the Markdown");
    }
    assert!(md.contains("**Tokens:**") && md.contains("**Cost:**"), "{mode}");
    for row in doc["stages"].as_array().unwrap() {
        if let Some(m) = row["model"].as_str() {
            assert!(md.contains(m), "{mode}: model {m} is named");
        }
        let stage = row["stageType"].as_str().unwrap();
        assert!(!md.contains(&format!("### {stage}\n")), "{mode}: stage id {stage} shown as is");
    }
    // A mode with a report of its own gives its result in its own terms (a verdict table, a
    // bracket, a tally), and no key-by-key dump of what was read.
    let has_report = conclave::modes::ModeKind::parse(mode).unwrap().spec().report.is_some();
    if has_report {
        let result =
            md.split("## Result\n").nth(1).unwrap_or_else(|| panic!("{mode}: no result: {md}"));
        let result = result.split("\n## ").next().unwrap();
        assert!(result.contains("|---"), "{mode}: the result as a table: {result}");
        match mode {
            "fact_check" => {
                for c in api["result"]["claims"].as_array().unwrap() {
                    let text = c["text"].as_str().unwrap();
                    assert!(result.contains(text), "{mode}: claim {text} in the table: {result}");
                }
                assert!(
                    result.contains("| verified")
                        || result.contains("| disputed")
                        || result.contains("| unverifiable"),
                    "{result}"
                );
            }
            "vote" => {
                let w = &api["result"]["winner"];
                assert!(
                    result.contains(&format!("**Winner:** {}", w["winnerLabel"].as_str().unwrap())),
                    "{result}"
                );
                assert!(result.contains(&format!("{} (winner)", w["voteCount"])), "{result}");
            }
            "tournament" => {
                let c = &api["result"]["champion"];
                assert!(result.contains(&format!("**Champion:** seed {}", c["seed"])), "{result}");
                assert!(result.contains("**Round 1**"), "{result}");
            }
            _ => {}
        }
        for dump in ["Read from it", "Parse success", "Read from:", "Id: claim_", "Checker index"] {
            assert!(!md.contains(dump), "{mode}: {dump:?} in the Markdown");
        }
    }
    for line in prose_lines(&md) {
        let t = line.trim_start_matches(['>', ' ', '-']);
        assert!(
            !(t.starts_with("{\"")
                || t.starts_with("[{")
                || t.contains("\":{")
                || t.contains("\":[")),
            "{mode}: raw JSON in the Markdown: {line}"
        );
    }
}

#[actix_web::test]
async fn every_mode_exports_as_json_that_round_trips_and_markdown_that_reads_well() {
    let app = spawn_app().await;
    let (_, modes) = app.get("/api/modes").await;
    let mut ids = Vec::new();
    for m in modes["modes"].as_array().unwrap() {
        let started = app.start(m["example"].clone()).await;
        ids.push((
            m["id"].as_str().unwrap().to_string(),
            started["runId"].as_str().unwrap().to_string(),
        ));
    }
    for (mode, id) in &ids {
        let run = app.wait_done(id).await;
        assert_eq!(run["status"], "completed", "{mode}: {run}");
        check_exports(&app, id).await;
    }
    app.stop().await;
}

#[actix_web::test]
async fn a_conversation_exports_with_all_its_runs_in_order() {
    let app = spawn_app().await;
    let first = app.start(council_request("What is a monad?")).await;
    app.wait_done(first["runId"].as_str().unwrap()).await;
    let conv = first["conversationId"].as_str().unwrap();
    let second = app.start(json!({ "question": "And a functor?", "conversationId": conv })).await;
    app.wait_done(second["runId"].as_str().unwrap()).await;
    let base = format!("{}/api/conversations/{conv}/export", app.base);
    let (status, _, text) = get_text(&app.http, format!("{base}?format=json")).await;
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["format"], "conclave.conversation");
    let runs: Vec<&str> =
        doc["runs"].as_array().unwrap().iter().map(|r| r["run"]["id"].as_str().unwrap()).collect();
    assert_eq!(runs, [first["runId"].as_str().unwrap(), second["runId"].as_str().unwrap()]);
    let (_, _, md) = get_text(&app.http, format!("{base}?format=md")).await;
    let (a, b) = (md.find("## Turn 1:").unwrap(), md.find("## Turn 2:").unwrap());
    assert!(a < b && md.contains("What is a monad?") && md.contains("And a functor?"), "{md}");
    // A format it does not know is named.
    let (status, _, body) = get_text(&app.http, format!("{base}?format=pdf")).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("\"field\":\"format\""), "{body}");
    app.stop().await;
}

#[actix_web::test]
async fn exports_follow_read_access() {
    let app = spawn_app().await;
    let alice = client_with(&app.user("alice", false).await);
    let bob = client_with(&app.user("bob", false).await);
    let start = |body: Value| {
        let req = alice.post(format!("{}/api/deliberations", app.base)).json(&body);
        async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let mut private = council_request("alice's secret");
    private["visibility"] = json!("private");
    let private = start(private).await;
    let team = start(council_request("alice's team question")).await;
    for r in [&private, &team] {
        app.wait_done(r["runId"].as_str().unwrap()).await;
    }
    let anonymous = reqwest::Client::new();
    let paths = |r: &Value| {
        let (run, conv) = (r["runId"].as_str().unwrap(), r["conversationId"].as_str().unwrap());
        vec![
            format!("{}/api/deliberations/{run}/export?format=md", app.base),
            format!("{}/api/deliberations/{run}/export?format=json", app.base),
            format!("{}/api/conversations/{conv}/export?format=md", app.base),
        ]
    };
    for path in paths(&private) {
        for (who, client, code) in [
            ("alice", &alice, 200),
            ("admin", &app.http, 200),
            ("bob", &bob, 404),
            ("anonymous", &anonymous, 401),
        ] {
            let (status, _, body) = get_text(client, path.clone()).await;
            assert_eq!(status, code, "{who} {path}: {body}");
            if code != 200 {
                assert!(!body.contains("alice's secret"), "{who} {path}: {body}");
            }
        }
    }
    for path in paths(&team) {
        let (status, _, _) = get_text(&bob, path.clone()).await;
        assert_eq!(status, 200, "bob may read a team run's export: {path}");
    }
    // An unknown run is not found, as one the caller may not see.
    let (status, _, _) =
        get_text(&app.http, format!("{}/api/deliberations/nope/export", app.base)).await;
    assert_eq!(status, 404);
    app.stop().await;
}

/// A share link from making to revoking, and what it never grants.
pub(crate) async fn check_share_life_cycle(app: &TestApp) {
    let alice_token = app.user("alice", false).await;
    let alice = client_with(&alice_token);
    let bob = client_with(&app.user("bob", false).await);
    let anonymous = reqwest::Client::new();
    let mut private = council_request("Which sorting algorithm for nearly sorted data?");
    private["visibility"] = json!("private");
    let r = alice.post(format!("{}/api/deliberations", app.base)).json(&private).send().await;
    let started: Value = r.unwrap().json().await.unwrap();
    let run = started["runId"].as_str().unwrap().to_string();
    let other: Value = alice
        .post(format!("{}/api/deliberations", app.base))
        .json(&council_request("Another question entirely"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let api = app.wait_done(&run).await;
    app.wait_done(other["runId"].as_str().unwrap()).await;
    let shares = format!("{}/api/deliberations/{run}/shares", app.base);

    // Only the owner or an admin makes links; bob may not see the private run at all.
    let r = bob.post(&shares).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), 404, "bob cannot see alice's private run");
    let r = anonymous.post(&shares).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = alice.post(&shares).json(&json!({ "hideModel": true })).send().await.unwrap();
    assert_eq!(r.status(), 400, "an unknown option is named");
    let r = alice.post(&shares).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let plain: Value = r.json().await.unwrap();
    let token = plain["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("shr_") && token.len() == 68, "{token}");
    assert_eq!(plain["path"], format!("/s/{token}"));
    let r = app.http.post(&shares).json(&json!({ "hideModels": true })).send().await.unwrap();
    assert_eq!(r.status(), 201, "an admin may share any run");
    let hidden: Value = r.json().await.unwrap();
    let hidden_token = hidden["token"].as_str().unwrap().to_string();

    // The list shows both, never a token; only the owner or an admin may read it.
    let listed: Value = alice.get(&shares).send().await.unwrap().json().await.unwrap();
    let listed = listed["shares"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|s| s.get("token").is_none() && s["active"] == true));
    assert!(!serde_json::to_string(listed).unwrap().contains(&token[4..]));
    assert_eq!(bob.get(&shares).send().await.unwrap().status(), 404);

    // The public page and its JSON, signed out: the run, read-only.
    let (status, ctype, html) = get_text(&anonymous, format!("{}/s/{token}", app.base)).await;
    assert_eq!(status, 200, "{html}");
    assert!(ctype.starts_with("text/html") && html.contains("/static/js/shared.js"), "{ctype}");
    let (status, _, text) = get_text(&anonymous, format!("{}/s/{token}/json", app.base)).await;
    assert_eq!(status, 200, "{text}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["run"]["id"], run.as_str());
    assert_eq!(doc["run"]["answer"], api["answer"]);
    assert_eq!(doc["run"]["result"], api["result"]);
    assert_eq!(doc["run"]["canControl"], false);
    assert!(doc["run"].get("owner").is_none() && !text.contains("alice"), "no owner: {text}");
    assert!(doc["markdown"].as_str().unwrap().contains("sim/alpha"));
    let (status, ctype, md) =
        get_text(&anonymous, format!("{}/s/{token}/export?format=md", app.base)).await;
    assert_eq!(status, 200);
    assert!(ctype.starts_with("text/markdown"));
    assert!(md.contains("nearly sorted data"));

    // Hidden models: no model id anywhere, the same alias for the same model throughout.
    let (_, _, text) = get_text(&anonymous, format!("{}/s/{hidden_token}/json", app.base)).await;
    assert!(!text.contains("sim/"), "a model name leaks: {text}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    let chairman = doc["run"]["result"]["stage3"]["model"].as_str().unwrap();
    let stage1: Vec<&str> = doc["run"]["result"]["stage1"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["model"].as_str().unwrap())
        .collect();
    assert_eq!(stage1, ["Model A", "Model B", "Model C"], "{text}");
    assert_eq!(chairman, "Model A", "the chairman is sim/alpha, the first member");
    let md = doc["markdown"].as_str().unwrap();
    assert!(md.contains("Model A") && !md.contains("sim/"), "{md}");
    // The mode's report is read from the anonymised result, and names the aliases.
    let report = md.split("## Result\n").nth(1).unwrap_or_else(|| panic!("no result: {md}"));
    assert!(report.contains("**Aggregate ranking**") && report.contains("| Model "), "{report}");
    assert!(report.contains("written by the chairman, Model A."), "{report}");

    // What a share link never grants: the API, control, events, other runs.
    let as_bearer = client_with(&token);
    for path in [
        format!("/api/deliberations/{run}"),
        format!("/api/deliberations/{}", other["runId"].as_str().unwrap()),
        "/api/me".to_string(),
        format!("/api/deliberations/{run}/events"),
        format!("/api/deliberations/{run}/export"),
    ] {
        let (status, _, _) = get_text(&as_bearer, format!("{}{path}", app.base)).await;
        assert_eq!(status, 401, "a share token is no API token: {path}");
    }
    let r = as_bearer.post(format!("{}/api/deliberations/{run}/cancel", app.base)).send().await;
    assert_eq!(r.unwrap().status(), 401);
    for path in [
        format!("/s/{token}/cancel"),
        format!("/s/{token}/events"),
        format!("/s/{token}/../{}", other["runId"].as_str().unwrap()),
    ] {
        let (status, _, body) = get_text(&anonymous, format!("{}{path}", app.base)).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    let r = anonymous.post(format!("{}/s/{token}/json", app.base)).send().await.unwrap();
    assert!(r.status().is_client_error(), "nothing is written through a share link");
    let mut ws = app.ws_anonymous().await;
    ws.send(json!({ "type": "auth", "token": token })).await;
    let reply = ws.next_within(std::time::Duration::from_secs(10)).await;
    let kind = reply.as_ref().map(|r| r["type"].clone());
    assert_ne!(kind, Some(json!("authenticated")), "a share token does not sign a socket in");

    // Unknown and malformed tokens are not found.
    let unknown = format!("shr_{}", "0".repeat(64));
    for t in [unknown.as_str(), "shr_short", "anything", &token[..60]] {
        let (status, _, _) = get_text(&anonymous, format!("{}/s/{t}/json", app.base)).await;
        assert_eq!(status, 404, "{t}");
        let (status, _, _) = get_text(&anonymous, format!("{}/s/{t}", app.base)).await;
        assert_eq!(status, 404, "{t}");
    }

    // Revoking: bob may not, another run's path may not, the owner may; then it is 404.
    let share_id = plain["id"].as_str().unwrap();
    let other_shares = format!(
        "{}/api/deliberations/{}/shares/{share_id}",
        app.base,
        other["runId"].as_str().unwrap()
    );
    assert_eq!(alice.delete(&other_shares).send().await.unwrap().status(), 404);
    assert_eq!(bob.delete(format!("{shares}/{share_id}")).send().await.unwrap().status(), 404);
    let r = alice.delete(format!("{shares}/{share_id}")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let revoked: Value = r.json().await.unwrap();
    assert_eq!(revoked["active"], false);
    for path in [format!("/s/{token}"), format!("/s/{token}/json"), format!("/s/{token}/export")] {
        let (status, _, body) = get_text(&anonymous, format!("{}{path}", app.base)).await;
        assert_eq!(status, 404, "revoked: {path}");
        assert!(!body.contains("nearly sorted"), "{body}");
    }
    let (status, _, _) = get_text(&anonymous, format!("{}/s/{hidden_token}/json", app.base)).await;
    assert_eq!(status, 200, "the other link still works");
    let listed: Value = alice.get(&shares).send().await.unwrap().json().await.unwrap();
    let actives: Vec<bool> =
        listed["shares"].as_array().unwrap().iter().map(|s| s["active"] == true).collect();
    assert_eq!(actives, [false, true]);

    // A team run: bob sees it, but only its owner or an admin shares it.
    let team_shares =
        format!("{}/api/deliberations/{}/shares", app.base, other["runId"].as_str().unwrap());
    assert_eq!(bob.post(&team_shares).json(&json!({})).send().await.unwrap().status(), 403);
    assert_eq!(bob.get(&team_shares).send().await.unwrap().status(), 403);
}

#[actix_web::test]
async fn a_share_link_reads_one_run_read_only_until_revoked() {
    let app = spawn_app().await;
    check_share_life_cycle(&app).await;
    app.stop().await;
}

#[actix_web::test]
async fn a_run_has_a_bounded_number_of_working_share_links() {
    let app = spawn_app().await;
    let started = app.start(council_request("Bounded?")).await;
    let run = started["runId"].as_str().unwrap();
    app.wait_done(run).await;
    let shares = format!("/api/deliberations/{run}/shares");
    let max = conclave::engine::MAX_ACTIVE_SHARES;
    let mut first = Value::Null;
    for i in 0..max {
        let (status, v) = app.post(&shares, &json!({})).await;
        assert_eq!(status, 201, "{v}");
        if i == 0 {
            first = v;
        }
    }
    let (status, v) = app.post(&shares, &json!({})).await;
    assert_eq!(status, 409, "{v}");
    // A body over the limit of every JSON body is refused before it is read whole.
    let big = json!({ "hideModels": true, "pad": "x".repeat(2 << 20) });
    let (status, v) = app.post(&shares, &big).await;
    assert_eq!((status, &v["field"]), (413, &json!("body")), "{v}");
    let r = app
        .http
        .delete(format!("{}{shares}/{}", app.base, first["id"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (status, _) = app.post(&shares, &json!({})).await;
    assert_eq!(status, 201, "a revoked link frees its place");
    app.stop().await;
}

#[actix_web::test]
async fn share_links_on_postgresql() {
    let Some(url) = crate::postgres::fresh_database() else { return };
    let app = spawn_with(Options { database_url: Some(url), ..Options::default() }).await;
    check_share_life_cycle(&app).await;
    let started = app.start(council_request("Export on PostgreSQL")).await;
    let run = started["runId"].as_str().unwrap();
    app.wait_done(run).await;
    check_exports(&app, run).await;
    let url = app.database_url.clone();
    app.stop().await;
    crate::postgres::drop_database(&url);
}

#[actix_web::test]
async fn the_cli_exports_what_the_api_does() {
    let app = spawn_with(Options { sqlite_only: true, ..Options::default() }).await;
    let started = app.start(council_request("What does the CLI export?")).await;
    let run = started["runId"].as_str().unwrap().to_string();
    app.wait_done(&run).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.json");
    let out = conclave()
        .args(["export", &run, "--format", "json", "--output", file.to_str().unwrap()])
        .env("DATABASE_URL", &app.database_url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let from_cli: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let (_, _, text) =
        get_text(&app.http, format!("{}/api/deliberations/{run}/export?format=json", app.base))
            .await;
    let from_api: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(from_cli, from_api);

    let out =
        conclave().args(["export", &run]).env("DATABASE_URL", &app.database_url).output().unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && md.contains("What does the CLI export?"), "{md}");
    let conv = started["conversationId"].as_str().unwrap();
    let out = conclave()
        .args(["export", conv, "--format", "md"])
        .env("DATABASE_URL", &app.database_url)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("## Turn 1:"));
    let out = conclave()
        .args(["export", "no-such-run"])
        .env("DATABASE_URL", &app.database_url)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run or conversation"));
    app.stop().await;
}

/// A share link's JSON carries what its page shows the run with: the stored events (model
/// names hidden in them when the link says so) and the mode's label and view, and never the
/// name of the person who stopped the run.
#[actix_web::test]
async fn a_shared_run_carries_its_events_and_names_nobody() {
    let app = crate::helpers::spawn_with(crate::helpers::Options {
        sim_latency_ms: 400,
        ..Default::default()
    })
    .await;
    let alice = client_with(&app.user("alice", false).await);
    let started: Value = alice
        .post(format!("{}/api/deliberations", app.base))
        .json(&council_request("Why do cats purr?"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run = started["runId"].as_str().unwrap().to_string();
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let r =
        alice.post(format!("{}/api/deliberations/{run}/cancel", app.base)).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let detail = app.wait_done(&run).await;
    assert_eq!(detail["status"], "cancelled");
    assert!(detail["error"].as_str().unwrap_or("").contains("alice"), "{detail}");
    let shares = format!("{}/api/deliberations/{run}/shares", app.base);
    let anonymous = reqwest::Client::new();
    for hide in [false, true] {
        let made: Value = alice
            .post(&shares)
            .json(&json!({ "hideModels": hide }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let token = made["token"].as_str().unwrap();
        let (status, _, text) = get_text(&anonymous, format!("{}/s/{token}/json", app.base)).await;
        assert_eq!(status, 200, "{text}");
        assert!(!text.contains("alice"), "the share names who stopped the run: {text}");
        let doc: Value = serde_json::from_str(&text).unwrap();
        let events = doc["events"].as_array().unwrap();
        assert!(events.iter().any(|e| e["event"] == "call_start"), "{text}");
        assert_eq!(events.last().unwrap()["event"], "cancelled");
        assert_eq!(doc["modeInfo"]["id"], "council");
        assert_eq!(doc["modeInfo"]["label"], "Council");
        assert_eq!(doc["modeInfo"]["view"], true);
        assert_eq!(text.contains("sim/"), !hide, "model names hidden: {hide}");
    }
    app.stop().await;
}
