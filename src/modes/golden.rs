//! Recorded runs of every mode, to hold a refactor to the behaviour it started from.
//!
//! Each mode's example request is validated with offline defaults (and a backup for every
//! role that takes one), built, and driven to its end by the sim's own answers in four ways:
//! every reply in text, every reply as the schema's JSON, every reply out of format, and with
//! `sim/beta` failing every call. First the stored configuration validation made of it (the
//! backups included), then what the mode did is written down effect by effect (each
//! call's prompt, schema and timeout, each event with its data, each stored row, the title, the
//! answer or failure) and then what the stored rows give back: the result, its outcome line and
//! its export report. The recordings live in `tests/golden/modes/`; a run that differs from its
//! recording fails and names the first line that differs.
//!
//! After a deliberate change of behaviour, write the recordings again with
//! `CONCLAVE_GOLDEN_WRITE=1 cargo test --lib modes::golden` and read the diff before committing.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::testkit::{ctx, drive, rows};
use super::{Defaults, Effect, Fallbacks, ModeKind, Structured};

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Text,
    Json,
    Malformed,
    Faults,
}

const VARIANTS: [(Variant, &str); 4] = [
    (Variant::Text, "text"),
    (Variant::Json, "json"),
    (Variant::Malformed, "malformed"),
    (Variant::Faults, "faults"),
];

fn defaults() -> Defaults {
    let backup = Some("sim/omega".to_string());
    Defaults {
        offline: true,
        stage_timeout_ms: 120_000,
        fallback: Fallbacks {
            chairman: backup.clone(),
            foreman: backup.clone(),
            facilitator: backup.clone(),
            arbiter: backup,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn effect_line(e: &Effect) -> Value {
    match e {
        Effect::Call(c) => json!({
            "call": c.key, "model": c.model, "stage": c.stage, "role": c.role,
            "timeoutMs": c.timeout_ms,
            "schema": c.schema.as_ref().map(|s| json!({"name": s.name, "schema": s.schema})),
            "messages": c.messages, "material": c.material,
        }),
        Effect::Emit { event, data } => json!({"emit": event, "data": data}),
        Effect::Store(r) => json!({"store": r}),
        Effect::SetTitle(t) => json!({"title": t}),
        Effect::Finish { answer } => json!({"finish": answer}),
        Effect::Fail { message } => json!({"fail": message}),
        Effect::FlagForReview { reason } => json!({"review": reason}),
        Effect::Timer { key, after_ms } => json!({"timer": key, "afterMs": after_ms}),
    }
}

/// One mode's recording: a JSON line per effect of each variant, then the result, outcome and
/// report the stored rows give.
fn record(kind: ModeKind) -> String {
    let spec = kind.spec();
    let example = (spec.example)();
    let req = super::validate(&example, &defaults())
        .unwrap_or_else(|e| panic!("{}'s example: {e}", spec.id));
    let mut out = String::new();
    writeln!(out, "{}", json!({"config": req.config, "models": req.models})).unwrap();
    for (variant, name) in VARIANTS {
        let mut run = ctx(&req.question, vec![], true);
        if variant == Variant::Json {
            run.structured = Structured::models(&req.models);
        }
        let mut mode = (spec.build)(&req.config, run)
            .unwrap_or_else(|e| panic!("{} does not build: {e}", spec.id));
        let effects = drive(
            mode.as_mut(),
            |c| {
                if variant == Variant::Faults && c.model == "sim/beta" {
                    return None;
                }
                let schema = c.schema.as_deref().filter(|_| variant == Variant::Json);
                Some(crate::modes::sim_text::respond_to(
                    &c.model,
                    &c.messages,
                    variant == Variant::Malformed,
                    schema,
                ))
            },
            "A recorded title",
        );
        writeln!(out, "# {} {name}", spec.id).unwrap();
        for e in &effects {
            writeln!(out, "{}", effect_line(e)).unwrap();
        }
        let result = (spec.load_result)(&rows(&effects));
        // The result fits the schema `GET /api/modes` publishes for it.
        let validator = jsonschema::draft202012::new(&(spec.result_schema)())
            .unwrap_or_else(|e| panic!("{}'s result schema: {e}", spec.id));
        if let Some(e) = validator.iter_errors(&result).next() {
            panic!(
                "{} {name}: the result does not fit its schema: {e} at {}",
                spec.id,
                e.instance_path().as_str()
            );
        }
        writeln!(out, "{}", json!({"result": result})).unwrap();
        writeln!(out, "{}", json!({"outcome": (spec.outcome)(&result)})).unwrap();
        writeln!(out, "{}", json!({"report": spec.report.map(|r| r(&result))})).unwrap();
    }
    out
}

#[test]
fn every_mode_runs_as_recorded() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/modes");
    let write = std::env::var_os("CONCLAVE_GOLDEN_WRITE").is_some();
    let mut differ = Vec::new();
    for kind in ModeKind::all() {
        let got = record(kind);
        let path = dir.join(format!("{}.jsonl", kind.as_str()));
        if write {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("{}: {e}; write it with CONCLAVE_GOLDEN_WRITE=1", path.display())
        });
        if got != want {
            let (n, (g, w)) = got
                .lines()
                .zip(want.lines())
                .enumerate()
                .find(|(_, (g, w))| g != w)
                .unwrap_or((0, ("(length differs)", "")));
            let cut = |s: &str| s.chars().take(600).collect::<String>();
            differ.push(format!(
                "{} line {}:\n  recorded: {}\n  now:      {}",
                kind.as_str(),
                n + 1,
                cut(w),
                cut(g)
            ));
        }
    }
    assert!(differ.is_empty(), "runs differ from their recordings:\n{}", differ.join("\n"));
}
