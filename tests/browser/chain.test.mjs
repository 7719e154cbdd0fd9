// The Chain view in headless Chromium against a real server with sim models: a run started
// through the form (its default four steps), watched live step by step on the timeline, checked
// against the stored result, reopened in a fresh page that must read the same, and read at a
// phone's width; and a chain with a failing step, shown skipped. Screenshots go to the
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

const timeline = (page) => page.$$eval(".chain-timeline .chain-step", (n) => n.map((x) => x.innerText.replace(/\s+/g, " ").trim()));

test("a chain from the form shows its step timeline, each version and the final one, live and reopened", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/chain");
  await page.waitForSelector("#f-chain-question");
  await page.fill("#f-chain-question", "Write a short guide to backing up a home server.");
  await screenshot(page, "chain-form");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  // Live: the timeline lists the four steps from the start, and step 1 finishes before the run.
  await page.waitForSelector('.chain-step[data-step="1"] .badge.green', { timeout: 30000 });
  assert.equal((await timeline(page)).length, 4);
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  const r = d.result;
  const items = await timeline(page);
  r.steps.forEach((s, i) => {
    assert.ok(items[i].includes(`Step ${s.step} · ${s.mandateDisplay} · ${s.model}`), items[i]);
    const delta = s.wordCountDelta > 0 ? `+${s.wordCountDelta}` : String(s.wordCountDelta);
    assert.ok(items[i].includes(`${s.wordCount} words (${delta})`), items[i]);
  });
  for (const s of r.steps) {
    const text = await page.textContent(`section[data-section="chain_step_${s.step}"]`);
    assert.ok(text.includes(`Step ${s.step} · ${s.mandateDisplay}`), text);
    for (const n of s.editorNotes) assert.ok(text.includes(n), `${n} in ${text}`);
  }
  const primary = await page.textContent(".primary");
  assert.ok(primary.includes(`from step ${r.finalStep}`) && primary.includes(`${r.completedSteps} of ${r.totalSteps} steps completed`), primary);
  const label = await page.getAttribute(".chain-words-chart[role=img]", "aria-label");
  for (const p of r.wordCountProgression) assert.ok(label.includes(`Step ${p.step}: ${p.wordCount}`), label);
  await screenshot(page, "chain-run");
  const live = await runText(page, id);

  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  const phone = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(phone.page, id);
  await screenshot(phone.page, "chain-run-phone");
  const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 1, `no sideways scroll on a phone (${overflow}px)`);
  assert.deepEqual(errors, []);
  assert.deepEqual(fresh.errors, []);
  assert.deepEqual(phone.errors, []);
});

test("a failing step is shown skipped and the next step covers it", { skip }, async () => {
  const started = await startRest(base, { mode: "chain", question: "Write a note on password managers.",
    modeConfig: { steps: [{ model: "sim/alpha", mandate: "draft" }, { model: "sim/fail-2", mandate: "security_review" }, { model: "sim/gamma", mandate: "polish_format" }] } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "completed");
  assert.deepEqual(d.result.skippedSteps, [2]);
  const items = await timeline(page);
  assert.ok(items[1].toLowerCase().includes("skipped"), items[1]);
  assert.ok(items[2].toLowerCase().includes("done"), items[2]);
  assert.ok((await page.textContent('section[data-section="chain_step_2"]')).includes("Skipped"));
  assert.ok((await page.textContent(".primary")).includes("skipped: 2"));
  await screenshot(page, "chain-skipped");
  assert.deepEqual(errors, []);
});

test("hostile markup in the question is shown inert in every version", { skip }, async () => {
  const started = await startRest(base, { mode: "chain",
    question: "Write about <script>window.__xss=1</script> and <img src=x onerror=\"window.__xss=1\"> [click me](javascript:window.__xss=1)" });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  assert.equal((await detail(started.runId)).status, "completed");
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const live = await page.$$eval(`article.run script, article.run img[onerror], article.run a[href^="javascript:"]`, (n) => n.length);
  assert.equal(live, 0, "no live hostile element in the run view");
  assert.deepEqual(errors, []);
});

// The steps editor is the generic form's list of objects, made from the schema of `steps`.
const rows = (page) => page.$$eval('[data-field="modeConfig.steps"] .list-item', (items) => items.map((li) => ({
  title: li.querySelector(".list-item-title").textContent,
  model: li.querySelector('[data-item-field="model"] input').value,
  mandate: li.querySelector('[data-item-field="mandate"] select').value,
  customMandate: li.querySelector('[data-item-field="customMandate"] textarea').value,
})));
const row = (i) => `[data-field="modeConfig.steps"] .list-item[data-index="${i}"]`;
const addStep = (page) => page.click('[data-field="modeConfig.steps"] .list-add');
const status = (page) => page.textContent('[data-field="modeConfig.steps"] .list-status');

test("a custom chain built in the form's steps editor runs those steps", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/chain");
  await page.waitForSelector("#f-chain-question");
  await page.fill("#f-chain-question", "Write a short guide to rotating SSH keys.");
  // Empty: the default chain, and the editor says so.
  assert.deepEqual(await rows(page), []);
  assert.match(await status(page), /default is used/);
  // Up to the schema's six steps; the first four start as the server's default chain (what runs
  // when the list is left empty: GET /api/models).
  for (let i = 0; i < 6; i++) await addStep(page);
  const six = await rows(page);
  assert.equal(six.length, 6);
  assert.deepEqual(six.map((r) => [r.title, r.model, r.mandate]), [["Step 1", "sim/alpha", "draft"], ["Step 2", "sim/beta", "structure_depth"],
    ["Step 3", "sim/gamma", "accuracy_completeness"], ["Step 4", "sim/delta", "polish_format"], ["Step 5", "", ""], ["Step 6", "", ""]]);
  assert.equal(await page.isDisabled('[data-field="modeConfig.steps"] .list-add'), true, "no seventh step");
  assert.match(await status(page), /most/);
  assert.equal(await page.isDisabled('button[aria-label="Move step 1 up"]'), true);
  assert.equal(await page.isDisabled('button[aria-label="Move step 6 down"]'), true);
  assert.equal(await page.isDisabled('button[aria-label="Move step 3 down"]'), false);
  // Remove three (by their labels), then edit what is left.
  for (const n of [6, 5, 4]) await page.click(`button[aria-label="Remove step ${n}"]`);
  assert.equal((await rows(page)).length, 3);
  assert.equal(await page.isDisabled('[data-field="modeConfig.steps"] .list-add'), false);
  await page.fill(`${row(0)} [data-item-field="model"] input`, "sim/epsilon");
  await page.selectOption(`${row(1)} [data-item-field="mandate"] select`, "accessibility");
  await page.selectOption(`${row(2)} [data-item-field="mandate"] select`, "custom");
  await page.fill(`${row(2)} [data-item-field="customMandate"] textarea`, "Turn it into a checklist a tired admin can follow at 3 a.m.");
  // The mandate's options read as words.
  const labels = await page.$$eval(`${row(0)} [data-item-field="mandate"] option`, (o) => o.map((x) => x.textContent));
  assert.ok(labels.includes("Security review") && labels.includes("Custom"), labels.join(", "));
  // Step 3 moves up to second place; focus stays on its button.
  await page.click('button[aria-label="Move step 3 up"]');
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute("aria-label")), "Move step 2 up");
  assert.match(await status(page), /^Step 3 is now step 2\. 3 steps \(2 to 6\)\.$/);
  const expected = [
    { model: "sim/epsilon", mandate: "draft" },
    { model: "sim/gamma", mandate: "custom", customMandate: "Turn it into a checklist a tired admin can follow at 3 a.m." },
    { model: "sim/beta", mandate: "accessibility" },
  ];
  assert.deepEqual((await rows(page)).map((r) => [r.title, r.model, r.mandate]),
    [["Step 1", "sim/epsilon", "draft"], ["Step 2", "sim/gamma", "custom"], ["Step 3", "sim/beta", "accessibility"]]);
  await screenshot(page, "chain-form-steps");
  const phone = await openPage(browser, base, "/#/new/chain", { viewport: { width: 390, height: 844 } });
  await phone.page.waitForSelector("#f-chain-question");
  for (let i = 0; i < 3; i++) await addStep(phone.page);
  await phone.page.selectOption(`${row(2)} [data-item-field="mandate"] select`, "custom");
  await screenshot(phone.page, "chain-form-steps-phone");
  const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 1, `no sideways scroll on a phone (${overflow}px)`);

  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  assert.deepEqual(d.request.config.steps, expected);
  assert.deepEqual(d.result.steps.map((s) => ({ model: s.model, mandate: s.mandate, ...(s.customMandate ? { customMandate: s.customMandate } : {}) })), expected);
  const items = await timeline(page);
  assert.equal(items.length, 3);
  assert.ok(items[1].includes("Step 2 · Custom · sim/gamma"), items[1]);
  assert.deepEqual(errors, []);
  assert.deepEqual(phone.errors, []);
});

test("a server refusal of one step's field is shown on that step's row", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/chain");
  await page.waitForSelector("#f-chain-question");
  await page.fill("#f-chain-question", "Write a note on log rotation.");
  // One step is neither the default nor a chain: refused before sending.
  await addStep(page);
  await page.click("button.start");
  assert.match(await page.textContent('[data-field="modeConfig.steps"] > .field-error'), /2 to 6 steps, or none for the default/);
  await addStep(page);
  await addStep(page);
  // Step 2 asks for a custom mandate without its text: the server's 400 names
  // modeConfig.steps[1].customMandate, shown on row 2's field, which takes the focus.
  await page.selectOption(`${row(1)} [data-item-field="mandate"] select`, "custom");
  await page.click("button.start");
  const field = `${row(1)} [data-item-field="customMandate"]`;
  await page.waitForSelector(`${field}.invalid`);
  assert.match(await page.textContent(`${field} .field-error`), /Custom mandate is required with the custom mandate/);
  assert.equal(await page.getAttribute(`${field} textarea`, "aria-invalid"), "true");
  assert.equal(await page.evaluate(() => document.activeElement.closest("[data-item-field]")?.dataset.itemField), "customMandate");
  assert.equal(await page.evaluate(() => document.activeElement.closest(".list-item")?.dataset.index), "1");
  assert.equal(await page.$$eval('[data-field="modeConfig.steps"] .field.invalid', (n) => n.length), 1, "only that field is marked");
  assert.ok(page.url().includes("#/new/chain"), "not started");
  await screenshot(page, "chain-form-step-error");
  // A model nothing serves, on row 3.
  await page.fill(`${field} textarea`, "Make every paragraph one sentence shorter.");
  assert.equal(await page.$$eval(`${field}.invalid`, (n) => n.length), 0, "typing clears the message");
  await page.fill(`${row(2)} [data-item-field="model"] input`, "nowhere/none");
  await page.click("button.start");
  await page.waitForSelector(`${row(2)} [data-item-field="model"].invalid`);
  await page.fill(`${row(2)} [data-item-field="model"] input`, "sim/gamma");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed");
  assert.deepEqual(d.request.config.steps.map((s) => s.mandate), ["draft", "custom", "accuracy_completeness"]);
  assert.deepEqual(errors, []);
});
