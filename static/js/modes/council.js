// Council: answer cards (model, time), each evaluator's ranking with the parsed order beside the
// raw text, the aggregate ranking table, a de-anonymisation toggle, and the chairman's
// synthesis as the run's main answer.

// Why an evaluator's reply gave no ranking, in words.
const UNPARSED = {
  refused: "declined to rank",
  reasoning_only: "stopped while reasoning",
  no_answer: "no ranking stated",
  inconsistent: "contradictory ranking",
};

export function createView(ctx) {
  const { el, ui } = ctx;
  const s1 = ctx.section("stage1", "Stage 1 · Answers");
  const s2 = ctx.section("stage2", "Stage 2 · Peer rankings");
  const s3 = ctx.section("stage3", "Stage 3 · Synthesis");
  let labelToModel = {};
  let reveal = false;
  const labelled = []; // [node, label] pairs re-rendered when the toggle changes

  const revealBox = el("input", { type: "checkbox", class: "reveal-toggle" });
  revealBox.addEventListener("change", () => { reveal = revealBox.checked; relabel(); });
  const toggle = el("label", { class: "toggle" }, revealBox, "Show which model wrote each response");

  function name(label) {
    return reveal && labelToModel[label] ? `${label} (${labelToModel[label]})` : label;
  }
  // A null label marks a cell that shows the model itself, hidden until revealed.
  function relabel() {
    for (const [node, label] of labelled) node.textContent = label === null ? (reveal ? node.dataset.model : "hidden") : name(label);
  }
  function labelNode(label, tag = "span") {
    const n = el(tag, { class: "label" }, name(label));
    labelled.push([n, label]);
    return n;
  }

  return {
    event(name, data) {
      switch (name) {
        case "stage1_start": s1.running(); ctx.progress("Stage 1: collecting answers"); break;
        case "stage1_complete":
          ctx.announce(`Stage 1 complete: ${ui.plural(s1.answers(data.data), "answer")}`);
          break;
        case "stage2_start": s2.running(); ctx.progress("Stage 2: peer ranking"); break;
        case "stage2_complete": {
          const meta = data.metadata || {};
          labelToModel = meta.labelToModel || {};
          // Each answer card carries its anonymous label, so a ranking ("Response C › A") and the
          // answers it ranks match at a glance. A model that answered twice cannot be told
          // apart by its label map: its cards keep the model's name alone.
          for (const [label, model] of Object.entries(labelToModel)) {
            const cards = s1.cards.filter((c) => c.model === model);
            if (cards.length === 1) cards[0].setTitle(`${label} · ${model}`);
          }
          for (const r of data.data || []) {
            const card = s2.claim(r.model);
            card.setTitle(`${r.model}`);
            card.setRole("evaluator");
            const parsed = r.parsedRanking || [];
            // Places best first; tied labels share one (older runs hold only the order).
            const places = (r.places && r.places.length) ? r.places : parsed.map((l) => [l]);
            const stated = places.flatMap((place, i) => [i ? " › " : "", ...place.flatMap((l, j) => [j ? " = " : "", labelNode(l)])]);
            const missing = Object.keys(labelToModel).length - parsed.length;
            card.prepend(el("div", { class: "parsed-ranking" },
              el("strong", null, "Ranking: "),
              parsed.length ? stated : el("span", { class: "muted" }, `${UNPARSED[r.unparsed] || "no ranking stated"}: left out of the aggregate`),
              r.partial ? el("span", { class: "badge partial", title: "The labels it leaves out share the places left" }, `partial · ${ui.plural(missing, "response")} not ranked`) : null));
            card.setText(r.ranking);
            card.setState("ok", { ms: r.responseTimeMs });
          }
          const agg = meta.aggregateRankings || [];
          const body = s2.body;
          body.replaceChildren();
          // The toggle sits above the rankings it relabels.
          s2.lead.replaceChildren(el("div", { class: "toolbar" }, toggle));
          if (agg.length) {
            const modelCell = (model) => { const n = el("span", { dataset: { model } }); labelled.push([n, null]); return n; };
            const rows = agg.map((a, i) => [String(i + 1), labelNode(a.label || ""), modelCell(a.model), ui.fmtNum(a.averageRank, 2), String(a.rankingsCount)]);
            const rows2 = agg.map((a, i) => { const r = rows[i]; r[4] = a.namedCount !== undefined && a.namedCount !== a.rankingsCount ? `${a.namedCount} of ${a.rankingsCount}` : String(a.rankingsCount); return r; });
            const t = ui.table(["#", "Response", "Model", "Average rank", "Ranked by"], rows2, { num: [0, 3, 4], caption: "Aggregate ranking" });
            t.classList.add("aggregate");
            const counted = meta.rankingsCounted ?? agg[0].rankingsCount;
            const notes = [`from ${ui.plural(counted, "ranking")}`];
            if (meta.partialRankings) notes.push(`${meta.partialRankings} partial (unranked responses share the places left)`);
            if (meta.unparsedRankings) notes.push(`${meta.unparsedRankings} without a readable ranking, left out`);
            const panel = el("div", { class: "panel" }, el("h3", null, "Aggregate ranking (lower average is better)"),
              el("p", { class: "muted" }, notes.join("; ")), t);
            body.append(panel);
          } else {
            body.append(el("p", { class: "muted" }, "No ranking could be parsed; the chairman synthesises without ranking data."));
          }
          relabel();
          s2.done();
          ctx.announce("Stage 2 complete: rankings are in");
          break;
        }
        case "stage3_start": s3.running(); ctx.progress("Stage 3: the chairman is synthesising"); break;
        case "stage3_complete": {
          const r = data.data || {};
          const card = s3.claim(r.model);
          card.setRole("chairman");
          card.setState("ok", { ms: r.responseTimeMs });
          card.setBody(el("p", { class: "muted" }, "Its synthesis is the answer, shown first at the top."));
          const p = ctx.primary("Synthesis");
          p.head.replaceChildren("Synthesis", el("span", { class: "muted" }, `by ${r.model}`));
          p.body.replaceChildren(ui.markdown(r.response));
          s3.done();
          break;
        }
        default: break;
      }
    },
  };
}
