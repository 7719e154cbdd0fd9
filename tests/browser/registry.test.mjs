// A mode with nothing but its Rust file and its registry line (the tests' `echo` mode) in the
// page: its tab, the form made from its settings schema, the generic view of its stages and
// outcome live, and the same text when the run is reopened. Screenshots go to
// target/browser-artifacts/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openPage, waitRunReady, runText, screenshot, skip, useServer, api } from "./harness.mjs";

let server, base, browser;
useServer({ latencyMs: 200 }, (env) => ({ server, base, browser } = env));

test("a mode without a form or view of its own gets both from the registry", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/echo");
  await page.waitForSelector("#f-echo-question");
  // Its tab, its description, and one field per setting of its schema.
  assert.equal(await page.getAttribute('.tabs a[href="#/new/echo"]', "aria-selected"), "true");
  assert.ok((await page.textContent(".mode-blurb")).includes("longest answer"));
  assert.deepEqual(await page.$$eval(".form-card .field", (f) => f.map((x) => x.dataset.field)),
    ["question", "modeConfig.models", "modeConfig.shout", "visibility"]);
  assert.equal(await page.textContent('label[for="f-echo-modeConfig-models"]'), "Answerers");
  // The default panel fills the picker; a client-side check refuses one model.
  assert.deepEqual(await page.$$eval('.field[data-field="modeConfig.models"] .chip', (c) => c.map((x) => x.firstChild.textContent)), ["sim/alpha", "sim/beta"]);
  await page.fill("#f-echo-question", "Say hello to the panel.");
  await page.click("#f-echo-modeConfig-models");
  await page.press("#f-echo-modeConfig-models", "Backspace");
  await page.click("button.start");
  assert.ok((await page.textContent('.field[data-field="modeConfig.models"] .field-error')).includes("Choose 2 to 4 models"));
  await page.fill("#f-echo-modeConfig-models", "sim/beta,sim/gamma");
  await page.press("#f-echo-modeConfig-models", "Enter");
  await page.check("#f-echo-modeConfig-shout");
  await screenshot(page, "echo-form");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  await waitRunReady(page, id);

  const res = await api(`${base}/api/deliberations/${encodeURIComponent(id)}`);
  const d = await res.json();
  assert.equal(d.status, "completed");
  assert.deepEqual(d.request.config.models, ["sim/alpha", "sim/beta", "sim/gamma"]);
  assert.equal(d.request.config.shout, true);
  // The generic view: a section per stage with a card per answer, and the outcome.
  const cards = await page.$$eval('section[data-section="answers"] .model-card', (c) => c.map((x) => x.dataset.model));
  assert.deepEqual(cards, ["sim/alpha", "sim/beta", "sim/gamma"]);
  assert.equal((await page.textContent('section[data-section="answers"] h2')).trim().startsWith("Answers"), true);
  assert.equal(await page.textContent(".primary .outcome"), d.outcome);
  await screenshot(page, "echo-run");
  const live = await runText(page, id);
  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  assert.deepEqual(errors, []);
  assert.deepEqual(fresh.errors, []);
});

test("an address naming a mode the server does not run says so and lists the modes", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/no_such_mode");
  await page.waitForSelector("main h1");
  assert.equal(await page.textContent("main h1"), "No such mode");
  assert.match(await page.textContent("main"), /no mode called “no_such_mode”/);
  assert.equal(await page.$("form[data-mode]"), null, "no other mode's form stands in");
  const { modes } = await (await api(`${base}/api/modes`)).json();
  assert.deepEqual(await page.$$eval(".mode-list a", (a) => a.map((x) => x.getAttribute("href"))), modes.map((m) => `#/new/${m.id}`));
  await page.click(`.mode-list a[href="#/new/${modes[0].id}"]`);
  await page.waitForSelector(`form[data-mode="${modes[0].id}"]`);
  assert.deepEqual(errors, []);
});
