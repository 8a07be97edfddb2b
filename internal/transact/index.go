//go:build linux

package transact

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"path/filepath"
	"strings"

	"github.com/bashvisor/bashvisor/internal/gitindex"
	"github.com/bashvisor/bashvisor/internal/layer"
)

// indexCanon is the undo store's canonical form of git's index
// (layer.Store.SetCanon): a digest of what the index says, leaving out
// what git refreshes on its own. A read-only git status rewrites the
// index with the files' new stat data (times, device, inode, owner,
// size) and its caches (the cache tree, the untracked cache, the
// fsmonitor token, the offset tables): such a rewrite is no undo step,
// and undo takes it for no change. Every entry's path, mode, object id,
// stage and flags, and every other extension (resolve-undo, the split
// index's link, sparse directories), count. The cache tree may be left
// out because package gitindex parses only one whose valid nodes name
// the trees of the entries (git commit writes them without reading the
// entries), but in a split index, whose entries it cannot see all of:
// there it counts. "" for any other path and for an index that does
// not parse (a forged cache tree: its change is a step).
func indexCanon(path string, read func() ([]byte, error)) string {
	if !isIndex(path) {
		return ""
	}
	b, err := read()
	if err != nil {
		return ""
	}
	for _, hsz := range []int{sha1.Size, sha256.Size} {
		if c, ok := canonIndex(b, hsz); ok {
			return c
		}
	}
	return ""
}

// isIndex reports whether path is a git index: .git/index, or a linked
// worktree's or a submodule's index under a .git directory.
func isIndex(path string) bool {
	if filepath.Base(path) != "index" {
		return false
	}
	dir := filepath.Dir(path)
	return filepath.Base(dir) == ".git" || strings.Contains(dir, "/.git/worktrees/") || strings.Contains(dir, "/.git/modules/")
}

// refreshed are the extensions git rewrites as caches (read-cache.c).
var refreshed = map[string]bool{"TREE": true, "UNTR": true, "FSMN": true, "EOIE": true, "IEOT": true}

// canonIndex digests index b with a hsz-byte hash; false when b is not
// such an index (package gitindex does not parse it).
func canonIndex(b []byte, hsz int) (string, bool) {
	ix, err := gitindex.Parse(b, hsz)
	if err != nil {
		return "", false
	}
	h := sha256.New()
	h.Write(b[4:12]) // version, entries
	var u [4]byte
	for _, e := range ix.Entries {
		// The stat data (times, device, inode, owner, size) is left out.
		h.Write(binary.BigEndian.AppendUint32(u[:0], e.Mode))
		h.Write(e.OID)
		h.Write(binary.BigEndian.AppendUint16(u[:0], e.Flags))
		if e.Flags&0x4000 != 0 {
			h.Write(binary.BigEndian.AppendUint16(u[:0], e.Extended))
		}
		h.Write([]byte(e.Name))
		h.Write([]byte{0})
	}
	for _, x := range ix.Extensions {
		if !refreshed[x.Sig] || x.Sig == "TREE" && ix.Shared != "" {
			h.Write([]byte(x.Sig))
			h.Write(binary.BigEndian.AppendUint32(u[:0], uint32(len(x.Data))))
			h.Write(x.Data)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

// maxIndex bounds the indexes dropCaches reads (gitpolicy refuses a
// larger one).
const maxIndex = 128 << 20

// dropCaches rewrites each git index the command changed without the
// caches git rebuilds on its own: the untracked cache and fsmonitor's
// token and bitmap (and then the offset tables). What git trusts in
// them cannot be checked against the workspace apply produces — a
// forged untracked cache hides a new file from git status, a forged
// fsmonitor bitmap a changed one — and an index without them is the
// same index to git. In the upper layer when no command runs over it;
// live (a checkpoint of a job that still runs), only in what is applied
// (layer.Set.Rewrite): the job keeps its own index. An index that cannot
// be rewritten is judged as it is.
func dropCaches(s *layer.Set, live bool) {
	for _, c := range s.Changes {
		if c.Kind == layer.Deleted || !c.Mode.IsRegular() || !isIndex(c.Path) || c.Size > maxIndex {
			continue
		}
		b, err := s.ReadFile(c.Path, true, maxIndex+1)
		if err != nil {
			continue
		}
		for _, hsz := range []int{sha1.Size, sha256.Size} {
			if out, ok := gitindex.Strip(b, hsz, "UNTR", "FSMN"); ok {
				_ = s.Rewrite(c.Path, out, !live)
				break
			}
		}
	}
}
