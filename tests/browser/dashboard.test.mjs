// The dashboard, reconnection, history, safety and accessibility of the client in real
// headless Chromium against a real server:
// - two people's dashboards update live; one cancels a run from the dashboard, both see it end;
// - a dropped socket reconnects by itself and resumes without a gap or a repeated event, and the
//   streamed text is neither lost nor doubled; a page reloaded mid-run rebuilds the same view;
// - hostile model output (script tags, event handlers, javascript: links) executes nothing;
// - history search by title; the form's own and the server's validation errors by their field;
// - phone-sized, dark, keyboard-only and screen-reader use.
import { test } from "node:test";
import assert from "node:assert/strict";
import { skip, openPage, startRest, waitRunReady, runText, screenshot, useServer, api } from "./harness.mjs";

let server, browser;
useServer({ latencyMs: 1200 }, (env) => ({ server, browser } = env));

/** The seqs of a finished run's durable events (all but `token`), read over SSE as curl would. */
async function storedSeqs(runId) {
  const text = await (await api(`${server.base}/api/deliberations/${runId}/events`)).text();
  const blocks = text.split(/\n\n/).map((b) => ({ id: (b.match(/^id: ?(\d+)$/m) || [])[1], event: (b.match(/^event: ?(\S+)$/m) || [])[1] }));
  return blocks.filter((b) => b.id && b.event !== "token").map((b) => Number(b.id));
}

test("two dashboards update live and a run is cancelled from one of them", { skip }, async () => {
  const a = await openPage(browser, server.base, "/");
  const b = await openPage(browser, server.base, "/");
  const run = await startRest(server.base, { mode: "debate", question: "Should companies adopt a 4-day work week?" });
  for (const p of [a.page, b.page]) {
    await p.waitForSelector(`#live-runs [data-run="${run.runId}"]`);
    // Per-model progress chips of the stage under way, and the mode.
    await p.waitForSelector(`#live-runs [data-run="${run.runId}"] .chip-call.running`);
  }
  const row = await a.page.textContent(`#live-runs [data-run="${run.runId}"]`);
  assert.match(row, /Debate/);
  assert.match(row, /4-day work week/);
  assert.match(row, /elapsed/);
  await screenshot(a.page, "dashboard-live");
  await a.page.click(`#live-runs [data-run="${run.runId}"] button.cancel`);
  for (const p of [a.page, b.page]) {
    await p.waitForSelector(`#recent-runs [data-run="${run.runId}"][data-status="cancelled"]`, { timeout: 5000 });
    assert.equal(await p.$(`#live-runs [data-run="${run.runId}"]`), null);
  }
  const stored = await (await api(`${server.base}/api/deliberations/${run.runId}`)).json();
  assert.equal(stored.status, "cancelled");
  assert.deepEqual(a.errors, []);
  assert.deepEqual(b.errors, []);
});

test("a dropped connection resumes without gaps or repeats, and a reload mid-run rebuilds the same view", { skip }, async () => {
  const { page, errors } = await openPage(browser, server.base, "/#/new/council");
  await page.fill("#f-council-question", "Why is the sky blue?");
  await page.click("button.start");
  await page.waitForSelector("article.run[data-run]");
  const runId = await page.$eval("article.run", (n) => n.dataset.run);
  // Record every token delta per call, and each stage's final texts, as the page receives them.
  await page.evaluate((run) => {
    window.__streamed = {};
    window.__final = {};
    conclave.conn.feed(run).subscribe((ev) => {
      if (ev.event === "token") window.__streamed[ev.data.key] = (window.__streamed[ev.data.key] || "") + ev.data.delta;
      if (ev.event === "call_start") window.__final[ev.data.key] = ev.data.model;
      if (ev.event === "stage1_complete") window.__stage1 = ev.data.data;
    });
  }, runId);
  // Drop the socket while stage 1 streams.
  await page.waitForFunction(() => Object.values(window.__streamed).some((t) => t.length > 10), null, { timeout: 15000 });
  // Record what the connection pill says from here on, then drop the socket.
  await page.evaluate(() => {
    window.__pill = [];
    new MutationObserver(() => window.__pill.push(document.querySelector("#conn").textContent))
      .observe(document.querySelector("#conn"), { childList: true, characterData: true, subtree: true });
    conclave.conn.drop();
  });
  await page.waitForFunction(() => window.__pill.includes("reconnecting…") && document.querySelector("#conn.ok"), null, { timeout: 10000 });
  const pill = await page.evaluate(() => window.__pill);
  assert.deepEqual(pill.slice(pill.indexOf("reconnecting…")), ["reconnecting…", "live"], "the pill said so, then recovered");

  // A second person reloads their page mid-run.
  const other = await openPage(browser, server.base, `/#/run/${runId}`);
  await other.page.waitForSelector(`article.run[data-run="${runId}"] .chip-call`);
  await other.page.reload();
  await other.page.waitForSelector("#conn.ok");

  await waitRunReady(page, runId, 60000);
  await waitRunReady(other.page, runId, 60000);
  const seen = await page.evaluate((run) => conclave.conn.feed(run).events.map((e) => e.seq), runId);
  assert.deepEqual(seen, await storedSeqs(runId), "every stored event, once, in order");
  assert.equal(await page.evaluate(() => conclave.conn.duplicates), 0, "the server resumed exactly after the last event");
  assert.equal(await page.evaluate(() => conclave.conn.reconnects), 1);
  // Streamed text survived the drop: each answer's deltas add up to the answer, once.
  const { streamed, final, stage1 } = await page.evaluate(() => ({ streamed: window.__streamed, final: window.__final, stage1: window.__stage1 }));
  const stage1Keys = Object.keys(final).filter((k) => k.startsWith("stage1:"));
  assert.equal(stage1Keys.length, 3);
  for (const key of stage1Keys) {
    const answer = stage1.find((r) => r.model === final[key]);
    assert.equal(streamed[key], answer.response, `${key} streamed exactly its answer`);
  }
  assert.equal(await runText(other.page, runId), await runText(page, runId));
  assert.deepEqual(errors, []);
  assert.deepEqual(other.errors, []);
});

test("hostile model output executes nothing", { skip }, async () => {
  const xss = ["sim/xss1", "sim/xss2", "sim/xss3"];
  const requests = [
    { mode: "council", question: "Render this", councilModels: xss, chairmanModel: "sim/xss1" },
    { mode: "vote", question: "Render this", modeConfig: { models: xss, chairmanModel: "sim/xss1" } },
    { mode: "jury", question: "Evaluate", modeConfig: { content: "<script>window.__xss=1</script> content", jurorModels: xss, foremanModel: "sim/xss4" } },
    { mode: "debate", question: "Render this", modeConfig: { models: xss } },
    { mode: "delphi", question: "How many <img src=x onerror=window.__xss=1> moons?", modeConfig: { panelistModels: xss, facilitatorModel: "sim/xss4", maxRounds: 2 } },
    { mode: "clarity", modeConfig: { content: "A brief <svg onload=window.__xss=1>", models: { skeptic: "sim/xss1", advocate: "sim/xss2", generalist: "sim/xss3", arbiter: "sim/xss4" }, discussion: "always" } },
  ];
  const runs = [];
  for (const r of requests) runs.push(await startRest(server.base, r));
  const { page, errors } = await openPage(browser, server.base, "/");
  for (const run of runs) {
    await page.goto(`${server.base}/#/run/${run.runId}`);
    await waitRunReady(page, run.runId, 90000);
    const stored = await (await api(`${server.base}/api/deliberations/${run.runId}`)).json();
    assert.equal(stored.status, "completed", `${run.mode}: ${stored.error}`);
    const body = await page.$eval("main", (m) => m.innerText);
    assert.match(body, /click me|hover|link/, `${run.mode}: the hostile text is shown as text`);
    // Fire at everything a handler could hide on, as a pointer, a load or an error would.
    await page.evaluate(() => {
      for (const n of document.querySelectorAll("main .md *")) {
        for (const type of ["mouseover", "mouseenter", "click", "focus", "load", "error"]) n.dispatchEvent(new Event(type, { bubbles: true }));
      }
    });
    for (const a of await page.$$("main .md a")) {
      if (await a.isVisible()) await a.click({ noWaitAfter: true, timeout: 2000 }).catch(() => {});
    }
    const found = await page.evaluate(() => ({
      xss: window.__xss,
      dangerous: document.querySelectorAll("main script, main iframe, main img, main svg, main object, main embed, main [onerror], main [onclick], main [onmouseover], main [onload]").length,
      jsLinks: [...document.querySelectorAll("main a")].filter((a) => /^\s*javascript:/i.test(a.getAttribute("href") || "")).length,
    }));
    assert.deepEqual(found, { xss: undefined, dangerous: 0, jsLinks: 0 }, run.mode);
  }
  // Links that opened new pages (none should have) would show up here.
  assert.equal(page.context().pages().length, 1);
  // CSP refusals are logged as console errors: there must be none, nothing even tried to run.
  assert.deepEqual(errors, []);
});

test("history finds conversations by title and reopens them", { skip }, async () => {
  const first = await startRest(server.base, { mode: "vote", question: "Which database should a team of five use?" });
  const second = await startRest(server.base, { mode: "council", question: "Is Pluto a planet?" });
  const { page, errors } = await openPage(browser, server.base, `/#/run/${second.runId}`);
  await waitRunReady(page, second.runId, 60000);
  await page.goto(`${server.base}/#/run/${first.runId}`);
  await waitRunReady(page, first.runId, 60000);
  const convs = await (await api(`${server.base}/api/conversations`)).json();
  const pluto = convs.conversations.find((c) => c.id === second.conversationId);
  assert.ok(pluto.title, "titled");
  const word = pluto.title.split(/\s+/).find((w) => w.length > 3);
  await page.click('[data-nav="history"]');
  await page.waitForSelector("#history-list [data-conversation]");
  await page.fill("#history-search", word);
  await page.waitForFunction((id) => {
    const rows = document.querySelectorAll("#history-list [data-conversation]");
    return [...rows].some((r) => r.dataset.conversation === id) && ![...rows].some((r) => r.dataset.conversation !== id && /database/i.test(r.textContent));
  }, second.conversationId);
  assert.match(page.url(), new RegExp(`#/history\\?q=${encodeURIComponent(word)}`));
  await page.fill("#history-search", "zzz-no-such-title");
  await page.waitForSelector("#history-list .empty");
  await page.fill("#history-search", word);
  // Each conversation shows how its latest run ended, in its mode's terms.
  const stored = await (await api(`${server.base}/api/deliberations/${second.runId}`)).json();
  assert.ok(stored.outcome, "a completed run has an outcome");
  assert.equal(await page.textContent(`#history-list [data-conversation="${second.conversationId}"] .outcome-line`), stored.outcome);
  await page.click(`#history-list [data-conversation="${second.conversationId}"] a`);
  await waitRunReady(page, second.runId);
  assert.match(await page.textContent("main h1"), new RegExp(word));
  // The dashboard's recent runs show the same line.
  await page.click('[data-nav="dashboard"]');
  await page.waitForSelector(`#recent-runs [data-run="${second.runId}"] .outcome-line`);
  assert.equal(await page.textContent(`#recent-runs [data-run="${second.runId}"] .outcome-line`), stored.outcome);
  assert.deepEqual(errors, []);
});

test("the form checks counts and roles before sending and shows the server's errors by field", { skip }, async () => {
  const { page, errors } = await openPage(browser, server.base, "/#/new/council");
  // Count the start messages the page sends.
  const countStarts = () => page.evaluate(() => {
    if (window.__starts === undefined) {
      window.__starts = 0;
      const send = conclave.conn.send.bind(conclave.conn);
      conclave.conn.send = (m) => { if (m.type === "start") window.__starts += 1; return send(m); };
    }
    return window.__starts;
  });
  await countStarts();
  await page.click("button.start");
  assert.match(await page.textContent('[data-field="question"] .field-error'), /required/);
  assert.equal(await page.evaluate(() => document.activeElement.id), "f-council-question", "focus moves to the first error");
  await page.fill("#f-council-question", "q?");
  // Remove models until one is left: the council needs 2 to 6.
  await page.click('[data-field="councilModels"] .chip button');
  await page.click('[data-field="councilModels"] .chip button');
  await page.click("button.start");
  assert.match(await page.textContent('[data-field="councilModels"] .field-error'), /2 to 6/);
  assert.equal(await page.getAttribute("#f-council-councilModels", "aria-invalid"), "true");
  assert.equal(await countStarts(), 0, "nothing was sent");
  // A model id nothing can serve: the server names the field, the page shows it there.
  await page.fill("#f-council-councilModels", "nokey/model");
  await page.keyboard.press("Enter");
  await page.click("button.start");
  await page.waitForFunction(() => /no provider serves model "nokey\/model"/.test(document.querySelector('[data-field="councilModels"] .field-error').textContent));
  assert.equal(await countStarts(), 1);
  // The jury form refuses a foreman who sits on the jury.
  await page.goto(`${server.base}/#/new/jury`);
  await page.waitForSelector("form[data-mode=jury]");
  await page.fill("#f-jury-question", "Evaluate");
  await page.fill("#f-jury-modeConfig-content", "Some content");
  await page.fill("#f-jury-modeConfig-foremanModel", "sim/alpha");
  await page.click("button.start");
  assert.match(await page.textContent('[data-field="modeConfig.foremanModel"] .field-error'), /cannot also be a juror/);
  assert.equal(await countStarts(), 1, "the jury form sent nothing");
  assert.deepEqual(errors, []);
});

test("phone-sized, dark, keyboard and screen-reader use", { skip }, async () => {
  const run = await startRest(server.base, { mode: "jury", question: "Evaluate the docs", modeConfig: { content: "## GET /users\nLists users." } });
  const { page, errors } = await openPage(browser, server.base, "/", { viewport: { width: 390, height: 844 }, colorScheme: "dark" });
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.notEqual(bg, "rgb(244, 245, 248)", "dark palette in dark mode");
  await page.goto(`${server.base}/#/run/${run.runId}`);
  await waitRunReady(page, run.runId, 60000);
  const overflow = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `no sideways scrolling on a phone (${overflow}px)`);
  await screenshot(page, "phone-dark-jury");
  for (const path of ["/", "/#/new/council", "/#/new/jury", "/#/new/delphi", "/#/new/clarity", "/#/history", "/#/reviews"]) {
    await page.goto(server.base + path);
    await page.waitForSelector("main h1");
    const overflowHere = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
    assert.ok(overflowHere <= 1, `${path}: ${overflowHere}px sideways`);
    // Every control has an accessible name.
    const unnamed = await page.evaluate(() => [...document.querySelectorAll("input, select, textarea, button")].filter((c) => {
      if (c.type === "hidden" || c.closest("[hidden]")) return false;
      const id = c.id && document.querySelector(`label[for="${c.id}"]`);
      return !(id || c.closest("label") || c.getAttribute("aria-label") || c.getAttribute("aria-labelledby") || (c.tagName === "BUTTON" && c.textContent.trim()));
    }).map((c) => c.outerHTML.slice(0, 80)));
    assert.deepEqual(unnamed, [], path);
  }
  await screenshot(page, "phone-dark-reviews");
  // Keyboard only: from a freshly loaded page, Tab reaches the navigation and Enter follows it;
  // the new view's heading then has the focus, so a screen reader announces where it landed.
  await page.goto(server.base + "/");
  await page.reload();
  await page.waitForSelector("main h1");
  // On a phone the header is one row; its menu button opens the navigation.
  const header = await page.evaluate(() => document.querySelector(".topbar").getBoundingClientRect().height);
  assert.ok(header <= 64, `a one-row header on a phone (${header}px)`);
  assert.equal(await page.isVisible('[data-nav="new"]'), false, "the menu starts closed");
  let reached = false;
  for (let i = 0; i < 12 && !reached; i++) {
    await page.keyboard.press("Tab");
    const at = await page.evaluate(() => ({ id: document.activeElement.id, expanded: document.activeElement.getAttribute("aria-expanded") }));
    if (at.id === "menu-toggle" && at.expanded === "false") await page.keyboard.press("Enter");
    reached = await page.evaluate(() => document.activeElement.dataset.nav === "new");
  }
  assert.ok(reached, "Tab reaches the menu and 'New deliberation' in it");
  await page.keyboard.press("Enter");
  await page.waitForSelector("form[data-mode=council]");
  assert.equal(await page.evaluate(() => document.activeElement.textContent), "New deliberation");
  assert.equal(await page.evaluate(() => document.activeElement.tagName), "H1");
  assert.equal(await page.getAttribute("#menu-toggle", "aria-expanded"), "false", "following a link closes the menu");
  // Live regions: the connection state and progress announcements.
  assert.equal(await page.getAttribute("#conn", "aria-live"), "polite");
  assert.equal(await page.getAttribute("#announcer", "aria-live"), "polite");
  assert.deepEqual(errors, []);
});
