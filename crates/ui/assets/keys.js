// API keys (the admin's): every key with its state, limits, spend in their
// windows and when it was last used; a form that makes one (its secret
// shown once, kept in this tab's memory only until dismissed); revoke.

import { get, send, ApiError } from "./api.js";
import { h, table, empty, time } from "./dom.js";

const KEYS = ["requests", "inputTokens", "outputTokens", "cost"];

/** The secret of the key made last, until the admin dismisses it. */
let made = null;

export async function keysPage() {
  const keys = await get("/v1/keys");
  return h("section", {},
    h("h1", {}, "API keys"),
    made ? secret(made) : null,
    createForm(),
    keys.data.length
      ? table([
        ["Name", (k) => k.name],
        ["Id", (k) => h("code", {}, k.id)],
        ["Tenant", (k) => k.tenant],
        ["Status", (k) => k.status],
        ["Limits and spend", (k) => spend(k)],
        ["Last used", (k) => (k.lastUsedAt ? time(k.lastUsedAt) : "never")],
        ["Created", (k) => time(k.createdAt)],
        ["", (k) => (k.status === "active" ? revokeButton(k) : null)],
      ], keys.data, "API keys")
      : empty("No API key yet: make one above, or with `callai keys create`."));
}

/** Each limit of `key` as `spent of limit per window`. */
function spend(key) {
  if (!key.limits.length) return "its tenant's only";
  return key.limits.map((limit, i) => {
    const shown = key.spend[i];
    return KEYS.filter((k) => limit[k] !== undefined).map((k) => {
      const spent = shown ? (shown.spent[k] ?? 0) + (shown.reserved[k] ?? 0) : "?";
      return h("div", {}, `${k} ${spent} of ${limit[k]} per ${limit.per}`);
    });
  });
}

function secret(key) {
  return h("div", { class: "notice", role: "status" },
    h("p", {}, `Key ${key.name} (${key.id}) for ${key.tenant}. Copy its secret now: it is not shown again.`),
    h("p", {}, h("code", { class: "secret" }, key.key)),
    h("button", { type: "button", onclick: () => { made = null; rerender(); } }, "Done"));
}

/** `KEY=AMOUNT/PER, …` (as `callai keys create --limit`) as limits. */
function limits(text) {
  return text.split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
    const m = /^(requests|inputTokens|outputTokens|cost)=([0-9.]+)\/(1m|1h|1d|30d|none)$/.exec(s);
    if (!m) throw new ApiError(400, `limits: "${s}" is not KEY=AMOUNT/PER, as requests=600/1m or cost=5/1d`);
    return { [m[1]]: Number(m[2]), per: m[3] };
  });
}

function createForm() {
  const field = (id, label, placeholder) => h("label", {}, label,
    h("input", { id, name: id, placeholder, autocomplete: "off" }));
  const status = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "make-key", "aria-label": "Make a key" },
    h("h2", {}, "Make a key"),
    field("key-name", "Name", "ci"),
    field("key-tenant", "Tenant", "team"),
    field("key-limits", "Limits", "requests=600/1m, cost=5/1d"),
    h("button", { type: "submit" }, "Make"),
    status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const value = (id) => form.querySelector(`#${id}`).value.trim();
    try {
      made = await send("POST", "/v1/keys", {
        name: value("key-name"), tenant: value("key-tenant"), limits: limits(value("key-limits")),
      });
      document.activeElement?.blur?.();
      rerender();
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      status.textContent = err.message;
    }
  });
  return form;
}

function revokeButton(key) {
  return h("button", {
    type: "button", class: "revoke", "data-key": key.id,
    onclick: async () => {
      await send("DELETE", `/v1/keys/${encodeURIComponent(key.id)}`);
      rerender();
    },
  }, `Revoke ${key.name}`);
}

/** Shows the page again, as a refresh does. */
function rerender() {
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}
