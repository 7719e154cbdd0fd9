// Words for people: no protocol word reaches the page. Every mode the server runs (from
// GET /api/modes, so a new mode is in) is run from its example and read as a person would, with
// every fold opened: no stage id, event name, request field name, raw format label ("ESTIMATE:",
// "DECISION:") or programming value ("undefined", "[object Object]") may show. A stopped run
// says who stopped it, and a refused form names the member, not the request's field path.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, startRest, waitRunReady, skip, useServer, api, offending, everything } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 50 }, (env) => ({ server, base, browser } = env));

test("no mode's run view shows a protocol word", { skip }, async () => {
  const { modes } = await (await api(`${base}/api/modes`)).json();
  assert.ok(modes.length >= 16, `${modes.length} modes`);
  const runs = [];
  for (const m of modes) runs.push({ mode: m.id, ...(await startRest(base, m.example)) });
  const { page, errors, context } = await openPage(browser, base, "/");
  const problems = [];
  for (const run of runs) {
    await page.goto(`${base}/#/run/${encodeURIComponent(run.runId)}`);
    await waitRunReady(page, run.runId, 120000);
    // Reveal model names where the view hides them: their labels are words too.
    for (const t of await page.$$("article.run input[type=checkbox]")) await t.check().catch(() => {});
    const found = offending(await everything(page));
    if (found.length) problems.push(`${run.mode}: ${found.join("; ")}`);
  }
  assert.deepEqual(problems, [], problems.join("\n"));
  // The dashboard lists them all, with their outcomes.
  await page.goto(`${base}/#/`);
  await page.waitForSelector(".run-row, table.data tbody tr");
  assert.deepEqual(offending(await everything(page)), []);
  assert.deepEqual(errors, []);
  await context.close();
});

test("a Delphi reply's format lines show as fields, and a stopped run says who stopped it", { skip }, async () => {
  const { page, errors, context } = await openPage(browser, base, "/");
  const { runId } = await startRest(base, { mode: "delphi", question: "How many piano tuners work in Chicago?" });
  await page.goto(`${base}/#/run/${encodeURIComponent(runId)}`);
  await waitRunReady(page, runId, 120000);
  const text = await everything(page);
  assert.match(text, /Estimate:/, "the estimate is a labelled field");
  assert.doesNotMatch(text, /ESTIMATE:|CONFIDENCE:|REASONING:/);
  // A confidence the reply states is a badge, not a word in a sentence.
  assert.ok(await page.$("article.run .md .reply-badge"), "a confidence badge in a reply");

  // A run with a member that never answers, stopped from the page.
  const slow = await startRest(base, { mode: "council", question: "Stop me", councilModels: ["sim/alpha", "sim/stall-a"], chairmanModel: "sim/alpha" });
  const run = `article.run[data-run="${slow.runId}"]`;
  await page.goto(`${base}/#/run/${encodeURIComponent(slow.runId)}`);
  await page.waitForSelector(`${run} .chip-call.running, ${run} .card.running`);
  await page.click(`${run} .run-live-bar button.live-cancel`);
  await page.click(`${run} .run-live-bar button.confirm-cancel`);
  await waitRunReady(page, slow.runId);
  const stopped = await everything(page);
  assert.match(stopped, /Stopped by tester/);
  assert.deepEqual(offending(stopped), []);
  assert.deepEqual(errors, []);
  await context.close();
});

test("a refused model is named as the member it is, not by the request's field path", { skip }, async () => {
  const { page, errors, context } = await openPage(browser, base, "/#/new/council");
  await page.waitForSelector("form textarea");
  await page.fill("form textarea", "Which is better?");
  // A fourth council member the server cannot route: the form lets it through, the server refuses.
  const input = await page.waitForSelector('[data-field="councilModels"] .picker input');
  await input.fill("nowhere/model");
  await input.press("Enter");
  await page.click("form button[type=submit]");
  const message = await page.waitForSelector('[data-field="councilModels"] .field-error:not(:empty)', { timeout: 10000 });
  const said = await message.innerText();
  assert.match(said, /^Member \d+: /, said);
  assert.doesNotMatch(said, /councilModels/);
  assert.deepEqual(errors.filter((e) => !/400/.test(e)), []);
  await context.close();
});
