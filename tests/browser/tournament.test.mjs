// The Tournament view in headless Chromium against a real server with sim models: a run started
// through the form (its default four contestants), the bracket filled in match by match live,
// checked against the stored result, reopened in a fresh page that must read the same, and read
// at a phone's width; a failing judge shown as such; hostile model output inert. Screenshots go
// to the artifacts folder.
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

const matchText = (page, round, m) => page.textContent(`.tn-match[data-round="${round}"][data-match="${m}"]`);

test("a tournament from the form draws its bracket, reveals each match and crowns the champion, live and reopened", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/tournament");
  await page.waitForSelector("#f-tournament-question");
  await page.fill("#f-tournament-question", "What is the best way to learn a new programming language?");
  await screenshot(page, "tournament-form");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  // Live: a match is shown being judged before the run ends.
  await page.waitForSelector(".tn-match.tn-live", { timeout: 30000 });
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  const r = d.result;
  const rounds = Array.from({ length: r.bracket.totalRounds }, (_, i) => String(i + 1));
  assert.deepEqual(await page.$$eval(".tn-round[data-round]", (n) => n.map((x) => x.dataset.round)), rounds);
  for (const round of r.rounds) {
    for (const m of round.matches) {
      const text = await matchText(page, round.round, m.matchIndex);
      assert.ok(text.includes(`#${m.winnerSeed} advances`), text);
      assert.ok(text.includes(m.winnerModel) && text.includes(m.loserModel), text);
    }
  }
  const winnerSlots = await page.$$eval(".tn-match.tn-decided .tn-slot.tn-win .tn-seed", (n) => n.map((x) => x.textContent));
  assert.equal(winnerSlots.length, r.rounds.reduce((k, x) => k + x.matches.length, 0));
  const primary = await page.textContent(".primary");
  assert.ok(primary.includes(`Seed ${r.champion.seed} · ${r.champion.model}`), primary);
  assert.ok(primary.includes("Path to the title"), primary);
  assert.ok(!/decidedBy|default_seed|coin_flip|shownAs|winnerSeed/.test(await runText(page, id)), "no protocol words");
  await screenshot(page, "tournament-run");
  const live = await runText(page, id);

  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  const phone = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(phone.page, id);
  await screenshot(phone.page, "tournament-run-phone");
  const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 1, `no sideways scroll on a phone (${overflow}px)`);
  assert.deepEqual(errors, []);
  assert.deepEqual(fresh.errors, []);
  assert.deepEqual(phone.errors, []);
});

test("byes, and a judge that fails, are shown in words", { skip }, async () => {
  const started = await startRest(base, { mode: "tournament", question: "Which editor should a beginner use?",
    modeConfig: { contestantModels: ["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon", "sim/zeta"], judgeModel: "sim/fail-judge" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "failed");
  assert.equal(await page.$$eval(".tn-bye", (n) => n.length), 3);
  const text = await matchText(page, 1, 1);
  assert.ok(text.includes("judge failed") && text.includes("#1 advances"), text);
  await screenshot(page, "tournament-judge-failed");
  assert.deepEqual(errors, []);
});

test("hostile markup from the models is shown inert in the bracket and the answer", { skip }, async () => {
  const started = await startRest(base, { mode: "tournament", question: "How should a page show model output?",
    modeConfig: { contestantModels: ["sim/xss-a", "sim/xss-b", "sim/xss-c", "sim/xss-d"], judgeModel: "sim/xss-j" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  assert.equal((await detail(started.runId)).status, "completed");
  await page.$$eval("details.tn-reasoning", (n) => n.forEach((x) => { x.open = true; }));
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const live = await page.$$eval(`article.run script, article.run img[onerror], article.run a[href^="javascript:"], article.run iframe, article.run [onclick]`, (n) => n.length);
  assert.equal(live, 0, "no live hostile element in the run view");
  assert.ok((await page.textContent(".tn-bracket")).includes("Response"), "the judge's reasoning is shown");
  assert.deepEqual(errors, []);
});
