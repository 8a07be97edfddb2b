package cluster

import "testing"

// TestWindowReturnsOnlyWhatWasSent: a peer that says it received (or
// acknowledges) more than was sent gives the link back only what the
// stream took from it, so a lying executor cannot lift the link's bound.
func TestWindowReturnsOnlyWhatWasSent(t *testing.T) {
	link := &credit{free: linkWindow, grew: make(chan struct{})}
	w := &window{link: link, more: make(chan struct{}, 1), stop: make(chan struct{})}
	if !w.take(32 << 10) {
		t.Fatal("take")
	}
	w.received(1 << 40)
	w.ack(1 << 40)
	w.end()
	if link.free != linkWindow {
		t.Fatalf("the link's credit is %d after a stream that sent 32 KiB ended, want %d", link.free, linkWindow)
	}
}
