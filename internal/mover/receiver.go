package mover

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lightpath/lightpath/internal/checksum"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/units"
	"github.com/lightpath/lightpath/internal/wire"
)

// Dest is where a receiver writes: beneath Root, under Base; with Rename
// set, the single top-level item takes that name (cp SRC DST, where DST is
// not an existing directory).
type Dest struct {
	Root   *os.Root
	Base   string
	Rename string
	// Done lists manifest paths an earlier attempt of the same command
	// already delivered: they are skipped, not refused as existing.
	Done map[string]bool
	// Locks, when set, keeps two sessions from writing one file at once.
	Locks *PathLocks
	// MaxFileSize bounds the size of one file the peer may announce
	// (DefaultMaxFileSize when 0); LimitHint is added to the refusal, to
	// say how to change it.
	MaxFileSize int64
	LimitHint   string
	// Space, when set, is the ledger of room promised to files being
	// received, shared with other sessions into the same filesystem; one
	// for this session alone otherwise.
	Space *Space
	// Grant, when set, is what the session may write: an entry at a path
	// it does not cover fails (a directory on the way to a covered path is
	// created, its mode and times left alone), a link is recreated only
	// when it resolves within a covered path, and every path is resolved
	// beneath the covered directory when it is written (destFS).
	Grant *grant.Grant
	// ReceiptKey, with Grant, is the data node's receipt secret: the
	// receiver signs a receipt of every file it holds as the session's
	// grant asked, before its verdict (sendReceipt).
	ReceiptKey []byte
}

// allowed says whether the grant, if any, lets the receiver write target;
// lead is true for a directory it may only create on the way to a covered
// path.
func (d Dest) allowed(kind uint8, target string) (lead bool, err error) {
	if d.Grant == nil {
		return false, nil
	}
	err = d.Grant.Covers(grant.Write, target)
	if err != nil && kind == wire.EntryDir && d.Grant.Leads(target) {
		return true, nil
	}
	return false, err
}

// PathLocks holds the destination paths that sessions are writing. A server
// shares one among all its sessions: a second push to a file being received
// is refused instead of mixing blocks in one partial file, except that the
// sessions pushing parts of one version of a file share it (parts).
type PathLocks struct {
	mu    sync.Mutex
	held  map[string]bool
	parts map[string]*partFile
}

// NewPathLocks returns an empty set.
func NewPathLocks() *PathLocks {
	return &PathLocks{held: map[string]bool{}, parts: map[string]*partFile{}}
}

func (p *PathLocks) lock(name string) bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[name] {
		return false
	}
	p.held[name] = true
	return true
}

func (p *PathLocks) isHeld(name string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[name]
}

func (p *PathLocks) unlock(name string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	delete(p.held, name)
	p.mu.Unlock()
}

// target maps a manifest path to a path within the root, refusing anything
// that is not a clean relative path.
func (d Dest) target(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return "", classed(retry.FaultPermission, fmt.Errorf("invalid path %q", p))
	}
	parts := strings.Split(p, "/")
	for _, c := range parts {
		if c == "" || c == "." || c == ".." {
			return "", classed(retry.FaultPermission, fmt.Errorf("invalid path %q: empty, . or .. component", p))
		}
	}
	if d.Rename != "" {
		parts[0] = d.Rename
	}
	if isWorkFile(parts[len(parts)-1]) {
		return "", classed(retry.FaultPermission, fmt.Errorf("invalid path %q: reserved suffix", p))
	}
	return path.Join(append([]string{d.Base}, parts...)...), nil
}

func workNames(target string) (part, jour string) {
	dir, name := path.Split(target)
	// A name near the 255-byte limit would overflow with the prefix and
	// suffix: such files work under a digest of their name instead.
	if len(name)+1+len(journalSuffix) > 255 {
		sum := sha256.Sum256([]byte(name))
		name = "lp-" + hex.EncodeToString(sum[:16])
	}
	return path.Join(dir, "."+name+partSuffix), path.Join(dir, "."+name+journalSuffix)
}

// rfile states.
const (
	rWaitPlan = iota // the receiver offered resumed blocks; the sender decides
	rReceiving
	rFinal // finalizing or done
)

type rfile struct {
	e       wire.Entry
	target  string
	part    string
	jname   string
	nblocks int
	// lo and hi bound the blocks this session receives: all of them, or
	// its part's; want is their count.
	lo, hi uint32
	want   int
	// pf is the state shared with the other sessions pushing parts of the
	// file (parts.go); nil for a whole push. pfHeld says this session
	// still counts among its holders (guarded by mu).
	pf     *partFile
	pfHeld bool

	mu      sync.Mutex
	ready   chan struct{} // closed once blocks may be written
	state   int
	inPlace bool // checking an existing target for --update
	f       *os.File
	jour    *journal
	blocks  *blockSet // the blocks held and their sums
	adler   bool      // adler32 is computed too
	end     *wire.FileEndItem
	// reserved is the space still set aside for this file's data in the
	// destination's ledger.
	reserved int64
	fresh    bool       // the partial file is new: holes need no punching
	verdict  bool       // a result has been sent
	locked   bool       // holds the destination path in Dest.Locks
	wmu      sync.Mutex // serialises writes into the partial file
}

// receiver runs the receiving end of a session.
type receiver struct {
	l   *link
	dst Dest
	pol uint8

	mu      sync.Mutex
	cond    *sync.Cond
	files   map[uint32]*rfile
	made    map[string]bool // directories known to exist
	links   map[string]bool // symlinks this session created
	fs      *destFS         // every path written, resolved beneath what the session may write
	dirs    []dirMeta
	stopped bool

	final   chan *rfile
	finalWG sync.WaitGroup
	ioWait  atomic.Int64
	netWait atomic.Int64
	start   time.Time
	srcErrs []string
}

type dirMeta struct {
	path  string
	mode  fs.FileMode
	mtime time.Time
}

// RecvResult is the receiver's account of a session.
type RecvResult struct {
	Local  wire.Stats
	Remote wire.Stats // the sender's account (its streams' transport statistics)
	Errors []string   // sources the sender could not read
}

func runReceiver(ctx context.Context, l *link, dst Dest) (RecvResult, error) {
	if dst.Space == nil {
		dst.Space = NewSpace()
	}
	r := &receiver{l: l, dst: dst, pol: l.opts.Policy, files: map[uint32]*rfile{}, made: map[string]bool{}, links: map[string]bool{}, final: make(chan *rfile, 1024), start: time.Now()}
	r.fs = newDestFS(dst.Root, dst.Grant)
	defer r.fs.close()
	r.cond = sync.NewCond(&r.mu)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	flushDone := make(chan struct{})
	defer close(flushDone)
	go l.ctrl.flusher(flushDone)
	go l.keepalive(flushDone)

	errc := make(chan error, len(l.data)+2)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
		cancel()
	}
	go func() {
		<-ctx.Done()
		r.mu.Lock()
		r.stopped = true
		r.mu.Unlock()
		r.cond.Broadcast()
		l.stop()
	}()
	workers := max(4, len(l.data))
	for range workers {
		r.finalWG.Add(1)
		go func() {
			defer r.finalWG.Done()
			for f := range r.final {
				r.finalize(f)
			}
		}()
	}
	defer func() {
		close(r.final)
		r.finalWG.Wait()
		r.closeAll()
	}()

	var streams sync.WaitGroup
	for i, d := range l.data {
		streams.Add(1)
		go func() {
			defer streams.Done()
			if err := r.stream(ctx, d); err != nil {
				fail(fmt.Errorf("data stream %d: %w", i, err))
			}
		}()
	}
	done := make(chan wire.Stats, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		st, err := r.readLoop(ctx)
		if err != nil {
			fail(err)
			return
		}
		done <- st
	}()
	// On failure, everything that may hand files to the finalizers stops
	// before they are shut down.
	abort := func(err error) (RecvResult, error) {
		cancel()
		l.stop()
		streams.Wait()
		<-readerDone
		return RecvResult{}, err
	}
	var remote wire.Stats
	select {
	case remote = <-done:
	case err := <-errc:
		return abort(err)
	}
	streams.Wait()
	select {
	case err := <-errc:
		return abort(err)
	default:
	}
	r.applyDirs()
	local := wire.Stats{Elapsed: int64(time.Since(r.start)), IOWait: r.ioWait.Load(), NetWait: r.netWait.Load()}
	if l.udp && l.ctrl.version >= wire.VersionUDP {
		// The streams' accounts: what the UDP streams repaired is known
		// here only.
		l.accounts(&local)
	} else {
		for _, d := range l.data {
			local.Bytes += d.sent.Load()
		}
	}
	if err := l.ctrl.send(&wire.Done{Stats: local}); err != nil {
		return RecvResult{}, fmt.Errorf("send done: %w", err)
	}
	return RecvResult{Local: local, Remote: remote, Errors: r.srcErrs}, nil
}

func (r *receiver) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.files {
		f.mu.Lock()
		if f.f != nil {
			f.f.Close()
			f.f = nil
		}
		if f.jour != nil {
			f.jour.close()
			f.jour = nil
		}
		f.mu.Unlock()
		r.release(f)
	}
}

// release gives up a file's hold on its destination path and the space set
// aside for it.
func (r *receiver) release(f *rfile) {
	f.mu.Lock()
	held := f.locked
	f.locked = false
	reserved := f.reserved
	f.reserved = 0
	pfHeld := f.pfHeld
	f.pfHeld = false
	f.mu.Unlock()
	if held {
		r.dst.Locks.unlock(f.target)
	}
	if pfHeld {
		r.releasePart(f.pf)
	}
	r.dst.Space.release(reserved)
}

// reserveSpace sets room aside for what f has yet to write (its data less
// what a partial file from an earlier run holds), or says how much is
// missing.
func (r *receiver) reserveSpace(f *rfile) error {
	need := min(max(f.e.Alloc, 0), f.e.Size)
	if fi, err := r.fs.Lstat(f.part); err == nil && fi.Mode().IsRegular() {
		need -= allocated(fi)
	}
	n, err := r.dst.reserve(r.fs, r.dst.Space, path.Dir(f.target), f.target, need)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.reserved = n
	f.mu.Unlock()
	return nil
}

// wrote counts n bytes written into f's partial file against its
// reservation: the filesystem's free space now shows them.
func (r *receiver) wrote(f *rfile, n int64) {
	r.dst.Space.release(takeReserved(&f.mu, &f.reserved, n))
}

// takeReserved takes up to n bytes out of a reservation guarded by mu
// (a file's, or the shared one of a file received in parts) and returns
// how many it took: those are on the disk now, no longer set aside.
func takeReserved(mu *sync.Mutex, reserved *int64, n int64) int64 {
	mu.Lock()
	defer mu.Unlock()
	k := min(n, *reserved)
	*reserved -= k
	return k
}

func (r *receiver) readLoop(ctx context.Context) (wire.Stats, error) {
	for {
		m, err := r.l.readCtrl()
		if err != nil {
			return wire.Stats{}, fmt.Errorf("control: %w", err)
		}
		switch m := m.(type) {
		case *wire.Files:
			var needs []wire.NeedItem
			for _, e := range m.Entries {
				if !m.HasAlloc {
					e.Alloc = e.Size // a version 1 sender: assume no holes
				}
				if it, ok := r.entry(e); ok {
					needs = append(needs, it)
				}
			}
			if len(needs) > 0 {
				r.skipReceipts(needs)
				if err := r.l.ctrl.queue(&wire.Need{Items: needs}); err != nil {
					return wire.Stats{}, err
				}
			}
		case *wire.ManifestEnd:
			// Nothing to do: the sender ends the session once every file
			// has a verdict.
		case *wire.Plan:
			if err := r.plan(m); err != nil {
				return wire.Stats{}, err
			}
		case *wire.FileEnd:
			for _, it := range m.Items {
				if err := r.fileEnd(it); err != nil {
					return wire.Stats{}, err
				}
			}
		case *wire.SrcError:
			r.srcErrs = append(r.srcErrs, m.Path+": "+m.Reason)
		case *wire.Ping:
			if err := r.l.ctrl.queue(&wire.Pong{Stamp: m.Stamp}); err != nil {
				return wire.Stats{}, err
			}
		case *wire.Pong:
		case *wire.Done:
			return m.Stats, nil
		default:
			return wire.Stats{}, fmt.Errorf("%w: unexpected %s from the sender", wire.ErrMalformed, m.Type())
		}
	}
}

func (r *receiver) add(f *rfile) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.files[f.e.ID]; dup {
		return fmt.Errorf("%w: file id %d announced twice", wire.ErrMalformed, f.e.ID)
	}
	r.files[f.e.ID] = f
	r.cond.Broadcast()
	return nil
}

// lookup waits for a file's entry (its blocks may overtake it on another
// connection) and then for its plan.
func (r *receiver) lookup(ctx context.Context, id uint32) (*rfile, error) {
	r.mu.Lock()
	for {
		if f, ok := r.files[id]; ok {
			r.mu.Unlock()
			select {
			case <-f.ready:
				return f, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if r.stopped {
			r.mu.Unlock()
			return nil, context.Canceled
		}
		r.cond.Wait()
	}
}

// entry handles one manifest entry and says what to ask of the sender.
func (r *receiver) entry(e wire.Entry) (wire.NeedItem, bool) {
	var f *rfile
	fail := func(err error) (wire.NeedItem, bool) {
		if f != nil {
			r.release(f)
		}
		fault := faultOrInternal(FaultOf(err))
		r.l.fileResult(FileResult{Path: e.Path, Size: e.Size, Reason: err.Error(), Fault: fault})
		r.l.sendFault(e.ID, fault) // before the need that fails it
		return wire.NeedItem{ID: e.ID, Action: wire.NeedFail, Reason: err.Error()}, true
	}
	target, err := r.dst.target(e.Path)
	if err != nil {
		return fail(err)
	}
	lead, err := r.dst.allowed(e.Kind, target)
	if err != nil {
		return fail(err)
	}
	f = &rfile{e: e, target: target, ready: make(chan struct{})}
	f.part, f.jname = workNames(target)
	if e.Kind == wire.EntryFile {
		// No size a peer announces drives an allocation: the block state
		// grows with the blocks that arrive.
		if err := r.dst.checkSize(e.Size, r.l.blockSize); err != nil {
			return fail(err)
		}
		f.nblocks = int((e.Size + r.l.blockSize - 1) / r.l.blockSize)
		f.lo, f.hi, f.want = 0, uint32(f.nblocks), f.nblocks
		f.blocks = newBlockSet(r.l.opts.Adler32)
		f.adler = r.l.opts.Adler32
		if p := r.l.part; p != nil {
			if f.lo, f.hi, err = partBlocks(p, e.Size, r.l.blockSize); err != nil {
				return fail(err)
			}
			f.want = int(f.hi - f.lo)
		}
	} else if r.l.part != nil {
		return fail(classed(retry.FaultInternal, errors.New("a part push carries one regular file")))
	}
	if err := r.add(f); err != nil {
		return fail(err)
	}
	if r.l.opts.Select.DryRun {
		return r.dryRun(f) // select.go: nothing is written
	}
	switch e.Kind {
	case wire.EntryDir:
		closeReady(f)
		if err := r.mkdir(target); err != nil {
			return fail(err)
		}
		if lead {
			return wire.NeedItem{}, false
		}
		r.mu.Lock()
		r.dirs = append(r.dirs, dirMeta{path: target, mode: fs.FileMode(e.Mode), mtime: time.Unix(0, e.MTime)})
		r.mu.Unlock()
		return wire.NeedItem{}, false
	case wire.EntrySymlink:
		closeReady(f)
		if why := linkOutside(e, r.l.opts.Select.Symlinks); why != "" {
			// A warning, not a failure: the rest of the tree is copied.
			r.result(f, wire.ResultItem{ID: e.ID, OK: true, Skipped: true, Reason: why})
			return wire.NeedItem{}, false
		}
		if err := r.symlink(e, target); err != nil {
			r.resultFail(f, err)
		} else {
			r.result(f, wire.ResultItem{ID: e.ID, OK: true})
		}
		return wire.NeedItem{}, false
	}

	if r.dst.Done[e.Path] {
		r.l.prog.BytesSkipped.Add(e.Size)
		r.l.fileResult(FileResult{Path: e.Path, Size: e.Size, OK: true, Skipped: true, Reason: "delivered by an earlier attempt"})
		return wire.NeedItem{ID: e.ID, Action: wire.NeedSkip, Reason: "delivered by an earlier attempt"}, true
	}
	if err := r.mkdir(path.Dir(target)); err != nil {
		return fail(err)
	}
	if r.l.part != nil {
		return r.partEntry(f, fail) // parts.go
	}
	if !r.dst.Locks.lock(target) {
		return fail(fmt.Errorf("%s: %s", target, errPathBusy))
	}
	f.locked = true
	// An existing destination: the policy decides.
	if fi, err := r.fs.Lstat(target); err == nil {
		if fi.IsDir() {
			return fail(classed(retry.FaultPermission, fmt.Errorf("destination %s is a directory", target)))
		}
		switch r.pol {
		case wire.PolicyRefuse:
			if fi.Mode().IsRegular() && fi.Size() == e.Size {
				// Perhaps an earlier run of this copy put it there: present
				// when its blocks match the source's, refused otherwise (plan).
				f.inPlace = true
				go r.offerExisting(f)
				return wire.NeedItem{}, false
			}
			return fail(classed(retry.FaultPermission, fmt.Errorf("destination %s exists (use --overwrite, --skip-existing or --update)", target)))
		case wire.PolicySkip:
			r.release(f)
			r.l.prog.BytesSkipped.Add(e.Size)
			r.l.fileResult(FileResult{Path: e.Path, Size: e.Size, OK: true, Skipped: true, Reason: "exists"})
			return wire.NeedItem{ID: e.ID, Action: wire.NeedSkip, Reason: "exists"}, true
		case wire.PolicyUpdate:
			if fi.Mode().IsRegular() && fi.Size() == e.Size && fi.ModTime().UnixNano() == e.MTime {
				// Same size and time: compare checksums block by block.
				f.inPlace = true
				go r.offerExisting(f)
				return wire.NeedItem{}, false
			}
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fail(linkKept(target))
		}
	}
	// Room for what is still to come, before any block travels.
	if err := r.reserveSpace(f); err != nil {
		return fail(err)
	}
	// A partial file from an earlier run: offer what it holds.
	if f.nblocks > 1 {
		if j, have, ok := openJournal(r.fs, f.jname, e, r.l.blockSize, f.nblocks); ok && len(have) > 0 {
			f.jour = j
			go r.offerPartial(f, have)
			return wire.NeedItem{}, false
		} else if ok {
			j.close()
		}
	}
	if err := r.startFresh(f); err != nil {
		return fail(err)
	}
	return wire.NeedItem{ID: e.ID, Action: wire.NeedAll}, true
}

func (r *receiver) mkdir(dir string) error {
	if dir == "" || dir == "." {
		return nil
	}
	r.mu.Lock()
	done := r.made[dir]
	r.mu.Unlock()
	if done {
		return nil
	}
	if err := r.fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, cleanPathError(err))
	}
	r.mu.Lock()
	r.made[dir] = true
	r.mu.Unlock()
	return nil
}

// linkKept is the refusal of an entry that would replace the link at
// target. A push never replaces (so never retargets) a link already at the
// destination: other links made earlier were judged through it, and
// what they resolve to would change without being judged again; the
// receiver cannot find them all (they may come from other sessions), so
// the link stays, as a careful store keeps its namespace's structure
// from being rewritten by a peer. Whoever owns the destination removes it.
func linkKept(target string) error {
	return classed(retry.FaultPermission, fmt.Errorf("destination %s is a symbolic link: a copy does not replace links (remove it at the destination first)", target))
}

func (r *receiver) symlink(e wire.Entry, target string) error {
	t := e.Target
	// Only links that stay inside the destination are recreated: a link out
	// of it would point at something the transfer does not carry. The target
	// is resolved through the links already there, not read as text.
	if err := r.mkdir(path.Dir(target)); err != nil {
		return err
	}
	r.mu.Lock()
	again := r.links[target]
	r.mu.Unlock()
	if again {
		// A second link at one path could change what an earlier link,
		// checked through the first, resolves to.
		return fmt.Errorf("symlink %s announced twice: not recreated", e.Path)
	}
	if err := checkLink(r.dst.Root, target, t, r.dst.linkBound(target)); err != nil {
		if errors.Is(err, errLinkOutside) {
			return fmt.Errorf("symlink %s -> %s %w: not recreated", e.Path, t, errLinkOutside)
		}
		return fmt.Errorf("symlink %s -> %s: %w", e.Path, t, err)
	}
	if g := r.dst.Grant; g != nil && !slices.ContainsFunc(g.Paths, func(p string) bool { return checkLink(r.dst.Root, target, t, p) == nil }) {
		// Within the destination but not within the grant: what is
		// written through it later would land where the grant does not
		// reach.
		return fmt.Errorf("symlink %s -> %s: %w: it resolves outside %s: not recreated", e.Path, t, grant.ErrPath, strings.Join(g.Paths, ", "))
	}
	if fi, err := r.fs.Lstat(target); err == nil {
		if fi.Mode()&fs.ModeSymlink != 0 {
			if cur, err := r.fs.Readlink(target); err == nil && cur == t {
				return nil // the same link, from an earlier run
			}
		}
		switch {
		case r.pol == wire.PolicySkip:
			return nil
		case r.pol == wire.PolicyRefuse:
			return fmt.Errorf("destination %s exists (use --overwrite, --skip-existing or --update)", target)
		case fi.IsDir():
			return fmt.Errorf("destination %s is a directory", target)
		case fi.Mode()&fs.ModeSymlink != 0:
			return linkKept(target)
		}
		if err := r.fs.Remove(target); err != nil {
			return fmt.Errorf("replace %s: %w", target, cleanPathError(err))
		}
	}
	if err := r.fs.Symlink(t, target); err != nil {
		return fmt.Errorf("create symlink %s: %w", target, cleanPathError(err))
	}
	r.mu.Lock()
	r.links[target] = true
	r.mu.Unlock()
	return nil
}

// startFresh prepares to receive every block of f into a new partial file.
func (r *receiver) startFresh(f *rfile) error {
	if msg := r.l.cutReason(); msg != "" {
		// A check of an earlier run's blocks may end after its session
		// was cut: the partial file and journal are the next attempt's.
		return errors.New(msg)
	}
	if f.pf != nil {
		return r.partFresh(f)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocks.reset()
	f.fresh = true
	f.state = rReceiving
	if f.jour != nil {
		f.jour.close()
		f.jour = nil
	}
	if f.f != nil {
		f.f.Close() // it is reopened with O_TRUNC
		f.f = nil
	}
	if f.nblocks > 1 {
		j, err := createJournal(r.fs, f.jname, f.e, r.l.blockSize)
		if err != nil {
			return cleanPathError(err)
		}
		f.jour = j
	}
	closeReady(f)
	return nil
}

func closeReady(f *rfile) {
	select {
	case <-f.ready:
	default:
		close(f.ready)
	}
}

// offerPartial checks the blocks an earlier run left against their recorded
// sums and offers the good ones to the sender.
func (r *receiver) offerPartial(f *rfile, have map[uint32]uint32) {
	sums := r.checkBlocks(f.part, f, have)
	if len(sums) == 0 {
		r.needAllAfresh(f)
		return
	}
	f.mu.Lock()
	f.state = rWaitPlan
	for _, s := range sums {
		f.blocks.set(s.Index, s.CRC, s.adler)
	}
	f.mu.Unlock()
	r.l.ctrl.queue(&wire.Need{Items: []wire.NeedItem{{ID: f.e.ID, Action: wire.NeedSome, Have: wireSums(sums)}}})
}

// blockSum is a checked block's sums.
type blockSum struct {
	Index, CRC, adler uint32
}

func wireSums(s []blockSum) []wire.BlockSum {
	out := make([]wire.BlockSum, len(s))
	for i, b := range s {
		out[i] = wire.BlockSum{Index: b.Index, CRC: b.CRC}
	}
	return out
}

// offerExisting sums an existing destination (--update with the same size
// and time) so the sender can tell whether it differs.
func (r *receiver) offerExisting(f *rfile) {
	sums := r.checkBlocks(f.target, f, nil)
	f.mu.Lock()
	f.state = rWaitPlan
	if len(sums) == f.nblocks {
		// Kept for the verdict's whole-file sums if nothing differs.
		for _, s := range sums {
			f.blocks.set(s.Index, s.CRC, s.adler)
		}
	}
	f.mu.Unlock()
	if len(sums) != f.nblocks {
		if r.pol == wire.PolicyRefuse {
			r.needFail(f, fmt.Errorf("destination %s exists (use --overwrite, --skip-existing or --update)", f.target))
			return
		}
		// Unreadable: replace it.
		f.inPlace = false
		r.needAllAfresh(f)
		return
	}
	if f.pf != nil {
		sums = sums[f.lo:f.hi] // a part's sender checks its own blocks
	}
	r.l.ctrl.queue(&wire.Need{Items: []wire.NeedItem{{ID: f.e.ID, Action: wire.NeedSome, Have: wireSums(sums)}}})
}

// checkBlocks reads blocks of name and returns their sums. With want set,
// only those blocks are read and only the ones whose sum matches are
// returned; with want nil, every block is read.
func (r *receiver) checkBlocks(name string, f *rfile, want map[uint32]uint32) []blockSum {
	fd, err := r.fs.Open(name)
	if err != nil {
		return nil
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil || fi.Size() != f.e.Size {
		return nil
	}
	// Only the blocks asked for are visited: a file's block count may be
	// far larger than what its journal holds.
	var idx []uint32
	if want != nil {
		for i := range want {
			if int64(i) < int64(f.nblocks) {
				idx = append(idx, i)
			}
		}
		slices.Sort(idx)
	}
	buf := make([]byte, r.l.blockSize)
	var sums []blockSum
	check := func(i uint32) bool {
		off := int64(i) * r.l.blockSize
		n := min(r.l.blockSize, f.e.Size-off)
		if _, err := fd.ReadAt(buf[:n], off); err != nil {
			return false
		}
		c := checksum.CRC32C(buf[:n])
		if crc, wanted := want[i]; want != nil && (!wanted || c != crc) {
			return true
		}
		var ad uint32
		if f.adler {
			ad = adler32.Checksum(buf[:n])
		}
		sums = append(sums, blockSum{Index: i, CRC: c, adler: ad})
		return true
	}
	if want != nil {
		for _, i := range idx {
			if !check(i) {
				return nil
			}
		}
		return sums
	}
	for i := 0; i < f.nblocks; i++ {
		if !check(uint32(i)) {
			return nil
		}
	}
	return sums
}

// needAllAfresh discards what an earlier run left and asks for every block.
func (r *receiver) needAllAfresh(f *rfile) {
	if err := r.startFresh(f); err != nil {
		r.needFail(f, err)
		return
	}
	r.l.ctrl.queue(&wire.Need{Items: []wire.NeedItem{{ID: f.e.ID, Action: wire.NeedAll}}})
}

func (r *receiver) needFail(f *rfile, err error) {
	f.mu.Lock()
	f.verdict, f.state = true, rFinal
	closeReady(f)
	f.mu.Unlock()
	r.release(f)
	fault := faultOrInternal(FaultOf(err))
	r.l.fileResult(FileResult{Path: f.e.Path, Size: f.e.Size, Reason: err.Error(), Fault: fault})
	r.l.sendFault(f.e.ID, fault)
	r.l.ctrl.queue(&wire.Need{Items: []wire.NeedItem{{ID: f.e.ID, Action: wire.NeedFail, Reason: err.Error()}}})
}

func (r *receiver) plan(m *wire.Plan) error {
	r.mu.Lock()
	f, ok := r.files[m.ID]
	r.mu.Unlock()
	if !ok || f.e.Kind != wire.EntryFile {
		return fmt.Errorf("%w: plan for unknown file %d", wire.ErrMalformed, m.ID)
	}
	f.mu.Lock()
	if f.state != rWaitPlan {
		f.mu.Unlock()
		return fmt.Errorf("%w: plan for file %d that offered nothing", wire.ErrMalformed, m.ID)
	}
	inPlace := f.inPlace
	f.mu.Unlock()
	if m.Fresh && inPlace && r.pol == wire.PolicyRefuse {
		r.resultFail(f, classed(retry.FaultPermission, fmt.Errorf("destination %s exists and differs from the source (use --overwrite, --skip-existing or --update)", f.target)))
		return nil
	}
	if m.Fresh {
		f.inPlace = false
		if err := r.startFresh(f); err != nil {
			// The sender will send blocks we cannot place; fail the file.
			r.resultFail(f, err)
			closeReady(f)
		}
		return nil
	}
	if inPlace {
		// --update and every block matches: the destination is current.
		f.mu.Lock()
		f.state = rFinal
		f.mu.Unlock()
		r.l.prog.BytesSkipped.Add(f.e.Size)
		reason := "up to date"
		if r.pol == wire.PolicyRefuse {
			reason = "already present"
		}
		it := wire.ResultItem{ID: f.e.ID, OK: true, Skipped: true, Reason: reason}
		if f.pf != nil {
			r.partInPlace(f, &it)
		} else {
			it.CRC = r.fileCRC(f)
		}
		r.result(f, it)
		return nil
	}
	f.mu.Lock()
	f.state = rReceiving
	closeReady(f)
	complete := f.blocks.count() == f.want && f.end != nil
	var held int64
	f.blocks.each(func(i, _, _ uint32, _ bool) {
		held += min(r.l.blockSize, f.e.Size-int64(i)*r.l.blockSize)
	})
	f.mu.Unlock()
	r.l.prog.BytesSkipped.Add(held)
	if complete {
		r.queueFinal(f)
	}
	return nil
}

func (r *receiver) fileEnd(it wire.FileEndItem) error {
	r.mu.Lock()
	f, ok := r.files[it.ID]
	r.mu.Unlock()
	if !ok || f.e.Kind != wire.EntryFile {
		return fmt.Errorf("%w: file end for unknown file %d", wire.ErrMalformed, it.ID)
	}
	f.mu.Lock()
	if f.end != nil && (it.Abort == "" || f.end.Abort != "") {
		f.mu.Unlock()
		return nil // only an abort may follow a file's end
	}
	f.end = &it
	complete := f.state == rReceiving && (f.blocks.count() == f.want || it.Abort != "")
	f.mu.Unlock()
	if complete {
		r.queueFinal(f)
	}
	return nil
}

func (r *receiver) queueFinal(f *rfile) {
	f.mu.Lock()
	if f.state == rFinal {
		f.mu.Unlock()
		return
	}
	f.state = rFinal
	f.mu.Unlock()
	r.final <- f
}

// recvChunk is the unit a receiver reads, checks and writes: small enough
// to stay in cache from the socket through the CRC to the file.
const recvChunk = 256 << 10

// stream receives blocks from one data connection.
func (r *receiver) stream(ctx context.Context, d *dataConn) error {
	var hb [wire.BlockHeaderSize]byte
	// 256 KiB chunks stay in cache from the socket read through the CRC to
	// the file write.
	buf := make([]byte, recvChunk)
	for {
		// No deadline while waiting for a header: a stream may idle while
		// the others carry the data; the control connection's keepalive
		// tells a live peer from a dead one.
		t0 := time.Now()
		r.l.noReadDeadline(d.conn)
		d.expect(wire.BlockHeaderSize)
		if _, err := io.ReadFull(d.r, hb[:]); err != nil {
			return err
		}
		r.netWait.Add(int64(time.Since(t0)))
		h, err := wire.ParseBlockHeader(hb[:])
		if err != nil {
			return err
		}
		if h.Kind == wire.DataEnd {
			return nil
		}
		f, err := r.lookup(ctx, h.File)
		if err != nil {
			return err
		}
		if err := r.block(ctx, d, f, h, buf); err != nil {
			return err
		}
	}
}

func (r *receiver) block(ctx context.Context, d *dataConn, f *rfile, h wire.BlockHeader, buf []byte) error {
	if f.e.Kind != wire.EntryFile || h.Index < f.lo || h.Index >= f.hi {
		return fmt.Errorf("%w: block %d of file %d is out of range", wire.ErrMalformed, h.Index, h.File)
	}
	off := int64(h.Index) * r.l.blockSize
	n := min(r.l.blockSize, f.e.Size-off)
	if int64(h.Length) != n {
		return fmt.Errorf("%w: block %d of file %d has %d bytes, want %d", wire.ErrMalformed, h.Index, h.File, h.Length, n)
	}
	f.mu.Lock()
	state, failed := f.state, f.f == nil && f.end != nil && f.end.Abort != ""
	var fd *os.File
	var err error
	if state == rReceiving && !failed {
		// Never for a file already given up: that would bring back a
		// partial file removed for lack of space.
		fd, err = r.openPart(f)
	}
	f.mu.Unlock()
	// A block for a file that is already final (a duplicate after a
	// resend) or could not be opened is read and dropped.
	discard := state != rReceiving || failed || err != nil
	if err != nil && state == rReceiving {
		r.resultFail(f, err)
	}

	var crc, ad uint32
	ad = 1
	if h.Kind == wire.DataHole {
		r.l.prog.BytesHoles.Add(n)
		crc = checksum.ZerosCRC32C(n)
		if !discard && !f.fresh {
			t := time.Now()
			if err := punch(fd, off, n); err != nil {
				r.writeFailed(f, err)
				discard = true
			}
			r.ioWait.Add(int64(time.Since(t)))
		}
	} else {
		for o := int64(0); o < n; {
			k := min(int64(len(buf)), n-o)
			t := time.Now()
			if err := r.l.readFull(d, buf[:k]); err != nil {
				return err
			}
			t1 := time.Now()
			r.netWait.Add(int64(t1.Sub(t)))
			d.sent.Add(k)
			r.l.prog.BytesMoved.Add(k)
			crc = checksum.UpdateCRC32C(crc, buf[:k])
			if f.adler {
				ad = adler32Update(ad, buf[:k])
			}
			if !discard {
				// One writer at a time per file: concurrent writes to one
				// file only contend for the inode lock in the kernel.
				wmu := &f.wmu
				if f.pf != nil {
					wmu = &f.pf.wmu // the sessions of a file's parts write one at a time too
				}
				wmu.Lock()
				_, err := fd.WriteAt(buf[:k], off+o)
				wmu.Unlock()
				if err != nil {
					r.writeFailed(f, err)
					discard = true
				} else if f.pf != nil {
					r.partWrote(f.pf, k)
				} else {
					r.wrote(f, k)
				}
				r.ioWait.Add(int64(time.Since(t1)))
			}
			o += k
		}
	}
	if discard {
		return nil
	}
	if crc != h.CRC {
		// Damaged in flight: ask for it again.
		return r.l.ctrl.queue(&wire.Resend{ID: f.e.ID, Index: h.Index})
	}
	f.mu.Lock()
	if h.Kind == wire.DataHole {
		f.blocks.setHole(h.Index)
	} else {
		f.blocks.set(h.Index, crc, ad)
	}
	var jerr error
	if f.jour != nil {
		jerr = f.jour.record(h.Index, crc)
	} else if f.pf != nil {
		// Recorded in the file's shared state before this session can
		// see its part complete: the session that finds every block
		// there finalizes.
		jerr = f.pf.record(h, crc, ad)
	}
	complete := f.blocks.count() == f.want && f.end != nil && f.state == rReceiving
	f.mu.Unlock()
	if jerr != nil {
		if isNoSpace(jerr) {
			r.writeFailed(f, jerr)
		} else {
			r.resultFail(f, fmt.Errorf("journal: %w", jerr))
		}
		return nil
	}
	if complete {
		r.queueFinal(f)
	}
	return nil
}

// writeFailed fails a file whose partial file could not be written. A full
// filesystem also costs the partial file and its journal: left behind, they
// would keep the disk full and fail every later copy, and the error says
// how much room the file needs to be sent again.
func (r *receiver) writeFailed(f *rfile, err error) {
	if errors.Is(err, os.ErrClosed) {
		f.mu.Lock()
		failed := f.state == rFinal && f.f == nil
		f.mu.Unlock()
		if failed {
			// Another stream's failed write closed the partial file
			// under this one, and gives the file's verdict (a full
			// disk), which "file already closed" must not beat.
			return
		}
	}
	if !isNoSpace(err) || f.pf != nil {
		// A part's partial file is the other parts' too: it stays.
		r.resultFail(f, fmt.Errorf("write %s: %w", f.target, cleanPathError(err)))
		return
	}
	f.mu.Lock()
	fd, jour := f.f, f.jour
	f.f, f.jour = nil, nil
	f.state = rFinal
	f.mu.Unlock()
	f.wmu.Lock() // let writes in flight on fd finish
	if fd != nil {
		fd.Close()
	}
	f.wmu.Unlock()
	if jour != nil {
		jour.close()
	}
	r.fs.Remove(f.part)
	r.fs.Remove(f.jname)
	r.resultFail(f, r.noSpace(f))
}

// noSpace is the failure of file f for a full destination.
func (r *receiver) noSpace(f *rfile) error {
	return classed(retry.FaultNoSpace, errors.New(r.noSpaceReason(f)))
}

func (r *receiver) noSpaceReason(f *rfile) string {
	need := units.FormatSize(min(max(f.e.Alloc, 0), f.e.Size))
	if free, err := freeSpace(r.fs, path.Dir(f.target)); err == nil {
		return fmt.Sprintf("no space left at the destination (%s free, %s needs %s; its partial file was removed): free space there and run the same command again",
			units.FormatSize(free), path.Base(f.target), need)
	}
	return fmt.Sprintf("no space left at the destination (%s needs %s; its partial file was removed): free space there and run the same command again",
		path.Base(f.target), need)
}

// openPart opens (creating when fresh) the partial file; f.mu is held.
func (r *receiver) openPart(f *rfile) (*os.File, error) {
	if f.f != nil {
		return f.f, nil
	}
	flags := os.O_WRONLY
	if f.fresh {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	fd, err := r.fs.OpenFile(f.part, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", f.part, cleanPathError(err))
	}
	// Setting the size up front keeps holes as holes and lets blocks land
	// at their offsets in any order.
	if err := fd.Truncate(f.e.Size); err != nil {
		fd.Close()
		return nil, fmt.Errorf("size %s: %w", f.part, cleanPathError(err))
	}
	f.f = fd
	return fd, nil
}

func punch(fd *os.File, off, n int64) error {
	if punchHole(fd, off, n) == nil {
		return nil
	}
	// No hole punching here: write the zeros.
	for n > 0 {
		k := min(n, int64(len(zeroChunk)))
		if _, err := fd.WriteAt(zeroChunk[:k], off); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}

func (r *receiver) resultFail(f *rfile, err error) {
	f.mu.Lock()
	f.state = rFinal
	f.mu.Unlock()
	r.resultOf(f, wire.ResultItem{ID: f.e.ID, Reason: err.Error()}, FaultOf(err))
}

// result sends a file's verdict, once.
func (r *receiver) result(f *rfile, it wire.ResultItem) { r.resultOf(f, it, "") }

// resultOf sends a file's verdict, once, with the class of its failure
// (internal where none is given) when it failed.
func (r *receiver) resultOf(f *rfile, it wire.ResultItem, fault retry.Fault) {
	f.mu.Lock()
	closeReady(f)
	already := f.verdict
	f.verdict = true
	f.mu.Unlock()
	if already {
		return
	}
	r.release(f)
	r.sendReceipt(f, it)
	if it.OK {
		fault = ""
	} else {
		fault = faultOrInternal(fault)
		r.l.sendFault(it.ID, fault)
	}
	r.l.fileResult(FileResult{Path: f.e.Path, Size: f.e.Size, OK: it.OK, Skipped: it.Skipped, Reason: it.Reason,
		CRC32C: it.CRC, Adler32: it.Adler32, HasAdler: f.adler,
		Complete: it.Complete, FileCRC32C: it.FileCRC, FileAdler32: it.FileAdler32, Fault: fault})
	r.l.ctrl.queue(&wire.Result{Items: []wire.ResultItem{it}, HasPart: r.l.part != nil})
}

// finalize checks a complete file end to end and puts it in place.
func (r *receiver) finalize(f *rfile) {
	t := time.Now()
	defer func() { r.ioWait.Add(int64(time.Since(t))) }()
	if r.l.cutReason() != "" {
		return // the session was cut: the partial file and journal stay for a resume
	}
	if f.pf != nil {
		r.partFinalize(f) // parts.go
		return
	}
	f.mu.Lock()
	fd, jour, end := f.f, f.jour, f.end
	f.f, f.jour = nil, nil
	crc, ad := f.sums(r.l.blockSize)
	fresh := f.fresh
	f.mu.Unlock()
	if jour != nil {
		jour.close()
	}
	fail := func(err error) {
		if fd != nil {
			fd.Close()
		}
		r.resultOf(f, wire.ResultItem{ID: f.e.ID, Reason: err.Error()}, FaultOf(err))
	}
	if end.Abort != "" {
		// The sender gave up on this file: drop what we have, it cannot be
		// resumed against a source that changed.
		if fd != nil {
			fd.Close()
			fd = nil
		}
		r.fs.Remove(f.part)
		r.fs.Remove(f.jname)
		fail(errors.New(end.Abort)) // the sender's word, and class (sender.result)
		return
	}
	if crc != end.CRC || (f.adler && ad != end.Adler32) {
		r.fs.Remove(f.jname)
		fail(classed(retry.FaultChecksum, fmt.Errorf("checksum mismatch: received crc32c %08x, sent %08x", crc, end.CRC)))
		return
	}
	if fd == nil {
		// Every block came from an earlier run, or the file is empty.
		var err error
		flags := os.O_WRONLY
		if fresh {
			flags |= os.O_CREATE
		}
		fd, err = r.fs.OpenFile(f.part, flags, 0o600)
		if err != nil {
			fail(fmt.Errorf("open %s: %w", f.part, cleanPathError(err)))
			return
		}
		if err := fd.Truncate(f.e.Size); err != nil {
			fail(fmt.Errorf("size %s: %w", f.part, cleanPathError(err)))
			return
		}
	}
	if err := fd.Sync(); err != nil {
		if isNoSpace(err) {
			fd.Close()
			fd = nil
			r.fs.Remove(f.part)
			r.fs.Remove(f.jname)
			fail(r.noSpace(f))
			return
		}
		fail(fmt.Errorf("sync %s: %w", f.part, cleanPathError(err)))
		return
	}
	if err := fd.Chmod(fs.FileMode(f.e.Mode)); err != nil {
		fail(fmt.Errorf("chmod %s: %w", f.part, cleanPathError(err)))
		return
	}
	mt := time.Unix(0, f.e.MTime)
	if err := r.fs.Chtimes(f.part, mt, mt); err != nil {
		fail(fmt.Errorf("set times %s: %w", f.part, cleanPathError(err)))
		return
	}
	fd.Close()
	fd = nil
	if r.pol == wire.PolicyRefuse {
		// Someone may have created the destination since we looked.
		if _, err := r.fs.Lstat(f.target); err == nil {
			fail(classed(retry.FaultPermission, fmt.Errorf("destination %s exists (use --overwrite, --skip-existing or --update)", f.target)))
			return
		}
	}
	if r.l.cutReason() != "" {
		// Cut meanwhile: verified, but no longer this session's to place.
		// The journal (closed, still on disk) lets the next attempt take
		// the blocks as they are.
		return
	}
	if err := r.fs.Rename(f.part, f.target); err != nil {
		fail(fmt.Errorf("rename into place %s: %w", f.target, cleanPathError(err)))
		return
	}
	if f.nblocks > 1 {
		r.fs.Remove(f.jname)
	}
	r.result(f, wire.ResultItem{ID: f.e.ID, OK: true, CRC: crc, Adler32: ad})
}

// sums joins the block sums into whole-file CRC32C and adler32; f.mu held.
// It is asked only of a file whose blocks are all held.
func (f *rfile) sums(blockSize int64) (crc, ad uint32) {
	return sumBlocks(f.blocks, f.adler, f.e.Size, blockSize, 0, math.MaxUint32)
}

// sumBlocks joins the sums of blocks [lo, hi] of set, which holds them all,
// into CRC32C and adler32 (when adler) of those bytes of a file of size
// bytes.
func sumBlocks(set *blockSet, adler bool, size, blockSize int64, lo, hi uint32) (crc, ad uint32) {
	ad = 1
	if set == nil {
		return 0, ad
	}
	// A hole's sums are those of zeros: computed once for a whole block.
	var zc, za uint32
	var zdone bool
	zeros := func(n int64) (uint32, uint32) {
		if n != blockSize {
			return checksum.ZerosCRC32C(n), adlerZerosIf(adler, n)
		}
		if !zdone {
			zc, za, zdone = checksum.ZerosCRC32C(n), adlerZerosIf(adler, n), true
		}
		return zc, za
	}
	set.each(func(i, c, a uint32, hole bool) {
		if i < lo || i > hi {
			return
		}
		n := min(blockSize, size-int64(i)*blockSize)
		if hole {
			c, a = zeros(n)
		}
		crc = checksum.CombineCRC32C(crc, c, n)
		if adler {
			ad = checksum.CombineAdler32(ad, a, n)
		}
	})
	return crc, ad
}

func adlerZerosIf(adler bool, n int64) uint32 {
	if !adler {
		return 1
	}
	return adlerZeros(n)
}

func (r *receiver) fileCRC(f *rfile) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, _ := f.sums(r.l.blockSize)
	return c
}

// applyDirs sets directory modes and times last, deepest first, so writing
// their contents does not disturb them.
func (r *receiver) applyDirs() {
	r.mu.Lock()
	dirs := slices.Clone(r.dirs)
	r.mu.Unlock()
	slices.SortFunc(dirs, func(a, b dirMeta) int { return strings.Count(b.path, "/") - strings.Count(a.path, "/") })
	for _, d := range dirs {
		r.fs.Chmod(d.path, d.mode)
		r.fs.Chtimes(d.path, d.mtime, d.mtime)
	}
}
