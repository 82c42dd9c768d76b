package udp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/lightpath/lightpath/internal/transport"
)

// TestManyStreams: one session's eight streams at once through one
// listener, as the mover's data streams run, each carrying bytes both
// ways, with the streams on sockets of their own and all on the
// listener's shared socket.
func TestManyStreams(t *testing.T) {
	for _, own := range []bool{true, false} {
		name := "shared socket"
		if own {
			name = "own sockets"
		}
		t.Run(name, func(t *testing.T) {
			a := &transport.Auth{Key: []byte("the session's secret, 32 bytes.")}
			rand.Read(a.Session[:])
			tr := &Transport{Auth: a, Keys: func(s [16]byte) ([]byte, bool) { return a.Key, s == a.Session }}
			ln, err := tr.Listen(context.Background(), "127.0.0.1:0", transport.Options{DSCP: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			l := ln.(*Listener)
			l.reuse.Store(own)
			const n = 8
			var wg sync.WaitGroup
			errs := make(chan error, 4*n)
			// the server echoes every stream back, reversed in chunks
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					s, err := ln.Accept()
					if err != nil {
						errs <- err
						return
					}
					if _, shared := s.(*conn).ep.(*listenEndpoint); shared == own {
						errs <- errors.New("a stream on the wrong kind of socket")
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer s.Close()
						if _, err := io.Copy(s, s); err != nil {
							errs <- err
						}
						s.(*conn).CloseWrite()
					}()
				}
			}()
			for range n {
				c, err := tr.Dial(context.Background(), ln.Addr().String(), transport.Options{DSCP: -1})
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					want := make([]byte, 2<<20)
					rand.Read(want)
					go func() {
						c.Write(want)
						c.CloseWrite()
					}()
					got, err := io.ReadAll(c)
					if err != nil {
						errs <- err
					} else if !bytes.Equal(got, want) {
						errs <- errors.New("a stream's echo differs from what it sent")
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if !own {
				l.mu.Lock()
				refs := l.refs
				l.mu.Unlock()
				if refs > 1+n {
					t.Errorf("the shared socket has %d holders", refs)
				}
			}
		})
	}
}

var _ net.Conn = (*conn)(nil)
