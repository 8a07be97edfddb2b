// Package sandbox is bashvisor's restricted mode: it starts `bash -c
// COMMAND` so that the command can read and run anything but cannot change
// the filesystem outside a private scratch directory and the roots it is
// given, reach any network but the proxy it is given, or touch processes
// and kernel objects outside its sandbox. The kernel enforces it (Landlock,
// a seccomp filter, namespaces, rlimits, a pids cgroup), not pattern
// matching; [Probe] says what this kernel enforces, and [Prepare] refuses
// (with [ErrUnavailable]) rather than degrade.
//
// # Profiles
//
// What a command may write and reach is set per command ([Options]):
//
//   - read-only: the scratch directory only (and [Options.CacheDir]), or
//     in a conversation's [World] its /tmp and caches;
//   - workspace-write: [WorkspaceRoots] of the working directory — the
//     directory and its git directories writable. With a copy-on-write
//     layer ([Options.Layer], see below) the command changes a merged
//     view and the caller decides what reaches the real tree; without
//     one, the repository's hooks and config are read-only
//     ([Roots.Protected]) and its .git is pinned in place
//     ([Roots.Pinned]), so git add, commit, branch and stash work in plain
//     repositories, worktrees and submodules while the files that exist
//     when the command starts and that git would later run outside the
//     sandbox cannot change (a file git reads instead of them, such as a
//     new .git/commondir, or a new repository's config, can be created:
//     only a layer closes that);
//   - network ([Options.Network]): either profile may also reach one TCP
//     endpoint, a listener made inside its network namespace that the
//     caller serves with an allowlisting proxy (package egress). "Only the
//     proxy" is a kernel guarantee: the namespace has nothing else (no
//     interface but loopback, no route), seccomp allows TCP sockets but no
//     UDP, raw or unix sockets, and (without a world) Landlock lets TCP
//     connect to that port only. It costs nothing when no network is
//     allowed. In a [World] the namespace is the conversation's, shared by
//     its commands, which may use TCP on its loopback (see World); there
//     a command with [Options.Carry] also gets a resolver and carried
//     listeners in that namespace, for the same proxy to serve, and its
//     /etc/resolv.conf names the resolver (so names resolve for clients
//     that ignore the proxy variables; they still reach only what the
//     proxy lets through).
//
// With private namespaces and any writable root (the workspace, the
// cache), every mount of the command's mount namespace is read-only but
// the roots (see mountView), so the kernel refuses chmod, chown,
// utimes and xattrs outside them with EROFS and the seccomp filter can
// allow those calls (it cannot see paths) — except setting the setuid or
// setgid bit, on chmod or when a file is created. Namespaces come from
// root or, for any other user, from user namespaces ([Capabilities.Rootless],
// see World): the profiles are the same either way. Without namespaces
// (neither root nor user namespaces) the writable roots are Landlock's
// alone, metadata changes stay denied everywhere, Protected, Pinned,
// Layer and Network are refused (they cannot be enforced), and there are
// no worlds (the engine then refuses sandboxed calls).
//
// # Workspace-write over a layer
//
// With [Options.Layer] (package layer; the caller makes it with
// layer.New over the profile's Writable roots, in a directory outside
// them) the command's mount namespace gets one overlayfs per root, at
// the root's own path: its lower layer is the real directory, its upper
// layer a directory of the caller's. The overlays are made before the
// namespace is made read-only (overlayfs checks its upper directory then,
// and keeps private clones of its mounts, which the read-only flags set
// afterwards do not reach) and attached over the roots after the other
// writable roots; the process that mounts them (the throwaway thread as
// root, the helper rootless) enters its working directory again, so bash
// starts in the overlay. As root, where the engine's thread makes the
// overlays with either launcher, a Layer made ahead of time
// (layer.Layer.Premount) or shared with a running command
// (layer.Layer.Share: clones of its overlays) is attached as it is: the
// mount descriptors stay in the engine (close-on-exec), never in the
// command. Rootless, in a [World], a held layer's overlays
// (layer.Layer.Hold) cross the user namespace instead: the helper gets
// a socket (the descriptor after the proxy's, layer.Spec.Hand), makes
// the overlays in the world's mount namespace before it makes the
// command's, sends them to the engine (layer.Spec.Exchange; StartHelper
// waits for them, at most 10 s) and attaches clones; a helper whose
// Spec joins a running command's layer (layer.Layer.Share) receives
// them and attaches clones. The helper closes the socket before it
// execs bash. Landlock's rules name the same paths, so the
// roots stay writable, and chmod, utimes, cp -p, git init and git commit
// work as without a layer, as root and rootless (the rootless helper
// keeps, until it execs, the capabilities overlayfs uses in the upper
// layer on its behalf, over its user namespace only). Nothing the command
// writes there reaches the real tree until the caller applies the
// layer's change set after the command ended; Protected and Pinned are
// not used (nor created), since policy on the change set replaces them
// for every git directory, including those a command creates. The
// upper and work directories are outside every writable root (Prepare
// refuses a layer whose directories are not) and so read-only to the
// command; in a [World] whose Hide covers them it does not see them.
// A rootless layer needs layer.Options.UserXattr (Prepare refuses one
// without). A layer is mounted for one command: each command needs a new
// one. Its cost (BenchmarkLayerOverhead: `true` in the profile with and
// without a layer, side by side, including layer.New, Diff and Remove;
// 2 cores at load 4–12 from other work, three runs): with the layer on
// a tmpfs 0.05–0.3 ms more per command with StartDirect (ratio
// 1.01–1.06) and 0.9–1.1 ms with the helper; on the disk 1.2–6 ms
// (direct) and 6–14 ms (helper) more, most of it removing the layer's
// directories and overlayfs's work directory (metadata writes that
// queue behind the disk's other writers). Rootless (helper in a user
// namespace of its own) the tmpfs layer added 1.6–1.7 ms. The engine
// takes New and Remove off the command's path (package transact makes
// layers ahead of time, and as root mounts them ahead too, and removes
// them after the result): what remains is measured there.
//
// # Caches
//
// A command sees the user's build and package caches at the user's own
// paths: in a [World], each cache with a base ([config.BaseCaches]: the
// Go build and module caches, npm's and pip's, wherever the user's
// environment and the tools' files put them) is the conversation's
// overlay on the user's directory, mounted over that directory and
// writable there, as root and rootless alike. So the command's
// environment is the user's: nothing in it moves a cache, and a go build
// compiles the same packages from the same paths as an unrestricted one,
// hits the build cache that one warmed (its keys include the paths of
// the module sources) and links the same bytes. The sandbox adds TMPDIR,
// TMP, TEMP, GOTMPDIR, BASHVISOR_SANDBOX and, with network, the proxy's
// variables and GOMODCACHE and CARGO_HOME for caches without a base;
// only a cache without a base (none configured, or no world) is moved,
// into [Options.CacheDir], by its variable (GOCACHE, npm_config_cache,
// PIP_CACHE_DIR; and with no base at all XDG_CACHE_HOME). A command
// that points a tool at another cache finds it read-only, as any path
// outside its roots.
//
// Nothing redirects what a tool writes next to its sources: cargo's
// target/, Python's __pycache__, node_modules, a go build -o in the
// workspace are written where the tool writes them, in workspace-write
// through the layer (they appear in the change set and stay for the next
// command, which finds ./target/debug/… and loads the bytecode), and in
// read-only nowhere: the kernel refuses the write (EROFS, with the
// read-only note), as any write to the workspace; such a build needs
// its output in $TMPDIR (CARGO_TARGET_DIR=$TMPDIR/target) or
// workspace-write. Version stamping works as unrestricted: the
// repository is readable and git runs as the same user (rootless, the
// engine's uid is mapped to itself), so go build -buildvcs stamps the
// same commit.
//
// # Boundary
//
// Denied inside, with the kernel's error (EACCES, EPERM, ENOSPC, ENOSYS):
//
//   - writing, creating, renaming, linking or removing anything outside the
//     scratch directory ($TMPDIR), the writable roots and /dev/null,
//     /dev/zero, /dev/full, /dev/tty (the command's own terminal, if it
//     has one) (Landlock, and read-only mounts where there are
//     roots; /dev/shm is not writable, so Python's multiprocessing
//     semaphores fail); changing metadata (chmod, chown, utimes, xattrs)
//     outside the writable roots (read-only mounts), or anywhere when
//     there are none or no namespaces (seccomp: it cannot see paths);
//     setuid and setgid bits anywhere (seccomp);
//   - the network: sockets other than AF_UNIX stream/seqpacket, connect(2)
//     to anything, UDP, MPTCP, raw, packet and netlink sockets (seccomp),
//     TCP bind/connect (Landlock); where namespaces are available the
//     command also has a network namespace of its own with only loopback,
//     so abstract unix socket names it binds are invisible outside. With
//     Network: TCP to the proxy's port only (see Profiles), and no unix
//     sockets but socketpair;
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
// [config.SandboxLimits]), no core dumps, processes (cgroup pids.max), and the scratch
// directory (a tmpfs of [config.SandboxLimits.ScratchBytes] and [config.SandboxLimits.ScratchFiles]
// where namespaces are available).
//
// Not confined: reading every file the engine's user can read and running
// any program; seeing other processes in ps and their command lines; taking
// advisory locks (flock) on files it can read, held until the command ends
// (go build locks its cache with flock, so it is not denied); CPU and
// memory bandwidth. Without namespaces the scratch directory has no quota
// and bind(2) is denied.
//
// # How a command starts
//
// Go cannot run code between fork and exec, so confinement is applied to a
// throwaway OS thread of the engine, which then forks bash
// ([Command.StartDirect]), or to a helper process, the engine's binary
// re-executed with [HelperArg], which confines itself and execs bash
// ([Command.StartHelper], [Main]). As root both enter the namespaces first
// from a throwaway thread. Rootless, a thread of the engine cannot join or
// make a user namespace, so StartDirect takes StartHelper's path, which
// in a [World] hands the command to the world's command server: one
// helper process per world, started 200 ms after the world's first
// command started, or as its second starts if that is sooner (the first
// takes the helper: a world of one short command, such as `bashvisor
// run`'s, starts none), inside its
// user, network and mount namespaces, which starts each command as
// StartDirect does, from a throwaway thread of its own (the command's
// mount namespace, Landlock, then a vfork whose child sets the limits and
// the seccomp filter and execs bash, with CLONE_PARENT: the engine stays
// the command's parent), so no program but bash is executed per command
// (see server_linux.go; BenchmarkRootlessGap). Where the server cannot
// (it died, or the command's standard files are not files) the helper is
// forked by a raw clone into the world's namespaces (or, without a world,
// started in new ones) and makes the command's mount namespace itself. Every program
// that embeds the engine calls [Main] as the first statement of main (and
// of TestMain in packages whose tests run restricted commands).
package sandbox
