//go:build linux

package sandbox

import (
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The command's mount namespace is torn down off its path. A command's
// private mount namespace (makeView) is made by the thread that forks
// it; when its last task exits the kernel unmounts everything in it and
// waits for an RCU grace period (namespace_unlock), once more for each
// overlay of a layer (overlayfs's kern_unmount_array), before the task
// is reported gone: measured on Linux 6.18 with 2 CPUs, the command's
// shell spent 0.2 to 5 ms per grace period in its exit (more under
// load), which the caller waited for. The kernel tears it down when its
// last reference goes, a task or a descriptor: a descriptor of the
// namespace keeps it and its mounts after its last task exited
// (TestNamespaceDescriptorKeepsMounts; rootless worlds rely on it), and
// the teardown then runs in the close of the last descriptor, in
// whichever thread closes it. Root's command thread opens one
// (Command.mntns, enterNamespaces) and hands it to the Freezer
// (tellNamespace), which closes it when the command ended, on the
// job's path when the command has no cgroup: so the thread that made
// the namespace also stays, parked, until [Command.Cleanup]. The
// shell's exit then only leaves the namespace; Cleanup lets the thread
// go, and the teardown runs in that thread's exit, which nothing waits
// for (or in Cleanup's close of Command.mntns, when that comes last). A
// rootless command's namespace is held without a thread of the engine,
// by the descriptor its helper reports (helperConfig.NamespaceFD): in
// flight on the report socket until Cleanup closes it, or in the
// Freezer until its Close; the teardown then runs in that close, which
// costs little there (Cleanup took 0.13–0.19 ms in BenchmarkRootlessGap
// at load 17–27; keeping the namespace past it, closed on a thread of
// its own, showed no gain).
//
// At most maxKept threads are parked at once (a parked thread is an OS
// thread of the engine, a few KiB, and counts in its pids limit); past
// it a thread ends at once, as before, and its command pays the
// teardown. A layer's overlays are unmounted with the namespace, so
// the layer is reset for another command (package transact) only once
// the thread ended (layer.Spec.MountedBy).

// maxKept bounds the parked threads.
const maxKept = 64

// kept counts the parked threads.
var kept atomic.Int32

// onCommandThread runs f as [onThrowawayThread] does; when f succeeded
// and release is not nil, the thread is parked until release is closed
// (at most maxKept at once), then ends. A parked thread of a command
// with a layer tells the layer (layer.Spec.MountedBy), whose reuse waits
// for it to end. It returns f's error once f returned.
func (c *Command) onCommandThread(f func() error, release <-chan struct{}) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			errc <- c.onCommandThread(f, release)
			runtime.UnlockOSThread() // the main thread was never changed
			return
		}
		err := f()
		park := err == nil && release != nil
		if park && c.cfg.Layer != nil {
			c.cfg.Layer.MountedBy(unix.Gettid()) // before the command can end
		}
		errc <- err
		if park {
			if kept.Add(1) <= maxKept {
				<-release
			}
			kept.Add(-1)
		}
		// Return still locked: the runtime terminates this thread.
	}()
	return <-errc
}

// keepThread returns what the thread that starts c waits on before it
// ends: c's release, which Cleanup closes (made once).
func (c *Command) keepThread() <-chan struct{} {
	if c.release == nil {
		r := &threadRelease{ch: make(chan struct{})}
		c.release = r
		// A Command dropped without Cleanup (its processes left
		// running) lets its thread go when it is collected.
		runtime.AddCleanup(c, func(r *threadRelease) { r.close() }, r)
	}
	return c.release.ch
}
