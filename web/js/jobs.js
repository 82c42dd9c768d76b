// Jobs: the transfer service's jobs (GET /api/v1/jobs) with their state,
// the one line saying what each waits for or why it failed, progress per
// job and per node pair with the reservation behind each pair, and the
// optimizer's decisions of the job opened (GET /api/v1/jobs/{id}
// ?files=FAILED&limit=20&optimizer=1: its first 20 failed files). Above
// them the aggregates the SC|05 bandwidth challenge reported: throughput
// summed over every running job, per site in and out, and the running
// total of bytes moved, charted live.

import { api, errorText } from './api.js';
import { h, show, timeEl } from './dom.js';
import { LiveChart } from './livechart.js';
import { formatBytes } from './transfers.js';
import { formatRate } from './units.js';

const POLL_MS = 2000;
const ENDPOINTS_MS = 15000;

function pct(done, total) {
  if (!total) return 0;
  return Math.min(100, Math.floor((100 * done) / total));
}

function bar(done, total, label) {
  const p = pct(done, total);
  return h('span', { className: 'bar', title: label || `${p}%`, role: 'progressbar', 'aria-valuenow': p, 'aria-valuemin': 0, 'aria-valuemax': 100 },
    h('span', { className: 'fill', style: `width:${p}%` }));
}

function endpointOf(loc) {
  const i = (loc || '').indexOf(':');
  return i < 0 ? '' : loc.slice(0, i);
}

export class Jobs {
  constructor({ table, page, status, totals, chart }) {
    this.table = table;
    this.body = table.tBodies[0];
    this.page = page;
    this.status = status;
    this.totals = totals;
    this.chartEl = chart;
    this.chart = null;
    this.sites = new Map(); // endpoint name → site
    this.selected = '';
    this.picked = false;
    this.timer = 0;
    this.epTimer = 0;
    this.seq = 0;
    this.detailSeq = 0;
  }

  start() {
    if (!this.chart) {
      this.chart = new LiveChart(this.chartEl, { series: [{ label: 'all jobs', stroke: '#1f6feb', fill: 'rgba(31,111,235,0.12)' }] });
    }
    this.refreshEndpoints();
    this.refresh();
  }

  stop() {
    clearTimeout(this.timer);
    clearTimeout(this.epTimer);
    this.seq++;
    this.detailSeq++;
    if (this.chart) this.chart.destroy();
    this.chart = null;
    this.body.replaceChildren();
    this.page.replaceChildren();
    this.page.hidden = true;
    this.totals.replaceChildren();
    this.selected = '';
    this.picked = false;
  }

  async refreshEndpoints() {
    clearTimeout(this.epTimer);
    this.epTimer = setTimeout(() => this.refreshEndpoints(), ENDPOINTS_MS);
    try {
      const res = await api('GET', 'api/v1/endpoints');
      this.sites = new Map((res.endpoints || []).map((e) => [e.name, e.site || e.name]));
    } catch {
      // the next poll tries again; a 401 signs out
    }
  }

  async refresh() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.refresh(), POLL_MS);
    const seq = ++this.seq;
    let res;
    try {
      res = await api('GET', 'api/v1/jobs?limit=20');
    } catch (err) {
      if (seq === this.seq) show(this.status, `could not load the jobs: ${errorText(err)}`, 'error');
      return;
    }
    if (seq !== this.seq) return;
    show(this.status, '');
    const jobs = res.jobs || [];
    this.renderTotals(jobs);
    this.render(jobs);
    if (this.selected) this.loadDetail(this.selected);
  }

  // renderTotals sums what the listed jobs say: throughput of the running
  // ones, per site out (their source's) and in (their destination's), and
  // the bytes every listed job has moved.
  renderTotals(jobs) {
    let sum = 0;
    let moved = 0;
    const out = new Map();
    const inn = new Map();
    for (const j of jobs) {
      moved += j.bytes_done || 0;
      if (j.state !== 'ACTIVE') continue;
      const bps = j.throughput_bps || 0;
      sum += bps;
      const src = this.sites.get(endpointOf((j.sources || [])[0])) || endpointOf((j.sources || [])[0]);
      const dst = this.sites.get(endpointOf(j.destination)) || endpointOf(j.destination);
      out.set(src, (out.get(src) || 0) + bps);
      inn.set(dst, (inn.get(dst) || 0) + bps);
    }
    if (this.chart) this.chart.push(Date.now() / 1000, [sum]);
    const sites = [...new Set([...out.keys(), ...inn.keys()])].sort();
    this.totals.replaceChildren(
      h('div', { className: 'total' }, h('span', { className: 'label' }, 'Throughput, all jobs'), h('strong', { id: 'jobs-throughput', dataset: { bps: String(sum) } }, formatRate(sum))),
      h('div', { className: 'total' }, h('span', { className: 'label' }, 'Moved so far'), h('strong', { id: 'jobs-moved', dataset: { bytes: String(moved) } }, formatBytes(moved))),
      ...sites.map((s) => h('div', { className: 'total site', dataset: { site: s } }, h('span', { className: 'label' }, s),
        `out ${formatRate(out.get(s) || 0)} · in ${formatRate(inn.get(s) || 0)}`)));
  }

  render(jobs) {
    this.body.replaceChildren();
    if (jobs.length === 0) {
      this.body.append(h('tr', { className: 'empty' }, h('td', { colSpan: 7 }, 'No jobs yet: lightpath transfer submit SITE-A:data SITE-B:in --deadline +2h hands one over.')));
    }
    for (const j of jobs) {
      const tr = h('tr', { dataset: { id: j.id, state: j.state }, tabIndex: 0, className: 'pick' },
        h('td', {}, h('code', {}, j.id)),
        h('td', {}, j.owner),
        h('td', { className: 'nodes' }, `${(j.sources || []).join(' ')} → ${j.destination}`),
        h('td', {}, h('span', { className: `badge state-${j.state.toLowerCase()}` }, j.state), j.reason ? h('div', { className: 'reason' }, j.reason) : null),
        h('td', { className: 'num' }, bar(j.bytes_done, j.bytes_total), ` ${j.files_done}/${j.files_total} files, ${formatBytes(j.bytes_done)} of ${formatBytes(j.bytes_total)}`),
        h('td', { className: 'num' }, formatRate(j.throughput_bps)),
        h('td', {}, j.deadline ? timeEl(j.deadline) : '—'));
      const pick = () => {
        this.picked = true;
        this.open(j.id);
      };
      tr.addEventListener('click', pick);
      tr.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') pick();
      });
      tr.classList.toggle('selected', j.id === this.selected);
      this.body.append(tr);
    }
    const follow = jobs.find((j) => j.state === 'ACTIVE' || j.state === 'SCHEDULED');
    if (!this.picked && follow && follow.id !== this.selected) this.open(follow.id);
  }

  open(id) {
    this.selected = id;
    for (const tr of this.body.rows) tr.classList.toggle('selected', tr.dataset.id === id);
    this.page.hidden = false;
    this.page.dataset.id = id;
    this.loadDetail(id);
  }

  async loadDetail(id) {
    const seq = ++this.detailSeq;
    let p;
    try {
      p = await api('GET', `api/v1/jobs/${encodeURIComponent(id)}?files=FAILED&limit=20&optimizer=1`);
    } catch (err) {
      if (seq === this.detailSeq) this.page.replaceChildren(h('p', { className: 'error-text' }, `could not load job ${id}: ${errorText(err)}`));
      return;
    }
    if (seq !== this.detailSeq || id !== this.selected) return;
    const j = p.job;
    const pairs = h('table', { id: 'job-pairs', className: 'streams' },
      h('caption', {}, 'Node pairs'),
      h('thead', {}, h('tr', {}, ...['from → to', 'progress', 'reservation', 'rate', 'window', 'tasks × streams', 'path'].map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, ...(j.pairs || []).map((pr) => h('tr', { dataset: { from: pr.from, to: pr.to } },
        h('td', {}, `${pr.from} → ${pr.to}`),
        h('td', { className: 'num' }, bar(pr.bytes_done, pr.share_bytes || j.bytes_total), ` ${formatBytes(pr.bytes_done)}`),
        h('td', {}, pr.reservation ? h('code', {}, pr.reservation) : '—'),
        h('td', { className: 'num' }, pr.rate_bps ? formatRate(pr.rate_bps) : 'unreserved'),
        h('td', {}, pr.start ? [timeEl(pr.start), ' – ', timeEl(pr.end)] : '—'),
        h('td', { className: 'num' }, pr.concurrency ? `${pr.concurrency} × ${pr.streams || '?'}` : '—'),
        h('td', {}, pr.routed ? h('span', { className: 'error-text' }, `routed: ${pr.routed}`) : (pr.reservation ? 'reserved' : 'routed'))))));
    const failed = (p.files || []).filter((f) => f.state === 'FAILED');
    const decisions = (p.decisions || []).slice(0, 10);
    this.page.replaceChildren(...[
      h('h3', {}, 'Job ', h('code', {}, j.id), ' ', h('span', { className: `badge state-${j.state.toLowerCase()}` }, j.state)),
      h('p', { className: 'reason' }, j.reason || ''),
      h('dl', { className: 'facts' },
        h('dt', {}, 'Files'), h('dd', {}, `${j.files_done} of ${j.files_total} arrived verified, ${j.files_failed} failed`),
        h('dt', {}, 'Bytes'), h('dd', {}, `${formatBytes(j.bytes_done)} of ${formatBytes(j.bytes_total)}`),
        h('dt', {}, 'Deadline'), h('dd', {}, j.deadline ? timeEl(j.deadline) : 'none (runs at once on what is free)'),
        j.algorithm ? [h('dt', {}, 'Booked by'), h('dd', {}, j.algorithm)] : null),
      pairs,
      failed.length ? h('div', {}, h('h4', {}, 'Failed files'), h('ul', { className: 'failed-files' }, ...failed.slice(0, 20).map((f) => h('li', {}, h('code', {}, f.path), `: ${f.error}`)))) : null,
      h('h4', {}, 'Optimizer'),
      decisions.length
        ? h('ul', { id: 'job-decisions', className: 'alert-list' }, ...decisions.map((d) => h('li', {}, timeEl(d.at), ` ${d.from} → ${d.to}: ${d.reason}`)))
        : h('p', { className: 'empty' }, 'No decisions yet.'),
    ].filter(Boolean));
  }
}
