// Every field of every mode's form says what the server does: a time is asked in seconds and its
// help speaks of seconds, and a number's placeholder is the default the server fills in when the
// field is left empty (`GET /api/models`), in the field's unit, agreeing with any default its
// help names. Every form is made from its mode's schema (`GET /api/modes`): its labels, help,
// menus' words, text boxes' heights and order are the schema's. Read in headless Chromium at a
// desktop's width.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, skip, useServer, api } from "./harness.mjs";

let base, browser;
useServer({ latencyMs: 0 }, (env) => ({ base, browser } = env));

/** `(default 600)`, `(default: 2)`, `default 25 000`: the figure a help text names, or null. */
function namedDefault(hint) {
  const m = /\bdefault:?\s+(\d{1,3}(?:[ \u00a0\u202f,]\d{3})+|\d+(?:\.\d+)?)(?!\s*[a-z/-])/i.exec(hint || "");
  return m ? Number(m[1].replace(/[^\d.]/g, "")) : null;
}

/** The fields of a mode's form as a person sees them: label, control, help. */
async function formFields(page, mode) {
  await page.goto(`${base}/#/new/${mode}`);
  await page.waitForSelector(`form[data-mode="${mode}"]`);
  return page.$$eval(`form[data-mode="${mode}"] .field[data-field]`, (ws) => ws.map((w) => {
    const c = w.querySelector("input, textarea, select");
    return {
      path: w.dataset.field, label: (w.querySelector("label") || {}).textContent || "", hint: (w.querySelector(".hint") || {}).textContent || "",
      tag: c ? c.tagName.toLowerCase() : null, type: c ? c.type : null, placeholder: c ? c.placeholder : "",
      rows: c && c.tagName === "TEXTAREA" ? c.rows : null, step: c ? c.getAttribute("step") : null,
      options: c && c.tagName === "SELECT" ? [...c.options].map((o) => [o.value, o.textContent]) : null,
    };
  }));
}

test("every form field's unit, placeholder and help agree with the server's defaults", { skip }, async () => {
  const modes = (await (await api(`${base}/api/modes`)).json()).modes;
  const defaults = (await (await api(`${base}/api/models`)).json()).modes;
  assert.ok(modes.length >= 16, `${modes.length} modes`);
  const { page, errors } = await openPage(browser, base, "/#/", { viewport: { width: 1400, height: 900 } });
  let checked = 0;
  for (const mode of modes) {
    const fields = await formFields(page, mode.id);
    for (const f of fields.filter((x) => x.type === "number")) {
      const key = f.path.replace(/^modeConfig\./, "");
      const where = `${mode.id} ${f.path} (“${f.label}”)`;
      const seconds = /Ms$/.test(key);
      assert.equal(/\(seconds\)/.test(f.label), seconds, `${where}: a time is asked in seconds, and only a time`);
      if (seconds) assert.ok(!/milli/i.test(f.hint), `${where}: its help speaks of seconds: ${f.hint}`);
      const d = (defaults[mode.id] || {})[key];
      if (typeof d === "number") {
        const shown = seconds ? d / 1000 : d;
        assert.equal(f.placeholder, String(shown), `${where}: the placeholder is the server's default`);
      }
      const named = namedDefault(f.hint);
      if (named !== null && f.placeholder) assert.equal(String(named), f.placeholder, `${where}: its help's default is its placeholder: ${f.hint}`);
      checked += 1;
    }
  }
  assert.ok(checked >= 30, `only ${checked} number fields checked`);
  assert.deepEqual(errors, []);
});

test("every form says what its mode's schema says, in the schema's order", { skip }, async () => {
  const modes = (await (await api(`${base}/api/modes`)).json()).modes;
  const { page, errors } = await openPage(browser, base, "/#/", { viewport: { width: 1400, height: 900 } });
  const types = (s) => [].concat(s.type || []).filter((t) => t !== "null");
  let checked = 0;
  for (const mode of modes) {
    const fields = await formFields(page, mode.id);
    const at = Object.fromEntries(fields.map((f) => [f.path, f]));
    // The settings in the schema's order (a nested object's inside it), the question where the
    // schema puts it, the visibility last.
    const schema = mode.configSchema;
    const q = schema["x-question"] || {};
    const settings = [];
    const walk = (s, prefix) => {
      for (const [key, p] of Object.entries(s.properties || {})) {
        const path = prefix === "modeConfig" && mode.topLevel.includes(key) ? key : `${prefix}.${key}`;
        if (types(p)[0] === "object" && p.properties) walk(p, path);
        else settings.push({ path, p, required: (s.required || []).includes(key) });
        if (prefix === "modeConfig" && key === q.after) settings.push({ path: "question" });
      }
    };
    walk(schema, "modeConfig");
    if (!q.after) settings.unshift({ path: "question" });
    const shown = fields.map((f) => f.path).filter((p) => p !== "visibility");
    assert.deepEqual(shown.filter((p) => settings.some((s) => s.path === p)), shown, `${mode.id}: every field is a setting of the schema`);
    assert.deepEqual(shown, settings.map((s) => s.path).filter((p) => at[p]), `${mode.id}: the fields are in the schema's order`);
    assert.equal(fields.at(-1).path, "visibility");
    // The question: its label, placeholder and height.
    const question = at.question;
    assert.equal(question.label, `${q.label || mode.question.label}${mode.question.required ? " *" : ""}`, `${mode.id}: the question's label`);
    assert.equal(question.placeholder, q.placeholder || "", `${mode.id}: the question's placeholder`);
    assert.equal(question.tag, q.rows === 1 ? "input" : "textarea", `${mode.id}: the question's box`);
    for (const { path, p, required } of settings.filter((s) => s.p && at[s.path])) {
      const f = at[path];
      const where = `${mode.id} ${path}`;
      if (p.title) assert.ok(f.label.startsWith(p.title), `${where}: its label is its title: “${f.label}”`);
      assert.equal(f.label.endsWith(" *"), required, `${where}: marked required as the schema says: “${f.label}”`);
      if (p["x-rows"] === 1) assert.equal(f.tag, "input", `${where}: one line`);
      else if (p["x-rows"]) assert.equal(f.rows, p["x-rows"], `${where}: its height`);
      if (p["x-step"]) assert.equal(f.step, String(p["x-step"]), `${where}: its step`);
      if (p.enum) {
        const words = p["x-enum-labels"] || {};
        const values = p.enum.filter((v) => v !== null);
        assert.deepEqual(f.options.map(([v]) => v), [...(p.default === undefined ? [""] : []), ...values], `${where}: its choices`);
        for (const [v, text] of f.options) if (words[v]) assert.equal(text, words[v], `${where}: the words for “${v}”`);
      }
      checked += 1;
    }
  }
  assert.ok(checked >= 80, `only ${checked} fields checked`);
  assert.deepEqual(errors, []);
});
