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
//	res, _ := s.Apply(ctx, gitpolicy.Paths(refused), store, label)
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
// workspace's file system, applying a modified file is an exchange
// (renameat2 RENAME_EXCHANGE) of the upper entry and the real one, and
// an added one a rename: no data is copied at apply time. On another
// file system (a tmpfs) it is a copy. Making the directories, making
// the overlays (overlayfs creates and checks its work directory) and
// removing them are metadata writes on Dir's file system, which on a
// busy ext4 disk queue behind its other writers: so the engine makes
// layers ahead of time ([New], then [Layer.Premount] where layers are
// mounted from a thread of the engine: as root; [Layer.Hold] elsewhere,
// see "Held layers" in hand_linux.go), checks them just before use
// ([Layer.Stale]) and removes them after the result is sent, off the
// command's path (package transact). Dir belongs on the workspace's
// file system; a tmpfs suits small change sets only (each file is
// copied at apply time; it bounds the command's writes).
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
// rename freely.
//
// # What is applied
//
// [Set.Apply] applies the listed changes and nothing else: each entry
// that reaches the real tree is one of [Set.Changes], less those the
// caller refuses (policy) and those the layer refuses itself
// ([Result.Refused]). An added directory is renamed into place whole
// only when its upper directory holds exactly the changes listed below
// it and none of them is refused; otherwise it is made anew and its
// entries are applied one by one.
//
// Overlay marks belong to the mount: Diff reads whiteouts and opaque
// directories only from the xattr namespace its overlay uses
// (trusted.overlay.* as root, user.overlay.* with [Options.UserXattr]),
// which a command cannot set. Any other *.overlay.* xattr in the upper
// layer (user.overlay.* on a root overlay, or one overlayfs stored
// escaped for the command) was set by the command: it hides nothing,
// and the entry that carries it is refused ([ErrOverlayXattr]; an added
// directory with everything below it). The overlay's own xattrs are
// stripped from what is applied.
//
// Depth is bounded: Diff does not walk an upper entry deeper than
// [MaxDepth] below its root; the outermost added directory around it is
// refused whole ([ErrTooDeep]). Diff, the lookups policy makes
// ([Set.Lstat], [Set.ReadDir], [Set.ReadFile]) and Apply cost time
// linear in the entries of the change set, not in their depth.
//
// Apply reaches every entry of the real tree through descriptors
// opened beneath the root's descriptor (openat2 with RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV), so
// a symlink or a mount put into the real tree cannot redirect it, and
// before it changes an entry it checks that it is the one Diff compared
// the change with (device, inode and type; absent for an added path):
// otherwise the change fails ([Result.Failed]) and the path is left as
// it is. Permissions, owner and times are set through an O_PATH
// descriptor of the entry itself (fchmodat2, fchownat and utimensat
// with AT_EMPTY_PATH), never by name. Applies and undos on one
// workspace take turns across all sets and stores of the process (a
// lock per root, keyed by its device and inode) and across processes
// (an abstract unix socket named after the root's device and inode,
// which only one process of a network namespace can bind: two engines
// on one workspace; a sandboxed command, in a network namespace of its
// own, cannot hold it), so between the check and the change no other
// apply moves the entry. An apply waits for another process's at most
// Options.LockWait (10 minutes), an undo 10 minutes, then fails with
// ErrLocked, having changed nothing; so does either, sooner, when its
// caller's context ends. A Store's applies and undos take turns too,
// and that wait ends with the context as well. Engines in different
// network namespaces do not take turns.
//
// # Undo
//
// A [Store] keeps one step per [Set.Apply] that changed something
// (commands that changed nothing are not steps): the files the changes
// replaced (the command's upper layer moves into the step whole, and
// is pruned in the background to those files), removed entries (moved
// there) and copies where the store is on another file system, with
// what each path looked like before and after. [Store.Undo] refuses,
// naming the paths, when anything changed them since (by the user, or
// by a later command that is not undone with them: every write, rename
// or chmod moves a file's change time), and otherwise puts every path
// back: a replaced file by exchanging it back, anything else by moving
// what is there aside and renaming what was there back. What an undo
// moves aside is kept as the steps that take the undo back
// ([Store.Redo]), until the next step is added (as in an editor). A
// step records the client's turn ([Store.SetTurn]); [Store.UndoTurn]
// undoes a turn's steps and [Store.UndoPaths] some paths of one step,
// each as one check and one undo. An undo or redo that cannot restore a
// path stops there: each path is restored whole or not at all, what is
// not restored stays kept (Undo or Redo again finishes it), and what was
// restored can be taken back. [Store.SetCanon] lets a change that
// leaves a file's canonical form as it was (git's index after a stat
// refresh) be no step, and undo take such a file for unchanged. Nothing
// is removed (and so freed) on an apply's or an undo's path: dropped
// steps, pruned upper layers and undos no longer kept are removed by one
// background goroutine per store, which [Store.Remove] waits for;
// freeing blocks is the slowest thing these do on a disk mounted with
// discard. Undoing one step at a time works like undoing several at
// once. The store is bounded in bytes and steps, the oldest steps are
// dropped first, and [Store.Remove] removes it with the conversation.
package layer
