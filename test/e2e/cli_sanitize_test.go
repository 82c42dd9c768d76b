//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestCLISanitizesStoredStrings registers a transfer whose source carries
// an escape sequence (as another user could) and checks that transfer list
// and transfer show print it escaped: a terminal never receives the ESC,
// so it cannot clear an operator's screen. --json keeps the string as
// stored.
func TestCLISanitizesStoredStrings(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	evil := "run42\x1b[2J\x1b[Hgone\r\x07"
	body, _ := json.Marshal(map[string]string{"direction": "push", "source": evil, "destination": "lp://b1:7070/in\x1b]0;owned\x07"})
	req, _ := http.NewRequest("POST", c.url+"/api/v1/transfers", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+readTok(t, c.adminTok))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		ID string `json:"id"`
	}
	json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 || tr.ID == "" {
		t.Fatalf("register the transfer: status %d, id %q", resp.StatusCode, tr.ID)
	}
	for _, args := range [][]string{{"transfer", "list"}, {"transfer", "show", tr.ID}} {
		r := c.ok(c.adminTok, args...)
		if strings.ContainsAny(r.stdout, "\x1b\r\x07") {
			t.Errorf("lightpath %s printed a control character raw:\n%q", strings.Join(args, " "), r.stdout)
		}
		for _, want := range []string{`run42\x1b[2J\x1b[Hgone\x0d\x07`, `lp://b1:7070/in\x1b]0;owned\x07`} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("lightpath %s does not show %s:\n%s", strings.Join(args, " "), want, r.stdout)
			}
		}
	}
	r := c.ok(c.adminTok, "transfer", "list", "--json")
	if !strings.Contains(r.stdout, `run42\u001b[2J`) {
		t.Errorf("transfer list --json changed the stored source:\n%s", r.stdout)
	}
}
