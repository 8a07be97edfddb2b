//go:build linux

package gitpolicy

import (
	"slices"
	"sync"
	"time"
)

// A repository anywhere below a root may name code outside itself
// (core.hooksPath = ../hooks, core.fsmonitor = /ws/tools/fsm.sh,
// include.path = ../../shared.gitconfig) that no change of the command
// is inside: every repository under the layer's roots before the
// command is found by a walk of the tree, and its effective
// configuration is read like those around the changes.

// repoAt is a repository a walk found: its git directory and the
// directory git runs it in (its working tree, or the bare
// repository's parent).
type repoAt struct{ gitdir, wt string }

// maxWalkEntries bounds the entries one walk of a root looks at; the
// repositories beyond them are not found (those around the changes
// still are).
const maxWalkEntries = 1_000_000

// walkValidity is how long the repositories found under a root are
// reused by later checks of the same root.
const walkValidity = 2 * time.Second

// walks caches the repositories found under each root.
var walks = struct {
	sync.Mutex
	m map[string]walked
}{m: map[string]walked{}}

type walked struct {
	at    time.Time
	repos []repoAt
}

// allRepositories reads the configuration of every repository under
// root before the command (walked once per walkValidity).
func (k *checker) allRepositories(root string) {
	walks.Lock()
	w, ok := walks.m[root]
	walks.Unlock()
	if !ok || time.Since(w.at) > walkValidity {
		w = walked{at: time.Now(), repos: k.walkRepos(root)}
		walks.Lock()
		for r, old := range walks.m { // forget stale roots
			if time.Since(old.at) > walkValidity {
				delete(walks.m, r)
			}
		}
		walks.m[root] = w
		walks.Unlock()
	}
	for _, r := range w.repos {
		if !k.repos[r.gitdir] {
			k.repos[r.gitdir] = true
			k.repoConfig(r.gitdir, r.wt, k.code)
		}
	}
}

// walkRepos returns the repositories below root before the command: a
// directory with a .git (directory or gitdir: file), or one holding
// HEAD, objects and refs (a bare repository). It follows no symlink
// and does not descend into a git directory.
func (k *checker) walkRepos(root string) []repoAt {
	var out []repoAt
	n := 0
	var walk func(d string)
	walk = func(d string) {
		names, err := k.v.ReadDir(d, false)
		if err != nil || n > maxWalkEntries {
			return
		}
		n += len(names)
		has := func(name string) bool { _, ok := slices.BinarySearch(names, name); return ok }
		if has("HEAD") && has("objects") && has("refs") {
			out = append(out, repoAt{d, dirName(d)})
			return
		}
		if has(".git") {
			if g := k.gitLink(d+"/.git", false); g != "" {
				out = append(out, repoAt{g, d})
			}
		}
		for _, name := range names {
			if name == ".git" {
				continue
			}
			p := d + "/" + name
			if fi, err := k.v.Lstat(p, false); err == nil && fi.IsDir() {
				walk(p)
			}
		}
	}
	walk(root)
	return out
}
