package datanode

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
)

// TestListingPages: a listing goes in pages of at most maxFiles files and
// about maxBytes of JSON each, in order, every file once; an empty one is
// one empty page (issue 28, finding 7).
func TestListingPages(t *testing.T) {
	files := func(n, pathLen int) []apiv1.ListedFile {
		var out []apiv1.ListedFile
		for i := range n {
			p := fmt.Sprintf("d/%06d", i)
			p += strings.Repeat("x", max(0, pathLen-len(p)))
			out = append(out, apiv1.ListedFile{Path: p, Source: "d", Size: int64(i)})
		}
		return out
	}
	for _, tc := range []struct {
		name               string
		files              []apiv1.ListedFile
		maxFiles, maxBytes int
		pages              int
	}{
		{"empty", nil, 10, 1 << 20, 1},
		{"one page", files(10, 8), 10, 1 << 20, 1},
		{"by count", files(25, 8), 10, 1 << 20, 3},
		{"by bytes", files(100, 1000), 10000, 20 << 10, 6},
		{"one file over the bytes", files(3, 5000), 10, 1000, 3},
		{"the real bounds", files(25000, 8), apiv1.MaxListingPage, listingPageBytes, 3},
	} {
		pages := listingPages(tc.files, tc.maxFiles, tc.maxBytes)
		var got []apiv1.ListedFile
		for i, p := range pages {
			b, _ := json.Marshal(apiv1.Listing{Attempt: 1, Page: i, More: true, Files: p})
			if len(p) > tc.maxFiles || len(p) > 1 && len(b) > tc.maxBytes+200 {
				t.Errorf("%s: page %d of %d files, %d bytes", tc.name, i, len(p), len(b))
			}
			got = append(got, p...)
		}
		if len(pages) != tc.pages || len(got) != len(tc.files) {
			t.Errorf("%s: %d pages of %d files; want %d pages of %d", tc.name, len(pages), len(got), tc.pages, len(tc.files))
		}
		for i := range got {
			if got[i].Path != tc.files[i].Path {
				t.Fatalf("%s: file %d is %s, want %s", tc.name, i, got[i].Path, tc.files[i].Path)
			}
		}
	}
}
