// Jury: the content under evaluation (with the original question above it), a card per juror
// (model, response time, a radar chart of the five dimension scores, the verdict badge, the
// full assessment and recommendations behind toggles; tabs on a phone), the aggregate (overall
// average, dimension bar chart with average, min and max, verdict pie chart) and the foreman's
// report as the run's main answer (dimension analysis table, strengths, weaknesses,
// recommendations, dissent, the full text).
//
// A fold over events: everything drawn here comes from the event payloads, so a reopened run
// renders like the live one. `finish` only adds what a failed run's events cannot say.

const DIMS = [
  ["accuracy", "Accuracy"],
  ["completeness", "Completeness"],
  ["clarity", "Clarity"],
  ["relevance", "Relevance"],
  ["actionability", "Actionability"],
];
const CONSENSUS_COLOR = { "Strong agreement": "green", Mixed: "yellow", Disagreement: "red" };

function cssVar(name, fallback) {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

export function createView(ctx) {
  const { el, ui } = ctx;
  if (ui.ensureStylesheet) ui.ensureStylesheet("jury");

  const sPresent = ctx.section("present", "Content under evaluation");
  const sJurors = ctx.section("deliberation", "Jurors", { tabs: true });
  const sSummary = ctx.section("summary", "Jury summary");
  const sForeman = ctx.section("verdict", "Foreman");

  const state = {
    jurorsDone: 0,
    jurorRecs: [], // every juror's recommendations, in arrival order, for the report
    summary: null,
    report: null,
  };


  const fmt = (n) => ui.fmtNum(n, 1);
  /** An average, always with one decimal ("7.0"). */
  const avg = (n) => (n === null || n === undefined || Number.isNaN(Number(n)) ? "–" : Number(n).toFixed(1));

  function scoreLabel(scores) {
    return DIMS.map(([k, name]) => `${name} ${scores && scores[k] != null ? scores[k] : "not parsed"}`).join(", ");
  }

  function radar(a, i) {
    const data = DIMS.map(([k]) => (a.scores && a.scores[k] != null ? a.scores[k] : null));
    const box = ctx.chart({
      type: "radar",
      data: {
        labels: DIMS.map(([, n]) => n),
        datasets: [{
          label: a.model,
          data,
          backgroundColor: ctx.charts.color(i, 0.3),
          borderColor: ctx.charts.color(i),
          pointBackgroundColor: ctx.charts.color(i),
          borderWidth: 2,
          spanGaps: true,
        }],
      },
      options: {
        plugins: { legend: { display: false } },
        scales: { r: { min: 0, max: 10, ticks: { stepSize: 2, display: false } } },
      },
    }, { label: `${a.model} scores out of 10: ${scoreLabel(a.scores)}; average ${a.average != null ? fmt(a.average) : "none"}`, small: true });
    box.classList.add("jury-radar");
    return box;
  }

  function jurorComplete(a) {
    const card = sJurors.claim(a.model);
    card.setRole("juror");
    card.addBadge(ui.verdictBadge(a.verdict)).classList.add("jury-verdict");
    card.setState("ok", { ms: a.responseTimeMs });
    card.el.classList.add("juror-card");
    if (a.parseSuccess) {
      card.prepend(radar(a, Math.max(0, sJurors.cards.indexOf(card))));
      card.prepend(el("div", { class: "jury-scores" },
        DIMS.map(([k, name]) => el("span", { class: "jury-score" }, el("span", { class: "muted" }, name), " ",
          el("strong", null, a.scores && a.scores[k] != null ? String(a.scores[k]) : "–"))),
        el("span", { class: "jury-score jury-avg" }, el("span", { class: "muted" }, "Average"), " ", el("strong", null, avg(a.average)))));
    } else {
      card.prepend(el("p", { class: "callout jury-unparsed" },
        "The scores in this assessment could not be parsed, so it is left out of the averages",
        a.verdict ? "; its verdict still counts." : " and has no verdict.",
        a.unparsed ? ` ${ui.unparsedWhy(a.unparsed)}` : ""));
    }
    // The full assessment, collapsed behind "Show more".
    card.setText(a.assessmentText || "");
    const recs = a.recommendations || [];
    if (recs.length) {
      state.jurorRecs.push(...recs);
      card.extra.append(el("details", { class: "jury-recs" },
        el("summary", null, `Recommendations (${recs.length})`),
        el("ol", null, recs.map((r) => el("li", null, r)))));
    } else {
      card.extra.append(el("p", { class: "muted jury-recs-none" }, "No recommendations."));
    }
    state.jurorsDone += 1;
    const total = Math.max(sJurors.cards.length, state.jurorsDone);
    ctx.progress(`Jurors: ${state.jurorsDone} of ${total} assessed`);
    ctx.announce(`${a.model}: ${a.verdict || "no verdict"}${a.average != null ? `, average ${fmt(a.average)}` : ""}`);
  }

  function barChart(s) {
    const avgs = DIMS.map(([k]) => (s.dimensionAverages ? s.dimensionAverages[k] : null));
    const ranges = DIMS.map(([k]) => (s.dimensionRanges ? s.dimensionRanges[k] : null));
    const label = "Dimension scores across jurors, out of 10: " + DIMS.map(([, n], i) => (avgs[i] == null
      ? `${n} not scored`
      : `${n} average ${fmt(avgs[i])}, min ${ranges[i] ? ranges[i].min : "–"}, max ${ranges[i] ? ranges[i].max : "–"}`)).join("; ");
    return ctx.chart({
      type: "bar",
      data: {
        labels: DIMS.map(([, n]) => n),
        datasets: [
          { label: "Min", data: ranges.map((r) => (r ? r.min : null)), backgroundColor: ctx.charts.color(1, 0.75) },
          { label: "Average", data: avgs, backgroundColor: ctx.charts.color(0) },
          { label: "Max", data: ranges.map((r) => (r ? r.max : null)), backgroundColor: ctx.charts.color(2, 0.75) },
        ],
      },
      options: {
        scales: { y: { min: 0, max: 10, ticks: { stepSize: 2 } }, x: { ticks: { autoSkip: false, maxRotation: 45 } } },
        plugins: { legend: { position: "bottom" } },
      },
    }, { label });
  }

  function pieChart(t) {
    const counts = [t.approve || 0, t.revise || 0, t.reject || 0];
    const V = ctx.charts.VERDICT;
    return ctx.chart({
      type: "pie",
      data: {
        labels: ["Approve", "Revise", "Reject"],
        datasets: [{ data: counts, backgroundColor: [V.APPROVE, V.REVISE, V.REJECT], borderColor: cssVar("--surface", "#fff"), borderWidth: 2 }],
      },
      options: { plugins: { legend: { position: "bottom" } } },
    }, { label: `Verdicts of ${counts[0] + counts[1] + counts[2]} jurors: ${counts[0]} approve, ${counts[1]} revise, ${counts[2]} reject` });
  }

  function tallyText(t) {
    return `${t.approve || 0} approve · ${t.revise || 0} revise · ${t.reject || 0} reject`;
  }

  const SOURCE_NOTE = {
    scores: "No juror's verdict could be parsed, so the majority verdict is inferred from the overall average.",
    none: "Neither verdicts nor scores could be read: the panel reached no verdict.",
  };

  function allJurorsComplete(s) {
    state.summary = s;
    sJurors.done();
    const t = s.voteTally || {};
    const body = sSummary.body;
    body.replaceChildren();
    sSummary.show();
    const overall = el("div", { class: "jury-stat jury-overall" },
      el("div", { class: "muted" }, "Overall average"),
      el("div", { class: "big-number" }, avg(s.overallAverage), el("span", { class: "jury-outof" }, " / 10")));
    const majority = el("div", { class: "jury-stat jury-majority" },
      el("div", { class: "muted" }, "Majority verdict"),
      el("div", { class: "jury-big-verdict" }, ui.verdictBadge(s.majorityVerdict)),
      el("div", { class: "muted" }, tallyText(t)));
    const count = el("div", { class: "jury-stat" },
      el("div", { class: "muted" }, "Jurors"),
      el("div", { class: "jury-count" }, `${s.successfulJurors} of ${s.jurorCount} answered`));
    const panel = el("div", { class: "panel jury-aggregate" }, el("div", { class: "jury-stats" }, overall, majority, count));
    if (SOURCE_NOTE[s.verdictSource]) panel.append(el("p", { class: "callout" }, SOURCE_NOTE[s.verdictSource]));
    for (const w of s.warnings || []) if (!Object.values(SOURCE_NOTE).includes(w)) panel.append(el("p", { class: "callout jury-warning" }, w));
    const hasScores = s.dimensionAverages && DIMS.some(([k]) => s.dimensionAverages[k] != null);
    panel.append(el("div", { class: "grid-2 jury-charts" },
      el("div", { class: "jury-chart" }, el("h3", null, "Scores by dimension"),
        hasScores ? barChart(s) : el("p", { class: "muted" }, "No scores could be parsed.")),
      el("div", { class: "jury-chart" }, el("h3", null, "Verdicts"), pieChart(t))));
    body.append(panel);
    sSummary.done();
    ctx.announce(s.majorityVerdict ? `All jurors done: majority ${s.majorityVerdict}, overall average ${fmt(s.overallAverage)}` : "All jurors done: no verdict could be read");
  }

  function list(items, cls) {
    return el("ul", { class: cls }, items.map((x) => el("li", null, x)));
  }

  function verdictComplete(r) {
    state.report = r;
    const card = sForeman.claim(r.model);
    card.setRole("foreman");
    card.setState("ok", { ms: r.responseTimeMs });
    card.setBody(el("p", { class: "muted" }, "The verdict report is at the top of the page."));
    sForeman.done();

    const p = ctx.primary("Verdict report");
    p.el.classList.add("jury-report");
    p.head.replaceChildren("Verdict report", ui.verdictBadge(r.finalVerdict), el("span", { class: "muted" }, `by ${r.model}`));
    const s = state.summary || {};
    const body = document.createDocumentFragment();
    body.append(el("div", { class: "jury-stats" },
      el("div", { class: "jury-stat" }, el("div", { class: "muted" }, "Final verdict"), el("div", { class: "jury-big-verdict" }, ui.verdictBadge(r.finalVerdict))),
      el("div", { class: "jury-stat jury-report-average" }, el("div", { class: "muted" }, "Overall average"),
        el("div", { class: "big-number" }, avg(s.overallAverage), el("span", { class: "jury-outof" }, " / 10")))));

    const rows = (r.dimensionAnalysis || []).map((d) => [d.dimension, avg(d.avgScore), String(d.minScore), String(d.maxScore),
      ui.badge(d.consensus, CONSENSUS_COLOR[d.consensus] || "gray")]);
    body.append(el("h3", null, "Dimension analysis"));
    if (rows.length) {
      const head = (long, short) => el("span", null, el("span", { class: "long" }, long), el("abbr", { class: "short", title: long }, short));
      const t = ui.table(["Dimension", head("Average", "Avg"), "Min", "Max", "Consensus"], rows, { num: [1, 2, 3], caption: "Dimension analysis" });
      t.classList.add("jury-dimensions");
      body.append(el("div", { class: "jury-table-wrap" }, t));
    } else {
      body.append(el("p", { class: "muted" }, "No dimension could be scored."));
    }

    body.append(el("div", { class: "grid-2 jury-sw" },
      el("div", null, el("h3", null, "Key strengths"), (r.keyStrengths || []).length ? list(r.keyStrengths, "jury-strengths") : el("p", { class: "muted" }, "None listed.")),
      el("div", null, el("h3", null, "Key weaknesses"), (r.keyWeaknesses || []).length ? list(r.keyWeaknesses, "jury-weaknesses") : el("p", { class: "muted" }, "None listed."))));

    body.append(el("h3", null, "Recommendations"));
    if ((r.recommendations || []).length) {
      body.append(el("ol", { class: "jury-report-recs" }, r.recommendations.map((x) => el("li", null, x))));
    } else {
      const seen = new Set();
      const fromJurors = state.jurorRecs.filter((x) => { const k = x.trim().toLowerCase(); if (seen.has(k)) return false; seen.add(k); return true; });
      if (fromJurors.length) {
        body.append(el("p", { class: "muted" }, "The foreman listed none separately; the jurors recommended:"),
          el("ol", { class: "jury-report-recs" }, fromJurors.map((x) => el("li", null, x))));
      } else {
        body.append(el("p", { class: "muted" }, "None: no changes were recommended."));
      }
    }
    if ((r.dissentingOpinions || []).length) {
      body.append(el("h3", null, "Dissenting opinions"), list(r.dissentingOpinions, "jury-dissent"));
    }
    body.append(el("h3", null, "Full report"), ui.clip(ui.markdown(r.reportText || ""), { open: false }));
    p.body.replaceChildren(body);
    ctx.announce(`Verdict: ${r.finalVerdict}`);
  }

  return {
    callSection(call) {
      if (call.stage === "deliberation") return "deliberation";
      if (call.stage === "verdict") return "verdict";
      return call.stage;
    },

    event(name, data) {
      const d = (data && data.data) || {};
      switch (name) {
        case "present_start":
          sPresent.running();
          ctx.progress("Presenting the content");
          break;
        case "present_complete": {
          const body = sPresent.body;
          body.replaceChildren();
          if (d.originalQuestion) {
            body.append(el("div", { class: "callout muted jury-original" },
              el("div", { class: "jury-original-label" }, "Original question"),
              el("div", { class: "jury-original-text" }, d.originalQuestion)));
          }
          body.append(el("div", { class: "card highlight jury-content" }, ui.clip(ui.markdown(d.content || ""), { open: false })));
          sPresent.done();
          break;
        }
        case "deliberation_start":
          sJurors.running();
          ctx.progress("Jurors are assessing the content");
          break;
        case "juror_complete": jurorComplete(d); break;
        case "all_jurors_complete": allJurorsComplete(d); break;
        case "verdict_start":
          sForeman.running();
          ctx.progress("The foreman is writing the verdict report");
          break;
        case "verdict_complete": verdictComplete(d); break;
        default: break;
      }
    },

    finish(detail) {
      if (state.report || !detail || detail.status === "completed") return;
      // The run ended without a report (the foreman failed, too few jurors, cancelled): say
      // what is kept. The error itself is in the run's note.
      const p = ctx.primary("Verdict report");
      p.el.classList.add("jury-report", "jury-no-report");
      const s = state.summary;
      const msg = s
        ? `No verdict report: the run ${detail.status} before the foreman's report. The jurors' assessments and summary above are kept; ${s.majorityVerdict ? `by majority they reached ${s.majorityVerdict} with an overall average of ${fmt(s.overallAverage)}` : "no juror's verdict or scores could be read"}.`
        : `No verdict report: the run ${detail.status} before the jurors' summary.`;
      p.body.replaceChildren(el("p", { class: "callout" }, msg));
    },
  };
}
