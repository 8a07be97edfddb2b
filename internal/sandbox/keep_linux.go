//go:build linux

package sandbox

import (
	"runtime"
	"slices"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
	"github.com/bashvisor/bashvisor/internal/layer"
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
// by the descriptor its helper reports (helperConfig.NamespaceFD), sent
// twice: the Freezer takes the first (and closes it when the command
// ended), the second stays queued on the socket, which the Command
// keeps open (a duplicate, nsHold) until Cleanup; Cleanup then closes
// it on a thread of its own (releaseOffPath), whose close runs the
// teardown, and which a layered command's layer waits for
// (layer.Spec.MountedBy) before it is reused. Before, the teardown ran
// in the Freezer's Close or Cleanup's, on the job's path
// (BenchmarkRootlessGap: back to back 12.7 → 7.8 ms, 1 s apart 17.9 →
// 15.9 ms at load 14–26).
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

// keepRootlessNS makes a rootless command's namespace outlive its
// Freezer until Cleanup, and Cleanup release it off the path (the
// benchmark compares it with closing it in place).
var keepRootlessNS = true

// releaseOffPath closes fds (nil ones skipped) on a thread of their own,
// which it does not wait for: the last reference to a command's mount
// namespace among them tears it down there. With spec (a layered
// command), the thread is named to the layer (layer.Spec.MountedBy)
// before releaseOffPath returns, so that the layer's reuse waits for
// the teardown.
func releaseOffPath(spec *layer.Spec, fds ...*fd.FD) {
	if !slices.ContainsFunc(fds, (*fd.FD).Valid) {
		return
	}
	named := make(chan struct{})
	var run func()
	run = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			go run() // not the main thread, which the runtime never ends
			<-named
			runtime.UnlockOSThread()
			return
		}
		if spec != nil {
			spec.MountedBy(unix.Gettid())
		}
		close(named)
		for _, f := range fds {
			_ = f.Close()
		}
		// Return still locked: the runtime ends this thread.
	}
	go run()
	<-named
}
