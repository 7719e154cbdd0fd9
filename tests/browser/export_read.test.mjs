// A run's Markdown export, read as a person reads it: every mode's example run is exported
// (`GET …/export?format=md`), rendered with the page's own Markdown renderer (the vendored
// marked), and checked for what a reader sees: one title, the question, the answer (or why there
// is none), the models table and the stages, with no Markdown or JSON syntax left showing and
// no stage id or field name. The Council, Jury and Delphi exports are saved as screenshots
// (target/browser-artifacts/export-*.png) to look at.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, startRest, skip, useServer, api, screenshot } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 0 }, (env) => ({ server, base, browser } = env));

async function finished(runId) {
  for (let i = 0; i < 600; i++) {
    const d = await (await api(`${base}/api/deliberations/${encodeURIComponent(runId)}`)).json();
    if (d.status && d.status !== "running") return d;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${runId} still running`);
}

test("every mode's Markdown export renders as a document a person can read", { skip }, async () => {
  const { modes } = await (await api(`${base}/api/modes`)).json();
  const { page, errors, context } = await openPage(browser, base, "/");
  // The dashboard is drawn before the test draws into the page, never after.
  await page.waitForSelector("main h1");
  const problems = [];
  for (const m of modes) {
    const { runId } = await startRest(base, m.example);
    await finished(runId);
    const res = await api(`${base}/api/deliberations/${encodeURIComponent(runId)}/export?format=md`);
    assert.equal(res.status, 200, m.id);
    assert.match(res.headers.get("content-type") || "", /markdown|text\/plain/);
    const md = await res.text();
    // Rendered by the page's renderer into a blank document, as a Markdown viewer would.
    const seen = await page.evaluate((src) => {
      const doc = document.createElement("article");
      doc.className = "export-preview";
      doc.innerHTML = window.DOMPurify.sanitize(window.marked.parse(src, { gfm: true }));
      document.querySelector("main").replaceChildren(doc);
      const text = doc.innerText;
      return {
        h1: [...doc.querySelectorAll("h1")].map((h) => h.innerText),
        h2: [...doc.querySelectorAll("h2")].map((h) => h.innerText),
        tables: doc.querySelectorAll("table").length,
        text,
      };
    }, md);
    const where = `${m.id}`;
    const fail = (why) => problems.push(`${where}: ${why}`);
    if (seen.h1.length !== 1) fail(`${seen.h1.length} titles`);
    for (const h of ["Question", "Answer"]) if (!seen.h2.includes(h)) fail(`no "${h}" heading (${seen.h2.join(", ")})`);
    if (!/Mode: /.test(seen.text) || !/Tokens: /.test(seen.text)) fail("no mode or tokens line");
    if (seen.tables < 1) fail("no models table");
    if (/\*\*|```|^\s*\|.*\|\s*$/m.test(seen.text)) fail("Markdown syntax left showing");
    if (/\{\s*"|"\s*:\s*[\[{"\d]/.test(seen.text)) fail("raw JSON showing");
    const labels = seen.text.match(/\b(?:[A-Z]{3,}[ _])*[A-Z]{3,}:/g);
    if (labels) fail(`raw format labels: ${[...new Set(labels)].slice(0, 5).join(", ")}`);
    const ids = seen.text.match(/\b(stage[1-3]|round1)\b|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b/g);
    if (ids) fail(`ids showing: ${[...new Set(ids)].slice(0, 5).join(", ")}`);
    if (["council", "jury", "delphi"].includes(m.id)) await screenshot(page, `export-${m.id}`);
  }
  assert.deepEqual(problems, [], problems.join("\n"));
  assert.deepEqual(errors, []);
  await context.close();
});
