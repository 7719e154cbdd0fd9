// Blueprint: the assembled document first (with its word count, how many sections made it and
// a table of each section's words and topics), then the outline (each section's title, target
// length and author, and its state as the sections are written at once), the sections as their
// authors write them, and the assembler's card.

const LENGTH_WORDS = { Short: "200-500", Medium: "500-1000", Long: "1000-2000" };

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("blueprint");
  const outlineSection = ctx.section("outline", "Outline");
  const sectionsSection = ctx.section("sections", "Sections");
  const assemblySection = ctx.section("assembly", "Assembly");
  const planList = el("ol", { class: "bp-plan", "aria-label": "The document's sections" });
  const plan = {}; // number -> {li, state, title, model, topics}
  let total = 0;
  let written = 0;
  let failed = 0;
  let seen = false;

  const sectionKey = (n) => `section:${n}`;

  /** The card of section `n`'s call (made when a stored run has no call events). */
  function sectionCard(n, model) {
    const existing = sectionsSection.cards.find((c) => c.key === sectionKey(n));
    const card = existing || sectionsSection.addCard(new ctx.ModelCard({ key: sectionKey(n), model, role: "author" }));
    const p = plan[n];
    card.setTitle(p ? `Section ${n} · ${p.title}` : `Section ${n}`);
    card.setRole(model || "");
    return card;
  }

  function progress() {
    if (!total) return;
    ctx.progress(`Writing sections: ${written + failed} of ${total} finished`);
    sectionsSection.setTitle(`Sections · ${written} of ${total} written`);
  }

  function showOutline(d) {
    total = (d.sections || []).length;
    const head = el("div", { class: "bp-outline-head" },
      el("strong", { class: "bp-doc-title" }, d.documentTitle || ""),
      d.documentTitleDefaulted ? ui.badge("no title stated", "yellow") : null,
      ui.badge(d.documentTypeLabel || d.documentType || "", "blue"),
      ui.badge(ui.plural(total, "section"), "gray"),
      d.estimatedLength ? el("span", { class: "muted" }, `planned length: ${d.estimatedLength}`) : null);
    const nodes = [head];
    if ((d.warnings || []).length) {
      nodes.push(el("div", { class: "callout bp-warnings" }, el("ul", null, d.warnings.map((w) => el("li", null, w)))));
    }
    if ((d.keyThemes || []).length) {
      nodes.push(el("p", { class: "bp-themes" }, el("span", { class: "muted" }, "Key themes: "), d.keyThemes.join(", ")));
    }
    planList.replaceChildren();
    for (const s of d.sections || []) {
      const state = el("span", { class: "bp-state" }, ui.badge("waiting", "gray"));
      const length = `${s.length}${s.lengthDefaulted ? " (assumed)" : ""} · ${LENGTH_WORDS[s.length] || ""} words`;
      const li = el("li", { class: "bp-plan-item", "data-section": String(s.number) },
        el("div", { class: "bp-plan-head" },
          el("strong", null, `${s.number}. ${s.title}`),
          el("span", { class: "muted bp-length" }, length),
          el("span", { class: "muted bp-author" }, `by ${s.assignedModel}`)),
        s.description ? el("div", { class: "bp-desc" }, s.description) : null,
        (s.keyTopics || []).length ? el("div", { class: "bp-topics muted" }, `Key topics: ${s.keyTopics.join(" · ")}`) : null,
        state);
      planList.append(li);
      plan[s.number] = { li, state, title: s.title, model: s.assignedModel };
    }
    if (d.rawReply != null) {
      nodes.push(el("div", { class: "callout bp-unread" }, `Fewer than 3 sections could be read from the architect's reply, so no section was written. What it wrote:`),
        ui.markdown(d.rawReply, "bp-raw"));
    }
    nodes.push(planList);
    outlineSection.body.replaceChildren(...nodes);
    const card = outlineSection.cards.find((c) => c.model === d.model) || outlineSection.claim(d.model);
    card.claimed = true;
    card.setRole("architect");
    card.setBody(el("p", { class: "muted" }, `Outlined ${ui.plural(total, "section")}: see the plan below.`));
    if (d.fallbackFrom) card.addBadge(ui.badge(`backup for ${d.fallbackFrom}`, "yellow"));
    if (d.responseTimeMs != null) card.setState("ok", { ms: d.responseTimeMs });
    outlineSection.done();
  }

  function showSection(d) {
    const n = d.sectionNumber;
    const covered = (d.keyTopicsCovered || []).length;
    const all = covered + (d.keyTopicsMissing || []).length;
    const card = sectionCard(n, d.model);
    card.setText(d.content || "");
    card.setState("ok", { ms: d.responseTimeMs });
    card.addBadge(ui.badge(ui.plural(d.wordCount ?? 0, "word"), "gray"));
    if (all) card.addBadge(ui.badge(`${covered} of ${all} topics`, covered === all ? "green" : "yellow"));
    if ((d.keyTopicsMissing || []).length) {
      card.extra.replaceChildren(el("div", { class: "callout bp-missing" }, el("strong", null, "Key topics not covered: "), d.keyTopicsMissing.join(", ")));
    }
    const p = plan[n];
    if (p) p.state.replaceChildren(ui.badge("written", "green"), " ", el("span", { class: "bp-words" }, ui.plural(d.wordCount ?? 0, "word")),
      all ? el("span", { class: "muted" }, ` · ${covered} of ${all} key topics covered`) : null);
  }

  function showFailed(d) {
    const n = d.sectionNumber;
    const card = sectionCard(n, d.model);
    if (card.inFlight()) card.setState("failed", { error: { message: d.error } });
    card.extra.replaceChildren(el("div", { class: "callout bp-failed" }, `This section was not written (${d.error || "failed"}); the document marks it as missing.`));
    const p = plan[n];
    if (p) {
      p.li.classList.add("failed");
      p.state.replaceChildren(ui.badge("not written", "red"), " ", el("span", { class: "muted" }, d.error || ""));
    }
  }

  function showDocument(data) {
    const d = data.data || {};
    const p = ctx.primary(d.fallback === "concatenated" ? "Document (sections joined, not assembled)" : "Document");
    p.el.classList.add("bp-document");
    const parts = written + failed || total;
    const meta = el("div", { class: "bp-meta" },
      ui.badge(ui.plural(d.wordCount ?? 0, "word"), "blue"),
      ui.badge(`${written} of ${parts} sections written`, failed ? "yellow" : "green"),
      (d.todoMarkers || []).length ? ui.badge(ui.plural(d.todoMarkers.length, "TODO"), "yellow", d.todoMarkers.join("\n")) : null,
      d.condensed ? ui.badge("sections condensed for the assembler", "gray", "The sections were too long to send whole: the assembler saw each one's first 200 words and its key topics.") : null,
      d.model ? el("span", { class: "muted" }, `assembled by ${d.model}${d.fallbackFrom ? ` (backup for ${d.fallbackFrom})` : ""}`) : null);
    const nodes = [meta];
    if (d.fallback === "concatenated") {
      nodes.push(el("div", { class: "callout bp-concatenated" }, "The assembler failed, so the sections are shown as they were written, in order, with each missing one marked TODO."));
    }
    nodes.push(ui.markdown(d.document || "", "bp-output"));
    const rows = Object.keys(plan).map(Number).sort((a, b) => a - b).map((n) => {
      const words = plan[n].words;
      return [String(n), plan[n].title, plan[n].model || "", words == null ? "not written" : String(words), plan[n].topics || "—"];
    });
    if (rows.length) {
      nodes.push(el("h3", null, "Words by section"),
        el("div", { class: "bp-table" }, ui.table(["#", "Section", "Author", "Words", "Topics"], rows, { num: [0, 3], caption: "Words by section" })));
    }
    p.body.replaceChildren(...nodes);
    const card = assemblySection.cards.filter((c) => c.state === "ok").pop();
    if (card) {
      card.claimed = true;
      card.setBody(el("p", { class: "muted" }, `Assembled the ${ui.plural(d.wordCount ?? 0, "word")} document shown at the top.`));
    }
    assemblySection.done();
    ctx.announce(`Document ready: ${ui.plural(d.wordCount ?? 0, "word")}`);
  }

  const view = {
    callSection(call) {
      if (call.stage === "outline") return "outline";
      if (call.stage === "assembly") return "assembly";
      if ((call.stage || "").startsWith("section_")) {
        // The card is made right after this returns: name it after its section while it streams.
        const n = Number(call.stage.slice("section_".length));
        queueMicrotask(() => {
          const card = sectionsSection.cards.find((c) => c.key === call.key);
          if (card && plan[n]) card.setTitle(`Section ${n} · ${plan[n].title}`);
          if (card) card.setRole(call.model || "");
        });
        return "sections";
      }
      return undefined;
    },

    event(name, data) {
      seen = true;
      const d = data.data || {};
      switch (name) {
        case "blueprint_start":
          outlineSection.running();
          ctx.progress("Outlining the document");
          break;
        case "outline_start":
          outlineSection.running();
          break;
        case "outline_complete":
          showOutline(d);
          break;
        case "expansion_start":
          total = data.totalSections || total;
          sectionsSection.running();
          for (const n of Object.keys(plan)) {
            plan[n].state.replaceChildren(ui.badge("writing", "blue"));
          }
          progress();
          break;
        case "section_complete":
          written += 1;
          if (plan[d.sectionNumber]) {
            plan[d.sectionNumber].words = d.wordCount ?? 0;
            const all = (d.keyTopicsCovered || []).length + (d.keyTopicsMissing || []).length;
            plan[d.sectionNumber].topics = all ? `${(d.keyTopicsCovered || []).length} of ${all}` : "—";
          }
          showSection(d);
          ctx.announce(`Section ${d.sectionNumber} written`);
          progress();
          break;
        case "section_failed":
          failed += 1;
          showFailed(d);
          progress();
          break;
        case "all_sections_complete":
          sectionsSection.done();
          break;
        case "assembly_start":
          assemblySection.running();
          ctx.progress("Assembling the document");
          break;
        case "assembly_complete":
          showDocument(data);
          break;
        default: break;
      }
    },

    /** A stored run without recorded events: render its stored result as if its events came. */
    finish(detail) {
      if (seen || !detail || !detail.result) return;
      const r = detail.result;
      if (!r.outline) return;
      view.event("outline_complete", { data: r.outline });
      view.event("expansion_start", { totalSections: (r.outline.sections || []).length });
      for (const s of r.sections || []) view.event("section_complete", { data: s });
      for (const f of r.failedSections || []) view.event("section_failed", { data: f });
      view.event("all_sections_complete", { data: r });
      if (r.assembly) view.event("assembly_complete", { data: r.assembly, partial: r.partial, failedModels: r.failedModels });
    },
  };
  return view;
}
