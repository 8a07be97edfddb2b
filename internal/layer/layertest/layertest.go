//go:build linux

// Package layertest runs shell commands over a layer for tests, the way
// the sandbox will: in a new private mount namespace where the layer is
// mounted over its roots — as root, or, for any other user, in a new
// user namespace too, with the overlay's userxattr option. It also
// re-runs a package's tests as an unprivileged user from a root test
// process. A test binary that uses it calls [Main] first in TestMain.
package layertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// childArg is the hidden argv[1] of the test binary re-executed as the
// process that mounts the layer and execs the command.
const childArg = "__layertest_child"

// unprivEnv marks a test binary re-run by [RerunUnprivileged].
const unprivEnv = "LAYERTEST_UNPRIVILEGED"

// Main must be the first statement of TestMain: when the test binary
// was started as the mounting child it mounts the layer and execs the
// command, and never returns.
func Main() {
	if len(os.Args) < 4 || os.Args[1] != childArg {
		return
	}
	runtime.LockOSThread()
	err := child(os.Args[2], os.Args[3:])
	fmt.Fprintln(os.Stderr, "layertest child:", err)
	os.Exit(126)
}

// child mounts the layer (spec, JSON) in its mount namespace, which it
// got from clone(2), and execs argv.
func child(spec string, argv []string) error {
	var s layer.Spec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := s.Mount(); err != nil {
		return err
	}
	// The command runs without the capability the mount needed.
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	return syscall.Exec(argv[0], argv, os.Environ())
}

var (
	probeOnce sync.Once
	probeErr  error
)

// Need gives up on the test when no layer can be mounted here (no
// overlayfs, no mount namespaces as root, no user namespaces otherwise):
// it skips, or fails when REQUIRE_NAMESPACES=1 (CI). It also needs bash
// (and fails without it when REQUIRE_TOOLS=1).
func Need(tb testing.TB) {
	tb.Helper()
	testenv.NeedsTool(tb, "bash")
	probeOnce.Do(func() { probeErr = probe(tb) })
	testenv.Need(tb, testenv.Namespaces, probeErr)
}

// probe mounts a layer for `true` once.
func probe(tb testing.TB) error {
	dir, err := os.MkdirTemp("", "layertest-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root, state := filepath.Join(dir, "root"), filepath.Join(dir, "state")
	for _, d := range []string{root, state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	l, err := layer.New(layer.Options{Roots: []string{root}, Dir: state, UserXattr: Unprivileged()})
	if err != nil {
		return err
	}
	defer l.Remove()
	if out, err := Run(tb, l.Spec(), root, nil, "touch x"); err != nil {
		return fmt.Errorf("a layer cannot be mounted here: %v: %s", err, strings.TrimSpace(out))
	}
	s, err := l.Diff()
	if err != nil {
		return err
	}
	defer s.Close()
	if len(s.Changes) != 1 {
		return fmt.Errorf("a layer was mounted but did not capture a write (changes %v)", s.Changes)
	}
	return nil
}

// Unprivileged reports whether layers must be made with
// Options.UserXattr here (the test runs as a user other than root).
func Unprivileged() bool { return os.Geteuid() != 0 }

// Command returns a command that runs `bash -c script` in dir over the
// layer spec, with env as its whole environment. As root the child gets
// a new mount namespace; otherwise new user and mount namespaces, in
// which the test's uid and gid map to themselves and the child keeps
// the capabilities the mount needs (ambient ones, in that user
// namespace only) until it execs bash, which runs without any.
func Command(tb testing.TB, spec layer.Spec, dir string, env []string, script string) *exec.Cmd {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		tb.Fatal(err)
	}
	enc, err := json.Marshal(spec)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(self, childArg, string(enc), bash, "-c", script)
	cmd.Dir, cmd.Env = dir, env
	attr := &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWNS}
	if Unprivileged() {
		uid, gid := os.Getuid(), os.Getgid()
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		// Overlayfs works in the upper layer with the capabilities
		// of whoever mounted it (its own work directory is mode 000):
		// those over the user namespace's files, not only SYS_ADMIN.
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH,
			unix.CAP_FOWNER, unix.CAP_CHOWN, unix.CAP_FSETID}
	}
	cmd.SysProcAttr = attr
	return cmd
}

// Run runs script over the layer (see [Command]) and returns its
// combined output.
func Run(tb testing.TB, spec layer.Spec, dir string, env []string, script string) (string, error) {
	tb.Helper()
	var out bytes.Buffer
	cmd := Command(tb, spec, dir, env, script)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// RerunUnprivileged runs the test binary's tests that match pattern
// again as an unprivileged user, when the test runs as root: a uid that
// has no account here (so it owns nothing outside the directories made
// for the run), with its own TMPDIR and HOME, the binary copied where
// it can run it. It fails tb if they fail, and reports their output.
// It is a no-op (with a log line) when the test already runs
// unprivileged, as CI's second pass does.
func RerunUnprivileged(tb testing.TB, pattern string) {
	tb.Helper()
	if os.Getenv(unprivEnv) != "" || Unprivileged() {
		tb.Log("already running as an unprivileged user")
		return
	}
	uid := unusedID(tb)
	base, err := os.MkdirTemp("", "layertest-unpriv-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(base) })
	for _, d := range []string{"", "tmp", "home", "bin"} {
		p := filepath.Join(base, d)
		if err := os.MkdirAll(p, 0o700); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			tb.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(base, "bin", filepath.Base(self))
	if err := copyFile(self, bin); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", pattern, "-test.count=1", "-test.v")
	cmd.Env = append(cleanEnv(), "TMPDIR="+filepath.Join(base, "tmp"), "HOME="+filepath.Join(base, "home"), unprivEnv+"=1")
	cmd.Dir = filepath.Join(base, "home")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	tb.Logf("as uid %d:\n%s", uid, out)
	if err != nil {
		tb.Fatalf("tests as uid %d: %v", uid, err)
	}
	if !strings.Contains(string(out), "--- PASS") {
		tb.Fatalf("tests as uid %d ran nothing", uid)
	}
}

// cleanEnv is the environment without TMPDIR and HOME.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMPDIR=") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "GOCOVERDIR=") {
			env = append(env, kv)
		}
	}
	return env
}

// unusedID returns a uid (and gid) that no account or group uses here.
func unusedID(tb testing.TB) int {
	for id := 61_000; id < 61_500; id++ {
		_, uerr := user.LookupId(strconv.Itoa(id))
		_, gerr := user.LookupGroupId(strconv.Itoa(id))
		if uerr != nil && gerr != nil {
			return id
		}
	}
	tb.Fatal("no unused uid in 61000-61499")
	return 0
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// HoldApplyLock is another engine process applying to the workspace ws:
// it binds ws's apply lock as layer does (the abstract unix socket
// "@bashvisor-apply-<dev>:<ino>" of the root), prints "locked" and holds
// it until its standard input ends. A test re-executes its binary to be
// that process (see testenv.Piped).
func HoldApplyLock(tb testing.TB, ws string) {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Stat(ws, &st); err != nil {
		tb.Fatal(err)
	}
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer unix.Close(s)
	if err := unix.Bind(s, &unix.SockaddrUnix{Name: fmt.Sprintf("@bashvisor-apply-%d:%d", st.Dev, st.Ino)}); err != nil {
		tb.Fatal(err)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
}
