// Providers: each target's health (its circuit breaker, its failures),
// then requests per minute by reason over the last hour, and the totals
// per provider and reason.

import { get } from "./api.js";
import { h, table, empty, num, ms } from "./dom.js";
import { minuteChart } from "./chart.js";

/** A target's state in words: a failing one says so. */
function state(t) {
  if (t.state === "open") {
    return h("span", { class: "error" }, `failing: tried after the other targets for ${ms(t.retryInMs)}`);
  }
  if (t.state === "half_open") {
    return h("span", { class: "error" }, "failing: the next call tries it again");
  }
  if (t.consecutiveFailures > 0) {
    return h("span", { class: "error" }, `answering, ${num(t.consecutiveFailures)} failed in a row`);
  }
  return h("span", { class: "ok" }, "answering");
}

/** The targets' health, failing ones first. */
function health(targets) {
  const failing = (t) => (t.state === "closed" ? 0 : 1);
  const sorted = [...targets].sort((a, b) => failing(b) - failing(a));
  return table([
    ["Target", (t) => `${t.provider}/${t.model}`],
    ["State", state],
    ["Requests", (t) => num(t.requests), true],
    ["Unavailable", (t) => h("span", { class: t.unavailable ? "error" : null }, num(t.unavailable)), true],
    ["Last failure", (t) => t.lastError || "—"],
  ], sorted, "Each target's health");
}

/** A line for each provider some of whose requests found it unavailable
 * since the host started (whether or not a run log keeps usage). */
function failing(targets) {
  const providers = [...new Set(targets.map((t) => t.provider))].sort();
  return providers.map((provider) => {
    const mine = targets.filter((t) => t.provider === provider);
    const sent = mine.reduce((a, t) => a + t.requests, 0);
    const lost = mine.reduce((a, t) => a + t.unavailable, 0);
    return lost
      ? h("p", { class: "error" },
        `Failing: ${provider}: ${num(lost)} of ${num(sent)} requests unavailable since the host started.`)
      : null;
  }).filter(Boolean);
}

export async function providersPage() {
  const [usage, targets] = await Promise.all([
    get("/v1/usage", { minutes: 60 }),
    get("/v1/targets"),
  ]);
  const parts = [h("h1", {}, "Providers")];
  if (targets.data.length) {
    parts.push(h("h2", {}, "Health"), health(targets.data), ...failing(targets.data));
  }
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
