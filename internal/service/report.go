package service

// What a copy task's report may say (issue 28, finding 4): a data node's
// report is the word of one host, which may be compromised. Its figures
// are bounded by the task before anything of them is stored or summed,
// and a file counts as arrived only on the destination node's receipt
// (grant.Receipt), which the source node cannot make.

import (
	"cmp"
	"fmt"
	"math"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/grant"
)

// MaxThroughputBps bounds a task's reported throughput where the topology
// knows no access link of its nodes (1 Tbit/s); where it knows them, the
// bound is ThroughputMargin times the slower node's access capacity.
const (
	MaxThroughputBps = 1e12
	ThroughputMargin = 2
)

// MaxReportFiles bounds the verdicts one report carries: a task's files
// (BatchFiles at most) several times over, since a push resumed in a new
// session may give a file a verdict in each (a failure, then its
// success) before the node's next report.
const MaxReportFiles = 16 * BatchFiles

// reportBounds are what a task lets a report of it say.
type reportBounds struct {
	bytes  int64   // the task's bytes: its files' sizes, or its part's
	maxBps float64 // the highest throughput it may report
}

// boundsOf are task t's bounds on the topology (nil: none known).
func boundsOf(topo *controller.Topo, t transfer.Task) reportBounds {
	b := reportBounds{bytes: max(t.Bytes, 0), maxBps: MaxThroughputBps}
	if topo == nil {
		return b
	}
	var access uint64
	for _, n := range []string{t.From, t.To} {
		if n == "" {
			continue
		}
		if a := accessBps(topo, n); a > 0 && (access == 0 || a < access) {
			access = a
		}
	}
	if access > 0 {
		b.maxBps = min(MaxThroughputBps, ThroughputMargin*float64(access))
	}
	return b
}

// checkFigures refuses figures no data node sends (negative bytes; a
// throughput negative, not a number or infinite: JSON carries neither of
// the last two, so only a crafted caller of the service could) and clamps
// the others to the task's bounds: bytes done at most the task's bytes (a
// node counts the blocks it sent again, so an honest one may say more),
// throughput at most maxBps.
func checkFigures(field string, bytesDone int64, bps float64, b reportBounds) (int64, float64, error) {
	switch {
	case bytesDone < 0:
		return 0, 0, invalid(field, "%s.bytes_done %d: want 0 or more", field, bytesDone)
	case math.IsNaN(bps) || math.IsInf(bps, 0) || bps < 0:
		return 0, 0, invalid(field, "%s.throughput_bps %v: want a finite rate, 0 or more", field, bps)
	}
	return min(bytesDone, b.bytes), min(bps, b.maxBps), nil
}

// checkReport is a copy task's report as the controller takes it, or why
// it is refused (400): its figures bounded by the task (checkFigures), at
// most MaxReportFiles verdicts, each checksum empty or
// eight hex digits (crc32c and adler32 are 32 bits), each receipt at most
// grant.MaxReceipt bytes and each part's range not negative. A pure
// function: FuzzCheckReport feeds it any report.
func checkReport(rep apiv1.TaskReport, b reportBounds) (apiv1.TaskReport, error) {
	var err error
	rep.BytesDone, rep.ThroughputBps, err = checkFigures("report", rep.BytesDone, rep.ThroughputBps, b)
	if err != nil {
		return apiv1.TaskReport{}, err
	}
	if len(rep.Files) > MaxReportFiles {
		return apiv1.TaskReport{}, invalid("files", "%d verdicts in one report, at most %d", len(rep.Files), MaxReportFiles)
	}
	for _, fr := range rep.Files {
		switch {
		case !checksumOK(fr.Checksum):
			return apiv1.TaskReport{}, invalid("files", "file %.200q: checksum %.80q: want eight hex digits", fr.Path, fr.Checksum)
		case !checksumOK(fr.FileChecksum):
			return apiv1.TaskReport{}, invalid("files", "file %.200q: file checksum %.80q: want eight hex digits", fr.Path, fr.FileChecksum)
		case len(fr.Receipt) > grant.MaxReceipt:
			return apiv1.TaskReport{}, invalid("files", "file %.200q: receipt of %d bytes, at most %d", fr.Path, len(fr.Receipt), grant.MaxReceipt)
		case fr.Part != nil && (fr.Part.Offset < 0 || fr.Part.Length < 0):
			return apiv1.TaskReport{}, invalid("files", "file %.200q: part at %d of %d bytes", fr.Path, fr.Part.Offset, fr.Part.Length)
		}
	}
	return rep, nil
}

// checksumOK: empty, or eight hex digits.
func checksumOK(s string) bool {
	if s == "" {
		return true
	}
	if len(s) != 8 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// algoName is the name a receipt gives a job's checksum.
func algoName(j transfer.Job) string {
	if j.Checksum == transfer.ChecksumAdler32 {
		return transfer.ChecksumAdler32
	}
	return transfer.ChecksumCRC32C
}

// unconfirmed is why a file reported OK does not count, "" when the
// destination's receipt confirms the verdict as reported: file f (part p
// of it, when p is set) of attempt t written to t.To with the reported
// checksums. The receipt is checked with the destination node's secret,
// over what the controller expects of the file (its destination path and
// listed size), not over what the report says of it.
func (s *Service) unconfirmed(j transfer.Job, t transfer.Task, f transfer.JobFile, p *transfer.FilePart, fr apiv1.FileReport) string {
	rc := grant.Receipt{Task: t.ID, Attempt: t.Attempt, Path: f.Dest, Size: f.Size, Algo: algoName(j), Sum: fr.Checksum}
	if p != nil {
		rc.Offset, rc.Length, rc.Complete, rc.FileSum = p.Offset, p.Length, fr.Complete, fr.FileChecksum
	}
	switch {
	case fr.Receipt == "":
		return fmt.Sprintf("the destination did not confirm it: the report has no receipt of data node %s", t.To)
	case !rc.Verify(s.nodeSecret(t.To), fr.Receipt):
		// Said with what was checked: a file whose size changed since its
		// listing is confirmed at its new size, which is not this one.
		return fmt.Sprintf("the destination did not confirm it: the receipt is not data node %s's for %s of %d bytes with %s %s",
			t.To, f.Dest, f.Size, rc.Algo, cmp.Or(fr.Checksum, "no checksum"))
	}
	return ""
}

// What becomes of a file (or a part) whose attempt failed is decided by
// the class of the failure, as the data node found it where the error was
// made (apiv1.FailureClasses), never by the words of its reason: a file
// that is not there, a refused permission and a full destination fail it
// at once (another attempt on the same pair would meet the same; the
// storage is one for every node of an endpoint); a grant refused as stale
// means the attempt was the controller's to redo, and the file is sent
// again without the attempt counting; the network, a checksum that did
// not match and anything else (internal) send it again, up to
// MaxAttempts. A class missing or unknown (a data node older than the
// classes) is internal.

// failureClass is a report's class as the controller takes it.
func failureClass(c string) string { return string(retry.ParseFault(c)) }

// failAttempt sets the state of a file (or a part) whose attempt, its
// attempts-th, failed with class c (as failureClass spells it): FAILED,
// or PENDING to be sent again (an attempt refused by its grant given
// back). It reports whether the file failed for good.
func failAttempt(c string, state *string, attempts *int) bool {
	switch c {
	case apiv1.ClassNotFound, apiv1.ClassPermission, apiv1.ClassNoSpace:
		*state = transfer.FileFailed
		return true
	case apiv1.ClassGrant:
		*state = transfer.FilePending
		*attempts = max(*attempts-1, 0)
		return false
	}
	if *attempts >= MaxAttempts {
		*state = transfer.FileFailed
		return true
	}
	*state = transfer.FilePending
	return false
}

// noteStorage keeps on job j the first file that failed for want of room
// at its destination (its path and why), which the job's reason then
// names: the job goes on with what fits.
func noteStorage(j *transfer.Job, path, class, why string) {
	if class == apiv1.ClassNoSpace && j.Storage == "" {
		j.Storage = oneLine(path + ": " + why)
	}
}

// storagePrefix opens a job's reason once a file of it found no room at
// its destination.
const storagePrefix = "storage: no space: "
