//go:build linux

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestReserveInPeoplesTerms checks scheduling as people say it: a time
// without a zone is read in local time, reserve find takes --deadline as
// create does, and a create by --size and --deadline that cannot be met
// says when the data could arrive.
func TestReserveInPeoplesTerms(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	adm := c.adminTok
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}

	// "YYYY-MM-DD HH:MM" two days ahead in Tokyo (UTC+9 all year).
	day := time.Now().In(tokyo).Add(48 * time.Hour)
	local := time.Date(day.Year(), day.Month(), day.Day(), 9, 0, 0, 0, tokyo)
	for _, layout := range []string{"2006-01-02 15:04", "2006-01-02T15:04"} {
		in := local.Format(layout)
		r := runLP(t, runOpts{env: []string{"TZ=Asia/Tokyo"}, timeout: 60 * time.Second}, "reserve", "create", "--from", "a1", "--to", "b1",
			"--bandwidth", "100M", "--start", in, "--duration", "1h", "--json", "--controller", c.url, "--controller-token-file", adm)
		mustSucceed(t, "reserve create --start "+in, r)
		got := oneJSON[cliResv](t, r.stdout)
		if !got.Start.Equal(local) {
			t.Errorf("--start %q in Asia/Tokyo booked from %s, want %s", in, got.Start.UTC(), local.UTC())
		}
	}

	// 500 GB cannot arrive within 30 minutes (1.8 Gbit/s at most): find
	// says so with --deadline, create says when it could arrive.
	r := c.lp(adm, "reserve", "find", "--from", "a1", "--to", "b1", "--size", "500GB", "--deadline", "+30m")
	checkFailure(t, "reserve find --size --deadline", r, "at up to 1.80 Gbit/s (the most it has free)", "ending by")
	if strings.Contains(r.stderr, "Ebit") {
		t.Errorf("find names an unbounded rate: %s", r.stderr)
	}
	r = c.lp(adm, "reserve", "create", "--from", "a1", "--to", "b1", "--size", "500GB", "--deadline", "+30m")
	checkFailure(t, "reserve create --size --deadline", r, "cannot arrive by", "(the deadline)", "the earliest it can arrive is", "at 1.80 Gbit/s")
	// The same find with a deadline it can meet answers.
	r = c.ok(adm, "reserve", "find", "--from", "a1", "--to", "b1", "--size", "5GB", "--deadline", "+30m")
	if !strings.Contains(r.stdout, "earliest completion") {
		t.Errorf("find --size --deadline said:\n%s", r.stdout)
	}
	// --deadline is for --size.
	r = c.lp(adm, "reserve", "find", "--from", "a1", "--to", "b1", "--bandwidth", "1G", "--duration", "1h", "--deadline", "+30m")
	checkFailure(t, "reserve find --deadline without --size", r, "--deadline goes with --size")
}
