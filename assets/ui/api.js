// The JSON API under /api: requests, errors, and the token sign-in (`--token-env`): on a
// 401 the page asks for the token once and trades it at POST /api/session for an
// HttpOnly cookie, so the token never travels in a URL and scripts never keep it.

/** An API error: the HTTP status and the `{"error": {"code", "message"}}` body. */
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

let signingIn = null;

/** Shows the sign-in dialog; resolves once the server has set the session cookie. */
export function signIn() {
  if (signingIn) return signingIn;
  signingIn = new Promise((resolve) => {
    const dialog = document.getElementById('login');
    const form = document.getElementById('login-form');
    const input = document.getElementById('login-token');
    const error = document.getElementById('login-error');
    const submit = async (event) => {
      event.preventDefault();
      error.hidden = true;
      const res = await fetch('/api/session', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token: input.value }),
      });
      if (res.ok) {
        input.value = '';
        form.removeEventListener('submit', submit);
        dialog.close();
        signingIn = null;
        resolve();
      } else {
        const body = await res.json().catch(() => null);
        error.textContent = body?.error?.message ?? `the server answered ${res.status}`;
        error.hidden = false;
        input.select();
      }
    };
    form.addEventListener('submit', submit);
    dialog.addEventListener('cancel', (event) => event.preventDefault());
    dialog.showModal();
    input.focus();
  });
  return signingIn;
}

async function send(path, options, parse) {
  for (;;) {
    const headers = { Accept: parse === 'json' ? 'application/json' : '*/*' };
    if (options.body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(path, {
      method: options.method ?? 'GET',
      credentials: 'same-origin',
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    if (res.status === 401) {
      await signIn();
      continue;
    }
    const text = await res.text();
    let body = text;
    if (parse === 'json' || !res.ok) {
      try { body = text ? JSON.parse(text) : null; } catch { body = text; }
    }
    if (!res.ok) {
      const err = body && typeof body === 'object' ? body.error : null;
      throw new ApiError(res.status, err?.code ?? `http_${res.status}`,
        err?.message ?? `${path}: the server answered ${res.status}`, body);
    }
    return body;
  }
}

/** GET (or `options.method`) `path`, the answer's JSON. */
export function api(path, options = {}) {
  return send(path, options, 'json');
}

/** GET `path`, the answer as text (DOT). */
export function apiText(path) {
  return send(path, {}, 'text');
}

/** `encodeURIComponent`, for a run id or a workflow name in a path. */
export const enc = encodeURIComponent;
