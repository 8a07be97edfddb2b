package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// ErrNoCgroups is returned by [ProbeCgroups] when no usable cgroup v2
// hierarchy is available; the process group is then the only unit of
// termination.
var ErrNoCgroups = errors.New("cgroup v2 unavailable")

// Removal bounds: a cgroup that is still populated when its command ends
// (a process in uninterruptible sleep, or one still dying after
// cgroup.kill) is removed in the background, re-killing it, for up to
// removeWait.
const (
	removeWait = 5 * time.Second
	removePoll = 2 * time.Millisecond
)

// Cgroups creates one cgroup v2 per command under a directory of its own
// (Dir), which it creates below the parent given to [ProbeCgroups] (by
// default the cgroup the calling process runs in, found through
// /proc/self/mountinfo and /proc/self/cgroup). Processes started into a
// command's cgroup with [Spec.Cgroup] and all their descendants stay in
// it whatever they do with sessions and process groups, so the cgroup sees
// setsid escapees and double-forked daemons, and cgroup.kill ends them all
// at once.
//
// Commands that end cleanly hand their (empty) cgroup back for reuse (see
// [MaxIdle]); a cgroup that held processes which had to be killed is
// removed. Close removes everything. Empty directories left by an engine
// that crashed are removed by the next ProbeCgroups under the same parent.
//
// It needs a cgroup2 mount and write access to the parent (root, or a
// delegated subtree). No controller needs to be enabled: cgroup.procs,
// cgroup.events, cgroup.kill (Linux 5.14+) and cpu.stat exist in every
// cgroup v2. Memory and pids limits and accounting use those controllers
// where the host offers them, on the cgroup v2 or in v1 hierarchies (see
// [Cgroup.SetLimits], [Cgroup.Usage], [Cgroups.MemoryLimit]). A Cgroups is
// safe for concurrent use.
type Cgroups struct {
	dir     string // the engine's directory: <parent>/bashvisor-<pid>-<n>
	home    string // the parent
	release string // the cgroup released processes move to (see Release)
	rel     string // dir relative to the cgroup2 mount, for /proc/PID/cgroup checks

	pending sync.WaitGroup // background removals and renewals
	closed  atomic.Bool
	busy    atomic.Int64 // cgroups New handed out, not yet recycled or removed

	mu       sync.Mutex
	idle     []*Cgroup        // empty cgroups kept for reuse, at most MaxIdle
	released map[string]bool  // names of released cgroups: never killed
	forkers  map[*forker]bool // resident forkers (cgroup_place.go)

	// Where the memory and pids controllers are (see cgroup_limits.go),
	// and the tasks files of the engine's own cgroups in the v1
	// hierarchies, opened for LeaveThread (-1: none).
	ctl       [nCtl]controller
	homeTasks [nCtl]*fd.FD
	note      string // why a controller is missing (ControllersNote)
}

// MaxIdle bounds the empty cgroups a [Cgroups] keeps for reuse. Creating
// and removing a cgroup costs about 90 µs (mkdir and rmdir in cgroupfs),
// close to 10% of starting `bash -c true`; starting into an existing
// cgroup costs nothing extra. So a command that ended cleanly (its cgroup
// is empty and nothing in it had to be killed) hands its cgroup back with
// [Cgroup.Recycle], and the next command starts in it.
const MaxIdle = 64

var probeSeq atomic.Uint64

// ProbeCgroups finds a cgroup2 mount, creates a directory for this engine
// under parent ("" means the calling process's own cgroup), and checks,
// without starting a process, that processes can be started into its
// children and killed through cgroup.kill (see selfTest). The error wraps
// ErrNoCgroups and says why not.
func ProbeCgroups(parent string) (*Cgroups, error) {
	mount, root, err := cgroup2Mount()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	own, err := ownCgroup()
	if err != nil && parent == "" {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	// own is relative to the cgroup namespace root, which is the mount's
	// root unless the mount shows a subtree.
	if root != "/" {
		own = strings.TrimPrefix(own, root)
	}
	if parent == "" {
		parent = filepath.Join(mount, own)
	}
	parent = filepath.Clean(parent)
	rel, err := filepath.Rel(mount, parent)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("%w: %s is not inside the cgroup2 mount %s", ErrNoCgroups, parent, mount)
	}
	removeStale(parent)
	dir := filepath.Join(parent, fmt.Sprintf("bashvisor-%d-%d", os.Getpid(), probeSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	// /proc/PID/cgroup shows paths from the namespace root, which is the
	// mount's root.
	m := &Cgroups{dir: dir, home: parent, rel: filepath.Join(root, rel, filepath.Base(dir)), released: map[string]bool{}, forkers: map[*forker]bool{}}
	if err := m.selfTest(mount, own); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	m.probeControllers()
	m.release = parent
	if strings.TrimSpace(readString(filepath.Join(parent, "cgroup.subtree_control"))) != "" {
		m.release = filepath.Join(parent, releasedName)
	}
	return m, nil
}

// releasedName is the leaf cgroup below a delegated parent that released
// processes move to (see [Cgroup.Release]).
const releasedName = "bashvisor-released"

// selfTest checks, without starting a process, what starting commands
// into m's cgroups and ending them needs: m.dir is a domain cgroup (a
// process can live in its children: not part of a threaded subtree),
// cgroup.kill exists (Linux 5.14+) and can be written (m.dir is empty, so
// the write kills nothing), and this process may write the cgroup.procs
// files a start into a child of m.dir is checked against: the child's
// (made like m.dir, so m.dir's) and the one of the nearest common
// ancestor of this process's cgroup and m.dir (cgroup v2's delegation
// rule; a read-only or foreign cgroupfs fails here).
//
// An earlier version started `sleep` into a probe cgroup and killed it:
// 1.5-3 ms (a fork, an exec, a kill, a wait) of every engine's start, 6 %
// of a one-shot `bashvisor run -- true`, which checked nothing the first
// command does not; a start that fails anyway is that command's error.
func (m *Cgroups) selfTest(mount, own string) error {
	if t := strings.TrimSpace(readString(filepath.Join(m.dir, "cgroup.type"))); t != "domain" {
		return fmt.Errorf("%s is a %q cgroup, not a domain one: no process can be started below it", m.dir, t)
	}
	if err := os.WriteFile(filepath.Join(m.dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return fmt.Errorf("cgroup.kill (Linux 5.14+): %w", err)
	}
	for _, d := range []string{m.dir, commonAncestor(mount, own, m.home)} {
		if err := unix.Access(filepath.Join(d, "cgroup.procs"), unix.W_OK); err != nil {
			return fmt.Errorf("start a process into a cgroup below %s: %s/cgroup.procs: %w", m.dir, d, err)
		}
	}
	return nil
}

// commonAncestor returns the nearest common ancestor (a directory under
// mount) of the cgroups mount/own and parent.
func commonAncestor(mount, own, parent string) string {
	a := filepath.Join(mount, own)
	for a != mount && !strings.HasPrefix(parent+"/", a+"/") {
		a = filepath.Dir(a)
	}
	return a
}

// cgroup2Mount returns the mount point and mount root of the first cgroup2
// mount.
func cgroup2Mount() (mount, root string, err error) {
	mounts, err := Mounts()
	if err != nil {
		return "", "", err
	}
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			return m.Point, m.Root, nil
		}
	}
	return "", "", errors.New("no cgroup2 filesystem is mounted")
}

// ownCgroup returns the calling process's cgroup v2 path ("0::PATH" in
// /proc/self/cgroup).
func ownCgroup() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 entry in /proc/self/cgroup")
}

// Dir returns the directory under which command cgroups are created.
func (m *Cgroups) Dir() string { return m.dir }

// Dirs lists Dir and its counterparts in the cgroup v1 hierarchies m uses
// (see [Cgroup.V1Dirs]); Close removes them all.
func (m *Cgroups) Dirs() []string {
	dirs := []string{m.dir}
	for _, c := range m.ctl {
		if c.dir != "" {
			dirs = append(dirs, c.dir)
		}
	}
	return dirs
}

// New returns an empty cgroup for one command, opened for
// [Spec.Cgroup]: a recycled one when available, otherwise a new one named
// name (which must be unique among m's cgroups).
func (m *Cgroups) New(name string) (*Cgroup, error) {
	m.mu.Lock()
	if n := len(m.idle); n > 0 {
		cg := m.idle[n-1]
		m.idle = m.idle[:n-1]
		m.mu.Unlock()
		cg.handOut()
		return cg, nil
	}
	m.mu.Unlock()
	dir := filepath.Join(m.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	d, err := fd.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	cg := m.newCgroup(dir)
	cg.fd = d
	// cgroup.events stays open: a pread costs less than an open and a
	// read (nil when it cannot be opened: Populated opens it each time).
	cg.events, _ = fd.Openat(d, "cgroup.events", unix.O_RDONLY, 0)
	if err := cg.newV1Parts(); err != nil {
		cg.CloseFD()
		_ = os.Remove(dir)
		return nil, err
	}
	cg.handOut()
	return cg, nil
}

// newCgroup returns the Cgroup of directory dir, with nothing open.
func (m *Cgroups) newCgroup(dir string) *Cgroup {
	return &Cgroup{m: m, dir: dir}
}

// Close waits for background removals and removes Dir. Command cgroups
// still present (a process that could not be killed) are killed and
// removed first, within a bounded time.
func (m *Cgroups) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	m.mu.Lock()
	for _, cg := range m.idle {
		cg.CloseFD()
	}
	m.idle = nil
	m.mu.Unlock()
	m.pending.Wait()
	m.closeForkers() // before their cgroups are removed
	entries, _ := os.ReadDir(m.dir)
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			cg := m.newCgroup(filepath.Join(m.dir, e.Name()))
			m.mu.Lock()
			released := m.released[e.Name()]
			m.mu.Unlock()
			if released {
				_ = os.Remove(cg.dir) // left in place if still populated
				continue
			}
			_ = cg.Kill()
			if err := cg.removeNow(removeWait); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := os.Remove(m.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
	}
	if m.release != m.home {
		_ = os.Remove(m.release) // left in place while released processes run
	}
	for i, ctl := range m.ctl {
		if ctl.dir == "" {
			continue
		}
		// Command cgroups left there held the processes just killed (or
		// released) through the v2 cgroups.
		entries, _ := os.ReadDir(ctl.dir)
		for _, e := range entries {
			if e.IsDir() {
				_ = os.Remove(filepath.Join(ctl.dir, e.Name()))
			}
		}
		if err := os.Remove(ctl.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s cgroup: %w", ctlNames[i], err))
		}
	}
	for _, t := range m.homeTasks {
		_ = t.Close()
	}
	return errors.Join(errs...)
}

// Cgroup is one command's cgroup v2, and on a hybrid host its cgroups in
// the v1 memory and pids hierarchies.
type Cgroup struct {
	m        *Cgroups
	dir      string
	mu       sync.Mutex
	fd       *fd.FD // the open directory (nil: none)
	events   *fd.FD // open cgroup.events (nil: none)
	released bool   // its processes were moved out to keep running: never kill
	out      bool   // handed out by New: counted in m.busy

	v1     [nCtl]string  // its cgroups in v1 hierarchies ("": none)
	tasks  [nCtl]*fd.FD  // open "tasks" of its v1 cgroups for JoinThread (nil: none)
	fk     *forker       // the thread resident in them, or nil (cgroup_place.go)
	limits Limits        // as last written
	files  [nFile]*fd.FD // open accounting files (nil: not yet)
	base   baseline      // counters when its previous command ended
}

// Dir returns the cgroup's directory.
func (c *Cgroup) Dir() string { return c.dir }

// handOut counts c in m.busy (New).
func (c *Cgroup) handOut() {
	c.mu.Lock()
	c.out = true
	c.mu.Unlock()
	c.m.busy.Add(1)
}

// takeBack stops counting c in m.busy, once (its command ended).
func (c *Cgroup) takeBack() {
	c.mu.Lock()
	out := c.out
	c.out = false
	c.mu.Unlock()
	if out {
		c.m.busy.Add(-1)
	}
}

// FD returns the open cgroup directory (SysProcAttr.CgroupFD), or -1 after
// CloseFD.
func (c *Cgroup) FD() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fd.Int()
}

// CloseFD closes the cgroup's descriptors (the directory is needed only
// to start the process; Populated falls back to opening cgroup.events,
// Usage reopens the accounting files; [Cgroup.Remove] closes them too).
func (c *Cgroup) CloseFD() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeFiles()
	_ = c.fd.Close()
	_ = c.events.Close()
}

// Pids lists the processes in the cgroup: those with a thread in it (a
// process whose leader thread exited while others run is listed; one
// that exited is not: it leaves its cgroup when it exits).
func (c *Cgroup) Pids() []int { return readPids(filepath.Join(c.dir, "cgroup.procs")) }

// readPids parses a cgroup.procs file.
func readPids(path string) []int {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var pids []int
	for f := range bytes.FieldsSeq(data) {
		if pid, err := strconv.Atoi(string(f)); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Members lists the live processes in the cgroup with their names.
func (c *Cgroup) Members() []Member {
	var out []Member
	for _, pid := range c.Pids() {
		st, err := ReadStat(pid)
		if err != nil || !alive(pid, st) {
			continue
		}
		out = append(out, Member{Pid: pid, Comm: st.Comm})
	}
	return out
}

// Populated reports whether a live process is in the cgroup (from
// cgroup.events).
func (c *Cgroup) Populated() bool {
	c.mu.Lock()
	if c.events.Valid() {
		var buf [64]byte
		n, err := unix.Pread(c.events.Int(), buf[:], 0)
		c.mu.Unlock()
		return err == nil && bytes.Contains(buf[:max(n, 0)], []byte("populated 1"))
	}
	c.mu.Unlock()
	data, err := os.ReadFile(filepath.Join(c.dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return bytes.Contains(data, []byte("populated 1"))
}

// Kill SIGKILLs every process in the cgroup at once through cgroup.kill,
// and then each process whose leader thread exited while its other
// threads run, one by one: cgroup.kill passes those over (Linux 6.18).
// A cgroup that no longer exists is not an error.
func (c *Cgroup) Kill() error {
	err := os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cgroup.kill: %w", err)
	}
	c.signal(syscall.SIGKILL, func(pid int) bool {
		st, err := ReadStat(pid)
		return err == nil && (st.State == 'Z' || st.State == 'X')
	})
	return nil
}

// Signal sends sig to every process in the cgroup except those in skipPgid
// (which the caller signals as a group). Each process is signalled through a
// pidfd opened first and then checked to still belong to this cgroup, so a
// recycled pid is never signalled.
func (c *Cgroup) Signal(sig syscall.Signal, skipPgid int) {
	c.signal(sig, func(pid int) bool {
		if skipPgid > 0 {
			if pg, err := unix.Getpgid(pid); err == nil && pg == skipPgid {
				return false
			}
		}
		return true
	})
}

// signal sends sig to each process of the cgroup that which selects, as
// Signal does.
func (c *Cgroup) signal(sig syscall.Signal, which func(pid int) bool) {
	rel := []byte("0::" + c.m.rel + "/" + filepath.Base(c.dir) + "\n")
	for _, pid := range c.Pids() {
		if !which(pid) {
			continue
		}
		n, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		p := fd.New(n)
		if cg, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup"); err == nil && bytes.Contains(cg, rel) {
			_ = unix.PidfdSendSignal(p.Int(), sig, nil, 0)
		}
		_ = p.Close()
	}
}

// Release moves the cgroup's processes to the engine's parent cgroup (and
// to the engine's own cgroups in the v1 hierarchies), so they keep running
// after the cgroup is removed (leftovers kept on purpose, background jobs
// left running at shutdown). A parent that enables controllers for its
// children (a delegated subtree) cannot hold processes itself (cgroup
// v2's no-internal-process rule): there they move to its leaf
// bashvisor-released, shared by the engines under that parent, which
// [Cgroups.Close] and the next [ProbeCgroups] remove once it is empty. Processes forked while it moves the others
// are caught by further passes, for up to removeWait. A released cgroup is
// never killed: Remove and Close only retry rmdir on it, and leave it in
// place if something stays inside.
func (c *Cgroup) Release() error {
	c.detachForker() // the engine's pid would be among the v1 cgroups' processes
	c.mu.Lock()
	c.released = true
	v1 := c.v1
	c.mu.Unlock()
	c.m.mu.Lock()
	c.m.released[filepath.Base(c.dir)] = true
	c.m.mu.Unlock()
	type move struct{ from, to string }
	moves := []move{{c.dir, c.m.release}}
	for i, dir := range v1 {
		if dir != "" {
			moves = append(moves, move{dir, c.m.ctl[i].home})
		}
	}
	deadline := time.Now().Add(removeWait)
	for {
		var errs []error
		moved := 0
		if c.m.release != c.m.home { // made each pass: another engine's Close may remove it
			if err := os.Mkdir(c.m.release, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				errs = append(errs, fmt.Errorf("release: %w", err))
			}
		}
		for _, m := range moves {
			for _, pid := range readPids(filepath.Join(m.from, "cgroup.procs")) {
				moved++
				err := os.WriteFile(filepath.Join(m.to, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
				if err != nil && !errors.Is(err, unix.ESRCH) {
					errs = append(errs, fmt.Errorf("release pid %d: %w", pid, err))
				}
			}
		}
		if moved == 0 { // a pass that found none: later forks start outside
			c.removeV1()
			return nil
		}
		if len(errs) > 0 || time.Now().After(deadline) {
			return errors.Join(append(errs, fmt.Errorf("release %s: processes remain", c.dir))...)
		}
		time.Sleep(removePoll) // processes forked meanwhile: another pass
	}
}

// Recycle hands an empty cgroup back for reuse by a later command, or
// removes it (Remove) when it is not empty, its descriptor was closed, or
// enough cgroups are idle already. Call it only when nothing in the cgroup
// had to be killed or released: a cgroup that held leftovers is removed.
func (c *Cgroup) Recycle() {
	if c.Populated() {
		c.Remove()
		return
	}
	c.RecycleEmpty()
}

// RecycleEmpty is Recycle for a caller that has just seen the cgroup empty
// (an empty cgroup cannot gain members by itself): it saves reading
// cgroup.events.
//
// The next command must not inherit anything of this one: SetLimits
// replaces the limits, the counters that cannot be reset become a baseline
// [Cgroup.Usage] subtracts, and what can be neither (see reset) is renewed
// in the background before the cgroup becomes available, or the cgroup is
// removed. A cgroup recycled for the first time gets its forker
// (cgroup_place.go) before it becomes available: a thread start and
// joining its v1 cgroups, once per cgroup, on the caller unless the
// cgroup is renewed.
func (c *Cgroup) RecycleEmpty() {
	c.takeBack()
	if c.FD() < 0 || c.m.closed.Load() {
		c.Remove()
		return
	}
	c.mu.Lock()
	renew, ok := c.reset()
	c.mu.Unlock()
	switch {
	case !ok:
		c.Remove()
	case len(renew) > 0:
		c.m.pending.Add(1)
		go func() {
			defer c.m.pending.Done()
			if err := c.renew(renew); err != nil {
				c.Remove()
				return
			}
			c.settle()
		}()
	default:
		c.settle()
	}
}

// settle gives the reset cgroup a forker when it has none (once per
// cgroup: see cgroup_place.go) and keeps it, or removes it.
func (c *Cgroup) settle() {
	c.m.mu.Lock()
	room := len(c.m.idle) < MaxIdle
	c.m.mu.Unlock()
	if !room {
		c.Remove()
		return
	}
	if err := c.attachForker(); err != nil {
		c.Remove()
		return
	}
	c.keep()
}

// keep adds the reset cgroup to the idle ones, or removes it.
func (c *Cgroup) keep() {
	c.m.mu.Lock()
	if len(c.m.idle) < MaxIdle && !c.m.closed.Load() {
		c.m.idle = append(c.m.idle, c)
		c.m.mu.Unlock()
		return
	}
	c.m.mu.Unlock()
	c.Remove()
}

// Remove closes the descriptor and removes the cgroup. When it is still
// populated, its processes are killed (cgroup.kill; never for a released
// cgroup) and the removal is retried in the background for a bounded
// time; [Cgroups.Close] waits for it.
func (c *Cgroup) Remove() {
	c.takeBack()
	c.detachForker()
	c.CloseFD()
	err := os.Remove(c.dir)
	if (err == nil || errors.Is(err, os.ErrNotExist)) && c.removeV1() {
		return
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.EBUSY) {
		return
	}
	c.mu.Lock()
	released := c.released
	c.mu.Unlock()
	if released {
		return // something stayed inside: leave the directory, kill nothing
	}
	c.m.pending.Add(1)
	go func() {
		defer c.m.pending.Done()
		_ = c.Kill()
		_ = c.removeNow(removeWait)
		// Its processes were the v2 cgroup's: gone now, or leaving (a
		// killed process leaves its v1 cgroups as it exits).
		for deadline := time.Now().Add(removeWait); !c.removeV1() && time.Now().Before(deadline); {
			time.Sleep(removePoll)
		}
	}()
}

// removeNow removes the cgroup, re-killing and retrying while it is still
// populated, for up to wait.
func (c *Cgroup) removeNow(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := os.Remove(c.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", c.dir, err)
		}
		_ = c.Kill()
		time.Sleep(removePoll)
	}
}

// freezeWait bounds how long Freeze waits for the cgroup to report
// frozen.
const freezeWait = time.Second

// Freeze freezes (on) or thaws the cgroup's processes (cgroup v2's
// cgroup.freeze). Freezing waits until the kernel reports every process
// stopped (cgroup.events "frozen 1"), at most a second, and thaws again
// and fails if it does not; a process in a system call that writes a
// file finishes the call first. Frozen processes still receive SIGKILL
// (and cgroup.kill).
func (c *Cgroup) Freeze(on bool) error {
	v := []byte("0")
	if on {
		v = []byte("1")
	}
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.freeze"), v, 0); err != nil {
		return fmt.Errorf("cgroup.freeze: %w", err)
	}
	if !on {
		return nil
	}
	deadline := time.Now().Add(freezeWait)
	for wait := 50 * time.Microsecond; ; wait = min(wait*2, 10*time.Millisecond) {
		data, err := os.ReadFile(filepath.Join(c.dir, "cgroup.events"))
		if err == nil && bytes.Contains(data, []byte("frozen 1")) {
			return nil
		}
		if time.Now().After(deadline) {
			_ = os.WriteFile(filepath.Join(c.dir, "cgroup.freeze"), []byte("0"), 0)
			return fmt.Errorf("cgroup.freeze: not frozen after %s", freezeWait)
		}
		time.Sleep(wait)
	}
}
