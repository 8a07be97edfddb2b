package proc

// WaitRenewals waits for the background removals and renewals of m's
// cgroups (RecycleEmpty renews some parts off the caller).
func (m *Cgroups) WaitRenewals() { m.pending.Wait() }

// Abandon closes the watchdog's pipe without a goodbye, as the kernel
// does when the engine's process dies, and waits for the watchdog.
func (w *Watchdog) Abandon() error {
	_ = w.fd.Close()
	_ = w.sleep.Close()
	return w.cmd.Wait()
}

// OnV2 reports whether m's memory and pids controllers are on the cgroup
// v2 (false: in a v1 hierarchy, or none).
func (m *Cgroups) OnV2() (memory, pids bool) { return m.ctl[ctlMemory].v2, m.ctl[ctlPids].v2 }

// SetVforkStarts turns the vfork starts (and the in-child join of the
// v1 cgroups) on or off (off: os/exec, with the forker or a joining
// thread) and returns the previous setting.
func SetVforkStarts(on bool) bool { return vforkStarts.Swap(on && vforkJoins) }

// SetKeepForkers has recycled cgroups get their forkers even with vfork
// starts, and returns the previous setting.
func SetKeepForkers(on bool) bool { return keepForkers.Swap(on) }
