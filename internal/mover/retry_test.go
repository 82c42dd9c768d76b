package mover

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/wire"
)

// TestPermanentErrors: what `cp` does not retry is told by the one
// classification (retry.IsPermanent), for each kind the mover gives: a
// refusal in the mover's own words (here a real HTTP server on the mover's
// address), an authentication failure and a malformed message, wrapped as
// the mover wraps them; an I/O error is not permanent.
func TestPermanentErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	cfg := ClientConfig{Addr: strings.TrimPrefix(srv.URL, "http://"), Token: []byte("t")}
	_, _, _, _, err := cfg.dial(context.Background(), wire.KindControl, 1, nil)
	if err == nil || !strings.Contains(err.Error(), "speaks HTTP") {
		t.Fatalf("dial an HTTP server: %v", err)
	}
	for _, e := range []error{
		err,
		fmt.Errorf("handshake: %w: bad token", ErrAuth),
		fmt.Errorf("session: %w", fmt.Errorf("%w: frame too long", wire.ErrMalformed)),
	} {
		if !retry.IsPermanent(e) {
			t.Errorf("%v: not permanent", e)
		}
	}
	if !errors.Is(err, ErrRefused) {
		t.Errorf("%v: not ErrRefused", err)
	}
	if e := fmt.Errorf("read: %w", errors.New("connection reset by peer")); retry.IsPermanent(e) {
		t.Errorf("%v: permanent", e)
	}
}
