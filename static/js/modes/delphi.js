// Delphi: the facilitator's classification (NUMERIC or QUALITATIVE) as a banner; a section per
// round holding the panelists' live calls and the round's anonymous estimate cards
// ("Participant 1"…); a convergence overview with a chart (numeric: the mean per round with a
// shaded ±1 standard deviation band; qualitative: a stacked bar of the answers per round), a
// round-by-round timeline of the statistics and the convergence badge; the facilitator's
// report as the run's main answer.
//
// Privacy: the live events are anonymous, so nothing here says which model gave which estimate
// until `finish(detail)`, whose stored result names the model behind each participant.

const CONFIDENCE_COLORS = { HIGH: "green", MEDIUM: "blue", LOW: "gray" };

function isNum(n) {
  return n !== null && n !== undefined && n !== "" && Number.isFinite(Number(n));
}

/** A statistic or estimate: whole numbers for large values, a few decimals for small ones. */
export function fmtVal(n) {
  if (!isNum(n)) return "–";
  const x = Number(n);
  const a = Math.abs(x);
  if (a === 0) return "0";
  if (a < 1) return x.toLocaleString(undefined, { maximumSignificantDigits: 3 });
  return x.toLocaleString(undefined, { maximumFractionDigits: a >= 1000 ? 0 : a >= 100 ? 1 : 2 });
}

function fmtCompact(n) {
  if (!isNum(n)) return "";
  const a = Math.abs(Number(n));
  if (a < 10000) return fmtVal(n);
  return Number(n).toLocaleString(undefined, { notation: "compact", maximumSignificantDigits: 3 });
}

function fmtCv(cv) {
  return isNum(cv) ? Number(cv).toLocaleString(undefined, { maximumFractionDigits: 3 }) : "∞ (mean is 0)";
}

function barFill(pct, color) {
  const fill = document.createElement("span");
  fill.style.width = `${Math.max(0, Math.min(100, Number(pct) || 0))}%`;
  if (color) fill.style.background = color;
  return fill;
}

function cssVar(name, fallback) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
}

export function createView(ctx) {
  const { el, ui } = ctx;
  if (ui.ensureStylesheet) ui.ensureStylesheet("delphi");

  // ---- state (the fold) ----
  let kind = null; // "numeric" | "qualitative"
  let options = [];
  const rounds = new Map(); // n -> round record
  const round1Calls = new Set(); // call keys of round 1, to tell how many panelists started
  let outcome = null; // {converged, round, reason}
  let reportShown = false;
  // Qualitative answers in a fixed order (the options, then others as they first appear), so an
  // answer keeps its colour in the chart and the timeline.
  const answerOrder = [];
  const answerKey = (a) => String(a).toLowerCase();
  function answerIndex(a) {
    let i = answerOrder.findIndex((x) => answerKey(x) === answerKey(a));
    if (i < 0) { answerOrder.push(String(a)); i = answerOrder.length - 1; }
    return i;
  }
  let synth = null;

  // ---- sections, in display order (rounds and the synthesis are made as they start) ----
  const classify = ctx.section("classify", "Classification");
  const overview = ctx.section("delphi-overview", "Convergence");

  const banner = el("div", { class: "delphi-banner panel", dataset: { kind: "" } });
  // The banner leads the section, above the facilitator's classification call.
  if (classify.heading && classify.heading.parentNode === classify.el) classify.heading.after(banner);
  else classify.body.append(banner);

  const outcomeEl = el("div", { class: "delphi-outcome", role: "status" });
  const chartHolder = el("div", { class: "delphi-chart" });
  const chartPanel = el("div", { class: "panel delphi-chart-panel" }, el("h3", null, "Convergence chart"), chartHolder);
  const timeline = el("ol", { class: "timeline delphi-timeline", "aria-label": "Statistics round by round" });
  const timelinePanel = el("div", { class: "panel delphi-timeline-panel" }, el("h3", null, "Round by round"), timeline);
  const revealHolder = el("div", { class: "delphi-reveal-holder" });
  overview.body.append(outcomeEl, el("div", { class: "delphi-overview-grid" }, chartPanel, timelinePanel), revealHolder);
  let chartBox = null;
  let chartConfig = null;
  let chartKind = null;

  // ---- classification banner ----
  function renderBanner(c, { pending = false } = {}) {
    classify.show();
    banner.replaceChildren();
    if (!c || !c.type) {
      banner.dataset.kind = "";
      banner.append(el("p", { class: "muted" }, "The facilitator is classifying the question…"));
      return;
    }
    const type = String(c.type).toLowerCase();
    banner.dataset.kind = type;
    const head = el("div", { class: "delphi-banner-head" },
      el("span", { class: `delphi-kind ${type}` }, type.toUpperCase()),
      el("span", null, type === "numeric" ? "The panel estimates a number." : "The panel chooses an answer."));
    const reasoning = String(c.reasoning || "");
    if (/classification failed|fall(ing|s)? back/i.test(reasoning)) head.append(ui.badge("fallback", "yellow", "The classification could not be read; Delphi fell back to a qualitative question"));
    else if (/^set by the request/i.test(reasoning)) head.append(ui.badge("set by the request", "gray"));
    if (pending) head.append(ui.badge("pending", "gray"));
    banner.append(head);
    if (reasoning) banner.append(el("p", { class: "delphi-reasoning" }, el("strong", null, "Reasoning: "), reasoning));
    const opts = Array.isArray(c.options) ? c.options : [];
    if (type === "qualitative") {
      banner.append(opts.length
        ? el("div", { class: "delphi-options" }, el("strong", null, "Options:"),
          el("ol", null, opts.map((o) => el("li", null, String(o)))))
        : el("p", { class: "muted" }, "No fixed options: panelists answer freely; equal answers are grouped."));
    }
  }

  function classified(c) {
    kind = String(c.type || "qualitative").toLowerCase();
    options = kind === "qualitative" && Array.isArray(c.options) ? c.options.map(String) : [];
    options.forEach(answerIndex);
    renderBanner(c);
    classify.done();
  }

  // ---- rounds ----
  function roundSection(n) {
    return ctx.section(`round_${n}`, n === 1 ? "Round 1 · Independent answers" : `Round ${n} · Revisions after the aggregates`, { tabs: true });
  }

  function roundRecord(n) {
    let r = rounds.get(n);
    if (!r) {
      r = { n, section: roundSection(n), estimates: [], stats: null, converged: false, complete: false, cards: new Map(), tl: null };
      rounds.set(n, r);
    }
    return r;
  }

  function timelineItem(r) {
    if (!r.tl) {
      r.tl = el("li", { class: "tl-item pending", dataset: { round: String(r.n) } });
      // Keep the items in round order even if a round's record was made late.
      const after = [...timeline.children].find((li) => Number(li.dataset.round) > r.n);
      timeline.insertBefore(r.tl, after || null);
    }
    return r.tl;
  }

  function roundStart(n) {
    const r = roundRecord(n);
    r.section.running();
    overview.show();
    const li = timelineItem(r);
    if (!r.complete) li.replaceChildren(el("div", { class: "tl-head" }, el("strong", null, `Round ${n}`), el("span", { class: "muted" }, n === 1 ? "panelists answering…" : "panelists revising…")));
    ctx.progress(`Round ${n}: panelists ${n === 1 ? "answering" : "revising"}`);
    if (!chartBox) chartHolder.replaceChildren(el("p", { class: "muted" }, "The chart appears once the first round is in."));
  }

  function previousOf(n, participant) {
    const prev = rounds.get(n - 1);
    if (!prev) return undefined;
    const e = prev.estimates.find((x) => x.participantIndex === participant);
    return e ? valueOf(e) : undefined;
  }

  function valueOf(e) {
    if (kind === "numeric") return isNum(e.estimate) ? Number(e.estimate) : null;
    if (e.answer !== undefined) return e.answer === null ? null : String(e.answer);
    return isNum(e.estimate) ? Number(e.estimate) : null;
  }

  function valueText(v) {
    if (v === null || v === undefined) return "unreadable";
    return typeof v === "number" ? fmtVal(v) : v;
  }

  function changeNode(n, e) {
    if (n === 1) return el("span", { class: "delphi-change muted" }, "initial answer");
    const prev = previousOf(n, e.participantIndex);
    const v = valueOf(e);
    if (e.changed) {
      if (typeof v === "number" && typeof prev === "number") {
        return el("span", { class: "delphi-change changed" }, `${v > prev ? "↑" : "↓"} changed from ${fmtVal(prev)}`);
      }
      return el("span", { class: "delphi-change changed" }, prev !== undefined && prev !== null ? `changed from ${valueText(prev)}` : "changed");
    }
    return el("span", { class: "delphi-change muted" }, "unchanged");
  }

  function estimateCard(n, e) {
    const v = valueOf(e);
    const conf = String(e.confidence || "MEDIUM").toUpperCase();
    const modelEl = el("div", { class: "delphi-model", hidden: true });
    const flags = el("div", { class: "delphi-flags" }, el("span", { class: "delphi-conf-label" }, "confidence"),
      ui.badge(conf.toLowerCase(), CONFIDENCE_COLORS[conf] || "gray", `${conf.toLowerCase()} confidence`));
    if (v === null) flags.append(ui.badge("excluded", "red", "The answer could not be read; it is left out of the statistics"));
    const change = changeNode(n, e);
    const card = el("article", {
      class: "delphi-est" + (v === null ? " unreadable" : "") + (e.changed ? " is-changed" : ""),
      "aria-label": `Round ${n}, participant ${e.participantIndex}`,
      dataset: { round: String(n), participant: String(e.participantIndex) },
    },
    el("div", { class: "delphi-who" }, `Participant ${e.participantIndex}`), modelEl,
    el("div", { class: "delphi-value" + (typeof v === "number" ? " num" : "") }, valueText(v)),
    flags, change);
    return { card, modelEl, flags, change };
  }

  function roundComplete(n, data) {
    const r = roundRecord(n);
    r.estimates = Array.isArray(data.estimates) ? [...data.estimates].sort((a, b) => a.participantIndex - b.participantIndex) : [];
    r.stats = data.stats || {};
    r.converged = !!data.converged;
    r.complete = true;
    r.section.show();
    r.section.done();
    if (!kind) kind = r.estimates.some((e) => e.answer !== undefined) || r.stats.distribution ? "qualitative" : "numeric";

    // Anonymous estimate cards under the round's live calls.
    r.cards.clear();
    const grid = el("div", { class: "delphi-est-grid" });
    for (const e of r.estimates) {
      const c = estimateCard(n, e);
      r.cards.set(e.participantIndex, c);
      grid.append(c.card);
    }
    r.estHead = el("h3", null, "Estimates (anonymous)");
    r.estNote = el("p", { class: "muted delphi-est-note" }, "Participants are numbered in panel order; which model is which is revealed when the run ends.");
    r.section.body.replaceChildren(el("div", { class: "panel delphi-estimates" }, r.estHead, r.estNote, grid));

    renderTimelineItem(r);
    renderChart();
    overview.show();
    const s = r.stats;
    const summary = kind === "numeric"
      ? `mean ${fmtVal(s.mean)}, coefficient of variation ${fmtCv(s.cv)}`
      : `most common answer ${s.mode || "–"} at ${fmtVal(s.agreementPercentage)}% agreement`;
    ctx.announce(`Round ${n} complete: ${summary}${r.converged ? "; the panel converged" : ""}`);
  }

  function stat(label, value, cls) {
    return el("div", { class: "delphi-stat" + (cls ? " " + cls : "") }, el("dt", null, label), el("dd", null, value));
  }

  function confidenceLine(cc) {
    if (!cc) return null;
    return el("div", { class: "delphi-conf muted" }, `Confidence: ${cc.low ?? 0} low · ${cc.medium ?? 0} medium · ${cc.high ?? 0} high`);
  }

  function renderTimelineItem(r) {
    const li = timelineItem(r);
    li.classList.remove("pending", "stopped");
    li.classList.toggle("converged", r.converged);
    const s = r.stats || {};
    const head = el("div", { class: "tl-head" }, el("strong", null, `Round ${r.n}`));
    if (r.converged) head.append(ui.badge("converged", "green"));
    if (kind === "numeric" && s.highVariance) head.append(ui.badge("high variance", "red", "CV above 2: the estimates are far apart"));
    const valid = r.estimates.filter((e) => valueOf(e) !== null).length;
    const changed = r.estimates.filter((e) => e.changed).length;
    const parts = [ui.plural(valid, "valid estimate")];
    if (valid < r.estimates.length) parts.push(`${r.estimates.length - valid} unreadable`);
    if (r.n > 1) parts.push(`${changed} changed`);
    if (r.n === 1 && round1Calls.size > r.estimates.length) {
      const left = round1Calls.size - r.estimates.length;
      parts.push(`${ui.plural(left, "panelist")} failed and left the panel`);
    }
    li.replaceChildren(head);
    if (kind === "numeric") {
      li.append(el("dl", { class: "delphi-stats" },
        stat("Mean", fmtVal(s.mean), "key"), stat("Median", fmtVal(s.median)), stat("Std dev", fmtVal(s.stdDev)),
        stat("Min", fmtVal(s.min)), stat("Max", fmtVal(s.max)), stat("CV", fmtCv(s.cv), isNum(s.cv) ? "" : "inf")));
    } else {
      const dist = Array.isArray(s.distribution) ? s.distribution : [];
      li.append(el("dl", { class: "delphi-stats" },
        stat("Mode", s.mode || "–", "key wide"), stat("Agreement", `${fmtVal(s.agreementPercentage)}%`, "key")));
      li.append(el("ul", { class: "delphi-dist", "aria-label": `Round ${r.n} distribution` }, dist.map((d) =>
        el("li", null,
          el("span", { class: "delphi-dist-label" }, String(d.answer)),
          el("span", { class: "delphi-dist-bar", "aria-hidden": "true" }, barFill(d.percentage, ctx.charts.color(answerIndex(d.answer), 0.85))),
          el("span", { class: "delphi-dist-n" }, `${d.count} (${fmtVal(d.percentage)}%)`)))));
    }
    li.append(confidenceLine(s.confidenceCounts), el("div", { class: "delphi-count muted" }, parts.join(" · ")));
  }

  // ---- the chart ----
  function completeRounds() {
    return [...rounds.values()].filter((r) => r.complete).sort((a, b) => a.n - b.n);
  }

  function numericChart(list) {
    const labels = list.map((r) => `Round ${r.n}`);
    const mean = list.map((r) => (isNum(r.stats.mean) ? Number(r.stats.mean) : null));
    const sd = list.map((r) => (isNum(r.stats.stdDev) ? Number(r.stats.stdDev) : 0));
    const upper = mean.map((m, i) => (m === null ? null : m + sd[i]));
    const lower = mean.map((m, i) => (m === null ? null : m - sd[i]));
    const median = list.map((r) => (isNum(r.stats.median) ? Number(r.stats.median) : null));
    const points = list.flatMap((r) => r.estimates.map(valueOf).filter((v) => typeof v === "number").map((y) => ({ x: `Round ${r.n}`, y })));
    const text = cssVar("--text", "#222");
    const muted = cssVar("--muted", "#666");
    const config = {
      type: "line",
      data: {
        labels,
        datasets: [
          { label: "Mean ± 1 std dev", data: upper, borderColor: ctx.charts.color(0, 0.5), backgroundColor: ctx.charts.color(0, 0.25), borderWidth: 1, pointRadius: 0, pointStyle: "rect", fill: "+1", order: 3 },
          { label: "lower band", data: lower, borderColor: ctx.charts.color(0, 0.5), backgroundColor: ctx.charts.color(0, 0.25), borderWidth: 1, pointRadius: 0, fill: false, order: 3 },
          { label: "Mean", data: mean, borderColor: ctx.charts.color(0), backgroundColor: ctx.charts.color(0), borderWidth: 3, pointRadius: 4, pointStyle: "circle", fill: false, order: 1 },
          { label: "Median", data: median, borderColor: ctx.charts.color(1), backgroundColor: ctx.charts.color(1), borderWidth: 2, borderDash: [6, 4], pointRadius: 0, pointHoverRadius: 0, pointStyle: "line", fill: false, order: 2 },
          { label: "Estimates", data: points, showLine: false, borderColor: muted, backgroundColor: muted, pointRadius: 4, pointStyle: "crossRot", borderWidth: 2, fill: false, order: 0 },
        ],
      },
      options: {
        interaction: { mode: "index", intersect: false },
        plugins: {
          legend: { labels: { color: text, usePointStyle: true, pointStyleWidth: 18, filter: (item) => item.text !== "lower band" } },
          tooltip: { filter: (item) => item.dataset.label !== "lower band" && item.dataset.label !== "Estimates" },
        },
        scales: {
          x: { offset: true, ticks: {} },
          y: { title: { display: true, text: "Estimate", color: text }, ticks: { callback: (v) => fmtCompact(v) } },
        },
      },
    };
    const label = `Convergence chart: the mean estimate per round with a band of plus or minus one standard deviation. ${list.map((r) =>
      `Round ${r.n}: mean ${fmtVal(r.stats.mean)}, standard deviation ${fmtVal(r.stats.stdDev)}, median ${fmtVal(r.stats.median)}, range ${fmtVal(r.stats.min)} to ${fmtVal(r.stats.max)}`).join("; ")}.`;
    return { config, label };
  }

  function qualitativeChart(list) {
    const labels = list.map((r) => `Round ${r.n}`);
    for (const r of list) for (const d of r.stats.distribution || []) answerIndex(d.answer);
    const answers = answerOrder;
    const key = answerKey;
    const countOf = (r, a) => { const d = (r.stats.distribution || []).find((x) => key(x.answer) === key(a)); return d ? d.count : 0; };
    // Options no one chose in any round stay out of the chart (they would be empty).
    const shown = answers.filter((a) => list.some((r) => countOf(r, a) > 0));
    const text = cssVar("--text", "#222");
    const config = {
      type: "bar",
      data: {
        labels,
        datasets: shown.map((a) => {
          const i = answerIndex(a);
          return { label: a, data: list.map((r) => countOf(r, a)), backgroundColor: ctx.charts.color(i, 0.85), borderColor: ctx.charts.color(i), borderWidth: 1 };
        }),
      },
      options: {
        plugins: { legend: { position: "bottom", labels: { color: text, boxWidth: 14 } } },
        scales: {
          x: { stacked: true, ticks: {} },
          y: { stacked: true, beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "Participants", color: text } },
        },
      },
    };
    const label = `Answer distribution per round (stacked bars). ${list.map((r) =>
      `Round ${r.n}: ${(r.stats.distribution || []).map((d) => `${d.answer} ${d.count}`).join(", ") || "no answers"} (agreement ${fmtVal(r.stats.agreementPercentage)}%)`).join("; ")}.`;
    return { config, label };
  }

  function renderChart() {
    const list = completeRounds();
    if (!list.length) return;
    const { config, label } = kind === "numeric" ? numericChart(list) : qualitativeChart(list);
    if (chartBox && chartKind === kind) {
      chartBox.setAttribute("aria-label", label);
      if (chartBox.chart) {
        chartBox.chart.data = config.data;
        chartBox.chart.update("none");
      } else {
        // Not drawn yet (it is drawn once in the document): hand the new data to the pending chart.
        chartConfig.data = config.data;
        if (!window.Chart && chartBox.firstChild) chartBox.firstChild.textContent = label;
      }
      return;
    }
    if (chartBox && chartBox.chart) chartBox.chart.destroy();
    chartKind = kind;
    chartConfig = config;
    chartBox = ctx.chart(config, { label });
    chartBox.classList.add("delphi-chart-box");
    chartHolder.replaceChildren(chartBox);
  }

  // ---- outcome ----
  function renderOutcome() {
    outcomeEl.replaceChildren();
    if (!outcome) return;
    if (outcome.converged) {
      outcomeEl.append(ui.badge(`Converged in round ${outcome.round}`, "green"));
      if (outcome.round === 1) outcomeEl.append(el("span", { class: "muted" }, "Immediate consensus: the panel agreed in the first round."));
    } else if (outcome.reason === "time limit") {
      outcomeEl.append(ui.badge("Max rounds reached", "yellow"), el("span", { class: "muted" }, `The time limit ended the exercise after round ${outcome.round} without convergence.`));
    } else if (outcome.stopped) {
      outcomeEl.append(ui.badge(`Run ${outcome.stopped}`, outcome.stopped === "cancelled" ? "gray" : "red"),
        el("span", { class: "muted" }, outcome.round ? `No convergence: stopped during round ${outcome.round}.` : "Stopped before the first round completed."));
    } else {
      outcomeEl.append(ui.badge("Max rounds reached", "yellow"), el("span", { class: "muted" }, `No convergence after ${ui.plural(outcome.round, "round")}; the report uses the last round.`));
    }
    outcomeEl.dataset.converged = String(!!outcome.converged);
  }

  // ---- synthesis ----
  function synthSection() {
    if (!synth) synth = ctx.section("synthesis", "Facilitator report");
    return synth;
  }

  function showReport(d) {
    reportShown = true;
    const p = ctx.primary("Delphi report");
    p.el.classList.add("delphi-report");
    p.head.replaceChildren("Delphi report", d.facilitatorModel ? el("span", { class: "muted" }, `by ${d.facilitatorModel}`) : null);
    const fv = d.finalValue;
    const finalText = isNum(fv) && kind !== "qualitative" ? fmtVal(fv) : fv === null || fv === undefined || fv === "" ? "–" : String(fv);
    const lastRound = d.totalRounds ?? completeRounds().length;
    const badge = d.converged
      ? ui.badge(`Converged in round ${d.convergenceRound ?? lastRound}`, "green")
      : ui.badge("Max rounds reached", "yellow");
    const final = el("div", { class: "callout delphi-final" },
      el("div", { class: "muted" }, kind === "qualitative" ? `Final answer (the most common in round ${lastRound})` : `Final value (the mean of round ${lastRound})`),
      el("div", { class: "big-number" }, finalText),
      el("div", { class: "delphi-final-meta" }, badge, d.immediateConsensus ? el("span", { class: "muted" }, "immediate consensus") : null,
        el("span", { class: "muted" }, ui.plural(Number(lastRound) || 0, "round"))));
    p.body.replaceChildren(final, ui.markdown(d.report || ""));
  }

  // ---- the reveal, from the stored result ----
  function reveal(result) {
    const list = (result.rounds || []).slice().sort((a, b) => a.roundNumber - b.roundNumber);
    const models = new Map(); // participant -> model
    for (const rr of list) {
      const r = rounds.get(rr.roundNumber);
      for (const e of rr.estimates || []) {
        if (e.model) models.set(e.participantIndex, e.model);
        const c = r && r.cards.get(e.participantIndex);
        if (!c) continue;
        c.modelEl.textContent = e.model || "";
        c.modelEl.hidden = !e.model;
        c.card.dataset.model = e.model || "";
        c.card.setAttribute("aria-label", `Round ${rr.roundNumber}, participant ${e.participantIndex}${e.model ? ", " + e.model : ""}`);
        if (e.carriedForward) {
          c.flags.append(ui.badge("carried forward", "yellow", "The call failed or could not be read; the previous answer was kept"));
          c.change.textContent = "unchanged (carried forward)";
        }
      }
      if (r && r.estHead) {
        r.estHead.textContent = "Estimates (participants revealed)";
        r.estNote.textContent = "The run has ended: each participant's model is shown.";
      }
    }
    if (!models.size) return;
    const participants = [...models.keys()].sort((a, b) => a - b);
    const valueIn = (rr, p) => {
      const e = (rr.estimates || []).find((x) => x.participantIndex === p);
      if (!e) return "–";
      const v = kind === "numeric" ? (isNum(e.estimate) ? fmtVal(e.estimate) : "unreadable") : (e.answer ?? "unreadable");
      return e.carriedForward ? `${v} (carried)` : String(v);
    };
    const headers = ["Participant", "Model", ...list.map((rr) => `Round ${rr.roundNumber}`)];
    const rows = participants.map((p) => [`Participant ${p}`, models.get(p), ...list.map((rr) => valueIn(rr, p))]);
    const num = kind === "numeric" ? list.map((_, i) => i + 2) : [];
    const t = ui.table(headers, rows, { num, caption: "Participants revealed, with their answer in each round" });
    revealHolder.replaceChildren(el("div", { class: "panel delphi-reveal" },
      el("h3", null, "Participants revealed"),
      el("div", { class: "delphi-table-wrap" }, t)));
  }

  // Rebuilds what the events would have shown, for a stored run whose events are missing.
  function replayResult(result) {
    if (!kind && result.classification) classified(result.classification);
    for (const rr of result.rounds || []) {
      const r = rounds.get(rr.roundNumber);
      if (r && r.complete) continue;
      roundComplete(rr.roundNumber, { estimates: rr.estimates || [], stats: rr.stats || {}, converged: !!rr.converged });
    }
    const last = (result.rounds || []).at(-1);
    if (!outcome && last && result.report) {
      outcome = { converged: !!result.converged, round: result.converged ? (result.convergenceRound ?? last.roundNumber) : last.roundNumber };
      renderOutcome();
    }
    if (!reportShown && result.report && result.report.report) showReport(result.report);
  }

  return {
    callSection(call) {
      const m = /^round_(\d+)$/.exec(call.stage || "");
      if (m) {
        const n = Number(m[1]);
        if (n === 1) round1Calls.add(call.key);
        return roundRecord(n).section.id;
      }
      if (call.stage === "classify") { classify.running(); return "classify"; }
      if (call.stage === "synthesis") return synthSection().id;
      return call.stage;
    },

    event(name, data) {
      switch (name) {
        case "delphi_start":
          classify.running();
          renderBanner(data.questionType ? { type: data.questionType, reasoning: "" } : null, { pending: !!data.questionType });
          ctx.progress(data.questionType ? "Starting the first round" : "The facilitator is classifying the question");
          break;
        case "classify_complete":
          classified(data.data || {});
          ctx.announce(`Classified as ${String((data.data || {}).type || "").toLowerCase()}`);
          break;
        case "round_start":
          roundStart(Number(data.round));
          break;
        case "round_complete":
          roundComplete(Number(data.round), data.data || {});
          break;
        case "convergence_reached":
          outcome = { converged: true, round: Number(data.round) };
          renderOutcome();
          ctx.announce(`Converged in round ${data.round}`);
          break;
        case "max_rounds_reached":
          outcome = { converged: false, round: Number(data.round), reason: data.reason };
          renderOutcome();
          ctx.announce(`Max rounds reached after round ${data.round}`);
          break;
        case "synthesis_start":
          synthSection().running();
          ctx.progress("The facilitator is writing the report");
          break;
        case "synthesis_complete": {
          const d = data.data || {};
          const s = synthSection();
          if (d.facilitatorModel) {
            const card = s.claim(d.facilitatorModel);
            card.setRole("facilitator");
            card.setBody(el("p", { class: "muted" }, "The report is the answer at the top of the page."));
          }
          s.done();
          if (!outcome) {
            outcome = { converged: !!d.converged, round: d.converged ? d.convergenceRound : d.totalRounds };
            renderOutcome();
          }
          showReport(d);
          ctx.announce("The facilitator's report is in");
          break;
        }
        default: break;
      }
    },

    finish(detail) {
      const result = detail && detail.result;
      if (result) {
        try { replayResult(result); } catch (err) { console.warn("rebuilding the Delphi view from the result", err); }
      }
      const status = detail && detail.status;
      if (!banner.dataset.kind && !classify.el.hidden) {
        banner.replaceChildren(el("p", { class: "muted" }, "The run ended before the question was classified."));
      }
      // A round that started but never completed (the run failed or was cancelled in it).
      for (const r of rounds.values()) {
        if (r.complete) continue;
        const li = timelineItem(r);
        li.classList.remove("pending");
        li.classList.add("stopped");
        li.replaceChildren(el("div", { class: "tl-head" }, el("strong", null, `Round ${r.n}`), ui.badge("not completed", "gray")),
          el("div", { class: "muted" }, status && status !== "completed" ? `The run ${status === "failed" ? "failed" : "was " + status} during this round.` : "No statistics were recorded for this round."),
          detail && detail.error ? el("div", { class: "delphi-round-error" }, String(detail.error)) : null);
      }
      if (!completeRounds().length && rounds.size) chartHolder.replaceChildren(el("p", { class: "muted" }, "No round completed: there is nothing to chart."));
      if (!outcome && status && status !== "completed") {
        const started = [...rounds.keys()];
        outcome = { stopped: status, round: started.length ? Math.max(...started) : null };
        renderOutcome();
      }
      if (result) reveal(result);
    },
  };
}
