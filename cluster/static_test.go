package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
)

var pidRE = regexp.MustCompile(`\(pid \d+\)`)

// comparable strips what legitimately differs between two engines:
// timings, pids and the paths of their own output directories.
func comparable(r engine.Result) string {
	r.DurationMS, r.QueuedMS, r.PID = 0, 0, 0
	// The resource report differs from run to run: only whether each
	// figure is there must agree.
	r.CPUMS, r.PeakMemoryBytes, r.Processes = min(r.CPUMS, 1), min(r.PeakMemoryBytes, 1), min(r.Processes, 1)
	r.Output = pidRE.ReplaceAllString(r.Output, "(pid N)")
	if r.OutputFile != "" {
		r.Output = strings.ReplaceAll(r.Output, r.OutputFile, "OUTFILE")
		r.OutputFile = "OUTFILE"
	}
	if r.FullOutputFile != "" {
		r.Output = strings.ReplaceAll(r.Output, r.FullOutputFile, "FULLFILE")
		r.FullOutputFile = "FULLFILE"
	}
	if r.Status == engine.StatusStarted {
		r.Output = "STARTED"
	}
	b, _ := json.Marshal(r)
	errText := ""
	if r.Err != nil {
		errText = r.Err.Error()
	}
	return string(b) + " err=" + errText
}

// TestRoundTripIdentical runs the same calls through a local engine and
// through a front and an executor subprocess: every result is the same,
// byte for byte (timings, pids and output paths aside), and errors.Is
// matches the same sentinels.
func TestRoundTripIdentical(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	mark := t.Name()
	// The local engine first: the front's goroutines are those started
	// after it (an engine keeps its admission watch running).
	local, err := engine.New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer local.Shutdown(context.Background())
	ex := startExecutor(t, execSpec{name: "exec-1", mark: mark})
	c := newClient(t, cluster.ClientOptions{Membership: cluster.Static(ex.addr)})
	defer shutdown(t, c)
	waitReady(t, c, 1)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   engine.Input
		dir  string
		is   error
	}{
		{"ok", engine.Input{Command: "echo out; echo err >&2; cat f.txt"}, dir, nil},
		{"failed", engine.Input{Command: "echo partial; exit 3"}, dir, nil},
		{"signal", engine.Input{Command: "kill -9 $$"}, dir, nil},
		{"timed out", engine.Input{Command: "echo before; sleep 10"}, dir, nil},
		{"blocked", engine.Input{Command: "git push --force"}, dir, engine.ErrBlocked},
		{"bad input", engine.Input{Command: "  "}, dir, engine.ErrBadInput},
		{"bad mode", engine.Input{Command: "true", Mode: "turbo"}, dir, engine.ErrBadInput},
		{"missing dir", engine.Input{Command: "true"}, filepath.Join(dir, "nope"), engine.ErrWorkDirMissing},
		{"unicode and invalid utf-8", engine.Input{Command: `printf 'h\xe9llo \xff w\xc3\xb6rld\n'`}, dir, nil},
		{"truncated", engine.Input{Command: "seq 1 100000"}, dir, nil},
		{"leftover", engine.Input{Command: "sleep 30 & echo started"}, dir, nil},
		{"background", engine.Input{Command: "echo bg", Mode: engine.ModeBackground}, dir, nil},
		{"slow", engine.Input{Command: "echo slow", Mode: engine.ModeSlow}, dir, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctxt := engine.ToolContext{WorkingDir: tc.dir, ConversationID: "conv-" + tc.name}
			want := local.Run(context.Background(), ctxt, tc.in)
			got := c.Run(context.Background(), ctxt, tc.in)
			if comparable(got) != comparable(want) {
				t.Errorf("remote result differs\n got %s\nwant %s", comparable(got), comparable(want))
			}
			if tc.is != nil && (!errors.Is(got.Err, tc.is) || !errors.Is(want.Err, tc.is)) {
				t.Errorf("errors.Is(%v, %v): remote %v, local %v", got.Err, tc.is, errors.Is(got.Err, tc.is), errors.Is(want.Err, tc.is))
			}
		})
	}
	if d := c.Description(engine.ToolContext{WorkingDir: dir}); d != local.Description(engine.ToolContext{WorkingDir: dir}) {
		t.Errorf("description differs:\n%s", d)
	}
	shutdown(t, c)
	ex.stop()
	waitNoLeftovers(t, mark)
}
