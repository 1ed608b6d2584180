// Small DOM helpers: elements are built with text content only, never from HTML strings,
// so nothing a run or a document holds is ever parsed as markup.

/**
 * Creates an element: `h('a', {href: '/'}, 'Runs')`. Attributes whose value is null,
 * undefined or false are left out; `class`, `for` and `on*` handlers are supported.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (value === true) {
      el.setAttribute(key, '');
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

/** Appends children (strings, numbers, nodes, arrays of them; null skipped). */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A status badge. */
export function badge(status) {
  return h('span', { class: `status status-${status}` }, status);
}

/** Milliseconds since the epoch as a local date and time. */
export function when(ms) {
  if (!ms) return '';
  return new Date(ms).toLocaleString();
}

/** A duration in milliseconds as text (`850 ms`, `12.4 s`, `3 min 5 s`). */
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const min = Math.floor(ms / 60000);
  return `${min} min ${Math.round((ms % 60000) / 1000)} s`;
}

/** A value as readable JSON. */
export function json(value) {
  return h('pre', { class: 'json' }, JSON.stringify(value, null, 2));
}

/** A section with a heading (`id` names it for links and tests). */
export function section(id, title, ...children) {
  return h('section', { id, 'aria-labelledby': `${id}-title` },
    h('h2', { id: `${id}-title` }, title), ...children);
}

/** An error message in the page. */
export function problem(error) {
  return h('p', { class: 'error', role: 'alert' }, String(error && error.message ? error.message : error));
}
