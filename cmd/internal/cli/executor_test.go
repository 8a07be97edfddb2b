package cli

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestExecutorFlags: a bad -cluster is a usage error; listening off
// loopback without a token is refused before anything starts.
func TestExecutorFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := demoMain([]string{"executor", "-cluster", "zookeeper:x"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "-cluster must be") {
		t.Errorf("bad -cluster: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	t.Setenv(ClusterTokenEnv, "")
	if code := demoMain([]string{"executor", "-listen", "0.0.0.0:0"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "without a shared token") {
		t.Errorf("0.0.0.0 without a token: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := demoMain([]string{"mcp", "-http", "127.0.0.1:0", "-executors", "127.0.0.1:1", "-cluster", "k8s"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "exclude each other") {
		t.Errorf("-executors with -cluster: exit %d, stderr %q", code, errb.String())
	}
}

// TestExecutorStopsCleanlyOnceServing: SIGTERM sent the moment the
// executor says it serves ends it cleanly (exit 0), never by the
// signal's default action — its handler is in place before that line
// (CI once saw "did not stop cleanly: signal: terminated").
func TestExecutorStopsCleanlyOnceServing(t *testing.T) {
	for i := range 5 {
		cmd := exec.Command(demoBin, "executor", "-listen", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), ClusterTokenEnv+"=")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		var seen []string
		for sc.Scan() {
			seen = append(seen, sc.Text())
			if strings.Contains(sc.Text(), " serving at ") {
				_ = cmd.Process.Signal(syscall.SIGTERM) // by its pidfd: not yet reaped
				break
			}
		}
		go io.Copy(io.Discard, stderr)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("run %d: %v after %q", i, err, seen)
		}
	}
}
