package main

import (
	"strings"
	"testing"
)

// TestBenchSmall runs every case of the benchmark at a tiny size (the
// numbers are meaningless here; the report's shape is checked).
func TestBenchSmall(t *testing.T) {
	r := demo(t, nil, "bench", "-serial", "5", "-conc-n", "20", "-c", "8", "-flood", "8MiB", "-timeouts", "5", "-sleepers", "20", "-inproc")
	if r.code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{"serial `bash -c true`", "throughput at c=8", "8.0 MiB output throughput", "peak RSS",
		"timeout to return past deadline, p99", "restricted", "20 concurrent sleeps: goroutines per command"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in\n%s", want, r.stdout)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "256MiB": 256 << 20, "10K": 10 << 10, "1000": 1000, "1.5M": 3 << 19} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v", in, got, err)
		}
	}
	if _, err := parseSize("x"); err == nil {
		t.Error("parseSize(x) succeeded")
	}
}
