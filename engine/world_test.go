package engine_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// conversation is a sandboxed tool context of conversation id in dir.
func conversation(id, dir string, p engine.Profile) engine.ToolContext {
	return engine.ToolContext{WorkingDir: dir, ConversationID: id, Sandbox: engine.Sandbox{Profile: p}}
}

// TestConversationLoopback: the agent workflow of a dev server. A
// background job of a sandboxed conversation serves on a port; the
// conversation's next command reaches it on localhost; another
// conversation does not, and listens on the same port itself; the host
// does not reach either. Ending the conversations ends their servers.
func TestConversationLoopback(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "python3", "curl")
	e := newEngine(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	serve := func(tc engine.ToolContext, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(tc.WorkingDir, "index.html"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Command: "python3 -m http.server --bind 127.0.0.1 " + port})
		if r.Status != engine.StatusStarted {
			t.Fatalf("server: %s %q", r.Status, r.Output)
		}
	}
	get := `for i in $(seq 100); do curl -sf http://localhost:` + port + `/index.html && exit 0; sleep 0.1; done; exit 7`
	a := conversation("loop-a", t.TempDir(), engine.WorkspaceWrite)
	b := conversation("loop-b", t.TempDir(), engine.WorkspaceWrite)
	t.Cleanup(func() {
		for _, c := range []string{a.ConversationID, b.ConversationID} {
			_ = e.EndConversation(context.Background(), c)
		}
	})
	serve(a, "from a\n")
	if r := e.Run(context.Background(), a, engine.Input{Command: get}); r.Status != engine.StatusOK || r.Output != "from a\n[listening: "+port+" (job-1)]" {
		t.Fatalf("the conversation's next command: %s %q", r.Status, r.Output)
	}
	if r := e.Run(context.Background(), b, engine.Input{Command: "curl -sS --max-time 5 http://localhost:" + port + "/index.html"}); r.Status == engine.StatusOK {
		t.Fatalf("another conversation reached the server: %q", r.Output)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		c.Close()
		t.Fatal("the host reached the conversation's server")
	}
	serve(b, "from b\n")
	if r := e.Run(context.Background(), b, engine.Input{Command: get}); r.Status != engine.StatusOK || r.Output != "from b\n[listening: "+port+" (job-1)]" {
		t.Fatalf("b on the same port: %s %q", r.Status, r.Output)
	}
	if err := e.EndConversation(context.Background(), a.ConversationID); err != nil {
		t.Fatal(err)
	}
	if jobs := e.Jobs(a); len(jobs) != 0 {
		t.Fatalf("jobs left after EndConversation: %+v", jobs)
	}
}

// TestConversationsSeeOnlyTheirOwn: from inside a sandboxed command a
// conversation sees its own /tmp, caches and job files, and nothing of
// another conversation's (its output directory, job files, caches, /tmp);
// ending a conversation removes its world.
func TestConversationsSeeOnlyTheirOwn(t *testing.T) {
	needNamespaces(t)
	cacheRoot := t.TempDir()
	e := newEngine(t, func(c *engine.Config) { c.Sandbox.CacheDir = cacheRoot })
	a := conversation("own-a", t.TempDir(), engine.ReadOnly)
	b := conversation("own-b", t.TempDir(), engine.ReadOnly)
	run := func(tc engine.ToolContext, command string) engine.Result {
		t.Helper()
		return e.Run(context.Background(), tc, engine.Input{Command: command})
	}
	jb := e.Run(context.Background(), b, engine.Input{Mode: engine.ModeBackground, Command: "echo b-secret-output"})
	if jb.Status != engine.StatusStarted {
		t.Fatalf("%s %q", jb.Status, jb.Output)
	}
	waitJob(t, e, jb.JobID, b.ConversationID)
	if r := run(b, `echo b-tmp > /tmp/b-file && mkdir -p "$GOCACHE" && echo b-cache > "$GOCACHE/b-entry"`); r.Status != engine.StatusOK {
		t.Fatalf("b: %s %q", r.Status, r.Output)
	}
	ja := e.Run(context.Background(), a, engine.Input{Mode: engine.ModeBackground, Command: "echo a-output"})
	waitJob(t, e, ja.JobID, a.ConversationID)
	outRoot := filepath.Dir(filepath.Dir(jb.OutputFile))
	r := run(a, `ls `+outRoot+`; echo ---; cat `+ja.OutputFile+`; cat `+jb.OutputFile+`; ls `+cacheRoot+`; ls "$GOCACHE"; cat /tmp/b-file; echo ---; echo forged >> `+ja.OutputFile)
	listing, _, _ := strings.Cut(strings.TrimPrefix(r.Output, "[command failed: exit code 1]\n"), "---")
	if listing != filepath.Base(filepath.Dir(ja.OutputFile))+"\n" {
		t.Errorf("a's view of the output root is not its own directory alone:\n%s", r.Output)
	}
	if !strings.Contains(r.Output, "a-output") {
		t.Errorf("a cannot read its own job file:\n%s", r.Output)
	}
	for _, leak := range []string{"b-secret-output", "b-tmp", "b-entry", "b-cache"} {
		if strings.Contains(r.Output, leak) {
			t.Errorf("a sees b's %s:\n%s", leak, r.Output)
		}
	}
	if !strings.Contains(r.Output, "Read-only file system") {
		t.Errorf("a could write its job file:\n%s", r.Output)
	}
	if b, _ := os.ReadFile(ja.OutputFile); strings.Contains(string(b), "forged") {
		t.Error("a command forged its job file")
	}
	// Ending b removes its world: a new b starts with an empty /tmp.
	if err := e.EndConversation(context.Background(), b.ConversationID); err != nil {
		t.Fatal(err)
	}
	if r := run(b, `test ! -e /tmp/b-file && ls "$GOCACHE" 2>&1`); r.Status != engine.StatusFailed || !strings.Contains(r.Output, "No such file") {
		t.Fatalf("b's /tmp after EndConversation: %s %q", r.Status, r.Output)
	}
}
