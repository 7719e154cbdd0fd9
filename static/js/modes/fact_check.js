// Fact-Check: the reliability report as the main answer (score, verdict counts as a chart,
// every claim with each checker's verdict and the consensus), then the content checked, the
// claims as extracted, and each checker's card. A claim the checkers split on says so: its
// consensus (decided by the server's tie rule) is shown next to every checker's own verdict.

const VERDICT_COLORS = { VERIFIED: "green", DISPUTED: "red", UNVERIFIABLE: "gray" };
const VERDICT_WORDS = { VERIFIED: "Verified", DISPUTED: "Disputed", UNVERIFIABLE: "Unverifiable" };
const TYPE_WORDS = { STATISTIC: "statistic", DATE: "date", ATTRIBUTION: "attribution", TECHNICAL: "technical", COMPARISON: "comparison", CAUSAL: "cause" };
const TYPE_NOUNS = { STATISTIC: ["statistic"], DATE: ["date"], ATTRIBUTION: ["attribution"], TECHNICAL: ["technical claim"], COMPARISON: ["comparison"], CAUSAL: ["causal claim"] };
const CONF_WORDS = { HIGH: "high", MEDIUM: "medium", LOW: "low" };

function band(score) {
  if (score == null) return null;
  if (score >= 90) return ["highly reliable", "green"];
  if (score >= 70) return ["mostly reliable", "green"];
  if (score >= 50) return ["mixed", "yellow"];
  if (score >= 30) return ["many errors", "red"];
  return ["unreliable", "red"];
}

export function createView(ctx) {
  const { el, ui } = ctx;
  ui.ensureStylesheet("fact_check");
  const generate = ctx.section("generate", "The answer checked");
  const extract = ctx.section("extract", "Claims");
  const verify = ctx.section("verify", "Independent checks", { tabs: true });
  const report = ctx.section("report", "Report");
  let seen = false;
  let claims = [];
  let checks = [];
  let checkerModels = [];
  let claimCount = 0;
  let checkerCount = 0;
  let arrived = 0;

  const verdictBadge = (v, extra) => ui.badge(`${VERDICT_WORDS[v] || v}${extra || ""}`, VERDICT_COLORS[v] || "gray");

  function showCheck(c) {
    const card = c.model ? verify.claim(c.model) : null;
    if (!card) return;
    card.setRole(`checker ${c.checkerIndex + 1}`);
    if (c.failed) return;
    card.setState("ok", { ms: c.responseTimeMs });
    const s = c.summary || {};
    if (!c.parseSuccess) card.addBadge(ui.badge("no verdict could be read", "gray"));
    else card.addBadge(ui.badge(`${s.verified ?? 0} verified · ${s.disputed ?? 0} disputed · ${s.unverifiable ?? 0} unverifiable`, "blue"));
    // A list rather than a table: evidence is prose, and a narrow column breaks it mid-word.
    const items = (c.verifications || []).map((v) => {
      const claim = claims.find((x) => x.id === v.claimId);
      return el("li", { class: "fc-check" },
        el("div", { class: "fc-claim-head" },
          el("span", null, claim ? `Claim ${claim.number}` : "A claim"),
          v.addressed ? verdictBadge(v.verdict) : el("span", { class: "muted" }, "not addressed"),
          v.addressed ? el("span", { class: "muted" }, `${CONF_WORDS[v.confidence] || v.confidence} confidence${v.confidenceStated ? "" : " (not stated)"}`) : null),
        v.evidence ? ui.markdown(v.evidence) : (v.addressed ? el("p", { class: "muted" }, "No evidence given.") : null),
        v.correction ? el("p", { class: "fc-correction" }, el("strong", null, "Correction: "), document.createTextNode(v.correction)) : null);
    });
    const nodes = [];
    if (!c.parseSuccess) nodes.push(el("div", { class: "callout" }, "This checker's reply named no verdict for any claim, so it does not count towards the consensus."));
    nodes.push(el("ul", { class: "fc-checks" }, ...items));
    card.setBody(el("div", null, ...nodes));
  }

  function countsChart(counts) {
    const data = [counts.verified || 0, counts.disputed || 0, counts.unverifiable || 0];
    const box = ctx.chart({
      type: "bar",
      data: { labels: ["Verified", "Disputed", "Unverifiable"], datasets: [{ label: "Claims", data, backgroundColor: ["#2e7d32", "#c62828", "#757575"] }] },
      options: { indexAxis: "y", plugins: { legend: { display: false } }, scales: { x: { beginAtZero: true, ticks: { stepSize: 1 } }, y: { grid: { display: false } } } },
    }, { label: `Consensus verdicts: ${data[0]} verified, ${data[1]} disputed, ${data[2]} unverifiable.`, small: true });
    box.classList.add("fc-chart");
    return box;
  }

  function claimList(consensus) {
    const usable = checks.filter((c) => c.parseSuccess);
    return el("ol", { class: "fc-claims" }, claims.map((claim) => {
      const k = (consensus || []).find((x) => x.claimId === claim.id);
      // A tie is shown as the split it is: no side is presented as the checkers' verdict; the
      // server's tie rule is named beside it, as what the counts used.
      const tie = k && k.tieRule;
      const head = el("div", { class: "fc-claim-head" },
        tie ? ui.badge("Split: no majority", "yellow") : (k ? verdictBadge(k.verdict) : null),
        tie ? el("span", { class: "muted" }, `counted as ${(VERDICT_WORDS[k.verdict] || k.verdict).toLowerCase()} by the tie rule`) : null,
        k && k.split && !tie ? ui.badge("not unanimous", "yellow") : null,
        k ? el("span", { class: "muted" }, `${k.agreementRate}% agree · ${CONF_WORDS[k.consensusConfidence] || k.consensusConfidence} confidence`) : null,
        claim.type ? el("span", { class: "muted" }, ` · ${TYPE_WORDS[claim.type] || claim.type}`) : null);
      const text = el("p", { class: "fc-claim-text" });
      text.textContent = claim.text;
      const per = el("ul", { class: "fc-votes" }, usable.map((c) => {
        const v = (c.verifications || []).find((x) => x.claimId === claim.id);
        const li = el("li", null, el("span", { class: "fc-checker" }, c.model), " ",
          v && v.addressed ? verdictBadge(v.verdict) : el("span", { class: "muted" }, "did not address it"));
        return li;
      }));
      const corr = k && k.correction ? el("p", { class: "fc-correction" }, el("strong", null, "Correction: "), document.createTextNode(k.correction)) : null;
      return el("li", { class: `fc-claim fc-${tie ? "split" : (k && k.verdict || "none").toLowerCase()}` }, head, text, corr, per);
    }));
  }

  const view = {
    callSection(call) { return ["generate", "extract", "verify", "report"].includes(call.stage) ? call.stage : null; },
    event(name, data) {
      seen = true;
      const d = data.data || {};
      switch (name) {
        case "factcheck_start": {
          const c = data.config || {};
          checkerModels = c.checkerModels || [];
          if (c.biasWarning) verify.lead.replaceChildren(el("p", { class: "callout" }, "The model that wrote the answer is also one of its checkers, so its checks may favour its own answer."));
          break;
        }
        case "generate_start": generate.running(); ctx.progress("Writing the answer to check"); break;
        case "generate_complete": {
          const card = d.model ? generate.claim(d.model) : null;
          if (card) { card.setRole("generator"); card.setState("ok", { ms: d.responseTimeMs }); card.setText(d.content || ""); }
          generate.done();
          break;
        }
        case "extract_start": extract.running(); ctx.progress("Finding the checkable claims"); break;
        case "extract_complete": {
          claims = d.claims || [];
          const card = d.model ? extract.claim(d.model) : null;
          if (card) {
            card.setRole("extractor");
            card.setState("ok", { ms: d.responseTimeMs });
            if (d.fallbackFrom) card.addBadge(ui.badge(`backup for ${d.fallbackFrom}`, "yellow"));
            card.setText(claims.length ? ui.plural(claims.length, "claim") + " found." : "No claims found.");
          }
          // "2 statistics", not "STATISTIC: 2" (a badge is set in capitals: a colon would read as
          // the extractor's format).
          const types = Object.entries(d.typeBreakdown || {}).map(([t, n]) => ui.badge(ui.plural(n, ...(TYPE_NOUNS[t] || ["untyped claim"])), "gray"));
          extract.lead.replaceChildren(el("div", { class: "fc-types" }, ...types,
            d.truncated ? ui.badge("the content was cut to fit", "yellow") : null));
          // Claims the extractor listed that the content does not state: shown, never checked.
          const aside = d.notInContent || [];
          extract.body.replaceChildren(el("ol", { class: "fc-extracted" }, claims.map((c) => {
            const li = el("li");
            li.textContent = c.text;
            return li;
          })));
          if (aside.length) {
            extract.body.append(el("div", { class: "fc-aside" },
              el("p", { class: "muted" }, `Set aside, not checked: ${ui.plural(aside.length, "claim")} the content does not state.`),
              el("ul", { class: "muted" }, aside.map((t) => el("li", { text: t })))));
          }
          extract.show();
          extract.done();
          break;
        }
        case "verify_start":
          claimCount = d.claimCount || 0;
          checkerCount = d.checkerCount || checkerModels.length;
          verify.running();
          ctx.progress(`${checkerCount} checkers judging ${ui.plural(claimCount, "claim")}`);
          break;
        case "checker_complete":
          arrived += 1;
          checks = checks.filter((c) => c.checkerIndex !== d.checkerIndex).concat([d]);
          showCheck(d);
          ctx.progress(`${arrived} of ${checkerCount} checks in`);
          ctx.announce(`Check ${arrived} of ${checkerCount} in`);
          break;
        case "all_checkers_complete": {
          verify.done();
          const counts = d.counts || {};
          verify.body.replaceChildren(el("p", { class: "muted" },
            `${d.usableCheckers} of ${checkerCount || checks.length} checkers gave usable verdicts. The consensus is the majority verdict; ties go to Disputed, or Verified over Unverifiable.`));
          view._consensus = d.consensus || [];
          view._counts = counts;
          break;
        }
        case "report_start": report.running(); ctx.progress("Writing the reliability report"); break;
        case "report_complete": {
          const card = d.model ? report.claim(d.model) : null;
          if (card) {
            card.setRole("reporter");
            card.setState("ok", { ms: d.responseTimeMs });
            if (d.fallbackFrom) card.addBadge(ui.badge(`backup for ${d.fallbackFrom}`, "yellow"));
            card.setText("The report is shown at the top of the page.");
          }
          report.done();
          const p = ctx.primary("Fact-check");
          p.el.classList.add("fc-report");
          const score = d.reliabilityScore;
          const b = band(score);
          const counts = view._counts || { verified: 0, disputed: 0, unverifiable: 0 };
          const head = el("div", { class: "fc-score" },
            el("span", { class: "big-number" }, score == null ? "—" : String(score)),
            el("span", { class: "muted" }, score == null ? " no reliability score" : " / 100 reliability"),
            b ? ui.badge(b[0], b[1]) : null,
            d.fallback ? ui.badge("the reporter failed: the server's summary", "yellow") : null,
            data.partial ? ui.badge("some checks failed", "yellow") : null);
          const nodes = [head];
          if (d.summary && d.summary.note) nodes.push(el("p", { class: "callout" }, d.summary.note));
          if (claims.length && view._consensus) {
            nodes.push(el("div", { class: "fc-overview" }, countsChart(counts),
              el("p", { class: "muted" }, `${ui.plural(counts.total || claims.length, "claim")}; the checkers split on ${counts.split || 0}.`)));
            nodes.push(el("h3", null, "Claim by claim"), claimList(view._consensus));
          }
          nodes.push(el("h3", null, d.fallback || !claims.length ? "Summary" : "The reporter's analysis"), ui.markdown(d.report || "", "fc-output"));
          p.body.replaceChildren(...nodes);
          ctx.announce("The fact-check report is ready");
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
      if (r.extract) view.event("extract_complete", { data: r.extract });
      if (r.checks && r.checks.length) view.event("verify_start", { data: { claimCount: (r.claims || []).length, checkerCount: r.checks.length } });
      for (const c of r.checks || []) view.event("checker_complete", { data: c });
      if (r.consensus) view.event("all_checkers_complete", { data: { consensus: r.consensus, counts: r.counts, usableCheckers: r.usableCheckers } });
      if (r.report) view.event("report_complete", { data: r.report, partial: r.partial, failedModels: r.failedModels });
    },
  };
  return view;
}
