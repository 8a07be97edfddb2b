package gitindex

import (
	"bytes"
	"fmt"
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
// shared index: its cache tree is not checked here.
func (p *parser) checkCacheTree() error {
	if len(p.trees) == 0 || p.ix.Shared != "" {
		return nil
	}
	trees := map[string]computed{}
	p.buildTree("", 0, len(p.ix.Entries), trees)
	for _, n := range p.trees {
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

// buildTree computes the tree of the entries lo to hi, all below
// prefix ("" or "dir/"), records it and each directory's below it in
// trees, and returns it.
func (p *parser) buildTree(prefix string, lo, hi int, trees map[string]computed) computed {
	var body bytes.Buffer
	c := computed{count: hi - lo, ok: true}
	for i := lo; i < hi; {
		e := p.ix.Entries[i]
		rel := e.Name[len(prefix):]
		name, mode := rel, strconv.FormatUint(uint64(e.Mode), 8)
		if k := strings.IndexByte(rel, '/'); k >= 0 {
			if k == len(rel)-1 && e.Mode == modeTree {
				name, mode = rel[:k], treeModeBytes // a sparse directory
			} else {
				sub := prefix + rel[:k+1]
				j := i + 1
				for j < hi && strings.HasPrefix(p.ix.Entries[j].Name, sub) {
					j++
				}
				t := p.buildTree(sub, i, j, trees)
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
	h := NewHash(p.hsz)
	fmt.Fprintf(h, "tree %d\x00", body.Len())
	h.Write(body.Bytes())
	c.oid = h.Sum(nil)
	trees[strings.TrimSuffix(prefix, "/")] = c
	return c
}

func writeTreeEntry(b *bytes.Buffer, mode, name string, oid []byte) {
	b.WriteString(mode)
	b.WriteByte(' ')
	b.WriteString(name)
	b.WriteByte(0)
	b.Write(oid)
}
