// Package actors holds the command actor: one protoactor-go actor per
// command, owning its process group, its timers, its output buffer and its
// cancellation.
//
// The engine starts the process in the caller's goroutine ([Launch]: the
// cgroup, the output pipe or file, the fork) and hands it to the actor,
// which owns it from then on; the fork does not wait for the supervisor
// and the new actor to be scheduled.
//
// The actor never blocks in Receive. Two goroutines feed it: one reads the
// output pipe into a bounded [truncate.Buffer] (parked on the netpoller
// without holding a read buffer while the pipe is quiet), and one waits on
// the leader's pidfd and sends an exit message. Timers send messages too.
// Every message leads to one re-evaluation of the command's state
// ([commandActor.advance]), so events may arrive in any order.
//
// Ending a command (timeout, cancellation, kill, shutdown, lifetime, or
// leftovers after the shell exited) always targets the whole process
// group: SIGTERM (with SIGCONT, so stopped processes see it), up to Grace
// for the group to empty, SIGKILL, then up to CleanupWait for it to go; the
// actor reports regardless and says what it could not end.
//
// With [Command.Cgroups] every command also gets a cgroup v2 of its own,
// created before the start and entered by the shell at clone time
// (CLONE_INTO_CGROUP), so every descendant stays in it whatever it does
// with sessions and process groups. Leftovers are then the live members of
// the group and of the cgroup; SIGTERM/SIGCONT go to the group and to every
// cgroup member outside it; SIGKILL is cgroup.kill. The cgroup is removed
// when the command ends (its processes are moved out first when they are
// left running on purpose: KeepLeftovers, Detach).
//
// Choices where the specification is silent:
//   - A background job lives as long as its process group: when its shell
//     exits while processes it started still run (`server &`), the job stays
//     "running" under its actor (killable, lifetime-bounded, ended at
//     shutdown) and its completion line is written when the group is empty.
//   - If the output pipe is still open once the group is gone, the holder
//     escaped the group (setsid): the actor stops reading after DrainWait
//     and says so, rather than waiting for a process it cannot end.
//   - The timeout bounds the shell: a foreground shell that exited before
//     its deadline is reported with its own status even when ending its
//     leftovers runs past the deadline (that phase is bounded by DrainWait
//     and the grace sequence).
//   - A command whose cgroup ended empty and untouched hands it back for
//     reuse ([proc.Cgroup.RecycleEmpty]); creating and removing a cgroup
//     costs ~90 µs, close to 10% of a `bash -c true`.
//   - An output pipe that has carried 256 KiB is enlarged to 1 MiB, so a
//     flooding command keeps writing while the buffer and its spool file
//     take the previous chunk.
//   - A Kill that crosses a job's final report is answered with that final
//     state.
//   - A panicking command actor is stopped, never restarted; its Stopping
//     handler SIGKILLs the group at once (no grace: it cannot wait) and
//     answers the caller with an error.
package actors
