// The live dashboard: the topology map, throughput per link direction and
// the transfers, all following one live metrics stream; the agents'
// leases polled for the map; the alerts polled for their panel and for
// the map, which marks the links and nodes with a firing alert.

import { api } from './api.js';
import { Alerts } from './alerts.js';
import { Jobs } from './jobs.js';
import { LinkCharts } from './linkcharts.js';
import { LiveStream } from './live.js';
import { TopoMap } from './topomap.js';
import { Transfers } from './transfers.js';

const AGENTS_MS = 10000;

export class Dashboard {
  constructor({ map, charts, showIdleCharts, idleChartsCount, liveStatus, transfersTable, transferPage, transfersStatus, jobs, alertsPanel, alerts, alertsStatus, onClosed }) {
    this.charts = new LinkCharts({ root: charts, showIdle: showIdleCharts, idleCount: idleChartsCount });
    this.map = new TopoMap({
      root: map,
      onSelect: (link, from) => {
        this.map.select(link, from);
        this.charts.select(link, from);
      },
    });
    this.transfers = new Transfers({ table: transfersTable, page: transferPage, status: transfersStatus });
    this.jobs = new Jobs(jobs);
    this.alerts = new Alerts({ panel: alertsPanel, root: alerts, status: alertsStatus, onStatus: (instances) => this.map.setAlerts(instances) });
    this.live = new LiveStream({
      status: liveStatus,
      onFrame: (frame) => {
        this.map.update(frame);
        this.charts.update(frame);
        this.transfers.update(frame);
      },
      onClosed,
    });
    this.agentsTimer = 0;
  }

  start(token, topo) {
    this.stop();
    if (topo) {
      this.map.render(topo);
      this.charts.setTopology(topo);
    }
    this.charts.backfill();
    this.transfers.start();
    this.jobs.start();
    this.alerts.start();
    this.pollAgents();
    this.live.start(token);
  }

  stop() {
    clearTimeout(this.agentsTimer);
    this.live.stop();
    this.transfers.stop();
    this.jobs.stop();
    this.alerts.stop();
    this.charts.clear();
    this.map.clear();
  }

  async pollAgents() {
    clearTimeout(this.agentsTimer);
    this.agentsTimer = setTimeout(() => this.pollAgents(), AGENTS_MS);
    try {
      const res = await api('GET', 'api/v1/agents');
      this.map.setAgents(res.agents || []);
    } catch {
      // the next poll tries again; a 401 signs out
    }
  }
}
