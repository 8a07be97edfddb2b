package gitindex_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitindex"
	"github.com/bashvisor/bashvisor/internal/gitindex/gitindextest"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// FuzzParse: no input makes Parse panic, and what parses has the
// counts its header gives (its checksum made right first, so that the
// fuzzer reaches past it).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"DIRC\x00\x00\x00\x02\x00\x00\x00\x00", "DIRC\x00\x00\x00\x04\x00\x00\x00\x01"} {
		f.Add([]byte(s))
	}
	// Git's own, with the extensions (without their checksums: the
	// target appends one).
	testenv.NeedsTool(f, "git")
	for _, script := range []string{untracked, tree + " && git update-index --index-version 4 && git update-index --split-index && echo 2 > top && git add top",
		"mkdir d && for i in 1 2 3 4; do echo $i > d/f$i; done && git add d && git -c index.threads=2 -c index.recordOffsetTable=true -c index.recordEndOfIndexEntries=true update-index --force-write-index --refresh"} {
		dir := f.TempDir()
		gitindextest.Git(f, dir, "git init -q -b main . && "+script)
		b, err := os.ReadFile(filepath.Join(dir, ".git/index"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:len(b)-20])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 20 {
			return
		}
		b = gitindextest.Resum(append(b, make([]byte, 20)...), 20)
		ix, err := gitindex.Parse(b, 20)
		if err == nil && uint32(len(ix.Entries)) != uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11]) {
			t.Fatalf("%d entries, header says otherwise", len(ix.Entries))
		}
	})
}
