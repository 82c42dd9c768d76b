-- A metrics file as the first wave's controller left it: the tables its
-- transfer registry and alert history created beside the monitoring
-- repository's (their CREATE statements copied from that code), with rows
-- as it wrote them: a transfer's document is the JSON of
-- transfer.Transfer, an alert record's value is NULL when there was none.
-- Written by storetest.FirstWaveMetricsFile for ImportMetricsFile's tests
-- (internal/store) and the controller's
-- (test/e2e); statements end with a semicolon at the end of a line.
CREATE TABLE IF NOT EXISTS transfers (
		id TEXT PRIMARY KEY,
		owner TEXT NOT NULL,
		started_ms INTEGER NOT NULL,
		state TEXT NOT NULL,
		doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS transfers_started ON transfers(started_ms);
CREATE INDEX IF NOT EXISTS transfers_owner_state ON transfers(owner, state);
CREATE TABLE IF NOT EXISTS alert_history (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		at_ms INTEGER NOT NULL,
		rule TEXT NOT NULL,
		severity TEXT NOT NULL,
		series TEXT NOT NULL,
		labels TEXT NOT NULL,
		from_state TEXT NOT NULL,
		to_state TEXT NOT NULL,
		resolved INTEGER NOT NULL,
		value REAL,
		threshold REAL NOT NULL,
		reason TEXT NOT NULL,
		actions TEXT NOT NULL DEFAULT '[]');
CREATE INDEX IF NOT EXISTS alert_history_at ON alert_history(at_ms);
INSERT INTO transfers (state, doc, id, owner, started_ms) VALUES ('succeeded', '{"id":"t-0a1b2c3d4e5f","owner":"alice","state":"succeeded","direction":"push","source":"big.h5","destination":"lp://b1:7070/","from":"a1","to":"b1","flow":"tcp 198.18.1.1 > 198.18.2.1:7070","reservation":"r-4f2a","streams":4,"bytes_total":1073741824,"bytes_done":1073741824,"bytes_by_path":{"reserved":1000000000,"routed":73741824},"throughput_bps":912000000.5,"started_at":"2026-11-20T09:00:00.123456789Z","updated_at":"2026-11-20T09:00:12.5Z","ended_at":"2026-11-20T09:00:12.5Z","verified":true,"bottleneck":"reservation","bottleneck_why":"the reservation''s 1 Gbit/s"}', 't-0a1b2c3d4e5f', 'alice', 1763629200123);
INSERT INTO transfers (state, doc, id, owner, started_ms) VALUES ('running', '{"id":"t-111111111111","owner":"bob","state":"running","direction":"pull","source":"lp://b1:7070/d","destination":"d","streams":1,"bytes_total":0,"bytes_done":5000,"throughput_bps":40000,"started_at":"2026-11-20T10:00:00Z","updated_at":"2026-11-20T10:00:01Z","verified":false}', 't-111111111111', 'bob', 1763632800000);
INSERT INTO transfers (state, doc, id, owner, started_ms) VALUES ('failed', '{"id":"t-222222222222","owner":"alice","state":"failed","direction":"push","source":"ünïcode dir","destination":"lp://b1:7070/x","streams":2,"bytes_total":10,"bytes_done":3,"throughput_bps":0,"started_at":"2026-11-21T08:00:00Z","updated_at":"2026-11-21T08:00:05Z","ended_at":"2026-11-21T08:00:05Z","verified":false,"error":"connection reset"}', 't-222222222222', 'alice', 1763712000000);
INSERT INTO alert_history (at_ms, rule, severity, series, labels, from_state, to_state, resolved, value, threshold, reason, actions) VALUES (1763629205000, 'wan-busy', 'critical', 'lightpath_link_utilisation_ratio', '{"from":"ra","link":"wan","to":"rb"}', 'pending', 'firing', 0, 0.93, 0.8, 'wan from ra: last over 30s 0.93 > 0.8', '[{"kind":"log","ok":true},{"kind":"reroute","ok":true,"detail":"r-4f2a moved=true"}]');
INSERT INTO alert_history (at_ms, rule, severity, series, labels, from_state, to_state, resolved, value, threshold, reason, actions) VALUES (1763629265000, 'wan-busy', 'critical', 'lightpath_link_utilisation_ratio', '{"from":"ra","link":"wan","to":"rb"}', 'firing', 'ok', 1, NULL, 0.8, 'no samples over 30s', '[]');
INSERT INTO alert_history (at_ms, rule, severity, series, labels, from_state, to_state, resolved, value, threshold, reason, actions) VALUES (1763712003000, 'node-down', 'warning', 'lightpath_agent_up', '{"node":"h1"}', 'ok', 'pending', 0, 0, 1, 'h1: last over 10s 0 < 1', '[]');
