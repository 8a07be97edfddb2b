package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/cmd/internal/cli"
	"github.com/bashvisor/bashvisor/internal/sandbox"
)

// demoBin is this package built as a binary: the CLI tests run it as a
// user would.
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
	if out, err := exec.Command(goCmd, "build", "-o", demoBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the demo binary: %v\n%s", err, out)
		demoBin = "" // the CLI tests fail with this message; the rest run
	}
	// goleak calls Cleanup instead of os.Exit: exit with its code, or a
	// leak found after passing tests would exit 0.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.RemoveAll(dir); os.Exit(code) }))
}

// cli is the outcome of one run of the demo binary.
type result struct {
	stdout, stderr string
	code           int
}

// demo runs the demo binary with args; env entries are added to the
// environment.
func demo(t *testing.T, env []string, args ...string) result {
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
	return result{stdout.String(), stderr.String(), code}
}

func (c result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", c.code, c.stdout, c.stderr)
}

// One convention for every subcommand: help on stdout with exit 0, usage
// errors on stderr with exit 64.
func TestHelpAndUsageErrors(t *testing.T) {
	commands := []string{"run", "check", "schema", "mcp", "executor", "stress", "bench", "tour"}
	mainPage := func(t *testing.T, out string) {
		t.Helper()
		if !strings.Contains(out, "usage: demo COMMAND [flags] [arguments]") {
			t.Errorf("no usage line in\n%s", out)
		}
		for _, name := range commands {
			if !strings.Contains(out, "\n  "+name+" ") {
				t.Errorf("no line for %s in\n%s", name, out)
			}
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}} {
		c := demo(t, nil, args...)
		if c.code != 0 || c.stderr != "" {
			t.Errorf("demo %q: %v", args, c)
		}
		mainPage(t, c.stdout)
	}
	for _, args := range [][]string{{}, {"bogus"}, {"help", "bogus"}} {
		c := demo(t, nil, args...)
		if c.code != exitUsage || c.stdout != "" {
			t.Errorf("demo %q: %v", args, c)
		}
		mainPage(t, c.stderr)
	}
	for _, name := range commands {
		for _, args := range [][]string{{name, "-h"}, {name, "--help"}, {"help", name}} {
			c := demo(t, nil, args...)
			if c.code != 0 || c.stderr != "" || !strings.HasPrefix(c.stdout, "usage: demo "+name) {
				t.Errorf("demo %q: %v", args, c)
			}
			if sc := command(name); !strings.Contains(c.stdout, sc.Summary[1:]) {
				t.Errorf("demo %q does not say what %s does:\n%s", args, name, c.stdout)
			}
		}
		c := demo(t, nil, name, "-no-such-flag")
		if c.code != exitUsage || c.stdout != "" || !strings.Contains(c.stderr, "flag provided but not defined: -no-such-flag") ||
			!strings.Contains(c.stderr, "usage: demo "+name) {
			t.Errorf("demo %s -no-such-flag: %v", name, c)
		}
	}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"run"}, "demo run: missing COMMAND"},
		{[]string{"check"}, "demo check: missing COMMAND"},
		{[]string{"schema", "extra"}, `demo schema: unexpected arguments: ["extra"]`},
		{[]string{"schema", "-grace", "1s"}, "flag provided but not defined: -grace"},
		{[]string{"tour", "extra"}, `demo tour: unexpected arguments: ["extra"]`},
		{[]string{"stress", "-n", "0"}, "demo stress: -n and -c must be positive"},
		{[]string{"bench", "-flood", "lots"}, `demo bench: -flood: bad size "lots"`},
		{[]string{"check", "-profile", "bogus", "ls"}, `demo check: -profile: unknown permission profile "bogus"`},
		{[]string{"mcp", "-env-policy", "all"}, "demo mcp: -env-policy must be inherit-safe or allowlist"},
	} {
		r := demo(t, nil, c.args...)
		if r.code != exitUsage || r.stdout != "" || !strings.HasPrefix(r.stderr, c.err) {
			t.Errorf("demo %q: %v\nwant exit %d and stderr starting %q", c.args, r, exitUsage, c.err)
		}
	}
	// A backquoted word in a flag's usage names its argument: bench's
	// -serial takes a number, not "bash -c true".
	if c := demo(t, nil, "bench", "-h"); !strings.Contains(c.stdout, "  -serial int\n") {
		t.Errorf("bench -h:\n%s", c.stdout)
	}
}

// command returns the demo's subcommand name.
func command(name string) *cli.Command {
	for _, c := range program().Commands {
		if c.Name == name {
			return &c
		}
	}
	return nil
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "version"} {
		c := demo(t, nil, arg)
		if c.code != 0 || c.stderr != "" || !strings.HasPrefix(c.stdout, "demo ") ||
			!strings.HasSuffix(c.stdout, " "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n") {
			t.Errorf("demo %s: %v", arg, c)
		}
	}
}
