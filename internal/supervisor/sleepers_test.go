package supervisor

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// idleSleepers is how many idle commands TestIdleSleepersAllRun starts:
// 1,000 (issue 31 item 7), fewer where the open-file limit could not hold
// them next to the test's own descriptors (about 7 per command).
func idleSleepers(t *testing.T) int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	return int(min(1000, (rl.Cur-256)/10))
}

// With the default admission limits, 1,000 concurrent `sleep` commands of
// one principal in one conversation all run at once: idle commands are
// admitted by what they use (nothing), and the count caps are backstops
// far above (config.Admission.MaxRunning). Each command's process group
// is killed at the end whatever happened.
func TestIdleSleepersAllRun(t *testing.T) {
	n := idleSleepers(t)
	if n < 300 {
		t.Fatalf("open-file limit too low for the test: %d commands", n)
	}
	lim := config.Admission{}.WithDefaults()
	if lim.MaxRunningPerConversation < n {
		t.Fatalf("default MaxRunningPerConversation %d < %d", lim.MaxRunningPerConversation, n)
	}
	s, err := New(Config{
		Env: config.Env{Environ: []string{"PATH=" + os.Getenv("PATH")}}, OutputDir: t.TempDir(),
		Lifecycle: config.Lifecycle{Grace: 200 * time.Millisecond, CleanupWait: 5 * time.Second, DrainWait: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var started []*Job
	var groups []*testenv.Group
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range groups {
			if err := g.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Errorf("kill process group %d: %v", g.Pgid, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Shutdown(ctx, false); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range n {
		wg.Go(func() {
			j, err := s.Start(context.Background(), jobs.Request{Conversation: "c", Principal: "p", Script: "exec sleep 60", Dir: dir, Timeout: 2 * time.Minute})
			if err != nil {
				errs <- err
				return
			}
			g := testenv.GroupOf(t, j.Pid) // its sleep runs
			mu.Lock()
			started, groups = append(started, j), append(groups, g)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a sleep was not admitted: %v", err)
	}
	st := s.Stats()
	t.Logf("%d sleeps running after %v: %+v (MaxRunning %d)", n, time.Since(t0).Round(time.Millisecond), st, lim.MaxRunning)
	if st.Running != n || st.Queued != 0 {
		t.Errorf("not all running at once: %+v", st)
	}
	mu.Lock()
	js := started
	mu.Unlock()
	for _, j := range js {
		s.Cancel("c", j.ID)
	}
	for _, j := range js {
		select {
		case o := <-j.Done():
			if o.Reason != jobs.ReasonCancelled {
				t.Errorf("%s ended %+v, want cancelled", j.ID, o)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s did not end", j.ID)
		}
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return s.Stats().Running == 0 }, "commands still counted as running")
}
