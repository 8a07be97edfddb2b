package safety

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// corpusCommand is one record of an agent-command corpus (see
// testdata/README.md).
type corpusCommand struct {
	Command string `json:"command"`
	Source  string `json:"source"`
	N       int    `json:"n"`
}

// agentCorpus loads the agent-command corpora named by
// BASHVISOR_AGENT_CORPUS (files separated by ':', each JSON lines, gzipped
// when the name ends in .gz). The corpora are built from public agent
// trajectories by testdata/extract and are not part of the repository
// (testdata/README.md says why and how to build them). Without them the
// test is skipped, and fails when REQUIRE_CORPUS=1.
func agentCorpus(t testing.TB) []corpusCommand {
	t.Helper()
	env := os.Getenv("BASHVISOR_AGENT_CORPUS")
	testenv.Needf(t, "REQUIRE_CORPUS", env != "", "no agent-command corpus: set BASHVISOR_AGENT_CORPUS (see safety/testdata/README.md)")
	var out []corpusCommand
	for _, name := range filepath.SplitList(env) {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
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
			var rec corpusCommand
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out = append(out, rec)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if len(out) == 0 {
		t.Fatal("empty agent-command corpus")
	}
	return out
}

// TestAgentCorpus: no command a real coding agent issued is blocked,
// except one bash itself rejects (parse-error, checked with bash -n); asks
// are listed and stay rare.
func TestAgentCorpus(t *testing.T) {
	corpus := agentCorpus(t)
	asks, blocks, parseErrs := 0, 0, 0
	byRule := map[string]int{}
	for _, rec := range corpus {
		a := Analyze(rec.Command, Options{WorkDir: "/testbed"})
		o := a.Outcome
		switch o.Decision {
		case Block:
			if o.Rule == "parse-error" {
				parseErrs++
				if bashAccepts(t, rec.Command) {
					t.Errorf("parse-error on a command bash -n accepts (%s): %q: %s", rec.Source, rec.Command, o.Message)
				}
				continue
			}
			blocks++
			t.Errorf("blocked (%s, %s): %q: %s", o.Rule, rec.Source, clip(rec.Command), o.Message)
		case Ask:
			asks++
			byRule[o.Rule]++
			t.Logf("ask (%s, %s): %q", o.Rule, rec.Source, clip(rec.Command))
		}
	}
	t.Logf("%d commands: %d blocked, %d asked %v, %d parse errors (bash -n rejects them too)",
		len(corpus), blocks, asks, byRule, parseErrs)
	if max := len(corpus) / 200; asks > max {
		t.Errorf("%d asks, more than 0.5%% of %d benign commands", asks, len(corpus))
	}
}

// bashAccepts reports whether bash -n accepts command.
func bashAccepts(t *testing.T, command string) bool {
	cmd := exec.Command(testenv.NeedsTool(t, "bash")[0], "-n", "-c", command)
	cmd.WaitDelay = time.Second
	return cmd.Run() == nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
