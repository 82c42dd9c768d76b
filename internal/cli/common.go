package cli

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/lightpath/lightpath/internal/cc/fast"
	"github.com/lightpath/lightpath/internal/mover"
	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/units"
)

// DefaultPort is used when a lp:// address names no port.
const DefaultPort = 7070

// remote is a parsed lp://HOST:PORT/PATH.
type remote struct {
	Addr string // HOST:PORT, ready to dial
	Path string // relative to the server's root; "" for the root
}

// parseRemote parses lp://HOST[:PORT][/PATH]. The path is taken literally:
// no percent-decoding, so any file name can be written as it is.
func parseRemote(s string) (remote, bool, error) {
	const scheme = "lp://"
	if !strings.HasPrefix(s, scheme) {
		return remote{}, false, nil
	}
	rest := s[len(scheme):]
	host, p := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		host, p = rest[:i], rest[i+1:]
	}
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return remote{}, true, fmt.Errorf("invalid address %q: unclosed [ in IPv6 host", s)
		}
		h, port := host[1:end], strings.TrimPrefix(host[end+1:], ":")
		if port == "" {
			port = strconv.Itoa(DefaultPort)
		}
		host = net.JoinHostPort(h, port)
	} else if strings.Count(host, ":") == 0 {
		host = net.JoinHostPort(host, strconv.Itoa(DefaultPort))
	} else if strings.Count(host, ":") > 1 {
		return remote{}, true, fmt.Errorf("invalid address %q: write IPv6 hosts in brackets, like lp://[::1]:7070/path", s)
	}
	h, port, err := net.SplitHostPort(host)
	if err != nil || h == "" {
		return remote{}, true, fmt.Errorf("invalid address %q: want lp://HOST:PORT/PATH", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return remote{}, true, fmt.Errorf("invalid address %q: port %q is not a number in 1..65535", s, port)
	}
	return remote{Addr: host, Path: p}, true, nil
}

// readToken reads the mover's token from a file or LIGHTPATH_TOKEN.
func readToken(file string) ([]byte, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read token: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return nil, fmt.Errorf("read token: %s is empty", file)
		}
		return []byte(t), nil
	}
	if t := strings.TrimSpace(os.Getenv("LIGHTPATH_TOKEN")); t != "" {
		return []byte(t), nil
	}
	return nil, nil
}

func clientTLS(caFile, addr string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read --tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("read --tls-ca: %s holds no PEM certificate", caFile)
	}
	host, _, _ := net.SplitHostPort(addr)
	return &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS13}, nil
}

// registerCC adds serve's --cc, the congestion control of its sockets (cp
// and bench register theirs with the transport's rate controls).
func registerCC(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "cc", "", "congestion control of every stream: any the kernel offers, such as bbr, cubic, reno, or fast "+
		"(FAST TCP, once loaded with: lightpath cc install fast, as root) (default: bbr where the kernel has it, cubic to loopback peers)")
}

// checkCC refuses, before anything connects, a --cc the kernel does not
// offer, naming what it offers (and for fast, how to load it).
func checkCC(name string) error {
	if err := transport.CheckCC(name); err != nil {
		return fmt.Errorf("--cc: %w", err)
	}
	return nil
}

// tuningFlags are the socket options cp and bench share.
type tuningFlags struct {
	cc, rate, window, tokenFile, tlsCA string
	dscp                               int
	streams                            int
	transport                          string
	// UDP's fast rate control's alpha and gamma, as given ("": the default)
	fastAlpha, fastGamma string
	// reserving: the rate may come from a reservation booked later (cp
	// --reserve), so a UDP session's --cc fixed may lack --rate here.
	reserving bool
}

func (t *tuningFlags) register(fs *pflag.FlagSet, streamsDefault int, streamsHelp string) {
	fs.IntVarP(&t.streams, "parallel", "P", streamsDefault, streamsHelp)
	fs.StringVar(&t.cc, "cc", "", "congestion control of every stream: with TCP any the kernel offers, such as bbr, cubic, reno, or fast "+
		"(FAST TCP, once loaded with: lightpath cc install fast, as root) (default: bbr where the kernel has it, cubic to loopback peers); "+
		"with --transport udp the rate control: fixed (at --rate, or the reserved rate), fast or aimd (default: fixed on a reservation, fast otherwise)")
	fs.StringVar(&t.transport, "transport", mover.TransportTCP, "what carries the data streams: tcp, or udp (the reliable UDP transport, to the server's same port; control stays on TCP)")
	fs.StringVar(&t.fastAlpha, "fast-alpha", "", fmt.Sprintf("with --transport udp --cc fast: packets each stream this end sends on keeps queued in the path (default %d)", fast.DefaultParams.Alpha))
	fs.StringVar(&t.fastGamma, "fast-gamma", "", fmt.Sprintf("with --transport udp --cc fast: fraction of the way to the target window per round trip, in (0, 1] (default %s)", fast.GammaString(fast.DefaultParams.Gamma)))
	fs.StringVar(&t.rate, "rate", "", "cap the rate, paced by the kernel, e.g. 500M or 2Gbps (bits per second)")
	fs.StringVar(&t.window, "window", "", "socket buffer size per stream, e.g. 64MiB (default: kernel autotuning)")
	fs.IntVar(&t.dscp, "dscp", -1, "DSCP value 0..63 to mark every packet with (IP_TOS)")
	fs.StringVar(&t.tokenFile, "token-file", "", "file holding the server's token (default: $LIGHTPATH_TOKEN)")
	fs.StringVar(&t.tlsCA, "tls-ca", "", "CA certificate (PEM) to verify a TLS server with; turns TLS on")
}

func (t *tuningFlags) tuning() (mover.Tuning, error) {
	tu := mover.Tuning{CC: t.cc, DSCP: -1}
	switch t.transport {
	case "", mover.TransportTCP:
		if err := checkCC(t.cc); err != nil {
			if slices.Contains(mover.UDPRateControls, t.cc) && t.cc != transport.FastCC {
				return tu, fmt.Errorf("--cc %s is a rate control of the UDP transport: add --transport udp", t.cc)
			}
			return tu, err
		}
	case mover.TransportUDP:
		tu.Transport = mover.TransportUDP
		if t.cc != "" && !slices.Contains(mover.UDPRateControls, t.cc) {
			return tu, fmt.Errorf("--cc %q with --transport udp: want fixed, fast or aimd", t.cc)
		}
	default:
		return tu, fmt.Errorf("--transport %q: want tcp or udp", t.transport)
	}
	if t.rate != "" {
		r, err := units.ParseRate(t.rate)
		if err != nil {
			return tu, fmt.Errorf("--rate: %w", err)
		}
		if r == 0 {
			return tu, errors.New("--rate must be above zero")
		}
		tu.Rate = r
	}
	if t.window != "" {
		w, err := units.ParseSize(t.window)
		if err != nil {
			return tu, fmt.Errorf("--window: %w", err)
		}
		if w < 4096 || w > 1<<31 {
			return tu, fmt.Errorf("--window %s out of range 4KiB..2GiB", t.window)
		}
		tu.Window = uint32(w)
	}
	if t.dscp < -1 || t.dscp > 63 {
		return tu, fmt.Errorf("--dscp %d out of range 0..63", t.dscp)
	}
	tu.DSCP = int8(t.dscp)
	if t.streams < 0 || t.streams > 256 {
		return tu, fmt.Errorf("-P %d out of range 1..256", t.streams)
	}
	if tu.Transport == mover.TransportUDP && !t.reserving {
		switch {
		case tu.CC == "fixed" && tu.Rate == 0:
			return tu, errors.New("--cc fixed sends at a set rate: give --rate (or, with cp, --reserve, whose rate it takes)")
		case tu.CC == "":
			tu.CC = "fast" // without a reservation; --rate caps it
		}
	}
	if err := t.fastParams(&tu); err != nil {
		return tu, err
	}
	return tu, nil
}

// fastParams checks --fast-alpha and --fast-gamma (valid with --transport
// udp --cc fast) into tu.
func (t *tuningFlags) fastParams(tu *mover.Tuning) error {
	if t.fastAlpha == "" && t.fastGamma == "" {
		return nil
	}
	switch {
	case tu.Transport != mover.TransportUDP:
		return errors.New("--fast-alpha and --fast-gamma are for --transport udp --cc fast (TCP's fast runs with what lightpath cc install fast was given)")
	case tu.CC != "fast":
		return fmt.Errorf("--fast-alpha and --fast-gamma are for --cc fast, not %s", orWord(tu.CC, "the reservation's fixed"))
	}
	p := fast.DefaultParams
	if t.fastAlpha != "" {
		a, err := strconv.ParseUint(t.fastAlpha, 10, 32)
		if err != nil {
			return fmt.Errorf("--fast-alpha %q: want a number of packets", t.fastAlpha)
		}
		p.Alpha = uint32(a)
		tu.FASTAlpha = p.Alpha
	}
	if t.fastGamma != "" {
		g, err := fast.ParseGamma(t.fastGamma)
		if err != nil {
			return fmt.Errorf("--fast-gamma: %w", err)
		}
		p.Gamma = g
		tu.FASTGamma = g
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("--fast-alpha, --fast-gamma: %w", err)
	}
	return nil
}

// durationFlag is a duration written Go style ("10s", "1m30s") or, as
// iperf takes it, in plain seconds ("10").
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		*f.d = time.Duration(secs * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration like 10s or plain seconds like 10")
	}
	*f.d = d
	return nil
}

func (f durationFlag) Type() string { return "duration" }

// ndjson writes one JSON object per line, safely from several goroutines.
type ndjson struct {
	mu sync.Mutex
	w  io.Writer
}

func (n *ndjson) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	n.mu.Lock()
	n.w.Write(append(b, '\n'))
	n.mu.Unlock()
}
