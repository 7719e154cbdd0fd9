//! The sim's answers for Decompose: a plan (text or JSON), a task's output and the assembly.

use super::*;

const SIM_TASKS: [(&str, &str, &str, &str); 8] = [
    (
        "Understand the need",
        "State who asks and what a good answer must cover.",
        "LOW",
        "analytical",
    ),
    ("Survey the options", "List the main options and what each involves.", "MEDIUM", "technical"),
    ("Weigh the options", "Compare the options on cost, risk and effort.", "HIGH", "analytical"),
    ("Check the constraints", "Name the limits of time, money and skills.", "MEDIUM", "general"),
    ("Draft the plan", "Turn the chosen option into concrete steps.", "HIGH", "technical"),
    ("Estimate the budget", "Give rough figures for each step.", "MEDIUM", "analytical"),
    ("Name the risks", "List what could go wrong and how to catch it early.", "MEDIUM", "general"),
    ("Write the summary", "Say in a few lines what to do first.", "LOW", "creative"),
];

/// Each sim task's dependencies (1-based task numbers), always on earlier tasks.
const SIM_DEPS: [&[usize]; 8] = [&[], &[], &[1, 2], &[1], &[3, 4], &[4], &[3], &[5, 6]];

fn sim_plan(n: usize, cyclic: bool, messy: bool, who: &str) -> String {
    let mut s = format!("[simulated plan from {who}]\n\n");
    for (i, (title, desc, cx, ex)) in SIM_TASKS.iter().take(n).enumerate() {
        let mut deps: Vec<usize> = SIM_DEPS[i].iter().copied().filter(|&d| d <= n).collect();
        if cyclic && i == 1 {
            // task_2 waits for task_3, which waits for task_2.
            deps.push(3);
        }
        let list = |sep: &str, prefix: &str| {
            deps.iter().map(|d| format!("{prefix}{d}")).collect::<Vec<_>>().join(sep)
        };
        if messy {
            s.push_str(&format!(
                "### **Task {} — {title}**\n- **Description:** {desc}\n- **Depends on:** {}\n- **Complexity:** {}\n\n",
                i + 1,
                if deps.is_empty() { "n/a".to_string() } else { list(" and ", "#") },
                if i % 3 == 2 { "fairly high" } else { cx },
            ));
        } else {
            s.push_str(&format!(
                "TASK task_{}:\nTitle: {title}\nDescription: {desc} Keep it self-contained.\nDependencies: {}\nComplexity: {cx}\nExpertise: {ex}\n\n",
                i + 1,
                if deps.is_empty() { "none".to_string() } else { list(", ", "task_") },
            ));
        }
    }
    if !messy {
        s.push_str("EXECUTION SUMMARY:\nWave 1 holds the tasks without dependencies.");
    }
    s
}

/// The sim plan of `n` tasks as JSON that fits [`plan_schema`]: the same tasks, dependencies,
/// complexities and expertise as its text plan (`cyclic`: task_2 waits for task_3, which
/// waits for task_2).
fn sim_plan_json(n: usize, cyclic: bool, ask: &SimAsk) -> String {
    let tasks: Vec<SimTask> = SIM_TASKS
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, (title, desc, cx, ex))| {
            let mut deps: Vec<usize> = SIM_DEPS[i].iter().copied().filter(|&d| d <= n).collect();
            if cyclic && i == 1 {
                deps.push(3);
            }
            let deps: Vec<String> = deps.iter().map(|d| format!("task_{d}")).collect();
            SimTask {
                id: format!("task_{}", i + 1),
                title,
                description: format!("{desc} Keep it self-contained."),
                dependencies: deps,
                complexity: cx,
                expertise: ex,
            }
        })
        .collect();
    let reasoning: String = format!(
        "{}[simulated plan from {}] Understand the need first, then the options, then the plan.",
        ask.hostile_paragraph(),
        ask.model
    )
    .chars()
    .take(schema::REASONING_MAX_CHARS)
    .collect();
    to_json(&SimPlan { reasoning, tasks }).to_string()
}

/// A task of the sim's plan JSON (its complexity as the text plan writes it).
#[derive(Serialize)]
struct SimTask {
    id: String,
    title: &'static str,
    description: String,
    dependencies: Vec<String>,
    complexity: &'static str,
    expertise: &'static str,
}

/// The sim's plan JSON.
#[derive(Serialize)]
struct SimPlan {
    reasoning: String,
    tasks: Vec<SimTask>,
}

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    let who = ask.model;
    let mut rng = SplitMix64::new(ask.seed);
    let first_ask = p.starts_with(PLAN_HEAD);
    let plan_asked = first_ask || p.starts_with(REMINDER_HEAD) || p.starts_with(CYCLE_HEAD);
    // Only the plan carries a schema of ours.
    if ask.schema.is_some_and(|s| s.name != PLAN_SCHEMA || !plan_asked) {
        return None;
    }
    if plan_asked {
        // Asked for JSON, the most tasks the schema allows; else as the prompt says.
        let listed = ask
            .schema
            .and_then(|s| s.schema.pointer("/properties/tasks/maxItems")?.as_u64())
            .map(|m| m as usize);
        let max = listed
            .or_else(|| regex!(r"3 to (\d+) sub-tasks").captures(p).and_then(|c| c[1].parse().ok()))
            .unwrap_or(6)
            .clamp(MIN_TASKS, MAX_TASKS);
        let n = 4.max(max - rng.below(2)).min(max);
        // Planners by name, for the paths a plan can take: `sim/cyclic…` plans a cycle when
        // first asked, `sim/loop…` every time; `sim/prose…` answers in prose when first asked,
        // `sim/planless…` every time.
        let name = who.strip_prefix("sim/").unwrap_or(who);
        if name.starts_with("planless") || (first_ask && name.starts_with("prose")) {
            return Some(format!(
                "[simulated plan from {who}] I would start by understanding the need, then \
                 survey the options, weigh them and write a plan with a budget."
            ));
        }
        let cyclic = name.starts_with("loop") || (first_ask && name.starts_with("cyclic"));
        if ask.schema.is_some() {
            return Some(sim_plan_json(n, cyclic, ask));
        }
        return Some(sim_plan(n, cyclic, ask.malformed, who));
    }
    if p.starts_with(TASK_HEAD) {
        let c = regex!(r"Your sub-task: (task_\d+): (.*)").captures(p)?;
        let title = c[2].trim().to_string();
        let used: Vec<String> = regex!(r"=== OUTPUT OF task_\d+: (.*) ===")
            .captures_iter(p)
            .map(|c| c[1].to_lowercase())
            .collect();
        let mut s = String::new();
        if ask.malformed {
            s.push_str("Sure! Here is my part.\n\n");
        }
        s.push_str(&format!(
            "### {title}\n\n[simulated output from {who}] {}{}\n\n{}- First point on {}.\n- \
             Second point, with its reason.\n- A limit to keep in mind.\n",
            if used.is_empty() {
                "This part stands on its own.".to_string()
            } else {
                format!("This part builds on the work to {}.", used.join(" and to "))
            },
            if p.contains(" FAILED ===") {
                " One input is missing, so this part says so."
            } else {
                ""
            },
            ask.hostile_paragraph(),
            title.to_lowercase(),
        ));
        if rng.below(3) == 0 {
            s.push_str("\nFigures here are estimates.\n");
        }
        return Some(s);
    }
    if p.starts_with(ASSEMBLY_HEAD) {
        let body = p
            .split_once(OUTPUTS_START)
            .and_then(|(_, r)| r.split_once(OUTPUTS_END))
            .map_or("", |(b, _)| b);
        let parts: Vec<(String, String)> =
            regex!(r"(?s)--- (task_\d+): (.*?) \(by [^\n]*\) ---\n(.*?)\n--- end of task_\d+ ---")
                .captures_iter(body)
                .map(|c| {
                    // The worker's own heading and preamble give way to the assembler's.
                    let kept: Vec<&str> = c[3]
                        .lines()
                        .filter(|l| !l.starts_with('#') && !l.starts_with("Sure!"))
                        .collect();
                    (c[2].to_string(), kept.join("\n"))
                })
                .collect();
        let missing: Vec<String> = p
            .split_once(MISSING_HEAD)
            .map(|(_, r)| {
                r.lines()
                    .skip(1)
                    .map_while(|l| l.strip_prefix("- "))
                    .filter_map(|l| l.split(": ").nth(1).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let mut s = String::new();
        if ask.malformed {
            s.push_str("Here is the combined answer:\n\n");
        }
        s.push_str(&format!(
            "[simulated answer by {who}]\n\nThis answer brings {} parts together into one plan.\n\n{}",
            parts.len(),
            ask.hostile_paragraph()
        ));
        for (i, (title, text)) in parts.iter().enumerate() {
            s.push_str(&format!("## {title}\n\n"));
            if i > 0 {
                s.push_str("Building on the above, ");
            }
            s.push_str(text.trim());
            s.push_str("\n\n");
        }
        if !missing.is_empty() {
            s.push_str(&format!(
                "**Gaps:** nothing could be said about {}.\n\n",
                missing.join(", ").to_lowercase()
            ));
        }
        s.push_str(
            "## In short\n\nStart with the first step above and revisit the plan as you learn.",
        );
        return Some(s);
    }
    None
}
