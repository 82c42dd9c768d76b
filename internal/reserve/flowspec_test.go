package reserve

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestParseFlowSpec(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want is the canonical form
	}{
		{"tcp 198.18.1.2 > 198.18.2.2:7070", "tcp 198.18.1.2 > 198.18.2.2:7070"},
		{"tcp 198.18.1.2 > 198.18.2.2:7070 uid 1000", "tcp 198.18.1.2 > 198.18.2.2:7070 uid 1000"},
		{"tcp 198.18.1.2 > 198.18.2.2:7070 cgroup lightpath/run-42", "tcp 198.18.1.2 > 198.18.2.2:7070 cgroup lightpath/run-42"},
		{"tcp 198.18.1.2 > 198.18.2.2 uid 7  CGROUP\t/a.b/c_d-e@f:g , any 198.18.1.2 > 198.18.2.2 cgroup x", "tcp 198.18.1.2 > 198.18.2.2 uid 7 cgroup a.b/c_d-e@f:g, any 198.18.1.2 > 198.18.2.2 cgroup x"},
		{"tcp 198.18.1.2 > 198.18.2.2:7070  UID\t0 , udp 198.18.1.2 > 198.18.2.2", "tcp 198.18.1.2 > 198.18.2.2:7070 uid 0, udp 198.18.1.2 > 198.18.2.2"},
		{"TCP   198.18.1.2>198.18.2.2:7070", "tcp 198.18.1.2 > 198.18.2.2:7070"},
		{"\ttcp\t198.18.1.2\t>\t198.18.2.2:7070\t", "tcp 198.18.1.2 > 198.18.2.2:7070"},
		{"udp 198.18.1.0/24:7000-7010 > 198.18.2.0/24", "udp 198.18.1.0/24:7000-7010 > 198.18.2.0/24"},
		{"any 198.18.1.2 > 198.18.2.2", "any 198.18.1.2 > 198.18.2.2"},
		{"tcp 198.18.1.2/32 > 198.18.2.2", "tcp 198.18.1.2 > 198.18.2.2"},
		{"tcp 0.0.0.0/0 > 198.18.2.2:1-65535", "tcp 0.0.0.0/0 > 198.18.2.2:1-65535"},
		{"tcp 198.18.1.2:7070-7070 > 198.18.2.2:080", "tcp 198.18.1.2:7070 > 198.18.2.2:80"},
		{"tcp 2001:2:0:1::2 > [2001:2:0:2::2]:7070", "tcp 2001:2:0:1::2 > [2001:2:0:2::2]:7070"},
		{"tcp [2001:2::1] > 2001:2::2", "tcp 2001:2::1 > 2001:2::2"},
		{"udp [2001:2::/64]:5000-5001 > 2001:2:0:1::/64", "udp [2001:2::/64]:5000-5001 > 2001:2:0:1::/64"},
		{"tcp 2001:DB8:0:0:0:0:0:1 > 2001:db8::2/128", "tcp 2001:db8::1 > 2001:db8::2"},
		{"tcp 2001:2::1:7070 > 2001:2::2", "tcp 2001:2::1:7070 > 2001:2::2"}, // an address: ports need brackets
		{"tcp ::1 > ::2", "tcp ::1 > ::2"},
		{"tcp 198.18.1.2 > 198.18.2.2:7070 , tcp 198.18.2.2:7070 > 198.18.1.2,udp 198.18.1.2 > 198.18.2.2",
			"tcp 198.18.1.2 > 198.18.2.2:7070, tcp 198.18.2.2:7070 > 198.18.1.2, udp 198.18.1.2 > 198.18.2.2"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			fs, err := ParseFlowSpec(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := fs.String(); got != tc.want {
				t.Fatalf("String = %q, want %q", got, tc.want)
			}
			again, err := ParseFlowSpec(fs.String())
			if err != nil || !again.Equal(fs) {
				t.Fatalf("canonical form parses to %v, %v", again, err)
			}
		})
	}

	fs, err := ParseFlowSpec("udp [2001:2::/64]:5000-5001 > 2001:2:0:1::9")
	if err != nil {
		t.Fatal(err)
	}
	want := Flow{
		Proto: ProtoUDP,
		Src:   FlowEndpoint{Prefix: netip.MustParsePrefix("2001:2::/64"), Ports: PortRange{5000, 5001}},
		Dst:   FlowEndpoint{Prefix: netip.MustParsePrefix("2001:2:0:1::9/128")},
	}
	if len(fs.Flows) != 1 || fs.Flows[0] != want {
		t.Errorf("parsed %+v, want %+v", fs.Flows, want)
	}
}

func TestParseFlowSpecErrors(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= MaxFlows+1; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		b.WriteString("tcp 198.18.1.2 > 198.18.2.2:" + strconv.Itoa(i))
	}
	tooMany := b.String()

	for _, tc := range []struct {
		in     string
		column int
		want   string // in FlowSpecError.Want
	}{
		{"", 1, "a flow"},
		{"   ", 4, "a flow"},
		{"tpc 198.18.1.2 > 198.18.2.2", 1, "a protocol"},
		{"198.18.1.2 > 198.18.2.2", 1, "a protocol"},
		{"tcp", 4, "source address"},
		{"tcp>198.18.1.2 > 198.18.2.2", 4, "source address"},
		{"tcp 198.18.1.2", 15, "'>'"},
		{"tcp 198.18.1.2 198.18.2.2", 16, "'>'"},
		{"tcp 198.18.1.2 >", 17, "destination"},
		{"tcp 198.18.1.2 >   ", 20, "destination"},
		{"tcp 198.18.1.2 > > 198.18.2.2", 18, "destination"},
		{"tcp 198.18.1.2 > 198.18.2.2 extra", 29, "\"cgroup PATH\" or the end"},
		{"tcp 198.18.1.2 > 198.18.2.2 uid", 32, "a user id after"},
		{"tcp 198.18.1.2 > 198.18.2.2 uid x", 33, "a user id from 0"},
		{"tcp 198.18.1.2 > 198.18.2.2 uid 4294967295", 33, "a user id from 0"},
		{"tcp 198.18.1.2 > 198.18.2.2 uid 5 6", 35, "after the user id"},
		{"tcp 198.18.1.2 > 198.18.2.2 > 198.18.3.3", 29, "\"cgroup PATH\" or the end"},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup", 35, "a cgroup path after"},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup /", 36, "a cgroup path:"},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup a/../b", 38, "a cgroup path:"},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup a//b", 38, "a cgroup path:"},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup a*b", 37, "a cgroup path:"},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup a cgroup b", 38, "after the cgroup"},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup a uid 1", 38, "after the cgroup"},
		{"tcp 198.18.1.2 > 198.18.2.2 uid 1 uid 2", 35, "\"cgroup PATH\" or the end of the spec after the user id"},
		{"tcp 198.18.1.2 > 198.18.2.2,", 29, "a flow"},
		{"tcp 198.18.1.2 > 198.18.2.2,, tcp 198.18.1.2 > 198.18.2.3", 29, "a flow"},
		{"tcp 198.18.1 > 198.18.2.2", 5, "address or prefix"},
		{"tcp 198.18.1.256 > 198.18.2.2", 5, "address or prefix"},
		{"tcp 198.18.1.0/33 > 198.18.2.2", 5, "address or prefix"},
		{"tcp 198.18.1.5/24 > 198.18.2.2", 5, "without host bits set, like 198.18.1.0/24"},
		{"tcp host1 > 198.18.2.2", 5, "address or prefix"},
		{"tcp 198.18.1.2 > 198.18.2.2:0", 29, "from 1 to 65535"},
		{"tcp 198.18.1.2 > 198.18.2.2:65536", 29, "from 1 to 65535"},
		{"tcp 198.18.1.2 > 198.18.2.2:", 29, "a port"},
		{"tcp 198.18.1.2 > 198.18.2.2:http", 29, "a port"},
		{"tcp 198.18.1.2 > 198.18.2.2:-80", 29, "a port"},
		{"tcp 198.18.1.2 > 198.18.2.2:80-", 32, "a port"},
		{"tcp 198.18.1.2 > 198.18.2.2:+80", 29, "a port"},
		{"tcp 198.18.1.2 > 198.18.2.2:7010-7000", 29, "low to high"},
		{"tcp 198.18.1.2 > 198.18.2.2:1-2-3", 31, "a port"},
		{"tcp 198.18.1.2:80:90 > 198.18.2.2", 5, "address or prefix"},
		{"any 198.18.1.2 > 198.18.2.2:80", 28, "no ports with protocol any"},
		{"tcp 198.18.1.2 > 2001:2::1", 18, "an IPv4 destination"},
		{"tcp 2001:2::1 > 198.18.2.2", 17, "an IPv6 destination"},
		{"tcp 2001:2::1::7070 > 2001:2::2", 5, "[addr]:port"},
		{"tcp [2001:2::1 > 2001:2::2", 15, "']'"},
		{"tcp [2001:2::1]7070 > 2001:2::2", 16, "':' and ports"},
		{"tcp [2001:2::1]: > 2001:2::2", 17, "a port"},
		{"tcp [198.18.1.2]:80 > 198.18.2.2", 5, "without brackets"},
		{"tcp [zz]:80 > 198.18.2.2", 6, "address or prefix"},
		{"tcp fe80::1%eth0 > fe80::2", 5, "without a zone"},
		{"tcp ::ffff:198.18.1.2 > ::ffff:198.18.2.2", 5, "IPv4-mapped"},
		{"tcp ::ffff:198.18.1.0/120 > 198.18.2.2", 5, "IPv4-mapped"},
		{"tcp 198.18.1.2 > 198.18.2.2, tcp 198.18.1.2  >  198.18.2.2", 30, "each flow once (this repeats flow 1)"},
		{tooMany, len(tooMany) - len("tcp 198.18.1.2 > 198.18.2.2:65") + 1, "at most 64 flows"},
		{"tcp 198.18.1.2 > 198.18.2.2 \x00", 29, "\"cgroup PATH\" or the end"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			fs, err := ParseFlowSpec(tc.in)
			var fe *FlowSpecError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseFlowSpec = %v, %v; want a FlowSpecError", fs, err)
			}
			if fe.Column != tc.column || !strings.Contains(fe.Want, tc.want) {
				t.Errorf("column %d, want %q;\nwant column %d, want containing %q\n(%v)", fe.Column, fe.Want, tc.column, tc.want, err)
			}
			if fe.Input != tc.in || !strings.Contains(err.Error(), "column") {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestFlowSpecWithin(t *testing.T) {
	from := []netip.Prefix{netip.MustParsePrefix("198.18.1.2/32"), netip.MustParsePrefix("2001:2:0:1::2/128")}
	to := []netip.Prefix{netip.MustParsePrefix("198.18.2.0/24"), netip.MustParsePrefix("2001:2:0:2::/64")}
	for _, tc := range []struct {
		spec string
		want string // "" means within; else a word of the message
	}{
		{"tcp 198.18.1.2 > 198.18.2.2:7070", ""},
		{"tcp 198.18.1.2 > 198.18.2.0/24", ""},
		{"tcp 2001:2:0:1::2 > [2001:2:0:2::9]:7070", ""},
		{"tcp 198.18.1.2 > 198.18.2.2, udp 2001:2:0:1::2 > 2001:2:0:2::/64", ""},
		{"tcp 198.18.1.3 > 198.18.2.2", "source 198.18.1.3"},
		{"tcp 198.18.1.0/24 > 198.18.2.2", "source 198.18.1.0/24"},      // wider than the node
		{"tcp 198.18.1.2 > 198.18.0.0/16", "destination 198.18.0.0/16"}, // wider than its subnet
		{"tcp 198.18.2.2 > 198.18.1.2", "source"},                       // the wrong direction
		{"tcp 198.18.1.2 > 198.18.2.2, tcp 198.18.1.2 > 198.18.3.2", "flow 2"},
		{"tcp 2001:2:0:1::2 > 2001:2:0:3::2", "destination 2001:2:0:3::2"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			fs, err := ParseFlowSpec(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			err = fs.Within(from, to)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var re *RequestError
			if !errors.As(err, &re) || re.Field != "flow_spec" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Within = %v, want a flow_spec error mentioning %q", err, tc.want)
			}
		})
	}
	fs, _ := ParseFlowSpec("tcp 198.18.1.2 > 198.18.2.2:1, udp 198.18.1.2 > 198.18.2.3:2, tcp 198.18.1.9 > 198.18.2.2")
	src, dst := fs.Prefixes()
	if len(src) != 2 || src[1] != netip.MustParsePrefix("198.18.1.9/32") || len(dst) != 2 || dst[1] != netip.MustParsePrefix("198.18.2.3/32") {
		t.Errorf("Prefixes = %v, %v", src, dst)
	}
}

func TestFlowSpecOverlaps(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"tcp 198.18.1.2 > 198.18.2.2:7070", "tcp 198.18.1.2 > 198.18.2.2:7070", true},
		{"tcp 198.18.1.2 > 198.18.2.2:7070", "tcp 198.18.1.0/24 > 198.18.2.2", true},
		{"tcp 198.18.1.2 > 198.18.2.2:7070", "any 198.18.1.2 > 198.18.2.2", true},
		{"tcp 198.18.1.2 > 198.18.2.2:7070", "udp 198.18.1.2 > 198.18.2.2:7070", false},
		{"tcp 198.18.1.2 > 198.18.2.2:7070", "tcp 198.18.1.2 > 198.18.2.2:7071-7080", false},
		{"tcp 198.18.1.2 > 198.18.2.2:7000-7070", "tcp 198.18.1.2 > 198.18.2.2:7070-7080", true},
		{"tcp 198.18.1.2 > 198.18.2.2", "tcp 198.18.1.3 > 198.18.2.2", false},
		{"tcp 198.18.1.2:5000 > 198.18.2.2", "tcp 198.18.1.2:5001 > 198.18.2.2", false},
		{"tcp 198.18.1.2 > 198.18.2.2", "tcp 2001:2::1 > 2001:2::2", false},
		{"tcp 198.18.1.2 > 198.18.2.2, udp 198.18.1.2 > 198.18.2.2:53", "udp 198.18.1.0/24:1000 > 198.18.2.2", true},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup a", "tcp 198.18.1.2 > 198.18.2.2 cgroup a/b", true},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup a", "tcp 198.18.1.2 > 198.18.2.2", true},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup a", "tcp 198.18.1.2 > 198.18.2.2 cgroup ab", false},
		{"tcp 198.18.1.2 > 198.18.2.2 cgroup a/b", "tcp 198.18.1.2 > 198.18.2.2 cgroup a/c", false},
	} {
		t.Run(tc.a+" ~ "+tc.b, func(t *testing.T) {
			a, err1 := ParseFlowSpec(tc.a)
			b, err2 := ParseFlowSpec(tc.b)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if a.Overlaps(b) != tc.want || b.Overlaps(a) != tc.want {
				t.Errorf("Overlaps = %v, want %v both ways", a.Overlaps(b), tc.want)
			}
		})
	}
}

// TestFlowSpecJSON checks that a reservation's flow spec travels as its
// canonical string, and that a reservation without one leaves it out.
func TestFlowSpecJSON(t *testing.T) {
	fs, err := ParseFlowSpec("TCP 198.18.1.2 > 198.18.2.2:7070")
	if err != nil {
		t.Fatal(err)
	}
	r := rsvDraft(false)
	r.FlowSpec = fs
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"flow_spec":"tcp 198.18.1.2 \u003e 198.18.2.2:7070"`) {
		t.Errorf("JSON %s", b)
	}
	var back Reservation
	if err := json.Unmarshal(b, &back); err != nil || !back.FlowSpec.Equal(fs) {
		t.Fatalf("round trip: %v, %v", back.FlowSpec, err)
	}
	b, _ = json.Marshal(rsvDraft(false))
	if strings.Contains(string(b), "flow_spec") || strings.Contains(string(b), "hold_expires") {
		t.Errorf("empty fields not left out: %s", b)
	}
	if err := json.Unmarshal([]byte(`{"flow_spec":""}`), &back); err != nil || !back.FlowSpec.IsZero() {
		t.Errorf("empty flow spec in JSON: %v, %v", back.FlowSpec, err)
	}
	if err := json.Unmarshal([]byte(`{"flow_spec":"tcp nowhere > 1.2.3.4"}`), &back); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad flow spec in JSON: %v", err)
	}
}

// FuzzParseFlowSpec checks that the parser never panics, that what it
// accepts is well-formed, and that the canonical form parses back to the
// same flows and prints the same.
func FuzzParseFlowSpec(f *testing.F) {
	for _, s := range []string{
		"tcp 198.18.1.2 > 198.18.2.2:7070",
		"tcp 198.18.1.2 > 198.18.2.2:7070 uid 1000, udp 198.18.1.2 > 198.18.2.2 UID 0",
		"tcp 1.2.3.4 > 5.6.7.8 uid 4294967295",
		"tcp 1.2.3.4 > 5.6.7.8 uid 1 cgroup /lightpath/run-1, udp 1.2.3.4 > 5.6.7.8 cgroup a/../b",
		"udp 198.18.1.0/24:7000-7010 > 198.18.2.0/24, any 198.18.1.2 > 198.18.2.2",
		"tcp [2001:2::/64]:5000-5001 > 2001:2:0:1::2",
		"TCP 2001:2::1 > [2001:2::2]:1",
		"tcp [::ffff:1.2.3.4]:1 > ::1",
		"tcp fe80::1%eth0 > fe80::2",
		"tcp 1.2.3.4:65535 > 5.6.7.8:0-1",
		"tcp 1.2.3.4 > > 5.6.7.8",
		"tcp [2001:2::1 > ::",
		",",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs, err := ParseFlowSpec(s)
		if err != nil {
			var fe *FlowSpecError
			if !errors.As(err, &fe) || fe.Column < 1 || fe.Column > len(s)+1 {
				t.Fatalf("error %v (%T) has no column inside the input", err, err)
			}
			return
		}
		if len(fs.Flows) == 0 || len(fs.Flows) > MaxFlows {
			t.Fatalf("accepted %d flows", len(fs.Flows))
		}
		for _, fl := range fs.Flows {
			if !fl.Src.Prefix.IsValid() || fl.Src.Prefix != fl.Src.Prefix.Masked() || fl.Src.Prefix.Addr().Is4() != fl.Dst.Prefix.Addr().Is4() {
				t.Fatalf("accepted a bad flow %+v", fl)
			}
			if fl.Proto == ProtoAny && (!fl.Src.Ports.IsZero() || !fl.Dst.Ports.IsZero()) {
				t.Fatalf("accepted ports with any: %v", fl)
			}
		}
		canon := fs.String()
		again, err := ParseFlowSpec(canon)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", canon, s, err)
		}
		if !again.Equal(fs) || again.String() != canon {
			t.Fatalf("canonical %q of %q parses to %q", canon, s, again)
		}
	})
}
