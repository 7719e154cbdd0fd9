// The "new deliberation" forms, with model pickers fed by `GET /api/models`. A mode with a
// hand-written field list below gets it (labels and checks chosen for people); any other mode
// gets a form made from its settings' JSON Schema (`GET /api/modes`), so a new mode has a form
// the day it lands. Counts and roles (the foreman is not a juror, the facilitator is not a
// panelist) are checked before sending; the server's own validation errors come back with the
// field they name and are shown next to that field.
import { el } from "./ui.js";

const SEC = 1000;

/** Hand-written forms, by mode id (optional: see `schemaFields`). */
export const FORMS = {
  council: {
    fields: [
      { path: "question", kind: "textarea", label: "Question", required: true, rows: 3, placeholder: "Ask the council a question…" },
      { path: "councilModels", kind: "models", label: "Council models", min: 2, max: 6, from: "councilModels" },
      { path: "chairmanModel", kind: "model", label: "Chairman", from: "chairmanModel", hint: "May also sit on the council." },
      { path: "timeoutMs", kind: "seconds", label: "Per-stage timeout (seconds)", min: 10, max: 600 },
    ],
  },
  vote: {
    fields: [
      { path: "question", kind: "textarea", label: "Question", required: true, rows: 3 },
      { path: "modeConfig.models", kind: "models", label: "Voting models", min: 3, max: 7, from: "models" },
      { path: "modeConfig.chairmanModel", kind: "model", label: "Tie-breaking chairman", from: "chairmanModel", hint: "May also vote." },
      { path: "modeConfig.timeoutMs", kind: "seconds", label: "Per-stage timeout (seconds)", min: 10, max: 600 },
    ],
  },
  jury: {
    fields: [
      { path: "question", kind: "text", label: "What the jury should do", required: true, placeholder: "Evaluate this API documentation" },
      { path: "modeConfig.originalQuestion", kind: "text", label: "Original question (optional)", hint: "The request the content answers, shown to the jurors." },
      { path: "modeConfig.content", kind: "textarea", label: "Content to evaluate", required: true, rows: 8 },
      { path: "modeConfig.jurorModels", kind: "models", label: "Jurors", min: 3, max: 6, from: "jurorModels" },
      { path: "modeConfig.foremanModel", kind: "model", label: "Foreman", from: "foremanModel", notIn: "modeConfig.jurorModels", notInMessage: "The foreman cannot also be a juror" },
      { path: "modeConfig.timeoutMs", kind: "seconds", label: "Per-stage timeout (seconds)", min: 10, max: 300 },
    ],
  },
  debate: {
    fields: [
      { path: "question", kind: "textarea", label: "Question", required: true, rows: 3 },
      { path: "modeConfig.models", kind: "models", label: "Debaters", min: 3, max: 6, from: "models" },
      { path: "modeConfig.timeoutMs", kind: "seconds", label: "Per-stage timeout (seconds)", min: 10, max: 600 },
    ],
  },
  delphi: {
    fields: [
      { path: "question", kind: "textarea", label: "Question", required: true, rows: 3, placeholder: "How many software engineers will be employed globally by 2030?" },
      { path: "modeConfig.panelistModels", kind: "models", label: "Panelists", min: 3, max: 7, from: "panelistModels" },
      { path: "modeConfig.facilitatorModel", kind: "model", label: "Facilitator", from: "facilitatorModel", notIn: "modeConfig.panelistModels", notInMessage: "The facilitator cannot also be a panelist" },
      { path: "modeConfig.questionType", kind: "select", label: "Question type", options: [["", "Let the facilitator classify it"], ["numeric", "Numeric"], ["qualitative", "Qualitative"]] },
      { path: "modeConfig.options", kind: "lines", label: "Answer options (qualitative, one per line, optional)", minItems: 2, maxItems: 10 },
      { path: "modeConfig.maxRounds", kind: "number", label: "Maximum rounds", min: 2, max: 5, step: 1, from: "maxRounds" },
      { path: "modeConfig.numericConvergenceThreshold", kind: "number", label: "Numeric convergence: CV below", min: 0.01, max: 1, step: 0.01, from: "numericConvergenceThreshold" },
      { path: "modeConfig.qualitativeConvergenceThreshold", kind: "number", label: "Qualitative convergence: agreement % at least", min: 50, max: 100, step: 1, from: "qualitativeConvergenceThreshold" },
      { path: "modeConfig.timeoutMs", kind: "seconds", label: "Per-round timeout (seconds)", min: 30, max: 180 },
      { path: "modeConfig.globalTimeoutMs", kind: "seconds", label: "Whole-run time cap (seconds)", min: 10, max: 3600, from: "globalTimeoutMs" },
    ],
  },
  clarity: {
    fields: [
      { path: "modeConfig.content", kind: "textarea", label: "Brief to score", required: true, rows: 8 },
      { path: "modeConfig.title", kind: "text", label: "Title (optional)" },
      { path: "modeConfig.context", kind: "text", label: "Context (optional)" },
      { path: "question", kind: "text", label: "Instruction (optional)", placeholder: "Score this brief" },
      { path: "modeConfig.models.skeptic", kind: "model", label: "Skeptic", from: "models.skeptic" },
      { path: "modeConfig.models.advocate", kind: "model", label: "Advocate", from: "models.advocate" },
      { path: "modeConfig.models.generalist", kind: "model", label: "Generalist", from: "models.generalist" },
      { path: "modeConfig.models.arbiter", kind: "model", label: "Arbiter", from: "models.arbiter" },
      { path: "modeConfig.discussion", kind: "select", label: "Discussion round", options: [["auto", "Auto: skip when everyone is within a point"], ["always", "Always"], ["never", "Never"]] },
      { path: "modeConfig.timeoutMs", kind: "seconds", label: "Per-stage timeout (seconds)", min: 10, max: 300 },
    ],
  },
};

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

/**
 * A form's fields made from a mode's description (`GET /api/modes`): its question, then each
 * setting of its `modeConfig` schema in order, with the roles' labels for model fields.
 */
export function schemaFields(info) {
  const q = info.question || { label: "Question" };
  const fields = [{ path: "question", kind: "textarea", label: q.label, required: !!q.required, rows: 3 }];
  const roleLabel = Object.fromEntries((info.roles || []).filter((r) => r.field).map((r) => [r.field, r.label]));
  const walk = (schema, prefix) => {
    for (const [key, s] of Object.entries(schema.properties || {})) {
      const path = `${prefix}.${key}`;
      const from = path.replace(/^modeConfig\./, "");
      const type = typesOf(s)[0];
      const base = { path, label: roleLabel[key] || words(key), hint: s.description, from };
      if (type === "object" && s.properties) walk(s, path);
      else if (type === "array" && s.items && s.items.format === "model-id") fields.push({ ...base, kind: "models", min: s.minItems || 1, max: s.maxItems || 100 });
      else if (type === "array") fields.push({ ...base, kind: "lines", minItems: s.minItems || 0, maxItems: s.maxItems || 100 });
      else if (type === "string" && s.format === "model-id") fields.push({ ...base, kind: "model" });
      else if (type === "string" && Array.isArray(s.enum)) fields.push({ ...base, kind: "select", options: [["", "Default"], ...s.enum.filter((v) => v !== null).map((v) => [v, words(String(v))])] });
      else if (type === "string") fields.push({ ...base, kind: (s.maxLength || 0) > 1000 ? "textarea" : "text", rows: 6 });
      else if ((type === "integer" || type === "number") && /Ms$/.test(key)) {
        // Shown in seconds: so is what its description says (unless it quotes figures in ms).
        const hint = base.hint && !/\d/.test(base.hint) ? base.hint.replace(/\bmilliseconds\b/g, "seconds") : base.hint;
        fields.push({ ...base, hint, kind: "seconds", label: `${words(key.replace(/Ms$/, ""))} (seconds)`, min: (s.minimum ?? 0) / SEC, max: (s.maximum ?? Infinity) / SEC });
      } else if (type === "integer" || type === "number") {
        fields.push({ ...base, kind: "number", min: s.minimum, max: s.maximum, step: type === "integer" ? 1 : "any" });
      } else if (type === "boolean") fields.push({ ...base, kind: "check" });
    }
  };
  walk(info.configSchema || {}, "modeConfig");
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
  const own = FORMS[mode] ? FORMS[mode].fields : schemaFields(info);
  const spec = { fields: [...own, VISIBILITY] };
  const defaults = (models.modes && models.modes[mode]) || {};
  const suggestions = [...new Set([...(models.simModels || []), ...Object.keys(models.simBehaviours || {}).map((k) => k.replace("…", "")),
    ...Object.values(models.modes || {}).flatMap((m) => Object.values(m).flatMap((v) => (Array.isArray(v) ? v : typeof v === "string" && v.includes("/") ? [v] : [])))])]
    .filter((m) => typeof m === "string" && m.includes("/"));
  const form = el("form", { class: "form-card", novalidate: true, "aria-label": `New ${mode} deliberation`, dataset: { mode } });
  const getters = {};
  const fieldEls = {};
  const formError = el("div", { class: "error", role: "alert" });

  for (const f of spec.fields) {
    const id = `f-${mode}-${f.path.replace(/\./g, "-")}`;
    const errId = `${id}-error`;
    const errEl = el("div", { class: "field-error", id: errId });
    const hintId = f.hint ? `${id}-hint` : null;
    const describedBy = [hintId, errId].filter(Boolean).join(" ");
    const dflt = f.from ? getPath(defaults, f.from) : undefined;
    let control;
    const wrap = el("div", { class: "field", dataset: { field: f.path } });
    wrap.append(el("label", { for: id }, f.label + (f.required ? " *" : "")));
    if (f.kind === "textarea" || f.kind === "lines") {
      control = el("textarea", { id, rows: f.rows || 3, placeholder: f.placeholder, "aria-describedby": describedBy, required: !!f.required });
      getters[f.path] = f.kind === "lines"
        ? () => { const v = control.value.split("\n").map((s) => s.trim()).filter(Boolean); return v.length ? v : undefined; }
        : () => control.value.trim() || undefined;
    } else if (f.kind === "models") {
      const picker = modelPicker(id, suggestions, Array.isArray(dflt) ? dflt : [], () => clearError(f.path));
      picker.input.setAttribute("aria-describedby", describedBy);
      control = picker.box;
      getters[f.path] = () => picker.get();
    } else if (f.kind === "select") {
      control = el("select", { id, "aria-describedby": describedBy }, f.options.map(([v, t]) => el("option", { value: v }, t)));
      const d = getPath(defaults, f.path.replace(/^modeConfig\./, ""));
      if (d) control.value = d;
      getters[f.path] = () => control.value || undefined;
    } else if (f.kind === "check") {
      control = el("input", { id, type: "checkbox", "aria-describedby": describedBy });
      getters[f.path] = () => (control.checked ? true : undefined);
    } else {
      const type = f.kind === "number" || f.kind === "seconds" ? "number" : "text";
      control = el("input", { id, type, list: f.kind === "model" ? `model-suggestions-${mode}` : null, placeholder: f.placeholder, "aria-describedby": describedBy,
        min: f.min, max: f.max, step: f.step || (f.kind === "seconds" ? 1 : null), autocomplete: "off", required: !!f.required });
      if (f.kind === "model") {
        control.value = typeof dflt === "string" ? dflt : "";
        if (!form.querySelector(`#model-suggestions-${mode}`)) form.append(el("datalist", { id: `model-suggestions-${mode}` }, suggestions.map((m) => el("option", { value: m }))));
      } else if (f.kind === "seconds") {
        const d = dflt ?? getPath(defaults, f.path.replace(/^modeConfig\./, ""));
        control.placeholder = d ? String(Math.round(d / SEC)) : "";
      } else if (f.kind === "number" && dflt !== undefined && dflt !== null) {
        control.placeholder = String(dflt);
      }
      getters[f.path] = () => {
        const v = control.value.trim();
        if (!v) return undefined;
        if (f.kind === "seconds") return Math.round(Number(v) * SEC);
        if (f.kind === "number") return Number(v);
        return v;
      };
    }
    control.addEventListener?.("input", () => clearError(f.path));
    wrap.append(control);
    if (f.hint) wrap.append(el("div", { class: "hint", id: hintId }, f.hint));
    wrap.append(errEl);
    fieldEls[f.path] = { wrap, errEl, control, spec: f };
    form.append(wrap);
  }

  const sendBtn = el("button", { type: "submit", class: "start" }, "Start deliberation");
  form.append(el("div", { class: "toolbar" }, sendBtn, formError));

  function clearError(path) {
    const f = fieldEls[path];
    if (!f) return;
    f.wrap.classList.remove("invalid");
    f.errEl.textContent = "";
    const input = f.wrap.querySelector("input, textarea, select");
    if (input) input.removeAttribute("aria-invalid");
  }

  function showError(path, message) {
    // The server may name a nested field (modeConfig.models.judge): show it at the nearest one.
    let p = path.replace(/\[\d+\]$/, "");
    while (p && !fieldEls[p]) p = p.includes(".") ? p.slice(0, p.lastIndexOf(".")) : "";
    const f = fieldEls[p];
    if (!f) { formError.textContent = message; return; }
    f.wrap.classList.add("invalid");
    f.errEl.textContent = message;
    const input = f.wrap.querySelector("input, textarea, select");
    if (input) input.setAttribute("aria-invalid", "true");
    return f;
  }

  function validate(values) {
    const errors = [];
    for (const f of spec.fields) {
      const v = values[f.path];
      if (f.required && (v === undefined || v === "")) errors.push([f.path, `${f.label.replace(/ \(.*\)$/, "")} is required`]);
      if (f.kind === "models" && v) {
        if (v.length < f.min || v.length > f.max) errors.push([f.path, `Choose ${f.min} to ${f.max} models (${v.length} chosen)`]);
      }
      if ((f.kind === "number" || f.kind === "seconds") && v !== undefined) {
        const shown = f.kind === "seconds" ? v / SEC : v;
        if (Number.isNaN(shown) || shown < f.min || shown > f.max) errors.push([f.path, `Must be between ${f.min} and ${f.max}`]);
      }
      if (f.kind === "lines" && v && (v.length < f.minItems || v.length > f.maxItems)) errors.push([f.path, `Give ${f.minItems} to ${f.maxItems} options, or none`]);
      if (f.notIn && v && (values[f.notIn] || []).includes(v)) errors.push([f.path, f.notInMessage]);
    }
    return errors;
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    formError.textContent = "";
    Object.keys(fieldEls).forEach(clearError);
    const values = {};
    for (const [path, get] of Object.entries(getters)) values[path] = get();
    const errors = validate(values);
    if (errors.length) {
      errors.forEach(([p, m]) => showError(p, m));
      const first = fieldEls[errors[0][0]];
      (first.wrap.querySelector("input, textarea, select") || first.wrap).focus();
      return;
    }
    const request = { mode };
    for (const [path, v] of Object.entries(values)) if (v !== undefined) setPath(request, path, v);
    sendBtn.disabled = true;
    try {
      await submit(request);
    } catch (err) {
      const f = err.field ? showError(err.field, err.message) : null;
      if (!f) formError.textContent = err.message;
      else (f.wrap.querySelector("input, textarea, select") || f.wrap).focus();
    } finally {
      sendBtn.disabled = false;
    }
  });

  return form;
}
