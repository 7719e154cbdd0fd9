// One run on screen: its header (question, mode, status, elapsed, tokens and cost, cancel), a
// model card per call that streams its text as tokens arrive, and the mode's own view
// (`modes/<mode>.js`) for everything the mode's events carry.
//
// The view is a fold over the run's events: the same code renders a run live and a stored run
// reopened later (its events replayed from the server), so both look the same. Once the run
// has ended, its stored result (`GET /api/deliberations/{id}`) is handed to the mode's
// `finish`, for what only the end reveals (Delphi's participants, the review flag).
import * as ui from "./ui.js";
import * as charts from "./charts.js";
import { TERMINAL } from "./conn.js";
import { modeInfo } from "./registry.js";
import { fetchJson } from "./api.js";
import { addShareTools } from "./share.js";
import { fileRow, fetchText } from "./attach.js";

const { el } = ui;

const CALL_STATE_LABEL = { running: "running", retrying: "retrying", waiting: "waiting", ok: "done", failed: "failed", stopped: "stopped" };

/** A model's call: header with model, role and state; its streamed or final text. */
export class ModelCard {
  constructor({ key, model, role, stage } = {}) {
    this.key = key;
    this.model = model || "";
    this.role = role || "";
    this.stage = stage;
    this.state = "running";
    this.text = "";
    this.claimed = false;
    this.renderTimer = null;
    this.chip = el("span", { class: "chip-call running", title: `${this.model}: running` }, this.model);
    this.stateBadge = el("span", { class: "chip-call running" }, "running");
    this.timeEl = el("span", { class: "time" });
    this.badges = el("span", { class: "badges" });
    this.titleEl = el("span", { class: "model" }, this.model);
    this.roleEl = el("span", { class: "role" }, this.role);
    this.head = el("div", { class: "card-head" }, this.titleEl, this.roleEl, this.badges, this.stateBadge, this.timeEl);
    this.errorEl = el("div", { class: "call-error", role: "alert", hidden: true });
    this.noteEl = el("div", { class: "retry-note", hidden: true });
    this.pre = el("div", { class: "card-pre" });
    this.md = el("div", { class: "md streaming" });
    this.clipWrap = ui.clip(this.md, { open: true });
    this.body = el("div", { class: "card-body" }, this.clipWrap);
    this.extra = el("div", { class: "card-extra" });
    this.el = el("article", { class: "card model-card", "aria-label": `${this.model} ${this.role}`.trim(), dataset: { key: key || "", model: this.model } },
      this.head, this.errorEl, this.noteEl, this.pre, this.body, this.extra);
  }

  /** The call has not ended: running, retrying, or waiting for its turn. */
  inFlight() {
    return this.state === "running" || this.state === "retrying" || this.state === "waiting";
  }

  appendDelta(delta) {
    if (this.state !== "running" && this.state !== "retrying") return;
    this.text += delta;
    if (!this.renderTimer) {
      this.renderTimer = setTimeout(() => {
        this.renderTimer = null;
        ui.setMarkdown(this.md, this.text);
      }, 120);
    }
  }

  /** The call's final text (markdown); collapses long text behind "Show more". */
  setText(text, { open = false } = {}) {
    clearTimeout(this.renderTimer);
    this.renderTimer = null;
    this.text = text ?? "";
    this.clipWrap.hidden = false;
    this.md.classList.remove("streaming");
    ui.setMarkdown(this.md, this.text);
    const box = this.clipWrap.firstElementChild;
    box.classList.toggle("expanded", open);
    const btn = this.clipWrap.lastElementChild;
    btn.textContent = open ? "Show less" : "Show more";
    btn.setAttribute("aria-expanded", String(open));
    requestAnimationFrame(() => ui.refreshClip(this.clipWrap));
  }

  setState(state, { ms, error } = {}) {
    this.state = state;
    const label = CALL_STATE_LABEL[state] || state;
    this.stateBadge.className = `chip-call ${state}`;
    this.stateBadge.textContent = label;
    this.chip.className = `chip-call ${state}`;
    this.chip.title = `${this.model}: ${label}${ms ? " · " + ui.fmtMs(ms) : ""}`;
    if (ms !== undefined && ms !== null) this.timeEl.textContent = ui.fmtMs(ms);
    if (state !== "running" && state !== "retrying") {
      this.md.classList.remove("streaming");
      clearTimeout(this.renderTimer);
      this.renderTimer = null;
      this.noteEl.hidden = true;
      if (state === "failed" || state === "stopped") {
        // Text streamed by a call that never finished is not stored: drop it, so the card
        // reads the same live and when the run is reopened.
        this.text = "";
        ui.setMarkdown(this.md, "");
        this.clipWrap.hidden = true;
        if (state === "stopped") {
          this.noteEl.textContent = "Stopped before it finished.";
          this.noteEl.hidden = false;
        }
      } else if (this.text) {
        ui.setMarkdown(this.md, this.text);
      }
      requestAnimationFrame(() => ui.refreshClip(this.clipWrap));
    }
    if (error) this.showError(error);
  }

  showError(error) {
    const e = typeof error === "string" ? { message: error } : error;
    const status = e.status ? ` ${e.status}` : "";
    this.errorEl.textContent = `${e.kind ? e.kind + status + ": " : ""}${e.message || "failed"}`;
    this.errorEl.hidden = false;
  }

  retry({ attempt, delayMs, error }) {
    this.state = "retrying";
    this.text = "";
    ui.setMarkdown(this.md, "");
    this.stateBadge.className = "chip-call retrying";
    this.stateBadge.textContent = "retrying";
    this.chip.className = "chip-call retrying";
    this.noteEl.textContent = `Attempt ${attempt} failed (${(error && error.message) || "error"}); retrying in ${ui.fmtMs(delayMs)}`;
    this.noteEl.hidden = false;
  }

  /** Every turn at its model's server is taken: the call waits for one (`call_waiting`). */
  waiting({ route }) {
    this.setState("waiting");
    this.noteEl.textContent = `Waiting for a free slot on ${route === "*" ? "the model provider" : route} (it is busy with other calls); its time limit starts when it is sent.`;
    this.noteEl.hidden = false;
  }

  /** Its turn came (`call_turn`): it is sent now. */
  sent() {
    this.setState("running");
    this.noteEl.hidden = true;
    this.md.classList.add("streaming");
  }

  /** The call is made again: the run was resumed after a server restart. */
  restart() {
    this.setState("running");
    this.text = "";
    ui.setMarkdown(this.md, "");
    this.clipWrap.hidden = false;
    this.md.classList.add("streaming");
    this.noteEl.textContent = "Asked again: the server restarted while this call was running.";
    this.noteEl.hidden = false;
  }

  setTitle(text) {
    this.titleEl.textContent = text;
    if (this.tab) this.tab.textContent = text;
  }
  setRole(text) { this.roleEl.textContent = text; }
  addBadge(node) { this.badges.append(node); return node; }
  /** Content shown above the text (a reasoning line, a chart). */
  prepend(node) { this.pre.append(node); return node; }
  /** Replaces the text area with other content. */
  setBody(node) { this.body.replaceChildren(node); }
}

/** A stage of a run: a heading, progress chips, model cards and the mode's own content. */
export class Section {
  constructor(id, title, { tabs = false } = {}) {
    this.id = id;
    this.cards = [];
    this.heading = el("h2", null, title);
    /** Content above the cards (a summary bar, a banner). */
    this.lead = el("div", { class: "stage-lead" });
    this.chips = el("div", { class: "chips", "aria-label": `${title}: model progress` });
    this.tabBar = el("div", { class: "card-tabs", role: "tablist", "aria-label": `${title}: choose a card` });
    this.grid = el("div", { class: "cards" });
    this.body = el("div", { class: "stage-body" });
    this.el = el("section", { class: "stage" + (tabs ? " tabbed" : ""), hidden: true, "aria-label": title, dataset: { section: id } },
      this.heading, this.lead, this.chips, this.tabBar, this.grid, this.body);
    this.tabs = tabs;
  }

  show() { const was = this.el.hidden; this.el.hidden = false; if (was) this.changed(); return this; }
  setTitle(title) { this.heading.textContent = title; this.changed(); }
  running() { this.show(); this.el.classList.add("running"); this.changed(); return this; }
  done() { this.el.classList.remove("running"); this.changed(); return this; }
  /** Tells the run's step indicator (set by the RunView) that this stage changed. */
  changed() { if (this.onChange) this.onChange(this); }

  addCard(card) {
    this.show();
    this.cards.push(card);
    this.chips.append(card.chip);
    this.grid.append(card.el);
    if (this.tabs) {
      const i = this.cards.length - 1;
      const tab = el("button", { type: "button", role: "tab", "aria-selected": "false" }, card.model || `#${i + 1}`);
      tab.addEventListener("click", () => this.selectTab(i));
      card.tab = tab;
      this.tabBar.append(tab);
      if (i === 0) this.selectTab(0);
    }
    return card;
  }

  selectTab(i) {
    this.cards.forEach((c, j) => {
      c.el.classList.toggle("tab-active", i === j);
      if (c.tab) c.tab.setAttribute("aria-selected", String(i === j));
    });
  }

  /**
   * The first card of `model` not yet matched to a result (a card is made if none is left).
   * A card whose call failed or was stopped is taken last: with a model on the panel twice, a
   * result belongs to the call that succeeded.
   */
  claim(model) {
    const free = this.cards.filter((c) => !c.claimed && c.model === model);
    let card = free.find((c) => c.state !== "failed" && c.state !== "stopped") || free[0];
    if (!card) card = this.addCard(new ModelCard({ model, role: "" }));
    card.claimed = true;
    return card;
  }

  /**
   * A stage's answers (`[{model, response, responseTimeMs}]`) into their cards, then the
   * section is done; answers how many there were. `role` relabels the cards.
   */
  answers(list, { role } = {}) {
    for (const r of list || []) {
      const card = this.claim(r.model);
      if (role) card.setRole(role);
      card.setText(r.response);
      card.setState("ok", { ms: r.responseTimeMs });
    }
    this.done();
    return (list || []).length;
  }
}

/** How a run that did not complete ended, in words for a person. */
export function endText(status, message) {
  const m = (message || "").trim();
  if (status === "cancelled") {
    const who = m.replace(/^cancelled by\s*/i, "");
    return who && who !== m ? `Stopped by ${who} before it finished. Finished stages are kept below.` : "Stopped before it finished. Finished stages are kept below.";
  }
  if (status === "interrupted") return "The server shut down before this run finished; finished stages are kept below.";
  return m ? `This run failed: ${m}` : "This run failed.";
}

export class RunView {
  /**
   * `detail`: the run as `GET /api/deliberations/{id}` returns it (mode, question, status...),
   * or at least `{id, mode, question}` for a run this page just started.
   */
  /**
   * `readOnly`: a shared run's public page: no cancel, run again, share, export or permalink,
   * and `loadDetail()` gives the stored run (the signed-in API is not asked).
   */
  /**
   * `files`: where the run's files are read (`{url(n), text(n, file)}`); by default the
   * signed-in API's `…/attachments/{n}` and `…/attachments/{n}/text`.
   */
  constructor({ conn, detail, onEnded, onFollowUpDone, readOnly = false, loadDetail = null, files = null }) {
    this.conn = conn;
    this.detail = detail;
    this.readOnly = readOnly;
    const fileBase = () => `/api/deliberations/${encodeURIComponent(this.runId)}/attachments`;
    this.files = files || { url: (n) => `${fileBase()}/${n}`, text: (n) => fetchText(`${fileBase()}/${n}/text`) };
    this.loadDetail = loadDetail || (() => fetchJson(`/api/deliberations/${encodeURIComponent(this.runId)}`));
    this.runId = detail.id;
    this.mode = detail.mode;
    this.onEnded = onEnded;
    this.onFollowUpDone = onFollowUpDone;
    this.calls = new Map();
    this.backups = new Map(); // call key -> fallback_start data
    this.sections = new Map();
    this.charts = [];
    this.usage = { promptTokens: 0, completionTokens: 0, cost: null };
    this.callCounts = { total: 0, done: 0, failed: 0 };
    this.status = "running";
    this.startedAt = detail.createdAt || Date.now();
    this.finishedAt = null;
    this.build();
  }

  build() {
    const d = this.detail;
    this.statusEl = el("span", null, ui.statusBadge("running"));
    this.elapsedEl = el("span", { class: "elapsed", title: "elapsed" });
    this.callsEl = el("span", { class: "calls-count" });
    this.usageEl = el("span", { class: "usage", title: "tokens and cost of this run" });
    this.cancelBtn = el("button", { type: "button", class: "danger small", hidden: true }, "Cancel");
    this.cancelBtn.addEventListener("click", () => this.askCancel(true, this.head));
    // A run that did not complete can be started again with the same request (a new run).
    this.rerunBtn = el("button", { type: "button", class: "small rerun", hidden: true, title: "Start a new run with the same question, mode and models" }, "Run again");
    this.rerunBtn.addEventListener("click", () => this.rerun());
    // Stopping a run loses the calls in flight: it takes a second, deliberate click.
    this.confirmEl = el("span", { class: "confirm-cancel-bar", role: "group", "aria-label": "Confirm cancel", hidden: true },
      el("span", null, "Stop this run? Finished stages are kept."),
      el("button", { type: "button", class: "danger small confirm-cancel", onclick: () => { this.askCancel(false); this.cancel(); } }, "Stop run"),
      el("button", { type: "button", class: "secondary small", onclick: () => this.askCancel(false) }, "Keep running"));
    this.progressEl = el("span", { class: "progress-text" });
    this.partialEl = el("span", { class: "partial", hidden: true });
    const question = d.question || (d.request && d.request.question) || "";
    this.question = question;
    this.questionEl = el("div", { class: "question" }, question || "(no question)");
    // The files the run was given, under its question: a chip each, opening a preview.
    this.filesEl = el("div", { class: "run-files-slot", hidden: true });
    this.renderFiles();
    this.head = el("div", { class: "run-head" },
      this.questionEl, this.filesEl,
      el("div", { class: "facts" }, this.statusEl, this.partialEl, this.progressEl, this.elapsedEl, this.callsEl, this.usageEl,
        this.readOnly ? null : el("a", { href: `#/run/${encodeURIComponent(this.runId)}`, class: "muted permalink", title: "This run's address, for your team (they sign in to open it)" }, "Permalink"),
        // A run an eval started says so, and leads back to the eval.
        d.evalId && !this.readOnly ? el("a", { href: `#/eval/${encodeURIComponent(d.evalId)}`, class: "eval-mark", title: "This run answered one question of an eval" }, "Part of an eval") : null),
      // A read-only page (a share link) has nothing to control.
      ...(this.readOnly ? [] : [el("span", { class: "spacer" }), this.cancelBtn, this.rerunBtn, this.confirmEl]));
    if (!this.readOnly) addShareTools(this.head, d);
    // While the run is live, a thin bar stays in view under the page's top bar as the reader
    // scrolls through the stages: where the run is, how long it has taken, and Cancel.
    this.liveStage = el("span", { class: "live-stage" }, "Starting");
    this.liveElapsed = el("span", { class: "live-elapsed", title: "elapsed" });
    this.liveCancel = el("button", { type: "button", class: "danger small live-cancel", hidden: true }, "Cancel");
    this.liveCancel.addEventListener("click", () => this.askCancel(true, this.liveBar));
    this.liveBar = el("div", { class: "run-live-bar", role: "group", "aria-label": "Run progress" },
      el("span", { class: "live-dot", "aria-hidden": "true" }), this.liveStage, this.liveElapsed, this.readOnly ? null : this.liveCancel);
    this.endNote = el("div", { hidden: true });
    // The answer comes first: under the header, one card with the run's outcome in its mode's
    // terms and the answer (the mode's primary block); the stages follow, with a compact step
    // indicator above them that shows where the run is and jumps to a stage.
    this.stepsEl = el("nav", { class: "run-steps", "aria-label": "Stages", hidden: true });
    this.outcomeEl = el("p", { class: "run-outcome", hidden: true });
    this.pendingEl = el("p", { class: "answer-pending muted", role: "status" }, "The answer appears here when the panel has finished.");
    this.answerRoot = el("div", { class: "run-answer" }, this.endNote, this.outcomeEl, this.pendingEl);
    this.modeRoot = el("div", { class: "mode-root" });
    this.el = el("article", { class: "run", "aria-label": `${ui.MODE_LABELS[this.mode] || this.mode} run`, dataset: { run: this.runId, mode: this.mode, status: "running" } },
      this.head, this.liveBar, this.answerRoot, this.stepsEl, this.modeRoot);
    this.ctx = this.makeCtx();
    this.renderFacts();
  }

  /** The "Attached files" row, from the run's `attachments` (drawn again only if they change). */
  renderFiles() {
    const list = this.detail.attachments || [];
    const sig = JSON.stringify(list.map((a) => [a.name, a.kind, a.size, a.pages]));
    if (sig === this.filesSig) return;
    this.filesSig = sig;
    const row = fileRow(list, { urlOf: (n) => this.files.url(n), textOf: (n, a) => this.files.text(n, a) });
    this.filesEl.replaceChildren(...(row ? [row] : []));
    this.filesEl.hidden = !row;
  }

  makeCtx() {
    const view = this;
    return {
      ui, charts, el, ModelCard,
      run: view.detail,
      root: view.modeRoot,
      /** The section `id`, created (in call order, hidden until used) on first use. */
      section(id, title, opts) {
        let s = view.sections.get(id);
        if (!s) {
          s = new Section(id, title || id, opts);
          s.onChange = () => view.renderSteps();
          view.sections.set(id, s);
          view.modeRoot.append(s.el);
        }
        return s;
      },
      hasSection: (id) => view.sections.has(id),
      /** The run's main answer block (synthesis, winner, report): first, under the header. */
      primary(title) {
        let p = view.answerRoot.querySelector(":scope > .primary");
        if (!p) {
          p = el("section", { class: "primary", "aria-label": title }, el("h2", null, title), el("div", { class: "primary-body" }));
          view.answerRoot.append(p);
          view.pendingEl.hidden = true;
        } else {
          p.firstElementChild.textContent = title;
        }
        return { el: p, head: p.firstElementChild, body: p.lastElementChild };
      },
      card: (key) => view.calls.get(key),
      progress(text) { view.progressEl.textContent = text; },
      announce: ui.announce,
      /** Charts are created with Chart.js; the view destroys them when it goes away. */
      chart(config, opts) {
        const box = charts.chart(config, opts);
        view.charts.push(box);
        return box;
      },
    };
  }

  async mount() {
    // A mode without a view of its own gets the generic one (its stages, cards and outcome).
    const info = modeInfo(this.mode);
    const mod = info && !info.view ? await import("./generic_view.js") : await import(`./modes/${this.mode}.js`);
    this.modeView = mod.createView(this.ctx);
    const feed = this.conn.feed(this.runId);
    this.unsubscribe = feed.subscribe((ev) => this.onEvent(ev), (message) => this.showNote(message, true));
    this.tick = setInterval(() => this.renderFacts(), 1000);
    // A run stored before events were recorded, or a stored run whose replay is empty, still
    // shows its outcome.
    if (this.detail.status && this.detail.status !== "running" && this.detail.lastSeq === 0) {
      this.end(this.detail.status, this.detail.error);
    }
    return this;
  }

  destroy() {
    if (this.unsubscribe) this.unsubscribe();
    clearInterval(this.tick);
    for (const box of this.charts) if (box.chart) box.chart.destroy();
  }

  onEvent(ev) {
    const data = ev.data || {};
    switch (ev.event) {
      case "call_start": return this.callStart(data);
      case "token": { const c = this.calls.get(data.key); if (c) c.appendDelta(data.delta || ""); return; }
      case "call_retry": { const c = this.calls.get(data.key); if (c) c.retry(data); return; }
      case "call_waiting": { const c = this.calls.get(data.key); if (c) c.waiting(data); return; }
      case "call_turn": { const c = this.calls.get(data.key); if (c) c.sent(); return; }
      case "call_complete": return this.callComplete(data);
      default: break;
    }
    if (ev.event === "resumed") {
      this.showNote("The server restarted during this run; it resumed from its last saved step.", false);
      return;
    }
    if (ev.event === "prompt_fitted" || ev.event === "structured_output_refused") {
      const card = this.calls.get(data.key);
      const text = ev.event === "prompt_fitted" ? fittedText(data) : refusedText(data);
      if (card) card.prepend(el("div", { class: "callout fit-note" }, text));
      else this.showNote(text, false);
      return;
    }
    if (ev.event === "fallback_start") {
      // The primary failed; its backup answers in a card of its own (its call_start follows).
      this.backups.set(data.key, data);
      const existing = this.calls.get(data.key);
      if (existing) this.noteBackup(existing, data);
      return;
    }
    // A mode's final stage event says whether some panel member failed.
    if (data.partial === true) this.markPartial(data.failedModels || []);
    if (TERMINAL.has(ev.event)) {
      const status = ev.event === "complete" ? "completed" : ev.event === "cancelled" ? "cancelled" : (/interrupt/i.test(data.message || "") ? "interrupted" : "failed");
      this.end(status, data.message);
      return;
    }
    try {
      this.modeView.event(ev.event, data, ev);
    } catch (err) {
      console.error(`rendering ${ev.event}`, err);
    }
  }

  callStart(data) {
    if (data.stage === "title") return;
    const earlier = this.calls.get(data.key);
    if (earlier && earlier.inFlight()) {
      // The same call again after the run resumed: its card starts over.
      earlier.restart();
      return;
    }
    let sectionId = this.modeView.callSection ? this.modeView.callSection(data) : data.stage;
    if (sectionId === null) return;
    if (sectionId === undefined) sectionId = data.stage;
    const section = this.ctx.section(sectionId, sectionId);
    section.running();
    const card = section.addCard(new ModelCard(data));
    this.calls.set(data.key, card);
    const backup = this.backups.get(data.key);
    if (backup) this.noteBackup(card, backup);
    this.callCounts.total += 1;
    this.renderFacts();
  }

  callComplete(data) {
    if (data.usage) {
      this.usage.promptTokens += data.usage.promptTokens || data.usage.prompt_tokens || 0;
      this.usage.completionTokens += data.usage.completionTokens || data.usage.completion_tokens || 0;
      if (data.usage.cost !== undefined && data.usage.cost !== null) this.usage.cost = (this.usage.cost || 0) + data.usage.cost;
    }
    const card = this.calls.get(data.key);
    if (!card) return;
    this.callCounts.done += 1;
    if (!data.ok) this.callCounts.failed += 1;
    card.setState(data.ok ? "ok" : "failed", { ms: data.responseTimeMs, error: data.ok ? null : (data.error || "failed") });
    this.renderFacts();
  }

  async end(status, message) {
    if (this.status !== "running" && this.finishedAt) return;
    this.status = status;
    this.finishedAt = Date.now();
    this.el.dataset.status = status;
    for (const card of this.calls.values()) {
      if (card.inFlight()) card.setState("stopped");
    }
    for (const s of this.sections.values()) s.done();
    this.pendingEl.hidden = true;
    if (status !== "completed") this.showNote(endText(status, message), status === "failed" || status === "interrupted");
    this.renderFacts();
    ui.announce(`Run ${status}`);
    try {
      const detail = await this.loadDetail();
      this.detail = { ...this.detail, ...detail };
      if (detail.status && detail.status !== "running" && detail.status !== this.status) {
        this.status = detail.status;
        this.el.dataset.status = detail.status;
      }
      if (detail.usage) this.usage = detail.usage;
      this.renderFiles();
      // The outcome heads the answer card, unless it is only the answer's own first words.
      const lead = (detail.answer || "").replace(/^[\s#>*_`-]+/, "");
      const said = (detail.outcome || "").replace(/…$/, "");
      if (said && !lead.startsWith(said)) {
        this.outcomeEl.textContent = detail.outcome;
        this.outcomeEl.hidden = false;
      }
      if (detail.finishedAt) this.finishedAt = detail.finishedAt;
      if (detail.createdAt) this.startedAt = detail.createdAt;
      this.renderFacts();
      if (this.modeView.finish) this.modeView.finish(detail);
    } catch (err) {
      console.warn("loading the stored result", err);
    }
    // Ready once the mode's own stylesheet has loaded too (until then its view is unstyled), and
    // the page has done what the run's end asks of it (the conversation's title fetched): the
    // view then reads as the run reopened would.
    await ui.stylesheetsLoaded();
    if (this.onEnded) {
      try {
        await this.onEnded(this);
      } catch (err) {
        console.warn("after the run ended", err);
      }
    }
    this.el.dataset.ready = "true";
  }

  /**
   * The step indicator: one step per stage shown so far, in order, with how many of its models
   * are done while it runs; a click brings the stage into view. While no answer is there, the
   * answer card says which stage the run is on.
   */
  renderSteps() {
    const shown = [...this.sections.values()].filter((s) => !s.el.hidden);
    this.stepsEl.hidden = shown.length === 0;
    // Redrawn only when something in it changed (the clock ticks every second).
    const sig = this.status + "|" + shown.map((s) => `${s.heading.textContent}:${s.el.classList.contains("running")}:${s.cards.map((c) => c.state).join(",")}`).join("|");
    if (sig === this.stepsSig) return;
    this.stepsSig = sig;
    let current = null;
    this.stepsEl.replaceChildren(...shown.map((s, i) => {
      const live = this.status === "running" && s.el.classList.contains("running");
      const cards = s.cards;
      const finished = cards.filter((c) => !c.inFlight()).length;
      const failed = cards.some((c) => c.state === "failed");
      const title = s.heading.textContent;
      if (live) current = { title, finished, total: cards.length };
      return el("button", { type: "button", class: `step${live ? " live" : ""}${failed ? " has-failed" : ""}`, "aria-current": live ? "step" : null,
        onclick: () => s.el.scrollIntoView({ behavior: "smooth", block: "start" }) },
      el("span", { class: "step-n", "aria-hidden": "true" }, String(i + 1)), el("span", { class: "step-title" }, title),
      live && cards.length > 1 ? el("span", { class: "step-count" }, ` ${finished}/${cards.length}`) : null);
    }));
    this.current = current;
    if (this.status === "running") {
      this.pendingEl.textContent = current
        ? `Working on ${current.title.toLowerCase()}${current.total > 1 ? `: ${current.finished} of ${current.total} done` : ""}. The answer appears here when the panel has finished.`
        : "The answer appears here when the panel has finished.";
    }
  }

  noteBackup(card, backup) {
    card.prepend(el("div", { class: "callout fallback-note" },
      `Backup for ${backup.fallbackFrom}, which failed: ${(backup.error && backup.error.message) || "error"}`));
  }

  markPartial(failed) {
    const names = [...new Set(failed.map((f) => f.model))];
    this.partialEl.replaceChildren(ui.badge("partial", "yellow", `Some panel calls failed: ${names.join(", ")}`),
      el("span", { class: "muted" }, ` ${ui.plural(failed.length, "failed call")}`));
    this.partialEl.hidden = false;
  }

  showNote(text, isError) {
    this.endNote.className = isError ? "run-error" : "run-note";
    this.endNote.setAttribute("role", isError ? "alert" : "status");
    this.endNote.textContent = text;
    this.endNote.hidden = false;
  }

  renderFacts() {
    this.statusEl.replaceChildren(ui.statusBadge(this.status));
    const end = this.finishedAt || Date.now();
    this.elapsedEl.textContent = `${ui.fmtElapsed(end - this.startedAt)} elapsed`;
    const c = this.callCounts;
    this.callsEl.textContent = c.total ? `${c.done}/${c.total} calls${c.failed ? `, ${c.failed} failed` : ""}` : "";
    const u = this.usage || {};
    const tokens = (u.promptTokens || 0) + (u.completionTokens || 0);
    this.usageEl.textContent = `${tokens.toLocaleString()} tokens${u.cost !== null && u.cost !== undefined ? " · " + ui.fmtCost(u.cost) : ""}`;
    // Only the run's owner or an admin may stop it (the server says which in `canControl`).
    const mayCancel = this.status === "running" && this.detail.canControl !== false && this.confirmEl.hidden;
    this.cancelBtn.hidden = !mayCancel;
    this.liveCancel.hidden = !mayCancel;
    this.rerunBtn.hidden = !this.mayRunAgain();
    if (this.status !== "running") {
      this.progressEl.textContent = "";
      this.confirmEl.hidden = true;
    }
    this.renderSteps();
    this.renderLiveBar(end);
  }

  /** The live bar: the stage in words with how many of its models are done, and the time. */
  renderLiveBar(end) {
    this.liveBar.hidden = this.status !== "running";
    if (this.liveBar.hidden) return;
    const c = this.current;
    this.liveStage.textContent = c ? `${c.title}${c.total > 1 ? ` · ${c.finished} of ${c.total} models done` : ""}` : "Starting";
    this.liveElapsed.textContent = ui.fmtElapsed(end - this.startedAt);
  }

  /**
   * Whether to offer "Run again": the run ended without completing, and the reader may start
   * it (a follow-up goes back into its conversation, where only its owner or an admin may ask).
   */
  mayRunAgain() {
    if (this.readOnly || !["cancelled", "failed", "interrupted"].includes(this.status)) return false;
    const followUp = !!(this.detail.request && this.detail.request.conversationId);
    return !(followUp && this.detail.canControl === false);
  }

  /** Starts the same request as a new run (`POST …/rerun`) and goes to it. */
  async rerun() {
    this.rerunBtn.disabled = true;
    try {
      const reply = await fetchJson(`/api/deliberations/${encodeURIComponent(this.runId)}/rerun`, { method: "POST" });
      location.hash = `#/run/${encodeURIComponent(reply.runId)}`;
    } catch (err) {
      this.showNote(`Could not run it again: ${err.message}`, true);
      this.rerunBtn.disabled = false;
    }
  }

  /**
   * Shows (or puts away) the "Stop this run?" confirmation in place of the Cancel button that
   * asked: in the run's header, or in the live bar.
   */
  askCancel(open, host = this.head) {
    if (open) host.append(this.confirmEl);
    this.confirmEl.hidden = !open;
    this.renderFacts();
    if (open) this.confirmEl.querySelector(".confirm-cancel").focus();
    else if (this.status === "running") (this.confirmEl.parentNode === this.liveBar ? this.liveCancel : this.cancelBtn).focus();
  }

  async cancel() {
    this.cancelBtn.disabled = true;
    try {
      await this.conn.request({ type: "cancel", run: this.runId });
    } catch (err) {
      // The socket may be down; REST does the same.
      try { await fetchJson(`/api/deliberations/${encodeURIComponent(this.runId)}/cancel`, { method: "POST" }); } catch (e) { this.showNote(e.message, true); }
    }
    this.cancelBtn.disabled = false;
  }
}

/** A `prompt_fitted` event in words: what was shortened to fit the model's context. */
export function fittedText(data) {
  const n = (x) => Number(x || 0).toLocaleString("en");
  const cuts = data.cuts || [];
  const dropped = cuts.filter((c) => !c.toChars).length;
  const shortened = cuts.filter((c) => c.toChars).map((c) => `${c.what} (${n(c.fromChars)} → ${n(c.toChars)} characters)`);
  const parts = [];
  if (shortened.length) parts.push(`shortened ${shortened.join(", ")}`);
  if (dropped) parts.push(`left out ${dropped === 1 ? "an earlier message" : `${dropped} earlier messages`} of the conversation`);
  const did = parts.length ? parts.join(" and ") : "could not shorten it";
  const still = data.fits === false ? " It was still too long; the model's server may refuse it." : "";
  return `To fit this model's context (${n(data.contextTokens)} tokens), Conclave ${did}.${still}`;
}

/** A `structured_output_refused` event in words. */
export function refusedText(data) {
  const who = data.route && data.route !== "*" ? `the server for ${data.route} models` : "the default provider";
  return `Asked again for a plain reply: ${who} does not take structured (JSON) replies (${data.message || "refused"}). It is asked for plain text until Conclave restarts.`;
}
