// Calls: the list (with the filters of GET /v1/calls), and one call as a
// timeline of its attempts.

import { get } from "./api.js";
import { h, factList, bar, table, empty, money, moneyCell, ms, num, time, link } from "./dom.js";

const FILTERS = ["tenant", "provider", "model", "endpoint", "run", "outcome", "since"];
const ENDPOINTS = ["", "call", "chat_completions", "embeddings", "messages", "responses", "run"];

/** The form of the list's filters, filled from `params`; submitting it
 * puts them in the address, so a filtered list can be linked to. */
export function filterForm(page, params, fields) {
  const form = h("form", { class: "filters", "aria-label": "Filters" });
  for (const name of fields) {
    const value = params.get(name) || "";
    const input = name === "endpoint"
      ? h("select", { name }, ENDPOINTS.map((e) => h("option", { value: e, selected: e === value }, e || "any")))
      : h("input", { name, value, size: 14, placeholder: name === "since" ? "2026-12-02T10:00:00Z" : "" });
    form.append(h("label", {}, name, input));
  }
  if (fields.includes("outcome")) {
    form.append(h("label", { class: "check" },
      h("input", { type: "checkbox", name: "retried", checked: params.get("retried") === "true" }),
      "more than one attempt"));
  }
  const byId = page === "calls" ? h("input", { name: "id", size: 14, placeholder: "call_…" }) : null;
  if (byId) form.append(h("label", {}, "call id", byId));
  form.append(h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    // A call id opens that call, whatever the filters say.
    if (byId && byId.value.trim()) {
      location.hash = `#/calls/${encodeURIComponent(byId.value.trim())}`;
      return;
    }
    const chosen = new URLSearchParams();
    for (const [k, v] of new FormData(form)) {
      if (v && k !== "id") chosen.set(k, k === "retried" ? "true" : String(v));
    }
    location.hash = `#/${page}${chosen.size ? `?${chosen}` : ""}`;
  });
  return form;
}

/** The list of calls `params` filters, newest first, a page at a time. */
export async function callsPage(params) {
  const query = { limit: 50, before: params.get("before"), retried: params.get("retried") };
  for (const f of FILTERS) query[f] = params.get(f);
  const page = await get("/v1/calls", query);
  const parts = [h("h1", {}, "Calls"), filterForm("calls", params, FILTERS)];
  if (!page.data.length) {
    const filtered = [...params.keys()].length > 0;
    parts.push(empty(filtered
      ? "No call matches these filters."
      : "No calls yet. Calls made through /v1/call, the OpenAI and Anthropic endpoints and pack runs show here as they end."));
  } else {
    parts.push(callTable(page.data), csvLink(page.data));
  }
  if (page.next) {
    const older = new URLSearchParams(params);
    older.set("before", page.next);
    parts.push(h("p", {}, h("a", { href: `#/calls?${older}` }, "Older calls →")));
  }
  return h("section", {}, parts);
}

/** A table of call traces. */
export function callTable(calls) {
  return table([
    ["Started", (c) => time(c.createdAt)],
    ["Call", (c) => link(`calls/${encodeURIComponent(c.id)}`, c.id)],
    ["Tenant", (c) => c.tenant],
    ["Endpoint", (c) => c.endpoint],
    ["Model", (c) => model(c)],
    ["Outcome", (c) => outcome(c)],
    ["Attempts", (c) => num(c.attempts.count), true],
    ["Output tokens", (c) => num(c.attempts.outputTokens), true],
    ["Cost", (c) => moneyCell(c.cost), true],
    ["Duration", (c) => ms(c.durationMs), true],
  ], calls, "Calls, newest first");
}

/** The model a call asked for and, beside it when they differ, the
 * provider and model that answered (its last attempt's). */
function model(call) {
  const last = call.requests.at(-1);
  const answered = last ? `${last.provider}/${last.model}` : null;
  const asked = call.route;
  if (asked && answered && !answered.endsWith(`/${asked}`)) return `${asked} → ${answered}`;
  return answered || asked || "—";
}

/** The calls shown, as a CSV file to download: one row per call. */
function csvLink(calls) {
  const cell = (v) => {
    const text = v === undefined || v === null ? "" : String(v);
    return /[",\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
  };
  const header = ["id", "createdAt", "tenant", "endpoint", "route", "provider", "model", "outcome",
    "attempts", "outputTokens", "cost", "currency", "costComplete", "durationMs"];
  const rows = calls.map((c) => {
    const last = c.requests.at(-1) || {};
    return [c.id, c.createdAt, c.tenant, c.endpoint, c.route, last.provider, last.model, c.outcome,
      c.attempts.count, c.attempts.outputTokens, c.cost?.amount, c.cost?.currency,
      c.cost ? c.cost.complete !== false : "", c.durationMs].map(cell).join(",");
  });
  // A data: URL rather than a blob: one, which would have to be revoked
  // when the page is left; a page of 50 calls is a few kilobytes.
  const text = [header.join(","), ...rows].join("\r\n") + "\r\n";
  const href = `data:text/csv;charset=utf-8,${encodeURIComponent(text)}`;
  return h("p", {}, h("a", { href, download: "calls.csv", class: "csv" }, "Export these calls (CSV)"));
}

/** A call's outcome; a failure's message on hover. */
function outcome(call) {
  const title = call.error ? call.error.message : null;
  return h("span", { class: call.outcome === "ok" ? "ok" : "error", title }, call.outcome);
}

/** What a failed call's error said, and what it named. */
function errorText(error) {
  const named = [
    error.field ? `field ${error.field}` : null,
    error.provider ? `provider ${error.provider}` : null,
  ].filter(Boolean);
  return `${error.message}${named.length ? ` (${named.join(", ")})` : ""}`;
}

/** One call: what it was, then each attempt in order as a bar. */
export async function callPage(id) {
  const call = await get(`/v1/calls/${encodeURIComponent(id)}`);
  const a = call.attempts;
  const facts = [
    ["Outcome", outcome(call)],
    call.error ? ["Error", h("span", { class: "error" }, errorText(call.error))] : null,
    ["Tenant", call.tenant],
    ["Endpoint", call.endpoint],
    call.runId
      ? ["Run", link(`runs/${encodeURIComponent(call.runId)}?${new URLSearchParams({ tenant: call.tenant })}`, call.runId)]
      : null,
    ["Node", call.nodeId],
    call.route ? ["Model name", call.route] : null,
    call.cache === "miss" ? ["Response cache", "miss: the call ran, and its answer is kept for repeats"] : null,
    call.cache === "hit"
      ? ["Response cache", call.cachedFrom
        ? h("span", {}, "hit: the answer of ", link(`calls/${encodeURIComponent(call.cachedFrom)}`, call.cachedFrom), ", no request, no charge")
        : "hit: no request, no charge"]
      : null,
    ["Started", time(call.createdAt)],
    ["Duration", ms(call.durationMs)],
    ["Attempts", `${a.count} request${a.count === 1 ? "" : "s"}, ${num(a.outputTokens)} output tokens` +
      `${a.usageComplete ? "" : " (usage incomplete)"}${a.structuredOutput ? `, ${a.structuredOutput} structured output` : ""}`],
    ["Cost", moneyCell(call.cost)],
    call.prompt ? ["Prompt", kept(call.prompt, "prompt")] : null,
  ];
  return h("section", {},
    h("p", {}, link("calls", "← Calls")),
    h("h1", {}, `Call ${call.id}`),
    factList(facts),
    h("h2", {}, "Attempts"),
    call.requests.length ? timeline(call.requests) : empty("This call sent no request to a provider."));
}

/** Each request as a bar of its latency, and one of its token limit, to
 * the call's longest: a doubled budget shows as a longer grey bar. */
function timeline(requests) {
  const slowest = Math.max(1, ...requests.map((r) => r.latencyMs));
  const largest = Math.max(1, ...requests.map((r) => r.maxTokens));
  const pct = (n, of) => `${Math.max(1, Math.round((100 * n) / of))}%`;
  return h("ol", { class: "timeline", "aria-label": "Attempts in order" }, requests.map((r) =>
    h("li", { class: "attempt", "data-reason": r.reason },
      h("div", { class: "head" },
        h("span", {}, `#${r.n}`),
        h("span", { class: "reason" }, r.reason),
        h("span", {}, `${r.provider} · ${r.model}`),
        h("span", { class: r.outcome === "error" ? "error" : null },
          `${r.outcome}${r.status ? ` (HTTP ${r.status})` : ""}`),
        h("span", { class: "cost" }, money(r.cost))),
      h("div", { class: "bar-track", title: `latency ${ms(r.latencyMs)}` },
        bar(`bar reason-${r.reason}`, pct(r.latencyMs, slowest))),
      h("div", { class: "bar-track", title: `token limit ${r.maxTokens}` },
        bar("bar limit", pct(r.maxTokens, largest))),
      h("div", { class: "legend" },
        h("span", {}, `latency ${ms(r.latencyMs)}`),
        h("span", {}, `token limit ${num(r.maxTokens)}`),
        h("span", {}, `input ${num(r.inputTokens)}`),
        h("span", { title: "of the input, read from the provider's prompt cache" },
          `cache read ${num(r.cachedInputTokens)}`),
        r.cacheWriteInputTokens === undefined ? null
          : h("span", { title: "of the input, written to the provider's prompt cache" },
            `cache write ${num(r.cacheWriteInputTokens)}`),
        h("span", {}, `output ${num(r.outputTokens)}`)),
      r.answer ? h("div", { class: "answer" }, kept(r.answer, "answer")) : null)));
}

/** A prompt or an answer as the trace keeps it: its text, folded, when
 * `[runlog] keepText` is on; else its hash, and why there is no text. */
function kept(text, what) {
  const sha = h("code", { title: `SHA-256 of the ${what}` }, text.sha256.slice(0, 16));
  if (text.text === undefined) {
    return h("span", {}, sha, ` (the ${what}'s text is not kept: [runlog] keepText)`);
  }
  return h("details", {},
    h("summary", {}, `${what} `, sha, text.cut ? " (cut at 64 KiB)" : ""),
    h("pre", { class: "kept-text" }, text.text));
}
