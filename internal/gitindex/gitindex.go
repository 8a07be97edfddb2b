// Package gitindex parses git's index file (.git/index, a split index's
// sharedindex.* file) the way git's read-cache.c reads it, and checks
// every part git reads: the header, the entries (their name lengths as
// git takes them, v4 prefix compression with git's varint), each
// extension git knows (TREE, REUC, link, UNTR, FSMN, EOIE, IEOT, sdir)
// and the trailing checksum. An index that parses here is read by git
// with the same entries: where git would read it two ways (the offsets
// of EOIE and IEOT used by its threaded loader), both ways must agree.
//
// The cache tree's valid nodes must name the trees the entries make
// (git commit writes them without looking at the entries); a split
// index's, whose entries are only the changes to its shared index, are
// checked against the merged entries by [Index.CheckSplit].
//
// It does not judge paths: [Index] returns every path the index names
// (entries, resolve-undo, the cache tree's directories, the untracked
// cache's directories and files) for the caller to check.
package gitindex

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
)

// Index is a parsed index file.
type Index struct {
	// Version is the index format: 2, 3 or 4.
	Version uint32
	// Entries are the index's entries in file order.
	Entries []Entry
	// Extensions are the extensions in file order, each with its data.
	// Unknown optional ones (a name starting with A to Z) are kept and
	// not parsed, as git ignores them.
	Extensions []Extension
	// Shared is the shared index a split index links to (the hex
	// object id of the link extension), or "".
	Shared string
	// Undo are the paths of the resolve-undo extension (REUC), one per
	// non-zero mode: git checkout -m writes them back.
	Undo []Entry
	// Trees are the directories of the cache tree (TREE), as paths
	// relative to the top of the working tree ("" is the top).
	Trees []string
	// Untracked are the directories and files of the untracked cache
	// (UNTR), as paths relative to the top; a directory listed as
	// untracked ends in "/".
	Untracked []string
	// ExcludePerDir is the untracked cache's per-directory exclude file
	// name (".gitignore"), or "" without an untracked cache.
	ExcludePerDir string

	hsz               int        // the size of its object ids
	trees             []treeNode // the cache tree's valid nodes
	deleted, replaced ewah       // the split index's bitmaps
}

// Entry is one entry of the index.
type Entry struct {
	// Name is the entry's path, relative to the top of the working tree.
	Name string
	// Mode is the entry's mode (0o100644, 0o100755, 0o120000, 0o160000,
	// or 0o040000 for a sparse directory).
	Mode uint32
	// OID is the entry's object id (a slice of the parsed file).
	OID []byte
	// Flags are the entry's flags (stage, assume-valid, name length).
	Flags uint16
	// Extended are the entry's extended flags (skip-worktree,
	// intent-to-add), zero unless Flags has the extended bit.
	Extended uint16
}

// Extension is one extension of the index.
type Extension struct {
	// Sig is the extension's four-byte name ("TREE", "UNTR", ...).
	Sig string
	// Data is what follows its size (a slice of the parsed file).
	Data []byte
}

const (
	flagExtended = 0x4000
	nameMask     = 0x0fff
	// extendedKnown are the extended flags git reads (skip-worktree,
	// intent-to-add); git refuses an entry with any other.
	extendedKnown = 0x6000
)

// Parse parses index b whose object ids are hashSize bytes long (20:
// SHA-1, 32: SHA-256). The file must end with the hash of what comes
// before it, or with zeros (index.skipHash).
func Parse(b []byte, hashSize int) (*Index, error) {
	p, err := parse(b, hashSize)
	if err != nil {
		return nil, err
	}
	return p.ix, nil
}

func parse(b []byte, hashSize int) (*parser, error) {
	if hashSize != sha1.Size && hashSize != sha256.Size {
		return nil, fmt.Errorf("hash size %d", hashSize)
	}
	if len(b) < 12+hashSize || string(b[:4]) != "DIRC" {
		return nil, errors.New("not an index")
	}
	if err := CheckTrailer(b, hashSize); err != nil {
		return nil, err
	}
	body := b[:len(b)-hashSize]
	p := &parser{b: body, hsz: hashSize, ix: &Index{Version: binary.BigEndian.Uint32(b[4:]), hsz: hashSize}}
	if v := p.ix.Version; v < 2 || v > 4 {
		return nil, fmt.Errorf("index version %d", v)
	}
	n := binary.BigEndian.Uint32(b[8:])
	if uint64(n)*uint64(40+hashSize+2) > uint64(len(body)) {
		return nil, fmt.Errorf("too short for %d entries", n)
	}
	p.ix.Entries = make([]Entry, 0, n)
	p.offsets = make([]int, 0, n)
	pos := 12
	for range n {
		next, err := p.entry(pos)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", len(p.ix.Entries), err)
		}
		pos = next
	}
	p.extStart = pos
	if err := p.extensions(pos); err != nil {
		return nil, err
	}
	if err := p.checkCacheTree(); err != nil {
		return nil, fmt.Errorf("extension \"TREE\": %w", err)
	}
	return p, nil
}

// parser is the state of one Parse.
type parser struct {
	b        []byte // the file without its checksum
	hsz      int
	ix       *Index
	offsets  []int // where each entry starts
	strips   []int // v4: how much of the previous name each entry strips
	extStart int   // where the extensions start
}

var errShort = errors.New("the index ends early")

// entry parses the entry at pos (read-cache.c create_from_disk) and
// returns where the next one starts.
func (p *parser) entry(pos int) (int, error) {
	b, hsz := p.b, p.hsz
	fixed := 40 + hsz + 2
	if pos+fixed > len(b) {
		return 0, errShort
	}
	e := Entry{Mode: binary.BigEndian.Uint32(b[pos+24:]), OID: b[pos+40 : pos+40+hsz : pos+40+hsz],
		Flags: binary.BigEndian.Uint16(b[pos+40+hsz:])}
	q := pos + fixed
	if e.Flags&flagExtended != 0 {
		if p.ix.Version < 3 {
			return 0, errors.New("an extended entry in a version 2 index")
		}
		if q+2 > len(b) {
			return 0, errShort
		}
		e.Extended = binary.BigEndian.Uint16(b[q:])
		if e.Extended&^extendedKnown != 0 {
			return 0, fmt.Errorf("unknown extended flags %#x", e.Extended)
		}
		q += 2
	}
	var next int
	var err error
	if p.ix.Version == 4 {
		e.Name, next, err = p.compressedName(q, int(e.Flags&nameMask))
	} else {
		e.Name, next, err = p.paddedName(pos, q, int(e.Flags&nameMask))
	}
	if err != nil {
		return 0, err
	}
	p.ix.Entries = append(p.ix.Entries, e)
	p.offsets = append(p.offsets, pos)
	return next, nil
}

// paddedName reads a version 2 or 3 name at q: its length is in the
// flags (all of it: git copies that many bytes), unless it is 0xfff or
// longer, then it ends at a NUL; NULs pad the entry to a multiple of 8.
func (p *parser) paddedName(pos, q, n int) (string, int, error) {
	end := bytes.IndexByte(p.b[q:], 0)
	if end < 0 {
		return "", 0, errShort
	}
	if n < nameMask && end != n || n == nameMask && end < nameMask {
		return "", 0, fmt.Errorf("a name %d bytes long whose flags say %d", end, n)
	}
	next := pos + ((q - pos + end + 8) &^ 7)
	if next > len(p.b) {
		return "", 0, errShort
	}
	return string(p.b[q : q+end]), next, nil
}

// compressedName reads a version 4 name at q: git's varint of how many
// bytes to strip from the end of the previous name, then the rest of
// the name up to a NUL. The length in the flags is the whole name's.
func (p *parser) compressedName(q, n int) (string, int, error) {
	prev := ""
	if k := len(p.ix.Entries); k > 0 {
		prev = p.ix.Entries[k-1].Name
	}
	strip, k := Varint(p.b[q:])
	if k <= 0 || strip > uint64(len(prev)) {
		return "", 0, errors.New("bad prefix compression")
	}
	q += k
	end := bytes.IndexByte(p.b[q:], 0)
	if end < 0 {
		return "", 0, errShort
	}
	name := prev[:len(prev)-int(strip)] + string(p.b[q:q+end])
	if n < nameMask && len(name) != n || n == nameMask && len(name) < nameMask {
		return "", 0, fmt.Errorf("a name %d bytes long whose flags say %d", len(name), n)
	}
	p.strips = append(p.strips, int(strip))
	return name, q + end + 1, nil
}

// Varint decodes git's varint (varint.c: big-endian groups of 7 bits,
// each continuation adding one) at the start of b, and returns it and
// the bytes it took; k <= 0 when b ends early or it overflows.
func Varint(b []byte) (v uint64, k int) {
	for i, c := range b {
		if i > 0 {
			v++
			if v == 0 || v>>57 != 0 {
				return 0, -1
			}
			v <<= 7
		}
		v += uint64(c & 127)
		if c&128 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// CheckTrailer checks that b ends with the hash (hashSize bytes: SHA-1
// or SHA-256) of what comes before it, or with zeros, which git writes
// with index.skipHash.
func CheckTrailer(b []byte, hashSize int) error {
	if len(b) < hashSize {
		return errors.New("too short for its checksum")
	}
	body, sum := b[:len(b)-hashSize], b[len(b)-hashSize:]
	if !bytes.Equal(sum, make([]byte, hashSize)) && !bytes.Equal(Sum(hashSize, body), sum) {
		return errors.New("its checksum does not match")
	}
	return nil
}

// NewHash returns the hash whose sums are hashSize bytes long: SHA-256
// for 32, else SHA-1.
func NewHash(hashSize int) hash.Hash {
	if hashSize == sha256.Size {
		return sha256.New()
	}
	return sha1.New()
}

// Sum returns the hashSize-byte hash of b (see [NewHash]).
func Sum(hashSize int, b []byte) []byte {
	h := NewHash(hashSize)
	h.Write(b)
	return h.Sum(nil)
}
