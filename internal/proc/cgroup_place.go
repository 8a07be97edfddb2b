package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// Placement into the cgroup v1 hierarchies of a hybrid host.
//
// A clone into the cgroup v2 (CLONE_INTO_CGROUP) places a process in no v1
// hierarchy: there a child starts in the cgroups of the thread that forks
// it. So the command is in its v1 memory and pids cgroups before its
// program's first instruction: charged from its first page and limited
// from its first fork, with no window in which it runs outside them.
// How, cheapest first:
//
//   - On amd64 and arm64 (vforkJoins), the calling thread forks the
//     command as vfork does, and the child writes 0 to the tasks file of
//     each of the command's v1 cgroups before it sets up anything else
//     and execs (cgroup_vfork.go): no thread hand-off, no thread of the
//     engine ever in a command's cgroup, and no forker below.
//     Measured against the forker, call by call on one recycled cgroup
//     (BenchmarkStartPlaced, three runs, load 3.7-4.4): `true` started
//     and waited for, p50, raw os/exec (no cgroup) 605-634 µs, the
//     forker +62 to +65 µs, the in-child join -12 to +0 µs; the start
//     alone (proc.Start) 230-351 µs with the forker, 136-147 µs joined.
//     Through the engine (BenchmarkEngineSerialVfork, same runs), serial
//     `bash -c true` p50 over raw os/exec: +11.4 / +12.5 / +12.4 % with
//     the forker, +8.0 / +8.9 / +8.1 % joined.
//   - Elsewhere the command's shell is forked by a thread that is in the
//     command's v1 cgroups at that moment: the cgroup's forker or a
//     joining thread, as follows.
//   - A cgroup that has been recycled has a forker: an OS thread of the
//     engine, locked to a goroutine of its own, that lives in the cgroup's
//     v1 cgroups for as long as the cgroup is kept and forks each of its
//     commands ([Start] hands it the fork and waits for the answer: two
//     thread hand-offs, no cgroup file written). It joins when the cgroup
//     is first recycled (in [Cgroup.RecycleEmpty], or in the background
//     with a renewal; a cgroup used once never gets one), moves along when
//     a v1 part is renewed, and leaves when the cgroup is removed or
//     released. At most maxForkers are resident.
//     The hand-offs wake two OS threads, which is cheaper than moving a
//     thread in and out while CPUs are free, and dearer when the engine's
//     own commands keep them busy (each woken thread waits behind them,
//     holding the Go scheduler's P meanwhile: at 64 `bash -c true` in
//     flight on 2 CPUs the forker cost more CPU per command than the
//     joining thread). So a start uses the forker only while at most
//     GOMAXPROCS of the manager's commands are starting or running, and
//     otherwise moves a thread in and out as below.
//   - Otherwise a new locked thread joins the command's v1 cgroups for the
//     fork and returns to the engine's right after ([Cgroup.JoinThread],
//     [Cgroups.LeaveThread]): writing 0 to a "tasks" file moves the writer
//     only, without the kernel's global cgroup lock, but joining and
//     leaving cost 4 writes, ~25 µs per command alone and more in situ
//     (each creates or frees a css_set; Linux 6.18, 2 CPUs).
//   - A launcher that holds the command back until it is placed (the
//     sandbox's gate) can move it in after the fork instead
//     ([Cgroup.MoveIn]). Moving another process takes the kernel's global
//     cgroup lock, which waits for an RCU grace period (up to
//     milliseconds).
//
// A forker is a task of its command's v1 cgroups while the command runs,
// idle (a locked thread runs nothing but its goroutine, which waits for
// the next request; threads the Go runtime starts meanwhile are cloned
// from its template thread, not from the forker). What that changes:
//   - pids: it counts in pids.current and pids.peak, so pids.max is the
//     limit plus one and [Usage.Processes] leaves it out; the command gets
//     exactly its limit.
//   - memory: a process's memory is charged to the memory cgroup of its
//     main thread (which is never a forker), so none of the engine's; what
//     the kernel allocates for the fork itself (the child's kernel
//     structures) is charged to the command's cgroup, as it is with a
//     joining thread. The memory cgroup's OOM killer considers
//     thread-group leaders only, never the engine.
//   - the v1 cgroup.procs lists the engine's pid (tasks lists the thread):
//     [Cgroup.Release] sends the forker home before it moves the command's
//     processes out.
//   - the process's main thread is never a forker (the main thread's
//     memory cgroup is charged for the whole process's memory).
//
// [Start] places a [Spec.Cgroup]'s process; a [Spec.Launch] function
// places it itself (package sandbox).

// maxForkers bounds the threads a [Cgroups] keeps resident in its command
// cgroups, one per cgroup kept for reuse: as many as [MaxIdle], so every
// cgroup of the pool has one whichever the next command gets (an idle
// thread costs a few KiB and no CPU). Cgroups beyond it have a thread
// join and leave for each fork.
const maxForkers = MaxIdle

// errNoForker: maxForkers are resident, or m is closed.
var errNoForker = errors.New("no forker available")

// forker is an OS thread resident in one command cgroup's v1 cgroups,
// which forks the cgroup's commands.
type forker struct {
	m    *Cgroups
	ops  chan forkOp
	done chan error
	mu   sync.Mutex // held for one operation
	gone bool       // its goroutine has returned
}

// forkOp is one request to a forker: start cmd, or move the thread by
// writing 0 to each tasks descriptor (nil: none), and end after that if
// exit is set.
type forkOp struct {
	cmd   *exec.Cmd
	tasks [nCtl]*fd.FD
	exit  bool
}

// noTasks moves nothing.
var noTasks = [nCtl]*fd.FD{}

// newForker starts a forker that joins the cgroups of the tasks
// descriptors join. It fails with errNoForker when maxForkers are
// resident or m is closed.
func (m *Cgroups) newForker(join [nCtl]*fd.FD) (*forker, error) {
	m.mu.Lock()
	if len(m.forkers) >= maxForkers || m.closed.Load() {
		m.mu.Unlock()
		return nil, errNoForker
	}
	f := &forker{m: m, ops: make(chan forkOp), done: make(chan error)}
	f.mu.Lock() // until it has joined (closeForkers may see it before)
	defer f.mu.Unlock()
	m.forkers[f] = true
	m.mu.Unlock()
	ready := make(chan error, 1)
	go f.loop(join, ready)
	if err := <-ready; err != nil {
		f.gone = true
		m.dropForker(f)
		return nil, err
	}
	return f, nil
}

// dropForker forgets a forker whose goroutine has returned.
func (m *Cgroups) dropForker(f *forker) {
	m.mu.Lock()
	delete(m.forkers, f)
	m.mu.Unlock()
}

// loop is the forker's goroutine. It locks its thread (never the main
// thread), joins, reports on ready, and serves requests until told to
// exit. A thread that could not move as asked is ended (the goroutine
// returns still locked), which ends its cgroup memberships too.
func (f *forker) loop(join [nCtl]*fd.FD, ready chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread stays locked to this goroutine meanwhile, so the
		// nested one runs on another.
		inner := make(chan error, 1)
		go f.loop(join, inner)
		ready <- <-inner
		runtime.UnlockOSThread()
		return
	}
	if err := writeTasks(join); err != nil {
		ready <- fmt.Errorf("forker: %w", err)
		return
	}
	ready <- nil
	for op := range f.ops {
		if op.cmd != nil {
			f.done <- op.cmd.Start()
			continue
		}
		err := writeTasks(op.tasks)
		if err == nil && !op.exit {
			f.done <- nil
			continue
		}
		if err == nil {
			runtime.UnlockOSThread()
		}
		f.done <- err
		return
	}
}

// do runs op on the forker's thread and returns its error; ok is false
// when the forker is gone (nothing ran).
func (f *forker) do(op forkOp) (err error, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		return nil, false
	}
	f.ops <- op
	err = <-f.done
	if op.cmd == nil && (err != nil || op.exit) {
		f.gone = true
		f.m.dropForker(f)
	}
	return err, true
}

// exit sends the forker home (to the engine's own v1 cgroups) and ends its
// goroutine; the thread returns to the Go runtime, or ends when it could
// not go home. A gone forker is left alone.
func (f *forker) exit() {
	_, _ = f.do(forkOp{tasks: f.m.homeTasks, exit: true})
}

// closeForkers ends every forker of m (Close).
func (m *Cgroups) closeForkers() {
	m.mu.Lock()
	fs := make([]*forker, 0, len(m.forkers))
	for f := range m.forkers {
		fs = append(fs, f)
	}
	m.mu.Unlock()
	for _, f := range fs {
		f.exit()
	}
}

// writeTasks writes 0 to each descriptor: the calling thread moves into
// each of those cgroups.
func writeTasks(fds [nCtl]*fd.FD) error {
	for i, t := range fds {
		if !t.Valid() {
			continue
		}
		if _, err := unix.Write(t.Int(), []byte("0")); err != nil {
			return fmt.Errorf("move thread to %s cgroup: %w", ctlNames[i], err)
		}
	}
	return nil
}

// residentPids reports whether a forker lives in c's cgroup of the v1
// pids hierarchy (1) or not (0); c.mu is held.
func (c *Cgroup) residentPids() int {
	if c.fk != nil && c.v1[ctlPids] != "" {
		return 1
	}
	return 0
}

// attachForker gives c a forker when it has none and needs one (it has v1
// cgroups), and raises pids.max by one for it. c is not shared (it is
// being recycled). It fails only when c can no longer be trusted; no
// forker available is not an error.
func (c *Cgroup) attachForker() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fk != nil || c.tasks == noTasks || vforkStarts.Load() && !keepForkers.Load() {
		return nil
	}
	f, err := c.m.newForker(c.tasks)
	if errors.Is(err, errNoForker) {
		return nil
	}
	if err != nil {
		return err
	}
	c.fk = f
	if c.limits.Pids > 0 {
		if err := c.writePidsMax(c.limits.Pids); err != nil {
			return err
		}
	}
	return nil
}

// detachForker sends c's forker home and ends it (before c's v1 cgroups
// are removed or emptied).
func (c *Cgroup) detachForker() {
	c.mu.Lock()
	f := c.fk
	c.fk = nil
	c.mu.Unlock()
	if f != nil {
		f.exit()
	}
}

// moveForker moves c's forker out of (home) or into c's v1 cgroups of the
// controllers ctls, around their renewal; c.mu is held. On error the
// forker is gone.
func (c *Cgroup) moveForker(ctls []int, home bool) error {
	if c.fk == nil {
		return nil
	}
	fds := noTasks
	for _, i := range ctls {
		fds[i] = c.tasks[i]
		if home {
			fds[i] = c.m.homeTasks[i]
		}
	}
	err, ok := c.fk.do(forkOp{tasks: fds})
	if !ok {
		err = errNoForker
	}
	if err != nil {
		c.fk = nil
	}
	return err
}

// JoinThread moves the calling OS thread into the command's cgroups in v1
// hierarchies (nothing where there are none): a process the thread forks
// then starts there, charged from its first page. Writing 0 to "tasks"
// moves the writer only, and without the kernel's global cgroup lock. The
// caller must have locked its goroutine to the thread
// (runtime.LockOSThread) and must not be the process's main thread (in a
// v1 memory hierarchy the main thread's cgroup is charged for the whole
// process's memory); afterwards it either calls [Cgroups.LeaveThread] or
// ends the thread by returning from the goroutine still locked. While
// there, the thread counts in the command's pids.current and pids.peak.
// [Start] needs it only for a cgroup without a forker (see the top of this
// file).
func (c *Cgroup) JoinThread() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := writeTasks(c.tasks); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	return nil
}

// LeaveThread moves the calling OS thread back to the engine's own cgroups
// after [Cgroup.JoinThread].
func (m *Cgroups) LeaveThread() error {
	if err := writeTasks(m.homeTasks); err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	return nil
}

// MoveIn moves process pid, started into the cgroup v2, into the command's
// cgroups in v1 hierarchies (nothing where there are none), for a launcher
// that holds the process back until it is placed (this can take
// milliseconds: see the top of this file). Processes pid forked before
// are caught up: every member of the cgroup v2 that a v1 cgroup lacks is
// moved, until a pass finds none (the cgroup v2 holds every descendant by
// construction).
func (c *Cgroup) MoveIn(pid int) error {
	for _, dir := range c.V1Dirs() {
		procs := filepath.Join(dir, "cgroup.procs")
		for pending := []int{pid}; len(pending) > 0; {
			for _, p := range pending {
				err := os.WriteFile(procs, []byte(strconv.Itoa(p)), 0)
				if err != nil && !errors.Is(err, unix.ESRCH) { // ESRCH: it exited
					return fmt.Errorf("join cgroup %s: %w", dir, err)
				}
			}
			in := readPids(procs)
			pending = slices.DeleteFunc(c.Pids(), func(p int) bool { return slices.Contains(in, p) })
		}
	}
	return nil
}

// start starts cmd into c (see the top of this file): from c's forker
// while few commands run, or from a thread that joins c's v1 cgroups for
// the fork (it and a forker then count in pids.current together for the
// instant, as a joining thread alone did before forkers).
//
// With vforkStarts (amd64, arm64) it forks cmd from the calling thread, the
// child joining c's v1 cgroups itself (startRaw; cgroup_vfork.go), and
// returns the child's pid with cmd.Process nil (the child sets SIGINT
// and SIGQUIT to their defaults itself). Otherwise it applies
// [DefaultSignals], returns 0 and cmd.Process is set.
func (c *Cgroup) start(cmd *exec.Cmd) (int, error) {
	c.mu.Lock()
	if vforkStarts.Load() {
		defer c.mu.Unlock() // keeps c.tasks open
		return startRaw(cmd, c.tasks)
	}
	f, joins := c.fk, c.tasks != noTasks
	c.mu.Unlock()
	DefaultSignals(cmd)
	if f != nil && c.m.busy.Load() <= int64(runtime.GOMAXPROCS(0)) {
		if err, ok := f.do(forkOp{cmd: cmd}); ok {
			return 0, err
		}
	}
	if !joins {
		return 0, cmd.Start()
	}
	errc := make(chan error, 1)
	c.onJoinedThread(cmd.Start, errc)
	return 0, <-errc
}

// onJoinedThread runs start on a thread of its own that joined c's
// cgroups, moves the thread back and sends start's error on errc. A thread
// that cannot go back is ended (its goroutine returns locked), so no
// thread of the engine but a forker ever stays in a command's cgroup. The
// process's main thread is never used.
func (c *Cgroup) onJoinedThread(start func() error, errc chan<- error) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread stays locked to this goroutine meanwhile, so
			// the nested one runs on another.
			inner := make(chan error, 1)
			c.onJoinedThread(start, inner)
			errc <- <-inner
			runtime.UnlockOSThread()
			return
		}
		err := c.JoinThread()
		if err == nil {
			err = start()
		}
		// Leave before answering: a thread still in the command's v1
		// cgroups would keep them from being removed, and count in them.
		if lerr := c.m.LeaveThread(); lerr != nil {
			errc <- errors.Join(err, lerr)
			return // still locked: the runtime ends the thread
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
}
