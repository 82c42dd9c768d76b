package api

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lightpath/lightpath/internal/apiv1"
	"github.com/lightpath/lightpath/internal/controller"
)

// The dashboard's door: GET /api/v1/signin tells the sign-in page where
// the admin's token is, and POST /api/v1/signin exchanges a one-time code
// (in the link the controller prints at start) for a session token of the
// user who holds the admin token file, once, within minutes.

// SessionTTL is how long the session a sign-in link gives lasts.
const SessionTTL = 12 * time.Hour

// signIns holds the one-time codes that are still good, by their SHA-256
// (a code is never kept in the clear), and the hint. Its zero value is
// ready.
type signIns struct {
	mu        sync.Mutex
	codes     map[string]signInCode
	tokenFile string
}

type signInCode struct {
	user    string
	expires time.Time
}

// WithSignIn gives the sign-in page the admin token file to point at.
func (s *Server) WithSignIn(adminTokenFile string) *Server {
	s.signin.mu.Lock()
	s.signin.tokenFile = adminTokenFile
	s.signin.mu.Unlock()
	return s
}

// NewSignInCode makes a code that signs in once as user, within ttl: the
// code of the link the controller prints at start
// (URL/#/signin?code=CODE, which the web UI exchanges).
func (s *Server) NewSignInCode(user string, ttl time.Duration) (string, time.Time, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", time.Time{}, err
	}
	code := hex.EncodeToString(b)
	exp := s.c.Now().Add(ttl)
	s.signin.mu.Lock()
	defer s.signin.mu.Unlock()
	if s.signin.codes == nil {
		s.signin.codes = map[string]signInCode{}
	}
	now := s.c.Now()
	for k, v := range s.signin.codes {
		if !now.Before(v.expires) {
			delete(s.signin.codes, k)
		}
	}
	s.signin.codes[codeKey(code)] = signInCode{user: user, expires: exp}
	return code, exp, nil
}

func codeKey(code string) string {
	h := sha256.Sum256([]byte(code))
	return hex.EncodeToString(h[:])
}

func (s *Server) signInHint(w http.ResponseWriter, _ *http.Request, _ controller.Actor) error {
	s.signin.mu.Lock()
	h := apiv1.SignInHint{AdminTokenFile: s.signin.tokenFile}
	s.signin.mu.Unlock()
	writeJSON(w, http.StatusOK, h)
	return nil
}

// errBadCode answers every code that does not sign in alike: unknown,
// used or expired.
var errBadCode = fmt.Errorf("%w: this sign-in code is unknown, used or expired: "+
	"sign in with a token instead (the admin's is in the controller's --admin-token-file)", controller.ErrUnauthorized)

func (s *Server) signInByCode(w http.ResponseWriter, r *http.Request, _ controller.Actor) error {
	var in apiv1.SignInRequest
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if in.Code == "" {
		return invalid("code", "give the code of the sign-in link")
	}
	key := codeKey(in.Code)
	s.signin.mu.Lock()
	c, ok := s.signin.codes[key]
	delete(s.signin.codes, key) // once, whatever comes of it
	s.signin.mu.Unlock()
	if !ok || !s.c.Now().Before(c.expires) {
		return errBadCode
	}
	secret, t, err := s.c.SessionToken(r.Context(), c.user, SessionTTL, "one-time sign-in link")
	if err != nil {
		if errors.Is(err, controller.ErrUnauthorized) {
			return errBadCode
		}
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.SignIn{Token: secret, User: t.User, ExpiresAt: t.ExpiresAt.UTC()})
	return nil
}
