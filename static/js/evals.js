// The eval pages: the list of evals (#/evals) and one eval (#/eval/ID): its table, a chart of
// accuracy against cost per arm with the 95% intervals, and the questions where the arms
// disagree, each answer linking to the runs behind it. Evals are started from the terminal
// (`conclave eval`); the page only reads them.
import * as ui from "./ui.js";
import { fetchJson } from "./api.js";
import { chart, color } from "./charts.js";

const { el } = ui;

// Figures rounded as the CLI's table rounds them (src/eval/report.rs: `percent`, `points`,
// `p_value`): half up from the fraction times 1,000, so both print the same number.
const tenths = (x) => Math.floor(x * 1000 + 0.5) / 10 + 0;
const pct = (x) => `${tenths(x).toFixed(1)}%`;
const wholePct = (x) => `${Math.floor(x * 100 + 0.5)}%`;
const points = (x) => { const v = tenths(x); return `${v > 0 ? "+" : ""}${v.toFixed(1)}`; };
const pValue = (p) => (p < 0.01 ? "p<0.01" : `p=${(Math.floor(p * 100 + 0.5) / 100).toFixed(2)}`);

/** The arms the form offers, with what each means. */
const ARMS = [
  ["single", "each member alone"],
  ["majority", "the members' plurality answer"],
  ["self-consistency", "the best member asked five times"],
  ["council", "Council mode"],
  ["vote", "Vote mode"],
  ["jury", "a jury on the best member's answer"],
];

/** The form that starts an eval in the server (admins): a set, members, arms, a budget. */
async function newEvalForm() {
  const models = await fetchJson("/api/models").catch(() => ({}));
  // Council's default panel when it is made of real models; where any of it is a sim, the
  // oracle sims, which know the sample set's answers (a plain sim does not answer arithmetic).
  const council = ((models.modes || {}).council || {}).councilModels || [];
  const members = council.length && !council.some((m) => m.startsWith("sim/")) ? council
    : ["sim/oracle-0.8-a", "sim/oracle-0.5-b", "sim/oracle-0.5-c"];
  const set = el("select", { id: "eval-set" }, el("option", { value: "sample" }, "The sample set (arithmetic with known answers)"),
    el("option", { value: "upload" }, "A JSON-lines file of my own…"));
  const file = el("input", { id: "eval-file", type: "file", accept: ".jsonl,.json,.txt,application/json", hidden: true, "aria-label": "The question set's file" });
  set.addEventListener("change", () => { file.hidden = set.value !== "upload"; });
  const limit = el("input", { id: "eval-limit", type: "number", min: 1, step: 1, value: 16, inputmode: "numeric" });
  const who = el("input", { id: "eval-members", type: "text", value: members.join(", "), autocomplete: "off" });
  const arms = ARMS.map(([name, what]) => el("label", { class: "check" },
    el("input", { type: "checkbox", id: `eval-arm-${name}`, value: name, checked: ["single", "majority", "council"].includes(name) }), ` ${name} `, el("span", { class: "muted" }, `(${what})`)));
  const budget = el("input", { id: "eval-budget", type: "number", min: 1, step: 1000, placeholder: "no limit", inputmode: "numeric" });
  const error = el("div", { class: "error", role: "alert", id: "eval-error" });
  const start = el("button", { type: "submit", id: "eval-start" }, "Start eval");
  const field = (label, control, hint) => el("div", { class: "field" }, el("label", { for: control.id }, label), control, hint ? el("div", { class: "hint" }, hint) : null);
  const form = el("form", { class: "form-card", id: "eval-form", "aria-label": "Start an eval" },
    el("h2", null, "Start an eval"),
    field("Question set", set), file,
    field("Questions", limit, "Only the first ones of the set; empty for all of it."),
    field("Members", who, "Model ids, separated by commas."),
    el("fieldset", { class: "field" }, el("legend", null, "Arms"), ...arms),
    field("Budget (tokens)", budget, "The eval stops before its runs would use more; empty for no limit."),
    error, start);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    start.disabled = true;
    try {
      const body = { set: "sample", members: who.value.split(",").map((m) => m.trim()).filter(Boolean),
        arms: ARMS.map(([n]) => n).filter((n) => form.querySelector(`#eval-arm-${n}`).checked) };
      if (!body.members.length) throw new Error("Members: name at least one model.");
      if (!body.arms.length) throw new Error("Arms: choose at least one.");
      if (set.value === "upload") {
        const f = file.files && file.files[0];
        if (!f) throw new Error("Choose the set's file first.");
        body.set = f.name;
        body.questions = await f.text();
      }
      if (limit.value.trim()) body.limit = Number(limit.value);
      if (budget.value.trim()) body.budgetTokens = Number(budget.value);
      const reply = await fetchJson("/api/evals", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      location.hash = `#/eval/${encodeURIComponent(reply.evalId)}`;
    } catch (e) {
      error.textContent = e.message;
      start.disabled = false;
    }
  });
  return form;
}

/** #/evals */
export async function evalsView(main) {
  const list = el("div", { class: "list", role: "list", id: "eval-list" });
  const me = window.conclave && window.conclave.me;
  main.append(el("h1", null, "Evals"),
    el("p", { class: "muted" }, "Is the panel worth it? Evals run a graded question set through single models, their majority and modes. ",
      me && me.isAdmin ? "Start one here, or from the terminal: " : "An admin starts one here; anyone can from the terminal: ",
      el("code", null, "conclave eval sample --members a,b,c")));
  if (me && me.isAdmin) main.append(await newEvalForm());
  main.append(list);
  const body = await fetchJson("/api/evals");
  const evals = body.evals || [];
  list.replaceChildren(...(evals.length ? evals.map((e) => el("div", { class: "run-row", role: "listitem", dataset: { eval: e.id } },
    el("div", { class: "q" }, el("a", { href: `#/eval/${encodeURIComponent(e.id)}` }, `${e.setName} — ${e.questions} questions`),
      el("div", { class: "outcome-line eval-arms" }, `${(e.arms || []).join(", ")} · members ${(e.members || []).join(", ")}`)),
    el("div", { class: "meta" }, ui.badge(e.status, e.status === "completed" ? "green" : e.status === "stopped" ? "yellow" : "gray"), el("span", null, ui.fmtTime(e.createdAt))))) :
    [el("div", { class: "empty" }, "No evals yet.")]));
  return null;
}

function figuresTable(report) {
  const diffs = Object.fromEntries((report.differences || []).map((d) => [d.arm, d]));
  const head = ["Arm", "n", "Accuracy", "95% CI", "Δ vs best single", "Unparsed", "Tokens", "Cost", "p50", "p95"];
  const num = new Set([1, 2, 5, 6, 7, 8, 9]);
  const rows = report.arms.map((a) => {
    const d = diffs[a.arm];
    const base = report.bestSingle && a.arm === `single:${report.bestSingle}`;
    const diff = d && d.n ? `${points(d.diff)} pt [${points(d.diffLow)}, ${points(d.diffHigh)}] ${pValue(d.mcnemarP)}` : base ? "baseline" : "—";
    const cells = [a.arm, a.n, a.n ? pct(a.accuracy) : "—", a.n ? `${pct(a.ciLow)}–${pct(a.ciHigh)}` : "—", diff,
      a.n ? wholePct(a.unparsed / a.n) : "—", a.promptTokens + a.completionTokens, a.cost == null ? "—" : `$${a.cost.toFixed(4)}`,
      a.n ? `${a.latencyP50Ms} ms` : "—", a.n ? `${a.latencyP95Ms} ms` : "—"];
    return el("tr", { dataset: { arm: a.arm } }, cells.map((c, i) => el(i === 0 ? "th" : "td", { class: num.has(i) ? "num" : null, scope: i === 0 ? "row" : null }, String(c))));
  });
  return el("div", { class: "table-scroll" }, el("table", { class: "data", id: "eval-table" },
    el("thead", null, el("tr", null, head.map((h, i) => el("th", { class: num.has(i) ? "num" : null, scope: "col" }, h)))),
    el("tbody", null, rows)));
}

/** The jury arm's own figures, in words: how often it approved, and how often it was right. */
function juryNotes(report) {
  const share = (k, n) => n ? pct(k / n) : "—";
  return report.arms.filter((a) => a.jury && report.bestSingle).map((a) => {
    const j = a.jury;
    return el("p", { class: "jury-note", dataset: { arm: a.arm } },
      el("strong", null, "Jury: "),
      `the members judged ${report.bestSingle}'s answers and approved ${j.approved} of ${j.judged}; ` +
      `${j.approvedCorrect} of those were right (${share(j.approvedCorrect, j.approved)}). ` +
      `A verdict was right ${share(j.verdictsRight, j.judged)} of the time (95% ${pct(j.verdictCiLow)} to ${pct(j.verdictCiHigh)})` +
      (j.noVerdict ? `; no verdict on ${j.noVerdict}.` : ".") +
      " An answer the jury did not approve counts as no answer in the accuracy above.");
  });
}

function accuracyChart(report) {
  const arms = report.arms.filter((a) => a.n > 0);
  const withCost = arms.some((a) => a.cost != null);
  const x = (a) => withCost ? (a.cost || 0) : a.promptTokens + a.completionTokens;
  const datasets = [];
  arms.forEach((a, i) => {
    datasets.push({ type: "scatter", label: a.arm, data: [{ x: x(a), y: a.accuracy * 100 }], backgroundColor: color(i), borderColor: color(i), pointRadius: 5 });
    datasets.push({ type: "line", label: `${a.arm} 95% CI`, data: [{ x: x(a), y: a.ciLow * 100 }, { x: x(a), y: a.ciHigh * 100 }], borderColor: color(i, 0.6), borderWidth: 2, pointRadius: 0, showLine: true });
  });
  const label = `Accuracy against ${withCost ? "cost" : "tokens"} per arm: ` +
    arms.map((a) => `${a.arm} ${pct(a.accuracy)} (95% ${pct(a.ciLow)} to ${pct(a.ciHigh)}) for ${withCost ? "$" + (a.cost || 0).toFixed(4) : x(a) + " tokens"}`).join("; ");
  return chart({
    type: "scatter",
    data: { datasets },
    options: {
      scales: {
        x: { type: "linear", title: { display: true, text: withCost ? "cost ($)" : "tokens (no cost reported)" } },
        y: { min: 0, max: 100, title: { display: true, text: "accuracy (%)" } },
      },
      plugins: { legend: { labels: { filter: (item) => !item.text.endsWith("95% CI") } } },
    },
  }, { label });
}

function runLinks(runs, arm) {
  const link = (r, text) => el("a", { href: `#/run/${encodeURIComponent(r)}` }, text);
  if (runs.length === 1) return [link(runs[0], "run")];
  // The jury arm's answer is the best member's run, then the jury's run on it.
  if (arm === "jury" && runs.length === 2) return [link(runs[0], "answer"), " ", link(runs[1], "verdict")];
  return runs.flatMap((r, i) => [i ? " " : "", el("a", { href: `#/run/${encodeURIComponent(r)}`, "aria-label": `run ${i + 1}` }, String(i + 1))]);
}

const MAX_SHOWN = 60;

function disagreementTable(report) {
  const arms = report.arms.filter((a) => a.n > 0).map((a) => a.arm);
  const list = report.disagreements || [];
  const grade = { correct: "✓ right", wrong: "✗ wrong", unparsed: "? unparsed", refused: "⊘ refused", withheld: "– not approved" };
  const rows = list.slice(0, MAX_SHOWN).map((d) => el("tr", { dataset: { question: d.questionId } },
    el("th", { scope: "row" }, el("div", null, d.question || d.questionId), el("div", { class: "muted" }, `answer: ${d.answer}`)),
    arms.map((arm) => {
      const a = d.arms[arm];
      if (!a) return el("td", { class: "muted" }, "—");
      return el("td", { class: `grade-${a.grade}` }, grade[a.grade] || a.grade, " ", el("span", { class: "muted" }, ...runLinks(a.runIds, arm)));
    })));
  return [
    el("h2", null, `Questions where the arms disagree (${list.length})`),
    list.length > MAX_SHOWN ? el("p", { class: "muted" }, `The first ${MAX_SHOWN} are shown.`) : null,
    list.length ? el("div", { class: "table-scroll" }, el("table", { class: "data", id: "eval-disagreements" },
      el("thead", null, el("tr", null, el("th", { scope: "col" }, "Question"), arms.map((a) => el("th", { scope: "col" }, a)))),
      el("tbody", null, rows))) : el("p", { class: "empty" }, "The arms agree on every question."),
  ];
}

/** Other evals of the same question set, each of which can be laid beside this one. */
function sameSetSection(report) {
  const others = report.sameSet || [];
  if (!others.length) return null;
  const holder = el("div", { id: "eval-compare" });
  const rows = others.map((e) => el("tr", { dataset: { other: e.id } },
    el("th", { scope: "row" }, el("a", { href: `#/eval/${encodeURIComponent(e.id)}` }, ui.fmtTime(e.createdAt))),
    el("td", null, (e.arms || []).join(", ")), el("td", null, (e.members || []).join(", ")),
    el("td", null, el("button", { type: "button", class: "button secondary small", onclick: () => compare(report, e.id, holder) }, "Compare"))));
  return el("section", { class: "panel" }, el("h2", null, `Other evals of this set (${others.length})`),
    el("div", { class: "table-scroll" }, el("table", { class: "data", id: "eval-same-set" },
      el("thead", null, el("tr", null, ["Started", "Arms", "Members", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", null, rows))), holder);
}

/** Lays another eval of the same set beside this one, arm by arm. */
async function compare(report, otherId, holder) {
  let other;
  try {
    other = await fetchJson(`/api/evals/${encodeURIComponent(otherId)}`);
  } catch (e) {
    holder.replaceChildren(el("p", { class: "error" }, `That eval could not be read: ${e.message || e}`));
    return;
  }
  const byArm = (r) => Object.fromEntries(r.arms.filter((a) => a.n > 0).map((a) => [a.arm, a]));
  const mine = byArm(report), theirs = byArm(other);
  const arms = [...new Set([...Object.keys(mine), ...Object.keys(theirs)])];
  const cell = (a) => a ? `${pct(a.accuracy)} (${pct(a.ciLow)}–${pct(a.ciHigh)}, n=${a.n})` : "—";
  const diff = (a, b) => {
    if (!a || !b) return "—";
    return `${points(a.accuracy - b.accuracy)} pt`;
  };
  const when = (r) => ui.fmtTime(r.eval.createdAt);
  holder.replaceChildren(el("div", { class: "table-scroll" }, el("table", { class: "data", id: "eval-compare-table" },
    el("thead", null, el("tr", null, el("th", { scope: "col" }, "Arm"), el("th", { scope: "col" }, `This eval (${when(report)})`),
      el("th", { scope: "col" }, `Eval of ${when(other)}`), el("th", { scope: "col", class: "num" }, "Difference"))),
    el("tbody", null, arms.map((arm) => el("tr", { dataset: { arm } }, el("th", { scope: "row" }, arm),
      el("td", null, cell(mine[arm])), el("td", null, cell(theirs[arm])), el("td", { class: "num" }, diff(mine[arm], theirs[arm]))))))),
  el("p", { class: "muted" }, "The two evals asked the same questions with their own runs: where the intervals overlap, the difference may be chance."));
}

/** How far a running eval is, with Stop while it can be stopped. */
function progressSection(report, id) {
  const p = report.progress || { done: 0, total: 0 };
  const note = el("span", { id: "eval-progress-text" }, p.total ? `${p.done} of ${p.total} runs done` : "starting…");
  const stop = el("button", { type: "button", class: "danger small", id: "eval-stop", hidden: !p.stoppable }, "Stop eval");
  stop.addEventListener("click", async () => {
    stop.disabled = true;
    try {
      await fetchJson(`/api/evals/${encodeURIComponent(id)}/cancel`, { method: "POST" });
      note.textContent = "Stopping: the runs in flight are cancelled, what is done is kept…";
    } catch (e) { note.textContent = e.message; stop.disabled = false; }
  });
  return el("section", { class: "panel eval-running", "aria-live": "polite" },
    el("progress", { id: "eval-progress", max: p.total || 1, value: p.done }), " ", note, " ", stop);
}

/** #/eval/ID: while the eval runs, its figures so far and its progress, read again each second. */
export async function evalView(main, id) {
  let timer = null;
  let gone = false;
  async function draw() {
    const report = await fetchJson(`/api/evals/${encodeURIComponent(id)}`);
    if (gone) return;
    main.replaceChildren();
    render(main, report, id);
    if (report.eval.status === "running") timer = setTimeout(() => draw().catch(() => {}), 1000);
  }
  await draw();
  return { destroy() { gone = true; clearTimeout(timer); } };
}

function render(main, report, id) {
  const e = report.eval;
  main.append(el("h1", null, `Eval of ${e.setName}`),
    el("p", { class: "muted" }, `${e.questions} questions · members ${(e.members || []).join(", ")} · `, ui.badge(e.status, e.status === "completed" ? "green" : "yellow"),
      report.stopped ? ` stopped early: ${report.stopped}` : "", " · ",
      el("a", { href: `#/history?eval=${encodeURIComponent(id)}`, id: "eval-runs-link" }, "every run of this eval")),
    el("section", { class: "panel" }, el("h2", null, "Arms"), figuresTable(report), ...juryNotes(report),
      el("p", { class: "muted" }, report.bestSingle ? `Δ: paired difference to the best single member (${report.bestSingle}) on the same questions, 95% bootstrap interval, exact McNemar p.` : "No single member was run: there is no baseline.")),
    el("section", { class: "panel" }, el("h2", null, "Accuracy against cost"), accuracyChart(report)),
    el("section", { class: "panel" }, ...disagreementTable(report)),
    ...[sameSetSection(report)].filter(Boolean));
  if (e.status === "running") main.querySelector("h1").after(progressSection(report, id));
}
