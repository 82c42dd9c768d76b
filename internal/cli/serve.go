package cli

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/units"
)

func newServeCmd() *cobra.Command {
	var (
		listen, root, tokenFile, cert, key, logFile string
		readOnly                                    bool
		idle, stall, partialTTL                     time.Duration
		maxSessions, maxPerClient                   int
		maxFileSize                                 string
	)
	cmd := &cobra.Command{
		Use:   "serve --listen HOST:PORT --root DIR",
		Short: "Serve a directory to Lightpath clients",
		Long: `Serve DIR to lightpath cp and lightpath bench clients.

Every connection of a session, control and data, comes to the one listen
port, so one firewall rule (and one flow spec) covers a transfer. Nothing
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
client address holds at most --max-sessions-per-client sessions at once.`,
		Example: `  lightpath serve --listen 0.0.0.0:7070 --root /data
  lightpath serve --listen [::]:7070 --root /data --token-file /etc/lightpath/token
  lightpath serve --listen 127.0.0.1:7070 --root /srv/pub --read-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if listen == "" || root == "" {
				return errors.New("serve: --listen and --root are required")
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
			srv, err := mover.NewServer(mover.ServerConfig{
				Root: root, Token: token, TLS: tlsCfg, ReadOnly: readOnly, Logger: logger,
				TransferLog: tlog, IdleTimeout: idle, StallTimeout: stall, MaxSessions: maxSessions,
				MaxSessionsPerClient: maxPerClient, MaxFileSize: maxSize, PartialTTL: partialTTL,
			})
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			defer srv.Close()
			ln, err := transport.TCP.Listen(cmd.Context(), listen, transport.Options{DSCP: -1})
			if err != nil {
				return fmt.Errorf("serve: listen: %w", err)
			}
			logger.Info("serving", "root", root, "listen", ln.Addr().String(), "tls", tlsCfg != nil,
				"token", len(token) > 0, "read_only", readOnly)
			err = srv.Serve(cmd.Context(), ln)
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
	f.StringVar(&maxFileSize, "max-file-size", "16TiB", "largest file a client may push")
	f.DurationVar(&partialTTL, "partial-ttl", mover.DefaultPartialTTL, "remove partial files nobody has written for this long (0: never)")
	return cmd
}
