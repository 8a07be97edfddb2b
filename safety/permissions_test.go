package safety

import (
	"testing"
)

func TestPresets(t *testing.T) {
	type c struct {
		cmd  string
		want Decision
	}
	table := map[string][]c{
		"open": {
			{"ls", Allow}, {"sudo reboot", Allow}, {"git push", Allow}, {"anything at all", Allow},
		},
		"standard": {
			{"ls -la", Allow}, {"go test ./...", Allow}, {"rm -rf build", Allow}, {"echo x > f", Allow},
			{"sudo apt-get update", Ask}, {"su -", Ask}, {"git push origin main", Ask},
			{"git -C repo push", Ask}, {"cd x && git push", Ask}, {"git status && git push", Ask},
			{"git reset --hard HEAD~1", Ask}, {"git clean -fdx", Ask}, {"npm publish", Ask},
			{"kubectl delete pod x", Ask}, {"terraform apply", Ask}, {"systemctl restart nginx", Ask},
			{"chmod -R 777 .", Ask}, {"apt-get install -y jq", Ask},
			{"reboot", Deny}, {"sudo shutdown -h now", Deny}, {"ls && poweroff", Deny},
			{"git commit -m 'mention git push'", Allow},
			{"git commit -m \"multi\nline\" && git push", Ask},
		},
		"guarded": {
			{"ls", Allow}, {"cat README.md | grep x | wc -l", Allow}, {"git status", Allow},
			{"git -C repo log --oneline", Allow}, {"go test ./...", Allow}, {"make", Allow},
			{"cd sub && go build ./...", Allow}, {"npm test", Allow}, {"find . -name '*.go'", Allow},
			{"find . -delete", Ask}, {"rm -rf build", Ask}, {"git commit -m x", Ask}, {"curl https://x", Ask},
			{"ls > out.txt", Ask}, {"ls 2>/dev/null", Allow}, {"make >/dev/null 2>&1", Allow},
			{"sudo ls", Deny}, {"ls; sudo rm x", Deny}, {"halt", Deny},
			{"ls\nrm x", Ask},
		},
		"locked": {
			{"ls -la", Allow}, {"cat a | grep b", Allow}, {"git diff", Allow}, {"pwd", Allow},
			{"rm x", Deny}, {"go build", Deny}, {"ls && rm x", Deny}, {"ls\nrm -rf x", Deny},
			{"echo x > file", Deny}, {"echo x >> /tmp/f", Deny}, {"echo x >/dev/null", Allow},
			{"find . -exec rm {} +", Deny}, {"env rm x", Deny}, {"ls $(rm x)", Deny},
			{"git push", Deny}, {"sudo ls", Deny},
		},
	}
	for _, name := range Presets() {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != name {
			t.Errorf("Preset(%q).Name = %q", name, p.Name)
		}
		for _, tc := range table[name] {
			got, r := p.Evaluate(tc.cmd)
			if got != tc.want {
				pat := "<default>"
				if r != nil {
					pat = r.Pattern
				}
				t.Errorf("%s.Evaluate(%q) = %s via %s, want %s", name, tc.cmd, got, pat, tc.want)
			}
		}
	}
	if _, err := Preset("nope"); err == nil {
		t.Error("unknown preset accepted")
	}
}

func TestProfileOrderAndRule(t *testing.T) {
	p := &Profile{Name: "t", Default: Ask, Rules: []Rule{
		{Pattern: `^tool:bash:git push --force`, Decision: Deny},
		{Pattern: `^tool:bash:git `, Decision: Allow},
	}}
	d, r := p.Evaluate("git push --force")
	if d != Deny || r == nil || r.Pattern != `^tool:bash:git push --force` {
		t.Errorf("first match must win: %s %+v", d, r)
	}
	d, r = p.Evaluate("git status")
	if d != Allow || r == nil || r.Decision != Allow {
		t.Errorf("git status: %s %+v", d, r)
	}
	d, r = p.Evaluate("ls")
	if d != Ask || r != nil {
		t.Errorf("default: %s %+v", d, r)
	}
	// whole-text rules can tighten a multi-part command
	p2 := &Profile{Default: Allow, Rules: []Rule{{Pattern: `curl.*\|\s*sh`, Decision: Deny}}}
	if d, _ := p2.Evaluate("curl x | sh"); d != Deny {
		t.Errorf("whole-text rule ignored: %s", d)
	}
	// invalid patterns fail closed
	bad := &Profile{Default: Allow, Rules: []Rule{{Pattern: `(`, Decision: Allow}}}
	if bad.Compile() == nil {
		t.Error("invalid pattern compiled")
	}
	if d, _ := bad.Evaluate("ls"); d != Deny {
		t.Errorf("invalid profile must deny, got %s", d)
	}
	if (&Profile{Rules: []Rule{{Pattern: "x", Decision: "maybe"}}}).Compile() == nil {
		t.Error("unknown decision accepted")
	}
	var nilp *Profile
	if d, r := nilp.Evaluate("rm -rf x"); d != Allow || r != nil {
		t.Error("nil profile must allow")
	}
	// unparseable commands are matched whole
	if d, _ := p.Evaluate("git commit -m 'x"); d != Allow {
		t.Errorf("unparseable command: %s", d)
	}
}

// An ask says whether it is only for what the command does in the
// workspace (Outcome.Contained): the safety rules' asks are, guarded's
// writes and default and standard's losing-work asks are, and the asks
// before publishing, deploying, the system and privilege are not, alone
// or beside a contained one; nothing but an ask is ever Contained, and
// locked contains nothing.
func TestOutcomeContained(t *testing.T) {
	for _, c := range []struct {
		profile, command string
		want             Decision
		contained        bool
	}{
		{"none", "git add -A", Ask, true},
		{"guarded", "git add -A", Ask, true},
		{"guarded", "sed -i s/a/b/ f.py", Ask, true},
		{"guarded", "cat > f.py <<'EOF'\nx = 1\nEOF", Ask, true},
		{"guarded", "echo x > f.txt", Ask, true},
		{"guarded", "python3 reproduce.py", Ask, true},
		{"guarded", "rm -rf build && mkdir build", Ask, true},
		{"guarded", "git reset --hard HEAD~1", Ask, true},
		{"guarded", "git push origin main", Ask, false},
		{"guarded", "sed -i s/a/b/ f && git push", Ask, false},
		{"guarded", "npm publish", Ask, false},
		{"guarded", "kubectl apply -f x.yaml", Ask, false},
		{"guarded", "systemctl restart nginx", Ask, false},
		{"guarded", "apt-get install -y jq", Ask, false},
		{"guarded", "sudo rm x", Deny, false},
		{"guarded", "cat README.md", Allow, false},
		{"standard", "git reset --hard", Ask, true},
		{"standard", "git rebase main", Ask, true},
		{"standard", "git push", Ask, false},
		{"standard", "sudo make install", Ask, false},
		{"standard", "rm -rf build", Allow, false},
		{"locked", "sed -i s/a/b/ f.py", Deny, false},
		{"locked", "git add -A", Deny, false},
		{"locked", "ls", Allow, false},
	} {
		var p *Profile
		if c.profile != "none" {
			p, _ = Preset(c.profile)
		}
		o := Gate(c.command, p)
		if o.Decision != c.want || o.Contained != c.contained {
			t.Errorf("%s: %q: %s contained %v, want %s contained %v (%s)", c.profile, c.command, o.Decision, o.Contained, c.want, c.contained, o.Message)
		}
	}
	var cmds []string
	for _, r := range writtenCommands(t) {
		cmds = append(cmds, r.Command)
	}
	for _, name := range append([]string{"none"}, Presets()...) {
		p, _ := Preset(name)
		tally(cmds, p, func(cmd string, o Outcome) {
			if o.Contained && (o.Decision != Ask || name == "locked") {
				t.Errorf("%s: %q: %s and contained", name, cmd, o.Decision)
			}
		})
	}
}
