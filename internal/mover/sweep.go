package mover

import (
	"context"
	"io/fs"
	"path"
	"strings"
	"time"
)

// sweepPartials removes abandoned partial files and journals: those nobody
// has written for the server's PartialTTL. A resume (the same cp run again)
// needs them only while they are fresh; left forever, a copy that died on a
// full disk would keep it full. It runs at start and then every quarter of
// the TTL (between a minute and an hour) until ctx ends.
func (s *Server) sweepPartials(ctx context.Context) {
	period := min(max(s.cfg.PartialTTL/4, time.Minute), time.Hour)
	for {
		if n := s.SweepPartials(time.Now()); n > 0 {
			s.log.Info("removed abandoned partial files", "files", n, "older_than", s.cfg.PartialTTL.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

// SweepPartials removes the partial files and journals under the root last
// written before now less the TTL, skipping any a session is writing, and
// returns how many it removed.
func (s *Server) SweepPartials(now time.Time) int {
	if s.cfg.PartialTTL <= 0 {
		return 0
	}
	cutoff := now.Add(-s.cfg.PartialTTL)
	removed := 0
	fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() || !isWorkFile(d.Name()) {
			return nil
		}
		fi, err := d.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			return nil
		}
		if t, ok := workTarget(p); ok && s.locks.isHeld(t) {
			return nil
		}
		if s.root.Remove(p) == nil {
			removed++
		}
		return nil
	})
	return removed
}

// workTarget maps a partial file's or journal's name back to the file it is
// for, where the name was not shortened to a digest.
func workTarget(p string) (string, bool) {
	dir, name := path.Split(p)
	name = strings.TrimSuffix(strings.TrimSuffix(name, partSuffix), journalSuffix)
	if !strings.HasPrefix(name, ".") || strings.HasPrefix(name, ".lp-") {
		return "", false
	}
	return path.Join(dir, name[1:]), true
}
