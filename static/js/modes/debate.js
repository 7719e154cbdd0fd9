// Debate: round 1 answers (model, time); round 2 revisions, each with its decision badge
// (green REVISED, blue MERGED, gray STOOD), its reasoning, the word-count change and a diff of
// the original against the revised answer, under a summary bar ("2 revised, 1 stood, 1 merged");
// round 3 the vote on the revised answers (ballots, tally chart, de-anonymisation toggle); and
// the winner's REVISED answer as the run's main answer.
import { Revealer, renderBallot, tallyPanel, winnerMeta, markWinner, joinLabels } from "./vote.js";

export const DECISIONS = {
  REVISE: { text: "REVISED", color: "green", word: "revised" },
  MERGE: { text: "MERGED", color: "blue", word: "merged" },
  STAND: { text: "STOOD", color: "gray", word: "stood" },
};

/** "2 revised, 1 stood, 1 merged" (and ", 1 unparsed" when a decision could not be read). */
export function summaryText(s) {
  const parts = [`${s.revised || 0} revised`, `${s.stood || 0} stood`, `${s.merged || 0} merged`];
  if (s.parseFailed) parts.push(`${s.parseFailed} unparsed`);
  return parts.join(", ");
}

const CONTEXT = 12; // unchanged words kept on each side of a change in a diff

function wordDelta(r) {
  const d = (r.revisedWordCount || 0) - (r.originalWordCount || 0);
  if (d === 0) return "±0 words";
  return `${d > 0 ? "+" : "−"}${Math.abs(d)} ${Math.abs(d) === 1 ? "word" : "words"}`;
}

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("vote");
  ui.ensureStylesheet("debate");
  const s1 = ctx.section("round1", "Round 1 · Initial answers", { tabs: true });
  const s2 = ctx.section("revision", "Round 2 · Revisions", { tabs: true });
  const s3 = ctx.section("vote", "Round 3 · Vote on the revised answers");
  const rev = new Revealer(ctx);
  let round1Map = {};
  let revisedMap = {};
  let tally = null;
  let seen = false;
  let diffCount = 0;
  const summaryBox = el("div", { class: "decision-summary", hidden: true });
  s2.heading.after(summaryBox);

  function decisionBadge(decision, failed) {
    const d = DECISIONS[decision];
    if (d) return ui.badge(d.text, d.color, `decision: ${decision}`);
    return failed ? ui.badge("NO REVISION", "red", "the revision call failed; the original answer stands")
      : ui.badge("UNPARSED", "yellow", "no DECISION line could be read");
  }

  /**
   * Unchanged text of a diff: long stretches keep CONTEXT words next to each change and fold
   * the rest behind a button that shows it.
   */
  function unchanged(value, first, last) {
    const words = [...value.matchAll(/\S+/g)].map((m) => [m.index, m.index + m[0].length]);
    const head = first ? 0 : CONTEXT;
    const tail = last ? 0 : CONTEXT;
    const hidden = words.length - head - tail;
    if (hidden < 12) return [value];
    const from = head ? words[head - 1][1] : 0;
    const to = tail ? words[words.length - tail][0] : value.length;
    const rest = value.slice(from, to);
    const btn = el("button", { type: "button", class: "link diff-skip", title: "show the unchanged text" }, `… ${hidden} unchanged words …`);
    btn.addEventListener("click", () => btn.replaceWith(rest));
    return [value.slice(0, from), head ? " " : "", btn, tail ? " " : "", value.slice(to)];
  }

  /** The diff of the original against the revised answer, behind a toggle (built when first opened). */
  function diffToggle(original, revised) {
    const id = `diff-${ctx.run.id}-${++diffCount}`;
    const box = el("div", { class: "diff-box", id, hidden: true });
    const btn = el("button", { type: "button", class: "secondary small diff-toggle", "aria-expanded": "false", "aria-controls": id }, "Show changes");
    btn.addEventListener("click", () => {
      const open = box.hidden;
      if (open && !box.firstChild) {
        const diff = el("div", { class: "diff", "aria-label": "Changes from the round 1 answer: insertions and deletions" });
        if (window.Diff && window.Diff.diffWords) {
          const parts = window.Diff.diffWords(original, revised);
          parts.forEach((part, i) => {
            if (part.added) diff.append(el("ins", null, part.value));
            else if (part.removed) diff.append(el("del", null, part.value));
            else diff.append(...unchanged(part.value, i === 0, i === parts.length - 1));
          });
        } else {
          diff.append(revised);
        }
        box.append(el("div", { class: "diff-legend muted" }, el("ins", null, "added"), " ", el("del", null, "removed"), " against the round 1 answer"), diff);
      }
      box.hidden = !open;
      btn.setAttribute("aria-expanded", String(open));
      btn.textContent = open ? "Hide changes" : "Show changes";
    });
    return el("div", { class: "diff-wrap" }, btn, box);
  }

  function renderRevision(r) {
    const card = s2.claim(r.model);
    const failed = !r.decision && r.revisedResponse === r.originalResponse;
    card.setRole("debater");
    card.el.classList.add("revision-card");
    card.el.dataset.decision = r.decision || (failed ? "none" : "unparsed");
    card.addBadge(decisionBadge(r.decision, failed));
    card.addBadge(el("span", { class: "badge gray word-delta", title: `${r.originalWordCount} → ${r.revisedWordCount} words` }, wordDelta(r)));
    if (r.reasoning) card.prepend(el("p", { class: "reasoning" }, ...rev.mentions(r.reasoning, round1Map)));
    else if (!failed) card.prepend(el("p", { class: "reasoning muted" }, "No reasoning given."));
    if (failed) {
      card.prepend(el("p", { class: "callout" }, "No revision: the original answer stands and is what the others vote on."));
    } else if (!r.decision) {
      card.prepend(el("p", { class: "callout" }, "No DECISION line could be read; the whole reply is taken as the revised answer."));
    }
    card.setText(r.revisedResponse || "");
    if (r.responseTimeMs && card.state !== "failed") card.setState("ok", { ms: r.responseTimeMs });
    card.extra.replaceChildren(r.revisedResponse === r.originalResponse
      ? el("p", { class: "muted unchanged" }, "Unchanged from round 1.")
      : diffToggle(r.originalResponse || "", r.revisedResponse || ""));
  }

  function renderSummary(s, revisions) {
    const total = s.totalModels || revisions.length || 0;
    const bar = el("div", { class: "decision-bar", role: "img", "aria-label": `Decisions: ${summaryText(s)}` });
    for (const [key, n] of [["REVISE", s.revised], ["MERGE", s.merged], ["STAND", s.stood], [null, s.parseFailed]]) {
      if (!n) continue;
      bar.append(el("span", { class: `seg ${key ? DECISIONS[key].color : "yellow"}`, title: `${n} ${key ? DECISIONS[key].word : "unparsed"}`, dataset: { n: String(n) } }));
      bar.lastChild.style.flexGrow = String(n);
    }
    summaryBox.replaceChildren(
      el("div", { class: "summary-line" },
        el("strong", { class: "revision-summary" }, summaryText(s)),
        el("span", { class: "muted" }, ` of ${ui.plural(total, "debater")}`)),
      bar,
      el("div", { class: "toolbar" }, rev.toggle()));
    summaryBox.hidden = false;
  }

  const view = {
    // Call stages (runview's default sections): round1 (answers), revision, vote.
    event(name, data) {
      seen = true;
      const d = data.data;
      switch (name) {
        case "round1_start": s1.running(); ctx.progress("Round 1: answering"); break;
        case "round1_complete":
          ctx.announce(`Round 1 complete: ${ui.plural(s1.answers(d, { role: "respondent" }), "answer")}`);
          break;
        case "revision_start":
          round1Map = (d && d.labelMap) || {};
          s2.running();
          ctx.progress("Round 2: revising");
          break;
        case "revision_complete": {
          const revisions = (d && d.revisions) || [];
          for (const r of revisions) renderRevision(r);
          renderSummary((d && d.summary) || {}, revisions);
          s2.done();
          ctx.announce(`Revisions are in: ${summaryText((d && d.summary) || {})}`);
          break;
        }
        case "vote_start":
          revisedMap = (d && d.revisedLabelMap) || {};
          s3.running();
          ctx.progress("Round 3: voting");
          break;
        case "vote_complete": {
          const round = d || {};
          revisedMap = round.revisedLabelToModel || revisedMap;
          for (const v of round.votes || []) renderBallot(ctx, rev, s3.claim(v.model), v, revisedMap);
          tally = tallyPanel(ctx, rev, round, revisedMap, { title: "Votes on the revised answers", toggle: rev.toggle() });
          s3.body.replaceChildren(tally.el);
          s3.done();
          ctx.announce(round.isTie ? `Votes are in: a tie between ${joinLabels(round.tiedLabels || [])}` : "Votes are in");
          break;
        }
        case "winner_declared": {
          const w = d || {};
          if (tally) tally.setWinner(w.winnerLabel);
          if (w.tiebroken) {
            s3.body.append(el("div", { class: "callout tiebreak-result" },
              "Tied: the first tied label alphabetically, ", rev.label(w.winnerLabel, revisedMap), ", wins (a debate has no chairman)."));
          }
          markWinner(ctx, s2, w.winnerModel, w.winnerResponse);
          const p = ctx.primary("Winning answer (revised)");
          p.el.classList.add("debate-winner");
          p.body.replaceChildren(winnerMeta(ctx, w, [decisionBadge(w.winnerDecision, false)]), ui.markdown(w.winnerResponse || "", "winner-text"));
          ctx.announce(`Winner: ${w.winnerModel}, ${(DECISIONS[w.winnerDecision] || {}).word || "undecided"}, with ${ui.plural(w.voteCount ?? 0, "vote")}`);
          break;
        }
        default: break;
      }
    },

    /** A stored run without recorded events: render its stored result as if its events came. */
    finish(detail) {
      if (seen || !detail || !detail.result) return;
      const r = detail.result;
      if (r.round1 && r.round1.length) view.event("round1_complete", { data: r.round1 });
      if (r.revisions && r.revisions.length) {
        view.event("revision_start", { data: { labelMap: r.round1LabelMap || {} } });
        view.event("revision_complete", { data: { revisions: r.revisions, summary: r.revisionSummary || {} } });
      }
      if (r.votes) {
        view.event("vote_start", { data: { revisedLabelMap: r.revisedLabelMap || {} } });
        view.event("vote_complete", { data: r.votes });
      }
      if (r.winner) view.event("winner_declared", { data: r.winner });
    },
  };
  return view;
}
