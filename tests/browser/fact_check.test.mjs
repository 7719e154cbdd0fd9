// The Fact-Check view in headless Chromium against a real server with sim models: a run started
// through the form (generated from the mode's schema), watched live, checked against the stored
// result (every claim with every checker's verdict and the consensus, a split shown as a split),
// then reopened in a fresh page that must read the same, and at phone width; a failing checker;
// hostile markup inert. Screenshots (desktop and phone width) go to the artifacts folder.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, waitRunReady, runText, screenshot, skip, useServer, api, startRest } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 300 }, (env) => ({ server, base, browser } = env));

const TEXT = "The Eiffel Tower was completed in 1889 for the World's Fair. It is 330 metres tall. It was the tallest structure in the world until 1930. Many find it beautiful.";

async function detail(id) {
  const res = await api(`${base}/api/deliberations/${encodeURIComponent(id)}`);
  assert.equal(res.status, 200);
  return res.json();
}

test("a fact-check from the form shows the report first, each claim's verdicts and the chart, live and reopened", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/fact_check");
  await page.waitForSelector("#f-fact_check-question");
  const fields = await page.$$eval(".form-card .field", (f) => f.map((x) => x.dataset.field));
  for (const f of ["question", "modeConfig.content", "modeConfig.checkerModels", "modeConfig.maxContentLength", "modeConfig.globalTimeoutMs"]) {
    assert.ok(fields.includes(f), `${f} in ${fields}`);
  }
  await page.fill("#f-fact_check-question", "Fact-check this paragraph.");
  await page.fill("#f-fact_check-modeConfig-content", TEXT);
  await screenshot(page, "fact_check-form");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  const r = d.result;
  assert.equal(r.content, TEXT);

  // The report is the primary block, and it comes first in reading order of the answer.
  const primary = await page.textContent(".primary");
  const score = r.report.reliabilityScore;
  assert.ok(primary.includes(score == null ? "no reliability score" : `${score}`), primary);
  // Every claim, with its consensus and each usable checker's verdict.
  const claims = await page.$$eval(".fc-claim", (n) => n.map((x) => ({
    text: x.querySelector(".fc-claim-text").textContent,
    votes: x.querySelectorAll(".fc-votes li").length,
    tie: x.querySelector(".fc-claim-head").textContent.includes("Split: no majority"),
    dissent: x.querySelector(".fc-claim-head").textContent.includes("not unanimous"),
    head: x.querySelector(".fc-claim-head").textContent,
  })));
  assert.equal(claims.length, r.claims.length);
  const usable = r.checks.filter((c) => c.parseSuccess).length;
  r.claims.forEach((c, i) => {
    const k = r.consensus[i];
    assert.equal(claims[i].text, c.text);
    assert.equal(claims[i].votes, usable);
    assert.equal(claims[i].tie, k.tieRule != null, `claim ${i + 1}: a tie is shown as a split, not a side`);
    assert.equal(claims[i].dissent, k.split && k.tieRule == null, `claim ${i + 1}: a dissent is shown`);
    assert.ok(claims[i].head.includes(`${k.agreementRate}% agree`), claims[i].head);
  });
  const label = await page.getAttribute(".fc-chart[role=img]", "aria-label");
  assert.ok(label.includes(`${r.counts.verified} verified, ${r.counts.disputed} disputed, ${r.counts.unverifiable} unverifiable`), label);
  assert.ok(await page.$eval(".fc-chart canvas", (c) => c.width > 0));
  // No protocol words reach a person.
  const all = await page.textContent("article.run");
  for (const word of ["VERIFICATION 1", "claim_1", "parseSuccess", "UNTYPED"]) assert.ok(!all.includes(word), word);
  await screenshot(page, "fact_check-run");
  const live = await runText(page, id);

  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  const phone = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(phone.page, id);
  await screenshot(phone.page, "fact_check-run-phone");
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

test("a failing checker is shown as such and the report still comes", { skip }, async () => {
  const started = await startRest(base, { mode: "fact_check", question: "Fact-check this.",
    modeConfig: { content: TEXT, checkerModels: ["sim/alpha", "sim/fail-2"] } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "completed");
  assert.equal(d.result.partial, true);
  assert.ok((await page.textContent(".primary")).includes("some checks failed"));
  assert.ok((await page.textContent('section[data-section="verify"]')).includes("sim/fail-2"));
  await screenshot(page, "fact_check-checker-failed");
  assert.deepEqual(errors, []);
});

test("a claim two checkers split on is shown as a split, not as the tie rule's side", { skip }, async () => {
  // With these two sim checkers this claim ties (the sim's answers are deterministic).
  const started = await startRest(base, { mode: "fact_check", question: "Fact-check this.",
    modeConfig: { content: "The bridge opened in 1937 and is 2737 metres long.", checkerModels: ["sim/alpha", "sim/beta"] } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "completed");
  const k = d.result.consensus[0];
  assert.ok(k.tieRule, `the checkers tie here: ${JSON.stringify(d.result.consensus)}`);
  const head = await page.textContent(".fc-claim .fc-claim-head");
  assert.ok(head.includes("Split: no majority"), head);
  assert.ok(head.includes(`counted as ${k.verdict.toLowerCase()} by the tie rule`), head);
  assert.equal(await page.$$eval(".fc-claim .fc-claim-head .badge", (n) => n.filter((b) => /^(verified|disputed|unverifiable)$/i.test(b.textContent.trim())).length), 0,
    "no verdict badge presents a side as the checkers' verdict");
  // Each checker's own verdict is still there.
  assert.equal(await page.$$eval(".fc-claim .fc-votes li", (n) => n.length), 2);
  await screenshot(page, "fact_check-split");
  assert.deepEqual(errors, []);
});

const HOSTILE = "<script>window.__xss=1</script>\n<img src=x onerror=\"window.__xss=1\">\n[click me](javascript:window.__xss=1)\n<svg onload=\"window.__xss=1\"></svg>";

test("hostile markup in the content and the models' replies is shown inert", { skip }, async () => {
  const started = await startRest(base, { mode: "fact_check", question: "Fact-check this page.",
    modeConfig: { content: `Built in 1999. ${HOSTILE}\n\nIt has 3 pages.`, checkerModels: ["sim/xss-a", "sim/xss-b"], reporterModel: "sim/xss-c" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  assert.equal((await detail(started.runId)).status, "completed");
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const live = await page.$$eval(`article.run script, article.run img[onerror], article.run svg[onload], article.run a[href^="javascript:"]`, (n) => n.length);
  assert.equal(live, 0, "no live hostile element in the run view");
  assert.deepEqual(errors, []);
});
