//go:build linux

package cc

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/cc/fast"
)

// fastObj is bpf/fast.c compiled by `make bpf` (little-endian BPF).
//
//go:embed fast_bpfel.o
var fastObj []byte

const (
	bpffs         = "/sys/fs/bpf"
	kernelBTF     = "/sys/kernel/btf/vmlinux"
	sysAvailable  = "/proc/sys/net/ipv4/tcp_available_congestion_control"
	sysAllowed    = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
	sysDefault    = "/proc/sys/net/ipv4/tcp_congestion_control"
	structOpsName = "fast"
)

// paramsValue is struct fast_params of bpf/fast.c. Build names the
// program the registration runs (buildID), so that an install by another
// build of lightpath replaces it instead of retuning it.
type paramsValue struct {
	Alpha, Gamma, Trace, Build uint32
}

// buildID is the first four bytes of the embedded object's SHA-256.
var buildID = func() uint32 {
	sum := sha256.Sum256(fastObj)
	return binary.LittleEndian.Uint32(sum[:4])
}()

func known(name string) error {
	if !slices.Contains(Names, name) {
		return fmt.Errorf("%q: lightpath can install %s (the kernel's own, such as cubic, reno and bbr, need no install)", name, strings.Join(Names, ", "))
	}
	return nil
}

// Install registers name with the kernel, or, when a previous Install
// registered it, sets its parameters to p in place; a registration of
// another build of the program (an older lightpath's) is replaced. It
// reports what it did.
func Install(name string, p fast.Params) (Loaded, Action, error) {
	if err := known(name); err != nil {
		return Loaded{}, "", err
	}
	if err := p.Check(); err != nil {
		return Loaded{}, "", err
	}
	if err := mountBPFFS(); err != nil {
		return Loaded{}, "", err
	}
	action := Unchanged
	if _, err := os.Stat(LinkPin(name)); err == nil {
		same, err := retune(name, p)
		switch {
		case err == nil && !same:
			action = Retuned
		case err != nil:
			// Another build's program, or a pin left half-way (say
			// the link but not its maps): take it away, install afresh.
			if _, rerr := Remove(name); rerr != nil {
				return Loaded{}, "", fmt.Errorf("%w; removing it: %v", err, rerr)
			}
			if err := load(name, p); err != nil {
				return Loaded{}, "", err
			}
			action = Replaced
		}
	} else {
		if slices.Contains(readList(sysAvailable), name) {
			return Loaded{}, "", fmt.Errorf("a congestion control named %q is already registered, but not by lightpath (no pin at %s)", name, LinkPin(name))
		}
		if err := load(name, p); err != nil {
			return Loaded{}, "", err
		}
		action = Installed
	}
	allowed := readList(sysAllowed)
	if !slices.Contains(allowed, name) {
		if err := os.WriteFile(sysAllowed, []byte(strings.Join(append(allowed, name), " ")), 0o644); err != nil {
			return Loaded{}, action, fmt.Errorf("allow %s for unprivileged sockets (net.ipv4.tcp_allowed_congestion_control): %w", name, err)
		}
		if action == Unchanged {
			action = Allowed
		}
	}
	l, err := lookup(name)
	return l, action, err
}

// load registers name afresh and pins its link and maps.
func load(name string, p fast.Params) (err error) {
	if _, err := os.Stat(kernelBTF); err != nil {
		return fmt.Errorf("this kernel has no BTF at %s (CONFIG_DEBUG_INFO_BTF), which BPF congestion control needs", kernelBTF)
	}
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(fastObj))
	if err != nil {
		return fmt.Errorf("read the compiled %s program: %w", name, err)
	}
	spec.Maps["fast_params"].Contents = []ebpf.MapKV{{Key: uint32(0), Value: paramsValue{Alpha: p.Alpha, Gamma: p.Gamma, Build: buildID}}}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return explainLoad(name, err)
	}
	defer coll.Close()
	l, err := link.AttachStructOps(link.StructOpsOptions{Map: coll.Maps[structOpsName]})
	if err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("register %s: a congestion control of that name is already registered", name)
		}
		return explainLoad(name, err)
	}
	defer l.Close()
	if err := os.MkdirAll(PinDir, 0o700); err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			os.Remove(LinkPin(name))
			os.Remove(ParamsPin(name))
			os.Remove(TracePin(name))
		}
	}()
	if err := coll.Maps["fast_params"].Pin(ParamsPin(name)); err != nil {
		return fmt.Errorf("pin %s's parameters: %w", name, err)
	}
	if err := coll.Maps["fast_trace"].Pin(TracePin(name)); err != nil {
		return fmt.Errorf("pin %s's trace: %w", name, err)
	}
	if err := l.Pin(LinkPin(name)); err != nil {
		return fmt.Errorf("pin %s's registration: %w", name, err)
	}
	return nil
}

func explainLoad(name string, err error) error {
	switch {
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("load %s: this kernel has no BPF congestion control (struct_ops tcp_congestion_ops, bpf_tcp_ca: CONFIG_BPF_SYSCALL, CONFIG_BPF_JIT, CONFIG_DEBUG_INFO_BTF): %w", name, err)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("load %s: loading a congestion control needs root (CAP_BPF and CAP_NET_ADMIN): %w", name, err)
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("load %s: the kernel's verifier refused it: %+v", name, ve)
	}
	return fmt.Errorf("load %s: %w", name, err)
}

// retune sets a registered name's parameters; same says they were already p.
func retune(name string, p fast.Params) (same bool, err error) {
	l, err := link.LoadPinnedLink(LinkPin(name), nil)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", LinkPin(name), err)
	}
	l.Close()
	m, v, err := readParams(name)
	if err != nil {
		return false, err
	}
	defer m.Close()
	if v.Build != buildID {
		return false, fmt.Errorf("the registered %s is another build's program", name)
	}
	if v.Alpha == p.Alpha && v.Gamma == p.Gamma {
		return true, nil
	}
	v.Alpha, v.Gamma = p.Alpha, p.Gamma
	if err := m.Put(uint32(0), v); err != nil {
		return false, fmt.Errorf("set %s's parameters: %w", name, err)
	}
	return false, nil
}

// Remove unregisters name (sockets already using it keep it until they
// close) and takes it out of the allowed list. Removing what is not
// installed is not an error: it reports false.
func Remove(name string) (bool, error) {
	if err := known(name); err != nil {
		return false, err
	}
	removed := false
	for _, pin := range []string{LinkPin(name), ParamsPin(name), TracePin(name)} {
		switch err := os.Remove(pin); {
		case err == nil:
			removed = true
		case !errors.Is(err, fs.ErrNotExist):
			return removed, fmt.Errorf("unpin %s: %w", pin, err)
		}
	}
	os.Remove(PinDir) // only when empty
	if removed {
		// The kernel lets the link go after the unpin returns: wait
		// until the name has left the list, so that what follows (an
		// install, a check) sees it gone.
		for end := time.Now().Add(5 * time.Second); slices.Contains(readList(sysAvailable), name); {
			if time.Now().After(end) {
				return removed, fmt.Errorf("unpinned %s, but the kernel still offers it after 5 s", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The kernel drops an unregistered name from the allowed list itself;
	// this covers a registration that outlives its pin (an open fd).
	allowed := readList(sysAllowed)
	if i := slices.Index(allowed, name); i >= 0 && !removed {
		// Not ours to take out: registered by someone else.
		return false, nil
	} else if i >= 0 {
		if err := os.WriteFile(sysAllowed, []byte(strings.Join(slices.Delete(allowed, i, i+1), " ")), 0o644); err != nil && slices.Contains(readList(sysAvailable), name) {
			return removed, fmt.Errorf("take %s out of net.ipv4.tcp_allowed_congestion_control: %w", name, err)
		}
	}
	return removed, nil
}

// List returns the congestion controls the kernel offers, with the
// parameters of those lightpath installed.
func List() ([]Loaded, error) {
	avail := readList(sysAvailable)
	if avail == nil {
		return nil, fmt.Errorf("read %s: the kernel offers no TCP congestion control list", sysAvailable)
	}
	var out []Loaded
	for _, name := range avail {
		l, err := lookup(name)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

func lookup(name string) (Loaded, error) {
	def := readList(sysDefault)
	l := Loaded{Name: name, Source: "kernel", Allowed: slices.Contains(readList(sysAllowed), name), Default: len(def) == 1 && def[0] == name}
	if !slices.Contains(Names, name) {
		return l, nil
	}
	if _, err := os.Stat(LinkPin(name)); err != nil {
		return l, nil
	}
	m, v, err := readParams(name)
	if err != nil {
		return l, err
	}
	m.Close()
	l.Source, l.Pinned = "lightpath", LinkPin(name)
	l.Params = &fast.Params{Alpha: v.Alpha, Gamma: v.Gamma}
	return l, nil
}

// readParams opens name's pinned parameter map and reads it.
func readParams(name string) (*ebpf.Map, paramsValue, error) {
	var v paramsValue
	m, err := ebpf.LoadPinnedMap(ParamsPin(name), nil)
	if err != nil {
		return nil, v, fmt.Errorf("open %s: %w", ParamsPin(name), err)
	}
	if err := m.Lookup(uint32(0), &v); err != nil {
		m.Close()
		return nil, v, fmt.Errorf("read %s's parameters: %w", name, err)
	}
	return m, v, nil
}

func readList(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// mountBPFFS mounts the BPF file system at /sys/fs/bpf unless it is there.
func mountBPFFS() error {
	var st unix.Statfs_t
	if err := unix.Statfs(bpffs, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := unix.Mount("bpf", bpffs, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount the BPF file system at %s: %w", bpffs, err)
	}
	return nil
}

// Tracer reads the decisions of an installed congestion control, one Round
// per round of every connection that uses it, while it is open. One tracer
// at a time.
type Tracer struct {
	params *ebpf.Map
	rd     *ringbuf.Reader
}

// OpenTrace turns name's trace on.
func OpenTrace(name string) (*Tracer, error) {
	if err := known(name); err != nil {
		return nil, err
	}
	params, err := ebpf.LoadPinnedMap(ParamsPin(name), nil)
	if err != nil {
		return nil, fmt.Errorf("%s is not installed (lightpath cc install %s): %w", name, name, err)
	}
	trace, err := ebpf.LoadPinnedMap(TracePin(name), nil)
	if err != nil {
		params.Close()
		return nil, fmt.Errorf("open %s: %w", TracePin(name), err)
	}
	defer trace.Close()
	rd, err := ringbuf.NewReader(trace)
	if err != nil {
		params.Close()
		return nil, fmt.Errorf("read %s: %w", TracePin(name), err)
	}
	t := &Tracer{params: params, rd: rd}
	if err := t.set(1); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func (t *Tracer) set(on uint32) error {
	var v paramsValue
	if err := t.params.Lookup(uint32(0), &v); err != nil {
		return fmt.Errorf("read the parameters: %w", err)
	}
	v.Trace = on
	if err := t.params.Put(uint32(0), v); err != nil {
		return fmt.Errorf("turn the trace on or off: %w", err)
	}
	return nil
}

// roundSize is sizeof(struct fast_round).
const roundSize = 8 + 2 + 2 + 4*11

// Read returns the next round, waiting until deadline (zero: forever);
// past it, an error matching os.ErrDeadlineExceeded.
func (t *Tracer) Read(deadline time.Time) (fast.Round, error) {
	t.rd.SetDeadline(deadline)
	rec, err := t.rd.Read()
	if err != nil {
		return fast.Round{}, err
	}
	var r fast.Round
	if len(rec.RawSample) < roundSize {
		return r, fmt.Errorf("trace record of %d bytes, want %d", len(rec.RawSample), roundSize)
	}
	if err := binary.Read(bytes.NewReader(rec.RawSample[:roundSize]), binary.LittleEndian, &r); err != nil {
		return r, err
	}
	return r, nil
}

// Close turns the trace off.
func (t *Tracer) Close() error {
	err := t.set(0)
	t.rd.Close()
	t.params.Close()
	return err
}
