// Throughput per link direction: one rolling chart for every direction
// that has a measurement or a reservation, filled from the repository
// (lightpath_link_throughput_bytes_per_second, ×8, over the last five minutes)
// when it first appears, then one point a second from the live frames:
// the measured rate, and the reserved bandwidth as a step line.

import { api } from './api.js';
import { h } from './dom.js';
import { LiveChart, queryPath } from './livechart.js';
import { formatRate } from './units.js';

const SERIES = 'lightpath_link_throughput_bytes_per_second'; // ×8: the charts are in bit/s

export class LinkCharts {
  constructor({ root }) {
    this.root = root;
    this.charts = new Map(); // "link|from" → {el, chart, last}
    this.topo = null;
    this.selected = '';
  }

  setTopology(topo) {
    this.topo = topo;
  }

  clear() {
    for (const c of this.charts.values()) c.chart.destroy();
    this.charts.clear();
    this.root.replaceChildren();
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
    const el = h('figure', { className: 'link-chart', dataset: { link, from, to: to || '' }, tabIndex: -1 }, head, plot);
    // Keep the charts in a stable order: by link, then direction.
    const after = [...this.root.children].find((x) => `${x.dataset.link}|${x.dataset.from}` > key);
    this.root.insertBefore(el, after || null);
    const chart = new LiveChart(plot, {
      series: [
        { label: 'used', stroke: '#1f5fbf', fill: 'rgba(31, 95, 191, 0.15)', width: 2 },
        { label: 'reserved', stroke: '#8250df', dash: [5, 3], step: true },
      ],
    });
    c = { el, plot, chart, head, last: 0 };
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
  }

  select(link, from) {
    this.selected = `${link}|${from}`;
    for (const [k, c] of this.charts) c.el.classList.toggle('selected', k === this.selected);
    const c = this.charts.get(this.selected);
    if (c) {
      c.el.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
      c.el.focus({ preventScroll: true });
    }
  }
}
