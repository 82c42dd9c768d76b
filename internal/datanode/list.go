package datanode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
)

// partSuffix and journalSuffix name the mover's work files (a receiver's
// half-received file and its resume journal): never part of a dataset.
const (
	partSuffix    = ".lightpath-part"
	journalSuffix = ".lightpath-journal"
)

func isWorkFile(name string) bool {
	return strings.HasSuffix(name, partSuffix) || strings.HasSuffix(name, journalSuffix)
}

// runList lists a list task's sources and reports the listing.
func (n *node) runList(ctx context.Context, t *running) {
	w := t.work
	timeout := DefaultListTimeout
	if w.Timeout != "" {
		if d, err := time.ParseDuration(w.Timeout); err == nil && d > 0 {
			timeout = d
		}
	}
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, timeout)
	files, err := listSources(lctx, n.root, n.cfg.Endpoint, w.Sources)
	cancel()
	l := apiv1.Listing{Attempt: w.Task.Attempt, Elapsed: time.Since(start)}
	switch {
	case ctx.Err() != nil:
		l.Error = "listing stopped: " + context.Cause(ctx).Error()
	case errors.Is(err, context.DeadlineExceeded):
		l.Error = fmt.Sprintf("listing the sources took longer than the task's timeout (%s)", timeout)
	case err != nil:
		l.Error = err.Error()
	default:
		l.Files = files
	}
	var bytes int64
	for _, f := range files {
		bytes += f.Size
	}
	t.prog.set(0)
	n.log.Info("listed", "task", w.Task.ID, "job", w.Task.Job, "files", len(l.Files), "bytes", bytes, "err", l.Error,
		"elapsed", l.Elapsed.Round(time.Millisecond))
	if l.Error != "" {
		n.deliver(ctx, t, func(c context.Context) (apiv1.TaskAnswer, error) {
			return n.cfg.Client.ReportListing(c, w.Task.ID, l)
		})
		return
	}
	// In pages, each sent once its answer came (a page sent again after a
	// lost answer is taken once), so that the controller holds one page at
	// a time however large the dataset.
	pages := listingPages(files, apiv1.MaxListingPage, listingPageBytes)
	for i, page := range pages {
		l.Page, l.More, l.Files = i, i < len(pages)-1, page
		ans, ok := n.deliver(ctx, t, func(c context.Context) (apiv1.TaskAnswer, error) {
			return n.cfg.Client.ReportListing(c, w.Task.ID, l)
		})
		if !ok || ans.Cancel {
			return
		}
	}
}

// listingPageBytes bounds a page's files as JSON: half the controller's
// bound on a page's body (api.MaxListingPageBytes), leaving room for the
// envelope.
const listingPageBytes = 4 << 20

// listingPages cuts a listing into pages of at most maxFiles files and
// about maxBytes of JSON (a file larger alone is a page of its own); an
// empty listing is one empty page.
func listingPages(files []apiv1.ListedFile, maxFiles, maxBytes int) [][]apiv1.ListedFile {
	var pages [][]apiv1.ListedFile
	start, size := 0, 0
	for i, f := range files {
		b, _ := json.Marshal(f)
		if i > start && (i-start >= maxFiles || size+len(b)+1 > maxBytes) {
			pages = append(pages, files[start:i])
			start, size = i, 0
		}
		size += len(b) + 1
	}
	return append(pages, files[start:])
}

// listSources walks each source (a path under root, as the job gave it)
// and returns every regular file under it: its path relative to root, the
// source it was found under, its size and time. Nothing outside root is
// read: root is an os.Root, and symbolic links are not followed out of it
// (a link to a file inside root is listed as that file; links to
// directories are not walked, so no cycle can hold the walk). The mover's
// work files are left out. A source that does not exist is an error that
// names the endpoint.
func listSources(ctx context.Context, root *os.Root, endpoint string, sources []string) ([]apiv1.ListedFile, error) {
	var out []apiv1.ListedFile
	seen := map[string]bool{}
	fsys := root.FS()
	for _, src := range sources {
		p, err := cleanRel(src)
		if err != nil {
			return nil, err
		}
		fi, err := root.Stat(p)
		if err != nil {
			return nil, sourceError(src, endpoint, err)
		}
		add := func(rel string, fi fs.FileInfo) {
			if seen[rel] || isWorkFile(path.Base(rel)) {
				return
			}
			seen[rel] = true
			out = append(out, apiv1.ListedFile{Path: rel, Source: src, Size: fi.Size(), MTime: fi.ModTime().UTC()})
		}
		if fi.Mode().IsRegular() {
			add(p, fi)
			continue
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s: not a regular file or a directory under endpoint %s's root", src, endpoint)
		}
		err = fs.WalkDir(fsys, p, func(rel string, d fs.DirEntry, err error) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				return sourceError(rel, endpoint, err)
			}
			switch {
			case d.Type().IsRegular():
				info, err := d.Info()
				if err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						return nil // gone while we walked
					}
					return sourceError(rel, endpoint, err)
				}
				add(rel, info)
			case d.Type()&fs.ModeSymlink != 0:
				// Followed only to a regular file inside the root.
				if info, err := root.Stat(rel); err == nil && info.Mode().IsRegular() {
					add(rel, info)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cleanRel makes a source path a clean path relative to the root ("." for
// the root itself), refusing one that leads out.
func cleanRel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%q: the path holds a NUL byte", p)
	}
	c := path.Clean("/" + p)
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("%s: the path leads out of the endpoint's root", p)
		}
	}
	c = strings.TrimPrefix(c, "/")
	if c == "" {
		c = "."
	}
	return c, nil
}

// sourceError words a failure to read a source: "run7: no such file or
// directory under endpoint E's root".
func sourceError(p, endpoint string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	msg := err.Error()
	if strings.Contains(msg, "path escapes") {
		msg = "leads outside the root"
	}
	return fmt.Errorf("%s: %s under endpoint %s's root", p, msg, endpoint)
}
