package sandbox

import "sync"

// threadRelease lets a parked thread end, once (see keep_linux.go).
type threadRelease struct {
	once sync.Once
	ch   chan struct{}
}

// close lets the thread end (nil-safe).
func (r *threadRelease) close() {
	if r != nil {
		r.once.Do(func() { close(r.ch) })
	}
}
