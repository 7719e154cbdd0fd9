//! `conclave run MODE …`: one subcommand per registered mode, its flags made from the mode's
//! settings schema (`--juror-models a,b,c`, `--max-rounds 3`, `--models-skeptic m`), so a new
//! mode has a command line the day it lands. `conclave run MODE --help` lists them.
//!
//! The rules, from each `modeConfig` property (kebab-cased):
//! - a list takes comma-separated values; the panel's list also answers to `--models`;
//! - a single model (`chairmanModel`, `foremanModel`) also answers to its short name
//!   (`--chairman`, `--foreman`), and the one that writes the result (the role with a backup)
//!   to `--chairman`;
//! - a long text (`content`) may be read from a file with `--<name>-file`;
//! - an object of fields (Clarity's `models`) takes one flag per field (`--models-skeptic`), or
//!   a comma-separated list in its fields' order;
//! - numbers and whole numbers are checked as such, choices against their values, and
//!   `--config-json` takes any `modeConfig` (flags given as well override its fields).

use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, ArgMatches, Command};
use serde_json::{Map, Value};

use crate::modes::registry::config_schema;
use crate::modes::ModeKind;

/// What `conclave run` was asked, read from the mode's flags.
#[derive(Debug, Clone, Default)]
pub struct RunArgs {
    pub mode: String,
    pub question: Option<String>,
    /// `modeConfig` fields from flags.
    pub config: Map<String, Value>,
    /// `modeConfig` fields to read from files: (field, path).
    pub files: Vec<(String, PathBuf)>,
    /// `--config-json`.
    pub config_json: Option<String>,
    pub conversation: Option<String>,
    /// `--attach`: files given to the run, in order (`-`: standard input).
    pub attach: Vec<PathBuf>,
    pub json: bool,
    /// Print the answer's reasoning trace too.
    pub show_reasoning: bool,
    pub quiet: bool,
}

/// The flags of `conclave run MODE`, as clap arguments (the derive in `main.rs` takes this).
#[derive(Debug, Clone, Default)]
pub struct RunCommand(pub RunArgs);

/// One flag made from a schema property.
struct Flag {
    /// The clap id and long name (`juror-models`, `models-skeptic`).
    long: String,
    /// Where its value goes in `modeConfig` (`jurorModels`, `models.skeptic`).
    path: Vec<String>,
    kind: Kind,
    aliases: Vec<String>,
    help: String,
    /// A model id, or a list of them (shown as MODEL / MODELS in the help).
    models: bool,
}

#[derive(Clone, PartialEq)]
enum Kind {
    List,
    Text {
        file: bool,
    },
    Choice(Vec<String>),
    Whole,
    Number,
    Switch,
    /// An object of text fields given as one comma-separated list, in its fields' order.
    Fields(Vec<String>),
    /// A list of objects, or an object holding lists or objects: given as JSON.
    Json,
}

pub(crate) fn kebab(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|t| *t != "null")
    .collect()
}

/// Whether a value of this schema is a single number, text or switch.
fn is_scalar(schema: &Value) -> bool {
    matches!(types(schema).first(), Some(&("string" | "integer" | "number" | "boolean")))
}

/// The shape of a JSON value of this schema, for the help: `{model, mandate, customMandate?}`,
/// or a list of that.
fn shape_of(schema: &Value) -> String {
    if types(schema).first() == Some(&"array") {
        return format!("[{}, …]", shape_of(schema.get("items").unwrap_or(&Value::Null)));
    }
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return "…".into();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = props
        .keys()
        .map(|k| if required.contains(&k.as_str()) { k.clone() } else { format!("{k}?") })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

fn help_of(schema: &Value) -> String {
    let text = schema.get("description").and_then(Value::as_str).unwrap_or("");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The flags that set `modeConfig` field `path` (`councilModels`, `models.skeptic`) in `mode`,
/// without their dashes: its own long name first, then its aliases (`council-models`,
/// `models`). Empty when no flag sets it.
pub fn flag_names(mode: ModeKind, path: &[&str]) -> Vec<String> {
    flags(mode)
        .into_iter()
        .filter(|f| f.path.iter().map(String::as_str).eq(path.iter().copied()))
        .flat_map(|f| std::iter::once(f.long).chain(f.aliases))
        .collect()
}

/// The flags of one mode, from its schema and roles.
fn flags(mode: ModeKind) -> Vec<Flag> {
    let spec = mode.spec();
    let schema = config_schema(mode);
    let panel_field =
        spec.roles.iter().find(|r| r.panel && r.field.is_some()).and_then(|r| r.field);
    // `--chairman` names the one model that writes the result (the single-model role with a
    // backup: chairman, foreman, facilitator, synthesizer).
    let chair_field = spec
        .roles
        .iter()
        .find(|r| !r.panel && r.fallback.is_some() && r.field.is_some())
        .and_then(|r| r.field);
    let mut taken: Vec<String> =
        ["config-json", "conversation", "attach", "json", "show-reasoning", "quiet", "help"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let mut out = Vec::new();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return out };
    for (key, s) in props {
        let ty = types(s);
        let nested = |s: &Value| {
            s.get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.values().any(|v| !is_scalar(v)))
        };
        let kind = match ty.first().copied() {
            Some("array") if s.get("items").is_some_and(|i| !is_scalar(i)) => Kind::Json,
            Some("object") if nested(s) => Kind::Json,
            Some("array") => Kind::List,
            Some("integer") => Kind::Whole,
            Some("number") => Kind::Number,
            Some("boolean") => Kind::Switch,
            Some("string") => match s.get("enum").and_then(Value::as_array) {
                Some(values) => Kind::Choice(
                    values.iter().filter_map(Value::as_str).map(String::from).collect(),
                ),
                None => Kind::Text {
                    file: s.get("maxLength").and_then(Value::as_u64).unwrap_or(0) >= 20_000,
                },
            },
            Some("object") => {
                let fields: Vec<(String, Value)> = s
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .unwrap_or_default();
                for (sub, sub_schema) in &fields {
                    let long = format!("{}-{}", kebab(key), kebab(sub));
                    taken.push(long.clone());
                    out.push(Flag {
                        long,
                        path: vec![key.clone(), sub.clone()],
                        kind: Kind::Text { file: false },
                        aliases: Vec::new(),
                        help: help_of(sub_schema),
                        models: sub_schema.get("format").and_then(Value::as_str)
                            == Some("model-id"),
                    });
                }
                Kind::Fields(fields.into_iter().map(|(k, _)| k).collect())
            }
            _ => continue,
        };
        let long = kebab(key);
        taken.push(long.clone());
        let mut aliases = Vec::new();
        if Some(key.as_str()) == panel_field && key != "models" {
            aliases.push("models".to_string());
        }
        let is_model = s.get("format").and_then(Value::as_str) == Some("model-id");
        if is_model {
            if let Some(short) = key.strip_suffix("Model") {
                aliases.push(kebab(short));
            }
            if Some(key.as_str()) == chair_field {
                aliases.push("chairman".to_string());
            }
        }
        let mut help = help_of(s);
        if let Kind::Fields(fields) = &kind {
            help = format!("{help} (or one comma-separated list: {})", fields.join(", "));
        }
        if kind == Kind::Json {
            help = format!("{help} [JSON: {}]", shape_of(s));
        }
        let models = is_model
            || s.pointer("/items/format").and_then(Value::as_str) == Some("model-id")
            || matches!(kind, Kind::Fields(_));
        out.push(Flag { long, path: vec![key.clone()], kind, aliases, help, models });
    }
    // An alias is kept only where no flag or earlier alias has its name.
    for flag in &mut out {
        flag.aliases.retain(|a| {
            if taken.contains(a) {
                false
            } else {
                taken.push(a.clone());
                true
            }
        });
    }
    out
}

/// The subcommand of one mode.
fn mode_command(mode: ModeKind) -> Command {
    let spec = mode.spec();
    let question = match spec.question.required {
        Some(_) => format!("{} (required)", spec.question.label),
        None => spec.question.label.to_string(),
    };
    let mut cmd = Command::new(spec.id)
        .about(spec.description.split_whitespace().collect::<Vec<_>>().join(" "))
        .arg(Arg::new("question").value_name("QUESTION").help(question))
        .arg(
            Arg::new("config-json")
                .long("config-json")
                .value_name("JSON")
                .help("The whole modeConfig as JSON; flags given as well override its fields"),
        );
    if spec.multi_turn {
        cmd = cmd.arg(
            Arg::new("conversation")
                .long("conversation")
                .value_name("ID")
                .help("Continue this conversation (a follow-up)"),
        );
    }
    for flag in flags(mode) {
        let mut arg = Arg::new(flag.long.clone()).long(flag.long.clone()).help(flag.help.clone());
        for a in &flag.aliases {
            arg = arg.visible_alias(a.clone());
        }
        arg = match &flag.kind {
            Kind::List | Kind::Fields(_) => arg
                .value_delimiter(',')
                .num_args(1)
                .value_name(if flag.models { "MODELS" } else { "A,B" }),
            Kind::Text { .. } => arg.value_name(if flag.models { "MODEL" } else { "TEXT" }),
            Kind::Choice(values) => arg.value_parser(PossibleValuesParser::new(values.clone())),
            Kind::Whole => arg.value_parser(clap::value_parser!(i64)).value_name("N"),
            Kind::Number => arg.value_parser(clap::value_parser!(f64)).value_name("X"),
            Kind::Switch => arg.action(ArgAction::SetTrue),
            Kind::Json => arg.value_name("JSON").value_parser(|text: &str| {
                serde_json::from_str::<Value>(text).map_err(|e| format!("not JSON: {e}"))
            }),
        };
        cmd = cmd.arg(arg);
        if flag.kind == (Kind::Text { file: true }) {
            cmd = cmd.arg(
                Arg::new(format!("{}-file", flag.long))
                    .long(format!("{}-file", flag.long))
                    .value_name("PATH")
                    .value_parser(clap::value_parser!(PathBuf))
                    .conflicts_with(flag.long.clone())
                    .help(format!("Read --{} from a file", flag.long)),
            );
        }
    }
    cmd.arg(
        Arg::new("attach")
            .long("attach")
            .value_name("FILE")
            .action(ArgAction::Append)
            .value_parser(clap::value_parser!(PathBuf))
            .help(
                "Give the panel a file (text, Markdown, code, CSV, JSON, PDF, PNG, JPEG, WebP); \
                 repeat for more, `-` reads standard input",
            ),
    )
    .arg(
        Arg::new("json")
            .long("json")
            .action(ArgAction::SetTrue)
            .help("Print the whole result as JSON"),
    )
    .arg(
        Arg::new("show-reasoning")
            .long("show-reasoning")
            .action(ArgAction::SetTrue)
            .help("Print the answer's reasoning trace too (left out by default)"),
    )
    .arg(
        Arg::new("quiet")
            .long("quiet")
            .short('q')
            .action(ArgAction::SetTrue)
            .help("No progress on stderr"),
    )
}

fn put(config: &mut Map<String, Value>, path: &[String], value: Value) {
    match path {
        [key] => {
            config.insert(key.clone(), value);
        }
        [key, rest @ ..] => {
            let entry = config.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(inner) = entry {
                put(inner, rest, value);
            }
        }
        [] => {}
    }
}

/// Reads a mode's matches into [`RunArgs`].
fn read(mode: ModeKind, m: &ArgMatches) -> RunArgs {
    let mut args = RunArgs {
        mode: mode.as_str().to_string(),
        question: m.get_one::<String>("question").cloned(),
        config_json: m.get_one::<String>("config-json").cloned(),
        conversation: m.try_get_one::<String>("conversation").ok().flatten().cloned(),
        json: m.get_flag("json"),
        show_reasoning: m.get_flag("show-reasoning"),
        quiet: m.get_flag("quiet"),
        attach: m.get_many::<PathBuf>("attach").map(|p| p.cloned().collect()).unwrap_or_default(),
        ..Default::default()
    };
    for flag in flags(mode) {
        let id = flag.long.as_str();
        let value = match &flag.kind {
            Kind::List => m
                .get_many::<String>(id)
                .map(|v| Value::Array(v.map(|s| Value::String(s.clone())).collect())),
            Kind::Fields(fields) => m.get_many::<String>(id).map(|v| {
                Value::Object(
                    fields.iter().cloned().zip(v.map(|s| Value::String(s.clone()))).collect(),
                )
            }),
            Kind::Text { .. } | Kind::Choice(_) => {
                m.get_one::<String>(id).map(|s| Value::String(s.clone()))
            }
            Kind::Whole => m.get_one::<i64>(id).map(|n| Value::from(*n)),
            Kind::Number => m.get_one::<f64>(id).map(|n| Value::from(*n)),
            Kind::Switch => m.get_flag(id).then_some(Value::Bool(true)),
            Kind::Json => m.get_one::<Value>(id).cloned(),
        };
        if let Some(v) = value {
            put(&mut args.config, &flag.path, v);
        }
        if flag.kind == (Kind::Text { file: true }) {
            if let Some(path) = m.get_one::<PathBuf>(&format!("{id}-file")) {
                args.files.push((flag.path[0].clone(), path.clone()));
            }
        }
    }
    args
}

impl clap::FromArgMatches for RunCommand {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let Some((name, sub)) = m.subcommand() else {
            return Err(clap::Error::new(clap::error::ErrorKind::MissingSubcommand));
        };
        let mode = ModeKind::parse(name)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidSubcommand))?;
        Ok(RunCommand(read(mode, sub)))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for RunCommand {
    fn augment_args(cmd: Command) -> Command {
        cmd.subcommand_required(true)
            .subcommand_value_name("MODE")
            .subcommands(ModeKind::all().into_iter().map(mode_command))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// The `conclave run` command alone, for tests and help.
pub fn command() -> Command {
    <RunCommand as clap::Args>::augment_args(Command::new("run").no_binary_name(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(line: &[&str]) -> Result<RunArgs, clap::Error> {
        let m = command().try_get_matches_from(line)?;
        <RunCommand as clap::FromArgMatches>::from_arg_matches(&m).map(|c| c.0)
    }

    #[test]
    fn every_mode_has_a_subcommand_and_its_settings_are_flags() {
        for mode in ModeKind::all() {
            let args = parse(&[mode.as_str(), "q"]).unwrap();
            assert_eq!(args.mode, mode.as_str());
            assert_eq!(args.question.as_deref(), Some("q"));
        }
        let a = parse(&["jury", "Evaluate", "--juror-models", "a,b,c", "--foreman", "f"]).unwrap();
        assert_eq!(a.config["jurorModels"], json!(["a", "b", "c"]));
        assert_eq!(a.config["foremanModel"], "f");
        let a = parse(&["council", "q", "--models", "a,b", "--chairman", "c", "-q"]).unwrap();
        assert_eq!(a.config["councilModels"], json!(["a", "b"]));
        assert_eq!(a.config["chairmanModel"], "c");
        assert!(a.quiet);
        let a = parse(&["delphi", "q", "--max-rounds", "3", "--question-type", "numeric"]).unwrap();
        assert_eq!(a.config["maxRounds"], 3);
        assert_eq!(a.config["questionType"], "numeric");
        let a = parse(&["clarity", "--models", "s,a,g,r", "--models-arbiter", "x"]).unwrap();
        assert_eq!(a.config["models"]["skeptic"], "s");
        let a = parse(&["clarity", "--models-arbiter", "x", "--discussion", "never"]).unwrap();
        assert_eq!(a.config["models"], json!({"arbiter": "x"}));
        let a = parse(&["jury", "--content-file", "brief.md"]).unwrap();
        assert_eq!(a.files, vec![("content".to_string(), PathBuf::from("brief.md"))]);
    }

    #[test]
    fn lists_of_objects_and_nested_settings_are_given_as_json() {
        let steps = r#"[{"model":"a","mandate":"draft"},{"model":"b","mandate":"custom","customMandate":"Shorter."}]"#;
        let a = parse(&["chain", "q", "--steps", steps]).unwrap();
        assert_eq!(a.config["steps"][1]["customMandate"], "Shorter.");
        let rubric = r#"{"name":"API","description":"Is it safe?","criteria":[]}"#;
        let a = parse(&["peer_review", "q", "--custom-rubric", rubric]).unwrap();
        assert_eq!(a.config["customRubric"]["name"], "API");
        let Err(err) = parse(&["chain", "q", "--steps", "a,b"]) else { panic!("a,b was taken") };
        assert!(err.to_string().contains("not JSON"), "{err}");
        // A nested object's own fields are not flags of their own.
        assert!(parse(&["peer_review", "q", "--custom-rubric-criteria", "x"]).is_err());
        let mut cmd = command();
        let help = cmd.find_subcommand_mut("chain").unwrap().render_help().to_string();
        let line = help.lines().find(|l| l.contains("--steps")).unwrap_or("");
        assert!(line.contains("--steps <JSON>"), "{help}");
        assert!(help.contains("[JSON: [{model?, mandate, customMandate?}, …]]"), "{help}");
    }

    #[test]
    fn flags_a_mode_does_not_take_are_refused_with_clap_s_message() {
        for line in [
            &["debate", "q", "--chairman", "x"][..],
            &["delphi", "q", "--max-rounds", "three"],
            &["clarity", "--discussion", "sometimes"],
            &["vote", "q", "--content-file", "x"],
            &["nosuchmode", "q"],
            &["jury", "q", "--conversation", "c"],
        ] {
            assert!(parse(line).is_err(), "{line:?} was accepted");
        }
    }

    #[test]
    fn help_lists_a_mode_s_flags_with_their_meaning() {
        let mut cmd = command();
        let jury = cmd.find_subcommand_mut("jury").unwrap();
        let help = jury.render_long_help().to_string();
        for needle in ["--juror-models", "--foreman-model", "--content-file", "--config-json"] {
            assert!(help.contains(needle), "{needle} missing from:\n{help}");
        }
        assert!(help.contains("[aliases: --foreman, --chairman]"), "{help}");
        // Red Team's chairman is its synthesizer, not its generator.
        let rt = cmd.find_subcommand_mut("red_team").unwrap().render_help().to_string();
        let line = |flag: &str| rt.lines().find(|l| l.contains(flag)).unwrap_or("").to_string();
        assert!(line("--synthesizer-model").contains("--chairman"), "{rt}");
        assert!(!line("--generator-model").contains("--chairman"), "{rt}");
    }
}
