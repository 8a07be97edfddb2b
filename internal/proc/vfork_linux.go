//go:build linux && (amd64 || arm64)

package proc

// vforkJoins: this platform starts a command on a hybrid host with
// startRaw (forkJoined: a vfork whose child joins the v1 cgroups), not a
// forker.
const vforkJoins = true
