// The public page of a share link (`/s/<token>`): reads the one run the link grants from
// `/s/<token>/json` (the run, its stored events, model names hidden when the link says so) and
// shows it as the team sees it: the same run view and the same mode view as the signed-in
// page, replayed from the events, read-only (no cancel, no run again, no share, no export of
// the signed-in API). No sign-in.

import { el, modeBadge, statusBadge } from "./ui.js";
import { registerModes } from "./registry.js";
import { RunView } from "./runview.js";
import { fetchText } from "./attach.js";

const main = document.getElementById("main");
const token = location.pathname.split("/")[2] || "";
const base = `/s/${encodeURIComponent(token)}`;

/** A connection that only replays the stored events of the one shared run. */
function replayOnly(events) {
  return {
    feed: () => ({
      subscribe(fn) {
        for (const ev of events) fn({ type: "event", run: "", seq: ev.seq, event: ev.event, data: ev.data });
        return () => {};
      },
    }),
  };
}

async function load() {
  const res = await fetch(`${base}/json`);
  if (!res.ok) {
    main.replaceChildren(el("p", { class: "empty" }, res.status === 404 ? "This share link does not exist or was revoked." : `The run could not be loaded (${res.status}).`));
    return;
  }
  const doc = await res.json();
  const run = doc.run;
  if (doc.modeInfo) registerModes([doc.modeInfo]);
  document.title = `${run.title || run.question || "Shared deliberation"} · Conclave`;
  const head = el("div", { class: "shared-head" }, modeBadge(run.mode), statusBadge(run.status),
    doc.hideModels ? el("span", { class: "badge gray" }, "model names hidden") : "",
    el("span", { class: "spacer" }),
    el("a", { href: `${base}/export?format=md`, download: `conclave-run-${run.id}.md`, class: "button secondary small" }, "Download Markdown"));
  const note = el("p", { class: "muted shared-note" }, run.status === "running"
    ? "This run is still going: reload the page to see how far it has got."
    : "A read-only copy of one deliberation, shared by its owner.");
  // The run's files: their text is in the document already; an image (and a download) is read
  // through the link.
  const files = {
    url: (n) => `${base}/attachments/${n}`,
    text: async (n, a) => (typeof a.text === "string" ? a.text : fetchText(`${base}/attachments/${n}/text`)),
  };
  const view = new RunView({ conn: replayOnly(doc.events || []), detail: { ...run, canControl: false }, readOnly: true, loadDetail: async () => run, files });
  main.replaceChildren(head, note, view.el);
  await view.mount();
  // A run still going when the page was read stops here: the page does not follow it live.
  if (run.status === "running") view.renderFacts();
  main.removeAttribute("aria-busy");
}

window.addEventListener("DOMContentLoaded", () => {
  load().catch((e) => main.replaceChildren(el("p", { class: "error" }, `The run could not be loaded: ${e.message}`)));
});
