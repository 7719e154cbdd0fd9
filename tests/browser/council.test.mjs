// The browser page in real headless Chromium against a real server on an ephemeral port:
// a user starts a council, watches it live, a second tab joins the running conversation,
// asks a follow-up and cancels it. Skipped (with a reason) when Chromium is not installed,
// unless CONCLAVE_REQUIRE_BROWSER is set (CI sets it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

const here = dirname(fileURLToPath(import.meta.url));
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const BIN = process.env.CONCLAVE_BIN || join(here, "..", "..", "target", "debug", "conclave");
const missing = !existsSync(CHROMIUM) ? `no Chromium at ${CHROMIUM}` : !existsSync(BIN) ? `no server binary at ${BIN} (run cargo build)` : null;
if (missing && process.env.CONCLAVE_REQUIRE_BROWSER) throw new Error(`browser tests required but ${missing}`);
if (missing) console.log(`skipping browser tests: ${missing}`);

let server, base, browser;

before(async () => {
  if (missing) return;
  const dir = mkdtempSync(join(tmpdir(), "conclave-browser-"));
  server = spawn(BIN, ["serve", "--bind", "127.0.0.1:0"], {
    env: { ...process.env, DATABASE_URL: `sqlite://${join(dir, "b.db")}`, CONCLAVE_SIM_LATENCY_MS: "400", OPENROUTER_API_KEY: "", RUST_LOG: "warn" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  base = await new Promise((resolve, reject) => {
    const rl = createInterface({ input: server.stdout });
    rl.on("line", (line) => { const m = line.match(/http:\/\/[\d.:]+/); if (m) resolve(m[0]); });
    server.on("exit", (code) => reject(new Error(`server exited with ${code}`)));
  });
  const { chromium } = await import("playwright-core");
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (server) server.kill();
});

async function openPage() {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(base + "/");
  await page.waitForSelector("#conn.ok");
  return { page, errors };
}

test("a council runs live in the page, a second tab joins it, a follow-up is cancelled", { skip: missing ?? false }, async () => {
  const { page, errors } = await openPage();
  assert.equal(await page.isVisible("#offline"), true, "the page says the models are simulated");
  await page.fill("#question", "What are the trade-offs between microservices and monoliths?");
  await page.click("#send");
  // Progress per model appears while stage 1 runs.
  await page.waitForSelector(".stage .call.running");
  await page.waitForSelector("#cancel:not([hidden])");

  // A second tab opens the conversation while it runs and follows it live.
  const second = await openPage();
  await second.page.waitForSelector("#conversations li");
  await second.page.click("#conversations li");

  await page.waitForSelector(".final:has-text('Run completed')", { timeout: 30000 });
  const answers = await page.$$eval(".stage >> nth=0 >> details summary", (s) => s.map((x) => x.textContent));
  assert.equal(answers.length, 3, `three answers: ${answers}`);
  assert.equal(await page.$$eval("table tr", (r) => r.length), 4, "aggregate table: header + 3 models");
  const synthesis = await page.textContent(".synthesis .text");
  assert.match(synthesis, /simulated synthesis/);
  await second.page.waitForSelector(".final:has-text('Run completed')", { timeout: 30000 });
  assert.equal(await second.page.textContent(".synthesis .text"), synthesis, "the late tab shows the same synthesis");
  await page.waitForFunction(() => [...document.querySelectorAll("#conversations li")].some((li) => li.textContent !== "(untitled)"));

  // A follow-up in the same conversation, cancelled mid-flight.
  await page.fill("#question", "How does this apply to a team of 5?");
  await page.click("#send");
  await page.waitForSelector(".turn:nth-child(2) .call.running");
  await page.click("#cancel");
  await page.waitForSelector(".turn:nth-child(2) .final:has-text('cancelled')", { timeout: 5000 });
  assert.equal(await page.$$eval(".turn", (t) => t.length), 2);
  const res = await fetch(`${base}/api/conversations`);
  const { conversations } = await res.json();
  assert.equal(conversations.length, 1, "the follow-up stayed in the conversation");
  assert.deepEqual(errors, []);
  assert.deepEqual(second.errors, []);
  await page.screenshot({ path: join(tmpdir(), "conclave-council.png"), fullPage: true });
});
