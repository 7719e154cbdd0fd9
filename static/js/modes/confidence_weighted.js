// Confidence-Weighted: each model's answer with the confidence it stated (and why), the weights
// the server computed from those confidences (softmax at the run's temperature) as a chart and
// a worked table, a plain note that a self-rated confidence is not accuracy, and the weighted
// synthesis with the calibration notes as the main answer.

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("confidence_weighted");
  const answers = ctx.section("answer", "Answers and stated confidence", { tabs: true });
  const weights = ctx.section("weights", "Weights from the stated confidences");
  const synthSection = ctx.section("synthesis", "Calibration notes");
  let models = [];
  let temperature = null;
  let seen = false;
  const pct = (x) => `${(x * 100).toFixed(0)}%`;

  const view = {
    event(name, data) {
      seen = true;
      const d = data.data || {};
      switch (name) {
        case "confidence_start": {
          const c = data.config || {};
          models = c.models || [];
          temperature = c.temperature;
          break;
        }
        case "answers_start":
          answers.running();
          ctx.progress("The models are answering");
          break;
        case "answer_complete": {
          const card = answers.claim(models[d.index] || d.model);
          card.setTitle(d.model);
          card.setRole("respondent");
          card.setText(d.response || "");
          card.setState("ok", { ms: d.responseTimeMs });
          card.addBadge(d.parsedSuccessfully
            ? ui.badge(`confidence ${pct(d.confidence)}${d.clamped ? " (clamped)" : ""}`, d.clamped ? "yellow" : "blue")
            : ui.badge("no confidence stated (counted as 50%)", "yellow"));
          if (d.confidenceReasoning) {
            card.prepend(el("div", { class: "callout cw-reasoning" }, el("strong", null, "Why this confidence: "), d.confidenceReasoning));
          }
          ctx.announce(`${d.model} answered, confidence ${pct(d.confidence)}`);
          break;
        }
        case "all_answers_complete":
          answers.done();
          if (d.failedCount) {
            answers.lead.replaceChildren(el("div", { class: "callout cw-failed" },
              `${ui.plural(d.failedCount, "model")} gave no answer and ${d.failedCount > 1 ? "are" : "is"} left out of the weights.`));
          }
          break;
        case "weights_calculated":
          renderWeights(d);
          break;
        case "synthesis_start":
          ctx.progress("Writing the weighted synthesis");
          synthSection.running();
          break;
        case "synthesis_complete":
          renderSynthesis(d);
          break;
        default: break;
      }
    },

    /** A stored run without recorded events: render its stored result as if its events came. */
    finish(detail) {
      if (seen || !detail || !detail.result) return;
      const r = detail.result;
      const cfg = (detail.request && detail.request.modeConfig) || {};
      view.event("confidence_start", { config: { models: cfg.models || (r.answers || []).map((a) => a.model), temperature: r.weights && r.weights.temperature } });
      for (const a of r.answers || []) view.event("answer_complete", { data: a });
      if (r.weights) view.event("weights_calculated", { data: r.weights });
      if (r.synthesis) view.event("synthesis_complete", { data: r.synthesis });
    },
  };

  function renderWeights(d) {
    const list = d.weights || [];
    const t = d.temperature ?? temperature ?? 1;
    const cmax = Math.max(...list.map((w) => w.rawConfidence));
    const label = `Stated confidence and weight per model, bar chart. ${list.map((w) => `${w.model}: confidence ${pct(w.rawConfidence)}, weight ${w.weightPercent}%`).join("; ")}.`;
    const chart = ctx.chart({
      type: "bar",
      data: {
        labels: list.map((w) => w.model),
        datasets: [
          { label: "Stated confidence (%)", data: list.map((w) => +(w.rawConfidence * 100).toFixed(1)), backgroundColor: ctx.charts.color(0, 0.45) },
          { label: "Weight (%)", data: list.map((w) => w.weightPercent), backgroundColor: ctx.charts.color(1) },
        ],
      },
      options: { indexAxis: "y", scales: { x: { min: 0, max: 100 }, y: { ticks: { autoSkip: false } } } },
    }, { label });
    chart.classList.add("cw-chart");
    const rows = list.map((w) => [
      w.model,
      pct(w.rawConfidence),
      Math.exp((w.rawConfidence - cmax) / t).toFixed(3),
      `${w.weightPercent}%`,
      w.isOutlier ? ui.badge(w.rawConfidence > 0.95 ? "very high: scrutinise" : "very low", "yellow") : "",
    ]);
    const table = ui.table(["Model", "Stated confidence c", "e^((c − highest c) / T)", "Weight", ""], rows, { num: [1, 2, 3] });
    table.classList.add("cw-table");
    const how = el("p", { class: "cw-how" },
      `Each weight is e^(c / T) divided by the sum over all answers, with T = ${t} (the run's temperature). `,
      list.length === 1 ? "With a single answer, it gets all the weight." :
      t <= 0.3 ? "A low temperature like this gives nearly all the weight to the most confident answer." :
        t >= 3 ? "A high temperature like this makes the weights nearly equal." :
          `At this temperature the most confident answer can weigh at most ${Math.exp(1 / t).toFixed(2)} times the least confident one.`);
    const caution = el("div", { class: "callout cw-caution", role: "note" },
      el("strong", null, "A stated confidence is not accuracy. "),
      "These numbers are how sure each model says it is, not how often it is right: models are often confidently wrong, and a modest answer can be the correct one. The weights only decide how much each answer counts in the synthesis.");
    weights.show();
    weights.body.replaceChildren(caution, chart, how, table);
    if (d.outlierCount) weights.lead.replaceChildren(ui.badge(`${ui.plural(d.outlierCount, "outlier")} flagged for extra scrutiny`, "yellow"));
    weights.done();
  }

  function renderSynthesis(d) {
    const p = ctx.primary("Weighted answer");
    p.el.classList.add("cw-final");
    const meta = el("div", { class: "cw-meta" });
    if (d.singleAnswer) meta.append(ui.badge("only one model answered: its answer stands", "yellow"));
    else if (d.model) meta.append(ui.badge(`written by ${d.model}`, "blue"));
    if (d.fallbackFrom) meta.append(ui.badge(`backup for ${d.fallbackFrom}`, "yellow"));
    if (d.highestWeight && !d.singleAnswer) meta.append(ui.badge(`heaviest: ${d.highestWeight.model} (${d.highestWeight.weightPercent}%)`, "gray"));
    p.body.replaceChildren(meta, ui.markdown(d.synthesis || "", "cw-output"));
    if (d.singleAnswer) {
      synthSection.show();
      synthSection.body.replaceChildren(el("p", { class: "muted" }, "No synthesis was written: only one answer came."));
    } else if (d.calibrationNotes) {
      const card = synthSection.claim(d.model || "");
      card.setRole("synthesizer");
      card.setText(d.calibrationNotes);
      card.setState("ok", { ms: d.responseTimeMs });
    } else {
      const card = synthSection.claim(d.model || "");
      card.setText("");
      synthSection.body.replaceChildren(el("p", { class: "muted" }, "The synthesizer wrote no calibration notes."));
    }
    synthSection.done();
    ctx.announce("The weighted answer is ready");
  }

  return view;
}
