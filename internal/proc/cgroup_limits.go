package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// Resource limits and accounting of a command's cgroup.
//
// CPU time is read from the command's cgroup v2: cpu.stat with usage_usec
// exists in every cgroup v2, no controller needed. Memory and pids need
// their controllers, each of which lives where the host offers it: on the
// command's cgroup v2 itself when the controller can be enabled for the
// engine's cgroups (a cgroup v2 host that delegates it), otherwise in a
// cgroup of the controller's cgroup v1 hierarchy (a hybrid host), where
// the command is placed as cgroup_place.go describes.

// The controllers a Cgroups places limits with.
const (
	ctlMemory = iota
	ctlPids
	nCtl
)

var ctlNames = [nCtl]string{"memory", "pids"}

// recycleMemory is the most memory a cgroup may still have charged when it
// is handed to the next command: page cache and kernel objects that
// outlived the command that caused them, and the charges the kernel
// batches per CPU (up to 256 KiB each). A recycled cgroup's peak starts
// there. `git status` or `python3 -c 1` leave ~0.7 MiB; a cgroup that
// holds more gets a fresh memory cgroup (on a v1 hierarchy) or is not
// recycled (cgroup v2), and the old one's charges move to its parent
// (memory.force_empty would keep the cgroup, but it takes ~15 ms and
// evicts the cache).
const recycleMemory = 2 << 20

// controller says where a controller's files are for the commands of one
// Cgroups.
type controller struct {
	v2   bool   // enabled on the commands' cgroups v2
	dir  string // otherwise: the engine's directory in the v1 hierarchy
	home string // and the engine's own cgroup there
}

func (c controller) ok() bool { return c.v2 || c.dir != "" }

// Limits are what a command's cgroup enforces. A zero field means no
// limit.
type Limits struct {
	// Memory bounds the memory charged to the cgroup, in bytes: anonymous
	// memory, the page cache of files its processes read for the first
	// time or wrote, and their kernel memory. At the limit the kernel first
	// reclaims page cache, then its OOM killer kills the process of the
	// cgroup that uses the most (the others keep running). Swap counts as
	// memory: memory.swap.max is 0 on cgroup v2, and on a cgroup v1 with
	// swap accounting memory.memsw.limit_in_bytes equals the limit.
	Memory int64
	// Pids bounds the processes and threads alive at once (pids.max):
	// fork and clone fail with EAGAIN beyond it.
	Pids int
}

// Usage is what a command's processes used, from the kernel's accounting
// of its cgroup.
type Usage struct {
	// CPU is the user and system CPU time of every process and thread that
	// ran in the cgroup, exact to the microsecond (cpu.stat usage_usec,
	// the scheduler's own accounting), including processes that left the
	// process group or were never waited for.
	CPU time.Duration
	// PeakMemory is the most memory charged to the cgroup at once, in
	// bytes (memory.peak on cgroup v2, Linux 5.19+, memory.max_usage_in_bytes
	// on v1):
	// what Limits.Memory is compared with, so page cache counts, to the
	// kernel's granularity (it charges in batches of up to 256 KiB per
	// CPU). In a recycled cgroup it includes what earlier commands left
	// charged, at most 2 MiB (page cache, kernel objects; on a cgroup v2
	// before Linux 6.12, whose peak cannot be reset, the earlier commands'
	// peak: only a cgroup whose peak stayed within 2 MiB is recycled
	// there). 0 without a memory controller, or without memory.peak
	// (cgroup v2 before Linux 5.19).
	PeakMemory int64
	// Processes is the most processes and threads alive in the cgroup at
	// once (pids.peak; every thread counts, and so does the shell). The
	// kernel keeps no count of the processes a cgroup started: a script
	// that ran ten programs one after the other reads 2 (the shell and
	// one program). Where the pids limit lives in a v1 hierarchy the value
	// is never below 2 (a command that never ran more than its shell reads
	// 2): a recycled cgroup keeps the peak of up to 2 its last command
	// left (renewing the cgroup for that would cost more than it tells).
	// Above 2 it is exact where the command's child joins its cgroups
	// itself (amd64, arm64: see cgroup_place.go); elsewhere a cgroup's
	// resident forker is left out, and a thread that joins for one fork
	// (a cgroup not yet recycled, or a busy engine) counts until it leaves
	// right after the fork, so the value can be one more than the
	// command's own when the shell started another process before that
	// (a busy machine). 0
	// without a pids controller, or on a kernel without pids.peak (before
	// Linux 6.1).
	Processes int
	// OOMKills counts the cgroup's processes killed by the kernel's OOM
	// killer (oom_kill in memory.events, or memory.oom_control on v1),
	// at the cgroup's memory limit or in a system-wide shortage. 0 without
	// a memory controller.
	OOMKills int
}

// The accounting files a Cgroup keeps open once read (a pread of an open
// cgroup file costs ~1 µs, opening and reading it ~12 µs).
const (
	fileCPU      = iota // cpu.stat
	fileMemPeak         // memory.peak, memory.max_usage_in_bytes (read-write: reset)
	fileMemNow          // memory.current, memory.usage_in_bytes
	fileMemOOM          // memory.events, memory.oom_control
	filePidsPeak        // pids.peak
	nFile
)

// baseline holds the counters of a recycled cgroup that cannot be reset,
// as they were when its previous command had ended.
type baseline struct {
	cpu time.Duration
	oom int
}

// probeControllers finds where m can limit memory and pids: on the cgroup
// v2, or in a v1 hierarchy. A controller that is nowhere available is left
// out; its limit and accounting are then unavailable.
func (m *Cgroups) probeControllers() {
	var missing []string
	for i, name := range ctlNames {
		if m.enableV2(name) {
			m.ctl[i].v2 = true
			continue
		}
		if m.ctl[i].dir, m.ctl[i].home = makeV1Dir(name, filepath.Base(m.dir)); m.ctl[i].dir == "" {
			missing = append(missing, name)
		}
	}
	switch {
	case len(missing) == 0:
	case len(readPids(filepath.Join(m.home, "cgroup.procs"))) > 0 && hasFile(m.home, "cgroup.type"):
		m.note = fmt.Sprintf("no %s controller for the commands' cgroups: their parent %s holds processes, and cgroup v2 enables controllers only for the children of a cgroup that holds none; "+
			"name a delegated cgroup without processes as the parent (config.Cgroups.Parent; systemd: Delegate=yes with DelegateSubgroup=, a container: move its processes into a leaf first)",
			strings.Join(missing, " or "), m.home)
	default:
		m.note = fmt.Sprintf("the host offers no %s controller to %s (cgroup v2) or in a cgroup v1 hierarchy", strings.Join(missing, " or "), m.home)
	}
	for i, ctl := range m.ctl {
		if ctl.dir == "" {
			continue
		}
		t, err := fd.Open(filepath.Join(ctl.home, "tasks"), unix.O_WRONLY, 0)
		if err != nil {
			_ = os.Remove(ctl.dir)
			m.ctl[i] = controller{}
			continue
		}
		m.homeTasks[i] = t
	}
}

// enableV2 enables controller name for the commands' cgroups v2: in the
// parent's subtree_control for m.dir, then in m.dir's. A controller bound
// to a v1 hierarchy is not listed in cgroup.controllers.
//
// A parent that holds processes (other than the root cgroup, which has no
// cgroup.type), as the engine's own cgroup usually does, is left alone:
// cgroup v2 refuses it domain controllers (memory: EBUSY), and a threaded
// one (pids) would be enabled but turn it into a thread root, whose domain
// children, the commands' cgroups, then cannot hold a process (a clone
// into them fails with EOPNOTSUPP). Config.Cgroups.Parent can name a
// delegated cgroup without processes instead.
func (m *Cgroups) enableV2(name string) bool {
	if !hasWord(readString(filepath.Join(m.home, "cgroup.controllers")), name) {
		return false
	}
	sub := filepath.Join(m.home, "cgroup.subtree_control")
	if !hasWord(readString(sub), name) {
		if hasFile(m.home, "cgroup.type") && len(readPids(filepath.Join(m.home, "cgroup.procs"))) > 0 {
			return false
		}
		_ = os.WriteFile(sub, []byte("+"+name), 0)
	}
	return hasWord(readString(sub), name) &&
		os.WriteFile(filepath.Join(m.dir, "cgroup.subtree_control"), []byte("+"+name), 0) == nil
}

// makeV1Dir creates the engine's directory named base in the v1 hierarchy
// of controller, below the calling process's own cgroup there (home), after
// removing what dead engines left there. It returns "" when there is no
// such hierarchy or the directory cannot be made.
func makeV1Dir(controller, base string) (dir, home string) {
	mount, root, err := v1Mount(controller)
	if err != nil {
		return "", ""
	}
	own, err := ownV1Cgroup(controller)
	if err != nil {
		return "", ""
	}
	if root != "/" {
		own = strings.TrimPrefix(own, root)
	}
	home = filepath.Join(mount, own)
	removeStale(home)
	dir = filepath.Join(home, base)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", ""
	}
	return dir, home
}

// ControllersNote says why the memory or the pids controller is not
// available to m's commands, and what would make it so; "" when both are.
func (m *Cgroups) ControllersNote() string { return m.note }

// MemoryLimit reports whether the host offers m's commands a memory
// controller: [Limits.Memory] is enforced and [Usage.PeakMemory] and
// [Usage.OOMKills] are known.
func (m *Cgroups) MemoryLimit() bool { return m.ctl[ctlMemory].ok() }

// PidsLimit reports whether the host offers m's commands a pids
// controller: [Limits.Pids] is enforced and [Usage.Processes] is known
// (given pids.peak, Linux 6.1+).
func (m *Cgroups) PidsLimit() bool { return m.ctl[ctlPids].ok() }

// Controllers reports whether the host offers the command the memory and
// the pids controller (see [Cgroups.MemoryLimit], [Cgroups.PidsLimit]).
func (c *Cgroup) Controllers() (memory, pids bool) {
	return c.m.MemoryLimit(), c.m.PidsLimit()
}

// newV1Parts creates the command's cgroups in the v1 hierarchies m uses,
// named like its cgroup v2. On error it removes what it made.
func (c *Cgroup) newV1Parts() error {
	for i := range nCtl {
		if err := c.makeV1(i); err != nil {
			c.removeV1()
			return err
		}
	}
	return nil
}

// makeV1 creates the command's cgroup in the v1 hierarchy of controller i
// when m uses one there and it does not exist. c.mu is held or c is not
// shared yet.
func (c *Cgroup) makeV1(i int) error {
	ctl := c.m.ctl[i]
	if ctl.dir == "" || c.v1[i] != "" {
		return nil
	}
	dir := filepath.Join(ctl.dir, filepath.Base(c.dir))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s cgroup: %w", ctlNames[i], err)
	}
	c.v1[i] = dir
	t, err := fd.Open(filepath.Join(dir, "tasks"), unix.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s cgroup: %w", ctlNames[i], err)
	}
	c.tasks[i] = t
	return nil
}

// ctlDir is the directory holding controller i's files for the command:
// its cgroup v2 or its cgroup in the v1 hierarchy ("" when there is none).
func (c *Cgroup) ctlDir(i int) string {
	if c.m.ctl[i].v2 {
		return c.dir
	}
	return c.v1[i]
}

// PidsDir is the command's cgroup in the cgroup v1 pids hierarchy on a
// hybrid host (where pids.max, pids.current and pids.peak are), "" when
// the pids controller is on the cgroup v2 itself or there is none.
func (c *Cgroup) PidsDir() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v1[ctlPids]
}

// V1Dirs lists the command's cgroups in cgroup v1 hierarchies (memory,
// pids; empty where the host uses cgroup v2 for them or has none): a
// process started into the cgroup v2 must also join these, by writing 0
// to each one's "tasks" from the thread that then execs (the sandbox
// helper) or as [Cgroup.JoinThread] and [Cgroup.MoveIn] do. Their
// cgroup.procs lists the engine's own pid while the cgroup's forker lives
// there (cgroup_place.go): the command's processes are the members of
// its cgroup v2 ([Cgroup.Pids]), never signal those of a v1 cgroup.
func (c *Cgroup) V1Dirs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var dirs []string
	for _, d := range c.v1 {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Limits returns the limits last set with SetLimits (none for a new
// cgroup).
func (c *Cgroup) Limits() Limits {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limits
}

// SetLimits sets the cgroup's limits, replacing any earlier ones (a
// recycled cgroup may carry its previous command's). Call it before the
// command starts. It fails for a limit the host offers no controller for
// ([Cgroups.MemoryLimit], [Cgroups.PidsLimit]).
func (c *Cgroup) SetLimits(l Limits) error {
	l.Memory, l.Pids = max(l.Memory, 0), max(l.Pids, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.Memory != c.limits.Memory {
		if err := c.setMemory(c.limits.Memory, l.Memory); err != nil {
			return err
		}
		c.limits.Memory = l.Memory
	}
	if l.Pids != c.limits.Pids {
		if err := c.writePidsMax(l.Pids); err != nil {
			return err
		}
		c.limits.Pids = l.Pids
	}
	return nil
}

// writePidsMax writes pids.max for a limit of n processes (0: none) of the
// command, plus its resident forker; c.mu is held.
func (c *Cgroup) writePidsMax(n int) error {
	dir := c.ctlDir(ctlPids)
	if dir == "" {
		return errors.New("pids limit: no pids controller available for the engine's cgroups")
	}
	v := "max"
	if n > 0 {
		v = strconv.Itoa(n + c.residentPids())
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(v), 0); err != nil {
		return fmt.Errorf("pids.max: %w", err)
	}
	return nil
}

// setMemory changes the memory limit from old to n (0: none). On a v1
// hierarchy memory.memsw.limit_in_bytes (memory and swap) must never be
// below memory.limit_in_bytes, so a raised limit writes it first.
func (c *Cgroup) setMemory(old, n int64) error {
	dir := c.ctlDir(ctlMemory)
	if dir == "" {
		return errors.New("memory limit: no memory controller available for the engine's cgroups")
	}
	type setting struct{ file, value string }
	var order []setting
	if c.m.ctl[ctlMemory].v2 {
		v, swap := "max", "max"
		if n > 0 {
			v, swap = strconv.FormatInt(n, 10), "0"
		}
		order = []setting{{"memory.max", v}, {"memory.swap.max", swap}}
	} else {
		v := "-1"
		if n > 0 {
			v = strconv.FormatInt(n, 10)
		}
		order = []setting{{"memory.limit_in_bytes", v}, {"memory.memsw.limit_in_bytes", v}}
		if n == 0 || (old != 0 && n > old) {
			order[0], order[1] = order[1], order[0]
		}
	}
	for _, s := range order {
		err := os.WriteFile(filepath.Join(dir, s.file), []byte(s.value), 0)
		if err != nil && !(strings.Contains(s.file, "swap") && errors.Is(err, os.ErrNotExist)) {
			return fmt.Errorf("%s: %w", s.file, err) // no swap accounting: no swap file
		}
	}
	return nil
}

// Usage returns what the command's processes have used since it started in
// the cgroup, also while they run. After the cgroup is empty it is final.
// The error says which accounting file could not be read; the fields that
// could are set.
func (c *Cgroup) Usage() (Usage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var u Usage
	var errs []error
	cpu, err := c.readCPU()
	if err != nil {
		errs = append(errs, err)
	} else {
		u.CPU = max(cpu-c.base.cpu, 0)
	}
	if c.ctlDir(ctlMemory) != "" {
		if peak, err := c.readInt(fileMemPeak); err == nil {
			u.PeakMemory = peak
		} else if !errors.Is(err, os.ErrNotExist) { // memory.peak: Linux 5.19+
			errs = append(errs, err)
		}
		if oom, err := c.readOOMKills(); err != nil {
			errs = append(errs, err)
		} else {
			u.OOMKills = max(oom-c.base.oom, 0)
		}
	}
	if c.ctlDir(ctlPids) != "" {
		if n, err := c.readInt(filePidsPeak); err == nil {
			u.Processes = int(n)
			if !c.m.ctl[ctlPids].v2 { // the floor of 2, a forker left out
				u.Processes = max(u.Processes-c.residentPids(), 2)
			}
		} else if !errors.Is(err, os.ErrNotExist) { // pids.peak: Linux 6.1+
			errs = append(errs, err)
		}
	}
	return u, errors.Join(errs...)
}

// CPU returns the CPU time the command's processes have used so far (see
// [Usage.CPU]); it reads one file, for a caller that enforces a CPU time
// limit by polling.
func (c *Cgroup) CPU() (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cpu, err := c.readCPU()
	return max(cpu-c.base.cpu, 0), err
}

// reset prepares the empty cgroup for the next command; c.mu is held. The
// counters that cannot be reset (CPU time, OOM kills) become the baseline
// Usage subtracts; the memory peak is reset to what is still charged. Two
// things cannot be undone in place: a pids.peak above what every command
// reads anyway (1 on cgroup v2; 2 on a v1 hierarchy, see
// [Usage.Processes]), and more than recycleMemory of page cache left
// charged. On a v1 hierarchy that part is renewed (removed and made
// again, which renew does off the caller: it reports which); on the cgroup
// v2 itself the cgroup cannot be recycled (ok false).
func (c *Cgroup) reset() (renew []int, ok bool) {
	cpu, err := c.readCPU()
	if err != nil {
		return nil, false
	}
	c.base.cpu = cpu
	if c.ctlDir(ctlMemory) != "" {
		oom, err1 := c.readOOMKills()
		now, err2 := c.readInt(fileMemNow)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		c.base.oom = oom
		if now > recycleMemory || c.resetMemPeak() != nil {
			if c.m.ctl[ctlMemory].v2 {
				return nil, false
			}
			renew = append(renew, ctlMemory)
		}
	}
	if c.ctlDir(ctlPids) != "" {
		peak, err := c.readInt(filePidsPeak)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, false
		}
		switch {
		case c.m.ctl[ctlPids].v2 && peak > 1:
			return nil, false
		case peak-int64(c.residentPids()) > 2: // 2: Usage's floor (a shell and a program, or the engine thread that forked it)
			renew = append(renew, ctlPids)
		}
	}
	return renew, true
}

// renew replaces the command's cgroups in the v1 hierarchies of the given
// controllers by new, empty ones without limits; the old ones' charges
// move to the parent.
func (c *Cgroup) renew(ctls []int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.moveForker(ctls, true); err != nil {
		return err
	}
	for _, i := range ctls {
		c.closeV1Files(i)
		if err := os.Remove(c.v1[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("renew %s cgroup: %w", ctlNames[i], err)
		}
		c.v1[i] = ""
		switch i {
		case ctlMemory:
			c.limits.Memory, c.base.oom = 0, 0
		case ctlPids:
			c.limits.Pids = 0
		}
		if err := c.makeV1(i); err != nil {
			return err
		}
	}
	return c.moveForker(ctls, false)
}

// closeV1Files closes the files c keeps open in its v1 cgroup of
// controller i.
func (c *Cgroup) closeV1Files(i int) {
	files := []int{filePidsPeak}
	if i == ctlMemory {
		files = []int{fileMemPeak, fileMemNow, fileMemOOM}
	}
	_ = c.tasks[i].Close()
	c.tasks[i] = nil
	for _, f := range files {
		_ = c.files[f].Close()
		c.files[f] = nil
	}
}

// closeFiles closes every file c keeps open but the directory and
// cgroup.events (CloseFD).
func (c *Cgroup) closeFiles() {
	for i := range nCtl {
		c.closeV1Files(i)
	}
	for f, o := range c.files {
		_ = o.Close()
		c.files[f] = nil
	}
}

// removeV1 removes the command's cgroups in the v1 hierarchies. It reports
// whether they are all gone. c.mu must not be held.
func (c *Cgroup) removeV1() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	gone := true
	for i, dir := range c.v1 {
		if dir == "" {
			continue
		}
		c.closeV1Files(i)
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			gone = false
			continue
		}
		c.v1[i] = ""
	}
	return gone
}

// v1Mount returns the mount point and root of the cgroup v1 hierarchy of
// controller.
func v1Mount(controller string) (mount, root string, err error) {
	mounts, err := Mounts()
	if err != nil {
		return "", "", err
	}
	for _, m := range mounts {
		if m.FSType == "cgroup" && slices.Contains(m.SuperOptions, controller) {
			return m.Point, m.Root, nil
		}
	}
	return "", "", fmt.Errorf("no cgroup v1 %s hierarchy is mounted", controller)
}

// ownV1Cgroup returns the calling process's path in the v1 hierarchy of
// controller ("N:controller[,...]:PATH" in /proc/self/cgroup).
func ownV1Cgroup(controller string) (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), controller) {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("no %s entry in /proc/self/cgroup", controller)
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func hasWord(s, w string) bool { return slices.Contains(strings.Fields(s), w) }

func hasFile(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}
