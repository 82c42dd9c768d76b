package mover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/transfer/grant"
)

// destFS is the destination as a receiver touches it. Paths are relative
// to the destination's root (as Dest.target makes them); each is resolved
// at the moment of the call beneath the directory the session may write,
// by an os.Root opened there: a link, whenever made or swapped, cannot
// carry a write (or a read) out of it, since os.Root refuses any
// resolution that leaves its directory (with openat and O_NOFOLLOW per
// component on Linux, race-free). Without a grant that directory is the
// destination's root; with one, it is the directory a grant path covers
// (the path itself, or for a path that names the entry itself its parent,
// where the entry's partial file and journal lie too). The directories a
// grant path lies in are reached from the root through directories only,
// never through a link: a link there, made by an earlier push, could
// retarget a later grant's whole directory.
type destFS struct {
	root  *os.Root
	grant *grant.Grant

	mu     sync.Mutex
	roots  map[string]*os.Root // opened at a grant's directories, by path
	closed bool                // the session ended: nothing more is opened
}

func newDestFS(root *os.Root, g *grant.Grant) *destFS {
	return &destFS{root: root, grant: g, roots: map[string]*os.Root{}}
}

// close releases the roots opened at the grant's directories.
func (d *destFS) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.roots {
		r.Close()
	}
	d.roots = map[string]*os.Root{}
	d.closed = true
}

// base is the directory beneath which p is written under the grant, and
// p relative to it; ok false when p is not the grant's to write.
func (d *destFS) base(p string) (dir, rel string, ok bool) {
	// The most specific path first: its directory is the tightest bound.
	paths := slices.Clone(d.grant.Paths)
	slices.SortFunc(paths, func(a, b string) int { return len(b) - len(a) })
	for _, c := range paths {
		switch {
		case c == ".":
			return ".", p, true
		case strings.HasPrefix(p, c+"/"):
			return c, p[len(c)+1:], true
		}
	}
	for _, c := range paths {
		part, jour := workNames(c)
		if p == c || p == part || p == jour {
			return path.Dir(c), path.Base(p), true
		}
	}
	return "", "", false
}

// at is the root p is reached through and p relative to it, and the
// directory that root is at ("" for the destination's root).
func (d *destFS) at(p string) (*os.Root, string, string, error) {
	if d.grant == nil {
		return d.root, p, "", nil
	}
	dir, rel, ok := d.base(p)
	if !ok {
		return nil, "", "", &fs.PathError{Op: "open", Path: p, Err: fmt.Errorf("%w: %q is outside %s", grant.ErrPath, p, strings.Join(d.grant.Paths, ", "))}
	}
	r, err := d.open(dir, false)
	if err != nil {
		return nil, "", "", err
	}
	return r, rel, dir, nil
}

// open is the root at dir, a grant's directory, opened once per session;
// with create, the directories missing on the way are made.
func (d *destFS) open(dir string, create bool) (*os.Root, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.roots[dir]; ok {
		return r, nil
	}
	if d.closed {
		// A check still running as its session ends.
		return nil, &fs.PathError{Op: "open", Path: dir, Err: os.ErrClosed}
	}
	r, err := openBeneath(d.root, dir, create)
	if err != nil {
		return nil, err
	}
	d.roots[dir] = r
	return r, nil
}

// errThroughLink is wrapped by refusals of a grant's directory reached
// through a symbolic link.
var errThroughLink = errors.New("is a symbolic link")

// openBeneath opens a root at dir beneath root, following no link on the
// way: each component must be a directory (made when missing, with
// create), and the root opened at it must be the directory just looked at
// (the same file), so a component swapped for a link meanwhile is caught.
func openBeneath(root *os.Root, dir string, create bool) (*os.Root, error) {
	cur, err := root.OpenRoot(".")
	if err != nil {
		return nil, err
	}
	if dir == "." || dir == "" {
		return cur, nil
	}
	walked := ""
	for _, c := range strings.Split(dir, "/") {
		walked = path.Join(walked, c)
		fi, err := cur.Lstat(c)
		if errors.Is(err, fs.ErrNotExist) && create {
			if err = cur.Mkdir(c, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
				fi, err = cur.Lstat(c)
			}
		}
		if err != nil {
			cur.Close()
			return nil, &fs.PathError{Op: "open", Path: walked, Err: cleanPathError(err)}
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			cur.Close()
			return nil, &fs.PathError{Op: "open", Path: walked, Err: fmt.Errorf("%w: %s %w, and a grant's directory is reached through directories only", grant.ErrPath, walked, errThroughLink)}
		}
		if !fi.IsDir() {
			cur.Close()
			return nil, &fs.PathError{Op: "open", Path: walked, Err: fmt.Errorf("%s is not a directory", walked)}
		}
		next, err := cur.OpenRoot(c)
		cur.Close()
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: walked, Err: cleanPathError(err)}
		}
		if got, err := next.Stat("."); err != nil || !os.SameFile(fi, got) {
			next.Close()
			return nil, &fs.PathError{Op: "open", Path: walked, Err: fmt.Errorf("%w: %s changed while it was opened", grant.ErrPath, walked)}
		}
		cur = next
	}
	return cur, nil
}

// escaped turns os.Root's refusal of a path that leaves the directory at
// dir into the grant's: the path resolves (through links) outside it.
func (d *destFS) escaped(err error, p, dir string) error {
	if err == nil || d.grant == nil {
		return err
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "path escapes"):
		return &fs.PathError{Op: pe.Op, Path: p, Err: fmt.Errorf("%w: it leads outside %s", grant.ErrPath, dir)}
	case errors.As(err, &le) && strings.Contains(le.Err.Error(), "path escapes"):
		return &fs.PathError{Op: le.Op, Path: p, Err: fmt.Errorf("%w: it leads outside %s", grant.ErrPath, dir)}
	}
	return err
}

// Stat follows a link at p too, beneath the same directory. A directory on
// the way to a grant's (a push's destination may lie above what the grant
// covers) is reached through directories only.
func (d *destFS) Stat(p string) (fs.FileInfo, error) {
	if d.grant == nil {
		return d.root.Stat(p)
	}
	if p == "." || d.grant.Leads(p) {
		r, err := openBeneath(d.root, p, false)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return r.Stat(".")
	}
	r, rel, dir, err := d.at(p)
	if err != nil {
		return nil, err
	}
	fi, err := r.Stat(rel)
	return fi, d.escaped(err, p, dir)
}

func (d *destFS) Lstat(p string) (fs.FileInfo, error) {
	r, rel, dir, err := d.at(p)
	if err != nil {
		return nil, err
	}
	fi, err := r.Lstat(rel)
	return fi, d.escaped(err, p, dir)
}

func (d *destFS) Open(p string) (*os.File, error) {
	r, rel, dir, err := d.at(p)
	if err != nil {
		return nil, err
	}
	f, err := r.Open(rel)
	return f, d.escaped(err, p, dir)
}

func (d *destFS) OpenFile(p string, flag int, perm fs.FileMode) (*os.File, error) {
	r, rel, dir, err := d.at(p)
	if err != nil {
		return nil, err
	}
	f, err := r.OpenFile(rel, flag, perm)
	return f, d.escaped(err, p, dir)
}

func (d *destFS) Readlink(p string) (string, error) {
	r, rel, dir, err := d.at(p)
	if err != nil {
		return "", err
	}
	t, err := r.Readlink(rel)
	return t, d.escaped(err, p, dir)
}

func (d *destFS) Remove(p string) error {
	r, rel, dir, err := d.at(p)
	if err != nil {
		return err
	}
	return d.escaped(r.Remove(rel), p, dir)
}

func (d *destFS) Symlink(target, p string) error {
	r, rel, dir, err := d.at(p)
	if err != nil {
		return err
	}
	return d.escaped(r.Symlink(target, rel), p, dir)
}

func (d *destFS) Chmod(p string, mode fs.FileMode) error {
	r, rel, dir, err := d.at(p)
	if err != nil {
		return err
	}
	return d.escaped(r.Chmod(rel, mode), p, dir)
}

func (d *destFS) Chtimes(p string, atime, mtime time.Time) error {
	r, rel, dir, err := d.at(p)
	if err != nil {
		return err
	}
	return d.escaped(r.Chtimes(rel, atime, mtime), p, dir)
}

// Rename moves oldp to newp, both beneath one directory: a file's partial
// file and its final name always are.
func (d *destFS) Rename(oldp, newp string) error {
	r, orel, dir, err := d.at(oldp)
	if err != nil {
		return err
	}
	r2, nrel, _, err := d.at(newp)
	if err != nil {
		return err
	}
	if r2 != r {
		return &os.LinkError{Op: "rename", Old: oldp, New: newp, Err: errors.New("not beneath one directory of the grant")}
	}
	return d.escaped(r.Rename(orel, nrel), newp, dir)
}

// MkdirAll makes dir and what is missing above it: the directories on the
// way to a grant's directory, and that directory, through directories
// only; beneath it, through its root.
func (d *destFS) MkdirAll(p string, perm fs.FileMode) error {
	if d.grant == nil {
		return d.root.MkdirAll(p, perm)
	}
	if slices.Contains(d.grant.Paths, p) {
		_, err := d.open(p, true) // kept open: the session writes beneath it
		return err
	}
	if d.grant.Leads(p) {
		r, err := openBeneath(d.root, p, true)
		if err != nil {
			return err
		}
		return r.Close()
	}
	dir, rel, ok := d.base(p)
	if !ok || !strings.HasPrefix(p, dir+"/") && dir != "." {
		return &fs.PathError{Op: "mkdir", Path: p, Err: fmt.Errorf("%w: %q is outside %s", grant.ErrPath, p, strings.Join(d.grant.Paths, ", "))}
	}
	r, err := d.open(dir, true)
	if err != nil {
		return err
	}
	return d.escaped(r.MkdirAll(rel, perm), p, dir)
}

// opener opens files beneath a directory: an *os.Root, or a receiver's
// destFS.
type opener interface {
	Open(name string) (*os.File, error)
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
}
