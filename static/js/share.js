// Export and share tools on a run's page: an Export menu (Markdown and JSON downloads, read
// with the page's own sign-in) and, for the run's owner or an admin, a Share dialog that makes,
// copies and revokes read-only public links (`/s/<token>`), optionally with model names hidden.
//
// The run view calls `addShareTools(head, detail)` once; nothing else of the page knows of it.

import { el, ensureStylesheet, fmtTime } from "./ui.js";
import { fetchJson } from "./api.js";

const enc = encodeURIComponent;

/** Adds the Export menu and (when the caller may control the run) the Share button to `head`. */
export function addShareTools(head, detail) {
  if (!detail || !detail.id) return;
  ensureStylesheet("share");
  const base = `/api/deliberations/${enc(detail.id)}`;
  const link = (format, label) => el("a", { href: `${base}/export?format=${format}`, download: `conclave-run-${detail.id}.${format}`, class: "export-link", role: "menuitem" }, label);
  const menu = el("details", { class: "export-menu" },
    el("summary", { class: "button secondary small" }, "Export"),
    el("div", { class: "export-items", role: "menu" }, link("md", "Markdown (.md)"), link("json", "JSON (.json)")));
  // The menu closes once a download is chosen, or on a click anywhere else.
  menu.querySelectorAll("a").forEach((a) => a.addEventListener("click", () => { menu.open = false; }));
  document.addEventListener("click", (e) => { if (menu.open && !menu.contains(e.target)) menu.open = false; });
  const tools = el("span", { class: "share-tools" }, menu);
  // `canControl` is absent on a run this page just started (its own): the server still checks.
  if (detail.canControl !== false) {
    const btn = el("button", { type: "button", class: "secondary small share-open" }, "Share");
    btn.addEventListener("click", () => openDialog(detail, base));
    tools.append(btn);
  }
  head.append(tools);
}

function openDialog(detail, base) {
  const hide = el("input", { type: "checkbox", id: `share-hide-${detail.id}` });
  const create = el("button", { type: "button", class: "share-create" }, "Create link");
  const error = el("div", { class: "error", role: "alert" });
  const fresh = el("div", { class: "share-fresh", hidden: true });
  const list = el("ul", { class: "share-list", "aria-label": "Share links" });
  const close = el("button", { type: "button", class: "secondary small share-close" }, "Close");
  const dialog = el("dialog", { class: "share-dialog", "aria-labelledby": `share-title-${detail.id}` },
    el("h2", { id: `share-title-${detail.id}` }, "Share this run"),
    el("p", { class: "muted" }, "Anyone with the link can read this run, without signing in: its question, answer and stages. It cannot cancel or follow up the run, or see any other run. Revoke a link to stop it working."),
    el("div", { class: "share-options" }, hide, el("label", { for: hide.id }, "Hide model names (shown as Model A, Model B…)")),
    el("div", { class: "toolbar" }, create, close), error, fresh,
    el("h3", null, "Links"), list);
  document.body.append(dialog);
  close.addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => dialog.remove());

  async function refresh() {
    list.replaceChildren();
    try {
      const { shares } = await fetchJson(`${base}/shares`);
      if (!shares.length) list.append(el("li", { class: "muted" }, "No links yet."));
      for (const s of shares.slice().reverse()) list.append(row(s));
    } catch (e) { error.textContent = e.message; }
  }

  function row(s) {
    const what = `${s.hideModels ? "models hidden" : "models shown"} · made ${fmtTime(s.createdAt)}${s.createdBy ? ` by ${s.createdBy}` : ""}`;
    const li = el("li", { class: "share-row", dataset: { share: s.id } }, el("span", null, what));
    if (s.active) {
      const revoke = el("button", { type: "button", class: "danger small share-revoke" }, "Revoke");
      revoke.addEventListener("click", async () => {
        revoke.disabled = true;
        try { await fetchJson(`${base}/shares/${enc(s.id)}`, { method: "DELETE" }); fresh.hidden = true; await refresh(); }
        catch (e) { error.textContent = e.message; revoke.disabled = false; }
      });
      li.append(revoke);
    } else {
      li.append(el("span", { class: "muted" }, ` · revoked ${fmtTime(s.revokedAt)}`));
    }
    return li;
  }

  create.addEventListener("click", async () => {
    error.textContent = "";
    create.disabled = true;
    try {
      const s = await fetchJson(`${base}/shares`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ hideModels: hide.checked }) });
      const url = new URL(s.path, location.origin).href;
      const input = el("input", { type: "text", readonly: true, value: url, class: "share-url", "aria-label": "Share link" });
      const copy = el("button", { type: "button", class: "small share-copy" }, "Copy");
      copy.addEventListener("click", async () => {
        input.select();
        try { await navigator.clipboard.writeText(url); copy.textContent = "Copied"; }
        catch { document.execCommand && document.execCommand("copy"); copy.textContent = "Copied"; }
      });
      fresh.replaceChildren(el("p", null, "The new link (shown only now; copy it):"), el("div", { class: "toolbar" }, input, copy));
      fresh.hidden = false;
      await refresh();
      input.focus();
      input.select();
    } catch (e) { error.textContent = e.message; }
    finally { create.disabled = false; }
  });

  dialog.showModal();
  refresh();
}
