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
// is inside: every repository under a root that holds changes is found
// by a walk of the tree before the command, and its effective
// configuration is read (fresh, at every check) like those around the
// changes. A walk costs a directory read per directory and an lstat
// per entry (about 0.4 s for 20,000 directories here), so the list of
// repositories under a root is reused for walkValidity.

// repoAt is a repository a walk found: its git directory and the
// directory git runs its hooks in (its working tree; a bare
// repository's git directory).
type repoAt struct{ gitdir, wt string }

// maxWalkEntries bounds the entries one walk of a root looks at; the
// repositories beyond them are not found (those around the changes
// still are).
const maxWalkEntries = 1_000_000

// walkValidity is how long the repositories found under a root are
// reused by later checks of the same root. A repository made or moved
// there from outside the sandbox within it is not read (one a
// sandboxed command made keeps only settings that run nothing:
// [NewConfig]; one a command moves is judged as new where it lands).
const walkValidity = 10 * time.Second

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
		key := r.gitdir
		if r.wt == r.gitdir {
			key += "\x00bare" // repositories read it with its parent as working tree
		}
		if !k.repos[key] {
			k.repos[key] = true
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
			// git runs a bare repository's hooks in it: a relative
			// core.hooksPath starts there.
			out = append(out, repoAt{d, d})
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

// holdsChanges reports whether a change of the command lies under root.
func (k *checker) holdsChanges(root string) bool {
	for _, c := range k.changes {
		if k.rootOf(c.Path) == root {
			return true
		}
	}
	return false
}
