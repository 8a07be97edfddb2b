package main

import (
	"strings"
	"testing"
)

// TestStressSmall runs a small mix and expects every check to be 0.
func TestStressSmall(t *testing.T) {
	r := demo(t, nil, "stress", "-n", "150", "-c", "16", "-seed", "7", "-no-progress")
	if r.code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{"lost results:       0", "wrong results:      0", "orphan processes:   0", "leaked goroutines:  0", "leaked fds:         0", "PASS"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in\n%s", want, r.stdout)
		}
	}
}
