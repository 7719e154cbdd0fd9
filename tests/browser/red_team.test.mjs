// The Red Team view in headless Chromium against a real server with sim models: a run started
// through the form (generated from the mode's schema), watched live round by round, checked
// against the stored result, then reopened in a fresh page that must read the same; and a run
// whose attacker fails. Screenshots (desktop and phone width) go to the artifacts folder.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, waitRunReady, runText, screenshot, skip, useServer, api, startRest } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 300 }, (env) => ({ server, base, browser } = env));

const CODE = "fn login(user: &str, pass: &str) -> bool {\n    let q = format!(\"SELECT * FROM users WHERE name='{user}' AND pass='{pass}'\");\n    db::query(&q).is_some()\n}";

async function detail(id) {
  const res = await api(`${base}/api/deliberations/${encodeURIComponent(id)}`);
  assert.equal(res.status, 200);
  return res.json();
}

test("a red team run from the form shows its rounds, severity chart and audit, live and reopened", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/red_team");
  await page.waitForSelector("#f-red_team-question");
  assert.deepEqual(await page.$$eval(".form-card .field", (f) => f.map((x) => x.dataset.field)),
    ["question", "modeConfig.content", "modeConfig.generatorModel", "modeConfig.attackerModel", "modeConfig.synthesizerModel",
      "modeConfig.rounds", "modeConfig.maxInputLength", "modeConfig.timeoutMs", "modeConfig.globalTimeoutMs", "visibility"]);
  await page.fill("#f-red_team-question", "Review this login handler for security flaws.");
  await page.fill("#f-red_team-modeConfig-content", CODE);
  await page.fill("#f-red_team-modeConfig-rounds", "2");
  await screenshot(page, "red_team-form");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  // Live: round 1's attack is shown before the run ends.
  await page.waitForSelector('section[data-section="attack_round_1"] .rt-finding, section[data-section="attack_round_1"] .rt-noflaws', { timeout: 30000 });
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  const r = d.result;
  assert.equal(d.request.config.rounds, 2);
  assert.equal(r.material.text, CODE);

  // Each round's findings as stored, with their severities and the defense's verdicts.
  for (const round of r.rounds) {
    const sel = `section[data-section="attack_round_${round.round}"]`;
    const titles = await page.$$eval(`${sel} .rt-finding strong`, (n) => n.map((x) => x.textContent));
    assert.deepEqual(titles, round.attack.findings.map((f) => f.title));
    if (round.defense) {
      const verdicts = await page.$$eval(`section[data-section="defend_round_${round.round}"] table.data tbody tr td:nth-child(4)`, (n) => n.map((x) => x.textContent.trim()));
      assert.deepEqual(verdicts, round.defense.responses.map((x) => x.verdict + (x.verdictDefaulted ? " (assumed)" : "")));
    }
  }
  // The hardened output, the confidence, the chart (labelled with every count) and the audit.
  const primary = await page.textContent(".primary");
  assert.ok(primary.includes(`Hardening confidence: ${r.synthesis.hardeningConfidence}`), primary);
  const label = await page.getAttribute(".rt-severity-chart[role=img]", "aria-label");
  for (const level of ["CRITICAL", "HIGH", "MEDIUM", "LOW"]) {
    const accepted = r.rounds.flatMap((x) => (x.defense ? x.defense.responses : x.attack.findings.map((f) => ({ ...f, verdict: "UNADDRESSED" }))))
      .filter((f) => f.severity === level && f.verdict === "ACCEPT").length;
    assert.ok(label.includes(`${level}: ${accepted} accepted`), label);
  }
  assert.ok(await page.$eval(".rt-severity-chart canvas", (c) => c.width > 0));
  const auditRows = await page.$$eval(".rt-audit table.data tbody tr", (n) => n.length);
  assert.equal(auditRows, r.synthesis.totals.findings);
  await screenshot(page, "red_team-run");
  const live = await runText(page, id);

  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  const phone = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(phone.page, id);
  await screenshot(phone.page, "red_team-run-phone");
  const [overflow, wide] = await phone.page.evaluate(() => {
    const w = document.documentElement.clientWidth;
    const over = [...document.querySelectorAll("article.run *")].filter((n) => n.getBoundingClientRect().right > w + 1);
    return [document.documentElement.scrollWidth - w, over.slice(-3).map((n) => `${n.tagName}.${n.className}`)];
  });
  assert.ok(overflow <= 1, `no sideways scroll on a phone (${overflow}px: ${wide.join(", ")})`);
  // A defense's table of long texts hides no column, on a phone or in its card on a desktop:
  // each row is a block of lines, each under its column's name.
  for (const p of [phone.page, fresh.page]) {
    const tables = await p.$$eval('section[data-section^="defend_round_"] table.data', (ts) => ts.map((t) => ({
      over: t.scrollWidth - t.clientWidth,
      labels: [...t.querySelectorAll("tbody tr:first-child td")].map((td) => getComputedStyle(td, "::before").content),
    })));
    assert.ok(tables.length > 0);
    for (const t of tables) {
      assert.ok(t.over <= 1, `the defense table fits (${t.over}px over)`);
      assert.deepEqual(t.labels, ['"#"', '"Finding · "', '"Severity · "', '"Verdict · "', '"Reasoning · "', '"Revision · "']);
    }
  }
  assert.deepEqual(errors, []);
  assert.deepEqual(fresh.errors, []);
  assert.deepEqual(phone.errors, []);
});

test("a failing attacker is shown as such and the synthesis still comes", { skip }, async () => {
  const started = await startRest(base, { mode: "red_team", question: "Review this plan.",
    modeConfig: { content: "Deploy on Friday evenings without a rollback plan.", attackerModel: "sim/fail-att", rounds: 2 } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "completed");
  assert.equal(d.result.partial, true);
  assert.ok((await page.textContent('section[data-section="attack_round_1"]')).includes("The attacker's call failed"));
  assert.ok((await page.textContent(".primary")).includes("rounds stopped: attacker failed"));
  await screenshot(page, "red_team-attacker-failed");
  assert.deepEqual(errors, []);
});

const HOSTILE = "<script>window.__xss=1</script>\n<img src=x onerror=\"window.__xss=1\">\n[click me](javascript:window.__xss=1)\n<svg onload=\"window.__xss=1\"></svg>";

test("hostile markup in the material is shown inert in every step", { skip }, async () => {
  const started = await startRest(base, { mode: "red_team", question: "Review this page fragment.",
    modeConfig: { content: `A page fragment:\n\n${HOSTILE}\n\nEnd.`, rounds: 1 } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  assert.equal((await detail(started.runId)).status, "completed");
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const live = await page.$$eval(`article.run script, article.run img[onerror], article.run svg[onload], article.run a[href^="javascript:"]`, (n) => n.length);
  assert.equal(live, 0, "no live hostile element in the run view");
  assert.deepEqual(errors, []);
});
