// Transfers: the running and recent ones (GET /api/v1/transfers) with
// their progress and throughput kept current by the live frames, and the
// page of one transfer (GET /api/v1/transfers/{id}): its path and
// reservation, bytes per path, bottleneck, a throughput chart (filled from
// lightpath_transfer_throughput_bytes_per_second ×8, then live), each TCP
// stream's latest state (the lightpath_transfer_stream_* series) with its
// RTT and cwnd charted over the transfer, and the alerts that changed
// state on its path with their reasons and actions.

import { api, errorText } from './api.js';
import { h, pathText, show, timeEl } from './dom.js';
import { LiveChart, queryPath } from './livechart.js';
import { StreamCharts } from './streamcharts.js';
import { formatRate } from './units.js';

const DETAIL_MS = 3000;
const LIST_MS = 15000;

const STREAM_SERIES = [
  ['rtt', 'lightpath_transfer_stream_rtt_seconds'],
  ['cwnd', 'lightpath_transfer_stream_cwnd_segments'],
  ['retrans', 'lightpath_transfer_stream_retransmits_total'],
  ['pacing', 'lightpath_transfer_stream_pacing_rate_bytes_per_second'],
  ['delivery', 'lightpath_transfer_stream_delivery_rate_bytes_per_second'],
];

// streamQuery is the URL that reads one stream series of a transfer over
// its run (from a few seconds before it started until it ended, or now),
// at most about 600 points a stream.
function streamQuery(name, t) {
  const ended = Date.parse(t.ended_at || '');
  const end = Number.isFinite(ended) ? ended + 5000 : Date.now();
  let start = Date.parse(t.started_at || '') - 5000;
  if (!Number.isFinite(start)) start = end - 2 * 60 * 1000; // no start: the last two minutes
  const q = new URLSearchParams({ name, start: new Date(start).toISOString() });
  if (Number.isFinite(ended)) q.set('end', new Date(end).toISOString());
  const span = (end - start) / 1000;
  if (span > 600) q.set('step', `${Math.ceil(span / 600)}s`);
  return `api/v1/metrics/query?${q}&match=${encodeURIComponent(`transfer=${t.id}`)}`;
}

export function formatBytes(n) {
  if (n == null || !Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = n;
  let i = 0;
  while (i < units.length - 1 && v >= 1024) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[i]}`;
}

function progress(done, total) {
  if (!total) return formatBytes(done);
  return `${formatBytes(done)} of ${formatBytes(total)} (${Math.floor((100 * done) / total)}%)`;
}

export class Transfers {
  constructor({ table, page, status }) {
    this.table = table;
    this.body = table.tBodies[0];
    this.page = page;
    this.status = status;
    this.rows = new Map(); // id → {tr, cells}
    this.running = new Set();
    this.selected = '';
    this.picked = false; // the user chose one: do not follow new ones
    this.chart = null;
    this.streamCharts = null;
    this.detailTimer = 0;
    this.listTimer = 0;
    this.seq = 0;
    this.detailSeq = 0;
  }

  start() {
    this.refresh();
  }

  stop() {
    clearTimeout(this.detailTimer);
    clearTimeout(this.listTimer);
    this.seq++;
    this.detailSeq++;
    this.closePage();
    this.rows.clear();
    this.body.replaceChildren();
    this.selected = '';
    this.picked = false;
  }

  async refresh() {
    clearTimeout(this.listTimer);
    this.listTimer = setTimeout(() => this.refresh(), LIST_MS);
    const seq = ++this.seq;
    let res;
    try {
      res = await api('GET', 'api/v1/transfers?limit=20');
    } catch (err) {
      if (seq === this.seq) show(this.status, `could not load the transfers: ${errorText(err)}`, 'error');
      return;
    }
    if (seq !== this.seq) return;
    show(this.status, '');
    this.render(res.transfers || []);
  }

  render(list) {
    this.rows.clear();
    this.body.replaceChildren();
    this.running = new Set(list.filter((t) => t.state === 'running').map((t) => t.id));
    if (list.length === 0) {
      this.body.append(h('tr', { className: 'empty' }, h('td', { colSpan: 7 }, 'No transfers yet: lightpath cp --reserve … registers one.')));
    }
    for (const t of list) {
      const cells = {
        state: h('td', {}, h('span', { className: `badge state-${t.state}` }, t.state)),
        progress: h('td', { className: 'num' }, progress(t.bytes_done, t.bytes_total)),
        rate: h('td', { className: 'num' }, formatRate(t.throughput_bps)),
      };
      const tr = h('tr', { dataset: { id: t.id, state: t.state }, tabIndex: 0, className: 'pick' },
        h('td', {}, h('code', {}, t.id)),
        h('td', {}, t.owner),
        h('td', { className: 'nodes' }, `${t.from || '?'} → ${t.to || '?'}`),
        cells.state, cells.progress, cells.rate,
        h('td', {}, timeEl(t.started_at)));
      const pick = () => {
        this.picked = true;
        this.open(t.id);
      };
      tr.addEventListener('click', pick);
      tr.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') pick();
      });
      tr.classList.toggle('selected', t.id === this.selected);
      this.body.append(tr);
      this.rows.set(t.id, { tr, cells, t });
    }
    // Follow the newest running transfer until the user picks one.
    const follow = list.find((t) => t.state === 'running');
    if (!this.picked && follow && follow.id !== this.selected) this.open(follow.id);
    else if (!this.selected && list.length) this.open(list[0].id);
  }

  // update takes a live frame: progress and throughput of running
  // transfers, a point on the open one's chart, and a reload of the list
  // when one starts or ends.
  update(frame) {
    const now = new Set();
    for (const lt of frame.transfers || []) {
      now.add(lt.id);
      const row = this.rows.get(lt.id);
      if (row) {
        row.cells.progress.textContent = progress(lt.bytes_done, lt.bytes_total);
        row.cells.rate.textContent = formatRate(lt.bps);
      }
      if (lt.id === this.selected && this.chart) this.chart.push(lt.t, [lt.bps]);
    }
    const started = [...now].some((id) => !this.running.has(id));
    const ended = [...this.running].some((id) => !now.has(id));
    if (started || ended) {
      this.running = now;
      this.refresh();
      if (ended && this.selected) this.loadDetail(this.selected);
    }
  }

  closePage() {
    if (this.chart) this.chart.destroy();
    this.chart = null;
    if (this.streamCharts) this.streamCharts.destroy();
    this.streamCharts = null;
    this.page.replaceChildren();
    this.page.hidden = true;
    delete this.page.dataset.id;
  }

  open(id) {
    clearTimeout(this.detailTimer);
    this.closePage();
    this.selected = id;
    for (const [rid, r] of this.rows) r.tr.classList.toggle('selected', rid === id);
    this.page.dataset.id = id;
    this.page.hidden = false;
    this.els = {
      title: h('h3', {}, 'Transfer ', h('code', {}, id)),
      facts: h('dl', { className: 'facts' }),
      plot: h('div', { id: 'transfer-chart', className: 'plot', dataset: { transfer: id } }),
      streams: h('table', { id: 'transfer-streams', className: 'streams' },
        h('caption', {}, 'TCP streams (latest)'),
        h('thead', {}, h('tr', {}, ...['stream', 'RTT', 'cwnd', 'retransmits', 'pacing', 'delivery'].map((x) => h('th', { scope: 'col' }, x)))),
        h('tbody', {})),
      alerts: h('div', { id: 'transfer-alerts', className: 'transfer-alerts' }),
      streamCharts: new StreamCharts(),
      status: h('span', { className: 'status', 'aria-live': 'polite' }),
    };
    this.page.append(this.els.title, this.els.status, this.els.facts,
      h('div', { className: 'chart-head' }, h('strong', {}, 'Throughput')), this.els.plot,
      h('div', { className: 'streams-row' }, this.els.streams, this.els.streamCharts.el), h('h4', {}, 'Alerts on its path'), this.els.alerts);
    this.streamCharts = this.els.streamCharts;
    this.chart = new LiveChart(this.els.plot, {
      series: [{ label: 'throughput', stroke: '#1a7f37', fill: 'rgba(26, 127, 55, 0.15)', width: 2 }],
      height: 140,
    });
    this.backfillChart(id);
    this.loadDetail(id);
  }

  async backfillChart(id) {
    const chart = this.chart;
    try {
      const res = await api('GET', queryPath('lightpath_transfer_throughput_bytes_per_second', { transfer: id }));
      if (chart !== this.chart) return;
      const sr = (res.series || [])[0];
      if (sr) chart.backfill(sr.points.map(([t, v]) => [t, v == null ? null : v * 8]));
    } catch {
      // the live frames still draw
    }
  }

  async loadDetail(id) {
    clearTimeout(this.detailTimer);
    const seq = ++this.detailSeq;
    let page;
    try {
      page = await api('GET', `api/v1/transfers/${encodeURIComponent(id)}`);
    } catch (err) {
      if (seq === this.detailSeq) show(this.els.status, `could not load ${id}: ${errorText(err)}`, 'error');
      return;
    }
    if (seq !== this.detailSeq || id !== this.selected) return;
    show(this.els.status, '');
    this.renderDetail(page);
    await this.loadStreams(page.transfer, seq);
    if (page.transfer.state === 'running' && seq === this.detailSeq) {
      this.detailTimer = setTimeout(() => this.loadDetail(id), DETAIL_MS);
    }
  }

  renderDetail(page) {
    const t = page.transfer;
    this.page.dataset.state = t.state;
    const r = page.reservation;
    const byPath = t.bytes_by_path || {};
    const dd = (k, ...v) => [h('dt', {}, k), h('dd', {}, ...v)];
    this.els.facts.replaceChildren(
      ...dd('State', h('span', { className: `badge state-${t.state}` }, t.state), t.verified ? ' verified' : '',
        t.error ? h('span', { className: 'error-text' }, ` ${t.error}`) : ''),
      ...dd('Owner', t.owner),
      ...dd('From → to', `${t.source} → ${t.destination}`, t.from ? ` (${t.from} → ${t.to})` : ''),
      ...dd('Progress', progress(t.bytes_done, t.bytes_total), ` · ${formatRate(t.throughput_bps)} · ${t.streams} streams`),
      ...dd('Bytes by path', `reserved ${formatBytes(byPath.reserved || 0)} · routed ${formatBytes(byPath.routed || 0)}`),
      ...dd('Reservation', r
        ? h('span', { id: 'transfer-reservation', dataset: { id: r.id, path: (r.path || []).map((x) => x.link).join(',') } },
          h('code', {}, r.id), ` ${formatRate(r.bandwidth_bps)} · ${r.state} · ${pathText(r.path)}`)
        : (t.reservation ? h('code', {}, t.reservation) : 'none (routed path)')),
      ...dd('Bottleneck', t.bottleneck ? `${t.bottleneck}${t.bottleneck_why ? `: ${t.bottleneck_why}` : ''}` : '—'),
      ...dd('Started', timeEl(t.started_at), t.ended_at ? [' · ended ', timeEl(t.ended_at)] : ''),
    );
    const alerts = page.alerts || [];
    this.els.alerts.replaceChildren(alerts.length === 0
      ? h('p', { className: 'empty' }, 'No alert changed state on its path while it ran.')
      : alertList(alerts));
  }

  // loadStreams reads each stream's series over the transfer: the latest
  // values go in the table, RTT and cwnd to the charts.
  async loadStreams(t, seq) {
    const latest = new Map(); // stream → {rtt, cwnd, …}
    const answers = await Promise.all(STREAM_SERIES.map(([, name]) =>
      api('GET', streamQuery(name, t)).catch(() => null)));
    if (seq !== this.detailSeq || !this.streamCharts) return;
    this.streamCharts.set(answers[0], answers[1]);
    STREAM_SERIES.forEach(([key], i) => {
      for (const sr of answers[i]?.series || []) {
        const st = sr.labels?.stream ?? '?';
        let v = null;
        for (let k = sr.points.length - 1; k >= 0; k--) {
          if (sr.points[k][1] != null) {
            v = sr.points[k][1];
            // Rates are stored in bytes per second; the table shows bit/s.
            if (key === 'pacing' || key === 'delivery') v *= 8;
            break;
          }
        }
        if (!latest.has(st)) latest.set(st, {});
        latest.get(st)[key] = v;
      }
    });
    const body = this.els.streams.tBodies[0];
    const rows = [...latest.entries()].sort((a, b) => Number(a[0]) - Number(b[0]));
    this.els.streams.dataset.streams = String(rows.length);
    body.replaceChildren(...rows.map(([st, v]) => h('tr', { dataset: { stream: st } },
      h('td', {}, st),
      h('td', { className: 'num' }, v.rtt == null ? '—' : `${(v.rtt * 1000).toFixed(1)} ms`),
      h('td', { className: 'num' }, v.cwnd == null ? '—' : String(Math.round(v.cwnd))),
      h('td', { className: 'num' }, v.retrans == null ? '—' : String(Math.round(v.retrans))),
      h('td', { className: 'num' }, v.pacing == null ? '—' : formatRate(v.pacing)),
      h('td', { className: 'num' }, v.delivery == null ? '—' : formatRate(v.delivery)))));
    if (rows.length === 0) body.append(h('tr', { className: 'empty' }, h('td', { colSpan: 6 }, 'No stream state reported.')));
  }
}

// alertList shows alert records: when, rule, the change, the series'
// labels, the reason and each action's result.
export function alertList(records) {
  return h('ul', { className: 'alert-list' }, records.map((a) => h('li', {
    className: `alert to-${a.to}`, dataset: { rule: a.rule, to: a.to },
  },
  timeEl(a.at), ' ',
  h('span', { className: `badge sev-${a.severity}` }, a.severity || 'alert'), ' ',
  h('strong', {}, a.rule), ` ${a.from} → ${a.to}${a.resolved ? ' (resolved)' : ''} `,
  h('span', { className: 'labels' }, Object.entries(a.labels || {}).map(([k, v]) => `${k}=${v}`).join(' ')),
  h('div', { className: 'reason' }, a.reason || ''),
  (a.actions || []).length ? h('ul', { className: 'actions-run' }, a.actions.map((x) => h('li', { className: x.ok ? 'ok' : 'failed' },
    `${x.kind}: ${x.ok ? 'ok' : 'failed'}${x.detail ? ` — ${x.detail}` : ''}`))) : null)));
}
