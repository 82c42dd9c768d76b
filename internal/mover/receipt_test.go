package mover

import (
	"context"
	"fmt"
	"hash/adler32"
	"path/filepath"
	"testing"

	"github.com/lightpath/lightpath/internal/checksum"
	"github.com/lightpath/lightpath/internal/transfer/grant"
)

// TestGrantReceipts: a server holding its receipt secret signs, for every
// file it writes (or leaves alone) under a grant, a receipt over the path
// it wrote, the size and its own checksum of the bytes, which the client
// hands on with the file's verdict; whole pushes (crc32c and adler32),
// skips under the policy, and parts, the last completing the file. A
// server without a secret signs none.
func TestGrantReceipts(t *testing.T) {
	secret := []byte("b1's receipt secret")
	gs := serveGranted(t, nil)
	local := filepath.Join(t.TempDir(), "run42")
	files := makeTree(t, local, map[string]int{"a.bin": 3<<20 + 5, "sub/b.txt": 100, "empty": 0})
	cfg := ClientConfig{Addr: gs.addr, Grant: gs.sign(t, nil), Streams: 2, BlockSize: 1 << 20, Tuning: Tuning{DSCP: -1}}

	push := func(opts Options) map[string]FileResult {
		t.Helper()
		var res partResults
		opts.Recursive = true
		_, err := Copy(context.Background(), Job{Config: cfg, Options: opts, Direction: Push, Source: sourceOf(t, local, true), Remote: "in/", OnFile: res.add})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]FileResult{}
		for _, fr := range res.all {
			out[fr.Path] = fr
		}
		return out
	}
	check := func(what string, got map[string]FileResult, adler, skipped bool) {
		t.Helper()
		for name, data := range files {
			fr := got["run42/"+name]
			want := fmt.Sprintf("%08x", checksum.CRC32C(data))
			algo := "crc32c"
			if adler {
				want, algo = fmt.Sprintf("%08x", adler32.Checksum(data)), "adler32"
			}
			if skipped && len(data) > 0 {
				want = ""
			}
			if sum := SumHex(adler, fr); !fr.OK || fr.Skipped != skipped || sum != want {
				t.Errorf("%s: %s: ok %v, skipped %v, checksum %q, want %q", what, name, fr.OK, fr.Skipped, sum, want)
			}
			rc := grant.Receipt{Task: "t-1", Attempt: 1, Path: "in/run42/" + name, Size: int64(len(data)), Algo: algo, Sum: want}
			if !rc.Verify(secret, grant.Spell(fr.Receipt)) {
				t.Errorf("%s: %s: receipt %x does not verify", what, name, fr.Receipt)
			}
			other := rc
			other.Sum = "0badcafe"
			if other.Verify(secret, grant.Spell(fr.Receipt)) {
				t.Errorf("%s: %s: the receipt verifies another checksum", what, name)
			}
		}
	}

	if got := push(Options{Policy: Overwrite}); got["run42/a.bin"].Receipt != nil {
		t.Fatalf("a server without a receipt secret signed %x", got["run42/a.bin"].Receipt)
	}
	gs.v.SetReceiptKey(secret)
	check("overwrite", push(Options{Policy: Overwrite}), false, false)
	check("adler32", push(Options{Policy: Overwrite, Adler32: true}), true, false)
	check("skip", push(Options{Policy: Skip}), false, true)

	// Parts of a file: each part's receipt names its range and checksum;
	// the last one's says it completed the file, with the file's checksum.
	data := files["a.bin"]
	file := filepath.Join(local, "a.bin")
	const bs = 1 << 20
	parts := []*Part{{Offset: 2 * bs, Length: int64(len(data)) - 2*bs}, {Offset: 0, Length: 2 * bs}}
	for i, p := range parts {
		var res partResults
		if _, err := pushPart(context.Background(), t, cfg, file, "in/big.bin", p, Options{Policy: Update}, &res); err != nil || len(res.all) != 1 {
			t.Fatalf("part %d: %v, %+v", i, err, res.all)
		}
		fr := res.all[0]
		last := i == len(parts)-1
		rc := grant.Receipt{Task: "t-1", Attempt: 1, Path: "in/big.bin", Size: int64(len(data)), Algo: "crc32c",
			Sum: fmt.Sprintf("%08x", checksum.CRC32C(data[p.Offset:p.Offset+p.Length])), Offset: p.Offset, Length: p.Length, Complete: last}
		if last {
			rc.FileSum = fmt.Sprintf("%08x", checksum.CRC32C(data))
		}
		if fr.Complete != last || SumHex(false, fr) != rc.Sum || FileSumHex(false, fr) != rc.FileSum {
			t.Errorf("part %d: complete %v, checksums %s %s, want %s %s", i, fr.Complete, SumHex(false, fr), FileSumHex(false, fr), rc.Sum, rc.FileSum)
		}
		if !rc.Verify(secret, grant.Spell(fr.Receipt)) {
			t.Errorf("part %d: receipt %x does not verify", i, fr.Receipt)
		}
	}
}
