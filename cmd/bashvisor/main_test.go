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
)

// bin is this command built from the checkout as a user's `make install`
// builds it (with version control information), so that its version line
// can be checked against the commit.
var bin, buildErr string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bashvisor-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "bashvisor")
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// -buildvcs=auto: stamp the commit even where GOFLAGS says otherwise.
	if out, err := exec.Command(goCmd, "build", "-buildvcs=auto", "-o", bin, ".").CombinedOutput(); err != nil {
		buildErr = fmt.Sprintf("building bashvisor: %v\n%s", err, out)
	}
	// goleak calls Cleanup instead of os.Exit: exit with its code, or a
	// leak found after passing tests would exit 0.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.RemoveAll(dir); os.Exit(code) }))
}

type result struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("bashvisor %q: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// TestVersion: the version line names the module version and the commit
// the binary was built from (and whether the checkout was modified) when
// built in a git clone. Go finds the repository by its .git directory, so
// in a git worktree (where .git is a file) it stamps nothing, and the line
// says so.
func TestVersion(t *testing.T) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err) // a module download: go install stamps the module's version
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bashvisor v", "(commit " + strings.TrimSpace(string(head))[:12]}
	if st, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !st.IsDir() {
		want = []string{"bashvisor (devel) (no version information: "}
	}
	for _, arg := range []string{"version", "--version"} {
		r := run(t, arg)
		ok := r.code == 0 && r.stderr == "" && strings.HasPrefix(r.stdout, want[0]) &&
			strings.HasSuffix(r.stdout, " "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n")
		for _, w := range want[1:] {
			ok = ok && strings.Contains(r.stdout, w)
		}
		if !ok {
			t.Errorf("bashvisor %s: exit %d\n%s%s\nwant %q", arg, r.code, r.stdout, r.stderr, want)
		}
	}
}

// TestCommands: the product's commands, under its own name; the
// memberships it leaves out point to bashvisor-fleet.
func TestCommands(t *testing.T) {
	r := run(t, "help")
	for _, name := range []string{"run", "check", "schema", "mcp", "executor", "help", "version"} {
		if !strings.Contains(r.stdout, "\n  "+name+" ") {
			t.Errorf("help lacks %s:\n%s", name, r.stdout)
		}
	}
	for _, name := range []string{"tour", "bench", "stress"} {
		if strings.Contains(r.stdout, "\n  "+name+" ") {
			t.Errorf("help lists the demo's %s:\n%s", name, r.stdout)
		}
	}
	if r := run(t, "run", "-C", t.TempDir(), "echo", "hi"); r.code != 0 || r.stdout != "hi\n" {
		t.Errorf("run: %+v", r)
	}
	if r := run(t, "run", "-C", "/nonexistent", "true"); r.code != 126 || !strings.HasPrefix(r.stderr, "bashvisor run: -C:") {
		t.Errorf("run -C /nonexistent: %+v", r)
	}
	for _, kind := range []string{"etcd:http://127.0.0.1:1", "k8s"} {
		r := run(t, "executor", "-cluster", kind)
		if r.code != 64 || !strings.Contains(r.stderr, "use bashvisor-fleet") {
			t.Errorf("executor -cluster %s: %+v", kind, r)
		}
	}
	if r := run(t, "executor", "-h"); !strings.Contains(r.stdout, "etcd and k8s are in bashvisor-fleet") {
		t.Errorf("executor -h does not say where etcd and k8s are:\n%s", r.stdout)
	}
}
