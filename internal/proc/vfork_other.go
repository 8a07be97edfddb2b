//go:build linux && !amd64 && !arm64

package proc

// vforkJoins: on this architecture, for want of vfork.RawSyscall's
// assembly, a command on a hybrid host is forked by its cgroup's forker
// or a joining thread (cgroup_place.go).
const vforkJoins = false
