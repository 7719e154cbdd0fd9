// Every field of every mode's form says what the server does: a time is asked in seconds and its
// help speaks of seconds, and a number's placeholder is the default the server fills in when the
// field is left empty (`GET /api/models`), in the field's unit, agreeing with any default its
// help names. Read in headless Chromium at a desktop's width.
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

test("every form field's unit, placeholder and help agree with the server's defaults", { skip }, async () => {
  const modes = (await (await api(`${base}/api/modes`)).json()).modes;
  const defaults = (await (await api(`${base}/api/models`)).json()).modes;
  assert.ok(modes.length >= 16, `${modes.length} modes`);
  const { page, errors } = await openPage(browser, base, "/#/", { viewport: { width: 1400, height: 900 } });
  let checked = 0;
  for (const mode of modes) {
    await page.goto(`${base}/#/new/${mode.id}`);
    await page.waitForSelector(`form[data-mode="${mode.id}"]`);
    const fields = await page.$$eval(`form[data-mode="${mode.id}"] .field[data-field]`, (ws) => ws.map((w) => {
      const input = w.querySelector("input");
      return {
        path: w.dataset.field,
        label: (w.querySelector("label") || {}).textContent || "",
        type: input ? input.type : null,
        placeholder: input ? input.placeholder : "",
        hint: (w.querySelector(".hint") || {}).textContent || "",
      };
    }));
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
