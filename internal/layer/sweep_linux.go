//go:build linux

package layer

import "sync"

// sweeper removes a store's discarded directories (dropped steps, what
// an undo took out of the tree) in the background, one at a time:
// removing files is what frees their blocks, which on some disks (ext4
// mounted with discard) costs more than everything else an apply or an
// undo does, so it is kept off their path.
type sweeper struct {
	mu      sync.Mutex
	queue   []func()
	running bool
	idle    sync.WaitGroup // held while the sweeper runs
}

// add queues dir for removal.
func (w *sweeper) add(dir string) { w.do(func() { _ = RemoveAll(dir) }) }

// do queues f.
func (w *sweeper) do(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, f)
	if !w.running {
		w.running = true
		w.idle.Add(1)
		go w.run()
	}
}

func (w *sweeper) run() {
	defer w.idle.Done()
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		f := w.queue[0]
		w.queue = w.queue[1:]
		w.mu.Unlock()
		f()
	}
}

// wait returns once everything queued is removed.
func (w *sweeper) wait() { w.idle.Wait() }
