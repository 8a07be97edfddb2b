//go:build linux

package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

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
