// A model server that takes one call at a time (a route's max_concurrent_calls; here the sim's):
// the calls queued behind it say they are waiting for a free slot, on their cards and as dashed
// chips on the dashboard, then run and finish; nothing stays "waiting" once the run is over.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, startRest, waitRunReady, runText, screenshot, skip, useServer } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 900, config: "\n[sim]\nmax_concurrent_calls = 1\n" }, (env) => ({ server, base, browser } = env));

test("calls queued behind a busy model server say they wait, then run and finish", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/");
  const started = await startRest(base, { mode: "council", question: "Why is the sky blue?",
    councilModels: ["sim/alpha", "sim/beta", "sim/gamma"], chairmanModel: "sim/alpha" });
  // The dashboard, opened before the run's first stage is over: a queued call's chip is dashed.
  await page.waitForSelector(".chip-call.waiting", { timeout: 15000 });
  await page.goto(`${base}/#/run/${encodeURIComponent(started.runId)}`);
  const note = await page.waitForSelector(".model-card .retry-note:not([hidden])", { timeout: 15000 });
  const said = await note.textContent();
  assert.ok(said.startsWith("Waiting for a free slot on sim/"), said);
  assert.ok(said.includes("its time limit starts when it is sent"), said);
  assert.equal(await page.$eval(".model-card .chip-call.waiting", (n) => n.textContent), "waiting");
  await screenshot(page, "queue-waiting");
  await waitRunReady(page, started.runId, 60000);
  const states = await page.$$eval(".model-card", (cards) => cards.map((c) => c.querySelector(".chip-call").textContent));
  assert.ok(states.length >= 7 && states.every((s) => s === "done"), states.join(", "));
  const text = await runText(page, started.runId);
  assert.ok(!text.includes("Waiting for a free slot"), "no card still says it waits once the run is over");
  for (const word of ["call_waiting", "call_turn", "undefined"]) assert.ok(!text.includes(word), word);
  assert.deepEqual(errors, []);
});
