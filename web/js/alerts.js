// The alerts panel (GET /api/v1/alerts): the rules in force, every series
// that is pending or firing, and the latest state changes with their
// reasons and action results. It refreshes every 5 s, open or closed (it
// is open unless the user closed it; the choice is remembered), and hands
// every series' state to onStatus (the map marks what is firing). A
// controller that keeps no metrics (--metrics-db none) answers 404, shown
// as "no rules".

import { api, errorText } from './api.js';
import { h, show, timeEl } from './dom.js';
import { alertList } from './transfers.js';

const REFRESH_MS = 5000;
const OPEN_KEY = 'lightpath.alerts-open';

export class Alerts {
  constructor({ panel, root, status, onStatus = () => {} }) {
    this.panel = panel;
    this.onStatus = onStatus;
    this.root = root;
    this.status = status;
    this.timer = 0;
    this.seq = 0;
    this.running = false;
    try {
      panel.open = localStorage.getItem(OPEN_KEY) !== '0';
    } catch {
      // storage refused: start open
    }
    panel.addEventListener('toggle', () => {
      try {
        localStorage.setItem(OPEN_KEY, panel.open ? '1' : '0');
      } catch {
        // not remembered
      }
    });
  }

  start() {
    this.running = true;
    this.refresh();
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
    this.seq++;
    this.root.replaceChildren();
    this.onStatus([]);
  }

  async refresh() {
    clearTimeout(this.timer);
    if (!this.running) return;
    this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
    const seq = ++this.seq;
    let res;
    try {
      res = await api('GET', 'api/v1/alerts?limit=30');
    } catch (err) {
      if (seq !== this.seq) return;
      if (err.status === 404) {
        this.onStatus([]);
        this.root.dataset.rules = '0';
        this.root.replaceChildren(h('p', { className: 'empty', id: 'no-rules' },
          'No rules: this controller keeps no metrics, so it evaluates none.'));
        show(this.status, '');
        return;
      }
      show(this.status, `could not load the alerts: ${errorText(err)}`, 'error');
      return;
    }
    if (seq !== this.seq) return;
    const firing = (res.status?.instances || []).filter((i) => i.state === 'firing').length;
    show(this.status, `${firing ? `${firing} firing · ` : ''}updated ${new Date().toLocaleTimeString()}`, firing ? 'error' : 'info');
    this.onStatus(res.status?.instances || []);
    this.render(res);
  }

  render(res) {
    const st = res.status || {};
    const rules = st.rules || [];
    const active = (st.instances || []).filter((i) => i.state !== 'ok');
    this.root.dataset.rules = String(rules.length);
    this.root.dataset.firing = String(active.filter((i) => i.state === 'firing').length);
    this.root.replaceChildren(
      h('p', { className: 'hint' }, st.file ? `rules from ${st.file}` : 'rules', st.loaded_at ? [', loaded ', timeEl(st.loaded_at)] : '',
        st.load_error ? h('span', { className: 'error-text' }, ` · the last reload was refused: ${st.load_error}`) : ''),
      h('h4', {}, `Firing and pending (${active.length})`),
      active.length === 0 ? h('p', { className: 'empty' }, 'Nothing firing or pending.')
        : h('ul', { className: 'alert-list' }, active.map((i) => h('li', { className: `alert to-${i.state}`, dataset: { rule: i.rule, to: i.state } },
          h('span', { className: `badge sev-${i.severity}` }, i.severity || 'alert'), ' ', h('strong', {}, i.rule), ` ${i.state}`,
          i.since ? [' since ', timeEl(i.since)] : '', i.value != null ? ` · value ${Number(i.value.toPrecision(4))}` : '', ' ',
          h('span', { className: 'labels' }, Object.entries(i.labels || {}).map(([k, v]) => `${k}=${v}`).join(' '))))),
      h('h4', {}, `Rules (${rules.length})`),
      rules.length === 0 ? h('p', { className: 'empty', id: 'no-rules' }, 'No rules in force (start the controller with --rules FILE).')
        : h('table', { className: 'rules' },
          h('thead', {}, h('tr', {}, ...['rule', 'condition', 'for', 'severity', 'actions'].map((x) => h('th', { scope: 'col' }, x)))),
          h('tbody', {}, rules.map((r) => h('tr', { dataset: { rule: r.name } },
            h('td', {}, r.name), h('td', {}, h('code', {}, `${r.expr} ${r.op} ${r.threshold}`)), h('td', {}, r.for || '0s'),
            h('td', {}, r.severity), h('td', {}, (r.actions || []).join(', ')))))),
      h('h4', {}, 'Latest changes'),
      (res.history || []).length === 0 ? h('p', { className: 'empty' }, 'No state changes yet.') : alertList(res.history),
    );
  }
}
