// The Brainstorm view in headless Chromium against a real server with sim models: a run started
// through the form (only a challenge), each model's ideas, the clusters with their ideas and
// every scorer's ratings with the averages, the ranking and how it was decided, the ideas left
// out of every cluster, and the proposal naming its cluster with a button that jumps to it;
// checked against the stored result, reopened in a fresh page that must read the same, and read
// at a phone's width. A dead curator, and hostile model output, are shown as such and inert.
// Screenshots go to the artifacts folder.
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

const fmt = (v) => Number(v).toFixed(2).replace(/\.00$/, "");
const PROTOCOL = /cluster_\d|model_\d+_idea|rankingMethod|scoringSkipped|decidedBy|averageScore|single_cluster|sourceLabel/;

test("a brainstorm from the form shows ideas, scored clusters, the ranking and the proposal linked to its cluster, live and reopened", { skip }, async () => {
  const { page, errors } = await openPage(browser, base, "/#/new/brainstorm");
  await page.waitForSelector("#f-brainstorm-question");
  await page.fill("#f-brainstorm-question", "How could a small city library attract more teenagers?");
  await screenshot(page, "brainstorm-form");
  await page.click("button.start");
  await page.waitForURL(/#\/run\/.+/);
  const id = decodeURIComponent(page.url().split("#/run/")[1]);
  // Live: the clusters are on the page before the proposal is written.
  await page.waitForSelector(".bs-cluster", { timeout: 30000 });
  await waitRunReady(page, id);
  const d = await detail(id);
  assert.equal(d.status, "completed", JSON.stringify(d));
  const r = d.result;
  const ideas = new Map(r.ideas.models.flatMap((m) => m.ideas).map((i) => [i.id, i]));
  assert.ok(ideas.size >= 10, `${ideas.size} ideas`);
  // Every cluster's box: its name, its ideas, one row per scorer and the averages.
  const clusters = r.clustering.clusters;
  const boxes = await page.$$eval(".bs-cluster:not(.bs-unclustered)", (n) => n.map((x) => x.textContent));
  assert.equal(boxes.length, clusters.length);
  for (const c of clusters) {
    const box = boxes.find((t) => t.includes(c.name));
    assert.ok(box, `a box for ${c.name}`);
    for (const i of c.ideaIds) assert.ok(box.includes(ideas.get(i).title), `${c.name} holds ${ideas.get(i).title}`);
    assert.ok(box.includes(`promise: ${c.promise.toLowerCase()}`), box);
    for (const s of r.scores) assert.ok(box.includes(s.model), `${c.name} shows ${s.model}'s ratings`);
    const rank = r.ranking.rankedClusters.find((x) => x.id === c.id);
    assert.ok(box.includes(`#${rank.rank}`), box);
    if (rank.averageScore != null) assert.ok(box.includes(`Average${fmt(rank.averageNovelty)}${fmt(rank.averageFeasibility)}${fmt(rank.averageImpact)}${fmt(rank.averageScore)}`), box);
  }
  // The clusters stand in rank order, the first the one the proposal develops.
  const ranks = await page.$$eval(".bs-cluster:not(.bs-unclustered) .bs-cluster-head .bs-rank", (n) => n.map((x) => Number(x.textContent.replace("#", ""))));
  assert.deepEqual(ranks, [...ranks].sort((a, b) => a - b), `clusters in rank order: ${ranks}`);
  assert.equal(ranks.length, clusters.length);
  // A model's card names its anonymous label once (as its role), not after each idea.
  for (const m of r.ideas.models.filter((x) => x.ideaCount > 0)) {
    const card = page.locator(".model-card:has(.bs-ideas)").filter({ hasText: m.ideas[0].title }).first();
    assert.equal(await card.count(), 1, `${m.model}: a card of ideas`);
    assert.equal(await card.locator(".bs-source").count(), 0, `${m.model}'s card repeats no label`);
  }
  // The ideas left out of every cluster are listed under their own heading.
  if (r.clustering.unclusteredIds.length) {
    const left = await page.textContent(".bs-unclustered");
    for (const i of r.clustering.unclusteredIds) assert.ok(left.includes(ideas.get(i).title), left);
  }
  // The ranking in order, and how it was decided.
  const order = await page.$$eval(".bs-ranking li .bs-link", (n) => n.map((x) => x.textContent));
  const names = r.ranking.rankedClusters.map((x) => x.name);
  assert.deepEqual(order, names);
  const how = await page.textContent(".bs-ranking");
  assert.ok(r.ranking.rankingMethod === "scores" ? how.includes("average total") : how.includes("promise"), how);
  // The proposal names the cluster it came from; the button jumps there.
  const primary = await page.textContent(".primary");
  const winner = clusters.find((c) => c.id === r.refinement.clusterId);
  assert.ok(primary.includes(`Developed from the cluster ${winner.name}`), primary);
  assert.ok(primary.includes("Executive Summary"), primary);
  await page.click(".bs-proposal .bs-from .bs-link");
  const focused = await page.evaluate(() => document.activeElement && document.activeElement.textContent);
  assert.ok(focused.includes(winner.name) && focused.includes("#1"), focused);
  assert.ok(!PROTOCOL.test(await runText(page, id)), "no protocol words");
  await screenshot(page, "brainstorm-run");
  const live = await runText(page, id);

  const fresh = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`);
  await waitRunReady(fresh.page, id);
  assert.equal(await runText(fresh.page, id), live, "the reopened run reads the same as the live one");
  const phone = await openPage(browser, base, `/#/run/${encodeURIComponent(id)}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(phone.page, id);
  await screenshot(phone.page, "brainstorm-run-phone");
  const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 1, `no sideways scroll on a phone (${overflow}px)`);
  assert.deepEqual(errors, []);
  assert.deepEqual(fresh.errors, []);
  assert.deepEqual(phone.errors, []);
});

test("a curator that fails leaves the refiner every idea, and the page says so", { skip }, async () => {
  const started = await startRest(base, { mode: "brainstorm", question: "How could a museum reach more families?",
    modeConfig: { models: ["sim/alpha", "sim/fail-2", "sim/gamma", "sim/beta"], curatorModel: "sim/fail-curator" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  const d = await detail(started.runId);
  assert.equal(d.status, "completed");
  const text = await runText(page, started.runId);
  assert.ok(text.includes("The curator (sim/fail-curator) failed"), text);
  assert.ok(text.includes("Developed from all the ideas"), text);
  assert.ok(text.includes("sim/fail-2 failed"), text);
  assert.equal(await page.$$eval(".bs-cluster", (n) => n.length), 0);
  assert.ok(!PROTOCOL.test(text), "no protocol words");
  await screenshot(page, "brainstorm-curator-failed");
  assert.deepEqual(errors, []);
});

test("hostile markup from the models is shown inert in ideas, clusters, scores and the proposal", { skip }, async () => {
  const started = await startRest(base, { mode: "brainstorm", question: "How should a page show model output?",
    modeConfig: { models: ["sim/xss-a", "sim/xss-b", "sim/xss-c"], curatorModel: "sim/xss-d", refinerModel: "sim/xss-e" } });
  const { page, errors } = await openPage(browser, base, `/#/run/${encodeURIComponent(started.runId)}`);
  await waitRunReady(page, started.runId);
  assert.equal((await detail(started.runId)).status, "completed");
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const live = await page.$$eval(`article.run script, article.run img[onerror], article.run a[href^="javascript:"], article.run iframe, article.run [onclick]`, (n) => n.length);
  assert.equal(live, 0, "no live hostile element in the run view");
  assert.ok(await page.$$eval(".bs-cluster", (n) => n.length) > 0);
  assert.deepEqual(errors, []);
});
