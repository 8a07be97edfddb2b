// Package proc starts, watches and ends the OS processes behind
// bashvisor's commands.
//
// A command runs in a new session and process group (no controlling
// terminal, stdin /dev/null, unless the caller asks for a stdin pipe or a
// pseudo-terminal), with one pipe for stdout and stderr so the output
// keeps the order it was written in, and an environment built by the
// policy of [Env] (secrets the engine holds are filtered out; a per-call
// override may set any name but one the policy removed). Waiting does not
// park an OS thread: the shell's exit is observed through a pidfd in the
// Go netpoller, and the shell is reaped only then.
//
// The process group is the unit of termination, and where the host
// offers cgroups a command's [Cgroup] holds every process it starts,
// also those that leave the group (setsid, double fork): it limits and
// accounts their memory, processes and CPU time as a whole
// ([Cgroup.SetLimits], [Cgroup.Usage]) and ends them at once
// ([Cgroup.Kill]). Without cgroups, a sandboxed command's processes are
// those of its mount namespace ([Freezer]). A [Watchdog] process ends the
// commands if the engine dies.
//
// A process is alive while any of its threads is: one whose leader
// thread exited while others run (stat 'Z') is a member of its group,
// its cgroup and its mount namespace, is signalled and waited for, in
// every scan of this package. The shell of a command is reaped only once
// it exited, and while any member of its group lives the kernel keeps
// the group id allocated; once the group emptied, its number may go to
// another group (pid_max is often 32768: a busy host wraps it within a
// minute). So a command's group is named by its shell's pidfd, not by
// its number: [Process.SignalGroup], [Process.GroupAlive] and
// [Process.LiveMembers] reach its survivors after the shell was reaped,
// and never a group that got the number since.
//
// Descriptors the package keeps are owned (package internal/fd): each
// is closed once, by its holder.
package proc
