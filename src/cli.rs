//! The terminal client: `conclave run <mode> "question" ...` runs a deliberation in-process,
//! shows progress per model and stage on stderr as events arrive, and prints the result on
//! stdout (the answer, or the whole result with `--json`). Ctrl-C cancels the run.
//!
//! The answer is printed without its reasoning trace (a `<think>` block), unless
//! `--show-reasoning`; `--json` prints the result as stored, traces included.

pub mod eval;

use crate::engine::Viewer;
use std::io::Write;

use serde_json::{json, Map, Value};

use crate::app::{start_engine, AppError, Role};
use crate::config::Config;
use crate::engine::events::{after, watcher_channel, Frame};
use crate::engine::EngineError;
use crate::modes::registry::{ModeKind, Role as ModeRole};

pub use crate::run_flags::RunArgs;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    App(#[from] AppError),
    #[error("{0}")]
    Engine(#[from] EngineError),
    #[error("{0}")]
    Usage(String),
    /// A file named on the command line: unreadable, or past its bound.
    #[error(transparent)]
    Read(#[from] crate::files::FileError),
}

/// The start body for a mode from command-line arguments: `--config-json`, then the flags over
/// it, then files read. A long text the mode needs (`content`) defaults to the question, and
/// the question then to "Evaluate this content" when only the text was given.
pub fn request_body(args: &RunArgs) -> Result<Value, CliError> {
    let mode = crate::modes::ModeKind::parse(&args.mode)
        .ok_or_else(|| CliError::Usage(format!("unknown mode {:?}", args.mode)))?;
    let mut cfg = match &args.config_json {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(CliError::Usage("--config-json must be a JSON object".into())),
            Err(e) => return Err(CliError::Usage(format!("--config-json is not JSON: {e}"))),
        },
    };
    merge(&mut cfg, &args.config);
    let schema = crate::modes::registry::config_schema(mode);
    for (field, path) in &args.files {
        cfg.insert(field.clone(), json!(read_field_file(schema, field, path)?));
    }
    let takes_content = schema.pointer("/properties/content").is_some();
    let mut question = args.question.clone();
    if takes_content && !cfg.contains_key("content") {
        if let Some(q) = &question {
            cfg.insert("content".into(), json!(q));
        }
    }
    if question.is_none() && takes_content && mode.spec().question.required.is_some() {
        question = Some("Evaluate this content".into());
    }
    let mut body = Map::new();
    body.insert("mode".into(), json!(args.mode));
    match question {
        Some(q) => {
            body.insert("question".into(), json!(q));
        }
        None if mode.spec().question.required.is_some() => {
            return Err(CliError::Usage(format!("a question is required for {} mode", args.mode)))
        }
        None => {}
    }
    if let Some(c) = &args.conversation {
        body.insert("conversationId".into(), json!(c));
    }
    if !cfg.is_empty() {
        body.insert("modeConfig".into(), Value::Object(cfg));
    }
    Ok(Value::Object(body))
}

/// The text of a `--FIELD-file`: at most the characters the field takes (its schema's
/// `maxLength`, else [`MAX_CONTENT_CHARS`](crate::modes::request::MAX_CONTENT_CHARS)), read
/// no further than four bytes for each of them.
fn read_field_file(
    schema: &Value,
    field: &str,
    path: &std::path::Path,
) -> Result<String, CliError> {
    let max_chars = schema
        .pointer(&format!("/properties/{field}/maxLength"))
        .and_then(Value::as_u64)
        .unwrap_or(crate::modes::request::MAX_CONTENT_CHARS as u64);
    let what = format!("--{}-file", crate::run_flags::kebab(field));
    let text = crate::files::read_text(&what, path, max_chars * 4)?;
    if text.chars().count() as u64 > max_chars {
        let limit = format!("at most {max_chars} characters");
        return Err(
            crate::files::FileError::TooLarge { what, path: path.to_path_buf(), limit }.into()
        );
    }
    Ok(text)
}

/// `over`'s fields into `base`, objects field by field.
fn merge(base: &mut Map<String, Value>, over: &Map<String, Value>) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(Value::Object(b)), Value::Object(o)) => merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A stage's id in words for a person (`stage2` -> "peer ranking", `chain_step` -> "chain
/// step"), as the Markdown export writes it.
pub fn stage_words(id: &str) -> String {
    crate::export::markdown::stage_words(id).to_lowercase()
}

/// A camelCase or snake_case name in words: `logicalFlow` -> "logical flow".
pub fn name_words(name: &str) -> String {
    crate::export::markdown::words(name).to_lowercase()
}

/// Who a call is, for a person: its role's label from the mode (`roles`), else its stage.
fn who(data: &Value, roles: &[ModeRole]) -> String {
    let role = data.get("role").and_then(Value::as_str).unwrap_or("");
    match roles.iter().find(|r| r.id == role) {
        Some(r) => r.label.to_string(),
        None => stage_words(data.get("stage").and_then(Value::as_str).unwrap_or("")),
    }
}

/// One line of progress for an event, or None for events not worth a line. `roles`: the run's
/// mode's roles, whose labels name who is at work.
/// A stage's words: the mode's own label for its events' stem (`ModeSpec::stages`), else the
/// stem spelled out; None for a stage the mode says nothing of.
fn stage_label(stages: &[(&str, &str)], stem: &str) -> Option<String> {
    match stages.iter().find(|(s, _)| *s == stem) {
        Some((_, "")) => None,
        Some((_, label)) => Some((*label).to_string()),
        None => Some(stage_words(stem)),
    }
}

/// The model a stage event names, if any (a checker's, a reviewer's, a section's writer).
fn named_model(data: &Value) -> Option<&str> {
    data.get("model").or_else(|| data.pointer("/data/model")).and_then(Value::as_str)
}

pub fn progress_line(
    event: &str,
    data: &Value,
    roles: &[ModeRole],
    stages: &[(&str, &str)],
) -> Option<String> {
    let s = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match event {
        "token" => None,
        "call_start" => Some(format!("  … {} · {}", who(data, roles), s("model"))),
        "call_complete" => {
            let ms = data.get("responseTimeMs").and_then(Value::as_u64).unwrap_or(0);
            if data.get("ok").and_then(Value::as_bool).unwrap_or(false) {
                Some(format!(
                    "  ✓ {} · {} in {:.1}s",
                    who(data, roles),
                    s("model"),
                    ms as f64 / 1000.0
                ))
            } else {
                let err =
                    data.pointer("/error/message").and_then(Value::as_str).unwrap_or("failed");
                Some(format!("  ✗ {} · {}: {}", who(data, roles), s("model"), err))
            }
        }
        "prompt_fitted" => {
            let cuts = data.get("cuts").and_then(Value::as_array).map_or(0, Vec::len);
            let context = data.get("contextTokens").and_then(Value::as_u64).unwrap_or(0);
            let still =
                if data.get("fits") == Some(&Value::Bool(false)) { ", still too long" } else { "" };
            Some(format!(
                "  ✂ {} · {}: prompt shortened to fit its {context}-token context ({cuts} cut{}{still})",
                who(data, roles),
                s("model"),
                if cuts == 1 { "" } else { "s" }
            ))
        }
        "call_waiting" => Some(format!(
            "  ⧗ {} · {}: waiting for a free slot on {} (its time starts when it is sent)",
            who(data, roles),
            s("model"),
            match s("route").as_str() {
                "*" => "the model provider".to_string(),
                r => r.to_string(),
            }
        )),
        "call_turn" => Some(format!("  … {} · {}: sent", who(data, roles), s("model"))),
        "structured_output_refused" => Some(format!(
            "  ! {} · {}: its server does not take structured (JSON) replies; asked again without",
            who(data, roles),
            s("model")
        )),
        "title_complete" => Some(format!(
            "title: {}",
            data.pointer("/data/title").and_then(Value::as_str).unwrap_or("")
        )),
        "juror_complete" => {
            let d = &data["data"];
            let verdict = d["verdict"].as_str().unwrap_or("no verdict");
            let avg = d["average"]
                .as_f64()
                .map_or("no scores".to_string(), |a| format!("average {a:.1}"));
            Some(format!("  ⚖ juror {}: {verdict}, {avg}", d["model"].as_str().unwrap_or("?")))
        }
        "all_jurors_complete" => {
            let d = &data["data"];
            let t = &d["voteTally"];
            Some(format!(
                "■ the jurors' deliberation — most said {} (approve {}, revise {}, reject {})",
                d["majorityVerdict"].as_str().map_or("no verdict".to_string(), str::to_lowercase),
                t["approve"],
                t["revise"],
                t["reject"]
            ))
        }
        "revision_complete" => {
            let sm = &data["data"]["summary"];
            Some(format!(
                "■ revision — {} revised, {} stood, {} merged, {} unparsed",
                sm["revised"], sm["stood"], sm["merged"], sm["parseFailed"]
            ))
        }
        "vote_round_complete" | "vote_complete" => {
            let d = &data["data"];
            let tallies: Vec<String> = d["tallies"]
                .as_object()
                .map(|m| m.iter().map(|(l, n)| format!("{l}: {n}")).collect())
                .unwrap_or_default();
            let tie = if d["isTie"].as_bool().unwrap_or(false) { " (tie)" } else { "" };
            Some(format!("■ vote — {}{tie}", tallies.join(", ")))
        }
        "tiebreaker_complete" => Some(format!(
            "■ tiebreaker — {} by {}",
            data.pointer("/data/winnerLabel").and_then(Value::as_str).unwrap_or("?"),
            data.pointer("/data/method").and_then(Value::as_str).unwrap_or("?")
        )),
        // Tournament's champion: its seed, model and the rounds it won.
        "winner_declared" if data["data"]["seed"].is_u64() => {
            let d = &data["data"];
            let won = d["matchesWon"].as_u64().unwrap_or(0);
            Some(format!(
                "🏆 winner: seed {} ({}), {won} match{} won",
                d["seed"],
                d["model"].as_str().unwrap_or("a contestant"),
                if won == 1 { "" } else { "es" }
            ))
        }
        "winner_declared" => {
            let d = &data["data"];
            Some(format!(
                "🏆 winner: {} ({}) with {} of {} votes{}",
                d["winnerLabel"].as_str().unwrap_or("?"),
                d["winnerModel"].as_str().unwrap_or("?"),
                d["voteCount"],
                d["totalVotes"],
                if d["tiebroken"].as_bool().unwrap_or(false) { ", after a tie" } else { "" }
            ))
        }
        "classify_complete" => Some(format!(
            "■ classify — {}{}",
            data.pointer("/data/type").and_then(Value::as_str).unwrap_or("?"),
            data.pointer("/data/options")
                .and_then(Value::as_array)
                .map(|o| format!(
                    " ({})",
                    o.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
                ))
                .unwrap_or_default()
        )),
        "round_start" => Some(format!("▶ round {}", data["round"])),
        // Tournament's round: who goes on.
        "round_complete" if data["data"]["winners"].is_array() => {
            let seeds: Vec<String> = data["data"]["winners"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| format!("seed {s}"))
                .collect();
            Some(format!("■ round {} — through: {}", data["round"], seeds.join(", ")))
        }
        "matchup_complete" => {
            let d = &data["data"];
            let (w, l) = (d["winnerSeed"].as_u64(), d["loserSeed"].as_u64());
            Some(match (w, l) {
                (Some(w), Some(l)) => format!("  ■ match: seed {w} beat seed {l}"),
                _ => "  ■ match decided".to_string(),
            })
        }
        "round_complete" => {
            let st = &data["data"]["stats"];
            let stats = if st.get("mean").is_some() {
                let n =
                    |k: &str| st[k].as_f64().map_or("∞".to_string(), crate::modes::delphi::fmt_num);
                format!(
                    "mean {}, median {}, sd {}, CV {}, range {} – {}",
                    n("mean"),
                    n("median"),
                    n("stdDev"),
                    n("cv"),
                    n("min"),
                    n("max")
                )
            } else {
                let d: Vec<String> = st["distribution"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|x| {
                                format!("{} {}", x["answer"].as_str().unwrap_or("?"), x["count"])
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                format!("{} — agreement {}%", d.join(", "), st["agreementPercentage"])
            };
            let conv = if data["data"]["converged"] == true { " ✓ converged" } else { "" };
            Some(format!("■ round {} — {stats}{conv}", data["round"]))
        }
        "evaluator_complete" => {
            let d = &data["data"];
            Some(format!(
                "  ⚖ {} ({}): overall {}",
                d["role"].as_str().unwrap_or("?"),
                d["model"].as_str().unwrap_or("?"),
                d["overall"].as_f64().map_or("-".to_string(), |o| format!("{o:.1}"))
            ))
        }
        "disagreement_detected" => Some(format!(
            "■ disagreement — max spread {} on {}",
            data["data"]["maxSpread"],
            data["data"]["disagreeingDimensions"].as_array().map_or(String::new(), |a| a
                .iter()
                .filter_map(Value::as_str)
                .map(name_words)
                .collect::<Vec<_>>()
                .join(", "))
        )),
        "score_complete" => Some(format!(
            "■ score {} by {}{}",
            data["data"]["score"],
            data["data"]["method"].as_str().unwrap_or("?"),
            if data["data"]["needsHumanReview"] == true {
                " — flagged for human review"
            } else {
                ""
            }
        )),
        "convergence_reached" => Some(format!("converged in round {}", data["round"])),
        "max_rounds_reached" => Some(format!(
            "no convergence after round {} ({})",
            data["round"],
            data["reason"].as_str().unwrap_or("")
        )),
        "error" => Some(format!("error: {}", s("message"))),
        "cancelled" => Some("stopped".to_string()),
        "complete" => Some("complete".to_string()),
        // A mode's own start (`factcheck_start`, naming the mode): the run's first line has
        // said the mode's name already.
        e if e.ends_with("_start") && data.get("mode").is_some_and(Value::is_string) => None,
        e if e.ends_with("_start") => {
            Some(format!("▶ {}", stage_label(stages, e.trim_end_matches("_start"))?))
        }
        e if e.ends_with("_complete") => {
            let mut line = format!("■ {}", stage_label(stages, e.trim_end_matches("_complete"))?);
            if let Some(m) = named_model(data) {
                line.push_str(&format!(" · {m}"));
            }
            if let Some(agg) = data.pointer("/metadata/aggregateRankings").and_then(Value::as_array)
            {
                let ranks: Vec<String> = agg
                    .iter()
                    .map(|a| {
                        let avg = a.get("averageRank").and_then(Value::as_f64).unwrap_or(0.0);
                        format!(
                            "{} {avg:.2}",
                            a.get("model").and_then(Value::as_str).unwrap_or("?")
                        )
                    })
                    .collect();
                if !ranks.is_empty() {
                    line.push_str(&format!(" — average rank: {}", ranks.join(", ")));
                }
                let meta = &data["metadata"];
                let count = |k: &str| meta.get(k).and_then(Value::as_u64).unwrap_or(0);
                let (counted, partial, unread) =
                    (count("rankingsCounted"), count("partialRankings"), count("unparsedRankings"));
                if counted + unread > 0 {
                    let mut from = format!(" (from {counted} ranking{}", plural(counted));
                    if partial > 0 {
                        from.push_str(&format!(", {partial} partial"));
                    }
                    if unread > 0 {
                        from.push_str(&format!("; {unread} gave no readable ranking"));
                    }
                    from.push(')');
                    line.push_str(&from);
                }
            }
            Some(line)
        }
        other => Some(format!("• {}", stage_words(other))),
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Runs a deliberation in-process. Returns the process exit code: 0 completed, 1 failed,
/// 130 cancelled.
/// Reads and stores the `--attach` files (`-`: standard input), each bounded by the file
/// limit as it is read; what was stored, in order. A refused file is named with the reason.
async fn attach(
    engine: &crate::engine::Engine,
    paths: &[std::path::PathBuf],
) -> Result<Vec<crate::store::AttachmentInfo>, CliError> {
    let limit = engine.attachment_limits().file_bytes;
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        let bytes = crate::files::read_bytes("--attach", path, limit)?;
        let name = if path.as_os_str() == "-" {
            "stdin.txt".to_string()
        } else {
            path.file_name()
                .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
        };
        files.push(crate::engine::Upload { name, declared: None, bytes: bytes.into() });
    }
    match engine.upload(files, &Viewer::local()).await {
        Ok(stored) => Ok(stored),
        Err(crate::engine::EngineError::Invalid(e)) => {
            Err(CliError::Usage(format!("--attach: {}", e.message)))
        }
        Err(e) => Err(e.into()),
    }
}

/// Where a run is stored, for a person: a SQLite file by its full path (a relative default
/// lands in the current folder, so a run from another folder has a database of its own and
/// never shows in a server started elsewhere), any other URL without its password.
fn database_shown(url: &str) -> String {
    match url.strip_prefix("sqlite://") {
        Some(path) if !path.starts_with(':') => std::path::absolute(path)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| path.to_string()),
        _ => crate::secrets::redact_url(url),
    }
}

pub async fn run(config: Config, args: RunArgs) -> Result<i32, CliError> {
    let mut body = request_body(&args)?;
    let engine = start_engine(&config, Role::Cli).await?;
    if !args.attach.is_empty() {
        let stored = attach(&engine, &args.attach).await?;
        if !args.quiet {
            // What the models will read, before the run's own progress.
            let files: Vec<String> = stored
                .iter()
                .map(|a| {
                    let size = crate::attachments::size_words(a.size as u64);
                    match a.pages {
                        Some(p) => format!("{} (PDF, {p} pages, {size})", a.name),
                        None => format!("{} ({}, {size})", a.name, a.kind),
                    }
                })
                .collect();
            eprintln!("attached: {}", files.join(", "));
        }
        body["attachments"] = json!(stored.iter().map(|a| &a.id).collect::<Vec<_>>());
    }
    let started = match engine.start_run(&body, &Viewer::local()).await {
        Ok(s) => s,
        Err(e) => {
            // Said of the flag the user typed, not of the request it became.
            let argv: Vec<String> = std::env::args().collect();
            let said = e.to_string();
            let named = named_as_typed(&said, &args.mode, &argv);
            return Err(if named == said { e.into() } else { CliError::Usage(named) });
        }
    };
    let mut err = std::io::stderr();
    if !args.quiet {
        let _ = writeln!(
            err,
            "run {} ({}), conversation {}, stored in {}",
            started.run_id,
            args.mode,
            started.conversation_id,
            database_shown(&config.database_url)
        );
        if let Some(mode) = ModeKind::parse(&args.mode) {
            let _ = writeln!(err, "▶ {}", mode.spec().label);
        }
    }
    let (tx, mut rx) = watcher_channel();
    let watcher = engine.watcher_id();
    engine.watch(&started.run_id, 0, watcher, tx.clone(), &Viewer::local()).await?;
    let roles = ModeKind::parse(&args.mode).map_or(&[][..], |m| m.spec().roles);
    let stages = ModeKind::parse(&args.mode).map_or(&[][..], |m| m.spec().stages);
    let mut terminal = String::new();
    let mut last_seq = 0;
    loop {
        tokio::select! {
            frame = rx.recv() => {
                let batch = match frame {
                    Some(Frame::Events(batch)) => batch,
                    // Fell behind: everything before the marker is read; resume after it.
                    Some(Frame::Lagged { .. }) => {
                        engine.watch(&started.run_id, last_seq, watcher, tx.clone(), &Viewer::local()).await?;
                        continue;
                    }
                    Some(_) => continue,
                    None => break,
                };
                for f in after(&batch, last_seq) {
                    last_seq = f.seq;
                    if !args.quiet {
                        let env: Value = serde_json::from_str(&f.json).unwrap_or(Value::Null);
                        if let Some(line) = progress_line(&f.event, &env["data"], roles, stages) {
                            let _ = writeln!(err, "{line}");
                        }
                    }
                    if f.is_terminal() {
                        terminal = f.event.clone();
                    }
                }
                if !terminal.is_empty() {
                    break;
                }
            }
            _ = tokio::signal::ctrl_c() => {
                let _ = writeln!(err, "cancelling…");
                engine.cancel(&started.run_id, "Ctrl-C in the terminal", &Viewer::local()).await?;
            }
        }
    }
    let result =
        crate::engine::views::run_view(&engine.result(&started.run_id, &Viewer::local()).await?);
    // The run's outcome in its mode's words (the winner, the verdicts, the score), before the
    // answer.
    if !args.quiet && !args.json {
        let answer = result.get("answer").and_then(Value::as_str).unwrap_or("");
        let outcome = result.get("outcome").and_then(Value::as_str).unwrap_or("");
        // Not when it is only the answer's first words: the answer follows.
        let said = !outcome.is_empty() && !answer.contains(outcome.trim_end_matches('…').trim());
        if said {
            let _ = writeln!(err, "outcome: {outcome}");
        }
    }
    let mut out = std::io::stdout();
    if args.json {
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&result).unwrap_or_default());
    } else if let Some(answer) = result.get("answer").and_then(Value::as_str) {
        let _ = writeln!(out, "{}", printed_answer(answer, args.show_reasoning));
    }
    Ok(match terminal.as_str() {
        "complete" => 0,
        "cancelled" => 130,
        _ => {
            if !args.json {
                let msg = result.get("error").and_then(Value::as_str).unwrap_or("the run failed");
                let _ = writeln!(err, "{msg}");
            }
            1
        }
    })
}

/// An error about a `modeConfig` field (`modeConfig.councilModels[0]: …`) as a person at the
/// terminal reads it: naming the flag they typed (`--models: …`), of those in `argv` that set
/// the field, else the field's own flag; unchanged when no flag sets it (`--config-json`'s
/// fields) or the error names no field.
pub fn named_as_typed(message: &str, mode: &str, argv: &[String]) -> String {
    let Some(mode) = ModeKind::parse(mode) else { return message.to_string() };
    let Some((place, rest)) = message.strip_prefix("modeConfig.").and_then(|m| m.split_once(": "))
    else {
        return message.to_string();
    };
    let field = place.split('[').next().unwrap_or(place);
    let path: Vec<&str> = field.split('.').collect();
    let names = crate::run_flags::flag_names(mode, &path);
    let typed = names.iter().find(|n| {
        let flag = format!("--{n}");
        argv.iter().any(|a| *a == flag || a.starts_with(&format!("{flag}=")))
    });
    match typed.or(names.first()) {
        Some(name) => format!("--{name}: {rest}"),
        None => message.to_string(),
    }
}

/// The answer as printed: without its reasoning trace unless `show_reasoning`.
pub fn printed_answer(answer: &str, show_reasoning: bool) -> std::borrow::Cow<'_, str> {
    if show_reasoning {
        std::borrow::Cow::Borrowed(answer)
    } else {
        crate::modes::reading::answer_text(answer)
    }
}

/// `conclave export ID [--format md|json] [--output FILE]`: a run, or else a conversation, from
/// the database the server uses, with the local client's access (everything). Answers the exit
/// code: 0 written, 1 a failure to read or write, 2 nothing with that id.
pub async fn export_command(
    config: Config,
    id: &str,
    format: &str,
    output: Option<&std::path::Path>,
    with_events: bool,
) -> i32 {
    let format = crate::export::Format::parse(format).unwrap_or(crate::export::Format::Markdown);
    let engine = match start_engine(&config, Role::Cli).await {
        Ok(e) => e,
        Err(e) => {
            eprintln!("conclave: {e}");
            return 1;
        }
    };
    let viewer = Viewer::local();
    let text = match export_text(&engine, id, format, with_events, &viewer).await {
        Ok(Some(text)) => text,
        Ok(None) => {
            eprintln!("conclave: no run or conversation {id:?}");
            return 2;
        }
        Err(e) => {
            eprintln!("conclave: {e}");
            return 1;
        }
    };
    let written = match output {
        Some(path) => std::fs::write(path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => std::io::stdout().write_all(text.as_bytes()).map_err(|e| e.to_string()),
    };
    match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("conclave: {e}");
            1
        }
    }
}

/// The export of the run `id`, else of the conversation `id`; None when neither exists.
async fn export_text(
    engine: &crate::engine::Engine,
    id: &str,
    format: crate::export::Format,
    with_events: bool,
    viewer: &Viewer,
) -> Result<Option<String>, EngineError> {
    use crate::export::{Export, Format};
    let render = |e: &dyn Export| match format {
        Format::Json => e.render(format, with_events) + "\n",
        Format::Markdown => e.render(format, with_events),
    };
    if let Some(run) = crate::ids::RunId::parse(id) {
        match engine.export_run(&run, viewer).await {
            Ok(e) => return Ok(Some(render(&e))),
            Err(EngineError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    if let Some(conv) = crate::ids::ConversationId::parse(id) {
        match engine.export_conversation(&conv, viewer).await {
            Ok(e) => return Ok(Some(render(&e))),
            Err(EngineError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// `conclave bench ...` (see [`crate::bench`]): prints the table (or the Clarity report) and answers the exit code.
pub fn bench_command(config: Config, args: crate::bench::BenchArgs) -> i32 {
    if args.scenarios.iter().any(|s| s == "clarity") {
        if args.scenarios.len() > 1 {
            eprintln!("conclave: `bench clarity` runs alone");
            return 2;
        }
        let system = actix_web::rt::System::new();
        return system.block_on(async move {
            match crate::bench::clarity::clarity(config, args.runs.max(1), args.latency_ms).await {
                Ok(figures) => {
                    print!("{}", figures.report(args.latency_ms));
                    0
                }
                Err(e) => {
                    eprintln!("conclave: {e}");
                    1
                }
            }
        });
    }
    if args.scenarios.iter().any(|s| s == "eval") {
        if args.scenarios.len() > 1 {
            eprintln!("conclave: `bench eval` runs alone");
            return 2;
        }
        let questions = if args.quick { 100 } else { 1000 };
        let system = actix_web::rt::System::new();
        return system.block_on(async move {
            match crate::bench::eval::eval_bench(config, questions).await {
                Ok(figures) => {
                    print!("{}", figures.report());
                    0
                }
                Err(e) => {
                    eprintln!("conclave: {e}");
                    1
                }
            }
        });
    }
    let mut scenarios = Vec::new();
    for s in &args.scenarios {
        match crate::bench::Scenario::parse(s) {
            Some(sc) if !scenarios.contains(&sc) => scenarios.push(sc),
            Some(_) => {}
            None => {
                eprintln!(
                    "conclave: unknown scenario {s:?}: use 1-6 (overhead, concurrent, \
                     throughput, watchers, modes, attachments), clarity or eval"
                );
                return 2;
            }
        }
    }
    if scenarios.is_empty() {
        scenarios = crate::bench::Scenario::ALL.to_vec();
    }
    scenarios.sort();
    let mut sizes =
        if args.quick { crate::bench::Sizes::quick() } else { crate::bench::Sizes::full() };
    sizes.structured = args.structured;
    match crate::bench::run(&scenarios, sizes) {
        Ok(report) => {
            println!("{}", report.render());
            // A missed target is a figure, not a failure; a scenario that could not finish is.
            i32::from(report.failed)
        }
        Err(e) => {
            eprintln!("conclave: bench: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(line: &[&str]) -> Result<Value, CliError> {
        let m = crate::run_flags::command().try_get_matches_from(line).unwrap();
        let args = <crate::run_flags::RunCommand as clap::FromArgMatches>::from_arg_matches(&m);
        request_body(&args.unwrap().0)
    }

    #[test]
    fn flags_become_the_mode_config_and_files_are_read() {
        let b = body(&["council", "Why?", "--models", "sim/a,sim/b", "--chairman", "sim/c"]);
        let b = b.unwrap();
        assert_eq!(b["modeConfig"]["councilModels"], json!(["sim/a", "sim/b"]));
        assert_eq!(b["modeConfig"]["chairmanModel"], json!("sim/c"));
        assert_eq!(b["mode"], json!("council"));
        let dir = std::env::temp_dir().join(format!("conclave-cli-{}", std::process::id()));
        std::fs::write(&dir, "## GET /users").unwrap();
        let file = dir.to_str().unwrap();
        let b =
            body(&["jury", "--content-file", file, "--juror-models", "a,b,c", "--chairman", "f"]);
        let _ = std::fs::remove_file(&dir);
        let b = b.unwrap();
        assert_eq!(b["modeConfig"]["content"], "## GET /users");
        assert_eq!(b["question"], "Evaluate this content");
        assert_eq!(b["modeConfig"]["jurorModels"], json!(["a", "b", "c"]));
        assert_eq!(b["modeConfig"]["foremanModel"], "f");
        // Without a file, the question is the content.
        let b = body(&["jury", "Judge this text"]).unwrap();
        assert_eq!(b["modeConfig"]["content"], "Judge this text");
        assert!(matches!(
            body(&["jury", "--content-file", "/nonexistent/x"]),
            Err(CliError::Read { .. })
        ));
        // Up to the characters the field takes (multi-byte ones too), and not one more.
        let file = std::env::temp_dir().join(format!("conclave-cli-max-{}", std::process::id()));
        std::fs::write(&file, "é".repeat(crate::modes::request::MAX_CONTENT_CHARS)).unwrap();
        let fits = body(&["jury", "--content-file", file.to_str().unwrap()]);
        std::fs::write(&file, "é".repeat(crate::modes::request::MAX_CONTENT_CHARS + 1)).unwrap();
        let over = body(&["jury", "--content-file", file.to_str().unwrap()]);
        let _ = std::fs::remove_file(&file);
        assert_eq!(
            fits.unwrap()["modeConfig"]["content"].as_str().unwrap().chars().count(),
            200_000
        );
        let over = over.unwrap_err().to_string();
        assert!(over.ends_with("is too large: at most 200000 characters"), "{over}");
        assert!(
            matches!(body(&["vote"]), Err(CliError::Usage(m)) if m.contains("question is required"))
        );
    }

    #[test]
    fn config_json_takes_any_mode_config_and_flags_override_it() {
        let b = body(&[
            "delphi",
            "q",
            "--config-json",
            r#"{"maxRounds": 2, "options": ["a", "b"]}"#,
            "--max-rounds",
            "4",
        ]);
        let b = b.unwrap();
        assert_eq!(b["modeConfig"], json!({"maxRounds": 4, "options": ["a", "b"]}));
        let b = body(&[
            "clarity",
            "--config-json",
            r#"{"models": {"skeptic": "s", "arbiter": "a"}}"#,
            "--models-arbiter",
            "x",
        ]);
        assert_eq!(b.unwrap()["modeConfig"]["models"], json!({"skeptic": "s", "arbiter": "x"}));
        assert!(matches!(body(&["vote", "q", "--config-json", "[1]"]), Err(CliError::Usage(_))));
        assert!(matches!(body(&["vote", "q", "--config-json", "{"]), Err(CliError::Usage(_))));
    }

    #[test]
    fn progress_names_model_and_role_in_words() {
        let council = ModeKind::parse("council").unwrap().spec().roles;
        let line = progress_line(
            "call_complete",
            &json!({"stage": "stage2", "role": "council", "model": "sim/beta", "ok": false, "error": {"message": "HTTP 503"}}),
            council,
            &[],
        )
        .unwrap();
        assert_eq!(line, "  ✗ Council members · sim/beta: HTTP 503");
        // A role the mode does not list: the stage, in words.
        let line = progress_line("call_start", &json!({"stage": "stage3", "model": "m"}), &[], &[])
            .unwrap();
        assert_eq!(line, "  … synthesis · m");
        // A call waiting for a turn at a capped server, then sent.
        let waits =
            json!({"stage": "stage1", "role": "council", "model": "local/a", "route": "local/"});
        assert_eq!(
            progress_line("call_waiting", &waits, council, &[]).unwrap(),
            "  ⧗ Council members · local/a: waiting for a free slot on local/ (its time starts when it is sent)"
        );
        assert_eq!(
            progress_line("call_turn", &waits, council, &[]).unwrap(),
            "  … Council members · local/a: sent"
        );
        assert_eq!(
            progress_line("stage2_start", &json!({}), council, &[]).unwrap(),
            "▶ peer ranking"
        );
        assert_eq!(progress_line("token", &json!({}), council, &[]), None);
        // A stage in the mode's own words, with the model an item's end names.
        let fc = ModeKind::parse("fact_check").unwrap().spec();
        let line =
            progress_line("checker_complete", &json!({"model": "sim/beta"}), fc.roles, fc.stages);
        assert_eq!(line.unwrap(), "■ a checker's verdicts · sim/beta");
        assert_eq!(
            progress_line("extract_start", &json!({}), fc.roles, fc.stages).unwrap(),
            "▶ reading the claims"
        );
        // A stage the mode says nothing of prints nothing.
        let delphi = ModeKind::parse("delphi").unwrap().spec();
        assert_eq!(progress_line("delphi_start", &json!({}), delphi.roles, delphi.stages), None);
    }

    #[test]
    fn an_error_about_a_setting_names_the_flag_that_was_typed() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let msg = "modeConfig.councilModels[0]: no provider serves model \"x\"";
        let typed = argv(&["conclave", "run", "council", "q", "--models", "x,sim/a"]);
        assert_eq!(
            named_as_typed(msg, "council", &typed),
            "--models: no provider serves model \"x\""
        );
        let long = argv(&["conclave", "run", "council", "q", "--council-models=x,sim/a"]);
        assert!(named_as_typed(msg, "council", &long).starts_with("--council-models: "));
        // Not typed (from --config-json): its own flag is named.
        assert!(named_as_typed(msg, "council", &[]).starts_with("--council-models: "));
        let nested = "modeConfig.models.skeptic: no provider serves model \"x\"";
        assert!(named_as_typed(nested, "clarity", &[]).starts_with("--models-skeptic: "));
        // No field, or no flag for it: as it was.
        assert_eq!(named_as_typed("question: required", "council", &typed), "question: required");
        assert_eq!(
            named_as_typed("modeConfig.nothing: x", "council", &typed),
            "modeConfig.nothing: x"
        );
    }

    #[test]
    fn names_are_printed_in_words() {
        assert_eq!(name_words("logicalFlow"), "logical flow");
        assert_eq!(name_words("evidence_quality"), "evidence quality");
        assert_eq!(stage_words("chain_step"), "chain step");
        let line = progress_line(
            "disagreement_detected",
            &json!({"data": {"maxSpread": 4, "disagreeingDimensions": ["logicalFlow", "clarity"]}}),
            &[],
            &[],
        )
        .unwrap();
        assert!(line.ends_with("on logical flow, clarity"), "{line}");
    }

    #[test]
    fn the_answer_is_printed_without_its_reasoning_unless_asked() {
        let answer = "<think>\nA draft.\n</think>\n\nThe answer.";
        assert_eq!(printed_answer(answer, false), "The answer.");
        assert_eq!(printed_answer(answer, true), answer);
        assert_eq!(printed_answer("Plain.", false), "Plain.");
    }
}
