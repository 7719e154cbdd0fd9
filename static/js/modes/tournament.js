// Tournament: the champion's own answer as the main block; the bracket drawn round by round
// (seeds, byes, each match revealed as it is judged, with the judge's reasoning, and how it was
// decided when the judge could not be read or failed); every contestant's answer by seed.

const HOW = {
  judge: null,
  judge_retry: ["judge asked twice", "blue", "The judge's first reply named no winner; it was asked again."],
  coin_flip: ["coin flip", "yellow", "The judge never named a winner, even when asked again: a coin flip decided."],
  default_seed: ["judge failed", "red", "The judge could not be reached: the higher seed advances."],
};

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("tournament");
  const bracketSection = ctx.section("bracket", "Bracket");
  const answers = ctx.section("collect", "Answers", { tabs: true });
  const grid = el("div", { class: "tn-bracket", role: "list", "aria-label": "The bracket, round by round" });
  bracketSection.body.append(grid);
  const models = {}; // seed -> model
  const columns = {}; // round -> element
  const boxes = {}; // "round:match" -> {el, slots}
  let totalRounds = 0;
  let seen = false;

  const roundName = (r) => (r === totalRounds ? "Final" : r === totalRounds - 1 && totalRounds > 2 ? "Semi-finals" : `Round ${r}`);

  function column(r) {
    if (columns[r]) return columns[r];
    const list = el("div", { class: "tn-matches" });
    const col = el("div", { class: "tn-round", role: "listitem", "data-round": String(r) },
      el("h3", { class: "tn-round-title" }, roundName(r)), list);
    grid.append(col);
    columns[r] = list;
    return list;
  }

  function slot(seed) {
    if (seed == null) return el("div", { class: "tn-slot tn-empty muted" }, "—");
    return el("div", { class: "tn-slot", "data-seed": String(seed) },
      el("span", { class: "tn-seed" }, `#${seed}`), " ", el("span", { class: "tn-model" }, models[seed] || ""));
  }

  function box(round, matchIndex, a, b) {
    const key = `${round}:${matchIndex}`;
    if (boxes[key]) return boxes[key];
    const state = el("div", { class: "tn-state" });
    const slots = el("div", { class: "tn-slots" }, slot(a), slot(b));
    const node = el("div", { class: "tn-match", "data-round": String(round), "data-match": String(matchIndex) }, slots, state);
    column(round).append(node);
    boxes[key] = { el: node, slots, state };
    return boxes[key];
  }

  function bye(seed, matchIndex) {
    const node = el("div", { class: "tn-match tn-bye", "data-round": "1", "data-match": String(matchIndex) },
      el("div", { class: "tn-slots" }, slot(seed)),
      el("div", { class: "tn-state" }, ui.badge("bye", "gray"), " ", el("span", { class: "muted" }, "advances without a match")));
    column(1).append(node);
  }

  const view = {
    callSection(call) {
      return call.role === "contestant" ? "collect" : null;
    },

    event(name, data) {
      seen = true;
      const d = data.data || {};
      switch (name) {
        case "tournament_start":
          bracketSection.running();
          answers.running();
          ctx.progress("Collecting answers");
          break;
        case "collect_complete": {
          for (const c of Array.isArray(d) ? d : data.data || []) {
            models[c.seed] = c.model;
            const card = answers.claim(c.model);
            card.setTitle(`Seed ${c.seed} · ${c.model}`);
            card.setText(c.response || "");
            card.setState("ok", { ms: c.responseTimeMs });
          }
          answers.done();
          break;
        }
        case "bracket_seeded": {
          totalRounds = d.totalRounds || 0;
          for (const c of d.contestants || []) models[c.seed] = c.model;
          for (let r = 1; r <= totalRounds; r++) column(r);
          for (const m of d.matchups || []) {
            if (m.seedB == null) bye(m.seedA, m.matchIndex);
            else box(1, m.matchIndex, m.seedA, m.seedB);
          }
          const n = (d.contestants || []).length;
          const byes = (d.byes || []).length;
          bracketSection.lead.replaceChildren(el("p", { class: "tn-summary muted" },
            `${ui.plural(n, "contestant")}, ${ui.plural(totalRounds, "round")}` +
            (byes ? `; ${byes === 1 ? "seed" : "seeds"} ${d.byes.join(", ")} skip${byes === 1 ? "s" : ""} the first round` : "") + "."));
          break;
        }
        case "round_start": {
          for (const m of d.matchups || []) {
            const b = box(data.round, m.matchIndex, m.shownAsA, m.shownAsB);
            b.el.classList.add("tn-live");
            b.state.replaceChildren(ui.badge("being judged", "blue"));
          }
          ctx.progress(`${roundName(data.round)}: judging`);
          break;
        }
        case "matchup_complete": {
          const b = box(data.round, data.matchIndex, d.shownAsA, d.shownAsB);
          b.el.classList.remove("tn-live");
          b.el.classList.add("tn-decided");
          for (const s of b.slots.querySelectorAll(".tn-slot")) {
            const seed = Number(s.dataset.seed);
            s.classList.toggle("tn-win", seed === d.winnerSeed);
            s.classList.toggle("tn-lose", seed === d.loserSeed);
            if (seed === d.winnerSeed && !s.querySelector(".tn-mark")) s.append(" ", el("span", { class: "tn-mark", "aria-label": "winner" }, "✓"));
          }
          const how = HOW[d.decidedBy];
          const reasoning = el("details", { class: "tn-reasoning" },
            el("summary", null, how ? how[2] : "The judge's reasoning"),
            ui.markdown(d.reasoning || "", "tn-reasoning-text"));
          if (!how) reasoning.open = true;
          b.state.replaceChildren(
            el("div", { class: "tn-verdict" }, ui.badge(`#${d.winnerSeed} advances`, "green"),
              how ? ui.badge(how[0], how[1]) : null,
              d.responseTimeMs != null ? el("span", { class: "muted" }, ui.fmtMs(d.responseTimeMs)) : null),
            reasoning);
          ctx.announce(`${roundName(data.round)}: seed ${d.winnerSeed} beat seed ${d.loserSeed}`);
          break;
        }
        case "round_complete":
          ctx.progress(`${roundName(data.round)} done`);
          break;
        case "winner_declared": {
          bracketSection.done();
          const champ = el("div", { class: "tn-match tn-champion-box" },
            el("div", { class: "tn-slots" }, el("div", { class: "tn-slot tn-win" },
              el("span", { class: "tn-seed" }, `#${d.seed}`), " ", el("span", { class: "tn-model" }, d.model || ""))));
          const col = el("div", { class: "tn-round tn-champion-col", role: "listitem" }, el("h3", { class: "tn-round-title" }, "Champion"), el("div", { class: "tn-matches" }, champ));
          grid.append(col);
          const p = ctx.primary("Champion's answer");
          p.el.classList.add("tn-final");
          const path = (d.bracketPath || []).map((s) => el("li", null,
            s.result === "bye" ? `${roundName(s.round)}: bye` : `${roundName(s.round)}: beat #${s.opponentSeed} ${s.opponentModel || ""}`));
          p.body.replaceChildren(
            el("div", { class: "tn-meta" }, ui.badge(`Seed ${d.seed} · ${d.model}`, "green"),
              ui.badge(`won ${ui.plural(d.matchesWon ?? 0, "match", "matches")} in ${ui.plural(d.totalRounds ?? 0, "round")}`, "blue"),
              data.partial ? ui.badge("some calls failed", "yellow") : null),
            ui.markdown(d.response || "", "tn-answer"),
            el("h3", null, "Path to the title"), el("ol", { class: "tn-path" }, path));
          ctx.announce(`Champion: seed ${d.seed}, ${d.model}`);
          break;
        }
        default: break;
      }
    },

    /** A stored run without recorded events: its stored result, as if its events came. */
    finish(detail) {
      if (seen || !detail || !detail.result) return;
      const r = detail.result;
      view.event("tournament_start", {});
      if (r.contestants) view.event("collect_complete", { data: r.contestants });
      if (r.bracket) view.event("bracket_seeded", { data: r.bracket });
      for (const round of r.rounds || []) {
        for (const m of round.matches || []) view.event("matchup_complete", { round: round.round, matchIndex: m.matchIndex, data: m });
      }
      if (r.champion) view.event("winner_declared", { data: r.champion, partial: r.partial });
    },
  };
  return view;
}
