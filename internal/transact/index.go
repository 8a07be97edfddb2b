//go:build linux

package transact

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"path/filepath"
	"strings"
)

// indexCanon is the undo store's canonical form of git's index
// (layer.Store.SetCanon): a digest of what the index says, leaving out
// what git refreshes on its own. A read-only git status rewrites the
// index with the files' new stat data (times, device, inode, owner,
// size) and its caches (the cache tree, the untracked cache, the
// fsmonitor token, the offset tables): such a rewrite is no undo step,
// and undo takes it for no change. Every entry's path, mode, object id,
// stage and flags, and every other extension (resolve-undo, the split
// index's link, sparse directories), count. "" for any other path and
// for an index that does not parse.
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
// such an index (its trailer is not its hash, or it does not parse).
func canonIndex(b []byte, hsz int) (string, bool) {
	if len(b) < 12+hsz || string(b[:4]) != "DIRC" {
		return "", false
	}
	body := b[:len(b)-hsz]
	sum := sha1.Sum(body)
	want := sum[:]
	if hsz == sha256.Size {
		s := sha256.Sum256(body)
		want = s[:]
	}
	if !bytes.Equal(want, b[len(body):]) && (hsz != sha1.Size || !bytes.Equal(b[len(body):], make([]byte, hsz))) { // index.skipHash writes zeros
		return "", false
	}
	ver := binary.BigEndian.Uint32(b[4:])
	if ver < 2 || ver > 4 {
		return "", false
	}
	h := sha256.New()
	h.Write(b[4:12]) // version, entries
	p := 12
	prev := ""
	for range binary.BigEndian.Uint32(b[8:]) {
		// ctime, mtime, dev, ino (24 bytes), mode, uid, gid, size, oid,
		// flags: mode, oid and flags count.
		fixed := 40 + hsz + 2
		if p+fixed > len(body) {
			return "", false
		}
		h.Write(b[p+24 : p+28])
		h.Write(b[p+40 : p+fixed])
		flags := binary.BigEndian.Uint16(b[p+40+hsz:])
		q := p + fixed
		if flags&0x4000 != 0 {
			if q+2 > len(body) {
				return "", false
			}
			h.Write(b[q : q+2])
			q += 2
		}
		var name string
		if ver == 4 {
			strip, k := binary.Uvarint(body[q:])
			if k <= 0 || strip > uint64(len(prev)) {
				return "", false
			}
			q += k
			end := bytes.IndexByte(body[q:], 0)
			if end < 0 {
				return "", false
			}
			name = prev[:len(prev)-int(strip)] + string(body[q:q+end])
			p = q + end + 1
		} else {
			end := bytes.IndexByte(body[q:], 0)
			if end < 0 {
				return "", false
			}
			name = string(body[q : q+end])
			p += (q - p + end + 8) &^ 7 // NUL-padded to a multiple of 8
			if p > len(body) {
				return "", false
			}
		}
		h.Write([]byte(name))
		h.Write([]byte{0})
		prev = name
	}
	for p < len(body) {
		if p+8 > len(body) {
			return "", false
		}
		sig := string(body[p : p+4])
		n := int(binary.BigEndian.Uint32(body[p+4:]))
		if n < 0 || p+8+n > len(body) {
			return "", false
		}
		if !refreshed[sig] {
			h.Write(body[p : p+8+n])
		}
		p += 8 + n
	}
	return hex.EncodeToString(h.Sum(nil)), true
}
