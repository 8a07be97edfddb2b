// Package gitindextest makes git index files for tests: real ones,
// written by git, and forged ones, with their extensions replaced.
package gitindextest

import (
	"encoding/binary"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitindex"
)

// Env is the environment of the git commands Git runs: no system or
// global configuration, a fixed identity.
var Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t",
	"GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "LC_ALL=C"}

// Git runs script with bash in dir (git's commands in it see Env) and
// fails t if it fails.
func Git(t testing.TB, dir, script string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = dir, append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, Env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// EntriesEnd returns where the entries of index b (hash size hsz) end
// and its extensions start.
func EntriesEnd(t testing.TB, b []byte, hsz int) int {
	t.Helper()
	ix, err := gitindex.Parse(b, hsz)
	if err != nil {
		t.Fatalf("the index to rewrite does not parse: %v", err)
	}
	end := len(b) - hsz
	for _, x := range ix.Extensions {
		end -= 8 + len(x.Data)
	}
	return end
}

// Rewrite returns index b (hash size hsz) with its extensions replaced
// by exts and its checksum made again. An EOIE among exts gets the
// offset and hash git would write.
func Rewrite(t testing.TB, b []byte, hsz int, exts ...gitindex.Extension) []byte {
	t.Helper()
	end := EntriesEnd(t, b, hsz)
	out := slices.Clone(b[:end])
	h := gitindex.NewHash(hsz)
	for _, x := range exts {
		if x.Sig == "EOIE" {
			x.Data = binary.BigEndian.AppendUint32(nil, uint32(end))
			x.Data = h.Sum(x.Data)
		}
		hdr := binary.BigEndian.AppendUint32([]byte(x.Sig), uint32(len(x.Data)))
		h.Write(hdr)
		out = append(append(out, hdr...), x.Data...)
	}
	return append(out, gitindex.Sum(hsz, out)...)
}

// Resum returns b with its checksum (the last hsz bytes) made again.
func Resum(b []byte, hsz int) []byte {
	out := slices.Clone(b[:len(b)-hsz])
	return append(out, gitindex.Sum(hsz, out)...)
}

// EWAH encodes a bitmap of size bits with the set positions (all below
// 64) as git does: a marker word and one literal word.
func EWAH(size int, set ...int) []byte {
	var w uint64
	for _, p := range set {
		w |= 1 << p
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	b = binary.BigEndian.AppendUint32(b, 2)
	b = binary.BigEndian.AppendUint64(b, 1<<33)
	b = binary.BigEndian.AppendUint64(b, w)
	return binary.BigEndian.AppendUint32(b, 0)
}

// Untracked encodes the data of an untracked cache (UNTR) for object
// ids hsz bytes long, whose per-directory exclude file is excl, of a
// root directory holding files and one subdirectory sub (holding
// nothing), with the bitmaps valid (which directories have stat data)
// and sha1Valid (which have an exclude file's object id) and the data
// after them.
func Untracked(hsz int, excl string, files []string, sub string, valid, sha1Valid []int, data string) []byte {
	ident := "Location /w, system Linux\x00"
	b := append([]byte{byte(len(ident))}, ident...)
	b = append(b, make([]byte, 2*36+4+2*hsz)...)
	b = append(append(b, excl...), 0)
	b = append(b, 2, byte(len(files)), 1, 0) // 2 directories; the root: its files, 1 subdirectory, name ""
	for _, f := range files {
		b = append(append(b, f...), 0)
	}
	b = append(append(append(b, 0, 0), sub...), 0)
	b = append(append(append(b, EWAH(2, valid...)...), EWAH(2)...), EWAH(2, sha1Valid...)...)
	return append(append(b, data...), 0)
}
