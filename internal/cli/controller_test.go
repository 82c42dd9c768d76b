package cli

import (
	"io"
	"path/filepath"
	"testing"
)

// TestControllerPathPreferenceFlag checks --path-preference is refused,
// in one line naming the flag and the values it takes, before anything is
// opened.
func TestControllerPathPreferenceFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "c.db")
	for _, v := range []string{"widest", "Dedicated"} {
		root := newRoot(io.Discard, io.Discard)
		root.SetArgs([]string{"controller", "--listen", "127.0.0.1:0", "--db", "sqlite:" + db, "--metrics-db", "none", "--path-preference", v})
		err := root.Execute()
		want := `controller: --path-preference: unknown path preference "` + v + `" (want dedicated, routed or shortest)`
		if err == nil || err.Error() != want {
			t.Errorf("--path-preference %s: %v, want %q", v, err, want)
		}
	}
	if f := newControllerCmd().Flags().Lookup("path-preference"); f == nil || f.DefValue != "dedicated" {
		t.Errorf("--path-preference: %+v, want the default dedicated", f)
	}
}
