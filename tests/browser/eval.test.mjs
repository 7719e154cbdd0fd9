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
import { BIN, openPage, waitRunReady, screenshot, skip, useServer, api } from "./harness.mjs";

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

test("an eval's page shows its table, chart and disagreements, each linking to its runs", { skip }, async () => {
  const printed = runEval();
  const res = await api(`${base}/api/evals/${printed.evalId}`);
  assert.equal(res.status, 200);
  const stored = await res.json();
  assert.deepEqual(stored.arms, printed.arms, "the page's data is what the CLI printed");

  const { page, errors } = await openPage(browser, base, "/#/evals", { viewport: { width: 1400, height: 900 } });
  await page.waitForSelector(`[data-eval="${printed.evalId}"] a`);
  await page.click(`[data-eval="${printed.evalId}"] a`);
  await page.waitForSelector("#eval-table");
  for (const a of printed.arms) {
    const row = await page.textContent(`#eval-table tr[data-arm="${a.arm}"]`);
    assert.ok(row.includes(`${(a.accuracy * 100).toFixed(1)}%`), `${a.arm}: ${row}`);
    assert.ok(row.includes(`${(a.ciLow * 100).toFixed(1)}%–${(a.ciHigh * 100).toFixed(1)}%`), row);
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
  const pct = (x) => `${(x * 100).toFixed(1)}%`;
  for (const a of second.arms) {
    const row = await page.textContent(`#eval-compare-table tr[data-arm="${a.arm}"]`);
    assert.ok(row.includes(pct(a.accuracy)), `${a.arm}: ${row}`);
    const b = first.arms.find((x) => x.arm === a.arm);
    if (b) {
      assert.ok(row.includes(pct(b.accuracy)), `${a.arm} of the other eval: ${row}`);
      const d = (a.accuracy - b.accuracy) * 100;
      assert.ok(row.includes(`${d > 0 ? "+" : ""}${d.toFixed(1)} pt`), row);
    } else {
      assert.ok(row.includes("—"), `an arm only this eval ran: ${row}`);
    }
  }
  await screenshot(page, "eval-compare");
  assert.deepEqual(errors, []);
});
