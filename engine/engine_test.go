package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// newEngine returns an engine with short test timings, shut down at the
// end of the test.
func newEngine(t testing.TB, mod ...func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := testConfig()
	cfg.Timeout = 5 * time.Second
	cfg.Lifecycle.Grace = 300 * time.Millisecond
	cfg.Lifecycle.CleanupWait = 3 * time.Second
	for _, m := range mod {
		m(&cfg)
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return e
}

func tc(t testing.TB) engine.ToolContext {
	return engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "test"}
}

func run(t testing.TB, e *engine.Engine, command string) engine.Result {
	t.Helper()
	return e.Run(context.Background(), tc(t), engine.Input{Command: command})
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	testenv.Eventually(t, within, func() bool { return !alive(pid) }, "pid %d still alive", pid)
}

// readPid reads a pid a command wrote to a file.
func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestExitCodesAndSignals(t *testing.T) {
	e := newEngine(t)
	cases := []struct {
		cmd    string
		status engine.Status
		code   int
		signal string
		text   string
	}{
		{"echo hello", engine.StatusOK, 0, "", "hello\n"},
		{"true", engine.StatusOK, 0, "", ""},
		{"echo out; exit 3", engine.StatusFailed, 3, "", "[command failed: exit code 3]\nout\n"},
		{"exit 255", engine.StatusFailed, 255, "", "[command failed: exit code 255]\n"},
		{"kill -KILL $$", engine.StatusFailed, 137, "SIGKILL", "[command failed: killed by SIGKILL]\n"},
		{"kill -SEGV $$", engine.StatusFailed, 139, "SIGSEGV", "[command failed: killed by SIGSEGV]\n"},
		{"no-such-command-xyz", engine.StatusFailed, 127, "", "[command failed: exit code 127]\nbash: line 1: no-such-command-xyz: command not found\n"},
	}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			r := run(t, e, c.cmd)
			if r.Status != c.status || r.ExitCode == nil || *r.ExitCode != c.code || r.Signal != c.signal || r.Output != c.text {
				t.Fatalf("got status=%s code=%v signal=%q output=%q", r.Status, deref(r.ExitCode), r.Signal, r.Output)
			}
			if (r.Status != engine.StatusOK && r.Status != engine.StatusStarted) != (c.status != engine.StatusOK) {
				t.Fatal("IsError mismatch")
			}
		})
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestInterleavedOutputKeepsOrder(t *testing.T) {
	e := newEngine(t)
	r := run(t, e, `for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done`)
	want := "out1\nerr1\nout2\nerr2\nout3\nerr3\nout4\nerr4\nout5\nerr5\n"
	if r.Output != want {
		t.Fatalf("got %q", r.Output)
	}
}

func TestSeparateStreams(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Output.SeparateStreams = true })
	r := run(t, e, `echo a; echo b >&2; echo c`)
	if r.Output != "a\nc\n[stderr]\nb\n" {
		t.Fatalf("got %q", r.Output)
	}
}

func TestWorkingDirectory(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "pwd"})
	if strings.TrimSpace(r.Output) != dir {
		t.Fatalf("pwd = %q, want %q", r.Output, dir)
	}
	missing := filepath.Join(dir, "gone")
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: missing}, engine.Input{Command: "pwd"})
	want := "[error: working directory does not exist: " + missing + " (conversation may need to be recreated)]"
	if r.Status != engine.StatusError || r.Output != want || !errors.Is(r.Err, engine.ErrWorkDirMissing) {
		t.Fatalf("missing dir: %s %q %v", r.Status, r.Output, r.Err)
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: file}, engine.Input{Command: "pwd"})
	if r.Output != "[error: bad input: working directory is not a directory: "+file+"]" || !errors.Is(r.Err, engine.ErrBadInput) {
		t.Fatalf("file as dir: %q", r.Output)
	}
}

func TestBadInput(t *testing.T) {
	e := newEngine(t)
	for _, c := range []struct {
		in   engine.Input
		want string
	}{
		{engine.Input{Command: ""}, "command is empty"},
		{engine.Input{Command: "   "}, "command is empty"},
		{engine.Input{Command: "echo a\x00b"}, "command contains a NUL byte (at byte 6); a command cannot carry NUL bytes, use printf '\\0' to produce one"},
		{engine.Input{Command: "echo hi", Mode: "turbo"}, `unknown mode "turbo" (want default, slow or background)`},
		{engine.Input{Command: strings.Repeat("x", engine.MaxCommandBytes+1)},
			"command is 128.0 KiB (131072 bytes), over the limit of 131071 bytes (Linux's limit on one argument); write long scripts to a file in smaller pieces and run the file"},
		{engine.Input{Command: "echo \xff"}, "command is not valid UTF-8 (at byte 5)"},
	} {
		r := e.Run(context.Background(), tc(t), c.in)
		if r.Status != engine.StatusError || !errors.Is(r.Err, engine.ErrBadInput) || r.Output != "[error: bad input: "+c.want+"]" {
			t.Errorf("%.40q: %s %q, want %q", c.in.Command, r.Status, r.Output, c.want)
		}
		if err := engine.ValidateInput(c.in); !errors.Is(err, engine.ErrBadInput) || err.Error() != "bad input: "+c.want {
			t.Errorf("ValidateInput(%.40q) = %v", c.in.Command, err)
		}
	}
	if err := engine.ValidateInput(engine.Input{Command: "true", Mode: engine.ModeSlow}); err != nil {
		t.Errorf("ValidateInput of good input: %v", err)
	}
}

// MaxCommandBytes is exactly what Linux accepts: the longest command runs,
// one byte more is refused as bad input, and one byte more could not have
// been passed to bash at all.
func TestMaxCommandBytesIsTheArgumentLimit(t *testing.T) {
	e := newEngine(t)
	longest := ": " + strings.Repeat("x", engine.MaxCommandBytes-4) + ";:"
	if r := run(t, e, longest); r.Status != engine.StatusOK {
		t.Fatalf("%d-byte command: %s %.200q", len(longest), r.Status, r.Output)
	}
	if err := exec.Command("bash", "-c", longest+" ").Run(); !errors.Is(err, syscall.E2BIG) {
		t.Fatalf("a %d-byte argument: %v, want E2BIG (argument list too long)", len(longest)+1, err)
	}
	if r := run(t, e, longest+" "); !errors.Is(r.Err, engine.ErrBadInput) {
		t.Fatalf("%d-byte command: %s %.200q, want bad input", len(longest)+1, r.Status, r.Output)
	}
}

// Foreground calls do not use up job numbers: the first background job of
// an engine is job-1 whatever ran before it.
func TestJobIDsCountJobs(t *testing.T) {
	e := newEngine(t)
	for range 3 {
		if r := run(t, e, "true"); r.Status != engine.StatusOK {
			t.Fatalf("%s %q", r.Status, r.Output)
		}
	}
	for _, want := range []string{"job-1", "job-2"} {
		r := e.Run(context.Background(), tc(t), engine.Input{Command: "true", Mode: engine.ModeBackground})
		if r.Status != engine.StatusStarted || r.JobID != want {
			t.Fatalf("background job: %s %q, want job id %s", r.Status, r.JobID, want)
		}
	}
}

func TestNoTTYAndStdinEOF(t *testing.T) {
	e := newEngine(t)
	r := run(t, e, `tty; cat; echo "read rc=$(read x; echo $?)"; exec 3<>/dev/tty && echo opened-tty || echo no-tty; ps -o tty= -p $$`)
	for _, want := range []string{"not a tty\n", "read rc=1\n", "no-tty\n", "?\n"} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("missing %q in %q", want, r.Output)
		}
	}
	if strings.Contains(r.Output, "opened-tty") {
		t.Error("command could open /dev/tty")
	}
}

func TestForcedEnvironment(t *testing.T) {
	e := newEngine(t)
	r := run(t, e, `echo "$EDITOR|$VISUAL|$PAGER|$GIT_PAGER|$GIT_TERMINAL_PROMPT"`)
	if r.Output != "/bin/false|/bin/false|cat|cat|0\n" {
		t.Fatalf("got %q", r.Output)
	}
}

func TestSecretsFiltered(t *testing.T) {
	secrets := []string{
		"ANTHROPIC_API_KEY", "OPENAI_ORG", "GEMINI_X", "AWS_SECRET_ACCESS_KEY", "PHOENIX_DB",
		"DISCORD_TOKEN", "GITHUB_TOKEN", "MY_SERVICE_PASSWORD", "DB_PASSWD", "X_KEY", "SSH_KEYS",
		"STRIPE_APIKEY", "APP_SECRET", "APP_SECRETS", "NPM_TOKENS", "GCP_CREDENTIAL",
		"GCP_CREDENTIALS", "TLS_PRIVATE", "BASIC_AUTH", "github_token", "Some_Secret_thing",
	}
	environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=/home/agent", "PWD=/x", "LANG=C.UTF-8", "KEYBOARD=us", "MONKEY=1", "SSH_AUTH_SOCK=/sock"}
	for _, s := range secrets {
		environ = append(environ, s+"=leaked-"+s)
	}
	e := newEngine(t, func(c *engine.Config) { c.Env.Environ = environ; c.Env.Keep = []string{"SSH_AUTH_SOCK"} })
	r := run(t, e, "env")
	if strings.Contains(r.Output, "leaked") {
		t.Fatalf("secret leaked:\n%s", r.Output)
	}
	for _, keep := range []string{"PATH=", "HOME=/home/agent", "LANG=C.UTF-8", "KEYBOARD=us", "MONKEY=1", "SSH_AUTH_SOCK=/sock"} {
		if !strings.Contains(r.Output, keep) {
			t.Errorf("%s missing from\n%s", keep, r.Output)
		}
	}
	// Overrides apply, but cannot re-add a removed secret.
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: t.TempDir(), Env: map[string]string{
		"GITHUB_TOKEN": "readded", "FOO": "bar", "PATH": "/usr/bin:/bin",
	}}, engine.Input{Command: `echo "$GITHUB_TOKEN|$FOO|$PATH"`})
	if r.Output != "|bar|/usr/bin:/bin\n" {
		t.Fatalf("overrides: %q", r.Output)
	}
}

func TestAllowlistPolicy(t *testing.T) {
	dir := t.TempDir()
	environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=/root", "USER=u", "FOO=1", "EXTRA=2", "GITHUB_TOKEN=x"}
	e := newEngine(t, func(c *engine.Config) {
		c.Env.Environ, c.Env.Policy, c.Env.Allow, c.Env.HomeIsWorkDir = environ, config.Allowlist, []string{"EXTRA"}, true
	})
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: `env | sort | cut -d= -f1 | tr '\n' ' '; echo; echo $HOME`})
	want := "EDITOR EXTRA GIT_PAGER GIT_TERMINAL_PROMPT HOME PAGER PATH PWD SHLVL USER VISUAL _ \n" + dir + "\n"
	if r.Output != want {
		t.Fatalf("got %q\nwant %q", r.Output, want)
	}
}

func TestInteractiveRebaseGuard(t *testing.T) {
	e := newEngine(t)
	// Only commands that contain an interactive rebase get the guard.
	if r := run(t, e, `echo "[${GIT_SEQUENCE_EDITOR:-unset}]"`); r.Output != "[unset]\n" {
		t.Fatalf("guard set for a command without rebase: %q", r.Output)
	}
	r := e.Run(context.Background(), tc(t), engine.Input{Command: `echo "[${GIT_SEQUENCE_EDITOR:-unset}]" # git rebase -i`, Mode: engine.ModeBackground})
	if j := waitJob(t, e, r.JobID, "test"); j.Status != engine.JobCompleted {
		t.Fatal(j)
	}
	if b, _ := os.ReadFile(r.OutputFile); !strings.HasPrefix(string(b), "[unset]") {
		t.Fatalf("guard set in background mode: %q", b)
	}
	dir := t.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "one")
	git("commit", "-q", "--allow-empty", "-m", "two")
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: dir, Env: map[string]string{
		"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
	}}, engine.Input{Command: "git rebase -i HEAD~1"})
	if r.Status != engine.StatusFailed || !strings.Contains(r.Output, "interactive rebase requires mode=background") {
		t.Fatalf("rebase -i: %s %q", r.Status, r.Output)
	}
}

func TestTimeoutKeepsPartialOutput(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Timeout = 500 * time.Millisecond })
	start := time.Now()
	r := run(t, e, "echo partial; sleep 30")
	if r.Status != engine.StatusTimedOut || r.Output != "[command timed out after 500ms]\npartial\n" {
		t.Fatalf("got %s %q", r.Status, r.Output)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	if r.Signal != "SIGTERM" || deref(r.ExitCode) != 143 {
		t.Fatalf("signal %q code %v", r.Signal, deref(r.ExitCode))
	}
}

func TestSlowModeUsesSlowTimeout(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Timeout = 200 * time.Millisecond; c.SlowTimeout = 3 * time.Second })
	r := e.Run(context.Background(), tc(t), engine.Input{Command: "sleep 0.5; echo ok", Mode: engine.ModeSlow})
	if r.Status != engine.StatusOK || r.Output != "ok\n" {
		t.Fatalf("slow: %s %q", r.Status, r.Output)
	}
	r = run(t, e, "sleep 0.5; echo ok")
	if r.Status != engine.StatusTimedOut {
		t.Fatalf("default: %s %q", r.Status, r.Output)
	}
}

func TestTermIgnoringTreeKilledAfterGrace(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Timeout = 300 * time.Millisecond; c.Lifecycle.Grace = 500 * time.Millisecond })
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	start := time.Now()
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{
		Command: `trap "" TERM; (trap "" TERM; sleep 60 & echo $! >> pids; wait) & echo $! >> pids; sleep 60 & echo $! >> pids; echo started; wait`,
	})
	took := time.Since(start)
	if r.Status != engine.StatusTimedOut || !strings.Contains(r.Output, "started") {
		t.Fatalf("got %s %q", r.Status, r.Output)
	}
	if r.Signal != "SIGKILL" {
		t.Fatalf("shell ended by %q, want SIGKILL (it ignores TERM)", r.Signal)
	}
	if took < 800*time.Millisecond || took > 5*time.Second {
		t.Fatalf("took %v, want about timeout+grace", took)
	}
	b, _ := os.ReadFile(pids)
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		waitGone(t, pid, 2*time.Second)
	}
}

func TestCancellation(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	// Cancel once the pid is written: the file exists (empty) as soon as
	// the shell opens it, before echo writes the pid.
	cancelled := make(chan struct{})
	go func() {
		defer close(cancelled)
		waitFileQuiet(filepath.Join(dir, "pid"), 10*time.Second)
		cancel()
	}()
	r := e.Run(ctx, engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "echo before; sleep 60 & echo $! > pid; wait"})
	<-cancelled
	if r.Status != engine.StatusCancelled || !strings.HasPrefix(r.Output, "[command cancelled]\nbefore\n") || !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("got %s %q %v", r.Status, r.Output, r.Err)
	}
	waitGone(t, readPid(t, filepath.Join(dir, "pid")), 2*time.Second)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestGrandchildHoldingPipe(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	start := time.Now()
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "sleep 300 & echo $! > pid; echo done"})
	if d := time.Since(start); d > 20*time.Second { // not the sleep's 300 s (a loaded VM under emulation took 3.1 s)
		t.Fatalf("took %v", d)
	}
	pid := readPid(t, filepath.Join(dir, "pid"))
	want := fmt.Sprintf("done\n[killed processes left running after the shell exited: sleep (pid %d); use mode=background for processes that should keep running]", pid)
	if r.Status != engine.StatusOK || r.Output != want {
		t.Fatalf("got %s %q", r.Status, r.Output)
	}
	waitGone(t, pid, 2*time.Second)
	// Not holding the pipe: still found and ended.
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "sleep 300 >/dev/null 2>&1 & echo $! > pid2"})
	if !strings.Contains(r.Output, "killed processes left running") {
		t.Fatalf("got %q", r.Output)
	}
	waitGone(t, readPid(t, filepath.Join(dir, "pid2")), 2*time.Second)
}

func TestKeepLeftovers(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Lifecycle.KeepLeftovers = true })
	dir := t.TempDir()
	start := time.Now()
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "sleep 300 & echo $! > pid; echo done"})
	if d := time.Since(start); d > 20*time.Second { // not the sleep's 300 s (a loaded VM under emulation took 3.1 s)
		t.Fatalf("took %v", d)
	}
	pid := readPid(t, filepath.Join(dir, "pid"))
	testenv.KillAtCleanup(t, pid)
	if !alive(pid) || !strings.Contains(r.Output, "[left running after the shell exited: sleep (pid") {
		t.Fatalf("alive=%v output %q", alive(pid), r.Output)
	}
}

func TestEscapedHolderDoesNotHang(t *testing.T) {
	// Without cgroups the setsid escapee is invisible (with them it is a
	// leftover: see TestCgroupEscapees).
	e := newEngine(t, func(c *engine.Config) { c.Cgroups.Off = true })
	dir := t.TempDir()
	start := time.Now()
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "setsid sleep 300 & echo $! > pid; sleep 0.1; echo done"})
	pid := readPid(t, filepath.Join(dir, "pid"))
	testenv.KillAtCleanup(t, pid)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	if r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "done\n") || !strings.Contains(r.Output, "held by a process outside") {
		t.Fatalf("got %s %q", r.Status, r.Output)
	}
}

func TestTruncationAndSpool(t *testing.T) {
	e := newEngine(t)
	r := run(t, e, `head -c 307200 /dev/zero | tr '\0' a`)
	if !r.Truncated || r.OutputBytes != 307200 || r.FullOutputFile == "" {
		t.Fatalf("truncated=%v bytes=%d file=%q", r.Truncated, r.OutputBytes, r.FullOutputFile)
	}
	head := "[output truncated in middle: got 300.0 KiB, showing the first 32 KiB and the last 96 KiB]\n" + strings.Repeat("a", 32<<10) + "\n\n[snip]\n\n" + strings.Repeat("a", 96<<10)
	if r.Output != head+"\n[full output: "+r.FullOutputFile+"]" {
		t.Fatalf("output %q...", r.Output[:100])
	}
	fi, err := os.Stat(r.FullOutputFile)
	if err != nil || fi.Size() != 307200 {
		t.Fatalf("spool: %v %v", fi, err)
	}
}

func TestBinaryOutputIsValidUTF8(t *testing.T) {
	e := newEngine(t)
	r := run(t, e, `printf 'ok\xff\xfe\x00bin\xc3'; head -c 200000 /dev/urandom`)
	if !utf8.ValidString(r.Output) || !strings.HasPrefix(r.Output, "[output truncated in middle") {
		t.Fatalf("invalid or untruncated: %q", r.Output[:80])
	}
	r = run(t, e, `printf 'ok\xff\xfe'`)
	if r.Output != "ok\uFFFD" {
		t.Fatalf("got %q", r.Output)
	}
}

func TestNoTrailingNewline(t *testing.T) {
	e := newEngine(t)
	if r := run(t, e, `printf abc`); r.Output != "abc" {
		t.Fatalf("got %q", r.Output)
	}
}

// TestFloodBoundedMemory pipes 2 GiB (10 GiB without -short and -race is
// the benchmark's job) through a command and checks the engine's heap did
// not grow with it.
func TestFloodBoundedMemory(t *testing.T) {
	size := int64(2 << 30)
	if testing.Short() {
		size = 256 << 20
	}
	e := newEngine(t, func(c *engine.Config) { c.Timeout = 2 * time.Minute })
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := uint64(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
	})
	r := e.Run(context.Background(), tc(t), engine.Input{Command: fmt.Sprintf("head -c %d /dev/zero", size), Mode: engine.ModeSlow})
	close(stop)
	wg.Wait()
	if r.Status != engine.StatusOK || r.OutputBytes != size || !r.Truncated {
		t.Fatalf("status %s bytes %d", r.Status, r.OutputBytes)
	}
	growth := int64(peak) - int64(before.HeapInuse)
	t.Logf("%d MiB through the engine; heap in use grew by at most %d KiB", size>>20, growth>>10)
	if growth > 16<<20 {
		t.Fatalf("heap grew by %d MiB while streaming %d MiB", growth>>20, size>>20)
	}
}

func TestConcurrentCalls(t *testing.T) {
	e := newEngine(t)
	const n = 40
	var wg sync.WaitGroup
	start := time.Now()
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			r := e.Run(context.Background(), engine.ToolContext{WorkingDir: os.TempDir(), ConversationID: strconv.Itoa(i)},
				engine.Input{Command: fmt.Sprintf("sleep 0.5; echo %d", i)})
			if r.Output != fmt.Sprintf("%d\n", i) {
				errs <- r.Output
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("%d concurrent 0.5s commands took %v", n, d)
	}
}

func TestBackgroundCompletionAndFailure(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "echo hi; sleep 0.2", Mode: engine.ModeBackground})
	want := fmt.Sprintf("<pid>%d</pid>\n<output_file>%s</output_file>\n<reminder>To stop: bash_kill job_id=%s</reminder>", r.PID, r.OutputFile, r.JobID)
	if r.Status != engine.StatusStarted || r.Output != want || r.JobID == "" {
		t.Fatalf("got %s %q", r.Status, r.Output)
	}
	job := waitJob(t, e, r.JobID)
	if job.Status != engine.JobCompleted || deref(job.ExitCode) != 0 {
		t.Fatalf("job %+v", job)
	}
	if b, _ := os.ReadFile(r.OutputFile); string(b) != "hi\n\n\n[background process completed]" {
		t.Fatalf("file %q", b)
	}
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "echo bad; exit 4", Mode: engine.ModeBackground})
	job = waitJob(t, e, r.JobID)
	if job.Status != engine.JobFailed || deref(job.ExitCode) != 4 {
		t.Fatalf("job %+v", job)
	}
	if b, _ := os.ReadFile(r.OutputFile); string(b) != "bad\n\n\n[background process failed: exit code 4]" {
		t.Fatalf("file %q", b)
	}
	out, err := e.JobOutput(engine.ToolContext{}, r.JobID, 0, 0, 3)
	if err != nil || out.Data != "bad" || out.EOF {
		t.Fatalf("JobOutput %+v %v", out, err)
	}
	out, err = e.JobOutput(engine.ToolContext{}, r.JobID, 10, 0, 0)
	if err != nil || !strings.HasSuffix(out.Data, "code 4]") || !out.EOF || len(out.Data) != 10 {
		t.Fatalf("JobOutput tail %+v %v", out, err)
	}
}

func waitJob(t *testing.T, e *engine.Engine, id string, conversation ...string) engine.JobInfo {
	t.Helper()
	var tc engine.ToolContext
	if len(conversation) > 0 {
		tc.ConversationID = conversation[0]
	}
	var j engine.JobInfo
	testenv.Eventually(t, 10*time.Second, func() bool {
		var err error
		if j, err = e.Job(tc, id); err != nil {
			t.Fatal(err)
		}
		return j.Status != engine.JobRunning
	}, "job %s still running", id)
	return j
}

func TestBackgroundKillAndLifetime(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.BackgroundLifetime = 700 * time.Millisecond })
	dir := t.TempDir()
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "trap '' TERM; sleep 60", Mode: engine.ModeBackground})
	job, err := e.Kill(context.Background(), engine.ToolContext{}, r.JobID)
	if err != nil || job.Status != engine.JobKilled || job.Reason != "killed by request" {
		t.Fatalf("kill: %+v %v", job, err)
	}
	waitGone(t, r.PID, time.Second)
	if b, _ := os.ReadFile(r.OutputFile); !strings.HasSuffix(string(b), "[background process killed: killed by request]") {
		t.Fatalf("file %q", b)
	}
	if _, err := e.Kill(context.Background(), engine.ToolContext{}, "job-nope"); !errors.Is(err, engine.ErrNoSuchJob) {
		t.Fatalf("kill unknown: %v", err)
	}
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "sleep 60", Mode: engine.ModeBackground})
	job = waitJob(t, e, r.JobID)
	if job.Status != engine.JobKilled || job.Reason != "lifetime limit exceeded" {
		t.Fatalf("lifetime: %+v", job)
	}
	// A job killed from outside, as the reminder suggests.
	r = e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "sleep 60", Mode: engine.ModeBackground})
	syscall.Kill(-r.PID, syscall.SIGKILL)
	job = waitJob(t, e, r.JobID)
	if job.Status != engine.JobKilled || job.Reason != "SIGKILL" {
		t.Fatalf("external kill: %+v", job)
	}
}

func TestBackgroundJobLivesWithItsGroup(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	// The child lives until the test writes to the fifo, so the group runs
	// for as long as the test needs, however slow the machine.
	release := filepath.Join(dir, "release")
	if err := syscall.Mkfifo(release, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "(read -r x < release) & echo $! > pid; echo started", Mode: engine.ModeBackground})
	waitGone(t, r.PID, 5*time.Second) // the shell has exited; its child runs
	stillRunning(t, e, r.JobID, "job ended while its group still runs")
	writeFifo(t, release, 5*time.Second)
	j := waitJob(t, e, r.JobID)
	if j.Status != engine.JobCompleted {
		t.Fatalf("%+v", j)
	}
	if jobs := e.Jobs(engine.ToolContext{}); len(jobs) != 1 || jobs[0].JobID != r.JobID {
		t.Fatalf("Jobs() = %+v", jobs)
	}
}

// stillRunning checks that a job whose processes the test keeps alive
// stays running for a moment after its shell exited. The moment is an
// observation window, not synchronisation: a wrong engine ends the job
// when it sees the shell exit, a right one never does.
func stillRunning(t *testing.T, e *engine.Engine, id, msg string) {
	t.Helper()
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if j, _ := e.Job(engine.ToolContext{}, id); j.Status != engine.JobRunning {
			t.Fatalf("%s: %+v", msg, j)
		}
	}
}

// writeFifo writes a line to a fifo once a reader has opened it.
func writeFifo(t *testing.T, path string, within time.Duration) {
	t.Helper()
	testenv.Eventually(t, within, func() bool {
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if errors.Is(err, syscall.ENXIO) { // no reader yet
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteString("go\n")
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return true
	}, "no reader opened %s", path)
}

func TestShutdownWithJobsRunning(t *testing.T) {
	cfg := testConfig()
	cfg.Lifecycle.Grace = 300 * time.Millisecond
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var pids []int
	var outputs []string
	for _, c := range []string{"sleep 60", "trap '' TERM; sleep 60", "sleep 60 & echo $! > second.pid; sleep 60"} {
		r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: c, Mode: engine.ModeBackground})
		pids, outputs = append(pids, r.PID), append(outputs, r.OutputFile)
	}
	waitFile(t, filepath.Join(dir, "second.pid"), 10*time.Second)
	fg := make(chan engine.Result, 1)
	go func() {
		fg <- e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "echo $$ > fg.pid; echo fg; sleep 60"})
	}()
	// Shut down once the foreground command runs: before it started, Run
	// would report the shutdown as an error instead of a cancellation.
	waitFile(t, filepath.Join(dir, "fg.pid"), 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-fg
	if r.Status != engine.StatusCancelled || !errors.Is(r.Err, engine.ErrShutdown) {
		t.Fatalf("foreground at shutdown: %s %q", r.Status, r.Output)
	}
	pids = append(pids, readPid(t, filepath.Join(dir, "second.pid")))
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d survived shutdown", pid)
		}
	}
	if jobs := e.Jobs(engine.ToolContext{}); len(jobs) != 3 {
		t.Fatalf("jobs after shutdown: %+v", jobs)
	}
	for _, j := range e.Jobs(engine.ToolContext{}) {
		if j.Status != engine.JobKilled || j.Reason != "engine shutdown" {
			t.Errorf("job after shutdown: %+v", j)
		}
	}
	if _, err := os.Stat(filepath.Dir(outputs[0])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output dir left behind: %v", err)
	}
	if r := e.Run(context.Background(), tc(t), engine.Input{Command: "true"}); !errors.Is(r.Err, engine.ErrShutdown) {
		t.Fatalf("run after shutdown: %s %v", r.Status, r.Err)
	}
}

func TestProgress(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.ProgressInterval = 50 * time.Millisecond })
	var mu sync.Mutex
	var seen []engine.Progress
	ctx := tc(t)
	ctx.Progress = func(p engine.Progress) { mu.Lock(); seen = append(seen, p); mu.Unlock() }
	r := e.Run(context.Background(), ctx, engine.Input{Command: "echo first; sleep 0.3; printf 'second line'; sleep 0.3"})
	if r.Status != engine.StatusOK {
		t.Fatal(r.Output)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 5 || seen[len(seen)-1].LastLine != "second line" || seen[len(seen)-1].Bytes != 17 {
		t.Fatalf("progress %+v", seen)
	}
}

func TestDescriptionAndSchema(t *testing.T) {
	e := newEngine(t)
	d := e.Description(engine.ToolContext{WorkingDir: "/work/x"})
	for _, want := range []string{"bash -c", "don't persist", "mode=slow", "background", "<pwd>/work/x</pwd>"} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q", want)
		}
	}
	if !strings.HasSuffix(d, "<pwd>/work/x</pwd>") {
		t.Error("description must end with <pwd>")
	}
	s := string(engine.InputSchema())
	for _, want := range []string{`"required": ["command"]`, `"enum": ["default", "slow", "background"]`} {
		if !strings.Contains(s, want) {
			t.Errorf("schema lacks %s", want)
		}
	}
}

func TestSpoolFilesAreBounded(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Output.SpoolKeep = 2 })
	var files []string
	for range 3 {
		r := run(t, e, "head -c 200000 /dev/zero")
		if r.FullOutputFile == "" {
			t.Fatal("no spool file")
		}
		files = append(files, r.FullOutputFile)
	}
	if fileExists(files[0]) || !fileExists(files[1]) || !fileExists(files[2]) {
		t.Fatalf("kept: %v %v %v", fileExists(files[0]), fileExists(files[1]), fileExists(files[2]))
	}
}

func TestPreCancelledContextRunsNothing(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		r := e.Run(ctx, engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "touch ran"})
		if r.Status != engine.StatusCancelled || !errors.Is(r.Err, context.Canceled) || r.Output != "[command cancelled]\n" {
			t.Fatalf("%s %q", r.Status, r.Output)
		}
	}
	if fileExists(filepath.Join(dir, "ran")) {
		t.Fatal("a command ran although its context was already cancelled")
	}
}

// TestJobsLeftRunningStayIntact: with LeaveJobsRunning a job and the
// processes it forks keep running after Shutdown, untouched (its cgroup is
// released, never killed).
func TestJobsLeftRunningStayIntact(t *testing.T) {
	cfg := testConfig()
	cfg.LeaveJobsRunning, cfg.KeepFiles = true, true
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{
		Command: "for i in 1 2 3 4 5 6; do sleep 0.1; done; echo done", Mode: engine.ModeBackground,
	})
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(r.OutputFile)) })
	testenv.KillGroupAtCleanup(t, r.PID) // it runs
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitGone(t, r.PID, 5*time.Second)
	// The file says where the engine stopped reading; what the job
	// printed later is appended (the file's cap is far away), by the
	// drain the job's output was handed to, which may write it a moment
	// after the job's shell exited.
	var b []byte
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, _ = os.ReadFile(r.OutputFile)
		return strings.HasSuffix(string(b), "done\n")
	}, "the job's later output never reached its file: %q", &b)
	if !strings.HasPrefix(string(b), "\n\n[the engine stopped here: later output is appended as it comes, up to ") || !strings.HasSuffix(string(b), "]\ndone\n") {
		t.Fatalf("job output %q: the job was disturbed", b)
	}
}

func TestKeptLeftoverHoldingPipeNote(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Lifecycle.KeepLeftovers = true })
	dir := t.TempDir()
	r := e.Run(context.Background(), engine.ToolContext{WorkingDir: dir}, engine.Input{Command: "sleep 30 & echo $! > pid; echo done"})
	testenv.KillAtCleanup(t, readPid(t, filepath.Join(dir, "pid")))
	if !strings.Contains(r.Output, "[left running after the shell exited: sleep (pid") || strings.Contains(r.Output, "outside the command") {
		t.Fatalf("%q", r.Output)
	}
}
