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
