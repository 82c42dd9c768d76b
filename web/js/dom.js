// Small DOM helpers: the UI builds its elements with h() rather than
// innerHTML, so nothing the API returns is ever parsed as markup.

import { formatTime, formatWindow, utc } from './units.js';

// h creates an element: attrs sets properties (className, hidden, onclick…)
// or, for names with a dash or "for"/"role", attributes; children are
// nodes or strings, and null or false are skipped.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.includes('-') || k === 'for' || k === 'role') el.setAttribute(k, v === true ? '' : String(v));
    else el[k] = v;
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// timeEl shows an instant in local time, with its UTC ISO string as title.
export function timeEl(t) {
  return h('time', { dateTime: utc(t), title: utc(t) }, formatTime(t));
}

// windowEl shows a [start, end) window in local time; the title gives both
// ends in UTC.
export function windowEl(start, end) {
  return h('span', { className: 'window', title: `${utc(start)} – ${utc(end)}` },
    h('time', { dateTime: utc(start) }, formatWindow(start, end)));
}

// pathText writes a path of hops as "a1 → ra → rb → b1 (a1-ra, dedicated, b1-rb)".
export function pathText(path) {
  if (!path || path.length === 0) return '';
  const nodes = [path[0].from, ...path.map((hop) => hop.to)];
  return `${nodes.join(' → ')} (${path.map((hop) => hop.link).join(', ')})`;
}

// show sets a message element's text and kind (error, ok, info), or hides it.
export function show(el, text, kind = 'info') {
  el.hidden = !text;
  el.textContent = text || '';
  el.dataset.kind = kind;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

// s creates an SVG element: every attribute is set with setAttribute
// (SVG has few reflected properties), dataset works as in h(), and
// children are nodes or strings.
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'className') el.setAttribute('class', v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}
