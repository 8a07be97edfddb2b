package safety

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
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

// askKind sorts the simple command a guarded ask objects to by what it
// does.
func askKind(part string, r *Rule) string {
	f := strings.Fields(part)
	for len(f) > 1 && strings.Contains(f[0], "=") && !strings.HasPrefix(f[0], "=") {
		f = f[1:] // NAME=value prefixes
	}
	name := ""
	if len(f) > 0 {
		name = f[0][strings.LastIndexByte(f[0], '/')+1:]
	}
	switch {
	case r != nil && r.Pattern == writeRedirect:
		return "writes a file (redirection)"
	case (name == "sed" || name == "perl") && len(f) > 1 && strings.HasPrefix(f[1], "-i"):
		return "edits a file in place (sed -i)"
	case slices.Contains([]string{"rm", "rmdir", "mv", "cp", "mkdir", "touch", "chmod", "ln", "patch", "ed", "truncate", "tee"}, name):
		return "changes files (rm, mv, cp, mkdir, touch, patch)"
	case strings.HasPrefix(name, "python") || slices.Contains([]string{"bash", "sh", "node", "perl", "ruby", "django-admin", "sphinx-quickstart", "sphinx-apidoc", "timeout", "export", "kill"}, name) ||
		strings.HasPrefix(f[0], "./") || strings.HasPrefix(name, "PID="):
		return "runs code the agent wrote (python x.py, python -c, ./x.sh)"
	case name == "git":
		return "changes the repository (git checkout, add)"
	case name == "pip" || name == "pip3" || name == "apt-get":
		return "installs"
	}
	return "other"
}

// TestGuardedAskShapes: what guarded still asks about in real agent
// sessions (BASHVISOR_AGENT_CORPUS), by the simple command it objects to:
// the 30 most frequent, and the kinds per 100 commands. Asks that are
// neither writes nor runs of the agent's code stay under 1 per 100, and
// so do asks for what leaves the workspace (apt-get install).
func TestGuardedAskShapes(t *testing.T) {
	corpus := agentCorpus(t)
	guarded, _ := Preset("guarded")
	shapes, kinds := map[string]int{}, map[string]int{}
	example := map[string]string{}
	leave := 0 // asks for what leaves the workspace
	for _, rec := range corpus {
		o := Analyze(rec.Command, Options{WorkDir: "/testbed", Profile: guarded}).Outcome
		if o.Decision != Ask {
			continue
		}
		if !o.Contained {
			leave++
		}
		src := &source{text: rec.Command}
		parts := src.commandParts()
		kind := "other"
		for i, pt := range parts {
			d, r, _ := guarded.evalParts(parts[i:i+1], pt.text)
			if d != Ask {
				continue
			}
			f := strings.Fields(pt.text)
			shape := f[0]
			if len(f) > 1 && strings.HasPrefix(f[1], "-") {
				shape += " " + f[1]
			}
			shapes[shape]++
			if example[shape] == "" {
				example[shape] = pt.text
			}
			if k := askKind(pt.text, r); kind == "other" {
				kind = k
			}
		}
		kinds[kind]++
	}
	top := slices.SortedFunc(maps.Keys(shapes), func(a, b string) int { return cmp.Or(shapes[b]-shapes[a], strings.Compare(a, b)) })
	for i, s := range top[:min(30, len(top))] {
		t.Logf("%2d. %5d  %-16s e.g. %q", i+1, shapes[s], s, clip(example[s]))
	}
	per := func(k int) float64 { return 100 * float64(k) / float64(len(corpus)) }
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		t.Logf("%.1f per 100: %s", per(kinds[k]), k)
	}
	t.Logf("%.2f per 100 ask for what leaves the workspace", per(leave))
	if per(leave) >= 1 {
		t.Errorf("guarded asks %.1f times per 100 real commands for what leaves the workspace", per(leave))
	}
	if per(kinds["other"]) >= 1 {
		t.Errorf("guarded asks %.1f times per 100 real commands about what neither writes nor runs the agent's code", per(kinds["other"]))
	}
}
