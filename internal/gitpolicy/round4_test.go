//go:build linux

package gitpolicy_test

import (
	"crypto/sha1"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
)

// The findings of the fourth review about git directories, each as the
// review's reproduction: the control shows the attack works without
// policy, the checked run shows the user's git runs nothing planted.

// userDo runs script as the user outside the sandbox (its failure is
// ignored: the attack may leave git unhappy) and expects no sentinel.
func (w *world) userDo(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = filepath.Join(w.ws, dir), w.env
	out, _ := cmd.CombinedOutput()
	if s := w.sentinels(t); len(s) > 0 {
		t.Fatalf("planted code ran outside the sandbox: %v\n%s", s, out)
	}
}

// controlThen runs the attack unchecked in one world (expecting the
// sentinel after user) and checked in another, then runs user there.
func controlThen(t *testing.T, setup string, steps []string, dir, user, sentinel string) *world {
	t.Helper()
	return controlThen2(t, setup, steps, steps, dir, user, sentinel)
}

// controlThen2 is controlThen with other steps for the control (the
// part of the attack an older policy let through).
func controlThen2(t *testing.T, setup string, control, steps []string, dir, user, sentinel string) *world {
	t.Helper()
	ctl := newWorld(t)
	ctl.repo(t)
	if setup != "" {
		ctl.sh(t, setup)
	}
	for _, s := range control {
		ctl.unchecked(t, s)
	}
	cmd := exec.Command("bash", "-c", user)
	cmd.Dir, cmd.Env = filepath.Join(ctl.ws, dir), ctl.env
	_, _ = cmd.CombinedOutput()
	if !slices.Contains(ctl.sentinels(t), sentinel) {
		t.Fatalf("control: the attack did not work without policy (sentinels %v)", ctl.sentinels(t))
	}
	w := newWorld(t)
	w.repo(t)
	if setup != "" {
		w.sh(t, setup)
	}
	for _, s := range steps {
		o := w.run(t, s)
		t.Logf("refused: %v", w.refused(o))
	}
	w.userDo(t, dir, user)
	return w
}

// TestH1RefusedDeletionLeavesRepository: the deletion of src/objects
// and src/refs is refused (they hold repositories), so they stay; the
// HEAD and config written beside them must be judged as a bare
// repository's, which they are once apply is done.
func TestH1RefusedDeletionLeavesRepository(t *testing.T) {
	attack := `rm -rf src/objects src/refs; printf "ref: refs/heads/main\n" > src/HEAD;
printf "[core]\n\tbare = false\n\tworktree = ..\n\tfsmonitor = \"touch $SENT/h1; false\"\n" > src/config`
	plant := "mkdir -p src/objects/k/.git src/refs/k/.git"
	// git 2.39 does not run core.fsmonitor in a repository found bare,
	// so the control shows what the review's policy let happen: git
	// takes src for a repository and reads the planted configuration
	// (everything applied but the refused deletion).
	probe := "git -C src rev-parse --git-dir && git -C src config core.fsmonitor"
	ctl := newWorld(t)
	ctl.repo(t)
	ctl.unchecked(t, plant)
	ctl.unchecked(t, strings.Replace(attack, "rm -rf src/objects src/refs", "true", 1))
	if out := ctl.sh(t, probe); !strings.Contains(out, "touch") {
		t.Fatalf("control: src is not a repository with the planted config:\n%s", out)
	}
	w := newWorld(t)
	w.repo(t)
	w.run(t, plant)
	o := w.run(t, attack)
	t.Logf("refused: %v", w.refused(o))
	cmd := exec.Command("bash", "-c", probe)
	cmd.Dir, cmd.Env = w.ws, w.env
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("src is a repository with the planted config:\n%s", out)
	}
	w.userDo(t, "src", "git status")
}

// TestH2SequencerStrategyPath: a merge strategy with a path in
// .git/sequencer/opts is run by git cherry-pick --continue.
func TestH2SequencerStrategyPath(t *testing.T) {
	setup := "git checkout -qb other && echo b > b && git add b && git commit -qm b && echo c > c && git add c && git commit -qm c && git checkout -q main"
	attack := `mkdir -p .git/sequencer git-merge-x; printf "#!/bin/sh\ntouch $SENT/h2\n" > evil.sh; chmod +x evil.sh
printf "pick $(git rev-parse other~1)\npick $(git rev-parse other)\n" > .git/sequencer/todo
git rev-parse HEAD | tee .git/sequencer/head > .git/sequencer/abort-safety
printf "[options]\n\tstrategy = x/../evil.sh\n" > .git/sequencer/opts`
	controlThen(t, setup, []string{attack}, ".", "git status; git cherry-pick --continue", "h2")
}

// TestH5IndexPaths: index entries named .git/hooks/pre-commit, an
// absolute path or ../x are written by the user's git restore . and the
// hook runs on the next commit.
func TestH5IndexPaths(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		linux      bool // git on Linux writes it (else: .git on NTFS or HFS+ only)
	}{
		{"hook", ".git/hooks/pre-commit", true},
		{"hook NTFS", ".git./hooks/pre-commit", false},
		{"hook NTFS short name", "GIT~1/hooks/pre-commit", false},
		{"hook NTFS stream", ".git::$INDEX_ALLOCATION/hooks/pre-commit", false},
		{"hook HFS", ".g\u200cit/hooks/pre-commit", false},
		{"absolute", "ABS", true},
		{"dotdot", "../h5-outside", true},
		{"inner dotdot", "sub/../../h5-outside", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx := t.TempDir() + "/index"
			script := func(w *world) string {
				p := tc.path
				if p == "ABS" {
					p = w.sent + "/abs"
				}
				writeIndex(t, w, idx, p)
				return "git hash-object -w --stdin < /dev/null >/dev/null; printf '#!/bin/sh\\ntouch $SENT/hook\\n' | git hash-object -w --stdin >/dev/null; cp " + idx + " .git/index"
			}
			user := "git status --short; git restore .; git checkout .; git commit -qm x; true"
			if tc.linux {
				ctl := newWorld(t)
				ctl.repo(t)
				ctl.unchecked(t, script(ctl))
				ctl.sh(t, user)
				if len(ctl.sentinels(t)) == 0 && !ctl.exists("../h5-outside") {
					t.Fatal("control: the attack did not work without policy")
				}
			}
			w := newWorld(t)
			w.repo(t)
			o := w.run(t, script(w))
			if !slices.Contains(w.refused(o), "git-index .git/index") {
				t.Errorf(".git/index not refused: %v", w.refused(o))
			}
			w.userDo(t, ".", user)
			if w.exists("../h5-outside") {
				t.Error("git wrote outside the workspace")
			}
		})
	}
}

// writeIndex writes a version 2 index at dst holding README and an
// entry at path for the hook blob (mode 100755).
func writeIndex(t *testing.T, w *world, dst, path string) {
	t.Helper()
	writeIndexOf(t, w, dst, path, `#!/bin/sh\ntouch $SENT/hook\n`)
}

// writeIndexOf is writeIndex for the blob printf makes of content.
func writeIndexOf(t *testing.T, w *world, dst, path, content string) {
	t.Helper()
	hook := strings.TrimSpace(w.sh(t, "printf '"+content+"' | git hash-object --stdin"))
	readme := strings.TrimSpace(w.sh(t, "git rev-parse HEAD:README"))
	type ent struct {
		name, oid string
		mode      uint32
	}
	ents := []ent{{"README", readme, 0o100644}, {path, hook, 0o100755}}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	var b []byte
	b = append(b, "DIRC"...)
	b = binary.BigEndian.AppendUint32(b, 2)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ents)))
	for _, e := range ents {
		start := len(b)
		b = append(b, make([]byte, 24)...)
		b = binary.BigEndian.AppendUint32(b, e.mode)
		b = append(b, make([]byte, 12)...)
		b = append(b, hexBytes(t, e.oid)...)
		b = binary.BigEndian.AppendUint16(b, uint16(min(len(e.name), 0xfff)))
		b = append(b, e.name...)
		for n := len(b) - start; n == len(b)-start || (len(b)-start)%8 != 0; {
			b = append(b, 0)
		}
	}
	sum := sha1.Sum(b)
	b = append(b, sum[:]...)
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func hexBytes(t *testing.T, s string) []byte {
	t.Helper()
	out := make([]byte, len(s)/2)
	for i := range out {
		var v byte
		for _, c := range s[2*i : 2*i+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			case c >= 'a' && c <= 'f':
				v |= byte(c - 'a' + 10)
			default:
				t.Fatalf("bad hex %q", s)
			}
		}
		out[i] = v
	}
	return out
}

// TestM3ConfigNamesWorktreeFiles: the existing config includes
// ../.gitconfig or sets core.hooksPath to a worktree directory; those
// files are configuration and hooks.
func TestM3ConfigNamesWorktreeFiles(t *testing.T) {
	t.Run("include", func(t *testing.T) {
		w := controlThen(t, "git config include.path ../.gitconfig",
			[]string{`printf '[core]\n\tfsmonitor = "touch $SENT/m3; false"\n' > .gitconfig`}, ".", "git status", "m3")
		if w.exists(".gitconfig") {
			t.Error("the included file was applied")
		}
	})
	t.Run("hooksPath", func(t *testing.T) {
		w := controlThen(t, "git config core.hooksPath .husky",
			[]string{`mkdir .husky && printf '#!/bin/sh\ntouch $SENT/m3\n' > .husky/pre-commit && chmod +x .husky/pre-commit`},
			".", "echo y >> README; git commit -qam y", "m3")
		if w.exists(".husky/pre-commit") {
			t.Error("the hook was applied")
		}
	})
	t.Run("includeIf", func(t *testing.T) {
		controlThen(t, "git config includeIf.gitdir:/.path ../cfg/x",
			[]string{`mkdir cfg && printf '[core]\n\tfsmonitor = "touch $SENT/m3; false"\n' > cfg/x`}, ".", "git status", "m3")
	})
}

// TestL2Rerere: git rerere's state is data.
func TestL2Rerere(t *testing.T) {
	w := allowCase(t, "git config rerere.enabled true && git checkout -qb t && echo t > README && git commit -qam t && git checkout -q main && echo m > README && git commit -qam m",
		"git merge t >/dev/null 2>&1; echo r > README && git add README && git commit -qm merged && ls .git/rr-cache/*/postimage")
	if !w.exists(".git/rr-cache") {
		t.Error("rerere's state was not applied")
	}
}

// TestM4DeepTreeJudgedLinearly: judging a new tree 900 directories
// deep looks at each directory once (the review measured 25.7 s for
// the whole command, cubic in the depth; Check's share is now
// milliseconds, BenchmarkCheck). The bound is generous for a loaded
// machine; a cubic or quadratic Check takes seconds.
func TestM4DeepTreeJudgedLinearly(t *testing.T) {
	w := newWorld(t)
	w.repo(t)
	l, err := layer.New(layer.Options{Roots: []string{w.ws}, Dir: w.state, UserXattr: layertest.Unprivileged()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Remove()
	if out, err := layertest.Run(t, l.Spec(), w.ws, w.env, "mkdir -p $(printf 'a/%.0s' $(seq 900))"); err != nil {
		t.Fatal(err, out)
	}
	s, err := l.Diff()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	if r := gitpolicy.CheckEnv(s, w.env, l.Roots(), s.Changes); len(r) > 0 {
		t.Fatalf("refused %v", r[0])
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("judging %d changes took %v", len(s.Changes), d)
	}
}
