// "Run again", the live-status bar and the server's own pages, in a real browser: a cancelled
// run offers Run again, which opens a new run of the same request that completes; on a phone
// (390×844) a live run shows its question once, keeps a thin status bar (stage, models done,
// time, Cancel) in view when scrolled to the bottom, never scrolls sideways, and the bar goes
// away when the run ends; a used sign-in link and an unknown address answer pages in the
// app's look. Screenshots of each go to target/browser-artifacts/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { skip, openPage, waitRunReady, startRest, screenshot, useServer, api, ARTIFACTS } from "./harness.mjs";

let base, browser;
// Slow enough that a run is still live while the page is looked at and cancelled.
useServer({ latencyMs: 1500 }, (env) => ({ base, browser } = env));

/** A run with a long first stage: six members, so the page is taller than a phone's screen. */
const request = (question) => ({ mode: "council", question,
  councilModels: ["sim/alpha", "sim/beta", "sim/gamma", "sim/delta", "sim/epsilon", "sim/zeta"], chairmanModel: "sim/alpha" });

/** A screenshot of what the screen shows now (not the full page, not scrolled to the top). */
async function shot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
}

test("a cancelled run is run again from its page and the new run completes", { skip }, async () => {
  const { page, errors, context } = await openPage(browser, base, "/", { viewport: { width: 1400, height: 900 } });
  const started = await startRest(base, request("Should we run this again?"));
  const old = started.runId;
  await page.goto(`${base}/#/run/${encodeURIComponent(old)}`);
  const article = `article.run[data-run="${old}"]`;
  await page.waitForSelector(`${article} .chip-call.running`);
  assert.equal(await page.isVisible(`${article} .run-head button.rerun`), false, "no Run again while it runs");
  await page.click(`${article} .run-live-bar button.live-cancel`);
  await page.click(`${article} .run-live-bar button.confirm-cancel`);
  await waitRunReady(page, old);
  assert.equal(await page.getAttribute(article, "data-status"), "cancelled");
  assert.equal(await page.isVisible(`${article} .run-live-bar`), false, "the live bar goes when the run ends");
  await screenshot(page, "run-again-cancelled");

  await page.click(`${article} .run-head button.rerun`);
  await page.waitForURL((url) => /#\/run\//.test(url.hash) && !url.hash.includes(old));
  const fresh = decodeURIComponent(page.url().split("#/run/")[1]);
  await page.waitForSelector(`article.run[data-run="${fresh}"]`);
  await waitRunReady(page, fresh, 120000);
  assert.equal(await page.getAttribute(`article.run[data-run="${fresh}"]`, "data-status"), "completed");
  assert.equal(await page.isVisible(`article.run[data-run="${fresh}"] .run-head button.rerun`), false, "a completed run offers none");
  const [a, b] = await Promise.all([old, fresh].map(async (id) => (await api(`${base}/api/deliberations/${id}`)).json()));
  assert.deepEqual([b.mode, b.question, b.request.config], [a.mode, a.question, a.request.config]);
  assert.deepEqual(errors, []);
  await context.close();
});

/**
 * Opens a new live run at `viewport`, scrolls to the bottom while its first stage runs, and
 * answers what the screen shows then, with the page (closed by the caller).
 */
async function scrolledLiveRun(viewport, question) {
  const { runId } = await startRest(base, request(question));
  const opened = await openPage(browser, base, `/#/run/${encodeURIComponent(runId)}`, { viewport });
  const article = `article.run[data-run="${runId}"]`;
  // The stage-1 cards hold text: the page is longer than the screen.
  await opened.page.waitForFunction((sel) => [...document.querySelectorAll(`${sel} .model-card .md`)].some((m) => m.textContent.length > 40), article);
  await shot(opened.page, `run-live-top-${viewport.width}`);
  const seen = await opened.page.evaluate(({ q, sel }) => {
    // The page's own headings (the models' answers may quote the question: not counted).
    const headings = (text) => [...document.querySelectorAll("main .conversation-head, main .run-head")].map((n) => n.innerText).join("\n").split(text).length - 1;
    window.scrollTo(0, document.documentElement.scrollHeight);
    const bar = document.querySelector(`${sel} .run-live-bar`).getBoundingClientRect();
    return {
      questionShown: headings(q),
      scrolled: window.scrollY,
      tall: document.documentElement.scrollHeight > window.innerHeight,
      barTop: bar.top, barBottom: bar.bottom,
      topbarBottom: document.querySelector(".topbar").getBoundingClientRect().bottom,
      barText: document.querySelector(`${sel} .run-live-bar`).innerText,
      sideways: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    };
  }, { q: question, sel: article });
  return { ...opened, runId, article, seen };
}

test("a live run keeps a status bar in view at the bottom; on a phone its question shows once and nothing scrolls sideways", { skip }, async () => {
  for (const [where, viewport] of [["phone", { width: 390, height: 844 }], ["desk", { width: 1400, height: 900 }]]) {
    const question = `How should a small team roll out on-call duty (${where})?`;
    const { page, errors, context, runId, article, seen } = await scrolledLiveRun(viewport, question);
    const about = `${where}: ${JSON.stringify(seen)}`;
    assert.ok(seen.tall && seen.scrolled > 0, `the page scrolled; ${about}`);
    // Just below the one-row header, inside the screen: where the run is, the time, Cancel.
    assert.ok(seen.barTop >= seen.topbarBottom - 1 && seen.barTop <= seen.topbarBottom + 2 && seen.barBottom <= viewport.height, `bar in view; ${about}`);
    // Where the run is: its stage, and in a stage of six members how many are done (on a busy
    // machine the run may be at its one-model synthesis by the time the page is measured).
    assert.match(seen.barText, /Stage [1-3] · /, about);
    if (!/Stage 3 · /.test(seen.barText)) assert.match(seen.barText, /[0-6] of 6 models done/, about);
    assert.match(seen.barText, /\d+s/, about);
    assert.equal(await page.isVisible(`${article} .run-live-bar button.live-cancel`), true, `${where}: Cancel within reach`);
    assert.ok(seen.sideways <= 1, `no sideways scroll; ${about}`);
    if (where === "phone") assert.equal(seen.questionShown, 1, `the question once; ${about}`);
    await shot(page, `run-live-bar-${where}`);
    await screenshot(page, `run-live-${where}`);
    await waitRunReady(page, runId, 120000);
    assert.equal(await page.isVisible(`${article} .run-live-bar`), false, `${where}: the bar goes away at the end`);
    if (where === "phone") {
      const after = await page.evaluate((q) => ({
        shown: [...document.querySelectorAll("main .conversation-head, main .run-head")].map((n) => n.innerText).join("\n").split(q).length - 1,
        sideways: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      }), question);
      assert.equal(after.shown, 1, "still once when the run has its title");
      assert.ok(after.sideways <= 1, `finished: ${after.sideways}px sideways`);
      await screenshot(page, "run-finished-phone");
    }
    assert.deepEqual(errors, []);
    await context.close();
  }
});

test("the live bar's Cancel asks first and stops the run", { skip }, async () => {
  const question = "Cancel me from the bar?";
  const { page, errors, context, runId, article } = await scrolledLiveRun({ width: 390, height: 844 }, question);
  await page.click(`${article} .run-live-bar button.live-cancel`);
  assert.equal(await page.isVisible(`${article} .run-live-bar button.confirm-cancel`), true, "the confirmation is in the bar");
  await page.click(`${article} .run-live-bar button.confirm-cancel`);
  await waitRunReady(page, runId);
  assert.equal(await page.getAttribute(article, "data-status"), "cancelled");
  assert.equal(await page.isVisible(`${article} .run-head button.rerun`), true, "Run again is offered");
  assert.deepEqual(errors, []);
  await context.close();
});

test("a used sign-in link and an unknown address answer pages in the app's look", { skip }, async () => {
  for (const viewport of [{ width: 1400, height: 900 }, { width: 390, height: 844 }]) {
    const context = await browser.newContext({ viewport });
    const page = await context.newPage();
    const res = await page.goto(`${base}/login?token=cnv_used`);
    assert.equal(res.status(), 401);
    assert.equal(await page.textContent("h1"), "This sign-in link no longer works");
    assert.match(await page.textContent("main"), /conclave user add YOUR-NAME/);
    // The app's stylesheet applies: its top bar's colour, its card.
    const look = await page.evaluate(() => ({
      bar: getComputedStyle(document.querySelector(".topbar")).backgroundColor,
      sideways: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    }));
    assert.equal(look.bar, "rgb(27, 33, 48)");
    assert.ok(look.sideways <= 1);
    await screenshot(page, `sign-in-link-used-${viewport.width}`);
    const missing = await page.goto(`${base}/nowhere`);
    assert.equal(missing.status(), 404);
    assert.equal(await page.textContent("h1"), "There is no page at this address");
    await screenshot(page, `not-found-${viewport.width}`);
    await context.close();
  }
});

test("signing out says so on the sign-in screen, and an unknown page address says where to go", { skip }, async () => {
  for (const viewport of [{ width: 1400, height: 900 }, { width: 390, height: 844 }]) {
    const { page, errors, context } = await openPage(browser, base, "/#/nowhere", { viewport });
    await page.waitForSelector("main h1");
    assert.equal(await page.textContent("main h1"), "There is no page at this address");
    assert.match(await page.textContent("main .notice-next"), /Go to the dashboard/);
    await screenshot(page, `page-not-found-${viewport.width}`);
    if (viewport.width < 700) await page.click("#menu-toggle");
    await page.click("#sign-out");
    await page.waitForSelector("#sign-in-token");
    assert.match(await page.textContent(".signed-out-note"), /You have signed out/);
    await screenshot(page, `signed-out-${viewport.width}`);
    // A reload later is the plain sign-in screen again.
    await page.reload();
    await page.waitForSelector("#sign-in-token");
    assert.equal(await page.$(".signed-out-note"), null);
    // Signed out, the page's first question (`/api/me`) is answered 401, which Chromium logs.
    assert.deepEqual(errors.filter((e) => !/status of 401/.test(e)), []);
    await context.close();
  }
});
