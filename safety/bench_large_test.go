package safety

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// heredocCommand returns a command like the ones agents write files with:
// cat <<'EOF' > FILE, then about n bytes of Python source, then EOF.
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

// BenchmarkAnalyzeLarge analyses a 10 KB heredoc as the engine does with no
// permission profile: without an audit log (Log false, the target
// of 50 µs), with one, and the redaction alone.
func BenchmarkAnalyzeLarge(b *testing.B) {
	cmd := heredocCommand(10 << 10)
	b.Run("analyze", func(b *testing.B) {
		b.SetBytes(int64(len(cmd)))
		b.ReportAllocs()
		for b.Loop() {
			Analyze(cmd, Options{WorkDir: "/testbed"})
		}
	})
	b.Run("analyze-standard", func(b *testing.B) {
		opts := benchOptions(b)
		b.SetBytes(int64(len(cmd)))
		b.ReportAllocs()
		for b.Loop() {
			Analyze(cmd, opts)
		}
	})
	b.Run("analyze-log", func(b *testing.B) {
		b.SetBytes(int64(len(cmd)))
		b.ReportAllocs()
		for b.Loop() {
			Analyze(cmd, Options{WorkDir: "/testbed", Log: true})
		}
	})
	b.Run("redact", func(b *testing.B) {
		b.SetBytes(int64(len(cmd)))
		b.ReportAllocs()
		for b.Loop() {
			RedactSecrets(cmd)
		}
	})
}

// BenchmarkAgentCorpus times Analyze on every command of the
// agent-command corpus (see agentCorpus), as the engine does with no
// permission profile, without an audit log and with one (Log: the
// redaction), each command the minimum of 5 runs so that a loaded
// machine's stalls do not count, and reports the median, 99th percentile
// and maximum per command. One iteration is one pass over the corpus.
func BenchmarkAgentCorpus(b *testing.B) {
	corpus := agentCorpus(b)
	b.Run("check", func(b *testing.B) {
		times := make([]time.Duration, len(corpus))
		for b.Loop() {
			for i, rec := range corpus {
				best := time.Duration(1 << 62)
				for range 5 {
					start := time.Now()
					Check(rec.Command)
					best = min(best, time.Since(start))
				}
				times[i] = best
			}
		}
		reportQuantiles(b, times)
	})
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"analyze", Options{WorkDir: "/testbed"}},
		{"analyze-log", Options{WorkDir: "/testbed", Log: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			times := make([]time.Duration, len(corpus))
			for b.Loop() {
				for i, rec := range corpus {
					best := time.Duration(1 << 62)
					for range 5 {
						start := time.Now()
						Analyze(rec.Command, bc.opts)
						best = min(best, time.Since(start))
					}
					times[i] = best
				}
			}
			reportQuantiles(b, times)
		})
	}
}

// reportQuantiles reports the median, 99th percentile and maximum of
// per-command times, and their number.
func reportQuantiles(b *testing.B, times []time.Duration) {
	slices.Sort(times)
	at := func(q float64) float64 { return float64(times[int(q*float64(len(times)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(1), "max-µs")
	b.ReportMetric(float64(len(times)), "commands")
}
