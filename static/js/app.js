// Conclave's browser client: a hash router over five views (dashboard, new deliberation,
// conversation/run, history, review queue), all talking to the server only through the
// documented WebSocket and REST interfaces.
import * as ui from "./ui.js";
import { Connection } from "./conn.js";
import { RunView } from "./runview.js";
import { fetchJson } from "./api.js";
import { buildForm } from "./forms.js";
import { loadModes, modeInfo, allModes } from "./registry.js";
import { evalsView, evalView } from "./evals.js";
import { attachArea, setLimits } from "./attach.js";

const { el, $ } = ui;

const conn = new Connection();
let models = null; // GET /api/models
let loadingModels = null;
let current = null; // the mounted view: {destroy()}
const main = $("#main");

// Tests and the curious reach the connection here (e.g. `conclave.conn.drop()`).
window.conclave = { conn, me: null, signedOut };

/** Why the sign-in screen shows after a reload (kept for that one load only). */
const SIGNED_OUT_KEY = "conclave.signedOut";

/** The session ended while the page was open: show the sign-in screen again, saying why. */
function signedOut() {
  if (window.conclave.me) {
    window.conclave.me = null;
    sessionStorage.setItem(SIGNED_OUT_KEY, "ended");
    location.reload();
  }
}

/** Only a run's owner or an admin may stop it. */
function mayCancel(run) {
  const me = window.conclave.me;
  return !!me && (me.isAdmin || (run.owner && run.owner === me.name));
}

// ---- connection state -------------------------------------------------------------------------

conn.onState((s) => {
  const pill = $("#conn");
  const text = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…" }[s] || s;
  pill.textContent = text;
  pill.className = "pill " + (s === "live" ? "ok" : s === "reconnecting" ? "bad" : "");
  pill.title = s === "live" ? "Connected: updates arrive as they happen" : "The connection dropped; reconnecting and resuming where it left off";
});

/** GET /api/models, asked once: the boot and the first view share the one request. */
function loadModels() {
  loadingModels ||= fetchJson("/api/models")
    .catch((err) => {
      console.warn("models", err);
      return { modes: {}, simModels: [] };
    })
    .then((m) => {
      models = m;
      setLimits(m.attachments);
      $("#offline").hidden = !m.simDefaults;
      return m;
    });
  return loadingModels;
}

// ---- routing ----------------------------------------------------------------------------------

function parseRoute() {
  // `#/history?q=…`: the path, then the query (which a path part never holds).
  const h = location.hash.replace(/^#\/?/, "").split("?")[0];
  const parts = h.split("/").map(decodeURIComponent);
  switch (parts[0]) {
    case "": return { view: "dashboard" };
    case "new":
      // An address naming a mode this server does not run says so, rather than showing another.
      if (parts[1] && !modeInfo(parts[1])) return { view: "unknownMode", mode: parts[1] };
      return { view: "new", mode: parts[1] || (allModes()[0] || {}).id };
    case "run": return { view: "run", id: parts[1] };
    case "c": return { view: "conversation", id: parts[1] };
    case "history": {
      const params = new URLSearchParams(location.hash.split("?")[1] || "");
      return { view: "history", q: params.get("q") || "", evals: params.get("evals") || "", evalId: params.get("eval") || "" };
    }
    case "reviews": return { view: "reviews" };
    case "evals": return { view: "evals" };
    case "eval": return { view: "eval", id: parts[1] };
    default: return { view: "notfound" };
  }
}

let firstRoute = true;

let routeSeq = 0;

async function route() {
  // Only the latest navigation draws: one that started earlier and is still waiting for the
  // modes would otherwise draw over it (and wipe a form already being filled).
  const mine = ++routeSeq;
  await loadModes();
  if (mine !== routeSeq) return;
  const r = parseRoute();
  const focusHeading = !firstRoute;
  firstRoute = false;
  if (current && current.destroy) current.destroy();
  current = null;
  main.replaceChildren();
  for (const a of document.querySelectorAll("[data-nav]")) {
    const on = a.dataset.nav === (r.view === "run" || r.view === "conversation" ? "" : r.view === "eval" ? "evals" : r.view);
    if (on) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  const views = { dashboard: dashboardView, new: newView, unknownMode: unknownModeView, run: runRoute, conversation: conversationView, history: historyView, reviews: reviewsView, evals: () => evalsView(main), eval: (r) => evalView(main, r.id), notfound: notFoundView };
  try {
    current = await views[r.view](r);
  } catch (err) {
    // A run or conversation one may not see is "not found" too: nothing says it exists.
    const missing = err.status === 404;
    main.replaceChildren(el("h1", null, missing ? "Not found" : "Something went wrong"),
      el("p", { class: "error", role: "alert" }, missing ? "Nothing here, or nothing you may see. " : err.message),
      el("p", null, el("a", { href: "#/" }, "Back to the dashboard")));
  }
  // After a navigation inside the page, focus the new view's heading (a screen reader reads
  // where the user landed); on first load, leave focus at the top so Tab reaches the menu.
  const h1 = main.querySelector("h1");
  const active = document.activeElement;
  if (focusHeading && h1 && (active === document.body || !main.contains(active))) { h1.tabIndex = -1; h1.focus({ preventScroll: true }); }
}

function notFoundView() {
  main.append(el("section", { class: "notice form-card" }, el("h1", null, "There is no page at this address"),
    el("p", { class: "notice-what" }, "The address may be mistyped, or the page it pointed to has moved."),
    el("h2", null, "What to do"),
    el("ul", { class: "notice-next" },
      el("li", null, el("a", { href: "#/" }, "Go to the dashboard"), ", which lists the deliberations running now and the recent ones."),
      el("li", null, el("a", { href: "#/history" }, "Search the history"), " for an earlier conversation."),
      el("li", null, el("a", { href: "#/new" }, "Start a new deliberation"), "."))));
  return null;
}

// ---- dashboard --------------------------------------------------------------------------------

const STAGE_LABELS = {
  stage1_start: "answering", stage1_complete: "answers in", stage2_start: "ranking", stage2_complete: "rankings in",
  stage3_start: "synthesising", stage3_complete: "synthesis done", vote_start: "starting", vote_round_start: "voting",
  vote_round_complete: "votes in", tiebreaker_start: "breaking a tie", winner_declared: "winner declared",
  jury_start: "starting", present_start: "presenting", present_complete: "presented", deliberation_start: "jurors deliberating",
  juror_complete: "jurors deliberating", all_jurors_complete: "jurors done", verdict_start: "foreman writing", verdict_complete: "verdict in",
  debate_start: "starting", round1_start: "round 1: answering", round1_complete: "round 1 done", revision_start: "revising",
  revision_complete: "revisions in", vote_complete: "votes in", delphi_start: "classifying", classify_complete: "classified",
  round_start: "estimating", round_complete: "round done", convergence_reached: "converged", max_rounds_reached: "max rounds reached",
  synthesis_start: "facilitator writing", synthesis_complete: "report in", clarity_start: "evaluating", evaluator_complete: "evaluating",
  disagreement_detected: "disagreement", discussion_start: "discussing", discussion_complete: "discussed", arbiter_start: "arbiter scoring",
  arbiter_complete: "arbiter done", score_complete: "scored", title_complete: "titled", call_start: "", call_complete: "", call_retry: "retrying a call", call_waiting: "", call_turn: "",
  complete: "done", error: "failed", cancelled: "cancelled",
};

function stageLabel(run) {
  const e = run.lastEvent;
  if (!e) return "starting";
  if (e in STAGE_LABELS && STAGE_LABELS[e]) return STAGE_LABELS[e];
  // Otherwise say who is at work, in the mode's own words for the role: "Checkers 2/3".
  const calls = run.calls || [];
  if (calls.length) {
    const last = calls[calls.length - 1];
    const now = calls.filter((c) => c.stage === last.stage && c.role === last.role);
    const done = now.filter((c) => !["running", "retrying", "waiting"].includes(c.state)).length;
    const role = ((modeInfo(run.mode) || {}).roles || []).find((r) => r.id === last.role);
    const who = role ? role.label.replace(/\s*\(.*$/, "") : last.stage.replace(/_/g, " ");
    return now.length > 1 ? `${who} ${done}/${now.length}` : who;
  }
  return "working";
}

function progressChips(run) {
  const calls = run.calls || [];
  if (!calls.length) return null;
  const stage = calls[calls.length - 1].stage;
  const now = calls.filter((c) => c.stage === stage);
  return el("span", { class: "chips", "aria-label": "model progress" }, now.map((c) =>
    el("span", { class: `chip-call ${c.state}`, title: `${c.model} (${c.role || c.stage}): ${c.state}` }, c.model)));
}

function runRow(run, { onCancel }) {
  const running = run.status === "running";
  const title = run.title || run.question || "(no question)";
  const elapsed = el("span", { class: "elapsed", dataset: { created: run.createdAt, finished: run.finishedAt || "" } });
  const row = el("div", { class: "run-row", dataset: { run: run.id, status: run.status }, role: "listitem" },
    el("div", { class: "mode-cell" }, ui.modeBadge(run.mode)),
    el("div", { class: "q" }, el("a", { href: `#/run/${encodeURIComponent(run.id)}`, title: run.question || "" }, title),
      run.outcome ? el("div", { class: "outcome-line", title: run.outcome }, run.outcome) : null),
    el("div", { class: "actions" },
      el("a", { class: "button secondary small", href: `#/run/${encodeURIComponent(run.id)}`, "aria-label": `Open ${title}` }, "Open"),
      running && mayCancel(run) ? el("button", { type: "button", class: "danger small cancel", "aria-label": `Cancel ${title}`, onclick: (e) => onCancel(run, e.currentTarget) }, "Cancel") : null),
    el("div", { class: "meta" }, ui.statusBadge(run.status), running ? el("span", { class: "stage-label" }, stageLabel(run)) : null,
      running ? progressChips(run) : null, elapsed, el("span", { class: "owner" }, run.owner ? `by ${run.owner}` : ""),
      run.visibility === "private" ? ui.badge("private", "gray", "Only its owner and admins see it") : null,
      el("span", null, ui.fmtTime(run.createdAt))));
  tickElapsed(elapsed);
  return row;
}

function tickElapsed(node) {
  const created = Number(node.dataset.created);
  const finished = Number(node.dataset.finished) || Date.now();
  if (created) node.textContent = `${ui.fmtElapsed(finished - created)} elapsed`;
}

async function dashboardView() {
  const runs = new Map();
  const liveList = el("div", { class: "list", role: "list", "aria-label": "Running deliberations", id: "live-runs" });
  const recentList = el("div", { class: "list", role: "list", "aria-label": "Recent deliberations", id: "recent-runs" });
  const err = el("p", { class: "error", role: "alert" });
  main.append(
    el("div", { class: "conversation-head" }, el("h1", null, "Dashboard"), el("a", { class: "button", href: "#/new" }, "New deliberation")),
    err,
    el("h2", null, "Running now"), liveList,
    el("h2", null, "Recent"), recentList,
  );

  async function cancel(run, btn) {
    btn.disabled = true;
    try {
      const reply = await conn.request({ type: "cancel", run: run.id });
      if (!reply.cancelled) err.textContent = "That run had already ended.";
    } catch (e) {
      err.textContent = `Could not cancel: ${e.message}`;
      btn.disabled = false;
    }
  }

  // A row is drawn again only when what it shows changed: every other run's progress would
  // otherwise redraw it, and a click landing on it as it is replaced would be lost.
  const drawn = new Map(); // run id -> {sig, node}
  function rowOf(r) {
    const sig = JSON.stringify(r);
    const had = drawn.get(r.id);
    if (had && had.sig === sig) return had.node;
    const node = runRow(r, { onCancel: cancel });
    drawn.set(r.id, { sig, node });
    return node;
  }

  function render() {
    const all = [...runs.values()].sort((a, b) => b.createdAt - a.createdAt);
    const live = all.filter((r) => r.status === "running");
    const recent = all.filter((r) => r.status !== "running").slice(0, 50);
    const keep = (list, nodes) => {
      // Unchanged rows in the same order: nothing to do.
      if (nodes.length === list.children.length && nodes.every((n, i) => list.children[i] === n)) return;
      list.replaceChildren(...nodes);
    };
    keep(liveList, live.length ? live.map(rowOf) : [el("div", { class: "empty" }, "Nothing is running. ", el("a", { href: "#/new" }, "Start a deliberation"), ".")]);
    keep(recentList, recent.length ? recent.map(rowOf) : [el("div", { class: "empty" }, "No deliberations yet.")]);
  }

  let refreshTimer = null;
  async function loadRecent() {
    try {
      const body = await fetchJson("/api/deliberations?limit=50");
      for (const r of body.recent || []) {
        const prev = runs.get(r.id);
        // The live feed knows more about a running run than the stored row does.
        if (!prev || prev.status !== "running" || r.status !== "running") runs.set(r.id, { ...prev, ...r });
      }
      for (const r of body.live || []) runs.set(r.id, { ...runs.get(r.id), ...r });
      render();
    } catch (e) {
      err.textContent = `Could not load runs: ${e.message}`;
    }
  }

  const unsubscribe = conn.subscribeDashboard((msg) => {
    const list = msg.type === "dashboard" ? msg.runs : [msg.run];
    let ended = false;
    for (const r of list) {
      const prev = runs.get(r.id);
      if (prev && prev.status === "running" && r.status !== "running") ended = true;
      runs.set(r.id, { ...prev, ...r });
    }
    render();
    if (ended) { clearTimeout(refreshTimer); refreshTimer = setTimeout(loadRecent, 300); }
  });
  await loadRecent();
  const tick = setInterval(() => main.querySelectorAll(".run-row .elapsed").forEach(tickElapsed), 1000);
  return { destroy() { unsubscribe(); clearInterval(tick); clearTimeout(refreshTimer); } };
}

// ---- new deliberation ---------------------------------------------------------------------------

async function startRun(request) {
  const reply = await conn.request({ type: "start", request });
  conn.feed(reply.runId); // the server already streams its events to this socket
  return reply;
}

function unknownModeView({ mode }) {
  main.append(el("h1", null, "No such mode"),
    el("p", null, `This server has no mode called “${mode}”. Choose one of these:`),
    el("ul", { class: "mode-list" }, allModes().map((m) => el("li", null, el("a", { href: `#/new/${m.id}` }, m.label), el("span", { class: "muted" }, ` — ${m.description}`)))));
  return null;
}

async function newView({ mode }) {
  const m = await loadModels();
  const tabs = el("div", { class: "tabs", role: "tablist", "aria-label": "Mode" });
  for (const info of allModes()) {
    const selected = info.id === mode;
    tabs.append(el("a", { role: "tab", class: "button small", href: `#/new/${info.id}`, "aria-selected": String(selected), "aria-controls": "mode-form", title: info.description }, info.label));
  }
  const info = modeInfo(mode);
  if (!info) {
    main.append(el("h1", null, "New deliberation"), el("p", { class: "error", role: "alert" }, "The server lists no modes."));
    return null;
  }
  const form = buildForm(info, m, async (request) => {
    const reply = await startRun(request);
    location.hash = `#/run/${encodeURIComponent(reply.runId)}`;
  });
  form.id = "mode-form";
  form.setAttribute("role", "tabpanel");
  main.append(el("h1", null, "New deliberation"), tabs, el("p", { class: "muted mode-blurb" }, info.description), form);
  return null;
}

// ---- a conversation and its runs ----------------------------------------------------------------

async function runRoute({ id }) {
  const detail = await fetchJson(`/api/deliberations/${encodeURIComponent(id)}`);
  return conversationView({ id: detail.conversationId, focusRun: id, known: detail });
}

async function conversationView({ id, focusRun, known }) {
  const conv = await fetchJson(`/api/conversations/${encodeURIComponent(id)}`);
  const details = await Promise.all(conv.runs.map((r) => (known && known.id === r.id ? known : fetchJson(`/api/deliberations/${encodeURIComponent(r.id)}`))));
  const mode = conv.conversation.mode;
  const views = [];
  const thread = el("div", { class: "thread" });
  const title = el("span", null, conv.conversation.title || details[0]?.question || "Untitled");
  // The heading often is the first question itself (no title yet, or one made of its first
  // words): on a phone the first run's header then leaves it out, so it shows once.
  const sameAsTitle = (view) => {
    const squash = (t) => (t || "").replace(/\s+/g, " ").trim();
    const t = squash(title.textContent).replace(/…$/, "").trim();
    const q = squash(view.question);
    return !!t && (q === t || (title.textContent.trim().endsWith("…") && q.startsWith(t)));
  };
  const markTitle = () => { if (views[0]) views[0].head.classList.toggle("same-as-title", sameAsTitle(views[0])); };
  main.append(el("div", { class: "conversation-head" }, el("h1", null, title), ui.modeBadge(mode),
    el("span", { class: "muted" }, ui.fmtTime(conv.conversation.createdAt))), thread);

  let followUp = null;
  let askBtn = null;
  let askNote = null;
  let files = null;
  function refreshFollowUp() {
    if (!followUp) return;
    const busy = views.some((v) => v.status === "running");
    const uploading = files ? files.pending() : 0;
    askBtn.disabled = busy || uploading > 0 || followUp.dataset.sending === "true";
    askNote.textContent = busy ? "You can ask a follow-up once this run ends."
      : uploading ? `Waiting for ${uploading === 1 ? "a file" : `${uploading} files`} to upload…` : "";
  }

  async function mountRun(detail) {
    const view = new RunView({
      conn, detail,
      onEnded: async () => {
        refreshFollowUp();
        if (!conv.conversation.title) {
          try {
            const c = await fetchJson(`/api/conversations/${encodeURIComponent(id)}`);
            if (c.conversation.title) { conv.conversation.title = c.conversation.title; title.textContent = c.conversation.title; }
          } catch { /* keep the old title */ }
          markTitle();
        }
      },
    });
    views.push(view);
    thread.append(view.el);
    await view.mount();
    return view;
  }

  for (const d of details) await mountRun(d);
  markTitle();

  const last = details[details.length - 1];
  const info = modeInfo(mode);
  if (info && info.multiTurn && (!last || last.canControl !== false)) {
    const q = el("textarea", { id: "follow-up-question", rows: 2, placeholder: "Ask a follow-up in this conversation…", required: true });
    const err = el("div", { class: "error", role: "alert" });
    askBtn = el("button", { type: "submit", class: "follow-up-ask" }, "Ask");
    askNote = el("span", { class: "muted", "aria-live": "polite" });
    followUp = el("form", { class: "form-card follow-up", "aria-label": "Follow-up question" },
      el("label", { for: "follow-up-question" }, "Follow-up question"), q);
    // Files for the follow-up: a picker on one line, and files dropped anywhere on the form.
    files = attachArea({ compact: true, dropTarget: followUp, onChange: () => { if (!files.refused().length && err.dataset.files) { err.textContent = ""; delete err.dataset.files; } refreshFollowUp(); } });
    followUp.append(files.el, el("div", { class: "toolbar" }, askBtn, askNote, err));
    followUp.addEventListener("submit", async (e) => {
      e.preventDefault();
      err.textContent = "";
      const question = q.value.trim();
      if (!question) { err.textContent = "Question is required"; q.focus(); return; }
      if (files.pending()) return;
      const refused = files.refused();
      if (refused.length) {
        err.textContent = refused.length === 1 ? `${refused[0].name} could not be attached: remove it to ask without it.`
          : `${refused.length} files could not be attached: remove them to ask without them.`;
        err.dataset.files = "refused";
        refused[0].focus();
        return;
      }
      // The follow-up keeps the panel of the conversation's last run, taken from its stored
      // configuration (`request.config`) into the start body's own fields: the server refuses
      // unknown ones. The timeout is left to the server's default.
      const cfg = (last && last.request && last.request.config) || {};
      const modeConfig = {};
      for (const role of info.roles) if (role.field && cfg[role.field] !== undefined) modeConfig[role.field] = cfg[role.field];
      const request = { mode, question, conversationId: id, modeConfig };
      const attachments = files.ready();
      if (attachments.length) request.attachments = attachments.map((a) => a.id);
      followUp.dataset.sending = "true";
      refreshFollowUp();
      try {
        const reply = await startRun(request);
        q.value = "";
        files.clear();
        delete followUp.dataset.sending;
        // The server gives a follow-up the conversation's earlier files first (each once),
        // then its own: the chips follow that order, so chip n opens file n.
        const seen = new Set();
        const given = [...views.flatMap((v) => (v.detail && v.detail.attachments) || []), ...attachments]
          .filter((a) => !seen.has(a.id) && seen.add(a.id));
        const view = await mountRun({ id: reply.runId, mode, question, createdAt: Date.now(), status: "running", attachments: given });
        refreshFollowUp();
        view.el.scrollIntoView({ block: "start" });
      } catch (ex) {
        // A file the server refused says so on its chip; anything else under the form.
        const at = ex.field && ex.field.match(/^attachments\[(\d+)\]/);
        const said = ex.field && ex.message.startsWith(`${ex.field}: `) ? ex.message.slice(ex.field.length + 2) : ex.message;
        if (!(at && files.showError(Number(at[1]), said))) err.textContent = ex.message;
        delete followUp.dataset.sending;
        refreshFollowUp();
      }
    });
    main.append(followUp);
    refreshFollowUp();
  }

  if (focusRun) {
    const v = views.find((x) => x.runId === focusRun);
    if (v && views.length > 1) v.el.scrollIntoView({ block: "start" });
  }
  return { destroy() { views.forEach((v) => v.destroy()); } };
}

// ---- history ------------------------------------------------------------------------------------

async function historyView({ q, evals, evalId }) {
  const input = el("input", { type: "search", id: "history-search", placeholder: "Search conversations by title", value: q, "aria-label": "Search conversations by title" });
  // An eval's runs are listed under the eval; a person's own work is what History shows first.
  const withEvals = el("input", { type: "checkbox", id: "history-evals", checked: evals === "include" });
  const list = el("div", { class: "list", role: "list", id: "history-list", "aria-live": "polite" });
  const more = el("button", { type: "button", class: "secondary", id: "history-more", hidden: true }, "Load more");
  // `?eval=ID`: the runs of one eval (its page links here), in place of the filter.
  main.append(...[el("h1", null, evalId ? "Runs of an eval" : "History"),
    evalId ? el("p", { class: "muted" }, "Every run this eval started, newest first. ", el("a", { href: `#/eval/${encodeURIComponent(evalId)}` }, "Back to the eval")) : null,
    el("div", { class: "toolbar" }, input, evalId ? null : el("label", { class: "check" }, withEvals, " Include runs from evals")),
    list, el("div", { class: "list-more" }, more)].filter(Boolean));
  let seq = 0;
  let next = null;
  function row(c) {
    return el("div", { class: "run-row", role: "listitem", dataset: { conversation: c.id } },
      el("div", { class: "mode-cell" }, ui.modeBadge(c.mode)),
      el("div", { class: "q" }, el("a", { href: `#/c/${encodeURIComponent(c.id)}` }, c.title || "(untitled)"),
        c.lastRun && c.lastRun.outcome ? el("div", { class: "outcome-line", title: c.lastRun.outcome }, c.lastRun.outcome) : null),
      el("div", { class: "meta" }, c.evalId ? el("a", { class: "eval-mark", href: `#/eval/${encodeURIComponent(c.evalId)}` }, "eval") : null,
        c.lastRun && c.lastRun.status !== "completed" ? ui.statusBadge(c.lastRun.status) : null,
        el("span", null, `updated ${ui.fmtTime(c.updatedAt)}`)));
  }
  // `append`: the next page, after what is listed; else the list from its start.
  async function load(append) {
    const mine = ++seq;
    const query = input.value.trim();
    const params = new URLSearchParams({ limit: "50" });
    if (query) params.set("q", query);
    if (evalId) params.set("eval", evalId);
    else if (withEvals.checked) params.set("evals", "include");
    if (append && next) params.set("after", next);
    more.disabled = true;
    try {
      const body = await fetchJson(`/api/conversations?${params}`);
      if (mine !== seq) return;
      const items = body.conversations || [];
      next = body.next || null;
      if (append) list.append(...items.map(row));
      else list.replaceChildren(...(items.length ? items.map(row) : [el("div", { class: "empty" }, query ? `No conversation title matches “${query}”.` : "No conversations yet.")]));
      more.hidden = !next;
    } catch (e) {
      list.replaceChildren(el("p", { class: "error", role: "alert" }, e.message));
    } finally {
      more.disabled = false;
    }
  }
  function remember() {
    const params = new URLSearchParams();
    if (input.value.trim()) params.set("q", input.value.trim());
    if (evalId) params.set("eval", evalId);
    else if (withEvals.checked) params.set("evals", "include");
    history.replaceState(null, "", `#/history${params.toString() ? "?" + params : ""}`);
  }
  let timer = null;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { remember(); load(false); }, 250);
  });
  withEvals.addEventListener("change", () => { remember(); load(false); });
  more.addEventListener("click", () => load(true));
  await load(false);
  return { destroy() { clearTimeout(timer); } };
}

// ---- review queue -------------------------------------------------------------------------------

async function reviewsView() {
  const select = el("select", { id: "review-status", "aria-label": "Which reviews" },
    el("option", { value: "pending" }, "Waiting for review"), el("option", { value: "reviewed" }, "Reviewed"), el("option", { value: "all" }, "All"));
  const list = el("div", { class: "list", role: "list", id: "review-list" });
  main.append(el("h1", null, "Human review queue"),
    el("p", { class: "muted" }, "Clarity runs whose evaluators still disagreed after discussion are flagged here."),
    el("div", { class: "toolbar" }, select), list);
  async function load() {
    const body = await fetchJson(`/api/reviews?status=${select.value}`);
    const items = body.reviews || [];
    list.replaceChildren(...(items.length ? items.map((r) => el("div", { class: "run-row", role: "listitem", dataset: { run: r.runId } },
      el("div", { class: "mode-cell" }, ui.modeBadge(r.mode)),
      el("div", { class: "q" }, el("a", { href: `#/run/${encodeURIComponent(r.runId)}` }, r.title || r.question || "(untitled)"),
        el("div", { class: "outcome-line", title: r.reason || "" }, [r.outcome, r.reason || "Flagged for review"].filter(Boolean).join(" · "))),
      el("div", { class: "meta" }, r.reviewedAt ? ui.badge("reviewed", "green") : ui.badge("pending", "yellow"), el("span", null, ui.fmtTime(r.createdAt)), r.note ? el("span", null, `note: ${r.note}`) : null))) : [el("div", { class: "empty" }, "Nothing here.")]));
  }
  select.addEventListener("change", load);
  await load();
  return null;
}

// ---- signing in -----------------------------------------------------------------------------------

function signInView(message) {
  const token = el("input", { id: "sign-in-token", type: "password", autocomplete: "off", required: true, "aria-describedby": "sign-in-help" });
  const err = el("div", { class: "error", role: "alert" }, message || "");
  // After signing out (or a session that ended), say so before asking to sign in again.
  const why = sessionStorage.getItem(SIGNED_OUT_KEY);
  sessionStorage.removeItem(SIGNED_OUT_KEY);
  const note = why ? el("p", { class: "signed-out-note", role: "status" }, why === "ended"
    ? "Your session ended (it was signed out elsewhere or revoked). Sign in again to go on."
    : "You have signed out. Sign in again below when you want to come back.") : null;
  const form = el("form", { class: "form-card sign-in", "aria-label": "Sign in" },
    el("h1", null, "Sign in to Conclave"), note,
    el("p", { class: "muted", id: "sign-in-help" }, "Open the sign-in link the server printed when it first started, or paste an API token (an admin makes one with ",
      el("code", null, "conclave user add NAME"), ")."),
    el("div", { class: "field" }, el("label", { for: "sign-in-token" }, "API token"), token),
    el("div", { class: "toolbar" }, el("button", { type: "submit" }, "Sign in"), err));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    err.textContent = "";
    const res = await fetch("/api/session", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ token: token.value.trim() }) });
    if (res.ok) location.reload();
    else err.textContent = res.status === 401 ? "That token is not valid." : `Could not sign in (${res.status}).`;
  });
  $("#conn").textContent = "signed out";
  $("#conn").className = "pill";
  main.replaceChildren(form);
  token.focus();
}

/** The phone's one-row header: a menu button opens the navigation, a choice closes it. */
function setUpMenu() {
  const bar = $(".topbar");
  // A run's live bar sticks just under the top bar, whatever height the bar has now.
  const measure = () => document.documentElement.style.setProperty("--topbar-h", `${bar.offsetHeight}px`);
  new ResizeObserver(measure).observe(bar);
  measure();
  const btn = $("#menu-toggle");
  const set = (open) => { bar.classList.toggle("open", open); btn.setAttribute("aria-expanded", String(open)); };
  btn.addEventListener("click", () => set(!bar.classList.contains("open")));
  window.addEventListener("hashchange", () => set(false));
  document.addEventListener("keydown", (e) => { if (e.key === "Escape" && bar.classList.contains("open")) { set(false); btn.focus(); } });
}

async function boot() {
  let me = null;
  try {
    const res = await fetch("/api/me");
    if (res.ok) me = await res.json();
  } catch (err) {
    main.replaceChildren(el("h1", null, "Cannot reach the server"), el("p", { class: "error", role: "alert" }, err.message));
    return;
  }
  setUpMenu();
  if (!me) {
    // Signed out, the menu leads nowhere: only the sign-in form shows.
    $("#topbar-menu").hidden = true;
    $("#menu-toggle").hidden = true;
    return signInView();
  }
  window.conclave.me = me;
  $("#me-name").textContent = me.isAdmin ? `${me.name} (admin)` : me.name;
  $("#me").hidden = false;
  $("#sign-out").addEventListener("click", async () => {
    await fetch("/api/session", { method: "DELETE" });
    window.conclave.me = null;
    sessionStorage.setItem(SIGNED_OUT_KEY, "signed-out");
    location.hash = "#/";
    location.reload();
  });
  window.addEventListener("hashchange", route);
  conn.connect();
  loadModels();
  route();
}

boot();
