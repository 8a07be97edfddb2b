package gitindex

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// extensions parses the extensions from pos to the end of the body
// (read-cache.c read_index_extension): each known one must parse as
// git reads it, an unknown one must be optional (its name starts with
// A to Z; git stops at any other), EOIE must be last.
func (p *parser) extensions(pos int) error {
	b := p.b
	for pos < len(b) {
		if pos+8 > len(b) {
			return errShort
		}
		sig, size := string(b[pos:pos+4]), binary.BigEndian.Uint32(b[pos+4:])
		if uint64(size) > uint64(len(b)-pos-8) {
			return fmt.Errorf("extension %q: %w", sig, errShort)
		}
		data := b[pos+8 : pos+8+int(size)]
		p.ix.Extensions = append(p.ix.Extensions, Extension{Sig: sig, Data: data})
		if err := p.extension(sig, data, pos); err != nil {
			return fmt.Errorf("extension %q: %w", sig, err)
		}
		pos += 8 + int(size)
	}
	return p.offsetTable()
}

// extension parses one extension, which starts at pos.
func (p *parser) extension(sig string, data []byte, pos int) error {
	switch sig {
	case "TREE":
		return p.cacheTree(data)
	case "REUC":
		return p.resolveUndo(data)
	case "link":
		return p.link(data)
	case "UNTR":
		return p.untracked(data)
	case "FSMN":
		return p.fsmonitor(data)
	case "EOIE":
		return p.endOfEntries(data, pos)
	case "IEOT":
		return nil // checked against the entries once all are read
	case "sdir":
		if len(data) != 0 {
			return errors.New("not empty")
		}
		return nil
	}
	if sig[0] < 'A' || sig[0] > 'Z' {
		return errors.New("a required extension git does not know")
	}
	return nil
}

// cacheTree parses TREE (cache-tree.c read_one): per directory, its
// name, NUL, its entry count ("-1" when invalid) and subtree count in
// decimal, and its tree's object id when valid; then its subtrees. The
// names of a directory's subtrees are single, distinct components.
func (p *parser) cacheTree(b []byte) error {
	type dir struct {
		path string
		left int // subtrees still to read
		seen map[string]bool
	}
	var stack []*dir
	for first := true; first || len(stack) > 0; first = false {
		name, rest, ok := bytes.Cut(b, []byte{0})
		if !ok {
			return errShort
		}
		path := string(name)
		if first != (path == "") || bytes.IndexByte(name, '/') >= 0 {
			return fmt.Errorf("a directory named %q", name)
		}
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			if top.seen[path] {
				return fmt.Errorf("directory %q twice", name)
			}
			top.seen[path] = true
			top.left--
			if top.path != "" {
				path = top.path + "/" + path
			}
		}
		count, rest, err := decimal(rest, ' ', true)
		if err != nil {
			return err
		}
		subs, rest, err := decimal(rest, '\n', false)
		if err != nil {
			return err
		}
		// A split index's cache tree counts the shared index's entries
		// too (git writes the link first).
		if count > int64(len(p.ix.Entries)) && p.ix.Shared == "" || subs > int64(len(rest)/4) {
			return fmt.Errorf("directory %q: %d entries, %d subtrees", path, count, subs)
		}
		if count >= 0 {
			if len(rest) < p.hsz {
				return errShort
			}
			p.ix.trees = append(p.ix.trees, treeNode{path: path, count: count, oid: rest[:p.hsz:p.hsz]})
			rest = rest[p.hsz:]
		}
		p.ix.Trees = append(p.ix.Trees, path)
		b = rest
		stack = append(stack, &dir{path: path, left: int(subs), seen: map[string]bool{}})
		for len(stack) > 0 && stack[len(stack)-1].left == 0 {
			stack = stack[:len(stack)-1]
		}
	}
	if len(b) != 0 {
		return errors.New("bytes after the cache tree")
	}
	return nil
}

// decimal reads a decimal number as git writes it ("%d": no sign but
// "-1" when negative is allowed, no leading zero) ending with term.
func decimal(b []byte, term byte, negative bool) (int64, []byte, error) {
	s, rest, ok := bytes.Cut(b, []byte{term})
	switch {
	case !ok:
		return 0, nil, errShort
	case negative && string(s) == "-1":
		return -1, rest, nil
	case len(s) == 0 || len(s) > 9 || len(s) > 1 && s[0] == '0':
		return 0, nil, fmt.Errorf("a count %q", s)
	}
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, nil, fmt.Errorf("a count %q", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n, rest, nil
}

// resolveUndo parses REUC (resolve-undo.c resolve_undo_read): per
// path, its name, three octal modes (NUL-terminated) and an object id
// per non-zero mode.
func (p *parser) resolveUndo(b []byte) error {
	for len(b) > 0 {
		var f [4][]byte
		for i := range f {
			var ok bool
			if f[i], b, ok = bytes.Cut(b, []byte{0}); !ok {
				return errShort
			}
		}
		for _, m := range f[1:] {
			mode, err := octal(m)
			if err != nil {
				return err
			}
			if mode == 0 {
				continue
			}
			if len(b) < p.hsz {
				return errShort
			}
			p.ix.Undo = append(p.ix.Undo, Entry{Name: string(f[0]), Mode: mode, OID: b[:p.hsz:p.hsz]})
			b = b[p.hsz:]
		}
	}
	return nil
}

func octal(s []byte) (uint32, error) {
	if len(s) == 0 || len(s) > 7 {
		return 0, fmt.Errorf("a mode %q", s)
	}
	var n uint32
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, fmt.Errorf("a mode %q", s)
		}
		n = n<<3 | uint32(c-'0')
	}
	return n, nil
}

// link parses the split index's link (split-index.c
// read_link_extension): the shared index's object id, then optionally
// the delete and replace bitmaps, nothing after them.
func (p *parser) link(b []byte) error {
	if len(b) < p.hsz {
		return errShort
	}
	p.ix.Shared = hex.EncodeToString(b[:p.hsz])
	b = b[p.hsz:]
	if len(b) == 0 {
		return nil
	}
	for i := range 2 {
		bm, err := readEWAH(b)
		if err != nil {
			return err
		}
		if i == 0 {
			p.ix.deleted = bm
		} else {
			p.ix.replaced = bm
		}
		b = b[bm.size:]
	}
	if len(b) != 0 {
		return errors.New("bytes after the bitmaps")
	}
	return nil
}

// fsmonitor parses FSMN (fsmonitor.c read_fsmonitor_extension): a
// version, the token (version 1: a 64-bit time; version 2: a string,
// which git passes to the fsmonitor hook or daemon: printable ASCII
// here), and the bitmap of the entries to check.
func (p *parser) fsmonitor(b []byte) error {
	if len(b) < 4 {
		return errShort
	}
	switch binary.BigEndian.Uint32(b) {
	case 1:
		if len(b) < 12 {
			return errShort
		}
		b = b[12:]
	case 2:
		token, rest, ok := bytes.Cut(b[4:], []byte{0})
		if !ok {
			return errShort
		}
		for _, c := range token {
			if c < ' ' || c > '~' {
				return fmt.Errorf("a token %q", token)
			}
		}
		b = rest
	default:
		return fmt.Errorf("version %d", binary.BigEndian.Uint32(b))
	}
	if len(b) < 4 {
		return errShort
	}
	size := binary.BigEndian.Uint32(b)
	b = b[4:]
	bm, err := readEWAH(b)
	if err != nil {
		return err
	}
	if uint64(bm.size) != uint64(size) || bm.size != len(b) {
		return errors.New("a bitmap whose size is not the one given")
	}
	if p.ix.Shared == "" && int64(bm.bits) > int64(len(p.ix.Entries)) {
		return fmt.Errorf("a bitmap of %d entries in an index of %d", bm.bits, len(p.ix.Entries))
	}
	return nil
}
