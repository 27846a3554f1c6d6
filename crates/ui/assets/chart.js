// A stacked bar chart per minute, drawn as SVG by hand: the viewer loads
// nothing from elsewhere, and one small chart needs no library.

import { h, svg } from "./dom.js";

const MINUTE = 60_000;
const W = 720;
const H = 180;
const PAD = { left: 48, right: 8, top: 10, bottom: 22 };

/** `points` (`{minuteMs, key, value}`) over `minutes` minutes from
 * `sinceMs`, stacked by key, each key coloured by the class `classOf(key)`.
 * The chart's label says what it shows; a legend names the keys. */
export function minuteChart({ sinceMs, minutes, points, label, classOf, format = String }) {
  const keys = [...new Set(points.map((p) => p.key))].sort();
  const stacks = new Map();
  for (const p of points) {
    const slot = Math.floor((p.minuteMs - sinceMs) / MINUTE);
    const stack = stacks.get(slot) || new Map();
    stack.set(p.key, (stack.get(p.key) || 0) + p.value);
    stacks.set(slot, stack);
  }
  const top = Math.max(0, ...[...stacks.values()].map((s) => [...s.values()].reduce((a, b) => a + b, 0)));
  const width = (W - PAD.left - PAD.right) / minutes;
  const height = H - PAD.top - PAD.bottom;
  const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label },
    svg("text", { x: 4, y: PAD.top + 8 }, format(top)),
    svg("text", { x: 4, y: H - PAD.bottom }, format(0)),
    svg("text", { x: PAD.left, y: H - 6 }, `${minutes} min ago`),
    svg("text", { x: W - PAD.right - 24, y: H - 6 }, "now"),
    svg("line", { x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom, stroke: "#d8dce5" }));
  for (const [slot, stack] of stacks) {
    let y = H - PAD.bottom;
    for (const key of keys) {
      const value = stack.get(key) || 0;
      if (!value || !top) continue;
      const tall = Math.max(1, (value / top) * height);
      y -= tall;
      chart.append(svg("rect", {
        x: PAD.left + slot * width + 0.5, y, width: Math.max(1, width - 1), height: tall, class: classOf(key),
      }, svg("title", {}, `${key}: ${format(value)}`)));
    }
  }
  const legend = h("div", { class: "legend" }, keys.map((k) =>
    h("span", {}, h("span", { class: `swatch ${classOf(k)}` }), k)));
  return h("figure", {}, chart, legend);
}
