// The "new deliberation" forms, with model pickers fed by `GET /api/models`. Every mode's form
// is made from its settings' JSON Schema (`GET /api/modes`), so a new mode has a form the day it
// lands, and what a form says to people (labels, help, placeholders, menus' words, the text
// boxes' heights, which model may not also be another) is written once, beside the setting in
// Rust (docs/protocol.md lists the keys). Counts and roles (the foreman is not a juror, the
// facilitator is not a panelist) are checked before sending; the server's own validation errors
// come back with the field they name and are shown next to that field.
import { el } from "./ui.js";
import { attachArea } from "./attach.js";

const SEC = 1000;

/** The types a schema allows, `null` left out. */
function typesOf(schema) {
  const t = schema.type;
  return (Array.isArray(t) ? t : [t]).filter((x) => x && x !== "null");
}

/** `jurorModels` -> "Juror models". */
function words(key) {
  const w = key.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/_/g, " ").toLowerCase();
  return w.charAt(0).toUpperCase() + w.slice(1);
}

/** `steps` -> "step", `criteria` -> "criterion", `entries` -> "entry": what one item is called. */
function singular(key) {
  if (/ia$/.test(key)) return key.replace(/ia$/, "ion");
  if (/ies$/.test(key)) return key.replace(/ies$/, "y");
  return key.replace(/s$/, "");
}

/** The readable name of an enum value: `structure_depth` -> "Structure depth". */
const enumLabel = (v) => words(String(v));

/**
 * The field of one setting (`key`, schema `s`) with `base` (path, label, hint, from), or null
 * when the form has no control for it (objects are walked by the caller). Besides the standard
 * keywords it reads `x-rows` (a text box's height; 1 is one line), `x-step` (a number's step)
 * and `x-enum-labels` (a menu's words by value; `""` is the choice of leaving it out).
 */
function fieldOf(key, s, base) {
  const type = typesOf(s)[0];
  const items = s.items || {};
  if (type === "array" && items.format === "model-id") return { ...base, kind: "models", min: s.minItems || 1, max: s.maxItems || 100 };
  if (type === "array" && typesOf(items)[0] === "object" && items.properties) {
    // A list of objects: a row per item with a field per property (their own paths are keys).
    const req = new Set(items.required || []);
    const itemFields = Object.entries(items.properties)
      .map(([k, p]) => fieldOf(k, p, { path: k, label: p.title || words(k), hint: p.description, required: req.has(k), from: k, blank: "Choose…" }))
      .filter((f) => f && f.kind !== "list");
    return { ...base, kind: "list", itemLabel: words(singular(key)).toLowerCase(), itemFields,
      minItems: s.minItems || 0, maxItems: s.maxItems ?? Infinity, mayBeEmpty: !base.required, emptyIsDefault: /\bdefault\b/i.test(s.description || "") };
  }
  if (type === "array") return { ...base, kind: "lines", rows: s["x-rows"], minItems: s.minItems || 0, maxItems: s.maxItems || 100 };
  if (type === "string" && s.format === "model-id") return { ...base, kind: "model" };
  if (type === "string" && Array.isArray(s.enum)) {
    // A menu: a first choice that sends nothing, unless the schema names the default (then
    // that is chosen at first).
    const named = s["x-enum-labels"] || {};
    const blank = s.default === undefined ? [["", named[""] || base.blank || (base.required ? "Choose…" : "Default")]] : [];
    const options = [...blank, ...s.enum.filter((v) => v !== null).map((v) => [v, named[v] || enumLabel(v)])];
    return { ...base, kind: "select", options, preset: s.default };
  }
  if (type === "string") {
    const rows = s["x-rows"] ?? ((s.maxLength || 0) > 1000 ? 6 : 1);
    return { ...base, kind: rows > 1 ? "textarea" : "text", rows };
  }
  if ((type === "integer" || type === "number") && /Ms$/.test(key)) {
    // Shown in seconds: so is what its description says, its figures too (`(default 600 000)`
    // milliseconds is `(default 600)` seconds).
    const hint = base.hint && base.hint.replace(/\bmilliseconds\b/g, "seconds")
      .replace(/\d{1,3}(?:[ \u00a0\u202f,]\d{3})+|\d+/g, (n) => String(Number(n.replace(/[^\d]/g, "")) / SEC));
    return { ...base, hint, kind: "seconds", label: `${s.title || words(key.replace(/Ms$/, ""))} (seconds)`, min: (s.minimum ?? 0) / SEC, max: (s.maximum ?? Infinity) / SEC };
  }
  if (type === "integer" || type === "number") return { ...base, kind: "number", min: s.minimum, max: s.maximum, step: s["x-step"] ?? (type === "integer" ? 1 : "any") };
  if (type === "boolean") return { ...base, kind: "check" };
  return null;
}

/** Whether a help text only says its label again ("Per-stage timeout in seconds." under
 *  "Per-stage timeout (seconds)"): then it is not shown. */
function repeats(hint, label) {
  const ws = (t) => t.toLowerCase().match(/[\p{L}\d%]+/gu) || [];
  const have = new Set(ws(label));
  return ws(hint).every((w) => have.has(w) || ["a", "an", "the", "in", "of"].includes(w));
}

/**
 * A form's fields made from a mode's description (`GET /api/modes`): its question, then each
 * setting of its `modeConfig` schema in order. A setting's label is its `title`, else its
 * role's label, else its name in words; its help is its `description`; the settings the mode
 * takes at the top level (`topLevel`: Council's) are sent there. The question is the mode's
 * (`question`) with what the schema's `x-question` adds: `label`, `placeholder`, `rows` and
 * `after` (the setting it follows, else it comes first). A setting's `x-not-in`
 * (`{field, message}`) names a list of models it must not be one of. A list of objects
 * (Chain's steps, a rubric's criteria) is a list of rows, a field per property.
 */
export function schemaFields(info) {
  const config = info.configSchema || {};
  const q = { label: "Question", ...(info.question || {}), ...(config["x-question"] || {}) };
  const rows = q.rows ?? 3;
  const question = { path: "question", kind: rows > 1 ? "textarea" : "text", label: q.label, required: !!q.required, rows, placeholder: q.placeholder };
  const fields = [];
  const roleLabel = Object.fromEntries((info.roles || []).filter((r) => r.field).map((r) => [r.field, r.label]));
  const atTop = new Set(info.topLevel || []);
  const pathOf = (prefix, key) => (prefix === "modeConfig" && atTop.has(key) ? key : `${prefix}.${key}`);
  const walk = (schema, prefix, group) => {
    const required = new Set(schema.required || []);
    for (const [key, s] of Object.entries(schema.properties || {})) {
      const path = pathOf(prefix, key);
      const from = `${prefix}.${key}`.replace(/^modeConfig\./, "");
      const base = { path, label: s.title || roleLabel[from] || roleLabel[key] || words(key), hint: s.description, from, group, required: required.has(key) };
      // A nested object's fields are shown together under its name (a custom rubric's name,
      // description and criteria).
      if (typesOf(s)[0] === "object" && s.properties) walk(s, path, { path, label: base.label, hint: s.description });
      else {
        const f = fieldOf(key, s, base);
        if (f && f.hint && repeats(f.hint, f.label)) delete f.hint;
        const notIn = s["x-not-in"];
        if (f && notIn) Object.assign(f, { notIn: pathOf(prefix, notIn.field), notInMessage: notIn.message });
        if (f) fields.push(f);
      }
      if (prefix === "modeConfig" && key === q.after) fields.push(question);
    }
  };
  walk(config, "modeConfig");
  if (!fields.includes(question)) fields.unshift(question);
  return fields;
}

function getPath(obj, path) {
  return path.split(".").reduce((o, k) => (o === null || o === undefined ? undefined : o[k]), obj);
}

function setPath(obj, path, value) {
  const keys = path.split(".");
  let o = obj;
  for (const k of keys.slice(0, -1)) o = o[k] || (o[k] = {});
  o[keys[keys.length - 1]] = value;
}

/** Every mode's last field: who may watch the run. */
const VISIBILITY = { path: "visibility", kind: "select", label: "Who can see it",
  options: [["team", "Everyone signed in (team)"], ["private", "Only me and admins (private)"]] };

let listCounter = 0;

/** Chosen models as removable chips plus an input with suggestions; duplicates are allowed. */
function modelPicker(id, suggestions, initial, onChange) {
  const models = [...initial];
  const listId = `models-list-${++listCounter}`;
  const input = el("input", { id, list: listId, autocomplete: "off", placeholder: "add a model id and press Enter" });
  const datalist = el("datalist", { id: listId }, suggestions.map((m) => el("option", { value: m })));
  const box = el("div", { class: "picker" });
  function render() {
    box.replaceChildren(...models.map((m, i) => el("span", { class: "chip" }, m,
      el("button", { type: "button", "aria-label": `Remove ${m}`, onclick: () => { models.splice(i, 1); render(); onChange(); input.focus(); } }, "×"))), input, datalist);
  }
  function add() {
    const v = input.value.trim();
    if (!v) return false;
    for (const part of v.split(",").map((s) => s.trim()).filter(Boolean)) models.push(part);
    input.value = "";
    render();
    onChange();
    input.focus();
    return true;
  }
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === ",") { if (add()) e.preventDefault(); else if (e.key === ",") e.preventDefault(); }
    else if (e.key === "Backspace" && !input.value && models.length) { models.pop(); render(); onChange(); input.focus(); }
  });
  input.addEventListener("change", () => { if (suggestions.includes(input.value.trim())) add(); });
  render();
  return { box, input, get: () => { add(); return [...models]; } };
}

/**
 * Builds the form of a mode (`info`: its entry in `GET /api/modes`) into a `.form-card`.
 * `models` is `GET /api/models`; `submit(request)` starts the run and rejects with an Error
 * carrying `field` when the server refuses it.
 */
export function buildForm(info, models, submit) {
  const mode = info.id;
  const spec = { fields: [...schemaFields(info), VISIBILITY] };
  const defaults = (models.modes && models.modes[mode]) || {};
  // Every model id the defaults name, however deep (Chain's steps are objects with a model).
  const modelIds = (v) => (typeof v === "string" ? (v.includes("/") && !/\s/.test(v) ? [v] : [])
    : Array.isArray(v) ? v.flatMap(modelIds) : v && typeof v === "object" ? Object.values(v).flatMap(modelIds) : []);
  const suggestions = [...new Set([...(models.simModels || []), ...Object.keys(models.simBehaviours || {}).map((k) => k.replace("…", "")),
    ...modelIds(models.modes || {})])].filter((m) => typeof m === "string" && m.includes("/"));
  const form = el("form", { class: "form-card", novalidate: true, "aria-label": `New ${mode} deliberation`, dataset: { mode } });
  const getters = {};
  const fieldEls = {};
  const formError = el("div", { class: "error", role: "alert" });
  const datalistId = `model-suggestions-${mode}`;

  /** The input of one field (`f`, its default `dflt`): `{control, get}`; `get()` is undefined when empty. */
  function makeControl(f, id, describedBy, dflt, onInput) {
    let control, get;
    if (f.kind === "textarea" || f.kind === "lines") {
      control = el("textarea", { id, rows: f.rows || 3, placeholder: f.placeholder, "aria-describedby": describedBy, required: !!f.required });
      if (f.kind === "textarea" && typeof dflt === "string") control.value = dflt;
      get = f.kind === "lines"
        ? () => { const v = control.value.split("\n").map((s) => s.trim()).filter(Boolean); return v.length ? v : undefined; }
        : () => control.value.trim() || undefined;
    } else if (f.kind === "models") {
      const picker = modelPicker(id, suggestions, Array.isArray(dflt) ? dflt : [], onInput);
      picker.input.setAttribute("aria-describedby", describedBy);
      control = picker.box;
      get = () => picker.get();
    } else if (f.kind === "select") {
      control = el("select", { id, "aria-describedby": describedBy }, f.options.map(([v, t]) => el("option", { value: v }, t)));
      if (dflt && f.options.some(([v]) => v === dflt)) control.value = dflt;
      get = () => control.value || undefined;
    } else if (f.kind === "check") {
      control = el("input", { id, type: "checkbox", "aria-describedby": describedBy });
      if (dflt === true) control.checked = true;
      get = () => (control.checked ? true : undefined);
    } else if (f.kind === "list") {
      const list = listEditor(f, id, describedBy, Array.isArray(dflt) ? dflt : [], onInput);
      control = list.box;
      get = list.get;
      return { control, get, list };
    } else {
      const type = f.kind === "number" || f.kind === "seconds" ? "number" : "text";
      control = el("input", { id, type, list: f.kind === "model" ? datalistId : null, placeholder: f.placeholder, "aria-describedby": describedBy,
        min: f.min, max: f.max, step: f.step || (f.kind === "seconds" ? 1 : null), autocomplete: "off", required: !!f.required,
        inputmode: type === "number" ? (f.step === 1 || f.kind === "seconds" ? "numeric" : "decimal") : null });
      if (f.kind === "model") {
        control.value = typeof dflt === "string" ? dflt : "";
        if (!form.querySelector(`#${datalistId}`)) form.append(el("datalist", { id: datalistId }, suggestions.map((m) => el("option", { value: m }))));
      } else if (f.kind === "seconds") {
        control.placeholder = dflt ? String(Math.round(dflt / SEC)) : "";
      } else if (f.kind === "number" && dflt !== undefined && dflt !== null) {
        control.placeholder = String(dflt);
      } else if (f.kind === "text" && typeof dflt === "string") {
        control.value = dflt;
      }
      get = () => {
        const v = control.value.trim();
        if (!v) return undefined;
        if (f.kind === "seconds") return Math.round(Number(v) * SEC);
        if (f.kind === "number") return Number(v);
        return v;
      };
    }
    control.addEventListener?.("input", onInput);
    control.addEventListener?.("change", onInput);
    return { control, get };
  }

  /** One field: its wrapper with label, control, hint and error line. */
  function makeField(f, id, dflt, onInput, sharedHintId = null) {
    const inRow = !!sharedHintId || sharedHintId === "";
    const errId = `${id}-error`;
    const errEl = el("div", { class: "field-error", id: errId });
    // A row's field is described by its list's help for that property, said once above the rows.
    const hintId = inRow ? null : f.hint ? `${id}-hint` : null;
    const describedBy = [hintId, sharedHintId, errId].filter(Boolean).join(" ");
    const isList = f.kind === "list";
    const wrap = el(isList ? "fieldset" : "div", { class: isList ? "field list-field" : "field", dataset: inRow ? { itemField: f.path } : { field: f.path } });
    wrap.append(isList ? el("legend", { id: `${id}-legend` }, f.label) : el("label", { for: id }, f.label + (f.required ? " *" : "")));
    const made = makeControl(f, id, describedBy, dflt, onInput);
    if (isList && hintId) wrap.append(el("div", { class: "hint", id: hintId }, f.hint));
    wrap.append(made.control);
    if (!isList && hintId) wrap.append(el("div", { class: "hint", id: hintId }, f.hint));
    wrap.append(errEl);
    return { wrap, errEl, control: made.control, get: made.get, list: made.list, spec: f };
  }

  function markInvalid(f, message) {
    f.wrap.classList.add("invalid");
    f.errEl.textContent = message;
    const input = f.wrap.querySelector("input, textarea, select");
    if (input && !f.list) input.setAttribute("aria-invalid", "true");
  }

  function unmark(f) {
    f.wrap.classList.remove("invalid");
    f.errEl.textContent = "";
    if (!f.list) f.wrap.querySelector("[aria-invalid]")?.removeAttribute("aria-invalid");
  }

  /**
   * A list of objects (`f.itemFields` per row) with add, remove and move buttons, kept within
   * `f.minItems`..`f.maxItems` (or empty when the list may be left out). A new row starts as
   * the server's suggestion for its place (`GET /api/models`), when it has one.
   */
  function listEditor(f, id, describedBy, dflt, onChange) {
    const rows = []; // {li, title, up, down, remove, fields: {key: field}, get()}
    const item = f.itemLabel;
    const Item = item.charAt(0).toUpperCase() + item.slice(1);
    const plural = f.label.toLowerCase();
    const ol = el("ol", { class: "list-items", "aria-describedby": describedBy });
    const status = el("div", { class: "list-status", id: `${id}-status`, "aria-live": "polite" });
    const addBtn = el("button", { type: "button", class: "secondary list-add", onclick: () => addRow() }, `+ Add ${item}`);
    // What each property means, once for every row (each row's field points at its line).
    const helpIds = {};
    const help = el("dl", { class: "list-help" }, f.itemFields.filter((x) => x.hint).flatMap((x) => {
      helpIds[x.path] = `${id}-help-${x.path}`;
      return [el("dt", {}, x.label), el("dd", { id: helpIds[x.path] }, x.hint)];
    }));
    const box = el("div", { class: "list-editor", id }, help.childElementCount ? help : null, ol, el("div", { class: "list-foot" }, addBtn, status));
    let rowCounter = 0;
    const limits = Number.isFinite(f.maxItems) ? `${f.minItems} to ${f.maxItems}` : `at least ${f.minItems}`;

    /** Renumbers the rows, sets what each button may do and says where the list stands
     *  (after `said`: what just happened, for screen readers). */
    function refresh(said = "") {
      const n = rows.length;
      rows.forEach((r, i) => {
        r.title.textContent = `${Item} ${i + 1}`;
        r.li.dataset.index = String(i);
        r.up.disabled = i === 0;
        r.down.disabled = i === n - 1;
        r.remove.disabled = !f.mayBeEmpty && n <= f.minItems;
        r.up.setAttribute("aria-label", `Move ${item} ${i + 1} up`);
        r.down.setAttribute("aria-label", `Move ${item} ${i + 1} down`);
        r.remove.setAttribute("aria-label", `Remove ${item} ${i + 1}`);
      });
      addBtn.disabled = n >= f.maxItems;
      let msg;
      if (n === 0) msg = f.emptyIsDefault ? `No ${plural}: the default is used. Add ${limits} to give your own.` : `No ${plural}. Give ${limits}${f.mayBeEmpty ? ", or none" : ""}.`;
      else if (n < f.minItems) msg = `${n} of ${limits} ${plural}: add ${f.minItems - n} more${f.mayBeEmpty ? ", or remove all to leave it out" : ""}.`;
      else if (n >= f.maxItems) msg = `${n} ${plural}: that is the most there can be.`;
      else msg = `${n} ${plural} (${limits}).`;
      status.textContent = said ? `${said} ${msg}` : msg;
    }

    function addRow(values) {
      if (rows.length >= f.maxItems) return;
      const at = rows.length;
      const rid = `${id}-${++rowCounter}`;
      const init = values || (dflt[at] && typeof dflt[at] === "object" ? dflt[at] : {});
      const r = { fields: {} };
      r.title = el("span", { class: "list-item-title" });
      const iconBtn = (cls, text, onclick) => el("button", { type: "button", class: `secondary list-btn ${cls}`, onclick }, text);
      r.up = iconBtn("list-up", "↑", () => move(r, -1));
      r.down = iconBtn("list-down", "↓", () => move(r, 1));
      r.remove = iconBtn("list-remove", "Remove", () => removeRow(r));
      const fieldsBox = el("div", { class: "list-item-fields" });
      // The short fields side by side first, then the long ones (a text box, a panel) full width.
      const wide = (x) => x.kind === "textarea" || x.kind === "lines" || x.kind === "models";
      for (const x of [...f.itemFields.filter((x) => !wide(x)), ...f.itemFields.filter(wide)]) {
        const fx = makeField(x, `${rid}-${x.path}`, init[x.path], () => { unmark(fx); onChange(); }, helpIds[x.path] || "");
        if (wide(x)) fx.wrap.classList.add("wide");
        if (x.kind === "textarea") fx.control.rows = 3;
        r.fields[x.path] = fx;
        fieldsBox.append(fx.wrap);
      }
      r.rowError = el("div", { class: "field-error" });
      r.li = el("li", { class: "list-item", "aria-labelledby": `${rid}-title` },
        el("div", { class: "list-item-head" }, Object.assign(r.title, { id: `${rid}-title` }), el("span", { class: "list-item-actions" }, r.up, r.down, r.remove)),
        fieldsBox, r.rowError);
      r.get = () => {
        const o = {};
        for (const [k, fx] of Object.entries(r.fields)) { const v = fx.get(); if (v !== undefined) o[k] = v; }
        return o;
      };
      rows.push(r);
      ol.append(r.li);
      refresh();
      onChange();
      if (!values) r.li.querySelector("input, select, textarea")?.focus();
    }

    function removeRow(r) {
      const i = rows.indexOf(r);
      rows.splice(i, 1);
      r.li.remove();
      refresh(`${Item} ${i + 1} removed.`);
      onChange();
      const next = rows[i] || rows[i - 1];
      (next && !next.remove.disabled ? next.remove : addBtn).focus();
    }

    function move(r, by) {
      const i = rows.indexOf(r);
      const j = i + by;
      if (j < 0 || j >= rows.length) return;
      rows.splice(i, 1);
      rows.splice(j, 0, r);
      if (by < 0) ol.insertBefore(r.li, rows[j + 1].li);
      else ol.insertBefore(r.li, rows[j - 1].li.nextSibling);
      refresh(`${Item} ${i + 1} is now ${item} ${j + 1}.`);
      onChange();
      const btn = by < 0 ? r.up : r.down;
      (btn.disabled ? (by < 0 ? r.down : r.up) : btn).focus();
    }

    refresh();
    return {
      box,
      get: () => (rows.length ? rows.map((r) => r.get()) : undefined),
      rows,
      /** Shows a message on row `i` (on its field `key` when given); returns what to focus. */
      showError(i, key, message) {
        const r = rows[i];
        if (!r) return null;
        const fx = key && r.fields[key.split(".")[0]];
        // "is required with the custom mandate" reads as "Custom mandate is required with…".
        if (fx) { markInvalid(fx, /^[a-z]/.test(message) ? `${fx.spec.label} ${message}` : message); return fx.wrap.querySelector("input, textarea, select") || fx.wrap; }
        r.rowError.textContent = `${key ? `${words(key)}: ` : ""}${message}`;
        r.li.classList.add("invalid");
        return r.li.querySelector("input, textarea, select");
      },
      clearErrors() {
        for (const r of rows) {
          r.rowError.textContent = "";
          r.li.classList.remove("invalid");
          Object.values(r.fields).forEach(unmark);
        }
      },
      /** Client-side checks of each row: `[[path, message]]`. */
      validate(path) {
        const errors = [];
        rows.forEach((r, i) => {
          for (const [k, fx] of Object.entries(r.fields)) errors.push(...checkField(fx.spec, fx.get(), `${path}[${i}].${k}`));
        });
        return errors;
      },
    };
  }

  /** The client-side checks of one value: `[[path, message]]`. */
  function checkField(f, v, path, values = {}) {
    const errors = [];
    if (f.required && (v === undefined || v === "")) errors.push([path, `${f.label.replace(/ \(.*\)$/, "")} is required`]);
    if (f.kind === "models" && v) {
      if (v.length < f.min || v.length > f.max) errors.push([path, `Choose ${f.min} to ${f.max} models (${v.length} chosen)`]);
    }
    if ((f.kind === "number" || f.kind === "seconds") && v !== undefined) {
      const shown = f.kind === "seconds" ? v / SEC : v;
      const lo = f.min ?? -Infinity, hi = f.max ?? Infinity;
      if (Number.isNaN(shown) || shown < lo || shown > hi) errors.push([path, Number.isFinite(hi) ? `Must be between ${lo} and ${hi}` : `Must be at least ${lo}`]);
    }
    if (f.kind === "lines" && v && (v.length < f.minItems || v.length > f.maxItems)) errors.push([path, `Give ${f.minItems} to ${f.maxItems} options, or none`]);
    if (f.kind === "list") {
      const n = v ? v.length : 0;
      const limits = Number.isFinite(f.maxItems) ? `${f.minItems} to ${f.maxItems}` : `at least ${f.minItems}`;
      if ((n > 0 || !f.mayBeEmpty) && (n < f.minItems || n > f.maxItems)) {
        errors.push([path, `Give ${limits} ${f.label.toLowerCase()}${f.mayBeEmpty ? (f.emptyIsDefault ? ", or none for the default" : ", or none") : ""} (${n} given)`]);
      }
    }
    if (f.notIn && v && (values[f.notIn] || []).includes(v)) errors.push([path, f.notInMessage]);
    return errors;
  }

  let group = null; // {path, box}: the fieldset of the nested object being filled
  for (const f of spec.fields) {
    const id = `f-${mode}-${f.path.replace(/\./g, "-")}`;
    // What the server would use: shown in model pickers, selects, lists and as placeholders
    // (a text is left empty, so that leaving it sends nothing).
    const own = getPath(defaults, f.path.replace(/^modeConfig\./, ""));
    const dflt = ["text", "textarea", "lines", "check"].includes(f.kind) ? undefined
      : f.kind === "select" ? own ?? f.preset : (f.from ? getPath(defaults, f.from) : undefined) ?? (f.kind === "seconds" || f.kind === "number" ? own : undefined);
    const field = makeField(f, id, dflt, () => clearError(f.path));
    getters[f.path] = field.get;
    fieldEls[f.path] = field;
    if (f.group && (!group || group.path !== f.group.path)) {
      const gid = `f-${mode}-${f.group.path.replace(/\./g, "-")}`;
      group = { path: f.group.path, box: el("fieldset", { class: "field-group", dataset: { group: f.group.path }, "aria-describedby": f.group.hint ? `${gid}-hint` : null },
        el("legend", {}, f.group.label), f.group.hint ? el("div", { class: "hint", id: `${gid}-hint` }, f.group.hint) : null) };
      form.append(group.box);
    } else if (!f.group) group = null;
    (group ? group.box : form).append(field.wrap);
  }

  // Files for the run: uploaded as they are added; Start waits for them. A mode that reads
  // material (`content`: Jury's answer, Red Team's plan…) may leave it empty when a file is
  // attached, as the server then gives it the files.
  const material = Object.values(fieldEls).find((f) => f.spec.from === "content" && f.spec.kind !== "list");
  const sendNote = el("span", { class: "muted start-note", id: `f-${mode}-start-note`, "aria-live": "polite" });
  const files = attachArea({
    dropTarget: form,
    note: material ? `With a file attached, ${material.spec.label.replace(/ \(.*\)$/, "").toLowerCase()} may be left empty: the file is read instead.` : "",
    onChange: () => refreshStart(),
  });
  // Beside what the person writes about: after the question (or the material, if it follows).
  const near = [fieldEls.question, material].filter(Boolean)
    .sort((a, b) => (a.wrap.compareDocumentPosition(b.wrap) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1)).pop();
  const anchor = near ? near.wrap.closest(".field-group") || near.wrap : null;
  if (anchor) anchor.after(files.el); else form.append(files.el);

  const sendBtn = el("button", { type: "submit", class: "start", "aria-describedby": sendNote.id }, "Start deliberation");
  form.append(el("div", { class: "toolbar" }, sendBtn, sendNote, formError));
  let sending = false;

  /** Start waits while files upload (disabled, saying why). */
  function refreshStart() {
    const n = files.pending();
    sendBtn.disabled = sending || n > 0;
    sendNote.textContent = n ? `Waiting for ${n === 1 ? "a file" : `${n} files`} to upload…` : "";
    if (!files.refused().length && formError.dataset.files) { formError.textContent = ""; delete formError.dataset.files; }
    // A file now stands for the material: its "is required" no longer holds, nor its mark.
    if (material && files.ids().length && / is required$/.test(material.errEl.textContent)) unmark(material);
    if (material && material.spec.required) {
      const needed = files.ids().length === 0;
      const label = material.wrap.querySelector(":scope > label");
      if (label) label.textContent = material.spec.label + (needed ? " *" : "");
      material.control.required = needed;
    }
  }

  function clearError(path) {
    const f = fieldEls[path];
    if (!f) return;
    unmark(f);
  }

  /**
   * The server's message for `path` in a person's words: without the field path it starts with
   * (the message is shown at that field), and with the member's number for one model of a list
   * ("councilModels[3]: unknown model 'x'" -> "Member 4: unknown model 'x'").
   */
  function plainMessage(path, message) {
    const own = message.startsWith(`${path}: `) ? message.slice(path.length + 2) : message;
    const item = path.match(/^(.*?)\[(\d+)\]$/);
    if (item && fieldEls[item[1]] && fieldEls[item[1]].spec.kind === "models") return `Member ${Number(item[2]) + 1}: ${own}`;
    return own;
  }

  /** Shows a message at the field it names (or the nearest one); returns what to focus, or null. */
  function showError(path, rawMessage) {
    const message = plainMessage(path, rawMessage);
    // A list's item (modeConfig.steps[2].customMandate): on that row's field.
    const item = path.match(/^(.*?)\[(\d+)\](?:\.(.+))?$/);
    if (item && fieldEls[item[1]] && fieldEls[item[1]].list) {
      const at = fieldEls[item[1]].list.showError(Number(item[2]), item[3], message);
      if (at) return at;
    }
    // The server may name a nested field (modeConfig.models.judge): show it at the nearest one.
    let p = path.replace(/\[\d+\].*$/, "");
    while (p && !fieldEls[p]) p = p.includes(".") ? p.slice(0, p.lastIndexOf(".")) : "";
    const f = fieldEls[p];
    // No field of the form holds it: the message says which setting, in words.
    if (!f) { formError.textContent = message === rawMessage ? message : `${words(path.split(".").pop().replace(/\[\d+\]/g, ""))}: ${message}`; return null; }
    markInvalid(f, message);
    return f.list ? f.wrap.querySelector("button, input, textarea, select") : (f.wrap.querySelector("input, textarea, select") || f.wrap);
  }

  function validate(values) {
    const errors = [];
    const attached = files.ids().length > 0;
    for (const f of spec.fields) {
      // The material may be left empty when a file is attached (the server fills it).
      const checked = attached && f === material?.spec ? { ...f, required: false } : f;
      errors.push(...checkField(checked, values[f.path], f.path, values));
      if (f.kind === "list") errors.push(...fieldEls[f.path].list.validate(f.path));
    }
    return errors;
  }

  function clearAll() {
    formError.textContent = "";
    for (const f of Object.values(fieldEls)) { unmark(f); f.list?.clearErrors(); }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearAll();
    const values = {};
    for (const [path, get] of Object.entries(getters)) values[path] = get();
    if (files.pending()) return;
    // A file that could not be attached is removed first: the run would not read it.
    const refused = files.refused();
    if (refused.length) {
      formError.textContent = refused.length === 1
        ? `${refused[0].name} could not be attached: remove it to start without it.`
        : `${refused.length} files could not be attached: remove them to start without them.`;
      formError.dataset.files = "refused";
      refused[0].focus();
      return;
    }
    const errors = validate(values);
    if (errors.length) {
      const targets = errors.map(([p, m]) => showError(p, m));
      targets.find(Boolean)?.focus();
      return;
    }
    const request = { mode };
    for (const [path, v] of Object.entries(values)) if (v !== undefined) setPath(request, path, v);
    const ids = files.ids();
    if (ids.length) request.attachments = ids;
    sending = true;
    refreshStart();
    try {
      await submit(request);
    } catch (err) {
      // The server's word on a file (`attachments[2]: …`) shows on that file's chip.
      const fileErr = err.field && err.field.match(/^attachments(?:\[(\d+)\])?/);
      if (fileErr) {
        const said = plainMessage(fileErr[0], err.message);
        if (!files.showError(fileErr[1] === undefined ? null : Number(fileErr[1]), said)) formError.textContent = `Attached files: ${said}`;
      } else {
        const at = err.field ? showError(err.field, err.message) : null;
        if (at) at.focus();
        else if (!err.field) formError.textContent = err.message;
      }
    } finally {
      sending = false;
      refreshStart();
    }
  });

  return form;
}
