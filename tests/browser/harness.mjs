// Shared by the browser tests: a real server (the binary `cargo test` built) on an ephemeral
// port with its own SQLite file and sim models, and real headless Chromium (Debian's package)
// driven by playwright-core (the binary under $CARGO_TARGET_DIR when that is set, as `.ci/run`
// sets it). Tests skip with a reason when Chromium or the binary is missing,
// unless CONCLAVE_REQUIRE_BROWSER is set (CI sets it). Screenshots go to
// target/browser-artifacts/ so a person can look at them.
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { before, after } from "node:test";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
export const BIN = process.env.CONCLAVE_BIN
  || join(process.env.CARGO_TARGET_DIR || join(root, "target"), "debug", "conclave");
export const ARTIFACTS = process.env.CONCLAVE_ARTIFACTS || join(root, "target", "browser-artifacts");

export const missing = !existsSync(CHROMIUM) ? `no Chromium at ${CHROMIUM}`
  : !existsSync(BIN) ? `no server binary at ${BIN} (run cargo build)` : null;
if (missing && process.env.CONCLAVE_REQUIRE_BROWSER) throw new Error(`browser tests required but ${missing}`);
if (missing) console.log(`skipping browser tests: ${missing}`);
export const skip = missing ?? false;

/**
 * Starts a server; resolves with `{base, proc, stop(), token, users, loginLink}`. An admin
 * `tester` is made first with the CLI (`token` is its API token) and `users` more
 * (`{name: token}`), unless `fresh` is set: then the server starts with no account and prints
 * its one-time sign-in link (`loginLink`).
 */
export async function startServer({ latencyMs = 400, env = {}, fresh = false, users = [], config = "" } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "conclave-browser-"));
  // The tests start many runs as one user: lift the per-user limits (their own tests are in Rust).
  writeFileSync(join(dir, "conclave.toml"), "max_runs_per_user = 1000\nmax_starts_per_minute = 100000\n" + config);
  const fullEnv = { ...process.env, CONCLAVE_CONFIG: join(dir, "conclave.toml"), DATABASE_URL: `sqlite://${join(dir, "b.db")}`, CONCLAVE_SIM_LATENCY_MS: String(latencyMs), OPENROUTER_API_KEY: "", RUST_LOG: "warn", ...env };
  const addUser = (name, admin) => execFileSync(BIN, ["user", "add", name, ...(admin ? ["--admin"] : [])], { env: fullEnv, stdio: ["ignore", "pipe", "ignore"] }).toString().trim();
  const token = fresh ? null : addUser("tester", true);
  const tokens = {};
  for (const name of users) tokens[name] = addUser(name, false);
  const serve = (bind) => spawn(BIN, ["serve", "--bind", bind], { env: fullEnv, stdio: ["ignore", "pipe", "inherit"] });
  const proc = serve("127.0.0.1:0");
  const { base, loginLink } = await new Promise((resolve, reject) => {
    const rl = createInterface({ input: proc.stdout });
    let base = null;
    rl.on("line", (line) => {
      const link = line.match(/http:\/\/[\d.:]+\/login\?token=\S+/);
      if (link) return resolve({ base, loginLink: link[0] });
      const m = line.match(/http:\/\/[\d.:]+/);
      if (m && !base) {
        base = m[0];
        if (!fresh) resolve({ base, loginLink: null });
      }
    });
    proc.on("exit", (code) => reject(new Error(`server exited with ${code}`)));
  });
  const server = { base, proc, token, users: tokens, loginLink };
  server.stop = () => server.proc.kill();
  /** `kill -9`, then the server again on the same port and database; resolves once it listens. */
  server.crash = async () => {
    const dead = new Promise((resolve) => server.proc.once("exit", resolve));
    server.proc.kill("SIGKILL");
    await dead;
    server.proc = serve(base.replace("http://", ""));
    await new Promise((resolve, reject) => {
      const rl = createInterface({ input: server.proc.stdout });
      rl.on("line", (line) => { if (line.includes(base)) resolve(); });
      server.proc.on("exit", (code) => reject(new Error(`server exited with ${code}`)));
    });
  };
  return server;
}

/** Signs a browser context in with an API token (the session cookie lands in its jar). */
export async function signIn(context, base, token) {
  const res = await context.request.post(`${base}/api/session`, { data: { token } });
  if (!res.ok()) throw new Error(`sign-in failed: ${res.status()}`);
}

/**
 * One server and one browser for a test file: started before its tests (unless skipped),
 * stopped after them. `ready({server, base, browser})` hands them to the file.
 */
export function useServer(options, ready) {
  let server, browser;
  before(async () => {
    if (skip) return;
    server = await startServer(options);
    browser = await launch();
    current = server;
    ready({ server, base: server.base, browser });
  });
  after(async () => {
    if (browser) await browser.close();
    if (server) server.stop();
  });
}

export async function launch() {
  const { chromium } = await import("playwright-core");
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/** The server of the running test file (for signing new contexts in). */
let current = null;

/**
 * A page (in a fresh browser context unless `context` is given) that records page errors and
 * console errors, opened at `base + path` once the socket is live. A fresh context is signed
 * in as `as` (a token; the file's admin `tester` by default).
 */
export async function openPage(browser, base, path = "/", { viewport = { width: 1280, height: 900 }, context, colorScheme, as } = {}) {
  const ctx = context || await browser.newContext({ viewport, colorScheme });
  if (!context) await signIn(ctx, base, as || current.token);
  const page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(base + path);
  await page.waitForSelector("#conn.ok");
  return { page, errors, context: ctx };
}

/** `fetch` signed in as the file's admin (or `token`). */
export function api(url, opts = {}, token = current && current.token) {
  return fetch(url, { ...opts, headers: { ...(opts.headers || {}), authorization: `Bearer ${token}` } });
}

/** Starts a run over REST (as another client would); resolves with the 202 body. */
export async function startRest(base, request, token) {
  const res = await api(`${base}/api/deliberations`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request) }, token);
  const body = await res.json();
  if (res.status !== 202) throw new Error(`start failed: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/** Waits until the run view of `runId` has ended and loaded its stored result. */
export async function waitRunReady(page, runId, timeout = 60000) {
  await page.waitForSelector(`article.run[data-run="${runId}"][data-ready="true"]`, { timeout });
}

/** The visible text of a run view, minus what changes with the clock. */
export async function runText(page, runId) {
  return page.$eval(`article.run[data-run="${runId}"]`, (n) => n.innerText.replace(/\S+( \S+)? elapsed/g, "elapsed"));
}

/** The shots the README shows, refreshed by `CONCLAVE_README_SHOTS=docs/screenshots node --test …`. */
const README_SHOTS = new Set(["dashboard-live", "council-live", "jury-finished", "shared-fact_check", "eval-running"]);

export async function screenshot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  // From the top, so the sticky bar sits where it belongs in a full-page shot.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path, fullPage: true });
  // The README's copy is the first screen, as a person sees it on opening the page.
  const readme = process.env.CONCLAVE_README_SHOTS;
  if (readme && README_SHOTS.has(name)) {
    mkdirSync(readme, { recursive: true });
    await page.screenshot({ path: join(readme, `${name}.png`) });
  }
  return path;
}

/** A stored run opened at a phone's width (390 px) and ready; `overflow`: how many pixels the
 *  page scrolls sideways (a phone layout has none). */
export async function openOnPhone(browser, base, runId) {
  const opened = await openPage(browser, base, `/#/run/${encodeURIComponent(runId)}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(opened.page, runId);
  const overflow = await opened.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  return { ...opened, overflow };
}

// Words for people (words.test.mjs, structured_words.test.mjs).
// What must never show, each with why.
export const PROTOCOL = [
  [/\b(stage[1-3]|round1)\b/, "a stage id"],
  [/\b[a-z]+_(start|complete|detected|declared|reached)\b/, "an event name"],
  [/\b[a-z]+(?:[A-Z][a-z0-9]+)+\b/, "a camelCase field name"],
  [/\b(?:[A-Z]{3,}[ _])*[A-Z]{3,}:/, "a raw format label"],
  [/\[object Object\]|\bundefined\b|\bNaN\b|\bnull\b/, "a programming value"],
  [/WebSocket|\bwatcher\b|\bpayload\b/i, "a transport word"],
];

export function offending(text) {
  const found = [];
  for (const [re, what] of PROTOCOL) {
    const all = [...text.matchAll(new RegExp(re.source, re.flags.includes("g") ? re.flags : re.flags + "g"))];
    // Each with where it stands, so a failure says where to look.
    const seen = [...new Set(all.map((m) => JSON.stringify(text.slice(Math.max(0, m.index - 30), m.index + m[0].length + 20))))];
    if (all.length) found.push(`${what}: ${seen.slice(0, 4).join(" · ")}`);
  }
  return found;
}

/**
 * The page's text as a person reads it, with every fold and "show more" opened: each visible
 * text node as written (a label the style shows in capitals is not a format label).
 */
export async function everything(page) {
  return page.evaluate(() => {
    document.querySelectorAll("details").forEach((d) => { d.open = true; });
    document.querySelectorAll(".clip").forEach((c) => c.classList.add("expanded"));
    const out = [];
    const walk = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      const p = n.parentElement;
      if (!n.textContent.trim() || !p || p.closest("script, style, datalist") || !p.checkVisibility()) continue;
      out.push(n.textContent);
    }
    return out.join("\n");
  });
}
