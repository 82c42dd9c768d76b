// Throughput per link direction: one rolling chart for every direction
// that has a measurement or a reservation, filled from the repository
// (lightpath_link_throughput_bytes_per_second, ×8, over the last five minutes)
// when it first appears, then one point a second from the live frames:
// the measured rate, and the reserved bandwidth as a step line. The
// directions in use (a reservation, or at least 1 Mbit/s measured, within
// the window) come first; the idle ones are collapsed unless the "show
// idle" toggle is on (remembered) or the direction is selected.

import { api } from './api.js';
import { h } from './dom.js';
import { LiveChart, queryPath } from './livechart.js';
import { formatRate } from './units.js';

const SERIES = 'lightpath_link_throughput_bytes_per_second'; // ×8: the charts are in bit/s
const BUSY_BPS = 1e6; // a direction that carried this much within the window is in use
const IDLE_KEY = 'lightpath.show-idle-charts';

export class LinkCharts {
  constructor({ root, showIdle, idleCount }) {
    this.root = root;
    this.showIdle = showIdle;
    this.idleCount = idleCount;
    this.charts = new Map(); // "link|from" → {el, chart, last, busy}
    this.topo = null;
    this.selected = '';
    this.hint = h('p', { className: 'empty charts-hint', hidden: true },
      'No link direction had a reservation or carried 1 Mbit/s or more in the last 5 minutes.');
    root.append(this.hint);
    if (showIdle) {
      try {
        showIdle.checked = localStorage.getItem(IDLE_KEY) === '1';
      } catch {
        // storage refused: idle ones collapsed
      }
      showIdle.addEventListener('change', () => {
        try {
          localStorage.setItem(IDLE_KEY, showIdle.checked ? '1' : '0');
        } catch {
          // not remembered
        }
        this.arrange();
      });
    }
  }

  setTopology(topo) {
    this.topo = topo;
  }

  clear() {
    for (const c of this.charts.values()) c.chart.destroy();
    this.charts.clear();
    this.root.replaceChildren(this.hint);
    this.arrange();
  }

  // backfill reads the last five minutes of every direction the
  // repository measured, and makes their charts.
  async backfill() {
    let res;
    try {
      res = await api('GET', queryPath(SERIES, {}, undefined, '5s'));
    } catch {
      return; // no repository: the live frames still draw
    }
    for (const sr of res.series || []) {
      const { link, from, to } = sr.labels || {};
      if (!link || !from) continue;
      const c = this.ensure(link, from, to);
      c.chart.backfill(sr.points.map(([t, v]) => [t, v == null ? null : v * 8, null]));
    }
    this.arrange();
  }

  ensure(link, from, to) {
    const key = `${link}|${from}`;
    let c = this.charts.get(key);
    if (c) return c;
    const info = (this.topo?.links || []).find((l) => l.name === link);
    const plot = h('div', { className: 'plot' });
    const head = h('div', { className: 'chart-head' }, h('strong', {}, `${link} ${from} → ${to || '?'}`),
      info ? ` · ${info.role || 'routed'} · ${formatRate(info.capacity_bps)}` : '',
      h('span', { className: 'now' }));
    const el = h('figure', { className: 'link-chart idle', dataset: { link, from, to: to || '', busy: 'false' }, tabIndex: -1 }, head, plot);
    this.root.append(el); // arrange() puts it in its place
    const chart = new LiveChart(plot, {
      series: [
        { label: 'used', stroke: '#1f5fbf', fill: 'rgba(31, 95, 191, 0.15)', width: 2 },
        { label: 'reserved', stroke: '#8250df', dash: [5, 3], step: true },
      ],
    });
    c = { key, el, plot, chart, head, last: 0, busy: false };
    this.charts.set(key, c);
    if (key === this.selected) el.classList.add('selected');
    return c;
  }

  update(frame) {
    for (const l of frame.links || []) {
      if (!(l.t > 0) && !l.reserved_bps) continue;
      const c = this.ensure(l.link, l.from, l.to);
      // A direction measured: its sample time; reserved only: the frame's.
      const t = l.t > 0 ? l.t : frame.t;
      if (c.chart.push(t, [l.t > 0 ? l.bps : null, l.reserved_bps || 0])) {
        c.head.querySelector('.now').textContent =
          ` · now ${l.t > 0 ? formatRate(l.bps) : '—'}${l.reserved_bps ? `, reserved ${formatRate(l.reserved_bps)}` : ''}`;
      }
    }
    this.arrange();
  }

  // arrange marks each chart in use or idle from what it holds, and puts
  // the ones in use first (then by link and direction); idle ones are
  // collapsed by the style unless "show idle" is on.
  arrange() {
    for (const c of this.charts.values()) {
      const [used, reserved] = c.chart.ys;
      const busy = used.some((v) => v != null && v >= BUSY_BPS) || reserved.some((v) => v > 0);
      if (busy !== c.busy) {
        c.busy = busy;
        c.el.dataset.busy = String(busy);
        c.el.classList.toggle('idle', !busy);
      }
    }
    const order = [...this.charts.values()].sort((a, b) => (a.busy === b.busy ? (a.key < b.key ? -1 : 1) : a.busy ? -1 : 1));
    const now = [...this.root.children].filter((x) => x !== this.hint);
    if (order.some((c, i) => now[i] !== c.el)) this.root.append(...order.map((c) => c.el));
    const all = this.showIdle ? this.showIdle.checked : true;
    this.root.classList.toggle('show-idle', all);
    const idle = order.filter((c) => !c.busy).length;
    if (this.idleCount) this.idleCount.textContent = `(${idle})`;
    this.hint.hidden = all || idle < order.length || order.length === 0;
  }

  select(link, from) {
    this.selected = `${link}|${from}`;
    // An idle direction's chart is shown while it is selected.
    for (const [k, c] of this.charts) c.el.classList.toggle('selected', k === this.selected);
    const c = this.charts.get(this.selected);
    if (c) {
      c.el.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
      c.el.focus({ preventScroll: true });
    }
  }
}
