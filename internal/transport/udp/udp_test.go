package udp_test

import (
	"crypto/rand"
	"testing"

	"github.com/lightpath/lightpath/internal/transport"
	"github.com/lightpath/lightpath/internal/transport/transporttest"
	"github.com/lightpath/lightpath/internal/transport/udp"
)

// newSession makes a session as the mover's control channel would: a
// random id and secret, known to the listener's key lookup.
func newSession(t testing.TB) (*udp.Transport, transport.Auth) {
	var a transport.Auth
	rand.Read(a.Session[:])
	a.Key = make([]byte, 32)
	rand.Read(a.Key)
	tr := &udp.Transport{
		Keys: func(s [16]byte) ([]byte, bool) {
			if s == a.Session {
				return a.Key, true
			}
			return nil, false
		},
		Auth: &a,
	}
	return tr, a
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transport.Transport {
		tr, _ := newSession(t)
		return tr
	})
}
