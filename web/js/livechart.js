// A rolling uPlot chart fed one point at a time (live frames) and filled
// backwards from the monitoring repository (backfill). It keeps a bounded
// window and records on its element how many points it holds
// (data-points) and how many came live (data-live-points), so a test can
// tell that data arrives without reading pixels.

import { formatRate, formatRateShort } from './units.js';

export const WINDOW_MS = 5 * 60 * 1000;

// TIME_INCRS are the x axis' tick spacings in seconds: whole seconds and
// up, never fractions, however short the span shown.
export const TIME_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

// timeAxis is the x axis of every rolling chart: ticks on whole seconds
// or minutes (uPlot's default for a short span is milliseconds).
export function timeAxis() {
  return { space: 55, incrs: TIME_INCRS };
}

export class LiveChart {
  // el receives the chart; series is [{label, stroke, fill, step, dash}];
  // every value is a rate in bits per second unless fmt says otherwise.
  constructor(el, { series, height = 110, windowMs = WINDOW_MS, fmt = formatRate, axis = formatRateShort }) {
    this.el = el;
    this.windowMs = windowMs;
    this.height = height;
    this.xs = [];
    this.ys = series.map(() => []);
    this.live = 0;
    this.plot = new window.uPlot({
      width: this.width(),
      height,
      legend: { show: true, live: true },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max || 0, 1) * 1.1] } },
      axes: [timeAxis(), { size: 60, space: 22, values: (u, splits) => splits.map(axis) }],
      series: [
        { label: 'time', value: (u, v) => (v == null ? '—' : new Date(v * 1000).toLocaleTimeString()) },
        ...series.map((sr) => ({
          label: sr.label,
          stroke: sr.stroke,
          width: sr.width || 1.5,
          fill: sr.fill,
          dash: sr.dash,
          points: { show: false },
          spanGaps: false,
          paths: sr.step ? window.uPlot.paths.stepped({ align: 1 }) : undefined,
          value: (u, v) => (v == null ? '—' : fmt(v)),
        })),
      ],
    }, [this.xs, ...this.ys], el);
    this.resize = new ResizeObserver(() => {
      const w = this.width();
      if (w !== this.plot.width) this.plot.setSize({ width: w, height: this.height });
    });
    this.resize.observe(el);
    this.mark();
  }

  width() {
    return Math.max(240, (this.el.clientWidth || 320) - 4);
  }

  // push appends one point at t (ms) unless it is not newer than the last.
  push(t, values) {
    const x = t / 1000;
    if (this.xs.length && x <= this.xs[this.xs.length - 1]) return false;
    this.xs.push(x);
    values.forEach((v, i) => this.ys[i].push(v == null || !Number.isFinite(v) ? null : v));
    this.live++;
    this.trim(t);
    this.redraw();
    return true;
  }

  // backfill puts points from the repository before the first one held:
  // points is [[ms, v0, v1…]…] in time order.
  backfill(points) {
    const first = this.xs.length ? this.xs[0] : Infinity;
    const older = points.filter((p) => p[0] / 1000 < first);
    if (older.length === 0) return;
    this.xs.unshift(...older.map((p) => p[0] / 1000));
    this.ys.forEach((ys, i) => ys.unshift(...older.map((p) => (p[i + 1] == null ? null : p[i + 1]))));
    this.trim(Date.now());
    this.redraw();
  }

  trim(nowMs) {
    const cut = (nowMs - this.windowMs) / 1000;
    let n = 0;
    while (n < this.xs.length && this.xs[n] < cut) n++;
    if (n > 0) {
      this.xs.splice(0, n);
      for (const ys of this.ys) ys.splice(0, n);
    }
  }

  redraw() {
    this.plot.setData([this.xs, ...this.ys]);
    this.mark();
  }

  mark() {
    this.el.dataset.points = String(this.xs.length);
    this.el.dataset.livePoints = String(this.live);
  }

  destroy() {
    this.resize.disconnect();
    this.plot.destroy();
  }
}

// queryPath is the URL that reads one metric's series from the repository
// over the last windowMs (the answer: {series: [{labels, points}]}).
export function queryPath(name, match = {}, windowMs = WINDOW_MS, step = '') {
  const q = new URLSearchParams({ name, start: `${Math.round(windowMs / 1000)}s` });
  if (step) q.set('step', step);
  let qs = q.toString();
  for (const [k, v] of Object.entries(match)) qs += `&match=${encodeURIComponent(`${k}=${v}`)}`;
  return `api/v1/metrics/query?${qs}`;
}
