// Package layer makes a command's writes to the workspace
// transactional: the command runs over a copy-on-write layer
// (overlayfs) of the directories it may change, and when it has ended
// the engine reads what it changed from the layer ([Layer.Diff]), lets
// policy refuse some of it (package gitpolicy), applies the rest to the
// real directories ([Set.Apply]), keeps what that replaced in an undo
// store ([Store]), and reports the changes ([Summary]). Nothing reaches
// the real tree before that.
//
// # Lifecycle of one command
//
//	l, _ := layer.New(layer.Options{Roots: roots, Dir: dir})  // before the command
//	spec := l.Spec()                                            // to the process that mounts it
//	// in the command's new mount namespace, before Landlock and seccomp:
//	m, _ := spec.Open() // before the namespace is made read-only
//	m.Attach()          // over the roots; or spec.Mount() for both
//	// ... the command runs; its cgroup becomes empty ...
//	s, _ := l.Diff()
//	refused := gitpolicy.Check(s, l.Roots(), s.Changes)
//	res, _ := s.Apply(gitpolicy.Paths(refused), store, label)
//	line := layer.Summary(res.Applied, cwd, 0)
//	s.Close(); l.Remove()
//
// The overlays are mounted in the command's mount namespace only: the
// engine and every other command see the real tree. The upper layer is
// read only after every process of the command is gone (the mount
// namespace went with the last one), so it no longer changes.
//
// # Where the upper layers live
//
// [Options.Dir] holds one directory per command (an upper and a work
// directory per root, made by [New], removed by [Layer.Remove]). On the
// workspace's file system, applying a change is a rename(2) of the
// upper entry over the real one: no data is copied at apply time. On
// another file system (a tmpfs) it is a copy. Measured on this machine
// under load (see the package benchmarks): on the shared ext4 disk the
// layer's fixed cost per command (its directories, overlayfs's work
// directory, unmounting) was 10–25 ms and on a tmpfs 0.1–0.3 ms, while
// applying 1,000 modified files took about as long as the raw link and
// rename of those files when the layer was on the disk and 5–10 times
// longer on a tmpfs (every file is created anew on the disk). The
// engine should put Dir on the workspace's file system when it expects
// large change sets and on a tmpfs (which also bounds the command's
// writes) when commands are mostly small; a pool of directories made
// ahead of time and removed after the result is sent takes New and
// Remove off the command's path in either case.
//
// # Unprivileged
//
// As root the engine mounts from a thread that entered a new mount
// namespace. Any other user needs a user namespace of its own, which a
// multi-threaded Go process can only get for a child (clone(2) with
// CLONE_NEWUSER): the sandbox's helper process, which mounts and then
// execs bash. Its uid and gid map to themselves, so the command runs as
// the engine's user; the helper keeps, as ambient capabilities until
// it execs the command, CAP_SYS_ADMIN and the file capabilities that
// overlayfs uses in the upper layer on its mounter's behalf
// (DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, CHOWN, FSETID; valid over the
// user namespace's own files only). [Options.UserXattr] is required
// there: whiteouts stay character devices 0/0 (creating those needs no
// privilege), opaque directories are marked in user.overlay.opaque. One
// difference remains: without file handles (which need
// CAP_DAC_READ_SEARCH outside the namespace) overlayfs cannot keep a
// copied-up file's inode number, so git clone of a local path, which
// hard-links objects and checks the link, fails with "hardlink
// different from source"; git clone --no-hardlinks or a file:// URL
// work.
//
// # Bind mounts
//
// An overlay shows its lower directory's own contents: mounts below a
// root are not part of the layer (the overlay hides them, and what the
// command writes there goes to the upper layer under the mount point's
// path; applying it fails, since [Set.Apply] does not cross mounts).
// Bind mounts made on the merged tree after [Mounts.Attach] apply to
// the overlay. The workspace-write profile's read-only binds of git's
// hooks and config and its pins are not needed with a layer: policy on
// the change set replaces them, for every git directory including the
// ones a command creates.
//
// # What a change is
//
// [Kind]s are A (added), M (content, modification time or symlink target
// changed), D (removed; a removed directory is one change) and T (type,
// permissions or owner changed). A file that was only copied up
// (opened for writing and left as it was) is not a change; directories'
// times are not either. Renaming a directory that exists in the real
// tree fails inside the command with EXDEV (overlayfs's
// redirect_dir=nofollow) and mv falls back to copying; new directories
// rename freely. Overlayfs's own xattrs are stripped from what is
// applied.
//
// # Undo
//
// A [Store] keeps one step per [Set.Apply] that changed something
// (commands that changed nothing are not steps): hard links to the
// replaced files (copies across file systems) and removed directories,
// with what each path looked like before and after. [Store.Undo]
// refuses, naming the paths, when anything changed them since (by the
// user, or by a later command that is not undone with them: every
// write, rename or chmod moves a file's change time), and otherwise
// puts every path back. The store is bounded in bytes and steps, the
// oldest steps are dropped first, and [Store.Remove] removes it with
// the conversation.
package layer
