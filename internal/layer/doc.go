// Package layer makes a command's writes to the workspace
// transactional: the command runs over a copy-on-write layer
// (overlayfs) of the directories it may change, and when it has ended
// the engine reads what it changed from the layer ([Layer.Diff]), lets
// policy refuse some of it (package gitpolicy), applies the rest to the
// real directories ([Set.Apply]), keeps what that replaced in an undo
// store ([Store]), and reports the changes ([Summary]). Nothing reaches
// the real tree before that. It is Linux-only (overlayfs, openat2);
// elsewhere it has only the types of a [Spec], and gitpolicy is empty.
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
// another file system (a tmpfs) it is a copy. Measured side by side on
// this machine (2 cores, load 6–9 from other work; see the package
// benchmarks): a command that changes nothing cost 0.1 ms more with the
// layer on a tmpfs than in a bare mount namespace, and 8.7 ms more with
// it on the shared ext4 disk (its directories, overlayfs's work
// directory and the unmount are metadata writes that queue behind the
// disk's other writers); applying 1,000 modified files to a workspace
// on that disk took 0.3–0.65 times the raw link and rename of those
// files with the layer on the disk, and 1.8–3.9 times with it on a tmpfs
// (each file is created anew on the disk). With everything on a tmpfs,
// diff, policy, apply and report of 1,000 files took 1.2 times the raw
// link and rename. So the engine should keep Dir on the workspace's
// file system when change sets are large, and take the fixed cost off
// the command's path with a pool of directories made ahead of time
// (New) and removed after the result is sent (Remove); a tmpfs suits
// small change sets (and bounds the command's writes).
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
