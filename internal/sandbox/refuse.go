package sandbox

import (
	"fmt"
	"path/filepath"
)

// kernelDirs hold the kernel's own file systems: a command's view shows
// them as they are, but no sandboxed command may change them, and no
// copy-on-write layer can be made over them.
var kernelDirs = []string{"/proc", "/sys", "/dev"}

// CheckWorkspace refuses, naming the reason, a working directory dir
// ("": none, the command starts at the root) and writable roots that a sandboxed command of
// the world cannot have as they are on the host, the same way for root
// and rootless engines:
//
//   - dir, or a writable root, that is /tmp, or a writable root that
//     holds /tmp (such as /): the conversation's own /tmp replaces the
//     host's in every command's view (see World), so the command would
//     start in, or write to, a directory other than the one asked for;
//   - a writable root that holds one of the engine's directories the
//     world hides ([WorldOptions.Hide]): the root's view would show them
//     again, and the engine's layers there would be the command's to write;
//   - a writable root in /proc, /sys or /dev, the kernel's file systems;
//   - a relative dir or root: the command starts in its namespaces,
//     where it would be taken from their root, not this process's
//     directory (the engine makes a call's directory absolute first).
//
// A directory below /tmp is fine (the world shows it at its path), and
// so is a read-only command working in /, /proc or /dev. Paths that do
// not exist pass (the start reports them). [Prepare] checks its command;
// a caller that makes a copy-on-write layer over the roots before
// Prepare (package transact) calls this first, so the refusal comes
// before the layer. A nil World checks only the kernel's directories.
func (w *World) CheckWorkspace(dir string, writable []string) error {
	var iw *world
	if w != nil {
		iw = w.w
	}
	return checkWorkspace(iw, dir, writable)
}

func checkWorkspace(w *world, dir string, writable []string) error {
	for _, p := range append([]string{dir}, writable...) {
		if p != "" && !filepath.IsAbs(p) {
			return fmt.Errorf("sandbox: the directory %s is relative: a sandboxed command needs an absolute one", p)
		}
	}
	resolve := func(p string) string {
		if p == "" {
			return "" // none: the command starts at its view's root
		}
		r, err := filepath.EvalSymlinks(p)
		if err != nil || !filepath.IsAbs(r) {
			return "" // reported where it is used
		}
		return r
	}
	if w != nil && resolve(dir) == "/tmp" {
		return fmt.Errorf("sandbox: the working directory /tmp is not the host's in the sandbox (the conversation's own /tmp replaces it): run the command in a directory below /tmp or elsewhere")
	}
	for _, root := range writable {
		r := resolve(root)
		if r == "" {
			continue
		}
		if w != nil && within("/tmp", r) {
			return fmt.Errorf("sandbox: the workspace %s holds /tmp, which the conversation's own /tmp replaces in the sandbox: a workspace-write command needs a workspace that does not hold /tmp", r)
		}
		for _, k := range kernelDirs {
			if within(r, k) {
				return fmt.Errorf("sandbox: the workspace %s is on the kernel's file systems (%s), which a sandboxed command cannot change", r, k)
			}
		}
		if w == nil {
			continue
		}
		for _, h := range w.hide {
			if hr := resolve(h); hr != "" && within(hr, r) {
				return fmt.Errorf("sandbox: the workspace %s holds the engine's directory %s, which sandboxed commands must not see: choose a workspace that does not hold it, or keep the engine's state elsewhere", r, hr)
			}
		}
	}
	return nil
}
