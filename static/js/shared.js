// The public page of a share link (`/s/<token>`): reads the one run the link grants from
// `/s/<token>/json` and shows its Markdown export (question, answer, models, every stage),
// rendered through marked and DOMPurify like all model text. No sign-in, no controls.

import { el, markdown, modeBadge, statusBadge, MODE_LABELS } from "./ui.js";

const main = document.getElementById("main");
const token = location.pathname.split("/")[2] || "";
const base = `/s/${encodeURIComponent(token)}`;

async function load() {
  const res = await fetch(`${base}/json`);
  if (!res.ok) {
    main.replaceChildren(el("p", { class: "empty" }, res.status === 404 ? "This share link does not exist or was revoked." : `The run could not be loaded (${res.status}).`));
    return;
  }
  const doc = await res.json();
  const run = doc.run;
  // The mode's label comes with the run: the signed-in API that lists modes is not for this page.
  if (doc.modeLabel) MODE_LABELS[run.mode] = doc.modeLabel;
  document.title = `${run.title || run.question || "Shared deliberation"} · Conclave`;
  const head = el("div", { class: "shared-head" }, modeBadge(run.mode), statusBadge(run.status),
    doc.hideModels ? el("span", { class: "badge gray" }, "model names hidden") : "",
    el("span", { class: "spacer" }),
    el("a", { href: `${base}/export?format=md`, download: `conclave-run-${run.id}.md`, class: "button secondary small" }, "Download Markdown"));
  const note = el("p", { class: "muted shared-note" }, run.status === "running"
    ? "This run is still going: reload the page to see how far it has got."
    : "A read-only copy of one deliberation, shared by its owner.");
  main.replaceChildren(head, note, markdown(doc.markdown, "shared-doc"));
  main.removeAttribute("aria-busy");
}

window.addEventListener("DOMContentLoaded", () => {
  load().catch((e) => main.replaceChildren(el("p", { class: "error" }, `The run could not be loaded: ${e.message}`)));
});
