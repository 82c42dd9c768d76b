package cli

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "devel"},
		{"a tagged module", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, true, "v1.2.3"},
		{"a checkout without vcs stamping", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "devel"},
		{"a clean checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "3b73ed8a0123456789abcdef"}, {Key: "vcs.modified", Value: "false"}}}, true, "devel-3b73ed8a0123"},
		{"a changed checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "3b73ed8"}, {Key: "vcs.modified", Value: "true"}}}, true, "devel-3b73ed8-dirty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuildInfo(tc.bi, tc.ok); got != tc.want {
				t.Errorf("fromBuildInfo = %q, want %q", got, tc.want)
			}
		})
	}
}
