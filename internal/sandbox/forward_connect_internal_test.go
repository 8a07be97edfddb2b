//go:build linux

package sandbox

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestConnector: a rootless world (made so as root too, where user
// namespaces allow) reaches its loopback through its connector: a port
// nothing listens on is ECONNREFUSED, the helper holds no capability, a
// listener made in the world's network (as root) is listed by the
// sock_diag socket the connector made and reached, and closing the world
// ends the helper.
func TestConnector(t *testing.T) {
	c := Probe()
	testenv.Needf(t, testenv.Namespaces, c.Namespaces, "no private namespaces: %s", c)
	w, err := newWorld(WorldOptions{Dir: filepath.Join(t.TempDir(), "world")}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := w.Dial(ctx, 1); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial to a port nothing listens on: %v, want ECONNREFUSED", err)
	}
	entry := connectors.m[w.w]
	if entry == nil || entry.proc == nil {
		t.Fatal("no connector runs after a Dial")
	}
	pid := entry.proc.Pid
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "CapEff" || k == "CapPrm" || k == "CapAmb") && strings.TrimSpace(v) != "0000000000000000" {
			t.Errorf("the connector holds capabilities: %s", line)
		}
	}
	if os.Geteuid() == 0 {
		// A listener in the world's network, which as root the engine
		// can make there itself.
		l, err := w.w.listen()
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Write([]byte("hello from the world"))
				c.Close()
			}
		}()
		port := l.Addr().(*net.TCPAddr).Port
		socks := map[uint64]Socket{}
		if err := w.w.withDiag(func(fd int) error { return diagListening(fd, socks) }); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range socks {
			found = found || s.Port == port
		}
		if !found {
			t.Errorf("the world's sock_diag socket (made by its connector) lists %+v, not port %d", socks, port)
		}
		conn, err := w.Dial(ctx, port)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 64)
		n, _ := conn.Read(b)
		conn.Close()
		if string(b[:n]) != "hello from the world" {
			t.Errorf("through the connector: %q", b[:n])
		}
	}
	w.Close()
	testenv.Eventually(t, 10*time.Second, func() bool {
		return syscall.Kill(pid, 0) != nil
	}, "the connector (pid %d) outlived its world", pid)
}
