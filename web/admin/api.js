// The admin API of control (same origin, `/api/admin/*`, bearer token), with what the UI needs
// around it: the token for this browser session, and who to tell when the server cannot be
// reached, answers again, or refuses the token.

const TOKEN_KEY = 'partyline.adminToken';
/** A request that takes longer is given up and counts as "unreachable". */
const TIMEOUT_MS = 8_000;

/** An error answer of the API: `{"error","code"}` and the HTTP status. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The server did not answer (network down, control stopped, timeout). */
export class Unreachable extends Error {}

const listeners = { reachable: () => {}, unreachable: () => {}, unauthorized: () => {} };

/** `on.reachable()`, `on.unreachable(error)`, `on.unauthorized()`: set by the app. */
export function on(events) {
  Object.assign(listeners, events);
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/**
 * One request to `/api/admin{path}`; resolves with the JSON body of a 2xx answer (its text
 * with `text: true`: a CSV). Throws `ApiError` for an error answer (401 also tells
 * `on.unauthorized`), `Unreachable` when there is no answer. `bearer` overrides the stored
 * token (the login form tries one).
 */
export async function api(method, path, body, { bearer = token.get(), text: asText = false } = {}) {
  const headers = { Accept: 'application/json' };
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(`/api/admin${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (error) {
    listeners.unreachable(error);
    throw new Unreachable(
      `The server does not answer (${error.name === 'TimeoutError' ? 'timeout' : 'network error'}).`,
    );
  }
  // A proxy in front of control answering for it does not count as control answering.
  if (response.status === 502 || response.status === 504) {
    listeners.unreachable(new Error(`HTTP ${response.status}`));
    throw new Unreachable(`The server does not answer (HTTP ${response.status} from a proxy).`);
  }
  listeners.reachable();
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: reported below
  }
  if (!response.ok) {
    const error = new ApiError(
      response.status,
      json?.code ?? 'http_error',
      json?.error ?? `HTTP ${response.status} ${response.statusText}`.trim(),
    );
    if (response.status === 401 && bearer === token.get()) listeners.unauthorized(error);
    throw error;
  }
  return asText ? text : json;
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body);
export const put = (path, body) => api('PUT', path, body);
export const del = (path) => api('DELETE', path);

/** A path segment (ids are slugs, identities are opaque). */
export const seg = (value) => encodeURIComponent(value);
