package cli

import (
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// -broker host=env:NAME gives sandboxed commands a placeholder of the
// secret's shape in NAME, never the secret; it needs a sandbox and a
// host=ref value, and a variable that is not set fails the run.
func TestRunBroker(t *testing.T) {
	const secret = "ghp_CliS3cretT0kenNotInTheSandbox0123456"
	dir := t.TempDir()
	for _, bad := range [][]string{
		{"-broker", "example.com=env:BV_CLI_TOKEN"},                                            // no sandbox
		{"-sandbox", "read-only", "-allow-net", "example.com", "-broker", "example.com"},       // no ref
		{"-sandbox", "read-only", "-allow-net", "example.com", "-broker", "=env:BV_CLI_TOKEN"}, // no host
	} {
		if r := demo(t, []string{"BV_CLI_TOKEN=" + secret}, append(append([]string{"run", "-C", dir}, bad...), "true")...); r.code != exitUsage || !strings.Contains(r.stderr, "-broker") {
			t.Errorf("run %q: %v", bad, r)
		}
	}
	c := sandbox.Probe()
	testenv.Needf(t, testenv.Namespaces, c.Available() && c.Namespaces, "no private namespaces for sandboxed commands: %s", c)
	args := []string{"run", "-C", dir, "-sandbox", "read-only", "-allow-net", "example.com", "-broker", "example.com=env:BV_CLI_TOKEN", `printf '%s\n' "$BV_CLI_TOKEN"`}
	r := demo(t, []string{"BV_CLI_TOKEN=" + secret}, args...)
	if ph := strings.TrimSpace(r.stdout); r.code != 0 || len(ph) != len(secret) || !strings.HasPrefix(ph, "ghp_") || ph == secret || strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("placeholder: %v", r)
	}
	if r := demo(t, []string{"BV_CLI_TOKEN="}, args...); r.code == 0 || !strings.Contains(r.stderr, "BV_CLI_TOKEN is not set") {
		t.Errorf("an unset variable: %v", r)
	}
}
