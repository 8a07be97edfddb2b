//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/sandbox"
)

// A restricted command is prepared, started and cleaned up; here from a
// confined thread of this process (StartDirect), so no helper and no
// sandbox.Main are involved. It needs Landlock: without it Prepare returns
// an error wrapping ErrUnavailable that explains the kernel requirement,
// and the command must not run at all.
func Example() {
	sc, err := sandbox.Prepare(sandbox.Options{Bash: "/bin/bash", Command: `echo hello; echo x > /etc/bashvisor-example`})
	if errors.Is(err, sandbox.ErrUnavailable) {
		fmt.Println(err)
		return
	}
	if err != nil {
		panic(err)
	}
	defer sc.Cleanup(false) // removes $TMPDIR

	var out bytes.Buffer
	c := exec.Command("/bin/bash")
	c.Dir = "/"
	c.Env = append(os.Environ(), sc.Env...)
	c.Stdout, c.Stderr = &out, &out
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sc.StartDirect(c); err != nil {
		panic(err)
	}
	_ = c.Wait()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	fmt.Println(lines[0])
	fmt.Println(lines[len(lines)-1][strings.LastIndex(lines[len(lines)-1], ": ")+2:])
	// Output:
	// hello
	// Permission denied
}

// A conversation's world keeps /tmp from one command to the next (and its
// loopback network, and its caches). Commands in a world take files as
// their standard files (a rootless world forks them without os/exec).
func ExampleNewWorld() {
	dir, err := os.MkdirTemp("", "example-world-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	w, err := sandbox.NewWorld(sandbox.WorldOptions{Dir: dir + "/world"})
	if errors.Is(err, sandbox.ErrUnavailable) {
		fmt.Println(err)
		return
	}
	if err != nil {
		panic(err)
	}
	defer w.Close()
	run := func(command string) string {
		sc, err := sandbox.Prepare(sandbox.Options{Bash: "/bin/bash", Command: command, World: w})
		if err != nil {
			panic(err)
		}
		defer sc.Cleanup(false)
		r, wr, err := os.Pipe()
		if err != nil {
			panic(err)
		}
		defer r.Close()
		c := exec.Command("/bin/bash")
		c.Dir, c.Env = "/", append(os.Environ(), sc.Env...)
		c.Stdout, c.Stderr = wr, wr
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = sc.StartHelper(c)
		wr.Close()
		if err != nil {
			panic(err)
		}
		var out bytes.Buffer
		_, _ = out.ReadFrom(r)
		_ = c.Wait()
		return out.String()
	}
	run(`echo "kept in $TMPDIR" > /tmp/note`)
	fmt.Print(run(`cat /tmp/note`))
	// Output:
	// kept in /tmp
}

// The workspace-write profile over a copy-on-write layer: the command
// changes the workspace's merged view, the real directory stays as it
// was, and the caller reads the change set once the command ended and
// applies what policy allows (here all of it). The layer's directories
// lie outside the workspace; a rootless engine makes it with UserXattr.
func ExampleOptions_layer() {
	base, err := os.MkdirTemp("", "example-layer-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(base)
	ws, state := base+"/ws", base+"/state"
	_ = os.Mkdir(ws, 0o755)
	_ = os.Mkdir(state, 0o700)
	roots, err := sandbox.WorkspaceRoots(ws)
	if err != nil {
		panic(err)
	}
	l, err := layer.New(layer.Options{Roots: roots.Writable, Dir: state, UserXattr: sandbox.Probe().Rootless})
	if err != nil {
		panic(err)
	}
	defer l.Remove()
	spec := l.Spec()
	sc, err := sandbox.Prepare(sandbox.Options{Bash: "/bin/bash", Command: `echo hi > note; chmod 600 note`, Roots: roots, Layer: &spec})
	if errors.Is(err, sandbox.ErrUnavailable) {
		fmt.Println(err)
		return
	}
	if err != nil {
		panic(err)
	}
	c := exec.Command("/bin/bash")
	c.Dir, c.Env = ws, append(os.Environ(), sc.Env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sc.StartHelper(c); err != nil {
		panic(err)
	}
	_ = c.Wait()
	_ = sc.Cleanup(false)
	_, err = os.Stat(ws + "/note")
	fmt.Println("in the workspace before apply:", err == nil)
	s, err := l.Diff()
	if err != nil {
		panic(err)
	}
	defer s.Close()
	res, err := s.Apply(context.Background(), nil, nil, "")
	if err != nil {
		panic(err)
	}
	fmt.Println(layer.Summary(res.Applied, ws, 0))
	fi, _ := os.Stat(ws + "/note")
	fmt.Println(fi.Mode())
	// Output:
	// in the workspace before apply: false
	// [changed 1 file: A note]
	// -rw-------
}
