//! The README and the pages under `docs/` show only what exists:
//!
//! - every `--flag` on a line that invokes `conclave` (in a code block, or in one code span) is
//!   a flag of that command, as the built binary's `--help` lists it (`conclave run MODE --help`
//!   per mode), and a code span that is a flag alone (`--json`, `--budget N`) names a flag of
//!   the command its page is about (a mode's page: that mode's; any other page: any command's);
//! - every ```` ```toml ```` block is a configuration file the server accepts, read by its own
//!   parser (`deny_unknown_fields`) and checked as at start; each commented-out `# key = value`
//!   line is tried uncommented too;
//! - every event name the pages present as an event (the first column of an events table, the
//!   names in an `Events:` paragraph, and any `…_start` / `…_complete` name in a code span) is
//!   one the code emits;
//! - every link to a file of the repository leads to one, and an `#anchor` to a heading there;
//! - every mode the binary runs has a page, `docs/modes/<id>.md`, linked from the README.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use conclave::config::{Config, FileConfig, Overrides};
use regex::Regex;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_conclave");
/// The demonstration mode that only test builds have (`demo-mode`); the docs do not describe it.
const DEMO_MODE: &str = "echo";

/// One Markdown file, as text, with its path from the repository's root.
struct Page {
    path: String,
    text: String,
}

fn pages() -> Vec<Page> {
    let mut files = vec![PathBuf::from("README.md")];
    let mut dirs = vec![PathBuf::from("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(Path::new(ROOT).join(&dir)).unwrap() {
            let entry = entry.unwrap();
            let rel = dir.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                dirs.push(rel);
            } else if rel.extension().is_some_and(|e| e == "md") {
                files.push(rel);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|f| Page {
            text: std::fs::read_to_string(Path::new(ROOT).join(&f)).unwrap(),
            path: f.to_string_lossy().replace('\\', "/"),
        })
        .collect()
}

/// A page cut into fenced code blocks and prose.
enum Part {
    /// A fenced block: its info string (`toml`, `sh`…), its first line's number and its lines.
    Block { lang: String, line: usize, body: String },
    /// Text outside code blocks, with the number of its first line.
    Prose { line: usize, text: String },
}

fn parts(text: &str) -> Vec<Part> {
    let mut out = Vec::new();
    let mut prose = String::new();
    let mut prose_line = 1;
    let mut block: Option<(String, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        match &mut block {
            Some((lang, start, body)) => {
                if line.trim_start().starts_with("```") {
                    out.push(Part::Block {
                        lang: std::mem::take(lang),
                        line: *start,
                        body: std::mem::take(body),
                    });
                    block = None;
                    prose_line = n + 1;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
            None => {
                if let Some(info) = line.trim_start().strip_prefix("```") {
                    out.push(Part::Prose { line: prose_line, text: std::mem::take(&mut prose) });
                    block = Some((info.trim().to_string(), n + 1, String::new()));
                } else {
                    prose.push_str(line);
                    prose.push('\n');
                }
            }
        }
    }
    out.push(Part::Prose { line: prose_line, text: prose });
    out
}

/// The inline code spans of some prose, with the line each starts on (whitespace inside a
/// span, line breaks included, collapsed to one space).
fn code_spans(text: &str, first_line: usize) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut line = first_line;
    while let Some(open) = rest.find('`') {
        line += rest[..open].matches('\n').count();
        let ticks = rest[open..].chars().take_while(|&c| c == '`').count();
        let after = &rest[open + ticks..];
        let fence = "`".repeat(ticks);
        let Some(close) = after.find(&fence) else { break };
        let span = &after[..close];
        out.push((line, span.split_whitespace().collect::<Vec<_>>().join(" ")));
        line += span.matches('\n').count();
        rest = &after[close + ticks..];
    }
    out
}

/// Prose with its code spans blanked out (so links and words inside them are not read).
fn without_spans(text: &str) -> String {
    Regex::new(r"`[^`]*`")
        .unwrap()
        .replace_all(text, |c: &regex::Captures| c[0].replace(|ch: char| ch != '\n', " "))
        .into_owned()
}

// ---------------------------------------------------------------------------------------------
// Flags

/// `--flags` from a `--help` text: those its option lines start with, and their aliases.
fn help_flags(help: &str) -> BTreeSet<String> {
    let flag = Regex::new(r"--[a-z][a-z0-9-]*").unwrap();
    let aliases = Regex::new(r"\[(?:aliases|alias): ([^\]]*)\]").unwrap();
    let mut out = BTreeSet::new();
    for line in help.lines() {
        let t = line.trim_start();
        if t.starts_with('-') {
            let spec = t.split("  ").next().unwrap_or("");
            out.extend(flag.find_iter(spec).map(|m| m.as_str().to_string()));
        }
    }
    for c in aliases.captures_iter(help) {
        out.extend(flag.find_iter(&c[1]).map(|m| m.as_str().to_string()));
    }
    out
}

fn help(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .arg("--help")
        .env_remove("CONCLAVE_CONFIG")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "conclave {args:?} --help failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a `--help` lists under `Commands:` (`help` left out).
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            inside = true;
        } else if inside {
            match line.strip_prefix("  ") {
                Some(l) if !l.starts_with(' ') => {
                    let name = l.split_whitespace().next().unwrap_or("");
                    if !name.is_empty() && name != "help" {
                        out.push(name.to_string());
                    }
                }
                Some(_) => {}
                None => inside = !line.trim().is_empty() && line.starts_with(' '),
            }
        }
    }
    out
}

/// Every command's flags, keyed `serve`, `run council`, `user add`… (`""`: no subcommand).
struct Flags {
    by_command: BTreeMap<String, BTreeSet<String>>,
    modes: Vec<String>,
}

impl Flags {
    fn from_binary() -> Flags {
        let top = help(&[]);
        let mut by_command = BTreeMap::new();
        by_command.insert(String::new(), help_flags(&top));
        let mut modes = Vec::new();
        for sub in subcommands(&top) {
            let text = help(&[&sub]);
            let nested = subcommands(&text);
            by_command.insert(sub.clone(), help_flags(&text));
            for n in nested {
                let flags = help_flags(&help(&[&sub, &n]));
                if sub == "run" {
                    modes.push(n.clone());
                }
                by_command.insert(format!("{sub} {n}"), flags);
            }
        }
        assert!(modes.len() >= 17, "conclave run --help lists too few modes: {modes:?}");
        Flags { by_command, modes }
    }

    /// The flags `conclave <words…>` takes: a mode or action named as a placeholder (`MODE`)
    /// takes any of that command's.
    fn of(&self, words: &[&str]) -> BTreeSet<String> {
        let Some(&sub) = words.first() else { return self.by_command[""].clone() };
        if !self.by_command.contains_key(sub) {
            // No subcommand: the server, `conclave --help`.
            let mut all = self.by_command[""].clone();
            all.extend(self.by_command["serve"].iter().cloned());
            return all;
        }
        let nested: Vec<&String> =
            self.by_command.keys().filter(|k| k.starts_with(&format!("{sub} "))).collect();
        if nested.is_empty() {
            return self.by_command[sub].clone();
        }
        let mut out = self.by_command[sub].clone();
        match words.get(1).map(|w| format!("{sub} {w}")) {
            Some(key) if self.by_command.contains_key(&key) => {
                out.extend(self.by_command[&key].iter().cloned())
            }
            _ => {
                for k in nested {
                    out.extend(self.by_command[k].iter().cloned());
                }
            }
        }
        out
    }
}

impl Flags {
    /// The flags a page's lone flag spans (`--json`, `--max-rounds`) may name: a mode's page,
    /// its mode's; the evals and benchmarks pages, `eval`'s and `bench`'s; any other page, any
    /// command's.
    fn scope(&self, page: &str) -> (String, BTreeSet<String>) {
        if let Some(mode) = page.strip_prefix("docs/modes/").and_then(|p| p.strip_suffix(".md")) {
            return (format!("conclave run {mode}"), self.of(&["run", mode]));
        }
        match page {
            "docs/evals.md" => ("conclave eval".into(), self.of(&["eval"])),
            "docs/benchmarks.md" => ("conclave bench".into(), self.of(&["bench"])),
            _ => (
                "any conclave command".into(),
                self.by_command.values().flatten().cloned().collect(),
            ),
        }
    }
}

/// The invocations of `conclave` in a command line: what follows `conclave`,
/// `target/…/conclave` or `cargo run … --`, up to the end or a `|`, `;`, `&&` or `#` comment.
fn invocations(line: &str) -> Vec<String> {
    let start =
        Regex::new(r"(?:^|[\s(;&|$`])(?:(?:\S*/)?conclave|cargo run(?: --release)? --)(\s.*)?$")
            .unwrap();
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(c) = start.captures(rest) {
        let tail = c.get(1).map_or("", |m| m.as_str());
        let end = [" | ", ";", "&&", " # ", " #\t", "`"]
            .iter()
            .filter_map(|s| tail.find(s))
            .min()
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
        if end == tail.len() {
            break;
        }
    }
    out
}

/// The command lines of a shell block, continuation lines (`\`) joined.
fn command_lines(body: &str, first: usize) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in body.lines().enumerate() {
        let (n, mut text) = pending.take().unwrap_or((first + i, String::new()));
        let l = line.trim_end();
        if let Some(cont) = l.strip_suffix('\\') {
            text.push_str(cont);
            text.push(' ');
            pending = Some((n, text));
        } else {
            text.push_str(l);
            out.push((n, text));
        }
    }
    out.extend(pending);
    out
}

fn check_flags(page: &Page, flags: &Flags, errors: &mut Vec<String>) -> usize {
    let mut checked = 0;
    let flag = Regex::new(r"(?:^|[\s\[(])(--[a-z][a-z0-9-]*)").unwrap();
    let lone = Regex::new(r"^(--[a-z][a-z0-9-]*)(?:$|[ =])").unwrap();
    let (command, scope) = flags.scope(&page.path);
    let mut lines = Vec::new();
    for part in parts(&page.text) {
        match part {
            Part::Block { lang, line, body } => {
                if ["", "sh", "bash", "console", "shell"].contains(&lang.as_str()) {
                    lines.extend(command_lines(&body, line));
                }
            }
            Part::Prose { line, text } => {
                for (n, span) in code_spans(&text, line) {
                    // A flag on its own (`--json`, `--budget N`): one of the page's command.
                    if let Some(c) = lone.captures(&span) {
                        checked += 1;
                        if !scope.contains(&c[1]) {
                            errors.push(format!(
                                "{}:{n}: `{span}`: {} is not a flag of {command}",
                                page.path, &c[1]
                            ));
                        }
                    }
                    lines.push((n, span));
                }
            }
        }
    }
    for (n, line) in lines {
        for inv in invocations(&line) {
            let words: Vec<&str> = inv.split_whitespace().collect();
            let positional: Vec<&str> =
                words.iter().take_while(|w| !w.starts_with('-')).copied().collect();
            let known = flags.of(&positional);
            for c in flag.captures_iter(&inv) {
                let f = &c[1];
                checked += 1;
                if !known.contains(f) {
                    errors.push(format!(
                        "{}:{n}: `conclave{}` shows {f}, which `conclave {} --help` does not list",
                        page.path,
                        inv.trim_end(),
                        positional.iter().take(2).copied().collect::<Vec<_>>().join(" ")
                    ));
                }
            }
        }
    }
    checked
}

// ---------------------------------------------------------------------------------------------
// Configuration

/// A TOML block with every `# key = value` line left commented, then with each one uncommented
/// in turn: (what was uncommented, the line it is on from the block's first, the text).
fn toml_variants(body: &str) -> Vec<(Option<(String, usize)>, String)> {
    let commented = Regex::new(r#"^(\s*)#\s*((?:"[^"]+"|[A-Za-z0-9_.-]+)\s*=\s*\S.*)$"#).unwrap();
    let lines: Vec<&str> = body.lines().collect();
    let mut out = vec![(None, body.to_string())];
    for (i, line) in lines.iter().enumerate() {
        if let Some(c) = commented.captures(line) {
            let mut variant: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            variant[i] = format!("{}{}", &c[1], &c[2]);
            out.push((Some((line.trim().to_string(), i)), variant.join("\n")));
        }
    }
    out
}

/// What the server says of a configuration file: its parser first, then the checks at start.
fn config_error(text: &str) -> Option<String> {
    match toml::from_str::<FileConfig>(text) {
        Err(e) => Some(e.to_string()),
        Ok(file) => Config::from_parts(file, &Overrides::default(), None, None, None)
            .err()
            .map(|e| e.to_string()),
    }
}

fn check_config(page: &Page, errors: &mut Vec<String>) -> usize {
    let mut checked = 0;
    for part in parts(&page.text) {
        let Part::Block { lang, line, body } = part else { continue };
        if lang != "toml" {
            continue;
        }
        for (uncommented, text) in toml_variants(&body) {
            checked += 1;
            let Some(e) = config_error(&text) else { continue };
            let e = e.lines().collect::<Vec<_>>().join(" / ");
            match uncommented {
                None => {
                    errors.push(format!(
                        "{}:{line}: the toml block is refused by the server: {e}",
                        page.path
                    ));
                    // Its variants would only say the same again.
                    break;
                }
                Some((what, i)) => errors.push(format!(
                    "{}:{}: the toml block with `{what}` uncommented is refused by the server: {e}",
                    page.path,
                    line + i
                )),
            }
        }
    }
    checked
}

// ---------------------------------------------------------------------------------------------
// Events

/// The event names the code emits: string literals of `src/` (test files left out) where an
/// event is made: `emit("…"`, `Effect::event("…"`, `Effect::empty("…")`, `event: "…"`, `("…".to_string(), data)` or `json!`, a match arm
/// `=> ("…", json!…)`, an arm of `let event = match … };` that is the name alone, or how a run
/// ends (`Terminal::Complete => "complete"`).
fn emitted_events() -> BTreeSet<String> {
    let name = r#""([a-z][a-z0-9]*(?:_[a-z0-9]+)*)""#;
    let patterns = [
        format!(r"emit\(\s*{name}"),
        format!(r"\b(?:event|empty)\(\s*{name}"),
        format!(r"\bevent:\s*{name}"),
        format!(r"\(\s*{name}\.to_string\(\),\s*(?:json!|data\b)"),
        format!(r"=>\s*\{{?\s*\(\s*{name},\s*json!"),
        format!(r"Terminal::[A-Z][a-z]+\s*=>\s*{name}"),
    ]
    .map(|p| Regex::new(&p).unwrap());
    let event_match = Regex::new(r"let event = match[\s\S]*?\n\s*\};").unwrap();
    let arm = Regex::new(&format!(r"\n\s*{name}\s*\n")).unwrap();
    let mut out = BTreeSet::new();
    let mut dirs = vec![Path::new(ROOT).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if file != "tests" {
                    dirs.push(path);
                }
                continue;
            }
            if !file.ends_with(".rs") || file == "tests.rs" || file.ends_with("_tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for p in &patterns {
                out.extend(p.captures_iter(&text).map(|c| c[1].to_string()));
            }
            for block in event_match.find_iter(&text) {
                out.extend(arm.captures_iter(block.as_str()).map(|c| c[1].to_string()));
            }
        }
    }
    out
}

/// The names a page presents as events, with their lines.
fn shown_events(page: &Page) -> Vec<(usize, String)> {
    let ident = Regex::new(r"^([a-z][a-z0-9]*(?:_[a-z0-9]+)*)(?: ?\{.*)?$").unwrap();
    let stage_event = Regex::new(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*_(?:start|complete)$").unwrap();
    let bare = ["complete", "error", "cancelled", "resumed", "token"];
    let mut out = Vec::new();
    for part in parts(&page.text) {
        let Part::Prose { line, text } = part else { continue };
        // Paragraphs: an `Events:` paragraph names events; an events table's first column too.
        let mut n = line;
        let mut in_events_table = false;
        for para in text.split("\n\n") {
            let first = n;
            n += para.matches('\n').count() + 2;
            let p = para.trim_start_matches('\n');
            let first = first + (para.len() - p.len());
            let is_events = p.starts_with("Events:");
            for (l, span) in code_spans(p, first) {
                if stage_event.is_match(&span) {
                    out.push((l, span.clone()));
                    continue;
                }
                if !is_events {
                    continue;
                }
                if let Some(c) = ident.captures(&span) {
                    let name = &c[1];
                    if name.contains('_') || span.contains('{') || bare.contains(&name) {
                        out.push((l, name.to_string()));
                    }
                }
            }
            for (i, row) in p.lines().enumerate() {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                if cells.len() < 3 || !row.trim_start().starts_with('|') {
                    in_events_table = false;
                    continue;
                }
                if cells[1] == "event" {
                    in_events_table = true;
                    continue;
                }
                if in_events_table {
                    if let Some(name) = cells[1].strip_prefix('`').and_then(|c| c.strip_suffix('`'))
                    {
                        out.push((first + i, name.to_string()));
                    }
                }
            }
        }
    }
    out
}

fn check_events(page: &Page, emitted: &BTreeSet<String>, errors: &mut Vec<String>) -> usize {
    let shown = shown_events(page);
    for (n, name) in &shown {
        if !emitted.contains(name) {
            errors.push(format!("{}:{n}: event `{name}` is not one the code emits", page.path));
        }
    }
    shown.len()
}

// ---------------------------------------------------------------------------------------------
// Links

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for part in parts(text) {
        let Part::Prose { text, .. } = part else { continue };
        for line in text.lines() {
            let t = line.trim_start_matches('#');
            if t.len() < line.len() && t.starts_with(' ') {
                let s = slug(t);
                let k = seen.entry(s.clone()).or_insert(0);
                out.insert(if *k == 0 { s.clone() } else { format!("{s}-{k}") });
                *k += 1;
            }
        }
    }
    out
}

fn check_links(page: &Page, errors: &mut Vec<String>) -> usize {
    let link = Regex::new(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)").unwrap();
    let dir = Path::new(&page.path).parent().unwrap_or(Path::new("")).to_path_buf();
    let mut checked = 0;
    for part in parts(&page.text) {
        let Part::Prose { line, text } = part else { continue };
        let text = without_spans(&text);
        for c in link.captures_iter(&text) {
            let target = &c[1];
            let n = line + text[..c.get(0).unwrap().start()].matches('\n').count();
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() {
                PathBuf::from(&page.path)
            } else {
                normalize(&dir.join(path))
            };
            let full = Path::new(ROOT).join(&file);
            if file.starts_with("..") || !full.exists() {
                errors.push(format!("{}:{n}: link to {target}: no such file", page.path));
                continue;
            }
            if !anchor.is_empty() && file.extension().is_some_and(|e| e == "md") {
                let text = std::fs::read_to_string(&full).unwrap();
                if !anchors(&text).contains(anchor) {
                    errors.push(format!(
                        "{}:{n}: link to {target}: {} has no heading #{anchor}",
                        page.path,
                        file.display()
                    ));
                }
            }
        }
    }
    checked
}

/// `docs/modes/../cli.md` as `docs/cli.md` (without touching the file system).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------

#[test]
fn the_readme_and_the_docs_show_only_flags_keys_events_and_links_that_exist() {
    let flags = Flags::from_binary();
    let emitted = emitted_events();
    for known in ["call_start", "call_complete", "token", "complete", "error", "stage1_start"] {
        assert!(emitted.contains(known), "the scan of src/ misses the event {known}");
    }
    let pages = pages();
    let mut errors = Vec::new();
    let (mut flagged, mut tomls, mut events, mut links) = (0, 0, 0, 0);
    for page in &pages {
        flagged += check_flags(page, &flags, &mut errors);
        tomls += check_config(page, &mut errors);
        events += check_events(page, &emitted, &mut errors);
        links += check_links(page, &mut errors);
    }

    let readme = &pages.iter().find(|p| p.path == "README.md").unwrap().text;
    for mode in flags.modes.iter().filter(|m| *m != DEMO_MODE) {
        let page = format!("docs/modes/{mode}.md");
        if !Path::new(ROOT).join(&page).exists() {
            errors.push(format!("mode {mode} has no page {page}"));
        }
        if !readme.contains(&format!("]({page})")) {
            errors.push(format!("README.md: the modes table does not link to {page}"));
        }
    }
    assert!(errors.is_empty(), "{} problem(s) in the docs:\n{}", errors.len(), errors.join("\n"));
    // The checks found what they check: a page cut wrongly would pass with nothing read.
    assert!(flagged >= 50, "only {flagged} flags of conclave checked");
    assert!(tomls >= 15, "only {tomls} toml blocks and variants checked");
    assert!(events >= 200, "only {events} event names checked");
    assert!(links >= 100, "only {links} links checked");
}

#[test]
fn the_checks_catch_a_wrong_flag_key_event_and_link() {
    let flags = Flags::from_binary();
    let emitted = emitted_events();
    let page = Page {
        path: "docs/modes/council.md".into(),
        text: [
            "Run `conclave run council \"q\" --models a,b --chairmen x`, or set `--foreman`.",
            "",
            "```sh",
            "conclave eval sample \\",
            "  --members a,b --arms single --budgett 5",
            "cargo test --nocapture   # not conclave's",
            "```",
            "",
            "```toml",
            "[sim]",
            "latency_ms = 1",
            "# latency = 2",
            "```",
            "",
            "Events: `council_start {conversationId}`, `stage1_complete {data}`.",
            "",
            "See [the protocol](../protocol.md#events), [nothing](../nowhere.md) and",
            "[no heading](../protocol.md#no-such-heading).",
        ]
        .join("\n"),
    };
    let mut errors = Vec::new();
    check_flags(&page, &flags, &mut errors);
    check_config(&page, &mut errors);
    check_events(&page, &emitted, &mut errors);
    check_links(&page, &mut errors);
    let found = errors.join("\n");
    for wrong in [
        "--chairmen",
        "--foreman",
        "--budgett",
        "latency",
        "`council_start`",
        "nowhere.md",
        "#no-such",
    ] {
        assert!(found.contains(wrong), "{wrong} not reported; reported:\n{found}");
    }
    assert_eq!(errors.len(), 7, "{found}");
}
