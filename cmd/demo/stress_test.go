package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStressSmall runs a small mix in three conversations and expects
// every check to be 0; the mix includes the interactive kinds (yield,
// stdin).
func TestStressSmall(t *testing.T) {
	r := demo(t, nil, "stress", "-n", "150", "-c", "16", "-tenants", "3", "-seed", "7", "-no-progress")
	if r.code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{"in 3 conversations", "lost results:       0", "busy results:       0", "wrong results:      0", "orphan processes:   0", "leaked goroutines:  0", "leaked fds:         0", "PASS"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in\n%s", want, r.stdout)
		}
	}
	mix := regexp.MustCompile(`(?m)^mix: (.*)$`).FindStringSubmatch(r.stdout)
	if mix == nil {
		t.Fatalf("no mix line in\n%s", r.stdout)
	}
	for _, kind := range []string{"yield", "stdin"} {
		if !regexp.MustCompile(`(^|, )` + kind + ` [1-9]`).MatchString(mix[1]) {
			t.Errorf("kind %s not in the mix: %s", kind, mix[1])
		}
	}
}

// Into a log (stderr not a terminal) progress comes as plain lines, never
// as carriage-return frames.
func TestStressProgressIntoALog(t *testing.T) {
	// -timeout 1s: the timeout kinds alone make the run last over a second,
	// many periods of 100ms.
	r := demo(t, nil, "stress", "-n", "60", "-c", "8", "-seed", "3", "-timeout", "1s", "-progress-every", "100ms")
	if r.code != 0 {
		t.Fatal(r)
	}
	if strings.Contains(r.stderr, "\r") {
		t.Errorf("carriage returns in a non-terminal stderr: %q", r.stderr)
	}
	if !strings.Contains(r.stderr, "/60 commands done after ") {
		t.Errorf("no progress line in %q", r.stderr)
	}
}

// Without cgroups too, nothing leaks: the checks after the run probe
// cgroups all the same, and what the probe opens once for the process is
// part of the baseline.
func TestStressNoCgroups(t *testing.T) {
	r := demo(t, nil, "stress", "-n", "60", "-c", "8", "-seed", "11", "-no-cgroups", "-no-progress")
	if r.code != 0 || !strings.Contains(r.stdout, "leaked fds:         0") {
		t.Fatal(r)
	}
}

// TestSharesCheck: the fair-shares check fails a victim slowed by the
// heavy principal (every echo 10x slower, or the engine's CPU per echo
// grown by milliseconds) or refused busy.
func TestSharesCheck(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * 1e6) }
	alone := sharesSample{echo: ms(1), cpu: ms(0.3)}
	for _, c := range []struct {
		name   string
		loaded sharesSample
		busy   int
		want   bool
	}{
		{"unchanged", alone, 0, true},
		{"within twice and the slack", sharesSample{echo: ms(3.9), cpu: ms(1.5)}, 0, true},
		{"echo 10x slower", sharesSample{echo: ms(10.3), cpu: ms(0.4)}, 0, false},
		{"engine CPU +2 ms per echo", sharesSample{echo: ms(1), cpu: ms(2.3)}, 0, false},
		{"refused busy", alone, 1, false},
	} {
		if got := (sharesReport{alone: alone, loaded: c.loaded, busy: c.busy}).ok(); got != c.want {
			t.Errorf("%s: ok() = %v, want %v", c.name, got, c.want)
		}
	}
}
