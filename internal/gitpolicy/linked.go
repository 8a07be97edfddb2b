//go:build linux

package gitpolicy

import (
	"strings"

	"github.com/bashvisor/bashvisor/internal/layer"
)

// A linked worktree made by git worktree add: an admin directory
// worktrees/ID in an existing repository's git directory, with
// commondir "../.." and gitdir naming the worktree's .git file, which
// names the admin directory back. It is a new git directory, checked
// whole like any other; these rules let its links through when they are
// exactly what git worktree add writes.

// worktreesEntry judges worktrees/ of an existing git directory: a new
// admin directory is judged as a new git directory (around the change).
func (k *checker) worktreesEntry(e entry) verdict {
	switch {
	case len(e.parts) == 1 && e.dir, e.kind == layer.Deleted:
		return allowed // git worktree prune and remove delete admin directories
	case len(e.parts) >= 2 && e.g.existed && k.newAdmin(e.g.path+"/worktrees/"+e.parts[1]):
		return allowed
	}
	return refuse(Worktrees, "a linked worktree's admin files")
}

// isAdmin reports whether p is a linked worktree's admin directory
// (worktrees/ID of a git directory).
func (k *checker) isAdmin(p string) bool {
	parent := dirName(p)
	return baseName(parent) == "worktrees" && k.isGitDir(dirName(parent))[0]
}

// newAdmin reports whether p is a linked worktree's admin directory
// that is new: worktrees/ID of a git directory that existed, a git
// directory only after the command.
func (k *checker) newAdmin(p string) bool {
	parent := dirName(p)
	if baseName(parent) != "worktrees" || !k.isGitDir(dirName(parent))[0] {
		return false
	}
	g := k.isGitDir(p)
	return !g[0] && g[1]
}

func (k *checker) commondirEntry(e entry) verdict {
	if len(e.parts) == 1 && !e.g.existed && e.kind != layer.Deleted && k.newAdmin(e.g.path) {
		if b, why := k.read(e.path); why == "" && string(b) == "../..\n" {
			return allowed
		}
	}
	return refuse(Commondir, "a commondir file")
}

func (k *checker) gitdirEntry(e entry) verdict {
	if len(e.parts) == 1 && !e.g.existed && e.kind != layer.Deleted && k.newAdmin(e.g.path) {
		b, why := k.read(e.path)
		wt := strings.TrimSuffix(string(b), "\n")
		if why == "" && strings.HasSuffix(wt, "/.git") && k.rootOf(wt) != "" && k.gitLink(wt, true) == e.g.path {
			return allowed
		}
	}
	return refuse(Gitdir, "a gitdir file")
}

// linkedDotGit judges a new .git file in a working tree: allowed when
// it names a new admin directory that names it back and passes whole.
func (k *checker) linkedDotGit(c layer.Change) (verdict, bool) {
	if c.Kind != layer.Added || !c.Mode.IsRegular() {
		return allowed, false
	}
	g := k.gitLink(c.Path, true)
	if g == "" || !k.newAdmin(g) {
		return allowed, false
	}
	b, why := k.read(g + "/gitdir")
	if why != "" || string(b) != c.Path+"\n" {
		return allowed, false
	}
	return k.validateNew(g), true
}
