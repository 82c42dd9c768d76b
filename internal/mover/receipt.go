package mover

import (
	"fmt"

	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/wire"
)

// The checksums a receipt names (the transfer service's names).
const (
	algoCRC32C  = "crc32c"
	algoAdler32 = "adler32"
)

// SumHex is the checksum a verdict carries, in hex: adler32's when adler,
// crc32c's otherwise; "" when it carries none (a file left alone unread,
// as a skip under the policy). The destination's receipt and the source's
// report both spell a verdict's checksum with it, so they agree.
func SumHex(adler bool, fr FileResult) string {
	if adler {
		if !fr.HasAdler || fr.Skipped && fr.Adler32 == 0 {
			return ""
		}
		return fmt.Sprintf("%08x", fr.Adler32)
	}
	if fr.Skipped && fr.CRC32C == 0 && fr.Size > 0 {
		return ""
	}
	return fmt.Sprintf("%08x", fr.CRC32C)
}

// FileSumHex is the whole file's checksum a part push that completed the
// file carries, in hex (as SumHex), or "" when it carries none (not
// complete, or a skip that left the file unread).
func FileSumHex(adler bool, fr FileResult) string {
	if !fr.Complete {
		return ""
	}
	c := fr.FileCRC32C
	if adler {
		if !fr.HasAdler {
			return ""
		}
		c = fr.FileAdler32
	}
	if fr.Skipped && c == 0 {
		return ""
	}
	return fmt.Sprintf("%08x", c)
}

// sendReceipt sends, before a file's verdict it (ok), the receipt of the
// file: in a session under a grant, on a server that holds its receipt
// secret, with a client of protocol VersionReceipt or later. The receipt
// is over what this end holds: the path it wrote, the size announced and
// the checksum it computed of the bytes it received (or none, for a file
// it left alone), so the controller can tell the source's word from the
// destination's (grant.Receipt).
func (r *receiver) sendReceipt(f *rfile, it wire.ResultItem) {
	g, key := r.dst.Grant, r.dst.ReceiptKey
	if g == nil || len(key) == 0 || !it.OK || f.e.Kind != wire.EntryFile ||
		r.l.ctrl.version < wire.VersionReceipt || r.l.opts.Select.DryRun {
		return
	}
	adler := r.l.opts.Adler32
	fr := FileResult{Size: f.e.Size, OK: true, Skipped: it.Skipped, CRC32C: it.CRC, Adler32: it.Adler32, HasAdler: adler,
		Complete: it.Complete, FileCRC32C: it.FileCRC, FileAdler32: it.FileAdler32}
	rc := grant.Receipt{Task: g.Task, Attempt: g.Attempt, Path: f.target, Size: f.e.Size, Algo: algoCRC32C}
	if adler {
		rc.Algo = algoAdler32
	}
	if p := r.l.part; p != nil {
		fr.Size = p.Length
		rc.Offset, rc.Length, rc.Complete, rc.FileSum = p.Offset, p.Length, it.Complete, FileSumHex(adler, fr)
	}
	rc.Sum = SumHex(adler, fr)
	r.l.ctrl.queue(&wire.Receipt{ID: f.e.ID, MAC: rc.Sign(key)})
}

// skipReceipts sends the receipts of the files a batch of needs skips
// (left alone under the policy: whole, and complete when a part push's),
// before the needs.
func (r *receiver) skipReceipts(needs []wire.NeedItem) {
	for _, it := range needs {
		if it.Action != wire.NeedSkip {
			continue
		}
		r.mu.Lock()
		f := r.files[it.ID]
		r.mu.Unlock()
		if f != nil {
			r.sendReceipt(f, wire.ResultItem{ID: it.ID, OK: true, Skipped: true, Complete: r.l.part != nil})
		}
	}
}
