package service

// Parts of large files: a file of at least Config.PartMinBytes is cut,
// when listed, into parts (plan.Parts), each pushed by its own task. The
// first part claimed fixes the file's owner (JobFile.To), the destination
// node whose partial file and resume journal every part fills; later parts
// go only over pairs whose To is the owner, so with more source nodes than
// destination nodes one file's parts come from several source nodes. The
// file is SUCCEEDED when every part is and one part's push said it
// completed the file; its checksum is the parts' combined in order, which
// must equal the destination's and the expected one, or the whole file is
// sent again.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/checksum"
	"github.com/lightpath/lightpath/internal/store"
	"github.com/lightpath/lightpath/internal/transfer"
	"github.com/lightpath/lightpath/internal/transfer/plan"
)

// cutParts cuts the large files of a listing into parts: it sets their
// Parts and returns the parts, PENDING.
//
// A file's size is the listing node's word, so what one page may cost is
// bounded whatever it claims: a file is cut into at most MaxFileParts
// parts (larger parts for a larger file), and once a page holds
// MaxPageParts parts its other large files move whole.
func (s *Service) cutParts(files []transfer.JobFile) []transfer.FilePart {
	var out []transfer.FilePart
	for i := range files {
		f := &files[i]
		size := s.partBytes
		if size > 0 && f.Size/size >= MaxFileParts {
			size = f.Size/MaxFileParts + 1
		}
		ps := plan.Parts(f.Size, s.partMin, size)
		if len(out)+len(ps) > MaxPageParts {
			continue
		}
		for _, p := range ps {
			out = append(out, transfer.FilePart{Job: f.Job, Path: f.Path, Part: p, State: transfer.FilePending})
			f.Parts++
		}
	}
	return out
}

// MaxFileParts and MaxPageParts bound the parts a listing's page is cut
// into (issue 28, finding 7): per file (at the default 256 MiB a part, a
// file past 256 GiB gets larger parts) and per page.
const (
	MaxFileParts = 1024
	MaxPageParts = 100000
)

// doesParts reports whether a data node said it pushes and takes parts.
func (s *Service) doesParts(ctx context.Context, node string) bool {
	ns, err := s.st.ListDataNodes(ctx)
	if err != nil {
		return false
	}
	i := slices.IndexFunc(ns, func(n transfer.DataNode) bool { return n.Node == node })
	return i >= 0 && ns[i].Parts
}

// partedFile reports whether a file moves in parts.
func partedFile(f transfer.JobFile) bool { return f.Parts > 0 }

// freshPart makes a new task of one pending part for the pair pr, when a
// file cut in parts has one this pair may carry: the file has no owner yet
// (this pair's destination becomes it) or its owner is the pair's To. A
// part larger than what is left of the pair's share (shareLeft, 0 for
// none) is left to another pair to the same destination with room for it,
// and a file without an owner must fit whole in what is left after the
// parts this pair's destination already owns, or go to a pair with room.
// It reports whether it made one.
func (r *claimRun) freshPart(j *transfer.Job, to transfer.DataNode, pr pairRun, tasks []transfer.Task, shareLeft int64) (bool, error) {
	if !r.me.Parts || !to.Parts {
		return false, nil // an older data node: it pushes or takes whole files only
	}
	parts, err := r.tx.ListFileParts(r.ctx, store.FilePartFilter{Job: j.ID, States: []string{transfer.FilePending},
		To: []string{"", pr.to}, Limit: BatchFiles})
	if err != nil || len(parts) == 0 {
		return false, err
	}
	files, err := r.filesOf(j.ID, parts)
	if err != nil {
		return false, err
	}
	held, err := r.blocked(slices.Collect(maps.Values(files))) // waiting for another writer
	if err != nil {
		return false, err
	}
	// The parts not yet handed out of the files this pair's destination
	// owns are as good as this pair's already: a new file is taken (and
	// its owner fixed, which gives all its parts to the pairs into that
	// node) only when it fits in what is left of the share after them.
	// Otherwise the first pair to claim would own every large file, and
	// carry them all past its share while the others idle.
	var committed int64
	left := map[string]int64{} // a new file's bytes not yet handed out
	for _, p := range parts {
		if p.To == pr.to {
			committed += p.Length
		}
		if p.To == "" {
			left[p.Path] += p.Length
		}
	}
	// A pair runs one part of a file at a time: parts are for spreading a
	// file over several source nodes; one node's streams already fill its
	// pair. Two parts of one file on one pair at once ran at 0.6 of the
	// booking on bench/service.sh where one at a time ran at 0.9.
	busy := map[string]bool{}
	for _, t := range tasks {
		if t.Part != nil && len(t.Files) == 1 && t.From == pr.from && t.To == pr.to &&
			(t.State == transfer.TaskActive || t.State == transfer.TaskQueued) {
			busy[t.Files[0]] = true
		}
	}
	for _, p := range parts {
		f, ok := files[p.Path]
		if !ok || f.State != transfer.FilePending && f.State != transfer.FileActive {
			continue
		}
		if f.To != "" && f.To != pr.to || busy[p.Path] || held[p.Path] != "" {
			continue
		}
		need, room := p.Length, shareLeft
		if f.To == "" {
			need, room = left[p.Path], shareLeft-committed/int64(pairsInto(*j, pr.to))
		}
		if shareLeft > 0 && need > room {
			// Another pair that can carry it whole takes it, or, when none
			// can, the one with the most of its share left.
			if left := r.othersLeft(j, pr, tasks, f.To); left >= need || left > room {
				continue
			}
		}
		t := transfer.Task{ID: newID("k-"), Job: j.ID, Kind: transfer.TaskCopy, State: transfer.TaskQueued, Endpoint: r.me.Endpoint, CreatedAt: r.now, Bytes: p.Length}
		if err := r.tx.CreateTask(r.ctx, t); err != nil {
			return false, err
		}
		if err := r.claim(j, t, []transfer.JobFile{f}, &p, to, pr, true); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// pairsInto is how many of the job's pairs push to node to (at least 1).
func pairsInto(j transfer.Job, to string) int {
	n := 0
	for _, p := range j.Pairs {
		if p.To == to {
			n++
		}
	}
	return max(n, 1)
}

// filesOf returns the files the parts are of, by path.
func (r *claimRun) filesOf(job string, parts []transfer.FilePart) (map[string]transfer.JobFile, error) {
	return filesOf(r.ctx, r.tx, job, parts)
}

func filesOf(ctx context.Context, st store.Store, job string, parts []transfer.FilePart) (map[string]transfer.JobFile, error) {
	var paths []string
	for _, p := range parts {
		if len(paths) == 0 || paths[len(paths)-1] != p.Path {
			paths = append(paths, p.Path)
		}
	}
	fs, err := st.ListJobFiles(ctx, store.JobFileFilter{Job: job, Paths: paths})
	if err != nil {
		return nil, err
	}
	out := make(map[string]transfer.JobFile, len(fs))
	for _, f := range fs {
		out[f.Path] = f
	}
	return out, nil
}

// requeuedPart claims a part task whose attempt was lost, to the file's
// owner while it lives. A task whose part was taken back (its owner was
// lost, the file starts afresh) ends without work. It reports whether it
// claimed the task.
func (r *claimRun) requeuedPart(j *transfer.Job, t transfer.Task) error {
	parts, err := r.tx.ListFileParts(r.ctx, store.FilePartFilter{Job: j.ID, Task: t.ID, States: []string{transfer.FileActive}})
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		t.State, t.EndedAt, t.LeaseExpires = transfer.TaskCancelled, r.now, time.Time{}
		t.Error = "its part was taken back: the file starts afresh"
		return r.tx.UpdateTask(r.ctx, t)
	}
	p := parts[0]
	files, err := r.filesOf(j.ID, parts)
	if err != nil {
		return err
	}
	f, ok := files[p.Path]
	if !ok {
		return nil
	}
	to, ok := findNode(r.live[dstLocation(*j).Endpoint], f.To)
	if !ok || !r.me.Parts {
		return nil // the owner is lost (the clock takes the file back), or this node pushes no parts
	}
	return r.claim(j, t, []transfer.JobFile{f}, &p, to, r.pairOf(j, r.me.Node, to.Node), false)
}

// partVerdicts is what a part task's report changed.
type partVerdicts struct {
	moved     int64 // bytes of the parts that arrived
	doneBytes int64 // bytes of the files that arrived whole
	filesOK   int
	filesBad  int
	partsOK   int
	partsBad  int
	// noSpace is a file that failed for want of room at its
	// destination, and why (its path and error), or "".
	noSpace string
}

// reportPart takes a part task's report, inside the caller's transaction:
// the part's verdict, the task's end with Done, and the file's when its
// last part is in. t and j are changed in place; the caller stores them.
func (s *Service) reportPart(ctx context.Context, tx store.Store, j *transfer.Job, t *transfer.Task, rep apiv1.TaskReport, now time.Time) (partVerdicts, error) {
	var v partVerdicts
	parts, err := tx.ListFileParts(ctx, store.FilePartFilter{Job: j.ID, Task: t.ID})
	if err != nil {
		return v, err
	}
	i := slices.IndexFunc(parts, func(p transfer.FilePart) bool { return p.Index == t.Part.Index })
	var p *transfer.FilePart
	var f transfer.JobFile
	if i >= 0 {
		p = &parts[i]
		files, err := filesOf(ctx, tx, j.ID, parts[i:i+1])
		if err != nil {
			return v, err
		}
		f = files[p.Path]
	}
	live := p != nil && p.State == transfer.FileActive && f.State == transfer.FileActive
	changed := false
	fail := func(why, class string) {
		p.Error = oneLine(why)
		if p.Error == "" {
			p.Error = "failed without a reason"
		}
		p.Class = failureClass(class)
		failAttempt(p.Class, &p.State, &p.Attempts)
		v.partsBad++
		changed = true
	}
	for _, fr := range rep.Files {
		if !live || p.State != transfer.FileActive || fr.Path != p.Path || fr.Part != nil && fr.Part.Offset != p.Offset {
			continue // not this task's part, or reported already
		}
		if !fr.OK {
			fail(fr.Error, fr.Class)
			continue
		}
		if why := s.unconfirmed(*j, *t, f, p, fr); why != "" {
			fail(why, apiv1.ClassInternal) // arrived only on the destination's word
			continue
		}
		p.State, p.Checksum, p.Error, p.Class = transfer.FileSucceeded, fr.Checksum, "", ""
		p.Complete, p.FileChecksum = fr.Complete, fr.FileChecksum
		v.moved += p.Length
		v.partsOK++
		changed = true
		if pi := slices.IndexFunc(j.Pairs, func(pp transfer.Pair) bool { return pp.From == t.From && pp.To == t.To }); pi >= 0 {
			j.Pairs[pi].BytesDone += p.Length
		}
	}
	t.BytesDone = max(t.BytesDone, rep.BytesDone)
	if rep.Done {
		if live && p.State == transfer.FileActive {
			why := rep.Error
			if why == "" {
				why = "the task ended without a word on its part"
			}
			fail(why, rep.Class)
		}
		t.EndedAt = now
		if p != nil && p.State == transfer.FileSucceeded {
			t.State = transfer.TaskSucceeded
		} else {
			t.State, t.Error = transfer.TaskFailed, oneLine(rep.Error)
			if t.Error == "" {
				t.Error = "its part did not arrive"
			}
		}
	}
	if !changed {
		return v, nil
	}
	if err := tx.UpdateFileParts(ctx, []transfer.FilePart{*p}); err != nil {
		return v, err
	}
	err = s.judgeFile(ctx, tx, *j, f, &v)
	if v.noSpace != "" && j.Storage == "" {
		j.Storage = v.noSpace
	}
	return v, err
}

// judgeFile ends a file cut in parts when its parts say so: FAILED when
// one failed for good, SUCCEEDED when all arrived, one completed the file
// and the checksums agree; sent again whole on a mismatch; its last part
// pushed again when none completed the file.
func (s *Service) judgeFile(ctx context.Context, tx store.Store, j transfer.Job, f transfer.JobFile, v *partVerdicts) error {
	parts, err := tx.ListFileParts(ctx, store.FilePartFilter{Job: j.ID, Paths: []string{f.Path}})
	if err != nil {
		return err
	}
	done := 0
	var failed, complete *transfer.FilePart
	for i := range parts {
		switch {
		case parts[i].State == transfer.FileSucceeded:
			done++
			if parts[i].Complete && complete == nil {
				complete = &parts[i]
			}
		case parts[i].State == transfer.FileFailed && failed == nil:
			failed = &parts[i]
		}
	}
	f.PartsDone = done
	switch {
	case failed != nil:
		f.State, f.Error, f.Class = transfer.FileFailed, oneLine(fmt.Sprintf("part %d: %s", failed.Index, failed.Error)), failed.Class
		if f.Class == apiv1.ClassNoSpace {
			v.noSpace = oneLine(f.Path + ": " + f.Error)
		}
		v.filesBad++
		if err := endParts(ctx, tx, parts, transfer.FileFailed, "another part of the file failed"); err != nil {
			return err
		}
	case done < len(parts):
	case complete == nil:
		// Every part arrived, but no push said it completed the file (its
		// finalizing failed): the last part pushed again finds its blocks
		// there and completes it.
		last := &parts[len(parts)-1]
		if last.Attempts >= MaxAttempts {
			f.State, f.Error, f.Class = transfer.FileFailed, "every part arrived, but the destination never completed the file", apiv1.ClassInternal
			v.filesBad++
			break
		}
		last.State, last.Error = transfer.FilePending, "every part arrived, but no push completed the file"
		f.PartsDone--
		if err := tx.UpdateFileParts(ctx, []transfer.FilePart{*last}); err != nil {
			return err
		}
	default:
		sum, why := partsChecksum(j.Checksum, parts, *complete)
		if why == "" && f.Expected != "" && !strings.EqualFold(sum, f.Expected) {
			why = fmt.Sprintf("checksum mismatch: got %s, want %s", sum, f.Expected)
		}
		f.Checksum = sum
		if why == "" {
			f.State, f.Error, f.Class = transfer.FileSucceeded, "", ""
			v.filesOK++
			v.doneBytes += f.Size
			break
		}
		// Sent again whole, once; a second mismatch is final.
		again := f.Class == apiv1.ClassChecksum || f.Attempts >= MaxAttempts
		f.Error, f.Class = oneLine(why), apiv1.ClassChecksum
		if again {
			f.State = transfer.FileFailed
			v.filesBad++
			break
		}
		f.State, f.To, f.PartsDone = transfer.FilePending, "", 0
		if err := restartParts(ctx, tx, parts); err != nil {
			return err
		}
	}
	return tx.UpdateJobFiles(ctx, []transfer.JobFile{f})
}

// partsChecksum is a file's checksum combined from its parts' in order
// (hex, of the job's algorithm), and why it cannot be trusted: it differs
// from the whole file's checksum the destination computed (complete's).
// A part without a checksum (left alone, already there) leaves the
// destination's word as the file's.
func partsChecksum(algo string, parts []transfer.FilePart, complete transfer.FilePart) (string, string) {
	var sum uint32
	for i, p := range parts {
		c, err := strconv.ParseUint(p.Checksum, 16, 32)
		if err != nil {
			return complete.FileChecksum, ""
		}
		switch {
		case i == 0:
			sum = uint32(c)
		case algo == transfer.ChecksumAdler32:
			sum = checksum.CombineAdler32(sum, uint32(c), p.Length)
		default:
			sum = checksum.CombineCRC32C(sum, uint32(c), p.Length)
		}
	}
	hex := fmt.Sprintf("%08x", sum)
	if complete.FileChecksum != "" && !strings.EqualFold(hex, complete.FileChecksum) {
		return hex, fmt.Sprintf("checksum mismatch: the parts combine to %s, the destination has %s", hex, complete.FileChecksum)
	}
	return hex, ""
}

// restartParts puts every part of a file back to PENDING, out of any
// task and without an owner: the file starts afresh (at a new owner,
// maybe).
func restartParts(ctx context.Context, tx store.Store, parts []transfer.FilePart) error {
	for i := range parts {
		p := &parts[i]
		p.State, p.Task, p.To, p.Checksum, p.Complete, p.FileChecksum = transfer.FilePending, "", "", "", false, ""
	}
	return tx.UpdateFileParts(ctx, parts)
}

// setOwner marks every part of file f as going to owner.
func (s *Service) setOwner(ctx context.Context, tx store.Store, f transfer.JobFile, owner string) error {
	parts, err := tx.ListFileParts(ctx, store.FilePartFilter{Job: f.Job, Paths: []string{f.Path}})
	if err != nil {
		return err
	}
	for i := range parts {
		parts[i].To = owner
	}
	return tx.UpdateFileParts(ctx, parts)
}

// endParts ends the parts of a file not yet ended, with state and why.
func endParts(ctx context.Context, tx store.Store, parts []transfer.FilePart, state, why string) error {
	var out []transfer.FilePart
	for _, p := range parts {
		if p.State == transfer.FilePending || p.State == transfer.FileActive {
			p.State, p.Error = state, why
			out = append(out, p)
		}
	}
	return tx.UpdateFileParts(ctx, out)
}

// lapseOwners takes back the files cut in parts whose owner's lease
// lapsed: their parts go back to PENDING with the owner cleared, and the
// next claim fixes a new owner, which starts the file afresh (the old
// owner's partial file is out of reach). The caller holds mu.
//
// An owner becomes unreachable only when a node's liveness or a job's
// booked pairs change (a claim fixes a reachable one), so the open parts
// are read only then: not every second (a 40 TB job in 256 MiB parts has
// 150,000 of them; issue 30).
func (s *Service) lapseOwners(ctx context.Context, now time.Time) error {
	all, _, err := s.liveNodes(ctx, s.st, now)
	if err != nil {
		return err
	}
	alive := map[string]bool{}
	for _, n := range all {
		alive[n.Node] = n.Alive
	}
	key, err := s.ownersKey(ctx, all)
	if err != nil || key == s.ownersScanned {
		return err
	}
	open, err := s.st.ListFileParts(ctx, store.FilePartFilter{States: []string{transfer.FilePending, transfer.FileActive}})
	if err != nil {
		return err
	}
	if len(open) == 0 {
		s.ownersScanned = key
		return nil
	}
	byJob := map[string][]transfer.FilePart{}
	var jobs []string
	for _, p := range open {
		if _, ok := byJob[p.Job]; !ok {
			jobs = append(jobs, p.Job)
		}
		byJob[p.Job] = append(byJob[p.Job], p)
	}
	for _, id := range jobs {
		j, err := s.st.GetJob(ctx, id)
		if err != nil {
			return err
		}
		if j.State != transfer.JobActive {
			continue
		}
		files, err := filesOf(ctx, s.st, id, byJob[id])
		if err != nil {
			return err
		}
		var lost []transfer.JobFile
		for _, f := range files {
			if f.State == transfer.FileActive && f.To != "" && !reachable(j, f.To, alive) {
				lost = append(lost, f)
			}
		}
		if len(lost) == 0 {
			continue
		}
		slices.SortFunc(lost, func(a, b transfer.JobFile) int { return strings.Compare(a.Path, b.Path) })
		err = s.tx(ctx, func(tx store.Store) error {
			j, err := tx.GetJob(ctx, id)
			if err != nil || transfer.JobEnded(j.State) {
				return err
			}
			owner := lost[0].To
			for i := range lost {
				f := &lost[i]
				parts, err := tx.ListFileParts(ctx, store.FilePartFilter{Job: id, Paths: []string{f.Path}})
				if err != nil {
					return err
				}
				if err := restartParts(ctx, tx, parts); err != nil {
					return err
				}
				f.Error = "its owner, data node " + f.To + ", was lost (its lease lapsed); the file starts afresh"
				if alive[f.To] {
					f.Error = "no live source node has a booked pair to its owner, data node " + f.To + "; the file starts afresh"
				}
				f.State, f.To, f.PartsDone = transfer.FilePending, "", 0
			}
			if err := tx.UpdateJobFiles(ctx, lost); err != nil {
				return err
			}
			j.Reason = fmt.Sprintf("data node %s lost; the files in parts it owned start afresh", owner)
			if alive[owner] {
				j.Reason = fmt.Sprintf("no live pair to data node %s; the files in parts it owned start afresh", owner)
			}
			return s.saveJob(ctx, tx, &j, now)
		})
		if err != nil {
			return err
		}
		s.notify()
	}
	s.ownersScanned = key
	return nil
}

// ownersKey sums up what lapseOwners' verdicts depend on besides the
// parts themselves: which data nodes live, and the booked pairs of the
// ACTIVE jobs.
func (s *Service) ownersKey(ctx context.Context, nodes []transfer.DataNode) (string, error) {
	js, err := s.st.ListJobs(ctx, store.JobFilter{States: []string{transfer.JobActive}})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, n := range nodes {
		if n.Alive {
			b.WriteString(n.Node)
			b.WriteByte(',')
		}
	}
	slices.SortFunc(js, func(a, b transfer.Job) int { return strings.Compare(a.ID, b.ID) })
	for _, j := range js {
		b.WriteString(";" + j.ID)
		for _, p := range j.Pairs {
			b.WriteString("|" + p.From + ">" + p.To + ":" + p.Reservation)
		}
	}
	return b.String(), nil
}

// reachable reports whether a job can still push to owner: it lives and,
// when the job runs on booked pairs (some with both nodes alive), one of
// them goes to it from a live source node (freshJob's choice of pairs).
func reachable(j transfer.Job, owner string, alive map[string]bool) bool {
	if !alive[owner] {
		return false
	}
	booked := false
	for _, p := range j.Pairs {
		if p.Reservation == "" || !alive[p.From] || !alive[p.To] {
			continue
		}
		booked = true
		if p.To == owner {
			return true
		}
	}
	return !booked
}
