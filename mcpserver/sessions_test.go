package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// sessServer serves one engine over streamable HTTP on a real loopback
// listener.
type sessServer struct {
	*httpSetup
	e *engine.Engine
}

func newSessServer(t testing.TB, mod func(*engine.Config), opts Options, hopts HTTPOptions) *sessServer {
	t.Helper()
	s := &sessServer{httpSetup: &httpSetup{res: newResults(), tr: &http.Transport{}}, e: newEngine(t, mod)}
	if opts.WorkingDir == "" {
		opts.WorkingDir = t.TempDir()
	}
	opts.OnResult = s.res.add
	mux := http.NewServeMux()
	srv := New(s.e, opts)
	mux.Handle("/mcp", Handler(srv, hopts))
	s.ts = httptest.NewServer(mux)
	s.url = s.ts.URL + "/mcp"
	t.Cleanup(func() {
		s.ts.CloseClientConnections()
		s.ts.Close()
		s.tr.CloseIdleConnections()
		// Sessions a client left open (the conformance suite does).
		for ss := range srv.Sessions() {
			ss.Close()
		}
	})
	return s
}

// bgJob starts a background `sleep 300` on cs and returns its job id and pid.
func bgJob(t *testing.T, cs *mcp.ClientSession) (string, int) {
	t.Helper()
	r := bash(t, context.Background(), cs, map[string]any{"command": "sleep 300", "mode": "background"})
	if r.Status != engine.StatusStarted || r.JobID == "" || r.PID <= 0 {
		t.Fatalf("background job: %+v", r)
	}
	return r.JobID, r.PID
}

// jobIDs lists the job ids bash_jobs shows on cs.
func jobIDs(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var jobs jobsResult
	call(t, context.Background(), cs, toolJobs, nil, &jobs)
	var ids []string
	for _, j := range jobs.Jobs {
		ids = append(ids, j.JobID+":"+strconv.Itoa(j.PID))
	}
	return ids
}

// Each HTTP session is a conversation: another session's jobs cannot be
// listed, read or killed; with SharedConversation they can.
func TestHTTPSessionsAreConversations(t *testing.T) {
	s := newSessServer(t, nil, Options{}, HTTPOptions{Token: "tok"})
	a, b := s.client(t, "tok"), s.client(t, "tok")
	ctx := context.Background()
	id, pid := bgJob(t, a)
	if got := jobIDs(t, b); len(got) != 0 {
		t.Errorf("session B lists %v", got)
	}
	if got := jobIDs(t, a); len(got) != 1 || got[0] != id+":"+strconv.Itoa(pid) {
		t.Errorf("session A lists %v, want its job %s", got, id)
	}
	noSuchJob := fmt.Sprintf(`[error: no such job: %q (bash_jobs lists the job ids)]`, id)
	for _, tool := range []string{toolOutput, toolKill} {
		res, text := call(t, ctx, b, tool, map[string]any{"job_id": id}, nil)
		if !res.IsError || text != noSuchJob {
			t.Errorf("session B %s of A's job: %q", tool, text)
		}
	}
	if !alive(pid) {
		t.Fatal("A's job died of B's bash_kill")
	}
	// B's own first job may have the same id (ids count per conversation);
	// killing it leaves A's alone.
	idB, pidB := bgJob(t, b)
	var killed engine.JobInfo
	if res, text := call(t, ctx, b, toolKill, map[string]any{"job_id": idB}, &killed); res.IsError || killed.PID != pidB {
		t.Fatalf("B kills its own job: %q", text)
	}
	waitDead(t, 10*time.Second, pidB)
	if !alive(pid) {
		t.Fatal("A's job died when B killed its own")
	}
	if res, text := call(t, ctx, a, toolKill, map[string]any{"job_id": id}, &killed); res.IsError || killed.Status != engine.JobKilled {
		t.Fatalf("A kills its job: %q", text)
	}
	waitDead(t, 10*time.Second, pid)

	// The conversations are distinct and named after the session (within
	// the principal), not by it.
	convs := map[string]bool{}
	for _, j := range s.e.AllJobs() {
		convs[j.ConversationID] = true
		if !strings.HasPrefix(j.ConversationID, principalDefault+"/~") || len(j.ConversationID) != len(principalDefault+"/~")+16 {
			t.Errorf("conversation id %q", j.ConversationID)
		}
		if strings.Contains(j.OutputFile, a.ID()) || strings.Contains(j.OutputFile, b.ID()) {
			t.Errorf("output file %s shows a session id", j.OutputFile)
		}
	}
	if len(convs) != 2 {
		t.Errorf("conversations %v, want 2", convs)
	}

	t.Run("shared", func(t *testing.T) {
		s := newSessServer(t, nil, Options{SharedConversation: true}, HTTPOptions{NoAuth: true})
		a, b := s.client(t, ""), s.client(t, "")
		id, pid := bgJob(t, a)
		if got := jobIDs(t, b); len(got) != 1 || got[0] != id+":"+strconv.Itoa(pid) {
			t.Errorf("session B lists %v, want A's job %s", got, id)
		}
		if res, text := call(t, ctx, b, toolKill, map[string]any{"job_id": id}, nil); res.IsError {
			t.Fatalf("B kills A's job: %q", text)
		}
		waitDead(t, 10*time.Second, pid)
		// Ending a session does not end the shared conversation.
		_, pid = bgJob(t, a)
		a.Close()
		if got := jobIDs(t, b); len(got) != 2 || !alive(pid) {
			t.Errorf("after A closed: B lists %v; job alive %v", got, alive(pid))
		}
	})
}

// A session's end ends its conversation: the client's DELETE cancels its
// calls in flight and ends its background jobs.
func TestHTTPSessionEndEndsConversation(t *testing.T) {
	s := newSessServer(t, nil, Options{}, HTTPOptions{NoAuth: true})
	a := s.client(t, "")
	_, job := bgJob(t, a)
	s.res.wait(t, time.Second) // the job's start
	errc := make(chan error, 1)
	sleeper := startSleeper(t, context.Background(), a, errc)
	start := time.Now()
	// By hand: the go-sdk client's Close waits for its calls before it
	// sends DELETE.
	if code := s.deleteSession(t, a.ID()); code != http.StatusNoContent {
		t.Errorf("DELETE: %d", code)
	}
	t.Logf("DELETE with a call in flight took %v", time.Since(start))
	if err := <-errc; err == nil {
		t.Error("the call in flight returned no error")
	}
	if r := s.res.wait(t, 10*time.Second); r.Status != engine.StatusCancelled {
		t.Errorf("the call in flight: %s %q", r.Status, r.Output)
	}
	waitDead(t, 10*time.Second, append(sleeper, job)...)
	if time.Since(start) > 10*time.Second {
		t.Errorf("ending the session took %v", time.Since(start))
	}
	// Its records are gone too.
	deadline := time.Now().Add(10 * time.Second)
	for len(s.e.AllJobs()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if jobs := s.e.AllJobs(); len(jobs) > 0 {
		t.Errorf("jobs left after the session ended: %+v", jobs)
	}
}

// openSession initializes a session by hand and returns its id.
func (h *httpSetup) openSession(t *testing.T, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	ctx := context.Background()
	resp, body := h.post(t, ctx, initializeBody, hdr)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		return resp, body
	}
	h2 := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	for k, v := range hdr {
		h2[k] = v
	}
	if resp, body := h.post(t, ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h2); resp.StatusCode/100 != 2 {
		t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
	return resp, sid
}

// deleteSession ends a session by hand, with the headers of hdr (its
// credentials).
func (h *httpSetup) deleteSession(t *testing.T, sid string, hdr ...map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, h.url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	for _, m := range hdr {
		for k, v := range m {
			req.Header.Set(k, v)
		}
	}
	resp, err := (&http.Client{Transport: h.tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Over MaxSessions a new session gets 503 with a reason and Retry-After;
// ending a session frees its place.
func TestHTTPSessionCap(t *testing.T) {
	s := newSessServer(t, nil, Options{}, HTTPOptions{NoAuth: true, MaxSessions: 2})
	_, sid1 := s.openSession(t, nil)
	_, sid2 := s.openSession(t, nil)
	resp, body := s.openSession(t, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, "2 MCP sessions are open, the most this server allows") {
		t.Fatalf("third session: %d Retry-After %q %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// The open sessions still work.
	if resp, body := s.post(t, context.Background(), `{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		map[string]string{"Mcp-Session-Id": sid1, "Mcp-Protocol-Version": "2025-11-25"}); resp.StatusCode != http.StatusOK {
		t.Errorf("ping on an open session: %d %s", resp.StatusCode, body)
	}
	// A request that is not an initialize opens no session and holds no place.
	if resp, _ := s.post(t, context.Background(), `{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil); resp.StatusCode == http.StatusOK &&
		resp.Header.Get("Mcp-Session-Id") != "" {
		t.Logf("a ping without a session: %d", resp.StatusCode)
	}
	if code := s.deleteSession(t, sid2); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, sid := s.openSession(t, nil)
		if resp.StatusCode == http.StatusOK {
			s.deleteSession(t, sid)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no place after a session ended: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.deleteSession(t, sid1)

	// A go-sdk client, which probes with server/discover before it
	// initializes, connects at the cap of 1 each time the previous one
	// closed: neither the probe nor a closed session holds the place.
	s = newSessServer(t, nil, Options{}, HTTPOptions{NoAuth: true, MaxSessions: 1})
	for i := range 20 {
		cs := s.client(t, "")
		if r := bash(t, context.Background(), cs, map[string]any{"command": "echo " + strconv.Itoa(i)}); r.Output != strconv.Itoa(i)+"\n" {
			t.Fatalf("%d: %+v", i, r)
		}
		if err := cs.Close(); err != nil {
			t.Fatalf("%d: close: %v", i, err)
		}
	}
}

// A session idle for SessionTimeout is closed, its conversation's jobs
// ended and its place freed.
func TestHTTPIdleSessionClosed(t *testing.T) {
	s := newSessServer(t, nil, Options{}, HTTPOptions{NoAuth: true, SessionTimeout: time.Second, MaxSessions: 1})
	cs := s.client(t, "")
	// The session's last request starts now: the idle second runs from
	// its end, so the job cannot end sooner than a second from here (time
	// taken after the reply would miss how long the reply took to come).
	start := time.Now()
	_, pid := bgJob(t, cs)
	waitDead(t, 20*time.Second, pid)
	t.Logf("job ended %v after the session's last request began", time.Since(start))
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("job ended after %v, before the session was idle 1s", d)
	}
	resp, body := s.post(t, context.Background(), `{"jsonrpc":"2.0","id":9,"method":"ping"}`,
		map[string]string{"Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("request on the closed session: %d %s", resp.StatusCode, body)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, sid := s.openSession(t, nil)
		if resp.StatusCode == http.StatusOK {
			s.deleteSession(t, sid)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed session's place was not freed: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawConn dials addr (host:port).
func rawConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// waitEOF waits up to d for the server to close c (EOF, or a reset when
// data was left unread) and returns how long it took.
func waitEOF(t *testing.T, c net.Conn, br *bufio.Reader, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	rest, err := io.ReadAll(br)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection not closed within %v: %v (read %q)", d, err, rest)
	}
	return time.Since(start)
}

// A body that does not arrive within ReadTimeout is cut with 408 and the
// connection closed; a refused request (401) closes its connection.
func TestHTTPSlowBodyAndRefusals(t *testing.T) {
	s := newSessServer(t, nil, Options{}, HTTPOptions{Token: "tok", ReadTimeout: 500 * time.Millisecond})
	c, br := rawConn(t, s.ts.Listener.Addr().String())
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", strings.TrimPrefix(s.ts.URL, "http://"), len(initializeBody))
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // trickle the body, a byte every 100ms
		for i := 0; i < len(initializeBody); i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := c.Write([]byte{initializeBody[i]}); err != nil {
				return
			}
		}
	})
	defer wg.Wait()
	defer close(stop)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive within 500ms") {
		t.Errorf("slow body: %d %q", resp.StatusCode, body)
	}
	t.Logf("slow body cut after %v", time.Since(start))
	waitEOF(t, c, br, 5*time.Second)

	// 401 and 403 close the connection at once.
	for name, hdr := range map[string]string{"no token": "", "foreign origin": "Authorization: Bearer tok\r\nOrigin: https://evil.example.com\r\n"} {
		c, br := rawConn(t, s.ts.Listener.Addr().String())
		fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: %s\r\n%s\r\n", strings.TrimPrefix(s.ts.URL, "http://"), hdr)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d", name, resp.StatusCode)
		}
		if d := waitEOF(t, c, br, 5*time.Second); d > time.Second {
			t.Errorf("%s: connection closed only after %v", name, d)
		}
	}
}

// ReadTimeout bounds only the body: a call running longer than it is not
// cut (http.Server.ReadTimeout would cancel it).
func TestHTTPLongCallOutlivesReadTimeout(t *testing.T) {
	s := newSessServer(t, nil, Options{}, HTTPOptions{NoAuth: true, ReadTimeout: 200 * time.Millisecond})
	cs := s.client(t, "")
	if r := bash(t, context.Background(), cs, map[string]any{"command": "sleep 1.5; echo done"}); r.Status != engine.StatusOK || r.Output != "done\n" {
		t.Errorf("%s %q", r.Status, r.Output)
	}
}

// 200 concurrent calls over HTTP against an engine running at most 4 at
// once: every call is answered exactly once (ok, or busy when the queue is
// full), never more than 4 run, and the server is healthy afterwards.
func TestHTTPAdmissionUnderLoad(t *testing.T) {
	const sessions, perSession, slots = 4, 50, 4
	s := newSessServer(t, func(c *engine.Config) {
		c.Admission = config.Admission{MaxRunning: slots, MaxRunningPerConversation: slots, MaxQueue: 60, QueueWait: time.Minute}
	}, Options{}, HTTPOptions{NoAuth: true})
	dir := t.TempDir()
	running := filepath.Join(dir, "running")
	os.Mkdir(running, 0o700)

	var maxLoad atomic.Int64
	stop := make(chan struct{})
	var poll sync.WaitGroup
	poll.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if l := int64(s.e.Load().Running); l > maxLoad.Load() {
				maxLoad.Store(l)
			}
			time.Sleep(time.Millisecond)
		}
	})
	var wg sync.WaitGroup
	var ok, busy atomic.Int64
	var maxSeen atomic.Int64
	errs := make(chan string, sessions*perSession)
	for k := range sessions {
		cs := s.client(t, "")
		for i := range perSession {
			n := k*perSession + i
			wg.Go(func() {
				cmd := fmt.Sprintf("touch %[1]s/%[2]d; sleep 0.05; n=$(ls %[1]s | wc -l); rm %[1]s/%[2]d; echo %[2]d $n", running, n)
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": cmd}})
				if err != nil {
					errs <- fmt.Sprintf("call %d: %v", n, err)
					return
				}
				text := res.Content[0].(*mcp.TextContent).Text
				var id, seen int64
				switch {
				case !res.IsError:
					if _, err := fmt.Sscanf(text, "%d %d", &id, &seen); err != nil || id != int64(n) {
						errs <- fmt.Sprintf("call %d: %q", n, text)
						return
					}
					ok.Add(1)
					for m := maxSeen.Load(); seen > m && !maxSeen.CompareAndSwap(m, seen); m = maxSeen.Load() {
					}
				case strings.HasPrefix(text, "[error: busy: "):
					busy.Add(1)
				default:
					errs <- fmt.Sprintf("call %d: %q", n, text)
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	poll.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("%d ok, %d busy; at most %d running (engine), %d (seen by the commands)", ok.Load(), busy.Load(), maxLoad.Load(), maxSeen.Load())
	if ok.Load()+busy.Load() != sessions*perSession || ok.Load() < slots {
		t.Errorf("%d ok + %d busy, want %d answers", ok.Load(), busy.Load(), sessions*perSession)
	}
	if maxLoad.Load() > slots || maxSeen.Load() > slots {
		t.Errorf("more than %d commands ran at once: %d (engine), %d (commands)", slots, maxLoad.Load(), maxSeen.Load())
	}
	// Every call was answered exactly once, on the server too.
	s.res.mu.Lock()
	answered := map[string]int{}
	for _, r := range s.res.all {
		answered[r.Command]++
	}
	s.res.mu.Unlock()
	if len(answered) != sessions*perSession {
		t.Errorf("%d distinct calls answered, want %d", len(answered), sessions*perSession)
	}
	for c, n := range answered {
		if n != 1 {
			t.Errorf("answered %d times: %q", n, c)
		}
	}
	// Healthy afterwards: nothing running or queued once the engine has
	// freed the last slot (just after the last result), a new session
	// works.
	l := s.e.Load()
	for deadline := time.Now().Add(10 * time.Second); (l.Running != 0 || l.Queued != 0) && time.Now().Before(deadline); l = s.e.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	if l.Running != 0 || l.Queued != 0 {
		t.Errorf("load after: %+v", l)
	}
	if r := bash(t, context.Background(), s.client(t, ""), map[string]any{"command": "echo alive"}); r.Output != "alive\n" {
		t.Errorf("after the load: %+v", r)
	}
}

// /metrics scrapes with the token and answers 401 without.
func TestMetricsHandler(t *testing.T) {
	e := newEngine(t, nil)
	if r := e.Run(context.Background(), engine.ToolContext{WorkingDir: t.TempDir()}, engine.Input{Command: "true"}); r.Status != engine.StatusOK {
		t.Fatal(r)
	}
	ts := httptest.NewServer(MetricsHandler(HTTPOptions{Token: "tok"}, e.Metrics()))
	defer ts.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	get := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", code)
	}
	if code, _ := get("nope"); code != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d", code)
	}
	// The supervisor counts the command's end after the caller got its
	// result: the running gauge reaches 0 a moment later.
	var code int
	var body string
	testenv.Eventually(t, 5*time.Second, func() bool {
		code, body = get("tok")
		for _, want := range []string{`bashvisor_commands_total{status="ok"} 1`, "bashvisor_commands_running 0", "# TYPE bashvisor_command_duration_seconds histogram"} {
			if !strings.Contains(body, want) {
				return false
			}
		}
		return true
	}, "the scrape lacks the command's metrics: %d\n%s", testenv.Last(&code), testenv.Last(&body))
}

// Over the cap, LimitListener answers 503 and closes; a closed connection
// frees its place.
func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served\n") })}
	go hs.Serve(LimitListener(ln, 2))
	defer hs.Close()
	url := ln.Addr().String()
	get := func(c net.Conn, br *bufio.Reader) (int, string) {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	c1, br1 := rawConn(t, url)
	c2, br2 := rawConn(t, url)
	for _, c := range []struct {
		c  net.Conn
		br *bufio.Reader
	}{{c1, br1}, {c2, br2}} {
		if code, body := get(c.c, c.br); code != http.StatusOK || body != "served\n" {
			t.Fatalf("within the cap: %d %q", code, body)
		}
	}
	c3, br3 := rawConn(t, url)
	if code, body := get(c3, br3); code != http.StatusServiceUnavailable || !strings.Contains(body, "too many open connections") {
		t.Errorf("over the cap: %d %q", code, body)
	}
	waitEOF(t, c3, br3, 5*time.Second)
	c1.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, br := rawConn(t, url)
		code, _ := get(c, br)
		c.Close()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no place after a connection closed: %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The memory an idle session costs, measured over 1,000 sessions.
func TestMemoryPerIdleSession(t *testing.T) {
	const n = 1000
	// One principal opens them all: no per-principal cap or rate.
	s := newSessServer(t, nil, Options{}, HTTPOptions{NoAuth: true, MaxSessions: -1, MaxSessionsPerPrincipal: -1, SessionRate: Rate{PerSecond: -1}})
	// Warm up: the first session allocates what every session shares.
	_, sid := s.openSession(t, nil)
	s.deleteSession(t, sid)
	measure := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc + m.StackInuse
	}
	before, g0 := measure(), runtime.NumGoroutine()
	sids := make([]string, n)
	for i := range sids {
		resp, sid := s.openSession(t, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("session %d: %d", i, resp.StatusCode)
		}
		sids[i] = sid
	}
	s.tr.CloseIdleConnections()
	after, g1 := measure(), runtime.NumGoroutine()
	per := (int64(after) - int64(before)) / n
	t.Logf("%d idle sessions: %d bytes of heap and stacks each, %.1f goroutines each", n, per, float64(g1-g0)/n)
	if per > 64<<10 {
		t.Errorf("an idle session costs %d bytes", per)
	}
	for _, sid := range sids {
		s.deleteSession(t, sid)
	}
}
