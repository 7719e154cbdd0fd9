//! Every role's default models, in one table, and the backups of the roles one model fills.
//!
//! A role's models when a request names none come from [`TABLE`]: the sim models offline, the
//! seed's models with a real provider. `conclave.toml` overrides an entry by the role's own id
//! (`[defaults] "jury.juror" = ["a", "b"]`), and names a role's backup the same way
//! (`[fallback] "brainstorm.curator" = "m"`); the older backup names (`chairman`, `foreman`,
//! `facilitator`, `arbiter`), each shared by the roles that [`super::registry::Role::fallback`]
//! says, still work, and a role's own id wins over them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::registry::{ModeKind, Role};

/// One role's built-in default models.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// `mode.role`, as in events, caps and the configuration.
    pub role: &'static str,
    /// Offline: the built-in sim models.
    pub sim: &'static [&'static str],
    /// With a real provider configured.
    pub real: &'static [&'static str],
}

const SIM3: &[&str] = &["sim/alpha", "sim/beta", "sim/gamma"];
const SIM4: &[&str] = &["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon"];
const REAL3: &[&str] = &["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];
const REAL4: &[&str] =
    &["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro", "perplexity/sonar-pro"];
const ALPHA: &[&str] = &["sim/alpha"];
const OPUS: &[&str] = &["anthropic/claude-opus-4-6"];
const DELTA: &[&str] = &["sim/delta"];
const SONNET: &[&str] = &["anthropic/claude-sonnet-4"];
const HAIKU_SIM: &[&str] = &["sim/haiku"];
const HAIKU: &[&str] = &["anthropic/claude-haiku-4-5"];

const fn entry(
    role: &'static str,
    sim: &'static [&'static str],
    real: &'static [&'static str],
) -> Entry {
    Entry { role, sim, real }
}

/// The built-in defaults of every role that has models of its own (a role that takes another
/// role's model by default, such as Red Team's synthesizer, has no entry).
pub const TABLE: &[Entry] = &[
    entry("council.council", SIM3, REAL3),
    entry("council.chairman", ALPHA, OPUS),
    entry("vote.voter", SIM3, REAL3),
    entry("jury.juror", SIM3, REAL3),
    entry("jury.foreman", DELTA, &["perplexity/sonar-pro"]),
    entry("debate.respondent", SIM3, REAL3),
    entry("delphi.panelist", SIM4, REAL4),
    entry("delphi.facilitator", DELTA, SONNET),
    entry("clarity.skeptic", HAIKU_SIM, HAIKU),
    entry("clarity.advocate", HAIKU_SIM, HAIKU),
    entry("clarity.generalist", HAIKU_SIM, HAIKU),
    entry("clarity.arbiter", HAIKU_SIM, HAIKU),
    entry("red_team.generator", ALPHA, OPUS),
    entry("red_team.attacker", &["sim/beta"], &["openai/o3"]),
    entry("chain.drafter", ALPHA, OPUS),
    entry(
        "chain.improver",
        &["sim/beta", "sim/gamma", "sim/delta"],
        &["openai/o3", "google/gemini-2.5-pro", "anthropic/claude-sonnet-4"],
    ),
    entry("specialist_panel.specialist", SIM3, REAL3),
    entry("blueprint.author", SIM3, REAL3),
    entry("blueprint.architect", ALPHA, OPUS),
    entry("peer_review.reviewer", SIM3, REAL3),
    entry("tournament.contestant", SIM4, REAL4),
    entry("tournament.judge", DELTA, SONNET),
    entry("confidence_weighted.respondent", SIM3, REAL3),
    entry("confidence_weighted.synthesizer", ALPHA, OPUS),
    entry("decompose.worker", SIM3, REAL3),
    entry("decompose.planner", ALPHA, OPUS),
    entry("brainstorm.ideator", SIM3, REAL3),
    entry("brainstorm.refiner", ALPHA, OPUS),
    entry("brainstorm.curator", ALPHA, OPUS),
    entry("fact_check.checker", SIM3, REAL3),
    entry("fact_check.generator", ALPHA, OPUS),
    entry("fact_check.reporter", ALPHA, OPUS),
    entry("fact_check.extractor", ALPHA, OPUS),
    entry("solo.answerer", ALPHA, OPUS),
    entry("echo.answerer", &["sim/alpha", "sim/beta"], &["sim/alpha", "sim/beta"]),
];

/// The older backup names, each shared by several roles (see [`Role::fallback`]).
pub const BACKUP_ALIASES: [&str; 4] = ["chairman", "foreman", "facilitator", "arbiter"];

/// The roles of the registered modes, by `mode.role`.
fn role(key: &str) -> Option<(ModeKind, &'static Role)> {
    let (mode, role) = key.split_once('.')?;
    let kind = ModeKind::parse(mode)?;
    kind.spec().roles.iter().find(|r| r.id == role).map(|r| (kind, r))
}

/// The configuration's overrides of [`TABLE`] (`[defaults]`), checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelDefaults {
    overrides: BTreeMap<String, Vec<String>>,
}

/// `[defaults]` as the file gives it: a role's id, and one model or a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl ModelDefaults {
    /// Checks `[defaults]`: each key a role of [`TABLE`], each value one model for a role one
    /// model fills and one or more for a panel, none blank or repeated. The error names the key.
    pub fn from_config(entries: BTreeMap<String, OneOrMany>) -> Result<Self, String> {
        let mut overrides = BTreeMap::new();
        for (key, value) in entries {
            let Some((_, role)) = role(&key).filter(|_| TABLE.iter().any(|e| e.role == key)) else {
                // Only the registered modes' (the test modes are not in a release build).
                let known: Vec<&str> =
                    TABLE.iter().map(|e| e.role).filter(|r| role(r).is_some()).collect();
                return Err(format!(
                    "defaults.{key}: no such role with default models; the roles are {}",
                    known.join(", ")
                ));
            };
            let models = match value {
                OneOrMany::One(m) => vec![m],
                OneOrMany::Many(list) => list,
            };
            let models: Vec<String> = models.into_iter().map(|m| m.trim().to_string()).collect();
            if models.is_empty() || models.iter().any(String::is_empty) {
                return Err(format!("defaults.{key}: name at least one model, none blank"));
            }
            if !role.panel && models.len() != 1 {
                return Err(format!("defaults.{key}: this role is one model; name one"));
            }
            let mut seen = models.clone();
            seen.sort();
            seen.dedup();
            if seen.len() != models.len() {
                return Err(format!("defaults.{key}: a model is named twice"));
            }
            overrides.insert(key, models);
        }
        Ok(ModelDefaults { overrides })
    }

    /// Every model the overrides name, with its key, for the start-up routing check.
    pub fn configured(&self) -> Vec<(String, &str)> {
        self.overrides
            .iter()
            .flat_map(|(k, ms)| ms.iter().map(move |m| (format!("defaults.{k}"), m.as_str())))
            .collect()
    }

    /// The configured override of `mode`'s single-model `role`, if any: for a role whose
    /// built-in default is another role's model (Brainstorm's curator: the first ideator).
    pub fn overridden(&self, mode: &str, role: &str) -> Option<String> {
        self.overrides.get(&format!("{mode}.{role}")).and_then(|ms| ms.first().cloned())
    }

    /// The default models of `mode`'s `role`: the configured override, else the table's sim
    /// models `offline` and its real ones otherwise; empty for a role without an entry.
    pub fn models(&self, mode: &str, role: &str, offline: bool) -> Vec<String> {
        let key = format!("{mode}.{role}");
        if let Some(ms) = self.overrides.get(&key) {
            return ms.clone();
        }
        TABLE
            .iter()
            .find(|e| e.role == key)
            .map(|e| if offline { e.sim } else { e.real })
            .unwrap_or(&[])
            .iter()
            .map(|m| m.to_string())
            .collect()
    }
}

/// Checks that with `defaults` a run that names no models can start in every mode: each mode's
/// example, its model fields left out, is validated with the built-in table and with the
/// configured `[defaults]`, and must not be refused by the second alone (Jury's foreman among
/// its jurors would refuse every Jury run that names none, with an error about a field the
/// person never set). The error names the mode, its `[defaults]` keys and the refusal.
pub fn check_usable(defaults: &super::Defaults) -> Result<(), String> {
    if defaults.default_models.overrides.is_empty() {
        return Ok(());
    }
    let built_in = super::Defaults { default_models: ModelDefaults::default(), ..defaults.clone() };
    for kind in ModeKind::all() {
        let spec = kind.spec();
        let mut body = (spec.example)();
        if let Some(config) = body.get_mut("modeConfig").and_then(Value::as_object_mut) {
            for field in spec.roles.iter().filter_map(|r| r.field) {
                config.remove(field);
            }
        }
        if super::validate(&body, &built_in).is_err() {
            continue;
        }
        if let Err(e) = super::validate(&body, defaults) {
            let prefix = format!("{}.", spec.id);
            let keys: Vec<String> = defaults
                .default_models
                .overrides
                .keys()
                .filter(|k| k.starts_with(&prefix))
                .map(|k| format!("defaults.{k}"))
                .collect();
            return Err(format!(
                "{}: a {} run that names no models would be refused: {}",
                keys.join(", "),
                spec.label,
                e.message
            ));
        }
    }
    Ok(())
}

/// Backup models for the roles one model fills (`[fallback]` in the configuration file). When
/// such a role's call fails after the engine's retries, the mode calls the backup once with the
/// same prompt before it takes its usual failure path (see [`super::common::Calls::solo`]).
/// Server configuration only: requests cannot set them. Validation copies the one a run may use
/// into the mode's stored configuration (`chairmanFallbackModel`, `foremanFallbackModel`, …).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Fallbacks {
    /// The older names, each shared by the roles whose [`Role::fallback`] names it.
    pub chairman: Option<String>,
    pub foreman: Option<String>,
    pub facilitator: Option<String>,
    pub arbiter: Option<String>,
    /// By a role's own id (`brainstorm.curator`): wins over the older name.
    pub roles: BTreeMap<String, String>,
}

impl Fallbacks {
    /// Checks `[fallback]`: each key an older name or the id of a role that takes a backup.
    pub fn from_config(entries: BTreeMap<String, String>) -> Result<Self, String> {
        let mut f = Fallbacks::default();
        for (key, model) in entries {
            match key.as_str() {
                "chairman" => f.chairman = Some(model),
                "foreman" => f.foreman = Some(model),
                "facilitator" => f.facilitator = Some(model),
                "arbiter" => f.arbiter = Some(model),
                _ if role(&key).is_some_and(|(_, r)| r.fallback.is_some()) => {
                    f.roles.insert(key, model);
                }
                _ => {
                    let roles: Vec<String> = super::registry::MODES
                        .iter()
                        .flat_map(|m| {
                            let with_backup = m.roles.iter().filter(|r| r.fallback.is_some());
                            with_backup.map(|r| format!("{}.{}", m.id, r.id))
                        })
                        .collect();
                    return Err(format!(
                        "fallback.{key}: no role takes a backup by that name; use {} or a \
                         role's id ({})",
                        BACKUP_ALIASES.join(", "),
                        roles.join(", ")
                    ));
                }
            }
        }
        Ok(f)
    }

    fn alias(&self, name: &str) -> Option<&str> {
        match name {
            "chairman" => self.chairman.as_deref(),
            "foreman" => self.foreman.as_deref(),
            "facilitator" => self.facilitator.as_deref(),
            "arbiter" => self.arbiter.as_deref(),
            _ => None,
        }
    }

    /// Every configured backup as (key, model), for checks at start-up.
    pub fn configured(&self) -> Vec<(&str, &str)> {
        let aliases = BACKUP_ALIASES.iter().filter_map(|k| self.alias(k).map(|m| (*k, m)));
        aliases.chain(self.roles.iter().map(|(k, m)| (k.as_str(), m.as_str()))).collect()
    }

    /// The backup configured for `mode`'s `role`: by its own id, else by its older name.
    pub fn of(&self, mode: &str, role: &str) -> Option<&str> {
        if let Some(m) = self.roles.get(&format!("{mode}.{role}")) {
            return Some(m);
        }
        let kind = ModeKind::parse(mode)?;
        self.alias(kind.spec().roles.iter().find(|r| r.id == role)?.fallback?)
    }

    /// The backup a run may use for `mode`'s `role` whose model is `primary`: none when it is
    /// the primary itself (the engine has already retried that model).
    pub fn for_role(&self, mode: &str, role: &str, primary: &str) -> Option<String> {
        self.of(mode, role)
            .map(str::trim)
            .filter(|b| !b.is_empty() && *b != primary)
            .map(str::to_string)
    }
}

impl<'de> Deserialize<'de> for Fallbacks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entries = BTreeMap::<String, String>::deserialize(d)?;
        Fallbacks::from_config(entries).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_a_request_names_has_a_default_and_every_entry_is_a_role() {
        for e in TABLE {
            let (_, r) = role(e.role).unwrap_or_else(|| panic!("{} is no role", e.role));
            assert!(!e.sim.is_empty() && !e.real.is_empty(), "{}", e.role);
            assert!(r.panel || (e.sim.len() == 1 && e.real.len() == 1), "{}", e.role);
        }
    }

    #[test]
    fn an_override_wins_and_is_checked_by_the_roles_id() {
        let one = |s: &str| OneOrMany::One(s.into());
        let d = ModelDefaults::from_config(BTreeMap::from([
            ("jury.juror".to_string(), OneOrMany::Many(vec!["sim/x".into(), "sim/y".into()])),
            ("jury.foreman".to_string(), one("sim/z")),
        ]))
        .unwrap();
        assert_eq!(d.models("jury", "juror", true), ["sim/x", "sim/y"]);
        assert_eq!(d.models("jury", "foreman", false), ["sim/z"]);
        assert_eq!(d.models("vote", "voter", true), SIM3);
        assert_eq!(d.models("vote", "voter", false), REAL3);
        for (key, value, says) in [
            ("jury.jurors", one("sim/x"), "no such role"),
            ("red_team.synthesizer", one("sim/x"), "no such role"),
            ("jury.foreman", OneOrMany::Many(vec!["sim/a".into(), "sim/b".into()]), "one model"),
            ("jury.juror", OneOrMany::Many(vec![]), "at least one"),
            ("jury.juror", OneOrMany::Many(vec!["sim/a".into(), "sim/a".into()]), "twice"),
        ] {
            let e =
                ModelDefaults::from_config(BTreeMap::from([(key.to_string(), value)])).unwrap_err();
            assert!(e.starts_with(&format!("defaults.{key}:")) && e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_server_runs_on_sims_by_default_until_every_role_is_sent_elsewhere() {
        let defaults =
            |offline: bool, entries: &BTreeMap<String, OneOrMany>| super::super::Defaults {
                offline,
                default_models: ModelDefaults::from_config(entries.clone()).unwrap(),
                ..Default::default()
            };
        let none = BTreeMap::new();
        assert!(defaults(true, &none).sim_by_default(), "no key, no [defaults]: the sims");
        // Every role of every registered mode sent to a local server.
        let mut local: BTreeMap<String, OneOrMany> = TABLE
            .iter()
            .filter_map(|e| Some((e.role, role(e.role)?.1)))
            .map(|(key, r)| {
                let models = match r.panel {
                    true => {
                        OneOrMany::Many(vec!["local/a".into(), "local/b".into(), "local/c".into()])
                    }
                    false => OneOrMany::One("local/a".into()),
                };
                (key.to_string(), models)
            })
            .collect();
        assert!(!defaults(true, &local).sim_by_default(), "no role defaults to a sim");
        // One role left to the table's sim model is enough to say so.
        local.remove("jury.foreman");
        assert!(defaults(true, &local).sim_by_default());
    }

    #[test]
    fn a_backup_by_role_id_wins_over_its_older_name() {
        let f = Fallbacks::from_config(BTreeMap::from([
            ("facilitator".to_string(), "sim/f".to_string()),
            ("brainstorm.curator".to_string(), "sim/c".to_string()),
        ]))
        .unwrap();
        assert_eq!(f.of("brainstorm", "curator"), Some("sim/c"));
        assert_eq!(f.of("delphi", "facilitator"), Some("sim/f"));
        assert_eq!(f.of("jury", "foreman"), None);
        assert_eq!(f.for_role("delphi", "facilitator", "sim/f"), None, "not the primary itself");
        for bad in ["juror", "jury.juror", "nosuch.role"] {
            let e = Fallbacks::from_config(BTreeMap::from([(bad.to_string(), "m".to_string())]))
                .unwrap_err();
            assert!(e.starts_with(&format!("fallback.{bad}:")), "{e}");
        }
    }
}
