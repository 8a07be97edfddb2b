//go:build linux

package sandbox_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/bashvisor/bashvisor/sandbox"
)

// An embedding program calls sandbox.Main first thing in main:
//
//	func main() {
//		sandbox.Main() // becomes the sandbox helper when re-executed; otherwise returns
//		...
//	}
//
// Then, once at startup, it probes and logs what restricted mode enforces,
// and per restricted command it prepares, starts and cleans up. (An Example
// cannot be main; this package's TestMain calls sandbox.Main. The example
// has no Output check because it needs Landlock; the tests run the same
// steps.) It prints:
//
//	hello
//	Permission denied
func Example() {
	caps := sandbox.Probe()
	fmt.Fprintln(os.Stderr, "restricted mode:", caps) // the engine logs this once
	cmd, err := sandbox.Prepare(sandbox.Limits{}, "/bin/bash", `echo hello; echo x > /etc/bashvisor-example`, "/")
	if errors.Is(err, sandbox.ErrUnavailable) {
		// The text explains the kernel requirement. The engine returns it
		// and never runs the command unrestricted.
		fmt.Println(err)
		return
	}
	if err != nil {
		panic(err)
	}
	defer cmd.Cleanup() // removes $TMPDIR and the pids cgroup

	c := exec.Command(cmd.Path, cmd.Args[1:]...)
	c.Args[0] = cmd.Args[0]
	c.Dir = "/"
	c.Env = append(os.Environ(), cmd.Env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, _ := c.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	fmt.Println(lines[0])
	fmt.Println(lines[len(lines)-1][strings.LastIndex(lines[len(lines)-1], ": ")+2:])
}

// Description is what the tool description says in restricted mode; the
// engine logs Probe's summary once at startup.
func ExampleDescription() {
	if caps := sandbox.Probe(); !caps.Available() {
		fmt.Fprintln(os.Stderr, "restricted mode disabled:", caps.Reason)
	}
	d := sandbox.Description()
	fmt.Println(strings.Contains(d, "$TMPDIR"), strings.Contains(d, "no network"))
	// Output: true true
}
