package safety

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"testing"
)

// plainRead matches the shapes of the plain reads the review of real
// agent sessions found guarded asking for (../shared/reviews/analysis.md
// §2): cat, grep, head, tail, sed -n, nl -ba, find, ls, possibly after a
// cd and piped into one another. Guarded must ask for none.
var plainRead = readShape{regexp.MustCompile(`-exec|-ok|-delete|-fprint|-fls|\s-i\b|--in-place`), regexp.MustCompile(`^(?:cd [\w./-]+ && )?(?:(?:cat|grep|egrep|head|tail|sed -n|nl -ba|nl|ls|find|wc)(?: [^|;&<>$` + "`" + `]*)?(?: \| |$))+$`)}

// readShape matches a command of the shape yes unless it also matches
// not (find -exec, sed -i).
type readShape struct{ not, yes *regexp.Regexp }

func (r readShape) MatchString(s string) bool { return r.yes.MatchString(s) && !r.not.MatchString(s) }

// profileTally counts the outcomes of the commands under one profile.
// An ask not Contained is one that asks before the command runs even in
// workspace-write (where package engine runs a contained one and reviews
// what it changed).
type profileTally struct{ n, allow, ask, leave, deny, block int }

func (t profileTally) String() string {
	per := func(k int) float64 { return 100 * float64(k) / float64(max(t.n, 1)) }
	return fmt.Sprintf("%d commands: %.1f asks (%.1f not contained), %.1f denials, %.1f blocks per 100", t.n, per(t.ask), per(t.leave), per(t.deny), per(t.block))
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
			if !o.Contained {
				t.leave++
			}
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

// TestAsksPer100 reports asks per 100 commands for each profile, over
// the written corpus and, when BASHVISOR_AGENT_CORPUS names it, the real
// one; under guarded, no plain read asks.
func TestAsksPer100(t *testing.T) {
	var cmds []string
	for _, r := range writtenCommands(t) {
		cmds = append(cmds, r.Command)
	}
	guarded, _ := Preset("guarded")
	noReadAsked := func(cmd string, o Outcome) {
		if o.Decision != Allow && plainRead.MatchString(cmd) {
			t.Errorf("guarded: %s for a plain read: %q (%s)", o.Decision, clip(cmd), o.Message)
		}
	}
	reads := 0
	for _, c := range cmds {
		if plainRead.MatchString(c) {
			reads++
		}
	}
	t.Logf("written corpus: %d plain reads", reads)
	tally(cmds, guarded, noReadAsked)
	for _, name := range append([]string{"none"}, Presets()...) {
		p, _ := Preset(name)
		t.Logf("written corpus, %s: %v", name, tally(cmds, p, nil))
	}
	if os.Getenv("BASHVISOR_AGENT_CORPUS") == "" {
		return
	}
	corpus := agentCorpus(t)
	var real []string
	for _, r := range corpus {
		real = append(real, r.Command)
	}
	reads = 0
	for _, c := range real {
		if plainRead.MatchString(c) {
			reads++
		}
	}
	t.Logf("agent corpus: %d plain reads", reads)
	tally(real, guarded, noReadAsked)
	for _, name := range append([]string{"none"}, Presets()...) {
		p, _ := Preset(name)
		var weighted profileTally
		n := 0
		tl := tally(real, p, func(cmd string, o Outcome) {
			w := max(corpus[n].N, 1)
			n++
			weighted.n += w
			switch o.Decision {
			case Ask:
				weighted.ask += w
				if !o.Contained {
					weighted.leave += w
				}
			case Deny:
				weighted.deny += w
			case Block:
				weighted.block += w
			}
		})
		t.Logf("agent corpus, %s: distinct %v; occurrences %v", name, tl, weighted)
	}
}
