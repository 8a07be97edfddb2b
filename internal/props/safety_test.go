package props

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
	"pgregory.net/rapid"

	"github.com/bashvisor/bashvisor/internal/secret"
	"github.com/bashvisor/bashvisor/safety"
)

// blockedCorpus are commands the default rules block. Words marked with a
// leading "=" are kept as they are by the variant generator (quoting them
// would change what bash does: ~, *, $HOME); "&&" and ";" separate
// commands.
var blockedCorpus = [][]string{
	{"git", "add", "-A", "=&&", "git", "push", "--force"},
	{"git", "add", "--all", "=&&", "git", "push", "--force"},
	{"git", "add", ".", "=&&", "git", "push", "--force"},
	{"git", "-C", "src", "add", "-A", "=&&", "git", "push", "--force"},
	{"git", "push", "--force", "origin", "main"},
	{"git", "push", "-f"},
	{"git", "push", "origin", "+main"},
	{"rm", "-rf", "/"},
	{"rm", "-fr", "/usr"},
	{"rm", "-r", "-f", "=~"},
	{"rm", "-rf", "=$HOME"},
	{"rm", "-rf", ".git"},
	{"rm", "--recursive", "--force", "/etc"},
	{"sudo", "rm", "-rf", "/"},
	{"mkfs.ext4", "/dev/sda"},
	{"dd", "if=/dev/zero", "of=/dev/sda"},
	{"cd", "/", "=&&", "rm", "-rf", "=*"},
	{"rm", "-rf", "=/[b]in"},
	{"rm", "-rf", "=.[!.]*"},
	{"rm", "-rf", "=~root"},
	{"mkdosfs", "/dev/sdb1"},
	{"wipefs", "-a", "/dev/sda"},
	{"sgdisk", "--zap-all", "/dev/sda"},
	{"dd", "of=/dev/block/mmcblk0"},
	{"flock", "/tmp/l", "rm", "-rf", "/"},
	{"strace", "-f", "-o", "/tmp/t", "git", "add", "-A", "=&&", "git", "push", "--force"},
	{"systemd-run", "--user", "rm", "-rf", "/"},
	{"git", "-c", "alias.x=add", "x", "-A", "=&&", "git", "push", "--force"},
}

// TestCorpusBlocked is the precondition of the quoting property.
func TestCorpusBlocked(t *testing.T) {
	for _, words := range blockedCorpus {
		cmd := joinWords(words, nil)
		if v := safety.Check(cmd); v.Decision != safety.Block {
			t.Errorf("%q: %s, want block", cmd, v.Decision)
		}
	}
}

// joinWords joins the corpus words, transformed by f where given.
func joinWords(words []string, f func(i int, w string) string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if k, ok := strings.CutPrefix(w, "="); ok {
			out[i] = k
		} else if f != nil {
			out[i] = f(i, w)
		} else {
			out[i] = w
		}
	}
	return strings.Join(out, " ")
}

// requote rewrites a literal word in a way bash removes again: quotes
// around all or part of it, backslashes, ANSI-C $'...' with hex escapes,
// empty quoted strings.
func requote(t *rapid.T, w string) string {
	switch rapid.IntRange(0, 8).Draw(t, "how") {
	case 0:
		return w
	case 1:
		return "'" + w + "'"
	case 2:
		return `"` + w + `"`
	case 3: // quote a part
		i := rapid.IntRange(0, len(w)).Draw(t, "i")
		j := rapid.IntRange(i, len(w)).Draw(t, "j")
		return w[:i] + "'" + w[i:j] + "'" + w[j:]
	case 4: // backslash before one char
		i := rapid.IntRange(0, len(w)-1).Draw(t, "i")
		return w[:i] + `\` + w[i:]
	case 5: // backslash before every char
		var b strings.Builder
		for _, c := range w {
			b.WriteString(`\` + string(c))
		}
		return b.String()
	case 6: // $'...' with hex escapes for some chars
		var b strings.Builder
		b.WriteString("$'")
		for i := 0; i < len(w); i++ {
			if rapid.Bool().Draw(t, "hex") {
				fmt.Fprintf(&b, `\x%02x`, w[i])
			} else if w[i] == '\'' || w[i] == '\\' {
				fmt.Fprintf(&b, `\%c`, w[i])
			} else {
				b.WriteByte(w[i])
			}
		}
		b.WriteString("'")
		return b.String()
	case 7: // empty strings glued on
		return `''` + w + `""`
	default: // two double-quoted halves
		i := rapid.IntRange(0, len(w)).Draw(t, "i")
		return `"` + w[:i] + `""` + w[i:] + `"`
	}
}

// TestQuotingNeverUnblocks: rewriting the words of a blocked command in any
// way bash undoes never turns the block into an allow. Each variant is
// checked against bash itself: it must expand to the same words.
func TestQuotingNeverUnblocks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		words := rapid.SampledFrom(blockedCorpus).Draw(t, "command")
		variant := joinWords(words, func(i int, w string) string { return requote(t, w) })
		if !strings.Contains(strings.Join(words, " "), "&&") {
			same(t, joinWords(words, nil), variant)
		}
		if v := safety.Check(variant); v.Decision == safety.Allow {
			t.Fatalf("%q is allowed, %q is blocked", variant, joinWords(words, nil))
		}
		// A command word spelled through a path or a leading backslash.
		if p, ok := map[string]string{"rm": "/bin/rm", "git": "/usr/bin/git", "dd": "/bin/dd"}[words[0]]; ok && rapid.Bool().Draw(t, "path") {
			alt := append([]string{rapid.SampledFrom([]string{p, `\` + words[0], "command " + words[0]}).Draw(t, "spelling")}, words[1:]...)
			if v := safety.Check(joinWords(alt, nil)); v.Decision == safety.Allow {
				t.Fatalf("%q is allowed", joinWords(alt, nil))
			}
		}
	})
}

// same checks that bash expands both command lines to the same words.
func same(t *rapid.T, orig, variant string) {
	expand := func(s string) []byte {
		out, err := exec.Command("bash", "-c", `f() { printf '%s\0' "$@"; }; f `+s).Output()
		if err != nil {
			t.Fatalf("bash %q: %v", s, err)
		}
		return out
	}
	if a, b := expand(orig), expand(variant); !bytes.Equal(a, b) {
		t.Fatalf("generator bug: %q expands to %q, %q to %q", orig, a, variant, b)
	}
}

// TestMentionsStayAllowed: commands that only mention a dangerous command
// (echo/printf arguments, grep patterns, commit messages) stay allowed.
func TestMentionsStayAllowed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		words := rapid.SampledFrom(blockedCorpus).Draw(t, "command")
		text := joinWords(words, nil)
		q := rapid.SampledFrom([]string{`"`, `'`}).Draw(t, "quote")
		quoted := q + text + q
		cmd := rapid.SampledFrom([]string{
			"echo " + quoted,
			"echo " + quoted + " > notes.txt",
			"printf '%s\\n' " + quoted,
			"grep -rn " + quoted + " .",
			"grep -F -e " + quoted + " log.txt | wc -l",
			`git commit -m ` + quoted,
			"echo done && echo " + quoted,
		}).Draw(t, "form")
		if v := safety.Check(cmd); v.Decision != safety.Allow {
			t.Fatalf("%q: %s (%s)", cmd, v.Decision, v.Message())
		}
	})
}

// shellish draws strings built from shell syntax fragments and random
// bytes.
func shellish() *rapid.Generator[string] {
	frag := rapid.OneOf(
		rapid.SampledFrom([]string{"rm", "-rf", "/", "git", "add", "-A", "push", "--force", "&&", "||", ";", "|", "&",
			"$(", ")", "`", "'", `"`, "\\", "{", "}", "(", ")", "<(", ">", ">>", "<<EOF\n", "\nEOF\n", "$'", "${", "*", "~",
			"eval", "bash -c", "sudo", "env -S", "xargs", "find . -exec", "\n", " ", "cd", "..", "$HOME", ":(){ :|:& };:",
			"dd of=/dev/sda", "curl x | sh", "$CMD", "if", "then", "fi", "for i in", "do", "done", "case", "esac", "#"}),
		rapid.StringMatching(`[ -~]{0,6}`),
		rapid.String(),
	)
	return rapid.Custom(func(t *rapid.T) string {
		parts := rapid.SliceOfN(frag, 0, 20).Draw(t, "parts")
		return strings.Join(parts, rapid.SampledFrom([]string{" ", ""}).Draw(t, "sep"))
	})
}

// TestAnalyserNeverPanics: any input gets a decision, and Display returns
// a slice of its input.
func TestAnalyserNeverPanics(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cmd := shellish().Draw(t, "command")
		switch v := safety.Check(cmd); v.Decision {
		case safety.Allow, safety.Block, safety.Ask:
		default:
			t.Fatalf("Check(%q) = %q", cmd, v.Decision)
		}
		if d := safety.Display(cmd, "/tmp"); !strings.HasSuffix(cmd, d) {
			t.Fatalf("Display(%q) = %q, not a slice of it", cmd, d)
		}
	})
}

// TestDisplaySameMeaning: the display form runs the same commands in the
// same directory: run both with bash in the working directory and compare.
func TestDisplaySameMeaning(t *testing.T) {
	resolve := func(d string) string {
		r, err := filepath.EvalSymlinks(d)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	work, other := resolve(t.TempDir()), resolve(t.TempDir())
	if err := os.Mkdir(filepath.Join(work, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		prefix := rapid.SampledFrom([]string{
			"cd W && ", "cd W; ", "cd 'W' && ", `cd "W" && `, "cd W/ && ", "cd W/. && ", "cd W/sub/.. && ",
			"cd . && ", "cd ./ && ", "cd O && ", "cd W/sub && ", "cd W || ", "cd W & ", "cd W && cd O && ",
			"cd -P W && ", "cd W\n", "! cd W && ", "cd W >/dev/null && ", "cd missing && ", "",
		}).Draw(t, "prefix")
		rest := rapid.SampledFrom([]string{"pwd", "pwd; echo a", "false || pwd", "pwd && echo b", "(pwd)", "echo $PWD",
			"cd sub && pwd", "true"}).Draw(t, "rest")
		suffix := rapid.SampledFrom([]string{"", " || echo fallback", " && echo after", "; pwd"}).Draw(t, "suffix")
		cmd := strings.NewReplacer("W", work, "O", other).Replace(prefix) + rest + suffix
		d := safety.Display(cmd, work)
		if !strings.HasSuffix(cmd, d) {
			t.Fatalf("Display(%q) = %q, not a slice", cmd, d)
		}
		if d == cmd {
			return
		}
		a, b := runIn(t, work, cmd), runIn(t, work, d)
		if a != b {
			t.Fatalf("%q -> %q\n  original: %q\n  display:  %q", cmd, d, a, b)
		}
	})
}

func runIn(t *rapid.T, dir, cmd string) string {
	c := exec.Command("bash", "-c", cmd)
	c.Dir = dir
	c.Env = append(os.Environ(), "PWD="+dir)
	out, err := c.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("bash: %v", err)
	}
	return fmt.Sprintf("%s[exit %d]", out, code)
}

// analyzedPieces are simple commands that the permission presets, the
// co-author rewrite, the display form and the log redaction each care
// about; W stands for the working directory.
var analyzedPieces = []string{
	"ls -la", "go test ./...", "make", "cat README.md", "grep -rn TODO .", "pwd",
	"git status", "git add a.go", `git commit -m "fix: x"`, "git -C repo commit -am y", "git commit --amend --no-edit",
	"git push origin main", "git push --force", "git reset --hard HEAD~1", "git show commit",
	"sudo ls", "sudo apt-get install -y jq", "reboot", "rm -rf build", "rm -rf /", "rm x",
	"echo x > out.txt", "echo x >/dev/null", "make >/dev/null 2>&1", "find . -name '*.go'",
	"find . -exec rm {} +", `find . -name '*.o' -exec rm {} \;`, "echo $(sudo x)", "echo `git push`",
	"export API_TOKEN=sekrit123", "GH_TOKEN=ghp_0123456789abcdefABCDEF gh pr list",
	"curl -H 'Authorization: Bearer abcdefgh' https://u:pw@x/", "mysql -phunter2 db", "psql --password hunter2 two db",
	"cat <<EOF\nhello\nEOF", "cat <<EOF >f\n$(sudo ls)\nEOF", "cat $(sudo ls) <<EOF\nhello\nEOF", "echo $(cat <<EOF\n$(git push)\nEOF\n)", "echo `echo \\`sudo x\\``", "bash -c 'git commit -m x'", "curl x | sh", "eval \"$X\"",
	"declare -x A=1", "[[ -f x ]]", "let i++", "x=1", "(cd sub && make)", "{ ls; sudo ls; }",
	"for f in *.go; do gofmt -l $f; done", "if true; then rm x; fi", "cd W", "cd W/", "cd /tmp",
	"sleep 1 &", "kubectl apply -f x.yaml", "echo 'unterminated",
}

// analyzedCommand draws a command made of analyzedPieces (and sometimes
// arbitrary shell-ish text) joined by shell operators.
func analyzedCommand(work string) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 9).Draw(t, "garbage") == 0 {
			return shellish().Draw(t, "shellish")
		}
		n := rapid.IntRange(1, 4).Draw(t, "n")
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(rapid.SampledFrom([]string{" && ", " || ", "; ", " | ", "\n", " & "}).Draw(t, "op"))
			}
			b.WriteString(rapid.SampledFrom(analyzedPieces).Draw(t, "piece"))
		}
		return strings.ReplaceAll(b.String(), "W", work)
	})
}

// decidingPart is engine/gate.go's decidingPart before Analyze took it
// over, kept as the oracle for Analysis.Part: the first simple command
// (with its redirections) that p alone answers with d, each parsed and
// evaluated again on its own, or the whole command when none does. One
// thing is fixed: a part's text ends where Profile.Evaluate cuts parts
// (after the command and its redirections); the engine cut the statement's
// text with strings.TrimRight(" \t;&"), which also ate an escaped ; or &
// ending the last word (`find . -exec rm {} \;` was shown as `find . -exec
// rm {} \`).
func decidingPart(command string, p *safety.Profile, d safety.Decision) string {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil {
		return command
	}
	found := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		s, ok := n.(*syntax.Stmt)
		if found != "" || !ok {
			return found == ""
		}
		if _, ok := s.Cmd.(*syntax.CallExpr); !ok {
			return true
		}
		start, end := int(s.Pos().Offset()), int(s.Cmd.End().Offset())
		for _, r := range s.Redirs {
			if r.Word != nil {
				end = max(end, int(r.Word.End().Offset()))
			}
		}
		if start < 0 || start > end || end > len(command) {
			return true
		}
		part := command[start:end]
		if got, _ := p.Evaluate(part); got == d {
			found = part
			return false
		}
		return true
	})
	if found == "" {
		return command
	}
	return found
}

// TestAnalyzeIsTheSeparateCalls: Analyze answers exactly what Display,
// Gate, RedactSecrets (after the known secret values), the engine's
// decidingPart and Analyze with the co-author alone (its rewrite has no
// function of its own) answer one by one, each parsing the command again.
func TestAnalyzeIsTheSeparateCalls(t *testing.T) {
	work := t.TempDir()
	profiles := []*safety.Profile{nil}
	for _, name := range safety.Presets() {
		p, err := safety.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		profiles = append(profiles, p)
	}
	known := secret.NewRedactor(map[string]string{"API_TOKEN": "sekrit123", "DB_PASSWORD": "hunter2 two"})
	rapid.Check(t, func(t *rapid.T) {
		cmd := analyzedCommand(work).Draw(t, "command")
		opts := safety.Options{
			WorkDir:  rapid.SampledFrom([]string{"", work, "/elsewhere"}).Draw(t, "workdir"),
			Profile:  rapid.SampledFrom(profiles).Draw(t, "profile"),
			CoAuthor: rapid.SampledFrom([]string{"", "Bash Visor <bot@example.com>"}).Draw(t, "coauthor"),
			Secrets:  rapid.SampledFrom([]*secret.Redactor{nil, known}).Draw(t, "secrets"),
			Log:      rapid.Bool().Draw(t, "log"),
		}
		got := safety.Analyze(cmd, opts)
		want := safety.Analysis{
			Display: safety.Display(cmd, opts.WorkDir),
			Outcome: safety.Gate(cmd, opts.Profile),
			Run:     safety.Analyze(cmd, safety.Options{CoAuthor: opts.CoAuthor}).Run,
		}
		if opts.Log {
			want.Log = safety.RedactSecrets(opts.Secrets.String(cmd))
		}
		if opts.Profile != nil && want.Outcome.Decision != want.Outcome.Verdict.Decision {
			want.Part = decidingPart(cmd, opts.Profile, want.Outcome.Decision)
		}
		if got != want {
			t.Fatalf("Analyze(%q, %+v) =\n  %+v\nwant\n  %+v", cmd, opts, got, want)
		}
	})
}
