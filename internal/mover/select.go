package mover

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/lightpath/lightpath/internal/wire"
)

// What a copy takes of a tree (--include, --exclude, --symlinks) and its
// dry run. The sender applies the rules and the link treatment while it
// walks, so a pull's rules travel to the server in the Get; the receiver
// skips links that would lead outside the tree and answers a dry run.

// CheckRule reports whether a pattern is one Excluded can use.
func CheckRule(pattern string) error {
	if pattern == "" || len(pattern) > wire.MaxRulePattern {
		return fmt.Errorf("pattern of %d bytes: want 1..%d", len(pattern), wire.MaxRulePattern)
	}
	if _, err := path.Match(strings.TrimSuffix(pattern, "/"), ""); err != nil {
		return fmt.Errorf("pattern %q: %w", pattern, err)
	}
	return nil
}

// Excluded reports whether rules leave out the entry at rel, its path in
// the manifest (tree/a/b.txt for a/b.txt in a source named tree; a
// top-level source is matched by its own name). The rules
// are tried in order and the first that matches decides; none matching
// keeps the entry. A pattern matches when path.Match matches it against
// rel or against rel's last element; a pattern ending in / matches only
// directories (without the slash). An excluded directory is not entered.
func Excluded(rules []wire.Rule, rel string, dir bool) bool {
	base := path.Base(rel)
	for _, r := range rules {
		p := r.Pattern
		if strings.HasSuffix(p, "/") {
			if !dir {
				continue
			}
			p = strings.TrimSuffix(p, "/")
		}
		if m, _ := path.Match(p, rel); m {
			return !r.Include
		}
		if m, _ := path.Match(p, base); m {
			return !r.Include
		}
	}
	return false
}

// linkSkipReason is how a link left out for leading outside the tree is
// reported; IsLinkSkip recognises it.
const linkSkipPrefix = "symlink leads outside the tree, skipped: "

// IsLinkSkip reports whether a file's reason says a link was skipped for
// leading outside the tree (a warning, not a failure).
func IsLinkSkip(reason string) bool { return strings.HasPrefix(reason, linkSkipPrefix) }

// linkOutside says why the link e is not recreated under --symlinks copy,
// or "" when its target stays inside the top-level source it belongs to
// (the first element of its manifest path). The target is judged as text;
// the receiver's own check still applies to what this lets through.
func linkOutside(e wire.Entry, links uint8) string {
	hint := " (--symlinks follow copies its content)"
	if links == wire.LinksFollow {
		hint = " (not followed: the target is not within what the sender may read)"
	}
	t := e.Target
	if t == "" || path.IsAbs(t) {
		return fmt.Sprintf("%s%s -> %s: an absolute target%s", linkSkipPrefix, e.Path, t, hint)
	}
	top, _, _ := strings.Cut(e.Path, "/")
	resolved := path.Join(path.Dir(e.Path), t)
	if !strings.Contains(e.Path, "/") || (resolved != top && !strings.HasPrefix(resolved, top+"/")) {
		return fmt.Sprintf("%s%s -> %s: the target is outside the copied tree%s", linkSkipPrefix, e.Path, t, hint)
	}
	return ""
}

// Dry-run verdicts, as the receiver gives them.
const (
	DryRunSend  = "dry run: would be sent"
	DryRunCheck = "dry run: exists at the destination: would be compared with the source"
	DryRunSkip  = "dry run: exists at the destination: would be left alone"
	DryRunLink  = "dry run: the link would be recreated"
)

// dryRun answers an entry of a dry run without writing anything: what the
// copy would do with it, judged from the destination as it is.
func (r *receiver) dryRun(f *rfile) (wire.NeedItem, bool) {
	e := f.e
	if e.Kind == wire.EntryDir {
		closeReady(f)
		return wire.NeedItem{}, false
	}
	reason := DryRunSend
	if e.Kind == wire.EntrySymlink {
		reason = DryRunLink
		if why := linkOutside(e, r.l.opts.Select.Symlinks); why != "" {
			reason = why
		}
	}
	if fi, err := r.fs.Lstat(f.target); err == nil {
		switch {
		case fi.IsDir():
			reason = fmt.Sprintf("dry run: destination %s is a directory: would fail", f.target)
		case r.pol == wire.PolicySkip:
			reason = DryRunSkip
		case fi.Mode()&fs.ModeSymlink != 0 && r.pol != wire.PolicyRefuse:
			if cur, err := r.fs.Readlink(f.target); err == nil && e.Kind == wire.EntrySymlink && cur == e.Target {
				reason = DryRunSkip
			} else {
				reason = "dry run: " + linkKept(f.target).Error() + ": would fail"
			}
		case r.pol == wire.PolicyOverwrite || fi.Mode()&fs.ModeSymlink != 0:
		default:
			reason = DryRunCheck
		}
	}
	if e.Kind == wire.EntrySymlink {
		r.result(f, wire.ResultItem{ID: e.ID, OK: true, Skipped: true, Reason: reason})
		return wire.NeedItem{}, false
	}
	r.l.fileResult(FileResult{Path: e.Path, Size: e.Size, OK: true, Skipped: true, Reason: reason})
	return wire.NeedItem{ID: e.ID, Action: wire.NeedSkip, Reason: reason}, true
}
