//go:build linux

package gitpolicy

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

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
		return k.file(e, Object, maxDataFile, looseObject)
	case r == "objects/info/commit-graph" || r == "objects/pack/multi-pack-index" ||
		(len(e.parts) == 4 && e.parts[2] == "commit-graphs" && strings.HasSuffix(e.name, ".graph")):
		return k.file(e, Object, maxDataFile, checksummed)
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
// whose hash is the object's name.
func looseObject(k *checker, e entry, b []byte) string {
	want := e.parts[1] + e.parts[2]
	hsz := k.hashSize(e.g)
	if len(want) != 2*hsz {
		return "an object name of the wrong length"
	}
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return "an object that does not inflate"
	}
	defer zr.Close()
	data, err := io.ReadAll(io.LimitReader(zr, maxDataFile+1))
	if err != nil || len(data) > maxDataFile {
		return "an object that does not inflate (or too large)"
	}
	hdr, body, ok := bytes.Cut(data, []byte{0})
	typ, size, _ := strings.Cut(string(hdr), " ")
	n, err := strconv.Atoi(size)
	switch {
	case !ok || err != nil || n != len(body):
		return "an object whose header is not git's"
	case typ != "blob" && typ != "tree" && typ != "commit" && typ != "tag":
		return "an object of type " + quote(typ)
	case hex.EncodeToString(hashOf(hsz, data)) != want:
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
		return k.file(e, Object, maxDataFile, checksummed)
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
		return k.file(e, Object, maxDataFile, checksummed)
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
	idx, why := k.readLimit(stem+".idx", maxDataFile)
	if why != "" {
		return "a pack index " + why
	}
	pack, why := k.readLimit(stem+".pack", maxDataFile)
	if why != "" {
		return "a pack " + why
	}
	n, packSum, err := parseIdx(idx, hsz)
	if err != nil {
		return "a pack index that does not verify: " + err.Error()
	}
	if len(pack) < 12+hsz || string(pack[:4]) != "PACK" {
		return "a pack that is not one"
	}
	if v := binary.BigEndian.Uint32(pack[4:]); v != 2 && v != 3 {
		return "a pack of version " + strconv.Itoa(int(v))
	}
	switch {
	case binary.BigEndian.Uint32(pack[8:]) != n:
		return "a pack whose object count is not its index's"
	case checkTrailer(pack, hsz) != nil || bytes.Equal(pack[len(pack)-hsz:], make([]byte, hsz)):
		return "a pack whose checksum does not match"
	case !bytes.Equal(pack[len(pack)-hsz:], packSum):
		return "a pack whose checksum is not the one its index names"
	}
	return ""
}

// parseIdx checks a version 2 pack index (its signature, fan-out and
// checksum) and returns its object count and the pack's checksum.
func parseIdx(b []byte, hsz int) (uint32, []byte, error) {
	if len(b) < 8+256*4+2*hsz || string(b[:4]) != "\xfftOc" || binary.BigEndian.Uint32(b[4:]) != 2 {
		return 0, nil, errors.New("not a version 2 pack index")
	}
	if err := checkTrailer(b, hsz); err != nil || bytes.Equal(b[len(b)-hsz:], make([]byte, hsz)) {
		return 0, nil, errors.New("its checksum does not match")
	}
	n := binary.BigEndian.Uint32(b[8+255*4:])
	min := 8 + 256*4 + int(n)*(hsz+8) + 2*hsz
	if int64(n)*int64(hsz+8) > int64(len(b)) || len(b) < min {
		return 0, nil, fmt.Errorf("too short for %d objects", n)
	}
	return n, b[len(b)-2*hsz : len(b)-hsz], nil
}

// checksummed checks a file that git ends with the hash of its content
// (commit-graph, multi-pack-index, .rev, .bitmap, .mtimes).
func checksummed(k *checker, e entry, b []byte) string {
	hsz := k.hashSize(e.g)
	if len(b) < 4+hsz || bytes.Equal(b[len(b)-hsz:], make([]byte, hsz)) || checkTrailer(b, hsz) != nil {
		return "a file whose checksum does not match"
	}
	switch string(b[:4]) {
	case "CGPH", "MIDX", "RIDX", "BITM", "MTME":
		return ""
	}
	return "a file git does not write"
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
