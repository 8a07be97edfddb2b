package testenv

import (
	"bufio"
	"io"
	"os/exec"
	"testing"
)

// Piped starts cmd with pipes to its standard input and from its
// standard output and reads the output's first line, which must be
// first: a process that says when it is ready (a lock taken, a step
// done) and then waits on its input. It returns the input and the
// output's later lines. At cleanup it closes the input and, unless the
// test waited for cmd itself, waits for it; an error of that wait fails
// the test.
func Piped(t testing.TB, cmd *exec.Cmd, first string) (io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		if cmd.ProcessState == nil {
			if err := cmd.Wait(); err != nil {
				t.Errorf("%s: %v", cmd.Path, err)
			}
		}
	})
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != first {
		t.Fatalf("%s: first line %q (%v), want %q", cmd.Path, lines.Text(), lines.Err(), first)
	}
	return in, lines
}
