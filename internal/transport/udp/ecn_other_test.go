//go:build !linux

package udp_test

import "net"

func recvTOS(*net.UDPConn)      {}
func tosIn([]byte) (byte, bool) { return 0, false }
func ceOOB() []byte             { return nil }
