//go:build linux

package layer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Kind says how a path changed. Its value is the letter of the change
// report ("A", "M", "D", "T").
type Kind string

const (
	// Added: the path did not exist before.
	Added Kind = "A"
	// Modified: a file's content or modification time, or a symlink's
	// target, changed (its permissions may have too).
	Modified Kind = "M"
	// Deleted: the path no longer exists. A deleted directory is one
	// change for everything below it.
	Deleted Kind = "D"
	// TypeChanged: the path's type (file, directory, symlink, FIFO)
	// changed, or only its permissions or owner.
	TypeChanged Kind = "T"
)

// Change is one changed path of a command.
type Change struct {
	// Path is the absolute path in the real tree.
	Path string
	// Kind is how it changed.
	Kind Kind
	// Mode is its type and permission bits after the change (before it
	// for Deleted).
	Mode fs.FileMode
	// Size is a regular file's size in bytes after the change (before
	// it for Deleted); 0 for anything else.
	Size int64

	root    int
	rel     string
	ovl     []string // the overlay's own xattrs on the upper entry, stripped before it is applied
	newTree bool     // an added directory: everything below it is new
	partial bool     // an added directory whose upper subtree holds more than its changes
	was     id       // the real entry Diff compared with (none for an added path)
	at      stamp    // and its status then (for ApplyExact)
	refuse  error    // the layer's own refusal (ErrOverlayXattr, ErrTooDeep)
}

// Set is what one command changed below its layer's roots, computed by
// [Layer.Diff] from the upper layers once the command ended.
type Set struct {
	// Changes are sorted by path, a directory right before what is
	// below it ("a", "a/x", "a-b").
	Changes []Change

	l     *Layer
	upper []*tree
	real  []*tree
	// views keeps, per root, what each directory looked up is in the
	// view after the command (see Set.afterDir).
	views []map[string]view
	// rewrites are what apply puts at these paths instead of the
	// upper files (Set.Rewrite).
	rewrites map[string][]byte
	// grants are, per root, the upper directories Diff gave rwx for
	// their owner (see grant_linux.go); consumed: Apply took the upper
	// layers, whose permissions are then not given back.
	grants   []map[string]*grant
	consumed bool
}

// Diff computes the command's changes. Call it once every process of
// the command is gone (its cgroup is empty): the upper layers must no
// longer change. It reads only what the command changed: the upper
// layers hold nothing else (plus, for each entry there, the real entry
// it replaced, and the real directory listing of a directory the
// command emptied and recreated).
//
// A file that was only copied up (opened for writing but left as it
// was, or its owner set to the same one) is not a change. A file whose
// size and modification time are unchanged is compared byte by byte;
// one whose modification time alone changed (touch) is Modified.
// Changes to a directory's modification time are not changes; its
// permissions or owner are (TypeChanged).
func (l *Layer) Diff() (*Set, error) {
	s := &Set{l: l}
	for i, r := range l.roots {
		up, err := openTree(r.upper)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("layer: %w", err)
		}
		s.upper = append(s.upper, up)
		re, err := openTree(r.path)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("layer: %w", err)
		}
		s.real = append(s.real, re)
		s.views = append(s.views, map[string]view{})
		d := differ{s: s, root: i, up: up, re: re, prefix: ovlPrefix(l.userXattr)}
		if err := d.top(); err != nil {
			s.Close()
			return nil, fmt.Errorf("layer: %w", err)
		}
	}
	slices.SortFunc(s.Changes, func(a, b Change) int { return comparePaths(a.Path, b.Path) })
	return s, nil
}

// comparePaths orders paths so that everything below a directory comes
// right after it: "/" sorts before every other byte ("a", "a/x", "a-b").
func comparePaths(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		switch {
		case a[i] == '/':
			return -1
		case b[i] == '/':
			return 1
		case a[i] < b[i]:
			return -1
		}
		return 1
	}
	return len(a) - len(b)
}

// Close releases the set's directory descriptors. [Set.Apply] and the
// lookups need them: close it after those.
func (s *Set) Close() {
	s.ungrant()
	for _, t := range append(s.upper, s.real...) {
		t.close()
	}
	s.upper, s.real = nil, nil
}

type differ struct {
	s      *Set
	root   int
	up, re *tree
	prefix string // the overlay's own xattr prefix
	// fresh are the indices in s.Changes of the added directories
	// being walked, outermost first.
	fresh []int
}

// MaxDepth bounds how deep below its root a change may lie: an entry
// deeper than that is not walked by [Layer.Diff] and not applied (the
// added directory around it is refused whole with [ErrTooDeep]), so
// that the cost of a change set stays linear in its entries.
const MaxDepth = 256

// ErrTooDeep is the error of a change that [Set.Apply] refuses
// because it holds entries deeper than [MaxDepth].
var ErrTooDeep = fmt.Errorf("layer: a tree deeper than %d levels is not applied", MaxDepth)

// ErrOverlayXattr is the error of a change that [Set.Apply] refuses
// because its upper entry carries overlayfs xattrs that the command
// set (names beginning with trusted.overlay. or user.overlay. other
// than the mount's own): only overlayfs may mark what is a whiteout or
// opaque, so they are neither applied nor read.
var ErrOverlayXattr = errors.New("layer: the command set overlayfs's private xattrs")

// errTooDeep unwinds the walk of an added directory that is too deep.
var errTooDeep = errors.New("too deep")

func (d *differ) add(c Change, rel string) int {
	c.root, c.rel = d.root, rel
	c.Path = d.re.path(rel)
	d.s.Changes = append(d.s.Changes, c)
	return len(d.s.Changes) - 1
}

// partial notes that the innermost added directory being walked holds
// an upper entry that is not a change of its own (a whiteout): it is
// not moved into place whole.
func (d *differ) partial() {
	if n := len(d.fresh); n > 0 {
		d.s.Changes[d.fresh[n-1]].partial = true
	}
}

// top compares the roots themselves (permissions, owner: an upper root
// that could not take the real one's owner, see lchownMay, is not a
// change) and walks the upper layer.
func (d *differ) top() error {
	var ust, rst unix.Stat_t
	if err := unix.Fstat(d.up.fd.Int(), &ust); err != nil {
		return err
	}
	if err := unix.Fstat(d.re.fd.Int(), &rst); err != nil {
		return err
	}
	const perm = 0o7777
	if ust.Mode&perm != rst.Mode&perm || !ownerFits(int(ust.Uid), int(ust.Gid), int(rst.Uid), int(rst.Gid)) {
		d.add(Change{Kind: TypeChanged, Mode: fileMode(ust.Mode), was: idOf(&rst, true), at: stampOf(&rst, true, false)}, "")
	}
	if err := d.grant("", &ust); err != nil {
		return err
	}
	return d.dir("", 1, false, false, false)
}

// attrsDiffer reports whether permissions or owner differ.
func attrsDiffer(a, b *unix.Stat_t) bool {
	const perm = 0o7777
	return a.Mode&perm != b.Mode&perm || a.Uid != b.Uid || a.Gid != b.Gid
}

// dir walks the upper directory rel, whose entries lie at depth.
// hidden: the real directory's entries are not part of the command's
// view (an opaque directory, or one below it), so those missing in the
// upper layer were deleted. fresh: there is no real directory at rel.
// xwh: the directory may hold xattr whiteouts (its opaque xattr is
// "x").
func (d *differ) dir(rel string, depth int, hidden, fresh, xwh bool) error {
	names, err := d.up.names(rel)
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		if err := d.entry(join(rel, name), depth, fresh, xwh); err != nil {
			return err
		}
	}
	if !hidden || fresh {
		return nil
	}
	var real []string
	err = reach(d.re, rel, 0o500, func() (e error) { real, e = d.re.names(rel); return e })
	if err != nil {
		if missing(err) {
			return nil
		}
		return err
	}
	slices.Sort(real)
	for _, name := range real {
		if _, found := slices.BinarySearch(names, name); found {
			continue
		}
		crel := join(rel, name)
		st, ok, err := lstatReach(d.re, crel)
		if err != nil {
			return err
		}
		if ok {
			d.add(deleted(st), crel)
		}
	}
	return nil
}

func deleted(st unix.Stat_t) Change {
	c := Change{Kind: Deleted, Mode: fileMode(st.Mode), was: idOf(&st, true), at: stampOf(&st, true, true)}
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		c.Size = st.Size
	}
	return c
}

// newTree walks the added directory c (at rel), which it lists first.
// A tree deeper than MaxDepth is dropped from the change set but for
// its outermost added directory, which is refused.
func (d *differ) newTree(c Change, rel string, depth int, xwh bool) error {
	k := d.add(c, rel)
	d.fresh = append(d.fresh, k)
	err := d.dir(rel, depth+1, true, true, xwh)
	d.fresh = d.fresh[:len(d.fresh)-1]
	if errors.Is(err, errTooDeep) && len(d.fresh) == 0 {
		d.s.Changes = d.s.Changes[:k+1]
		d.s.Changes[k].refuse = ErrTooDeep
		return nil
	}
	if err == nil && d.s.Changes[k].partial && len(d.fresh) > 0 {
		d.partial() // moved whole, the outer directory would carry it too
	}
	return err
}

// entry compares one upper entry with the real one.
func (d *differ) entry(rel string, depth int, fresh, xwh bool) error {
	ust, ok, err := d.up.lstat(rel)
	if err != nil || !ok {
		return err
	}
	if depth > MaxDepth {
		if len(d.fresh) > 0 {
			return errTooDeep
		}
		d.add(Change{Kind: Modified, Mode: fileMode(ust.Mode), refuse: ErrTooDeep}, rel)
		return nil
	}
	var rst unix.Stat_t
	var rok bool
	if !fresh {
		if rst, rok, err = lstatReach(d.re, rel); err != nil {
			return err
		}
	}
	x, err := readXattrs(d.up.path(rel), d.prefix)
	if err != nil {
		return err
	}
	if isWhiteout(&ust) || (xwh && ust.Mode&unix.S_IFMT == unix.S_IFREG && x.whiteout) {
		if rok {
			d.add(deleted(rst), rel)
		} else {
			d.partial()
		}
		return nil
	}
	c := Change{Mode: fileMode(ust.Mode), ovl: x.own, was: idOf(&rst, rok), at: stampOf(&rst, rok, false)}
	if ust.Mode&unix.S_IFMT == unix.S_IFREG {
		c.Size = ust.Size
	}
	if len(x.forged) > 0 {
		c.refuse = fmt.Errorf("%w (%s)", ErrOverlayXattr, strings.Join(x.forged, ", "))
	}
	if ust.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := d.grant(rel, &ust); err != nil {
			return err
		}
		if rok && rst.Mode&unix.S_IFMT == unix.S_IFDIR {
			if _, err := d.re.dir(rel); errors.Is(err, unix.EXDEV) {
				// A mount point: not part of the layer (the overlay showed
				// the directory under it). What the command wrote there is
				// listed as added, and fails to apply.
				return d.dir(rel, depth+1, true, true, x.xwhiteouts)
			}
			if attrsDiffer(&ust, &rst) || c.refuse != nil {
				c.Kind = TypeChanged
				d.add(c, rel)
			}
			return d.dir(rel, depth+1, x.opaque, false, x.xwhiteouts)
		}
		c.Kind, c.newTree = Added, true
		if rok {
			c.Kind = TypeChanged
		}
		return d.newTree(c, rel, depth, x.xwhiteouts)
	}
	switch {
	case !rok:
		c.Kind = Added
	case ust.Mode&unix.S_IFMT != rst.Mode&unix.S_IFMT:
		c.Kind = TypeChanged
	default:
		changed, err := d.contentChanged(rel, &ust, &rst)
		if err != nil {
			return err
		}
		switch {
		case changed:
			c.Kind = Modified
		case attrsDiffer(&ust, &rst) && ust.Mode&unix.S_IFMT != unix.S_IFLNK, c.refuse != nil:
			c.Kind = TypeChanged
		default:
			return nil // copied up, unchanged
		}
	}
	d.add(c, rel)
	return nil
}

// contentChanged compares an upper and a real entry of the same type.
func (d *differ) contentChanged(rel string, u, r *unix.Stat_t) (bool, error) {
	switch u.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		a, err := d.up.readlink(rel)
		if err != nil {
			return false, err
		}
		var b string
		err = reach(d.re, rel, 0, func() (e error) { b, e = d.re.readlink(rel); return e })
		if err != nil {
			return false, err
		}
		return a != b, nil
	case unix.S_IFREG:
		if u.Size != r.Size || u.Mtim != r.Mtim {
			return true, nil
		}
		return d.differentBytes(rel)
	}
	return false, nil
}

// differentBytes compares the upper and the real file rel.
func (d *differ) differentBytes(rel string) (bool, error) {
	var a *os.File
	// The command may have left its file unreadable (chmod 0 f): the
	// upper layer is the engine's.
	if err := reach(d.up, rel, 0o400, func() (e error) { a, e = d.up.open(rel); return e }); err != nil {
		return false, err
	}
	defer a.Close()
	var b *os.File
	if err := reach(d.re, rel, 0, func() (e error) { b, e = d.re.open(rel); return e }); err != nil {
		return true, nil // gone or unreadable: apply it
	}
	defer b.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return true, nil
		}
		if ea != nil || eb != nil {
			if errors.Is(ea, io.EOF) || errors.Is(ea, io.ErrUnexpectedEOF) {
				return !(errors.Is(eb, io.EOF) || errors.Is(eb, io.ErrUnexpectedEOF)), nil
			}
			return false, ea
		}
	}
}

// Lookups for policy. Paths are absolute and below one of the layer's
// roots; "before" is the real tree as it is now (the command's changes
// not applied), "after" is the tree the command saw when it ended.

// Lstat returns the status of path before or after the command, not
// following a final symlink. A path that does not exist gives an error
// for which errors.Is(err, fs.ErrNotExist) holds.
func (s *Set) Lstat(path string, after bool) (fs.FileInfo, error) {
	t, rel, err := s.find(path, after)
	if err != nil {
		return nil, err
	}
	st, ok, err := t.lstat(rel)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &fs.PathError{Op: "lstat", Path: path, Err: fs.ErrNotExist}
	}
	if i, _, _ := s.rel(path); after && t == s.upper[i] {
		st.Mode = s.leftMode(i, rel, st.Mode)
	}
	_, name := split(rel)
	if rel == "" {
		name = path
	}
	return &fileInfo{name: name, st: st}, nil
}

// ReadFile returns up to limit bytes of the regular file path before or
// after the command (it does not follow a final symlink).
func (s *Set) ReadFile(path string, after bool, limit int64) ([]byte, error) {
	f, err := s.Open(path, after)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// Open opens the regular file path before or after the command for
// reading (it does not follow a final symlink); the caller closes it.
func (s *Set) Open(path string, after bool) (io.ReadCloser, error) {
	if b, ok := s.rewrites[path]; ok && after {
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	t, rel, err := s.find(path, after)
	if err != nil {
		return nil, err
	}
	f, err := t.open(rel)
	if err != nil {
		if missing(err) {
			return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		}
		return nil, err
	}
	return f, nil
}

// Readlink returns the target of the symlink path before or after the
// command.
func (s *Set) Readlink(path string, after bool) (string, error) {
	t, rel, err := s.find(path, after)
	if err != nil {
		return "", err
	}
	return t.readlink(rel)
}

// ReadDir returns the sorted names in the directory path before or
// after the command.
func (s *Set) ReadDir(path string, after bool) ([]string, error) {
	i, rel, err := s.rel(path)
	if err != nil {
		return nil, err
	}
	if !after {
		return sortedNames(s.real[i], rel)
	}
	t, _, err := s.find(path, true)
	if err != nil {
		return nil, err
	}
	names, err := sortedNames(t, rel)
	if err != nil || t == s.real[i] {
		return names, err
	}
	// A directory of the upper layer: its whiteouts hide real entries,
	// and unless it is opaque (or new), the real entries show through.
	var out []string
	for _, n := range names {
		st, ok, err := t.lstat(join(rel, n))
		if err == nil && ok && !isWhiteout(&st) {
			out = append(out, n)
		}
	}
	if !s.hidden(i, rel) {
		real, _ := sortedNames(s.real[i], rel)
		for _, n := range real {
			if _, found := slices.BinarySearch(names, n); !found {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func sortedNames(t *tree, rel string) ([]string, error) {
	names, err := t.names(rel)
	if err != nil {
		if missing(err) {
			return nil, &fs.PathError{Op: "readdir", Path: t.path(rel), Err: fs.ErrNotExist}
		}
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// rel finds the root of path.
func (s *Set) rel(path string) (int, string, error) {
	for i, r := range s.l.roots {
		if path == r.path {
			return i, "", nil
		}
		if below(path, r.path) {
			return i, path[len(r.path)+1:], nil
		}
	}
	return -1, "", fmt.Errorf("layer: %s is not below a root of the layer", path)
}

// find returns the tree that holds path in the chosen view. A path that
// does not exist in the view comes back with the real tree and a
// relative path that does not exist there either, or an error for which
// fs.ErrNotExist holds. Its cost does not grow with the path's depth:
// what each directory is in the view after is kept (Set.afterDir).
func (s *Set) find(path string, after bool) (*tree, string, error) {
	i, rel, err := s.rel(path)
	if err != nil {
		return nil, "", err
	}
	if !after || rel == "" {
		if after {
			return s.upper[i], rel, nil
		}
		return s.real[i], rel, nil
	}
	notExist := &fs.PathError{Op: "lstat", Path: path, Err: fs.ErrNotExist}
	d, _ := split(rel)
	v := s.afterDir(i, d)
	switch {
	case v.missing:
		return nil, "", notExist
	case !v.upper:
		return s.real[i], rel, nil
	}
	st, ok, err := s.upper[i].lstat(rel)
	switch {
	case err != nil:
		return nil, "", err
	case !ok && v.hidden, ok && isWhiteout(&st):
		return nil, "", notExist
	case !ok:
		return s.real[i], rel, nil
	}
	return s.upper[i], rel, nil
}

// view is what a directory is in the view after the command.
type view struct {
	missing bool // not there (or not a directory)
	upper   bool // in the upper layer (else only in the real tree)
	hidden  bool // in the upper layer, and the real entries below it are hidden
}

// afterDir returns what the directory rel of root i is in the view
// after the command, from its parent's (kept per directory).
func (s *Set) afterDir(i int, rel string) view {
	if rel == "" {
		return view{upper: true}
	}
	if v, ok := s.views[i][rel]; ok {
		return v
	}
	d, _ := split(rel)
	v := s.afterDir(i, d)
	switch st, ok, err := s.upper[i].lstat(rel); {
	case v.missing || !v.upper:
		// The parent is missing, or only real: so is rel.
	case err != nil || !ok:
		v = view{missing: v.hidden}
	case isWhiteout(&st) || st.Mode&unix.S_IFMT != unix.S_IFDIR:
		v = view{missing: true}
	default:
		v.hidden = v.hidden || s.hiddenAt(i, rel)
	}
	s.views[i][rel] = v
	return v
}

// hiddenAt reports whether the upper directory p hides the real entries
// below it by itself: it is opaque (in the overlay's own xattr
// namespace), or there is no real directory there.
func (s *Set) hiddenAt(i int, p string) bool {
	x, _ := readXattrs(s.upper[i].path(p), ovlPrefix(s.l.userXattr))
	if x.opaque {
		return true
	}
	st, ok, _ := s.real[i].lstat(p)
	return !ok || st.Mode&unix.S_IFMT != unix.S_IFDIR
}

// hidden reports whether the real entries below the upper directory rel
// are hidden in the command's view.
func (s *Set) hidden(i int, rel string) bool {
	if rel == "" {
		return false
	}
	return s.afterDir(i, rel).hidden
}

// fileInfo is an fs.FileInfo from a stat.
type fileInfo struct {
	name string
	st   unix.Stat_t
}

func (f *fileInfo) Name() string       { return f.name }
func (f *fileInfo) Size() int64        { return f.st.Size }
func (f *fileInfo) Mode() fs.FileMode  { return fileMode(f.st.Mode) }
func (f *fileInfo) ModTime() time.Time { return time.Unix(f.st.Mtim.Unix()) }
func (f *fileInfo) IsDir() bool        { return f.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (f *fileInfo) Sys() any           { return &f.st }
