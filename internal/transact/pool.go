//go:build linux

package transact

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bashvisor/bashvisor/internal/layer"
)

// Bounds of the pool of layers made ahead of time (see the package
// doc, "Cost").
const (
	// spareKeys bounds the sets of roots the pool keeps a spare layer
	// for (the least recently used set is dropped first).
	spareKeys = 16
	// maxQueued bounds the background work waiting (removals and
	// refills); past it a removal is done on the caller's path and a
	// refill is skipped.
	maxQueued = 64
	// maxFree bounds the reset layers kept per key besides its spare:
	// commands back to back can begin before the last one's layer is
	// reset, and a second free layer then spares making a new one (and
	// removing one later).
	maxFree = 2
)

// pool makes the commands' layers ahead of time and removes used ones
// in the background, so that neither is on a command's path: Begin
// takes the spare layer made for the same roots (one per set of
// roots, refilled after each take and whenever roots asked for before
// have none; the first Begin over a set of roots queues none, its
// layer, recycled, being the first spare) and a committed layer is removed
// after its report is returned, or, when its command's processes are
// all gone, reset (layer.Layer.Reset, once the thread that kept the
// command's mount namespace ended) and kept to be the next spare of its
// roots instead of a new one (a refill then leaves the spare to it): a
// conversation's commands in one workspace then cycle two layers'
// directories (three when they come back to back, see maxFree), and no
// directory is made or removed per command. One goroutine does the
// work, in order; close waits for it, removing every queued, spare and
// free layer.
type pool struct {
	opts     layer.Options // Dir and UserXattr
	premount bool          // Options.Premount
	work     chan func()
	done     chan struct{}
	waiters  sync.WaitGroup // recycles waiting for their command's namespace to end
	mu       sync.Mutex
	spare    map[string]*layer.Layer   // by key (see key)
	free     map[string][]*layer.Layer // reset layers, by key: the next spares' directories (at most maxFree)
	keyOf    map[*layer.Layer]string   // the key each layer the pool made was made for
	pending  map[string]int            // recycles under way, by key
	keys     []string                  // keys recently asked for, least recently used first
	closed   bool
}

func newPool(dir string, userXattr, premount bool, lockWait time.Duration) *pool {
	p := &pool{
		opts:     layer.Options{Dir: dir, UserXattr: userXattr, LockWait: lockWait},
		premount: premount,
		work:     make(chan func(), maxQueued),
		done:     make(chan struct{}),
		spare:    map[string]*layer.Layer{},
		free:     map[string][]*layer.Layer{},
		keyOf:    map[*layer.Layer]string{},
		pending:  map[string]int{},
	}
	go p.run()
	return p
}

func (p *pool) run() {
	defer close(p.done)
	for f := range p.work {
		f()
	}
}

// queue runs f on the pool's goroutine; false when the queue is full
// or the pool closed (f does not run).
func (p *pool) queue(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	select {
	case p.work <- f:
		return true
	default:
		return false
	}
}

// key identifies a set of roots: their absolute paths with symlinks
// resolved, so that a spare is never used for other directories than
// it was made for ("" when one cannot be resolved).
func key(roots []string) string {
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			return ""
		}
		e, err := filepath.EvalSymlinks(r)
		if err != nil {
			return ""
		}
		out = append(out, e)
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), "\x00")
}

// layer returns a layer over roots, whose key is k: the spare one when
// it still fits them, otherwise a new one. A new spare is made in the background
// once the roots were asked for before: the first Begin over a set of
// roots queues none (a one-command engine would only make and remove
// it), its layer, recycled, being the next spare.
func (p *pool) layer(k string, roots []string) (*layer.Layer, error) {
	if k != "" {
		p.mu.Lock()
		l := p.spare[k]
		delete(p.spare, k)
		seen := slices.Contains(p.keys, k)
		p.mu.Unlock()
		p.refill(k, roots, l != nil || seen)
		if l != nil && !l.Stale() {
			return l, nil
		}
		if l != nil {
			p.remove(l)
		}
	}
	l, err := p.newLayer(k, roots)
	if err == nil {
		// On the command's path, where the sandbox would make the
		// overlays otherwise; held here, later commands can join them
		// (Tx.Background).
		p.prepare(l)
	}
	return l, err
}

// made records that l was made for key k ("": none), for recycle.
func (p *pool) made(l *layer.Layer, k string) {
	if k == "" {
		return
	}
	p.mu.Lock()
	p.keyOf[l] = k
	p.mu.Unlock()
}

// newLayer returns the free (reset) layer of key k when it still fits
// its roots, else a new layer over roots.
func (p *pool) newLayer(k string, roots []string) (*layer.Layer, error) {
	if k == "" {
		opts := p.opts
		opts.Roots = roots
		return layer.New(opts)
	}
	p.mu.Lock()
	var l *layer.Layer
	if f := p.free[k]; len(f) > 0 {
		l = f[len(f)-1]
		if p.free[k] = f[:len(f)-1]; len(p.free[k]) == 0 {
			delete(p.free, k)
		}
	}
	p.mu.Unlock()
	if l != nil && !l.Stale() {
		return l, nil
	}
	if l != nil {
		p.drop(l)
	}
	opts := p.opts
	opts.Roots = roots
	l, err := layer.New(opts)
	if err == nil {
		p.made(l, k)
	}
	return l, err
}

// prepare premounts l (Options.Premount), or else has its overlays
// held once the sandbox made them (layer.Layer.Hold), so that later
// commands can join it.
func (p *pool) prepare(l *layer.Layer) {
	if !p.premount || l.Premount() != nil {
		l.Hold()
	}
}

// refill marks key most recently used, dropping the spare of the least
// recently used key past spareKeys, and, when ahead is set, makes the
// key's spare layer in the background, unless one is there or queued or
// a recycle will fill it.
func (p *pool) refill(k string, roots []string, ahead bool) {
	p.mu.Lock()
	p.keys = append(slices.DeleteFunc(p.keys, func(x string) bool { return x == k }), k)
	var drop *layer.Layer
	if len(p.keys) > spareKeys {
		old := p.keys[0]
		p.keys = p.keys[1:]
		drop = p.spare[old]
		delete(p.spare, old)
		for _, f := range p.free[old] {
			defer p.remove(f)
		}
		delete(p.free, old)
	}
	p.mu.Unlock()
	if drop != nil {
		p.remove(drop)
	}
	if !ahead || p.has(k) {
		return
	}
	roots = slices.Clone(roots)
	p.queue(func() {
		p.mu.Lock()
		skip := p.spare[k] != nil || p.pending[k] > 0 // a recycle will fill it
		p.mu.Unlock()
		if skip {
			return
		}
		l, err := p.newLayer(k, roots)
		if err != nil {
			return // Begin makes one on its path, and reports the error
		}
		p.prepare(l)
		p.mu.Lock()
		keep := !p.closed && p.spare[k] == nil && slices.Contains(p.keys, k)
		if keep {
			p.spare[k] = l
		}
		p.mu.Unlock()
		if !keep {
			p.drop(l)
		}
	})
}

// has reports whether key has a spare layer.
func (p *pool) has(k string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spare[k] != nil
}

// remove removes l in the background (on the caller's path when the
// queue is full or the pool closed).
func (p *pool) remove(l *layer.Layer) {
	if !p.queue(func() { p.drop(l) }) {
		p.drop(l)
	}
}

// recycle takes back l, whose command's processes are all gone: in the
// background it is reset and kept as a free layer of its key, when the
// pool made it for a key still in use that has fewer than maxFree;
// otherwise it is removed (on the caller's path when the queue is full
// or the pool closed).
func (p *pool) recycle(l *layer.Layer) {
	// The command's parked thread may still be tearing its mount
	// namespace down (layer.Spec.MountedBy): wait for it here, not on
	// the pool's goroutine, whose refills must not wait behind it.
	p.mu.Lock()
	k, known := p.keyOf[l]
	closed := p.closed
	if !closed && known { // under the lock: before close's Wait
		p.pending[k]++
		p.waiters.Go(func() {
			if l.WaitUnmounted(recycleWait) != nil {
				p.drop(l)
				p.done1(k)
				return
			}
			p.reset(l, k)
		})
	}
	p.mu.Unlock()
	if closed || !known {
		p.drop(l)
	}
}

// done1 counts a recycle of key k as done.
func (p *pool) done1(k string) {
	p.mu.Lock()
	if p.pending[k]--; p.pending[k] <= 0 {
		delete(p.pending, k)
	}
	p.mu.Unlock()
}

// recycleWait bounds how long a layer being recycled waits for its
// command's mount namespace to end.
const recycleWait = 5 * time.Second

// reset resets l, of key k, on the pool's goroutine and keeps it: as
// the key's spare (prepared) when it has none, a refill having left it
// to this recycle, else as its free layer (see recycle).
func (p *pool) reset(l *layer.Layer, k string) {
	ok := p.queue(func() {
		defer p.done1(k)
		p.mu.Lock()
		inUse := !p.closed && slices.Contains(p.keys, k)
		asSpare := inUse && p.spare[k] == nil
		asFree := inUse && !asSpare && len(p.free[k]) < maxFree
		p.mu.Unlock()
		if !(asSpare || asFree) || l.Reset() != nil {
			p.drop(l)
			return
		}
		if asSpare {
			p.prepare(l)
		}
		p.mu.Lock()
		kept := true
		switch {
		case p.closed:
			kept = false
		case asSpare && p.spare[k] == nil:
			p.spare[k] = l
		case !asSpare && len(p.free[k]) < maxFree:
			p.free[k] = append(p.free[k], l)
		default:
			kept = false
		}
		p.mu.Unlock()
		if !kept {
			p.drop(l)
		}
	})
	if !ok {
		p.drop(l)
		p.done1(k)
	}
}

// drop removes l and forgets its key.
func (p *pool) drop(l *layer.Layer) {
	p.mu.Lock()
	delete(p.keyOf, l)
	p.mu.Unlock()
	_ = l.Remove()
}

// close removes the spare layers and waits until the queued work is
// done (queued removals included). Later removals are done on the
// caller's path.
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		return
	}
	p.closed = true
	spare, free := p.spare, p.free
	p.spare, p.free, p.keys = map[string]*layer.Layer{}, map[string][]*layer.Layer{}, nil
	close(p.work)
	p.mu.Unlock()
	<-p.done
	p.waiters.Wait() // they find the pool closed: each removes its layer
	for _, l := range spare {
		p.drop(l)
	}
	for _, ls := range free {
		for _, l := range ls {
			p.drop(l)
		}
	}
}
