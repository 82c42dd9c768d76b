package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/transfer"
)

// TestSubmitRequest: transfer submit builds the job from its arguments and
// refuses, before anything is sent, what it can tell is wrong.
func TestSubmitRequest(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	sums := filepath.Join(dir, "sums")
	os.WriteFile(sums, []byte("# run1\n0a0B0c0d  run1/a.dat\n\n00000001  siteA:/run1/b.dat\n"), 0o644)
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("xyz  run1/a.dat\n"), 0o644)
	tests := []struct {
		name string
		f    submitFlags
		args []string
		want func(transfer.JobRequest) bool
		err  string
	}{
		{"plain", submitFlags{}, []string{"siteA:run1", "siteB:in/"}, func(r transfer.JobRequest) bool {
			return r.Sources[0] == "siteA:run1" && r.Destination == "siteB:in" && r.Policy == "" && r.Deadline.IsZero()
		}, ""},
		{"relative deadline", submitFlags{deadline: "+2h", priority: 3, key: "k1", overwrite: true}, []string{"siteA:/a", "siteA:b", "siteB:."}, func(r transfer.JobRequest) bool {
			return r.Deadline.Equal(now.Add(2*time.Hour)) && r.Priority == 3 && r.Key == "k1" && r.Policy == transfer.PolicyOverwrite && len(r.Sources) == 2
		}, ""},
		{"checksum file", submitFlags{checksum: "adler32", checksumFile: sums}, []string{"siteA:run1", "siteB:in"}, func(r transfer.JobRequest) bool {
			return r.Checksum == "adler32" && r.Expected["siteA:run1/a.dat"] == "0a0b0c0d" && r.Expected["siteA:run1/b.dat"] == "00000001"
		}, ""},
		{"congestion control", submitFlags{cc: "fast"}, []string{"a:x", "b:y"}, func(r transfer.JobRequest) bool { return r.CC == "fast" }, ""},
		{"congestion control not a name", submitFlags{cc: "Fast TCP"}, []string{"a:x", "b:y"}, nil, `--cc: congestion control "Fast TCP": want lower-case letters`},
		{"congestion control too long", submitFlags{cc: "averyveryverylongname"}, []string{"a:x", "b:y"}, nil, "want at most 15 bytes"},
		{"wait on a conflict", submitFlags{onConflict: "wait"}, []string{"a:x", "b:y"}, func(r transfer.JobRequest) bool { return r.OnConflict == transfer.ConflictWait }, ""},
		{"unknown conflict choice", submitFlags{onConflict: "queue"}, []string{"a:x", "b:y"}, nil, `--on-conflict "queue": want refuse or wait`},
		{"skip", submitFlags{skipExisting: true}, []string{"a:x", "b:y"}, func(r transfer.JobRequest) bool { return r.Policy == transfer.PolicySkip }, ""},
		{"no endpoint", submitFlags{}, []string{"run1", "siteB:in"}, nil, "source: malformed location"},
		{"path out of the root", submitFlags{}, []string{"siteA:../etc", "siteB:in"}, nil, "leads out of the endpoint's root"},
		{"destination out of the root", submitFlags{}, []string{"siteA:run1", "siteB:in/../../x"}, nil, "destination: malformed location"},
		{"two source endpoints", submitFlags{}, []string{"siteA:a", "siteC:b", "siteB:in"}, nil, "all on one endpoint"},
		{"deadline in the past", submitFlags{deadline: "2020-01-01T00:00:00Z"}, []string{"a:x", "b:y"}, nil, "is in the past"},
		{"malformed deadline", submitFlags{deadline: "tomorrow-ish"}, []string{"a:x", "b:y"}, nil, `--deadline: invalid time "tomorrow-ish"`},
		{"two policies", submitFlags{overwrite: true, skipExisting: true}, []string{"a:x", "b:y"}, nil, "exclude each other"},
		{"unknown checksum", submitFlags{checksum: "md5"}, []string{"a:x", "b:y"}, nil, `--checksum "md5"`},
		{"bad checksum file", submitFlags{checksumFile: bad}, []string{"a:x", "b:y"}, nil, "line 1: \"xyz\" is not a 32-bit checksum"},
		{"missing checksum file", submitFlags{checksumFile: filepath.Join(dir, "none")}, []string{"a:x", "b:y"}, nil, "--checksum-file: no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.f.request(tc.args, now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want(r) {
				t.Errorf("request %+v", r)
			}
		})
	}
}

// A job's page shows the files cut in parts, with their parts done of all
// and their owner; a job without any shows no such table.
func TestPrintPartedFiles(t *testing.T) {
	var b strings.Builder
	printPartedFiles(&b, []transfer.JobFile{
		{Path: "data/small", Size: 1000, State: transfer.FileSucceeded},
		{Path: "data/big", Size: 96 << 20, State: transfer.FileActive, Parts: 6, PartsDone: 2, To: "b1"},
		{Path: "data/other", Size: 64 << 20, State: transfer.FilePending, Parts: 4},
	})
	out := b.String()
	for _, want := range []string{"files in parts:", "PARTS", "OWNER", "data/big", "2/6", "b1", "data/other", "0/4"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "data/small") {
		t.Errorf("a whole file listed among the parted:\n%s", out)
	}
	b.Reset()
	printPartedFiles(&b, []transfer.JobFile{{Path: "a", State: transfer.FileSucceeded}})
	if b.String() != "" {
		t.Errorf("no parted files printed %q", b.String())
	}
}

func TestPartSizes(t *testing.T) {
	for _, tc := range []struct {
		min, size         string
		wantMin, wantSize int64
		err               string
	}{
		{"128MiB", "64MiB", 128 << 20, 64 << 20, ""},
		{"0", "64MiB", -1, 64 << 20, ""},
		{"32MiB", "16MiB", 32 << 20, 16 << 20, ""},
		{"lots", "64MiB", 0, 0, "--transfer-part-min"},
		{"128MiB", "0", 0, 0, "--transfer-part-size 0: want a size above zero"},
		{"128MiB", "x", 0, 0, "--transfer-part-size"},
	} {
		gotMin, gotSize, err := partSizes(tc.min, tc.size)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("partSizes(%q, %q): %v, want an error with %q", tc.min, tc.size, err, tc.err)
			}
			continue
		}
		if err != nil || gotMin != tc.wantMin || gotSize != tc.wantSize {
			t.Errorf("partSizes(%q, %q) = %d, %d, %v; want %d, %d", tc.min, tc.size, gotMin, gotSize, err, tc.wantMin, tc.wantSize)
		}
	}
}

// TestWaitLine: transfer wait prints again when the state, the progress
// or the reason changes, not when the throughput alone does; the line
// still shows the throughput.
func TestWaitLine(t *testing.T) {
	j := transfer.Job{ID: "j-1", State: transfer.JobActive, FilesTotal: 4, FilesDone: 1, BytesTotal: 4 << 20, BytesDone: 1 << 20,
		ThroughputBps: 80e6, Reason: "moving: 1 of 4 files"}
	line, key := waitLine(j)
	if !strings.Contains(line, "80.0 Mbit/s") || !strings.Contains(line, "(moving: 1 of 4 files)") {
		t.Fatalf("line %q", line)
	}
	faster := j
	faster.ThroughputBps = 95e6
	if _, k := waitLine(faster); k != key {
		t.Errorf("a new throughput alone changes the key: %q, %q", k, key)
	}
	for name, change := range map[string]func(*transfer.Job){
		"state":    func(j *transfer.Job) { j.State = transfer.JobSucceeded },
		"progress": func(j *transfer.Job) { j.FilesDone, j.BytesDone = 2, 2<<20 },
		"reason":   func(j *transfer.Job) { j.Reason = "network: wan blackholed" },
	} {
		c := j
		change(&c)
		if _, k := waitLine(c); k == key {
			t.Errorf("a change of %s leaves the key as it was", name)
		}
	}
}
