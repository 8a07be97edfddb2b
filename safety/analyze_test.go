package safety

import (
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/secret"
)

// TestAnalyzeParsesOnce counts the parses of one Analyze call: the command
// text once, and nested shell code (separate text) once more each.
func TestAnalyzeParsesOnce(t *testing.T) {
	standard, err := Preset("standard")
	if err != nil {
		t.Fatal(err)
	}
	locked, err := Preset("locked")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	all := Options{WorkDir: work, Profile: standard, CoAuthor: testTrailer, Log: true}
	known := secret.NewRedactor(map[string]string{"DB_PASSWORD": "hunter2hunter2"})
	cases := []struct {
		name string
		cmd  string
		opts Options
		want int64
		// what shows the analysis went through the path named
		check func(Analysis) bool
	}{
		{"plain command", "ls -la", all, 1, nil},
		{"cd prefix dropped", "cd " + work + " && go build ./... && go vet ./...", all, 1,
			func(a Analysis) bool { return a.Display == "go build ./... && go vet ./..." }},
		{"git commit with co-author", `git add a.go && git commit -m "fix: x"`, all, 1,
			func(a Analysis) bool { return strings.Contains(a.Run, "--trailer") }},
		{"profile asks", "go test ./... && git push origin main", all, 1,
			func(a Analysis) bool { return a.Outcome.Decision == Ask && a.Part == "git push origin main" }},
		{"profile denies", "ls && rm -r build", Options{WorkDir: work, Profile: locked}, 1,
			func(a Analysis) bool { return a.Outcome.Decision == Deny && a.Part == "rm -r build" }},
		{"safety rule blocks", "cd " + work + " && rm -rf /", all, 1,
			func(a Analysis) bool { return a.Outcome.Rule == "rm-critical" }},
		{"secret assignment redacted", "GH_TOKEN=ghp_0123456789abcdefABCDEF gh pr list", all, 1,
			func(a Analysis) bool { return a.Log == "GH_TOKEN=[REDACTED] gh pr list" }},
		{"parse error", "git commit -m 'x", all, 1,
			func(a Analysis) bool { return a.Outcome.Rule == "parse-error" }},
		{"nested shell code is its own text", "bash -c 'git commit -m x'", all, 2, nil},
		{"known secret value makes different text", "psql -W hunter2hunter2 -v x=1", Options{Secrets: known, Log: true}, 2,
			func(a Analysis) bool { return a.Log == "psql -W [REDACTED:DB_PASSWORD] -v x=1" }},
		{"different text without =: no assignment to find, not parsed", "psql -W hunter2hunter2", Options{Secrets: known, Log: true}, 1,
			func(a Analysis) bool { return a.Log == "psql -W [REDACTED:DB_PASSWORD]" }},
		{"blank command: not parsed", " \n", all, 0, nil},
		{"no log asked for: no redaction", "GH_TOKEN=ghp_0123456789abcdefABCDEF gh pr list", Options{Secrets: known}, 1,
			func(a Analysis) bool { return a.Log == "" }},
	}
	for _, tc := range cases {
		before := parses.Load()
		a := Analyze(tc.cmd, tc.opts)
		if got := parses.Load() - before; got != tc.want {
			t.Errorf("%s: Analyze(%q) parsed %d times, want %d", tc.name, tc.cmd, got, tc.want)
		}
		if tc.check != nil && !tc.check(a) {
			t.Errorf("%s: Analyze(%q) = %+v", tc.name, tc.cmd, a)
		}
	}
	// The counter sees what the separate calls cost: a parse each.
	cmd := "cd " + work + ` && git commit --cleanup=strip -m "fix: x"`
	before := parses.Load()
	Display(cmd, work)
	Gate(cmd, standard)
	AddCoAuthor(cmd, testTrailer)
	RedactSecrets(cmd)
	if got := parses.Load() - before; got != 4 {
		t.Errorf("the separate calls parsed %q %d times, want 4", cmd, got)
	}
}

// TestAnalyzePart: the simple command a permission profile objected to.
func TestAnalyzePart(t *testing.T) {
	standard, _ := Preset("standard")
	guarded, _ := Preset("guarded")
	locked, _ := Preset("locked")
	pipeline := &Profile{Name: "pipes", Rules: []Rule{{Pattern: `^tool:bash:ls \| sh$`, Decision: Deny}}}
	broken := &Profile{Name: "broken", Rules: []Rule{{Pattern: `(`, Decision: Allow}}}
	cases := []struct {
		name, cmd string
		p         *Profile
		want      string
	}{
		{"the first refused part of a list", "go test ./... && git push && npm publish", standard, "git push"},
		{"deny outranks an earlier ask", "rm x; sudo ls", guarded, "sudo ls"},
		{"a part with the refused command nested in it", "echo $(sudo ls)", standard, "echo $(sudo ls)"},
		{"a part with its redirections", "ls > out.txt", guarded, "ls > out.txt"},
		{"an escaped ; stays in its word", `find . -name '*.o' -exec rm {} \;`, guarded, `find . -name '*.o' -exec rm {} \;`},
		{"the terminator is not in the part", "rm x &", locked, "rm x"},
		{"a heredoc's body counts on its own", "cat <<EOF >f\n$(sudo ls)\nEOF", standard, "sudo ls"},
		{"a rule on the whole text: the whole command", "ls | sh", pipeline, "ls | sh"},
		{"a profile that does not compile denies the first part", "ls; rm x", broken, "ls"},
		{"the safety rules decided: none", "curl -s x | sh", standard, ""},
		{"allowed: none", "go test ./...", standard, ""},
		{"no profile: none", "sudo ls", nil, ""},
	}
	for _, tc := range cases {
		if got := Analyze(tc.cmd, Options{Profile: tc.p}).Part; got != tc.want {
			t.Errorf("%s: Analyze(%q).Part = %q, want %q", tc.name, tc.cmd, got, tc.want)
		}
	}
}

// TestAnalyzeParseErrorFailsClosed: a command that does not parse is
// blocked, shown and run as written, and still redacted for logs.
func TestAnalyzeParseErrorFailsClosed(t *testing.T) {
	work := t.TempDir()
	cmd := "cd " + work + " && GH_TOKEN=ghp_0123456789abcdefABCDEF git commit -m 'x"
	a := Analyze(cmd, Options{WorkDir: work, CoAuthor: testTrailer, Log: true})
	if a.Outcome.Decision != Block || a.Outcome.Rule != "parse-error" {
		t.Errorf("outcome %+v, want a parse-error block", a.Outcome)
	}
	if a.Display != cmd || a.Run != cmd || a.Part != "" {
		t.Errorf("Display %q, Run %q, Part %q: want the command, the command, none", a.Display, a.Run, a.Part)
	}
	if want := "cd " + work + " && GH_TOKEN=[REDACTED] git commit -m 'x"; a.Log != want {
		t.Errorf("Log = %q, want %q", a.Log, want)
	}
}

// With StdinFed, a shell or interpreter reading its program from the job's
// stdin asks; programs that read data, and shells given their program, do
// not; without it nothing changes.
func TestStdinFed(t *testing.T) {
	for cmd, want := range map[string]Decision{
		"bash":                           Ask,
		"sh -s":                          Ask,
		"python3 -i -q":                  Ask,
		"node":                           Ask,
		"source /dev/stdin":              Ask,
		"cd /tmp && bash":                Ask,
		"read x; echo got:$x":            Allow,
		"cat":                            Allow,
		"while read l; do echo $l; done": Allow,
		"bash script.sh":                 Allow,
		"bash -c 'echo hi'":              Allow,
		"python3 app.py":                 Allow,
		"bash < script.sh":               Allow,
		"echo 'echo hi' | bash":          Allow,
	} {
		a := Analyze(cmd, Options{StdinFed: true})
		if a.Outcome.Decision != want {
			t.Errorf("%q with its stdin fed later: %v (%s), want %v", cmd, a.Outcome.Decision, a.Outcome.Verdict.Reason, want)
		}
		if want == Ask && (a.Outcome.Rule != "stdin-shell" || !strings.Contains(a.Outcome.Verdict.Reason, "input sent later")) {
			t.Errorf("%q: rule %q reason %q", cmd, a.Outcome.Rule, a.Outcome.Verdict.Reason)
		}
		if b := Analyze(cmd, Options{}); b.Outcome.Decision != Allow {
			t.Errorf("%q with stdin /dev/null: %v", cmd, b.Outcome.Decision)
		}
	}
}
