package mover

// Part pushes at the destination: the sessions pushing parts of one file
// (from several source nodes, one session each) fill one partial file and
// one journal, the same ones a whole push of the file would use
// (workNames). They share a partFile, found once per session through the
// server's PathLocks: its block set is the file's, its mutexes serialise
// the writes into the partial file and the journal's appends, and the
// session whose part, once verified, leaves every block of the file
// present puts the file in place. A whole push of a path being written in
// parts is refused as a second whole push is, and so is a part of another
// version of the file (size, time, block size or adler32 differ).

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/checksum"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/wire"
)

// partKey is the version of a file whose parts may share a partial file.
type partKey struct {
	size, mtime, blockSize int64
	adler                  bool
}

// partFile is what the sessions pushing parts of one file share.
type partFile struct {
	name string // the destination path
	key  partKey
	refs int // sessions holding it; guarded by PathLocks.mu

	wmu sync.Mutex // serialises writes into the partial file

	mu       sync.Mutex // guards what follows
	inited   bool
	blocks   *blockSet // the blocks present and verified, with their sums
	jour     *journal
	reserved int64 // space still set aside for the file, once for all parts
	placing  bool  // a session is putting the file in place
	placed   bool
}

// errPartOther refuses a part of another version of a file being received
// in parts: worth a retry once those parts are done.
var errPartOther = errors.New("another version of the file is being received in parts")

// errPathBusy is the reason a file being written by another session is
// refused.
const errPathBusy = "another transfer is writing it now"

// PartRetryable says whether a file's failure reason (FileResult.Reason)
// is one that passes by itself: the file was being written by another
// session (a whole push, or parts of another version of it). A part push
// failed so is worth pushing again later; other reasons are not.
func PartRetryable(reason string) bool {
	return strings.Contains(reason, errPartOther.Error()) || strings.HasSuffix(reason, ": "+errPathBusy)
}

// lockPart joins the sessions writing parts of name's version k, or says
// why not: a whole push holds the path, or parts of another version do.
func (p *PathLocks) lockPart(name string, k partKey) (*partFile, error) {
	if p == nil {
		return &partFile{name: name, key: k, refs: 1}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pf := p.parts[name]; pf != nil {
		if pf.key != k {
			return nil, fmt.Errorf("%s: %w (size, time, block size or adler32 differ): try again when they are done", name, errPartOther)
		}
		pf.refs++
		return pf, nil
	}
	if p.held[name] {
		return nil, fmt.Errorf("%s: %s", name, errPathBusy)
	}
	pf := &partFile{name: name, key: k, refs: 1}
	p.held[name] = true
	p.parts[name] = pf
	return pf, nil
}

// unlockPart leaves pf and says whether this was its last holder.
func (p *PathLocks) unlockPart(pf *partFile) bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pf.refs--
	if pf.refs > 0 {
		return false
	}
	p.retireLocked(pf)
	return true
}

// retirePart frees the path of a file put in place: later sessions start
// anew (and find the file there).
func (p *PathLocks) retirePart(pf *partFile) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.retireLocked(pf)
	p.mu.Unlock()
}

func (p *PathLocks) retireLocked(pf *partFile) {
	if p.parts[pf.name] == pf {
		delete(p.parts, pf.name)
		delete(p.held, pf.name)
	}
}

// record notes a block a session wrote and verified.
func (pf *partFile) record(h wire.BlockHeader, crc, ad uint32) error {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.blocks == nil {
		return nil
	}
	if h.Kind == wire.DataHole {
		pf.blocks.setHole(h.Index)
	} else {
		pf.blocks.set(h.Index, crc, ad)
	}
	if pf.jour != nil {
		return pf.jour.record(h.Index, crc)
	}
	return nil
}

// partEntry goes on with entry for a part push's file, once its path is
// known and its directory made.
func (r *receiver) partEntry(f *rfile, fail func(error) (wire.NeedItem, bool)) (wire.NeedItem, bool) {
	e := f.e
	pf, err := r.dst.Locks.lockPart(f.target, partKey{size: e.Size, mtime: e.MTime, blockSize: r.l.blockSize, adler: f.adler})
	if err != nil {
		return fail(err)
	}
	f.mu.Lock()
	f.pf, f.pfHeld = pf, true
	f.mu.Unlock()
	// The policy judges the final file, as for a whole push.
	if fi, err := r.fs.Lstat(f.target); err == nil {
		if fi.IsDir() {
			return fail(classed(retry.FaultPermission, fmt.Errorf("destination %s is a directory", f.target)))
		}
		same := fi.Mode().IsRegular() && fi.Size() == e.Size
		switch r.pol {
		case wire.PolicyRefuse:
			if same {
				f.inPlace = true
				go r.offerExisting(f)
				return wire.NeedItem{}, false
			}
			return fail(classed(retry.FaultPermission, fmt.Errorf("destination %s exists (use --overwrite, --skip-existing or --update)", f.target)))
		case wire.PolicySkip:
			r.release(f)
			r.l.prog.BytesSkipped.Add(r.l.part.Length)
			r.l.fileResult(FileResult{Path: e.Path, Size: e.Size, OK: true, Skipped: true, Reason: "exists", Complete: true})
			return wire.NeedItem{ID: e.ID, Action: wire.NeedSkip, Reason: "exists"}, true
		case wire.PolicyUpdate:
			if same && fi.ModTime().UnixNano() == e.MTime {
				f.inPlace = true
				go r.offerExisting(f)
				return wire.NeedItem{}, false
			}
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fail(linkKept(f.target))
		}
	}
	// Opening the shared state may re-check an earlier run's blocks: off
	// the control path.
	go r.partOffer(f)
	return wire.NeedItem{}, false
}

// partOffer readies the file's shared state and offers the sender the
// blocks of its part that are already there.
func (r *receiver) partOffer(f *rfile) {
	if err := r.partInit(f); err != nil {
		r.needFail(f, err)
		return
	}
	pf := f.pf
	var have []blockSum
	pf.mu.Lock()
	pf.blocks.each(func(i, c, a uint32, hole bool) {
		if i < f.lo || i >= f.hi {
			return
		}
		if hole {
			n := min(r.l.blockSize, f.e.Size-int64(i)*r.l.blockSize)
			c, a = checksum.ZerosCRC32C(n), adlerZerosIf(f.adler, n)
		}
		have = append(have, blockSum{Index: i, CRC: c, adler: a})
	})
	pf.mu.Unlock()
	f.mu.Lock()
	if len(have) == 0 {
		f.state = rReceiving
		closeReady(f)
		f.mu.Unlock()
		r.l.ctrl.queue(&wire.Need{Items: []wire.NeedItem{{ID: f.e.ID, Action: wire.NeedAll}}})
		return
	}
	f.state = rWaitPlan
	for _, s := range have {
		f.blocks.set(s.Index, s.CRC, s.adler)
	}
	f.mu.Unlock()
	r.l.ctrl.queue(&wire.Need{Items: []wire.NeedItem{{ID: f.e.ID, Action: wire.NeedSome, Have: wireSums(have)}}})
}

// partInit opens the file's shared state once: the partial file and
// journal an earlier run left (their blocks re-checked against the
// recorded sums), or new ones; and the room the file needs, set aside once
// for all its parts.
func (r *receiver) partInit(f *rfile) error {
	pf := f.pf
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.inited {
		return nil
	}
	need := min(max(f.e.Alloc, 0), f.e.Size)
	if fi, err := r.fs.Lstat(f.part); err == nil && fi.Mode().IsRegular() {
		need -= allocated(fi)
	}
	if pf.reserved == 0 {
		n, err := r.dst.reserve(r.fs, r.dst.Space, path.Dir(f.target), f.target, need)
		if err != nil {
			return err
		}
		pf.reserved = n
	}
	blocks := newBlockSet(f.adler)
	if j, have, ok := openJournal(r.fs, f.jname, f.e, r.l.blockSize, f.nblocks); ok {
		var sums []blockSum
		if len(have) > 0 {
			sums = r.checkBlocks(f.part, f, have)
		}
		if len(sums) > 0 {
			for _, s := range sums {
				blocks.set(s.Index, s.CRC, s.adler)
			}
			pf.blocks, pf.jour, pf.inited = blocks, j, true
			return nil
		}
		j.close()
	}
	if msg := r.l.cutReason(); msg != "" {
		return errors.New(msg)
	}
	fd, err := r.fs.OpenFile(f.part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", f.part, cleanPathError(err))
	}
	err = fd.Truncate(f.e.Size)
	fd.Close()
	if err != nil {
		return fmt.Errorf("size %s: %w", f.part, cleanPathError(err))
	}
	j, err := createJournal(r.fs, f.jname, f.e, r.l.blockSize)
	if err != nil {
		return cleanPathError(err)
	}
	pf.blocks, pf.jour, pf.inited = blocks, j, true
	return nil
}

// partFresh is startFresh for a part: the blocks of its range the file
// holds are forgotten (the sender found them different), the rest stay.
func (r *receiver) partFresh(f *rfile) error {
	if msg := r.l.cutReason(); msg != "" {
		return errors.New(msg)
	}
	if err := r.partInit(f); err != nil {
		return err
	}
	r.partForget(f)
	f.mu.Lock()
	f.blocks.reset()
	f.state = rReceiving
	closeReady(f)
	f.mu.Unlock()
	return nil
}

// partForget drops the blocks of f's range from the file's shared state.
func (r *receiver) partForget(f *rfile) {
	pf := f.pf
	pf.mu.Lock()
	if pf.blocks != nil {
		for i := f.lo; i < f.hi; i++ {
			pf.blocks.unset(i)
		}
	}
	pf.mu.Unlock()
}

// partWrote counts n bytes written against the file's reservation.
func (r *receiver) partWrote(pf *partFile, n int64) {
	r.dst.Space.release(takeReserved(&pf.mu, &pf.reserved, n))
}

// releasePart leaves the file's shared state; the last session out closes
// its journal and gives back the room still set aside.
func (r *receiver) releasePart(pf *partFile) {
	if !r.dst.Locks.unlockPart(pf) {
		return
	}
	pf.mu.Lock()
	j, n := pf.jour, pf.reserved
	pf.jour, pf.reserved = nil, 0
	pf.mu.Unlock()
	if j != nil {
		j.close()
	}
	r.dst.Space.release(n)
}

// partInPlace fills the verdict on a part whose file is in place already
// and equal under the policy: f's block set holds every block's sums.
func (r *receiver) partInPlace(f *rfile, it *wire.ResultItem) {
	f.mu.Lock()
	it.CRC, it.Adler32 = sumBlocks(f.blocks, f.adler, f.e.Size, r.l.blockSize, f.lo, f.hi-1)
	it.FileCRC, it.FileAdler32 = f.sums(r.l.blockSize)
	f.mu.Unlock()
	it.Complete = true
}

// partFinalize checks a received part end to end and, when the file then
// holds every block, puts it in place.
func (r *receiver) partFinalize(f *rfile) {
	pf := f.pf
	f.mu.Lock()
	fd, end := f.f, f.end
	f.f = nil
	crc, ad := sumBlocks(f.blocks, f.adler, f.e.Size, r.l.blockSize, f.lo, f.hi-1)
	f.mu.Unlock()
	if fd != nil {
		fd.Close()
	}
	if end.Abort != "" {
		r.partForget(f)
		r.resultOf(f, wire.ResultItem{ID: f.e.ID, Reason: end.Abort}, "") // the sender's word, and class
		return
	}
	if crc != end.CRC || (f.adler && ad != end.Adler32) {
		r.partForget(f)
		r.resultOf(f, wire.ResultItem{ID: f.e.ID, Reason: fmt.Sprintf("checksum mismatch: received crc32c %08x, sent %08x", crc, end.CRC)}, retry.FaultChecksum)
		return
	}
	it := wire.ResultItem{ID: f.e.ID, OK: true, CRC: crc, Adler32: ad}
	pf.mu.Lock()
	last := pf.blocks.count() == f.nblocks && !pf.placing && !pf.placed
	if last {
		pf.placing = true
		it.FileCRC, it.FileAdler32 = sumBlocks(pf.blocks, f.adler, f.e.Size, r.l.blockSize, 0, math.MaxUint32)
	}
	pf.mu.Unlock()
	if !last {
		r.result(f, it) // verified; the file waits for its other parts
		return
	}
	err := r.placePart(f)
	if err != nil {
		pf.mu.Lock()
		pf.placing = false
		pf.mu.Unlock()
		if errors.Is(err, errCutPlacing) {
			return // no longer this session's to place; the next one does
		}
		r.resultOf(f, wire.ResultItem{ID: f.e.ID, Reason: err.Error()}, FaultOf(err))
		return
	}
	it.Complete = true
	r.result(f, it)
}

var errCutPlacing = errors.New("cut while placing")

// placePart puts a file whose every block is verified in place: synced,
// its mode and time set, renamed to its final name, its journal removed.
func (r *receiver) placePart(f *rfile) error {
	fd, err := r.fs.OpenFile(f.part, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %v", f.part, cleanPathError(err))
	}
	err = fd.Sync()
	if err == nil {
		err = fd.Chmod(fs.FileMode(f.e.Mode))
	}
	fd.Close()
	if err != nil {
		return fmt.Errorf("sync %s: %v", f.part, cleanPathError(err))
	}
	mt := time.Unix(0, f.e.MTime)
	if err := r.fs.Chtimes(f.part, mt, mt); err != nil {
		return fmt.Errorf("set times %s: %v", f.part, cleanPathError(err))
	}
	if r.pol == wire.PolicyRefuse {
		if _, err := r.fs.Lstat(f.target); err == nil {
			return fmt.Errorf("destination %s exists (use --overwrite, --skip-existing or --update)", f.target)
		}
	}
	if r.l.cutReason() != "" {
		return errCutPlacing
	}
	if err := r.fs.Rename(f.part, f.target); err != nil {
		return fmt.Errorf("rename into place %s: %v", f.target, cleanPathError(err))
	}
	pf := f.pf
	pf.mu.Lock()
	j := pf.jour
	pf.jour, pf.placed = nil, true
	pf.mu.Unlock()
	if j != nil {
		j.close()
	}
	r.fs.Remove(f.jname)
	r.dst.Locks.retirePart(pf)
	return nil
}
