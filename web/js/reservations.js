// "My reservations": GET /api/v1/reservations as a table with each one's
// state, window, path and bandwidth, and Cancel for the live ones. A user
// sees their own; an operator or admin may tick "everyone's".

import { api, errorText } from './api.js';
import { h, pathText, show, windowEl } from './dom.js';
import { formatRate } from './units.js';

const LIVE = new Set(['HELD', 'RESERVED', 'ACTIVE']);

export class Reservations {
  constructor({ table, stateFilter, everyone, everyoneLabel, status, onChange }) {
    this.table = table;
    this.body = table.tBodies[0];
    this.stateFilter = stateFilter;
    this.everyone = everyone;
    this.everyoneLabel = everyoneLabel;
    this.status = status;
    this.onChange = onChange;
    this.me = '';
    this.seq = 0;
    stateFilter.addEventListener('change', () => this.refresh());
    everyone.addEventListener('change', () => this.refresh());
  }

  setUser(who) {
    this.me = who.user;
    const sees = who.role === 'operator' || who.role === 'admin';
    this.everyoneLabel.hidden = !sees;
    if (!sees) this.everyone.checked = false;
  }

  async refresh() {
    const seq = ++this.seq;
    const q = new URLSearchParams();
    if (!this.everyone.checked && this.me) q.set('owner', this.me);
    const filter = this.stateFilter.value;
    if (filter && filter !== 'live') q.set('state', filter);
    try {
      const qs = q.toString();
      const ans = await api('GET', `api/v1/reservations${qs ? `?${qs}` : ''}`);
      if (seq !== this.seq) return;
      let list = ans.reservations || [];
      if (filter === 'live') list = list.filter((r) => LIVE.has(r.state));
      list.sort((a, b) => Date.parse(a.start) - Date.parse(b.start) || a.id.localeCompare(b.id));
      this.render(list);
      show(this.status, `${list.length} shown, updated ${new Date().toLocaleTimeString()}`);
    } catch (err) {
      if (seq !== this.seq) return;
      show(this.status, `could not load reservations: ${errorText(err)}`, 'error');
    }
  }

  render(list) {
    this.table.classList.toggle('everyone', this.everyone.checked);
    if (list.length === 0) {
      this.body.replaceChildren(h('tr', { className: 'empty' }, h('td', { colSpan: 8 }, 'No reservations.')));
      return;
    }
    this.body.replaceChildren(...list.map((r) => this.row(r)));
  }

  row(r) {
    const live = LIVE.has(r.state);
    const state = h('td', { className: 'state' },
      h('span', { className: `badge state-${r.state.toLowerCase()}` }, r.state),
      r.degraded ? h('span', { className: 'badge degraded', title: r.degraded_reason || '' }, 'degraded') : '',
      r.state === 'FAILED' && r.failure_reason ? h('div', { className: 'hint' }, r.failure_reason) : '',
      r.state === 'HELD' && r.hold_expires ? h('div', { className: 'hint', title: new Date(r.hold_expires).toISOString() },
        `held until ${new Date(r.hold_expires).toLocaleTimeString()}`) : '');
    const actions = h('td', { className: 'actions' });
    if (r.state === 'HELD') {
      actions.append(h('button', {
        type: 'button', className: 'commit', 'aria-label': `Commit reservation ${r.id}`,
        onclick: (e) => this.act(r, 'commit', e.currentTarget),
      }, 'Commit'));
    }
    if (live) {
      actions.append(h('button', {
        type: 'button', className: 'cancel', 'aria-label': `Cancel reservation ${r.id}`,
        onclick: (e) => this.act(r, 'cancel', e.currentTarget),
      }, 'Cancel'));
    }
    return h('tr', { id: `res-${r.id}`, dataset: { id: r.id, state: r.state } },
      h('td', { className: 'id' }, h('code', {}, r.id), r.project ? h('div', { className: 'hint' }, r.project) : ''),
      h('td', { className: 'owner-col' }, r.owner),
      h('td', { className: 'nodes' }, `${r.from} → ${r.to}`),
      h('td', { className: 'num' }, formatRate(r.bandwidth_bps)),
      h('td', {}, windowEl(r.start, r.end)),
      h('td', { className: 'path', title: pathText(r.path) }, (r.path || []).map((hop) => hop.link).join(' · ')),
      state,
      actions);
  }

  async act(r, what, button) {
    button.disabled = true;
    const body = what === 'cancel' ? { reason: 'cancelled in the web UI' } : {};
    try {
      await api('POST', `api/v1/reservations/${encodeURIComponent(r.id)}/${what}`, body);
      show(this.status, `${what === 'cancel' ? 'Cancelled' : 'Committed'} ${r.id}`, 'ok');
      this.onChange();
    } catch (err) {
      button.disabled = false;
      show(this.status, `could not ${what} ${r.id}: ${errorText(err)}`, 'error');
    }
  }
}
