// Chart.js with the page's palette. Every chart sits in a `.chart-box` with role="img" and a
// text label that says what it shows, so a screen reader gets the figures too.
import { el } from "./ui.js";

export const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];
export const VERDICT = { APPROVE: "#2e9d5b", REVISE: "#e0a100", REJECT: "#d64541" };

function css(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

export function color(i, alpha = 1) {
  const hex = PALETTE[i % PALETTE.length];
  if (alpha === 1) return hex;
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

/**
 * Draws a chart into a new `.chart-box`; `label` is the accessible description.
 * Returns the box (the Chart instance is on `box.chart`). Without Chart.js it returns the box
 * holding only the description, so the page still says what the chart would show.
 */
export function chart(config, { label, small = false } = {}) {
  const box = el("div", { class: "chart-box" + (small ? " small" : ""), role: "img", "aria-label": label || "chart" });
  if (!window.Chart) {
    box.append(el("p", { class: "muted" }, label || ""));
    box.style.height = "auto";
    return box;
  }
  const canvas = el("canvas");
  box.append(canvas);
  const text = css("--text") || "#222";
  const grid = css("--border") || "#ddd";
  const opts = config.options || (config.options = {});
  opts.responsive = true;
  opts.maintainAspectRatio = false;
  opts.animation = false;
  opts.plugins = opts.plugins || {};
  const legend = opts.plugins.legend || {};
  opts.plugins.legend = { ...legend, labels: { color: text, ...(legend.labels || {}) } };
  if (opts.scales) {
    for (const s of Object.values(opts.scales)) {
      s.ticks = { color: text, ...(s.ticks || {}) };
      if (s.type === "radialLinear" || config.type === "radar") {
        s.grid = { color: grid, ...(s.grid || {}) };
        s.angleLines = { color: grid, ...(s.angleLines || {}) };
        s.pointLabels = { color: text, ...(s.pointLabels || {}) };
        s.ticks = { backdropColor: "transparent", ...s.ticks };
      } else {
        s.grid = { color: grid, ...(s.grid || {}) };
      }
    }
  }
  // The canvas needs a laid-out box: create the chart once the box is in the document.
  const make = () => {
    if (box.chart || !box.isConnected) return false;
    box.chart = new window.Chart(canvas, config);
    return true;
  };
  queueMicrotask(() => { if (!make()) requestAnimationFrame(() => { if (!make()) setTimeout(make, 50); }); });
  return box;
}
