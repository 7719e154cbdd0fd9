// The Confidence-Weighted view in headless Chromium against a real server with sim models: a
// run started through the form, watched live, checked against the stored result (each answer's
// stated confidence, the weights chart and table, the caution that confidence is not accuracy,
// the weighted answer), reopened in a fresh page that must read the same, and read at a phone's
// width; a failing model; hostile markup from the models kept inert. Screenshots go to the
// artifacts folder.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, waitRunReady, runText, screenshot, skip, useServer, api, startRest } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 300 }, (env) => ({ server, base, browser } = env));

async function detail(id) {
  const res = await api(`${base}/api/deliberations/${encodeURIComponent(id)}`);
  assert.equal(res.status, 200);
  return res.json();
}

test("a confidence-weighted run from the form shows confidences, weights and the weighted answer, live and reopened", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/confidence_weighted");
  await page.waitForSelector("#f-confidence_weighted-question");
  await page.fill("#f-confidence_weighted-question", "What is caffeine's half-life in adults?");
  await screenshot(page, "confidence_weighted-form");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  const r = d.result;
  const answers = await page.textContent('section[data-section="answer"]');
  for (const a of r.answers) {
    const shown = a.parsedSuccessfully ? `confidence ${(a.confidence * 100).toFixed(0)}%` : "no confidence stated";
    assert.ok(answers.includes(shown), `${shown} in ${answers}`);
  }
  const weights = await page.textContent('section[data-section="weights"]');
  assert.ok(weights.includes("not accuracy"), weights);
  assert.ok(weights.includes(`T = ${r.weights.temperature}`), weights);
  for (const w of r.weights.weights) assert.ok(weights.includes(`${w.weightPercent}%`), `${w.weightPercent} in ${weights}`);
  const label = await page.getAttribute(".cw-chart[role=img]", "aria-label");
  for (const w of r.weights.weights) assert.ok(label.includes(`${w.model}: confidence`), label);
  const primary = await page.textContent(".primary");
  assert.ok(primary.includes("Weighted answer"), primary);
  assert.ok(!/SYNTHESIS:|CONFIDENCE CALIBRATION NOTES:|RESPONSE:/.test(primary), primary);
  await screenshot(page, "confidence_weighted-run");
  const live = await runText(page, id);

  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  const phone = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(phone.page, id);
  await screenshot(phone.page, "confidence_weighted-run-phone");
  const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 1, `no sideways scroll on a phone (${overflow}px)`);
  assert.deepEqual(errors, []);
  assert.deepEqual(fresh.errors, []);
  assert.deepEqual(phone.errors, []);
});

test("a failing model is left out of the weights and said so", { skip }, async () => {
  const started = await startRest(base, { mode: "confidence_weighted", question: "Is Pluto a planet?",
    modeConfig: { models: ["sim/alpha", "sim/fail-2", "sim/gamma"], synthesisModel: "sim/alpha" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "completed");
  assert.equal(d.result.weights.weights.length, 2);
  const text = await page.textContent('section[data-section="answer"]');
  assert.ok(text.includes("1 model gave no answer"), text);
  await screenshot(page, "confidence_weighted-failed");
  assert.deepEqual(errors, []);
});

test("hostile markup from the question and the models is shown inert", { skip }, async () => {
  const started = await startRest(base, { mode: "confidence_weighted",
    question: "Explain <script>window.__xss=1</script> and <img src=x onerror=\"window.__xss=1\"> [click me](javascript:window.__xss=1)",
    modeConfig: { models: ["sim/xss-a", "sim/xss-b"], synthesisModel: "sim/xss-c" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  assert.equal((await detail(started.runId)).status, "completed");
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const live = await page.$$eval(`article.run script, article.run img[onerror], article.run a[href^="javascript:"]`, (n) => n.length);
  assert.equal(live, 0, "no live hostile element in the run view");
  assert.deepEqual(errors, []);
});

test("a single answer stands as the weighted answer, said so, with no synthesis written", { skip }, async () => {
  const started = await startRest(base, { mode: "confidence_weighted", question: "Is Pluto a planet?",
    modeConfig: { models: ["sim/beta", "sim/fail-2"], synthesisModel: "sim/alpha" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "completed");
  assert.equal(d.result.synthesis.singleAnswer, true);
  const primary = await page.textContent(".primary");
  assert.ok(primary.includes("only one model answered"), primary);
  assert.ok(primary.includes(d.result.answers[0].response.slice(0, 30)), primary);
  assert.ok((await page.textContent('section[data-section="synthesis"]')).includes("No synthesis was written"));
  assert.ok((await page.textContent('section[data-section="weights"]')).includes("100%"));
  await screenshot(page, "confidence_weighted-single");
  assert.deepEqual(errors, []);
});
