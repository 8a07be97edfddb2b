package cluster_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
)

// TestLostThroughEveryFront is an oracle over randomised timings: a
// conversation placed through front A on exec-2, whose first call was
// answered from there, is answered lost (ErrConversationLost, or a lost
// call) through either front once exec-2 is killed, and never run
// afresh elsewhere. A's link to exec-1 is slow (a proxy delays A's bytes
// to exec-1 by 1.5 to 2.5 s; the answers pass at once), so that the
// record A leaves on exec-1 is still on the way when the placing call's
// result is out: B, which never saw the conversation, asks exec-1. Each
// round restarts exec-2 at its address, picks a new conversation that
// rendezvous hashing puts on exec-2, and kills exec-2 either after the
// call returned or while it runs, after a random delay; the fronts are
// asked in a random order (B first in the first round). Before the
// records were acknowledged, B placed the conversation afresh on exec-1
// and answered ok (then A too, finding it there): the CI failure of
// TestTwoFrontsStatic.
func TestLostThroughEveryFront(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	mark := t.Name()
	dir := t.TempDir()
	addr1, addr2 := "127.0.0.1:"+strconv.Itoa(freePort(t)), "127.0.0.1:"+strconv.Itoa(freePort(t))
	startExec := func(name, addr string) *proc {
		return startExecutor(t, execSpec{name: name, listen: addr, mark: mark, fenceAfter: fenceAfter, scratch: t.TempDir()})
	}
	// exec-1 is reached through the link (its address, as protoactor
	// routes by it); the link slows the connection A makes, not B's.
	link := startSlowLink(t, addr1)
	ex1 := startExecutor(t, execSpec{name: "exec-1", listen: addr1, advertised: link.addr(), mark: mark, fenceAfter: fenceAfter, scratch: t.TempDir()})
	ex2 := startExec("exec-2", addr2)
	env := []string{"BV_EXECUTORS=" + link.addr() + "," + addr2, "BV_WAIT=2", "BV_KEEP=1"}
	link.slowNew(true)
	a := startFront(t, "A", env...)
	link.slowNew(false)
	b := startFront(t, "B", env...)
	run := func(f *frontProc, conv, command string) frontReply {
		return f.do(frontRequest{Op: "run", Conv: conv, Dir: dir, Command: command})
	}
	const rounds = 4
	for round := range rounds {
		if round > 0 {
			ex2 = startExec("exec-2", addr2)
			for _, f := range []*frontProc{a, b} {
				if w := f.do(frontRequest{Op: "wait", N: 2}); w.Err != "" {
					t.Fatalf("round %d: front %s: %s", round, f.name, w.Err)
				}
			}
		}
		conv := ""
		for i := 0; conv == ""; i++ {
			if c := fmt.Sprintf("r%d-%d", round, i); cluster.Prefers(c, ex2.id, ex1.id) {
				conv = c
			}
		}
		delay := 1500*time.Millisecond + upTo(rng, time.Second)
		link.setDelay(delay)
		// While the call runs: after A's lookup, which the link slows
		// by its delay, and about when exec-2 starts the command.
		during := round%2 == 1
		kill := upTo(rng, 300*time.Millisecond)
		if during {
			kill = delay + upTo(rng, 700*time.Millisecond)
		}
		var first frontReply
		if during {
			done := make(chan frontReply, 1)
			go func() { done <- run(a, conv, "sleep 0.3; echo $BV_NAME") }()
			time.Sleep(kill)
			ex2.signal(syscall.SIGKILL)
			first = <-done
		} else {
			first = run(a, conv, "echo $BV_NAME")
			time.Sleep(kill)
			ex2.signal(syscall.SIGKILL)
		}
		<-ex2.done
		t.Logf("round %d: %s, link delay %s, exec-2 killed %s %s: first call %s %q", round, conv, delay.Round(time.Millisecond),
			kill.Round(time.Millisecond), map[bool]string{true: "into the call", false: "after it returned"}[during], first.Result.Status, first.Result.Output)
		switch {
		case first.Result.Status == engine.StatusLost:
			continue // the call's note says it was lost; it may never have reached exec-2
		case first.Result.Status == engine.StatusOK && first.Result.Output == "exec-1\n":
			continue // exec-2 was killed before A placed it
		case first.Result.Status != engine.StatusOK || first.Result.Output != "exec-2\n":
			t.Fatalf("round %d: the first call of %s through A: %s %q, want it on exec-2", round, conv, first.Result.Status, first.Result.Output)
		}
		fronts := []*frontProc{b, a} // B first in round 0: the front that never saw it
		if round > 0 {
			rng.Shuffle(len(fronts), func(i, j int) { fronts[i], fronts[j] = fronts[j], fronts[i] })
		}
		for _, f := range fronts {
			deadline := time.Now().Add(30 * time.Second)
			for {
				rep := run(f, conv, "echo $BV_NAME")
				if rep.Result.Status != engine.StatusLost && !strings.Contains(rep.Err, "conversation's executor is gone") {
					t.Fatalf("round %d: %s through %s after exec-2, which ran its first call, was killed: %s %q, want it lost",
						round, conv, f.name, rep.Result.Status, rep.Result.Output)
				}
				if strings.Contains(rep.Err, "conversation's executor is gone") && strings.Contains(rep.Result.Output, "exec-2") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: %s through %s: still %s %q after 30s, want ErrConversationLost", round, conv, f.name, rep.Result.Status, rep.Result.Output)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	a.stop()
	b.stop()
	ex1.stop()
	waitNoLeftovers(t, mark)
}

// slowLink is a loopback TCP proxy to one address. On the connections
// it accepted while slowNew was on, it delays the bytes it forwards there
// by its delay, in order; the answers, and the other connections, pass
// at once.
type slowLink struct {
	ln    net.Listener
	to    string
	delay atomic.Int64 // nanoseconds
	slow  atomic.Bool
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// startSlowLink starts a slow link to addr; it ends at cleanup.
func startSlowLink(t *testing.T, addr string) *slowLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &slowLink{ln: ln, to: addr}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(func() {
		ln.Close()
		l.mu.Lock()
		for _, c := range l.conns {
			c.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
	})
	return l
}

func (l *slowLink) addr() string { return l.ln.Addr().String() }

func (l *slowLink) setDelay(d time.Duration) { l.delay.Store(int64(d)) }

func (l *slowLink) slowNew(on bool) { l.slow.Store(on) }

func (l *slowLink) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", l.to)
		if err != nil {
			c.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, c, s)
		l.mu.Unlock()
		slow := l.slow.Load()
		l.wg.Add(3)
		go func() { // the answers, at once
			defer l.wg.Done()
			_, _ = io.Copy(c, s)
			c.Close()
			s.Close()
		}()
		type chunk struct {
			b  []byte
			at time.Time
		}
		ch := make(chan chunk, 1024)
		go func() { // the requests, read as they come
			defer l.wg.Done()
			defer close(ch)
			for {
				b := make([]byte, 32<<10)
				n, err := c.Read(b)
				if n > 0 {
					ch <- chunk{b[:n], time.Now()}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // and sent on after the delay
			defer l.wg.Done()
			defer s.Close()
			var failed error
			for k := range ch { // drained to the end, so that the reader never blocks
				if failed == nil {
					if slow {
						time.Sleep(time.Until(k.at.Add(time.Duration(l.delay.Load()))))
					}
					_, failed = s.Write(k.b)
				}
			}
		}()
	}
}

// upTo is a random duration in [0, d).
func upTo(rng *rand.Rand, d time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(d))) }
