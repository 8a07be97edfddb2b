package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// A Freezer stops, continues, lists and signals the processes of a
// command that has no cgroup: the processes in the command's mount
// namespace. It holds every process of the command only when none of
// them can leave that namespace (the caller's guarantee; in a sandbox
// that refuses unshare, setns and new namespaces it holds): a process
// may leave its process group and session, and is still found. A
// process counts while any of its threads runs, also one whose leader
// thread exited.
//
// Stopping is SIGSTOP and continuing SIGCONT, sent through pidfds, so a
// pid reused by another process between finding it and signalling it
// is never signalled. A process that was already stopped (by the
// command itself) is not continued. Unlike a cgroup's freezer this is
// visible to the command: a parent that waits with WUNTRACED (a shell
// with job control, a debugger) sees its child stop and continue, and
// SIGCONT handlers run.
//
// The command's mount namespace is the one its starter tells (Told),
// or its shell's once the shell is in a mount namespace other than this
// process's and than those named as not the command's own (NewFreezer's
// other): NewFreezer looks once (a command forked into its namespace is
// found at once), and Frozen and Members look again while the shell
// runs. While it is not known, Frozen reports false and Members finds
// nothing. Once found, the Freezer holds the namespace (a descriptor of
// it) until Close or until a Frozen finds none of its processes left:
// the kernel gives a freed namespace's number to the next namespace
// made, so a number is only trusted while it is held.
type Freezer struct {
	pid   int
	other []uint64 // mount namespaces that are not the command's

	mu     sync.Mutex
	ns     uint64 // the command's mount namespace, once found
	nsfd   *fd.FD // holds ns (nil: none)
	leader *fd.FD // a pidfd of the shell until ns is found or Close (nil: none)
	told   *fd.FD // the socket Told gave, until ns is found or Close (nil: none)
}

// NewFreezer returns a Freezer for the started command whose shell is
// pid (a child of this process, not yet waited for), and looks for its
// namespace once; other are mount
// namespaces (their inode numbers, see MountNamespace) where its
// processes may be while it starts, which are never frozen; the calling
// process's own is one too. Close it when the command ended.
func NewFreezer(pid int, other ...uint64) *Freezer {
	z := &Freezer{pid: pid, other: other}
	if n, err := unix.PidfdOpen(pid, 0); err == nil {
		z.leader = fd.New(n)
	}
	z.find() // a command forked into its namespace is in it already
	return z
}

// Told makes the Freezer learn the command's mount namespace from what
// the command's starter sends on the Unix socket sock (which the
// Freezer then owns and closes): one message carrying a descriptor of
// the namespace (SCM_RIGHTS), to be sent before the command runs
// anything of its own. The namespace is then known whenever a process
// of the command could have run, however quickly its shell ended, which
// looking at the shell cannot promise. Until the message came (or when
// the sender closed the socket without one) the shell is looked at as
// before.
func (z *Freezer) Told(sock *fd.FD) {
	z.mu.Lock()
	defer z.mu.Unlock()
	_ = z.told.Close()
	z.told = sock
}

// Close releases what the Freezer holds (nil-safe); it then finds no
// process.
func (z *Freezer) Close() {
	if z == nil {
		return
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	_ = z.leader.Close()
	z.release()
	_ = z.told.Close()
	z.other = nil
	z.pid = -1
}

// release forgets the command's namespace, and lets its number go.
func (z *Freezer) release() {
	_ = z.nsfd.Close()
	z.ns = 0
}

// MountNamespace returns the inode number of the mount namespace of pid
// (0: this process): of its live threads when its leader thread exited
// (the leader's own namespace is gone then).
func MountNamespace(pid int) (uint64, error) {
	p := "/proc/self/ns/mnt"
	if pid != 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/ns/mnt"
	}
	link, err := os.Readlink(p)
	if errors.Is(err, os.ErrNotExist) && pid != 0 {
		if tid, ok := liveThread(pid); ok {
			link, err = os.Readlink(threadNS(pid, tid))
		}
	}
	if err != nil {
		return 0, err
	}
	// "mnt:[4026531841]"
	s, ok := strings.CutPrefix(link, "mnt:[")
	s, ok2 := strings.CutSuffix(s, "]")
	if !ok || !ok2 {
		return 0, fmt.Errorf("proc: unexpected namespace link %q", link)
	}
	return strconv.ParseUint(s, 10, 64)
}

// threadNS is the path of the mount namespace of thread tid of pid.
func threadNS(pid, tid int) string {
	return "/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/ns/mnt"
}

// openNamespace opens the mount namespace of pid: of a live thread when
// its leader thread exited.
func openNamespace(pid int) (*fd.FD, error) {
	ns, err := fd.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY, 0)
	if errors.Is(err, unix.ENOENT) {
		if tid, ok := liveThread(pid); ok {
			ns, err = fd.Open(threadNS(pid, tid), unix.O_RDONLY, 0)
		}
	}
	return ns, err
}

// stopWait bounds how long Frozen waits for the processes to stop: a
// process in an uninterruptible wait (a network file system's request)
// stops only when the wait ends.
const stopWait = 5 * time.Second

// Frozen runs f with every process of the command stopped, then
// continues them, and reports true; it reports false, without running
// f, when it cannot: the command's mount namespace is not known yet
// (its processes are still starting) or no longer (none is left), or a
// process did not stop within five seconds (then every process it
// stopped is continued). Keep f short: the command stands still
// meanwhile.
func (z *Freezer) Frozen(f func()) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.ns == 0 && !z.find() {
		return false
	}
	st := &stopped{pids: map[int]stoppedProc{}}
	defer st.resume()
	deadline := time.Now().Add(stopWait)
	for {
		n, err := st.stopScan(z.ns)
		if err != nil {
			return false
		}
		if len(st.pids) == 0 {
			// No process left there: the command ended, and nothing can
			// enter its namespace any more.
			z.release()
			return false
		}
		if !st.wait(deadline) {
			return false
		}
		if n == 0 { // a whole scan found nothing new: none can fork now
			break
		}
	}
	f()
	return true
}

// Members lists the live processes of the command's mount namespace
// (nil when it is not known; nil-safe).
func (z *Freezer) Members() []Member {
	if z == nil {
		return nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.ns == 0 && !z.find() {
		return nil
	}
	var out []Member
	_ = forNamespace(z.ns, func(pid int, st Stat) bool { // an unreadable /proc: none found
		out = append(out, Member{Pid: pid, Comm: st.Comm})
		return true
	})
	return out
}

// Signal sends sig to every live process of the command's mount
// namespace (through pidfds: never to a pid reused meanwhile; nil-safe).
func (z *Freezer) Signal(sig syscall.Signal) {
	for _, m := range z.Members() {
		z.mu.Lock()
		p, ok := pidfdIn(m.Pid, z.ns)
		z.mu.Unlock()
		if ok {
			_ = unix.PidfdSendSignal(p.Int(), sig, nil, 0)
			_ = p.Close()
		}
	}
}

// forNamespace calls f for each live process in mount namespace ns
// until f returns false.
func forNamespace(ns uint64, f func(pid int, st Stat) bool) error {
	d, err := os.Open("/proc")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if got, err := MountNamespace(pid); err != nil || got != ns {
			continue
		}
		if st, err := ReadStat(pid); err == nil && alive(pid, st) && !f(pid, st) {
			return nil
		}
	}
	return nil
}

// pidfdIn opens a pidfd of pid when pid is a process of mount namespace
// ns, checked after the open: the pidfd is that process whatever the
// pid names from then on.
func pidfdIn(pid int, ns uint64) (*fd.FD, bool) {
	n, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, false // gone
	}
	p := fd.New(n)
	if got, err := MountNamespace(pid); err != nil || got != ns {
		_ = p.Close()
		return nil, false
	}
	return p, true
}

// find takes the shell's mount namespace when it is the command's own:
// only while the shell runs (its pidfd says so), so that a pid reused
// by another process is never taken for it. It holds the namespace
// open, so that its number names no other while the Freezer uses it.
// Once found, the pidfd is closed. z.mu is held.
func (z *Freezer) find() bool {
	if z.receive() {
		return true
	}
	if !z.leader.Valid() {
		return false
	}
	if exited(z.leader) {
		_ = z.leader.Close()
		return false
	}
	own, err := MountNamespace(0)
	if err != nil {
		return false
	}
	ns, err := openNamespace(z.pid)
	if err != nil {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(ns.Int(), &st) != nil || exited(z.leader) || st.Ino == own || containsNS(z.other, st.Ino) {
		_ = ns.Close()
		return false
	}
	z.ns, z.nsfd = st.Ino, ns
	_ = z.leader.Close()
	return true
}

// receive takes the namespace the socket of Told carries, if it came
// (without waiting). z.mu is held.
func (z *Freezer) receive() bool {
	if !z.told.Valid() {
		return false
	}
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(z.told.Int(), make([]byte, 1), oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if errors.Is(err, unix.EAGAIN) {
		return false // not yet: the command runs nothing of its own before it comes
	}
	_ = z.told.Close()
	if err != nil || n == 0 {
		return false // the sender ended without telling
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return false
	}
	ns, ok := onlyDescriptor(&msgs[0])
	if !ok {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(ns.Int(), &st) != nil {
		_ = ns.Close()
		return false
	}
	_ = z.nsfd.Close()
	z.ns, z.nsfd = st.Ino, ns
	_ = z.leader.Close()
	return true
}

// onlyDescriptor returns the one descriptor a control message carries;
// ok is false (every descriptor it carries closed) when it carries none
// or more than one.
func onlyDescriptor(m *unix.SocketControlMessage) (*fd.FD, bool) {
	ns, err := unix.ParseUnixRights(m)
	fds := make([]*fd.FD, len(ns))
	for i, n := range ns {
		fds[i] = fd.New(n)
	}
	if err != nil || len(fds) != 1 {
		for _, f := range fds {
			_ = f.Close()
		}
		return nil, false
	}
	return fds[0], true
}

func containsNS(s []uint64, ns uint64) bool {
	for _, v := range s {
		if v == ns {
			return true
		}
	}
	return false
}

// stopped are the processes a Frozen call stopped.
type stopped struct {
	pids map[int]stoppedProc
}

type stoppedProc struct {
	fd      *fd.FD // pidfd
	already bool   // stopped before: not ours to continue
}

// stopScan sends SIGSTOP to every process in mount namespace ns that it
// has not stopped yet, and reports how many it found.
func (s *stopped) stopScan(ns uint64) (int, error) {
	n := 0
	var serr error
	err := forNamespace(ns, func(pid int, st Stat) bool {
		if _, ok := s.pids[pid]; ok {
			return true
		}
		pfd, ok := pidfdIn(pid, ns)
		if !ok {
			return true
		}
		p := stoppedProc{fd: pfd, already: st.State == 'T' || st.State == 't' || st.State == 'Z' && isStopped(pid)}
		if !p.already {
			if err := unix.PidfdSendSignal(pfd.Int(), unix.SIGSTOP, nil, 0); err != nil {
				_ = pfd.Close()
				if !errors.Is(err, syscall.ESRCH) {
					serr = fmt.Errorf("proc: stop pid %d: %w", pid, err)
					return false
				}
				return true
			}
		}
		s.pids[pid] = p
		n++
		return true
	})
	if err == nil {
		err = serr
	}
	return n, err
}

// wait waits until every process stopped is stopped (or gone), until
// deadline.
func (s *stopped) wait(deadline time.Time) bool {
	for pid, p := range s.pids {
		for !exited(p.fd) && !isStopped(pid) {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	return true
}

// isStopped reports whether process pid is stopped or gone: its leader
// thread, or when the leader exited, every other thread (a group stop
// stops them all; the leader's state says so only while it runs).
func isStopped(pid int) bool {
	st, err := ReadStat(pid)
	switch {
	case err != nil || st.State == 'T' || st.State == 't':
		return true
	case st.State == 'D' && inVfork(pid):
		return true // held by its vfork child, which is stopped here too
	case st.State != 'Z' && st.State != 'X':
		return false
	}
	for _, tid := range threads(pid) {
		ts, err := readTaskStat(pid, tid)
		if err == nil && !strings.ContainsRune("TtZX", rune(ts.State)) {
			return false
		}
	}
	return true
}

// inVfork reports whether pid, in an uninterruptible sleep, waits for
// the child it started with vfork (posix_spawn, Go's os/exec) to exec
// or exit: its wait channel is wait_for_vfork_done, or kernel_clone
// where that is inlined (Linux 6.18), the only sleep of kernel_clone
// itself. Such a process cannot stop (its wait is killable only) until
// its child, in the same mount namespace and so stopped too, goes on,
// and it then stops (its SIGSTOP is pending) before it runs anything:
// it counts as stopped.
func inVfork(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
	return err == nil && (string(b) == "wait_for_vfork_done" || string(b) == "kernel_clone")
}

// exited reports whether the process of pidfd fd exited (its pid may
// name another process by now).
func exited(pidfd *fd.FD) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd.Int()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// resume continues the processes that were stopped here.
func (s *stopped) resume() {
	for _, p := range s.pids {
		if !p.already {
			_ = unix.PidfdSendSignal(p.fd.Int(), unix.SIGCONT, nil, 0)
		}
		_ = p.fd.Close()
	}
}
