package gitindex

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The cache tree's valid nodes are trusted by git: git commit writes a
// valid node's object id as the tree of its directory without looking
// at the entries. A node that is valid must therefore name the tree its
// entries make, or the user's next commit records a tree nobody saw in
// the index (git diff --cached shows the entries). Parse recomputes
// every valid node's tree from the entries as cache-tree.c update_one
// builds it, and refuses an index whose valid nodes say otherwise.

// treeNode is a valid node of the cache tree.
type treeNode struct {
	path  string // the directory, relative to the top ("" is the top)
	count int64  // the entries below it
	oid   []byte
}

// computed is a directory's tree as its entries make it.
type computed struct {
	oid   []byte
	count int
	ok    bool // false: git makes no tree of it (an unmerged or intent-to-add entry)
}

const (
	stageMask     = 0x3000
	intentToAdd   = 0x2000 // in Entry.Extended
	modeTree      = 0o040000
	treeModeBytes = "40000"
)

// checkCacheTree checks the cache tree's valid nodes against the
// entries. A split index's entries are only those that differ from its
// shared index: its cache tree is checked by [Index.CheckSplit].
func (p *parser) checkCacheTree() error {
	if len(p.ix.trees) == 0 || p.ix.Shared != "" {
		return nil
	}
	return checkTrees(p.ix.Entries, p.hsz, p.ix.trees)
}

// checkTrees checks the valid cache-tree nodes against entries.
func checkTrees(entries []Entry, hsz int, nodes []treeNode) error {
	trees := map[string]computed{}
	buildTree(entries, hsz, "", 0, len(entries), trees)
	for _, n := range nodes {
		c, found := trees[n.path]
		switch {
		case !found || !c.ok:
			return fmt.Errorf("the cache tree calls %q valid, but its entries make no tree", n.path)
		case int64(c.count) != n.count:
			return fmt.Errorf("the cache tree counts %d entries in %q, the index has %d", n.count, n.path, c.count)
		case !bytes.Equal(c.oid, n.oid):
			return fmt.Errorf("the cache tree's tree of %q is not the one its entries make", n.path)
		}
	}
	return nil
}

// buildTree computes the tree of entries lo to hi, all below prefix
// ("" or "dir/"), records it and each directory's below it in trees,
// and returns it.
func buildTree(entries []Entry, hsz int, prefix string, lo, hi int, trees map[string]computed) computed {
	var body bytes.Buffer
	c := computed{count: hi - lo, ok: true}
	for i := lo; i < hi; {
		e := entries[i]
		rel := e.Name[len(prefix):]
		name, mode := rel, strconv.FormatUint(uint64(e.Mode), 8)
		if k := strings.IndexByte(rel, '/'); k >= 0 {
			if k == len(rel)-1 && e.Mode == modeTree {
				// A sparse directory: its entry names its tree, and
				// git keeps a cache-tree node of it (one entry).
				name, mode = rel[:k], treeModeBytes
				trees[prefix+name] = computed{oid: e.OID, count: 1, ok: true}
			} else {
				sub := prefix + rel[:k+1]
				j := i + 1
				for j < hi && strings.HasPrefix(entries[j].Name, sub) {
					j++
				}
				t := buildTree(entries, hsz, sub, i, j, trees)
				c.ok = c.ok && t.ok
				writeTreeEntry(&body, treeModeBytes, rel[:k], t.oid)
				i = j
				continue
			}
		}
		i++
		if e.Flags&stageMask != 0 || e.Extended&intentToAdd != 0 {
			c.ok = false
			continue
		}
		writeTreeEntry(&body, mode, name, e.OID)
	}
	h := NewHash(hsz)
	fmt.Fprintf(h, "tree %d\x00", body.Len())
	h.Write(body.Bytes())
	c.oid = h.Sum(nil)
	trees[strings.TrimSuffix(prefix, "/")] = c
	return c
}

// CheckSplit checks the cache tree of the split index ix against its
// entries merged with those of its shared index (the sharedindex file
// [Index.Shared] names, parsed), as git merges them (split-index.c
// merge_base_index): the shared entries the link's delete bitmap marks
// are removed, those its replace bitmap marks are replaced, in order,
// by ix's first entries (which have no name), and ix's other entries
// are added in order of name and stage.
func (ix *Index) CheckSplit(shared *Index) error {
	if ix.Shared == "" || len(ix.trees) == 0 {
		return nil
	}
	merged, err := ix.merge(shared)
	if err != nil {
		return fmt.Errorf("the split index: %w", err)
	}
	if err := checkTrees(merged, ix.hsz, ix.trees); err != nil {
		return fmt.Errorf("extension \"TREE\": %w", err)
	}
	return nil
}

// merge returns ix's entries merged with shared's (see CheckSplit).
func (ix *Index) merge(shared *Index) ([]Entry, error) {
	base := slices.Clone(shared.Entries)
	gone := make([]bool, len(base))
	n := 0
	var bad error
	if err := ix.replaced.each(len(base), func(pos int) {
		switch {
		case n >= len(ix.Entries):
			bad = errors.New("more replaced entries than entries")
		case ix.Entries[n].Name != "":
			bad = fmt.Errorf("replacing entry %d has a name", n)
		default:
			e := ix.Entries[n]
			e.Name = base[pos].Name
			base[pos] = e
			n++
		}
	}); err != nil {
		return nil, err
	}
	if err := ix.deleted.each(len(base), func(pos int) { gone[pos] = true }); err != nil {
		return nil, err
	}
	if bad != nil {
		return nil, bad
	}
	var out []Entry
	for i, e := range base {
		if !gone[i] {
			out = append(out, e)
		}
	}
	for _, e := range ix.Entries[n:] {
		if e.Name == "" {
			return nil, errors.New("an added entry without a name")
		}
		i, found := slices.BinarySearchFunc(out, e, compareEntries)
		if found {
			out[i] = e
		} else {
			out = slices.Insert(out, i, e)
		}
	}
	return out, nil
}

// compareEntries orders entries as the index does: by name, then
// stage.
func compareEntries(a, b Entry) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return cmp.Compare(a.Flags&stageMask, b.Flags&stageMask)
}

func writeTreeEntry(b *bytes.Buffer, mode, name string, oid []byte) {
	b.WriteString(mode)
	b.WriteByte(' ')
	b.WriteString(name)
	b.WriteByte(0)
	b.Write(oid)
}
