// Small DOM kit shared by every view. Model output only ever reaches the page through
// `markdown()` (marked, then DOMPurify) or as textContent: never through innerHTML directly.

export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
      else if (v === true) e.setAttribute(k, "");
      else e.setAttribute(k, String(v));
    }
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

// ---- markdown ------------------------------------------------------------------------------

let purifyReady = false;
const FORBID_TAGS = ["style", "script", "iframe", "frame", "object", "embed", "form", "input", "button",
  "textarea", "select", "img", "video", "audio", "source", "svg", "math", "link", "meta", "base"];

const escapeHtml = (t) => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

function setupPurify() {
  if (purifyReady || !window.DOMPurify || !window.marked) return;
  purifyReady = true;
  // Raw HTML in a model's markdown is shown as text, not rendered: a model that writes
  // `<script>` or `<img onerror=…>` means it as text, and DOMPurify then never meets an event
  // handler (inspecting one makes Chromium report a CSP violation, though nothing runs).
  window.marked.use({ renderer: { html: (token) => escapeHtml(token.text ?? token.raw ?? "") } });
  // Links from models open elsewhere and carry no referrer; DOMPurify has already removed
  // javascript: and other unsafe URLs by the time this runs.
  window.DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  });
}

// ---- reasoning -----------------------------------------------------------------------------

// The reasoning blocks the server's reader sets aside (src/modes/reading.rs), read the same way.
const REASONING_TAGS = "think|thinking|reasoning";
const reasoningOpen = () => new RegExp(`<(${REASONING_TAGS})\\s*>`, "i");
const reasoningClose = (name = REASONING_TAGS) => new RegExp(`</\\s*(${name})\\s*>`, "i");

/**
 * A reply split into its reasoning and its answer, as the server splits it: a closed block
 * (`<think>…</think>`, `<thinking>`, `<reasoning>`, any case) is reasoning wherever it stands;
 * a closing tag with no opening one before it makes everything before it reasoning (the
 * template opened the block); an opening tag never closed makes the rest reasoning
 * (`unclosed`: the model is still thinking, or stopped while it was).
 */
export function splitReasoning(text) {
  const src = String(text ?? "");
  if (!src.includes("<")) return { answer: src, reasoning: null, unclosed: false };
  const blocks = [];
  let answer = "";
  let rest = src;
  let unclosed = false;
  const lead = reasoningClose().exec(rest);
  if (lead && !reasoningOpen().test(rest.slice(0, lead.index))) {
    blocks.push(rest.slice(0, lead.index).trim());
    rest = rest.slice(lead.index + lead[0].length);
  }
  for (let open = reasoningOpen().exec(rest); open; open = reasoningOpen().exec(rest)) {
    answer += rest.slice(0, open.index);
    const after = rest.slice(open.index + open[0].length);
    const close = reasoningClose(open[1]).exec(after);
    if (!close) {
      blocks.push(after.trim());
      unclosed = true;
      rest = "";
      break;
    }
    blocks.push(after.slice(0, close.index).trim());
    rest = after.slice(close.index + close[0].length);
  }
  if (!blocks.length) return { answer: src, reasoning: null, unclosed: false };
  answer += rest;
  const kept = blocks.filter(Boolean);
  return { answer: answer.trim(), reasoning: kept.length ? kept.join("\n\n") : null, unclosed };
}

// ---- replies that follow a format ----------------------------------------------------------

// Labels a mode's prompt asks for (`ESTIMATE:`, `DECISION:`…). They may share one line when a
// model runs them together ("ESTIMATE: ~63200 CONFIDENCE: LOW REASONING: …"); any other
// all-capitals label is recognised only at the start of a line.
const SHARED_LINE_LABELS = ["ESTIMATE", "ANSWER", "CONFIDENCE", "CONFIDENCE_REASONING", "REASONING", "DECISION",
  "VERDICT", "VOTE", "WINNER", "SCORE", "RATIONALE", "TYPE", "OPTIONS"];
// A label's one-word values shown as badges, with their colours.
const BADGE_VALUES = {
  DECISION: { REVISE: "yellow", STAND: "blue", MERGE: "green" },
  VERDICT: { APPROVE: "green", REVISE: "yellow", REJECT: "red" },
  CONFIDENCE: { HIGH: "green", MEDIUM: "blue", LOW: "gray" },
};
const BADGE_MARK = /\u2063badge:(green|yellow|red|blue|gray):([a-z]+)\u2063/g;
const LABEL_LINE = /^(\s*)(?:\*\*|__)?([A-Z]+(?:[ _][A-Z]+){0,4})(?:\*\*|__)?\s*:(?:\*\*|__)?[ \t]*(.*)$/;
// A short all-capitals word ("NASA: …") is a label only when a mode's format has it.
const SHORT_LABELS = new Set(["TYPE", "TASK", "VOTE", "RANK", "NAME", "ROLE", "CLAIM"]);
const SHARED_SPLIT = new RegExp(`\\s+(?=(?:\\*\\*)?(?:${SHARED_LINE_LABELS.join("|")})(?:\\*\\*)?\\s*:)`, "g");

const isLabel = (key) => key.length >= 5 || SHORT_LABELS.has(key) || SHARED_LINE_LABELS.includes(key.replace(/ /g, "_"));

/** `FINAL_RANKING` → "Final ranking". */
function labelWords(key) {
  const w = key.replace(/_/g, " ").toLowerCase();
  return w.charAt(0).toUpperCase() + w.slice(1);
}

/**
 * A reply's markdown with the labelled lines of a mode's format shown for people: each
 * `LABEL: value` line becomes its own paragraph headed by the label in plain words
 * ("**Estimate:** ~63200"), and a choice the label names (a decision, a verdict, a confidence)
 * a badge. Fenced code is left alone; nothing else of the text changes.
 */
export function formatLabelledLines(md) {
  const out = [];
  let fenced = false;
  for (const raw of String(md).split("\n")) {
    if (/^\s*(```|~~~)/.test(raw)) fenced = !fenced;
    // Labels run together are split only on a line that starts with one.
    const head = fenced || /^\s{4}/.test(raw) ? null : raw.match(LABEL_LINE);
    const parts = head && isLabel(head[2]) ? raw.split(SHARED_SPLIT) : [raw];
    let labelled = false;
    const lines = parts.map((part) => {
      const m = fenced ? null : part.match(LABEL_LINE);
      if (!m || /^\s{4}/.test(part)) return part;
      if (!isLabel(m[2])) return part;
      labelled = true;
      const key = m[2].replace(/ /g, "_");
      let value = m[3].replace(/^\*\*(.*)\*\*$/, "$1").trim();
      const colour = BADGE_VALUES[key] && BADGE_VALUES[key][value.replace(/[*_.]/g, "").toUpperCase()];
      if (colour) value = `\u2063badge:${colour}:${value.replace(/[*_.]/g, "").toLowerCase()}\u2063`;
      return `${m[1]}**${labelWords(m[2])}:**${value ? " " + value : ""}`;
    });
    // Each labelled line stands apart (markdown would join neighbouring lines into one).
    if (labelled) out.push("", ...lines.flatMap((l, i) => (i ? ["", l] : [l])), "");
    else out.push(raw);
  }
  return out.join("\n");
}

/** `finalRanking` / `final_ranking` → "Final ranking". */
function fieldWords(key) {
  // A key that is already words (a rubric criterion: "Cost Efficiency") stays as written.
  if (/\s/.test(String(key))) return String(key);
  const w = String(key).replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").toLowerCase().trim();
  return w.charAt(0).toUpperCase() + w.slice(1);
}

/** A scalar of a structured reply as markdown text; a choice a mode badges, as a badge. */
function fieldValue(key, v) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "boolean") return v ? "yes" : "no";
  const text = String(v);
  const label = String(key).replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
  const colour = BADGE_VALUES[label] && BADGE_VALUES[label][text.toUpperCase()];
  return colour ? `\u2063badge:${colour}:${text.toLowerCase()}\u2063` : text;
}

function structuredLines(key, v, depth, out) {
  const pad = "  ".repeat(depth);
  if (Array.isArray(v)) {
    out.push(`${pad}${depth ? "- " : ""}**${fieldWords(key)}:**`, "");
    v.forEach((item, i) => {
      if (item && typeof item === "object") {
        out.push(`${pad}${i + 1}.`);
        for (const [k, x] of Object.entries(item)) structuredLines(k, x, depth + 1, out);
      } else out.push(`${pad}${i + 1}. ${fieldValue(key, item)}`);
    });
    out.push("");
  } else if (v && typeof v === "object") {
    out.push(`${pad}${depth ? "- " : ""}**${fieldWords(key)}:**`, "");
    for (const [k, x] of Object.entries(v)) structuredLines(k, x, depth + 1, out);
    out.push("");
  } else {
    out.push(`${pad}${depth ? "- " : ""}**${fieldWords(key)}:** ${fieldValue(key, v)}`, "");
  }
}

/**
 * A structured reply (its answer is one JSON object, as a route with structured output gets it)
 * as markdown a person reads: a paragraph per field in the reply's order, headed by the field in
 * plain words, lists numbered, choices as badges. Null for any other reply.
 */
export function structuredMarkdown(answer) {
  let body = String(answer ?? "").trim();
  const fence = body.match(/^```(?:json)?\s*\n([\s\S]*?)\n?```$/);
  if (fence) body = fence[1].trim();
  if (!body.startsWith("{")) return null;
  let value;
  try {
    value = JSON.parse(body);
  } catch {
    return null;
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) return null;
  const out = [];
  for (const [k, v] of Object.entries(value)) structuredLines(k, v, 0, out);
  return out.join("\n");
}

/** Sanitised HTML for a model's markdown. Its reasoning, if any, comes first, folded. */
export function markdownHtml(text) {
  setupPurify();
  const src = String(text ?? "");
  if (!window.marked || !window.DOMPurify) {
    // The vendored scripts failed to load: show the text, never raw HTML.
    const d = document.createElement("div");
    d.textContent = src;
    return d.innerHTML.replace(/\n/g, "<br>");
  }
  const render = (md) => window.marked.parse(md, { gfm: true, breaks: false, async: false });
  const { answer, reasoning, unclosed } = splitReasoning(src);
  let html = render(structuredMarkdown(answer) ?? formatLabelledLines(answer));
  if (reasoning !== null || unclosed) {
    // Folded, ahead of the answer; an unclosed trace says it is unfinished.
    const summary = unclosed ? "Reasoning…" : "Reasoning";
    html = `<details class="reasoning"><summary>${summary}</summary>${render(reasoning ?? "")}</details>${html}`;
  }
  // One pass over everything, the fold and the trace included.
  const clean = window.DOMPurify.sanitize(html, {
    FORBID_TAGS,
    FORBID_ATTR: ["style", "srcset", "formaction", "action", "background", "poster"],
    ALLOW_DATA_ATTR: false,
  });
  // The badges `formatLabelledLines` marked: a colour and a lower-case word, nothing else.
  return clean.replace(BADGE_MARK, (_, colour, word) => `<span class="badge ${colour} reply-badge">${word}</span>`);
}

/** A `.md` element holding the rendered markdown. */
export function markdown(text, cls = "") {
  const d = el("div", { class: ("md " + cls).trim() });
  d.innerHTML = markdownHtml(text);
  return d;
}

/** Re-renders markdown into an existing element; a reasoning fold the reader opened stays open. */
export function setMarkdown(node, text) {
  const wasOpen = node.querySelector(":scope > details.reasoning")?.open;
  node.innerHTML = markdownHtml(text);
  const fold = node.querySelector(":scope > details.reasoning");
  if (fold && wasOpen) fold.open = true;
}

/** A block whose long content is clipped behind a "Show more" toggle. */
export function clip(content, { open = false } = {}) {
  const box = el("div", { class: "clip" + (open ? " expanded" : "") }, content);
  const btn = el("button", { type: "button", class: "link more", "aria-expanded": String(open) }, open ? "Show less" : "Show more");
  btn.addEventListener("click", () => {
    const exp = box.classList.toggle("expanded");
    btn.textContent = exp ? "Show less" : "Show more";
    btn.setAttribute("aria-expanded", String(exp));
  });
  const wrap = el("div", { class: "clip-wrap" }, box, btn);
  // Short content needs no toggle; measure once it is laid out.
  requestAnimationFrame(() => refreshClip(wrap));
  return wrap;
}

export function refreshClip(wrap) {
  const box = wrap.firstElementChild;
  const btn = wrap.lastElementChild;
  if (!box || !btn) return;
  // Short is what fits the collapsed height (15rem in app.css), expanded or not.
  const limit = 15 * parseFloat(getComputedStyle(document.documentElement).fontSize || "16");
  const short = box.scrollHeight <= limit + 4;
  box.classList.toggle("short", short);
  btn.hidden = short;
}

// ---- small pieces ----------------------------------------------------------------------------

/** Why a model's reply gave no answer that could be read (a reply's `unparsed`), in words. */
export function unparsedWhy(code) {
  return {
    refused: "The model declined to answer.",
    reasoning_only: "The model stopped while still reasoning.",
    no_answer: "The reply does not state an answer in a form that can be read.",
    inconsistent: "The reply states contradictory answers.",
  }[code] || "";
}

export function badge(text, color = "gray", title) {
  return el("span", { class: `badge ${color}`, title }, text);
}

const VERDICT_COLORS = { APPROVE: "green", REVISE: "yellow", REJECT: "red" };
export function verdictBadge(verdict) {
  const v = String(verdict || "").toUpperCase();
  return badge(v || "NO VERDICT", VERDICT_COLORS[v] || "gray");
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

export function fmtElapsed(ms) {
  if (ms === null || ms === undefined || ms < 0) return "";
  // A short run in tenths: "0.4s", not "0s".
  if (ms < 10000) return `${(Math.floor(ms / 100) / 10).toFixed(1)}s`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
}

export function fmtTime(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  const now = new Date();
  const sameDay = d.toDateString() === now.toDateString();
  return sameDay ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : d.toLocaleDateString([], { month: "short", day: "numeric" }) + " " + d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

export function fmtNum(n, digits = 1) {
  if (n === null || n === undefined || Number.isNaN(Number(n))) return "–";
  const x = Number(n);
  if (Math.abs(x) >= 1e6) return x.toLocaleString(undefined, { maximumFractionDigits: 0 });
  return x.toLocaleString(undefined, { maximumFractionDigits: digits });
}

export function fmtCost(c) {
  if (c === null || c === undefined) return "";
  return "$" + Number(c).toFixed(Number(c) < 0.01 ? 4 : 3);
}

export function plural(n, one, many) {
  return `${n} ${n === 1 ? one : (many || one + "s")}`;
}

/** A table from rows of cells; `num` marks right-aligned columns. */
export function table(headers, rows, { num = [], caption, stack = false } = {}) {
  // `stack`: wherever the table is narrow (a phone, a panel's card) each row is a block of
  // lines under their column's names, as a table of long texts cannot fit (app.css).
  const t = el("table", { class: stack ? "data stack" : "data" });
  if (caption) t.append(el("caption", { class: "visually-hidden" }, caption));
  const label = (i) => (stack ? (typeof headers[i] === "string" ? headers[i] : headers[i].textContent) : null);
  const thead = el("thead", null, el("tr", null, headers.map((h, i) => el("th", { scope: "col", class: num.includes(i) ? "num" : null }, h))));
  const tbody = el("tbody", null, rows.map((r) => el("tr", null, r.map((c, i) => el("td", { class: num.includes(i) ? "num" : null, "data-label": label(i) }, c)))));
  t.append(thead, tbody);
  return t;
}

/** Reads a screen reader a short progress message. */
export function announce(text) {
  const a = document.getElementById("announcer");
  if (!a) return;
  a.textContent = "";
  setTimeout(() => { a.textContent = text; }, 30);
}

/** Each mode's label, filled from `GET /api/modes` (registry.js) before anything is drawn. */
export const MODE_LABELS = {};

export function modeBadge(mode) {
  return el("span", { class: "badge mode" }, MODE_LABELS[mode] || mode);
}

export const STATUS_COLORS = { running: "yellow", completed: "green", failed: "red", cancelled: "gray", interrupted: "red" };
export function statusBadge(status) {
  return badge(status, STATUS_COLORS[status] || "gray");
}

const sheets = new Map();

/**
 * Adds a mode's own stylesheet (`/static/css/<name>.css`) once, so modes need not edit app.css;
 * resolves when it has loaded (or failed to).
 */
export function ensureStylesheet(name) {
  const href = `/static/css/${name}.css`;
  if (sheets.has(href)) return sheets.get(href);
  if (document.querySelector(`link[href="${href}"]`)) return Promise.resolve();
  const link = el("link", { rel: "stylesheet", href });
  const loaded = new Promise((resolve) => {
    link.addEventListener("load", resolve, { once: true });
    link.addEventListener("error", resolve, { once: true });
  });
  sheets.set(href, loaded);
  document.head.append(link);
  return loaded;
}

/** Resolves once every stylesheet added so far has loaded: a view reads as it looks only then. */
export function stylesheetsLoaded() {
  return Promise.all(sheets.values());
}
