package engine_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// A sandboxed command that cannot reach a service on the host's loopback
// fails with a note naming the host:port and the setting; with that
// host:port allowed it reaches the service through the egress proxy.
func TestHostLoopbackNote(t *testing.T) {
	needNamespaces(t)
	testenv.NeedsTool(t, "curl")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "host service") })}
	go srv.Serve(ln)
	defer srv.Close()
	hp := ln.Addr().String()
	e := newEngine(t)
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "loop", Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}
	r := e.Run(context.Background(), tc, engine.Input{Command: "curl -sS --noproxy '*' http://" + hp + "/"})
	want := "[sandbox: nothing listens on " + hp + " in the conversation's own loopback"
	if r.Status != engine.StatusFailed || !strings.Contains(r.Output, want) || !strings.Contains(r.Output, "-allow-net "+hp+")]") {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	tc.Sandbox.Network = []string{hp}
	if r := e.Run(context.Background(), tc, engine.Input{Command: "curl -sS http://" + hp + "/"}); r.Status != engine.StatusOK || !strings.HasPrefix(r.Output, "host service\n[network: 127.0.0.1 ") {
		t.Fatalf("allowed: %s %q", r.Status, r.Output)
	}
}

// A HOME below the host's /tmp is hidden by the sandbox: the description
// says so, and a command that fails on it gets a note.
func TestHiddenHomeNote(t *testing.T) {
	needLandlock(t)
	home, err := os.MkdirTemp("/tmp", "bvhome-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	e := newEngine(t)
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "home", Env: map[string]string{"HOME": home},
		Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}
	if d := e.Description(tc); !strings.Contains(d, "HOME ("+home+") is below the host's /tmp, so the sandbox hides it") {
		t.Fatalf("description:\n%s", d)
	}
	r := e.Run(context.Background(), tc, engine.Input{Command: "ls ~"})
	if r.Status != engine.StatusFailed || !strings.HasSuffix(r.Output, "[sandbox: HOME ("+home+") is below the host's /tmp, which the sandbox replaces with the conversation's own /tmp: "+
		"the home directory and what git, ssh and package managers keep there are not visible; set HOME to a directory outside /tmp (for git: pass the identity with git -c user.name=… -c user.email=…)]") {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	// Unsandboxed, nothing is hidden.
	tc.Sandbox = engine.Sandbox{}
	if d := e.Description(tc); strings.Contains(d, "hides it") {
		t.Fatalf("unsandboxed description:\n%s", d)
	}
}

// In a sandbox, a background job's reminder names bash_kill, which stops
// it; the kill -9 -PID the contract once named is refused there (a
// command's processes are out of reach of the next command's).
func TestStartedReminderWorksInSandbox(t *testing.T) {
	needLandlock(t)
	e := newEngine(t)
	tc := engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "stop", Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}
	r := e.Run(context.Background(), tc, engine.Input{Command: "sleep 300", Mode: engine.ModeBackground})
	if r.Status != engine.StatusStarted || !strings.HasSuffix(r.Output, "<reminder>To stop: bash_kill job_id="+r.JobID+"</reminder>") {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
	k := e.Run(context.Background(), tc, engine.Input{Command: fmt.Sprintf("kill -9 -%d", r.PID)})
	if k.Status != engine.StatusFailed || !strings.Contains(k.Output, "Operation not permitted") {
		t.Fatalf("kill from a later sandboxed command: %s %q", k.Status, k.Output)
	}
	j, err := e.Kill(context.Background(), tc, r.JobID)
	if err != nil || j.Status != engine.JobKilled {
		t.Fatalf("bash_kill: %v %+v", err, j)
	}
}

// The description states the output budget the engine applies: the
// middle cut's shares of Output.Max.
func TestDescriptionStatesOutputBudget(t *testing.T) {
	tc := engine.ToolContext{WorkingDir: t.TempDir()}
	if d := newEngine(t).Description(tc); !strings.Contains(d, "Output over 128 KiB is cut in the middle:\nthe result shows its first 32 KiB and last 96 KiB, and names a file with all of it.") {
		t.Fatalf("description:\n%s", d)
	}
	e := newEngine(t, func(c *engine.Config) { c.Output.Max = 40 << 10 })
	if d := e.Description(tc); !strings.Contains(d, "Output over 40 KiB is cut in the middle:\nthe result shows its first 10 KiB and last 30 KiB") {
		t.Fatalf("description:\n%s", d)
	}
	r := e.Run(context.Background(), tc, engine.Input{Command: "head -c 100000 /dev/zero | tr '\\0' a"})
	if !strings.HasPrefix(r.Output, "[output truncated in middle: got 97.7 KiB, showing the first 10 KiB and the last 30 KiB]\n") {
		t.Fatalf("%.120q", r.Output)
	}
}
