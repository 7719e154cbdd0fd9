//! `conclave eval` as a user runs it: the table and `--json` over the sample set with oracle
//! sims whose answers are known, replies that state no answer, the budget stop, resuming a
//! stopped eval, and Ctrl-C.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::cli::conclave;

fn eval(db: &str, args: &[&str]) -> Output {
    conclave()
        .env("DATABASE_URL", db)
        .env("CONCLAVE_SIM_LATENCY_MS", "0")
        .args(["eval", "sample"])
        .args(args)
        .output()
        .unwrap()
}

fn json_of(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}; stderr: {stderr}"))
}

fn arm<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["arm"] == name)
        .unwrap_or_else(|| panic!("{name}: {v}"))
}

fn db() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("eval.db").display());
    (dir, url)
}

#[test]
fn arms_are_graded_against_the_answer_key_and_json_has_the_documented_shape() {
    let (_dir, url) = db();
    // One member always right, two always wrong with the same wrong answer: the majority is
    // always wrong, whatever the right one says.
    let members = "sim/oracle-1,sim/oracle-0-a,sim/oracle-0-b";
    let out =
        eval(&url, &["--members", members, "--arms", "single,majority", "--limit", "20", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    assert!(v["evalId"].as_str().is_some_and(|id| id.len() == 36));
    let right = arm(&v, "single:sim/oracle-1");
    let keys: Vec<&str> = right.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "arm",
            "n",
            "correct",
            "accuracy",
            "ciLow",
            "ciHigh",
            "unparsed",
            "promptTokens",
            "completionTokens",
            "cost",
            "latencyP50Ms",
            "latencyP95Ms"
        ]
    );
    assert_eq!((right["n"].as_u64(), right["correct"].as_u64()), (Some(20), Some(20)));
    assert_eq!(right["accuracy"], 1.0);
    assert!(right["ciLow"].as_f64().unwrap() > 0.8 && right["ciHigh"] == 1.0);
    assert_eq!(arm(&v, "single:sim/oracle-0-a")["correct"], 0);
    let majority = arm(&v, "majority");
    assert_eq!((majority["n"].as_u64(), majority["correct"].as_u64()), (Some(20), Some(0)));
    // The majority's tokens are its three members' tokens.
    let single_tokens = right["promptTokens"].as_i64().unwrap();
    assert!(single_tokens > 0);
    assert_eq!(majority["promptTokens"].as_i64().unwrap(), 3 * single_tokens);
    assert_eq!(v["bestSingle"], "sim/oracle-1");
    let d = v["differences"].as_array().unwrap().iter().find(|d| d["arm"] == "majority").unwrap();
    assert_eq!(d["diff"], -1.0, "wrong on every question the best member got right");

    // Two right members outvote a wrong one: the majority is always right.
    let out = eval(
        &url,
        &[
            "--members",
            "sim/oracle-1-a,sim/oracle-1-b,sim/oracle-0",
            "--arms",
            "majority",
            "--limit",
            "10",
            "--json",
        ],
    );
    assert_eq!(arm(&json_of(&out), "majority")["correct"], 10);
}

#[test]
fn a_reply_that_states_no_answer_is_unparsed_never_guessed_and_the_table_says_so() {
    let (_dir, url) = db();
    // The ordinary sims answer in prose with no final answer.
    let out = eval(
        &url,
        &["--members", "sim/alpha,sim/beta", "--arms", "single,council", "--limit", "6"],
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let header = table.lines().next().unwrap();
    for col in [
        "arm",
        "accuracy",
        "95% CI",
        "Δ vs best single",
        "unparsed",
        "tokens",
        "cost",
        "p50",
        "p95",
    ] {
        assert!(header.contains(col), "{header}");
    }
    for name in ["single:sim/alpha", "single:sim/beta", "council"] {
        let line = table.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{table}"));
        assert!(line.contains("0.0%") && line.contains("100%"), "0% right, 100% unparsed: {line}");
    }
}

#[test]
fn the_budget_stops_the_eval_before_it_is_exceeded_and_resume_finishes_it() {
    let (_dir, url) = db();
    let members = "sim/oracle-0.6-a,sim/oracle-0.6-b";
    let args = ["--members", members, "--arms", "single", "--limit", "30", "--json"];
    // A Solo call here uses about 50 tokens, but may use its prompt and its 2,000-token cap:
    // the eval stops once the next call's worst case no longer fits.
    let out = eval(&url, &[&args[..], &["--budget", "4000"]].concat());
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    let why = v["stopped"].as_str().unwrap();
    assert!(why.contains("budget reached") && why.contains("of a 4000-token budget used"), "{why}");
    let used: i64 = v["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["promptTokens"].as_i64().unwrap() + a["completionTokens"].as_i64().unwrap())
        .sum();
    assert!(used <= 4000 && used > 1000, "{used} tokens used of 4000");
    let answered: u64 =
        v["arms"].as_array().unwrap().iter().map(|a| a["n"].as_u64().unwrap()).sum();
    assert!(answered > 0 && answered < 60, "{answered}");
    let id = v["evalId"].as_str().unwrap().to_string();

    // Resumed by id: the rest is run, what was stored is not run again.
    let out = conclave()
        .env("DATABASE_URL", &url)
        .env("CONCLAVE_SIM_LATENCY_MS", "0")
        .args(["eval", "--resume", &id, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().rfind(|l| l.starts_with('[')).unwrap();
    let left = 60 - answered;
    assert!(last.starts_with(&format!("[{left}/{left}]")), "only the {left} missing runs: {last}");
    let v = json_of(&out);
    assert_eq!(v["evalId"], id.as_str());
    assert!(v["stopped"].is_null());
    for a in v["arms"].as_array().unwrap() {
        assert_eq!(a["n"], 30, "{a}");
    }
}

#[actix_web::test]
async fn a_run_larger_than_any_before_it_is_stopped_before_the_budget_is_passed() {
    let (_dir, url) = db();
    // Council alone: no run of it is known before the first, and its later calls (rankings
    // quoting every answer) are larger than its first ones.
    let members = "sim/oracle-0.6-a,sim/oracle-0.6-b,sim/oracle-0.6-c";
    let args = ["--members", members, "--arms", "council", "--limit", "8", "--json"];
    let out = eval(&url, &[&args[..], &["--budget", "12000"]].concat());
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    let n = arm(&v, "council")["n"].as_u64().unwrap();
    // Calls that waited for room went on when it came: whole runs were answered.
    assert!((1..8).contains(&n), "{v}");
    let why = v["stopped"].as_str().unwrap();
    assert!(why.contains("the next model call could use up to"), "{why}");
    // Every run the eval made, answered or cancelled on the way, read from the database.
    let store = conclave::store::Store::start(&url).unwrap();
    let runs = store.list_runs(1000).await.unwrap();
    let total: i64 = runs.iter().map(|r| r.prompt_tokens + r.completion_tokens).sum();
    assert!(total <= 12_000, "{total} tokens used of a 12000-token budget");
    assert!(total > 6_000, "most of the budget is used: {total}");
    // What the eval counted covers the database's total: a call stopped in flight is counted
    // at its worst case, since a provider may have billed it.
    let counted: i64 = why
        .split(" of a 12000-token budget used")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{why}"));
    assert!((total..=12_000).contains(&counted), "{counted} counted, {total} stored: {why}");
}

#[test]
fn the_jury_arm_keeps_the_best_answer_only_when_the_jurors_approve_it() {
    // Jurors who always judge rightly approve a right answer: the arm keeps every answer.
    let (_dir, url) = db();
    let right = "sim/oracle-1-a,sim/oracle-1-b,sim/oracle-1-c";
    let out = eval(&url, &["--members", right, "--arms", "single,jury", "--limit", "8", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    let jury = arm(&v, "jury");
    assert_eq!((jury["n"].as_u64(), jury["correct"].as_u64()), (Some(8), Some(8)), "{jury}");
    assert_eq!(jury["jury"]["approved"], 8);
    assert_eq!(jury["jury"]["verdictsRight"], 8);
    // Its cost is the answer's run and the jury's run together.
    let best = arm(&v, "single:sim/oracle-1-a");
    let tokens = |a: &Value| a["promptTokens"].as_i64().unwrap();
    assert!(tokens(jury) > tokens(best));

    // One right member and two jurors who always judge wrongly: the best member's answers
    // are right, the jury turns every one down, and the arm gives no answer at all. Withheld
    // answers count as none, never as right.
    let (_dir, url) = db();
    let mixed = "sim/oracle-1,sim/oracle-0-a,sim/oracle-0-b";
    let out = eval(&url, &["--members", mixed, "--arms", "single,jury", "--limit", "8", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    assert_eq!(v["bestSingle"], "sim/oracle-1");
    let jury = arm(&v, "jury");
    assert_eq!((jury["n"].as_u64(), jury["correct"].as_u64()), (Some(8), Some(0)), "{jury}");
    assert_eq!(jury["unparsed"], 0, "a withheld answer is not an unparsed one");
    assert_eq!(
        (jury["jury"]["approved"].as_u64(), jury["jury"]["verdictsRight"].as_u64()),
        (Some(0), Some(0))
    );
    let d = v["differences"].as_array().unwrap().iter().find(|d| d["arm"] == "jury").unwrap();
    assert_eq!(d["diff"], -1.0);

    // The table says what the jury did, in words.
    let out = eval(&url, &["--members", mixed, "--arms", "single,jury", "--limit", "8"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("approved 0 of 8"), "{table}");
    assert!(table.contains("An answer it did not approve counts as none"), "{table}");
}

#[actix_web::test]
async fn an_arm_that_cannot_run_as_asked_is_refused_before_anything_runs() {
    let (_dir, url) = db();
    let members = "sim/oracle-1-a,sim/oracle-1-b,sim/oracle-1-c";
    // A foreman among the jurors.
    let foreman = r#"jury={"foremanModel":"sim/oracle-1-a"}"#;
    let out = eval(&url, &["--members", members, "--arms", "single,jury", "--arm-config", foreman]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("arm jury") && stderr.contains("oreman"), "{stderr}");
    assert!(stderr.contains("--arm-config jury="), "says how to name one: {stderr}");
    // Two members are too few jurors.
    let out = eval(&url, &["--members", "sim/oracle-1-a,sim/oracle-1-b", "--arms", "jury"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("3 to 6 members"));
    // A mode whose panel is not a list of models would run its own default models, not the
    // members: it is refused until its panel is named.
    let out = eval(&url, &["--members", members, "--arms", "single,chain"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("would not take part") && stderr.contains("--arm-config 'chain="));
    // Nothing ran, and no eval was left behind.
    let store = conclave::store::Store::start(&url).unwrap();
    assert!(store.list_runs(10).await.unwrap().is_empty());
    assert!(store.list_evals(10).await.unwrap().is_empty());
}

#[actix_web::test]
async fn runs_of_an_eval_killed_mid_run_are_not_finished_without_its_budget() {
    use conclave::store::{RunStatus, Store};
    let dir = tempfile::tempdir().unwrap();
    // Calls take 600 ms; a lease runs out 1 s after its last heartbeat.
    std::fs::write(dir.path().join("conclave.toml"), "lease_ms = 1000\n[sim]\nlatency_ms = 600\n")
        .unwrap();
    let url = format!("sqlite://{}", dir.path().join("eval.db").display());
    let mut child = conclave()
        .current_dir(dir.path())
        .env("DATABASE_URL", &url)
        .env_remove("CONCLAVE_SIM_LATENCY_MS")
        .args(["eval", "sample", "--members", "sim/oracle-1-a,sim/oracle-1-b,sim/oracle-1-c"])
        .args(["--arms", "council", "--limit", "3", "--budget", "100000", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until a run has stored some of its events, then kill the eval's process.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let running = loop {
        assert!(std::time::Instant::now() < deadline, "no run got under way");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let Ok(store) = Store::start(&url) else { continue };
        let Ok(runs) = store.list_runs(100).await else { continue };
        let going: Vec<String> = runs
            .iter()
            .filter(|r| r.status == RunStatus::Running && r.last_seq >= 3)
            .map(|r| r.id.clone())
            .collect();
        if !going.is_empty() {
            break going;
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // A server on the same database takes the runs whose lease ran out: it must not finish
    // them without the budget that was kept in the killed process.
    // (An account exists, so the server prints no first sign-in link to the pipe it drops.)
    crate::cli::add_user(&url, "ops", true);
    let _server = crate::helpers::ServerProcess::start(dir.path(), &url, "server");
    let store = Store::start(&url).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for id in &running {
        let run = loop {
            let run = store.get_run(id).await.unwrap().unwrap();
            if run.status != RunStatus::Running {
                break run;
            }
            if std::time::Instant::now() > deadline {
                let log =
                    std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
                panic!("run {id} is still running; the server's log:\n{log}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        assert_eq!(run.status, RunStatus::Interrupted, "{run:?}");
        let why = run.error.unwrap_or_default();
        assert!(why.contains("budget held by the process that started it"), "{why}");
    }
}

#[test]
fn ctrl_c_stops_the_eval_and_prints_what_is_done() {
    let (_dir, url) = db();
    let mut child = conclave()
        .env("DATABASE_URL", &url)
        .env("CONCLAVE_SIM_LATENCY_MS", "300")
        .args([
            "eval",
            "sample",
            "--members",
            "sim/oracle-0.6",
            "--arms",
            "single",
            "--concurrency",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    // The first progress line with some runs done (the eval's first line, `[0/80]`, says it
    // has started).
    let first = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with('[') && !l.starts_with("[0/"))
        .unwrap();
    assert!(first.contains("/80]"), "{first}");
    let killed = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{rest:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("Stopped early: stopped by Ctrl-C"), "{table}");
    let line = table.lines().find(|l| l.starts_with("single:sim/oracle-0.6")).unwrap();
    let n: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(n > 0 && n < 80, "some questions done, not all: {line}");
}

#[test]
fn judge_questions_are_graded_by_the_named_judge_and_refused_without_one() {
    let (dir, url) = db();
    let set = dir.path().join("judge.jsonl");
    std::fs::write(
        &set,
        "{\"id\":\"j1\",\"question\":\"Capital of France?\",\"answer\":\"Paris\",\"kind\":\"judge\"}\n\
         {\"id\":\"j2\",\"question\":\"Largest planet?\",\"answer\":\"Jupiter\",\"kind\":\"judge\"}\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        conclave()
            .env("DATABASE_URL", &url)
            .env("CONCLAVE_SIM_LATENCY_MS", "0")
            .args(["eval", set.to_str().unwrap(), "--members", "sim/oracle-1,sim/oracle-0"])
            .args(["--arms", "single", "--json", "-q"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--judge"));
    // An oracle of 1 as the judge: it compares the stated answer with the reference.
    let v = json_of(&run(&["--judge", "sim/oracle-1"]));
    assert_eq!(arm(&v, "single:sim/oracle-1")["correct"], 2);
    assert_eq!(arm(&v, "single:sim/oracle-0")["correct"], 0);
    assert_eq!(v["arms"].as_array().unwrap().len(), 2, "the judge's runs are no arm");
}

#[actix_web::test]
async fn the_eval_api_lists_evals_and_reports_one_to_signed_in_callers_only() {
    let app = crate::helpers::spawn_app().await;
    // The CLI writes to the server's own database (a SQLite file, or its PostgreSQL database).
    let out = eval(
        &app.database_url,
        &[
            "--members",
            "sim/oracle-1,sim/oracle-0",
            "--arms",
            "single",
            "--limit",
            "5",
            "--json",
            "-q",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = json_of(&out);
    let id = printed["evalId"].as_str().unwrap();
    let (status, list) = app.get("/api/evals").await;
    assert_eq!(status, 200, "{list}");
    let listed = &list["evals"][0];
    assert_eq!((listed["id"].as_str(), listed["questions"].as_u64()), (Some(id), Some(5)));
    assert_eq!(listed["status"], "completed");
    let (status, one) = app.get(&format!("/api/evals/{id}")).await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["arms"], printed["arms"], "the page's figures are the CLI's");
    // Every question splits the arms (one member always right, one never): each is listed with
    // the run behind each arm's answer, and those runs open.
    let disagreements = one["disagreements"].as_array().unwrap();
    assert_eq!(disagreements.len(), 5);
    let run = disagreements[0]["arms"]["single:sim/oracle-1"]["runIds"][0].as_str().unwrap();
    let (status, detail) = app.get(&format!("/api/deliberations/{run}")).await;
    assert_eq!((status, detail["mode"].as_str()), (200, Some("solo")), "{detail}");
    assert_eq!(app.get("/api/evals/no-such-eval").await.0, 404);
    assert_eq!(app.get("/api/evals/..%2Fx").await.0, 404);
    let anonymous = reqwest::get(format!("{}/api/evals", app.base)).await.unwrap();
    assert_eq!(anonymous.status(), 401);
    app.stop().await;
}

/// The conversations `path` lists, following `next` page by page: their ids in order.
async fn all_pages(app: &crate::helpers::TestApp, path: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..50 {
        let url = match &after {
            Some(c) => format!("{path}&after={}", urlencode(c)),
            None => path.to_string(),
        };
        let (status, page) = app.get(&url).await;
        assert_eq!(status, 200, "{page}");
        for c in page["conversations"].as_array().unwrap() {
            ids.push(c["id"].as_str().unwrap().to_string());
        }
        match page["next"].as_str() {
            Some(n) => after = Some(n.to_string()),
            None => return ids,
        }
    }
    panic!("more than 50 pages");
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[actix_web::test]
async fn an_evals_runs_stay_out_of_history_and_the_dashboard_and_say_whose_they_are() {
    let app = crate::helpers::spawn_app().await;
    // A person's own run, then an eval of 5 questions (5 runs) on the same database.
    let mine = app.start(crate::helpers::council_request("What is a person's own question?")).await;
    let mine = mine["runId"].as_str().unwrap().to_string();
    app.wait_done(&mine).await;
    let out = eval(
        &app.database_url,
        &["--members", "sim/oracle-1", "--arms", "single", "--limit", "5", "--json", "-q"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let eval_id = json_of(&out)["evalId"].as_str().unwrap().to_string();

    // History: the person's own conversation only, and nothing more to load.
    let (status, own) = app.get("/api/conversations?limit=50").await;
    assert_eq!(status, 200, "{own}");
    let own_ids: Vec<&str> =
        own["conversations"].as_array().unwrap().iter().filter_map(|c| c["id"].as_str()).collect();
    assert_eq!(own_ids.len(), 1, "{own}");
    assert!(own["next"].is_null(), "{own}");
    // The dashboard: the person's run only.
    let (_, dash) = app.get("/api/deliberations").await;
    let recent: Vec<&str> =
        dash["recent"].as_array().unwrap().iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(recent, [mine.as_str()], "{dash}");

    // Asked for: the eval's conversations, alone or with everything else.
    let of_eval = all_pages(&app, &format!("/api/conversations?eval={eval_id}&limit=2")).await;
    assert_eq!(of_eval.len(), 5, "{of_eval:?}");
    let everything = all_pages(&app, "/api/conversations?evals=include&limit=500").await;
    assert_eq!(everything.len(), 6);
    // Paged two at a time, the same list in the same order: nothing skipped or listed twice.
    assert_eq!(all_pages(&app, "/api/conversations?evals=include&limit=2").await, everything);

    // An eval's run, opened, says whose it is; the person's does not.
    let (_, conv) = app.get(&format!("/api/conversations/{}", of_eval[0])).await;
    let run = conv["runs"][0]["id"].as_str().unwrap();
    let (_, detail) = app.get(&format!("/api/deliberations/{run}")).await;
    assert_eq!(detail["evalId"], eval_id.as_str(), "{detail}");
    let (_, detail) = app.get(&format!("/api/deliberations/{mine}")).await;
    assert!(detail.get("evalId").is_none(), "{detail}");

    // A cursor or filter the server did not give is the client's mistake, named.
    for (query, field) in
        [("after=nonsense", "after"), ("after=12:", "after"), ("evals=maybe", "evals")]
    {
        let (status, body) = app.get(&format!("/api/conversations?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.to_string().contains(field), "{query}: {body}");
    }
    app.stop().await;
}

/// Polls an eval's report until it is no longer running.
async fn eval_done(app: &crate::helpers::TestApp, id: &str) -> Value {
    for _ in 0..600 {
        let (status, v) = app.get(&format!("/api/evals/{id}")).await;
        assert_eq!(status, 200, "{v}");
        if v["eval"]["status"] != "running" {
            return v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("eval {id} did not end");
}

#[actix_web::test]
async fn an_admin_starts_follows_and_stops_an_eval_over_the_api() {
    let app = crate::helpers::spawn_with(crate::helpers::Options {
        sim_latency_ms: 20,
        ..Default::default()
    })
    .await;
    // Refused by field, nothing stored.
    for (body, field) in [
        (serde_json::json!({ "set": "sample", "members": [] }), "members"),
        (
            serde_json::json!({ "set": "sample", "members": ["sim/alpha"], "arms": ["nonsense"] }),
            "arms",
        ),
        (serde_json::json!({ "set": "mine.jsonl", "members": ["sim/alpha"] }), "questions"),
        (
            serde_json::json!({ "set": "mine.jsonl", "questions": "not json", "members": ["sim/alpha"] }),
            "questions",
        ),
        (serde_json::json!({ "set": "sample", "limit": 0, "members": ["sim/alpha"] }), "limit"),
    ] {
        let (status, v) = app.post("/api/evals", &body).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert_eq!(v["field"], field, "{body}: {v}");
    }
    assert_eq!(app.get("/api/evals").await.1["evals"], serde_json::json!([]));
    // Not an admin: refused.
    let bob = crate::helpers::client_with(&app.user("bob", false).await);
    let r = bob
        .post(format!("{}/api/evals", app.base))
        .json(&serde_json::json!({ "set": "sample", "members": ["sim/oracle-1"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // An uploaded set of its own: its questions, under its name.
    let mine = "{\"id\": \"q1\", \"question\": \"What is 2 + 2?\", \"answer\": \"4\", \"kind\": \"number\"}\n\
                {\"id\": \"q2\", \"question\": \"What is 3 + 3?\", \"answer\": \"6\", \"kind\": \"number\"}";
    let body = serde_json::json!({ "set": "mine.jsonl", "questions": mine, "members": ["sim/oracle-1"], "arms": ["single"] });
    let (status, v) = app.post("/api/evals", &body).await;
    assert_eq!(status, 202, "{v}");
    let report = eval_done(&app, v["evalId"].as_str().unwrap()).await;
    assert_eq!(report["eval"]["setName"], "mine.jsonl");
    assert_eq!(report["eval"]["questions"], 2);
    assert_eq!(arm(&report, "single:sim/oracle-1")["correct"], 2, "{report}");

    // Started: 202 with its id; its page follows it to the end; the figures are the oracles'.
    let body = serde_json::json!({ "set": "sample", "limit": 6, "members": ["sim/oracle-1", "sim/oracle-0"],
                                   "arms": ["single"] });
    let (status, v) = app.post("/api/evals", &body).await;
    assert_eq!(status, 202, "{v}");
    let id = v["evalId"].as_str().unwrap().to_string();
    let report = eval_done(&app, &id).await;
    assert_eq!(report["eval"]["status"], "completed", "{report}");
    assert!(report["progress"].is_null());
    assert_eq!(arm(&report, "single:sim/oracle-1")["correct"], 6);
    assert_eq!(arm(&report, "single:sim/oracle-0")["correct"], 0);
    assert_eq!(app.post(&format!("/api/evals/{id}/cancel"), &serde_json::json!({})).await.0, 409);

    // A longer one, stopped from the page: it ends stopped, saying who stopped it.
    let body = serde_json::json!({ "set": "sample", "members": ["sim/oracle-0.5-a", "sim/oracle-0.5-b"],
                                   "arms": ["single", "council"] });
    let (status, v) = app.post("/api/evals", &body).await;
    assert_eq!(status, 202, "{v}");
    let id = v["evalId"].as_str().unwrap().to_string();
    let (_, running) = app.get(&format!("/api/evals/{id}")).await;
    assert_eq!(running["eval"]["status"], "running", "{running}");
    assert!(running["progress"]["total"].as_u64().unwrap() > 0, "{running}");
    let (status, v) = app.post(&format!("/api/evals/{id}/cancel"), &serde_json::json!({})).await;
    assert_eq!(status, 202, "{v}");
    let report = eval_done(&app, &id).await;
    assert_eq!(report["eval"]["status"], "stopped", "{report}");
    assert!(
        report["eval"]["note"].as_str().unwrap().contains("stopped from the page by"),
        "{report}"
    );
    assert_eq!(app.post("/api/evals/no-such/cancel", &serde_json::json!({})).await.0, 404);
    app.stop().await;
}

/// A question set is read line by line with a bound on each line, the number of questions and
/// the whole: an endless or oversized line is refused at once with its line number, too many
/// questions with the line past the limit, and counts of zero are refused by flag.
#[test]
fn a_question_set_is_read_with_bounds_and_its_errors_name_the_line() {
    let (dir, url) = db();
    let set = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let line = |id: usize| {
        format!(
            r#"{{"id": "q{id}", "question": "1 + {id}?", "answer": "{}", "kind": "number"}}"#,
            id + 1
        )
    };
    let huge = set(
        "huge.jsonl",
        format!("{}\n\n{{\"id\": \"big\", \"question\": \"{}\"}}\n", line(1), "x".repeat(300_000)),
    );
    let long = set(
        "long.jsonl",
        format!(
            "// a comment\n{}\n{{\"id\": \"long\", \"question\": \"{}\", \"answer\": \"1\", \"kind\": \"number\"}}\n",
            line(1),
            "y".repeat(30_000)
        ),
    );
    let many = set("many.jsonl", (0..10_001).map(line).collect::<Vec<_>>().join("\n"));
    let members = ["--members", "sim/oracle-1"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["eval", "/dev/zero"], "the question set /dev/zero, line 1: longer than 256 KiB"),
        (vec!["eval", &huge], "huge.jsonl, line 3: longer than 256 KiB"),
        (vec!["eval", &long], "line 3: question \"long\" is"),
        (vec!["eval", &many], "many.jsonl, line 10001: more than 10000 questions"),
        (vec!["eval", "sample", "--samples", "0"], "--samples"),
        (vec!["eval", "sample", "--concurrency", "0"], "--concurrency"),
        (vec!["eval", "sample", "--limit", "0"], "--limit"),
    ];
    for (mut args, expected) in cases {
        args.extend(members);
        let (code, stderr) = crate::cli::bounded(dir.path(), &url, &args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    // `--limit` reads no further than its last question: a bad line after it is never seen.
    let tail = set("tail.jsonl", format!("{}\n{}\nnot json\n", line(1), line(2)));
    let args = ["eval", &tail, "--limit", "2", "--arms", "single", "--json", "--quiet"];
    let mut args = args.to_vec();
    args.extend(members);
    let (code, stderr) = crate::cli::bounded(dir.path(), &url, &args);
    assert_eq!(code, Some(0), "{stderr}");
}
