package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestStressSmall runs a small mix and expects every check to be 0.
func TestStressSmall(t *testing.T) {
	var out, errb bytes.Buffer
	code := cmdStress([]string{"-n", "150", "-c", "16", "-seed", "7", "-no-progress"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"lost results:       0", "orphan processes:   0", "leaked goroutines:  0", "leaked fds:         0", "PASS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
}

func TestStressFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cmdStress([]string{"-n", "0"}, &out, &errb); code != exitUsage {
		t.Fatalf("exit %d", code)
	}
}
