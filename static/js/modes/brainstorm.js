// Brainstorm: each model's ideas, the curator's clusters (each with its ideas, its promise and,
// once scored, every scorer's ratings and the averages), the ranking and how it was decided,
// the ideas left out of every cluster, and the proposal as the main answer, naming the cluster
// it grew from with a button that jumps to it.

const PROMISE_COLORS = { HIGH: "green", MEDIUM: "yellow", LOW: "gray" };
const DECIDED = {
  averageScore: "a higher average total",
  averageImpact: "the same total, more impact",
  averageFeasibility: "the same total and impact, more feasible",
  promise: "the curator's promise rating",
  clusterNumber: "the tie rule (the curator's order)",
  scored: "it was scored and the next was not",
};

/** The nodes given, without the absent ones (`replaceChildren(null)` would print "null"). */
function present(...nodes) {
  return nodes.filter((n) => n !== null && n !== undefined && n !== false);
}

function num(v) {
  return v == null ? "—" : Number(v).toFixed(2).replace(/\.00$/, "");
}

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("brainstorm");
  const ideation = ctx.section("ideation", "Ideas", { tabs: true });
  const clustering = ctx.section("clustering", "Clusters");
  const scoring = ctx.section("scoring", "Scores", { tabs: true });
  const refinement = ctx.section("refinement", "Refinement");
  let seen = false;
  const ideas = new Map();
  let clusters = [];
  let unclustered = [];
  const scorers = [];
  let ranking = null;
  let modelCount = 0;
  let arrived = 0;
  const table = (...args) => el("div", { class: "bs-table" }, ui.table(...args));
  const anchor = (id) => `bs-${ctx.run.id || "run"}-${id}`;

  const promiseBadge = (c) => ui.badge(`promise: ${(c.promise || "MEDIUM").toLowerCase()}${c.promiseStated === false ? " (not stated)" : ""}`, PROMISE_COLORS[c.promise] || "gray");
  const clusterName = (c) => (c && c.name) || `Cluster ${c ? clusters.indexOf(c) + 1 : ""}`;

  /** An idea; `withSource`: followed by whose it is (in a cluster, where ideas of several
   * models meet; a model's own card names it once, as its role). */
  function ideaItem(id, withSource = true) {
    const i = ideas.get(id);
    if (!i) return el("li", { class: "muted" }, "An idea that was not kept");
    return el("li", { class: "bs-idea" },
      el("span", { class: "bs-idea-title" }, i.title), withSource ? " " : null,
      withSource ? el("span", { class: "bs-source" }, i.sourceLabel) : null,
      i.description ? ui.markdown(i.description, "bs-idea-desc") : null);
  }

  function scoreTable(c) {
    const rows = [];
    for (const s of scorers) {
      const mine = (s.scores || []).find((x) => x.clusterId === c.id);
      rows.push([s.model, mine ? String(mine.novelty) : "—", mine ? String(mine.feasibility) : "—", mine ? String(mine.impact) : "—", mine ? String(mine.total) : (s.valid ? "not scored" : "no usable scores")]);
    }
    const r = ranking && (ranking.rankedClusters || []).find((x) => x.id === c.id);
    if (r) rows.push(["Average", num(r.averageNovelty), num(r.averageFeasibility), num(r.averageImpact), r.averageScore == null ? "not scored" : num(r.averageScore)]);
    if (!rows.length) return null;
    return table(["Scorer", "Novelty", "Feasib.", "Impact", "Total /15"], rows, { num: [1, 2, 3, 4] });
  }

  /** The clusters in rank order once ranked (those not ranked after, in the curator's). */
  function inRankOrder() {
    const rankOf = (c) => {
      const r = ranking && (ranking.rankedClusters || []).find((x) => x.id === c.id);
      return r && Number.isFinite(r.rank) ? r.rank : Infinity;
    };
    return clusters.map((c, i) => [c, i]).sort(([a, i], [b, j]) => rankOf(a) - rankOf(b) || i - j).map(([c]) => c);
  }

  function renderClusters() {
    const boxes = inRankOrder().map((c) => {
      const r = ranking && (ranking.rankedClusters || []).find((x) => x.id === c.id);
      return el("article", { class: "bs-cluster panel", id: anchor(c.id), tabindex: "-1" },
        el("div", { class: "bs-cluster-head" },
          r ? el("span", { class: "bs-rank" }, `#${r.rank}`) : null,
          el("h3", null, clusterName(c)),
          promiseBadge(c)),
        c.theme ? el("p", { class: "bs-theme" }, c.theme) : null,
        el("ul", { class: "bs-ideas" }, (c.ideaIds || []).map(ideaItem)),
        scorers.length || r ? scoreTable(c) : null);
    });
    const left = unclustered.length
      ? el("article", { class: "bs-cluster bs-unclustered panel" },
        el("div", { class: "bs-cluster-head" }, el("h3", null, "Not in any cluster"), ui.badge(ui.plural(unclustered.length, "idea"), "gray")),
        el("ul", { class: "bs-ideas" }, unclustered.map(ideaItem)))
      : null;
    clustering.body.replaceChildren(el("div", { class: "bs-clusters" }, ...boxes, left));
  }

  function jumpTo(id) {
    const box = document.getElementById(anchor(id));
    if (!box) return;
    box.scrollIntoView({ behavior: "smooth", block: "start" });
    box.focus({ preventScroll: true });
    box.classList.add("bs-flash");
    setTimeout(() => box.classList.remove("bs-flash"), 1600);
  }

  function rankingBlock(d) {
    let how;
    if (d.scoringSkipped === "single_cluster") how = "Only one cluster was formed, so it was not scored.";
    else if (d.scoringSkipped === "timeout") how = "The time limit passed before scoring, so the clusters are ranked by the curator's promise rating, then in the curator's order.";
    else if (d.rankingMethod === "scores") how = `Ranked by the average total of the ${ui.plural(d.validScorers, "scorer")} who gave usable scores (then impact, feasibility, promise, the curator's order); clusters nobody scored come last.`;
    else how = `Fewer than two scorers gave usable scores (${d.validScorers}), so the clusters are ranked by the curator's promise rating, then in the curator's order.`;
    const items = (d.rankedClusters || []).map((r) => {
      const c = clusters.find((x) => x.id === r.id);
      const name = el("button", { type: "button", class: "bs-link", onclick: () => jumpTo(r.id) }, clusterName(c || r));
      const scores = r.averageScore == null
        ? "not scored"
        : `total ${num(r.averageScore)} of 15 · novelty ${num(r.averageNovelty)} · feasibility ${num(r.averageFeasibility)} · impact ${num(r.averageImpact)} (${ui.plural(r.scoreCount, "scorer")})`;
      return el("li", null, el("span", { class: "bs-rank" }, `#${r.rank}`), " ", name,
        el("span", { class: "bs-dims" }, `${scores} · promise ${(r.promise || "").toLowerCase()}`),
        r.decidedBy ? el("span", { class: "bs-dims" }, `Above the next one: ${DECIDED[r.decidedBy] || ""}`) : null);
    });
    return el("div", { class: "bs-ranking" },
      el("h3", null, "Ranking"),
      el("p", { class: "muted" }, how),
      el("ol", { class: "bs-rank-list" }, ...items));
  }

  const view = {
    callSection(call) { return ["ideation", "clustering", "scoring", "refinement"].includes(call.stage) ? call.stage : null; },
    event(name, data) {
      seen = true;
      const d = data.data || {};
      switch (name) {
        case "brainstorm_start": modelCount = ((data.config || {}).models || []).length; break;
        case "ideation_start": ideation.running(); ctx.progress("Listing ideas"); break;
        case "ideation_complete": {
          arrived += 1;
          for (const i of d.ideas || []) ideas.set(i.id, i);
          const card = d.model ? ideation.claim(d.model) : null;
          if (card) {
            card.setRole(d.sourceLabel || "brainstormer");
            card.setState("ok", { ms: d.responseTimeMs });
            card.addBadge(ui.badge(ui.plural(d.ideaCount || 0, "idea"), d.ideaCount ? "blue" : "gray"));
            const body = d.ideaCount
              ? el("ol", { class: "bs-ideas" }, (d.ideas || []).map((i) => ideaItem(i.id, false)))
              : el("p", { class: "callout" }, `No ideas could be read from this reply: it ${d.unparsed || "gave no readable answer"}.`);
            card.setBody(body);
          }
          ctx.progress(`${arrived} of ${modelCount || arrived} idea lists in`);
          ctx.announce(`Ideas from ${d.sourceLabel || "a model"} arrived`);
          break;
        }
        case "all_ideation_complete": {
          ideation.done();
          const w = d.warnings || [];
          ideation.body.replaceChildren(...present(
            el("p", { class: "muted" }, `${ui.plural(d.totalIdeas || 0, "idea")} from ${ui.plural(d.modelCount || 0, "model")}.`),
            w.length ? el("ul", { class: "bs-warnings" }, w.map((t) => el("li", null, t))) : null));
          break;
        }
        case "clustering_start": clustering.running(); ctx.progress("Grouping the ideas into clusters"); break;
        case "clustering_complete": {
          clusters = d.clusters || [];
          unclustered = d.unclusteredIds || [];
          const card = d.model ? clustering.claim(d.model) : null;
          if (card) {
            card.setRole("curator");
            card.setState("ok", { ms: d.responseTimeMs });
            if (d.fallbackFrom) card.addBadge(ui.badge(`backup for ${d.fallbackFrom}`, "yellow"));
            card.setText(clusters.length ? `${ui.plural(clusters.length, "cluster")} formed; shown below.` : "No clusters could be read.");
          }
          clustering.lead.replaceChildren(d.fallback ? el("p", { class: "callout" }, d.note || "No clusters were formed; the refiner works from all the ideas.") : "");
          clustering.show();
          if (clusters.length) renderClusters();
          clustering.done();
          break;
        }
        case "scoring_start": scoring.running(); ctx.progress("Scoring the clusters"); break;
        case "scorer_complete": {
          scorers.push(d);
          const card = d.model ? scoring.claim(d.model) : null;
          if (card) {
            card.setRole("scorer");
            card.setState("ok", { ms: d.responseTimeMs });
            if (!d.valid) {
              card.addBadge(ui.badge("no usable scores", "gray"));
              card.setBody(el("p", { class: "callout" }, `No cluster's three ratings could be read from this reply (it ${d.unparsed || "gave no readable answer"}), so it does not count.`));
            } else {
              // A list, not a table: cluster names and justifications are prose, and a narrow
              // column breaks them mid-word.
              const items = (d.scores || []).map((s) => el("li", null,
                el("strong", null, clusterName(clusters.find((x) => x.id === s.clusterId))),
                el("span", { class: "bs-dims" }, `novelty ${s.novelty} · feasibility ${s.feasibility} · impact ${s.impact} · total ${s.total} of 15`),
                s.justification ? el("span", { class: "bs-just" }, s.justification) : null));
              const missing = clusters.length - (d.scores || []).length;
              card.setBody(el("div", null, el("ul", { class: "bs-notes" }, ...items),
                missing > 0 ? el("p", { class: "muted" }, `${ui.plural(missing, "cluster")} not scored: this reply did not give all three ratings.`) : null));
            }
          }
          if (clusters.length) renderClusters();
          break;
        }
        case "all_scoring_complete": {
          ranking = d;
          scoring.done();
          if (clusters.length) renderClusters();
          clustering.lead.replaceChildren(rankingBlock(d));
          break;
        }
        case "refinement_start": {
          refinement.running();
          const c = d.cluster;
          ctx.progress(c ? `Refining "${clusterName(c)}" into a proposal` : "Writing a proposal from all the ideas");
          break;
        }
        case "refinement_complete": {
          const card = d.model ? refinement.claim(d.model) : null;
          if (card) {
            card.setRole("refiner");
            card.setState("ok", { ms: d.responseTimeMs });
            if (d.fallbackFrom) card.addBadge(ui.badge(`backup for ${d.fallbackFrom}`, "yellow"));
            card.setText("The proposal is shown at the top of the page.");
          }
          refinement.done();
          const p = ctx.primary("Proposal");
          p.el.classList.add("bs-proposal");
          const c = clusters.find((x) => x.id === d.clusterId);
          const r = ranking && (ranking.rankedClusters || []).find((x) => x.id === d.clusterId);
          const from = d.clusterId
            ? el("p", { class: "bs-from" }, "Developed from the cluster ",
              el("button", { type: "button", class: "bs-link", onclick: () => jumpTo(d.clusterId) }, clusterName(c || { name: d.clusterName })),
              r ? ` (ranked first by ${ranking.rankingMethod === "scores" ? "the scores" : "the curator's promise rating"})` : "")
            : el("p", { class: "bs-from" }, "Developed from all the ideas: no clusters were formed.");
          p.body.replaceChildren(...present(from,
            d.fallback ? el("p", { class: "callout" }, "The refiner could not be reached, so this is the best material as it stands, not a written proposal.") : null,
            data.partial ? el("p", null, ui.badge("some calls failed", "yellow")) : null,
            ui.markdown(d.proposal || "", "bs-output")));
          ctx.announce("The proposal is ready");
          break;
        }
        default: break;
      }
    },

    /** A stored run without recorded events: render its stored result as if its events came. */
    finish(detail) {
      if (seen || !detail || !detail.result) return;
      const r = detail.result;
      const models = (r.ideas && r.ideas.models) || [];
      for (const m of models) view.event("ideation_complete", { data: m });
      if (models.length) view.event("all_ideation_complete", { data: r.ideas });
      if (r.clustering) view.event("clustering_complete", { data: r.clustering });
      for (const s of r.scores || []) view.event("scorer_complete", { data: s });
      if (r.ranking) view.event("all_scoring_complete", { data: r.ranking });
      if (r.refinement) view.event("refinement_complete", { data: r.refinement, partial: r.partial, failedModels: r.failedModels });
    },
  };
  return view;
}
