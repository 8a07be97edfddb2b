//go:build linux

package gitpolicy

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"syscall"

	"github.com/bashvisor/bashvisor/internal/gitindex"
	"github.com/bashvisor/bashvisor/internal/layer"
)

// objectsEntry judges objects/: loose objects whose content hashes to
// their name, packs whose index and pack checksums verify, and git's
// other files there (commit-graph, multi-pack-index, reverse indexes,
// bitmaps) by their checksums; alternates are refused.
func (k *checker) objectsEntry(e entry) verdict {
	r := strings.TrimSuffix(e.r, ".lock")
	switch {
	case r == "objects/info/alternates" || r == "objects/info/http-alternates":
		return refuse(Alternates, "an alternates file")
	case len(e.parts) == 1:
		return structural(e, "a repository's objects directory")
	case e.kind == layer.Deleted:
		return allowed // git gc and git prune remove objects
	case e.dir:
		return k.objectsDir(e)
	case len(e.parts) == 3 && len(e.parts[1]) == 2 && isHex(e.parts[1]) && isHex(e.parts[2]):
		return k.looseObject(e)
	case r == "objects/info/commit-graph" || r == "objects/pack/multi-pack-index" ||
		(len(e.parts) == 4 && e.parts[2] == "commit-graphs" && strings.HasSuffix(e.name, ".graph")):
		return k.checksummed(e)
	case len(e.parts) == 3 && e.parts[1] == "pack":
		return k.packFile(e)
	case r == "objects/info/packs":
		return k.file(e, Object, maxCheckedFile, anyText)
	case len(e.parts) == 4 && e.parts[2] == "commit-graphs" && e.name == "commit-graph-chain":
		return k.file(e, Object, maxCheckedFile, oidLines)
	}
	return refuse(Object, "a file git does not write in objects/")
}

// objectsDir allows the directories git makes below objects/.
func (k *checker) objectsDir(e entry) verdict {
	switch {
	case len(e.parts) == 2 && (len(e.parts[1]) == 2 && isHex(e.parts[1]) || e.parts[1] == "pack" || e.parts[1] == "info"):
		return allowed
	case len(e.parts) == 3 && e.parts[1] == "info" && e.parts[2] == "commit-graphs":
		return allowed
	}
	return refuse(Object, "a directory git does not make in objects/")
}

// looseObject checks a loose object: zlib, "type size\0" and content
// whose hash is the object's name, inflated through the hash (content
// up to maxDataFile bytes).
func (k *checker) looseObject(e entry) verdict {
	if v, done := notAFile(e); done {
		return v
	}
	if why := k.inflateObject(e); why != "" {
		return refuse(Object, why)
	}
	return allowed
}

func (k *checker) inflateObject(e entry) string {
	want := e.parts[1] + e.parts[2]
	hsz := k.hashSize(e.g)
	if len(want) != 2*hsz {
		return "an object name of the wrong length"
	}
	f, err := k.v.Open(e.path, true)
	if err != nil {
		return "an object unreadable: " + err.Error()
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		return "an object that does not inflate"
	}
	defer zr.Close()
	br := bufio.NewReader(zr)
	hdr, err := br.ReadSlice(0)
	if err != nil {
		return "an object whose header is not git's"
	}
	typ, size, _ := strings.Cut(string(hdr[:len(hdr)-1]), " ")
	n, err := strconv.ParseInt(size, 10, 64)
	switch {
	case err != nil || n < 0 || size != strconv.FormatInt(n, 10):
		return "an object whose header is not git's"
	case n > maxDataFile:
		return "an object too large to check"
	case typ != "blob" && typ != "tree" && typ != "commit" && typ != "tag":
		return "an object of type " + quote(typ)
	}
	h := gitindex.NewHash(hsz)
	h.Write(hdr)
	got, err := io.Copy(h, io.LimitReader(br, n+1))
	switch {
	case err != nil:
		return "an object that does not inflate"
	case got != n:
		return "an object whose header is not git's"
	case hex.EncodeToString(h.Sum(nil)) != want:
		return "an object whose content does not hash to its name"
	}
	return ""
}

// packFile judges a file of objects/pack: a pack and its index are
// checked together, as git verify-pack does for their checksums: the
// index's own checksum, the pack's trailer, the index's copy of it and
// the object counts.
func (k *checker) packFile(e entry) verdict {
	base, ext, _ := strings.Cut(e.name, ".")
	if h, ok := strings.CutPrefix(base, "multi-pack-index-"); ok && isHex(h) && (ext == "bitmap" || ext == "rev") {
		return k.checksummed(e)
	}
	switch {
	case !strings.HasPrefix(base, "pack-") || !isHex(base[5:]):
		return refuse(Object, "a file git does not write in objects/pack/")
	case ext == "pack" || ext == "idx":
		stem := dirName(e.path) + "/" + base
		if why := k.verifyPack(e, stem); why != "" {
			return refuse(Object, why)
		}
		return allowed
	case ext == "keep" || ext == "promisor":
		return k.file(e, Object, maxCheckedFile, anyText)
	case ext == "rev" || ext == "bitmap" || ext == "mtimes":
		return k.checksummed(e)
	}
	return refuse(Object, "a file git does not write in objects/pack/")
}

// verifyPack checks the pack stem.pack against its index stem.idx.
func (k *checker) verifyPack(e entry, stem string) string {
	if why, ok := k.packs[stem]; ok {
		return why
	}
	why := k.verifyPackFiles(e, stem)
	k.packs[stem] = why
	return why
}

func (k *checker) verifyPackFiles(e entry, stem string) string {
	hsz := k.hashSize(e.g)
	idx, why := k.stream(stem+".idx", hsz, 8+256*4, 2*hsz)
	if why != "" {
		return "a pack index " + why
	}
	n, why := checkIdx(idx, hsz)
	if why != "" {
		return "a pack index that does not verify: " + why
	}
	pack, why := k.stream(stem+".pack", hsz, 12, hsz)
	if why != "" {
		return "a pack " + why
	}
	switch {
	case string(pack.head[:4]) != "PACK":
		return "a pack that is not one"
	case binary.BigEndian.Uint32(pack.head[4:]) != 2 && binary.BigEndian.Uint32(pack.head[4:]) != 3:
		return "a pack of version " + strconv.Itoa(int(binary.BigEndian.Uint32(pack.head[4:])))
	case binary.BigEndian.Uint32(pack.head[8:]) != n:
		return "a pack whose object count is not its index's"
	case !pack.summed:
		return "a pack whose checksum does not match"
	case !bytes.Equal(pack.tail, idx.tail[:hsz]):
		return "a pack whose checksum is not the one its index names"
	}
	return ""
}

// checkIdx checks a version 2 pack index (its signature, fan-out, size
// and checksum) and returns its object count.
func checkIdx(s streamed, hsz int) (uint32, string) {
	b := s.head
	if string(b[:4]) != "\xfftOc" || binary.BigEndian.Uint32(b[4:]) != 2 {
		return 0, "not a version 2 pack index"
	}
	prev := uint32(0)
	for i := range 256 {
		v := binary.BigEndian.Uint32(b[8+4*i:])
		if v < prev {
			return 0, "a fan-out that decreases"
		}
		prev = v
	}
	n := int64(prev)
	// Per object: its id, CRC and offset; then up to n-1 large offsets
	// (git's check_packed_git_idx), the pack's checksum and its own.
	min := int64(8+256*4) + n*int64(hsz+8) + int64(2*hsz)
	switch {
	case s.size < min || s.size > min+max(n-1, 0)*8:
		return 0, fmt.Sprintf("%d bytes, not what %d objects take", s.size, n)
	case !s.summed:
		return 0, "its checksum does not match"
	}
	return uint32(n), ""
}

// streamed is what stream read of a file.
type streamed struct {
	head, tail []byte // its first and last bytes
	size       int64
	// summed: it ends with the hash of what comes before it (not with
	// zeros).
	summed bool
}

// stream reads the file p after the command once, in constant memory:
// its first head and last tail bytes (at least hsz), its size, and
// whether it ends with the hsz-byte hash of what comes before.
func (k *checker) stream(p string, hsz, head, tail int) (streamed, string) {
	f, err := k.v.Open(p, true)
	if err != nil {
		return streamed{}, "unreadable: " + err.Error()
	}
	defer f.Close()
	if sparse(f) {
		return streamed{}, "with holes (git writes none): its size is not data"
	}
	w := &trailing{h: gitindex.NewHash(hsz), keep: max(tail, hsz)}
	r := io.TeeReader(f, w)
	s := streamed{head: make([]byte, head)}
	if _, err := io.ReadFull(r, s.head); err != nil {
		return s, "too short"
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return s, "unreadable: " + err.Error()
	}
	if len(w.tail) < w.keep || w.n < int64(head+hsz) {
		return s, "too short"
	}
	end := len(w.tail) - hsz
	w.h.Write(w.tail[:end])
	sum := w.tail[end:]
	s.summed = !bytes.Equal(sum, make([]byte, hsz)) && bytes.Equal(w.h.Sum(nil), sum)
	s.tail, s.size = w.tail[len(w.tail)-tail:], w.n
	return s, ""
}

// sparse reports whether f (an open file) has more than 1 MiB fewer
// bytes allocated than its size: a hole costs its maker nothing, but
// reading it through a hash costs the engine as much as data.
func sparse(f io.Reader) bool {
	s, ok := f.(interface{ Stat() (fs.FileInfo, error) })
	if !ok {
		return false
	}
	fi, err := s.Stat()
	if err != nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Size() > st.Blocks*512+1<<20
}

// trailing hashes what is written to it but its last keep bytes, which
// it keeps (in tail) for its reader to hash or not.
type trailing struct {
	h    hash.Hash
	keep int
	tail []byte
	n    int64
}

func (t *trailing) Write(p []byte) (int, error) {
	t.n += int64(len(p))
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - t.keep; over > 0 {
		t.h.Write(t.tail[:over])
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	return len(p), nil
}

// checksummed checks a file that git ends with the hash of its content
// (commit-graph, multi-pack-index, .rev, .bitmap, .mtimes), read
// through its hash whatever its size.
func (k *checker) checksummed(e entry) verdict {
	if v, done := notAFile(e); done {
		return v
	}
	s, why := k.stream(e.path, k.hashSize(e.g), 4, 0)
	switch {
	case why != "":
		return refuse(Object, "a file "+why)
	case !s.summed:
		return refuse(Object, "a file whose checksum does not match")
	}
	switch string(s.head) {
	case "CGPH", "MIDX", "RIDX", "BITM", "MTME":
		return allowed
	}
	return refuse(Object, "a file git does not write")
}

// hashSize returns the size of the object ids of the git directory g:
// 32 when its config (or its common directory's) sets
// extensions.objectFormat = sha256, else 20.
func (k *checker) hashSize(g gitDir) int {
	if n, ok := k.hashSizes[g.path]; ok {
		return n
	}
	n := 20
	cfg := g.path + "/config"
	if b, why := k.read(g.path + "/commondir"); why == "" {
		if d := strings.TrimSpace(string(b)); strings.HasPrefix(d, "/") {
			cfg = d + "/config"
		} else {
			cfg = g.path + "/" + d + "/config"
		}
	}
	if b, why := k.read(cfg); why == "" {
		entries, _ := parseConfig(b)
		for _, e := range entries {
			if e.Section == "extensions" && e.Sub == "" && e.Key == "objectformat" && strings.EqualFold(e.Value, "sha256") {
				n = 32
			}
		}
	}
	k.hashSizes[g.path] = n
	return n
}
