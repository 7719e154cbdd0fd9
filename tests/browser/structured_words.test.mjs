// Structured replies, read as a person reads them: with the sim answering every machine-read call
// in JSON (`[sim] structured_output = "json_schema"`, as a route to llama.cpp or Ollama would),
// every mode's finished view shows each reply as its fields in words. No raw JSON (braces,
// quoted keys, the `reasoning` key) and no protocol word reaches the page, on a desktop or a
// phone.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, openOnPhone, startRest, waitRunReady, skip, useServer, api, offending, everything, screenshot } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 50, config: '[sim]\nstructured_output = "json_schema"\n' }, (env) => ({ server, base, browser } = env));

// JSON as a model writes it: an object's opening, a quoted key, the reasoning field's name.
const RAW_JSON = [
  [/\{\s*"/g, "an object's opening"],
  [/"[A-Za-z_]+"\s*:/g, "a quoted key"],
  [/\breasoning"/g, "the reasoning key"],
];

function rawJson(text) {
  const found = [];
  for (const [re, what] of RAW_JSON) {
    const all = [...text.matchAll(re)];
    if (all.length) found.push(`${what}: ${JSON.stringify(text.slice(Math.max(0, all[0].index - 40), all[0].index + 40))}`);
  }
  return found;
}

test("every mode's view shows JSON replies as fields in words", { skip }, async () => {
  const { modes } = await (await api(`${base}/api/modes`)).json();
  assert.ok(modes.length >= 16, `${modes.length} modes`);
  const runs = [];
  for (const m of modes) runs.push({ mode: m.id, ...(await startRest(base, m.example)) });
  const { page, errors, context } = await openPage(browser, base, "/");
  const problems = [];
  let json = 0;
  for (const run of runs) {
    // The run was read from JSON (the acceptance test in tests/api/structured.rs counts how much).
    const exp = await (await api(`${base}/api/deliberations/${encodeURIComponent(run.runId)}/export?format=json`)).json();
    json += (exp.stages || []).filter((s) => s.parsedData && s.parsedData.readFrom === "json").length;
    await page.goto(`${base}/#/run/${encodeURIComponent(run.runId)}`);
    await waitRunReady(page, run.runId, 120000);
    for (const t of await page.$$("article.run input[type=checkbox]")) await t.check().catch(() => {});
    const text = await everything(page);
    const found = [...offending(text), ...rawJson(text)];
    if (found.length) problems.push(`${run.mode}: ${found.join("; ")}`);
  }
  assert.ok(json >= 16, `only ${json} replies were read from JSON: the sim did not answer in JSON`);
  assert.deepEqual(problems, [], problems.join("\n"));
  assert.deepEqual(errors, []);
  for (const mode of ["jury", "peer_review"]) {
    const run = runs.find((r) => r.mode === mode);
    await page.goto(`${base}/#/run/${encodeURIComponent(run.runId)}`);
    await waitRunReady(page, run.runId, 120000);
    await page.evaluate(() => document.querySelectorAll("details").forEach((d) => { d.open = true; }));
    await screenshot(page, `structured-${mode}`);
    const phone = await openOnPhone(browser, base, run.runId);
    assert.ok(phone.overflow <= 1, `${mode} on a phone scrolls sideways by ${phone.overflow}px`);
    await screenshot(phone.page, `structured-${mode}-phone`);
    await phone.context.close();
  }
  await context.close();
});
