package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// Watchdog ends an engine's commands when the engine's process dies
// without shutting down (SIGKILL, a crash, the OOM killer): without it
// they would be re-parented to init and run on, their cgroups left behind.
//
// It is a small bash process of its own (bash is the one program every
// engine has), in a session of its own, that ignores the terminal's and
// the engine's signals and reads a pipe whose only writer is the engine.
// It reads what is there every [watchdogPeriod], sleeping in between on
// a second pipe the engine never writes, so that telling it about a
// command wakes no process on the command's path (it wakes four times a
// second instead, engine busy or idle: 37 switches and no CPU tick in
// 10 s, measured). When the engine's
// process ends, the kernel closes both pipes: the sleep ends at once, the
// watchdog reads what is left and then end of file and, unless the
// engine said goodbye first
// ([Watchdog.Close], after a clean shutdown), kills everything the engine
// ran: its cgroup directory with cgroup.kill (every command and every
// descendant, whatever they did with sessions), and without cgroups every
// process group the engine told it about ([Watchdog.Track]). Then it
// removes the engine's cgroup directories and exits.
//
// Process group ids are reused, and soon: pid_max is 32768 on many hosts
// (a busy one hands every number out again within a minute), and a
// tracked group whose shell was reaped and whose last process ended
// before the engine died may name another program's group by then. So
// the watchdog kills a tracked group only when the number provably still
// names it: its leader has the start time [Watchdog.Track] recorded (the
// shell itself, running or a zombie), or no process has the leader's pid
// (the shell was reaped; what is left in the group keeps the number
// reserved, and a process with that pid would mean the group emptied and
// the number went to another process).
//
// What it cannot do: a process that left its group without a cgroup to
// hold it (setsid, double fork) is not found, as for the engine itself;
// without cgroups, a command whose engine died in the instant between
// the command's start and [Watchdog.Track] (the next thing the engine
// does) is missed; a group id the engine untracked is never signalled,
// but one whose group emptied, whose number another process took and
// made its own group id, and which then exited leaving members, all
// before the engine died, passes the test above.
// SIGKILL of the watchdog itself (kill -9 of both processes at once, an
// OOM kill) leaves the cleanup to the next engine that starts under the
// same cgroup parent (see [ProbeCgroups]).
type Watchdog struct {
	fd    *fd.FD // the pipe's write end, non-blocking: a stopped watchdog never blocks the engine
	sleep *fd.FD // the write end of the pipe the watchdog sleeps on, never written
	cmd   *exec.Cmd
	once  sync.Once
}

// watchdogPeriod is how often the watchdog reads its pipe (the script's
// `read -t`). Up to a pipe's worth of lines (64 KiB, enlarged to
// watchdogPipe where the kernel allows) wait meanwhile: two lines of
// about 16 bytes per command without cgroups, thousands of commands.
const (
	watchdogPeriod = "0.25"
	watchdogPipe   = 1 << 20
)

// watchdogScript is the watchdog's program; fd 3 is the pipe, fd 4 the
// one it sleeps on (see watchdogPeriod; its end of file, when the engine
// dies, ends the sleep at once). Lines:
// "cg DIR" (the engine's cgroup v2 directory: kill and remove), "v1 DIR"
// (a cgroup v1 directory of the engine: remove), "+ PGID START" (a
// command's process group, without cgroups, and its leader's start time,
// field 22 of /proc/PGID/stat; 0: unknown) and "- PGID", "bye" (a clean
// shutdown: what still runs was left running on purpose). A group is
// killed when its leader has that start time, or no process has its pid
// (see Watchdog).
const watchdogScript = `trap '' INT TERM HUP QUIT PIPE USR1 USR2
cg= v1=() ; declare -A g
while :; do
  while read -t 0 -u 3; do
    IFS=' ' read -r op arg <&3 || break 2
    case $op in
      cg) cg=$arg ;;
      v1) v1+=("$arg") ;;
      +) g[${arg%% *}]=${arg#* } ;;
      -) unset "g[$arg]" ;;
      bye) exit 0 ;;
    esac
  done
  read -t ` + watchdogPeriod + ` -u 4
done
for p in "${!g[@]}"; do
  if s=$(< "/proc/$p/stat") 2>/dev/null; then
    f=(${s##*) })
    [[ ${g[$p]} == 0 || ${f[19]} == "${g[$p]}" ]] || continue
  fi
  kill -KILL -- "-$p" 2>/dev/null
done
[[ -n $cg ]] || exit 0
echo 1 > "$cg/cgroup.kill" 2>/dev/null
for i in {1..100}; do
  [[ $(< "$cg/cgroup.events") == *"populated 0"* ]] && break
  sleep 0.05
done
for d in "$cg" "${v1[@]}"; do rmdir "$d"/*/ 2>/dev/null; rmdir "$d" 2>/dev/null; done
exit 0
`

// StartWatchdog starts the watchdog of an engine that runs bash (an
// absolute path) and puts its commands in cg's cgroups (nil: no cgroups;
// then call Track for each command's process group).
func StartWatchdog(bash string, cg *Cgroups) (*Watchdog, error) {
	var p [2][2]int // the lines' pipe and the sleep's: read, write
	for i := range p {
		if err := unix.Pipe2(p[i][:], unix.O_CLOEXEC); err != nil {
			for _, q := range p[:i] {
				unix.Close(q[0])
				unix.Close(q[1])
			}
			return nil, fmt.Errorf("watchdog: %w", err)
		}
	}
	r, rs := os.NewFile(uintptr(p[0][0]), "watchdog"), os.NewFile(uintptr(p[1][0]), "watchdog-sleep")
	defer r.Close()
	defer rs.Close()
	wd := &Watchdog{fd: fd.New(p[0][1]), sleep: fd.New(p[1][1])}
	// Best effort: the kernel may refuse (pipe-max-size, a user's pipe
	// limits); 64 KiB still holds thousands of commands' lines.
	_, _ = unix.FcntlInt(uintptr(p[0][1]), unix.F_SETPIPE_SZ, watchdogPipe)
	// Non-blocking: a stopped watchdog must not stall the engine (a
	// raw descriptor, which os.File would park in the poller instead).
	_ = unix.SetNonblock(p[0][1], true)
	cmd := exec.Command(bash, "--noprofile", "--norc", "-c", watchdogScript)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{r, rs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = wd.fd.Close()
		_ = wd.sleep.Close()
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	wd.cmd = cmd
	learnNofile(cmd.Process.Pid) // the limit os/exec gives a child (nofile.go)
	wd.Watch(cg)
	return wd, nil
}

// Watch tells the watchdog the engine's cgroups (a watchdog started with
// none, before they were probed). Nil does nothing.
func (w *Watchdog) Watch(cg *Cgroups) {
	if w == nil || cg == nil {
		return
	}
	dirs := cg.Dirs()
	w.send("cg " + dirs[0])
	for _, d := range dirs[1:] {
		w.send("v1 " + d)
	}
}

// Pid is the watchdog's process id.
func (w *Watchdog) Pid() int { return w.cmd.Process.Pid }

// Track tells the watchdog a command's process group (for an engine
// without cgroups), whose leader must not be reaped yet (call it after
// Start, before Wait): it is killed should the engine die before
// Untrack, if the number still names it then (see Watchdog).
func (w *Watchdog) Track(pgid int) {
	if w != nil {
		st, _ := ReadStat(pgid) // unreadable: start time 0, killed as before
		w.send("+ " + strconv.Itoa(pgid) + " " + strconv.FormatUint(st.Start, 10))
	}
}

// Untrack tells the watchdog the group ended, or is left running on
// purpose.
func (w *Watchdog) Untrack(pgid int) {
	if w != nil {
		w.send("- " + strconv.Itoa(pgid))
	}
}

// send writes one line; lines are shorter than PIPE_BUF, so each write is
// whole or nothing. A full pipe (a stopped watchdog) loses the line: the
// watchdog is best effort, the engine is never held up by it.
func (w *Watchdog) send(line string) {
	_, _ = unix.Write(w.fd.Int(), []byte(line+"\n"))
}

// Close tells the watchdog the engine shut down cleanly (what still runs
// was left running on purpose) and waits for it to exit.
func (w *Watchdog) Close() error {
	if w == nil {
		return nil
	}
	var err error
	w.once.Do(func() {
		// The goodbye must arrive, or the watchdog would kill what was
		// left running on purpose: retry a full pipe for a while.
		for i := 0; i < 100; i++ {
			if _, werr := unix.Write(w.fd.Int(), []byte("bye\n")); werr != unix.EAGAIN {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		_ = w.fd.Close()
		_ = w.sleep.Close()
		err = w.cmd.Wait()
	})
	return err
}
