// Building the page: elements from text only (never HTML from data, which
// comes from strangers' traffic), and the formats every page shares.

/** An element: `attrs` set as attributes (`on*` as listeners), children
 * appended, strings as text nodes. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** An SVG element, as `h` makes HTML ones. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  append(el, children);
  return el;
}

/** A bar `width` wide (a CSS length). Set through the CSSOM: the content
 * security policy allows no style attribute. */
export function bar(cls, width) {
  const el = h("div", { class: cls });
  el.style.width = width;
  return el;
}

/** A table of `rows`, with `columns` of `[heading, cell(row), numeric?]`. */
export function table(columns, rows, caption) {
  return h("div", { class: "scroll" },
    h("table", {},
      caption ? h("caption", { class: "sr-only" }, caption) : null,
      h("thead", {}, h("tr", {}, columns.map(([name, , num]) =>
        h("th", { scope: "col", class: num ? "num" : null }, name)))),
      h("tbody", {}, rows.map((row) => h("tr", {}, columns.map(([, cell, num]) =>
        h("td", { class: num ? "num" : null }, cell(row))))))));
}

/** A description list of `[term, value]` pairs (null ones left out). */
export const factList = (facts) => h("dl", { class: "facts" },
  facts.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));

/** The plain sentence a page shows when it has nothing to show. */
export const empty = (text) => h("p", { class: "empty", role: "status" }, text);

/**
 * An amount as the exact decimal the host wrote (`0.0025023`): the host's
 * amounts have nine decimals at most, so `toFixed(9)` lands on their
 * digits, and trailing zeros go.
 */
export function decimal(amount) {
  return Number(amount).toFixed(9).replace(/\.?0+$/, "");
}

/** Amounts summed in billionths (whole numbers add exactly), as an amount. */
export const sum = (amounts) =>
  amounts.reduce((a, x) => a + Math.round(Number(x) * 1e9), 0) / 1e9;

/** An amount of money: `0.0025023 USD`; `—` for none; `≥` when incomplete. */
export function money(cost) {
  if (!cost) return "—";
  return `${cost.complete === false ? "≥ " : ""}${decimal(cost.amount)} ${cost.currency}`;
}

/** [`money`] in a cell: an incomplete amount says on hover why it is a
 * floor. */
export function moneyCell(cost) {
  if (!cost || cost.complete !== false) return money(cost);
  return h("span", {
    class: "floor",
    title: "At least this: a request reported no usage (a timeout, a reset, a reply cut short) " +
      "and is priced at its worst case, or a request had no price",
  }, money(cost));
}

export const ms = (n) => (n >= 1000 ? `${(n / 1000).toFixed(2)} s` : `${n} ms`);

export const num = (n) => (n === undefined || n === null ? "—" : n.toLocaleString("en"));

/** An RFC 3339 time or epoch milliseconds, as local time. */
export function time(t) {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toLocaleString("en-GB", { hour12: false });
}

/** A link to a page of the viewer. */
export const link = (hash, text) => h("a", { href: `#/${hash}` }, text);
