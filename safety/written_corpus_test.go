package safety

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// writtenCommand is one record of testdata/agent-commands.jsonl, the
// project's own corpus of agent-shaped commands (see testdata/README.md).
type writtenCommand struct {
	ID      int    `json:"id"`
	Shape   string `json:"shape"`
	Command string `json:"command"`
	// Expect is "ask" for the few commands the analysis rightly puts to a
	// person (Rule names the rule, Why says why); every other command is
	// allowed.
	Expect string `json:"expect"`
	Rule   string `json:"rule"`
	Why    string `json:"why"`
}

// TestWrittenAgentCommands runs in CI (unlike TestAgentCorpus, whose real
// trajectories cannot be committed): over more than 600 distinct commands
// shaped like coding agents' work, with the engine's defaults (no
// permission profile), nothing is blocked and nothing asks except the
// listed commands, each for its listed rule with an alternative.
func TestWrittenAgentCommands(t *testing.T) {
	f, err := os.Open("testdata/agent-commands.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	shapes := map[string]int{}
	asks := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec writtenCommand
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if seen[rec.Command] {
			t.Errorf("#%d repeats a command: %q", rec.ID, rec.Command)
		}
		seen[rec.Command] = true
		shapes[rec.Shape]++
		o := Analyze(rec.Command, Options{WorkDir: "/testbed"}).Outcome
		want := Allow
		if rec.Expect == "ask" {
			want = Ask
			asks++
			if rec.Rule == "" || rec.Why == "" {
				t.Errorf("#%d: an expected ask needs its rule and why", rec.ID)
			}
		}
		switch {
		case o.Decision != want:
			t.Errorf("#%d (%s): %s (%s: %s), want %s: %q", rec.ID, rec.Shape, o.Decision, o.Rule, o.Message, want, clip(rec.Command))
		case want == Ask && (o.Rule != rec.Rule || !containsInstead(o.Message)):
			t.Errorf("#%d: asked by %q with %q, want rule %q and an alternative", rec.ID, o.Rule, o.Message, rec.Rule)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d commands, %d expected asks, by shape %v", len(seen), asks, shapes)
	if len(seen) < 600 {
		t.Errorf("%d commands, want at least 600", len(seen))
	}
	for _, s := range []string{"explore", "python", "build", "git", "git-commit", "submit", "heredoc", "sed", "patch", "server", "agent-style", "misc"} {
		if shapes[s] == 0 {
			t.Errorf("no %s commands", s)
		}
	}
}

func containsInstead(msg string) bool { return strings.Contains(msg, "instead") }
