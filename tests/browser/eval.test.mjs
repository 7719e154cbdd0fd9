// The eval page in headless Chromium: an eval run with the CLI (`conclave eval`, oracle sims)
// against the server's own database, listed at #/evals and opened at #/eval/ID: its table must
// give the figures `--json` printed, the chart must describe every arm, and a disagreement's
// link must open the run behind that answer. Read at a desktop's and a phone's width.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, openPage, waitRunReady, screenshot, skip, useServer, api, startRest } from "./harness.mjs";

const dir = mkdtempSync(join(tmpdir(), "conclave-eval-page-"));
const DATABASE_URL = `sqlite://${join(dir, "e.db")}`;
let base, browser;
useServer({ latencyMs: 0, env: { DATABASE_URL } }, (env) => ({ base, browser } = env));

function runEval(extra = ["--arms", "single,majority,council,jury"]) {
  const env = { ...process.env, DATABASE_URL, CONCLAVE_SIM_LATENCY_MS: "0", OPENROUTER_API_KEY: "" };
  delete env.CONCLAVE_CONFIG;
  const out = execFileSync(BIN, ["eval", "sample", "--members", "sim/oracle-0.8-a,sim/oracle-0.5-b,sim/oracle-0.5-c",
    "--limit", "16", "--json", "--quiet", ...extra],
  { env });
  return JSON.parse(out.toString());
}

/** The CLI's table of a finished eval. */
function cliTable(evalId) {
  const env = { ...process.env, DATABASE_URL, CONCLAVE_SIM_LATENCY_MS: "0", OPENROUTER_API_KEY: "" };
  delete env.CONCLAVE_CONFIG;
  return execFileSync(BIN, ["eval", "--resume", evalId, "--quiet"], { env }).toString();
}

test("an eval's page shows its table, chart and disagreements, each linking to its runs", { skip }, async () => {
  const printed = runEval();
  const res = await api(`${base}/api/evals/${printed.evalId}`);
  assert.equal(res.status, 200);
  const stored = await res.json();
  assert.deepEqual(stored.arms, printed.arms, "the page's data is what the CLI printed");

  const { page, errors } = await openPage(browser, base, "/#/evals", { viewport: { width: 1400, height: 900 } });
  await page.waitForSelector(`[data-eval="${printed.evalId}"] a`);
  // The list names every arm and member in full, nothing cut off.
  const line = page.locator(`[data-eval="${printed.evalId}"] .eval-arms`);
  const listed = await line.textContent();
  for (const a of printed.arms) assert.ok(listed.includes(a.arm.replace(/^single:.*/, "single")), `${a.arm} in ${listed}`);
  assert.ok(listed.includes("sim/oracle-0.5-c"), listed);
  assert.ok(await line.evaluate((n) => n.scrollWidth <= n.clientWidth + 1), `the arms line is not cut off: ${listed}`);
  await page.click(`[data-eval="${printed.evalId}"] a`);
  await page.waitForSelector("#eval-table");
  // The page prints the figures the CLI's table prints, rounded alike (the table again from
  // `--resume`, which runs nothing more of a finished eval).
  const table = cliTable(printed.evalId);
  for (const a of printed.arms) {
    const row = await page.textContent(`#eval-table tr[data-arm="${a.arm}"]`);
    const line = table.split("\n").find((l) => l.startsWith(`${a.arm} `));
    assert.ok(line, `${a.arm} in the CLI's table:\n${table}`);
    const [, , accuracy, ci, delta, unparsed] = line.trim().split(/\s{2,}/);
    assert.ok(row.includes(accuracy), `${a.arm}: the CLI's ${accuracy} on the page: ${row}`);
    const [lo, hi] = ci.replace("%", "").split("–");
    assert.ok(row.includes(`${lo}%–${hi}%`), `${a.arm}: the CLI's ${ci} on the page: ${row}`);
    if (delta.includes(" pt ")) assert.ok(row.includes(delta), `${a.arm}: the CLI's ${delta} on the page: ${row}`);
    assert.ok(row.includes(unparsed), `${a.arm}: the CLI's ${unparsed} unparsed on the page: ${row}`);
  }
  // The jury arm's own figures, in words, under the table.
  const jury = printed.arms.find((a) => a.arm === "jury").jury;
  const note = await page.textContent('.jury-note[data-arm="jury"]');
  assert.ok(note.includes(`approved ${jury.approved} of ${jury.judged}`), note);
  assert.ok(note.includes("counts as no answer"), note);
  const label = await page.getAttribute(".chart-box[role=img]", "aria-label");
  for (const a of printed.arms) assert.ok(label.includes(a.arm), label);
  await page.waitForSelector(".chart-box canvas");
  await screenshot(page, "eval-page");

  // A question the arms disagree on, and the run behind one arm's answer to it.
  const rows = await page.$$("#eval-disagreements tbody tr");
  assert.equal(rows.length, stored.disagreements.length);
  assert.ok(rows.length > 0, "oracles of 0.8 and 0.5 disagree somewhere in 16 questions");
  const first = stored.disagreements[0];
  const [arm, answer] = Object.entries(first.arms).find(([name]) => name.startsWith("single:"));
  const link = page.locator(`#eval-disagreements tr[data-question="${first.questionId}"] a[href="#/run/${answer.runIds[0]}"]`).first();
  await link.click();
  await waitRunReady(page, answer.runIds[0]);
  const question = await page.textContent("article.run");
  await screenshot(page, "eval-solo-run");
  assert.ok(question.includes(first.question.split("?")[0]), `the ${arm} run asked the question: ${question.slice(0, 200)}`);

  const phone = await openPage(browser, base, `/#/eval/${printed.evalId}`, { viewport: { width: 390, height: 844 } });
  await phone.page.waitForSelector("#eval-table");
  // No programming value reaches the page (an eval alone in its set has no comparison).
  const words = await phone.page.evaluate(() => document.querySelector("main").textContent);
  for (const bad of ["null", "undefined", "[object Object]", "NaN"]) assert.ok(!words.includes(bad), `${bad} on the page`);
  await screenshot(phone.page, "eval-page-phone");
  const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 1, `the page fits a phone's width (wide tables scroll inside): ${overflow}px over`);
  assert.deepEqual([...errors, ...phone.errors], []);
});

test("two evals of the same set are laid side by side, arm by arm", { skip }, async () => {
  const first = runEval(["--arms", "single,majority", "--seed", "11"]);
  const second = runEval(["--arms", "single,majority,vote", "--seed", "12"]);
  const { page, errors } = await openPage(browser, base, `/#/eval/${second.evalId}`, { viewport: { width: 1400, height: 900 } });
  await page.waitForSelector(`[data-other="${first.evalId}"] button`);
  await page.click(`[data-other="${first.evalId}"] button`);
  await page.waitForSelector("#eval-compare-table");
  // Rounded half up from the fraction times 1,000, as the page and the CLI's table round.
  const tenths = (x) => Math.floor(x * 1000 + 0.5) / 10 + 0;
  const pct = (x) => `${tenths(x).toFixed(1)}%`;
  for (const a of second.arms) {
    const row = await page.textContent(`#eval-compare-table tr[data-arm="${a.arm}"]`);
    assert.ok(row.includes(pct(a.accuracy)), `${a.arm}: ${row}`);
    const b = first.arms.find((x) => x.arm === a.arm);
    if (b) {
      assert.ok(row.includes(pct(b.accuracy)), `${a.arm} of the other eval: ${row}`);
      const d = tenths(a.accuracy - b.accuracy);
      assert.ok(row.includes(`${d > 0 ? "+" : ""}${d.toFixed(1)} pt`), row);
    } else {
      assert.ok(row.includes("—"), `an arm only this eval ran: ${row}`);
    }
  }
  await screenshot(page, "eval-compare");
  assert.deepEqual(errors, []);
});

test("History and the dashboard list a person's own runs after an eval; the eval's are one tick away", { skip }, async () => {
  // Two evals: more than a page of History (50) between them, whatever ran before.
  runEval(["--arms", "single", "--seed", "3"]);
  const printed = runEval(["--arms", "single,majority"]);
  const own = await startRest(base, { mode: "council", question: "Which bridge should the town repair first?" });
  const { page, errors } = await openPage(browser, base, `/#/run/${own.runId}`, { viewport: { width: 1400, height: 900 } });
  await waitRunReady(page, own.runId);

  // The dashboard's recent runs are the person's: no eval run among them.
  await page.goto(`${base}/#/`);
  await page.waitForSelector(`#recent-runs [data-run="${own.runId}"]`);
  // (This file's server ran only evals before this run.)
  assert.equal(await page.locator("#recent-runs .run-row").count(), 1, await page.textContent("#recent-runs"));

  // History: the person's own conversation, no eval's, nothing more to load.
  await page.goto(`${base}/#/history`);
  await page.waitForSelector("#history-list .run-row");
  const ownRows = await page.$$("#history-list .run-row");
  const ownText = await page.textContent("#history-list");
  assert.ok(!(await page.textContent("main")).includes("null"), "no programming value on the page");
  assert.ok(ownText.toLowerCase().includes("bridge"), ownText);
  assert.equal(await page.locator("#history-list .eval-mark").count(), 0, "no eval conversation listed by default");
  assert.equal(await page.isVisible("#history-more"), false);

  // With the eval's runs: a first page of 50, then more on "Load more", each marked.
  await page.check("#history-evals");
  await page.waitForFunction(() => document.querySelectorAll("#history-list .eval-mark").length > 0);
  await page.waitForSelector("#history-more:not([hidden])");
  assert.equal(await page.locator("#history-list .run-row").count(), 50);
  await screenshot(page, "history-with-evals");
  await page.click("#history-more");
  await page.waitForFunction(() => document.querySelectorAll("#history-list .run-row").length > 50);
  const ids = await page.$$eval("#history-list .run-row", (rows) => rows.map((r) => r.dataset.conversation));
  assert.equal(new Set(ids).size, ids.length, "a page after the first lists nothing twice");
  assert.ok(page.url().includes("evals=include"), "the filter is kept in the address");

  // An eval's run, opened, says it is one and leads to its eval.
  await page.click("#history-list .run-row:has(.eval-mark) .q a");
  await page.waitForSelector("article.run .eval-mark");
  const href = await page.getAttribute("article.run .eval-mark", "href");
  assert.ok(href.startsWith("#/eval/"), href);
  assert.equal(await page.textContent("article.run .permalink"), "Permalink");

  // The eval's page lists every run of that eval, and only those.
  await page.goto(`${base}/#/eval/${printed.evalId}`);
  await page.click("#eval-runs-link");
  await page.waitForSelector("#history-list .run-row");
  const rows = await page.locator("#history-list .run-row").count();
  assert.equal(await page.locator("#history-list .run-row .eval-mark").count(), rows, "each listed run is the eval's");
  assert.ok(!(await page.textContent("#history-list")).toLowerCase().includes("bridge"));

  // On a phone, History with its filter fits the width.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${base}/#/history?evals=include`);
  await page.waitForSelector("#history-list .eval-mark");
  assert.ok(await page.isChecked("#history-evals"));
  await screenshot(page, "history-with-evals-phone");
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 1, `History fits a phone's width: ${overflow}px over`);
  assert.ok(ownRows.length >= 1 && printed.evalId);
  assert.deepEqual(errors, []);
});
