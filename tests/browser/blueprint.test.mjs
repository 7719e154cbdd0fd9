// The Blueprint view in headless Chromium against a real server with sim models: a run started
// through the form (generated from the mode's schema), watched live as the sections are written
// at once, checked against the stored result, reopened in a fresh page that must read the same,
// and read at a phone's width; a run whose author and assembler fail; hostile markup kept inert.
// Screenshots go to the artifacts folder.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, waitRunReady, runText, screenshot, skip, useServer, api, startRest } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 1000 }, (env) => ({ server, base, browser } = env));

async function detail(id) {
  const res = await api(`${base}/api/deliberations/${encodeURIComponent(id)}`);
  assert.equal(res.status, 200);
  return res.json();
}

const plan = (page) => page.$$eval(".bp-plan .bp-plan-item", (n) => n.map((x) => x.innerText.replace(/\s+/g, " ").trim()));

test("a blueprint from the form shows the document first, the outline and every section, live and reopened", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/blueprint");
  await page.waitForSelector("#f-blueprint-question");
  assert.deepEqual(await page.$$eval(".form-card .field", (f) => f.map((x) => x.dataset.field)),
    ["question", "modeConfig.content", "modeConfig.documentType", "modeConfig.architectModel", "modeConfig.authorModels",
      "modeConfig.assemblerModel", "modeConfig.timeoutMs", "visibility"]);
  await page.fill("#f-blueprint-question", "Design doc for our collaborative editor");
  await page.fill("#f-blueprint-modeConfig-content", "A web editor where several people edit one document at once, offline too.");
  await screenshot(page, "blueprint-form");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  // Live: the outline lists the sections, and they are all being written at once.
  await page.waitForSelector(".bp-plan .bp-plan-item", { timeout: 30000 });
  // Watched in the page itself (a poll from here can miss the moment on a busy machine).
  const running = await page.waitForFunction(() => {
    const cards = document.querySelectorAll('section[data-section="sections"] .model-card');
    const now = document.querySelectorAll('section[data-section="sections"] .model-card .chip-call.running').length;
    return cards.length >= 6 && now >= 2 && now;
  }, null, { timeout: 30000 }).then((h) => h.jsonValue()).catch(() => 0);
  assert.ok(running >= 2, `several sections are written at once (${running} running)`);
  const streaming = await page.$$eval('section[data-section="sections"] .model-card .model', (n) => n.map((x) => x.textContent));
  assert.ok(streaming.every((t) => /^Section \d+ · /.test(t)), `each card is named after its section: ${streaming}`);
  await screenshot(page, "blueprint-live");
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  const r = d.result;
  const items = await plan(page);
  assert.equal(items.length, r.outline.sections.length);
  r.outline.sections.forEach((s, i) => {
    assert.ok(items[i].includes(`${s.number}. ${s.title}`) && items[i].includes(`by ${s.assignedModel}`), items[i]);
    const w = r.sections.find((x) => x.sectionNumber === s.number);
    assert.ok(items[i].includes(`${w.wordCount} word`), items[i]);
  });
  // The document comes first, with its counts and the words of each section.
  const first = await page.$eval("article.run .run-answer .primary", (n) => n.className);
  assert.ok(first.includes("bp-document"), `the document comes first, in the answer card (${first})`);
  const primary = await page.textContent(".primary");
  assert.ok(primary.includes(`${r.assembly.wordCount} words`) && primary.includes(`${r.sections.length} of ${r.sections.length} sections written`), primary);
  const rows = await page.$$eval(".bp-document table.data tbody tr", (n) => n.map((x) => x.innerText.replace(/\s+/g, " ").trim()));
  assert.equal(rows.length, r.sections.length);
  r.sections.forEach((s, i) => assert.ok(rows[i].includes(`${s.sectionTitle}`) && rows[i].includes(String(s.wordCount)), rows[i]));
  // Protocol words never reach a person.
  const visible = await page.innerText("article.run");
  for (const word of ["DOCUMENT TITLE:", "Source Coverage:", "lengthDefaulted", "section_complete", "SECTION 1:"]) {
    assert.ok(!visible.includes(word), `${word} is shown`);
  }
  await screenshot(page, "blueprint-run");
  const live = await runText(page, id);

  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  const phone = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(phone.page, id);
  await screenshot(phone.page, "blueprint-run-phone");
  const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 1, `no sideways scroll on a phone (${overflow}px)`);
  assert.deepEqual(errors, []);
  assert.deepEqual(fresh.errors, []);
  assert.deepEqual(phone.errors, []);
});

test("a failing author and assembler: the missing sections are marked and the sections joined", { skip }, async () => {
  const started = await startRest(base, { mode: "blueprint", question: "Design doc for a backup service",
    modeConfig: { architectModel: "sim/alpha", authorModels: ["sim/beta", "sim/fail-2"], assemblerModel: "sim/fail-3" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "completed");
  assert.equal(d.result.assembly.fallback, "concatenated");
  const items = await plan(page);
  for (const f of d.result.failedSections) assert.ok(items[f.sectionNumber - 1].toLowerCase().includes("not written"), items[f.sectionNumber - 1]);
  const primary = await page.textContent(".primary");
  assert.ok(primary.includes("sections joined, not assembled") && primary.includes("marked TODO"), primary);
  const f = d.result.failedSections[0];
  assert.ok(primary.includes(`[TODO: Section ${f.sectionNumber} (${f.sectionTitle}) failed]`), primary);
  await screenshot(page, "blueprint-failed");
  assert.deepEqual(errors, []);
});

test("hostile markup from the models and in the material is shown inert", { skip }, async () => {
  const started = await startRest(base, { mode: "blueprint",
    question: "Design <script>window.__xss=1</script> and <img src=x onerror=\"window.__xss=1\">",
    modeConfig: { content: "[click me](javascript:window.__xss=1) <svg onload=\"window.__xss=1\"></svg>",
      architectModel: "sim/xss-a", authorModels: ["sim/xss-b", "sim/xss-c"], assemblerModel: "sim/xss-d" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  assert.equal((await detail(started.runId)).status, "completed");
  assert.ok((await page.textContent(".primary")).includes("Executive Summary"));
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const live = await page.$$eval(`article.run script, article.run img[onerror], article.run a[href^="javascript:"], article.run svg[onload], article.run iframe`, (n) => n.length);
  assert.equal(live, 0, "no live hostile element in the run view");
  assert.deepEqual(errors, []);
});
