package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/datanode"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/units"
)

func newServeCmd() *cobra.Command {
	var (
		listen, root, tokenFile, cert, key, logFile, cc string
		readOnly                                        bool
		idle, stall, partialTTL, handshake              time.Duration
		maxSessions, maxPerClient                       int
		maxHandshakes, maxHandshakesPerClient           int
		maxFileSize                                     string
		dn                                              dataNodeFlags
	)
	cmd := &cobra.Command{
		Use:   "serve --listen HOST:PORT --root DIR",
		Short: "Serve a directory to Lightpath clients",
		Long: `Serve DIR to lightpath cp and lightpath bench clients.

Every connection of a session, control and data, comes to the one listen
port, so one firewall rule (and one flow spec) covers a transfer. The
server listens for UDP on the same port number too: the data streams of a
session whose client asks for --transport udp come there (its control
connection stays TCP), each datagram authenticated with a key of that
session. Nothing
outside DIR is ever read or written: paths with .., absolute paths and
symlinks that lead out are refused.

With --token-file (or LIGHTPATH_TOKEN) clients must prove they hold the
same token; it never crosses the network. With --tls-cert and --tls-key
every connection is TLS (clients give --tls-ca).

A transfer log, one JSON line per file and per session, goes to stdout or
to --transfer-log. SIGTERM and SIGINT shut down cleanly: partial files and
their journals stay for a later cp to resume.

A pushed file is accepted only if it fits: its size within --max-file-size
and its data within the filesystem's free space; otherwise the client is
told how much room it needs. Partial files nobody has written for
--partial-ttl are removed as abandoned, at start and periodically. One
client address holds at most --max-sessions-per-client sessions at once.
Connections that have not yet joined a session are capped per client
address (--max-handshakes-per-client) and overall (--max-handshakes); one
more is closed at once, and one idle past --handshake-timeout is closed.

--cc sets the congestion control of the server's sockets in sessions whose
client names none (a client's --cc wins): what the server sends, in a pull
or a bench --reverse, runs under it; on a data node, its pushes of tasks
whose job names none too. Any the kernel offers: bbr, cubic, reno, or fast
(FAST TCP) once lightpath cc install fast has loaded it (as root). Default:
bbr where the kernel has it, cubic to loopback peers.

With --controller, the server is also a data node of the transfer service
(see docs/service.md): it registers with the controller as node --node of
endpoint --endpoint (one site's storage: every data node of an endpoint
serves the same files under its --root), keeps a lease with heartbeats,
and runs the tasks the controller hands it: listing a job's sources, and
pushing batches of files to another data node's server. Its own server then
takes a push only with a grant the controller signed for this node and that
task's current attempt (and still the --token-file's token, when given).
Data nodes call the controller; the controller never calls them, and a
controller that cannot be reached (a restart, a failover to its standby)
is waited for. The controller token (--controller-token-file or
LIGHTPATH_CONTROLLER_TOKEN) is of role agent, bound to --node or to no node
(the data node then makes one bound to its node, as lightpath agent does).
Other data nodes push to --advertise (default: --listen, when it names a
host). --max-tasks is how many tasks it runs at once, and --max-rate caps
what it sends: the controller books deadline jobs within it (a booked task
is paced at its booked rate), and a task without a booking is paced at an
equal share of it among the tasks running as it starts. With --tls-cert and
--tls-key a data node serves over TLS, and --tls-ca (which then must be
given) verifies the other data nodes' certificates as it pushes to them:
the grants and the data cross the network encrypted. Every data node of a
deployment then needs a certificate for the host it advertises.`,
		Example: `  lightpath serve --listen 0.0.0.0:7070 --root /data
  lightpath serve --listen [::]:7070 --root /data --token-file /etc/lightpath/token
  lightpath serve --listen 127.0.0.1:7070 --root /srv/pub --read-only
  lightpath serve --listen 0.0.0.0:7070 --root /data --controller https://lp.example.org:8443 \
      --controller-token-file /etc/lightpath/dtn1.token --node dtn1 --endpoint cern \
      --advertise dtn1.example.org:7070 --max-rate 10G`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if listen == "" || root == "" {
				return errors.New("serve: --listen and --root are required")
			}
			if err := dn.check(cmd, listen); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			if err := checkCC(cc); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			token, err := readToken(tokenFile)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			var tlsCfg *tls.Config
			if cert != "" || key != "" {
				if cert == "" || key == "" {
					return errors.New("serve: --tls-cert and --tls-key go together")
				}
				pair, err := tls.LoadX509KeyPair(cert, key)
				if err != nil {
					return fmt.Errorf("serve: load TLS certificate: %w", err)
				}
				tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}
			}
			var tlog io.Writer = cmd.OutOrStdout()
			if logFile != "" {
				f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				if err != nil {
					return fmt.Errorf("serve: open transfer log: %w", err)
				}
				defer f.Close()
				tlog = f
			}
			maxSize, err := units.ParseSize(maxFileSize)
			if err != nil || maxSize <= 0 {
				return fmt.Errorf("serve: --max-file-size %q: want a size such as 16TiB", maxFileSize)
			}
			if partialTTL <= 0 {
				partialTTL = -1 // never: the server takes 0 as its default
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			scfg := mover.ServerConfig{
				Root: root, Token: token, TLS: tlsCfg, ReadOnly: readOnly, Logger: logger,
				TransferLog: tlog, IdleTimeout: idle, StallTimeout: stall, MaxSessions: maxSessions,
				MaxSessionsPerClient: maxPerClient, MaxFileSize: maxSize, PartialTTL: partialTTL, CC: cc,
				MaxHandshakes: maxHandshakes, MaxHandshakesPerClient: maxHandshakesPerClient, HandshakeTimeout: handshake,
			}
			var verifier *grant.Verifier
			if dn.on() {
				verifier = grant.NewVerifier(dn.node, nil)
				scfg.Grants = verifier
			}
			srv, err := mover.NewServer(scfg)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			defer srv.Close()
			ln, err := transport.TCP.Listen(cmd.Context(), listen, transport.Options{DSCP: -1})
			if err != nil {
				return fmt.Errorf("serve: listen: %w", err)
			}
			// UDP on the same port number (the one bound, for --listen
			// HOST:0), for the data of sessions that ask for it.
			host, _, _ := net.SplitHostPort(listen)
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			uln, err := srv.ListenUDP(cmd.Context(), net.JoinHostPort(host, port))
			if err != nil {
				ln.Close()
				return fmt.Errorf("serve: listen for UDP on port %s too: %w", port, err)
			}
			logger.Info("serving", "root", root, "listen", ln.Addr().String(), "udp", uln.Addr().String(), "tls", tlsCfg != nil,
				"token", len(token) > 0, "read_only", readOnly)
			if dn.on() {
				// Pushes to the other data nodes: TLS when this one serves
				// TLS (check makes --tls-ca come with it); the server name
				// is each destination's host.
				var pushTLS *tls.Config
				if pushTLS, err = clientTLS(dn.tlsCA, ""); err != nil {
					return fmt.Errorf("serve: %w", err)
				}
				err = dn.serve(cmd.Context(), srv, ln, uln, datanode.Config{Root: root, Verifier: verifier, Token: token,
					TLS: pushTLS, CC: cc, Logger: logger.With("component", "datanode")})
			} else {
				err = srv.Serve(cmd.Context(), ln, uln)
			}
			logger.Info("stopped")
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "", "address to listen on, HOST:PORT ([::]:7070 for IPv6 and IPv4)")
	f.StringVar(&root, "root", "", "directory to serve; nothing outside it is read or written")
	f.StringVar(&tokenFile, "token-file", "", "file holding the token clients must prove (default: $LIGHTPATH_TOKEN; none: open)")
	f.StringVar(&cert, "tls-cert", "", "TLS certificate (PEM); with --tls-key, every connection is TLS")
	f.StringVar(&key, "tls-key", "", "TLS private key (PEM)")
	f.BoolVar(&readOnly, "read-only", false, "refuse every write (serve downloads only)")
	f.StringVar(&logFile, "transfer-log", "", "append the transfer log here instead of stdout")
	f.DurationVar(&idle, "idle-timeout", 10*time.Second, "drop connections that do not finish their handshake or join in time")
	f.DurationVar(&stall, "stall-timeout", 30*time.Second, "free a session whose connections make no progress (or stay idle) for this long")
	f.IntVar(&maxSessions, "max-sessions", 64, "concurrent sessions before new ones are told to come back later")
	f.IntVar(&maxPerClient, "max-sessions-per-client", 16, "concurrent sessions one client address may hold")
	f.IntVar(&maxHandshakes, "max-handshakes", mover.DefaultMaxHandshakes, "connections not yet in a session, overall; more are closed at once")
	f.IntVar(&maxHandshakesPerClient, "max-handshakes-per-client", mover.DefaultMaxHandshakesPerClient, "connections not yet in a session from one client address; more are closed at once")
	f.DurationVar(&handshake, "handshake-timeout", mover.DefaultHandshakeTimeout, "close a connection that has not sent its request or joined a session in this long (at most --idle-timeout)")
	f.StringVar(&maxFileSize, "max-file-size", "16TiB", "largest file a client may push")
	registerCC(f, &cc)
	f.DurationVar(&partialTTL, "partial-ttl", mover.DefaultPartialTTL, "remove partial files nobody has written for this long (0: never)")
	dn.register(f)
	return cmd
}

// dataNodeFlags are serve's flags for a data node of the transfer service
// (--controller and what goes with it).
type dataNodeFlags struct {
	ctl                ctlFlags
	node, endpoint     string
	advertise, maxRate string
	maxTasks           int
	lease              time.Duration
	maxRateBps         uint64
	listen             string
	tlsCA              string
}

func (d *dataNodeFlags) register(f *pflag.FlagSet) {
	d.ctl.timeout = client.DefaultTimeout
	f.StringVar(&d.ctl.url, "controller", "", "be a data node of the transfer service, registered with this controller (several comma-separated: a leader and its standbys)")
	f.StringVar(&d.ctl.tokenFile, "controller-token-file", "", "with --controller: file holding the data node's controller token, of role agent (default: $LIGHTPATH_CONTROLLER_TOKEN)")
	f.StringVar(&d.ctl.caFile, "controller-ca", "", "with --controller: CA certificate (PEM) to verify an https controller with")
	f.StringVar(&d.node, "node", "", "with --controller: this data node's node in the controller's topology")
	f.StringVar(&d.endpoint, "endpoint", "", "with --controller: the endpoint (one site's storage) this data node serves")
	f.StringVar(&d.advertise, "advertise", "", "with --controller: HOST:PORT other data nodes push to (default: --listen, when it names a host)")
	f.StringVar(&d.maxRate, "max-rate", "", "with --controller: the most this data node sends, e.g. 10G, shared among its running tasks (default: no cap)")
	f.IntVar(&d.maxTasks, "max-tasks", datanode.DefaultMaxTasks, "with --controller: tasks run at once")
	f.DurationVar(&d.lease, "lease", datanode.DefaultLease, "with --controller: how long a heartbeat keeps the data node (and its tasks) alive at the controller")
	f.StringVar(&d.tlsCA, "tls-ca", "", "with --controller and --tls-cert: CA certificate (PEM) that verifies the other data nodes' certificates; pushes to them go over TLS")
}

func (d *dataNodeFlags) on() bool { return d.ctl.url != "" }

// check refuses data node flags without --controller, and a data node
// that cannot say where it is reached.
func (d *dataNodeFlags) check(cmd *cobra.Command, listen string) error {
	if !d.on() {
		for _, name := range []string{"controller-token-file", "controller-ca", "node", "endpoint", "advertise", "max-rate", "max-tasks", "lease", "tls-ca"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--%s needs --controller (it configures a data node of the transfer service)", name)
			}
		}
		return nil
	}
	switch {
	case cmd.Flags().Changed("tls-cert") != (d.tlsCA != ""):
		return errors.New("--tls-cert and --tls-ca go together with --controller: a data node that serves over TLS pushes to the others over TLS, checking their certificates with --tls-ca")
	case cmd.Flags().Changed("read-only"):
		return errors.New("--read-only with --controller: every data node may be a job's destination")
	case d.node == "" || d.endpoint == "":
		return errors.New("--controller needs --node and --endpoint (the data node's topology node and its endpoint)")
	case d.maxTasks < 1:
		return fmt.Errorf("--max-tasks %d: want at least 1", d.maxTasks)
	case d.lease < 3*time.Second || d.lease > 5*time.Minute:
		return fmt.Errorf("--lease %s: want between 3s and 5m", d.lease)
	}
	if d.maxRate != "" {
		r, err := units.ParseRate(d.maxRate)
		if err != nil || r == 0 {
			return fmt.Errorf("--max-rate %q: want a rate such as 10G or 500M", d.maxRate)
		}
		d.maxRateBps = r
	}
	if d.advertise != "" {
		host, port, err := net.SplitHostPort(d.advertise)
		if err != nil || host == "" || port == "" || port == "0" {
			return fmt.Errorf("--advertise %q: want HOST:PORT", d.advertise)
		}
		return nil
	}
	d.listen = listen
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT", listen)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("--listen %s names no host other data nodes can reach: give --advertise HOST:PORT", listen)
	}
	return nil
}

// serve runs the mover's server on ln and the data node beside it until
// ctx ends or either fails.
func (d *dataNodeFlags) serve(ctx context.Context, srv *mover.Server, ln, uln net.Listener, cfg datanode.Config) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(ctx, ln, uln)
		cancel()
	}()
	runErr := func() error {
		c, err := d.ctl.client()
		if err != nil {
			return err
		}
		// Enrol waits while the controller cannot be reached.
		c, _, err = client.Enrol(ctx, c, d.node, "", cfg.Logger)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("data node %s: %w", d.node, err)
		}
		cfg.Client, cfg.Node, cfg.Endpoint = c, d.node, d.endpoint
		cfg.MaxRateBps, cfg.MaxTasks, cfg.Lease = d.maxRateBps, d.maxTasks, d.lease
		if t := d.ctl.timeout; t > 0 && t < 2*datanode.DefaultClaimWait {
			// A claim's wait stays well under the request's timeout.
			cfg.ClaimWait = max(t/2, time.Millisecond)
		}
		cfg.Address = d.advertise
		if cfg.Address == "" {
			// --listen names the host; the port is the one bound (--listen
			// HOST:0 picks one).
			host, _, _ := net.SplitHostPort(d.listen)
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			cfg.Address = net.JoinHostPort(host, port)
		}
		return datanode.Run(ctx, cfg)
	}()
	cancel()
	serveErr := <-served
	if runErr != nil {
		return runErr
	}
	return serveErr
}
