// The viewer's pages, one per `#/NAME[/ID]` of the address; each reads the
// API and replaces the content of <main>.

import { token, ApiError } from "./api.js";
import { h } from "./dom.js";
import { callsPage, callPage } from "./calls.js";
import { runsPage, runPage } from "./runs.js";
import { tenantsPage } from "./tenants.js";
import { providersPage } from "./providers.js";
import { keysPage } from "./keys.js";

const pages = {
  calls: (id, params) => (id ? callPage(id) : callsPage(params)),
  runs: (id, params) => (id ? runPage(id, params) : runsPage(params)),
  tenants: () => tenantsPage(),
  providers: (_, params) => providersPage(params),
  keys: () => keysPage(),
};

let shown = 0;

/** How often an open list reads the API again by itself. */
const REFRESH_MS = 5000;

async function show(refresh = false) {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const params = new URLSearchParams(query || "");
  const [name, ...rest] = path.split("/");
  const page = pages[name] ? name : "calls";
  const id = rest.length ? decodeURIComponent(rest.join("/")) : null;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.title = `callai · ${page}${id ? ` · ${id}` : ""}`;
  const main = document.getElementById("main");
  const mine = ++shown;
  let content;
  try {
    content = await pages[page](id, params);
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    content = h("p", { class: "error", role: "alert" }, e.message);
  }
  if (mine !== shown) return; // a later navigation won
  main.replaceChildren(content);
  if (!refresh && document.activeElement === document.body) main.focus({ preventScroll: true });
}

// A list refreshes by itself while it is open: the newest calls and runs
// (not an older page, which does not change), the tenants' budgets and the
// providers. Not while the tab is hidden, nor while a filter is being
// typed (the form would be replaced under the cursor).
setInterval(() => {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const [, ...rest] = path.split("/");
  const older = new URLSearchParams(query || "").has("before");
  const typing = document.activeElement?.closest?.("main form");
  if (document.hidden || rest.length || older || typing) return;
  show(true);
}, REFRESH_MS);

document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const input = document.getElementById("token");
  token.set(input.value.trim());
  input.value = "";
  show();
});
document.getElementById("forget").addEventListener("click", () => {
  token.set("");
  show();
});
window.addEventListener("hashchange", show);
show();
