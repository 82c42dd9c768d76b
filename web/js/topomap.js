// The topology map: an SVG drawing of the topology laid out by site (one
// column per site, hosts on the outer side, routers on the inner side
// facing the other sites), every direction of every link drawn as its
// own line beside its twin, links joining the same two nodes spread
// apart. Each direction's line is coloured by its measured utilisation
// (used bps / capacity) from the live frames; under it a wide pale band
// shows the reserved share (reserved bps / capacity). Each direction's
// label (an arrow and its rates) sits beside its own line, on its own side,
// at the first of a few places along its line that collides with no node,
// line or other label; each link's name once, on the link's middle.
// Directions with a firing alert get a red dashed outline and the rule's
// name in their tooltip; nodes with one (an alert on the node with no
// link), a red dashed ring. Nodes whose agent's lease has lapsed are
// greyed with a "gone" badge. Clicking a line selects that direction.

import { s } from './dom.js';
import { formatRate, formatRateShort } from './units.js';

const W = 1200; // the drawing's width in user units; it scales to the page
const ROW = 170; // between nodes of one column
const PAD = 64; // above the first and below the last row
const GAP = 46; // between the centre lines of links joining the same two nodes
const TWIN = 5; // from a link's centre line to each direction's line
const R = 20; // a node's radius
const CHAR = 6.4; // the width of a label's character at 11px, about
const LABEL_CHARS = 15; // room kept for "→ 999M / r 999M"
const LABEL_H = 14;

export const IDLE = '#8c959f';
// Under this a direction is drawn idle (the agents' own few kbit/s), as
// the link charts collapse it; its label and tooltip still give the rate.
export const QUIET_BPS = 1e6;

// colour maps a utilisation in [0, 1] from green through amber to red.
export function colour(u) {
  const x = Math.max(0, Math.min(1, u));
  return `hsl(${Math.round(130 - 130 * x)} 75% 38%)`;
}

// level names a utilisation for tests and styles: idle under QUIET_BPS.
export function level(bps, u) {
  if (!(bps >= QUIET_BPS)) return 'idle';
  if (u < 0.3) return 'low';
  if (u < 0.7) return 'mid';
  return 'high';
}

// arrow is the glyph pointing along (dx, dy) in screen coordinates.
function arrow(dx, dy) {
  const k = Math.round(Math.atan2(dy, dx) / (Math.PI / 4));
  return ['←', '↖', '↑', '↗', '→', '↘', '↓', '↙', '←'][k + 4];
}

// Boxes are {x0, y0, x1, y1}.
function overlaps(a, b) {
  return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

// crosses says whether the segment p–q passes through box b (Liang–Barsky).
function crosses(p, q, b) {
  let t0 = 0;
  let t1 = 1;
  const dx = q.x - p.x;
  const dy = q.y - p.y;
  for (const [pp, qq] of [[-dx, p.x - b.x0], [dx, b.x1 - p.x], [-dy, p.y - b.y0], [dy, b.y1 - p.y]]) {
    if (pp === 0) {
      if (qq < 0) return false;
      continue;
    }
    const r = qq / pp;
    if (pp < 0) {
      if (r > t1) return false;
      if (r > t0) t0 = r;
    } else {
      if (r < t0) return false;
      if (r < t1) t1 = r;
    }
  }
  return true;
}

// boxAt is the w×h box touching the point p from the side o (a unit vector).
function boxAt(p, o, w, h, gap) {
  const reach = Math.abs(o.x) * (w / 2) + Math.abs(o.y) * (h / 2) + gap;
  const cx = p.x + o.x * reach;
  const cy = p.y + o.y * reach;
  return { x0: cx - w / 2, y0: cy - h / 2, x1: cx + w / 2, y1: cy + h / 2, cx, cy };
}

export class TopoMap {
  constructor({ root, onSelect }) {
    this.root = root;
    this.onSelect = onSelect;
    this.dirs = new Map(); // "link|from" → {line, band, halo, label, title, …}
    this.nodes = new Map(); // name → {g, badge, title, n}
    this.alerts = []; // the firing instances last set
  }

  clear() {
    this.root.replaceChildren();
    this.dirs.clear();
    this.nodes.clear();
  }

  render(topo) {
    this.clear();
    const sites = (topo.sites || []).map((x) => x.name);
    for (const n of topo.nodes || []) if (!sites.includes(n.site)) sites.push(n.site);
    const col = W / Math.max(1, sites.length);
    const pos = new Map();
    let rows = 1;
    const layout = [];
    sites.forEach((site, i) => {
      const nodes = (topo.nodes || []).filter((n) => n.site === site);
      const hosts = nodes.filter((n) => n.role !== 'router');
      const routers = nodes.filter((n) => n.role === 'router');
      rows = Math.max(rows, hosts.length, routers.length);
      const cx = col * (i + 0.5);
      // Routers face the middle of the drawing, hosts the edge; a site
      // in the middle keeps its hosts on the left.
      const inward = cx < W / 2 ? 1 : cx > W / 2 ? -1 : 1;
      const off = Math.min(190, col * 0.27);
      layout.push({ site, cx, hosts, routers, hx: cx - inward * off, rx: cx + inward * off });
    });
    const height = PAD * 2 + (rows - 1) * ROW + 20;
    for (const l of layout) {
      const place = (list, x) => list.forEach((n, k) => {
        const y = PAD + 20 + (height - 2 * PAD - 20) * (list.length === 1 ? 0.5 : k / (list.length - 1));
        pos.set(n.name, { x, y, node: n });
      });
      place(l.hosts, l.hx);
      place(l.routers, l.rx);
    }
    const svg = s('svg', {
      viewBox: `0 0 ${W} ${height}`, role: 'img', 'aria-label': `Topology ${topo.name || ''}: links coloured by utilisation`,
      className: 'map', id: 'topomap-svg',
    });
    svg.append(s('title', {}, `Topology ${topo.name || ''}`));
    for (const l of layout) {
      svg.append(s('rect', { x: l.cx - col / 2 + 8, y: 6, width: col - 16, height: height - 12, rx: 12, className: 'site' }),
        s('text', { x: l.cx, y: 26, className: 'site-name', 'text-anchor': 'middle' }, l.site));
    }
    // Links joining the same two nodes are spread apart.
    const pairs = new Map();
    for (const link of topo.links || []) {
      const key = [link.a, link.b].sort().join('|');
      if (!pairs.has(key)) pairs.set(key, []);
      pairs.get(key).push(link);
    }
    const bandLayer = s('g', { className: 'bands' });
    const linkLayer = s('g', { className: 'links' });
    const nameLayer = s('g', { className: 'link-names' });
    const labelLayer = s('g', { className: 'labels' });
    const segs = []; // every direction's line, for placing labels
    const names = []; // {link, x, y}
    const pending = []; // directions whose labels are placed once all lines are known
    for (const group of pairs.values()) {
      // Keep the order of the pair's own ends, so that shifts line up.
      const [p0, p1] = [group[0].a, group[0].b];
      group.forEach((link, k) => {
        const a = pos.get(link.a);
        const b = pos.get(link.b);
        if (!a || !b) return;
        let shift = (k - (group.length - 1) / 2) * GAP;
        if (link.a !== p0 || link.b !== p1) shift = -shift; // the normal flips with a link drawn the other way
        const made = this.link(link, a, b, shift);
        bandLayer.append(...made.bands);
        linkLayer.append(made.g);
        segs.push(...made.segs);
        names.push(made.name);
        pending.push(...made.dirs);
      });
    }
    // Place each link's name on its middle, then each direction's label
    // where it hits nothing placed yet.
    const taken = [];
    for (const { x, y } of pos.values()) taken.push({ x0: x - R - 3, y0: y - R - 3, x1: x + R + 3, y1: y + R + 3 });
    for (const n of names) {
      const w = n.text.length * CHAR + 6;
      taken.push({ x0: n.x - w / 2, y0: n.y - LABEL_H / 2, x1: n.x + w / 2, y1: n.y + LABEL_H / 2 });
      nameLayer.append(s('text', { x: n.x, y: n.y, className: 'link-name', 'text-anchor': 'middle', 'dominant-baseline': 'central', dataset: { link: n.text } }, n.text));
    }
    for (const d of pending) {
      const box = this.placeLabel(d, segs, taken);
      taken.push(box);
      d.label.setAttribute('x', box.cx.toFixed(1));
      d.label.setAttribute('y', box.cy.toFixed(1));
      labelLayer.append(d.label);
    }
    svg.append(bandLayer, linkLayer, nameLayer, labelLayer);
    const nodeLayer = s('g', { className: 'nodes' });
    for (const { x, y, node } of pos.values()) nodeLayer.append(this.node(node, x, y));
    svg.append(nodeLayer);
    this.root.append(svg);
    this.setAlerts(this.alerts);
  }

  // placeLabel tries places along the direction's line, starting on the
  // half by its from-node, on its own side, near then farther; it takes
  // the first that meets nothing, or else the one that meets least.
  placeLabel(d, segs, taken) {
    const w = LABEL_CHARS * CHAR;
    let best = null;
    for (const gap of [4, 16]) {
      for (const t of [0.3, 0.22, 0.38, 0.5, 0.62, 0.14]) {
        const p = { x: d.p.x + (d.q.x - d.p.x) * t, y: d.p.y + (d.q.y - d.p.y) * t };
        const box = boxAt(p, d.out, w, LABEL_H, gap);
        let hits = 0;
        for (const b of taken) if (overlaps(box, b)) hits += 2;
        for (const sg of segs) if (crosses(sg.p, sg.q, box)) hits++;
        if (!best || hits < best.hits) best = { box, hits };
        if (hits === 0) return box;
      }
    }
    return best.box;
  }

  link(link, a, b, shift) {
    // The unit normal of a → b, to offset parallel links and directions.
    const dx = b.x - a.x;
    const dy = b.y - a.y;
    const len = Math.hypot(dx, dy) || 1;
    const nx = -dy / len;
    const ny = dx / len;
    const g = s('g', { className: `link role-${link.role || 'routed'}`, dataset: { link: link.name } });
    const bands = [];
    const segs = [];
    const dirs = [];
    for (const [from, to, p, q, side] of [[link.a, link.b, a, b, 1], [link.b, link.a, b, a, -1]]) {
      // Each direction keeps to its own side of the link's centre line
      // and stops short of the nodes.
      const o = shift + side * TWIN;
      const trim = (R + 6) / len;
      const x1 = p.x + (q.x - p.x) * trim + nx * o;
      const y1 = p.y + (q.y - p.y) * trim + ny * o;
      const x2 = q.x + (p.x - q.x) * trim + nx * o;
      const y2 = q.y + (p.y - q.y) * trim + ny * o;
      const data = { link: link.name, from, to, capacity: String(link.capacity_bps || 0) };
      const band = s('line', { x1, y1, x2, y2, className: 'reserved-band', 'stroke-width': 0, dataset: data });
      const halo = s('line', { x1, y1, x2, y2, className: 'alert-halo', dataset: data });
      const title = s('title', {}, `${link.name} ${from} → ${to}: no measurement yet · capacity ${formatRate(link.capacity_bps)}`);
      const line = s('line', {
        x1, y1, x2, y2, className: 'dir', stroke: IDLE, tabindex: 0, role: 'button',
        'aria-label': `${link.name} ${from} → ${to}`,
        dataset: { ...data, bps: '0', reservedBps: '0', utilisation: '0', level: 'idle', colour: IDLE, alerts: '' },
        onclick: () => this.onSelect(link.name, from),
        onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); this.onSelect(link.name, from); } },
      }, title);
      const glyph = arrow(x2 - x1, y2 - y1);
      const label = s('text', { className: 'dir-label', 'text-anchor': 'middle', 'dominant-baseline': 'central', dataset: { ...data, level: 'idle' } });
      bands.push(band);
      g.append(halo, line);
      segs.push({ p: { x: x1, y: y1 }, q: { x: x2, y: y2 } });
      const d = {
        line, band, halo, label, title, link, from, to, glyph,
        p: { x: x1, y: y1 }, q: { x: x2, y: y2 }, out: { x: nx * side, y: ny * side },
        bps: 0, reserved: 0, cap: link.capacity_bps || 0, measured: false, rules: [],
      };
      dirs.push(d);
      this.dirs.set(`${link.name}|${from}`, d);
    }
    const name = { text: link.name, x: (a.x + b.x) / 2 + nx * shift, y: (a.y + b.y) / 2 + ny * shift };
    return { g, bands, segs, dirs, name };
  }

  node(n, x, y) {
    const router = n.role === 'router';
    const g = s('g', { className: `node ${router ? 'router' : 'host'}`, dataset: { node: n.name, agent: 'none', alerts: '' } });
    g.append(router
      ? s('rect', { x: x - R, y: y - R, width: 2 * R, height: 2 * R, rx: 7 })
      : s('circle', { cx: x, cy: y, r: R }));
    g.append(s('circle', { cx: x, cy: y, r: R + 7, className: 'node-alert' }));
    g.append(s('text', { x, y: y + 5, 'text-anchor': 'middle', className: 'node-name' }, n.name));
    const badge = s('text', { x, y: y + R + 16, 'text-anchor': 'middle', className: 'badge-gone' }, 'gone');
    const title = s('title', {}, `${n.name} (${n.role || 'host'}, ${n.site})`);
    g.append(badge, title);
    this.nodes.set(n.name, { g, badge, title, n, agent: '', rules: [] });
    return g;
  }

  // setAgents marks each node's agent: alive, gone (lease lapsed) or none.
  setAgents(agents) {
    const by = new Map(agents.map((a) => [a.node, a]));
    for (const [name, nd] of this.nodes) {
      const a = by.get(name);
      const state = !a ? 'none' : a.alive ? 'alive' : 'gone';
      nd.g.dataset.agent = state;
      nd.agent = state === 'none' ? 'none registered' : state === 'alive' ? `alive, lease until ${new Date(a.lease_expires).toLocaleTimeString()}`
        : `gone since ${new Date(a.lease_expires).toLocaleString()}`;
      this.nodeTitle(nd);
    }
  }

  nodeTitle(nd) {
    const { n } = nd;
    nd.title.textContent = `${n.name} (${n.role || 'host'}, ${n.site})` + (nd.agent ? ` · agent: ${nd.agent}` : '') +
      (nd.rules.length ? ` · firing: ${nd.rules.join(', ')}` : '');
  }

  // setAlerts marks what the firing alert instances (GET /api/v1/alerts'
  // status.instances) name: a series with a link label marks that link's
  // direction from its from label, or both directions without one; a
  // series with a node label and no link marks the node.
  setAlerts(instances) {
    this.alerts = instances || [];
    for (const d of this.dirs.values()) d.rules = [];
    for (const nd of this.nodes.values()) nd.rules = [];
    for (const i of this.alerts) {
      if (i.state !== 'firing') continue;
      const lb = i.labels || {};
      if (lb.link) {
        for (const d of this.dirs.values()) {
          if (d.link.name === lb.link && (!lb.from || lb.from === d.from) && !d.rules.includes(i.rule)) d.rules.push(i.rule);
        }
      } else if (lb.node && this.nodes.has(lb.node)) {
        const nd = this.nodes.get(lb.node);
        if (!nd.rules.includes(i.rule)) nd.rules.push(i.rule);
      }
    }
    for (const d of this.dirs.values()) {
      const on = d.rules.length > 0;
      d.line.dataset.alerts = d.rules.join(' ');
      d.line.classList.toggle('alerting', on);
      d.halo.classList.toggle('on', on);
      d.label.classList.toggle('alerting', on);
      this.paint(d);
    }
    for (const nd of this.nodes.values()) {
      nd.g.dataset.alerts = nd.rules.join(' ');
      nd.g.classList.toggle('alerting', nd.rules.length > 0);
      this.nodeTitle(nd);
    }
  }

  // update colours every direction from a live frame; directions not in
  // the frame are idle (no measurement and no reservation).
  update(frame) {
    const seen = new Set();
    for (const l of frame.links || []) {
      const d = this.dirs.get(`${l.link}|${l.from}`);
      if (!d) continue;
      seen.add(d);
      Object.assign(d, { bps: l.bps || 0, cap: l.capacity_bps || d.link.capacity_bps || 0, reserved: l.reserved_bps || 0, measured: l.t > 0 });
      this.paint(d);
    }
    for (const d of this.dirs.values()) {
      if (seen.has(d)) continue;
      Object.assign(d, { bps: 0, cap: d.link.capacity_bps || 0, reserved: 0, measured: false });
      this.paint(d);
    }
  }

  paint(d) {
    const { bps, cap, reserved, measured } = d;
    const u = cap ? bps / cap : 0;
    const lv = level(bps, u);
    const stroke = lv === 'idle' ? IDLE : colour(u);
    d.line.setAttribute('stroke', stroke);
    d.line.setAttribute('stroke-width', String(lv === 'idle' ? 2 : 3 + 3 * Math.min(1, u)));
    Object.assign(d.line.dataset, {
      bps: String(Math.round(bps)), reservedBps: String(reserved), utilisation: u.toFixed(4), level: lv, colour: stroke,
      measured: String(measured),
    });
    d.band.setAttribute('stroke-width', reserved && cap ? String(5 + 14 * Math.min(1, reserved / cap)) : '0');
    const parts = [];
    if (bps > 0) parts.push(formatRateShort(bps));
    if (reserved) parts.push(`r ${formatRateShort(reserved)}`);
    d.label.textContent = parts.length || d.rules.length ? `${d.rules.length ? '⚠ ' : ''}${d.glyph} ${parts.join(' / ')}`.trim() : '';
    d.label.dataset.level = lv;
    d.title.textContent = `${d.link.name} ${d.from} → ${d.to}: ` +
      (measured ? `used ${formatRate(bps)} (${(100 * u).toFixed(1)}%)` : 'no measurement') +
      ` · reserved ${formatRate(reserved)} · capacity ${formatRate(cap)}` +
      (d.rules.length ? ` · firing: ${d.rules.join(', ')}` : '');
  }

  select(link, from) {
    for (const [k, d] of this.dirs) d.line.classList.toggle('selected', k === `${link}|${from}`);
  }
}
