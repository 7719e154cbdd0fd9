// Decompose: the answer first; then the plan drawn as a graph (one column per wave, a box per
// sub-task with its worker and its state as the waves run: waiting, running, done, failed or
// skipped; arrows from each sub-task to the ones that need its output; the critical path
// marked), what the server repaired in the plan, each sub-task's output as its worker writes
// it, and the assembler's card.

const SVG = "http://www.w3.org/2000/svg";
const STATES = {
  waiting: ["waiting", "gray"],
  running: ["running", "blue"],
  done: ["done", "green"],
  failed: ["failed", "red"],
  skipped: ["skipped", "yellow"],
};
const COMPLEXITY = { LOW: "low effort", MEDIUM: "medium effort", HIGH: "high effort" };

/** `task_3` as a person reads it. */
const label = (id) => `Task ${String(id || "").replace(/^task_/, "")}`;

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("decompose");
  const planSection = ctx.section("plan", "Plan");
  const tasksSection = ctx.section("tasks", "Sub-tasks", { tabs: true });
  const assemblySection = ctx.section("assembly", "Assembly");
  const graph = el("div", { class: "dc-graph" });
  const edges = document.createElementNS(SVG, "svg");
  edges.setAttribute("class", "dc-edges");
  edges.setAttribute("aria-hidden", "true");
  const waves = el("div", { class: "dc-waves", role: "list", "aria-label": "The sub-tasks, wave by wave" });
  graph.append(edges, waves);
  const tasks = {}; // id -> {task, node, stateEl, modelEl, state, wave}
  let order = []; // ids in plan order
  let critical = [];
  let waveCount = 0;
  let ended = 0;
  let seen = false;

  // ---- the arrows: drawn from where the boxes are, again whenever they move -----------------
  let pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      drawEdges();
    });
  }
  const watcher = typeof ResizeObserver === "function" ? new ResizeObserver(redraw) : null;
  if (watcher) watcher.observe(graph);

  function drawEdges() {
    // The arrows' own box is shrunk before the graph is measured: sized for a wider window, it
    // would hold the graph (and the page) that wide after the window narrows.
    edges.setAttribute("width", "0");
    edges.setAttribute("height", "0");
    edges.replaceChildren();
    const box = graph.getBoundingClientRect();
    if (!box.width) return;
    edges.setAttribute("width", String(graph.scrollWidth));
    edges.setAttribute("height", String(graph.scrollHeight));
    const defs = document.createElementNS(SVG, "defs");
    const marker = document.createElementNS(SVG, "marker");
    const attrs = { id: "dc-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" };
    for (const [k, v] of Object.entries(attrs)) marker.setAttribute(k, v);
    const head = document.createElementNS(SVG, "path");
    head.setAttribute("d", "M0,0 L10,5 L0,10 z");
    head.setAttribute("class", "dc-arrowhead");
    marker.append(head);
    defs.append(marker);
    edges.append(defs);
    const at = (id) => {
      const r = tasks[id].node.getBoundingClientRect();
      const x = r.left - box.left + graph.scrollLeft;
      const y = r.top - box.top + graph.scrollTop;
      return { l: x, r: x + r.width, t: y, b: y + r.height, cx: x + r.width / 2, cy: y + r.height / 2 };
    };
    for (const id of order) {
      for (const dep of tasks[id].task.dependencies || []) {
        if (!tasks[dep]) continue;
        const a = at(dep);
        const b = at(id);
        let d;
        if (b.l >= a.r - 1) {
          const mid = (a.r + b.l) / 2;
          d = `M${a.r},${a.cy} C${mid},${a.cy} ${mid},${b.cy} ${b.l - 2},${b.cy}`;
        } else {
          const mid = (a.b + b.t) / 2;
          d = `M${a.cx},${a.b} C${a.cx},${mid} ${b.cx},${mid} ${b.cx},${b.t - 2}`;
        }
        const path = document.createElementNS(SVG, "path");
        path.setAttribute("d", d);
        const onPath = critical.indexOf(dep) >= 0 && critical.indexOf(id) === critical.indexOf(dep) + 1;
        path.setAttribute("class", onPath ? "dc-edge dc-critical-edge" : "dc-edge");
        path.setAttribute("marker-end", "url(#dc-arrow)");
        path.dataset.from = dep;
        path.dataset.to = id;
        edges.append(path);
      }
    }
  }

  // ---- the boxes ------------------------------------------------------------------------------
  function setState(id, state, note) {
    const t = tasks[id];
    if (!t) return;
    t.state = state;
    t.node.dataset.state = state;
    const [text, colour] = STATES[state];
    t.stateEl.replaceChildren(ui.badge(text, colour), note ? el("span", { class: "muted dc-note" }, note) : null);
    redraw();
  }

  function buildGraph(d) {
    order = (d.tasks || []).map((t) => t.id);
    critical = d.criticalPath || [];
    waveCount = (d.executionWaves || []).length;
    waves.replaceChildren();
    for (const [i, ids] of (d.executionWaves || []).entries()) {
      const list = el("div", { class: "dc-nodes" });
      const col = el("div", { class: "dc-wave", role: "listitem", "data-wave": String(i + 1) },
        el("h3", { class: "dc-wave-title" }, `Wave ${i + 1}`,
          ids.length > 1 ? el("span", { class: "muted dc-parallel" }, ` · ${ids.length} in parallel`) : null),
        list);
      waves.append(col);
      for (const id of ids) {
        const task = (d.tasks || []).find((t) => t.id === id);
        if (!task) continue;
        const stateEl = el("div", { class: "dc-state" });
        const modelEl = el("span", { class: "dc-model muted" });
        const needs = (task.dependencies || []).length
          ? `needs ${task.dependencies.map(label).join(", ")}` : "needs nothing else";
        const node = el("div", { class: "dc-node", "data-task": id, "data-state": "waiting", title: task.description || task.title },
          el("div", { class: "dc-node-head" }, el("span", { class: "dc-num" }, label(id)),
            critical.includes(id) ? el("span", { class: "dc-crit", title: "On the longest chain of sub-tasks" }, "critical path") : null),
          el("strong", { class: "dc-title" }, task.title),
          el("div", { class: "dc-meta muted" }, `${COMPLEXITY[task.complexity] || ""} · ${task.expertise}`),
          el("div", { class: "dc-needs muted" }, needs),
          modelEl, stateEl);
        if (critical.includes(id)) node.classList.add("dc-critical");
        list.append(node);
        tasks[id] = { task, node, stateEl, modelEl, state: "waiting", wave: i + 1 };
        setState(id, "waiting");
        if (watcher) watcher.observe(node);
      }
    }
  }

  function showPlan(d) {
    buildGraph(d);
    const n = order.length;
    const facts = el("div", { class: "dc-facts" },
      ui.badge(ui.plural(n, "sub-task"), "blue"),
      ui.badge(ui.plural(waveCount, "wave"), "gray"),
      ui.badge(`up to ${d.maxParallelism ?? 0} at once`, "gray"),
      critical.length ? el("span", { class: "muted" }, `Longest chain: ${critical.map(label).join(" → ")}`) : null);
    const nodes = [facts];
    if (d.reasked) {
      const why = d.reasked === "cycle" ? "its first plan had sub-tasks waiting on each other in a circle"
        : "no sub-task could be read from its first reply";
      const what = d.replanned ? "its second plan is the one shown" : "its second answer did not help, so the first plan was repaired";
      nodes.push(el("div", { class: "callout dc-reasked" }, `The planner was asked again because ${why}; ${what}.`));
    }
    const dropped = d.droppedDependencies || [];
    if (dropped.length) {
      nodes.push(el("div", { class: "callout dc-dropped" },
        el("strong", null, "Circular waits removed: "),
        dropped.map((x) => `${label(x.taskId)} no longer waits for ${label(x.dependency)}`).join("; "), "."));
    }
    const warnings = (d.warnings || []).filter((w) => !/formed a cycle/.test(w));
    if (warnings.length) {
      nodes.push(el("details", { class: "dc-warnings" }, el("summary", null, ui.plural(warnings.length, "note") + " on reading the plan"),
        el("ul", null, warnings.map((w) => el("li", null, w.replace(/task_(\d+)/g, "Task $1"))))));
    }
    if (n) nodes.push(graph);
    planSection.body.replaceChildren(...nodes);
    // The card of the reply the plan came from: the second when the planner's second plan is
    // used, else the first that answered.
    const answered = planSection.cards.filter((c) => c.model === d.model && c.state !== "failed");
    const card = d.reasked && !d.replanned ? answered[0] : answered[answered.length - 1];
    if (card && n) {
      card.claimed = true;
      card.setRole("planner");
      card.setBody(el("p", { class: "muted" }, `Planned ${ui.plural(n, "sub-task")} in ${ui.plural(waveCount, "wave")}: see the graph below.`));
      if (d.fallbackFrom) card.addBadge(ui.badge(`backup for ${d.fallbackFrom}`, "yellow"));
    }
    planSection.done();
    redraw();
  }

  /** The card of a sub-task's call (made when a stored run has no call events). */
  function taskCard(id, model) {
    const key = `task:${id}`;
    const card = tasksSection.cards.find((c) => c.key === key) || tasksSection.addCard(new ctx.ModelCard({ key, model, role: "worker" }));
    const t = tasks[id];
    card.setTitle(t ? `${label(id)} · ${t.task.title}` : label(id));
    card.setRole(model || "");
    return card;
  }

  function showTask(wave, d) {
    const id = d.taskId;
    const card = taskCard(id, d.model);
    if (d.status === "completed") {
      card.setText(d.output || "");
      card.setState("ok", { ms: d.responseTimeMs });
      card.addBadge(ui.badge(ui.plural(d.wordCount ?? 0, "word"), "gray"));
      setState(id, "done", ui.plural(d.wordCount ?? 0, "word"));
    } else {
      if (card.state !== "failed") card.setState("failed", { ms: d.responseTimeMs, error: { message: d.error || "failed" } });
      card.extra.replaceChildren(el("div", { class: "callout dc-failed" },
        `This sub-task produced no output (${d.error || "it failed"}); the sub-tasks that needed it were told of the gap.`));
      setState(id, "failed", d.error || "");
    }
    ended += 1;
    ctx.announce(`${label(id)} ${d.status === "completed" ? "done" : "failed"}`);
  }

  function showAnswer(data) {
    const d = data.data || {};
    const joined = d.fallback === "concatenated";
    const p = ctx.primary(joined ? "Answer (sub-task outputs joined, not assembled)" : "Answer");
    p.el.classList.add("dc-answer");
    const states = Object.values(tasks);
    const done = states.filter((t) => t.state === "done").length;
    const meta = el("div", { class: "dc-answer-meta" },
      ui.badge(`${done} of ${states.length} sub-tasks done`, done === states.length ? "green" : "yellow"),
      data.partial ? ui.badge("some calls failed", "yellow") : null,
      d.model ? el("span", { class: "muted" }, `assembled by ${d.model}${d.fallbackFrom ? ` (backup for ${d.fallbackFrom})` : ""}`) : null);
    const nodes = [meta];
    if (joined) nodes.push(el("div", { class: "callout dc-joined" }, "The assembler failed, so the sub-tasks' outputs are shown one after another, in the order they ran."));
    const missing = states.filter((t) => t.state === "failed" || t.state === "skipped");
    if (missing.length) {
      nodes.push(el("p", { class: "muted dc-gaps" }, `Missing: ${missing.map((t) => `${label(t.task.id)} (${t.task.title}, ${t.state})`).join("; ")}.`));
    }
    nodes.push(ui.markdown(d.response || "", "dc-output"));
    p.body.replaceChildren(...nodes);
    const card = assemblySection.cards.filter((c) => c.state === "ok").pop();
    if (card) {
      card.claimed = true;
      card.setBody(el("p", { class: "muted" }, "Wrote the answer shown at the top."));
    }
    assemblySection.done();
    ctx.announce("Answer ready");
  }

  const view = {
    callSection(call) {
      if (call.stage === "plan") return "plan";
      if (call.stage === "assembly") return "assembly";
      if (/^task_\d+$/.test(call.stage || "")) {
        // The card is made right after this returns: name it after its sub-task while it streams.
        queueMicrotask(() => {
          const card = tasksSection.cards.find((c) => c.key === call.key);
          const t = tasks[call.stage];
          if (card && t) card.setTitle(`${label(call.stage)} · ${t.task.title}`);
          if (card) card.setRole(call.model || "");
        });
        return "tasks";
      }
      return undefined;
    },

    event(name, data) {
      seen = true;
      const d = data.data || {};
      switch (name) {
        case "decompose_start":
          planSection.running();
          ctx.progress("Planning the sub-tasks");
          break;
        case "plan_start":
          planSection.running();
          if (d.again) ctx.progress(d.again === "cycle" ? "Asking the planner to remove a circular wait" : "Asking the planner for a readable plan");
          break;
        case "plan_complete":
          showPlan(d);
          break;
        case "assignment_complete":
          for (const a of d.assignments || []) {
            if (tasks[a.taskId]) tasks[a.taskId].modelEl.textContent = a.model;
          }
          redraw();
          break;
        case "wave_start": {
          tasksSection.running();
          const col = waves.querySelector(`.dc-wave[data-wave="${data.wave}"]`);
          if (col) col.classList.add("dc-live");
          for (const t of d.tasks || []) setState(t.taskId, "running");
          ctx.progress(`Wave ${data.wave} of ${waveCount}: ${ui.plural((d.tasks || []).length, "sub-task")} at once`);
          break;
        }
        case "task_complete":
          showTask(data.wave, d);
          break;
        case "wave_complete": {
          const col = waves.querySelector(`.dc-wave[data-wave="${data.wave}"]`);
          if (col) {
            col.classList.remove("dc-live");
            col.classList.add("dc-ran");
          }
          ctx.progress(`Wave ${data.wave} of ${waveCount} finished`);
          break;
        }
        case "assembly_start":
          tasksSection.done();
          for (const id of d.skipped || []) setState(id, "skipped", "the time limit passed first");
          assemblySection.running();
          ctx.progress("Assembling the answer");
          break;
        case "assembly_complete":
          showAnswer(data);
          break;
        default: break;
      }
    },

    /** What the events do not carry: sub-tasks skipped in a run that then failed. A stored run
     *  without recorded events is rendered from its stored result as if its events came. */
    finish(detail) {
      const r = detail && detail.result;
      if (!r || !r.plan) return;
      if (!seen) {
        view.event("plan_complete", { data: r.plan });
        view.event("assignment_complete", { data: { assignments: r.assignments } });
        for (const w of r.waves || []) {
          for (const t of w.tasks || []) {
            if (t.status !== "skipped") view.event("task_complete", { wave: w.wave, data: t });
          }
        }
        const skipped = (r.waves || []).flatMap((w) => (w.tasks || []).filter((t) => t.status === "skipped").map((t) => t.taskId));
        if (r.assembly) {
          view.event("assembly_start", { data: { skipped } });
          view.event("assembly_complete", { data: r.assembly, partial: r.partial, failedModels: r.failedModels });
        }
      }
      for (const w of r.waves || []) {
        for (const t of w.tasks || []) {
          if (t.status === "skipped" && tasks[t.taskId] && tasks[t.taskId].state !== "skipped") setState(t.taskId, "skipped", "the time limit passed first");
        }
      }
      // Waves that never ran (a failed or cancelled run): their boxes stay waiting, said plainly.
      for (const t of Object.values(tasks)) {
        if (t.state === "running") setState(t.task.id, "waiting", "stopped before it finished");
      }
      redraw();
    },
  };
  return view;
}
