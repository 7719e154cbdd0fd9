// Chain: the step timeline (each step's model and mandate, then done with its word count and
// change, or skipped with the reason), a section per step with its version and editor's notes,
// and the final version as the main answer with the word count step by step.

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("chain");
  const overview = ctx.section("chain", "Steps");
  const timeline = el("ol", { class: "timeline chain-timeline", "aria-label": "The chain's steps" });
  overview.body.append(timeline);
  const items = {}; // step -> {li, state}
  let total = 0;
  let seen = false;

  const delta = (n) => (n > 0 ? `+${n}` : String(n));

  function item(step, model, mandate) {
    if (items[step]) return items[step];
    const state = el("span", { class: "chain-state" }, ui.badge("waiting", "gray"));
    const li = el("li", { class: "tl-item chain-step", "data-step": String(step) },
      el("div", { class: "chain-step-head" },
        el("strong", null, `Step ${step}`), " · ", el("span", { class: "chain-mandate" }, mandate || ""),
        " · ", el("span", { class: "muted chain-model" }, model || "")),
      state);
    timeline.append(li);
    items[step] = { li, state };
    return items[step];
  }

  const stepSection = (k, mandate) => ctx.section(`chain_step_${k}`, `Step ${k} · ${mandate}`);

  const view = {
    event(name, data) {
      seen = true;
      const d = data.data || {};
      switch (name) {
        case "chain_start":
          total = data.totalSteps || 0;
          for (const s of data.steps || []) item(s.step, s.model, s.mandateDisplay);
          overview.running();
          break;
        case "chain_step_start": {
          const it = item(data.step, data.model, "");
          it.state.replaceChildren(ui.badge("writing", "blue"));
          if ((data.skippedBefore || []).length) it.state.append(" ", el("span", { class: "muted" }, `also covers skipped step${data.skippedBefore.length > 1 ? "s" : ""} ${data.skippedBefore.join(", ")}`));
          const mandate = it.li.querySelector(".chain-mandate").textContent;
          stepSection(data.step, mandate).running();
          ctx.progress(`Step ${data.step} of ${total}: ${mandate}`);
          break;
        }
        case "chain_step_complete": {
          const it = item(data.step, d.model, d.mandateDisplay);
          it.state.replaceChildren(ui.badge("done", "green"), " ",
            el("span", { class: "chain-words" }, `${ui.plural(d.wordCount ?? 0, "word")} (${delta(d.wordCountDelta ?? 0)})`));
          const s = stepSection(data.step, d.mandateDisplay);
          const card = s.claim(d.model);
          card.setRole(data.step === 1 ? "drafter" : "improver");
          card.setText(d.content || "");
          card.setState("ok", { ms: d.responseTimeMs });
          card.addBadge(ui.badge(`${delta(d.wordCountDelta ?? 0)} words`, (d.wordCountDelta ?? 0) < 0 ? "yellow" : "gray"));
          if ((d.editorNotes || []).length) {
            card.prepend(el("div", { class: "callout chain-notes" }, el("strong", null, "Editor's notes: "),
              el("ul", null, d.editorNotes.map((n) => el("li", null, n)))));
          }
          s.done();
          ctx.announce(`Step ${data.step} done: ${ui.plural(d.wordCount ?? 0, "word")}`);
          break;
        }
        case "chain_step_skipped": {
          const it = item(data.step, d.model, "");
          it.li.classList.add("skipped");
          it.state.replaceChildren(ui.badge("skipped", "red"), " ", el("span", { class: "muted chain-reason" }, d.reason || ""));
          const s = stepSection(data.step, it.li.querySelector(".chain-mandate").textContent);
          s.body.replaceChildren(el("div", { class: "callout chain-skipped" }, `Skipped (${d.reason || "failed"}): the latest version carries forward to the next step.`));
          s.done();
          break;
        }
        case "chain_complete": {
          overview.done();
          const prog = d.wordCountProgression || [];
          const p = ctx.primary("Final version");
          p.el.classList.add("chain-final");
          const meta = el("div", { class: "chain-meta" },
            ui.badge(`from step ${d.finalStep}`, "blue"),
            ui.badge(`${d.completedSteps} of ${total || d.completedSteps} steps completed`, (d.skippedSteps || []).length ? "yellow" : "green"),
            (d.skippedSteps || []).length ? ui.badge(`skipped: ${d.skippedSteps.join(", ")}`, "red") : null);
          const label = `Word count by step, line chart. ${prog.map((x) => `Step ${x.step}: ${x.wordCount}`).join("; ")}.`;
          const chart = ctx.chart({
            type: "line",
            data: { labels: prog.map((x) => `Step ${x.step}`), datasets: [{ label: "Words", data: prog.map((x) => x.wordCount), borderColor: "#4e79a7", backgroundColor: "#4e79a7", tension: 0.2 }] },
            options: { plugins: { legend: { display: false } }, scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
          }, { label, small: true });
          chart.classList.add("chain-words-chart");
          p.body.replaceChildren(meta, ui.markdown(d.finalContent || "", "chain-output"), el("h3", null, "Words step by step"), chart);
          ctx.announce(`Chain complete: ${d.completedSteps} steps`);
          break;
        }
        default: break;
      }
    },

    /** A stored run without recorded events: render its stored result as if its events came. */
    finish(detail) {
      if (seen || !detail || !detail.result) return;
      const r = detail.result;
      view.event("chain_start", { totalSteps: r.totalSteps, steps: (r.steps || []).map((s) => ({ step: s.step, model: s.model, mandateDisplay: s.mandateDisplay })) });
      for (const s of r.steps || []) {
        if (s.skipped) view.event("chain_step_skipped", { step: s.step, data: { model: s.model, mandate: s.mandate, reason: s.skipReason } });
        else view.event("chain_step_complete", { step: s.step, data: s });
      }
      if (r.finalContent) view.event("chain_complete", { data: r });
    },
  };
  return view;
}
