// Package transact makes a conversation's workspace-write commands
// transactions over the workspace: each command runs over a
// copy-on-write layer of its writable roots (package layer), and once
// its processes are gone the engine applies what policy (package
// gitpolicy) allows, keeps what that replaced in the conversation's undo
// store, and reports the changes and refusals. A [Manager] holds, per
// conversation, that undo store; a [Tx] is one command's layer.
//
// # Lifecycle of one command
//
//	tx, _ := m.Begin(conversation, roots, label) // before the command starts
//	spec := tx.Spec()                             // to the sandbox (sandbox.Options.Layer)
//	// ... the command runs; its cgroup becomes empty ...
//	rep := tx.Commit(gone)                        // diff, policy, apply, remove
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
// over its own layer for its whole life. So that what it writes (a
// watcher's build output, a dev server's files) reaches the workspace
// while it runs, the engine takes checkpoints ([Tx.Checkpoint]): before
// the conversation's next command starts, on bash_output, and when the
// job ends (then a Commit). A checkpoint freezes the job's cgroup
// (cgroup.freeze) so that nothing changes under the diff, the policy
// check and the apply, applies the allowed changes by copying them (the
// job still runs over its upper layer, whose files must not move into
// the workspace), and thaws it; it is one undo step like a command's.
// A job without a cgroup to freeze gets no checkpoints: its changes are
// applied when it ends. The layer's lower directories are the real
// workspace, which later commands change, and overlayfs keeps what the
// job already looked up: the job goes on seeing a file as it was when it
// first looked it up, and does not see a file created later at a path it
// looked up before (a loop waiting for a file another command makes
// never ends: seen on Linux 6.18). So a background job's output reaches
// the conversation, but a watcher or dev server does not pick up edits
// made after it started: restart it (bash_kill, then start it again).
// Sharing one overlay between a conversation's commands would fix that,
// at the price of per-command change sets and undo steps; it is not done.
//
// # Where layers and stores live
//
// [Options.Dir] (the engine's: below its output directory, hidden from
// every command) holds each command's layer and each conversation's
// store, on the same file system so that applying a change and keeping
// what it replaced are renames and hard links, not copies. They are
// not on the conversation's world file system (a tmpfs mounted only in
// the commands' namespaces, which the engine cannot write): the
// engine counts what a conversation's store keeps ([Manager.Bytes])
// against the conversation's quota, and bounds it by [Options.Limits]
// (oldest steps dropped first). A command's upper layer holds what the
// command wrote to the workspace, as the workspace itself would have
// (the disk bounds it), only while the command runs. The store is
// removed with the conversation ([Manager.End]).
//
// # Cost
//
// Measured on the development machine (2 shared cores, ext4 disk, root;
// load 3.5–4.2): a workspace-write `true` took 6.9 ms with the layer,
// 4.3 ms with the read-only binds it replaced and 3.1 ms unrestricted
// (+2.6 ms for the layer: BenchmarkWorkspaceLayer in package engine,
// medians of 200 alternated runs); diff, policy, apply with an undo
// step and the report of 1,000 modified files took 92 ms, their undo
// 343 ms, against 10 ms to write them in place (BenchmarkCommit1000).
// The targets (+1.0 ms, 30 ms, 50 ms) are not met: the time is
// the disk's (the layer's directories, renames and links queue behind
// other writers; the CPU time is a fraction of it). A pool of layer
// directories made ahead and removed after the result is sent, as
// package layer suggests, is the next step.
package transact
