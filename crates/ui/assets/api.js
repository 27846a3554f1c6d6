// The server's API, read with the token the viewer was given (kept for the
// tab's life in sessionStorage, sent as a bearer token; never in a URL).

const KEY = "callai.token";

export const token = {
  get: () => sessionStorage.getItem(KEY) || "",
  set: (t) => (t ? sessionStorage.setItem(KEY, t) : sessionStorage.removeItem(KEY)),
};

/** A refusal or failure of the API, with its message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** GET `path` (with `query`'s non-empty entries) as JSON. */
export async function get(path, query = {}) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== "" && v !== false) params.set(k, String(v));
  }
  const url = params.size ? `${path}?${params}` : path;
  const headers = { accept: "application/json" };
  if (token.get()) headers.authorization = `Bearer ${token.get()}`;
  let answer;
  try {
    answer = await fetch(url, { headers });
  } catch (e) {
    throw new ApiError(0, `the server did not answer (${e.message})`);
  }
  const body = await answer.json().catch(() => null);
  if (!answer.ok) {
    const message = body?.error?.message || `${answer.status} ${answer.statusText}`;
    if (answer.status === 401) {
      throw new ApiError(401, `${message}. Give the admin's or a tenant's token above.`);
    }
    throw new ApiError(answer.status, message);
  }
  return body;
}

/** `method path` with `body` as JSON (the admin's changes); the JSON answer. */
export async function send(method, path, body) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (token.get()) headers.authorization = `Bearer ${token.get()}`;
  let answer;
  try {
    answer = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, `the server did not answer (${e.message})`);
  }
  const json = await answer.json().catch(() => null);
  if (!answer.ok) throw new ApiError(answer.status, json?.error?.message || `${answer.status} ${answer.statusText}`);
  return json;
}
