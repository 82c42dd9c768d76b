package service

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/reserve"
	"github.com/lightpath/lightpath/internal/transfer"
)

// TestCheckReport: a report's figures are clamped to the task's bounds or,
// when no data node sends them, refused; so are checksums that are not
// 32 bits in hex, receipts too long, too many files and negative parts.
func TestCheckReport(t *testing.T) {
	b := reportBounds{bytes: 4000, maxBps: 2e9}
	good := apiv1.FileReport{Path: "data/f000", OK: true, Checksum: "0badCAFE", Receipt: "abc"}
	for _, tc := range []struct {
		name    string
		rep     apiv1.TaskReport
		bytes   int64
		bps     float64
		refused string
	}{
		{name: "within bounds", rep: apiv1.TaskReport{BytesDone: 3000, ThroughputBps: 1e9, Files: []apiv1.FileReport{good}}, bytes: 3000, bps: 1e9},
		{name: "the attack's figures", rep: apiv1.TaskReport{BytesDone: 999999999999, ThroughputBps: 1e300}, bytes: 4000, bps: 2e9},
		{name: "exactly the task", rep: apiv1.TaskReport{BytesDone: 4000, ThroughputBps: 2e9}, bytes: 4000, bps: 2e9},
		{name: "nothing yet", rep: apiv1.TaskReport{}, bytes: 0, bps: 0},
		{name: "negative bytes", rep: apiv1.TaskReport{BytesDone: -1}, refused: "bytes_done -1"},
		{name: "negative throughput", rep: apiv1.TaskReport{ThroughputBps: -5}, refused: "throughput_bps -5"},
		{name: "not a number", rep: apiv1.TaskReport{ThroughputBps: math.NaN()}, refused: "throughput_bps NaN"},
		{name: "infinite", rep: apiv1.TaskReport{ThroughputBps: math.Inf(1)}, refused: "throughput_bps +Inf"},
		{name: "checksum too long", rep: apiv1.TaskReport{Files: []apiv1.FileReport{{Path: "f", OK: true, Checksum: strings.Repeat("0", 4096)}}}, refused: "want eight hex digits"},
		{name: "checksum not hex", rep: apiv1.TaskReport{Files: []apiv1.FileReport{{Path: "f", OK: true, Checksum: "0badcafz"}}}, refused: "want eight hex digits"},
		{name: "file checksum not hex", rep: apiv1.TaskReport{Files: []apiv1.FileReport{{Path: "f", OK: true, FileChecksum: "x"}}}, refused: "file checksum"},
		{name: "receipt too long", rep: apiv1.TaskReport{Files: []apiv1.FileReport{{Path: "f", OK: true, Receipt: strings.Repeat("A", 65)}}}, refused: "receipt of 65 bytes"},
		{name: "negative part", rep: apiv1.TaskReport{Files: []apiv1.FileReport{{Path: "f", Part: &transfer.Part{Offset: -1, Length: 1}}}}, refused: "part at -1"},
		{name: "too many verdicts", rep: apiv1.TaskReport{Files: make([]apiv1.FileReport, MaxReportFiles+1)}, refused: "16001 verdicts in one report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkReport(tc.rep, b)
			if tc.refused != "" {
				var re *reserve.RequestError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err %v, want a refusal saying %q", err, tc.refused)
				}
				return
			}
			if err != nil || got.BytesDone != tc.bytes || got.ThroughputBps != tc.bps {
				t.Fatalf("%v: bytes %d, %v bps; want %d, %v", err, got.BytesDone, got.ThroughputBps, tc.bytes, tc.bps)
			}
		})
	}
}

// FuzzCheckReport feeds any report (a body as JSON, with any figures,
// NaN and infinities included) to checkReport: it never panics, refuses
// only with a request error (400), and what it takes is within the
// task's bounds. Seeds in testdata/fuzz/FuzzCheckReport.
func FuzzCheckReport(f *testing.F) {
	f.Add([]byte(`{"attempt":1,"files":[{"path":"data/f000","ok":true,"checksum":"0badcafe","bytes":1000}],"done":true}`), int64(4000), int64(999999999999), 1e300)
	f.Fuzz(func(t *testing.T, body []byte, taskBytes, bytesDone int64, bps float64) {
		var rep apiv1.TaskReport
		if json.Unmarshal(body, &rep) != nil {
			return
		}
		rep.BytesDone, rep.ThroughputBps = bytesDone, bps
		b := reportBounds{bytes: max(taskBytes, 0), maxBps: MaxThroughputBps}
		got, err := checkReport(rep, b)
		if err != nil {
			var re *reserve.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("refused with %T %v, want a request error", err, err)
			}
			return
		}
		switch {
		case got.BytesDone < 0 || got.BytesDone > b.bytes:
			t.Fatalf("bytes done %d outside 0..%d", got.BytesDone, b.bytes)
		case math.IsNaN(got.ThroughputBps) || got.ThroughputBps < 0 || got.ThroughputBps > b.maxBps:
			t.Fatalf("throughput %v outside 0..%v", got.ThroughputBps, b.maxBps)
		case len(got.Files) > MaxReportFiles:
			t.Fatalf("%d files taken", len(got.Files))
		}
		for _, fr := range got.Files {
			if !checksumOK(fr.Checksum) || !checksumOK(fr.FileChecksum) || len(fr.Receipt) > 64 {
				t.Fatalf("file taken with checksum %q, file checksum %q, receipt of %d bytes", fr.Checksum, fr.FileChecksum, len(fr.Receipt))
			}
		}
	})
}
