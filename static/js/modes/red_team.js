// Red Team: the structured material, then per round the attacker's findings (severity badges,
// location, vulnerability and exploit behind a toggle) and the defender's verdicts with the
// revised content, then the hardened output as the main answer with the severity counts chart
// (accepted, rebutted, unaddressed per severity) and the audit table of every finding.

const LEVELS = ["CRITICAL", "HIGH", "MEDIUM", "LOW"];
const SEVERITY_COLORS = { CRITICAL: "red", HIGH: "red", MEDIUM: "yellow", LOW: "blue" };
const VERDICT_COLORS = { ACCEPT: "green", REBUT: "yellow", UNADDRESSED: "gray" };
const CONFIDENCE_COLORS = { High: "green", Medium: "yellow", Low: "red" };

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("red_team");
  const gen = ctx.section("generate", "Structure");
  const rounds = {}; // round -> {attack, defense}
  let total = 0;
  let seen = false;

  const attackSection = (r) => ctx.section(`attack_round_${r}`, `Round ${r} · Attack`);
  const defendSection = (r) => ctx.section(`defend_round_${r}`, `Round ${r} · Defense`);
  // The level in words (the badge's style shows it in capitals), coloured by level.
  const sevBadge = (s, extra) => ui.badge(String(s).toLowerCase() + (extra || ""), SEVERITY_COLORS[s] || "gray", "severity");

  function findingsList(findings) {
    return el("ol", { class: "rt-findings" }, findings.map((f) => el("li", { class: "rt-finding" },
      el("div", { class: "rt-finding-head" },
        sevBadge(f.severity, f.severityDefaulted ? " (assumed)" : ""),
        el("strong", null, f.title || `Finding ${f.number}`),
        f.location ? el("span", { class: "muted rt-location" }, ` · ${f.location}`) : null),
      f.vulnerability || f.exploitScenario
        ? el("details", null, el("summary", null, "Details"),
          f.vulnerability ? el("div", null, el("h4", null, "Vulnerability"), ui.markdown(f.vulnerability)) : null,
          f.exploitScenario ? el("div", null, el("h4", null, "Exploit scenario"), ui.markdown(f.exploitScenario)) : null)
        : null)));
  }

  function counts(c) {
    return el("p", { class: "rt-counts" }, LEVELS.map((l) => sevBadge(l, `: ${(c || {})[l] ?? 0}`)));
  }

  function showAttack(r, a) {
    const s = attackSection(r);
    const card = a.model ? s.claim(a.model) : null;
    const nodes = [];
    if (a.failed) nodes.push(el("div", { class: "callout rt-failed" }, "The attacker's call failed: the rounds end here and the synthesis follows."));
    else if (a.noFlaws) nodes.push(el("div", { class: "callout rt-noflaws" }, "The attacker found no flaws (FINDINGS: NONE): the rounds end here."));
    else if (!a.parseSuccess) nodes.push(el("div", { class: "callout rt-unparsed" }, "No finding could be read from the report; the defender was given the report as written.", a.unparsed ? ` ${ui.unparsedWhy(a.unparsed)}` : ""));
    if ((a.findings || []).length) {
      nodes.push(counts(a.severityCounts), findingsList(a.findings));
    }
    if (a.overallRisk) nodes.push(el("p", { class: "rt-risk" }, el("strong", null, "Overall risk (attacker's words): "), a.overallRisk));
    if (card) card.addBadge(a.failed ? ui.badge("failed", "red") : ui.badge(ui.plural((a.findings || []).length, "finding"), a.noFlaws ? "green" : "blue"));
    place(s, card, a, "attacker", nodes);
  }

  function showDefense(r, d) {
    const s = defendSection(r);
    const card = d.model ? s.claim(d.model) : null;
    const rows = (d.responses || []).map((x) => [
      String(x.finding), x.title || "", sevBadge(x.severity),
      ui.badge(x.verdict + (x.verdictDefaulted ? " (assumed)" : ""), VERDICT_COLORS[x.verdict] || "gray"),
      x.reasoning ? ui.markdown(x.reasoning) : "",
      x.revision ? ui.markdown(x.revision) : el("span", { class: "muted" }, "—"),
    ]);
    const nodes = [
      el("p", { class: "rt-verdicts" }, `${d.accepted ?? 0} accepted, ${d.rebutted ?? 0} rebutted, ${d.unaddressed ?? 0} unaddressed.`),
    ];
    if (d.failed) nodes.unshift(el("div", { class: "callout rt-failed" }, "The defender's call failed: the content carries forward and the findings stay unaddressed."));
    if (rows.length) nodes.push(el("div", { class: "table-wrap" }, ui.table(["#", "Finding", "Severity", "Verdict", "Reasoning", "Revision"], rows, { stack: true })));
    nodes.push(el("details", { class: "rt-revised" },
      el("summary", null, d.revisedContentFound ? "Revised content" : "Content carried forward (no revised content given)"),
      ui.markdown(d.revisedContent || "")));
    place(s, card, d, "defender", nodes);
  }

  /** A step's findings or verdicts go in its model's card, or under the section when the call failed. */
  function place(s, card, d, role, nodes) {
    if (card) card.setRole(role);
    if (card && !d.failed) {
      card.setState("ok", { ms: d.responseTimeMs });
      card.setBody(el("div", null, ...nodes));
    } else {
      s.body.replaceChildren(...nodes);
    }
    s.done();
  }

  /** Stacked bars: per severity, how many findings were accepted, rebutted, unaddressed. */
  function severityChart() {
    const by = (v) => LEVELS.map((l) => Object.values(rounds).flatMap((x) => responsesOf(x)).filter((f) => f.severity === l && f.verdict === v).length);
    const data = { ACCEPT: by("ACCEPT"), REBUT: by("REBUT"), UNADDRESSED: by("UNADDRESSED") };
    const label = `Findings by severity, bar chart. ${LEVELS.map((l, i) => `${l}: ${data.ACCEPT[i]} accepted, ${data.REBUT[i]} rebutted, ${data.UNADDRESSED[i]} unaddressed`).join("; ")}.`;
    const box = ctx.chart({
      type: "bar",
      data: {
        labels: LEVELS,
        datasets: [
          { label: "Accepted", data: data.ACCEPT, backgroundColor: "#2e9d5b" },
          { label: "Rebutted", data: data.REBUT, backgroundColor: "#e0a100" },
          { label: "Unaddressed", data: data.UNADDRESSED, backgroundColor: "#8a8f98" },
        ],
      },
      options: {
        indexAxis: "y",
        plugins: { legend: { position: "bottom" } },
        scales: { x: { stacked: true, beginAtZero: true, ticks: { precision: 0, stepSize: 1 } }, y: { stacked: true, grid: { display: false } } },
      },
    }, { label, small: true });
    box.classList.add("rt-severity-chart");
    return box;
  }

  /** A round's findings with their verdicts (UNADDRESSED when no defense came). */
  function responsesOf(x) {
    if (x.defense && x.defense.responses) return x.defense.responses;
    return ((x.attack && x.attack.findings) || []).map((f) => ({ finding: f.number, title: f.title, severity: f.severity, verdict: "UNADDRESSED" }));
  }

  function auditTable() {
    const rows = Object.keys(rounds).sort((a, b) => a - b).flatMap((r) => responsesOf(rounds[r]).map((f) => [
      f.title || `Finding ${f.finding}`, sevBadge(f.severity), ui.badge(f.verdict, VERDICT_COLORS[f.verdict] || "gray"), String(r),
    ]));
    if (!rows.length) return el("p", { class: "muted" }, "No findings.");
    return el("div", { class: "table-wrap" }, ui.table(["Finding", "Severity", "Verdict", "Round"], rows, { caption: "Audit of every finding" }));
  }

  const view = {
    event(name, data) {
      seen = true;
      const d = data.data || {};
      switch (name) {
        case "redteam_start": total = data.totalRounds || 0; ctx.progress("Structuring the material"); break;
        case "generate_start": gen.running(); break;
        case "generate_complete": {
          const card = d.model ? gen.claim(d.model) : null;
          if (card) {
            card.setRole("generator");
            if (d.fallback) card.addBadge(ui.badge("failed: the raw material is used", "yellow"));
            else card.setState("ok", { ms: d.responseTimeMs });
            card.setText(d.structuredContent || "");
          }
          gen.done();
          break;
        }
        case "attack_start":
          attackSection(data.round).running();
          ctx.progress(`Round ${data.round} of ${total}: attacking`);
          break;
        case "attack_complete":
          rounds[data.round] = { attack: d, defense: null };
          showAttack(data.round, d);
          ctx.announce(`Round ${data.round}: ${ui.plural((d.findings || []).length, "finding")}`);
          break;
        case "defend_start":
          defendSection(data.round).running();
          ctx.progress(`Round ${data.round} of ${total}: defending`);
          break;
        case "defend_complete":
          if (rounds[data.round]) rounds[data.round].defense = d;
          showDefense(data.round, d);
          break;
        case "synthesize_start": ctx.progress("Hardening"); break;
        case "synthesize_complete": {
          const p = ctx.primary("Hardened output");
          p.el.classList.add("rt-hardened");
          const t = d.totals || {};
          const conf = d.hardeningConfidence;
          const meta = el("div", { class: "rt-meta" },
            ui.badge(conf ? `Hardening confidence: ${conf}` : "Hardening confidence not stated", CONFIDENCE_COLORS[conf] || "gray"),
            ui.badge(`${ui.plural(t.findings ?? 0, "finding")}: ${t.accepted ?? 0} accepted, ${t.rebutted ?? 0} rebutted, ${t.unaddressed ?? 0} unaddressed`, "blue"),
            d.stopReason ? ui.badge(`rounds stopped: ${d.stopReason}`, "gray") : null,
            d.fallbackFrom ? ui.badge(`backup for ${d.fallbackFrom}`, "yellow") : null,
            el("span", { class: "muted" }, `by ${d.model || "?"}`));
          const audit = el("section", { class: "rt-audit" }, el("h3", null, "Vulnerability audit"), severityChart(), auditTable(),
            d.auditSummary ? el("details", { class: "rt-audit-summary" }, el("summary", null, "The synthesizer's audit summary"), ui.markdown(d.auditSummary)) : null);
          p.body.replaceChildren(meta, ui.markdown(d.hardenedOutput || "", "rt-output"), audit);
          ctx.announce(`Hardened: ${conf ? `confidence ${conf}` : "confidence not stated"}`);
          break;
        }
        default: break;
      }
    },

    /** A stored run without recorded events: render its stored result as if its events came. */
    finish(detail) {
      if (seen || !detail || !detail.result) return;
      const r = detail.result;
      if (r.generate) view.event("generate_complete", { data: r.generate });
      for (const x of r.rounds || []) {
        view.event("attack_complete", { round: x.round, data: x.attack });
        if (x.defense) view.event("defend_complete", { round: x.round, data: x.defense });
      }
      if (r.synthesis) view.event("synthesize_complete", { data: r.synthesis });
    },
  };
  return view;
}
