package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/apiv1"
)

// TestServiceWithoutTopology: a controller started without a topology
// hands its service none (a nil Network, not a nil *Topo inside one), so
// a data node's heartbeat and claim are refused 409 ("the controller has no topology yet")
// rather than failing inside the service.
func TestServiceWithoutTopology(t *testing.T) {
	e := newEnv(t, sqliteURL(t), "")
	a1 := e.agent("dn-a1", "a1")
	for _, c := range []struct {
		path string
		body any
	}{
		{"/api/v1/datanodes/a1/heartbeat", apiv1.DataNodeHeartbeat{Endpoint: "src", Address: "127.0.0.1:7000"}},
		{"/api/v1/datanodes/a1/claim", apiv1.ClaimRequest{Max: 1}},
	} {
		st, raw := e.do("POST", c.path, a1, c.body, nil)
		var b apiv1.ErrorBody
		if err := json.Unmarshal(raw, &b); err != nil || st != http.StatusConflict || b.Error.Code != apiv1.CodeConflict || !strings.Contains(b.Error.Message, "has no topology yet") {
			t.Fatalf("%s without a topology: %d %s", c.path, st, raw)
		}
	}
}
