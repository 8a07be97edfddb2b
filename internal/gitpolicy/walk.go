//go:build linux

package gitpolicy

import (
	"sync"
	"sync/atomic"
	"time"
)

// A repository anywhere below a root may name code outside itself
// (core.hooksPath = ../hooks, core.fsmonitor = /ws/tools/fsm.sh,
// include.path = ../../shared.gitconfig) that no change of the command
// is inside: every repository under a root that holds changes is found
// by a walk of the tree before the command (the real tree: the
// command's changes are in its layer), and its effective configuration
// is read (fresh, at every check) like those around the changes.
//
// The walk is off the command's path: [Prefetch], called when the
// command's transaction begins, walks its roots while the command runs
// and again every walkRefresh until the command ends; a check uses the
// newest walk that began after the latest Prefetch of its root, waiting
// for it if it still runs, or walks itself when there is none (a
// caller that did not prefetch). Each walk after the first reads only
// the directories whose change time, device or inode changed (a stat
// each), and those changed within racyMargin of the last walk.

// maxWalkDirs bounds the directories one walk of a root looks at (a
// directory's names cost little to read; each directory an open and a
// read, or a stat to revalidate). A walk that reaches it, or cannot
// read a directory, fails closed: the check holds every change below
// the root that is not data inside a git directory that existed
// before ([Walk]), since the repositories it did not find may name
// any of them as code. A var for tests.
var maxWalkDirs = 1_000_000

// walkRefresh is how long after a walk of a root ends the next begins,
// while a command that prefetched the root runs. A check reads the
// repositories that the newest walk begun after its command's Prefetch
// found: one that a process outside the sandbox makes or moves below a
// root while the command runs, after that walk passed its directory,
// is read at the next command's check; one made between two commands
// at the second's. A repository a sandboxed command makes keeps only
// settings that run nothing ([NewConfig]); one a command moves is
// judged as new where it lands.
var walkRefresh = 10 * time.Second

// walkKeep is how long the tree a walk recorded is kept, unused, for the
// next walk of its root to revalidate (a few MiB for 100,000
// directories).
const walkKeep = 5 * time.Minute

// walks holds, per root, what the last walk found and the walk under
// way; cond is broadcast when a walk ends or a loop is told to stop.
var walks = struct {
	sync.Mutex
	cond *sync.Cond
	m    map[string]*rootWalk
}{m: map[string]*rootWalk{}}

func init() { walks.cond = sync.NewCond(&walks.Mutex) }

// rootWalk is the walks of one root. Guarded by walks.
type rootWalk struct {
	root  string
	tree  *dirNode   // for the next walk to revalidate
	found []repoCand // what the last walk found
	// missed says why the last walk did not look everywhere ("": it did).
	missed string
	start  time.Time // when the last walk began (zero: none)
	end    time.Time // when it ended (the next refresh is walkRefresh after)
	asked  time.Time // the latest Prefetch: a check needs a walk begun after it
	users  int       // Prefetch calls not yet released
	busy   bool      // a walk runs (one per root at a time)
	loop   *walkLoop // the background walker while users > 0
}

// walkLoop is the goroutine that walks a root while commands that
// prefetched it run.
type walkLoop struct {
	stop atomic.Bool
	poke chan struct{} // wakes it to walk now (a check waits)
	done chan struct{} // closed when it has returned
}

// Prefetch starts walking roots (the layer's roots of a command that is
// about to run) for repositories, in the background, so that the check
// of the command's changes finds the list made; the walk is repeated
// every walkRefresh while the command runs. Call release once the
// command's changes are checked (or it never ran): it stops the walks
// no other command needs and waits until they have stopped. Each root
// is walked by one goroutine at a time.
func Prefetch(roots []string) (release func()) {
	walks.Lock()
	now := time.Now()
	for _, r := range roots {
		rw := rootOfWalks(r)
		rw.users++
		rw.asked = now
		if rw.loop == nil {
			rw.loop = &walkLoop{poke: make(chan struct{}, 1), done: make(chan struct{})}
			go rw.run(rw.loop)
		} else {
			rw.loop.wake()
		}
	}
	walks.Unlock()
	var once sync.Once
	return func() { once.Do(func() { unprefetch(roots) }) }
}

func unprefetch(roots []string) {
	var stopped []*walkLoop
	walks.Lock()
	for _, r := range roots {
		rw := walks.m[r]
		if rw.users--; rw.users == 0 {
			lp := rw.loop
			rw.loop = nil
			lp.stop.Store(true)
			lp.wake()
			stopped = append(stopped, lp)
		}
	}
	walks.cond.Broadcast()
	walks.Unlock()
	for _, lp := range stopped {
		<-lp.done
	}
}

func (lp *walkLoop) wake() {
	select {
	case lp.poke <- struct{}{}:
	default:
	}
}

// rootOfWalks returns root's entry, made if missing, and forgets the
// trees of roots unused for walkKeep. walks is held.
func rootOfWalks(root string) *rootWalk {
	for r, rw := range walks.m {
		if rw.users == 0 && !rw.busy && time.Since(rw.start) > walkKeep {
			delete(walks.m, r)
		}
	}
	rw := walks.m[root]
	if rw == nil {
		rw = &rootWalk{root: root}
		walks.m[root] = rw
	}
	return rw
}

// run walks rw's root while lp is not stopped: when a Prefetch or a
// check asks for a walk newer than the last, and every walkRefresh.
func (rw *rootWalk) run(lp *walkLoop) {
	defer close(lp.done)
	walks.Lock()
	defer walks.Unlock()
	for !lp.stop.Load() {
		switch {
		case rw.busy:
			walks.cond.Wait()
		case !rw.start.After(rw.asked) || time.Since(rw.end) >= walkRefresh:
			rw.walk(&lp.stop)
		default:
			t := time.NewTimer(walkRefresh - time.Since(rw.end))
			walks.Unlock()
			select {
			case <-lp.poke:
			case <-t.C:
			}
			t.Stop()
			walks.Lock()
		}
	}
}

// walk walks rw's root once (stop: give up when set) and keeps what it
// found. walks is held, and released while it walks.
func (rw *rootWalk) walk(stop *atomic.Bool) {
	rw.busy = true
	prev := rw.tree
	start := time.Now()
	walks.Unlock()
	tree, found, missed, ok := walkTree(rw.root, prev, stop)
	walks.Lock()
	rw.busy = false
	if ok && start.After(rw.start) {
		rw.tree, rw.found, rw.missed, rw.start, rw.end = tree, found, missed, start, time.Now()
	}
	walks.cond.Broadcast()
}

// foundBelow returns the repositories below root before the command: from a
// walk begun after the latest Prefetch of root (waiting for it), or, for
// a root no Prefetch holds, from a walk begun now; and why that walk
// did not look everywhere ("": it did).
func foundBelow(root string) (cands []repoCand, missed string) {
	walks.Lock()
	defer walks.Unlock()
	rw := rootOfWalks(root)
	need := rw.asked
	if rw.users == 0 {
		need = time.Now()
	}
	for !rw.start.After(need) {
		switch {
		case rw.busy:
			walks.cond.Wait()
		case rw.loop != nil:
			rw.loop.wake()
			walks.cond.Wait()
		default:
			rw.walk(nil)
		}
	}
	return rw.found, rw.missed
}

// allRepositories reads the configuration of every repository found
// below a root before the command (cands: foundBelow's).
func (k *checker) allRepositories(cands []repoCand) {
	for _, c := range cands {
		r := repoAt{wt: c.dir}
		switch c.kind {
		case bareRepo:
			// git runs a bare repository's hooks in it: a relative
			// core.hooksPath starts there.
			r.gitdir = c.dir
		default:
			if r.gitdir = k.gitLink(c.dir+"/.git", false); r.gitdir == "" {
				continue
			}
		}
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

// repoAt is a repository a walk found: its git directory and the
// directory git runs its hooks in (its working tree; a bare
// repository's git directory).
type repoAt struct{ gitdir, wt string }

// holdsChanges reports whether a change of the command lies under root.
func (k *checker) holdsChanges(root string) bool {
	for _, c := range k.changes {
		if k.rootOf(c.Path) == root {
			return true
		}
	}
	return false
}
