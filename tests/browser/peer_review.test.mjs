// The Peer Review view in headless Chromium against a real server with sim models: a run
// started through the form (generated from the mode's schema), watched live review by review,
// checked against the stored result, then reopened in a fresh page that must read the same, at
// desktop and phone width; a run with a failing reviewer; hostile markup kept inert.
// Screenshots go to the artifacts folder.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, waitRunReady, runText, screenshot, skip, useServer, api, startRest } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 300 }, (env) => ({ server, base, browser } = env));

const WORK = "Uploads go from the browser to one API server, which writes them to a local disk and records them in one PostgreSQL instance. A nightly cron job copies the disk to S3.";

async function detail(id) {
  const res = await api(`${base}/api/deliberations/${encodeURIComponent(id)}`);
  assert.equal(res.status, 200);
  return res.json();
}

test("a peer review from the form shows the report, the agreement chart and every scorecard, live and reopened", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/peer_review");
  await page.waitForSelector("#f-peer_review-question");
  const fields = await page.$$eval(".form-card .field", (f) => f.map((x) => x.dataset.field));
  for (const f of ["question", "modeConfig.content", "modeConfig.reviewType", "modeConfig.reviewerModels", "modeConfig.consolidatorModel", "modeConfig.timeoutMs"]) {
    assert.ok(fields.includes(f), `${f} in ${fields}`);
  }
  await page.fill("#f-peer_review-question", "Review the architecture of our upload service.");
  await page.fill("#f-peer_review-modeConfig-content", WORK);
  await screenshot(page, "peer_review-form");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  // Live: a reviewer's scorecard is shown before the run ends.
  await page.waitForSelector('section[data-section="review"] table.data', { timeout: 30000 });
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  const r = d.result;
  assert.equal(r.work, WORK);
  const reviewers = d.request.config.reviewerModels.length;
  assert.equal(r.reviews.length, reviewers, "every reviewer answered");

  // The report comes first in the main block, then the action items as read.
  const first = await page.$eval(".primary .pr-output", (n) => n.textContent);
  assert.ok(first.includes("Consensus Scores"), first);
  const actions = await page.$$eval(".pr-actions table.data tbody tr", (n) => n.length);
  assert.equal(actions, r.consolidation.actionItems.length);
  // The chart is labelled with each criterion's mean, spread and agreement, as the server computed.
  const label = await page.getAttribute(".pr-chart[role=img]", "aria-label");
  for (const c of r.statistics.consensusScores) {
    assert.ok(label.includes(`${c.criterion}: mean ${c.average ?? "—"}, spread ${c.stddev ?? "—"}, agreement ${c.agreement || "not measured"}`), label);
  }
  assert.ok(await page.$eval(".pr-chart canvas", (c) => c.width > 0));
  const agreement = await page.$$eval('section[data-section="review_stats"] table.data tbody tr td:nth-child(5)', (n) => n.map((x) => x.textContent.trim()));
  assert.deepEqual(agreement, r.statistics.consensusScores.map((c) => c.agreement ? c.agreement + (c.disputed ? " · disputed" : "") : "fewer than 2 scores"));
  // Each reviewer's scores as stored.
  const cards = await page.$$('section[data-section="review"] .card');
  assert.equal(cards.length, reviewers);
  for (const rev of r.reviews) {
    const scores = await cards[rev.reviewerIndex - 1].$$eval("table.data tbody tr td:nth-child(2)", (n) => n.map((x) => x.textContent.trim()));
    assert.deepEqual(scores, rev.scores.map((s) => (s.score == null ? "not stated" : String(s.score))));
  }
  // No protocol words reach a person.
  const text = await runText(page, id);
  for (const word of ["parseSuccess", "reviewer_complete", "consensusScores", "null", "undefined", "[object"]) {
    assert.ok(!text.includes(word), `${word} in the view: …${text.slice(Math.max(0, text.indexOf(word) - 40), text.indexOf(word) + 200)}…`);
  }
  await screenshot(page, "peer_review-run");
  const live = text;

  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  const phone = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(phone.page, id);
  await screenshot(phone.page, "peer_review-run-phone");
  const [overflow, wide] = await phone.page.evaluate(() => {
    const w = document.documentElement.clientWidth;
    const over = [...document.querySelectorAll("article.run *")].filter((n) => n.getBoundingClientRect().right > w + 1);
    return [document.documentElement.scrollWidth - w, over.slice(-3).map((n) => `${n.tagName}.${n.className}`)];
  });
  assert.ok(overflow <= 1, `no sideways scroll on a phone (${overflow}px: ${wide.join(", ")})`);
  assert.deepEqual(errors, []);
  assert.deepEqual(fresh.errors, []);
  assert.deepEqual(phone.errors, []);
});

test("a failing reviewer is named, an unread one says why, and the review still completes", { skip }, async () => {
  const started = await startRest(base, { mode: "peer_review", question: "Review this plan.",
    modeConfig: { content: "Deploy on Friday evenings without a rollback plan.", reviewType: "design_spec_review",
      reviewerModels: ["sim/alpha", "sim/fail-2", "sim/malformed-3"] } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "completed");
  assert.equal(d.result.partial, true);
  const stats = await page.textContent('section[data-section="review_stats"]');
  assert.ok(stats.includes("reviewer 2 (sim/fail-2)"), stats);
  // The review whose scores could not be read says so, and why, in words.
  const unread = d.result.reviews.find((r) => r.model === "sim/malformed-3");
  assert.equal(unread.parseSuccess, false, JSON.stringify(unread));
  const callout = await page.textContent('section[data-section="review"] .pr-unparsed');
  assert.ok(callout.includes("No score could be read from this review"), callout);
  assert.ok(callout.includes("does not state an answer in a form that can be read"), callout);
  assert.ok((await page.textContent(".primary")).length > 0);
  await screenshot(page, "peer_review-reviewer-failed");
  assert.deepEqual(errors, []);
});

const HOSTILE = "<script>window.__xss=1</script>\n<img src=x onerror=\"window.__xss=1\">\n[click me](javascript:window.__xss=1)\n<svg onload=\"window.__xss=1\"></svg>";

test("hostile markup in the work and from the models is shown inert", { skip }, async () => {
  const started = await startRest(base, { mode: "peer_review", question: "Review this page fragment.",
    modeConfig: { content: `A page fragment:\n\n${HOSTILE}\n\nEnd.`, reviewType: "code_review",
      reviewerModels: ["sim/xss-a", "sim/xss-b"], consolidatorModel: "sim/xss-c" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  assert.equal((await detail(started.runId)).status, "completed");
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const live = await page.$$eval(`article.run script, article.run img[onerror], article.run svg[onload], article.run a[href^="javascript:"], article.run iframe, article.run [onclick]`, (n) => n.length);
  assert.equal(live, 0, "no live hostile element in the run view");
  assert.deepEqual(errors, []);
});

test("a custom rubric's criteria are rows of the form, checked against their bounds and run in order", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/peer_review");
  await page.waitForSelector("#f-peer_review-question");
  await page.fill("#f-peer_review-question", "Review our incident runbook.");
  await page.fill("#f-peer_review-modeConfig-content", WORK);
  await page.selectOption("#f-peer_review-modeConfig-reviewType", "custom");
  await page.fill("#f-peer_review-modeConfig-customRubric-name", "Runbook Review");
  await page.fill("#f-peer_review-modeConfig-customRubric-description", "Whether an on-call engineer can follow it at night.");
  const list = '[data-field="modeConfig.customRubric.criteria"]';
  const row = (i) => `${list} .list-item[data-index="${i}"]`;
  const criteria = [["Clarity", "Each step says exactly what to run.", "5"], ["Coverage", "Every alert has a matching section.", "9"],
    ["Safety", "Risky commands carry a warning first.", "4"], ["Extra", "Only here to be removed again.", "1"]];
  for (const [i, [name, description, weight]] of criteria.entries()) {
    await page.click(`${list} .list-add`);
    await page.fill(`${row(i)} [data-item-field="name"] input`, name);
    await page.fill(`${row(i)} [data-item-field="description"] textarea`, description);
    await page.fill(`${row(i)} [data-item-field="weight"] input`, weight);
  }
  // The weight is a number input with the schema's bounds; 9 is refused on its own row.
  assert.deepEqual(await page.$eval(`${row(0)} [data-item-field="weight"] input`, (n) => [n.type, n.min, n.max]), ["number", "1", "5"]);
  await page.click("button.start");
  assert.match(await page.textContent(`${row(1)} [data-item-field="weight"] .field-error`), /between 1 and 5/);
  assert.equal(await page.evaluate(() => document.activeElement.closest(".list-item")?.dataset.index), "1");
  await page.fill(`${row(1)} [data-item-field="weight"] input`, "3");
  await page.click(`button[aria-label="Remove criterion 4"]`);
  await page.click(`button[aria-label="Move criterion 3 up"]`);
  await screenshot(page, "peer_review-form-criteria");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  assert.equal(d.request.config.rubric.name, "Runbook Review");
  assert.deepEqual(d.request.config.rubric.criteria.map((c) => [c.name, c.weight]), [["Clarity", 5], ["Safety", 4], ["Coverage", 3]]);
  assert.deepEqual(errors, []);
});
