use super::*;
use crate::modes;

#[test]
fn flags_win_over_the_file_and_the_file_over_defaults() {
    let file: FileConfig = toml::from_str(
        r#"
            bind = "0.0.0.0:9000"
            database_url = "sqlite://file.db"
            stage_timeout_ms = 30000
            [sim]
            latency_ms = 50
            [sim.models."sim/slow"]
            latency_ms = 5000
            [[routes]]
            prefix = "ollama/"
            base_url = "http://127.0.0.1:11434/v1"
            "#,
    )
    .unwrap();
    let o = Overrides { bind: Some("127.0.0.1:1".into()), ..Default::default() };
    let c = Config::from_parts(file, &o, None, None, Some(7)).unwrap();
    assert_eq!(c.bind, "127.0.0.1:1");
    assert_eq!(c.database_url, "sqlite://file.db");
    assert_eq!(c.stage_timeout_ms, 30000);
    assert_eq!(c.sim.latency_ms, 7, "CONCLAVE_SIM_LATENCY_MS wins over the file");
    assert_eq!(c.sim.models["sim/slow"].latency_ms, Some(5000));
    assert!(c.routes[0].strip_prefix);
    assert!(c.offline());
}

#[test]
fn concurrency_caps_are_read_and_checked() {
    let file: FileConfig = toml::from_str(
        "openrouter_max_concurrent_calls = 4\n[sim]\nmax_concurrent_calls = 2\n\
             [[routes]]\nprefix = \"x/\"\nbase_url = \"http://h/v1\"\nmax_concurrent_calls = 3",
    )
    .unwrap();
    let c = Config::from_parts(file, &Overrides::default(), None, None, None).unwrap();
    assert_eq!((c.openrouter_max_concurrent_calls, c.sim_max_concurrent_calls), (4, Some(2)));
    assert_eq!(c.routes[0].max_concurrent_calls, Some(3));
    assert_eq!(Config::defaults().openrouter_max_concurrent_calls, 16);
    let zero: FileConfig = toml::from_str(
        "[[routes]]\nprefix = \"x/\"\nbase_url = \"http://h\"\nmax_concurrent_calls = 0",
    )
    .unwrap();
    assert!(Config::from_parts(zero, &Overrides::default(), None, None, None).is_err());
}

#[test]
fn unknown_keys_and_bad_routes_are_reported() {
    assert!(toml::from_str::<FileConfig>("bnid = \"x\"").is_err());
    let file: FileConfig =
        toml::from_str("[[routes]]\nprefix = \"x/\"\nbase_url = \"localhost:1\"").unwrap();
    let err = Config::from_parts(file, &Overrides::default(), None, None, None).unwrap_err();
    assert!(err.to_string().contains("base_url"), "{err}");
}

#[test]
fn backup_models_are_read_and_must_be_served() {
    let file: FileConfig = toml::from_str(
        "[fallback]\nchairman = \"sim/beta\"\nforeman = \"sim/gamma\"\narbiter = \"sim/haiku\"",
    )
    .unwrap();
    let c = Config::from_parts(file, &Overrides::default(), None, None, None).unwrap();
    assert_eq!(c.fallback.chairman.as_deref(), Some("sim/beta"));
    assert_eq!(c.fallback.foreman.as_deref(), Some("sim/gamma"));
    assert_eq!(c.fallback.facilitator, None);
    assert_eq!(c.fallback.arbiter.as_deref(), Some("sim/haiku"));
    assert_eq!(Config::defaults().fallback, Fallbacks::default());
    // Unknown roles are refused, like any unknown key.
    assert!(toml::from_str::<FileConfig>("[fallback]\njuror = \"sim/beta\"").is_err());
    // Offline, a backup nothing serves is refused; with a key OpenRouter serves it.
    let file: FileConfig = toml::from_str("[fallback]\nfacilitator = \"openai/o3\"").unwrap();
    let err =
        Config::from_parts(file.clone(), &Overrides::default(), None, None, None).unwrap_err();
    assert!(err.to_string().contains("fallback.facilitator"), "{err}");
    assert!(Config::from_parts(file, &Overrides::default(), Some("k".into()), None, None).is_ok());
}

#[test]
fn default_models_and_backups_by_role_id_are_read_checked_and_used() {
    let file: FileConfig = toml::from_str(
            "[defaults]\n\"council.council\" = [\"sim/x\", \"sim/y\"]\n\"council.chairman\" = \"sim/z\"\n\
             [fallback]\nchairman = \"sim/old\"\n\"brainstorm.curator\" = \"sim/cur\"",
        )
        .unwrap();
    let c = Config::from_parts(file, &Overrides::default(), None, None, None).unwrap();
    let d = c.mode_defaults();
    let council = modes::validate(&serde_json::json!({ "question": "q" }), &d).unwrap();
    assert_eq!(council.config["councilModels"], serde_json::json!(["sim/x", "sim/y"]));
    assert_eq!(council.config["chairmanModel"], "sim/z");
    assert_eq!(council.config["chairmanFallbackModel"], "sim/old");
    let body = serde_json::json!({ "mode": "brainstorm", "question": "q" });
    let brainstorm = modes::validate(&body, &d).unwrap();
    // The curator's backup by its own id, the refiner's by the older name.
    assert_eq!(brainstorm.config["facilitatorFallbackModel"], "sim/cur");
    assert_eq!(brainstorm.config["chairmanFallbackModel"], "sim/old");
    for (text, says) in [
        ("[defaults]\n\"council.judge\" = \"sim/x\"", "defaults.council.judge:"),
        ("[defaults]\n\"council.chairman\" = [\"sim/a\", \"sim/b\"]", "one model"),
        ("[defaults]\n\"council.chairman\" = \"openai/o3\"", "no provider serves"),
        ("[fallback]\n\"council.council\" = \"sim/x\"", "fallback.council.council:"),
        // Defaults that no run of their mode could start with are refused at start, not on
        // every run: a Jury foreman among its jurors, a Red Team attacker that is its generator.
        (
            "[defaults]\n\"jury.juror\" = [\"sim/a\", \"sim/b\"]\n\"jury.foreman\" = \"sim/a\"",
            "defaults.jury.foreman, defaults.jury.juror: a Jury run that names no models would \
             be refused: Foreman model must not be one of the juror models",
        ),
        (
            "[defaults]\n\"red_team.attacker\" = \"sim/alpha\"",
            "defaults.red_team.attacker: a Red Team run that names no models would be refused",
        ),
    ] {
        let err = match toml::from_str::<FileConfig>(text) {
            Err(e) => e.to_string(),
            Ok(file) => Config::from_parts(file, &Overrides::default(), None, None, None)
                .unwrap_err()
                .to_string(),
        };
        assert!(err.contains(says), "{text}: {err}");
    }
}

#[test]
fn redis_is_off_unless_configured_and_its_settings_are_checked() {
    let none =
        Config::from_parts(FileConfig::default(), &Overrides::default(), None, None, None).unwrap();
    assert_eq!((none.redis_url, none.redis_prefix.as_str()), (None, "conclave"));
    let file: FileConfig =
        toml::from_str("redis_url = \"redis://127.0.0.1:6379/2\"\nredis_prefix = \"t-1\"").unwrap();
    let c = Config::from_parts(file, &Overrides::default(), None, None, None).unwrap();
    assert_eq!(c.redis_url.as_deref(), Some("redis://127.0.0.1:6379/2"));
    assert_eq!(c.redis_prefix, "t-1");
    let tls: FileConfig = toml::from_str("redis_url = \"rediss://h:6380\"").unwrap();
    let c = Config::from_parts(tls, &Overrides::default(), None, None, None).unwrap();
    assert_eq!(c.redis_url.as_deref(), Some("rediss://h:6380"));
    for bad in ["redis_url = \"http://h\"", "redis_prefix = \"a b\"", "redis_prefix = \"\""] {
        let file: FileConfig = toml::from_str(bad).unwrap();
        assert!(
            Config::from_parts(file, &Overrides::default(), None, None, None).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn a_parse_error_quotes_no_password() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conclave.toml");
    std::fs::write(&path, "database_url = \"postgres://app:S3cretPw@h/db\nbind = 1\n").unwrap();
    let e = read_file(&path).unwrap_err().to_string();
    assert!(e.contains("postgres://app:[redacted]@h/db") && !e.contains("S3cretPw"), "{e}");
}

#[test]
fn keys_never_appear_in_debug_output() {
    let file: FileConfig = toml::from_str(
        r#"
            [[routes]]
            prefix = "paid/"
            base_url = "https://api.example.com/v1"
            api_key = "sk-route-KEY-0123456789"
            "#,
    )
    .unwrap();
    let shown = format!("{file:?}");
    assert!(!shown.contains("KEY-0123456789") && shown.contains("[redacted]"), "{shown}");
    let c = Config::from_parts(
        file,
        &Overrides::default(),
        Some("sk-or-KEY-9876543210".into()),
        None,
        None,
    )
    .unwrap();
    let shown = format!("{c:?} {:?}", c.routes);
    assert!(!shown.contains("KEY-"), "{shown}");
    // The keys are still there to be sent.
    assert_eq!(c.routes[0].api_key.as_ref().map(Secret::expose), Some("sk-route-KEY-0123456789"));
    assert_eq!(c.openrouter_api_key.as_ref().map(Secret::expose), Some("sk-or-KEY-9876543210"));
}

#[test]
fn routes_pick_providers_and_unknown_models_need_a_key() {
    let c = Config::defaults();
    let p = c.providers();
    assert!(p.resolve("sim/alpha").is_ok());
    assert!(p.resolve("openai/o3").is_err());
    let mut keyed = Config::defaults();
    keyed.openrouter_api_key = Some("k".into());
    assert!(keyed.providers().resolve("openai/o3").is_ok());
}

#[test]
fn output_caps_default_to_2000_and_300_for_the_title_and_are_read_per_role_and_mode() {
    let c = Config::defaults();
    let p = c.providers();
    assert_eq!(p.max_tokens("council", "council", "sim/a"), 2000);
    assert_eq!(p.max_tokens("council", "title", "sim/a"), 300);
    let file: FileConfig = toml::from_str(
        "[max_tokens]\ndefault = 1500\nchairman = 2500\n\"council.chairman\" = 4000\n\
             \"jury.foreman\" = 3000\n\
             [[routes]]\nprefix = \"x/\"\nbase_url = \"http://h/v1\"\nmax_tokens = 1000\n\
             max_tokens_field = \"max_completion_tokens\"\nopenrouter = true",
    )
    .unwrap();
    let c = Config::from_parts(file, &Overrides::default(), None, None, None).unwrap();
    assert_eq!(c.routes[0].max_tokens_field, Some(TokenField::MaxCompletionTokens));
    assert_eq!(c.routes[0].openrouter, Some(true));
    let p = c.providers();
    assert_eq!(p.max_tokens("council", "chairman", "sim/a"), 4000, "mode.role wins");
    assert_eq!(p.max_tokens("vote", "chairman", "sim/a"), 2500, "then the role");
    assert_eq!(p.max_tokens("jury", "foreman", "sim/a"), 3000);
    assert_eq!(p.max_tokens("jury", "juror", "sim/a"), 1500, "then the default");
    assert_eq!(p.max_tokens("jury", "title", "sim/a"), 300, "the title keeps its own");
    assert_eq!(p.max_tokens("council", "chairman", "x/m"), 1000, "the route is a ceiling");
    assert_eq!(p.max_tokens("council", "title", "x/m"), 300);
}

#[test]
fn invalid_output_caps_are_configuration_errors() {
    let route =
        |extra: &str| format!("[[routes]]\nprefix = \"x/\"\nbase_url = \"http://h/v1\"\n{extra}");
    for (bad, says) in [
        ("[max_tokens]\ndefault = 0".to_string(), "max_tokens.\"default\""),
        ("[max_tokens]\ntitle = -5".to_string(), "not -5"),
        ("[max_tokens]\ndefault = 99999999999".to_string(), "from 1 to 200000"),
        ("[max_tokens]\ncheirman = 10".to_string(), "names no role"),
        ("[max_tokens]\n\"jury.chairman\" = 10".to_string(), "jury: juror, foreman"),
        ("[max_tokens]\n\"chess.title\" = 10".to_string(), "names no role"),
        (route("max_tokens = 0"), "route \"x/\": max_tokens"),
    ] {
        let file: FileConfig = toml::from_str(&bad).unwrap();
        let err = Config::from_parts(file, &Overrides::default(), None, None, None)
            .expect_err(&bad)
            .to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
    // Not a number, or not a field name the client knows: refused when the file is read.
    assert!(toml::from_str::<FileConfig>("[max_tokens]\ndefault = \"lots\"").is_err());
    assert!(toml::from_str::<FileConfig>(&route("max_tokens_field = \"max_tokenz\"")).is_err());
}

#[test]
fn structured_output_and_context_are_read_per_route_and_checked() {
    let file: FileConfig = toml::from_str(
        "[sim]\nstructured_output = \"json_object\"\ncontext_tokens = 2048\n\
             [[routes]]\nprefix = \"x/\"\nbase_url = \"http://h/v1\"\n\
             structured_output = \"json_schema\"\ncontext_tokens = 4096\n\
             [[routes]]\nprefix = \"y/\"\nbase_url = \"http://h/v1\"",
    )
    .unwrap();
    let c = Config::from_parts(file, &Overrides::default(), None, None, None).unwrap();
    assert_eq!(c.sim.context_tokens, Some(2048));
    let p = c.providers();
    assert_eq!(p.structured_output("x/m"), StructuredOutput::JsonSchema);
    assert_eq!(p.structured_output("y/m"), StructuredOutput::Off, "off unless asked");
    assert_eq!(p.structured_output("sim/a"), StructuredOutput::JsonObject);
    let models = ["x/m", "y/m", "sim/a"].map(String::from);
    let asked = p.structured(&models);
    assert!(asked.json("x/m") && asked.json("sim/a") && !asked.json("y/m"));
    let route =
        |extra: &str| format!("[[routes]]\nprefix = \"x/\"\nbase_url = \"http://h/v1\"\n{extra}");
    for (bad, says) in [
        (route("context_tokens = 10"), "route \"x/\": context_tokens must be between 256"),
        ("[sim]\ncontext_tokens = -1".to_string(), "[sim] context_tokens"),
    ] {
        let file: FileConfig = toml::from_str(&bad).unwrap();
        let err = Config::from_parts(file, &Overrides::default(), None, None, None)
            .expect_err(&bad)
            .to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
    assert!(toml::from_str::<FileConfig>(&route("structured_output = \"json\"")).is_err());
}

/// Every role a mode gives its calls (in a run of each mode on sim answers) is one its
/// registry entry lists, and the default caps cut none of the sim's answers.
#[test]
fn call_roles_list_every_mode_and_the_roles_its_calls_have() {
    use crate::modes::{self, testkit, Effect, ModeKind};
    use crate::providers::sim::capped;
    let providers = Config::defaults().providers();
    for kind in ModeKind::all() {
        let roles: Vec<&str> = kind.spec().roles.iter().map(|r| r.id).collect();
        let body = (kind.spec().example)();
        let defaults = modes::Defaults {
            offline: true,
            stage_timeout_ms: 60_000,
            fallback: Fallbacks::default(),
            ..Default::default()
        };
        let req = modes::validate(&body, &defaults).unwrap();
        let mut mode =
            modes::instantiate(&req, testkit::ctx("Why?", Vec::new(), true)).expect("builds");
        let mut effects = mode.start();
        let mut seen = 0;
        for _ in 0..500 {
            let mut next = Vec::new();
            for effect in std::mem::take(&mut effects) {
                match effect {
                    Effect::Call(spec) => {
                        assert!(
                            roles.contains(&spec.role.as_str()),
                            "{}: role {:?} is not among its registered roles",
                            kind.as_str(),
                            spec.role
                        );
                        seen += 1;
                        let text =
                            crate::modes::sim_text::respond(&spec.model, &spec.messages, false);
                        let cap = providers.max_tokens(kind.as_str(), &spec.role, &spec.model);
                        assert_eq!(capped(&text, Some(cap)), text, "{}", spec.key);
                        next.extend(mode.on_reply(testkit::ok(&spec, &text)));
                    }
                    Effect::Timer { key, .. } => next.extend(mode.on_timer(&key)),
                    _ => {}
                }
            }
            if next.is_empty() {
                break;
            }
            effects = next;
        }
        // Solo's one call and no title (it is the eval's baseline); every other mode more.
        let least = if kind.as_str() == "solo" { 1 } else { 2 };
        assert!(seen >= least, "{}: its calls ran", kind.as_str());
    }
}
