//go:build linux

package sandbox

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func BenchmarkBuildFilter(b *testing.B) {
	for b.Loop() {
		if _, err := buildFilter(filterOpts{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScratchCreateRemove(b *testing.B) {
	for b.Loop() {
		d, err := os.MkdirTemp("", scratchPrefix)
		if err != nil {
			b.Fatal(err)
		}
		os.Mkdir(d+"/.cache", 0o700)
		if err := removeScratch(d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConfineThread measures the confinement steps on a throwaway
// thread (locked, never unlocked, so it dies with its goroutine).
func BenchmarkConfineThread(b *testing.B) {
	if !Probe().Available() {
		b.Skip("unavailable")
	}
	dir := b.TempDir()
	var landlockT, seccompT, capsT time.Duration
	for b.Loop() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			t0 := time.Now()
			if err := dropCapabilities(); err != nil {
				b.Error(err)
			}
			t1 := time.Now()
			if err := applyLandlock(helperConfig{Scratch: dir}); err != nil {
				b.Error(err)
			}
			t2 := time.Now()
			if err := installSeccomp(filterOpts{}); err != nil {
				b.Error(err)
			}
			t3 := time.Now()
			capsT += t1.Sub(t0)
			landlockT += t2.Sub(t1)
			seccompT += t3.Sub(t2)
		}()
		<-done
	}
	n := float64(b.N)
	b.ReportMetric(float64(capsT.Microseconds())/n, "caps-µs")
	b.ReportMetric(float64(landlockT.Microseconds())/n, "landlock-µs")
	b.ReportMetric(float64(seccompT.Microseconds())/n, "seccomp-µs")
}

// TestLayerNeedsNamespaces: without private namespaces a layer is
// refused with ErrUnavailable, never run without its overlay.
func TestLayerNeedsNamespaces(t *testing.T) {
	err := needNamespaces(Capabilities{Reason: "no namespaces here"}, Roots{Writable: []string{"/w"}}, false, true)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "copy-on-write layer") {
		t.Fatalf("needNamespaces with a layer: %v", err)
	}
	if err := needNamespaces(Capabilities{Namespaces: true}, Roots{}, false, true); err != nil {
		t.Fatal(err)
	}
}
