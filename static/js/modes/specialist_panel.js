// Specialist Panel: the integrated assessment as the main block, at the top once it is in
// (executive summary first, then the risk matrix, agreements, disagreements and
// recommendations), under it the rating grid
// (each specialist's criteria, 1-5, as a heat table; a rating the report does not state is
// shown as such) and a tab per specialist with its ratings, key findings, top recommendations
// and full report.

const LEVEL_COLORS = { Critical: "red", High: "red", Medium: "yellow", Low: "blue" };

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("specialist_panel");
  const panel = ctx.section("specialists", "Specialist reports", { tabs: true });
  const synthSection = () => ctx.section("synthesis", "Synthesis");
  let roles = []; // [{roleKey, roleTitle, model, criteria}]
  const reports = {}; // index -> specialist_complete data
  let failed = []; // [{roleKey, roleTitle, model, error}]
  let seen = false;
  let allIn = false; // all_specialists_complete came
  let stopped = false; // the run ended before every report came

  const fmtScore = (s) => (s === null || s === undefined ? "not stated" : `${s}/5`);
  const avgText = (a) => (a === null || a === undefined ? "no rating stated" : `average ${ui.fmtNum(a)}/5`);

  function scoreCell(c) {
    const s = c.score;
    const stated = s !== null && s !== undefined;
    return el("span", {
      class: `sp-score ${stated ? `sp-s${s}` : "sp-unstated"}`,
      title: stated ? `${c.criterion}: ${s} of 5` : `${c.criterion}: the report gives no 1-5 rating`,
    }, stated ? String(s) : "–");
  }

  /** The rating grid: a row per specialist, a heat cell per criterion of its role. */
  function grid() {
    const rows = roles.map((r, i) => {
      const d = reports[i];
      const f = failed.find((x) => x.roleKey === r.roleKey);
      const head = el("th", { scope: "row", class: "sp-grid-role" },
        el("span", { class: "sp-role-title" }, r.roleTitle), el("span", { class: "muted sp-role-model" }, r.model));
      let cells;
      if (d) {
        cells = (d.criteriaScores || []).map((c) => el("li", { class: "sp-cell" },
          scoreCell(c), el("span", { class: "sp-criterion" }, c.criterion)));
      } else {
        const criteria = r.criteria || [];
        const why = f ? "no report (the call failed)" : (stopped ? "no report (the run stopped first)" : "waiting for the report");
        cells = criteria.map((name) => el("li", { class: "sp-cell" },
          el("span", { class: "sp-score sp-missing", title: `${name}: ${why}` }, f || stopped ? "×" : "…"),
          el("span", { class: "sp-criterion" }, name)));
      }
      const avg = d ? avgText(d.averageScore) : (f ? "no report: the call failed" : (stopped ? "no report: the run stopped first" : "waiting"));
      return el("tr", null, head,
        el("td", null, el("ul", { class: "sp-cells", "aria-label": `${r.roleTitle}: ratings` }, cells)),
        el("td", { class: "sp-avg" }, avg));
    });
    const table = el("table", { class: "data sp-grid" },
      el("caption", { class: "visually-hidden" }, "Ratings by specialist and criterion, 1 to 5 (5 is strong)"),
      el("thead", null, el("tr", null, el("th", { scope: "col" }, "Specialist"), el("th", { scope: "col" }, "Ratings by criterion (1-5, 5 is strong)"), el("th", { scope: "col" }, "Average"))),
      el("tbody", null, rows));
    const legend = el("p", { class: "sp-legend muted" },
      [1, 2, 3, 4, 5].map((n) => el("span", { class: `sp-score sp-s${n}` }, String(n))),
      " rating  ", el("span", { class: "sp-score sp-unstated" }, "–"), " not stated in the report");
    return el("div", { class: "sp-grid-wrap" }, el("h3", null, "Ratings"), el("div", { class: "table-wrap" }, table), legend);
  }

  function drawGrid() {
    if (roles.length) panel.lead.replaceChildren(grid());
  }

  function cardFor(d) {
    return ctx.card(`specialist:${d.index}`) || panel.claim(d.model);
  }

  function showReport(d) {
    const card = cardFor(d);
    card.claimed = true;
    card.setTitle(d.roleTitle || d.roleKey);
    card.setRole(d.model || "");
    card.setText(d.report || "");
    card.setState("ok", { ms: d.responseTimeMs });
    card.addBadge(ui.badge(avgText(d.averageScore), d.parseSuccess ? "blue" : "gray"));
    const parts = [];
    if (!d.parseSuccess) {
      parts.push(el("div", { class: "callout sp-unparsed" },
        "No 1-5 rating could be read from this report; it went to the synthesizer as written.",
        d.unparsed ? ` ${ui.unparsedWhy(d.unparsed)}` : ""));
    }
    if ((d.keyFindings || []).length) {
      parts.push(el("h4", null, "Key findings"), el("ol", { class: "sp-list" }, d.keyFindings.map((f) => el("li", null, ui.markdown(f)))));
    }
    if ((d.topRecommendations || []).length) {
      parts.push(el("h4", null, "Top recommendations"), el("ol", { class: "sp-list" }, d.topRecommendations.map((f) => el("li", null, ui.markdown(f)))));
    }
    const rated = (d.criteriaScores || []).map((c) => [c.criterion, scoreCell(c), c.notes || el("span", { class: "muted" }, c.score === null || c.score === undefined ? "not stated" : "—")]);
    if (rated.length) {
      parts.push(el("details", { class: "sp-notes" }, el("summary", null, "Ratings with the specialist's notes"),
        el("div", { class: "table-wrap" }, ui.table(["Criterion", "Rating", "Notes"], rated, { caption: `${d.roleTitle}: ratings` }))));
    }
    parts.push(el("h4", null, "Full report"));
    card.prepend(el("div", { class: "sp-report-head" }, parts));
  }

  function section(title, text, extra) {
    if (!text || !text.trim()) return null;
    return el("section", { class: "sp-part" }, el("h3", null, title), extra || ui.markdown(text));
  }

  /** The risk matrix; on a phone each row stacks into a card with its column names. */
  function riskTable(rows) {
    if (!(rows || []).length) return null;
    const heads = ["Domain", "Level", "Concern", "Action", "Raised by"];
    const body = rows.map((r) => el("tr", null, [
      r.domain || "",
      r.level ? ui.badge(r.level, LEVEL_COLORS[r.level] || "gray") : el("span", { class: "muted" }, "not stated"),
      r.concern ? ui.markdown(r.concern) : "",
      r.action ? ui.markdown(r.action) : "",
      (r.sources || []).join(", "),
    ].map((c, i) => el("td", { "data-label": heads[i] }, c))));
    return el("div", { class: "table-wrap" }, el("table", { class: "data sp-risk" },
      el("caption", { class: "visually-hidden" }, "Consolidated risk matrix"),
      el("thead", null, el("tr", null, heads.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", null, body)));
  }

  function showSynthesis(d, partial, failedModels) {
    const s = d.sections || {};
    const p = ctx.primary("Integrated assessment");
    p.el.classList.add("sp-synthesis");
    const top = d.topRisk;
    const n = Object.keys(reports).length;
    const meta = el("div", { class: "sp-meta" },
      top ? ui.badge(`Top risk: ${top.level} · ${top.domain || "unnamed"}`, LEVEL_COLORS[top.level] || "gray") : ui.badge("No risk level stated", "gray"),
      ui.badge(`${ui.plural(n, "specialist report")}${failed.length ? `, ${failed.length} missing` : ""}`, failed.length ? "yellow" : "blue"),
      d.fallbackFrom ? ui.badge(`backup for ${d.fallbackFrom}`, "yellow") : null,
      el("span", { class: "muted" }, `by ${d.model || "?"}`));
    const parts = [meta];
    const anySection = ["executiveSummary", "convergentFindings", "divergentFindings", "consolidatedRiskMatrix", "unifiedRecommendations"].some((k) => (s[k] || "").trim());
    if (anySection) {
      parts.push(
        section("Executive summary", s.executiveSummary),
        section("Risk matrix", s.consolidatedRiskMatrix, riskTable(d.riskMatrix)),
        section("Where the specialists agree", s.convergentFindings),
        section("Where they differ", s.divergentFindings),
        section("Recommendations", s.unifiedRecommendations),
        el("details", { class: "sp-full" }, el("summary", null, "The synthesizer's full reply"), ui.markdown(d.integratedAssessment || "")),
      );
    } else {
      parts.push(el("div", { class: "callout sp-unparsed" }, "The synthesis does not use the requested sections; here it is as written."),
        ui.markdown(d.integratedAssessment || ""));
    }
    p.body.replaceChildren(...parts.filter(Boolean));
    // The assessment is the answer: it leads the run, the reports below support it.
    const card = ctx.card(d.fallbackFrom ? "synthesis:backup" : "synthesis");
    if (card) {
      card.setState("ok", { ms: d.responseTimeMs });
      card.setBody(el("p", { class: "muted" }, "The integrated assessment is shown at the top."));
    }
    synthSection().done();
    ctx.announce(top ? `Assessment ready: top risk ${top.level}, ${top.domain}` : "Assessment ready");
  }

  const view = {
    callSection(call) {
      if (call.role === "specialist") return "specialists";
      if (call.stage === "synthesis") return "synthesis";
      return call.stage;
    },

    event(name, data) {
      seen = true;
      const d = data.data || {};
      switch (name) {
        case "panel_start":
          roles = data.roles || [];
          ctx.progress(`${ui.plural(roles.length, "specialist")} analysing`);
          panel.running();
          drawGrid();
          break;
        case "specialist_complete":
          reports[d.index] = d;
          showReport(d);
          drawGrid();
          ctx.progress(`${Object.keys(reports).length} of ${roles.length || "?"} reports in`);
          ctx.announce(`${d.roleTitle}: ${avgText(d.averageScore)}`);
          break;
        case "all_specialists_complete":
          allIn = true;
          failed = d.failedSpecialists || [];
          for (const r of d.specialists || []) if (!reports[r.index]) { reports[r.index] = r; showReport(r); }
          for (const f of failed) {
            const i = roles.findIndex((r) => r.roleKey === f.roleKey);
            const card = i >= 0 ? ctx.card(`specialist:${i}`) : null;
            if (card) { card.setTitle(f.roleTitle); card.setRole(f.model); }
          }
          drawGrid();
          panel.done();
          if (failed.length) {
            panel.body.replaceChildren(el("div", { class: "callout sp-failed" },
              `No report from ${failed.map((f) => `${f.roleTitle} (${f.model})`).join(", ")}: ${failed.length === 1 ? "its call" : "their calls"} failed.`));
          }
          break;
        case "synthesis_start":
          synthSection().running();
          ctx.progress("Integrating the reports");
          break;
        case "synthesis_complete":
          showSynthesis(d, data.partial, data.failedModels);
          break;
        default: break;
      }
    },

    /** A stored run without recorded events: render its stored result as if its events came. */
    finish(detail) {
      if (seen && !allIn && detail && detail.status && detail.status !== "running") {
        // Cancelled, failed or interrupted before every report came: say so in the grid.
        stopped = true;
        drawGrid();
      }
      if (seen || !detail || !detail.result) return;
      const r = detail.result;
      view.event("panel_start", { roles: r.roles || [] });
      for (const s of r.specialists || []) view.event("specialist_complete", { data: s });
      view.event("all_specialists_complete", { data: { specialists: r.specialists || [], failedSpecialists: r.failedSpecialists || [] } });
      if (r.synthesis) view.event("synthesis_complete", { data: r.synthesis, partial: r.partial, failedModels: r.failedModels });
    },
  };
  return view;
}
