// Attached files in the browser, against a real server with sim models:
// - on the Solo form a Markdown file, an image and a file the server refuses are attached with
//   the picker; the refusal shows in words on its chip and holds Start until it is removed; the
//   run (model sim/reader, which says what files it was given) shows the files as chips, its
//   answer says the file reached the model, and a chip opens a preview of the text the model
//   read (Escape closes it) or of the image;
// - a file dropped on the drop zone (a synthetic drop with a DataTransfer) becomes a chip;
//   Start waits, disabled with a note, while it uploads; the form reads well at a phone's width;
// - a Jury with a file and no content is not refused by the form (the server fills it);
// - a follow-up in a conversation takes a file too;
// - a share link of the run shows the chips and their previews to a reader never signed in.
import { test } from "node:test";
import assert from "node:assert/strict";
import { deflateSync } from "node:zlib";
import { skip, openPage, startRest, waitRunReady, screenshot, useServer, api, offending } from "./harness.mjs";

let server, browser;
useServer({ latencyMs: 50 }, (env) => ({ server, browser } = env));

const NOTES = "# Notes\n\nThe launch moves to **Tuesday**.\n<b>not markup</b> & fine.\n- item one\n";
const notes = { name: "notes.md", mimeType: "text/markdown", buffer: Buffer.from(NOTES) };
// A ZIP (as a .docx is): its bytes are not text.
const report = { name: "report.docx", mimeType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  buffer: Buffer.concat([Buffer.from("PK\x03\x04"), Buffer.from([0x14, 0x00, 0x06, 0x00, 0x08, 0x00, 0xff, 0xfe, 0xc3, 0x28, 0x80, 0x81])]) };

/** A PNG of `w`×`h` pixels: a colour gradient (so a screenshot shows it). */
function png(w, h) {
  const crcTable = Array.from({ length: 256 }, (_, n) => { let c = n; for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1; return c >>> 0; });
  const crc = (buf) => { let c = 0xffffffff; for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8); return (c ^ 0xffffffff) >>> 0; };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const c = Buffer.alloc(4); c.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, c]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4); ihdr[8] = 8; ihdr[9] = 2;
  const rows = [];
  for (let y = 0; y < h; y++) {
    const row = Buffer.alloc(1 + w * 3);
    for (let x = 0; x < w; x++) { row[1 + x * 3] = Math.round(255 * x / w); row[2 + x * 3] = Math.round(255 * y / h); row[3 + x * 3] = 180; }
    rows.push(row);
  }
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr), chunk("IDAT", deflateSync(Buffer.concat(rows))), chunk("IEND", Buffer.alloc(0))]);
}
const picture = { name: "chart.png", mimeType: "image/png", buffer: png(240, 140) };

// A refused upload is a 400 the browser logs as a failed load: expected where a file is refused.
const REFUSED_LOAD = /^Failed to load resource: the server responded with a status of (400|413)/;
const realErrors = (errors) => errors.filter((e) => !REFUSED_LOAD.test(e));

const chip = (name, state = "") => `.attach-area .attach-chip[data-name="${name}"]${state ? `[data-state="${state}"]` : ""}`;

/** Opens a mode's form and waits until it is drawn. */
/** The text an open preview shows once its file has loaded (it says "Loading…" until then). */
async function previewText(page) {
  await page.waitForFunction(() => { const p = document.querySelector("dialog.attach-preview[open] pre"); return p && p.textContent !== "Loading…"; });
  return page.textContent("dialog.attach-preview pre");
}

async function openForm(mode, opts) {
  const opened = await openPage(browser, server.base, `/#/new/${mode}`, opts);
  await opened.page.waitForSelector(`form[data-mode="${mode}"] .attach-area`);
  return opened;
}

/** The run this page went to after Start. */
async function started(page) {
  await page.waitForSelector("article.run[data-run]");
  return page.$eval("article.run", (n) => n.dataset.run);
}

let runId = null; // the Solo run with files, shared at the end

test("files attached on the form reach the model; a refusal is said on its chip; the run's files open in a preview", { skip }, async () => {
  const { page, errors, context } = await openForm("solo");
  await page.fill("#f-solo-question", "What do my notes say about the launch?");
  await page.fill("#f-solo-modeConfig-model", "sim/reader");
  // The picker is a real button, reached with the keyboard; its input is the file chooser.
  assert.equal(await page.$eval("form .attach-area button.attach-pick", (b) => b.tabIndex), 0);
  await page.setInputFiles("form[data-mode=solo] .attach-area input[type=file]", [notes, picture, report]);
  await page.waitForSelector(chip("notes.md", "ready"));
  await page.waitForSelector(chip("chart.png", "ready"));
  await page.waitForSelector(chip("report.docx", "refused"));
  const notesChip = await page.textContent(chip("notes.md"));
  assert.match(notesChip, /notes\.md/);
  assert.match(notesChip, /\d+ bytes/);
  assert.match(notesChip, /ready/);
  const refusal = await page.textContent(`${chip("report.docx")} .attach-error`);
  assert.match(refusal, /^report\.docx \S/, "the refusal names the file, in a sentence");
  assert.ok(!/^file:|\bfile: /.test(refusal), `no field prefix: ${refusal}`);
  assert.deepEqual(offending(refusal), []);
  assert.match(await page.textContent("form .attach-hint"), /PDF, PNG, JPEG or WebP — up to 10 MB a file/);
  await screenshot(page, "attach-form");

  // Start with a refused file: the form says to remove it (nothing starts).
  await page.click("button.start");
  assert.match(await page.textContent("form .toolbar .error"), /report\.docx could not be attached: remove it/);
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute("aria-label")), "Remove report.docx");
  assert.match(page.url(), /#\/new\/solo$/);
  // Removed, it is gone from the form and from the request; Start works.
  await page.click(`${chip("report.docx")} .attach-remove`);
  assert.equal(await page.$(chip("report.docx")), null);
  assert.equal(await page.textContent("form .toolbar .error"), "");
  await page.click("button.start");
  runId = await started(page);
  await waitRunReady(page, runId);

  const detail = await (await api(`${server.base}/api/deliberations/${runId}`)).json();
  assert.deepEqual(detail.attachments.map((a) => a.name), ["notes.md", "chart.png"]);
  assert.match(detail.answer, /name="notes\.md"/, "the file reached the model");
  const run = `article.run[data-run="${runId}"]`;
  assert.match(await page.textContent(`${run} .run-answer`), /name="notes\.md"/);
  assert.deepEqual(await page.$$eval(`${run} .run-files .file-chip .attach-name`, (n) => n.map((x) => x.textContent)), ["notes.md", "chart.png"]);
  assert.match(await page.textContent(`${run} .run-files`), /Attached files/);

  // The chip opens the text the model read, as text (the markup in it is not markup).
  await page.click(`${run} .file-chip[data-name="notes.md"]`);
  assert.equal(await previewText(page), NOTES);
  assert.equal(await page.$("dialog.attach-preview pre b"), null, "the file's markup stays text");
  assert.equal(await page.textContent("dialog.attach-preview h2"), "notes.md");
  assert.match(await page.getAttribute("dialog.attach-preview a.attach-download", "href"), new RegExp(`/api/deliberations/${runId}/attachments/0$`));
  await screenshot(page, "attach-preview");
  await page.keyboard.press("Escape");
  await page.waitForSelector("dialog.attach-preview", { state: "detached" });
  assert.equal(await page.evaluate(() => document.activeElement.dataset.name), "notes.md", "focus goes back to the chip");

  // The image opens as an image, loaded from the run's file.
  await page.click(`${run} .file-chip[data-name="chart.png"]`);
  await page.waitForSelector("dialog.attach-preview[open] img");
  await page.waitForFunction(() => document.querySelector("dialog.attach-preview img").naturalWidth === 240);
  assert.equal(await page.$("dialog.attach-preview pre"), null);
  await screenshot(page, "attach-preview-image");
  await page.click("dialog.attach-preview .attach-preview-close");
  await page.waitForSelector("dialog.attach-preview", { state: "detached" });

  // The same at a phone's width: nothing scrolls sideways, the preview fits.
  const phone = await openPage(browser, server.base, `/#/run/${runId}`, { viewport: { width: 390, height: 844 } });
  await waitRunReady(phone.page, runId);
  await phone.page.click(`${run} .file-chip[data-name="notes.md"]`);
  await previewText(phone.page);
  const box = await phone.page.$eval("dialog.attach-preview", (d) => { const r = d.getBoundingClientRect(); return { left: r.left, right: r.right }; });
  assert.ok(box.left >= 0 && box.right <= 390, `the preview fits the screen: ${JSON.stringify(box)}`);
  assert.equal(await phone.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth), 0);
  await screenshot(phone.page, "attach-preview-phone");
  await phone.page.keyboard.press("Escape");
  await phone.page.waitForSelector("dialog.attach-preview", { state: "detached" });
  assert.deepEqual(phone.errors, []);
  await phone.context.close();

  assert.deepEqual(realErrors(errors), [], "no error but the refused upload");
  assert.equal(errors.length - realErrors(errors).length, 1, "one refused upload");
  await context.close();
});

test("a file dropped on the drop zone is attached; Start waits while it uploads; the form reads well on a phone", { skip }, async () => {
  const { page, errors, context } = await openForm("solo", { viewport: { width: 390, height: 844 } });
  // The upload is held back until the test lets it go, to see the form wait.
  let release;
  const held = new Promise((r) => { release = r; });
  await page.route("**/api/attachments", async (route) => { await held; await route.continue(); });
  const zone = "form[data-mode=solo] .attach-drop";
  const transfer = await page.evaluateHandle(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(["Dropped text, line one.\nLine two.\n"], "dropped.txt", { type: "text/plain" }));
    return dt;
  });
  await page.dispatchEvent(zone, "dragenter", { dataTransfer: transfer });
  await page.dispatchEvent(zone, "dragover", { dataTransfer: transfer });
  assert.equal(await page.$eval(zone, (z) => z.classList.contains("dragging")), true, "the zone lights up while a file is dragged over it");
  await page.dispatchEvent(zone, "drop", { dataTransfer: transfer });
  assert.equal(await page.$eval(zone, (z) => z.classList.contains("dragging")), false);
  await page.waitForSelector(chip("dropped.txt", "uploading"));
  assert.match(await page.textContent(chip("dropped.txt")), /uploading…/);
  assert.equal(await page.isDisabled("button.start"), true, "Start waits for the upload");
  assert.match(await page.textContent("form .start-note"), /Waiting for a file to upload/);
  release();
  await page.waitForSelector(chip("dropped.txt", "ready"));
  assert.equal(await page.isDisabled("button.start"), false);
  assert.equal(await page.textContent("form .start-note"), "");
  // A second file, to show two chips; then the form at a phone's width.
  await page.setInputFiles("form[data-mode=solo] .attach-area input[type=file]", [{ ...report, name: "quarterly-report-final-version-2.docx" }]);
  await page.waitForSelector(chip("quarterly-report-final-version-2.docx", "refused"));
  // A file over the size limit is refused as it streams in (413), said in words too.
  await page.setInputFiles("form[data-mode=solo] .attach-area input[type=file]", [{ name: "big.txt", mimeType: "text/plain", buffer: Buffer.alloc(10_500_000, "a") }]);
  await page.waitForSelector(chip("big.txt", "refused"), { timeout: 20000 });
  assert.match(await page.textContent(`${chip("big.txt")} .attach-error`), /^big\.txt is larger than 10 MB/);
  // Its size reads as past the limit, never as the limit itself.
  assert.equal(await page.textContent(`${chip("big.txt")} .attach-facts`), "10.1 MB");
  assert.equal(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth), 0, "nothing scrolls sideways");
  await page.$eval("form .attach-area", (n) => n.scrollIntoView());
  await screenshot(page, "attach-form-phone");
  await page.click(`${chip("quarterly-report-final-version-2.docx")} .attach-remove`);
  await page.click(`${chip("big.txt")} .attach-remove`);
  await page.fill("#f-solo-question", "Summarise the dropped file.");
  await page.fill("#f-solo-modeConfig-model", "sim/reader");
  await page.click("button.start");
  const id = await started(page);
  await waitRunReady(page, id);
  const detail = await (await api(`${server.base}/api/deliberations/${id}`)).json();
  assert.deepEqual(detail.attachments.map((a) => a.name), ["dropped.txt"]);
  assert.match(detail.answer, /name="dropped\.txt"/);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test("a Jury with a file attached may leave its content empty", { skip }, async () => {
  const { page, errors, context } = await openForm("jury");
  await page.fill("#f-jury-question", "Is this plan ready to ship?");
  // Without a file, an empty content is refused by the form.
  await page.click("button.start");
  await page.waitForSelector('form[data-mode=jury] .field.invalid[data-field="modeConfig.content"]');
  assert.match(page.url(), /#\/new\/jury$/);
  await page.setInputFiles("form[data-mode=jury] .attach-area input[type=file]", [notes]);
  await page.waitForSelector(chip("notes.md", "ready"));
  assert.match(await page.textContent("form .attach-hint"), /may be left empty: the file is read instead/);
  assert.equal(await page.$('form[data-mode=jury] .field.invalid[data-field="modeConfig.content"]'), null, "the file stands for the content");
  const contentLabel = () => page.textContent('form[data-mode=jury] [data-field="modeConfig.content"] > label');
  assert.equal(await contentLabel(), "Content to evaluate", "no longer marked required");
  // Removing the file makes the content required again; attaching it again does not.
  await page.click(`${chip("notes.md")} .attach-remove`);
  assert.equal(await contentLabel(), "Content to evaluate *");
  await page.setInputFiles("form[data-mode=jury] .attach-area input[type=file]", [notes]);
  await page.waitForSelector(chip("notes.md", "ready"));
  assert.equal(await contentLabel(), "Content to evaluate");
  await screenshot(page, "attach-jury-form");
  await page.click("button.start");
  const id = await started(page);
  const detail = await (await api(`${server.base}/api/deliberations/${id}`)).json();
  assert.deepEqual(detail.attachments.map((a) => a.name), ["notes.md"]);
  await waitRunReady(page, id);
  assert.equal(await page.textContent(`article.run[data-run="${id}"] .run-files .file-chip .attach-name`), "notes.md");
  assert.deepEqual(errors, []);
  await context.close();
});

test("a follow-up takes files too, and keeps the conversation's earlier ones", { skip }, async () => {
  // The first question comes with a plan, uploaded over the API as another client would.
  const form = new FormData();
  form.append("file", new Blob(["# Plan\n\nLaunch on Tuesday.\n"], { type: "text/markdown" }), "plan.md");
  const up = await (await api(`${server.base}/api/attachments`, { method: "POST", body: form })).json();
  const run = await startRest(server.base, { mode: "council", question: "Plan the launch.", councilModels: ["sim/alpha", "sim/beta"], chairmanModel: "sim/alpha", attachments: [up.attachments[0].id] });
  const { page, errors, context } = await openPage(browser, server.base, `/#/run/${run.runId}`);
  await waitRunReady(page, run.runId);
  await page.waitForSelector(".follow-up .attach-area.compact");
  await page.fill("#follow-up-question", "And with these notes?");
  await page.setInputFiles(".follow-up .attach-area input[type=file]", [notes]);
  await page.waitForSelector(`.follow-up ${chip("notes.md", "ready")}`);
  await screenshot(page, "attach-follow-up");
  await page.click(".follow-up button[type=submit]");
  await page.waitForFunction(() => document.querySelectorAll("article.run").length === 2);
  const second = await page.$$eval("article.run", (n) => n[1].dataset.run);
  // The new run shows its files at once, the conversation's earlier one first, as the server
  // gives them; the form is empty again.
  const names = () => page.$$eval(`article.run[data-run="${second}"] .run-files .attach-name`, (n) => n.map((x) => x.textContent));
  assert.deepEqual(await names(), ["plan.md", "notes.md"]);
  assert.equal(await page.$$eval(".follow-up .attach-chip", (n) => n.length), 0);
  // Each chip opens its own file, while the run goes and after.
  await page.click(`article.run[data-run="${second}"] .file-chip[data-name="notes.md"]`);
  assert.equal(await previewText(page), NOTES);
  await page.keyboard.press("Escape");
  await page.waitForSelector("dialog.attach-preview", { state: "detached" });
  await waitRunReady(page, second);
  const detail = await (await api(`${server.base}/api/deliberations/${second}`)).json();
  assert.deepEqual(detail.attachments.map((a) => a.name), ["plan.md", "notes.md"]);
  assert.deepEqual(await names(), ["plan.md", "notes.md"]);
  assert.deepEqual(errors, []);
  await context.close();
});

test("a share link shows the run's files and their previews to a reader never signed in", { skip }, async () => {
  assert.ok(runId, "the first test made a run with files");
  const res = await api(`${server.base}/api/deliberations/${runId}/shares`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ hideModels: false }) });
  assert.equal(res.status, 201, await res.clone().text());
  const url = `${server.base}${(await res.json()).path}`;
  for (const [name, viewport] of [["attach-shared", { width: 1280, height: 900 }], ["attach-shared-phone", { width: 390, height: 844 }]]) {
    const anon = await browser.newContext({ viewport });
    const p = await anon.newPage();
    const pageErrors = [];
    p.on("pageerror", (e) => pageErrors.push(String(e)));
    p.on("console", (m) => { if (m.type() === "error") pageErrors.push(m.text()); });
    assert.equal((await p.goto(url)).status(), 200);
    await p.waitForSelector(`article.run[data-ready="true"]`);
    assert.deepEqual(await p.$$eval(".run-files .file-chip .attach-name", (n) => n.map((x) => x.textContent)), ["notes.md", "chart.png"]);
    await p.click('.file-chip[data-name="notes.md"]');
    assert.equal(await previewText(p), NOTES);
    assert.match(await p.getAttribute("dialog.attach-preview a.attach-download", "href"), /^\/s\/shr_[0-9a-f]+\/attachments\/0$/);
    await screenshot(p, `${name}-preview`);
    await p.keyboard.press("Escape");
    await p.waitForSelector("dialog.attach-preview", { state: "detached" });
    await p.click('.file-chip[data-name="chart.png"]');
    await p.waitForFunction(() => { const i = document.querySelector("dialog.attach-preview[open] img"); return i && i.naturalWidth === 240; });
    await p.keyboard.press("Escape");
    await p.waitForSelector("dialog.attach-preview", { state: "detached" });
    assert.equal(await p.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth), 0);
    await screenshot(p, name);
    assert.deepEqual(pageErrors, []);
    await anon.close();
  }
});
