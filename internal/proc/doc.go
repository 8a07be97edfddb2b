// Package proc starts and ends the OS processes behind bashvisor's
// commands: a new session and process group per command (no controlling
// TTY, stdin /dev/null, unless the caller asks for a stdin pipe or a
// pseudo-terminal), one pipe for stdout and stderr so the output keeps the
// order it was written in, the environment policy with secret filtering,
// and signals to the whole group.
//
// Waiting does not park an OS thread: the child's exit is observed through a
// pidfd registered with the Go netpoller, and the child is reaped only then.
//
// Choices where the specification is silent:
//   - Per-call environment overrides may set any name except a secret that
//     the policy removed from the engine's own environment; a secret name
//     the engine never had can be passed deliberately (the caller chose it).
//   - The group is the unit of termination. A process that leaves the group
//     (setsid, double fork with setpgid) escapes it; the cgroup support of
//     the engine closes that gap where cgroups are available, and also
//     limits and accounts a command's memory, processes and CPU time as a
//     whole ([Cgroup.SetLimits], [Cgroup.Usage]).
//   - The leader is reaped as soon as it exits. While any member of the
//     group is alive the kernel keeps the group id allocated, so a signal to
//     -pgid cannot reach a stranger; after the last member is gone the engine
//     stops signalling.
package proc
