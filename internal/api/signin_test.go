package api_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/api"
	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
)

// TestSignInCode checks the one-time sign-in link: its code gives a
// session token of the admin token file's user once and only once, the
// token works and expires, a code past its lifetime or never made gives
// 401, and the hint names the admin token file.
func TestSignInCode(t *testing.T) {
	e := newEnv(t, sqliteURL(t), "")
	h, clk, file := e.h, e.clk, filepath.Join(e.dir, "admin.token")
	call := func(method, path, token string, body any) (int, []byte) {
		t.Helper()
		return e.do(method, path, token, body, nil)
	}

	var hint apiv1.SignInHint
	if code, raw := call("GET", "/api/v1/signin", "", nil); code != 200 || json.Unmarshal(raw, &hint) != nil || hint.AdminTokenFile != file {
		t.Errorf("GET /api/v1/signin: %d %s, want the admin token file %s", code, raw, file)
	}

	code, exp, err := h.NewSignInCode(controller.AdminUser, 10*time.Minute)
	if err != nil || !exp.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("NewSignInCode: %v, expires %s", err, exp)
	}
	st1, raw := call("POST", "/api/v1/signin", "", apiv1.SignInRequest{Code: code})
	var got apiv1.SignIn
	if st1 != 200 || json.Unmarshal(raw, &got) != nil || got.Token == "" || got.User != controller.AdminUser || !got.ExpiresAt.Equal(t0.Add(api.SessionTTL)) {
		t.Fatalf("the code's first use: %d %s", st1, raw)
	}
	admin, _ := os.ReadFile(file)
	if got.Token == strings.TrimSpace(string(admin)) {
		t.Errorf("the code gave the admin's lasting token, not a session")
	}
	var who apiv1.Whoami
	if s, raw := call("GET", "/api/v1/whoami", got.Token, nil); s != 200 || json.Unmarshal(raw, &who) != nil || who.User != "admin" || who.Role != "admin" {
		t.Errorf("whoami with the session token: %d %s", s, raw)
	}
	// Once only.
	if s, raw := call("POST", "/api/v1/signin", "", apiv1.SignInRequest{Code: code}); s != 401 || !strings.Contains(string(raw), "unknown, used or expired") {
		t.Errorf("the code's second use: %d %s, want 401", s, raw)
	}
	// A code never made, and none.
	if s, _ := call("POST", "/api/v1/signin", "", apiv1.SignInRequest{Code: strings.Repeat("0", 48)}); s != 401 {
		t.Errorf("a made-up code: %d, want 401", s)
	}
	if s, _ := call("POST", "/api/v1/signin", "", apiv1.SignInRequest{}); s != 400 {
		t.Errorf("no code: %d, want 400", s)
	}
	// A code past its lifetime does not sign in, even unused.
	late, _, _ := h.NewSignInCode(controller.AdminUser, 10*time.Minute)
	clk.Add(10 * time.Minute)
	if s, _ := call("POST", "/api/v1/signin", "", apiv1.SignInRequest{Code: late}); s != 401 {
		t.Errorf("an expired code: %d, want 401", s)
	}
	// And the session ends.
	clk.Add(api.SessionTTL)
	if s, _ := call("GET", "/api/v1/whoami", got.Token, nil); s != 401 {
		t.Errorf("whoami with the session token after %s: %d, want 401", api.SessionTTL, s)
	}
}
