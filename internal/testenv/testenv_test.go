package testenv_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// failer records the failure and ends its goroutine, as testing.T does.
type failer struct{ msg string }

func (*failer) Helper() {}

func (f *failer) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// eventually runs Eventually on a goroutine of its own with a failer and
// returns the failure message ("" when cond came true).
func eventually(d time.Duration, cond func() bool, format string, args ...any) string {
	f := &failer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		testenv.Eventually(f, d, cond, format, args...)
	}()
	<-done
	return f.msg
}

func TestEventuallyWaits(t *testing.T) {
	n := 0
	if msg := eventually(10*time.Second, func() bool { n++; return n == 3 }, "n=%d", testenv.Last(&n)); msg != "" || n != 3 {
		t.Fatalf("n=%d, failed: %q", n, msg)
	}
}

func TestEventuallyFailsWithTheLastValue(t *testing.T) {
	n, calls := 0, 0
	start := time.Now()
	msg := eventually(50*time.Millisecond, func() bool { calls++; n = calls * 10; return false }, "n=%d (%+v)", testenv.Last(&n), struct{ A int }{7})
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("gave up after %v", d)
	}
	want := fmt.Sprintf("after 50ms: n=%d ({A:7})", calls*10)
	if calls < 2 || msg != want {
		t.Fatalf("%d calls, message %q, want %q", calls, msg, want)
	}
}

func TestLastKeepsVerbAndFlags(t *testing.T) {
	type s struct{ A string }
	v := s{"x"}
	q, k := "a\tb", 42
	got := fmt.Sprintf("%+v %v %q %5d", testenv.Last(&v), testenv.Last(&v), testenv.Last(&q), testenv.Last(&k))
	if want := `{A:x} {x} "a\tb"    42`; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// Last shows the value at the time the message is printed.
func ExampleLast() {
	n := 1
	arg := testenv.Last(&n)
	n = 2
	fmt.Printf("n=%d\n", arg)
	// Output: n=2
}
