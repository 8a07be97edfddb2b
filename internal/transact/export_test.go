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

// HoldTurn takes c's turn, as an apply, undo or accept of c would, until
// the returned function is called.
func HoldTurn(c *Conv) (release func()) {
	c.lock()
	return c.unlock
}

// Ending reports whether t's Commit or Abort began.
func Ending(t *Tx) bool { return t.ended() }

// ShareBusy reports whether a call holds the lock of t's layer's
// members (a member's end or a checkpoint under way).
func ShareBusy(t *Tx) bool {
	if t.sh.mu.TryLock() {
		t.sh.mu.Unlock()
		return false
	}
	return true
}
