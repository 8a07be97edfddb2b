package sandbox

import "sync/atomic"

// Which program a sandboxed command's helper is: the engine's own
// executable, or the small helper next to it.

// selfExe is the program Prepare starts by default. The kernel resolves /proc/self/exe
// in the forked child, which is still a copy of the engine, so this is the
// engine's own binary even if the file on disk was replaced or deleted.
const selfExe = "/proc/self/exe"

// mainExe is the running executable's path, read by Main when the program
// starts.
var mainExe atomic.Value

// smallHelper is the small helper program a rootless engine starts
// instead of its own executable (see adjacentHelper), once its probe found
// one to trust; "" until then, when there is none, or once a world could
// be made only without it (makeWorld).
var smallHelper atomic.Value

// selfPath is the program a rootless engine starts as its helper: the
// small helper found next to its executable (smallHelper), else the path
// of its executable as Main found it (or /proc/self/exe). A rootless
// engine cannot use /proc/self/exe: once it made itself non-dumpable (as
// the engine does, proc.ProtectEngine) its /proc entries belong to root,
// and its children, in a user namespace of their own, may not follow the
// link.
func selfPath() string {
	if p, ok := smallHelper.Load().(string); ok && p != "" {
		return p
	}
	return ownExe()
}

// ownExe is the path of the running executable as Main found it (else
// /proc/self/exe).
func ownExe() string {
	if p, ok := mainExe.Load().(string); ok && p != "" {
		return p
	}
	return selfExe
}
