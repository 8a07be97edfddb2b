//go:build linux

package gitpolicy

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// The index (read-cache.c): a header, entries, extensions and a
// checksum. Git writes the files of the working tree from the index
// (git restore ., git checkout .) without checking the paths again, so
// an index is data only when every path in it passes git's verify_path.

// indexEntry is one path of an index (or of its REUC extension).
type indexEntry struct {
	name string
	mode uint32
}

// index is a parsed index file.
type index struct {
	entries []indexEntry
	shared  string // the split index's shared index (hex), or ""
}

var errShortIndex = errors.New("the index ends early")

// parseIndex parses an index file made with the hash hsz bytes long
// (20: SHA-1, 32: SHA-256), checking its checksum.
func parseIndex(b []byte, hsz int) (*index, error) {
	if len(b) < 12+hsz || string(b[:4]) != "DIRC" {
		return nil, errors.New("not an index")
	}
	if err := checkTrailer(b, hsz); err != nil {
		return nil, err
	}
	body := b[:len(b)-hsz]
	ver := binary.BigEndian.Uint32(b[4:])
	if ver < 2 || ver > 4 {
		return nil, fmt.Errorf("index version %d", ver)
	}
	n := binary.BigEndian.Uint32(b[8:])
	ix := &index{}
	p := 12
	prev := ""
	for range n {
		e, next, err := indexEntryAt(body, p, ver, hsz, prev)
		if err != nil {
			return nil, err
		}
		ix.entries = append(ix.entries, e)
		prev, p = e.name, next
	}
	return ix, ix.extensions(body[p:], hsz)
}

// indexEntryAt parses the entry at p; it returns the entry and where
// the next one starts.
func indexEntryAt(b []byte, p int, ver uint32, hsz int, prev string) (indexEntry, int, error) {
	fixed := 40 + hsz + 2
	if p+fixed > len(b) {
		return indexEntry{}, 0, errShortIndex
	}
	e := indexEntry{mode: binary.BigEndian.Uint32(b[p+24:])}
	flags := binary.BigEndian.Uint16(b[p+40+hsz:])
	q := p + fixed
	if flags&0x4000 != 0 {
		if ver < 3 {
			return e, 0, errors.New("an extended entry in a version 2 index")
		}
		q += 2
	}
	if ver == 4 {
		strip, k := binary.Uvarint(b[min(q, len(b)):])
		if k <= 0 || strip > uint64(len(prev)) {
			return e, 0, errors.New("bad prefix compression")
		}
		q += k
		end := bytes.IndexByte(b[min(q, len(b)):], 0)
		if end < 0 {
			return e, 0, errShortIndex
		}
		e.name = prev[:len(prev)-int(strip)] + string(b[q:q+end])
		return e, q + end + 1, nil
	}
	end := bytes.IndexByte(b[min(q, len(b)):], 0)
	if end < 0 {
		return e, 0, errShortIndex
	}
	e.name = string(b[q : q+end])
	// Padded with 1 to 8 NULs to a multiple of 8 bytes.
	next := p + ((q - p + end + 8) &^ 7)
	if next > len(b) {
		return e, 0, errShortIndex
	}
	return e, next, nil
}

// extensions parses the extensions after the entries: the split
// index's link and the resolve-undo paths are kept; any other
// extension whose name starts with a lower-case letter git requires
// to know, so an unknown one is refused.
func (ix *index) extensions(b []byte, hsz int) error {
	for len(b) > 0 {
		if len(b) < 8 {
			return errShortIndex
		}
		sig, size := string(b[:4]), binary.BigEndian.Uint32(b[4:])
		if uint64(size) > uint64(len(b)-8) {
			return errShortIndex
		}
		data := b[8 : 8+size]
		switch sig {
		case "link":
			if len(data) < hsz {
				return errShortIndex
			}
			ix.shared = fmt.Sprintf("%x", data[:hsz])
		case "REUC":
			if err := ix.reuc(data, hsz); err != nil {
				return err
			}
		case "sdir", "TREE", "UNTR", "FSMN", "EOIE", "IEOT":
		default:
			if sig[0] >= 'a' && sig[0] <= 'z' {
				return fmt.Errorf("unknown required index extension %q", sig)
			}
		}
		b = b[8+size:]
	}
	return nil
}

// reuc parses the resolve-undo extension: paths, each with three
// octal modes and an object id per non-zero mode (git checkout -m
// writes them back).
func (ix *index) reuc(b []byte, hsz int) error {
	for len(b) > 0 {
		var f [4]string
		for i := range f {
			end := bytes.IndexByte(b, 0)
			if end < 0 {
				return errShortIndex
			}
			f[i], b = string(b[:end]), b[end+1:]
		}
		ix.entries = append(ix.entries, indexEntry{name: f[0], mode: 0o100644})
		for _, m := range f[1:] {
			if m != "0" {
				if len(b) < hsz {
					return errShortIndex
				}
				b = b[hsz:]
			}
		}
	}
	return nil
}

// checkTrailer checks that b ends with the hash of what comes before
// (hsz bytes: SHA-1 or SHA-256); an all-zero trailer is what git
// writes with index.skipHash.
func checkTrailer(b []byte, hsz int) error {
	if len(b) < hsz {
		return errors.New("too short for its checksum")
	}
	body, sum := b[:len(b)-hsz], b[len(b)-hsz:]
	if !bytes.Equal(sum, make([]byte, hsz)) && !bytes.Equal(hashOf(hsz, body), sum) {
		return errors.New("its checksum does not match")
	}
	return nil
}

func newHash(hsz int) hash.Hash {
	if hsz == sha256.Size {
		return sha256.New()
	}
	return sha1.New()
}

func hashOf(hsz int, b []byte) []byte {
	h := newHash(hsz)
	h.Write(b)
	return h.Sum(nil)
}

// Index entry modes git writes (mode bits as in the index).
const (
	modeFile    = 0o100644
	modeExec    = 0o100755
	modeSymlink = 0o120000
	modeGitlink = 0o160000
	modeDir     = 0o040000 // a sparse directory entry
)

// badIndexEntry says what is wrong with an entry, or "".
func badIndexEntry(e indexEntry, split bool) string {
	switch e.mode {
	case modeFile, modeExec, modeSymlink, modeGitlink, modeDir, 0o100664:
	default:
		return fmt.Sprintf("mode %o", e.mode)
	}
	if e.name == "" && split {
		return "" // replaces an entry of the shared index, which is checked
	}
	if why := verifyPath(e.name, e.mode); why != "" {
		return fmt.Sprintf("path %q %s", e.name, why)
	}
	return ""
}

// verifyPath is git's verify_path with the checks of every platform
// on (core.protectNTFS and core.protectHFS): it says why git must not
// write path, or "".
func verifyPath(path string, mode uint32) string {
	switch {
	case path == "":
		return "is empty"
	case strings.HasPrefix(path, "/"):
		return "is absolute"
	case len(path) >= 2 && path[1] == ':' && isAlpha(path[0]):
		return "has a drive letter"
	}
	if mode == modeDir {
		if !strings.HasSuffix(path, "/") {
			return "is a directory entry without a final /"
		}
		path = strings.TrimSuffix(path, "/")
	}
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '\\' })
	if strings.Contains(path, "//") || strings.HasSuffix(path, "/") || strings.Contains(path, "\\\\") {
		return "has an empty component"
	}
	for i, c := range parts {
		switch {
		case c == "." || c == "..":
			return "has a " + c + " component"
		case isDotGit(c):
			return "passes through .git"
		case i == len(parts)-1 && mode == modeSymlink && isDotGitmodules(c):
			return "is a symlink named .gitmodules"
		case strings.ContainsRune(c, 0):
			return "holds a NUL"
		}
	}
	return ""
}
