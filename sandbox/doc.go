// Package sandbox is bashvisor's restricted mode: it starts `bash -c
// COMMAND` so that the command can read and run anything but cannot change
// the filesystem outside a private scratch directory, reach any network, or
// touch processes and kernel objects outside its sandbox. The kernel
// enforces it (Landlock, a seccomp filter, namespaces, rlimits, a pids
// cgroup), not pattern matching; [Probe] says what this kernel enforces,
// and [Prepare] refuses (with [ErrUnavailable]) rather than degrade.
//
// # Boundary
//
// Denied inside, with the kernel's error (EACCES, EPERM, ENOSPC, ENOSYS):
//
//   - writing, creating, renaming, linking or removing anything outside the
//     scratch directory ($TMPDIR) and /dev/null, /dev/zero, /dev/full
//     (Landlock; /dev/shm is not writable, so Python's multiprocessing
//     semaphores fail); changing metadata (chmod, chown, utimes, xattrs)
//     anywhere, the scratch directory included (seccomp: it cannot see
//     paths);
//   - the network: sockets other than AF_UNIX stream/seqpacket, connect(2)
//     to anything, UDP, MPTCP, raw, packet and netlink sockets (seccomp),
//     TCP bind/connect (Landlock); where namespaces are available the
//     command also has a network namespace of its own with only loopback,
//     so abstract unix socket names it binds are invisible outside;
//   - other processes: signals and abstract-socket connections out of the
//     sandbox (Landlock scoping), ptrace, /proc/PID/{environ,mem,fd,...},
//     process_vm_*, pidfd_getfd (Landlock, seccomp); resource limits,
//     scheduling and memory placement of any process but the command's own
//     (prlimit, setpriority, sched_set*, ioprio_set, migrate_pages,
//     move_pages with a pid: seccomp);
//   - SysV IPC and POSIX message queues of the host: the command has an IPC
//     namespace of its own, whose objects die with it (without namespaces
//     the calls are denied);
//   - new namespaces of any kind (unshare, setns, clone with CLONE_NEW*;
//     clone3 fails with ENOSYS, so libc falls back to clone) and leaving
//     the command's cgroups (clone3's CLONE_INTO_CGROUP; the cgroup files
//     are read-only);
//   - mount, modules, kexec, reboot, swap, clock, hostname, bpf, perf,
//     keyrings, io_uring, userfaultfd, fanotify, quotas (seccomp, and every
//     capability but CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH is dropped);
//   - descriptors of the engine: a command starts with 0, 1 and 2 only.
//
// Bounded: CPU time, file size, open files, address space (rlimits, see
// [Limits]), no core dumps, processes (cgroup pids.max), and the scratch
// directory (a tmpfs of [Limits.ScratchBytes] and [Limits.ScratchFiles]
// where namespaces are available).
//
// Not confined: reading every file the engine's user can read and running
// any program; seeing other processes in ps and their command lines; taking
// advisory locks (flock) on files it can read, held until the command ends
// (go build locks its cache with flock, so it is not denied); CPU and
// memory bandwidth. Without namespaces (an unprivileged engine) the scratch
// directory has no quota and bind(2) is denied.
//
// # How a command starts
//
// Go cannot run code between fork and exec, so confinement is applied to a
// throwaway OS thread of the engine, which then forks bash
// ([Command.StartDirect]), or to a helper process, the engine's binary
// re-executed with [HelperArg], which confines itself and execs bash
// ([Command.StartHelper], [Main]). Both enter the namespaces first from a
// throwaway thread. Every program that embeds the engine calls [Main] as
// the first statement of main (and of TestMain in packages whose tests run
// restricted commands).
package sandbox
