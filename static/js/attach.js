// Files given to a run, on every page that shows them: the attach area of a form (a drop zone
// and a picker; each file uploaded as soon as it is added, `POST /api/attachments`, and shown
// as a chip that says how it went), and a run's files as chips that open a preview (the text
// its models read, or the image) with a link to the original.
//
// What a file holds only ever reaches the page as textContent (a <pre>) or as an <img> of the
// server's own address: never as HTML.
import { el } from "./ui.js";

/** The server's limits (`attachments` in `GET /api/models`); the defaults until it answers. */
const limits = { maxFileBytes: 10 * 1024 * 1024, maxRunBytes: 25 * 1024 * 1024, maxFiles: 20 };

/** Takes the limits the server publishes (called once `/api/models` has answered). */
export function setLimits(published) {
  if (published && typeof published === "object") Object.assign(limits, published);
}

/** What the server reads, and how much. */
function accepted() {
  return `Text, Markdown, code, CSV, JSON, PDF, PNG, JPEG or WebP — up to ${sizeWords(limits.maxFileBytes)} a file, ${sizeWords(limits.maxRunBytes)} in all`;
}

/** A size for a person, as the server writes it (1 KB = 1024 bytes): `812 bytes`, `4.2 KB`, `12.3 MB`. */
export function sizeWords(bytes) {
  const n = Number(bytes) || 0;
  // Rounded up to a tenth, as the server says sizes: a file just past a limit never reads as it.
  const tenths = (x) => { const t = Math.ceil(x * 10 - 1e-9) / 10; return Number.isInteger(t) ? String(t) : t.toFixed(1); };
  if (n < 1024) return `${n} ${n === 1 ? "byte" : "bytes"}`;
  if (n < 1024 * 1024) return `${tenths(n / 1024)} KB`;
  return `${tenths(n / (1024 * 1024))} MB`;
}

/** The kind of a file in a word: from the server once it has read it, else guessed. */
function kindOf(file) {
  if (file.kind) return file.kind;
  const type = file.type || "";
  if (type === "application/pdf" || /\.pdf$/i.test(file.name || "")) return "pdf";
  if (type.startsWith("image/") || /\.(png|jpe?g|webp|gif)$/i.test(file.name || "")) return "image";
  return "text";
}

const KIND_LABEL = { text: "Text", pdf: "PDF", image: "Image" };

function kindBadge(kind) {
  return el("span", { class: `attach-kind attach-kind-${kind}`, "aria-hidden": "true" }, KIND_LABEL[kind] || "File");
}

/** The details of a stored file in words: `4.2 KB`, `PDF, 3 pages, 12.0 KB`. */
export function fileFacts(a) {
  const parts = [];
  if (a.kind === "pdf" && a.pages) parts.push(`${a.pages} ${a.pages === 1 ? "page" : "pages"}`);
  parts.push(sizeWords(a.size));
  return parts.join(" · ");
}

/**
 * A refusal of the server in words: without the field it names ("file: "), and with the file's
 * own name run into the sentence ("report.docx: is a ZIP archive…" → "report.docx is a ZIP
 * archive…").
 */
export function refusalWords(message, name) {
  let m = String(message || "").replace(/^file:\s*/, "").trim();
  if (name && m.startsWith(`${name}: `)) m = `${name} ${m.slice(name.length + 2)}`;
  return m;
}

/** Uploads one file; resolves with its stored description, or rejects with an Error in words. */
export async function uploadFile(file) {
  const body = new FormData();
  body.append("file", file, file.name);
  let res;
  try {
    res = await fetch("/api/attachments", { method: "POST", body });
  } catch {
    throw new Error(`${file.name} could not be sent: the server did not answer.`);
  }
  let reply = null;
  try { reply = await res.json(); } catch { /* not JSON */ }
  if (res.status === 401 && window.conclave && window.conclave.signedOut) window.conclave.signedOut();
  if (!res.ok) {
    const said = reply && reply.error ? refusalWords(reply.error, file.name) : null;
    throw new Error(said || (res.status === 413 ? `${file.name} is too large to attach.` : `${file.name} could not be attached.`));
  }
  const info = reply && reply.attachments && reply.attachments[0];
  if (!info) throw new Error(`${file.name} could not be attached.`);
  return info;
}

let areaCounter = 0;

/**
 * The attach area of a form: a drop zone with a picker button and the chips of the files
 * added. `onChange()` is called whenever a file is added, uploaded, refused or removed.
 * `dropTarget` (the whole form, say) also takes dropped files, so a near miss does not leave
 * the page. `compact`: one line (a follow-up form). `note`: a line added under the hint.
 *
 * Returns `{el, ids(), pending(), refused(), clear(), showError(i, message)}`.
 */
export function attachArea({ onChange = () => {}, dropTarget = null, compact = false, note = "" } = {}) {
  const id = `attach-${++areaCounter}`;
  const files = []; // {file, name, size, kind, state: uploading|ready|refused, info, error, li}
  const input = el("input", { type: "file", multiple: true, id: `${id}-input`, class: "visually-hidden", tabindex: "-1", "aria-hidden": "true", "aria-label": "Attach files" });
  const pick = el("button", { type: "button", class: "secondary small attach-pick", "aria-describedby": `${id}-hint` }, compact ? "Attach files" : "Choose files");
  const list = el("ul", { class: "attach-chips", "aria-label": "Attached files", hidden: true });
  const status = el("div", { class: "visually-hidden", role: "status", "aria-live": "polite" });
  const hint = el("div", { class: "hint attach-hint", id: `${id}-hint` }, accepted() + ".", note ? el("br") : null, note || null);
  const zone = el("div", { class: `attach-drop${compact ? " compact" : ""}` },
    compact ? null : el("span", { class: "attach-drop-text" }, "Drag files here, or"),
    pick, compact ? el("span", { class: "attach-drop-text" }, "or drag them here") : null, input);
  const box = el("div", { class: `attach-area${compact ? " compact" : ""}`, dataset: { attach: "" } },
    compact ? null : el("div", { class: "attach-label", id: `${id}-label` }, "Attach files"),
    zone, hint, list, status);
  if (!compact) zone.setAttribute("aria-labelledby", `${id}-label`);

  pick.addEventListener("click", () => input.click());
  input.addEventListener("change", () => {
    add([...input.files]);
    input.value = "";
  });

  // Dragging files over the zone (or the form it belongs to) lights the zone up.
  const hasFiles = (e) => !!e.dataTransfer && [...(e.dataTransfer.types || [])].includes("Files");
  let depth = 0;
  const light = (on) => zone.classList.toggle("dragging", on);
  for (const target of new Set([zone, dropTarget].filter(Boolean))) {
    target.addEventListener("dragenter", (e) => { if (!hasFiles(e)) return; e.preventDefault(); depth += 1; light(true); });
    target.addEventListener("dragover", (e) => { if (!hasFiles(e)) return; e.preventDefault(); e.dataTransfer.dropEffect = "copy"; light(true); });
    target.addEventListener("dragleave", () => { depth = Math.max(0, depth - 1); if (!depth) light(false); });
    target.addEventListener("drop", (e) => {
      if (!hasFiles(e) && !(e.dataTransfer && e.dataTransfer.files && e.dataTransfer.files.length)) return;
      e.preventDefault();
      e.stopPropagation();
      depth = 0;
      light(false);
      add([...e.dataTransfer.files]);
    });
  }

  function say(text) {
    status.textContent = "";
    setTimeout(() => { status.textContent = text; }, 30);
  }

  function render(f) {
    const state = f.state === "uploading" ? "uploading…" : f.state === "ready" ? "ready" : null;
    const facts = f.info ? fileFacts(f.info) : sizeWords(f.size);
    const remove = el("button", { type: "button", class: "attach-remove", "aria-label": `Remove ${f.name}`, title: `Remove ${f.name}` }, "×");
    remove.addEventListener("click", () => drop(f));
    f.li.className = `attach-chip ${f.state}`;
    f.li.dataset.state = f.state;
    f.li.dataset.name = f.name;
    f.li.replaceChildren(...[
      el("span", { class: "attach-chip-main" },
        // What the server made of it; a refused file is of no kind it reads.
        f.state === "refused" ? null : kindBadge(f.info ? f.info.kind : f.kind),
        el("span", { class: "attach-name", title: f.name }, f.name),
        el("span", { class: "attach-facts" }, facts),
        state ? el("span", { class: `attach-state ${f.state}` }, state) : null),
      remove,
      f.error ? el("span", { class: "attach-error", role: "alert" }, f.error) : null,
    ].filter(Boolean));
    f.remove = remove;
  }

  function refresh() {
    list.hidden = files.length === 0;
    onChange();
  }

  function add(newFiles) {
    for (const file of newFiles) {
      const f = { file, name: file.name || "file", size: file.size, kind: kindOf(file), state: "uploading", info: null, error: "", li: el("li") };
      files.push(f);
      list.append(f.li);
      if (files.filter((x) => x.state !== "refused").length > limits.maxFiles) {
        f.state = "refused";
        f.error = `At most ${limits.maxFiles} files may be attached to one run.`;
        render(f);
        continue;
      }
      render(f);
      say(`Uploading ${f.name}.`);
      uploadFile(file).then((info) => {
        if (!files.includes(f)) return;
        f.info = info;
        f.name = info.name || f.name;
        f.state = "ready";
        render(f);
        say(`${f.name} is attached.`);
        refresh();
      }, (err) => {
        if (!files.includes(f)) return;
        f.state = "refused";
        f.error = err.message;
        render(f);
        refresh();
      });
    }
    refresh();
  }

  function drop(f) {
    const i = files.indexOf(f);
    if (i < 0) return;
    files.splice(i, 1);
    f.li.remove();
    say(`${f.name} removed.`);
    refresh();
    // Focus stays in the list (the next chip's remove button), else goes back to the picker.
    const next = files[i] || files[i - 1];
    (next ? next.remove : pick).focus();
  }

  return {
    el: box,
    /** The ids of the files uploaded, in the order they were added. */
    ids: () => files.filter((f) => f.state === "ready").map((f) => f.info.id),
    /** The stored descriptions of the files uploaded. */
    ready: () => files.filter((f) => f.state === "ready").map((f) => f.info),
    pending: () => files.filter((f) => f.state === "uploading").length,
    refused: () => files.filter((f) => f.state === "refused").map((f) => ({ name: f.name, focus: () => f.remove.focus() })),
    clear() {
      files.splice(0).forEach((f) => f.li.remove());
      refresh();
    },
    /** The server's refusal of the `i`-th file sent (`attachments[i]`), or of them all. */
    showError(i, message) {
      const sent = files.filter((f) => f.state === "ready");
      const f = i === null || i === undefined ? null : sent[i];
      if (f) {
        f.error = message;
        render(f);
        f.remove.focus();
        return true;
      }
      return false;
    },
  };
}

// ---- a run's files -------------------------------------------------------------------------

/**
 * The "Attached files" row of a run: a chip per file (`files`: the run's `attachments`) that
 * opens its preview. `urlOf(n)` is the address of file `n`; `textOf(n, file)` resolves with
 * the text its models read. Null when the run has no files.
 */
export function fileRow(files, { urlOf, textOf }) {
  if (!files || !files.length) return null;
  return el("div", { class: "run-files" },
    el("span", { class: "run-files-label" }, "Attached files"),
    el("ul", { class: "attach-chips", "aria-label": "Attached files" }, files.map((a, n) => {
      const open = el("button", { type: "button", class: "attach-chip file-chip", dataset: { name: a.name, n: String(n) },
        "aria-haspopup": "dialog", title: `Preview ${a.name}` },
      kindBadge(a.kind), el("span", { class: "attach-name" }, a.name), el("span", { class: "attach-facts" }, fileFacts(a)));
      open.addEventListener("click", () => openPreview(a, { url: urlOf(n), text: () => textOf(n, a), opener: open }));
      return el("li", null, open);
    })));
}

let previewCounter = 0;

/**
 * The preview of a stored file in a modal dialog: the text its models read (in a <pre>, as
 * text) or the image, a link that downloads the original, and Close (Escape closes it too).
 */
export function openPreview(a, { url, text, opener }) {
  const id = `preview-${++previewCounter}`;
  const close = el("button", { type: "button", class: "secondary small attach-preview-close" }, "Close");
  const download = el("a", { href: url, download: a.name, class: "button small attach-download" }, "Download");
  const body = el("div", { class: "attach-preview-body" });
  const facts = [KIND_LABEL[a.kind] || "File", fileFacts(a)];
  if (a.kind !== "image" && Number.isFinite(a.chars)) facts.push(`${Number(a.chars).toLocaleString("en")} characters read`);
  const dialog = el("dialog", { class: "attach-preview", "aria-labelledby": `${id}-title` },
    el("div", { class: "attach-preview-head" },
      el("div", { class: "attach-preview-title" },
        el("h2", { id: `${id}-title` }, a.name),
        el("div", { class: "muted" }, facts.join(" · "))),
      el("div", { class: "attach-preview-actions" }, download, close)),
    body);
  if (a.kind === "image") {
    body.append(el("img", { src: url, alt: a.name, class: "attach-preview-img" }));
  } else {
    const pre = el("pre", { class: "attach-preview-text", tabindex: "0", "aria-label": `The text of ${a.name}` }, "Loading…");
    body.append(el("p", { class: "muted attach-preview-note" }, "The text the models read of this file:"), pre);
    Promise.resolve().then(text).then((t) => {
      pre.textContent = t || "(This file has no text.)";
    }, (err) => {
      pre.classList.add("error");
      pre.textContent = `The text could not be loaded${err && err.message ? `: ${err.message}` : "."}`;
    });
  }
  close.addEventListener("click", () => dialog.close());
  // A click on the backdrop (outside the dialog's box) closes it too.
  dialog.addEventListener("click", (e) => {
    if (e.target !== dialog) return;
    const r = dialog.getBoundingClientRect();
    if (e.clientX < r.left || e.clientX > r.right || e.clientY < r.top || e.clientY > r.bottom) dialog.close();
  });
  dialog.addEventListener("close", () => {
    dialog.remove();
    if (opener && opener.isConnected) opener.focus();
  });
  document.body.append(dialog);
  dialog.showModal();
  close.focus();
  return dialog;
}

/** The text of file `n` of a run, read from `url` (`…/attachments/{n}/text`). */
export async function fetchText(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(res.status === 404 ? "the file is gone" : "the server refused");
  return res.text();
}
