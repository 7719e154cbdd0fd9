// The labelled lines of a mode's reply format, shown for people (static/js/ui.js). Pure: no
// browser needed; the rendered result is checked in every mode's page by words.test.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { formatLabelledLines as format, structuredMarkdown } from "../../static/js/ui.js";

const BADGE = "\u2063";

test("labels run together on one line become fields in plain words", () => {
  const out = format("ESTIMATE: ~63200 CONFIDENCE: LOW REASONING: Because of the census.");
  assert.match(out, /^\*\*Estimate:\*\* ~63200$/m);
  assert.match(out, new RegExp(`^\\*\\*Confidence:\\*\\* ${BADGE}badge:gray:low${BADGE}$`, "m"));
  assert.match(out, /^\*\*Reasoning:\*\* Because of the census\.$/m);
  assert.doesNotMatch(out, /ESTIMATE|CONFIDENCE|REASONING/);
});

test("a decision and a verdict become badges; other values stay text", () => {
  const out = format("DECISION: REVISE\nREASONING: B was better.\nVERDICT: **Approve**\nVOTE: Response A");
  assert.ok(out.includes(`**Decision:** ${BADGE}badge:yellow:revise${BADGE}`));
  assert.ok(out.includes(`**Verdict:** ${BADGE}badge:green:approve${BADGE}`));
  assert.ok(out.includes("**Vote:** Response A"), out);
  // Each field is its own paragraph: markdown would otherwise join the lines.
  assert.match(out, /revise\u2063\n\n/);
});

test("a value outside the label's choices is not made a badge", () => {
  const out = format("DECISION: maybe later");
  assert.ok(out.includes("**Decision:** maybe later"));
  assert.ok(!out.includes(BADGE));
});

test("prose, code, short capitals and labels mid-sentence are left as written", () => {
  for (const text of [
    "Plain text.\nSecond line.",
    "NASA: founded in 1958.",
    "My ANSWER: 42 is final",
    "```\nESTIMATE: 3\n```",
    "    ESTIMATE: indented code",
    "- ESTIMATE: in a list item",
  ]) {
    assert.equal(format(text), text, text);
  }
});

test("a heading label keeps what follows under it", () => {
  const out = format("FINAL RANKING:\n1. Response C\n2. Response A");
  assert.match(out, /\*\*Final ranking:\*\*\n\n1\. Response C\n2\. Response A$/);
});

test("a structured reply reads as its fields in plain words, lists numbered, choices as badges", () => {
  const out = structuredMarkdown(
    '{"reasoning": "C explains why", "ranking": ["Response C", "Response A"], "verdict": "REVISE", "ok": true}',
  );
  assert.match(out, /^\*\*Reasoning:\*\* C explains why$/m);
  assert.match(out, /^\*\*Ranking:\*\*\n\n1\. Response C\n2\. Response A$/m);
  assert.ok(out.includes(`**Verdict:** ${BADGE}badge:yellow:revise${BADGE}`), out);
  assert.match(out, /^\*\*Ok:\*\* yes$/m);
  assert.doesNotMatch(out, /[{}"]/, "no JSON punctuation reaches a person");
  // Nested objects, in a fence.
  const nested = structuredMarkdown('```json\n{"claims": [{"claimText": "Paris is in France", "type": "place"}]}\n```');
  assert.match(nested, /Claim text:\*\* Paris is in France/);
  // Anything else is not structured.
  for (const text of ["plain", '{"broken', "[1, 2]", "Here: {\"a\": 1}"]) assert.equal(structuredMarkdown(text), null, text);
});
