package cli

import (
	"bytes"
	"strings"
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
