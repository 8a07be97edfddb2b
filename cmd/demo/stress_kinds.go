package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// The kinds of commands.

func (s *stresser) fast(i int, dir string) error {
	r := s.run(context.Background(), i, dir, "echo ok-"+strconv.Itoa(i), engine.ModeSlow)
	if err := expect(r, engine.StatusOK, 0); err != nil {
		return err
	}
	if r.Output != "ok-"+strconv.Itoa(i)+"\n" {
		return fmt.Errorf("output %q", r.Output)
	}
	return nil
}

func (s *stresser) failing(i int, dir string) error {
	code := 1 + i%100
	r := s.run(context.Background(), i, dir, fmt.Sprintf("echo bad >&2; exit %d", code), engine.ModeSlow)
	if err := expect(r, engine.StatusFailed, code); err != nil {
		return err
	}
	if want := fmt.Sprintf("[command failed: exit code %d]\nbad\n", code); r.Output != want {
		return fmt.Errorf("output %q", r.Output)
	}
	return nil
}

func (s *stresser) flood(i int, dir string) error {
	const size = 10 << 20
	r := s.run(context.Background(), i, dir, fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", size), engine.ModeSlow)
	if r.FullOutputFile != "" {
		defer os.Remove(r.FullOutputFile)
	}
	if err := expect(r, engine.StatusOK, 0); err != nil {
		return err
	}
	if !r.Truncated || r.OutputBytes != size || !strings.HasPrefix(r.Output, "[output truncated in middle: got 10.0 MiB, showing the first 32 KiB and the last 96 KiB]\n") {
		return fmt.Errorf("flood: truncated=%v bytes=%d %.80q", r.Truncated, r.OutputBytes, r.Output)
	}
	return nil
}

// timeout: the output written before the timeout is kept. On a loaded
// machine the short timeout may fire before the shell wrote anything; the
// pid file, written after the output, tells which case this is.
func (s *stresser) timeout(i int, dir string) error {
	r := s.run(context.Background(), i, dir, "echo partial; echo $$ > pid; sleep 30", "")
	if err := expect(r, engine.StatusTimedOut, -1); err != nil {
		return err
	}
	if len(recordedPids(dir)) > 0 && !strings.HasSuffix(r.Output, "partial\n") {
		return fmt.Errorf("partial output missing: %q", r.Output)
	}
	return s.gone(dir)
}

func (s *stresser) cancel(i int, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+i%150)*time.Millisecond)
	defer cancel()
	r := s.run(ctx, i, dir, "sleep 30 & echo $! > pid; echo $$ > pid0; wait", engine.ModeSlow) // only the cancel ends it
	// A very early cancel may come before the shell wrote anything; it is
	// still a cancellation.
	if err := expect(r, engine.StatusCancelled, -1); err != nil {
		return err
	}
	if !strings.HasPrefix(r.Output, "[command cancelled]\n") {
		return fmt.Errorf("output %q", r.Output)
	}
	return s.gone(dir)
}

// waitJob waits for a background job of command i to end.
func (s *stresser) waitJob(i int, id string, within time.Duration) (engine.JobInfo, error) {
	deadline := time.Now().Add(within)
	for {
		j, err := s.e.Job(engine.ToolContext{ConversationID: s.tenant(i)}, id)
		if err != nil {
			return j, err
		}
		if j.Status != engine.JobRunning {
			return j, nil
		}
		if time.Now().After(deadline) {
			return j, fmt.Errorf("job %s still running after %v", id, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *stresser) bgComplete(i int, dir string) error {
	code := i % 2 * 7 // half complete, half fail with 7
	r := s.run(context.Background(), i, dir, fmt.Sprintf("echo $$ > pid; echo hi; sleep 0.1; exit %d", code), engine.ModeBackground)
	if err := expect(r, engine.StatusStarted, -1); err != nil {
		return err
	}
	if err := s.isolation(i, r); err != nil {
		return err
	}
	j, err := s.waitJob(i, r.JobID, 20*time.Second)
	if err != nil {
		return err
	}
	if j.PID != r.PID {
		return fmt.Errorf("job %s is pid %d, started as %d", r.JobID, j.PID, r.PID)
	}
	want, line := engine.JobCompleted, "[background process completed]"
	if code != 0 {
		want, line = engine.JobFailed, fmt.Sprintf("[background process failed: exit code %d]", code)
	}
	if j.Status != want {
		return fmt.Errorf("job %+v, want %s", j, want)
	}
	b, err := os.ReadFile(r.OutputFile)
	if err != nil {
		return fmt.Errorf("output file: %w", err)
	}
	if string(b) != "hi\n\n\n"+line {
		return fmt.Errorf("output file %q", b)
	}
	return s.gone(dir)
}

func (s *stresser) bgKill(i int, dir string) error {
	r := s.run(context.Background(), i, dir, "trap '' TERM; sleep 30 & echo $! > pid; echo $$ > pid0; wait", engine.ModeBackground)
	if err := expect(r, engine.StatusStarted, -1); err != nil {
		return err
	}
	time.Sleep(time.Duration(i%100) * time.Millisecond)
	if err := s.isolation(i, r); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := s.e.Kill(ctx, engine.ToolContext{ConversationID: s.tenant(i)}, r.JobID)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if j.Status != engine.JobKilled || j.Reason != "killed by request" || j.PID != r.PID || j.ConversationID != s.tenant(i) {
		return fmt.Errorf("killed job %+v", j)
	}
	return s.gone(dir)
}

// bgShutdown leaves a job running for Shutdown to end.
func (s *stresser) bgShutdown(i int, dir string) error {
	r := s.run(context.Background(), i, dir, "sleep 60 & echo $! > pid; echo $$ > pid0; wait", engine.ModeBackground)
	if err := expect(r, engine.StatusStarted, -1); err != nil {
		return err
	}
	return s.isolation(i, r)
}

// pipeHolder: a leftover holding the pipe is killed and named. The shell
// may exit before the child it forked has exec'd sleep, in which case the
// leftover is still named bash.
func (s *stresser) pipeHolder(i int, dir string) error {
	r := s.run(context.Background(), i, dir, "sleep 30 & echo $! > pid; echo done", engine.ModeSlow)
	if err := expect(r, engine.StatusOK, 0); err != nil {
		return err
	}
	const note = "done\n[killed processes left running after the shell exited: "
	if !strings.HasPrefix(r.Output, note+"sleep (pid ") && !strings.HasPrefix(r.Output, note+"bash (pid ") {
		return fmt.Errorf("output %q", r.Output)
	}
	return s.gone(dir)
}

// termIgnoring: a tree that ignores SIGTERM is ended by SIGKILL after the
// grace period (exit 137). Everything the shell starts after its first
// statement inherits the ignored SIGTERM, and it records pids only after
// that statement; when the short timeout fired even earlier (a loaded
// machine), SIGTERM alone ends the shell (exit 143).
func (s *stresser) termIgnoring(i int, dir string) error {
	r := s.run(context.Background(), i, dir,
		`trap '' TERM; (trap '' TERM; sleep 30 & echo $! >> pid; wait) & echo $! >> pid; sleep 30 & echo $! >> pid; echo $$ >> pid; wait`, "")
	code := 137
	if len(recordedPids(dir)) == 0 && r.ExitCode != nil && *r.ExitCode == 143 {
		code = 143
	}
	if err := expect(r, engine.StatusTimedOut, code); err != nil {
		return err
	}
	return s.gone(dir)
}

func (s *stresser) escapees(i int, dir string) error {
	cmd := `setsid sleep 30 >/dev/null 2>&1 & echo $! > pid-a; (setsid sh -c 'sleep 30 & echo $! > pid-b' >/dev/null 2>&1 &); ` +
		`while [ ! -s pid-b ]; do sleep 0.01; done; echo escaped`
	mode, want := engine.ModeSlow, engine.StatusOK
	if i%2 == 1 {
		cmd += "; sleep 30" // and end by the short timeout
		mode, want = engine.ModeDefault, engine.StatusTimedOut
	}
	r := s.run(context.Background(), i, dir, cmd, mode)
	if err := expect(r, want, -1); err != nil {
		return err
	}
	// "escaped" is printed once both pids are recorded. A loaded machine
	// may time out before that; the orphan scan still finds any escapee
	// (they carry the run's marker).
	if strings.Contains(r.Output, "escaped") && len(recordedPids(dir)) != 2 {
		return fmt.Errorf("escapee pids not recorded: %q", r.Output)
	}
	return s.gone(dir)
}

// blockedCommands must be blocked; each would be harmless in the command's
// empty temp dir even if it ran.
var blockedCommands = []string{"git add -A", "git push --force origin main", "rm -rf .git", "git -C . add ."}

func (s *stresser) blocked(i int, dir string) error {
	c := blockedCommands[i%len(blockedCommands)]
	r := s.run(context.Background(), i, dir, c, "")
	if err := expect(r, engine.StatusBlocked, -1); err != nil {
		return err
	}
	if !strings.HasPrefix(r.Output, "[command blocked: ") {
		return fmt.Errorf("output %q", r.Output)
	}
	return nil
}

// yieldedLine is the line that ends the result of a call that yielded
// after ms milliseconds as job id; input: the job has stdin "pipe" or a
// terminal.
func yieldedLine(ms int64, id string, input bool) string {
	send := ""
	if input {
		send = ", send it input with bash_write"
	}
	return "[command still running after " + (time.Duration(ms) * time.Millisecond).String() +
		": moved to background as " + id + "; read it with bash_output" + send + ", stop it with bash_kill]"
}

// splitYield checks a yielded call's result and returns its output so far.
func splitYield(r engine.Result, ms int64, input bool) (string, error) {
	if err := expect(r, engine.StatusStarted, -1); err != nil {
		return "", err
	}
	soFar, ok := strings.CutSuffix(r.Output, yieldedLine(ms, r.JobID, input))
	if !ok || r.JobID == "" || r.PID <= 0 || r.OutputFile == "" || r.Truncated {
		return "", fmt.Errorf("yielded result %+v", r)
	}
	if r.DurationMS < ms {
		return "", fmt.Errorf("yielded after %d ms, yield_ms %d", r.DurationMS, ms)
	}
	return soFar, nil
}

// listed checks that the job a call yielded to is listed as soon as the
// call returned it (the supervisor knows the job by its new id before the
// caller has the result).
func (s *stresser) listed(i int, r engine.Result) error {
	if _, err := s.e.Job(engine.ToolContext{ConversationID: s.tenant(i)}, r.JobID); err != nil {
		return fmt.Errorf("yielded job %s, right after the call returned: %w", r.JobID, err)
	}
	return nil
}

// jobFile reads a job's output file and splits off its completion line,
// which must be the one given.
func jobFile(r engine.Result, line string) (string, error) {
	b, err := os.ReadFile(r.OutputFile)
	if err != nil {
		return "", fmt.Errorf("output file: %w", err)
	}
	if n := strings.Count(string(b), "[background process "); n != 1 {
		return "", fmt.Errorf("%d completion lines in %q", n, b)
	}
	out, ok := strings.CutSuffix(string(b), "\n\n"+line)
	if !ok {
		return "", fmt.Errorf("output file %q, want it to end with %q", b, line)
	}
	return out, nil
}

// yield: a command printing a stream of numbers outlives its yield_ms
// (it runs until the file go exists, which the check creates only after
// the call returned) and moves to the background; the result has the
// output so far, the job's file the rest, and together they are the
// numbers from 1 on, each once, then the end line. The job then
// completes, fails (exit 3) or is killed; a killed job's output is such a
// sequence cut short.
func (s *stresser) yield(i int, dir string) error {
	ms := int64(20 + i%200)
	// At most 10000 numbers (49 KB): the output so far stays under the
	// truncation limit however late the yield comes.
	cmd := `echo $$ > pid; n=0; while [ ! -e go ]; do if [ $n -lt 10000 ]; then seq $((n+1)) $((n+50)); n=$((n+50)); fi; sleep 0.01; done; echo end-$n`
	end := i % 3 // 0: completes, 1: fails, 2: killed
	if end == 1 {
		cmd += "; exit 3"
	}
	r := s.runInput(context.Background(), i, dir, engine.Input{Command: cmd, Mode: engine.ModeSlow, YieldMS: ms})
	soFar, err := splitYield(r, ms, false)
	if err != nil {
		return err
	}
	if err := s.listed(i, r); err != nil {
		return err
	}
	if err := s.isolation(i, r); err != nil {
		return err
	}
	tc := engine.ToolContext{ConversationID: s.tenant(i)}
	var j engine.JobInfo
	if end == 2 {
		time.Sleep(time.Duration(i%50) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if j, err = s.e.Kill(ctx, tc, r.JobID); err != nil {
			return fmt.Errorf("kill: %w", err)
		}
	} else {
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
			return err
		}
		if j, err = s.waitJob(i, r.JobID, 20*time.Second); err != nil {
			return err
		}
	}
	if j.PID != r.PID || j.OutputFile != r.OutputFile {
		return fmt.Errorf("job %+v, started as pid %d with %s", j, r.PID, r.OutputFile)
	}
	want, line := engine.JobCompleted, "[background process completed]"
	switch end {
	case 1:
		want, line = engine.JobFailed, "[background process failed: exit code 3]"
	case 2:
		want, line = engine.JobKilled, "[background process killed: killed by request]"
	}
	if j.Status != want {
		return fmt.Errorf("job %+v, want %s", j, want)
	}
	rest, err := jobFile(r, line)
	if err != nil {
		return err
	}
	err = numbersThenEnd(soFar+rest, end != 2)
	if cut, ok := strings.CutSuffix(soFar, "\n"); err != nil && ok && numbersThenEnd(cut+rest, end != 2) == nil {
		// The output so far ended inside a line, to which the result
		// added the newline before its last line.
		err = nil
	}
	if err != nil {
		return fmt.Errorf("output so far …%q + file %.80q…: %w", soFar[max(0, len(soFar)-80):], rest, err)
	}
	return s.gone(dir)
}

// numbersThenEnd checks that out is the lines 1, 2, ..., n and then
// "end-n" (when complete), or a prefix of such lines, cut at a line's end
// (when not).
func numbersThenEnd(out string, complete bool) error {
	lines := strings.Split(out, "\n")
	if lines[len(lines)-1] != "" {
		return fmt.Errorf("no newline at the end")
	}
	lines = lines[:len(lines)-1]
	n := 0
	for k, l := range lines {
		if strings.HasPrefix(l, "end-") {
			if l != "end-"+strconv.Itoa(n) || k != len(lines)-1 {
				return fmt.Errorf("line %d %q after %d numbers", k+1, l, n)
			}
			return nil
		}
		if l != strconv.Itoa(n+1) {
			return fmt.Errorf("line %d is %q, want %d (nothing lost or repeated)", k+1, l, n+1)
		}
		n++
	}
	if complete {
		return fmt.Errorf("no end line after %d numbers", n)
	}
	return nil
}

// stdin: a job with stdin "pipe" (half of them a call that yielded first)
// echoes the lines written to it, in several writes that split lines,
// once each and in order, and ends after its input is closed. Writes from
// another conversation find no such job; writes after the end say it
// ended.
func (s *stresser) stdin(i int, dir string) error {
	const loop = `while read l; do echo "got:$l"; done; echo eof`
	in := engine.Input{Command: "echo $$ > pid; " + loop, Mode: engine.ModeBackground, Stdin: engine.StdinPipe}
	yielded := i%2 == 1
	ms := int64(20 + i%100)
	if yielded {
		// It waits for its input, so it cannot end before it yields.
		in = engine.Input{Command: "echo $$ > pid; echo ready; " + loop, Mode: engine.ModeSlow, Stdin: engine.StdinPipe, YieldMS: ms}
	}
	r := s.runInput(context.Background(), i, dir, in)
	var soFar string
	if yielded {
		var err error
		if soFar, err = splitYield(r, ms, true); err != nil {
			return err
		}
		if err := s.listed(i, r); err != nil {
			return err
		}
	} else if err := expect(r, engine.StatusStarted, -1); err != nil {
		return err
	}
	if err := s.isolation(i, r); err != nil {
		return err
	}
	tc := engine.ToolContext{ConversationID: s.tenant(i)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.e.Write(ctx, engine.ToolContext{ConversationID: outsider}, r.JobID, []byte("x\n"), false); !errors.Is(err, engine.ErrNoSuchJob) {
		return fmt.Errorf("write from another conversation: %v, want no such job", err)
	}
	// 1 to 40 lines, written in pieces of 1 to 23 bytes (a line split
	// across writes, several lines in one), the last with the close.
	var text, want strings.Builder
	if yielded {
		want.WriteString("ready\n")
	}
	for k := range 1 + i%40 {
		l := fmt.Sprintf("line-%d-%d", i, k)
		text.WriteString(l + "\n")
		want.WriteString("got:" + l + "\n")
	}
	want.WriteString("eof\n")
	data := text.String()
	piece := 1 + i%23
	for len(data) > 0 {
		n := min(piece, len(data))
		if err := s.e.Write(ctx, tc, r.JobID, []byte(data[:n]), n == len(data)); err != nil {
			return fmt.Errorf("write %q: %w", data[:n], err)
		}
		data = data[n:]
	}
	j, err := s.waitJob(i, r.JobID, 20*time.Second)
	if err != nil {
		return err
	}
	if j.Status != engine.JobCompleted {
		return fmt.Errorf("job %+v, want completed after its input closed", j)
	}
	rest, err := jobFile(r, "[background process completed]")
	if err != nil {
		return err
	}
	if soFar+rest != want.String() {
		return fmt.Errorf("output so far %q + file %q, want %q", soFar, rest, want.String())
	}
	if err := s.e.Write(ctx, tc, r.JobID, []byte("late\n"), false); !errors.Is(err, engine.ErrJobEnded) {
		return fmt.Errorf("write after the end: %v, want job ended", err)
	}
	return s.gone(dir)
}
