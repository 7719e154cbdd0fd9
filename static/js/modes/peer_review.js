// Peer Review: the consolidated report as the main answer (with the prioritised action items),
// the server's agreement statistics as a chart (each reviewer's score per criterion, the mean)
// and a table (mean, spread, agreement), then each reviewer's rubric scores, findings and
// strengths in its card.

const SEVERITIES = ["CRITICAL", "MAJOR", "MINOR", "SUGGESTION"];
const SEVERITY_COLORS = { CRITICAL: "red", MAJOR: "yellow", MINOR: "blue", SUGGESTION: "gray" };
const AGREEMENT_COLORS = { High: "green", Medium: "yellow", Low: "red" };
const TYPE_NAMES = {
  architecture_review: "Architecture review", code_review: "Code review",
  design_spec_review: "Design spec review", compliance_audit: "Compliance audit",
  business_plan_review: "Business plan review", custom: "Custom rubric",
};

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("peer_review");
  const reviewsSection = ctx.section("review", "Independent reviews", { tabs: true });
  const consolidation = ctx.section("consolidation", "Consolidation");
  const stats = ctx.section("review_stats", "Agreement between reviewers");
  let total = 0;
  let arrived = 0;
  let seen = false;
  let reviewType = null;
  let statistics = null;
  let reviews = [];

  // The level in words (the badge's style shows it in capitals), coloured by level.
  const sevBadge = (s, assumed, count) => ui.badge(String(s).toLowerCase() + (count === undefined ? "" : `: ${count}`) + (assumed ? " (assumed)" : ""),
    SEVERITY_COLORS[s] || "gray", "severity");
  const fmtScore = (v) => (v == null ? "—" : String(v));

  function scoresTable(scores) {
    const rows = (scores || []).map((s) => [
      s.criterion, s.score == null ? el("span", { class: "muted" }, "not stated") : String(s.score), String(s.weight),
      s.justification ? ui.markdown(s.justification) : "",
    ]);
    return el("div", { class: "table-wrap" }, ui.table(["Criterion", "Score", "Weight", "Why"], rows, { num: [1, 2], caption: "Scores (1-5)" }));
  }

  function findingsList(findings) {
    if (!(findings || []).length) return el("p", { class: "muted" }, "No findings could be read from this review.");
    return el("ol", { class: "pr-findings" }, findings.map((f) => el("li", { class: "pr-finding" },
      el("div", { class: "pr-finding-head" },
        sevBadge(f.severity, f.severityDefaulted),
        el("strong", null, f.title || `Finding ${f.number}`),
        f.criterion ? el("span", { class: "muted" }, ` · ${f.criterion}`) : (f.category ? el("span", { class: "muted" }, ` · ${f.category}`) : null),
        f.location ? el("span", { class: "muted pr-location" }, ` · ${f.location}`) : null),
      f.description || f.impact || f.recommendation
        ? el("details", null, el("summary", null, "Details"),
          f.description ? el("div", null, el("h4", null, "Description"), ui.markdown(f.description)) : null,
          f.impact ? el("div", null, el("h4", null, "Impact"), ui.markdown(f.impact)) : null,
          f.recommendation ? el("div", null, el("h4", null, "Recommendation"), ui.markdown(f.recommendation)) : null)
        : null)));
  }

  function showReview(r) {
    const card = r.model ? reviewsSection.claim(r.model) : null;
    if (!card) return;
    card.setRole(`reviewer ${r.reviewerIndex}`);
    card.setState("ok", { ms: r.responseTimeMs });
    card.addBadge(r.overallScore == null
      ? ui.badge("no scores could be read", "gray")
      : ui.badge(`overall ${ui.fmtNum(r.overallScore)} / 5`, "blue"));
    const nodes = [];
    if (!r.parseSuccess) nodes.push(el("div", { class: "callout pr-unparsed" }, "No score could be read from this review: it counts for its findings only.", r.unparsed ? ` ${ui.unparsedWhy(r.unparsed)}` : ""));
    nodes.push(scoresTable(r.scores));
    nodes.push(el("h4", null, "Findings"), findingsList(r.findings));
    if ((r.strengths || []).length) nodes.push(el("h4", null, "Strengths"), el("ul", { class: "pr-strengths" }, r.strengths.map((s) => el("li", null, s))));
    nodes.push(el("details", { class: "pr-full" }, el("summary", null, "The full review"), ui.markdown(r.reviewText || "")));
    card.setBody(el("div", null, ...nodes));
  }

  /** Grouped bars: each reviewer's score per criterion, with the mean as a line. */
  function agreementChart(s) {
    const crit = s.consensusScores || [];
    const labels = crit.map((c) => c.criterion);
    const datasets = reviews.map((r, i) => ({
      type: "bar",
      label: `Reviewer ${r.reviewerIndex}`,
      data: crit.map((c) => { const x = (c.scores || []).find((v) => v.reviewerIndex === r.reviewerIndex); return x ? x.score : null; }),
      backgroundColor: ctx.charts.color(i, 0.75),
    }));
    datasets.push({ type: "line", label: "Mean", data: crit.map((c) => c.average), borderColor: "#444", backgroundColor: "#444", pointRadius: 4, showLine: false });
    const label = `Scores by criterion, bar chart. ${crit.map((c) => `${c.criterion}: mean ${fmtScore(c.average)}, spread ${fmtScore(c.stddev)}, agreement ${c.agreement || "not measured"}`).join("; ")}.`;
    const box = ctx.chart({
      type: "bar",
      data: { labels, datasets },
      options: {
        plugins: { legend: { position: "bottom" } },
        scales: { y: { min: 0, max: 5, ticks: { stepSize: 1 } }, x: { grid: { display: false } } },
      },
    }, { label });
    box.classList.add("pr-chart");
    return box;
  }

  function statsTable(s) {
    const rows = (s.consensusScores || []).map((c) => [
      c.criterion, String(c.weight), fmtScore(c.average), fmtScore(c.stddev),
      c.agreement ? ui.badge(c.agreement + (c.disputed ? " · disputed" : ""), AGREEMENT_COLORS[c.agreement] || "gray") : el("span", { class: "muted" }, "fewer than 2 scores"),
    ]);
    return el("div", { class: "table-wrap" }, ui.table(["Criterion", "Weight", "Mean", "Spread (sd)", "Agreement"], rows, { num: [1, 2, 3], caption: "Computed by the server from the reviewers' scores" }));
  }

  function showStats(d) {
    statistics = d.statistics || {};
    reviews = d.reviews || [];
    const s = statistics;
    const t = s.findingTotals || {};
    const failed = d.failedReviewers || [];
    stats.lead.replaceChildren(el("div", { class: "pr-summary" },
      el("span", { class: "big-number" }, s.consensusOverall == null ? "—" : ui.fmtNum(s.consensusOverall)),
      el("span", { class: "muted" }, " / 5 weighted consensus"),
      el("span", { class: "pr-summary-badges" },
        s.meanStdDev == null ? null : ui.badge(`mean spread ${ui.fmtNum(s.meanStdDev)}`, "gray"),
        ...SEVERITIES.map((l) => sevBadge(l, false, t[l] ?? 0)))));
    const nodes = [agreementChart(s), statsTable(s)];
    if (failed.length) nodes.push(el("p", { class: "callout pr-failed" }, `Did not review (the call failed): ${failed.map((f) => `reviewer ${f.reviewerIndex} (${f.model})`).join(", ")}.`));
    stats.body.replaceChildren(...nodes);
    stats.show();
    stats.done();
  }

  /** The item's words without its severity tag and effort, which have columns of their own. */
  function actionText(a) {
    let t = a.text.replace(/^\s*\[[^\]]*\]\s*/, "");
    if (a.effort) t = t.replace(/\s*[—–-]?\s*\(?\s*\**effort\s*\**\s*:\s*\**\s*(low|medium|high)\b\s*\**\)?\s*\.?\s*$/i, "");
    return t;
  }

  function actionTable(items) {
    if (!(items || []).length) return el("p", { class: "muted" }, "No numbered action items could be read from the report.");
    const rows = items.map((a, i) => [
      String(i + 1), a.severity ? sevBadge(a.severity) : el("span", { class: "muted" }, "—"),
      ui.markdown(actionText(a)), a.effort || el("span", { class: "muted" }, "not stated"),
    ]);
    return el("div", { class: "table-wrap" }, ui.table(["#", "Severity", "Action", "Effort"], rows, { caption: "Prioritised action items" }));
  }

  const view = {
    callSection(call) { return call.stage === "consolidation" ? "consolidation" : call.stage === "review" ? "review" : null; },
    event(name, data) {
      seen = true;
      const d = data.data || {};
      switch (name) {
        case "review_start": reviewType = data.reviewType; break;
        case "reviewers_start":
          total = data.totalReviewers || 0;
          reviewsSection.running();
          ctx.progress(`${TYPE_NAMES[reviewType] || "Review"}: ${total} reviewers at work`);
          break;
        case "reviewer_complete":
          arrived += 1;
          showReview(d);
          ctx.progress(`${arrived} of ${total} reviews in`);
          ctx.announce(`Review ${arrived} of ${total} in`);
          break;
        case "all_reviewers_complete":
          reviewsSection.done();
          showStats(d);
          break;
        case "consolidation_start": consolidation.running(); ctx.progress("Consolidating the reviews"); break;
        case "consolidation_complete": {
          const card = d.model ? consolidation.claim(d.model) : null;
          if (card) {
            card.setRole("consolidator");
            card.setState("ok", { ms: d.responseTimeMs });
            if (d.fallbackFrom) card.addBadge(ui.badge(`backup for ${d.fallbackFrom}`, "yellow"));
            card.setText("The report is shown at the top of the page.");
          }
          consolidation.done();
          const p = ctx.primary("Consolidated review");
          p.el.classList.add("pr-report");
          const s = statistics || {};
          const meta = el("div", { class: "pr-meta" },
            ui.badge(TYPE_NAMES[reviewType] || "Review", "blue"),
            s.consensusOverall == null ? null : ui.badge(`consensus ${ui.fmtNum(s.consensusOverall)} / 5`, "green"),
            ui.badge(ui.plural((d.actionItems || []).length, "action item"), "gray"),
            d.fallbackFrom ? ui.badge(`written by the backup for ${d.fallbackFrom}`, "yellow") : null,
            el("span", { class: "muted" }, `by ${d.model || "?"}`));
          p.body.replaceChildren(ui.markdown(d.consolidatedReport || "", "pr-output"), meta,
            el("section", { class: "pr-actions" }, el("h3", null, "Action items"), actionTable(d.actionItems)));
          ctx.announce("The consolidated review is ready");
          break;
        }
        default: break;
      }
    },

    /** A stored run without recorded events: render its stored result as if its events came. */
    finish(detail) {
      if (seen || !detail || !detail.result) return;
      const r = detail.result;
      view.event("review_start", { reviewType: r.reviewType });
      view.event("reviewers_start", { totalReviewers: (r.reviews || []).length + (r.failedReviewers || []).length });
      for (const x of r.reviews || []) view.event("reviewer_complete", { data: x });
      if (r.statistics) view.event("all_reviewers_complete", { data: { reviews: r.reviews, failedReviewers: r.failedReviewers, statistics: r.statistics } });
      if (r.consolidation) view.event("consolidation_complete", { data: r.consolidation });
    },
  };
  return view;
}
