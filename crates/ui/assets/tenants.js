// Tenants: each budget's use in its window and what is left, and spend
// per minute over the last hour.

import { get } from "./api.js";
import { h, table, empty, num, money, time, decimal, sum } from "./dom.js";
import { minuteChart } from "./chart.js";

const KEYS = [
  ["requests", "Requests"], ["outputTokens", "Output tokens"], ["inputTokens", "Input tokens"], ["cost", "Cost"],
];

export async function tenantsPage() {
  const [tenants, usage] = await Promise.all([get("/v1/tenants"), get("/v1/usage", { minutes: 60 })]);
  return h("section", {},
    h("h1", {}, "Tenants"),
    tenants.data.map(budget),
    h("h2", {}, "Spend, last hour"),
    spend(usage));
}

/** One tenant's budget: each limited key's use as a meter. */
function budget({ tenant, budget: b }) {
  const heading = h("h2", {}, tenant);
  if (!b) return [heading, empty(`${tenant} has no budget: its calls are not limited.`)];
  const limited = KEYS.filter(([k]) => b.limits[k] !== null && b.limits[k] !== undefined);
  const resets = b.windowEndMs ? `; resets ${time(b.windowEndMs)}` : "";
  // Money reads in its currency; the other keys are counts.
  const amount = (k, n) =>
    k === "cost" && n !== null && n !== undefined ? money({ amount: n, currency: b.currency }) : num(n);
  return [
    heading,
    h("p", {}, `Window: ${b.window}, from ${time(b.windowStartMs)}${resets}.`),
    table([
      ["Limit", ([, name]) => name],
      ["Allowed", ([k]) => amount(k, b.limits[k]), true],
      ["Spent", ([k]) => amount(k, b.spent[k]), true],
      ["Reserved", ([k]) => amount(k, b.reserved[k]), true],
      ["Left", ([k]) => amount(k, b.remaining[k]), true],
      ["Used", ([k]) => meter(b.spent[k] + b.reserved[k], b.limits[k])],
    ], limited, `${tenant}'s budget`),
  ];
}

function meter(used, limit) {
  const share = limit ? Math.min(1, used / limit) : 0;
  const fill = h("span", {});
  fill.style.width = `${Math.round(share * 100)}%`;
  return h("span", {
    class: "meter", role: "meter", "aria-valuemin": 0, "aria-valuemax": limit, "aria-valuenow": used,
    "aria-label": `${Math.round(share * 100)}% used`,
  }, fill);
}

/** Spend per minute, stacked by tenant, one chart per currency. */
function spend(usage) {
  if (!usage.spend.length) {
    return empty("No priced call in the last hour. Give providers prices ([providers.NAME.prices] or [pricing] file) to see spend.");
  }
  const tenants = [...new Set(usage.spend.map((s) => s.tenant))].sort();
  const classOf = (t) => `series-${tenants.indexOf(t) % 4}`;
  const currencies = [...new Set(usage.spend.map((s) => s.currency))].sort();
  return currencies.map((currency) => {
    const rows = usage.spend.filter((s) => s.currency === currency);
    const totals = tenants.map((t) => ({
      tenant: t,
      amount: sum(rows.filter((s) => s.tenant === t).map((s) => s.amount)),
      complete: rows.filter((s) => s.tenant === t).every((s) => s.complete),
    })).filter((t) => t.amount > 0 || rows.some((s) => s.tenant === t.tenant));
    return [
      minuteChart({
        sinceMs: usage.sinceMs, minutes: usage.minutes, classOf,
        label: `Spend in ${currency} per minute over the last ${usage.minutes} minutes, by tenant`,
        points: rows.map((s) => ({ minuteMs: s.minuteMs, key: s.tenant, value: s.amount })),
        format: decimal,
      }),
      table([
        ["Tenant", (t) => t.tenant],
        [`Spent (${currency})`, (t) => `${t.complete ? "" : "≥ "}${decimal(t.amount)}`, true],
      ], totals, `Spend in ${currency} by tenant`),
    ];
  });
}
