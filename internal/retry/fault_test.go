package retry

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestFaultOf(t *testing.T) {
	pathErr := func(errno syscall.Errno) error {
		return fmt.Errorf("write incoming/a: %w", &fs.PathError{Op: "write", Path: "a", Err: errno})
	}
	for _, tc := range []struct {
		name string
		err  error
		want Fault
	}{
		{"nil", nil, ""},
		{"not there", fmt.Errorf("open: %w", fs.ErrNotExist), FaultNotFound},
		{"ENOENT in a path error", pathErr(syscall.ENOENT), FaultNotFound},
		{"EACCES", pathErr(syscall.EACCES), FaultPermission},
		{"EPERM", pathErr(syscall.EPERM), FaultPermission},
		{"read-only filesystem", pathErr(syscall.EROFS), FaultPermission},
		{"no space", pathErr(syscall.ENOSPC), FaultNoSpace},
		{"quota", pathErr(syscall.EDQUOT), FaultNoSpace},
		{"file too large", pathErr(syscall.EFBIG), FaultNoSpace},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, FaultNetwork},
		{"reset without a net error", fmt.Errorf("control: %w", syscall.ECONNRESET), FaultNetwork},
		{"peer gone mid-message", fmt.Errorf("control: %w", io.ErrUnexpectedEOF), FaultNetwork},
		{"transient", Transient(errors.New("busy")), FaultNetwork},
		{"marked", WithFault(errors.New("checksum mismatch"), FaultChecksum), FaultChecksum},
		// The mark decides over what it wraps: a refusal that happens to
		// wrap ENOENT is the refusal's.
		{"mark over errno", WithFault(pathErr(syscall.ENOENT), FaultGrant), FaultGrant},
		{"wrapped mark", fmt.Errorf("push: %w", WithFault(errors.New("x"), FaultPermission)), FaultPermission},
		{"permanent, unmarked", Permanent(errors.New("bad request")), FaultInternal},
		{"plain", errors.New("something else"), FaultInternal},
		// Words are not read: a message that says "no space" is internal.
		{"words only", errors.New("no space left on device"), FaultInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FaultOf(tc.err); got != tc.want {
				t.Errorf("FaultOf(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestWithFaultKeepsClassAndMessage(t *testing.T) {
	base := Permanent(errors.New("read-only"))
	err := WithFault(base, FaultPermission)
	if err.Error() != "read-only" || !IsPermanent(err) || !errors.Is(err, base) {
		t.Fatalf("marked error: %q permanent %v", err, IsPermanent(err))
	}
	if WithFault(nil, FaultNetwork) != nil {
		t.Fatal("marking nil is not nil")
	}
}

func TestParseFault(t *testing.T) {
	for _, f := range Faults {
		if ParseFault(string(f)) != f {
			t.Errorf("ParseFault(%q) = %q", f, ParseFault(string(f)))
		}
	}
	for _, s := range []string{"", "disk-on-fire", "Network"} {
		if ParseFault(s) != FaultInternal {
			t.Errorf("ParseFault(%q) = %q, want internal", s, ParseFault(s))
		}
	}
}
