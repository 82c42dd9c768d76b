// The controller's REST API (docs/controller.md): every call carries the
// token from sessionStorage as "Authorization: Bearer"; errors come back
// as ApiError with the API's status, code and message.

const TOKEN_KEY = 'lightpath.token';

export function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

// ApiError is a refused or failed call. status is 0 when the controller
// could not be reached; detail is the body's "error" object (field,
// alternatives, stranded).
export class ApiError extends Error {
  constructor(status, code, message, detail = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

let unauthorized = () => {};

// onUnauthorized sets what happens when any call is answered 401.
export function onUnauthorized(fn) {
  unauthorized = fn;
}

// api calls METHOD path (relative to the page, so "api/v1/..."), sending
// body as JSON when given, and returns the decoded answer.
export async function api(method, path, body, { token = getToken() } = {}) {
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'network', `cannot reach the controller (${e.message})`);
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      if (res.ok) throw new ApiError(res.status, 'bad_response', `${method} ${path}: the answer is not JSON`);
    }
  }
  if (!res.ok) {
    const detail = (data && data.error) || {};
    const message = detail.message || `${res.status} ${res.statusText}`.trim();
    const err = new ApiError(res.status, detail.code || `http_${res.status}`, message, detail);
    if (res.status === 401) unauthorized(err);
    throw err;
  }
  return data;
}

// errorText is one line for a failed call, naming the HTTP status.
export function errorText(err) {
  if (err instanceof ApiError) {
    if (err.status === 0) return err.message;
    return `${err.message} (${err.status} ${err.code})`;
  }
  return String(err && err.message ? err.message : err);
}

// newKey is an idempotency key: a retried create with it books once.
export function newKey() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return `web-${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}
