package safety

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// profileTally counts the outcomes of the commands under one profile.
type profileTally struct{ n, allow, ask, deny, block int }

func (t profileTally) String() string {
	per := func(k int) float64 { return 100 * float64(k) / float64(max(t.n, 1)) }
	return fmt.Sprintf("%d commands: %.1f asks, %.1f denials, %.1f blocks per 100", t.n, per(t.ask), per(t.deny), per(t.block))
}

// writtenCommands loads testdata/agent-commands.jsonl.
func writtenCommands(t testing.TB) []writtenCommand {
	f, err := os.Open("testdata/agent-commands.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []writtenCommand
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec writtenCommand
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// tally analyses commands under profile p.
func tally(cmds []string, p *Profile, each func(cmd string, o Outcome)) profileTally {
	var t profileTally
	for _, c := range cmds {
		o := Analyze(c, Options{WorkDir: "/testbed", Profile: p}).Outcome
		t.n++
		switch o.Decision {
		case Allow:
			t.allow++
		case Ask:
			t.ask++
		case Deny:
			t.deny++
		case Block:
			t.block++
		}
		if each != nil {
			each(c, o)
		}
	}
	return t
}

// TestAsksPer100 reports asks per 100 commands for each profile.
func TestAsksPer100(t *testing.T) {
	var cmds []string
	for _, r := range writtenCommands(t) {
		cmds = append(cmds, r.Command)
	}
	for _, name := range append([]string{"none"}, Presets()...) {
		p, _ := Preset(name)
		t.Logf("written corpus, %s: %v", name, tally(cmds, p, nil))
	}
	if os.Getenv("BASHVISOR_AGENT_CORPUS") == "" {
		return
	}
	var real []string
	for _, r := range agentCorpus(t) {
		real = append(real, r.Command)
	}
	for _, name := range append([]string{"none"}, Presets()...) {
		p, _ := Preset(name)
		t.Logf("agent corpus, %s: %v", name, tally(real, p, nil))
	}
}
