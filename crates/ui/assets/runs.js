// Runs: the pack runs of the kept calls, any run by its id, and one run
// with its calls and events.

import { get, ApiError } from "./api.js";
import { h, factList, table, empty, moneyCell, num, sum, time, link } from "./dom.js";
import { callTable } from "./calls.js";

/** The recent runs (those with calls still kept), and a form to open any. */
export async function runsPage() {
  const form = h("form", { class: "filters", "aria-label": "Open a run" },
    h("label", {}, "Run id", h("input", { name: "run", size: 30, required: true })),
    h("button", { type: "submit" }, "Open"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const id = new FormData(form).get("run").trim();
    if (id) location.hash = `#/runs/${encodeURIComponent(id)}`;
  });
  const calls = await get("/v1/calls", { endpoint: "run", limit: 500 });
  // A run is its tenant's: two tenants may each have a run of one id.
  const runs = new Map();
  for (const c of calls.data) {
    const key = JSON.stringify([c.tenant, c.runId]);
    const run = runs.get(key) || { id: c.runId, tenant: c.tenant, last: c.createdAt, calls: [], attempts: 0 };
    run.calls.push(c);
    run.attempts += c.attempts.count;
    runs.set(key, run);
  }
  for (const run of runs.values()) Object.assign(run, totals(run.calls));
  return h("section", {},
    h("h1", {}, "Runs"),
    form,
    runs.size
      ? table([
        ["Run", (r) => link(runHref(r.id, r.tenant), r.id)],
        ["Tenant", (r) => r.tenant],
        ["Last call", (r) => time(r.last)],
        ["Calls", (r) => num(r.calls.length), true],
        ["Attempts", (r) => num(r.attempts), true],
        ["Tool steps", (r) => num(r.toolSteps), true],
        ["Cost", (r) => moneyCell(r.cost), true],
      ], [...runs.values()], "Recent runs")
      : empty("No pack run has made a call yet. Start one with POST /v1/runs; its calls show here."));
}

/** What calls of a run cost, summed in their currency (`≥` when one was
 * incomplete or had no price; none when none was priced or they were in
 * two currencies), and how many were tool steps: answered with tool
 * calls for the pack to run. */
function totals(calls) {
  const priced = calls.filter((c) => c.cost);
  const currency = priced[0]?.cost.currency;
  const one = priced.every((c) => c.cost.currency === currency);
  const cost = priced.length && one
    ? {
      amount: sum(priced.map((c) => c.cost.amount)),
      currency,
      complete: priced.length === calls.length && priced.every((c) => c.cost.complete !== false),
    }
    : null;
  const toolSteps = calls.filter((c) => c.requests.at(-1)?.outcome === "tool-call").length;
  return { cost, toolSteps };
}

/** The viewer's address of run `id` of `tenant` (the admin names whose). */
function runHref(id, tenant) {
  return `runs/${encodeURIComponent(id)}?${new URLSearchParams({ tenant })}`;
}

/** One run (of the tenant `?tenant=` names, else the caller's own): where
 * it stands, its calls, its events. */
export async function runPage(id, params) {
  const tenant = params?.get("tenant") || undefined;
  const path = `/v1/runs/${encodeURIComponent(id)}`;
  const [run, calls, events] = await Promise.all([
    get(path, { tenant }),
    get("/v1/calls", { run: id, tenant, limit: 500 }),
    get(`${path}/events`, { tenant })
      .catch((e) => (e instanceof ApiError ? { events: [], error: e.message } : Promise.reject(e))),
  ]);
  const facts = [
    ["Status", h("span", { class: run.status === "failed" ? "error" : run.status === "ok" ? "ok" : null }, run.status)],
    ["Calls", num(run.calls)],
    ["Provider requests", num(run.attempts?.count)],
    ["Output tokens", num(run.attempts?.outputTokens)],
    ["Tool steps", num(totals(calls.data).toolSteps)],
    ["Cost", moneyCell(totals(calls.data).cost)],
    run.error ? ["Error", h("span", { class: "error" }, run.error.message || JSON.stringify(run.error))] : null,
  ];
  return h("section", {},
    h("p", {}, link("runs", "← Runs")),
    h("h1", {}, `Run ${run.runId}`, tenant ? ` of ${tenant}` : ""),
    factList(facts),
    h("h2", {}, "Calls"),
    calls.data.length ? callTable(calls.data) : empty("This run has made no call this host still keeps."),
    h("h2", {}, "Events"),
    events.error ? h("p", { class: "error" }, events.error)
      : events.events.length
        ? table([
          ["#", (e) => e.sequence, true],
          ["Time", (e) => time(e.timestamp)],
          ["Event", (e) => e.type],
          ["Node", (e) => e.nodeId ?? "—"],
          ["Detail", (e) => summary(e.payload)],
        ], events.events, "Events in order")
        : empty("No events yet."));
}

/** A payload's fields but the node id, briefly. */
function summary(payload) {
  if (!payload) return "";
  const text = Object.entries(payload)
    .filter(([k]) => k !== "nodeId")
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
    .join(" ");
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}
