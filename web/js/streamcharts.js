// Per-stream TCP state over a transfer: two small uPlot charts, RTT and
// congestion window, with one line per stream, drawn from the
// lightpath_transfer_stream_{rtt_seconds,cwnd_segments}{transfer,stream}
// series the transfer page reads anyway. Each chart's element records
// data-streams (lines) and data-points (instants) for tests.

import { h } from './dom.js';
import { timeAxis } from './livechart.js';

// Stream colours: distinct hues, the same stream the same colour on both charts.
const HUES = [212, 140, 28, 280, 350, 190, 60, 100];

function streamColour(i) {
  return `hsl(${HUES[i % HUES.length]} 65% ${i < HUES.length ? 40 : 55}%)`;
}

// join aligns several [[ms, v]…] series on the union of their instants:
// [xs (seconds), ys0, ys1…], null where a series has no point.
export function join(series) {
  const xs = [...new Set(series.flatMap((pts) => pts.map((p) => p[0])))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const ys = series.map((pts) => {
    const y = new Array(xs.length).fill(null);
    for (const [t, v] of pts) y[at.get(t)] = v == null || !Number.isFinite(v) ? null : v;
    return y;
  });
  return [xs.map((x) => x / 1000), ...ys];
}

class StreamChart {
  constructor(el, { title, fmt, axis }) {
    this.el = el;
    this.title = title;
    this.fmt = fmt;
    this.axis = axis;
    this.streams = [];
    this.plot = null;
    this.resize = new ResizeObserver(() => {
      if (this.plot && this.width() !== this.plot.width) this.plot.setSize({ width: this.width(), height: 120 });
    });
    this.resize.observe(el);
  }

  width() {
    return Math.max(220, (this.el.clientWidth || 300) - 4);
  }

  // set draws the streams (names) with their points ([[ms, v]…] each).
  set(names, points) {
    const data = join(points);
    if (!this.plot || names.join() !== this.streams.join()) {
      if (this.plot) this.plot.destroy();
      this.streams = names;
      this.plot = new window.uPlot({
        width: this.width(),
        height: 120,
        legend: { show: true, live: true },
        cursor: { drag: { x: false, y: false }, points: { show: false } },
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max || 0, 1e-9) * 1.1] } },
        axes: [timeAxis(), { size: 56, space: 22, values: (u, splits) => splits.map(this.axis) }],
        series: [
          { label: 'time', value: (u, v) => (v == null ? '—' : new Date(v * 1000).toLocaleTimeString()) },
          ...names.map((n, i) => ({
            label: `stream ${n}`,
            stroke: streamColour(i),
            width: 1.5,
            points: { show: false },
            spanGaps: true,
            value: (u, v) => (v == null ? '—' : this.fmt(v)),
          })),
        ],
      }, data, this.el);
    } else {
      this.plot.setData(data);
    }
    this.el.dataset.streams = String(names.length);
    this.el.dataset.points = String(data[0].length);
  }

  destroy() {
    this.resize.disconnect();
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}

// StreamCharts is the pair (RTT, cwnd) on a transfer's page.
export class StreamCharts {
  constructor() {
    this.rttEl = h('div', { id: 'stream-rtt-chart', className: 'plot', dataset: { metric: 'rtt', streams: '0', points: '0' } });
    this.cwndEl = h('div', { id: 'stream-cwnd-chart', className: 'plot', dataset: { metric: 'cwnd', streams: '0', points: '0' } });
    this.el = h('div', { id: 'transfer-stream-charts', className: 'stream-charts', hidden: true },
      h('figure', {}, h('figcaption', { className: 'chart-head' }, h('strong', {}, 'RTT per stream')), this.rttEl),
      h('figure', {}, h('figcaption', { className: 'chart-head' }, h('strong', {}, 'Congestion window per stream'), ' (segments)'), this.cwndEl));
    this.rtt = new StreamChart(this.rttEl, {
      fmt: (v) => `${(v * 1000).toFixed(1)} ms`,
      axis: (v) => `${Number((v * 1000).toPrecision(3))} ms`,
    });
    this.cwnd = new StreamChart(this.cwndEl, {
      fmt: (v) => String(Math.round(v)),
      axis: (v) => (v >= 1000 ? `${Number((v / 1000).toPrecision(3))} k` : String(Math.round(v))),
    });
  }

  // set takes the query answers of the RTT and cwnd series: {series:
  // [{labels: {stream}, points}]}.
  set(rttAnswer, cwndAnswer) {
    const bystream = (answer) => {
      const m = new Map();
      for (const sr of answer?.series || []) m.set(sr.labels?.stream ?? '?', sr.points || []);
      return m;
    };
    const rtt = bystream(rttAnswer);
    const cwnd = bystream(cwndAnswer);
    const names = [...new Set([...rtt.keys(), ...cwnd.keys()])].sort((a, b) => Number(a) - Number(b));
    this.el.hidden = names.length === 0;
    if (names.length === 0) return;
    this.rtt.set(names, names.map((n) => rtt.get(n) || []));
    this.cwnd.set(names, names.map((n) => cwnd.get(n) || []));
  }

  destroy() {
    this.rtt.destroy();
    this.cwnd.destroy();
  }
}
