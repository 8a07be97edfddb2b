package gitindex

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// Strip returns index b without the extensions named in drop, and then
// without EOIE and IEOT too (their offsets and their hash of the
// extensions would no longer hold; git reads an index without them
// serially), with its checksum made anew (zeros stay zeros:
// index.skipHash). ok is false, and b is not copied, when b does not
// parse or holds none of them. The caches git rebuilds on its own (the
// untracked cache, fsmonitor's token and bitmap) can be dropped so:
// an index without them is read as the same entries.
func Strip(b []byte, hashSize int, drop ...string) (out []byte, ok bool) {
	p, err := parse(b, hashSize)
	if err != nil || !slices.ContainsFunc(p.ix.Extensions, func(x Extension) bool { return slices.Contains(drop, x.Sig) }) {
		return nil, false
	}
	out = append(make([]byte, 0, len(b)), p.b[:p.extStart]...)
	for pos := p.extStart; pos < len(p.b); {
		sig, size := string(p.b[pos:pos+4]), int(binary.BigEndian.Uint32(p.b[pos+4:]))
		if !slices.Contains(drop, sig) && sig != "EOIE" && sig != "IEOT" {
			out = append(out, p.b[pos:pos+8+size]...)
		}
		pos += 8 + size
	}
	if sum := b[len(b)-hashSize:]; bytes.Equal(sum, make([]byte, hashSize)) {
		return append(out, sum...), true
	}
	return append(out, Sum(hashSize, out)...), true
}
