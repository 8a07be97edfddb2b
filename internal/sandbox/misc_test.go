//go:build linux

package sandbox_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

func TestExampleFlow(t *testing.T) {
	requireSandbox(t)
	r := runIn(t, zeroLimits, "/", `echo hello; echo x > /etc/bashvisor-example`)
	if r.code != 1 || !strings.HasPrefix(r.out, "hello\n") || !strings.Contains(r.out, "/etc/bashvisor-example: Permission denied") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
}

func TestHelperFailsClosed(t *testing.T) {
	for name, args := range map[string][]string{
		"bad-config":  {sandbox.HelperArg, "{not json", "--", "/bin/bash", "-c", "echo ran"},
		"no-program":  {sandbox.HelperArg, `{"scratch":"/tmp"}`, "--"},
		"relative":    {sandbox.HelperArg, `{"scratch":"/tmp"}`, "--", "bash", "-c", "echo ran"},
		"no-scratch":  {sandbox.HelperArg, `{"scratch":"/nonexistent/bashvisor"}`, "--", "/bin/bash", "-c", "echo ran"},
		"bad-cgroup":  {sandbox.HelperArg, `{"scratch":"/tmp","cgroups":["/nonexistent"]}`, "--", "/bin/bash", "-c", "echo ran"},
		"no-such-exe": {sandbox.HelperArg, `{"scratch":"/tmp"}`, "--", "/nonexistent/bash", "-c", "echo ran"},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "no-scratch" || name == "no-such-exe" {
				requireSandbox(t) // these fail inside the confinement steps
			}
			out, err := exec.Command(os.Args[0], args...).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 126 {
				t.Fatalf("err %v, want exit 126\n%s", err, out)
			}
			if !strings.HasPrefix(string(out), "bashvisor sandbox: ") || strings.Contains(string(out), "ran") {
				t.Fatalf("output %q", out)
			}
		})
	}
}

func TestMainReturnsWithoutHelperArg(t *testing.T) {
	sandbox.Main() // os.Args[1] is a -test flag: must return at once
}

func TestProbe(t *testing.T) {
	c := sandbox.Probe()
	if c != sandbox.Probe() {
		t.Error("Probe is not stable")
	}
	s := c.String()
	if !strings.HasPrefix(s, "landlock_abi=") || strings.Contains(s, "\n") {
		t.Errorf("String() = %q", s)
	}
	if testenv.Required(testenv.Landlock) && (!c.Available() || c.ABI < 1) {
		t.Fatalf("REQUIRE_LANDLOCK=1: %s", s)
	}
}

func TestUnavailableErrorText(t *testing.T) {
	err := sandbox.UnavailableError("test reason")
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatal("not ErrUnavailable")
	}
	for _, want := range []string{"test reason", "5.13", "6.7", "6.12", "Landlock"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

func TestPrepareValidates(t *testing.T) {
	requireSandbox(t)
	if _, err := sandbox.Prepare(sandbox.Options{Bash: "bash", Command: "true"}); err == nil {
		t.Error("relative bash path accepted")
	}
	if _, err := sandbox.Prepare(sandbox.Options{Bash: "/bin/bash", Command: "true", Helper: "helper"}); err == nil {
		t.Error("relative helper path accepted")
	}
	sc, err := sandbox.Prepare(sandbox.Options{Bash: "/bin/bash", Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Cleanup(false)
	if sc.Args[0] != sc.Path || sc.Args[1] != sandbox.HelperArg || sc.Args[3] != "--" || sc.Args[4] != "/bin/bash" || sc.Args[5] != "-c" || sc.Args[6] != "true" {
		t.Errorf("args %q", sc.Args)
	}
	st, err := os.Stat(sc.Scratch)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("scratch %v %v", st.Mode(), err)
	}
	if err := sc.Cleanup(true); err != nil {
		t.Fatal(err)
	}
	if err := sc.Cleanup(true); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := os.Stat(sc.Scratch); !os.IsNotExist(err) {
		t.Errorf("scratch dir not removed: %v", err)
	}
}
