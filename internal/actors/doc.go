// Package actors holds the job actor: one protoactor-go actor per command,
// which owns the command's process group and cgroup, its timers, its
// bounded output and its cancellation, and moves through explicit phases
// (starting, running, draining, ending, cleaning, done) from the moment
// its supervisor spawns it until it reports the outcome, as data. The
// process itself is started by [Launch] in the caller's goroutine and
// handed to the actor; the actor never blocks in Receive: goroutines wait
// on the process's pidfd and read its output pipe, timers send messages,
// and slow cleanup runs off the actor.
package actors
