// Clarity: the brief, a card per evaluator (Skeptic, Advocate, Generalist) with its seven
// scores, critique and issues, the disagreement (dimensions and spreads), the discussion round's
// changes, the Arbiter's scores, and as the run's main answer the final score with its method,
// the per-dimension table (weight, each evaluator, the Arbiter, final), a chart of the final
// scores, the consolidated critique and the human-review flag with the review action.
//
// A fold over events; `finish(detail)` adds only the stored review state (and the form to mark
// a flagged run reviewed), which no event carries.

const DIMS = [
  ["firstPrinciplesCoherence", "First-Principles Coherence", 0.2],
  ["internalConsistency", "Internal Consistency", 0.15],
  ["evidenceQuality", "Evidence Quality", 0.15],
  ["accessibility", "Accessibility", 0.15],
  ["objectivity", "Objectivity", 0.15],
  ["factualAccuracy", "Factual Accuracy", 0.1],
  ["biasDetection", "Bias Detection", 0.1],
];
const DIM_NAME = Object.fromEntries(DIMS.map(([k, n]) => [k, n]));
const ROLES = ["skeptic", "advocate", "generalist"];
const ROLE_LABEL = { skeptic: "Skeptic", advocate: "Advocate", generalist: "Generalist", arbiter: "Arbiter" };
const PRIORITY_COLOR = { high: "red", medium: "yellow", low: "gray" };
const METHOD_TEXT = {
  median: "Median: the final score of each dimension is the median of the evaluators' scores.",
  post_discussion: "Post-discussion: the median of the evaluators' scores after they revised them in the discussion round.",
  arbiter: "Arbiter: on the disputed dimensions the Arbiter's score counts 1.5 times against one for each evaluator; elsewhere the median.",
};
const METHOD_LABEL = { median: "median", post_discussion: "post-discussion", arbiter: "arbiter" };

const dimName = (k) => DIM_NAME[k] || k;
const roleLabel = (r) => ROLE_LABEL[r] || (r ? r[0].toUpperCase() + r.slice(1) : "");

export function createView(ctx) {
  const { el, ui } = ctx;
  if (ui.ensureStylesheet) ui.ensureStylesheet("clarity");

  const sBrief = ctx.section("brief", "Brief");
  const sEval = ctx.section("evaluation", "Evaluators");
  const sDis = ctx.section("disagreement", "Disagreement");
  const sDisc = ctx.section("discussion", "Discussion round");
  const sArb = ctx.section("arbiter", "Arbiter");

  const state = {
    models: null,
    initial: {}, // role -> first verdict
    current: {}, // role -> latest verdict
    evaluated: 0,
    score: null,
    reviewBox: null,
    arbiterFailed: false,
  };
  const fmt = (n) => ui.fmtNum(n, 1);
  const fix1 = (n) => (n === null || n === undefined || Number.isNaN(Number(n)) ? "–" : Number(n).toFixed(1));

  // The brief is not in any event; it is part of the stored request, which the view gets both
  // live and reopened.
  const cfg = (ctx.run && ctx.run.request && (ctx.run.request.config || ctx.run.request.modeConfig)) || null;
  if (cfg && cfg.content) showBrief(cfg);

  function showBrief(b) {
    const body = sBrief.body;
    body.replaceChildren();
    if (b.title) body.append(el("h3", { class: "clarity-brief-title" }, b.title));
    if (b.context) body.append(el("div", { class: "callout muted clarity-context" }, el("strong", null, "Context: "), b.context));
    body.append(el("div", { class: "card highlight clarity-brief" }, ui.clip(ui.markdown(b.content || ""), { open: false })));
    sBrief.show();
  }

  /** The card of `role` in `section` not yet matched to a result. */
  function cardFor(section, role, model) {
    const open = (c) => !c.claimed && c.role === role;
    let card = section.cards.find((c) => open(c) && c.state !== "failed" && c.state !== "stopped") || section.cards.find(open);
    if (!card) card = ctx.ModelCard ? section.addCard(new ctx.ModelCard({ model, role })) : section.claim(model);
    card.claimed = true;
    return card;
  }

  function scoreGrid(scores) {
    return el("dl", { class: "clarity-scores" }, DIMS.map(([k, n]) => el("div", null,
      el("dt", null, n), el("dd", null, scores && scores[k] != null ? fmt(scores[k]) : "–"))));
  }

  function issueList(issues) {
    return el("ul", { class: "clarity-issues" }, issues.map((i) => el("li", null,
      el("div", null, ui.badge(i.severity || "—", PRIORITY_COLOR[i.severity] || "gray"), " ", el("strong", null, dimName(i.dimension)), ": ", i.issue || ""),
      i.suggestedFix ? el("div", { class: "clarity-fix" }, el("span", { class: "muted" }, "Fix: "), i.suggestedFix) : null,
      i.quote ? el("blockquote", { class: "clarity-quote" }, `“${i.quote}”`) : null)));
  }

  function evaluatorComplete(v) {
    state.initial[v.role] = v;
    state.current[v.role] = v;
    const card = cardFor(sEval, v.role, v.model);
    card.el.classList.add("clarity-evaluator");
    card.el.dataset.role = v.role;
    card.setTitle(roleLabel(v.role));
    card.setRole(v.model);
    card.setState("ok", { ms: v.responseTimeMs });
    if (v.parseSuccess) {
      card.addBadge(ui.badge(`overall ${fmt(v.overall)}`, "blue"));
      card.prepend(scoreGrid(v.scores));
    } else {
      card.addBadge(ui.badge("unreadable", "red"));
      card.prepend(el("p", { class: "callout clarity-unparsed" }, "No scores could be read from this answer, so it is left out of the scoring.", v.unparsed ? ` ${ui.unparsedWhy(v.unparsed)}` : ""));
    }
    card.setText(v.critique || "");
    const issues = v.issues || [];
    if (issues.length) {
      card.extra.append(el("details", { class: "clarity-issues-box" }, el("summary", null, `Issues raised (${issues.length})`), issueList(issues)));
    }
    state.evaluated += 1;
    ctx.progress(`Evaluators: ${state.evaluated} of ${Math.max(3, sEval.cards.length)} done`);
    ctx.announce(`${roleLabel(v.role)} scored ${v.parseSuccess ? fmt(v.overall) : "unreadably"}`);
  }

  /** A table of each evaluator's position and the spread per dimension, disputed rows marked. */
  function spreadTable(d) {
    const pos = d.evaluatorPositions || {};
    const roles = ROLES.filter((r) => pos[r]).concat(Object.keys(pos).filter((r) => !ROLES.includes(r)));
    const disputed = new Set(d.disagreeingDimensions || []);
    const rows = DIMS.map(([k, n]) => [
      disputed.has(k) ? el("span", null, n, " ", ui.badge("disputed", "red")) : n,
      ...roles.map((r) => fmt(pos[r][k])),
      d.spreads && d.spreads[k] != null ? fmt(d.spreads[k]) : "–",
    ]);
    const t = ui.table(["Dimension", ...roles.map(roleLabel), "Spread"], rows, { num: roles.map((_, i) => i + 1).concat([roles.length + 1]), caption: "Evaluator positions and spreads" });
    t.classList.add("clarity-spreads");
    [...t.tBodies[0].rows].forEach((tr, i) => { if (disputed.has(DIMS[i][0])) tr.classList.add("disputed"); });
    return el("div", { class: "clarity-table-wrap" }, t);
  }

  function spreadSentence(d) {
    const dims = (d.disagreeingDimensions || []).map((k) => `${dimName(k)} (spread ${fmt(d.spreads && d.spreads[k])})`);
    const parts = [];
    if (dims.length) parts.push(`Spread above 2 points on ${dims.join(", ")}`);
    else if (d.hasDisagreement) parts.push("Spread above 2 points on the weighted overall score");
    parts.push(`overall spread ${fmt(d.overallSpread)}, largest ${fmt(d.maxSpread)}`);
    return parts.join("; ") + ".";
  }

  function disagreementDetected(d) {
    sDis.show();
    sDis.body.replaceChildren(
      el("p", { class: "callout clarity-disagreement" }, el("strong", null, "The evaluators disagree. "), spreadSentence(d)),
      spreadTable(d));
    sDis.done();
    ctx.announce("The evaluators disagree");
  }

  function discussionStart(d) {
    sDisc.running();
    sDisc.body.replaceChildren(el("p", { class: "muted" },
      `Largest spread ${fmt(d.maxSpread)}: each evaluator sees all the verdicts and may revise its scores.`));
    ctx.progress("Discussion round");
  }

  function discussionComplete(d) {
    const byRole = Object.fromEntries((d.verdicts || []).map((v) => [v.role, v]));
    const failed = [];
    for (const ch of d.changes || []) {
      const before = state.current[ch.role];
      const after = byRole[ch.role];
      if (ch.failed || !after) {
        failed.push(ch.role);
        // Its card (a failed call, or text with no readable scores) says so, the same live
        // and reopened (streamed text is not replayed).
        const card = sDisc.cards.find((c) => !c.claimed && c.role === ch.role);
        if (card) {
          card.claimed = true;
          card.setTitle(roleLabel(ch.role));
          card.setRole(card.model);
          card.setBody(el("p", { class: "muted" }, "No readable revision; the earlier scores are kept."));
        }
        continue;
      }
      const changed = (ch.changedDimensions || []).map((k) => `${dimName(k)} ${fmt(before && before.scores ? before.scores[k] : null)} → ${fmt(after.scores ? after.scores[k] : null)}`);
      const card = cardFor(sDisc, ch.role, after.model);
      card.el.classList.add("clarity-discussant");
      card.el.dataset.role = ch.role;
      card.setTitle(roleLabel(ch.role));
      card.setRole(after.model);
      card.setState("ok", { ms: after.responseTimeMs });
      card.addBadge(ui.badge(`overall ${fmt(before ? before.overall : null)} → ${fmt(after.overall)}`, "blue"));
      card.prepend(el("p", { class: "clarity-changes" }, el("strong", null, "Changed: "), changed.length ? changed.join(", ") : "nothing"));
      card.setText(ch.justification || after.justification || after.critique || "");
      state.current[ch.role] = after;
    }
    const body = sDisc.body;
    body.replaceChildren();
    // Evaluators whose revision failed have no card of their own: list them here.
    for (const role of failed) {
      body.append(el("p", { class: "callout clarity-discussion-failed" }, el("strong", null, `${roleLabel(role)}: `), "no readable revision; its earlier scores are kept."));
    }
    const dis = d.disagreement || {};
    body.append(el("p", { class: "callout clarity-after" }, dis.hasDisagreement
      ? `After the discussion the disagreement remains. ${spreadSentence(dis)}`
      : `After the discussion no spread above 2 points remains (largest ${fmt(dis.maxSpread)}).`));
    if (dis.hasDisagreement) body.append(spreadTable(dis));
    sDisc.done();
  }

  function arbiterStart(d) {
    sArb.running();
    sArb.body.replaceChildren(el("p", { class: "muted" },
      `Disagreement remains, so the Arbiter (${d.model || "?"}) scores the disputed dimensions: ${(d.disputedDimensions || []).map(dimName).join(", ") || "all"}.`));
    ctx.progress("The Arbiter is breaking the tie");
  }

  function arbiterComplete(d) {
    if (d.error) {
      state.arbiterFailed = true;
      sArb.body.append(el("p", { class: "callout clarity-arbiter-failed" },
        `The Arbiter failed (${d.error}); the final scores use the evaluators' scores alone, and the run is flagged for review.`));
      sArb.done();
      return;
    }
    const card = cardFor(sArb, "arbiter", d.model);
    card.setTitle("Arbiter");
    card.setRole(d.model);
    card.setState("ok", { ms: d.responseTimeMs });
    const scores = Object.entries(d.scores || {});
    card.prepend(el("p", { class: "clarity-arbiter-scores" }, el("strong", null, "Scores (count 1.5×): "),
      scores.length ? scores.map(([k, v]) => `${dimName(k)} ${fmt(v)}`).join(", ") : "none could be read"));
    card.setText(d.reasoning || "");
    sArb.done();
  }

  function scoreChart(breakdown) {
    const label = "Final score per dimension, out of 10: " + breakdown.map((b) => `${b.name || dimName(b.dimension)} ${fmt(b.score)}`).join("; ");
    return ctx.chart({
      type: "bar",
      data: {
        labels: breakdown.map((b) => b.name || dimName(b.dimension)),
        datasets: [{
          label: "Final score",
          data: breakdown.map((b) => b.score),
          backgroundColor: breakdown.map((b) => (b.score == null ? ctx.charts.color(8) : b.score >= 7 ? ctx.charts.color(2) : b.score >= 4 ? ctx.charts.color(5) : ctx.charts.color(3))),
        }],
      },
      options: {
        indexAxis: "y",
        plugins: { legend: { display: false } },
        scales: { x: { min: 0, max: 10, ticks: { stepSize: 2 } }, y: { ticks: { autoSkip: false } } },
      },
    }, { label });
  }

  function critiqueList(items) {
    return el("ol", { class: "clarity-critique" }, items.map((c) => el("li", { class: "clarity-critique-item" },
      el("div", { class: "clarity-critique-head" },
        ui.badge(c.priority || "—", PRIORITY_COLOR[c.priority] || "gray"), " ",
        el("span", { class: "clarity-dim" }, dimName(c.dimension))),
      el("div", { class: "clarity-issue" }, c.issue || ""),
      c.suggestedFix ? el("div", { class: "clarity-fix" }, el("span", { class: "muted" }, "Suggested fix: "), c.suggestedFix) : null,
      c.quote ? el("blockquote", { class: "clarity-quote" }, `“${c.quote}”`) : null,
      el("div", { class: "muted clarity-flagged" }, `Flagged by ${(c.flaggedBy || []).map(roleLabel).join(", ") || "—"}`))));
  }

  function scoreComplete(s) {
    state.score = s;
    const breakdown = s.breakdown || [];
    const finalVerdicts = { ...state.current, ...Object.fromEntries((s.verdicts || []).map((v) => [v.role, v])) };
    // No disagreement event: say the panel agreed, with the spreads.
    if (sDis.el.hidden && s.initialDisagreement && !s.initialDisagreement.hasDisagreement) {
      const d = s.initialDisagreement;
      sDis.show();
      sDis.body.replaceChildren(
        el("p", { class: "callout clarity-agreement" }, `The evaluators agreed: no spread above 2 points (largest ${fmt(d.maxSpread)}, overall spread ${fmt(d.overallSpread)}).`),
        spreadTable(d));
    }
    const p = ctx.primary("Clarity score");
    p.el.classList.add("clarity-result");
    p.head.replaceChildren("Clarity score", ui.badge(`method: ${METHOD_LABEL[s.method] || s.method}`, "blue"));
    if (s.needsHumanReview) p.head.append(ui.badge("needs human review", "yellow"));
    const body = document.createDocumentFragment();

    body.append(el("div", { class: "clarity-top" },
      el("div", { class: "clarity-final" }, el("div", { class: "muted" }, "Final score"),
        el("div", { class: "big-number" }, el("span", { class: "clarity-score-value" }, fix1(s.score)), el("span", { class: "clarity-outof" }, " / 10"))),
      el("div", { class: "clarity-method" },
        el("div", null, el("strong", null, "Method: "), el("span", { class: "clarity-method-name" }, METHOD_LABEL[s.method] || s.method)),
        el("div", { class: "muted" }, METHOD_TEXT[s.method] || ""),
        el("div", { class: "muted" }, s.discussionRan ? "A discussion round ran." : "No discussion round ran."))));

    const review = el("div", { class: "clarity-review" });
    if (s.needsHumanReview) {
      review.append(el("div", { class: "callout clarity-flag", role: "note" },
        el("strong", null, "Flagged for human review. "), s.reviewReason || ""));
    } else {
      review.append(el("p", { class: "muted clarity-noflag" }, "Not flagged for human review: the evaluators agreed within 2 points."));
    }
    state.reviewBox = el("div", { class: "clarity-review-action" });
    review.append(state.reviewBox);
    body.append(review);

    // The table: dimension, weight, each evaluator, the Arbiter when it scored, final.
    const roles = ROLES.filter((r) => breakdown.some((b) => b.evaluatorScores && r in b.evaluatorScores))
      .concat([...new Set(breakdown.flatMap((b) => Object.keys(b.evaluatorScores || {})))].filter((r) => !ROLES.includes(r)));
    const withArbiter = breakdown.some((b) => b.arbiterScore != null);
    // Short headers on a phone, where seven columns must fit 390 px.
    const head = (long, short) => el("span", null, el("span", { class: "long" }, long), el("abbr", { class: "short", title: long }, short));
    const headers = ["Dimension", head("Weight", "Wt"), ...roles.map((r) => head(roleLabel(r), roleLabel(r).slice(0, 3) + ".")),
      ...(withArbiter ? [head("Arbiter", "Arb.")] : []), "Final"];
    const rows = breakdown.map((b) => [
      b.name || dimName(b.dimension),
      `${Math.round((b.weight || 0) * 100)}%`,
      ...roles.map((r) => fmt(b.evaluatorScores ? b.evaluatorScores[r] : null)),
      ...(withArbiter ? [b.arbiterScore != null ? fmt(b.arbiterScore) : "–"] : []),
      el("strong", null, fix1(b.score)),
    ]);
    const numCols = headers.map((_, i) => i).filter((i) => i > 0);
    const t = ui.table(headers, rows, { num: numCols, caption: "Scores per dimension" });
    t.classList.add("clarity-breakdown");
    const tfoot = el("tfoot", null, el("tr", null,
      el("th", { scope: "row" }, "Weighted score"), el("td", { class: "num" }, "100%"),
      ...roles.map((r) => { const v = finalVerdicts[r]; return el("td", { class: "num" }, fmt(v ? v.overall : null)); }),
      ...(withArbiter ? [el("td", { class: "num" }, "")] : []),
      el("td", { class: "num" }, el("strong", null, fix1(s.score)))));
    t.append(tfoot);

    body.append(el("div", { class: "grid-2 clarity-scoregrid" },
      el("div", null, el("h3", null, "Scores per dimension"), el("div", { class: "clarity-table-wrap" }, t)),
      el("div", null, el("h3", null, "Final scores"), breakdown.length ? scoreChart(breakdown) : el("p", { class: "muted" }, "No scores."))));

    const critique = s.critique || [];
    body.append(el("h3", null, `Consolidated critique (${critique.length})`),
      critique.length ? critiqueList(critique) : el("p", { class: "muted" }, "No issues were raised."));

    p.body.replaceChildren(body);
    ctx.progress("");
    ctx.announce(`Clarity score ${fmt(s.score)} out of 10${s.needsHumanReview ? ", flagged for human review" : ""}`);
  }

  function renderReviewed(box, review) {
    box.replaceChildren(el("div", { class: "clarity-reviewed callout" },
      ui.badge("reviewed", "green"), " ",
      el("span", null, `Reviewed ${ui.fmtTime(review.reviewedAt)}`),
      review.note ? el("div", { class: "clarity-review-note" }, el("span", { class: "muted" }, "Note: "), review.note) : el("div", { class: "muted" }, "No note.")));
  }

  function renderReviewForm(box, runId) {
    const id = `clarity-review-note-${runId}`;
    const note = el("textarea", { id, rows: 3, maxlength: 10000, placeholder: "What did you check, and what did you decide?" });
    const err = el("div", { class: "field-error", role: "alert" });
    const btn = el("button", { type: "submit", class: "clarity-review-submit" }, "Mark reviewed");
    const form = el("form", { class: "clarity-review-form", "aria-label": "Human review" },
      el("label", { for: id }, "Review note"), note, el("div", { class: "toolbar" }, btn, err));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      err.textContent = "";
      btn.disabled = true;
      try {
        const res = await fetch(`/api/reviews/${encodeURIComponent(runId)}`, {
          method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ note: note.value }),
        });
        let reply = null;
        try { reply = await res.json(); } catch { /* not JSON */ }
        if (!res.ok) throw new Error((reply && reply.error) || `${res.status} ${res.statusText}`);
        renderReviewed(box, reply || { reviewedAt: Date.now(), note: note.value.trim() });
        ctx.announce("Marked reviewed");
      } catch (ex) {
        err.textContent = `Could not mark it reviewed: ${ex.message}`;
        btn.disabled = false;
      }
    });
    box.replaceChildren(form);
  }

  return {
    callSection(call) {
      if (call.stage === "evaluation" || call.stage === "discussion" || call.stage === "arbiter") return call.stage;
      return call.stage;
    },

    event(name, data) {
      const d = (data && data.data) || {};
      switch (name) {
        case "clarity_start": {
          state.models = data.models || null;
          if (state.models) {
            sBrief.body.append(el("p", { class: "muted clarity-panel" }, "Panel: ",
              [...ROLES, "arbiter"].filter((r) => state.models[r]).map((r) => `${roleLabel(r)} ${state.models[r]}`).join(" · ")));
            sBrief.show();
          }
          sEval.running();
          ctx.progress("The evaluators are scoring the brief");
          break;
        }
        case "evaluator_complete": evaluatorComplete(d); break;
        case "disagreement_detected": disagreementDetected(d); break;
        case "discussion_start": sEval.done(); discussionStart(d); break;
        case "discussion_complete": discussionComplete(d); break;
        case "arbiter_start": sEval.done(); arbiterStart(d); break;
        case "arbiter_complete": arbiterComplete(d); break;
        case "score_complete": sEval.done(); scoreComplete(d); break;
        default: break;
      }
    },

    finish(detail) {
      const review = detail && detail.review;
      if (!state.reviewBox || !review || !review.needsHumanReview) return;
      if (review.reviewedAt) renderReviewed(state.reviewBox, review);
      else renderReviewForm(state.reviewBox, detail.id || ctx.run.id);
    },
  };
}
