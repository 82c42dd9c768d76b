// The topology map: an SVG drawing of the topology laid out by site (one
// column per site, hosts on the outer side, routers on the inner side
// facing the other sites), every direction of every link drawn as its
// own line beside its twin. Each direction's line is coloured by its
// measured utilisation (used bps / capacity) from the live frames; under
// it a wide pale band shows the reserved share (reserved bps / capacity).
// Nodes whose agent's lease has lapsed are greyed with a "gone" badge.
// Clicking a line selects that direction (its chart is shown).

import { s } from './dom.js';
import { formatRate, formatRateShort } from './units.js';

const W = 760;
const ROW = 110;
const PAD = 50;
const GAP = 26; // between links joining the same two nodes
const TWIN = 4; // between a link's two directions

export const IDLE = '#8c959f';

// colour maps a utilisation in [0, 1] from green through amber to red.
export function colour(u) {
  const x = Math.max(0, Math.min(1, u));
  return `hsl(${Math.round(130 - 130 * x)} 75% 38%)`;
}

// level names a utilisation for tests and styles.
export function level(bps, u) {
  if (!(bps > 0)) return 'idle';
  if (u < 0.3) return 'low';
  if (u < 0.7) return 'mid';
  return 'high';
}

export class TopoMap {
  constructor({ root, onSelect }) {
    this.root = root;
    this.onSelect = onSelect;
    this.dirs = new Map(); // "link|from" → {line, band, label, title}
    this.nodes = new Map(); // name → {g, badge}
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
      // Routers face the middle of the drawing, hosts the edge.
      const inward = cx < W / 2 ? 1 : cx > W / 2 ? -1 : 0;
      const off = Math.min(95, col / 4);
      layout.push({ site, cx, hosts, routers, hx: cx - inward * off || cx - off, rx: cx + inward * off || cx + off });
    });
    const height = PAD * 2 + (rows - 1) * ROW + 10;
    for (const l of layout) {
      const place = (list, x) => list.forEach((n, k) => {
        const y = PAD + 10 + (height - 2 * PAD - 10) * (list.length === 1 ? 0.5 : k / (list.length - 1));
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
      svg.append(s('rect', { x: l.cx - col / 2 + 8, y: 6, width: col - 16, height: height - 12, rx: 10, className: 'site' }),
        s('text', { x: l.cx, y: 24, className: 'site-name', 'text-anchor': 'middle' }, l.site));
    }
    // Links joining the same two nodes are spread apart.
    const pairs = new Map();
    for (const link of topo.links || []) {
      const key = [link.a, link.b].sort().join('|');
      if (!pairs.has(key)) pairs.set(key, []);
      pairs.get(key).push(link);
    }
    const linkLayer = s('g', { className: 'links' });
    for (const group of pairs.values()) {
      group.forEach((link, k) => {
        const a = pos.get(link.a);
        const b = pos.get(link.b);
        if (!a || !b) return;
        const shift = (k - (group.length - 1) / 2) * GAP;
        linkLayer.append(this.link(link, a, b, shift));
      });
    }
    svg.append(linkLayer);
    const nodeLayer = s('g', { className: 'nodes' });
    for (const { x, y, node } of pos.values()) nodeLayer.append(this.node(node, x, y));
    svg.append(nodeLayer);
    this.root.append(svg);
  }

  link(link, a, b, shift) {
    // The unit normal of a → b, to offset parallel links and directions.
    const dx = b.x - a.x;
    const dy = b.y - a.y;
    const len = Math.hypot(dx, dy) || 1;
    const nx = -dy / len;
    const ny = dx / len;
    const g = s('g', { className: `link role-${link.role || 'routed'}`, dataset: { link: link.name } });
    const mid = { x: (a.x + b.x) / 2 + nx * shift, y: (a.y + b.y) / 2 + ny * shift };
    for (const [from, to, p, q, side] of [[link.a, link.b, a, b, 1], [link.b, link.a, b, a, -1]]) {
      // Each direction keeps to its own side of the link's centre line
      // and stops short of the nodes.
      const o = shift + side * TWIN;
      const trim = 24 / len;
      const x1 = p.x + (q.x - p.x) * trim + nx * o;
      const y1 = p.y + (q.y - p.y) * trim + ny * o;
      const x2 = q.x + (p.x - q.x) * trim + nx * o;
      const y2 = q.y + (p.y - q.y) * trim + ny * o;
      const data = { link: link.name, from, to, capacity: String(link.capacity_bps || 0) };
      const band = s('line', { x1, y1, x2, y2, className: 'reserved-band', 'stroke-width': 0, dataset: data });
      const title = s('title', {}, `${link.name} ${from} → ${to}: no measurement yet · capacity ${formatRate(link.capacity_bps)}`);
      const line = s('line', {
        x1, y1, x2, y2, className: 'dir', stroke: IDLE, tabindex: 0, role: 'button',
        'aria-label': `${link.name} ${from} → ${to}`,
        dataset: { ...data, bps: '0', reservedBps: '0', utilisation: '0', level: 'idle', colour: IDLE },
        onclick: () => this.onSelect(link.name, from),
        onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); this.onSelect(link.name, from); } },
      }, title);
      const lx = (x1 + x2) / 2 + nx * side * 9;
      const ly = (y1 + y2) / 2 + ny * side * 9;
      const label = s('text', { x: lx, y: ly + 4, className: 'dir-label', 'text-anchor': 'middle', dataset: data });
      g.append(band, line, label);
      this.dirs.set(`${link.name}|${from}`, { line, band, label, title, link, from, to });
    }
    const nameX = mid.x + nx * (TWIN + 12) * (Math.abs(nx) > 0.5 ? 1 : 0);
    const nameY = mid.y + (Math.abs(ny) > 0.5 ? ny * (TWIN + 16) : -8);
    g.append(s('text', { x: nameX, y: nameY, className: 'link-name', 'text-anchor': 'middle' }, link.name));
    return g;
  }

  node(n, x, y) {
    const router = n.role === 'router';
    const g = s('g', { className: `node ${router ? 'router' : 'host'}`, dataset: { node: n.name, agent: 'none' } });
    g.append(router
      ? s('rect', { x: x - 18, y: y - 18, width: 36, height: 36, rx: 7 })
      : s('circle', { cx: x, cy: y, r: 18 }));
    g.append(s('text', { x, y: y + 5, 'text-anchor': 'middle', className: 'node-name' }, n.name));
    const badge = s('text', { x, y: y + 33, 'text-anchor': 'middle', className: 'badge-gone' }, 'gone');
    const title = s('title', {}, `${n.name} (${n.role || 'host'}, ${n.site})`);
    g.append(badge, title);
    this.nodes.set(n.name, { g, badge, title, n });
    return g;
  }

  // setAgents marks each node's agent: alive, gone (lease lapsed) or none.
  setAgents(agents) {
    const by = new Map(agents.map((a) => [a.node, a]));
    for (const [name, { g, title, n }] of this.nodes) {
      const a = by.get(name);
      const state = !a ? 'none' : a.alive ? 'alive' : 'gone';
      g.dataset.agent = state;
      title.textContent = `${name} (${n.role || 'host'}, ${n.site}) · agent: ` +
        (state === 'none' ? 'none registered' : state === 'alive' ? `alive, lease until ${new Date(a.lease_expires).toLocaleTimeString()}`
          : `gone since ${new Date(a.lease_expires).toLocaleString()}`);
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
      this.paint(d, l.bps || 0, l.capacity_bps || d.link.capacity_bps || 0, l.reserved_bps || 0, l.t > 0);
    }
    for (const d of this.dirs.values()) if (!seen.has(d)) this.paint(d, 0, d.link.capacity_bps || 0, 0, false);
  }

  paint(d, bps, cap, reserved, measured) {
    const u = cap ? bps / cap : 0;
    const lv = level(bps, u);
    const stroke = lv === 'idle' ? IDLE : colour(u);
    d.line.setAttribute('stroke', stroke);
    d.line.setAttribute('stroke-width', String(lv === 'idle' ? 2 : 3 + 3 * Math.min(1, u)));
    Object.assign(d.line.dataset, {
      bps: String(Math.round(bps)), reservedBps: String(reserved), utilisation: u.toFixed(4), level: lv, colour: stroke,
      measured: String(measured),
    });
    d.band.setAttribute('stroke-width', reserved && cap ? String(4 + 14 * Math.min(1, reserved / cap)) : '0');
    const parts = [];
    if (bps > 0) parts.push(formatRateShort(bps));
    if (reserved) parts.push(`r ${formatRateShort(reserved)}`);
    d.label.textContent = parts.join(' / ');
    d.title.textContent = `${d.link.name} ${d.from} → ${d.to}: ` +
      (measured ? `used ${formatRate(bps)} (${(100 * u).toFixed(1)}%)` : 'no measurement') +
      ` · reserved ${formatRate(reserved)} · capacity ${formatRate(cap)}`;
  }

  select(link, from) {
    for (const [k, d] of this.dirs) d.line.classList.toggle('selected', k === `${link}|${from}`);
  }
}
