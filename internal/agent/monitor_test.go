package agent

import (
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/monitor/collect"
)

// An agent's own /metrics serves its latest collection, consistent per
// family (a device without a link gets link="").
func TestAgentMetricsHandler(t *testing.T) {
	m := &Monitoring{Registry: collect.NewRegistry(collect.Env{})}
	m.last = monitor.Group{T: 1700000000000, Points: []monitor.Point{
		{Name: "lightpath_interface_transmit_bytes_total", Labels: monitor.L("device", "wan0", "link", "wan"), V: 42},
		{Name: "lightpath_interface_transmit_bytes_total", Labels: monitor.L("device", "dummy0"), V: 7},
		{Name: collect.MetricSuccess, Labels: monitor.L("collector", "host"), V: 1},
	}}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		"# TYPE lightpath_interface_transmit_bytes_total counter",
		`lightpath_interface_transmit_bytes_total{device="wan0",link="wan"} 42 1700000000000`,
		`lightpath_interface_transmit_bytes_total{device="dummy0",link=""} 7 1700000000000`,
		`lightpath_agent_collector_success{collector="host"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	for _, pt := range []string{"/usr/local/lib/lightpath/promtool"} {
		if _, err := os.Stat(pt); err != nil {
			continue
		}
		cmd := exec.Command(pt, "check", "metrics")
		cmd.Stdin = strings.NewReader(string(body))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}
}
