package engine_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/bashvisor/bashvisor/safety"
)

// profiled returns an engine with the named permission preset.
func profiled(t *testing.T, name string) *engine.Engine {
	t.Helper()
	p, err := safety.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return newEngine(t, func(c *engine.Config) { c.Permissions = p })
}

// needScoping skips (or fails, in CI) without Landlock signal scoping:
// a contained command's signals could leave it, so it asks.
func needScoping(t *testing.T) {
	t.Helper()
	needNamespaces(t)
	testenv.Needf(t, testenv.Landlock, sandbox.Probe().Scoping, "no Landlock signal scoping (Linux 6.12+): a contained command's signals could leave it, so it asks")
}

// Approve the result, not the command, under guarded: in workspace-write
// a command guarded asks about only for what it does in the workspace
// (sed -i, a heredoc to a file, python3 running the agent's script) runs
// without asking, and everything it changed is held, not applied, until
// accepted; accepting applies it. The same command asks with a network
// grant, with another writable root, and unsandboxed; a command guarded
// asks about for what leaves the workspace (git push) asks first; locked
// still denies it.
func TestGuardedAskRunsAndIsHeld(t *testing.T) {
	needScoping(t)
	e := profiled(t, "guarded")
	ctx := context.Background()
	py := testenv.NeedsTool(t, "python3")[0]
	for name, c := range map[string]struct{ command, file, want string }{
		"sed -i":  {`sed -i s/hello/bye/ README`, "README", "bye\n"},
		"heredoc": {"cat > notes.txt <<'EOF'\nnew\nEOF", "notes.txt", "new\n"},
		"script":  {`python3 gen.py`, "out.txt", "made\n"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := repo(t)
			os.WriteFile(filepath.Join(dir, "gen.py"), []byte("open('out.txt', 'w').write('made\\n')\n"), 0o644)
			tc := workspaceWrite(dir)
			tc.Env = maps.Clone(tc.Env)
			tc.Env["PATH"] = filepath.Dir(py) + ":/usr/bin:/bin"
			before, _ := os.ReadFile(filepath.Join(dir, c.file))
			r := e.Run(ctx, tc, engine.Input{Command: c.command})
			if r.Status != engine.StatusOK || r.Held == nil {
				t.Fatalf("%s: %s held %+v\n%s", c.command, r.Status, r.Held, r.Output)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, c.file)); string(got) != string(before) {
				t.Fatalf("applied before review: %q", got)
			}
			if !strings.Contains(r.Output, "bash_review") {
				t.Errorf("the text does not say how to review: %q", r.Output)
			}
			if _, err := e.Review(ctx, tc, r.Held.ID, r.Held.Digest, true); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, c.file)); string(got) != c.want {
				t.Fatalf("accepted: %s is %q, want %q", c.file, got, c.want)
			}
			net, wr := tc, tc
			net.Sandbox.Network = []string{"example.com"}
			wr.Sandbox.Writable = []string{t.TempDir()}
			plain := engine.ToolContext{WorkingDir: dir, ConversationID: "plain"}
			for name, tc := range map[string]engine.ToolContext{"network": net, "writable": wr, "unrestricted": plain} {
				if r := e.Run(ctx, tc, engine.Input{Command: c.command}); r.Status != engine.StatusNeedsApproval {
					t.Errorf("%s: %s %q", name, r.Status, r.Output)
				}
			}
		})
	}
	dir := repo(t)
	if r := e.Run(ctx, workspaceWrite(dir), engine.Input{Command: "git push origin main"}); r.Status != engine.StatusNeedsApproval {
		t.Errorf("git push under guarded: %s %q", r.Status, r.Output)
	}
	locked := profiled(t, "locked")
	if r := locked.Run(ctx, workspaceWrite(dir), engine.Input{Command: `sed -i s/hello/bye/ README`}); r.Status != engine.StatusDenied {
		t.Errorf("sed -i under locked: %s %q", r.Status, r.Output)
	}
}

// corpusCommands loads the written corpus and, when
// BASHVISOR_AGENT_CORPUS names them, the real agents' commands
// (JSON lines with a "command" field, gzip when named .gz).
func corpusCommands(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	load := func(label, name string) {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var r io.Reader = f
		if strings.HasSuffix(name, ".gz") {
			zr, err := gzip.NewReader(f)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			var rec struct{ Command string }
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[label] = append(out[label], rec.Command)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	load("written", "../safety/testdata/agent-commands.jsonl")
	if env := os.Getenv("BASHVISOR_AGENT_CORPUS"); env != "" {
		for _, name := range filepath.SplitList(env) {
			load("agent", name)
		}
	}
	return out
}

// TestAsksPer100Effective measures asks per 100 commands in
// workspace-write for each permission profile, over the written corpus
// and the real agents' (BASHVISOR_AGENT_CORPUS): the analyser's asks
// (safety.Analyze) beside the engine's (its analysis and gate, nothing
// run), where an ask whose effects stay in the layer runs and is
// reviewed, before (only the safety rules' asks of a command the profile
// allows ran so) and now. Under guarded the engine asks at most 10 times per 100 real
// commands; whatever it lets through without asking that the analysis
// asked about is held whenever the profile asked; locked asks nothing
// and denies exactly what the analysis denies.
func TestAsksPer100Effective(t *testing.T) {
	needScoping(t)
	corpora := corpusCommands(t)
	for _, name := range append([]string{"none"}, safety.Presets()...) {
		var p *safety.Profile
		if name != "none" {
			p, _ = safety.Preset(name)
		}
		e := newEngine(t, func(c *engine.Config) { c.Permissions = p })
		tc := engine.ToolContext{WorkingDir: "/testbed", ConversationID: "asks", Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite}}
		for _, label := range []string{"written", "agent"} {
			cmds := corpora[label]
			if len(cmds) == 0 {
				continue
			}
			// before: the engine converted only the safety rules' asks
			// of a command the profile allows
			var analyser, before, asks, denied, held int
			for _, c := range cmds {
				o := safety.Analyze(c, safety.Options{WorkDir: tc.WorkingDir, Profile: p}).Outcome
				status, hold := engine.Admit(e, tc, c)
				d, _ := p.Evaluate(c)
				if o.Decision == safety.Ask {
					analyser++
					if d != safety.Allow {
						before++
					}
				}
				switch status {
				case engine.StatusNeedsApproval:
					asks++
				case engine.StatusDenied:
					denied++
				}
				if hold {
					held++
				}
				if o.Decision == safety.Ask && status == engine.StatusOK {
					if d == safety.Ask && !hold {
						t.Errorf("%s: %q ran without asking and without holding its changes", name, c)
					}
				}
				if (o.Decision == safety.Deny) != (status == engine.StatusDenied) {
					t.Errorf("%s: %q: analysis %s, engine %s", name, c, o.Decision, status)
				}
			}
			per := func(k int) float64 { return 100 * float64(k) / float64(len(cmds)) }
			t.Logf("%s corpus, %s, workspace-write: %d commands: analyser %.1f asks per 100; engine before %.1f, now %.1f asks per 100 (%.1f held in full); %.1f denials",
				label, name, len(cmds), per(analyser), per(before), per(asks), per(held), per(denied))
			if label == "agent" && name == "guarded" && per(asks) > 10 {
				t.Errorf("guarded asks %.1f times per 100 real commands in workspace-write, want at most 10", per(asks))
			}
			if name == "locked" && asks > 0 {
				t.Errorf("locked asked %d times", asks)
			}
		}
	}
}
