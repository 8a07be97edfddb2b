package cluster

import (
	"testing"
	"time"
)

func TestLostText(t *testing.T) {
	got := lostText("exec-2", 12345*time.Millisecond)
	want := "[command lost: executor exec-2 stopped answering 12.3s into the command; it may have finished or may still be running; it was not re-run]"
	if got != want {
		t.Errorf("lostText = %q, want %q", got, want)
	}
	if got := lostText("x", -time.Second); got != "[command lost: executor x stopped answering 0.0s into the command; it may have finished or may still be running; it was not re-run]" {
		t.Errorf("negative duration: %q", got)
	}
}
