package gitindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// statSize is the size of git's on-disk stat data (ctime, mtime, dev,
// ino, uid, gid, size: nine 32-bit fields).
const statSize = 36

// untracked parses UNTR (dir.c read_untracked_extension): an ident,
// the stat data and object ids of info/exclude and core.excludesFile,
// flags, the per-directory exclude file name; then the directories
// (each with its untracked files and subdirectories), and three bitmaps
// over the directories saying which have stat data and an exclude
// file's object id, which follow. Git ignores a cache that does not
// parse; here it does not parse.
func (p *parser) untracked(b []byte) error {
	if len(b) <= 1 || b[len(b)-1] != 0 {
		return errors.New("does not end with a NUL")
	}
	end := len(b) - 1
	identLen, k := Varint(b)
	if k <= 0 || identLen > uint64(end-k) {
		return errShort
	}
	next := k + int(identLen)
	exclOff := 2*statSize + 4 + 2*p.hsz
	if next+exclOff+1 > end {
		return errShort
	}
	excl, _, _ := bytes.Cut(b[next+exclOff:], []byte{0})
	p.ix.ExcludePerDir = string(excl)
	next += exclOff + len(excl) + 1
	if next >= end {
		if next != end {
			return errShort
		}
		return nil
	}
	dirs, k := Varint(b[next:end])
	if k <= 0 || dirs == 0 || dirs > uint64(end-next) {
		return fmt.Errorf("%d directories", dirs)
	}
	next += k
	next, err := p.untrackedDirs(b[:end], next, int(dirs))
	if err != nil {
		return err
	}
	// valid, check_only, sha1_valid; then the stat data of each valid
	// directory and the object id of each sha1_valid one.
	var bms [3]ewah
	for i := range bms {
		if bms[i], err = readEWAH(b[next:end]); err != nil {
			return err
		}
		next += bms[i].size
	}
	need := 0
	for i, size := range []int{statSize, 0, p.hsz} {
		if err := bms[i].each(int(dirs), func(int) { need += size }); err != nil {
			return err
		}
	}
	if end-next != need {
		return errors.New("the directories' data is not what the bitmaps say")
	}
	return nil
}

// untrackedDirs reads n directories from b at next (dir.c
// read_one_dir, depth first): the counts of untracked names and of
// subdirectories (git's varints), the directory's name and the
// untracked names, each NUL-terminated. It returns where they end.
func (p *parser) untrackedDirs(b []byte, next, n int) (int, error) {
	type dir struct {
		path string
		left int
	}
	var stack []dir
	for i := 0; i < n; i++ {
		files, k := Varint(b[next:])
		if k <= 0 {
			return 0, errShort
		}
		next += k
		subs, k := Varint(b[next:])
		if k <= 0 || files > uint64(len(b)-next) || subs > uint64(n) {
			return 0, errShort
		}
		next += k
		name, err := cString(b, &next)
		if err != nil {
			return 0, err
		}
		if (i == 0) != (name == "") || bytes.IndexByte([]byte(name), '/') >= 0 {
			return 0, fmt.Errorf("a directory named %q", name)
		}
		path := name
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			top.left--
			path = join(top.path, name)
			p.ix.Untracked = append(p.ix.Untracked, path+"/")
		} else if i > 0 {
			return 0, errors.New("more directories than the tree holds")
		}
		for range files {
			f, err := cString(b, &next)
			if err != nil {
				return 0, err
			}
			p.ix.Untracked = append(p.ix.Untracked, join(path, f))
		}
		stack = append(stack, dir{path: path, left: int(subs)})
		for len(stack) > 0 && stack[len(stack)-1].left == 0 {
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return 0, errors.New("fewer directories than the tree holds")
	}
	return next, nil
}

// cString reads a NUL-terminated string of b at *next.
func cString(b []byte, next *int) (string, error) {
	s, _, ok := bytes.Cut(b[*next:], []byte{0})
	if !ok {
		return "", errShort
	}
	*next += len(s) + 1
	return string(s), nil
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// endOfEntries checks EOIE (read-cache.c read_eoie_extension), which
// git's threaded loader uses to find the extensions: it is the last
// extension, its offset is where the entries end, and its hash is that
// of the names and sizes of the extensions before it.
func (p *parser) endOfEntries(b []byte, pos int) error {
	if len(b) != 4+p.hsz {
		return fmt.Errorf("%d bytes", len(b))
	}
	if pos+8+len(b) != len(p.b) {
		return errors.New("not the last extension")
	}
	if int64(binary.BigEndian.Uint32(b)) != int64(p.extStart) {
		return errors.New("an offset that is not where the entries end")
	}
	h := NewHash(p.hsz)
	for _, x := range p.ix.Extensions[:len(p.ix.Extensions)-1] {
		h.Write([]byte(x.Sig))
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(x.Data))))
	}
	if !bytes.Equal(h.Sum(nil), b[4:]) {
		return errors.New("a hash that is not the extensions'")
	}
	return nil
}

// offsetTable checks IEOT (read-cache.c read_ieot_extension), the
// blocks of entries git's threaded loader reads in parallel: each
// block's offset must be where its first entry starts (the entries
// before it in order, every entry in one block), and in a version 4
// index a block's first entry must not share a prefix with the entry
// before it (the threaded loader reads it without one).
func (p *parser) offsetTable() error {
	for _, x := range p.ix.Extensions {
		if x.Sig != "IEOT" {
			continue
		}
		b := x.Data
		if len(b) < 12 || (len(b)-4)%8 != 0 || binary.BigEndian.Uint32(b) != 1 {
			return errors.New(`extension "IEOT": not version 1 with at least one block`)
		}
		k := 0
		for b = b[4:]; len(b) > 0; b = b[8:] {
			off, n := int64(binary.BigEndian.Uint32(b)), int(binary.BigEndian.Uint32(b[4:]))
			switch {
			case n == 0 || k+n > len(p.offsets) || n < 0:
				return fmt.Errorf(`extension "IEOT": a block of %d entries after %d of %d`, n, k, len(p.offsets))
			case off != int64(p.offsets[k]):
				return fmt.Errorf(`extension "IEOT": block at entry %d has offset %d, not %d`, k, off, p.offsets[k])
			case p.ix.Version == 4 && k > 0 && p.strips[k] != len(p.ix.Entries[k-1].Name):
				return fmt.Errorf(`extension "IEOT": block at entry %d shares a prefix with the entry before`, k)
			}
			k += n
		}
		if k != len(p.offsets) {
			return fmt.Errorf(`extension "IEOT": blocks of %d entries, not %d`, k, len(p.offsets))
		}
	}
	return nil
}
