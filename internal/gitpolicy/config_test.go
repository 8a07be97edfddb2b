//go:build linux

package gitpolicy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// configCorpus are config files in git's syntax, odd corners included.
var configCorpus = []string{
	"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
	"[remote \"origin\"]\n\turl = /src\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
	"\xef\xbb\xbf[Core] FsMonitor = \"touch x; false\"\n",
	"[core]\n\tpager = less \\\n  -R # comment\n\teditor = \"vi ; x\" ; after\n",
	"[alias]\n\tst = \"!sh -c \\\"touch y\\\"\"\n\tbare\n",
	"[section.Sub]\nkey=v\n[section \"Sub\\\"q\"]\nkey = a\\tb\\\\c\n",
	"[include]\npath=../x\n[includeIf \"gitdir:/w/\"]\npath = y\n",
	"# only a comment\n; and another\n\n",
	"[core]\n\tsshCommand=  spaced   value  \n",
	"[a]\n\tk = \"quoted\"\"twice\" tail\n",
}

// TestParseConfigLikeGit parses each file of the corpus and compares
// the variables with what git itself reads from it.
func TestParseConfigLikeGit(t *testing.T) {
	testenv.NeedsTool(t, "git")
	dir := t.TempDir()
	for i, src := range configCorpus {
		p := filepath.Join(dir, "c")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "config", "--file", p, "--list", "-z")
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("corpus %d: git: %v", i, err)
		}
		var want []string
		for _, rec := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
			if rec != "" {
				want = append(want, strings.Replace(rec, "\n", "=", 1))
			}
		}
		entries, err := parseConfig([]byte(src))
		if err != nil {
			t.Fatalf("corpus %d: %v", i, err)
		}
		var got []string
		for _, e := range entries {
			// git prints a bare key without "=".
			if e.Bare {
				got = append(got, e.name())
			} else {
				got = append(got, e.name()+"="+e.Value)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("corpus %d:\n got %q\nwant %q", i, got, want)
		}
	}
}

// TestParseConfigRejects: what git rejects does not parse; neither
// does a variable before any section, which git lists with no section
// (stricter is safe: a config that does not parse is refused).
func TestParseConfigRejects(t *testing.T) {
	testenv.NeedsTool(t, "git")
	if _, err := parseConfig([]byte("key = outside\n")); err == nil {
		t.Error("a variable outside a section parsed")
	}
	for _, src := range []string{
		"[core\nx=1\n", "[core]\nbad key = 1\n", "[core]\nx = \"open\n",
		"[core]\nx = a\\qb\n", "[\"sub\"]\n", "[core \"a]\n", "[core]\n9x = 1\n",
	} {
		if _, err := parseConfig([]byte(src)); err == nil {
			t.Errorf("%q parsed", src)
		}
		p := filepath.Join(t.TempDir(), "c")
		_ = os.WriteFile(p, []byte(src), 0o644)
		if err := exec.Command("git", "config", "--file", p, "--list").Run(); err == nil {
			t.Errorf("%q: git accepts it", src)
		}
	}
}
