//go:build linux

package gitpolicy_test

import (
	"encoding/binary"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitindex"
	"github.com/bashvisor/bashvisor/internal/gitindex/gitindextest"
)

// TestIndexExtensionsForged: an index whose extensions name paths git
// must not use (a cache tree directory .git/hooks, an untracked cache
// listing ../x or .git/, an exclude file that is a hook), whose offsets
// git's threaded loader would read otherwise (EOIE), with a required
// extension git does not know, or whose name lengths are not git's, is
// refused; the same index with an optional extension git ignores is
// applied.
func TestIndexExtensionsForged(t *testing.T) {
	const hsz = 20
	oid := strings.Repeat("\x11", hsz)
	stat := strings.Repeat("\x01", 36)
	with := func(exts ...gitindex.Extension) func(t *testing.T, b []byte) []byte {
		return func(t *testing.T, b []byte) []byte { return gitindextest.Rewrite(t, b, hsz, exts...) }
	}
	untr := func(excl string, files []string, sub string) gitindex.Extension {
		return gitindex.Extension{Sig: "UNTR", Data: gitindextest.Untracked(hsz, excl, files, sub, []int{0, 1}, nil, stat+stat)}
	}
	cases := []struct {
		name  string
		forge func(t *testing.T, b []byte) []byte
	}{
		{"tree .git/hooks", with(gitindex.Extension{Sig: "TREE", Data: []byte("\x00-1 1\n.git\x00-1 1\nhooks\x00-1 0\n")})},
		{"tree ..", with(gitindex.Extension{Sig: "TREE", Data: []byte("\x00-1 1\n..\x00-1 0\n")})},
		{"tree not the entries'", with(gitindex.Extension{Sig: "TREE", Data: []byte("\x001 0\n" + oid)})},
		{"untracked ../x", with(untr(".gitignore", []string{"../x"}, "s"))},
		{"untracked .git/", with(untr(".gitignore", nil, ".git"))},
		{"untracked exclude file", with(untr(".git/hooks/pre-commit", nil, "s"))},
		{"untracked bitmap", with(gitindex.Extension{Sig: "UNTR", Data: gitindextest.Untracked(hsz, ".gitignore", nil, "s", []int{0, 7}, nil, stat+stat)})},
		{"required extension", with(gitindex.Extension{Sig: "abcd"})},
		{"end of entries", func(t *testing.T, b []byte) []byte {
			b = gitindextest.Rewrite(t, b, hsz, gitindex.Extension{Sig: "EOIE"})
			eoie := len(b) - hsz - 4 - hsz
			binary.BigEndian.PutUint32(b[eoie:], binary.BigEndian.Uint32(b[eoie:])-8)
			return gitindextest.Resum(b, hsz)
		}},
		{"name length", func(t *testing.T, b []byte) []byte {
			b = slices.Clone(b)
			binary.BigEndian.PutUint16(b[12+40+hsz:], binary.BigEndian.Uint16(b[12+40+hsz:])+1)
			return gitindextest.Resum(b, hsz)
		}},
	}
	run := func(t *testing.T, forge func(t *testing.T, b []byte) []byte) (*world, *outcome) {
		w := newWorld(t)
		w.repo(t)
		b, err := os.ReadFile(w.ws + "/.git/index")
		if err != nil {
			t.Fatal(err)
		}
		f := t.TempDir() + "/index"
		if err := os.WriteFile(f, forge(t, b), 0o644); err != nil {
			t.Fatal(err)
		}
		return w, w.run(t, "cp "+f+" .git/index")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, o := run(t, c.forge)
			w.expectRefused(t, o, "git-index", ".git/index")
		})
	}
	t.Run("control: optional extension", func(t *testing.T) {
		w, o := run(t, with(gitindex.Extension{Sig: "Zzzz", Data: []byte("x")}))
		w.expectAllowed(t, o)
		if len(o.set.Changes) == 0 {
			t.Error("the index did not change")
		}
	})
}

// TestIndexVersion4LongNames: a version 4 index whose names strip 128
// bytes or more from the one before (git's two-byte varint) is git's
// own, and applies.
func TestIndexVersion4LongNames(t *testing.T) {
	long := strings.Repeat("a", 200)
	allowCase(t, "", "git update-index --index-version 4 && mkdir "+long+" b && echo 1 > "+long+"/x && echo 2 > b/y && git add . && git commit -qm v4")
}

// TestIndexExtensionsOfGit: what git writes with the untracked cache,
// fsmonitor, the offset tables and a split index applies.
func TestIndexExtensionsOfGit(t *testing.T) {
	for name, script := range map[string]string{
		"untracked cache": "echo u > u.txt && git -c core.untrackedCache=true update-index --untracked-cache && git -c core.untrackedCache=true status --short",
		"offset tables": "mkdir d && for i in $(seq 1 1100); do echo $i > d/f$i; done && git add d && " +
			"git -c index.threads=2 -c index.recordOffsetTable=true -c index.recordEndOfIndexEntries=true commit -qm many",
		// The split index's cache tree counts the shared index's entries.
		"split index": "for i in $(seq 1 30); do echo $i > f$i; done && touch -d 2020-01-01 f* && git add . && git commit -qm i && " +
			"git update-index --split-index && echo 2 > f3 && git add f3 && git commit -qm s",
	} {
		t.Run(name, func(t *testing.T) { allowCase(t, "", script) })
	}
}

// TestIndexCacheTreeKept: an index whose cache tree was kept from
// another index (where README held other content, same entry count) is
// refused: git commit would record the kept tree, with that content,
// while git status and git diff --cached show nothing staged (the
// control).
func TestIndexCacheTreeKept(t *testing.T) {
	const hsz = 20
	setup := func(t *testing.T, w *world) string {
		w.sh(t, "echo evil > README && git add README && git write-tree >/dev/null && cp .git/index ../old && git checkout -q HEAD -- README")
		old, err := os.ReadFile(w.ws + "/../old")
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(w.ws + "/.git/index")
		if err != nil {
			t.Fatal(err)
		}
		oix, err := gitindex.Parse(old, hsz)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := gitindex.Parse(b, hsz)
		if err != nil {
			t.Fatal(err)
		}
		var exts []gitindex.Extension
		for _, x := range oix.Extensions {
			if x.Sig == "TREE" {
				exts = append(exts, x)
			}
		}
		for _, x := range ix.Extensions {
			if x.Sig != "TREE" {
				exts = append(exts, x)
			}
		}
		f := t.TempDir() + "/index"
		if err := os.WriteFile(f, gitindextest.Rewrite(t, b, hsz, exts...), 0o644); err != nil {
			t.Fatal(err)
		}
		return "cp " + f + " .git/index"
	}
	user := "git commit -q --allow-empty -m user && git show HEAD:README"
	ctl := newWorld(t)
	ctl.repo(t)
	ctl.unchecked(t, setup(t, ctl))
	if st := ctl.sh(t, "git status --porcelain"); st != "" {
		t.Fatalf("control: git status shows %q", st)
	}
	if out := ctl.sh(t, user); !strings.Contains(out, "evil") {
		t.Fatalf("control: the user's commit has README %q, not the kept tree's", out)
	}
	w := newWorld(t)
	w.repo(t)
	o := w.run(t, setup(t, w))
	w.expectRefused(t, o, "git-index", ".git/index")
	if out := w.sh(t, user); strings.Contains(out, "evil") {
		t.Errorf("the user's commit has the kept tree's README: %q", out)
	}
}

// TestIndexSplitCacheTreeForged: a split index's cache tree, which
// covers the shared index's entries too, must be theirs: one whose
// root is another tree is refused (git's own split index applies:
// TestIndexExtensionsOfGit).
func TestIndexSplitCacheTreeForged(t *testing.T) {
	const hsz = 20
	w := newWorld(t)
	w.repo(t)
	w.sh(t, "for i in $(seq 1 30); do echo $i > f$i; done && touch -d 2020-01-01 f* && git add . && git commit -qm i && "+
		"git update-index --split-index && echo 2 > f3 && git add f3 && git commit -qm s")
	b, err := os.ReadFile(w.ws + "/.git/index")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := gitindex.Parse(b, hsz)
	if err != nil || ix.Shared == "" {
		t.Fatalf("not a split index (%v)", err)
	}
	var exts []gitindex.Extension
	for _, x := range ix.Extensions {
		if x.Sig == "TREE" {
			d := slices.Clone(x.Data)
			d[strings.IndexByte(string(d), '\n')+1] ^= 1
			x.Data = d
		}
		exts = append(exts, x)
	}
	f := t.TempDir() + "/index"
	if err := os.WriteFile(f, gitindextest.Rewrite(t, b, hsz, exts...), 0o644); err != nil {
		t.Fatal(err)
	}
	o := w.run(t, "cp "+f+" .git/index")
	w.expectRefused(t, o, "git-index", ".git/index")
}
