// The link timeline: for every direction of every link, the booked
// bandwidth over time against the reservable capacity (a uPlot step chart)
// and, under it, one bar per booking saying who holds what and when, on
// the same time axis.

import { api } from './api.js';
import { h, show } from './dom.js';
import { formatRate, formatRateShort, formatWindow, parseDuration, utc } from './units.js';

const CHART_HEIGHT = 120;
const LANE_HEIGHT = 24;

export class Timeline {
  // root is #timeline; status a live region for "updated at".
  constructor({ root, range, showIdle, refreshButton, status }) {
    this.root = root;
    this.range = range;
    this.showIdle = showIdle;
    this.status = status;
    this.charts = [];
    this.topology = null;
    this.me = '';
    this.seq = 0;
    this.resize = new ResizeObserver(() => this.fit());
    this.resize.observe(root);
    range.addEventListener('change', () => this.refresh());
    showIdle.addEventListener('change', () => this.refresh());
    refreshButton.addEventListener('click', () => this.refresh());
  }

  setContext(topology, me) {
    this.topology = topology;
    this.me = me;
  }

  // refresh fetches [now, now + range) and draws it. A slower earlier call
  // that answers after a newer one is dropped.
  async refresh() {
    const seq = ++this.seq;
    const from = new Date();
    const to = new Date(from.getTime() + parseDuration(this.range.value));
    const q = new URLSearchParams({ from: from.toISOString(), to: to.toISOString() });
    this.root.setAttribute('aria-busy', 'true');
    try {
      const tl = await api('GET', `api/v1/timeline?${q}`);
      if (seq !== this.seq) return;
      this.render(tl);
      show(this.status, `updated ${new Date().toLocaleTimeString()}`);
    } catch (err) {
      if (seq !== this.seq) return;
      show(this.status, `could not load the timeline: ${err.message}`, 'error');
    } finally {
      if (seq === this.seq) this.root.setAttribute('aria-busy', 'false');
    }
  }

  clear() {
    for (const c of this.charts) c.plot.destroy();
    this.charts = [];
    this.root.replaceChildren();
  }

  render(tl) {
    this.clear();
    this.root.dataset.from = tl.from;
    this.root.dataset.to = tl.to;
    const from = Date.parse(tl.from);
    const to = Date.parse(tl.to);
    const links = new Map((this.topology?.links || []).map((l) => [l.name, l]));
    for (const lt of tl.links || []) {
      const info = links.get(lt.link);
      const section = h('section', { className: 'link', dataset: { link: lt.link } },
        h('h3', {}, lt.link, info && h('span', { className: 'link-info' },
          ` ${info.role || 'routed'} · ${formatRate(info.capacity_bps)}` +
            (info.delay && info.delay !== '0s' ? ` · ${info.delay} delay` : ''))));
      for (const d of lt.directions || []) section.append(this.direction(lt.link, d, from, to));
      this.root.append(section);
    }
    if (!tl.links || tl.links.length === 0) this.root.append(h('p', { className: 'empty' }, 'No links in the topology.'));
    this.fit();
  }

  direction(link, d, from, to) {
    const bookings = d.bookings || [];
    const peak = Math.max(0, ...(d.steps || []).map((s) => s.used_bps));
    const label = `${d.from} → ${d.to}`;
    const el = h('div', {
      className: 'direction', role: 'group', 'aria-label': `${link} ${label}`,
      dataset: { link, from: d.from, to: d.to },
    });
    const head = h('div', { className: 'direction-head' },
      h('strong', {}, label),
      ` · reservable ${formatRate(d.reservable_bps)}`,
      bookings.length ? ` · peak booked ${formatRate(peak)} (${Math.round((100 * peak) / (d.reservable_bps || 1))}%)` : ' · free');
    el.append(head);
    if (bookings.length === 0 && !this.showIdle.checked) {
      el.classList.add('idle');
      return el;
    }
    const chartEl = h('div', { className: 'chart' });
    const list = h('ul', { className: 'lanes', 'aria-label': `bookings on ${link} ${label}` });
    el.append(chartEl, list);

    const lanes = packLanes(bookings);
    list.style.height = `${Math.max(1, lanes.count) * LANE_HEIGHT}px`;
    const bars = bookings.map((b, i) => {
      const mine = b.owner === this.me;
      const who = b.project ? `${b.owner} (${b.project})` : b.owner;
      const text = `${b.id} · ${who} · ${formatRate(b.bandwidth_bps)}`;
      const li = h('li', {
        className: `booking${mine ? ' mine' : ''} state-${String(b.state).toLowerCase()}`,
        dataset: { id: b.id, owner: b.owner },
        tabIndex: 0,
        title: `${b.id}\n${who}\n${formatRate(b.bandwidth_bps)}, ${b.state}\n` +
          `${formatWindow(b.start, b.end)}\n${utc(b.start)} – ${utc(b.end)}`,
      }, h('span', { className: 'bar-text' }, text),
      h('span', { className: 'visually-hidden' }, `, ${formatWindow(b.start, b.end)}, ${b.state}`));
      li.style.top = `${lanes.of[i] * LANE_HEIGHT}px`;
      li.style.setProperty('--hue', String(hue(b.id)));
      list.append(li);
      return { li, start: Date.parse(b.start) / 1000, end: Date.parse(b.end) / 1000 };
    });

    const { xs, used } = series(d.steps || [], from, to);
    const cap = d.reservable_bps;
    const placeBars = (u) => {
      const left = parseFloat(u.over.style.left) || 0;
      const width = u.over.clientWidth;
      for (const b of bars) {
        const x0 = Math.max(0, Math.min(width, u.valToPos(b.start, 'x')));
        const x1 = Math.max(0, Math.min(width, u.valToPos(b.end, 'x')));
        b.li.style.left = `${left + x0}px`;
        b.li.style.width = `${Math.max(3, x1 - x0)}px`;
      }
    };
    const plot = new window.uPlot({
      width: this.width(),
      height: CHART_HEIGHT,
      legend: { show: true, live: true },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      scales: {
        x: { time: true, range: () => [from / 1000, to / 1000] },
        y: { range: (u, min, max) => [0, Math.max(cap, max || 0) * 1.08 || 1] },
      },
      axes: [
        {},
        { size: 64, space: 24, values: (u, splits) => splits.map(formatRateShort) },
      ],
      series: [
        { label: 'time', value: (u, v) => (v == null ? '—' : new Date(v * 1000).toLocaleString()) },
        {
          label: 'booked',
          stroke: '#1f5fbf',
          width: 2,
          fill: 'rgba(31, 95, 191, 0.18)',
          points: { show: false },
          paths: window.uPlot.paths.stepped({ align: 1 }),
          value: (u, v) => (v == null ? '—' : formatRate(v)),
        },
        {
          label: 'reservable',
          stroke: '#b3261e',
          width: 1.5,
          dash: [6, 4],
          points: { show: false },
          value: (u, v) => (v == null ? '—' : formatRate(v)),
        },
      ],
      hooks: { draw: [placeBars] },
    }, [xs, used, xs.map(() => cap)], chartEl);
    this.charts.push({ plot, el: chartEl });
    return el;
  }

  width() {
    return Math.max(320, this.root.clientWidth - 24);
  }

  fit() {
    const width = this.width();
    for (const c of this.charts) {
      if (c.plot.width !== width) c.plot.setSize({ width, height: CHART_HEIGHT });
    }
  }
}

// series turns the booked steps into uPlot's columns (seconds), covering
// [from, to) even where the steps do not.
function series(steps, from, to) {
  const xs = [];
  const used = [];
  let last = 0;
  for (const s of steps) {
    xs.push(Date.parse(s.start) / 1000);
    used.push(s.used_bps);
    last = s.used_bps;
  }
  if (xs.length === 0 || xs[0] > from / 1000) {
    xs.unshift(from / 1000);
    used.unshift(0);
  }
  const end = steps.length ? Date.parse(steps[steps.length - 1].end) / 1000 : from / 1000;
  if (end < to / 1000) {
    if (steps.length) {
      xs.push(end);
      used.push(0);
    }
    xs.push(to / 1000);
    used.push(0);
  } else {
    xs.push(to / 1000);
    used.push(last);
  }
  return { xs, used };
}

// packLanes puts overlapping bookings on separate rows, first fit.
function packLanes(bookings) {
  const order = bookings.map((b, i) => i).sort((a, b) => Date.parse(bookings[a].start) - Date.parse(bookings[b].start));
  const ends = [];
  const of = new Array(bookings.length);
  for (const i of order) {
    const start = Date.parse(bookings[i].start);
    let lane = ends.findIndex((e) => e <= start);
    if (lane < 0) lane = ends.length;
    ends[lane] = Date.parse(bookings[i].end);
    of[i] = lane;
  }
  return { of, count: ends.length };
}

// hue gives each reservation a stable colour.
function hue(id) {
  let x = 0;
  for (const c of id) x = (x * 31 + c.codePointAt(0)) % 360;
  return x;
}
