package engine_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

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

// BenchmarkGateLarge times the engine's analysis path (engine.Decide:
// what Run does before it starts a command, and the audit record) for a
// 10 KB heredoc under each permission preset, with and without an audit
// log, beside the package-level safety.Analyze of the same command: the
// ratio is what the engine adds to the analysis.
func BenchmarkGateLarge(b *testing.B) {
	cmd := heredocCommand(10 << 10)
	b.Run("package", func(b *testing.B) {
		b.SetBytes(int64(len(cmd)))
		for b.Loop() {
			safety.Analyze(cmd, safety.Options{WorkDir: "/testbed"})
		}
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
				for b.Loop() {
					engine.Decide(e, tc, in)
				}
			})
		}
	}
}
