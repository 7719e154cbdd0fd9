// The view of a mode that has no view file of its own: a section per stage with a card per
// call, the texts the stage events carry (so a reopened run reads the same as a live one), and
// the run's outcome and answer at the end. Enough for a new mode to be usable in the page the
// day it lands; a mode that wants charts or tables writes `modes/<id>.js` (see its README).

/** "stage1" -> "Stage 1", "peer_review" -> "Peer review". */
function title(id) {
  const w = String(id).replace(/_/g, " ").replace(/([a-z])(\d)/gi, "$1 $2");
  return w.charAt(0).toUpperCase() + w.slice(1);
}

/** The text of one item of a stage event, whatever the mode calls it. */
function textOf(item) {
  for (const k of ["response", "text", "answer", "content", "output"]) {
    if (typeof item[k] === "string") return item[k];
  }
  return null;
}

export function createView(ctx) {
  const { ui } = ctx;
  return {
    callSection(call) {
      ctx.section(call.stage, title(call.stage)); // named before the first card lands in it
      return call.stage;
    },
    event(name, data) {
      const m = /^(.*)_complete$/.exec(name);
      if (!m) {
        if (/_start$/.test(name)) ctx.progress(title(name.replace(/_start$/, "")));
        return;
      }
      const items = Array.isArray(data.data) ? data.data : Array.isArray(data.results) ? data.results : [];
      const section = ctx.section(m[1], title(m[1]));
      for (const item of items) {
        if (!item || typeof item.model !== "string") continue;
        const text = textOf(item);
        const card = section.claim(item.model);
        if (text !== null) card.setText(text);
        card.setState(item.error ? "failed" : "ok", { ms: item.responseTimeMs, error: item.error || null });
      }
      section.done();
    },
    finish(detail) {
      if (!detail.outcome && !detail.answer) return;
      const p = ctx.primary("Outcome");
      p.body.replaceChildren();
      if (detail.outcome) p.body.append(ui.el("p", { class: "outcome" }, detail.outcome));
      if (detail.answer && detail.answer !== detail.outcome) p.body.append(ui.markdown(detail.answer));
    },
  };
}
