// Vote: every model's answer (model, time), each vote with its text behind a toggle and the
// label it chose, the tally as a bar chart (with a de-anonymisation toggle), the chairman's
// tiebreak when the vote tied, and the winner's ORIGINAL answer as the run's main answer.
//
// The voting pieces (ballots, tally chart, label reveal) are exported for Debate, whose third
// round is the same vote on the revised answers.

const LABEL_RE = /\bResponse ([A-Z]{1,2})\b/g;

/** `Response B` before `Response AA`. */
export function labelOrder(a, b) {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** The letters of a list of labels, joined for a sentence: "Response A and Response C". */
export function joinLabels(labels) {
  const l = [...labels];
  if (l.length <= 1) return l.join("");
  return `${l.slice(0, -1).join(", ")} and ${l[l.length - 1]}`;
}

/**
 * The de-anonymisation switch of a view: any number of synced checkboxes, and label nodes
 * (`Response B`, or `Response B (model)` when revealed) that follow them.
 */
export class Revealer {
  constructor(ctx, text = "Show which model wrote each response") {
    this.ctx = ctx;
    this.text = text;
    this.on = false;
    this.boxes = [];
    this.nodes = []; // [node, label, map]
    this.listeners = [];
  }

  /** A new checkbox, kept in step with the others. */
  toggle() {
    const { el } = this.ctx;
    const box = el("input", { type: "checkbox", class: "reveal-toggle" });
    box.checked = this.on;
    box.addEventListener("change", () => this.set(box.checked));
    this.boxes.push(box);
    return el("label", { class: "toggle" }, box, this.text);
  }

  set(on) {
    this.on = on;
    for (const b of this.boxes) b.checked = on;
    for (const [n, label, map] of this.nodes) n.textContent = this.name(label, map);
    for (const fn of this.listeners) fn(on);
  }

  onChange(fn) { this.listeners.push(fn); }

  name(label, map) {
    return this.on && map && map[label] ? `${label} (${map[label]})` : label;
  }

  /** A span showing `label`, with its model from `map` once revealed. */
  label(label, map, cls = "label") {
    const n = this.ctx.el("span", { class: cls }, this.name(label, map));
    this.nodes.push([n, label, map]);
    return n;
  }

  /** Text whose `Response X` mentions become label nodes (a reasoning line naming others). */
  mentions(text, map) {
    const out = [];
    let last = 0;
    for (const m of String(text || "").matchAll(LABEL_RE)) {
      if (m.index > last) out.push(text.slice(last, m.index));
      out.push(map && map[m[0]] ? this.label(m[0], map, "label mention") : m[0]);
      last = m.index + m[0].length;
    }
    if (last < String(text || "").length) out.push(text.slice(last));
    return out;
  }
}

/** A voter's card: the label it chose (or "invalid vote") and its text behind a toggle. */
export function renderBallot(ctx, rev, card, vote, map) {
  const { el, ui } = ctx;
  card.setRole("voter");
  card.el.classList.add("ballot");
  if (vote.votedFor) {
    card.addBadge(el("span", { class: "badge blue vote-choice", title: "the response this model voted for" }, "→ ", rev.label(vote.votedFor, map)));
  } else {
    const why = { refused: "abstained", reasoning_only: "stopped while reasoning", inconsistent: "contradictory vote", no_answer: "no vote stated" }[vote.unparsed];
    card.addBadge(el("span", { class: "badge red vote-choice", title: "no vote for a response of this round could be read" }, "invalid vote"));
    if (why) card.addBadge(el("span", { class: "badge unparsed-why" }, why));
  }
  const details = el("details", { class: "vote-reasoning" },
    el("summary", null, vote.votedFor ? "Reasoning" : "Reply (no valid vote could be read)"),
    ui.markdown(vote.voteText || ""));
  card.text = vote.voteText || "";
  card.setBody(details);
  card.setState("ok", { ms: vote.responseTimeMs });
}

/**
 * The tally of a vote round: a horizontal bar chart of votes per label (every label of the
 * round, zero included), winner in green and tied labels in amber, with a summary line.
 * `round`: {tallies, validVoteCount, invalidVoteCount, isTie, tiedLabels}; `map`: label → model.
 * Returns `{el, setWinner(label)}`.
 */
export function tallyPanel(ctx, rev, round, map, { title = "Vote tally", toggle = null } = {}) {
  const { el, ui } = ctx;
  const tallies = round.tallies || {};
  const labels = [...new Set([...Object.keys(map || {}), ...Object.keys(tallies)])].sort(labelOrder);
  const counts = labels.map((l) => tallies[l] || 0);
  const valid = round.validVoteCount || 0;
  const invalid = round.invalidVoteCount || 0;
  const tied = round.tiedLabels || [];
  const max = Math.max(0, ...counts);
  let winner = null;

  const panel = el("div", { class: "panel tally" });
  const summary = el("p", { class: "tally-summary" });
  panel.append(el("div", { class: "tally-head" }, el("h3", null, title), toggle));

  const castLine = `${ui.plural(valid + invalid, "vote")} cast: ${valid} valid, ${invalid} invalid.`;
  if (!valid) {
    summary.append(castLine, " No vote could be read, so no winner was chosen.");
    panel.append(summary, el("div", { class: "callout no-votes" }, "Every vote was invalid: none named a response of this round."));
    return { el: panel, setWinner() {} };
  }

  const colors = () => labels.map((l, i) => (l === winner ? "#2e9d5b" : tied.includes(l) ? "#e0a100" : counts[i] === max && !round.isTie ? "#2e9d5b" : "#4e79a7"));
  const chartLabels = () => labels.map((l) => (rev.on && map && map[l] ? [l, map[l]] : l));
  const describe = () => {
    const parts = labels.map((l, i) => `${rev.name(l, map)}: ${ui.plural(counts[i], "vote")}${l === winner ? " (winner)" : ""}`);
    const tie = round.isTie ? ` Tie between ${joinLabels(tied)}.` : "";
    return `${title}, bar chart. ${parts.join("; ")}. ${valid} valid, ${invalid} invalid.${tie}`;
  };
  const box = ctx.chart({
    type: "bar",
    data: { labels: chartLabels(), datasets: [{ label: "Votes", data: counts, backgroundColor: colors(), borderRadius: 4, maxBarThickness: 30 }] },
    options: {
      indexAxis: "y",
      plugins: { legend: { display: false }, tooltip: { callbacks: { label: (c) => ui.plural(c.raw, "vote") } } },
      scales: {
        x: { beginAtZero: true, suggestedMax: Math.max(1, max), ticks: { precision: 0, stepSize: 1 } },
        y: { grid: { display: false } },
      },
    },
  }, { label: "", small: true });
  box.classList.add("tally-chart");
  box.style.height = `${Math.max(130, labels.length * 40 + 50)}px`;
  const refresh = () => {
    box.setAttribute("aria-label", describe());
    if (box.chart) {
      box.chart.data.labels = chartLabels();
      box.chart.data.datasets[0].backgroundColor = colors();
      box.chart.update();
    }
  };
  refresh();
  rev.onChange(refresh);

  summary.append(castLine);
  if (round.isTie) summary.append(` Tie between ${joinLabels(tied)} with ${ui.plural(max, "vote")} each.`);
  panel.append(box, summary);
  return {
    el: panel,
    setWinner(label) { winner = label; refresh(); },
  };
}

/** The winner line under the primary heading: model, label, votes, tiebreak (and Debate's decision). */
export function winnerMeta(ctx, w, extra = []) {
  const { el, ui } = ctx;
  const votes = `${w.voteCount ?? 0} of ${ui.plural(w.totalVotes ?? 0, "vote")}`;
  const tb = w.tiebroken
    ? ui.badge(w.tiebreakerMethod === "chairman" ? "tie broken by the chairman" : "tie broken alphabetically", "yellow")
    : null;
  return el("div", { class: "winner-meta" },
    el("span", { class: "winner-model", title: "the winning model" }, w.winnerModel || ""),
    el("span", { class: "winner-label muted" }, w.winnerLabel || ""),
    ...extra,
    el("span", { class: "badge green winner-votes" }, votes),
    tb);
}

/** Marks the card holding the winning text. */
export function markWinner(ctx, section, model, text) {
  const card = section.cards.find((c) => c.model === model && c.text === text) || section.cards.find((c) => c.model === model);
  if (!card || card.el.classList.contains("winner-card")) return;
  card.el.classList.add("winner-card");
  card.addBadge(ctx.ui.badge("winner", "green"));
}

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("vote");
  const s1 = ctx.section("stage1", "Stage 1 · Answers", { tabs: true });
  const s2 = ctx.section("vote", "Stage 2 · Votes");
  const s3 = ctx.section("tiebreaker", "Tiebreak");
  const rev = new Revealer(ctx);
  // The tie, above the chairman's card.
  const tieNote = el("p", { class: "tiebreak-note", hidden: true });
  s3.heading.after(tieNote);
  let labelToModel = {};
  let tally = null;
  let seen = false;

  const view = {
    // Call stages (runview's default sections): stage1 (answers), vote (ballots), tiebreaker.
    event(name, data) {
      seen = true;
      const d = data.data;
      switch (name) {
        case "stage1_start": s1.running(); ctx.progress("Stage 1: collecting answers"); break;
        case "stage1_complete":
          ctx.announce(`Stage 1 complete: ${ui.plural(s1.answers(d), "answer")}`);
          break;
        case "vote_round_start": s2.running(); ctx.progress("Stage 2: voting"); break;
        case "vote_round_complete": {
          const round = d || {};
          labelToModel = round.labelToModel || {};
          for (const v of round.votes || []) renderBallot(ctx, rev, s2.claim(v.model), v, labelToModel);
          tally = tallyPanel(ctx, rev, round, labelToModel, { toggle: rev.toggle() });
          s2.body.replaceChildren(tally.el);
          s2.done();
          ctx.announce(round.isTie ? `Votes are in: a tie between ${joinLabels(round.tiedLabels || [])}` : "Votes are in");
          break;
        }
        case "tiebreaker_start": {
          const t = d || {};
          s3.running();
          ctx.progress("Tiebreak: the chairman decides");
          tieNote.replaceChildren(`The vote tied between ${joinLabels(t.tiedLabels || [])}. The chairman, ${t.model || "?"}, sees only the tied answers and picks one; if its vote cannot be read, the first tied label alphabetically wins.`);
          tieNote.hidden = false;
          break;
        }
        case "tiebreaker_complete": {
          const t = d || {};
          const card = t.model ? s3.claim(t.model) : null;
          if (card) {
            card.setRole("chairman");
            if (t.votedFor) card.addBadge(el("span", { class: "badge blue vote-choice" }, "→ ", rev.label(t.votedFor, labelToModel)));
            else card.addBadge(ui.badge("no valid vote", "red"));
            if (t.voteText) { card.setText(t.voteText); card.setState("ok"); }
          }
          const how = t.method === "chairman"
            ? el("span", null, "The chairman chose ", rev.label(t.winnerLabel, labelToModel), ".")
            : el("span", null, `The chairman ${t.error ? "failed" : "gave no readable vote"}, so the first tied label alphabetically, `, rev.label(t.winnerLabel, labelToModel), ", wins.");
          s3.body.append(el("div", { class: "callout tiebreak-result" }, how));
          s3.done();
          break;
        }
        case "winner_declared": {
          const w = d || {};
          if (tally) tally.setWinner(w.winnerLabel);
          markWinner(ctx, s1, w.winnerModel, w.winnerResponse);
          const p = ctx.primary("Winning answer");
          p.el.classList.add("vote-winner");
          p.body.replaceChildren(winnerMeta(ctx, w), ui.markdown(w.winnerResponse || "", "winner-text"));
          ctx.announce(`Winner: ${w.winnerModel} with ${ui.plural(w.voteCount ?? 0, "vote")}`);
          break;
        }
        default: break;
      }
    },

    /** A stored run without recorded events: render its stored result as if its events came. */
    finish(detail) {
      if (seen || !detail || !detail.result) return;
      const r = detail.result;
      if (r.stage1 && r.stage1.length) view.event("stage1_complete", { data: r.stage1 });
      if (r.voteRound) view.event("vote_round_complete", { data: r.voteRound });
      if (r.tiebreaker) {
        const w = r.winner || {};
        view.event("tiebreaker_start", { data: { tiedLabels: (r.voteRound && r.voteRound.tiedLabels) || [], model: r.tiebreaker.model } });
        view.event("tiebreaker_complete", { data: { ...r.tiebreaker, method: w.tiebreakerMethod || "chairman", winnerLabel: w.winnerLabel } });
      }
      if (r.winner) view.event("winner_declared", { data: r.winner });
    },
  };
  return view;
}
