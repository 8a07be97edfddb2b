package engine_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/bashvisor/bashvisor/safety"
)

// readOnlyCall is a call in the read-only sandbox.
func readOnlyCall(dir string) engine.ToolContext {
	return engine.ToolContext{WorkingDir: dir, ConversationID: "ro", Env: gitEnv, Sandbox: engine.Sandbox{Profile: engine.ReadOnly}}
}

// TestGuardedReadOnlyAsksNothingTheKernelAnswers: under guarded, a call
// in the read-only sandbox does not ask about what it asks about only for
// what the command does in the workspace (sed -i, a heredoc to a file,
// python3 running the agent's code): approving it would not lift the
// sandbox. It runs, its writes fail and the workspace is unchanged, and
// what only reads succeeds. With a network grant it asks, unsandboxed it
// asks, beside a job of the conversation with a network grant it asks,
// and what leaves the workspace (git push) asks first.
func TestGuardedReadOnlyAsksNothingTheKernelAnswers(t *testing.T) {
	needScoping(t)
	e := profiled(t, "guarded")
	ctx := context.Background()
	py := testenv.NeedsTool(t, "python3")[0]
	for name, c := range map[string]struct {
		command, file string
		ok            bool // it only reads: it succeeds
	}{
		"sed -i":     {`sed -i s/hello/bye/ README`, "README", false},
		"heredoc":    {"cat > notes.txt <<'EOF'\nnew\nEOF", "notes.txt", false},
		"script":     {`python3 gen.py`, "out.txt", false},
		"python -c":  {`python3 -c 'print(open("README").read())'`, "README", true},
		"rm":         {`rm README`, "README", false},
		"safety ask": {`git add -A`, ".git/index", false},
	} {
		t.Run(name, func(t *testing.T) {
			dir := repo(t)
			os.WriteFile(filepath.Join(dir, "gen.py"), []byte("open('out.txt', 'w').write('made\\n')\n"), 0o644)
			tc := readOnlyCall(dir)
			tc.Env = maps.Clone(tc.Env)
			tc.Env["PATH"] = filepath.Dir(py) + ":/usr/bin:/bin"
			if o := safety.Analyze(c.command, safety.Options{WorkDir: dir, Profile: mustPreset(t, "guarded")}).Outcome; o.Decision != safety.Ask || !o.Contained {
				t.Fatalf("the analysis: %s contained %v; the case tests nothing", o.Decision, o.Contained)
			}
			before, _ := os.ReadFile(filepath.Join(dir, c.file))
			r := e.Run(ctx, tc, engine.Input{Command: c.command})
			if r.Status == engine.StatusNeedsApproval || r.Status == engine.StatusDenied || r.Held != nil {
				t.Fatalf("%s: %s held %+v\n%s", c.command, r.Status, r.Held, r.Output)
			}
			if (r.Status == engine.StatusOK) != c.ok {
				t.Errorf("%s: %s, want it to succeed: %v\n%s", c.command, r.Status, c.ok, r.Output)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, c.file)); string(got) != string(before) {
				t.Fatalf("%s changed %s under the read-only sandbox: %q", c.command, c.file, got)
			}
			if c.ok && name == "python -c" && !strings.Contains(r.Output, "hello") {
				t.Errorf("the read read nothing: %q", r.Output)
			}
			net := tc
			net.Sandbox.Network = []string{"example.com"}
			plain := engine.ToolContext{WorkingDir: dir, ConversationID: "plain", Env: tc.Env}
			for name, tc := range map[string]engine.ToolContext{"network": net, "unrestricted": plain} {
				if r := e.Run(ctx, tc, engine.Input{Command: c.command}); r.Status != engine.StatusNeedsApproval {
					t.Errorf("%s: %s %q", name, r.Status, r.Output)
				}
			}
		})
	}
	dir := repo(t)
	ro := readOnlyCall(dir)
	if r := e.Run(ctx, ro, engine.Input{Command: "git push origin main"}); r.Status != engine.StatusNeedsApproval {
		t.Errorf("git push under guarded, read-only: %s %q", r.Status, r.Output)
	}
	// beside a job of the conversation with a network grant it asks
	net := ro
	net.Sandbox.Network = []string{"example.com"}
	job := e.Run(ctx, net, engine.Input{Mode: engine.ModeBackground, Command: "sleep 600"})
	if job.Status != engine.StatusStarted {
		t.Fatalf("background: %s %q", job.Status, job.Output)
	}
	if r := e.Run(ctx, ro, engine.Input{Command: "sed -i s/hello/bye/ README"}); r.Status != engine.StatusNeedsApproval {
		t.Errorf("beside a network job: %s %q", r.Status, r.Output)
	}
	if _, err := e.Kill(ctx, net, job.JobID); err != nil {
		t.Fatal(err)
	}
}

func mustPreset(t testing.TB, name string) *safety.Profile {
	t.Helper()
	p, err := safety.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAsksPer100ReadOnly measures asks per 100 commands for each
// permission profile in a call in the read-only sandbox, over the written
// corpus and the real agents' (BASHVISOR_AGENT_CORPUS), through the
// engine's analysis and gate (nothing run): the analyser's asks beside
// the engine's. Under guarded the engine asks at most 10 times per 100
// real commands; locked asks nothing and denies what the analysis denies.
func TestAsksPer100ReadOnly(t *testing.T) {
	needScoping(t)
	corpora := corpusCommands(t)
	for _, name := range append([]string{"none"}, safety.Presets()...) {
		var p *safety.Profile
		if name != "none" {
			p = mustPreset(t, name)
		}
		e := newEngine(t, func(c *engine.Config) { c.Permissions = p })
		tc := readOnlyCall("/testbed")
		for _, label := range []string{"written", "agent"} {
			cmds := corpora[label]
			if len(cmds) == 0 {
				continue
			}
			var analyser, asks, denied int
			for _, c := range cmds {
				o := safety.Analyze(c, safety.Options{WorkDir: tc.WorkingDir, Profile: p}).Outcome
				if o.Decision == safety.Ask {
					analyser++
				}
				status, held := engine.Admit(e, tc, c)
				switch status {
				case engine.StatusNeedsApproval:
					asks++
				case engine.StatusDenied:
					denied++
				}
				if held {
					t.Errorf("%s: %q held in the read-only sandbox", name, c)
				}
				if (o.Decision == safety.Deny) != (status == engine.StatusDenied) {
					t.Errorf("%s: %q: analysis %s, engine %s", name, c, o.Decision, status)
				}
				if o.Decision == safety.Ask && !o.Contained && status != engine.StatusNeedsApproval {
					t.Errorf("%s: %q asked for what leaves the workspace, and ran: %s", name, c, status)
				}
			}
			per := func(k int) float64 { return 100 * float64(k) / float64(len(cmds)) }
			t.Logf("%s corpus, %s, read-only: %d commands: analyser %.1f asks per 100; engine %.1f asks per 100; %.1f denials",
				label, name, len(cmds), per(analyser), per(asks), per(denied))
			if label == "agent" && name == "guarded" && per(asks) > 10 {
				t.Errorf("guarded asks %.1f times per 100 real commands in the read-only sandbox, want at most 10", per(asks))
			}
			if name == "locked" && asks > 0 {
				t.Errorf("locked asked %d times", asks)
			}
		}
	}
}

// TestNetworkAskNamesTheContainedAsk: a command guarded would run unasked
// in the read-only sandbox (its writes fail there) is no longer contained
// once it asks for a host: the one question names the host and what the
// command is otherwise asked about, and a person's approval of it runs the
// command with both. Before, the question named only the host and the
// approval silently covered the write too.
func TestNetworkAskNamesTheContainedAsk(t *testing.T) {
	needScoping(t)
	e := profiled(t, "guarded")
	dir := repo(t)
	tc := readOnlyCall(dir)
	in := engine.Input{Command: `rm README`, Network: []string{"example.invalid:8443"}}
	r := e.Run(context.Background(), tc, in)
	if r.Status != engine.StatusNeedsApproval || !strings.Contains(r.Output, "example.invalid:8443") || !strings.Contains(r.Output, "; and, with that network, ") {
		t.Fatalf("unapproved: %s %q, want one question naming the host and the command's own ask", r.Status, r.Output)
	}
	// Without the host the same command is contained: it runs unasked.
	if r := e.Run(context.Background(), tc, engine.Input{Command: in.Command}); r.Status == engine.StatusNeedsApproval {
		t.Fatalf("without network: %s %q", r.Status, r.Output)
	}
	// A command guarded denies is denied, host or not.
	if r := e.Run(context.Background(), tc, engine.Input{Command: "sudo true", Network: in.Network}); r.Status != engine.StatusDenied {
		t.Errorf("sudo with a host: %s %q, want denied", r.Status, r.Output)
	}
}
