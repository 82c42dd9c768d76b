package mover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// OpenSource opens a local source for sending, as cp takes its arguments:
// a symlink given by name is followed, its own name kept; a directory
// needs recursive. Close the item's Root when done.
func OpenSource(arg string, recursive bool) (SourceItem, error) {
	abs, err := filepath.Abs(arg)
	if err != nil {
		return SourceItem{}, fmt.Errorf("%s: %w", arg, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return SourceItem{}, fmt.Errorf("%s: %w", arg, cleanPathError(err))
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return SourceItem{}, fmt.Errorf("%s: %w", arg, cleanPathError(err))
	}
	if fi.IsDir() && !recursive {
		return SourceItem{}, fmt.Errorf("%s: is a directory (use -r to copy trees)", arg)
	}
	if resolved == "/" {
		return SourceItem{}, errors.New("copying / as a whole is not supported: name its directories")
	}
	name := filepath.Base(abs)
	if name == "/" || name == "." {
		name = filepath.Base(resolved)
	}
	root, err := os.OpenRoot(filepath.Dir(resolved))
	if err != nil {
		return SourceItem{}, fmt.Errorf("%s: %w", arg, cleanPathError(err))
	}
	return SourceItem{Root: root, Path: filepath.Base(resolved), Name: name}, nil
}

// Size sums the sizes of what the source sends (regular files; links and
// directories count nothing).
func (s Source) Size() int64 {
	var n int64
	for _, it := range s.Items {
		fs.WalkDir(it.Root.FS(), it.Path, func(_ string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
			return nil
		})
	}
	return n
}

// Close closes the items' roots.
func (s Source) Close() error {
	for _, it := range s.Items {
		if it.Root != nil {
			it.Root.Close()
		}
	}
	return nil
}

// OpenDest resolves a local destination as cp does: an existing
// directory, or one to create when mustBeDir or arg ends with /, takes
// what comes by its own names; otherwise what comes is renamed to arg's
// name in its parent. A dry run creates nothing: it opens the nearest
// directory that exists instead. Close the Dest's Root when done.
func OpenDest(arg string, mustBeDir, dryRun bool) (Dest, error) {
	mkdirAll := os.MkdirAll
	openRoot := os.OpenRoot
	if dryRun {
		mkdirAll = func(string, fs.FileMode) error { return nil }
		openRoot = openExistingRoot
	}
	fi, err := os.Stat(arg)
	switch {
	case err == nil && fi.IsDir():
		root, err := openRoot(arg)
		if err != nil {
			return Dest{}, fmt.Errorf("%s: %w", arg, cleanPathError(err))
		}
		return Dest{Root: root, Base: "."}, nil
	case err == nil && (mustBeDir || strings.HasSuffix(arg, "/")):
		return Dest{}, fmt.Errorf("%s: not a directory", arg)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return Dest{}, fmt.Errorf("%s: %w", arg, cleanPathError(err))
	case err != nil && (mustBeDir || strings.HasSuffix(arg, "/")):
		if err := mkdirAll(arg, 0o755); err != nil {
			return Dest{}, fmt.Errorf("%s: %w", arg, cleanPathError(err))
		}
		root, err := openRoot(arg)
		if err != nil {
			return Dest{}, fmt.Errorf("%s: %w", arg, cleanPathError(err))
		}
		return Dest{Root: root, Base: "."}, nil
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return Dest{}, err
	}
	parent := filepath.Dir(abs)
	if err := mkdirAll(parent, 0o755); err != nil {
		return Dest{}, fmt.Errorf("%s: %w", parent, cleanPathError(err))
	}
	root, err := openRoot(parent)
	if err != nil {
		return Dest{}, fmt.Errorf("%s: %w", parent, cleanPathError(err))
	}
	return Dest{Root: root, Base: ".", Rename: filepath.Base(abs)}, nil
}

// openExistingRoot is a dry run's stand-in for os.OpenRoot on a directory
// that may not exist yet: a root at its nearest existing ancestor, which
// shows the same (absent) entries beneath the missing directory.
func openExistingRoot(dir string) (*os.Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for p := abs; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			if p == abs {
				return os.OpenRoot(p)
			}
			// Beneath a missing directory nothing exists: an empty
			// directory of our own says so without touching the destination.
			tmp, err := os.MkdirTemp("", "lightpath-dry-run-")
			if err != nil {
				return nil, err
			}
			defer os.Remove(tmp)
			return os.OpenRoot(tmp)
		}
		if filepath.Dir(p) == p {
			return nil, fmt.Errorf("%s: no existing directory above it", dir)
		}
	}
}
