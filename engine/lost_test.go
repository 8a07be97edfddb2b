package engine_test

import (
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

func TestLostText(t *testing.T) {
	got := engine.LostText("exec-2", 12345*time.Millisecond)
	want := "[command lost: executor exec-2 stopped answering 12.3s into the command; it may have finished or may still be running; it was not re-run]"
	if got != want {
		t.Errorf("LostText = %q, want %q", got, want)
	}
	if got := engine.LostText("x", -time.Second); got != "[command lost: executor x stopped answering 0.0s into the command; it may have finished or may still be running; it was not re-run]" {
		t.Errorf("negative duration: %q", got)
	}
}
