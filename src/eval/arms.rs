//! The arms of an eval, as named on the command line: `single` (each member alone, one row per
//! member: `single:MODEL`), `self-consistency` (the best single member sampled N times, its
//! plurality), `majority` (the plurality of the members' single answers, no discussion) and any
//! mode id (`council`, `vote`, `debate`…: the members as its panel). `jury` is Jury on a
//! given answer: the members, as jurors, judge the best single member's answer to each
//! question, and the arm keeps that answer only when they approve it.

use serde_json::{json, Map, Value};

use crate::modes::ModeKind;

/// One arm.
#[derive(Debug, Clone, PartialEq)]
pub enum Arm {
    /// One member alone.
    Single(String),
    /// The best single member asked `samples` times; its plurality answer.
    SelfConsistency,
    /// The plurality of the members' single answers.
    Majority,
    /// A mode with the members as its panel.
    Mode(ModeKind),
    /// Jury mode on the best single member's answer, the members as jurors: the arm's answer
    /// is that answer when the jury approves it, and none (withheld) when it does not.
    Jury,
}

impl Arm {
    /// The arm's name in tables, JSON and storage (`single:sim/alpha`, `majority`, `council`).
    pub fn name(&self) -> String {
        match self {
            Arm::Single(m) => format!("single:{m}"),
            Arm::SelfConsistency => "self-consistency".into(),
            Arm::Majority => "majority".into(),
            Arm::Mode(k) => k.as_str().to_string(),
            Arm::Jury => "jury".into(),
        }
    }
}

/// The arms by default.
pub const DEFAULT_ARMS: &str = "single,majority,council";

/// The arms of a comma-separated list, for these members. `single` expands to one arm per
/// member; each arm appears once.
pub fn parse_arms(list: &str, members: &[String]) -> Result<Vec<Arm>, String> {
    let mut out: Vec<Arm> = Vec::new();
    let push = |a: Arm, out: &mut Vec<Arm>| {
        if !out.contains(&a) {
            out.push(a);
        }
    };
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "single" => members.iter().for_each(|m| push(Arm::Single(m.clone()), &mut out)),
            "self-consistency" => push(Arm::SelfConsistency, &mut out),
            "majority" => push(Arm::Majority, &mut out),
            n if n.starts_with("single:") => {
                let m = &n["single:".len()..];
                if !members.iter().any(|x| x == m) {
                    return Err(format!("--arms: {m} is not one of --members"));
                }
                push(Arm::Single(m.to_string()), &mut out);
            }
            "solo" => return Err("--arms: solo is what `single` runs; name `single`".into()),
            "jury" if !(3..=6).contains(&members.len()) => {
                return Err(format!(
                    "--arms: jury needs 3 to 6 members as its jurors; --members names {}",
                    members.len()
                ))
            }
            "jury" => push(Arm::Jury, &mut out),
            n => match ModeKind::parse(n) {
                Some(k) => push(Arm::Mode(k), &mut out),
                None => {
                    return Err(format!(
                        "--arms: unknown arm {n:?}: use single, self-consistency, majority or a mode id"
                    ))
                }
            },
        }
    }
    if out.is_empty() {
        return Err("--arms: name at least one arm".into());
    }
    Ok(out)
}

/// The start body of a Solo run: one model asked the prompt.
pub fn solo_body(model: &str, prompt: &str) -> Value {
    json!({ "mode": "solo", "question": prompt, "modeConfig": { "model": model } })
}

/// The start body of a mode arm: the members as every panel role's models, the best member in
/// every single-model role (chairman, foreman…), and the arm's own settings over them.
pub fn mode_body(
    kind: ModeKind,
    members: &[String],
    lead: &str,
    settings: Option<&Map<String, Value>>,
    prompt: &str,
) -> Value {
    let mut config = Map::new();
    for role in kind.spec().roles {
        let Some(field) = role.field else { continue };
        let value = if role.panel { json!(members) } else { json!(lead) };
        set_path(&mut config, field, value);
    }
    body(kind.as_str(), prompt, config, settings)
}

/// A start body: the arm's own settings (`--arm-config MODE=…`) go over `config`.
fn body(
    mode: &str,
    question: &str,
    mut config: Map<String, Value>,
    settings: Option<&Map<String, Value>>,
) -> Value {
    for (k, v) in settings.into_iter().flatten() {
        config.insert(k.clone(), v.clone());
    }
    json!({ "mode": mode, "question": question, "modeConfig": config })
}

/// The start body of the jury arm's run on one question: the members judge `given` (the best
/// single member's reply to `prompt`); the foreman, who writes the report but casts no vote,
/// must not be one of them. The arm's own settings (`--arm-config jury=…`) go over these.
pub fn jury_body(
    members: &[String],
    foreman: Option<&str>,
    settings: Option<&Map<String, Value>>,
    prompt: &str,
    given: &str,
) -> Value {
    let mut config = Map::new();
    config.insert("content".into(), json!(given));
    config.insert("originalQuestion".into(), json!(prompt));
    config.insert("jurorModels".into(), json!(members));
    if let Some(f) = foreman {
        config.insert("foremanModel".into(), json!(f));
    }
    let head: String = prompt.lines().next().unwrap_or("").chars().take(80).collect();
    body("jury", &format!("Is this answer right? {head}"), config, settings)
}

/// Sets `a.b.c` in an object, making the objects on the way.
fn set_path(obj: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            obj.insert(path.to_string(), value);
        }
        Some((head, rest)) => {
            let inner = obj.entry(head.to_string()).or_insert_with(|| json!({}));
            if let Value::Object(m) = inner {
                set_path(m, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members() -> Vec<String> {
        vec!["sim/a".into(), "sim/b".into(), "sim/c".into()]
    }

    #[test]
    fn arms_parse_and_single_expands_per_member() {
        let arms = parse_arms(DEFAULT_ARMS, &members()).unwrap();
        let names: Vec<String> = arms.iter().map(Arm::name).collect();
        assert_eq!(names, ["single:sim/a", "single:sim/b", "single:sim/c", "majority", "council"]);
        let arms = parse_arms("single:sim/b, self-consistency, vote, single", &members()).unwrap();
        assert_eq!(arms.len(), 5);
        assert!(parse_arms("single:sim/z", &members()).unwrap_err().contains("not one of"));
        assert!(parse_arms("councl", &members()).unwrap_err().contains("unknown arm"));
        assert!(parse_arms(" , ", &members()).is_err());
        assert_eq!(parse_arms("jury", &members()).unwrap(), [Arm::Jury]);
        let two = &members()[..2];
        assert!(parse_arms("jury", two).unwrap_err().contains("3 to 6 members"));
    }

    #[test]
    fn a_jury_body_judges_the_given_answer_with_the_members_as_jurors() {
        let b = jury_body(&members(), Some("sim/f"), None, "What is 2 + 2?", "Final answer: 4");
        assert_eq!(b["mode"], "jury");
        assert_eq!(b["modeConfig"]["content"], "Final answer: 4");
        assert_eq!(b["modeConfig"]["originalQuestion"], "What is 2 + 2?");
        assert_eq!(b["modeConfig"]["jurorModels"], json!(["sim/a", "sim/b", "sim/c"]));
        assert_eq!(b["modeConfig"]["foremanModel"], "sim/f");
        let defaults = crate::modes::Defaults {
            offline: true,
            stage_timeout_ms: 120_000,
            fallback: Default::default(),
            ..Default::default()
        };
        crate::modes::validate(&b, &defaults).unwrap();
        // A foreman among the jurors is refused by the mode, by its field.
        let b = jury_body(&members(), Some("sim/a"), None, "Q?", "A");
        let e = crate::modes::validate(&b, &defaults).unwrap_err().to_string();
        assert!(e.contains("foreman"), "{e}");
    }

    #[test]
    fn a_mode_body_puts_the_members_on_its_panel_and_the_lead_in_the_chair() {
        let council = ModeKind::parse("council").unwrap();
        let b = mode_body(council, &members(), "sim/b", None, "Q?");
        assert_eq!(b["modeConfig"]["councilModels"], json!(["sim/a", "sim/b", "sim/c"]));
        assert_eq!(b["modeConfig"]["chairmanModel"], "sim/b");
        let defaults = crate::modes::Defaults {
            offline: true,
            stage_timeout_ms: 120_000,
            fallback: Default::default(),
            ..Default::default()
        };
        for kind in ModeKind::all() {
            let b = mode_body(kind, &members(), "sim/a", None, "What is 2 + 2?");
            // Every mode accepts a body built so, or refuses it with a field-named message.
            if let Err(e) = crate::modes::validate(&b, &defaults) {
                assert!(!e.to_string().is_empty());
            }
        }
    }
}
