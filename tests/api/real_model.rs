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

use std::time::{Duration, Instant};

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

/// How a run's route asks the model for its machine-read replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    /// `structured_output = "json_schema"`: each reply constrained to its call's schema.
    Json,
    /// `structured_output = "off"`: the seeds' text formats.
    Text,
}

impl Asked {
    fn word(self) -> &'static str {
        match self {
            Asked::Json => "json",
            Asked::Text => "text",
        }
    }
}

/// A test app whose `local/` models are served by the real model server, asked as `asked`.
async fn app_for(url: &str, asked: Asked) -> TestApp {
    // A JSON reply opens with its reasoning and may hold lists (findings, ratings): it is given
    // room to close its object; text replies keep the cap they always had.
    let (structured, max_tokens) = match asked {
        Asked::Json => ("json_schema", 768),
        Asked::Text => ("off", 256),
    };
    // Read from TOML, as a user's configuration file would give it.
    let route: conclave::config::RouteConfig = toml::from_str(&format!(
        "prefix = \"local/\"\nbase_url = \"{url}\"\nmax_concurrent_calls = 3\n\
         max_tokens = {max_tokens}\nstructured_output = \"{structured}\"\n"
    ))
    .expect("route");
    // The calls whose prose a person reads and no machine does (the sections, syntheses and
    // reports) are capped as in a text run: asked for JSON or not they write the same prose,
    // which a 135M model runs on to whatever cap it is given. Read from a `[max_tokens]` table,
    // as a user's file would give it (a role it does not know is refused).
    let caps: String = PROSE_ROLES.iter().map(|r| format!("\"{r}\" = 256\n")).collect();
    let file: conclave::config::FileConfig =
        toml::from_str(&format!("[max_tokens]\n{caps}")).expect("[max_tokens]");
    let caps = conclave::config::Config::from_parts(file, &Default::default(), None, None, None)
        .expect("the caps name the modes' roles")
        .max_tokens;
    spawn_with(Options {
        stage_timeout_ms: 600_000,
        routes: vec![route],
        max_tokens: caps,
        ..Options::default()
    })
    .await
}

/// The roles (`mode.role`) whose replies are prose no reader reads: the output cap keys
/// (`[max_tokens]`) a JSON run gives the text runs' cap.
const PROSE_ROLES: &[&str] = &[
    "blueprint.author",
    "blueprint.assembler",
    "brainstorm.refiner",
    "chain.drafter",
    "chain.improver",
    "confidence_weighted.synthesizer",
    "council.chairman",
    "decompose.assembler",
    "fact_check.reporter",
    "peer_review.consolidator",
    "red_team.synthesizer",
    "specialist_panel.synthesizer",
];

/// Runs a request over the WebSocket; answers the stored run, its events and its stage rows.
async fn run(app: &TestApp, request: Value) -> (Value, Vec<Value>, Vec<Value>) {
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
    let (status, export) = app.get(&format!("/api/deliberations/{run}/export?format=json")).await;
    assert_eq!(status, 200, "{export}");
    let stages = export["stages"].as_array().cloned().unwrap_or_default();
    (stored, events, stages)
}

/// One run of a mode on the real model.
struct Ran {
    asked: Asked,
    stored: Value,
    /// Its stage rows (the JSON export's), where each reply is stored as the model wrote it.
    stages: Vec<Value>,
}

/// Runs `request` twice on the real model, its machine-read replies asked for as JSON and as
/// text, and checks each run ([`check_run`]); `text_failures` are the failures the mode's spec
/// gives for replies it cannot read (with text formats a 135M model rarely follows).
async fn both(url: &str, mode: &str, request: Value, text_failures: &[&str]) -> Vec<Ran> {
    let mut out = Vec::new();
    for asked in [Asked::Json, Asked::Text] {
        let app = app_for(url, asked).await;
        let began = Instant::now();
        let (stored, events, stages) = run(&app, request.clone()).await;
        // How long the run took, so that a slow CI phase says which mode its time went to.
        eprintln!(
            "real model, {mode} ({}): ran in {:.1} s",
            asked.word(),
            began.elapsed().as_secs_f64()
        );
        let reads = Reads::of(&events, &stages);
        check_run(mode, asked, &stored, &events, &stages, reads, text_failures);
        app.stop().await;
        out.push(Ran { asked, stored, stages });
    }
    out
}

/// Modes whose replies are all text a person reads.
const NOTHING_MACHINE_READ: &[&str] = &["chain", "solo"];

/// What every run must show, whatever the model wrote. Asked for JSON, the run completes and at
/// least 90% of its machine-read replies are read from their JSON; asked for text, it completes
/// or fails with one of `text_failures` (its spec's error for unreadable replies), nothing else.
fn check_run(
    mode: &str,
    asked: Asked,
    stored: &Value,
    events: &[Value],
    stages: &[Value],
    reads: Reads,
    text_failures: &[&str],
) {
    let status = stored["status"].as_str().unwrap_or("");
    let error = stored["error"].as_str().unwrap_or("");
    match (status, asked) {
        ("completed", _) => {
            assert!(stored["answer"].as_str().is_some_and(|a| !a.trim().is_empty()), "{stored}")
        }
        ("failed", Asked::Text) => assert!(
            text_failures.iter().any(|f| error.contains(f)),
            "{mode} (text) may fail only with {text_failures:?}, not: {error}"
        ),
        (other, _) => panic!("{mode} ({}) ended {other}: {error}", asked.word()),
    }
    if NOTHING_MACHINE_READ.contains(&mode) {
        assert_eq!(reads.machine_read, 0, "{mode}: {reads}");
    } else if !(status == "failed" && asked == Asked::Text) {
        // (A text run that failed for its unreadable replies may have had none answered at
        // all: the 135M model's calls fail now and then, and then none is there to read.)
        assert!(reads.machine_read > 0, "{mode} ({}) read no reply: {reads}", asked.word());
    }
    let reasked = events
        .iter()
        .filter(|e| e["event"] == "call_retry" && e["data"]["error"]["kind"] == "malformed")
        .count();
    eprintln!(
        "real model, {mode} ({}): {status}; machine-read replies {reads}; {reasked} asked again \
         for not fitting their schema{}",
        asked.word(),
        if error.is_empty() { String::new() } else { format!("; error: {error}") }
    );
    if asked == Asked::Json && reads.json_share() < 0.9 {
        // What the model wrote where it was not read, for a person to see why.
        for e in
            events.iter().filter(|e| e["event"] == "call_start" && e["data"]["schema"].is_string())
        {
            eprintln!("---- asked for JSON: {}", e["data"]);
        }
        for row in stages.iter().filter(|r| r["parsedData"].get("readFrom").is_none()) {
            let content = row["content"].as_str().unwrap_or("");
            eprintln!(
                "---- not read from JSON ({} {}): {}\n{}\n",
                row["stage"],
                row["model"],
                row["parsedData"],
                content.chars().take(1500).collect::<String>()
            );
        }
    }
    match asked {
        Asked::Json => {
            // At least 90% of the run's machine-read replies read from their JSON (a reply
            // that does not fit its schema has been asked for once more by then).
            assert!(reads.json_share() >= 0.9, "{mode}: under 90% read from JSON: {reads}");
        }
        Asked::Text => assert_eq!(reads.json, 0, "{mode}: asked for text, read JSON: {reads}"),
    }
    // A reply read from its JSON is that JSON, as the model wrote it.
    for row in stages.iter().filter(|r| r["parsedData"]["readFrom"] == "json") {
        let reply = row["content"].as_str().unwrap_or("");
        assert!(reply_json(reply).is_object(), "{mode}: read from JSON, not an object: {reply}");
    }
    // `partial` agrees with the failed calls it lists.
    if let Some(p) = stored["result"].get("partial") {
        let failed = stored["result"]["failedModels"].as_array().map_or(0, Vec::len);
        assert_eq!(p.as_bool(), Some(failed > 0), "{mode}: {}", stored["result"]);
    }
    // Every call that answered reports its tokens, and the run's totals are their sums.
    // Each answered call's completion tokens are also listed, so that a slow run says which of
    // its calls wrote the most.
    let (mut prompt, mut completion) = (0u64, 0u64);
    let mut written = Vec::new();
    for e in events.iter().filter(|e| e["event"] == "call_complete") {
        let d = &e["data"];
        if d["ok"] == true {
            let u = &d["usage"];
            let p = u["promptTokens"].as_u64().unwrap_or(0);
            let c = u["completionTokens"].as_u64().unwrap_or(0);
            assert!(p > 0 && c > 0, "{mode}: call {} recorded no tokens: {d}", d["key"]);
            prompt += p;
            completion += c;
            written.push(format!("{} {c}", d["key"].as_str().unwrap_or("?")));
        }
    }
    let answered = written.len();
    assert!(answered > 0, "{mode}: no call answered");
    assert_eq!(stored["usage"]["promptTokens"].as_u64(), Some(prompt), "{mode}");
    assert_eq!(stored["usage"]["completionTokens"].as_u64(), Some(completion), "{mode}");
    // No prompt was sent that its model's context could not hold.
    for e in events.iter().filter(|e| e["event"] == "call_complete" && e["data"]["ok"] == false) {
        let m = e["data"]["error"]["message"].as_str().unwrap_or("");
        assert!(!m.contains("context size"), "{mode}: a prompt overflowed its context: {m}");
    }
    eprintln!(
        "real model, {mode} ({}): tokens written by call: {}",
        asked.word(),
        written.join(", ")
    );
    let fitted = events.iter().filter(|e| e["event"] == "prompt_fitted").count();
    let calls = events.iter().filter(|e| e["event"] == "call_complete").count();
    eprintln!(
        "real model, {mode} ({}): {answered}/{calls} calls answered, {prompt} prompt and \
         {completion} completion tokens; {fitted} prompt(s) fitted",
        asked.word(),
    );
}

/// The text a reader reads (its reasoning set aside), lower-cased.
fn said(text: &str) -> String {
    answer_text(text).to_lowercase()
}

/// The JSON object a reply read from its JSON holds (a fence around it allowed).
fn reply_json(text: &str) -> Value {
    let answer = answer_text(text);
    let t = answer.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|b| b.trim_end().strip_suffix("```"))
        .map_or(t, str::trim);
    serde_json::from_str(t).unwrap_or_else(|e| panic!("read from JSON, but not JSON ({e}): {text}"))
}

/// Where an item was read from (`readFrom`), which every read item must say.
fn read_from(item: &Value) -> &str {
    match item["readFrom"].as_str() {
        Some(f @ ("json" | "text")) => f,
        _ => panic!("an item read says where from (json or text): {item}"),
    }
}

/// Where each label is mentioned in `text` (`Response C`, `Réponse C`…), in order.
fn mentions(text: &str) -> Vec<(usize, String)> {
    let re = regex::Regex::new(
        r"\b(?i:response|r[ée]ponse|respuesta|resposta|risposta|antwort)[\s*_]+([A-Z]{1,2})\b",
    )
    .expect("regex");
    re.captures_iter(text)
        .filter_map(|c| Some((c.get(0)?.start(), format!("Response {}", c[1].to_uppercase()))))
        .collect()
}

/// A ranking read is stated in that order where the reader reads it: from JSON, the reply's
/// `ranking` is the order; from text, under the last `ranking` header the labels first appear
/// in that order, and with no header the labels' last mentions are in that order.
fn states_ranking(text: &str, from: &str, order: &[String]) -> bool {
    if from == "json" {
        let stated: Vec<String> =
            serde_json::from_value(reply_json(text)["ranking"].clone()).unwrap_or_default();
        return stated == order;
    }
    let t = answer_text(text).into_owned();
    let header = regex::Regex::new(r"(?i)ranking[\s*_]*:").expect("regex");
    // The last header with a label after it: one with none (its name quoted in a later
    // sentence, "The FINAL RANKING: … must include the phrase") is no header, as the Council
    // page says the reader has it.
    let last = header.find_iter(&t).filter(|h| !mentions(&t[h.end()..]).is_empty()).last();
    let (section, first) = match last {
        Some(h) => (&t[h.end()..], true),
        None => (t.as_str(), false),
    };
    let found = mentions(section);
    let place = |l: &String| {
        let at = found.iter().filter(|(_, m)| m == l).map(|(i, _)| *i);
        if first {
            at.min()
        } else {
            at.max()
        }
    };
    let places: Vec<Option<usize>> = order.iter().map(place).collect();
    places.iter().all(Option::is_some) && places.windows(2).all(|w| w[0] < w[1])
}

/// A vote read is stated where the reader reads it: from JSON, the reply's `vote`; from
/// text, the last `VOTE:` line's label (spelled out or a bare letter), else the label on a
/// line that speaks of choosing (`I vote for Response B`, `Final answer: B`).
fn states_vote(text: &str, from: &str, label: &str) -> bool {
    if from == "json" {
        return reply_json(text)["vote"] == label;
    }
    let t = answer_text(text).into_owned();
    let letter = &label[label.len() - 1..];
    // The last `VOTE:` line, with the label spelled out or as a bare letter.
    let vote_line =
        regex::Regex::new(r"(?i)\b(?:vote|voto|stimme|votaci[oó]n)\b[\s*_]*[:：]([^\n]*)")
            .expect("regex");
    if let Some(c) = vote_line.captures_iter(&t).last() {
        let rest = c[1].trim().trim_start_matches(['*', '_', ' ']);
        return mentions(rest).first().is_some_and(|(_, m)| m == label)
            || rest.strip_prefix(letter).is_some_and(|r| !r.starts_with(char::is_alphanumeric));
    }
    // Else a vote said in words: the label on a line that speaks of choosing.
    let choosing = regex::Regex::new(
        r"(?i)\b(?:vote|voting|choose|chose|choice|pick|select|answer|best|prefer|go with)",
    )
    .expect("regex");
    t.lines().any(|l| {
        choosing.is_match(l)
            && (mentions(l).iter().any(|(_, m)| m == label)
                || regex::Regex::new(&format!(r"\b{letter}\b")).expect("regex").is_match(l))
    })
}

/// Whether a line that names `label` (a regex, matched ignoring case), or one of the two
/// non-empty lines under it (a `### Verdict` heading with the word below), holds one of
/// `words` (lower case).
fn labelled(text: &str, label: &str, words: &[&str]) -> bool {
    let t = said(text);
    let label = regex::Regex::new(label).expect("regex");
    let lines: Vec<&str> = t.lines().filter(|l| !l.trim().is_empty()).collect();
    (0..lines.len()).any(|i| {
        label.is_match(lines[i])
            && lines[i..(i + 3).min(lines.len())]
                .iter()
                .any(|l| words.iter().any(|w| l.contains(w)))
    })
}

/// A verdict read is stated where the reader reads it: from JSON, the reply's `verdict`; from
/// text, the last line that speaks of a verdict holds the word (or its translation).
fn states_verdict(text: &str, from: &str, verdict: &str) -> bool {
    if from == "json" {
        return reply_json(text)["verdict"]
            .as_str()
            .is_some_and(|v| v.eq_ignore_ascii_case(verdict));
    }
    let words: &[&str] = match verdict {
        "APPROVE" => &["approve", "aprobar", "approuver", "genehmigen", "aprovar", "approvare"],
        "REVISE" => &["revise", "revisar", "réviser", "reviser", "überarbeiten", "rivedere"],
        "REJECT" => &["reject", "rechazar", "rejeter", "ablehnen", "rejeitar", "respingere"],
        _ => return false,
    };
    labelled(text, r"(?:verdict|veredicto|verdetto|urteil|veredito)", words)
}

/// Every number written in `text` (its reasoning set aside), as written: digits with their
/// separators and decimals, times the scale word after them (`34 million`, `34,000,000` and
/// `34m` are all 34e6; `1 3 4` is three numbers, not 134).
fn numbers_written(text: &str) -> Vec<f64> {
    let re = regex::Regex::new(
        r"(?i)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s*(thousand|million|billion|trillion|k\b|m\b|bn\b|b\b)?",
    )
    .expect("regex");
    re.captures_iter(&answer_text(text))
        .filter_map(|c| {
            let whole = format!("{}{}", c[1].replace(',', ""), c.get(2).map_or("", |m| m.as_str()));
            let v: f64 = whole.parse().ok()?;
            let scale = match c.get(3).map(|m| m.as_str().to_lowercase()).as_deref() {
                Some("thousand" | "k") => 1e3,
                Some("million" | "m") => 1e6,
                Some("billion" | "bn" | "b") => 1e9,
                Some("trillion") => 1e12,
                _ => 1.0,
            };
            Some(v * scale)
        })
        .collect()
}

/// A number read is written in the text it came from, as a number (a percentage as its
/// fraction too): `n` equals one of [`numbers_written`].
fn states_number(text: &str, n: f64) -> bool {
    states_number_as(text, &|w| close(w, n))
}

/// Whether `a` is `b` (as the reader stores what was written).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9_f64.max(b.abs() * 1e-9)
}

/// A number written in `text` (or its percentage's fraction) is `read` as stored.
fn states_number_as(text: &str, read: &dyn Fn(f64) -> bool) -> bool {
    numbers_written(text).iter().any(|&w| read(w) || read(w / 100.0))
}

/// A number read from JSON is the value of one of the reply's fields (anywhere in it).
fn json_holds_number(v: &Value, n: f64) -> bool {
    json_holds(v, &|x| close(x, n))
}

fn json_holds(v: &Value, read: &dyn Fn(f64) -> bool) -> bool {
    match v {
        Value::Number(x) => x.as_f64().is_some_and(read),
        Value::Array(a) => a.iter().any(|i| json_holds(i, read)),
        Value::Object(o) => o.values().any(|i| json_holds(i, read)),
        _ => false,
    }
}

/// A number read is stated where the reader reads it: a field of the reply's JSON, or written
/// in its text.
fn states_number_from(text: &str, from: &str, n: f64) -> bool {
    if from == "json" {
        json_holds_number(&reply_json(text), n)
    } else {
        states_number(text, n)
    }
}

/// A criterion's score read is stated next to its criterion: from JSON, in an object that
/// names the criterion (as a key or a value) and holds the score; from text, on a line that
/// names the criterion.
fn states_score_beside(text: &str, from: &str, criterion: &str, score: f64) -> bool {
    // The readers round a half score written (`3.5`) to the nearest whole one.
    states_score_beside_as(text, from, criterion, &|x| {
        close(x, score) || close((x + 1e-9).round(), score)
    })
}

/// As [`states_score_beside`], the number written being `read` as the score stored (Clarity
/// stores a score to one decimal).
fn states_score_beside_as(
    text: &str,
    from: &str,
    criterion: &str,
    read: &dyn Fn(f64) -> bool,
) -> bool {
    let squash =
        |t: &str| t.split_whitespace().collect::<String>().to_lowercase().replace(['_', '-'], "");
    let name = squash(criterion);
    if from == "json" {
        type Squash<'a> = &'a dyn Fn(&str) -> String;
        fn holds(v: &Value, name: &str, read: &dyn Fn(f64) -> bool, squash: Squash) -> bool {
            match v {
                Value::Object(o) => {
                    let named = o.iter().any(|(k, x)| {
                        squash(k) == name && json_holds(x, read)
                            || x.as_str().is_some_and(|s| squash(s) == name)
                    });
                    let scored = o.values().any(|x| x.as_f64().is_some_and(read));
                    (named && scored)
                        || o.iter().any(|(k, x)| squash(k) == name && json_holds(x, read))
                        || o.values().any(|x| holds(x, name, read, squash))
                }
                Value::Array(a) => a.iter().any(|x| holds(x, name, read, squash)),
                _ => false,
            }
        }
        return holds(&reply_json(text), &name, read, &squash);
    }
    // On the line that names the criterion, or on a score line just under it
    // (`1. **Accuracy**` then `- Score: 3`), not another criterion's line.
    let answer = answer_text(text);
    let lines: Vec<&str> = answer.lines().filter(|l| !l.trim().is_empty()).collect();
    let score_line =
        regex::Regex::new(r"(?i)^[\s\-*_#>]*(?:score|rating|punteggio|puntuaci[oó]n|note)\b")
            .expect("regex");
    (0..lines.len()).any(|i| {
        squash(lines[i]).contains(&name)
            && (states_number_as(lines[i], read)
                || lines[i + 1..(i + 3).min(lines.len())]
                    .iter()
                    .any(|l| score_line.is_match(l) && states_number_as(l, read)))
    })
}

/// With `CONCLAVE_REAL_MODEL_SHOW=1`, prints what the model wrote beside what was read from it,
/// for a person to judge the readers by.
fn show(what: &str, text: &str, read: &Value) {
    if std::env::var("CONCLAVE_REAL_MODEL_SHOW").is_ok_and(|v| v == "1") {
        eprintln!("---- {what}: read {read}\n{}\n", text.trim());
    }
}

fn count(kind: &str, asked: Asked, parsed: usize, unparsed: usize) {
    eprintln!("real model, {kind} ({}): {parsed} parsed, {unparsed} unparsed", asked.word());
}

#[test]
fn the_stated_checks_fail_on_readings_the_text_does_not_state() {
    let l = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let ranking = "A is long, B is short.\n\nFINAL RANKING:\n1. Response C\n2. Response A\n3. Response B\n\nC was best.";
    assert!(states_ranking(ranking, "text", &l(&["Response C", "Response A", "Response B"])));
    assert!(!states_ranking(ranking, "text", &l(&["Response B", "Response A", "Response C"])));
    // CI's SmolLM2 reply: the header's name again later, with no label after it, is no header.
    let twice = "FINAL RANKING:\n1. Response C\n2. Response A\n3. Response B\n\nTo conclude, we must include the final part.\n\nThe FINAL RANKING:\nThe final part must include the phrase \"FINAL RANKING\".";
    assert!(states_ranking(twice, "text", &l(&["Response C", "Response A", "Response B"])));
    assert!(!states_ranking(twice, "text", &l(&["Response A", "Response B", "Response C"])));
    let prose = "Response A is fine, Response B too. My ranking from best to worst is: Response C > Response A > Response B";
    assert!(states_ranking(prose, "text", &l(&["Response C", "Response A", "Response B"])));
    assert!(!states_ranking(prose, "text", &l(&["Response A", "Response B", "Response C"])));
    let json = r#"{"reasoning": "x", "ranking": ["Response B", "Response A"]}"#;
    assert!(states_ranking(json, "json", &l(&["Response B", "Response A"])));
    assert!(!states_ranking(json, "json", &l(&["Response A", "Response B"])));
    // A vote from a passing mention, and a vote the last vote line does not name.
    assert!(states_vote("Response A was long.\nVOTE: Response B", "text", "Response B"));
    assert!(!states_vote("Response A was long.\nVOTE: Response B", "text", "Response A"));
    assert!(!states_vote(r#"{"reasoning": "", "vote": "Response C"}"#, "json", "Response A"));
    assert!(states_vote("Both fine.\nVOTE: B", "text", "Response B"));
    assert!(!states_vote(
        "VOTE: Response C\nThis vote says the response is complete.",
        "text",
        "Response A"
    ));
    assert!(states_vote("I vote for Response A.", "text", "Response A"));
    assert!(!states_vote("Response A was long. Response B was short.", "text", "Response A"));
    // "I would not approve" is no APPROVE.
    assert!(states_verdict("Fine.\nVERDICT: APPROVE", "text", "APPROVE"));
    assert!(!states_verdict("I would not approve this.\nVERDICT: REJECT", "text", "APPROVE"));
    assert!(!states_verdict("I would not approve this.", "text", "APPROVE"));
    assert!(states_verdict("### Verdict\n\nREVISE\n\nThis verdict is based on…", "text", "REVISE"));
    // Numbers as written: 34 is not in "1 3 4"; 34 million is 34e6.
    assert!(!states_number("1 3 4", 34.0));
    assert!(states_number("About 34 million people.", 34e6));
    assert!(states_number("About 34,000,000 people.", 34e6));
    assert!(!states_number("About 3.4 million people.", 34e6));
    assert!(states_number("CONFIDENCE: 85%", 0.85));
    // A score next to its criterion, not the criterion's name alone.
    let review = "Scalability: the design is weak here.\nReliability: 2\nScalability score: 4";
    assert!(states_score_beside(review, "text", "Scalability", 4.0));
    assert!(!states_score_beside(review, "text", "Reliability", 4.0));
    assert!(states_score_beside("1. **Accuracy**\n - Score: 3", "text", "Accuracy", 3.0));
    assert!(states_score_beside("Accuracy: 3.5", "text", "Accuracy", 4.0));
    assert!(!states_score_beside("Accuracy: 3.4", "text", "Accuracy", 4.0));
    assert!(!states_score_beside(
        "Scalability is named, nothing else.",
        "text",
        "Scalability",
        3.0
    ));
    let j = r#"{"scores": [{"criterion": "Scalability", "score": 4}, {"criterion": "Cost", "score": 2}]}"#;
    assert!(states_score_beside(j, "json", "Scalability", 4.0));
    assert!(!states_score_beside(j, "json", "Scalability", 2.0));
    let keyed =
        r#"{"scores": {"Scalability": {"score": 4, "justification": "x"}, "Cost": {"score": 2}}}"#;
    assert!(states_score_beside(keyed, "json", "Scalability", 4.0));
    assert!(!states_score_beside(keyed, "json", "Scalability", 2.0));
}

#[actix_web::test]
async fn council_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "council", "question": "Why is the sky blue? Answer in two sentences.",
                          "councilModels": [MODEL, MODEL, MODEL], "chairmanModel": MODEL });
    for ran in both(&url, "council", request, &[]).await {
        let result = &ran.stored["result"];
        let stage2 = result["stage2"].as_array().cloned().unwrap_or_default();
        let (mut parsed, mut unparsed) = (0, 0);
        for r in &stage2 {
            let text = r["ranking"].as_str().unwrap_or("");
            show("ranking", text, &json!({ "places": r["places"], "unparsed": r["unparsed"] }));
            let order: Vec<String> =
                serde_json::from_value(r["parsedRanking"].clone()).unwrap_or_default();
            if order.is_empty() {
                unparsed += 1;
                assert!(r["unparsed"].is_string(), "an unread ranking says why: {r}");
            } else {
                parsed += 1;
                let from = read_from(r);
                assert!(states_ranking(text, from, &order), "{order:?} is not stated: {text}");
            }
        }
        count("council rankings", ran.asked, parsed, unparsed);
        let meta = &result["stage2Metadata"];
        assert_eq!(meta["rankingsCounted"], json!(parsed));
        assert_eq!(meta["unparsedRankings"], json!(unparsed));
        // Three members of one model are told apart.
        let members: Vec<&str> = result["stage1"]
            .as_array()
            .map(|a| a.iter().filter_map(|s| s["model"].as_str()).collect())
            .unwrap_or_default();
        assert!(members.iter().all(|m| m.starts_with("local/smollm2 #")), "{members:?}");
        // The title is a title, not a cut sentence.
        let title = ran.stored["title"].as_str().unwrap_or("");
        assert!(!title.is_empty() && title.split_whitespace().count() <= 8, "{title}");
    }
}

#[actix_web::test]
async fn vote_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "vote", "question": "Which is the best first programming language?",
                          "modeConfig": { "models": [MODEL, MODEL, MODEL], "chairmanModel": MODEL } });
    let text_failures = ["All votes were invalid", "No vote came back"];
    for ran in both(&url, "vote", request, &text_failures).await {
        let result = &ran.stored["result"];
        let votes = result["voteRound"]["votes"].as_array().cloned().unwrap_or_default();
        let (mut parsed, mut unparsed) = (0, 0);
        for v in &votes {
            let text = v["voteText"].as_str().unwrap_or("");
            show("vote", text, &json!({ "votedFor": v["votedFor"], "unparsed": v["unparsed"] }));
            match v["votedFor"].as_str() {
                Some(l) => {
                    parsed += 1;
                    assert!(states_vote(text, read_from(v), l), "{l} is not the vote in: {text}");
                }
                None => {
                    unparsed += 1;
                    assert!(v["unparsed"].is_string(), "an invalid ballot says why: {v}");
                }
            }
        }
        count("vote ballots", ran.asked, parsed, unparsed);
        if ran.stored["status"] == "failed" {
            assert_eq!(parsed, 0, "a vote with valid ballots does not fail: {}", ran.stored);
        }
        if let Some(t) = result["tiebreaker"].as_object() {
            if let Some(l) = t["votedFor"].as_str() {
                let text = t["voteText"].as_str().unwrap_or("");
                let from = if reply_json_fits(text) { "json" } else { "text" };
                assert!(states_vote(text, from, l), "the tiebreak {l} is not stated: {text}");
            }
        }
    }
}

/// Whether a reply is one JSON object (as a structured reply is).
fn reply_json_fits(text: &str) -> bool {
    let answer = answer_text(text);
    serde_json::from_str::<Value>(answer.trim()).is_ok_and(|v| v.is_object())
}

#[actix_web::test]
async fn jury_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "jury", "question": "Evaluate this answer",
                          "modeConfig": { "content": "The capital of Australia is Sydney, its largest city.",
                                          "originalQuestion": "What is the capital of Australia?",
                                          "jurorModels": [MODEL, MODEL, MODEL], "foremanModel": CHAIR } });
    for ran in both(&url, "jury", request, &[]).await {
        let (mut verdicts, mut no_verdict, mut scores, mut no_score) = (0, 0, 0, 0);
        // Each juror's reply as stored, beside what was read from it.
        for row in ran.stages.iter().filter(|r| r["stageType"] == "deliberation") {
            let text = row["content"].as_str().unwrap_or("");
            let j = &row["parsedData"];
            show(
                "juror",
                text,
                &json!({ "verdict": j["verdict"], "scores": j["scores"], "unparsed": j["unparsed"] }),
            );
            let read_any = j["verdict"].is_string()
                || j["scores"].as_object().is_some_and(|m| m.values().any(Value::is_number));
            if !read_any {
                no_verdict += 1;
                assert!(j.get("readFrom").is_none(), "nothing read, nothing read from: {j}");
                continue;
            }
            let from = read_from(j);
            match j["verdict"].as_str() {
                Some(v) => {
                    verdicts += 1;
                    assert!(states_verdict(text, from, v), "verdict {v} is not stated in: {text}");
                }
                None => no_verdict += 1,
            }
            for (dimension, s) in j["scores"].as_object().cloned().unwrap_or_default() {
                match s.as_f64() {
                    Some(n) => {
                        scores += 1;
                        assert!((1.0..=10.0).contains(&n), "{dimension}: {n}");
                        assert!(
                            states_score_beside(text, from, &dimension, n),
                            "{dimension} {n} is not stated in: {text}"
                        );
                    }
                    None => no_score += 1,
                }
            }
        }
        count("jury verdicts", ran.asked, verdicts, no_verdict);
        count("jury scores", ran.asked, scores, no_score);
    }
}

#[actix_web::test]
async fn debate_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "debate", "question": "Should schools start later in the morning?",
                          "modeConfig": { "models": [MODEL, MODEL, MODEL] } });
    let text_failures = ["All votes failed to parse", "No vote came back"];
    for ran in both(&url, "debate", request, &text_failures).await {
        let (mut decided, mut undecided) = (0, 0);
        for row in ran.stages.iter().filter(|r| r["stageType"] == "revision") {
            let text = row["content"].as_str().unwrap_or("");
            let r = &row["parsedData"];
            show(
                "revision",
                text,
                &json!({ "decision": r["decision"], "unparsed": r["unparsed"] }),
            );
            match r["decision"].as_str() {
                Some(d) => {
                    decided += 1;
                    assert!(matches!(d, "REVISE" | "STAND" | "MERGE"), "{d}");
                    let stated = match read_from(r) {
                        "json" => reply_json(text)["decision"] == d,
                        _ => labelled(
                            text,
                            r"(?:decision|choice|decisi[oó]n|entscheidung)",
                            &[&d.to_lowercase()],
                        ),
                    };
                    assert!(stated, "decision {d} is not stated in: {text}");
                }
                None => undecided += 1,
            }
        }
        count("debate decisions", ran.asked, decided, undecided);
        let votes = ran.stored["result"]["votes"]["votes"].as_array().cloned().unwrap_or_default();
        let (mut parsed, mut unparsed) = (0, 0);
        for v in &votes {
            let text = v["voteText"].as_str().unwrap_or("");
            show(
                "debate vote",
                text,
                &json!({ "votedFor": v["votedFor"], "unparsed": v["unparsed"] }),
            );
            match v["votedFor"].as_str() {
                Some(l) => {
                    parsed += 1;
                    assert!(states_vote(text, read_from(v), l), "{l} is not the vote in: {text}");
                }
                None => unparsed += 1,
            }
        }
        count("debate votes", ran.asked, parsed, unparsed);
    }
}

#[actix_web::test]
async fn delphi_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "delphi", "question": "How many people live in Tokyo's metropolitan area?",
                          "modeConfig": { "panelistModels": [MODEL, MODEL, MODEL], "facilitatorModel": CHAIR,
                                          "maxRounds": 2 } });
    let text_failures = ["valid estimate(s) in round"];
    for ran in both(&url, "delphi", request, &text_failures).await {
        let (mut parsed, mut unparsed) = (0, 0);
        for round in ran.stored["result"]["rounds"].as_array().cloned().unwrap_or_default() {
            for e in round["estimates"].as_array().cloned().unwrap_or_default() {
                let text = e["text"].as_str().unwrap_or("");
                show(
                    "estimate",
                    text,
                    &json!({ "estimate": e["estimate"], "confidence": e["confidence"], "unparsed": e["unparsed"] }),
                );
                let Some(n) = e["estimate"].as_f64() else {
                    unparsed += 1;
                    continue;
                };
                parsed += 1;
                // An estimate carried forward was read in an earlier round (and checked
                // there): this round's reply was not read, and says so.
                if e.get("readFrom").is_none() {
                    assert_eq!(e["carriedForward"], true, "an estimate read says where from: {e}");
                    continue;
                }
                assert!(!text.is_empty(), "an estimate read is read from a text: {e}");
                let from = read_from(&e);
                assert!(states_number_from(text, from, n), "estimate {n} is not stated in: {text}");
            }
        }
        count("delphi estimates", ran.asked, parsed, unparsed);
    }
}

#[actix_web::test]
async fn clarity_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "clarity", "question": "Score this brief",
                          "modeConfig": { "content": "Brief: build a mobile app that lets residents report potholes with a photo and location; the city fixes them within 14 days. Budget 80k. Launch in spring.",
                                          "models": { "skeptic": MODEL, "advocate": MODEL,
                                                      "generalist": MODEL, "arbiter": MODEL } } });
    let text_failures = ["Fewer than 2 evaluators returned readable scores"];
    for ran in both(&url, "clarity", request, &text_failures).await {
        let (mut parsed, mut unparsed) = (0, 0);
        // Every scorecard (evaluations, and discussion rounds when there were some) as stored.
        for row in ran.stages.iter().filter(|r| r["parsedData"]["critique"].is_string()) {
            let text = row["content"].as_str().unwrap_or("");
            let v = &row["parsedData"];
            show("scorecard", text, &json!({ "scores": v["scores"], "unparsed": v["unparsed"] }));
            if v["parseSuccess"] != true {
                unparsed += 1;
                assert!(v["unparsed"].is_string(), "an unread scorecard says why: {v}");
                continue;
            }
            parsed += 1;
            let from = read_from(v);
            for (key, s) in v["scores"].as_object().cloned().unwrap_or_default() {
                let Some(n) = s.as_f64() else { continue };
                assert!((0.0..=10.0).contains(&n), "{key}: {n}");
                // Stored to one decimal, as the spec has it: 0.72 stated is 0.7 read.
                let tenths = |x: f64| close((x * 10.0).round() / 10.0, n);
                assert!(
                    states_score_beside_as(text, from, &key, &tenths),
                    "{key} {n} is not stated in: {text}"
                );
            }
        }
        count("clarity scorecards", ran.asked, parsed, unparsed);
    }
}

#[actix_web::test]
async fn red_team_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "red_team", "question": "Review this login handler for security flaws.",
                          "modeConfig": { "content": "def login(user, pw):\n    q = \"SELECT * FROM users WHERE name='\" + user + \"' AND pw='\" + pw + \"'\"\n    return db.execute(q).fetchone() is not None",
                                          "generatorModel": MODEL, "attackerModel": CHAIR, "rounds": 1 } });
    for ran in both(&url, "red_team", request, &[]).await {
        let (mut parsed, mut unparsed) = (0, 0);
        for round in ran.stored["result"]["rounds"].as_array().cloned().unwrap_or_default() {
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
        count("red team attack reports", ran.asked, parsed, unparsed);
        if let Some(s) = ran.stored["result"]["synthesis"].as_object() {
            let level = s["hardeningConfidence"].as_str();
            assert!(level.is_none_or(|l| ["High", "Medium", "Low"].contains(&l)), "{level:?}");
            if let Some(l) = level {
                let answer = said(ran.stored["answer"].as_str().unwrap_or(""));
                let stated = answer.contains("confidence") && answer.contains(&l.to_lowercase());
                assert!(stated, "{l} is not stated: {answer}");
            }
        }
        // Every attack and defence read says where from, and a JSON one's findings are its own.
        for row in ran.stages.iter().filter(|r| r["parsedData"].get("readFrom").is_some()) {
            let d = &row["parsedData"];
            if read_from(d) == "json" && d["findings"].is_array() {
                let stated = reply_json(row["content"].as_str().unwrap_or(""))["findings"]
                    .as_array()
                    .map_or(0, Vec::len);
                assert_eq!(d["findings"].as_array().map_or(0, Vec::len), stated, "{d}");
            }
        }
    }
}

#[actix_web::test]
async fn peer_review_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "peer_review", "question": "Review this design for an upload service.",
                          "modeConfig": { "content": "Uploads go from the browser to one API server, which writes them to a local disk and records them in one PostgreSQL instance. A nightly cron job copies the disk to S3.",
                                          "reviewType": "architecture_review",
                                          "reviewerModels": [MODEL, MODEL], "consolidatorModel": CHAIR } });
    for ran in both(&url, "peer_review", request, &[]).await {
        let result = &ran.stored["result"];
        let (mut parsed, mut unparsed) = (0, 0);
        for r in result["reviews"].as_array().cloned().unwrap_or_default() {
            let text = r["reviewText"].as_str().unwrap_or("");
            show(
                "peer review",
                text,
                &json!({ "scores": r["scores"], "findings": r["findings"].as_array().map_or(0, Vec::len), "parseSuccess": r["parseSuccess"] }),
            );
            if r["parseSuccess"] != true {
                unparsed += 1;
                continue;
            }
            parsed += 1;
            let from = read_from(&r);
            // Every score read is on the scale and stated next to its criterion.
            for sc in r["scores"].as_array().cloned().unwrap_or_default() {
                if let Some(v) = sc["score"].as_f64() {
                    assert!((1.0..=5.0).contains(&v), "{sc}");
                    let name = sc["criterion"].as_str().unwrap_or("");
                    assert!(
                        states_score_beside(text, from, name, v),
                        "{name} {v} is not stated in: {text}"
                    );
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
        }
        count("peer reviews", ran.asked, parsed, unparsed);
        if let Some(st) = result["statistics"].as_object() {
            for c in st["consensusScores"].as_array().cloned().unwrap_or_default() {
                if let Some(sd) = c["stddev"].as_f64() {
                    assert!((0.0..=2.0).contains(&sd), "{c}");
                }
            }
        }
        if ran.stored["status"] == "completed" {
            assert_eq!(ran.stored["answer"], result["consolidation"]["consolidatedReport"]);
        }
    }
}

#[actix_web::test]
async fn fact_check_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "fact_check", "question": "Fact-check this paragraph.",
                          "modeConfig": { "content": "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is about 330 metres tall. It was the tallest structure in the world until 1930.",
                                          "extractorModel": MODEL, "checkerModels": [MODEL, CHAIR],
                                          "reporterModel": CHAIR } });
    let text_failures = ["checkers gave a usable check", "checker gave no usable check"];
    for ran in both(&url, "fact_check", request, &text_failures).await {
        let result = &ran.stored["result"];
        let claims = result["claims"].as_array().cloned().unwrap_or_default();
        show(
            "fact-check extraction",
            result["extract"]["model"].as_str().unwrap_or(""),
            &json!({ "claims": claims, "parseSuccess": result["extract"]["parseSuccess"],
                     "notInContent": result["extract"]["notInContent"] }),
        );
        for (i, c) in claims.iter().enumerate() {
            assert_eq!(c["id"], format!("claim_{}", i + 1));
            assert!(
                c["type"].is_null()
                    || c["type"]
                        .as_str()
                        .is_some_and(|t| t.chars().all(|ch| ch.is_ascii_uppercase())),
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
                read_from(&k);
            } else {
                unparsed += 1;
            }
        }
        count("fact-check checks", ran.asked, parsed, unparsed);
        for c in result["consensus"].as_array().cloned().unwrap_or_default() {
            assert!(c["agreementRate"].as_u64().is_some_and(|a| a <= 100), "{c}");
        }
        if ran.stored["status"] == "completed" {
            assert_eq!(ran.stored["answer"], result["report"]["report"]);
            let score = &result["report"]["reliabilityScore"];
            assert!(score.is_null() || score.as_u64().is_some_and(|s| s <= 100), "{score}");
        }
    }
}

#[actix_web::test]
async fn chain_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "chain", "question": "Write three sentences on why backups matter.",
                          "modeConfig": { "steps": [ { "model": MODEL, "mandate": "draft" },
                                                     { "model": CHAIR, "mandate": "polish_format" } ] } });
    // Chain reads no reply (every step is text a person reads): both runs must complete.
    for ran in both(&url, "chain", request, &[]).await {
        let result = &ran.stored["result"];
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
        assert!(done > 0, "no chain step was written: {result}");
        count("chain steps completed", ran.asked, done, skipped);
        assert_eq!(ran.stored["answer"], result["finalContent"]);
    }
}

#[actix_web::test]
async fn blueprint_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "blueprint", "question": "Design doc for a home backup service",
                          "modeConfig": { "content": "Back up three laptops nightly to a NAS, keep 30 days of versions, copy weekly to the cloud, alert on failure.",
                                          "architectModel": MODEL, "authorModels": [MODEL, CHAIR],
                                          "assemblerModel": CHAIR } });
    for ran in both(&url, "blueprint", request, &["that could be read; at least"]).await {
        let result = &ran.stored["result"];
        let outline = &result["outline"];
        let planned = outline["sections"].as_array().cloned().unwrap_or_default();
        show(
            "blueprint outline",
            outline["documentTitle"].as_str().unwrap_or(""),
            &json!({ "sections": planned.len(), "warnings": outline["warnings"] }),
        );
        // What was read is consistent: numbered 1..n, a length each (Medium when none was
        // named), authors in rotation; read from JSON, every section's title is the reply's.
        let outline_row = ran.stages.iter().find(|r| r["parsedData"]["readFrom"].is_string());
        for (i, s) in planned.iter().enumerate() {
            assert_eq!(s["number"], i + 1);
            assert!(matches!(s["length"].as_str(), Some("Short" | "Medium" | "Long")), "{s}");
            if s["lengthDefaulted"] == true {
                assert_eq!(s["length"], "Medium");
            }
            assert_eq!(s["assignedModel"], [MODEL, CHAIR][i % 2]);
            let title = s["title"].as_str().unwrap_or("");
            assert!(!title.trim().is_empty(), "{s}");
            if let Some(row) = outline_row.filter(|r| r["parsedData"]["readFrom"] == "json") {
                let reply = row["content"].as_str().unwrap_or("");
                assert!(reply.contains(title), "{title} is not a title of the reply: {reply}");
            }
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
                        assert!(
                            lower.contains(&w.to_lowercase()),
                            "{t} is not covered by: {content}"
                        );
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
        count("blueprint sections written", ran.asked, written, failed);
        if ran.stored["status"] == "completed" {
            let document = result["assembly"]["document"].as_str().unwrap_or("");
            assert_eq!(ran.stored["answer"].as_str(), Some(document));
            for m in result["assembly"]["todoMarkers"].as_array().cloned().unwrap_or_default() {
                assert!(document.contains(m.as_str().unwrap_or("")), "{m} is not in the document");
            }
        } else {
            assert!(planned.len() < 3, "a failed blueprint read too few sections: {}", ran.stored);
        }
    }
}

#[actix_web::test]
async fn specialist_panel_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "specialist_panel", "question": "Assess this plan for a small web shop.",
                          "modeConfig": { "content": "Move the shop from one VM to a managed Kubernetes cluster next month; keep the database on the VM; deploy by hand.",
                                          "specialists": [ { "roleId": "security_expert", "model": MODEL },
                                                           { "roleId": "cost_analyst", "model": CHAIR } ],
                                          "synthesizerModel": MODEL } });
    for ran in both(&url, "specialist_panel", request, &[]).await {
        let result = &ran.stored["result"];
        let (mut parsed, mut unparsed) = (0, 0);
        for sp in result["specialists"].as_array().cloned().unwrap_or_default() {
            let report = sp["report"].as_str().unwrap_or("");
            show(
                "specialist report",
                report,
                &json!({ "role": sp["roleKey"], "scores": sp["criteriaScores"], "average": sp["averageScore"] }),
            );
            // Every rating read is on the scale and stated next to its criterion: nothing is
            // inferred from prose.
            let mut ratings = Vec::new();
            for c in sp["criteriaScores"].as_array().cloned().unwrap_or_default() {
                if let Some(score) = c["score"].as_f64() {
                    assert!((1.0..=5.0).contains(&score), "{c}");
                    let name = c["criterion"].as_str().unwrap_or("");
                    let from = read_from(&sp);
                    assert!(
                        states_score_beside(report, from, name, score),
                        "{name} {score} is not stated in: {report}"
                    );
                    ratings.push(score);
                }
            }
            assert_eq!(sp["parseSuccess"], !ratings.is_empty(), "{sp}");
            match sp["averageScore"].as_f64() {
                Some(a) => {
                    let mean = ratings.iter().sum::<f64>() / ratings.len() as f64;
                    assert!((a - mean).abs() <= 0.05, "{a} is not the mean of {ratings:?}");
                }
                None => assert!(ratings.is_empty()),
            }
            assert!(sp["topRecommendations"].as_array().is_some_and(|r| r.len() <= 3));
            if sp["parseSuccess"] == true {
                parsed += 1;
            } else {
                unparsed += 1;
            }
        }
        count("specialist reports", ran.asked, parsed, unparsed);
        if let Some(syn) = result["synthesis"].as_object() {
            let answer = said(syn["integratedAssessment"].as_str().unwrap_or(""));
            for row in syn["riskMatrix"].as_array().cloned().unwrap_or_default() {
                if let Some(l) = row["level"].as_str() {
                    assert!(["Critical", "High", "Medium", "Low"].contains(&l), "{row}");
                    assert!(answer.contains(&l.to_lowercase()), "{l} is not stated");
                }
            }
            assert_eq!(ran.stored["answer"], syn["integratedAssessment"]);
        }
    }
}

#[actix_web::test]
async fn confidence_weighted_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "confidence_weighted", "question": "What is caffeine's half-life in adults?",
                          "modeConfig": { "models": [MODEL, CHAIR], "synthesisModel": CHAIR } });
    for ran in both(&url, "confidence_weighted", request, &[]).await {
        let result = &ran.stored["result"];
        let (mut parsed, mut unparsed) = (0, 0);
        // The replies as the models wrote them: the stored rows of the answers, in order.
        // Each model's reply (the two members are different model names), as stored: rows are
        // stored as replies arrive, not in the answers' order.
        let texts: Vec<(String, String)> = ran
            .stages
            .iter()
            .filter(|s| s["parsedData"].get("confidence").is_some())
            .map(|s| {
                let model = s["model"].as_str().expect("a stage row names its model");
                (model.to_string(), s["content"].as_str().unwrap_or("").to_string())
            })
            .collect();
        for a in result["answers"].as_array().cloned().unwrap_or_default() {
            let c = a["confidence"].as_f64().unwrap_or(-1.0);
            assert!((0.0..=1.0).contains(&c), "{a}");
            let model = a["model"].as_str().expect("an answer names its model");
            let text = texts
                .iter()
                .find(|(m, _)| m == model)
                .map(|(_, t)| t.clone())
                .unwrap_or_else(|| panic!("no stored reply of {model}"));
            show(
                "confidence-weighted answer",
                &text,
                &json!({ "confidence": c, "parsed": a["parsedSuccessfully"], "reasoning": a["confidenceReasoning"] }),
            );
            if a["parsedSuccessfully"] == true {
                parsed += 1;
                assert!(!text.is_empty(), "the answer's reply is stored: {a}");
                // A stated confidence is written where it was read (a clamped one was stated
                // out of range and brought into it, so it is not written as read).
                if a["clamped"] != true {
                    // Written as a fraction, a percentage or out of ten (`CONFIDENCE: 8`).
                    let stated = match read_from(&a) {
                        "json" => states_number_from(&text, "json", c),
                        _ => states_number_as(&text, &|w| close(w, c) || close(w / 10.0, c)),
                    };
                    assert!(stated, "{c} is not stated in: {text}");
                }
            } else {
                unparsed += 1;
                assert_eq!(c, 0.5, "an unstated confidence is the default: {a}");
            }
            assert!(!a["response"].as_str().unwrap_or("").trim().is_empty(), "{a}");
        }
        count("confidences", ran.asked, parsed, unparsed);
        if let Some(w) = result["weights"]["weights"].as_array() {
            let sum: f64 = w.iter().map(|x| x["normalizedWeight"].as_f64().unwrap_or(0.0)).sum();
            assert!((sum - 1.0).abs() < 1e-9, "{w:?}");
        }
        if ran.stored["status"] == "completed" {
            assert_eq!(ran.stored["answer"], result["synthesis"]["synthesis"]);
        }
    }
}

#[actix_web::test]
async fn tournament_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "tournament", "question": "Name one good habit for writing maintainable code, in two sentences.",
                          "modeConfig": { "contestantModels": [MODEL, MODEL, MODEL, MODEL], "judgeModel": CHAIR } });
    let winner_line = regex::Regex::new(r"(?i)winner[*_ ]*:([^\n]*)").expect("regex");
    for ran in both(&url, "tournament", request, &[]).await {
        let result = &ran.stored["result"];
        let (mut read, mut unread) = (0, 0);
        for row in ran
            .stages
            .iter()
            .filter(|r| r["stageType"].as_str().is_some_and(|t| t.contains("_match_")))
        {
            let m = &row["parsedData"];
            let text = row["content"].as_str().unwrap_or("");
            show("tournament match", text, m);
            let (a, b, w) = (&m["shownAsA"], &m["shownAsB"], &m["winnerSeed"]);
            // The winner is one of the two shown, under the label it was shown as.
            let label = if w == a { "Response A" } else { "Response B" };
            assert!(w == a || w == b, "{m}");
            assert_eq!(m["winnerLabel"], label, "{m}");
            match m["decidedBy"].as_str() {
                Some("judge" | "judge_retry") => {
                    read += 1;
                    // The side stated is the one read: the JSON's `winner`, the last
                    // `WINNER:` line of the reply that decided, or (with no such line) a
                    // closing paragraph that names only that side and says it is preferred.
                    let stated = match read_from(m) {
                        "json" => reply_json(text)["winner"] == label,
                        _ => {
                            let answer = answer_text(text);
                            let letter = &label[label.len() - 1..];
                            match winner_line.captures_iter(&answer).last() {
                                Some(c) => {
                                    let rest = c[1].trim().trim_matches([
                                        '*', '_', '`', '(', ')', '[', ']', '.', '!', ' ',
                                    ]);
                                    mentions(rest).first().is_some_and(|(_, x)| x == label)
                                        || rest.eq_ignore_ascii_case(letter)
                                }
                                None => {
                                    // The closing paragraph names only that side, in a
                                    // phrase that prefers it.
                                    let last = answer.trim().rsplit("\n\n").next().unwrap_or("");
                                    let named = mentions(last);
                                    let prefers = regex::Regex::new(&format!(
                                        r"(?i)response\s+{letter}\b[*_]*\s+(?:is|was|seems|looks|appears|remains|wins|outperforms|edges|comes)\b|(?:prefer|choose|chose|pick|picked|select|selected|favou?r|go\s+with|recommend)\s+(?:\w+\s+)?response\s+{letter}\b"
                                    ))
                                    .expect("regex");
                                    !named.is_empty()
                                        && named.iter().all(|(_, x)| x == label)
                                        && prefers.is_match(last)
                                }
                            }
                        }
                    };
                    assert!(stated, "{label} is not the side stated in: {text}");
                }
                Some("coin_flip" | "default_seed") => {
                    unread += 1;
                    assert!(m.get("readFrom").is_none(), "{m}");
                }
                other => panic!("decidedBy {other:?}: {m}"),
            }
        }
        count("tournament matches judged", ran.asked, read, unread);
        if ran.stored["status"] == "completed" {
            assert_eq!(ran.stored["answer"], result["champion"]["response"]);
            let seed = result["champion"]["seed"].as_u64().unwrap_or(0) as usize;
            assert_eq!(
                result["contestants"][seed.saturating_sub(1)]["response"],
                ran.stored["answer"]
            );
        }
    }
}

#[actix_web::test]
async fn brainstorm_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "brainstorm", "question": "How could a small library attract more teenagers?",
                          "modeConfig": { "models": [MODEL, MODEL, CHAIR], "curatorModel": CHAIR,
                                          "refinerModel": CHAIR, "minIdeasPerModel": 3, "maxClusters": 3 } });
    for ran in both(&url, "brainstorm", request, &["models produced ideas"]).await {
        let result = &ran.stored["result"];
        let (mut read, mut unread) = (0, 0);
        let mut ids = std::collections::HashSet::new();
        for m in result["ideas"]["models"].as_array().cloned().unwrap_or_default() {
            show("brainstorm ideas", m["model"].as_str().unwrap_or(""), &m);
            let n = m["ideaCount"].as_u64().unwrap_or(0);
            assert!(n <= 10, "{m}");
            let ideas = m["ideas"].as_array().cloned().unwrap_or_default();
            assert_eq!(ideas.len() as u64, n, "{m}");
            for (k, idea) in ideas.iter().enumerate() {
                assert_eq!(idea["id"], format!("model_{}_idea_{}", m["index"], k + 1));
                assert!(!idea["title"].as_str().unwrap_or("").trim().is_empty(), "{idea}");
                ids.insert(idea["id"].as_str().unwrap_or("").to_string());
            }
            if n > 0 {
                read += 1
            } else {
                unread += 1
            }
        }
        count("brainstorm idea lists read", ran.asked, read, unread);
        // Clusters hold only ideas of this run, each at most once.
        if let Some(c) = result["clustering"].as_object() {
            show("brainstorm clusters", c["model"].as_str().unwrap_or(""), &result["clustering"]);
            let mut seen = std::collections::HashSet::new();
            for cl in c["clusters"].as_array().cloned().unwrap_or_default() {
                let members = cl["ideaIds"].as_array().cloned().unwrap_or_default();
                assert!(!members.is_empty(), "{cl}");
                for id in members {
                    let id = id.as_str().unwrap_or("").to_string();
                    assert!(ids.contains(&id), "{id} is no idea of this run: {cl}");
                    assert!(seen.insert(id.clone()), "{id} is in two clusters");
                }
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
        count("brainstorm scorers read", ran.asked, valid, invalid);
        if ran.stored["status"] == "completed" {
            assert_eq!(ran.stored["answer"], result["refinement"]["proposal"]);
        }
    }
}

#[actix_web::test]
async fn decompose_against_the_real_model() {
    let Some(url) = real_model().await else { return };
    let request = json!({ "mode": "decompose", "question": "Plan a one-day team offsite: venue, agenda and budget.",
                          "modeConfig": { "plannerModel": CHAIR, "workerModels": [MODEL, MODEL],
                                          "assemblerModel": CHAIR, "maxTasks": 4 } });
    let failures = ["No task could be read from the planner's plan"];
    for ran in both(&url, "decompose", request, &failures).await {
        let result = &ran.stored["result"];
        let plan = &result["plan"];
        let tasks = plan["tasks"].as_array().cloned().unwrap_or_default();
        show("decompose plan", plan["firstReply"].as_str().unwrap_or(""), &json!(tasks));
        count(
            "decompose plans read",
            ran.asked,
            usize::from(!tasks.is_empty()),
            usize::from(tasks.is_empty()),
        );
        // Whatever the model wrote, the plan the server ran is a DAG within maxTasks, each task
        // in exactly one wave after all its dependencies.
        assert!(tasks.len() <= 4, "{plan}");
        let waves: Vec<Vec<String>> =
            serde_json::from_value(plan["executionWaves"].clone()).unwrap_or_default();
        assert_eq!(waves.iter().map(Vec::len).sum::<usize>(), tasks.len(), "{plan}");
        let wave_of = |id: &str| waves.iter().position(|w| w.iter().any(|x| x == id));
        for t in &tasks {
            let id = t["id"].as_str().expect("a task has an id");
            assert!(wave_of(id).is_some(), "{id} is in no wave: {plan}");
            for d in t["dependencies"].as_array().cloned().unwrap_or_default() {
                let d = d.as_str().expect("a dependency is an id");
                assert!(wave_of(d).is_some() && wave_of(d) < wave_of(id), "{t}");
            }
            assert!(["LOW", "MEDIUM", "HIGH"].contains(&t["complexity"].as_str().unwrap_or("")));
        }
        if ran.stored["status"] == "completed" {
            assert!(!tasks.is_empty(), "a completed decompose ran a plan: {plan}");
            assert_eq!(ran.stored["answer"], result["assembly"]["response"]);
        }
    }
}

/// `conclave eval` of the sample set's first questions on the real model, its route asking
/// for structured output as a user's would: each member alone and their majority. Prints the
/// table (run with `--nocapture`), whatever it shows, with the unparsed share; asserts what
/// holds for any model: every arm answered every question, grades add up, tokens were
/// recorded, and the jury arm's figures are consistent and within its budget.
#[actix_web::test]
async fn eval_of_the_sample_set_on_the_real_model() {
    let Some(url) = real_model().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("conclave.toml");
    std::fs::write(
        &config,
        format!(
            "[[routes]]\nprefix = \"local/\"\nbase_url = \"{url}\"\nmax_concurrent_calls = 3\n\
             max_tokens = 256\nstructured_output = \"json_schema\"\n"
        ),
    )
    .unwrap();
    let db = format!("sqlite://{}", dir.path().join("eval.db").display());
    let members = "local/smollm2-a,local/smollm2-b,local/smollm2-c";
    let eval = |extra: &[&str]| {
        crate::cli::conclave()
            .env("CONCLAVE_CONFIG", &config)
            .env("DATABASE_URL", &db)
            .args(["eval", "sample", "--members", members, "--arms", "single,majority"])
            .args(["--limit", "8", "--concurrency", "3"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = eval(&["--json", "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let arms = v["arms"].as_array().expect("the eval lists its arms");
    // Three single members and the majority.
    assert_eq!(arms.len(), 4, "{v}");
    let field = |a: &Value, f: &str| -> u64 {
        a[f].as_u64().unwrap_or_else(|| panic!("arm {} has no count {f}: {a}", a["arm"]))
    };
    let (mut unparsed, mut graded) = (0, 0);
    for a in arms {
        let n = field(a, "n");
        assert_eq!(n, 8, "{a}");
        let (correct, unread) = (field(a, "correct"), field(a, "unparsed"));
        // An unparsed answer is never counted correct.
        assert!(correct + unread <= n, "grades add up to more than n: {a}");
        assert!(field(a, "promptTokens") > 0 && field(a, "completionTokens") > 0, "{a}");
        unparsed += unread;
        graded += n;
    }
    eprintln!(
        "real model, eval of 8 sample questions with structured output on: {unparsed} of \
         {graded} answers unparsed ({:.0}%)",
        100.0 * unparsed as f64 / graded as f64
    );
    // The table of the same eval: resumed by id, nothing is left to run.
    let id = v["evalId"].as_str().expect("evalId");
    let table = crate::cli::conclave()
        .env("CONCLAVE_CONFIG", &config)
        .env("DATABASE_URL", &db)
        .args(["eval", "--resume", id, "--quiet"])
        .output()
        .unwrap();
    assert!(table.status.success(), "{}", String::from_utf8_lossy(&table.stderr));
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
    assert!(total > 0, "the jury eval made no call");
    assert!(total <= 12_000, "{total} tokens of a 12000-token budget");
    let jury = v["arms"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["arm"] == "jury"))
        .unwrap_or_else(|| panic!("the eval has a jury arm: {v}"));
    let j = &jury["jury"];
    let jf =
        |f: &str| -> u64 { j[f].as_u64().unwrap_or_else(|| panic!("jury has no {f}: {jury}")) };
    let n = field(jury, "n");
    assert!(jf("judged") <= n, "{jury}");
    assert!(jf("verdictsRight") <= jf("judged"), "{jury}");
    assert!(jf("approved") <= jf("judged"), "{jury}");
    assert!(jf("approvedCorrect") <= jf("approved"), "{jury}");
    println!(
        "jury arm on the real model ({total} of 12000 tokens): {}",
        serde_json::to_string_pretty(&v).unwrap()
    );
}

#[actix_web::test]
async fn an_attached_file_reaches_the_real_model_and_its_reply_is_stored() {
    let Some(url) = real_model().await else { return };
    let app = app_for(&url, Asked::Text).await;
    let notes = "Team offsite notes\n\nThe offsite is in Lisbon on 14 May. Budget: 12,000 EUR.\n";
    let files = [("offsite.md", "text/markdown", notes.as_bytes())];
    let (status, up) = crate::attachments::upload_as(&app, &app.http, &files).await;
    assert_eq!(status, 201, "{up}");
    let id = up["attachments"][0]["id"].as_str().unwrap().to_string();
    let request = json!({ "mode": "solo", "question": "Where is the offsite, according to the attached notes?",
                          "modeConfig": { "model": MODEL }, "attachments": [id] });
    let (stored, events, stages) = run(&app, request).await;
    // Whatever a 135M model makes of it, the run ends, its reply is stored, and the file is
    // listed with the run.
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["attachments"][0]["name"], "offsite.md");
    assert!(!stages.is_empty(), "the reply is stored");
    let answer = stored["answer"].as_str().unwrap_or("");
    assert!(!answer.trim().is_empty(), "{stored}");
    let prompt_tokens = stored["usage"]["promptTokens"].as_u64().unwrap_or(0);
    // The notes went with the question: the prompt is longer than the question alone.
    assert!(prompt_tokens > 40, "{}", stored["usage"]);
    eprintln!("real model, attached notes: {} event(s); answer: {answer}", events.len());
    app.stop().await;
}
