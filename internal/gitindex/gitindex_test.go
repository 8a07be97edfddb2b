package gitindex_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/internal/gitindex"
	"github.com/bashvisor/bashvisor/internal/gitindex/gitindextest"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const hsz = 20

// made returns the index git leaves in a new repository after script.
func made(t *testing.T, script string) []byte {
	t.Helper()
	testenv.NeedsTool(t, "git")
	dir := t.TempDir()
	gitindextest.Git(t, dir, "git init -q -b main . && "+script)
	b, err := os.ReadFile(filepath.Join(dir, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parse(t *testing.T, b []byte) *gitindex.Index {
	t.Helper()
	ix, err := gitindex.Parse(b, hsz)
	if err != nil {
		t.Fatalf("git's index does not parse: %v", err)
	}
	return ix
}

func sigs(ix *gitindex.Index) []string {
	var out []string
	for _, x := range ix.Extensions {
		out = append(out, x.Sig)
	}
	return out
}

func names(es []gitindex.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

const (
	tree      = "mkdir -p a/b && echo 1 > a/b/f && echo x > top && git add . && git commit -qm i"
	many      = "mkdir -p a/b && for i in $(seq 1 1200); do echo $i > a/b/f$i; done && git add . && git commit -qm i"
	threads   = " && git -c index.threads=2 -c index.recordOffsetTable=true -c index.recordEndOfIndexEntries=true update-index --force-write-index --refresh"
	untracked = tree + " && echo u > untracked.txt && mkdir ud && echo q > ud/q && git -c core.untrackedCache=true update-index --untracked-cache && git -c core.untrackedCache=true status --short"
)

// TestParseGitsIndexes: the indexes git writes, with each extension,
// parse, and the parser returns their paths.
func TestParseGitsIndexes(t *testing.T) {
	long := strings.Repeat("a", 200)
	cases := []struct {
		name, script string
		exts         []string
		check        func(t *testing.T, ix *gitindex.Index)
	}{
		{"cache tree", tree, []string{"TREE"}, func(t *testing.T, ix *gitindex.Index) {
			if !slices.Equal(ix.Trees, []string{"", "a", "a/b"}) {
				t.Errorf("trees %q", ix.Trees)
			}
		}},
		{"untracked cache", untracked, []string{"TREE", "UNTR"}, func(t *testing.T, ix *gitindex.Index) {
			if !slices.Contains(ix.Untracked, "untracked.txt") || !slices.Contains(ix.Untracked, "ud/") || ix.ExcludePerDir != ".gitignore" {
				t.Errorf("untracked %q, exclude file %q", ix.Untracked, ix.ExcludePerDir)
			}
		}},
		{"offset table", many + threads, []string{"IEOT", "TREE", "EOIE"}, nil},
		{"offset table v4", many + " && git update-index --index-version 4" + threads, []string{"IEOT", "TREE", "EOIE"}, nil},
		// Names longer than 127 bytes: git's varint takes two bytes.
		{"v4 long names", "mkdir -p " + long + " b && echo 1 > " + long + "/x && echo 2 > b/y && git update-index --index-version 4 && git add . && git commit -qm i",
			[]string{"TREE"}, func(t *testing.T, ix *gitindex.Index) {
				if !slices.Equal(names(ix.Entries), []string{long + "/x", "b/y"}) {
					t.Errorf("entries %q", names(ix.Entries))
				}
			}},
		{"fsmonitor", "echo 1 > f && git add f && printf '#!/bin/sh\\nprintf \"tok-1\\\\0/\\\\0\"\\n' > ../fsm && chmod +x ../fsm && git -c core.fsmonitor=$PWD/../fsm status --short",
			[]string{"FSMN"}, nil},
		{"resolve undo", "echo a > f && git add f && git commit -qm a && git checkout -qb o && echo b > f && git commit -qam b && git checkout -q main && echo c > f && git commit -qam c && (git merge -q o || true) && echo d > f && git add f",
			[]string{"TREE", "REUC"}, func(t *testing.T, ix *gitindex.Index) {
				if !slices.Equal(names(ix.Undo), []string{"f", "f", "f"}) {
					t.Errorf("resolve-undo %q", names(ix.Undo))
				}
			}},
		// The cache tree counts the shared index's 30 entries too.
		{"split index", "for i in $(seq 1 30); do echo $i > f$i; done && touch -d 2020-01-01 f* && git add . && git commit -qm i && git update-index --split-index && echo 2 > f3 && git add f3 && git commit -qm s",
			[]string{"link", "TREE"}, func(t *testing.T, ix *gitindex.Index) {
				if len(ix.Shared) != 40 || len(ix.Entries) >= 30 {
					t.Errorf("shared %q, %d entries", ix.Shared, len(ix.Entries))
				}
			}},
		{"unmerged", "echo a > f && git add f && git commit -qm a && git checkout -qb o && echo b > f && git commit -qam b && git checkout -q main && echo c > f && git commit -qam c && (git merge -q o || true)",
			nil, func(t *testing.T, ix *gitindex.Index) {
				if !slices.ContainsFunc(ix.Entries, func(e gitindex.Entry) bool { return e.Flags&0x3000 != 0 }) {
					t.Errorf("no unmerged entry: %q", names(ix.Entries))
				}
			}},
		// git writes no valid cache-tree node above an intent-to-add
		// entry, which trees leave out.
		{"intent to add", tree + " && echo n > a/n && git add -N a/n && git write-tree >/dev/null", []string{"TREE"}, nil},
		{"sparse index", tree + " && git sparse-checkout init --cone --sparse-index && git sparse-checkout set a/b", []string{"TREE", "sdir"}, nil},
		// After a commit git writes a valid cache-tree node for the
		// sparse directory c/ itself (its tree is the entry's object).
		{"sparse index commit", "mkdir -p a/b c/d && echo 1 > a/b/x && echo 2 > c/d/y && echo 3 > c/z && git add . && git commit -qm i && git config index.sparse true && git sparse-checkout set --cone a && echo y >> a/b/x && git commit -qam x",
			[]string{"TREE", "sdir"}, func(t *testing.T, ix *gitindex.Index) {
				if !slices.Contains(names(ix.Entries), "c/") || !slices.Contains(ix.Trees, "c") {
					t.Errorf("entries %q, trees %q: no sparse directory c/ with its own node", names(ix.Entries), ix.Trees)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ix := parse(t, made(t, c.script))
			for _, s := range c.exts {
				if !slices.Contains(sigs(ix), s) {
					t.Errorf("no %s extension: %v", s, sigs(ix))
				}
			}
			if c.check != nil {
				c.check(t, ix)
			}
		})
	}
}

// ext returns the extension sig of ix.
func ext(t *testing.T, ix *gitindex.Index, sig string) []byte {
	t.Helper()
	for _, x := range ix.Extensions {
		if x.Sig == sig {
			return x.Data
		}
	}
	t.Fatalf("no %s extension: %v", sig, sigs(ix))
	return nil
}

// replaced returns ix's extensions with sig's data replaced by data.
func replaced(ix *gitindex.Index, sig string, data []byte) []gitindex.Extension {
	var out []gitindex.Extension
	for _, x := range ix.Extensions {
		if x.Sig == sig {
			x.Data = data
		}
		out = append(out, x)
	}
	return out
}

// TestCacheTreePaths: the cache tree's directories are returned as
// paths for the caller's verify_path (a forged subtree named .git is
// TREE .git), and a cache tree that git would read otherwise than it
// reads here does not parse.
func TestCacheTreePaths(t *testing.T) {
	b := made(t, tree)
	ix := parse(t, b)
	oid := strings.Repeat("\x11", hsz)
	// Invalid nodes (-1): a valid one must name its entries' tree
	// (TestCacheTreeMatchesEntries).
	forged := gitindextest.Rewrite(t, b, hsz, replaced(ix, "TREE", []byte("\x00-1 1\n.git\x00-1 1\nhooks\x00-1 0\n"))...)
	if got := parse(t, forged).Trees; !slices.Equal(got, []string{"", ".git", ".git/hooks"}) {
		t.Errorf("forged trees: %q", got)
	}
	for name, data := range map[string]string{
		"a slash in a name":    "\x002 1\n" + oid + "a/b\x001 0\n" + oid,
		"a subtree twice":      "\x002 2\n" + oid + "a\x001 0\n" + oid + "a\x001 0\n" + oid,
		"more entries":         "\x00999 0\n" + oid,
		"a leading zero":       "\x0002 0\n" + oid,
		"a double minus":       "\x00--1 0\n",
		"a subtree missing":    "\x002 1\n" + oid,
		"bytes after it":       "\x002 0\n" + oid + "x",
		"a named root":         "x\x002 0\n" + oid,
		"an id cut short":      "\x002 0\n" + oid[1:],
		"a huge subtree count": "\x00-1 999999999\n",
	} {
		forged := gitindextest.Rewrite(t, b, hsz, replaced(ix, "TREE", []byte(data))...)
		if _, err := gitindex.Parse(forged, hsz); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestUntrackedCachePaths: the untracked cache's directories and files
// are returned as paths (git clean and git add read them as untracked
// files), with its exclude file name; one whose bitmaps or data git
// would read otherwise does not parse.
func TestUntrackedCachePaths(t *testing.T) {
	b := made(t, untracked)
	ix := parse(t, b)
	stat, oid := strings.Repeat("\x01", 36), strings.Repeat("\x02", hsz)
	forged := gitindextest.Rewrite(t, b, hsz, replaced(ix, "UNTR", gitindextest.Untracked(hsz, ".git/hooks/pre-commit", []string{"../x", "y/"}, ".git", []int{0, 1}, []int{1}, stat+stat+oid))...)
	got := parse(t, forged)
	if !slices.Equal(got.Untracked, []string{"../x", "y/", ".git/"}) || got.ExcludePerDir != ".git/hooks/pre-commit" {
		t.Errorf("forged untracked cache: %q, exclude file %q", got.Untracked, got.ExcludePerDir)
	}
	for name, data := range map[string][]byte{
		"a bit past the directories": gitindextest.Untracked(hsz, ".gitignore", nil, "s", []int{0, 5}, nil, stat+stat),
		"data missing":               gitindextest.Untracked(hsz, ".gitignore", nil, "s", []int{0, 1}, nil, stat),
		"data left over":             gitindextest.Untracked(hsz, ".gitignore", nil, "s", []int{0}, nil, stat+stat),
		"a slash in a directory":     gitindextest.Untracked(hsz, ".gitignore", nil, "s/t", nil, nil, ""),
		"no final NUL":               gitindextest.Untracked(hsz, ".gitignore", nil, "s", nil, nil, "")[:60],
	} {
		forged := gitindextest.Rewrite(t, b, hsz, replaced(ix, "UNTR", data)...)
		if _, err := gitindex.Parse(forged, hsz); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestFsmonitorChecked: the fsmonitor token is printable and its
// bitmap is exactly as long as it says and no longer than the index.
func TestFsmonitorChecked(t *testing.T) {
	b := made(t, "echo 1 > f && git add f")
	ix := parse(t, b)
	fsmn := func(version uint32, token string, bm []byte, size int) gitindex.Extension {
		d := binary.BigEndian.AppendUint32(nil, version)
		d = append(append(d, token...), 0)
		d = binary.BigEndian.AppendUint32(d, uint32(size))
		return gitindex.Extension{Sig: "FSMN", Data: append(d, bm...)}
	}
	bm := gitindextest.EWAH(1, 0)
	if _, err := gitindex.Parse(gitindextest.Rewrite(t, b, hsz, append(ix.Extensions, fsmn(2, "tok-1", bm, len(bm)))...), hsz); err != nil {
		t.Fatalf("a well-formed fsmonitor extension: %v", err)
	}
	for name, x := range map[string]gitindex.Extension{
		"a control character": fsmn(2, "tok\n1", bm, len(bm)),
		"version 3":           fsmn(3, "tok-1", bm, len(bm)),
		"a size not its own":  fsmn(2, "tok-1", bm, len(bm)-1),
		"more bits":           fsmn(2, "tok-1", gitindextest.EWAH(5, 4), len(bm)),
	} {
		if _, err := gitindex.Parse(gitindextest.Rewrite(t, b, hsz, append(ix.Extensions, x)...), hsz); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestOffsetsConsistent: EOIE must give where the entries end and the
// hash of the extensions before it, as the last extension; IEOT's
// blocks must start at entries, cover them all, and in version 4 not
// share a prefix across a block's start: git's threaded loader reads
// the index by them, and must see what the serial reader sees.
func TestOffsetsConsistent(t *testing.T) {
	for _, v4 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v4=%v", v4), func(t *testing.T) {
			script := many
			if v4 {
				script += " && git update-index --index-version 4"
			}
			b := made(t, script+threads)
			ix := parse(t, b)
			ieot := ext(t, ix, "IEOT")
			first := binary.BigEndian.Uint32(ieot[4:])
			forge := map[string][]byte{}
			// EOIE's offset one entry late.
			eoie := slices.Clone(ext(t, ix, "EOIE"))
			binary.BigEndian.PutUint32(eoie, binary.BigEndian.Uint32(eoie)+8)
			forge["EOIE offset"] = gitindextest.Resum(slices.Concat(b[:len(b)-hsz-len(eoie)], eoie, b[len(b)-hsz:]), hsz)
			// EOIE's hash not the extensions'.
			eoie = slices.Clone(ext(t, ix, "EOIE"))
			eoie[5] ^= 1
			forge["EOIE hash"] = gitindextest.Resum(slices.Concat(b[:len(b)-hsz-len(eoie)], eoie, b[len(b)-hsz:]), hsz)
			forge["EOIE not last"] = gitindextest.Rewrite(t, b, hsz, append(slices.Clone(ix.Extensions), gitindex.Extension{Sig: "ZZZZ"})...)
			// IEOT: the second block starts 8 bytes late, or covers
			// one entry too few.
			late := slices.Clone(ieot)
			binary.BigEndian.PutUint32(late[12:], binary.BigEndian.Uint32(late[12:])+8)
			forge["IEOT offset"] = gitindextest.Rewrite(t, b, hsz, replaced(ix, "IEOT", late)...)
			short := slices.Clone(ieot)
			binary.BigEndian.PutUint32(short[16:], binary.BigEndian.Uint32(short[16:])-1)
			forge["IEOT count"] = gitindextest.Rewrite(t, b, hsz, replaced(ix, "IEOT", short)...)
			// One block of all entries, then one of none.
			one := binary.BigEndian.AppendUint32(ieot[:4:4], first)
			one = binary.BigEndian.AppendUint32(one, uint32(len(ix.Entries)))
			if _, err := gitindex.Parse(gitindextest.Rewrite(t, b, hsz, replaced(ix, "IEOT", one)...), hsz); err != nil {
				t.Errorf("one block of every entry: %v", err)
			}
			forge["IEOT empty block"] = gitindextest.Rewrite(t, b, hsz, replaced(ix, "IEOT", binary.BigEndian.AppendUint64(one, uint64(first)<<32))...)
			if v4 {
				// Two blocks, the second at an entry that shares a
				// prefix with the one before it.
				two := binary.BigEndian.AppendUint32(ieot[:4:4], first)
				two = binary.BigEndian.AppendUint32(two, 2)
				two = binary.BigEndian.AppendUint32(two, uint32(offsetOf(t, b, 2)))
				two = binary.BigEndian.AppendUint32(two, uint32(len(ix.Entries)-2))
				forge["IEOT shared prefix"] = gitindextest.Rewrite(t, b, hsz, replaced(ix, "IEOT", two)...)
			}
			for name, f := range forge {
				if _, err := gitindex.Parse(f, hsz); err == nil {
					t.Errorf("%s: parsed", name)
				}
			}
		})
	}
}

// offsetOf returns where entry k of index b starts, from a one-block
// offset table that ends at it (found by trying each offset).
func offsetOf(t *testing.T, b []byte, k int) int {
	t.Helper()
	ix := parse(t, b)
	first := binary.BigEndian.Uint32(ext(t, ix, "IEOT")[4:])
	end := gitindextest.EntriesEnd(t, b, hsz)
	for off := int(first) + 1; off < end; off++ {
		tbl := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 1}, first)
		tbl = binary.BigEndian.AppendUint32(tbl, uint32(k))
		tbl = binary.BigEndian.AppendUint32(tbl, uint32(off))
		tbl = binary.BigEndian.AppendUint32(tbl, uint32(len(ix.Entries)-k))
		if _, err := gitindex.Parse(gitindextest.Rewrite(t, b, hsz, replaced(ix, "IEOT", tbl)...), hsz); err == nil ||
			!strings.Contains(err.Error(), "has offset") {
			return off
		}
	}
	t.Fatal("no offset")
	return 0
}

// TestEntriesAsGitReadsThem: a name whose length in the flags is not
// its length (git takes the flags'), an unknown extended flag, an
// unknown required extension (a name not starting with A to Z) and a
// resolve-undo mode that is not octal do not parse; an unknown optional
// extension does.
func TestEntriesAsGitReadsThem(t *testing.T) {
	b := made(t, tree)
	ix := parse(t, b)
	flags := 12 + 40 + hsz // the first entry's flags
	forge := map[string][]byte{}
	short := slices.Clone(b)
	binary.BigEndian.PutUint16(short[flags:], binary.BigEndian.Uint16(short[flags:])-1)
	forge["a name length short"] = gitindextest.Resum(short, hsz)
	for _, sig := range []string{"abcd", "1xyz", "\x00TRE"} {
		forge["extension "+sig] = gitindextest.Rewrite(t, b, hsz, append(slices.Clone(ix.Extensions), gitindex.Extension{Sig: sig})...)
	}
	oid := strings.Repeat("\x11", hsz)
	forge["a mode 100758"] = gitindextest.Rewrite(t, b, hsz, gitindex.Extension{Sig: "REUC", Data: []byte("f\x00100758\x000\x000\x00" + oid)})
	forge["link with garbage"] = gitindextest.Rewrite(t, b, hsz, gitindex.Extension{Sig: "link", Data: []byte(oid + string(gitindextest.EWAH(1)) + string(gitindextest.EWAH(1)) + "x")})
	forge["sdir with data"] = gitindextest.Rewrite(t, b, hsz, gitindex.Extension{Sig: "sdir", Data: []byte("x")})
	for name, f := range forge {
		if _, err := gitindex.Parse(f, hsz); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if _, err := gitindex.Parse(gitindextest.Rewrite(t, b, hsz, append(slices.Clone(ix.Extensions), gitindex.Extension{Sig: "Zzzz", Data: []byte("x")})...), hsz); err != nil {
		t.Errorf("an unknown optional extension: %v", err)
	}
	if _, err := gitindex.Parse(gitindextest.Rewrite(t, b, hsz, gitindex.Extension{Sig: "REUC", Data: []byte("f\x00100755\x000\x00120000\x00" + oid + oid)}), hsz); err != nil {
		t.Errorf("a resolve-undo entry: %v", err)
	}
}

// TestVarint: git's varint (varint.c), not Go's: 0x80 0x00 is 128.
func TestVarint(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		v    uint64
		k    int
		fail bool
	}{
		{[]byte{0}, 0, 1, false}, {[]byte{127}, 127, 1, false}, {[]byte{0x80, 0}, 128, 2, false},
		{[]byte{0x81, 0x7f}, 383, 2, false}, {[]byte{0x80}, 0, 0, true}, {nil, 0, 0, true},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 0, 0, true},
	} {
		v, k := gitindex.Varint(c.b)
		if c.fail != (k <= 0) || !c.fail && (v != c.v || k != c.k) {
			t.Errorf("Varint(%x) = %d, %d", c.b, v, k)
		}
	}
}

// TestCacheTreeMatchesEntries: git commit writes a valid cache-tree
// node as its directory's tree without reading the entries, so a
// cache tree kept from another index makes the user's next commit
// record a file the index does not have (the control shows git doing
// it). Such an index does not parse; nor does one whose valid node has
// another count or another tree. The cache trees
// git writes (TestParseGitsIndexes: sparse, resolve-undo, v4) parse.
func TestCacheTreeMatchesEntries(t *testing.T) {
	testenv.NeedsTool(t, "git")
	dir := t.TempDir()
	gitindextest.Git(t, dir, "git init -q -b main . && "+tree+" && cp .git/index ../old && git rm -q --cached top && git commit -qm rm")
	old, err := os.ReadFile(filepath.Join(dir, "../old"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	ix := parse(t, b)
	kept := ext(t, parse(t, old), "TREE")
	forged := gitindextest.Rewrite(t, b, hsz, replaced(ix, "TREE", kept)...)
	if err := os.WriteFile(filepath.Join(dir, ".git/index"), forged, 0o644); err != nil {
		t.Fatal(err)
	}
	gitindextest.Git(t, dir, "git commit -q --allow-empty -m forged && git ls-tree --name-only HEAD > ../ls")
	if ls, err := os.ReadFile(filepath.Join(dir, "../ls")); err != nil || !strings.Contains(string(ls), "top") {
		t.Fatalf("control: git committed %q (%v), not the kept cache tree's file", ls, err)
	}
	if _, err := gitindex.Parse(forged, hsz); err == nil || !strings.Contains(err.Error(), "TREE") {
		t.Errorf("a cache tree kept from another index: %v", err)
	}
	root := parse(t, old)
	data := ext(t, root, "TREE")
	for name, mutate := range map[string]func([]byte) []byte{
		"another tree": func(d []byte) []byte {
			i := strings.IndexByte(string(d), '\n') + 1
			d[i] ^= 1
			return d
		},
		"another count": func(d []byte) []byte { return []byte(strings.Replace(string(d), "\x002 1\n", "\x003 1\n", 1)) },
	} {
		d := mutate(slices.Clone(data))
		if string(d) == string(data) {
			t.Fatalf("%s: nothing changed in %q", name, data)
		}
		if _, err := gitindex.Parse(gitindextest.Rewrite(t, old, hsz, replaced(root, "TREE", d)...), hsz); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestStripCaches: git's index without its untracked cache and
// fsmonitor data (and then without the offset tables) parses with the
// same entries and the other extensions, and git reads it: git
// ls-files lists the same, git status works and puts the untracked
// cache back when asked to.
func TestStripCaches(t *testing.T) {
	for name, script := range map[string]string{
		"untracked cache": untracked + threads,
		"fsmonitor":       "echo 1 > f && git add f && printf '#!/bin/sh\\nprintf \"tok-1\\\\0/\\\\0\"\\n' > ../fsm && chmod +x ../fsm && git -c core.fsmonitor=$PWD/../fsm status --short",
	} {
		t.Run(name, func(t *testing.T) {
			testenv.NeedsTool(t, "git")
			dir := t.TempDir()
			gitindextest.Git(t, dir, "git init -q -b main . && "+script+" && git ls-files -s > ../before")
			b, err := os.ReadFile(filepath.Join(dir, ".git/index"))
			if err != nil {
				t.Fatal(err)
			}
			ix := parse(t, b)
			out, ok := gitindex.Strip(b, hsz, "UNTR", "FSMN")
			if !ok {
				t.Fatalf("nothing stripped from %v", sigs(ix))
			}
			got := parse(t, out)
			var want []string
			for _, s := range sigs(ix) {
				if s != "UNTR" && s != "FSMN" && s != "EOIE" && s != "IEOT" {
					want = append(want, s)
				}
			}
			if !slices.Equal(sigs(got), want) || !slices.Equal(names(got.Entries), names(ix.Entries)) {
				t.Errorf("stripped: extensions %v (want %v), %d entries of %d", sigs(got), want, len(got.Entries), len(ix.Entries))
			}
			if _, ok := gitindex.Strip(out, hsz, "UNTR", "FSMN"); ok {
				t.Error("stripped again")
			}
			if err := os.WriteFile(filepath.Join(dir, ".git/index"), out, 0o644); err != nil {
				t.Fatal(err)
			}
			gitindextest.Git(t, dir, "git ls-files -s > ../after && cmp ../before ../after && git status --short >/dev/null")
		})
	}
}

// TestCacheTreeOfSplitIndex: a split index's cache tree covers its
// entries merged with the shared index's (replaced, deleted, added):
// git's own passes CheckSplit, one whose tree git's entries do not make
// fails it (Parse leaves it to CheckSplit).
func TestCacheTreeOfSplitIndex(t *testing.T) {
	testenv.NeedsTool(t, "git")
	dir := t.TempDir()
	gitindextest.Git(t, dir, "git init -q -b main . && for i in $(seq 1 30); do echo $i > f$i; done && touch -d 2020-01-01 f* && git add . && git commit -qm i && "+
		"git update-index --split-index && echo 2 > f3 && git rm -q f5 && echo n > new && git add f3 new && git commit -qm s")
	b, err := os.ReadFile(filepath.Join(dir, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	ix := parse(t, b)
	if !slices.Equal(names(ix.Entries), []string{"", "new"}) {
		t.Fatalf("the split index has %q, not f3 replaced (no name) and new", names(ix.Entries))
	}
	sb, err := os.ReadFile(filepath.Join(dir, ".git/sharedindex."+ix.Shared))
	if err != nil {
		t.Fatal(err)
	}
	shared := parse(t, sb)
	if err := ix.CheckSplit(shared); err != nil {
		t.Fatalf("git's split index: %v", err)
	}
	data := slices.Clone(ext(t, ix, "TREE"))
	data[strings.IndexByte(string(data), '\n')+1] ^= 1
	forged := parse(t, gitindextest.Rewrite(t, b, hsz, replaced(ix, "TREE", data)...))
	if err := forged.CheckSplit(shared); err == nil {
		t.Error("a split index whose cache tree is not its entries' passed")
	}
}
