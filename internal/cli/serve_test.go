package cli

import (
	"io"
	"strings"
	"testing"
)

// TestServeDataNodeFlags checks serve's data node flags are refused where
// they cannot work, before anything is served: TLS between data nodes
// needs both a certificate and the CA that checks the others'.
func TestServeDataNodeFlags(t *testing.T) {
	base := []string{"serve", "--listen", "127.0.0.1:0", "--root", t.TempDir()}
	dn := append(append([]string{}, base...), "--controller", "http://127.0.0.1:1", "--node", "a1", "--endpoint", "e")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"tls-ca alone", append(append([]string{}, base...), "--tls-ca", "ca.pem"), "--tls-ca needs --controller"},
		{"cert without ca", append(append([]string{}, dn...), "--tls-cert", "c.pem", "--tls-key", "k.pem"), "--tls-cert and --tls-ca go together"},
		{"ca without cert", append(append([]string{}, dn...), "--tls-ca", "ca.pem"), "--tls-cert and --tls-ca go together"},
		{"read-only", append(append([]string{}, dn...), "--read-only"), "--read-only with --controller"},
		{"no endpoint", append(append([]string{}, base...), "--controller", "http://127.0.0.1:1", "--node", "a1"), "needs --node and --endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(io.Discard, io.Discard)
			root.SetArgs(tc.args)
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("lightpath %s: error %v, want %q", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
}
