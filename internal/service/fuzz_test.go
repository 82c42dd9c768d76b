package service_test

import (
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/service"
	"github.com/lightpath/lightpath/internal/transfer"
)

// FuzzListedFiles feeds a page of a listing, as a data node would send it,
// to its check: it never panics, and a page it takes names only clean
// paths under the job's sources, each once, landing under the job's
// destination each at its own path (issue 28, findings 4 and 7). Seeds in
// testdata/fuzz/FuzzListedFiles.
func FuzzListedFiles(f *testing.F) {
	for _, seed := range []string{
		`{"attempt":1,"files":[{"path":"data/a","source":"data","size":1}]}`,
		`{"attempt":1,"page":3,"more":true,"files":[{"path":"x/run1/f","source":"x/run1","size":5},{"path":"y/run1/f","source":"y/run1","size":5}]}`,
		`{"attempt":1,"files":[{"path":"data/../etc/passwd","source":"data","size":1}]}`,
		`{"attempt":1,"files":[{"path":"private/key","source":"data","size":1}]}`,
		`{"attempt":1,"files":[{"path":"a/b","source":".","size":0},{"path":"a/b","source":".","size":0}]}`,
		`{"attempt":1,"files":[]}`,
	} {
		f.Add([]byte(seed))
	}
	job := transfer.Job{ID: "j-1", JobRequest: transfer.JobRequest{Sources: []string{"src:data", "src:x/run1", "src:y/run1", "src:."}, Destination: "dst:in"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		var l apiv1.Listing
		if json.Unmarshal(body, &l) != nil {
			return
		}
		files, err := service.ListedFiles(job, l.Files)
		if err != nil {
			return
		}
		if len(files) != len(l.Files) || len(files) > service.MaxListingFiles {
			t.Fatalf("%d files of %d taken", len(files), len(l.Files))
		}
		paths, dests := map[string]bool{}, map[string]bool{}
		for _, jf := range files {
			p := jf.Path
			if p == "" || p == "." || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
				t.Fatalf("path %q taken", p)
			}
			if paths[p] || dests[jf.Dest] {
				t.Fatalf("%q or its destination %q taken twice", p, jf.Dest)
			}
			paths[p], dests[jf.Dest] = true, true
			if jf.Dest != "in" && !strings.HasPrefix(jf.Dest, "in/") || strings.Contains("/"+jf.Dest+"/", "/../") {
				t.Fatalf("%q lands at %q, outside the destination", p, jf.Dest)
			}
			if jf.Size < 0 || jf.State != transfer.FilePending {
				t.Fatalf("%q: size %d, state %s", p, jf.Size, jf.State)
			}
		}
		for _, lf := range l.Files {
			src := lf.Source
			if src != "." && lf.Path != src && !strings.HasPrefix(lf.Path, src+"/") {
				t.Fatalf("%q taken under source %q", lf.Path, src)
			}
		}
	})
}
