// Providers: requests per minute by reason over the last hour, and the
// totals per provider and reason.

import { get } from "./api.js";
import { h, table, empty, num } from "./dom.js";
import { minuteChart } from "./chart.js";

export async function providersPage() {
  const usage = await get("/v1/usage", { minutes: 60 });
  const parts = [h("h1", {}, "Providers")];
  if (!usage.requests.length) {
    parts.push(empty("No provider request in the last hour."));
    return h("section", {}, parts);
  }
  const providers = [...new Set(usage.requests.map((r) => r.provider))].sort();
  for (const provider of providers) {
    const rows = usage.requests.filter((r) => r.provider === provider);
    const reasons = [...new Set(rows.map((r) => r.reason))].sort();
    parts.push(
      h("h2", {}, provider),
      minuteChart({
        sinceMs: usage.sinceMs, minutes: usage.minutes,
        label: `Requests to ${provider} per minute over the last ${usage.minutes} minutes, by reason`,
        points: rows.map((r) => ({ minuteMs: r.minuteMs, key: r.reason, value: r.count })),
        classOf: (reason) => `reason-${reason}`,
      }),
      table([
        ["Reason", (reason) => reason],
        ["Requests", (reason) => num(rows.filter((r) => r.reason === reason).reduce((a, r) => a + r.count, 0)), true],
      ], reasons, `Requests to ${provider} by reason`));
  }
  return h("section", {}, parts);
}
