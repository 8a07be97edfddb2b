package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/internal/sandbox"
)

// demoBin is cmd/demo built as a binary: it has every command of this
// package (and the tour), and the CLI tests run it as a user would.
var demoBin string

func TestMain(m *testing.M) {
	sandbox.Main() // restricted runs re-execute this binary as the sandbox helper
	dir, err := os.MkdirTemp("", "demo-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	demoBin = filepath.Join(dir, "demo")
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if out, err := exec.Command(goCmd, "build", "-o", demoBin, "../../demo").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the demo binary: %v\n%s", err, out)
		demoBin = "" // the CLI tests fail with this message; the rest run
	}
	// goleak calls Cleanup instead of os.Exit: exit with its code, or a
	// leak found after passing tests would exit 0.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.RemoveAll(dir); os.Exit(code) }))
}

// cli is the outcome of one run of the demo binary.
type cli struct {
	stdout, stderr string
	code           int
}

// demo runs the demo binary with args; env entries are added to the
// environment.
func demo(t *testing.T, env []string, args ...string) cli {
	t.Helper()
	if demoBin == "" {
		t.Fatal("the demo binary did not build (see TestMain's output)")
	}
	cmd := exec.Command(demoBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("demo %q: %v", args, err)
	}
	return cli{stdout.String(), stderr.String(), code}
}

func (c cli) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", c.code, c.stdout, c.stderr)
}

// demoMain runs the standard commands in this process as the demo
// program.
func demoMain(args []string, stdout, stderr io.Writer) int {
	return (&Program{Name: "demo", Commands: Standard()}).Main(args, stdout, stderr)
}

func TestVersion(t *testing.T) {
	v := Version("bashvisor")
	if !strings.HasPrefix(v, "bashvisor ") || !strings.HasSuffix(v, " "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("Version: %q", v)
	}
	// A test binary has no module version: it says why.
	if !strings.Contains(v, "(devel)") && !strings.Contains(v, "(commit ") {
		t.Errorf("Version of a test binary: %q", v)
	}
}
