// Package transact makes a conversation's workspace-write commands
// transactions over the workspace: each command runs over a
// copy-on-write layer of its writable roots (package layer), and once
// its processes are gone what policy (package gitpolicy) allows is
// applied, what that replaced is kept in the conversation's undo store,
// and the changes and refusals are reported. A [Manager] makes the
// layers; a [Conv] ([Manager.Conversation]) is one conversation's undo
// store and running background jobs, held by its owner (the
// supervisor's record of the conversation); a [Tx] is one command's
// layer.
//
// # Lifecycle of one command
//
//	c := m.Conversation()                 // once per conversation
//	tx, _ := c.Begin(roots, label)        // before the command starts
//	spec := tx.Spec()                     // to the sandbox (sandbox.Options.Layer)
//	// ... the command runs; its cgroup becomes empty ...
//	rep, err := tx.Commit(ctx, gone)      // diff, policy, apply, remove
//
// Commit applies only when every process of the command is known to be
// gone (gone): a process that still runs over the layer could change a
// file between the policy's check and the apply, or keep writing to a
// file after it moved into the workspace. Otherwise nothing is applied
// and the report says why ([Report.NotApplied]).
//
// # Background jobs
//
// A background job (or a command that yielded to the background) runs
// over a layer for its whole life. So that what it writes (a watcher's
// build output, a dev server's files) reaches the workspace while it
// runs, its owner takes checkpoints ([Conv.Checkpoint], [Tx.Checkpoint]):
// before the conversation's next command starts, on bash_output, and
// when the job ends (then a Commit). A checkpoint freezes the job (the
// function the job handed to [Tx.Background]: proc.Handle.Freeze, its
// cgroup's cgroup.freeze, or without a cgroup SIGSTOP of the processes
// of its mount namespace, proc.Freezer) so
// that nothing changes under the diff, the policy check and the apply,
// applies the allowed changes by copying them (the job still runs over
// its upper layer, whose files must not move into the workspace), and
// thaws it; it is one undo step like a command's. A job that cannot be
// frozen gets no checkpoints: its changes are applied when it ends.
//
// # Shared layers
//
// A layer's lower directories are the real workspace, which later
// commands change, and overlayfs keeps what a job already looked up: a
// job over a layer of its own goes on seeing a file as it was when it
// first looked it up, and does not see a file created later at a path
// it looked up before (a loop waiting for a file another command makes
// never ends: seen on Linux 6.18). So once the engine marks a command
// as a background job ([Tx.Background], with the function that freezes
// it), the conversation's later commands over the same roots join its
// layer: [Conv.Begin] returns a Tx whose [Tx.Spec] mounts clones of
// the job's overlay mounts (layer.Layer.Share: open_tree(2), the same
// superblock), so that lookups, contents and inotify events agree
// between the job and them. This needs the job's overlays held by this
// process, which the pool arranges for every layer:
//
//   - as root (Options.Premount) the layers are premounted
//     (layer.Layer.Premount): the engine makes their overlays, and its
//     threads mount them with either of the sandbox's launchers (the
//     direct start, and the helper process, whose mount namespace the
//     engine's thread makes before it starts the helper);
//   - otherwise they are held (layer.Layer.Hold): a rootless engine
//     cannot make overlays, so the sandbox's helper of the layer's first
//     command makes them in the conversation's world (its user
//     namespace) and hands them to the engine over a socket, and the
//     helper of a command that joins gets them back and clones them
//     there (package layer, "Held layers"). A rootless command without
//     a world (each in a user namespace of its own) hands nothing over:
//     its layer cannot be joined. The overlays are held once the first
//     command started (its helper made them): a job whose helper failed
//     first is not joined.
//
// Where the overlays are not held every command has a layer of its
// own, as before. Joins also need the job frozen at each checkpoint
// (Tx.Background's function, as above). Both hold in the engine as
// root and unprivileged, with cgroups or without (package engine's
// TestBackgroundJobSeesLaterCommandsFiles runs each way, with either
// launcher). A
// command joins only while every command over the layer is a
// background job that can be frozen: a foreground command cannot be,
// so at most one foreground command runs over a shared layer, and a
// second one gets a layer of its own.
//
// The layer lives until every command over it has ended ([Tx.Commit]):
// one that ends while others run takes a checkpoint of the whole layer,
// with the others frozen (a job whose cgroup was just handed back, its
// Commit under way, counts as frozen once its processes are known
// gone), and reports what that checkpoint applied as its own changes:
// what the running jobs changed since the last checkpoint is included.
// When the others cannot be frozen (a foreground command over the
// layer), its changes are left to the next checkpoint or the last
// Commit, and its report says so ([Report.NotApplied]); the last
// command's Commit applies the rest and removes the layer. A command
// whose Commit began (its processes gone) while another's apply held
// the layer (the job's end, or a checkpoint of it) has its changes
// applied by that apply: both reports list them then, so that a change
// is never in neither (TestJoinedCommandReportsWhatAnotherApplyTook).
// A command that ended with processes left over the layer stops every
// later apply of the layer, as it stops its own.
//
// Each change set is judged by the same policy as a command's own. A
// refused change is not applied but stays in the shared upper layer,
// where the commands over it go on seeing it (in the sandbox) and
// later checkpoints refuse it again. Steps applied from a layer still
// in use cannot be undone ([ErrUndoLive]): the layer keeps the changes,
// and would apply them again.
//
// # Turns, undo and redo
//
// A command's undo step records the client's turn ([Tx.SetTurn]).
// [Conv.Revert] takes back the last steps, every step of a turn, or
// some paths of one step, each all or nothing, and redoes the last
// undo until the next change. A rewrite of git's index that changes
// only the stat data git caches (a read-only git status) is applied
// but is no step, and undo takes such a rewrite for no change: the
// index is compared parsed (every entry's path, mode, object id, stage
// and flags, and the extensions that are not caches).
//
// A conversation's applies (its commands' Commits and checkpoints),
// undos and accepts take turns, each judged against the workspace the
// last one left. A call that waits for its turn, or for another apply
// to the workspace, stops when its context ends, leaving nothing half
// done: a Commit holds its whole change set for review, an undo or an
// accept changes nothing, a checkpoint applies nothing (see
// [Tx.Commit], [Conv.Undo], [Conv.Accept], [Tx.Checkpoint]). A
// checkpoint freezes its job only once it holds the turn.
// [Conv.Steps], [Conv.Bytes] and [Conv.HeldBytes] never wait for a
// turn: they read what the last call that held one left.
//
// # Held changes
//
// What is not applied is held, not dropped: the part of a command's
// change set that policy refused (its Commit applies the rest by
// copying, leaving the layer as it is), every change set of a
// command begun in hold mode ([Conv.BeginHeld]: nothing applied), and
// the change set of a command whose processes were not known to be
// gone ([Report.Discarded]). Its layer is kept, unmounted by the
// engine, as a [Held] ([Report.Held]), until the conversation's owner
// accepts ([Conv.Accept]) or rejects ([Conv.Reject]) it; [Conv.Held]
// lists them as they are now, each with the reason for each path and a
// digest of the held changes (paths, kinds, modes, sizes, the upper
// entries' inodes and change times, files' contents and symlinks'
// targets). Accept applies only when the digest still matches, so what
// is applied is exactly what was listed: it is one undo step, and the
// policy is not asked again (accepting is the decision). The held
// changes of a command that left processes running cannot be accepted
// ([ErrStray]): such a process may still write its layer. Held change sets are removed
// with the conversation ([Conv.End]) and by [Manager.Close], and what
// they hold counts against the conversation ([Conv.HeldBytes]); a
// conversation holds at most 64: a command whose changes would be one
// more is not held, and its report says so ([Report.Unheld]). Accepting
// applies nothing when a held path changed in the workspace since the
// change set was held ([ErrConflict]): checked against what was
// recorded at hold, then again, under the workspace's apply lock, by
// each real entry's full status (identity, permissions, owner, size,
// times) through the descriptors the apply uses (layer's ApplyExact),
// and once more immediately before each change, so that a write in
// place in between is not overwritten (TestHeldAcceptRacedEdit). In hold mode and for a command
// that left processes running, what policy refuses carries its reason,
// as in apply mode.
// Changes a checkpoint refused are not held: they stay in the running
// job's layer, and the job's Commit holds them. In hold mode checkpoints
// apply nothing: the last Commit of the layer holds everything.
//
// # Where layers and stores live
//
// [Options.Dir] (the engine's: below its output directory, hidden from
// every command) holds each command's layer and each conversation's
// store, on the same file system so that applying a change and keeping
// what it replaced are exchanges and renames, not copies. They are
// not on the conversation's world file system (a tmpfs mounted only in
// the commands' namespaces, which the engine cannot write): the
// engine counts what a conversation's store keeps ([Conv.Bytes])
// against the conversation's quota, and bounds it by [Options.Limits]
// (oldest steps dropped first). A command's upper layer holds what the
// command wrote to the workspace, as the workspace itself would have
// (the disk bounds it), only while the command runs. The store is
// removed with the conversation ([Conv.End]); [Manager.Close] removes
// those of conversations not ended.
//
// # Cost
//
// A layer's fixed cost (making its directories, and as root making its
// overlays: metadata writes that queue behind the disk's other writers)
// is kept off the command's path: [Manager] keeps, per set of roots
// (the conversation's workspace), one layer made ahead of time, and
// premounted with [Options.Premount] (layer.Layer.Premount), which
// Begin takes when it still fits its roots (layer.Layer.Stale) and
// refills in the background (the first Begin over a set of roots
// refills nothing: a one-command engine would only make and remove that
// spare; its layer, reset, is the first spare, and later Begins that
// find none make one); a committed or aborted layer is reset in
// the background after Commit returns, once its command's mount
// namespace ended (layer.Layer.Reset: emptied, not removed), and its
// directories are the next spare of its roots, so that
// a conversation's commands in one workspace cycle two layers (three
// when they come back to back) and make
// or remove no directory; a layer whose command left processes running
// (its overlays may still be mounted) or that cannot be reset is
// removed instead. One goroutine does that work,
// in order, with at most 64 tasks queued (past that a removal is done
// on the caller's path and a refill skipped); Close waits for it and
// removes the spare and reset layers, and New removes what a killed engine left.
// At most 16 sets of roots have a spare (the least recently used is
// removed first). A premounted spare holds its roots' file system (its
// overlay keeps private clones of their mounts) until it is used,
// dropped or removed by Close. With Premount, a layer made on the
// command's path (no spare yet) is premounted there too (the overlay
// the sandbox would otherwise make), so that a conversation's first
// background job can be joined; a premounted layer keeps one more
// descriptor of each overlay (for [Tx.Background]'s joins) until its
// last command ends.
// The undo store removes what it no longer needs in the background too
// (package layer).
package transact
