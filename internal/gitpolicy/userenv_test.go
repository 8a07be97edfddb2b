//go:build linux

package gitpolicy_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// gitReads runs real git with env (and nothing else configured) and
// returns the configuration it reads from its environment ("command"
// scope) as EnvConfig prints it, whether it read the system file, and
// false when git refused the environment (it then runs nothing).
func gitReads(env []string) ([]string, bool, bool) {
	cmd := exec.Command("git", "config", "--list", "--show-scope", "-z")
	cmd.Dir = "/"
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CEILING_DIRECTORIES=/"}, env...)
	out, err := cmd.Output()
	if err != nil {
		return nil, false, false
	}
	f := bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0})
	var got []string
	system := false
	for i := 0; i+1 < len(f); i += 2 {
		switch string(f[i]) {
		case "command":
			got = append(got, string(f[i+1]))
		case "system":
			system = true
		}
	}
	return got, system, true
}

// TestEnvConfigAsGitReads: the configuration in the engine's
// environment (GIT_CONFIG_PARAMETERS in both of git's forms, with its
// quoting; GIT_CONFIG_COUNT however it is spelled and however large)
// is read entry for entry as real git reads it, and
// GIT_CONFIG_NOSYSTEM takes git's boolean spellings: wherever git runs
// with an environment, the judge reads what git reads, in random lists
// and in the spellings git's parser has branches for.
func TestEnvConfigAsGitReads(t *testing.T) {
	testenv.NeedsTool(t, "git")
	sys := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(sys, []byte("[sys]\n\tx = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var dies, compared, multi int
	defer func() { t.Logf("git died %d times, compared %d (%d with several entries)", dies, compared, multi) }()
	same := func(t interface{ Fatalf(string, ...any) }, env []string) {
		want, wantSys, ok := gitReads(env)
		if !ok {
			dies++
			return // git dies with this environment: it runs nothing
		}
		compared++
		if len(want) > 1 {
			multi++
		}
		got, gotSys := gitpolicy.EnvConfig(append([]string{"HOME=/nonexistent"}, env...))
		if !slices.Equal(got, want) {
			t.Fatalf("env %q:\nthe judge reads %q\ngit reads       %q", env, got, want)
		}
		if wantSys && !gotSys {
			t.Fatalf("env %q: git reads the system file, the judge does not", env)
		}
	}
	fixed := [][]string{
		{`GIT_CONFIG_PARAMETERS='core.fsmonitor'='./fsm.sh'`},
		{`GIT_CONFIG_PARAMETERS='core.fsmonitor=./fsm.sh'`},
		{`GIT_CONFIG_PARAMETERS='Core.FsMonitor'='a'\''b'\!'c'  	'color.ui'= 'x.Sub.Y=1=2' 'u.v'`},
		{"GIT_CONFIG_PARAMETERS='core.hooksPath'='.githooks'\n'a.b'='c'"},
		{`GIT_CONFIG_PARAMETERS=' core.editor = ./ed.sh'`},
		{"GIT_CONFIG_COUNT= +1", "GIT_CONFIG_KEY_0=core.fsmonitor", "GIT_CONFIG_VALUE_0=./fsm.sh"},
		{"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_1=core.editor", "GIT_CONFIG_VALUE_1=./ed.sh", "GIT_CONFIG_KEY_0=a.b", "GIT_CONFIG_VALUE_0="},
		{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=a.b", "GIT_CONFIG_VALUE_0=x", "GIT_CONFIG_PARAMETERS='c.d'='y'"},
		{`GIT_CONFIG_PARAMETERS='.x.y'='1' 'core.fsmonitor'='./fsm.sh'`}, // an empty section (review7)
	}
	many := []string{"GIT_CONFIG_COUNT=1001"}
	for i := range 1001 {
		many = append(many, "GIT_CONFIG_KEY_"+strconv.Itoa(i)+"=k.v"+strconv.Itoa(i), "GIT_CONFIG_VALUE_"+strconv.Itoa(i)+"=x")
	}
	many[len(many)-2] = "GIT_CONFIG_KEY_1000=core.fsmonitor"
	fixed = append(fixed, many)
	for _, b := range []string{"", "0", "1", "yes", "On", "TRUE", "no", "OFF", "2", "0x0", "010", "1k", "0k", "t", "f", "junk", " 1", "-1"} {
		fixed = append(fixed, []string{"GIT_CONFIG_SYSTEM=" + sys, "GIT_CONFIG_NOSYSTEM=" + b})
	}
	for _, env := range fixed {
		same(t, env)
	}
	if !t.Failed() {
		// The system file is read exactly when git reads it.
		for b, wantSys := range map[string]bool{"yes": false, "On": false, "2": false, "1k": false, "off": true, "": true, "0x0": true, "no": true} {
			if _, sys := gitpolicy.EnvConfig([]string{"GIT_CONFIG_SYSTEM=" + sys, "GIT_CONFIG_NOSYSTEM=" + b}); sys != wantSys {
				t.Errorf("GIT_CONFIG_NOSYSTEM=%q: the judge reads the system file: %v, git: %v", b, sys, wantSys)
			}
		}
	}
	quote := func(t *rapid.T, s, label string) string {
		var b strings.Builder
		b.WriteByte('\'')
		for _, c := range s {
			switch {
			case c == '\'':
				b.WriteString(`'\''`)
			case c == '!' && rapid.Bool().Draw(t, label):
				b.WriteString(`'\!'`)
			default:
				b.WriteRune(c)
			}
		}
		return b.String() + "'"
	}
	rapid.Check(t, func(t *rapid.T) {
		word := rapid.StringOfN(rapid.SampledFrom([]rune("aZ9-. '!=\\\n\t\"x")), 0, 8, -1)
		name := rapid.SampledFrom([]string{"core.fsmonitor", "Core.HooksPath", "a.B c.d", "x.y'z.w", "u.v", "s.sub=x.k", "s.a!b.c", "core.editor", "u.v", "s. .k",
			"bad", ".x", "x.", "x.9y"}) // the last four: keys git refuses
		var items []string
		for range rapid.IntRange(0, 4).Draw(t, "items") {
			k, v := name.Draw(t, "key"), word.Draw(t, "value")
			var item string
			switch rapid.IntRange(0, 3).Draw(t, "form") {
			case 0:
				item = quote(t, k+"="+v, "bang")
			case 1:
				item = quote(t, k, "bang")
			case 2:
				item = quote(t, k, "bang") + "=" + quote(t, v, "bang")
			default:
				item = quote(t, k, "bang") + "="
			}
			if rapid.IntRange(0, 19).Draw(t, "garble") == 0 {
				i := rapid.IntRange(0, len(item)).Draw(t, "at")
				item = item[:i] + rapid.SampledFrom([]string{"'", "\\", "=", " ", "x"}).Draw(t, "junk") + item[i:]
			}
			items = append(items, item)
		}
		sep := rapid.SampledFrom([]string{" ", "  ", "\t", "\n", " \n", ""})
		var b strings.Builder
		b.WriteString(rapid.SampledFrom([]string{"", "", "", " "}).Draw(t, "lead")) // git refuses white space first
		for i, it := range items {
			if i > 0 {
				b.WriteString(sep.Draw(t, "sep"))
			}
			b.WriteString(it)
		}
		same(t, []string{"GIT_CONFIG_PARAMETERS=" + b.String()})
	})
}

// TestEnvConfigNamesWorkspaceFiles: a program named by the
// configuration in the engine's environment (GIT_CONFIG_PARAMETERS in
// either form, GIT_CONFIG_COUNT spelled " 1" or over 1000 entries, a
// file GIT_CONFIG_PARAMETERS includes) is code: planting it is refused
// (the control shows the user's git run it when it is applied
// unchecked). With GIT_CONFIG_NOSYSTEM=yes git reads no system file,
// and the judge refuses nothing the system file names.
func TestEnvConfigNamesWorkspaceFiles(t *testing.T) {
	plant := `printf '#!/bin/sh\ntouch $SENT/prog\nexit 1\n' > fsm.sh && chmod +x fsm.sh`
	many := []string{"GIT_CONFIG_COUNT=1002"}
	for i := range 1001 {
		many = append(many, "GIT_CONFIG_KEY_"+strconv.Itoa(i)+"=k.v"+strconv.Itoa(i), "GIT_CONFIG_VALUE_"+strconv.Itoa(i)+"=x")
	}
	many = append(many, "GIT_CONFIG_KEY_1001=core.fsmonitor", "GIT_CONFIG_VALUE_1001=./fsm.sh")
	writeHome := func(w *world, name, content string) string {
		p := filepath.Join(w.home(), name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			panic(err)
		}
		return p
	}
	cases := []struct {
		name string
		env  func(w *world) []string
	}{
		{"GIT_CONFIG_PARAMETERS", func(*world) []string {
			return []string{`GIT_CONFIG_PARAMETERS='core.fsmonitor'='./fsm.sh'`}
		}},
		{"GIT_CONFIG_PARAMETERS, old form after a quote", func(*world) []string {
			return []string{`GIT_CONFIG_PARAMETERS='user.name'='it'\''s' 'core.fsmonitor=./fsm.sh'`}
		}},
		{"GIT_CONFIG_PARAMETERS includes a file", func(w *world) []string {
			inc := writeHome(w, "inc.gitconfig", "[core]\n\tfsmonitor = ./fsm.sh\n")
			return []string{"GIT_CONFIG_PARAMETERS='include.path'='" + inc + "'"}
		}},
		{"GIT_CONFIG_COUNT= 1", func(*world) []string {
			return []string{"GIT_CONFIG_COUNT= 1", "GIT_CONFIG_KEY_0=core.fsmonitor", "GIT_CONFIG_VALUE_0=./fsm.sh"}
		}},
		{"GIT_CONFIG_COUNT over 1000", func(*world) []string { return many }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctl := newWorld(t)
			ctl.repo(t)
			ctl.env = append(ctl.env, c.env(ctl)...)
			ctl.unchecked(t, plant)
			ctl.userDo2(t, "git status")
			if !slices.Contains(ctl.sentinels(t), "prog") {
				t.Fatalf("control: git did not run the planted program (sentinels %v)", ctl.sentinels(t))
			}
			w := newWorld(t)
			w.repo(t)
			w.env = append(w.env, c.env(w)...)
			o := w.run(t, plant)
			w.expectRefused(t, o, gitpolicy.Config, "fsm.sh")
			w.userDo(t, ".", "git status")
		})
	}
	t.Run("GIT_CONFIG_NOSYSTEM=yes", func(t *testing.T) {
		w := newWorld(t)
		w.repo(t)
		sys := writeHome(w, "system.gitconfig", "[core]\n\tfsmonitor = ./fsm.sh\n")
		w.env = append(w.env, "GIT_CONFIG_SYSTEM="+sys, "GIT_CONFIG_NOSYSTEM=yes")
		o := w.run(t, plant)
		if len(o.refusals) > 0 || !w.exists("fsm.sh") {
			t.Fatalf("refused %v: git reads no system file with GIT_CONFIG_NOSYSTEM=yes", w.refused(o))
		}
		w.userDo(t, ".", "git status") // the oracle: git does not run it
		// The same with the system file read runs it (the file is what
		// would have made it code).
		w.env = append(w.env, "GIT_CONFIG_NOSYSTEM=off")
		w.userDo2(t, "git status")
		if !slices.Contains(w.sentinels(t), "prog") {
			t.Fatalf("control: git did not run the system file's program (sentinels %v)", w.sentinels(t))
		}
	})
}

// TestEnvConfigFirstOfDuplicates: of a variable the environment holds
// twice, git reads the first (getenv(3)), and so does the judge. Git is
// started with os.StartProcess: os/exec would keep only the last.
func TestEnvConfigFirstOfDuplicates(t *testing.T) {
	testenv.NeedsTool(t, "git")
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_PARAMETERS='core.fsmonitor'='./fsm.sh'", "GIT_CONFIG_PARAMETERS='a.b'='c'"}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := os.StartProcess(gitPath, []string{"git", "config", "--list", "-z"}, &os.ProcAttr{Dir: "/", Env: env, Files: []*os.File{nil, w, os.Stderr}})
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	r.Close()
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Fatalf("git config --list: %v %v", st, err)
	}
	want := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	got, _ := gitpolicy.EnvConfig(env)
	if !slices.Equal(got, want) || !slices.Contains(got, "core.fsmonitor\n./fsm.sh") {
		t.Fatalf("the judge reads %q, git reads %q", got, want)
	}
}
