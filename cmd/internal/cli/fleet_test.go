package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// startDemo starts the demo binary with args in a session of its own and
// returns the first submatch of re in its stderr. At cleanup it gets
// SIGTERM and must exit 0 within 30 s (then its group gets SIGKILL).
func startDemo(t *testing.T, env []string, re *regexp.Regexp, args ...string) string {
	t.Helper()
	if demoBin == "" {
		t.Fatal("the demo binary did not build (see TestMain's output)")
	}
	cmd := exec.Command(demoBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := testenv.GroupOf(t, cmd.Process.Pid) // never another group after the Wait below
	found := make(chan string, 1)
	rest := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var b strings.Builder
		sent := false
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
		rest <- b.String()
	}()
	done := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if out := <-rest; err != nil {
				t.Errorf("demo %s after SIGTERM: %v\n%s", args[0], err, out)
			}
		case <-time.After(30 * time.Second):
			g.Kill()
			<-done
			t.Errorf("demo %s did not exit within 30s of SIGTERM\n%s", args[0], <-rest)
		}
	})
	go func() { done <- cmd.Wait() }()
	select {
	case v, ok := <-found:
		if ok {
			return v
		}
		t.Fatalf("demo %q ended before saying %s", args, re)
	case <-time.After(60 * time.Second):
		t.Fatalf("demo %q did not say %s within 60s", args, re)
	}
	return ""
}

// alternate is the load balancer: each request goes to the next front,
// with the headers h.
type alternate struct {
	mu     sync.Mutex
	fronts []string // host:port
	next   int
	hits   map[string]int
	h      map[string]string
}

func (a *alternate) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	host := a.fronts[a.next%len(a.fronts)]
	a.next++
	a.hits[host]++
	a.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = host, host
	for k, v := range a.h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestFleetFrontsHTTP: two `demo mcp -http` fronts on the same two
// executors, behind a balancer that alternates every request between
// them, serve a stateless client's conversation (named, and the
// principal's own) as one front would: a job started through one is
// read and killed through the other, and a file written through one is
// read through the other, on the executor's own scratch directory.
func TestFleetFrontsHTTP(t *testing.T) {
	var addrs []string
	for i := range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		startDemo(t, []string{"BV_SCRATCH=" + t.TempDir(), fmt.Sprintf("BV_NAME=exec-%d", i+1)}, regexp.MustCompile(`serving at (\S+)`),
			"executor", "-listen", addr, "-name", fmt.Sprintf("exec-%d", i+1), "-grace", "200ms")
		addrs = append(addrs, addr)
	}
	dir := t.TempDir()
	const token = "fleet-test-token-0123456789"
	var fronts []string
	for range 2 {
		fronts = append(fronts, startDemo(t, []string{"BASHVISOR_MCP_TOKEN=" + token}, regexp.MustCompile(`listening on http://(\S+)/mcp`),
			"mcp", "-C", dir, "-http", "127.0.0.1:0", "-structured", "-executors", strings.Join(addrs, ",")))
	}
	for _, conv := range []string{"shared", ""} {
		t.Run("conversation="+conv, func(t *testing.T) {
			hdr := map[string]string{"Authorization": "Bearer " + token}
			if conv != "" {
				hdr["Bashvisor-Conversation"] = conv
			}
			lb := &alternate{fronts: fronts, hits: map[string]int{}, h: hdr}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: "http://" + fronts[0] + "/mcp", HTTPClient: &http.Client{Transport: lb}},
				&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			call := func(tool string, args map[string]any) map[string]any {
				t.Helper()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					t.Fatalf("%s %v: %v", tool, args, err)
				}
				var m map[string]any
				b, _ := json.Marshal(res.StructuredContent)
				_ = json.Unmarshal(b, &m)
				return m
			}
			bg := call("bash", map[string]any{"command": "echo started; sleep 60", "mode": "background"})
			job, _ := bg["job_id"].(string)
			if bg["status"] != "started" || job == "" {
				t.Fatalf("background job: %v", bg)
			}
			var out map[string]any
			testenv.Eventually(t, 10*time.Second, func() bool {
				out = call("bash_output", map[string]any{"job_id": job})
				return strings.Contains(fmt.Sprint(out), "started")
			}, "output of %s: %v", job, testenv.Last(&out))
			if w := call("bash", map[string]any{"command": "echo written > $BV_SCRATCH/note-" + conv + "; echo $BV_NAME"}); w["status"] != "ok" {
				t.Fatalf("write: %v", w)
			}
			var names []string
			for range 4 {
				r := call("bash", map[string]any{"command": "cat $BV_SCRATCH/note-" + conv + "; echo $BV_NAME"})
				names = append(names, fmt.Sprint(r["output"]))
			}
			for _, n := range names {
				if !strings.HasPrefix(n, "written\nexec-") || n != names[0] {
					t.Errorf("the file written through one front, read through both: %q", names)
					break
				}
			}
			// A truncated result's full output is read through both
			// fronts, in ranges, from its executor.
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "seq 1 300000"}})
			if err != nil {
				t.Fatal(err)
			}
			var uri string
			for _, c := range res.Content {
				if l, ok := c.(*mcp.ResourceLink); ok {
					uri = l.URI
				}
			}
			if !strings.Contains(uri, "/outputs/") {
				t.Fatalf("no full-output link in a truncated result: %+v", res.Content)
			}
			var whole strings.Builder
			for _, u := range []string{uri + "?length=1000000", uri + "?offset=1000000&length=1000000", uri + "?offset=2000000"} {
				rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: u})
				if err != nil {
					t.Fatalf("read %s: %v", u, err)
				}
				whole.WriteString(rr.Contents[0].Text)
			}
			if want := seq(300000); whole.String() != want {
				t.Errorf("the full output read in three ranges through two fronts: %d bytes, want %d", whole.Len(), len(want))
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: strings.Replace(uri, "/outputs/", "/outputs/9", 1)}); err == nil {
				t.Errorf("an output id this conversation does not have was served")
			}
			jobs := call("bash_jobs", map[string]any{})
			if !strings.Contains(fmt.Sprint(jobs), job) {
				t.Errorf("bash_jobs: %v, want %s", jobs, job)
			}
			if k := call("bash_kill", map[string]any{"job_id": job}); !strings.Contains(fmt.Sprint(k), "killed") {
				t.Errorf("bash_kill: %v", k)
			}
			lb.mu.Lock()
			defer lb.mu.Unlock()
			for _, f := range fronts {
				if lb.hits[f] < 5 {
					t.Errorf("front %s served %d requests of %d", f, lb.hits[f], lb.next)
				}
			}
		})
	}
}

// seq is the output of seq 1 n.
func seq(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}
