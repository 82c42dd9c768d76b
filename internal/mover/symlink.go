package mover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// errLinkOutside is wrapped by refusals of links whose target does not
// resolve inside the destination.
var errLinkOutside = errors.New("leads outside the destination")

// maxLinkHops bounds how many links one resolution follows (as the kernel's
// ELOOP does).
const maxLinkHops = 40

// linkBound is the directory a link received at target must resolve
// within: the destination directory, or, when the transfer's top item takes
// another name there (cp SRC NEWNAME), that item for links inside it.
func (d Dest) linkBound(target string) string {
	if d.Rename != "" {
		top := path.Join(d.Base, d.Rename)
		if strings.HasPrefix(target, top+"/") {
			return top
		}
	}
	return d.Base
}

// checkLink resolves the target t of a link about to be created at name
// (relative to root) the way the kernel will: component by component,
// through the links already in the tree, and refuses it unless it ends
// beneath bound. Checking the text alone is not enough: with L -> .. in
// place, L/../x climbs two levels, not none. A ".." may only step back over
// a directory that is there: a name not yet created may become a link later
// in the same transfer, which would change what ".." means.
func checkLink(root *os.Root, name, t, bound string) error {
	if t == "" || path.IsAbs(t) {
		return fmt.Errorf("absolute targets are not recreated")
	}
	outside := fmt.Errorf("resolves to a place that %w", errLinkOutside)
	var cur []string
	if dir := path.Dir(name); dir != "." {
		cur = strings.Split(dir, "/")
	}
	todo := strings.Split(t, "/")
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return outside
			}
			p := strings.Join(cur, "/")
			if fi, err := root.Lstat(p); err != nil || !fi.IsDir() {
				return fmt.Errorf("steps back over %s, which is not a directory (yet): not recreated", p)
			}
			cur = cur[:len(cur)-1]
			continue
		}
		p := path.Join(append(cur, c)...)
		fi, err := root.Lstat(p)
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if hops++; hops > maxLinkHops {
				return fmt.Errorf("too many levels of symbolic links")
			}
			lt, err := root.Readlink(p)
			if err != nil {
				return fmt.Errorf("read link %s: %w", p, cleanPathError(err))
			}
			if lt == "" || path.IsAbs(lt) {
				return outside
			}
			// The link's target replaces it, relative to its directory.
			todo = append(strings.Split(lt, "/"), todo...)
			continue
		}
		cur = append(cur, c)
	}
	got := path.Join(cur...)
	if got == "" {
		got = "."
	}
	if bound == "." || got == bound || strings.HasPrefix(got, bound+"/") {
		return nil
	}
	return outside
}
