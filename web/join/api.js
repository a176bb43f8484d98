// The API of control (same origin, `/api/*`, JSON): one request helper whose failures carry
// the HTTP status and control's error code, so that callers can tell "retry" from "give up".

export class HttpError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(path, options = {}) {
  const response = await fetch(`/api${path}`, {
    ...options,
    headers: { Accept: 'application/json', ...(options.body ? { 'Content-Type': 'application/json' } : {}) },
  });
  const body = response.status === 204 ? {} : await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new HttpError(response.status, body.error ?? `${response.status} ${response.statusText}`, body.code);
  }
  return body;
}

/** A GET that answers null on 404: a route this control does not have (yet). */
export const optional = (path) =>
  api(path).catch((error) => {
    if (error instanceof HttpError && error.status === 404) return null;
    throw error;
  });
