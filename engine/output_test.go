package engine_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// What the model reads of real programs' output is rendered: colours,
// carriage-return progress bars, NULs and invalid bytes; with
// Config.Output.Raw it is the bytes.
func TestRenderedOutput(t *testing.T) {
	testenv.NeedsTool(t, "ls")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rendered, raw := newEngine(t), newEngine(t, func(c *engine.Config) { c.Output.Raw = true })
	tc := engine.ToolContext{WorkingDir: dir}
	for _, c := range []struct{ name, command, want, rawHas string }{
		{"ls --color=always", "ls --color=always", "run.sh\nsubdir\n", "\x1b["},
		{"progress bar", `for p in 10 40 70 100; do printf '\rdownloading %3d%%' $p; sleep 0.05; done; printf '\n'; echo done`,
			"downloading 100%\ndone\n", "\r"},
		{"NUL bytes", `printf 'a\0b\0c\n'`, "abc\n", "\x00"},
		{"invalid UTF-8", `printf 'ok \xff\xfe end\n'`, "ok \uFFFD end\n", "\uFFFD"},
		{"title and bell", `printf '\033]0;title\007\007ready\n'`, "ready\n", "\x07"},
	} {
		r := rendered.Run(context.Background(), tc, engine.Input{Command: c.command})
		if r.Status != engine.StatusOK || r.Output != c.want {
			t.Errorf("%s: %s %q, want %q", c.name, r.Status, r.Output, c.want)
		}
		if r := raw.Run(context.Background(), tc, engine.Input{Command: c.command}); !strings.Contains(r.Output, c.rawHas) {
			t.Errorf("%s, raw: %q has no %q", c.name, r.Output, c.rawHas)
		}
	}
}

// A background job's output reads rendered through JobOutput while its
// file keeps the bytes; the next read goes on where the last one ended.
func TestRenderedJobOutput(t *testing.T) {
	e := newEngine(t)
	tc := tc(t)
	r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground,
		Command: `printf '\033[1;31merror\033[0m: one\n'; printf '\033[32mok\033[0m\r\n'; printf 'a\0b\n'`})
	j := waitJob(t, e, r.JobID, tc.ConversationID)
	out, err := e.JobOutput(tc, r.JobID, 0, 0, 0)
	if err != nil || out.Data != "error: one\nok\nab\n\n\n[background process completed]" || !out.EOF || out.End != j.Bytes {
		t.Fatalf("%+v %v", out, err)
	}
	file, _ := os.ReadFile(r.OutputFile)
	if !strings.Contains(string(file), "\x1b[1;31merror\x1b[0m") || !strings.Contains(string(file), "a\x00b") {
		t.Errorf("the file lost the raw bytes: %q", file)
	}
	// From an offset inside an escape sequence: the sequence is not shown.
	inside := int64(strings.Index(string(file), "[32m") + 1)
	if out, _ := e.JobOutput(tc, r.JobID, 0, inside, 0); !strings.HasPrefix(out.Data, "ok\n") {
		t.Errorf("from inside a sequence: %q", out.Data)
	}
	if text := out.Text(); !strings.HasPrefix(text, "[job "+r.JobID+" completed (exit code 0), pid ") ||
		!strings.Contains(text, "; showing bytes 0-"+itoa(j.Bytes)+" of "+itoa(j.Bytes)+"]\nerror: one\n") {
		t.Errorf("text %q", text)
	}
	// Limited reads page through the raw bytes: together, the whole text.
	var all strings.Builder
	for off := int64(0); ; {
		o, err := e.JobOutput(tc, r.JobID, 0, off, 7)
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString(o.Data)
		if o.EOF || o.End == off {
			break
		}
		off = o.End
	}
	if all.String() != out.Data {
		t.Errorf("paged %q, whole %q", all.String(), out.Data)
	}
}

// Progress output is rendered too, and a progress bar redrawn with \r
// reaches it once, finished.
func TestRenderedProgress(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.ProgressInterval = 100 * time.Millisecond })
	var mu sync.Mutex
	var streamed strings.Builder
	tcp := tc(t)
	tcp.Progress = func(p engine.Progress) {
		mu.Lock()
		streamed.WriteString(p.Output)
		mu.Unlock()
	}
	r := e.Run(context.Background(), tcp, engine.Input{Command: `echo start; for p in 1 2 3 4 5 6 7 8 9; do printf '\r\033[32m%d0%%\033[0m\033[K' $p; sleep 0.1; done; printf '\r100%%\n'; echo end`})
	if r.Status != engine.StatusOK || r.Output != "start\n100%\nend\n" {
		t.Fatalf("%+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if streamed.String() != r.Output {
		t.Errorf("progress carried %q, want %q", streamed.String(), r.Output)
	}
}

// A secret value split by an escape sequence in a command's output (so the
// raw stream's redaction cannot match it) is redacted in what the model
// reads; the raw bytes, which never hold it whole, stay in the file.
func TestRenderedSecretSplitBySequence(t *testing.T) {
	v, dir := sentinel(t)
	e := secretEngine(t, v)
	tc := engine.ToolContext{WorkingDir: dir}
	split := `head -c 9 s; printf '\033[1m'; tail -c +10 s; echo`
	r := e.Run(context.Background(), tc, engine.Input{Command: split})
	if strings.Contains(r.Output, v) || !strings.Contains(r.Output, marker) {
		t.Errorf("foreground: %q", r.Output)
	}
	bg := e.Run(context.Background(), tc, engine.Input{Command: split, Mode: engine.ModeBackground})
	waitJob(t, e, bg.JobID)
	if out, _ := e.JobOutput(tc, bg.JobID, 0, 0, 0); strings.Contains(out.Data, v) || !strings.Contains(out.Data, marker) {
		t.Errorf("job output: %q", out.Data)
	}
}

// A terminal job reads as its terminal's text: a curses program's screen
// (in the alternate screen while it runs, the main screen after it), and
// what a key changed.
func TestTerminalJobScreen(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 (Debian's python3 package) is needed for the terminal test:", err)
	}
	testenv.NeedsTool(t, "less")
	e := newEngine(t)
	tc := tc(t)
	script := filepath.Join(t.TempDir(), "tui.py")
	if err := os.WriteFile(script, []byte(`import curses
def main(w):
    w.addstr(0, 0, "TASKS")
    w.addstr(5, 10, "row five, column ten")
    w.addstr(39, 0, "q:quit")
    w.refresh()
    while w.getch() != ord("q"):
        w.addstr(6, 10, "key!")
        w.refresh()
curses.wrapper(main)
print("bye")
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.Run(context.Background(), tc, engine.Input{Command: "echo before; " + py + " " + script, Mode: engine.ModeBackground, TTY: true})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%+v", r)
	}
	screen := "TASKS\n\n\n\n\n          row five, column ten" + strings.Repeat("\n", 34) + "q:quit"
	waitFor(t, e, tc, r.JobID, screen)
	if out, _ := e.JobOutput(tc, r.JobID, 0, 0, 0); strings.ContainsAny(out.Data, "\x1b\r") {
		t.Errorf("escape sequences in %q", out.Data)
	}
	before, _ := e.Job(tc, r.JobID)
	if err := e.Write(context.Background(), tc, r.JobID, []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		out, _ := e.JobOutput(tc, r.JobID, 0, before.Bytes, 0)
		return strings.HasPrefix(out.Data, "          key!") // what the key changed: the lines from the first that differs
	}, "the key's change never showed")
	if err := e.Write(context.Background(), tc, r.JobID, []byte("q"), false); err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, r.JobID, tc.ConversationID)
	if out, _ := e.JobOutput(tc, r.JobID, 0, 0, 0); !strings.HasPrefix(out.Data, "before\nbye\n") || strings.Contains(out.Data, "TASKS") {
		t.Errorf("after the program left the alternate screen: %q", out.Data)
	}

	// A pager on a terminal: its first page, then the next one.
	var lines strings.Builder
	for i := range 200 {
		lines.WriteString("line " + itoa(int64(i)) + "\n")
	}
	file := filepath.Join(t.TempDir(), "lines.txt")
	if err := os.WriteFile(file, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	approved := tc
	approved.Approved = true // a pager with shell escapes on a terminal asks
	r = e.Run(context.Background(), approved, engine.Input{Command: "less " + file, Mode: engine.ModeBackground, TTY: true})
	if r.Status != engine.StatusStarted {
		t.Fatalf("%+v", r)
	}
	waitFor(t, e, tc, r.JobID, "line 0\nline 1\n")
	page, _ := e.Job(tc, r.JobID)
	if err := e.Write(context.Background(), tc, r.JobID, []byte(" "), false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		out, _ := e.JobOutput(tc, r.JobID, 0, page.Bytes, 0)
		return strings.HasPrefix(out.Data, "line 39\n") && !strings.Contains(out.Data, "line 0\n")
	}, "the next page never showed")
	if _, err := e.Kill(context.Background(), tc, r.JobID); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
