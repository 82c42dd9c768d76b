package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/monitor/alert"
	"github.com/lightpath/lightpath/internal/monitor/repo"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer/registry"
	"github.com/lightpath/lightpath/internal/units"
	"github.com/lightpath/lightpath/web"
)

func newControllerCmd() *cobra.Command {
	var (
		listens                    []string
		dbURL, topoFile, adminFile string
		cert, key, pool            string
		pathPref                   string
		holdTimeout                time.Duration
		debug                      bool
		metricsDB, tiers, rulesF   string
		budget                     string
		rulesEvery                 time.Duration
		partMin, partSize          string
		limits                     limitFlags
		maxConns, maxStreams       int
		maxConnsPerClient          int
		unauthTimeout              time.Duration
	)
	cmd := &cobra.Command{
		Use:   "controller --listen HOST:PORT [--listen unix:PATH] [--db URL] [--topology FILE]",
		Short: "Run the reservation service: topology, advance reservations, REST API and web UI",
		Long: `Run Lightpath's controller: it books directed bandwidth on a topology in
advance, with exact admission control, answers scheduling questions (the
earliest slot, the widest path, the earliest completion of a transfer), and
serves the REST API under /api/v1 (described at /api/v1/openapi.json), an
event stream of state changes and the web UI at /.

The database is SQLite (--db sqlite:PATH, the default) or PostgreSQL
(--db postgres://...); its schema is migrated forward on start, and every
timed transition missed while the controller was down (a hold expiring, a
start, an end) is caught up before it serves anything.

The topology is a testbed topology file. It is kept in the database: a
restart without --topology keeps the last one, and a different file is a
reload, refused if it would strand live reservations.

A fresh controller creates the user "admin" and writes its token to
--admin-token-file (mode 0600); a token already there is kept. Clients send
it as "Authorization: Bearer TOKEN" (the CLI reads --controller-token-file or
LIGHTPATH_CONTROLLER_TOKEN).

--listen may be given several times; unix:PATH serves on a unix socket,
which processes inside a testbed's namespaces can reach.

One controller leads a database at a time. A second started on the same
--db (by any path to the same SQLite file) waits as a standby (logged):
its TCP listeners answer /api/v1/health with "role": "standby" and
everything else 503, and it binds its unix sockets only once it leads.
When the leader dies it takes over, loading the state from the database.
A leader that loses the lead (on PostgreSQL, its lock connection fails;
on either, another raised the leader epoch) exits non-zero (restart it:
it comes back as the standby). Clients take several URLs, comma-separated, and follow the
leader (docs/controller.md).

The monitoring repository keeps what the agents push (and what transfers
report) in compressed chunks, in its own SQLite file (--metrics-db; by
default beside an SQLite database, named *-metrics.db, or
./lightpath-metrics.db with PostgreSQL), so it never slows reservations. Its
tiers keep raw samples 3 hours, 1-minute averages 7 days and 10-minute
averages 180 days (--metrics-tiers), and it stays within --metrics-budget,
dropping the oldest data first. The agents' series appear on /metrics
labelled by node, and are queried at /api/v1/metrics/query. Transfers that
cp registers (cp --controller, implied by --reserve) are kept there too.

--rules FILE runs alerting rules (see docs/monitoring.md): every
--rules-interval (5 s) each rule's expression is evaluated on the repository's series;
a series whose condition holds for the rule's "for" duration fires, and
the rule's actions run: log, webhook, command, or reroute (move the
reservations crossing the series' link to another admissible path). Every
state change is kept with its reason and shown on the pages of the
transfers whose path it touches. The file is re-read when it changes; a
file that does not parse is refused with its line, and the rules in force
stay.

Per-user limits (--max-tokens-per-user, --max-reservations-per-user,
--max-live-transfers-per-user, --max-streams-per-report) keep one account
from growing the controller without end: a request past one is answered
429 naming the flag. /metrics is open to scrapers unless
--metrics-require-token, and carries no series of single connections or
transfers. Agents are bound to their nodes (docs/controller.md).

Connections are bounded: a request's header must arrive within 10 s and
the whole request within a minute, an answer is written within a minute
(each frame of a stream gets the minute anew, so streams live on), and a
keep-alive connection idle for 2 minutes is closed; one that has not yet
authenticated (no request with a valid token) within --unauth-timeout
(5 s). --max-conns caps the connections open at once (over it, a
connection gets a 503 and is closed; keep it below the process's
descriptor limit), --max-conns-per-client those not yet authenticated from
one client address (over it, a 503) and --max-streams the event and live
streams one user may hold open (over it, a 429).`,
		Example: `  lightpath controller --listen 127.0.0.1:8080 --topology examples/two-site.yaml \
      --admin-token-file ./admin.token
  lightpath controller --listen 127.0.0.1:8080 --listen unix:/run/lightpath/two-site/controller.sock \
      --db postgres://lightpath@localhost/lightpath --admin-token-file /etc/lightpath/admin.token
  lightpath controller --listen 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem --db sqlite:/var/lib/lightpath/db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			lvl := slog.LevelInfo
			if debug {
				lvl = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl})).With("component", "controller")
			return runController(cmd.Context(), log, controllerOptions{listens: listens, db: dbURL, topology: topoFile,
				adminFile: adminFile, cert: cert, key: key, pool: pool, pathPref: pathPref, hold: holdTimeout,
				metricsDB: metricsDB, tiers: tiers, budget: budget, rules: rulesF, rulesEvery: rulesEvery, limits: limits,
				maxConns: maxConns, maxStreams: maxStreams, partMin: partMin, partSize: partSize,
				maxConnsPerClient: maxConnsPerClient, unauthTimeout: unauthTimeout})
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&listens, "listen", []string{"127.0.0.1:8080"}, "where to serve: HOST:PORT or unix:PATH (repeatable)")
	f.StringVar(&dbURL, "db", "sqlite:lightpath.db", "database: sqlite:PATH or postgres://...")
	f.StringVar(&topoFile, "topology", "", "topology file to schedule on (kept in the database)")
	f.StringVar(&adminFile, "admin-token-file", "", "where a fresh controller writes the admin token (kept if valid)")
	f.StringVar(&cert, "tls-cert", "", "TLS certificate (PEM) for the TCP listeners")
	f.StringVar(&key, "tls-key", "", "TLS private key (PEM)")
	f.StringVar(&pool, "dscp-pool", "", "DSCP values for reservations that steer flows (default af11-af43,cs1-cs5)")
	f.DurationVar(&holdTimeout, "hold-timeout", controller.DefaultMaxHold, "the longest hold a client may ask for")
	f.StringVar(&pathPref, "path-preference", string(reserve.PreferDedicated),
		"which of the paths with room reservations take: dedicated (circuits first, routed links only for what does not fit), routed (the shortest path, routed links before dedicated ones) or shortest (fewest hops, whatever the links' roles)")
	f.BoolVar(&debug, "debug", false, "log every request that fails, not only server errors")
	f.StringVar(&metricsDB, "metrics-db", "", "the monitoring repository's SQLite file (default beside --db), or \"none\" to keep no metrics")
	f.StringVar(&tiers, "metrics-tiers", "raw:3h,1m:7d,10m:180d", "the repository's tiers: STEP:RETENTION,... (raw first)")
	f.StringVar(&budget, "metrics-budget", "4GiB", "the most disk the repository may use; past it the oldest data is dropped")
	f.StringVar(&rulesF, "rules", "", "alerting rules file (YAML); re-read when it changes")
	f.DurationVar(&rulesEvery, "rules-interval", alert.DefaultInterval, "how often the rules are evaluated")
	limits.register(f)
	f.IntVar(&maxConns, "max-conns", 1000, "the most connections open at once, over all listeners (more get a 503)")
	f.IntVar(&maxConnsPerClient, "max-conns-per-client", api.DefaultMaxConnsPerClient, "the most connections not yet authenticated one client address may hold open (more get a 503)")
	f.DurationVar(&unauthTimeout, "unauth-timeout", api.DefaultUnauthTimeout, "how long a connection that has not authenticated may sit idle or take to send a request's header")
	f.IntVar(&maxStreams, "max-streams", api.DefaultMaxStreams, "the most event and live streams one user may hold open (more get a 429)")
	f.StringVar(&partMin, "transfer-part-min", "1GiB", "the transfer service cuts files of at least this size into parts (0: never)")
	f.StringVar(&partSize, "transfer-part-size", "256MiB", "the size of a part of a large file (rounded up to the mover's 4 MiB blocks)")
	return cmd
}

type controllerOptions struct {
	listens                 []string
	db, topology, adminFile string
	cert, key, pool         string
	pathPref                string
	hold                    time.Duration
	metricsDB, tiers        string
	budget, rules           string
	rulesEvery              time.Duration
	limits                  limitFlags
	maxConns, maxStreams    int
	maxConnsPerClient       int
	unauthTimeout           time.Duration
	partMin, partSize       string
}

// partSizes reads --transfer-part-min and --transfer-part-size as the
// service's Config.PartMinBytes and Config.PartBytes (a minimum of 0 never
// cuts: -1 to the service).
func partSizes(minS, sizeS string) (int64, int64, error) {
	minB, err := units.ParseSize(minS)
	if err != nil {
		return 0, 0, fmt.Errorf("controller: --transfer-part-min: %w", err)
	}
	size, err := units.ParseSize(sizeS)
	if err != nil {
		return 0, 0, fmt.Errorf("controller: --transfer-part-size: %w", err)
	}
	if size <= 0 {
		return 0, 0, fmt.Errorf("controller: --transfer-part-size %s: want a size above zero", sizeS)
	}
	if minB == 0 {
		minB = -1
	}
	return minB, size, nil
}

// rerouter lets the rules move reservations through the controller.
func rerouter(c *controller.Controller) alert.Rerouter {
	return func(ctx context.Context, rule string, links []string, from, why string) ([]string, error) {
		rs, err := c.RerouteAround(ctx, rule, links, from, why)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, r := range rs {
			if r.Moved {
				out = append(out, fmt.Sprintf("%s moved to %s", r.ID, client.PathString(r.Path)))
			} else {
				out = append(out, fmt.Sprintf("%s stays: %s", r.ID, r.Reason))
			}
		}
		return out, nil
	}
}

// metricsPath is where the repository lives: --metrics-db, or beside an
// SQLite database (x.db → x-metrics.db), or in the working directory.
func metricsPath(o controllerOptions) string {
	if o.metricsDB != "" {
		return o.metricsDB
	}
	if p, ok := strings.CutPrefix(o.db, "sqlite:"); ok && p != "" && !strings.HasPrefix(p, ":memory:") {
		return strings.TrimSuffix(p, filepath.Ext(p)) + "-metrics.db"
	}
	return "lightpath-metrics.db"
}

// importMetricsFile carries the transfers and alert history that the
// first wave kept in the metrics file into the store, once, and says so.
func importMetricsFile(ctx context.Context, log *slog.Logger, st store.Store, path string) error {
	imp, err := store.ImportMetricsFile(ctx, st, path)
	if err != nil {
		return err
	}
	if !imp.Found || imp.Already {
		return nil
	}
	for _, why := range imp.SkippedWhy {
		log.Warn("not imported from the metrics file", "file", path, "why", why)
	}
	log.Info("imported the transfers and alert history of the metrics file into the database (the old tables are left in the file, no longer used)",
		"file", path, "transfers", imp.Transfers, "alerts", imp.Alerts, "already_there", imp.Present, "skipped", imp.Skipped)
	return nil
}

func runController(ctx context.Context, log *slog.Logger, o controllerOptions) error {
	if err := o.limits.check(); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if o.maxConns < 1 {
		return fmt.Errorf("controller: --max-conns %d: want at least 1", o.maxConns)
	}
	if o.maxConnsPerClient < 1 {
		return fmt.Errorf("controller: --max-conns-per-client %d: want at least 1", o.maxConnsPerClient)
	}
	if o.unauthTimeout <= 0 {
		return fmt.Errorf("controller: --unauth-timeout %v: want a duration above zero", o.unauthTimeout)
	}
	if o.maxStreams < 1 {
		return fmt.Errorf("controller: --max-streams %d: want at least 1", o.maxStreams)
	}
	if o.rulesEvery <= 0 {
		return fmt.Errorf("controller: --rules-interval %v: want a duration above zero", o.rulesEvery)
	}
	pref, err := reserve.ParsePathPreference(o.pathPref)
	if err != nil {
		return fmt.Errorf("controller: --path-preference: %w", err)
	}
	var tlsCfg *tls.Config
	if o.cert != "" || o.key != "" {
		if o.cert == "" || o.key == "" {
			return errors.New("controller: --tls-cert and --tls-key go together")
		}
		pair, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return fmt.Errorf("controller: load TLS certificate: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	var dscp reserve.DSCPPool
	if o.pool != "" {
		var err error
		if dscp, err = reserve.ParseDSCPPool(o.pool); err != nil {
			return fmt.Errorf("controller: --dscp-pool: %w", err)
		}
	}
	var topo *controller.Topo
	if o.topology != "" {
		b, err := os.ReadFile(o.topology)
		if err != nil {
			return fmt.Errorf("controller: read topology: %w", err)
		}
		if topo, err = controller.ParseTopology(filepath.Base(o.topology), b); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
	}
	if p, ok := strings.CutPrefix(o.db, "sqlite:"); ok && p != "" && p != ":memory:" {
		// A fresh host has no /var/lib/lightpath: make the directory the
		// database (and the monitoring repository beside it) goes in.
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			return fmt.Errorf("controller: open database: %w", err)
		}
	}
	kind := "sqlite"
	if strings.HasPrefix(o.db, "postgres") {
		kind = "postgres"
	}

	// The TCP listeners are bound at once and, while another controller
	// leads on the database, answer as a standby (health says so, the
	// rest is 503), so clients given several URLs move on to the leader.
	// A controller that leads at once serves only once it is ready, as
	// before. The unix sockets, which clients share by path, are bound
	// only once this one leads.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	limit := api.NewConnLimit(o.maxConns, o.maxConnsPerClient)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	hopts := api.DefaultHTTPOptions()
	hopts.MaxStreams = o.maxStreams
	hopts.UnauthTimeout = o.unauthTimeout
	gate := api.NewGate(Version, kind)
	srv := gate.HTTPServer(ctx, hopts)
	errc := make(chan error, len(o.listens))
	webURL := "" // the first TCP listener's, for the sign-in link
	// Bound listeners not yet served. "listening" is logged when one starts
	// answering: a leader's only once it is ready (its admin token
	// written), which is what scripts and tests wait for.
	type boundListener struct {
		ln        net.Listener
		addr, url string
	}
	var pending []boundListener
	serveAll := func() {
		for _, b := range pending {
			log.Info("listening", "addr", b.addr, "url", b.url)
			go func() { errc <- srv.Serve(b.ln) }()
		}
		pending = nil
	}
	bind := func(l string) error {
		ln, err := listen(l, tlsCfg, limit)
		if err != nil {
			return fmt.Errorf("controller: listen on %s: %w", l, err)
		}
		lns = append(lns, ln)
		scheme := "http"
		if tlsCfg != nil && !strings.HasPrefix(l, "unix:") {
			scheme = "https"
		}
		addr := ln.Addr().String()
		if ln.Addr().Network() == "unix" {
			scheme, addr = "unix", strings.TrimPrefix(l, "unix:")
		}
		if webURL == "" && scheme != "unix" {
			webURL = scheme + "://" + browserAddr(ln.Addr())
		}
		pending = append(pending, boundListener{ln, addr, scheme + "://" + addr})
		return nil
	}
	var c *controller.Controller
	var stopOnce sync.Once
	shutdown := func() {
		stopOnce.Do(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			if c != nil {
				c.Close() // ends the event streams, so Shutdown need not wait for them
			}
			srv.Shutdown(sctx)
		})
	}
	defer shutdown()
	for _, l := range o.listens {
		if !strings.HasPrefix(l, "unix:") {
			if err := bind(l); err != nil {
				return err
			}
		}
	}
	var standbyMu sync.Mutex
	lead, err := store.Lead(ctx, o.db, func() {
		log.Info("standby: another controller leads on this database; waiting")
		standbyMu.Lock()
		serveAll()
		standbyMu.Unlock()
	})
	if err != nil {
		if ctx.Err() != nil {
			log.Info("shutting down")
			return nil
		}
		return fmt.Errorf("controller: open database: %w", err)
	}
	defer lead.Release()
	st := lead.Store()
	defer st.Close()
	log.Info("leading", "epoch", lead.Epoch())
	c, err = controller.Open(ctx, controller.Config{Store: st, StoreKind: kind, Topology: topo, DSCPPool: dscp, PathPreference: pref, MaxHold: o.hold, Limits: o.limits.controller(), Log: log})
	if err != nil {
		c = nil
		return fmt.Errorf("controller: %w", err)
	}
	if o.adminFile != "" {
		wrote, err := c.BootstrapAdmin(ctx, o.adminFile)
		if err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		if wrote {
			log.Info("wrote a new admin token", "file", o.adminFile)
		}
	} else if us, err := st.ListUsers(ctx); err != nil {
		return fmt.Errorf("controller: %w", err)
	} else if len(us) == 0 {
		return errors.New("controller: the database has no users yet: give --admin-token-file F and the admin's token is written there")
	}

	scfg := api.ServiceConfig(c)
	scfg.Log = log.With("component", "service")
	if scfg.PartMinBytes, scfg.PartBytes, err = partSizes(o.partMin, o.partSize); err != nil {
		return err
	}
	svc, err := service.New(ctx, scfg)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	handler := api.NewServer(c, web.FS, Version, log).RequireMetricsToken(o.limits.metricsToken).WithService(svc)
	if mp := metricsPath(o); mp != "none" {
		tiers, err := repo.ParseTiers(o.tiers)
		if err != nil {
			return fmt.Errorf("controller: --metrics-tiers: %w", err)
		}
		budget, err := units.ParseSize(o.budget)
		if err != nil {
			return fmt.Errorf("controller: --metrics-budget: %w", err)
		}
		rp, err := repo.Open(ctx, repo.Options{Path: mp, Tiers: tiers, Budget: int64(budget), Log: log.With("component", "repository")})
		if err != nil {
			return fmt.Errorf("controller: open the monitoring repository: %w", err)
		}
		defer func() {
			if err := rp.Close(); err != nil {
				log.Error("close the monitoring repository", "err", err)
			}
		}()
		handler.WithRepository(rp)
		log.Info("monitoring repository", "path", mp, "tiers", o.tiers, "budget", o.budget)
		if err := importMetricsFile(ctx, log, st, mp); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		tr := registry.New(st, nil)
		tr.SetLimits(o.limits.transfer())
		handler.WithTransfers(tr)
		hist := alert.NewHistory(st)
		ev := alert.New(alert.Options{Source: alert.RepoSource(rp), History: hist, Reroute: rerouter(c), Interval: o.rulesEvery,
			Log: log.With("component", "rules")})
		if o.rules != "" {
			if err := ev.Load(o.rules); err != nil {
				return fmt.Errorf("controller: --rules: %w", err)
			}
		}
		handler.WithAlerts(ev, hist)
		evalCtx, stopEval := context.WithCancel(ctx)
		evalDone := make(chan struct{})
		go func() { ev.Run(evalCtx); close(evalDone) }()
		defer func() { stopEval(); <-evalDone }()
	} else if o.rules != "" {
		return errors.New("controller: --rules needs the monitoring repository (not --metrics-db none)")
	}
	for _, l := range o.listens {
		if strings.HasPrefix(l, "unix:") {
			if err := bind(l); err != nil {
				return err
			}
		}
	}
	if o.adminFile != "" {
		abs, err := filepath.Abs(o.adminFile)
		if err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		handler.WithSignIn(abs)
		if webURL != "" {
			printSignInLink(ctx, log, c, handler, abs, webURL)
		}
	}

	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx) })
	wg.Go(func() { svc.Run(ctx) })
	gate.Lead(handler)
	standbyMu.Lock()
	serveAll()
	standbyMu.Unlock()
	lost := false
	select {
	case <-ctx.Done():
	case err = <-errc:
	case <-lead.Lost():
		lost = true
	}
	// Stop serving before the deferred closes of the stores and the
	// release of the lead.
	log.Info("shutting down")
	shutdown()
	cancel()
	wg.Wait()
	if lost {
		// The lock's connection failed or another controller raised the
		// epoch: a standby may lead already, and writes would fail on the
		// fence anyway. Exit non-zero so a supervisor restarts this one,
		// as a standby.
		return fmt.Errorf("controller: lost the lead on the database (%v): another controller may lead; restart to stand by", lead.Err())
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("controller: serve: %w", err)
	}
	return nil
}

// signInTTL is how long the sign-in link printed at start works.
const signInTTL = 10 * time.Minute

// printSignInLink logs a link that signs the web UI in once, within
// signInTTL, as the user whose token is in the admin token file: a new
// user opens it instead of looking for the token.
func printSignInLink(ctx context.Context, log *slog.Logger, c *controller.Controller, h *api.Server, adminFile, webURL string) {
	b, err := os.ReadFile(adminFile)
	if err != nil {
		return
	}
	a, err := c.Authenticate(ctx, strings.TrimSpace(string(b)))
	if err != nil {
		return
	}
	code, exp, err := h.NewSignInCode(a.Name, signInTTL)
	if err != nil {
		log.Warn("no sign-in link", "err", err)
		return
	}
	log.Info(fmt.Sprintf("sign in to the web UI with this link (once, within %d minutes)", int(signInTTL.Minutes())),
		"url", webURL+"/#/signin?code="+code, "user", a.Name, "expires", exp.UTC().Format(time.RFC3339))
}

// browserAddr is a listener's address as a browser on this host reaches
// it: a wildcard address becomes the loopback one.
func browserAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// listen opens a TCP listener (with TLS when configured) or a unix socket,
// replacing a stale socket file left by a controller that died; limit
// caps its connections.
func listen(addr string, tlsCfg *tls.Config, limit *api.ConnLimit) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" {
			return nil, errors.New("unix: needs a path")
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if conn, err := net.Dial("unix", path); err == nil {
				conn.Close()
				return nil, fmt.Errorf("%s is in use by a running server", path)
			}
			os.Remove(path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, err
		}
		// Access is by token, so the socket itself may be open to all,
		// which lets agents running as other users reach it.
		os.Chmod(path, 0o666)
		return limit.Wrap(ln, true), nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ln = limit.Wrap(ln, tlsCfg == nil)
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	return ln, nil
}
