// The reservation form: from, to, bandwidth, start and duration; "Find
// earliest slot" asks POST /api/v1/find (mode earliest) and fills the start;
// "Reserve" books with POST /api/v1/reservations, and on a capacity refusal
// offers the alternatives the controller sent, each bookable with a click.

import { api, ApiError, errorText, newKey } from './api.js';
import { h, pathText, windowEl } from './dom.js';
import {
  formatDuration, formatRate, fromLocalInput, goDuration, parseDuration, parseRate, toLocalInput, UnitError,
} from './units.js';

// A start this close to now (or past it) is sent as "now": by the time a
// person clicks, a slot found "now" is a few seconds in the past.
const NOW_SLACK_MS = 5000;

// API request fields and the form controls that hold them.
const FIELD_INPUT = {
  from: 'from', to: 'to', bandwidth_bps: 'bandwidth', start: 'start', end: 'duration',
  duration: 'duration', project: 'project', flow_spec: 'flow-spec',
};

export class ReserveForm {
  constructor({ form, onBooked }) {
    this.form = form;
    this.onBooked = onBooked;
    this.el = (id) => form.querySelector(`#${id}`);
    this.result = this.el('form-result');
    this.pending = null; // {body, key}: a create to retry with the same key
    this.el('find-earliest').addEventListener('click', () => this.findEarliest());
    this.el('start-now').addEventListener('click', () => {
      this.setStart(null);
      this.el('start').focus();
    });
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.reserve();
    });
    this.el('bandwidth').addEventListener('input', () => this.hintBandwidth());
    for (const c of form.querySelectorAll('input, select')) {
      c.addEventListener('input', () => c.removeAttribute('aria-invalid'));
    }
  }

  // setNodes fills the from/to selects from GET /api/v1/topology, grouped by
  // site, hosts first; the defaults are hosts at two different sites.
  setNodes(topology, projects) {
    const nodes = topology.nodes || [];
    const sites = topology.sites?.length ? topology.sites.map((s) => s.name) : [...new Set(nodes.map((n) => n.site))];
    for (const id of ['from', 'to']) {
      const sel = this.el(id);
      const keep = sel.value;
      sel.replaceChildren();
      for (const site of sites) {
        const group = h('optgroup', { label: site });
        const inSite = nodes.filter((n) => n.site === site)
          .sort((a, b) => (a.role === 'router') - (b.role === 'router') || a.name.localeCompare(b.name));
        for (const n of inSite) {
          const extra = [n.role === 'router' ? 'router' : '', n.managed ? 'managed' : ''].filter(Boolean).join(', ');
          group.append(h('option', { value: n.name }, extra ? `${n.name} (${extra})` : n.name));
        }
        sel.append(group);
      }
      if (keep && nodes.some((n) => n.name === keep)) sel.value = keep;
    }
    const hosts = nodes.filter((n) => n.role !== 'router');
    if (!this.el('from').dataset.chosen && hosts.length) {
      const a = hosts[0];
      const b = hosts.find((n) => n.site !== a.site) || hosts.find((n) => n.name !== a.name);
      this.el('from').value = a.name;
      if (b) this.el('to').value = b.name;
      this.el('from').dataset.chosen = '1';
    }
    const field = this.form.querySelector('#project-field');
    const sel = this.el('project');
    sel.replaceChildren(h('option', { value: '' }, '(none)'), ...(projects || []).map((p) => h('option', { value: p }, p)));
    if (projects?.length === 1) sel.value = projects[0];
    field.hidden = !projects?.length;
  }

  hintBandwidth() {
    const hint = this.el('bandwidth-hint');
    const v = this.el('bandwidth').value;
    try {
      hint.textContent = v.trim() ? `= ${formatRate(parseRate(v))}` : 'bits per second, SI prefixes';
    } catch (e) {
      hint.textContent = e.message;
    }
  }

  setStart(iso) {
    const start = this.el('start');
    if (!iso) {
      start.value = '';
      delete start.dataset.iso;
      return;
    }
    // The input holds whole seconds: round up, so the start is never before
    // the slot found; the exact instant is kept while the field is unchanged.
    const t = new Date(Math.ceil(Date.parse(iso) / 1000) * 1000);
    start.value = toLocalInput(t);
    start.dataset.iso = iso;
    start.dataset.shown = start.value;
  }

  // read returns the request common to find and reserve, or throws a
  // UnitError naming the control at fault.
  read() {
    const invalid = (id, msg) => {
      const e = new UnitError(msg);
      e.input = id;
      return e;
    };
    const from = this.el('from').value;
    const to = this.el('to').value;
    if (!from || !to) throw invalid('from', 'choose where the data flows from and to');
    if (from === to) throw invalid('to', 'from and to must be different nodes');
    let bandwidth;
    try {
      bandwidth = parseRate(this.el('bandwidth').value);
    } catch (e) {
      throw invalid('bandwidth', e.message);
    }
    if (bandwidth <= 0) throw invalid('bandwidth', 'the bandwidth must be more than 0');
    const durText = this.el('duration').value.trim();
    let durMs;
    try {
      durMs = parseDuration(durText);
    } catch (e) {
      throw invalid('duration', e.message);
    }
    if (durMs < 1000) throw invalid('duration', 'the duration must be at least 1s');
    const body = { from, to, bandwidth_bps: bandwidth, duration: durText };
    const startEl = this.el('start');
    if (startEl.value) {
      // A slot found by the scheduler is sent back exactly as it came: the
      // controller's instants have nanoseconds, a Date only milliseconds,
      // and a start a fraction early can overlap the booking before it.
      let start;
      let iso;
      if (startEl.dataset.iso && startEl.value === startEl.dataset.shown) {
        iso = startEl.dataset.iso;
        start = new Date(iso);
      } else {
        start = fromLocalInput(startEl.value);
        iso = start && start.toISOString();
      }
      if (!start || Number.isNaN(start.getTime())) throw invalid('start', 'the start is not a valid date and time');
      if (start.getTime() < Date.now() - 60000) throw invalid('start', `the start (${start.toLocaleString()}) is in the past: clear it to start now`);
      if (start.getTime() > Date.now() + NOW_SLACK_MS) body.start = iso;
    }
    const project = this.el('project').value;
    if (project) body.project = project;
    const flows = this.el('flow-spec').value.trim();
    if (flows) body.flow_spec = flows;
    return body;
  }

  // attempt runs fn with the form's request, showing input errors inline.
  async attempt(button, fn) {
    let body;
    try {
      body = this.read();
    } catch (e) {
      if (!(e instanceof UnitError)) throw e;
      this.fail(e.message, e.input);
      return;
    }
    button.disabled = true;
    this.form.setAttribute('aria-busy', 'true');
    try {
      await fn(body);
    } finally {
      button.disabled = false;
      this.form.setAttribute('aria-busy', 'false');
    }
  }

  findEarliest() {
    return this.attempt(this.el('find-earliest'), async (body) => {
      this.say('info', 'Asking the scheduler…');
      try {
        const ans = await api('POST', 'api/v1/find', { mode: 'earliest', ...body });
        const slot = slotOf(ans);
        if (!slot || !slot.start) {
          this.say('error', 'The scheduler found no slot within the booking horizon.');
          return;
        }
        this.setStart(slot.start);
        this.result.replaceChildren(h('div', { className: 'ok', id: 'slot' },
          h('strong', {}, 'Earliest slot: '), windowEl(slot.start, slot.end),
          ` · ${formatRate(slot.bandwidth_bps || body.bandwidth_bps)}`,
          slot.path?.length ? ` · path ${pathText(slot.path)}` : '',
          h('div', { className: 'algorithm' }, `algorithm: ${slot.algorithm || 'unnamed'}`),
          h('div', { className: 'hint' }, 'The start field now holds this slot: press Reserve to book it.')));
      } catch (err) {
        this.refused(err, body);
      }
    });
  }

  reserve() {
    return this.attempt(this.el('reserve'), (body) => this.book(body));
  }

  // book creates the reservation. A retry of the same request (after a
  // network failure) reuses its idempotency key, so it books once.
  async book(body) {
    const same = this.pending && JSON.stringify(this.pending.body) === JSON.stringify(body);
    const key = same ? this.pending.key : newKey();
    this.pending = { body, key };
    this.say('info', 'Booking…');
    try {
      const ans = await api('POST', 'api/v1/reservations', { ...body, idempotency_key: key });
      this.pending = null;
      const r = ans.reservation;
      this.result.replaceChildren(h('div', { className: 'ok', id: 'booked', dataset: { id: r.id } },
        h('strong', {}, ans.created === false ? `Already booked ${r.id}: ` : `Booked ${r.id}: `),
        `${formatRate(r.bandwidth_bps)} ${r.from} → ${r.to}, `, windowEl(r.start, r.end),
        ` (${formatDuration(Date.parse(r.end) - Date.parse(r.start))}), ${r.state}`,
        r.path?.length ? h('div', {}, `path ${pathText(r.path)}`) : '',
        ans.algorithm ? h('div', { className: 'algorithm' }, `algorithm: ${ans.algorithm}`) : ''));
      this.setStart(null);
      this.onBooked(r);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 0) this.pending = null;
      this.refused(err, body);
    }
  }

  // refused explains a failed call; a capacity refusal lists what would fit.
  refused(err, body) {
    if (!(err instanceof ApiError)) {
      this.say('error', String(err));
      return;
    }
    const input = FIELD_INPUT[err.detail.field];
    if (err.status === 409 && err.code === 'capacity') {
      this.capacity(err, body);
      return;
    }
    let text = errorText(err);
    if (err.status === 403) text = `Not allowed: ${text}`;
    if (err.status === 401) text = `Your token was refused: ${text}`;
    this.fail(text, input);
  }

  capacity(err, body) {
    const alts = err.detail.alternatives || {};
    const items = [];
    const offer = (slot, kind, what) => {
      if (!slot || (!slot.bandwidth_bps && !body.bandwidth_bps)) return;
      const bw = slot.bandwidth_bps || body.bandwidth_bps;
      items.push(h('li', {},
        h('strong', {}, `${what}: `), formatRate(bw), ', ', windowEl(slot.start, slot.end),
        slot.path?.length ? ` · ${pathText(slot.path)}` : '',
        slot.algorithm ? h('span', { className: 'algorithm' }, ` (${slot.algorithm})`) : '',
        ' ',
        h('button', {
          type: 'button', id: `take-${kind}`, className: 'take',
          onclick: () => this.take(slot, body),
        }, `Book this`)));
    };
    offer(alts.earliest, 'earliest', 'Earliest slot with this bandwidth');
    if (alts.widest?.bandwidth_bps) offer(alts.widest, 'widest', 'Widest bandwidth for this window');
    this.result.replaceChildren(h('div', { className: 'error', role: 'alert', id: 'capacity' },
      h('strong', {}, 'Does not fit: '), errorText(err),
      items.length ? h('ul', { className: 'alternatives', 'aria-label': 'alternatives' }, items)
        : h('div', {}, 'The controller offered no alternative within the horizon.')));
  }

  // take books an alternative the controller offered: its bandwidth and
  // window (from now if its start has passed) on its path, with the
  // instants sent back as they came. The form shows what was taken.
  take(slot, body) {
    const start = Date.parse(slot.start);
    const end = Date.parse(slot.end);
    const req = { ...body, bandwidth_bps: slot.bandwidth_bps || body.bandwidth_bps, end: slot.end };
    delete req.start;
    delete req.duration;
    if (start > Date.now() + NOW_SLACK_MS) req.start = slot.start;
    if (slot.path?.length) req.path = slot.path.map((hop) => hop.link);
    this.el('bandwidth').value = formatRate(req.bandwidth_bps);
    this.hintBandwidth();
    this.setStart(req.start || null);
    this.el('duration').value = goDuration(end - Math.max(start, Date.now()));
    for (const b of this.result.querySelectorAll('button.take')) b.disabled = true;
    return this.book(req);
  }

  say(kind, text) {
    this.result.replaceChildren(h('div', { className: kind, role: kind === 'error' ? 'alert' : null }, text));
  }

  fail(text, inputId) {
    this.say('error', text);
    if (inputId) {
      const c = this.el(inputId);
      if (c) {
        c.setAttribute('aria-invalid', 'true');
        c.focus();
      }
    }
  }
}

// slotOf finds the slot in a find answer: the Slot itself, or wrapped.
function slotOf(ans) {
  if (!ans) return null;
  if (ans.slot) return ans.slot;
  if (Array.isArray(ans.slots)) return ans.slots[0] || null;
  return ans;
}
