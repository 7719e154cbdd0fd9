// Conclave's plain browser page: start a council, watch it live over the WebSocket, cancel
// it, ask follow-ups, and read stored runs back. Model text is only ever set as textContent.
"use strict";

const $ = (sel) => document.querySelector(sel);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

const state = {
  ws: null,
  conversationId: null,
  activeRun: null,
  runs: new Map(), // runId -> {lastSeq, view}
  pending: new Map(), // request id -> callback
  nextId: 1,
  backoff: 500,
};

function send(msg, onReply) {
  if (onReply) {
    msg.id = state.nextId++;
    state.pending.set(msg.id, onReply);
  }
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(msg));
  else showError("Not connected to the server; retrying…");
}

function connect() {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${proto}://${location.host}/ws`);
  state.ws = ws;
  ws.onopen = () => {
    state.backoff = 500;
    setConn("live", "ok");
    // Resume every run we were watching, from the last event we saw.
    for (const [runId, r] of state.runs) {
      if (!r.ended) ws.send(JSON.stringify({ type: "watch", run: runId, since: r.lastSeq }));
    }
  };
  ws.onclose = () => {
    setConn("reconnecting…", "bad");
    setTimeout(connect, state.backoff);
    state.backoff = Math.min(state.backoff * 2, 8000);
  };
  ws.onmessage = (m) => {
    let msg;
    try { msg = JSON.parse(m.data); } catch { return; }
    if (msg.id !== undefined && state.pending.has(msg.id)) {
      const cb = state.pending.get(msg.id);
      state.pending.delete(msg.id);
      cb(msg);
      return;
    }
    if (msg.type === "event") onEvent(msg);
    else if (msg.type === "error") showError(msg.message);
  };
}

function setConn(text, cls) {
  const c = $("#conn");
  c.textContent = text;
  c.className = "pill " + (cls || "");
}

function showError(text) { $("#form-error").textContent = text || ""; }
function setStatus(text) { $("#status").textContent = text || ""; }

// ---- rendering a run ---------------------------------------------------------------------

function newRunView(question) {
  const turn = el("div", "turn");
  turn.append(el("div", "question", question));
  const stages = {};
  for (const [key, title] of [["stage1", "Stage 1 · answers"], ["stage2", "Stage 2 · peer rankings"], ["stage3", "Stage 3 · synthesis"]]) {
    const s = el("div", "stage pending");
    s.hidden = true;
    s.append(el("h3", null, title), el("div", "calls"), el("div", "body"));
    turn.append(s);
    stages[key] = s;
  }
  stages.stage3.classList.add("synthesis");
  const final = el("div", "final");
  turn.append(final);
  $("#thread").append(turn);
  return { turn, stages, final, calls: new Map(), live: new Map() };
}

function showStage(view, key) {
  const s = view.stages[key];
  if (s) s.hidden = false;
  return s;
}

function callChip(view, data) {
  const s = view.stages[data.stage] || view.stages.stage3;
  let chip = view.calls.get(data.key);
  if (!chip) {
    chip = el("span", "call running", data.model);
    view.calls.set(data.key, chip);
    if (data.stage !== "title") {
      showStage(view, data.stage);
      s.querySelector(".calls").append(chip);
    }
  }
  return chip;
}

function renderStage1(view, list) {
  const s = showStage(view, "stage1");
  s.classList.remove("pending");
  const body = s.querySelector(".body");
  body.replaceChildren();
  for (const r of list) {
    const d = el("details");
    d.append(el("summary", null, `${r.model} · ${(r.responseTimeMs / 1000).toFixed(1)}s`), el("div", "text", r.response));
    body.append(d);
  }
}

function renderStage2(view, list, meta) {
  const s = showStage(view, "stage2");
  s.classList.remove("pending");
  const body = s.querySelector(".body");
  body.replaceChildren();
  const agg = (meta && meta.aggregateRankings) || [];
  if (agg.length) {
    const t = el("table");
    const head = el("tr");
    head.append(el("th", null, "#"), el("th", null, "Model"), el("th", null, "Label"), el("th", null, "Average rank"), el("th", null, "Votes"));
    t.append(head);
    agg.forEach((a, i) => {
      const tr = el("tr");
      tr.append(el("td", null, String(i + 1)), el("td", null, a.model), el("td", null, a.label || ""),
        el("td", null, Number(a.averageRank).toFixed(2)), el("td", null, String(a.rankingsCount)));
      t.append(tr);
    });
    body.append(t);
  } else {
    body.append(el("div", "muted", "No ranking could be parsed; the chairman synthesises without ranking data."));
  }
  for (const r of list) {
    const d = el("details");
    const parsed = (r.parsedRanking || []).map((l) => (meta && meta.labelToModel && meta.labelToModel[l]) ? `${l} (${meta.labelToModel[l]})` : l);
    d.append(el("summary", null, `Evaluator ${r.model}: ${parsed.join(" > ") || "unparsed"}`), el("div", "text", r.ranking));
    body.append(d);
  }
}

function renderStage3(view, r) {
  const s = showStage(view, "stage3");
  s.classList.remove("pending");
  const body = s.querySelector(".body");
  body.replaceChildren(el("div", "muted", `Chairman ${r.model}`), el("div", "text", r.response));
}

function liveText(view, data) {
  // Show streamed text of the stage's calls until the stage's complete event replaces it.
  const s = view.stages[(data.key || "").split(":")[0]];
  if (!s || data.key === "title") return;
  let pre = view.live.get(data.key);
  if (!pre) {
    pre = el("div", "text");
    view.live.set(data.key, pre);
    const d = el("details");
    d.open = data.key === "stage3";
    d.append(el("summary", null, `${data.model || data.key} (streaming)`), pre);
    s.hidden = false;
    s.querySelector(".body").append(d);
  }
  pre.textContent += data.delta;
}

function onEvent(msg) {
  const r = state.runs.get(msg.run);
  if (!r || msg.seq <= r.lastSeq) return;
  r.lastSeq = msg.seq;
  const v = r.view;
  const d = msg.data || {};
  switch (msg.event) {
    case "stage1_start": showStage(v, "stage1"); setStatus("Stage 1: collecting answers…"); break;
    case "stage1_complete": renderStage1(v, d.data || []); break;
    case "stage2_start": showStage(v, "stage2"); setStatus("Stage 2: peer ranking…"); break;
    case "stage2_complete": renderStage2(v, d.data || [], d.metadata); break;
    case "stage3_start": showStage(v, "stage3"); setStatus("Stage 3: the chairman is synthesising…"); break;
    case "stage3_complete": renderStage3(v, d.data); break;
    case "title_complete": loadConversations(); break;
    case "call_start": callChip(v, d); break;
    case "call_complete": {
      const chip = callChip(v, d);
      chip.className = "call " + (d.ok ? "ok" : "failed");
      chip.title = d.ok ? `${d.responseTimeMs} ms` : (d.error && d.error.message) || "failed";
      break;
    }
    case "token": liveText(v, d); break;
    case "call_retry": {
      // The failed attempt's streamed text is void; the retry streams afresh.
      const pre = v.live.get(d.key);
      if (pre) pre.textContent = "";
      const chip = callChip(v, d);
      chip.title = `retrying after: ${(d.error && d.error.message) || "error"}`;
      break;
    }
    case "complete": endRun(msg.run, "completed"); break;
    case "error": endRun(msg.run, "failed: " + (d.message || "")); break;
    case "cancelled": endRun(msg.run, "cancelled"); break;
  }
}

function endRun(runId, how) {
  const r = state.runs.get(runId);
  if (!r) return;
  r.ended = true;
  r.view.final.textContent = `Run ${how}.`;
  for (const s of Object.values(r.view.stages)) s.classList.remove("pending");
  // Calls still running when the run ended were stopped with it.
  for (const chip of r.view.calls.values()) {
    if (chip.classList.contains("running")) chip.className = "call stopped";
  }
  for (const pre of r.view.live.values()) {
    const summary = pre.parentElement && pre.parentElement.querySelector("summary");
    if (summary) summary.textContent = summary.textContent.replace("(streaming)", "(stopped)");
  }
  if (state.activeRun === runId) {
    state.activeRun = null;
    $("#cancel").hidden = true;
    $("#send").disabled = false;
    setStatus("");
  }
  loadConversations();
}

// ---- starting, cancelling, conversations -------------------------------------------------

function modelsList(text) {
  return text.split(",").map((s) => s.trim()).filter(Boolean);
}

$("#ask").addEventListener("submit", (e) => {
  e.preventDefault();
  showError("");
  const question = $("#question").value.trim();
  if (!question) { showError("Question is required"); return; }
  const request = { mode: "council", question };
  const models = modelsList($("#models").value);
  if (models.length) request.councilModels = models;
  if ($("#chairman").value.trim()) request.chairmanModel = $("#chairman").value.trim();
  if (state.conversationId) request.conversationId = state.conversationId;
  $("#send").disabled = true;
  send({ type: "start", request }, (reply) => {
    if (reply.type === "error") {
      $("#send").disabled = false;
      showError(reply.message);
      return;
    }
    state.conversationId = reply.conversationId;
    $("#conv-label").textContent = "Follow-up in this conversation";
    state.activeRun = reply.runId;
    state.runs.set(reply.runId, { lastSeq: 0, view: newRunView(question), ended: false });
    $("#question").value = "";
    $("#cancel").hidden = false;
    // The server already subscribed us; events that arrived before this reply are replayed.
    send({ type: "watch", run: reply.runId, since: 0 });
  });
});

$("#cancel").addEventListener("click", () => {
  if (state.activeRun) send({ type: "cancel", run: state.activeRun });
});

$("#new-conv").addEventListener("click", () => {
  state.conversationId = null;
  $("#thread").replaceChildren();
  $("#conv-label").textContent = "New council conversation";
  document.querySelectorAll("#conversations li").forEach((li) => li.classList.remove("active"));
});

async function loadConversations() {
  try {
    const res = await fetch("/api/conversations?limit=50");
    const body = await res.json();
    const ul = $("#conversations");
    ul.replaceChildren();
    for (const c of body.conversations || []) {
      const li = el("li", c.id === state.conversationId ? "active" : "", c.title || "(untitled)");
      li.dataset.id = c.id;
      li.addEventListener("click", () => openConversation(c.id));
      ul.append(li);
    }
  } catch (err) {
    console.warn("conversations", err);
  }
}

async function openConversation(id) {
  const res = await fetch(`/api/conversations/${encodeURIComponent(id)}`);
  if (!res.ok) { showError("Could not load the conversation"); return; }
  const conv = await res.json();
  state.conversationId = id;
  $("#conv-label").textContent = "Follow-up in this conversation";
  $("#thread").replaceChildren();
  for (const run of conv.runs) {
    const q = (conv.messages.find((m) => m.id === run.userMessageId) || {}).content || "";
    const view = newRunView(q);
    const rr = await (await fetch(`/api/deliberations/${run.id}`)).json();
    const result = rr.result || {};
    if (result.stage1 && result.stage1.length) renderStage1(view, result.stage1);
    if (result.stage2 && result.stage2.length) renderStage2(view, result.stage2, result.stage2Metadata);
    if (result.stage3) renderStage3(view, result.stage3);
    else if (rr.answer) {
      // Other modes (vote, jury, debate, delphi, clarity) have their own views in the full
      // client; this page shows their final answer.
      const s = showStage(view, "stage3");
      s.classList.remove("pending");
      s.querySelector("h3").textContent = `${rr.mode} · answer`;
      s.querySelector(".body").replaceChildren(el("div", "text", rr.answer));
    }
    if (rr.status === "running") {
      state.runs.set(run.id, { lastSeq: 0, view, ended: false });
      send({ type: "watch", run: run.id, since: 0 });
    } else {
      view.final.textContent = `Run ${rr.status}${rr.error ? ": " + rr.error : ""}.`;
    }
  }
  loadConversations();
}

async function loadModels() {
  try {
    const m = await (await fetch("/api/models")).json();
    const council = (m.modes && m.modes.council) || {};
    $("#models").placeholder = (council.councilModels || []).join(", ");
    $("#chairman").placeholder = council.chairmanModel || "";
    $("#offline").hidden = !m.offline;
  } catch (err) {
    console.warn("models", err);
  }
}

connect();
loadModels();
loadConversations();
