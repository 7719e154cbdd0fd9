// The answer comes first, for every mode the server runs (from GET /api/modes, so a new mode is
// in): a finished run's answer card (its outcome and answer, or the words saying why there is
// none) starts inside the first screen on a desk (1400×900) and on a phone (390×844), above the
// stages, and the phone page never scrolls sideways. Each run is started from the mode's own
// example request.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, startRest, waitRunReady, skip, useServer, api } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 50 }, (env) => ({ server, base, browser } = env));

const SCREENS = [
  { name: "desk", viewport: { width: 1400, height: 900 } },
  { name: "phone", viewport: { width: 390, height: 844 } },
];

test("every mode's answer card is in the first screen, above its stages, on a desk and a phone", { skip }, async () => {
  const { modes } = await (await api(`${base}/api/modes`)).json();
  assert.ok(modes.length >= 16, `${modes.length} modes`);
  const runs = [];
  for (const m of modes) runs.push({ mode: m.id, ...(await startRest(base, m.example)) });
  for (const screen of SCREENS) {
    const { page, errors, context } = await openPage(browser, base, "/", { viewport: screen.viewport });
    for (const run of runs) {
      await page.goto(`${base}/#/run/${encodeURIComponent(run.runId)}`);
      await waitRunReady(page, run.runId, 120000);
      const seen = await page.$eval(`article.run[data-run="${run.runId}"]`, (article) => {
        const card = article.querySelector(".run-answer");
        // What the card shows first: the answer block, or the note saying how the run ended.
        const shown = [...card.children].find((c) => !c.hidden && c.getClientRects().length);
        const stage = article.querySelector(".mode-root .stage:not([hidden])");
        const top = (n) => n.getBoundingClientRect().top + window.scrollY;
        return {
          what: shown ? shown.className : null,
          top: shown ? top(shown) : null,
          stageTop: stage ? top(stage) : null,
          text: shown ? shown.innerText.trim().slice(0, 80) : "",
          sideways: document.documentElement.scrollWidth - document.documentElement.clientWidth,
        };
      });
      const where = `${run.mode} on a ${screen.name}`;
      assert.ok(seen.what && seen.text, `${where}: the answer card shows something (${JSON.stringify(seen)})`);
      assert.ok(seen.top < screen.viewport.height - 100, `${where}: the answer card starts at ${seen.top}px`);
      assert.ok(seen.stageTop === null || seen.top < seen.stageTop, `${where}: above the stages (${seen.top} < ${seen.stageTop})`);
      if (screen.name === "phone") assert.ok(seen.sideways <= 1, `${where}: ${seen.sideways}px sideways`);
    }
    assert.deepEqual(errors, []);
    await context.close();
  }
});
