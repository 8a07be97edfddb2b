// Package sandbox is bashvisor's restricted mode (SPEC §2.8): a command can
// read and run anything, but cannot change the filesystem, reach any
// network, or touch processes outside its sandbox. The kernel enforces it
// (Landlock, seccomp, rlimits, a pids cgroup), not pattern matching.
//
// # How it runs
//
// Go cannot run code between fork and exec, so the engine starts a helper:
// the same binary re-executed through /proc/self/exe with the hidden
// argument [HelperArg]. Every program that embeds the engine therefore
// calls [Main] as the first statement of main (and of TestMain in packages
// whose tests run restricted commands):
//
//	func main() {
//		sandbox.Main() // returns at once unless this process is the helper
//		// ... the program as usual
//	}
//
// [Prepare] creates the per-command scratch dir (and pids cgroup) and
// returns the argv: /proc/self/exe __bashvisor_sandbox CONFIG -- BASH -c
// COMMAND. The engine starts it like any command (setsid, stdin /dev/null,
// one pipe for stdout and stderr, cwd = working dir, env + [Command.Env]),
// and calls [Command.Cleanup] when it ended. The helper, in this order:
// joins the pids cgroup; sets the rlimits; drops every capability but
// CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set (a root
// engine's commands keep reading everything and nothing else); applies
// Landlock and sets no_new_privs; installs the seccomp filter; sets
// RLIMIT_AS last (the Go runtime, let alone the race detector, may need
// more than the command) and execs bash with a raw execve, so the helper
// process becomes bash: the engine's process-group kills, timeouts and
// background jobs work unchanged. If any step fails it prints
// "bashvisor sandbox: ..." and exits 126; a command never runs unconfined.
// Landlock, seccomp and no_new_privs are applied to the helper's main
// thread only, which is locked and is the one that execs: execve makes it
// the whole new process. (go-landlock's all-threads path costs ~0.4 ms more
// per command on ABI < 8 and would protect only Go runtime threads that
// die at execve.)
//
// # Starting without the helper: StartDirect
//
// [Command.StartDirect] is the faster alternative (≈ +0.5 ms instead of
// ≈ +1.8 ms with a small static helper and ≈ +4.5 ms re-executing a large
// engine binary): it forks bash from a throwaway OS thread of the engine
// that it confines first (pids cgroup via the thread's tasks entry or
// CLONE_INTO_CGROUP, capabilities, Landlock, seccomp: all per-thread state
// that the child inherits), and lets bash set the rlimits on itself from a
// BASH_ENV file before the command runs. The thread is never reused: the
// goroutine exits locked, so the Go runtime terminates it (and if it was
// the main thread, which the runtime never terminates, the work moves to
// another thread first). The same test matrix runs in both modes.
//
// # Enforcement on the development kernel (Linux 6.18, Landlock ABI 7)
//
//	what                                   how                                     result inside
//	write/create/delete/rename/link        Landlock: read+exec on /, all rights     EACCES (EXDEV for links
//	  outside $TMPDIR, truncate              on scratch, rw on /dev/null,zero,full   and renames across dirs)
//	chmod, chown, utimes/touch, xattrs     seccomp (Landlock does not cover them)  EPERM, also in $TMPDIR
//	mount, modules, kexec, swap, clock,    Landlock (mount) + seccomp + dropped     EPERM
//	  bpf, perf, keyrings, io_uring        capabilities
//	new namespaces                         seccomp: unshare/setns, clone flags     EPERM (clone3: ENOSYS)
//	TCP connect/bind                       Landlock ABI 4 + seccomp                 EPERM
//	UDP, MPTCP, raw, ICMP, packet,         seccomp: socket()/socketpair() only      EPERM
//	  netlink, IPv6                          for AF_UNIX stream/seqpacket
//	host unix sockets (pathname)           seccomp: connect() denied, no AF_UNIX    EPERM
//	                                         datagram sockets
//	abstract unix sockets                  Landlock scope ABI 6 + connect() denied  EPERM
//	signals to processes outside           Landlock scope ABI 6                    EPERM
//	ptrace, /proc/PID/environ|mem|fd|cwd   Landlock ptrace rules + seccomp          EPERM / EACCES
//	  of processes outside, process_vm_*
//	CPU time                               RLIMIT_CPU 900 s, hard +5 s              SIGXCPU, then SIGKILL
//	file size                              RLIMIT_FSIZE 4 GiB                       SIGXFSZ / EFBIG
//	open files                             RLIMIT_NOFILE 8192                       EMFILE
//	address space                          RLIMIT_AS 16 GiB                         ENOMEM
//	core dumps                             RLIMIT_CORE 0
//	processes                              cgroup v1 pids.max 512                   EAGAIN on fork
//
// [Probe] reports what a kernel enforces ([Capabilities]); without Landlock
// (before Linux 5.13, or disabled) or without seccomp, [Prepare] returns an
// error wrapping [ErrUnavailable] that explains the kernel requirement
// (5.13+, 6.7+ for network rules, 6.12+ for signal scoping). On kernels with
// Landlock but an ABI below 6 restricted mode runs with what is there and
// [Capabilities.Reason] says what is missing (seccomp still closes the
// network; signal scoping is absent).
//
// # Choices
//
//   - Only $TMPDIR (the scratch dir, 0700, under [ScratchRoot] or
//     os.TempDir(), removed by Cleanup) and /dev/null, /dev/zero, /dev/full
//     are writable. XDG_CACHE_HOME, GOCACHE, GOTMPDIR, npm_config_cache,
//     PIP_CACHE_DIR and CARGO_TARGET_DIR point into it and
//     PYTHONDONTWRITEBYTECODE=1 is set, so compilers and here-documents
//     work; caches start cold in every command (a first `go build` compiles
//     the standard library again). /dev/shm is not writable (it would be a
//     channel to the outside), so Python's multiprocessing semaphores fail.
//     No tty exists (the engine starts commands with setsid), so /dev/tty is
//     not granted.
//   - Metadata syscalls are denied everywhere, even inside $TMPDIR, because a
//     seccomp filter cannot see paths: `chmod +x "$TMPDIR/x"` and `touch`
//     of an existing file fail, `tar` and `cp -p` warn. Compilers create
//     files with the right modes directly, so `go build -o "$TMPDIR/app"`
//     and running the result work.
//   - Network: seccomp allows socket() only for AF_UNIX stream and seqpacket
//     sockets and denies connect() entirely, because Landlock ABI 7 covers
//     neither UDP, MPTCP nor pathname unix sockets, and a filter cannot
//     read the path a unix socket connects to. socketpair(), pipes, and
//     listening on a socket in $TMPDIR still work; connecting to anything,
//     even that socket, does not. glibc falls back to files when nscd or
//     systemd sockets are unreachable. A network namespace was not used: it
//     leaves pathname sockets reachable, needs privileges and costs time.
//   - AF_NETLINK is denied: as root it can reconfigure the host's network,
//     and nothing the agent runs needs it (`ip addr` fails).
//   - Address space: 1 GiB breaks Python, 2 GiB Java, and anything below
//     ~12 GiB breaks WebAssembly in node (each memory reserves ~10 GiB of
//     guard space), so the default is 16 GiB: it stops a runaway
//     allocation long before the machine swaps to death without breaking
//     tools. A memory cgroup would be the better bound; it is not used.
//   - Processes: RLIMIT_NPROC does not bind root and counts per user
//     system-wide, so the count is bounded by a pids cgroup per command (the
//     v1 pids hierarchy on hybrid systems, cgroup2 where pids is available
//     there). Cleanup SIGKILLs whatever is still in it, which also catches
//     processes that left the process group with setsid. On a pure cgroup2
//     host the helper moves itself into its own pids cgroup, out of any
//     cgroup the engine put it in.
//   - Errors are the kernel's (EACCES, EPERM) and come back unchanged; the
//     engine never retries a failed restricted command unrestricted.
//
// # Cost
//
// Per command, on top of plain `bash -c true` (~1.2 ms here), measured side
// by side by BenchmarkOverhead (wall-clock medians, 2-core VM under load
// from other jobs, so ±0.5 ms):
//
//	StartDirect, scratch on tmpfs (ScratchRoot=/dev/shm)      +0.5..0.6 ms
//	StartDirect, scratch in /tmp (ext4, discard)              +0.8..1.9 ms
//	static helper (HelperPath), scratch on tmpfs              +1.8..2.0 ms
//	re-exec of the test binary (cgo), scratch in /tmp         +2.6..3.3 ms
//	re-exec of cmd/demo (≈3-4 ms of package init)             +4.3..5.5 ms
//
// The parts: the helper's Go runtime start (≈0.75 ms of CPU even for a
// small static binary on this VM), confinement (≈0.35 ms: cgroup join
// ≈0.15, capabilities ≈0.06, Landlock ≈0.03, seccomp ≈0.1), bash running
// ≈10 % slower under Landlock and seccomp (≈0.1 ms), and Prepare/Cleanup
// (≈0.1 ms with the scratch dir on tmpfs, 1-3 ms on an ext4 /tmp mounted
// with discard: see [ScratchRoot]; Cleanup may run in a goroutine after the
// result was returned).
package sandbox
