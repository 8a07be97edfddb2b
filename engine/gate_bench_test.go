package engine_test

import (
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/safety"
)

// heredocCommand is a command like the ones agents write files with: cat
// <<'EOF' > FILE, then about n bytes of Python source, then EOF (as
// safety's BenchmarkAnalyzeLarge).
func heredocCommand(n int) string {
	var b strings.Builder
	b.WriteString("cat <<'EOF' > sklearn/utils/_set_output.py\n")
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `def _wrap_method_output_%d(f, method, config={"dense": "pandas", "token": None}):
    """Wrap method output as specified by the output config (see issue #%d)."""
    @wraps(f)
    def wrapped(self, X, *args, **kwargs):
        data_to_wrap = f(self, X, *args, **kwargs)
        if isinstance(data_to_wrap, tuple) and len(data_to_wrap) > 1:
            return (_wrap_data_with_container(method, data_to_wrap[0], X, self), *data_to_wrap[1:])
        return _wrap_data_with_container(method, data_to_wrap, X, self)  # password: see docs
    return wrapped

`, i, 1000+i)
	}
	b.WriteString("EOF")
	return b.String()
}

// cpuTime is the CPU time the process has used (user and system, all
// threads: the garbage collector's work included), which a loaded machine
// inflates far less than wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGateLarge times the engine's analysis path (engine.Decide:
// what Run does before it starts a command, and the audit record) for a
// 10 KB heredoc under each permission preset, with and without an audit
// log, beside the package-level safety.Analyze of the same command: the
// ratio is what the engine adds to the analysis. cpu-ns/op is the
// process's CPU time per call, the figure to compare on a loaded machine.
func BenchmarkGateLarge(b *testing.B) {
	cmd := heredocCommand(10 << 10)
	b.Run("package", func(b *testing.B) {
		b.SetBytes(int64(len(cmd)))
		cpu := cpuTime(b)
		for b.Loop() {
			safety.Analyze(cmd, safety.Options{WorkDir: "/testbed"})
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	})
	for _, audit := range []bool{false, true} {
		for _, name := range []string{"none", "standard", "guarded", "locked"} {
			b.Run(fmt.Sprintf("engine/%s/audit=%v", name, audit), func(b *testing.B) {
				e := newEngine(b, func(c *engine.Config) {
					if name != "none" {
						c.Permissions, _ = safety.Preset(name)
					}
					if audit {
						c.Audit = io.Discard
					}
				})
				tc := engine.ToolContext{WorkingDir: b.TempDir(), ConversationID: "bench"}
				in := engine.Input{Command: cmd}
				b.SetBytes(int64(len(cmd)))
				cpu := cpuTime(b)
				for b.Loop() {
					engine.Decide(e, tc, in)
				}
				b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
