//! The `conclave` binary as a user runs it: `run council`, `sim-server`, and a restart after a
//! run was left behind.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;

pub(crate) fn conclave() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_conclave"));
    c.env_remove("OPENROUTER_API_KEY")
        .env_remove("CONCLAVE_CONFIG")
        .env("CONCLAVE_SIM_LATENCY_MS", "10");
    c
}

#[test]
fn run_council_prints_progress_and_the_synthesis() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("cli.db").display());
    let out = conclave()
        .current_dir(dir.path())
        .args([
            "run",
            "council",
            "What is a monad?",
            "--models",
            "sim/alpha,sim/beta,sim/gamma",
            "--chairman",
            "sim/beta",
        ])
        .env("DATABASE_URL", &db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stderr: {stderr}");
    // Progress names who is at work in words, never by stage id.
    assert!(
        stderr.contains("Council members · sim/gamma")
            && stderr.contains("▶ peer ranking")
            && stderr.contains("Chairman · "),
        "{stderr}"
    );
    assert!(!stderr.contains("stage1") && !stderr.contains("stage3"), "{stderr}");
    assert!(stdout.contains("sim"), "the synthesis is printed: {stdout}");

    let out = conclave()
        .current_dir(dir.path())
        .args(["run", "council", "Again, as JSON", "--json", "--quiet"])
        .env("DATABASE_URL", &db)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["result"]["stage1"].as_array().unwrap().len(), 3);

    let out = conclave()
        .current_dir(dir.path())
        .args(["run", "council", "q", "--models", "sim/alpha"])
        .env("DATABASE_URL", &db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Said of the flag typed, not of the request field it became.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("conclave: --models: ") && !stderr.contains("councilModels"),
        "{stderr}"
    );
}

#[test]
fn run_says_which_database_file_it_stored_the_run_in() {
    // Without DATABASE_URL the run goes to ./conclave.db of the folder it ran in: it says so,
    // by the whole path, so a run made from another folder is not silently lost to the page.
    let dir = tempfile::tempdir().unwrap();
    let out = conclave()
        .current_dir(dir.path())
        .env_remove("DATABASE_URL")
        .args(["run", "vote", "Tabs or spaces?"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let file = std::fs::canonicalize(dir.path().join("conclave.db")).expect("the default file");
    let said = stderr.lines().find_map(|l| l.split(", stored in ").nth(1)).expect(&stderr);
    assert_eq!(std::fs::canonicalize(said.trim()).unwrap(), file, "{stderr}");
}

#[test]
fn sim_server_answers_over_the_openai_api() {
    let mut child = conclave()
        .args(["sim-server", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("printed URL")
        .to_string();
    conclave::providers::openai::install_crypto();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let body: Value = rt.block_on(async {
        reqwest::Client::new()
            .post(format!("{url}/chat/completions"))
            .json(&serde_json::json!({ "model": "sim/alpha", "messages": [{ "role": "user", "content": "Hi?" }] }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let _ = child.kill();
    let _ = child.wait();
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text.to_lowercase().contains("simulated"), "{text}");
}

#[test]
fn a_run_left_running_that_cannot_be_resumed_is_marked_interrupted_at_the_next_start() {
    use diesel::{Connection, RunQueryDsl};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let db = format!("sqlite://{}", path.display());
    // A server that died mid-run left this behind, with a request no mode can be rebuilt
    // from (the crash test in crash.rs resumes real runs).
    let out = conclave().args(["migrate"]).env("DATABASE_URL", &db).output().unwrap();
    assert!(out.status.success());
    let mut conn = diesel::sqlite::SqliteConnection::establish(path.to_str().unwrap()).unwrap();
    diesel::sql_query(
        "INSERT INTO conversations (id, mode, visibility, created_at, updated_at) VALUES ('c', 'council', 'private', 1, 1);
         ",
    )
    .execute(&mut conn)
    .unwrap();
    diesel::sql_query(
        "INSERT INTO runs (id, conversation_id, user_message_id, message_id, mode, status, request, created_at)
         VALUES ('r', 'c', 'u', 'm', 'council', 'running', '{}', 1)",
    )
    .execute(&mut conn)
    .unwrap();
    // The CLI shares the database with live servers: it must not touch the run.
    let out = conclave()
        .current_dir(dir.path())
        .args(["run", "council", "q", "--quiet"])
        .env("DATABASE_URL", &db)
        .output()
        .unwrap();
    assert!(out.status.success());
    let status = |conn: &mut diesel::sqlite::SqliteConnection| {
        #[derive(diesel::QueryableByName)]
        struct S {
            #[diesel(sql_type = diesel::sql_types::Text)]
            status: String,
        }
        diesel::sql_query("SELECT status FROM runs WHERE id = 'r'")
            .get_result::<S>(conn)
            .unwrap()
            .status
    };
    assert_eq!(status(&mut conn), "running");
    // A server start tries to resume it and marks it interrupted, saying why.
    let mut server = conclave()
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("DATABASE_URL", &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("listening on http://127.0.0.1:"), "{line}");
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(status(&mut conn), "interrupted");
}

#[test]
fn run_vote_jury_and_debate_from_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("modes.db").display());
    std::fs::write(dir.path().join("doc.md"), "## GET /users\nReturns users.").unwrap();
    let run = |args: &[&str]| {
        let out = conclave()
            .current_dir(dir.path())
            .arg("run")
            .args(args)
            .env("DATABASE_URL", &db)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        (
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (_, progress) =
        run(&["vote", "Which is best?", "--models", "sim/alpha,sim/beta,sim/gamma"]);
    assert!(progress.contains("winner:"), "{progress}");
    let (report, progress) =
        run(&["jury", "Evaluate these docs", "--content-file", "doc.md", "--foreman", "sim/delta"]);
    assert!(progress.contains("juror sim/alpha") && progress.contains("most said"), "{progress}");
    assert!(report.contains("Jury Verdict Report"), "{report}");
    let (json, _) = run(&["debate", "Tabs or spaces?", "--json", "-q"]);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["mode"], "debate");
    assert_eq!(v["result"]["revisions"].as_array().unwrap().len(), 3);
}

#[test]
fn run_delphi_shows_each_rounds_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let out = conclave()
        .current_dir(dir.path())
        .args(["run", "delphi", "How many engineers will there be by 2030?"])
        .env("DATABASE_URL", format!("sqlite://{}", dir.path().join("d.db").display()))
        .output()
        .unwrap();
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{progress}");
    assert!(progress.contains("■ classify — numeric"), "{progress}");
    assert!(progress.contains("■ round 1 — mean"), "{progress}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Delphi Consensus Report"));
}

#[test]
fn run_clarity_prints_the_score_breakdown_and_critique() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("brief.md"), "# Brief\nTrials reported stable productivity.")
        .unwrap();
    let out = conclave()
        .current_dir(dir.path())
        .args(["run", "clarity", "--content-file", "brief.md"])
        .env("DATABASE_URL", format!("sqlite://{}", dir.path().join("c.db").display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("Clarity score: "), "{stdout}");
    assert!(
        stdout.contains("Evidence Quality (15%)") && stdout.contains("Top issues:"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("■ score"));
}

/// Adds a user with `conclave user add` and answers its API token.
pub(crate) fn add_user(db: &str, name: &str, admin: bool) -> String {
    let mut cmd = conclave();
    cmd.args(["user", "add", name]).env("DATABASE_URL", db);
    if admin {
        cmd.arg("--admin");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Starts `conclave serve` in `dir` and returns it with its base URL and an admin's client.
fn serve_in(dir: &std::path::Path, db: &str) -> (std::process::Child, String, reqwest::Client) {
    let token = add_user(db, "ops", true);
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("Authorization", format!("Bearer {token}").parse().unwrap());
    let client = reqwest::Client::builder().default_headers(headers).build().unwrap();
    let mut server = conclave()
        .current_dir(dir)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("DATABASE_URL", db)
        .env_remove("CONCLAVE_SIM_LATENCY_MS")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("URL").to_string();
    (server, url, client)
}

fn run_status(path: &std::path::Path) -> String {
    use diesel::{Connection, RunQueryDsl};
    #[derive(diesel::QueryableByName)]
    struct S {
        #[diesel(sql_type = diesel::sql_types::Text)]
        status: String,
    }
    let mut conn = diesel::sqlite::SqliteConnection::establish(path.to_str().unwrap()).unwrap();
    diesel::sql_query("SELECT status FROM runs").get_result::<S>(&mut conn).unwrap().status
}

/// Polls `done` every 20 ms until it holds; fails after a generous 30 s.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "waited 30 s for {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn sigterm_lets_running_deliberations_finish_or_marks_them_interrupted() {
    conclave::providers::openai::install_crypto();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for (grace_ms, latency_ms, expected) in [(20_000, 300, "completed"), (0, 3_000, "interrupted")]
    {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("conclave.toml"),
            format!("shutdown_grace_ms = {grace_ms}\n[sim]\nlatency_ms = {latency_ms}\n"),
        )
        .unwrap();
        let path = dir.path().join("s.db");
        let (mut server, url, http) = serve_in(dir.path(), &format!("sqlite://{}", path.display()));
        let post = |body: serde_json::Value| {
            let req = http.post(format!("{url}/api/deliberations")).json(&body).send();
            rt.block_on(async {
                let resp = req.await.unwrap();
                let status = resp.status().as_u16();
                (status, resp.json::<serde_json::Value>().await.unwrap_or_default())
            })
        };
        let (status, started) = post(serde_json::json!({ "question": "Finish me?" }));
        assert_eq!(status, 202, "{started}");
        // The run is under way: its first calls have started (an event is stored).
        let run = started["runId"].as_str().unwrap_or_default().to_string();
        let under_way = || {
            let req = http.get(format!("{url}/api/deliberations/{run}")).send();
            rt.block_on(async { req.await.unwrap().json::<serde_json::Value>().await.unwrap() })
                ["lastSeq"]
                .as_i64()
                > Some(0)
        };
        wait_for("the run to start its calls", under_way);
        let t = std::time::Instant::now();
        Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
        if grace_ms > 0 {
            // Draining is seen when a start (an invalid one, which creates nothing) is answered
            // 503 instead of 400.
            wait_for("the server to drain", || post(serde_json::json!({ "mode": 7 })).0 == 503);
            assert_eq!(
                post(serde_json::json!({ "question": "Too late?" })).0,
                503,
                "no new runs while draining"
            );
        }
        let status = server.wait().unwrap();
        assert!(status.success(), "clean exit: {status:?}");
        assert!(t.elapsed().as_secs() < 15, "exited in {:?}", t.elapsed());
        assert_eq!(run_status(&path), expected, "grace {grace_ms} ms");
    }
}

#[test]
fn user_commands_add_list_and_revoke_accounts() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("u.db").display());
    let token = add_user(&db, "alice", false);
    assert!(token.starts_with("cnv_") && token.len() == 68, "{token}");
    add_user(&db, "root", true);
    let again =
        conclave().args(["user", "add", "alice"]).env("DATABASE_URL", &db).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "a name is taken once");
    let bad = conclave().args(["user", "add", "a b"]).env("DATABASE_URL", &db).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let list = conclave().args(["user", "list"]).env("DATABASE_URL", &db).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout).to_string();
    assert_eq!(list, "alice\tuser\tactive\nroot\tadmin\tactive\n");
    let out =
        conclave().args(["user", "revoke", "alice"]).env("DATABASE_URL", &db).output().unwrap();
    assert!(out.status.success());
    let list = conclave().args(["user", "list"]).env("DATABASE_URL", &db).output().unwrap();
    assert!(String::from_utf8_lossy(&list.stdout).contains("alice\tuser\trevoked"));
    // The token is not in the database, only its hash.
    for file in ["u.db", "u.db-wal"] {
        let bytes = std::fs::read(dir.path().join(file)).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&token[4..]), "the token itself is never stored ({file})");
    }
}

/// A request refused before anything runs (an unknown mode, a model nothing serves) exits 2
/// with the error alone: the engine's actors, started but never polled, are wound down inside
/// the runtime rather than dropped outside it (which panicked: "there is no reactor running").
#[test]
fn a_refused_run_exits_2_with_the_error_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("cli.db").display());
    // An unknown mode is refused by the command line itself (clap's error, and its usage).
    let out = conclave().current_dir(dir.path()).args(["run", "nosuchmode", "q"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("error: unrecognized subcommand 'nosuchmode'"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let cases: [(&[&str], &str); 2] = [
        (&["run", "council", "q", "--models", "nosuch/model,sim/a,sim/b"], "nosuch/model"),
        (
            &["run", "delphi", "q", "--models", "sim/a,sim/b,sim/c", "--chairman", "sim/a"],
            "facilitator",
        ),
    ];
    for (args, expected) in cases {
        let out = conclave()
            .current_dir(dir.path())
            .args(args)
            .env("DATABASE_URL", &db)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: the error alone: {stderr}");
    }
}

/// What a person must never read in the terminal: JSON's and JavaScript's words for nothing,
/// and a placeholder for a value that was not there.
const NOT_FOR_PEOPLE: &[&str] = &["null", "NaN", "undefined", ": ?", "(?)", "? of", " ?%"];

#[test]
fn every_mode_run_from_the_terminal_says_its_progress_and_outcome_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for spec in conclave::modes::registry::MODES {
        let example = (spec.example)();
        let question = example["question"].as_str().unwrap_or("Evaluate this content");
        let mut cmd = conclave();
        cmd.current_dir(dir.path()).args(["run", spec.id, question]);
        if let Some(cfg) = example.get("modeConfig") {
            cmd.args(["--config-json", &cfg.to_string()]);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            wrong.push(format!("{}: exit {:?}\n{stderr}", spec.id, out.status.code()));
            continue;
        }
        for line in stderr.lines() {
            if let Some(w) = NOT_FOR_PEOPLE.iter().find(|w| line.contains(*w)) {
                wrong.push(format!("{}: {w:?} in {line:?}", spec.id));
            }
        }
        // The run opens with the mode's name, not its id.
        if !stderr.lines().any(|l| l == format!("▶ {}", spec.label)) {
            wrong.push(format!("{}: does not open with \"▶ {}\":\n{stderr}", spec.id, spec.label));
        }
        // A mode whose outcome is more than its answer's first words says it.
        let said = stderr.contains("outcome: ");
        if ["vote", "jury", "delphi", "clarity", "tournament", "decompose"].contains(&spec.id)
            && !said
        {
            wrong.push(format!("{}: no outcome line:\n{stderr}", spec.id));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Runs `conclave ARGS` in `dir` on `db`, killed (and the test failed) if it is still running
/// after 20 s: a file read without a bound never ends on `/dev/zero`.
pub(crate) fn bounded(dir: &std::path::Path, db: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut child = conclave()
        .current_dir(dir)
        .args(args)
        .env("DATABASE_URL", db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still running after 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    (out.status.code(), stderr)
}

/// Every file the command line reads has a bound, and one past it is refused at once, by name:
/// a `--content-file` (the characters its field takes), the configuration file.
#[test]
fn every_file_the_cli_reads_is_refused_past_its_bound_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("cli.db").display());
    let over = dir.path().join("over.md");
    std::fs::write(&over, "é".repeat(200_001)).unwrap();
    let over = over.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["run", "jury", "q", "--content-file", "/dev/zero"],
            "--content-file /dev/zero is too large",
        ),
        (&["run", "jury", "q", "--content-file", over], "at most 200000 characters"),
        (&["run", "clarity", "--content-file", "/dev/zero"], "--content-file /dev/zero"),
        (
            &["--config", "/dev/zero", "run", "jury", "q"],
            "the configuration file /dev/zero is too large",
        ),
    ];
    for (args, expected) in cases {
        let (code, stderr) = bounded(dir.path(), &db, args);
        assert!(code.is_some_and(|c| c != 0), "{args:?}: {code:?} {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: the error alone: {stderr}");
    }
}

#[test]
fn run_with_attached_files_gives_them_to_the_models() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("cli.db").display());
    std::fs::write(dir.path().join("plan.md"), "# Plan\n\nShip on Friday.\n").unwrap();
    let mut child = conclave()
        .current_dir(dir.path())
        .args(["run", "solo", "When do we ship?", "--model", "sim/reader", "--json"])
        .args(["--attach", "plan.md", "--attach", "-"])
        .env("DATABASE_URL", &db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"notes from standard input").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    // The files are named before the run's progress, with what they were read as.
    assert!(
        stderr.starts_with("attached: plan.md (text, 24 bytes), stdin.txt (text, 25 bytes)\n"),
        "{stderr}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    let names: Vec<&str> =
        v["attachments"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["plan.md", "stdin.txt"]);
    let answer = v["answer"].as_str().unwrap();
    assert!(answer.contains("name=\"plan.md\" type=\"text/markdown\" (24 characters)"), "{answer}");
    assert!(answer.contains("name=\"stdin.txt\""), "{answer}");

    // A file that is refused is named, with the reason, and nothing runs.
    std::fs::write(dir.path().join("archive.zip"), b"PK\x03\x04\x14\x00\x00\x00").unwrap();
    let out = conclave()
        .current_dir(dir.path())
        .args(["run", "solo", "What is in it?", "--attach", "archive.zip"])
        .env("DATABASE_URL", &db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("archive.zip: "), "{stderr}");
    let out = conclave()
        .current_dir(dir.path())
        .args(["run", "solo", "Where?", "--attach", "missing.txt"])
        .env("DATABASE_URL", &db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("missing.txt"), "{stderr}");
}
