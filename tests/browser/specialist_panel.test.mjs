// The Specialist Panel view in headless Chromium against a real server with sim models: the
// default panel started through the form (generated from the mode's schema) with nothing but a
// question, watched live report by report, checked against the stored result, then reopened in
// a fresh page that must read the same, and at phone width; a run with a failing specialist and
// an unreadable report; hostile markup inert. Screenshots go to the artifacts folder.
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

/** The rating grid as shown: per row, the role title and each cell's "<score> <criterion>". */
const gridRows = (page) => page.$$eval(".sp-grid tbody tr", (rows) => rows.map((r) => ({
  role: r.querySelector(".sp-role-title").textContent,
  cells: [...r.querySelectorAll(".sp-cell")].map((c) => `${c.querySelector(".sp-score").textContent} ${c.querySelector(".sp-criterion").textContent}`),
  avg: r.querySelector(".sp-avg").textContent,
})));

test("the default panel from the form shows the ratings, each report and the assessment, live and reopened", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/specialist_panel");
  await page.waitForSelector("#f-specialist_panel-question");
  const fields = await page.$$eval(".form-card .field", (f) => f.map((x) => x.dataset.field));
  assert.ok(fields.includes("modeConfig.content") && fields.includes("modeConfig.synthesizerModel"), fields.join());
  await page.fill("#f-specialist_panel-question", "Assess our plan to move the web shop to Kubernetes.");
  await screenshot(page, "specialist_panel-form");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  // Live: the grid lists the three roles from the start, and a report lands before the end.
  await page.waitForSelector(".sp-grid tbody tr", { timeout: 30000 });
  assert.equal((await gridRows(page)).length, 3);
  await page.waitForSelector(".sp-report-head", { timeout: 30000 });
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  const r = d.result;
  assert.deepEqual(r.specialists.map((s) => s.roleKey), ["security_expert", "scalability_architect", "cost_analyst"]);

  // The grid shows every stored rating, by role, in the role's criterion order.
  const rows = await gridRows(page);
  r.specialists.forEach((s, i) => {
    assert.equal(rows[i].role, s.roleTitle);
    assert.deepEqual(rows[i].cells, s.criteriaScores.map((c) => `${c.score ?? "–"} ${c.criterion}`));
    assert.ok(rows[i].avg.includes(`${s.averageScore}`), rows[i].avg);
  });
  // A tab per specialist, named by its role; each card has its findings and recommendations.
  const tabs = await page.$$eval('section[data-section="specialists"] .card-tabs [role=tab]', (n) => n.map((x) => x.textContent));
  assert.deepEqual(tabs, r.specialists.map((s) => s.roleTitle));
  for (const s of r.specialists) {
    const card = await page.textContent(`article.model-card[data-key="specialist:${s.index}"]`);
    for (const f of s.keyFindings) assert.ok(card.includes(f.replace(/\*\*/g, "")), `${f} in ${card}`);
    assert.ok(card.includes("Top recommendations"));
  }
  // The assessment: the executive summary comes first, then the risk matrix as stored.
  const heads = await page.$$eval(".primary .sp-part > h3", (n) => n.map((x) => x.textContent));
  assert.deepEqual(heads.slice(0, 2), ["Executive summary", "Risk matrix"]);
  const top = r.synthesis.topRisk;
  assert.ok((await page.textContent(".sp-meta")).includes(`Top risk: ${top.level} · ${top.domain}`));
  const levels = await page.$$eval(".primary table.data tbody tr td:nth-child(2)", (n) => n.map((x) => x.textContent.trim()));
  assert.deepEqual(levels, r.synthesis.riskMatrix.map((x) => x.level ?? "not stated"));
  // No protocol words reach a person.
  const text = await page.textContent("article.run");
  for (const word of ["roleKey", "parseSuccess", "criteriaScores", "null", "undefined", "specialist_"]) {
    assert.ok(!text.includes(word), `"${word}" is shown`);
  }
  await screenshot(page, "specialist_panel-run");
  const live = await runText(page, id);

  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  const phone = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(phone.page, id);
  await screenshot(phone.page, "specialist_panel-run-phone");
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

test("a failing specialist and an unreadable report are shown as such", { skip }, async () => {
  const started = await startRest(base, { mode: "specialist_panel", question: "Assess this plan.",
    modeConfig: { content: "Deploy on Friday evenings without a rollback plan.",
      specialists: [{ roleId: "security_expert", model: "sim/alpha" }, { roleId: "devops_engineer", model: "sim/fail-ops" },
        { roleId: "cost_analyst", model: "sim/malformed-cost" }, { roleId: "data_architect", model: "sim/beta" }] } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "completed", JSON.stringify(d));
  assert.equal(d.result.partial, true);
  assert.deepEqual(d.result.failedSpecialists.map((f) => f.roleKey), ["devops_engineer"]);
  const rows = await gridRows(page);
  assert.equal(rows[1].avg, "no report: the call failed");
  assert.ok(rows[1].cells.every((c) => c.startsWith("×")), rows[1].cells.join());
  const cost = d.result.specialists.find((s) => s.roleKey === "cost_analyst");
  assert.equal(cost.parseSuccess, false);
  assert.equal(rows[2].avg, "no rating stated");
  assert.ok(rows[2].cells.every((c) => c.startsWith("–")), rows[2].cells.join());
  assert.ok((await page.textContent('section[data-section="specialists"]')).includes("No report from DevOps Engineer (sim/fail-ops)"));
  assert.ok((await page.textContent(`article.model-card[data-key="specialist:2"]`)).includes("No 1-5 rating could be read"));
  await screenshot(page, "specialist_panel-failing");
  assert.deepEqual(errors, []);
});

test("a cancelled run keeps the reports that came and says which never did", { skip }, async () => {
  const started = await startRest(base, { mode: "specialist_panel", question: "Assess this plan.",
    modeConfig: { specialists: [{ roleId: "security_expert", model: "sim/alpha" }, { roleId: "cost_analyst", model: "sim/beta" },
      { roleId: "ux_designer", model: "sim/stall-ux" }], timeoutMs: 60000 } });
  const id = started.runId;
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await page.waitForFunction(() => document.querySelectorAll(".sp-report-head").length >= 2, null, { timeout: 30000 });
  const res = await api(`${base}/api/deliberations/${encodeURIComponent(id)}/cancel`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  assert.equal(res.status, 202);
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "cancelled");
  assert.equal(d.result.specialists.length, 2);
  const rows = await gridRows(page);
  assert.equal(rows[2].avg, "no report: the run stopped first");
  const live = await runText(page, id);
  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  assert.deepEqual(errors, []);
  assert.deepEqual(fresh.errors, []);
});

const HOSTILE = "<script>window.__xss=1</script>\n<img src=x onerror=\"window.__xss=1\">\n[click me](javascript:window.__xss=1)\n<svg onload=\"window.__xss=1\"></svg>";

test("hostile markup in the material and the replies is shown inert", { skip }, async () => {
  const started = await startRest(base, { mode: "specialist_panel", question: "Assess this page fragment.",
    modeConfig: { content: `A page fragment:\n\n${HOSTILE}\n\nEnd.`,
      specialists: [{ roleId: "security_expert", model: "sim/xss-a" }, { roleId: "ux_designer", model: "sim/xss-b" }],
      synthesizerModel: "sim/xss-c" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  assert.equal((await detail(started.runId)).status, "completed");
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const live = await page.$$eval(`article.run script, article.run img[onerror], article.run svg[onload], article.run a[href^="javascript:"], article.run iframe, article.run [onclick]`, (n) => n.length);
  assert.equal(live, 0, "no live hostile element in the run view");
  assert.deepEqual(errors, []);
});
