//go:build linux

package sandbox_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// listeners are real servers on the host side that count what arrives.
type listeners struct {
	tcp, udp, unix, unixgram, abstract net.Addr
	arrived                            map[string]*atomic.Int64
	closers                            []func()
	wg                                 sync.WaitGroup
}

func (l *listeners) count(name string) *atomic.Int64 {
	if l.arrived[name] == nil {
		l.arrived[name] = new(atomic.Int64)
	}
	return l.arrived[name]
}

func (l *listeners) serve(t *testing.T, name string, ln net.Listener) net.Addr {
	c := l.count(name)
	l.closers = append(l.closers, func() { ln.Close() })
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.Add(1)
			conn.Close()
		}
	}()
	return ln.Addr()
}

func (l *listeners) servePacket(t *testing.T, name string, pc net.PacketConn) net.Addr {
	c := l.count(name)
	l.closers = append(l.closers, func() { pc.Close() })
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			c.Add(1)
		}
	}()
	return pc.LocalAddr()
}

func startListeners(t *testing.T) *listeners {
	l := &listeners{arrived: map[string]*atomic.Int64{}}
	t.Cleanup(func() {
		for _, c := range l.closers {
			c()
		}
		l.wg.Wait()
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Since Go 1.24 net.Listen("tcp") listens with MPTCP where the kernel
	// has it, so this one listener takes both TCP and MPTCP clients.
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	must(err)
	l.tcp = l.serve(t, "tcp", tcp)
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	must(err)
	l.udp = l.servePacket(t, "udp", udp)
	dir := t.TempDir()
	us, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	must(err)
	l.unix = l.serve(t, "unix", us)
	ug, err := net.ListenPacket("unixgram", filepath.Join(dir, "g.sock"))
	must(err)
	l.unixgram = l.servePacket(t, "unixgram", ug)
	ab, err := net.Listen("unix", fmt.Sprintf("@bashvisor-test-%d-%s", os.Getpid(), filepath.Base(dir)))
	must(err)
	l.abstract = l.serve(t, "abstract", ab)
	return l
}

func TestNetworkDenied(t *testing.T) {
	requireSandbox(t)
	l := startListeners(t)
	tcpPort := l.tcp.(*net.TCPAddr).Port
	udpPort := l.udp.(*net.UDPAddr).Port
	abstract := strings.TrimPrefix(l.abstract.String(), "@")

	// Sanity: the listeners do receive from an unconfined client.
	for _, probe := range []struct{ network, addr string }{{"tcp4", l.tcp.String()}, {"unix", l.unix.String()}, {"unix", l.abstract.String()}} {
		c, err := net.Dial(probe.network, probe.addr)
		if err != nil {
			t.Fatalf("sanity dial %v: %v", probe, err)
		}
		c.Close()
	}
	for _, name := range []string{"tcp", "unix", "abstract"} {
		for l.count(name).Load() != 1 {
			runtime.Gosched()
		}
		l.count(name).Store(0)
	}
	type tc struct{ name, tool, cmd string }
	py := func(name, code string) tc { return tc{name, "python3", "python3 -c '" + code + "'"} }
	cases := []tc{
		{"bash-dev-tcp", "bash", fmt.Sprintf(`echo x > /dev/tcp/127.0.0.1/%d`, tcpPort)},
		{"bash-dev-tcp-rw", "bash", fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo x >&3`, tcpPort)},
		{"bash-dev-udp", "bash", fmt.Sprintf(`echo x > /dev/udp/127.0.0.1/%d`, udpPort)},
		{"curl", "curl", fmt.Sprintf(`curl -sS --max-time 5 http://127.0.0.1:%d/`, tcpPort)},
		py("tcp", fmt.Sprintf(`import socket; s=socket.create_connection(("127.0.0.1", %d), 5)`, tcpPort)),
		py("mptcp", fmt.Sprintf(`import socket; s=socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262); s.connect(("127.0.0.1", %d))`, tcpPort)),
		py("udp", fmt.Sprintf(`import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("127.0.0.1", %d))`, udpPort)),
		py("tcp-bind", `import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()`),
		py("tcp6", `import socket; s=socket.socket(socket.AF_INET6); s.connect(("::1", 1))`),
		py("raw", `import socket; s=socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)`),
		py("icmp-dgram", `import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)`),
		py("packet", `import socket; s=socket.socket(socket.AF_PACKET, socket.SOCK_RAW)`),
		py("netlink", `import socket; s=socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)`),
		py("unix-pathname", fmt.Sprintf(`import socket; s=socket.socket(socket.AF_UNIX); s.connect(%q)`, l.unix.String())),
		py("unix-dgram-sendto", fmt.Sprintf(`import socket; s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b"x", %q)`, l.unixgram.String())),
		py("unix-socketpair-dgram-sendto", fmt.Sprintf(`import socket; a,b=socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b"x", %q)`, l.unixgram.String())),
		py("unix-abstract", fmt.Sprintf(`import socket; s=socket.socket(socket.AF_UNIX); s.connect("\0%s")`, abstract)),
		// logger exits 0 even when it cannot log: only the listener counts.
		{"logger", "logger", `logger -u ` + l.unixgram.String() + ` hello; logger --tcp -n 127.0.0.1 -P ` + fmt.Sprint(tcpPort) + ` hello; false`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.NeedsTool(t, c.tool)
			r := run(t, c.cmd)
			if r.code == 0 {
				t.Errorf("%s: exit 0, want failure\n%s", c.cmd, r.out)
			}
			if c.tool != "logger" && !denied(r.out) && !strings.Contains(r.out, "Couldn't connect") && !strings.Contains(r.out, "Could not connect") {
				t.Errorf("%s: want EPERM/EACCES, got exit %d\n%s", c.cmd, r.code, r.out)
			}
			t.Logf("exit %d: %s", r.code, lastLine(r.out))
		})
	}
	for name, c := range l.arrived {
		if n := c.Load(); n != 0 {
			t.Errorf("%d connection(s)/datagram(s) reached the %s listener from inside the sandbox", n, name)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Unix sockets inside the sandbox: socketpair and pipes work (node, python
// multiprocessing pipes, make's jobserver), a server can even be bound in the
// scratch dir, but nothing can connect, not even to that.
func TestUnixSocketpairWorks(t *testing.T) {
	requireSandbox(t)
	testenv.NeedsTool(t, "python3")
	r := run(t, `python3 -c 'import socket; a,b=socket.socketpair(); a.send(b"ok"); print(b.recv(2).decode())'`)
	if r.code != 0 || strings.TrimSpace(r.out) != "ok" {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
}

// A server bound in the scratch dir works, but connecting is denied even to
// it: connect(2) is denied wholesale (see the package doc).
func TestUnixListenInScratchButNoConnect(t *testing.T) {
	requireSandbox(t)
	testenv.NeedsTool(t, "python3")
	r := run(t, `python3 -c '
import os, socket
p = os.path.join(os.environ["TMPDIR"], "s.sock")
s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(); print("listening")
c = socket.socket(socket.AF_UNIX)
try:
    c.connect(p); print("connected")
except PermissionError as e:
    print("connect:", e.strerror)
'`)
	if r.code != 0 || r.out != "listening\nconnect: Operation not permitted\n" {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
}

// With Network the command reaches the listener the engine serves (its
// proxy) and nothing else: not the host's loopback listeners, not other
// ports, not UDP, not unix sockets.
func TestNetworkOnlyThroughProxy(t *testing.T) {
	requireNamespaces(t)
	l := startListeners(t)
	tcpPort := l.tcp.(*net.TCPAddr).Port
	var served atomic.Int64
	serve := func(sc *sandbox.Command) {
		ln := sc.Proxy()
		if ln == nil {
			t.Fatal("no proxy listener")
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			fmt.Fprintf(w, "via proxy: %s %s\n", r.Method, r.URL)
		})}
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close(); <-done })
	}
	run := func(cmd string) result {
		return runOpts(t, sandbox.Options{Network: true}, serve, t.TempDir(), cmd)
	}
	if testenv.HasTool(t, "curl") {
		r := run(`curl -sS --max-time 10 http://registry.example/pkg`)
		if r.code != 0 || r.out != "via proxy: GET http://registry.example/pkg\n" {
			t.Fatalf("curl through the proxy: exit %d\n%s", r.code, r.out)
		}
	}
	r := run(`port=${HTTP_PROXY##*:}; exec 3<>/dev/tcp/127.0.0.1/$port && printf 'GET http://x/ HTTP/1.0\r\n\r\n' >&3 && head -1 <&3; echo "$HTTPS_PROXY|$npm_config_https_proxy|${NO_PROXY-unset}"`)
	if r.code != 0 || !strings.HasPrefix(r.out, "HTTP/1.0 200 OK") || !strings.Contains(r.out, "http://127.0.0.1:") {
		t.Fatalf("bash to the proxy: exit %d\n%s", r.code, r.out)
	}
	type tc struct{ name, tool, cmd string }
	py := func(name, code string) tc { return tc{name, "python3", "python3 -c '" + code + "'"} }
	for _, c := range []tc{
		{"host-loopback", "bash", fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d`, tcpPort)},
		{"other-port", "bash", `exec 3<>/dev/tcp/127.0.0.1/1`},
		{"udp", "bash", fmt.Sprintf(`echo x > /dev/udp/127.0.0.1/%d`, l.udp.(*net.UDPAddr).Port)},
		py("tcp-bind", `import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()`),
		py("unix-pathname", fmt.Sprintf(`import socket; s=socket.socket(socket.AF_UNIX); s.connect(%q)`, l.unix.String())),
		py("unix-abstract", fmt.Sprintf(`import socket; s=socket.socket(socket.AF_UNIX); s.connect("\0%s")`, strings.TrimPrefix(l.abstract.String(), "@"))),
		py("mptcp", fmt.Sprintf(`import socket; s=socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262); s.connect(("127.0.0.1", %d))`, tcpPort)),
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.NeedsTool(t, c.tool)
			r := run(c.cmd)
			if r.code == 0 || !(denied(r.out) || strings.Contains(r.out, "Connection refused")) {
				t.Errorf("%s: exit %d, want a refusal\n%s", c.cmd, r.code, r.out)
			}
			t.Logf("exit %d: %s", r.code, lastLine(r.out))
		})
	}
	for name, c := range l.arrived {
		if n := c.Load(); n != 0 {
			t.Errorf("%d connection(s) reached the host's %s listener from inside the sandbox", n, name)
		}
	}
	if served.Load() == 0 {
		t.Error("the proxy served nothing")
	}
}
