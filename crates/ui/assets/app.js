// The viewer's pages, one per `#/NAME[/ID]` of the address; each reads the
// API and replaces the content of <main>.

import { token, ApiError } from "./api.js";
import { h } from "./dom.js";
import { callsPage, callPage } from "./calls.js";
import { runsPage, runPage } from "./runs.js";
import { tenantsPage } from "./tenants.js";
import { providersPage } from "./providers.js";

const pages = {
  calls: (id, params) => (id ? callPage(id) : callsPage(params)),
  runs: (id, params) => (id ? runPage(id, params) : runsPage(params)),
  tenants: () => tenantsPage(),
  providers: (_, params) => providersPage(params),
};

let shown = 0;

async function show() {
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
  if (document.activeElement === document.body) main.focus({ preventScroll: true });
}

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
