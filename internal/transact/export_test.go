//go:build linux

package transact

// SetBeforeAcceptApply sets the hook Accept runs between its conflict
// check and the apply (nil: none).
func SetBeforeAcceptApply(f func()) { beforeAcceptApply = f }

// Settle waits until the recycles m's pool started and the work queued
// before and by them are done.
func Settle(m *Manager) {
	m.pool.waiters.Wait()
	done := make(chan struct{})
	if m.pool.queue(func() { close(done) }) {
		<-done
	}
}

// Busy reports whether a call of c holds its turn (an apply, an undo,
// an accept).
func Busy(c *Conv) bool { return len(c.turn) == 1 }
