//go:build linux

package transact

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer"
)

// Held is a change set kept for review (see the package doc, "Held
// changes"): the part of a command's changes that was not applied.
type Held struct {
	// ID names it in its conversation (1, 2, ...; never reused).
	ID int
	// Label is the command's (Begin's label).
	Label string
	// Changes are the held changes, in path order.
	Changes []layer.Change
	// Reasons say why each path is held, by [layer.Change.Path]: the
	// policy's refusal ("git-config: sets core.fsmonitor ..."), or the
	// conversation's mode, or that the command's processes were not
	// known to be gone.
	Reasons map[string]string
	// Digest is the SHA-256 (hex) of the held changes as they are now:
	// each path, kind, mode, size, the upper entry's inode and change
	// time, and a regular file's contents. [Conv.Accept] applies them
	// only when it still matches.
	Digest string

	layer *layer.Layer
	paths []string // the held paths, sorted
	stray bool     // processes of the command may still run over the layer
	// was are the held changes as held, and seen what the real path of
	// each was then: Accept applies nothing when one of them changed
	// since (a later edit of the user's is not overwritten).
	was  []layer.Change
	seen []mark
}

// maxHeld bounds a conversation's held change sets. A command whose
// changes would be the next one held once maxHeld wait is not held: its
// changes that would have been are discarded (what its policy allows is
// still applied, outside hold mode), and its report says so
// ([Report.Unheld]), with what to do: review or reject the held change
// sets, then run it again. The held ones are kept as they were: a
// person may be reviewing them, and those shown are never discarded to
// make room.
const maxHeld = 64

// unheldFull is Report.Unheld once maxHeld change sets are held.
var unheldFull = fmt.Sprintf("the conversation holds %d change sets for review already, the most it may: review or reject them, then run the command again", maxHeld)

// Reasons given for held paths.
const (
	holdMode      = "the command's review mode holds every change set until it is accepted"
	lockedReason  = "another process was applying changes to the workspace for too long"
	stoppedReason = "the call ended while another apply to the workspace was under way"
	heldNotGone   = "processes of the command were still running over its layer"
	policyReason  = "policy: " // before a gitpolicy rule and reason
)

// Errors of [Conv.Accept] and [Conv.Reject].
var (
	// ErrNoHeld: no held change set has that ID (never held, already
	// accepted or rejected, or the conversation ended).
	ErrNoHeld = errors.New("transact: no held change set has that id")
	// ErrDigest: the held changes are no longer those the digest was
	// taken of (or the digest is wrong); nothing was applied.
	ErrDigest = errors.New("transact: the held changes do not match the digest: list them again and review what they are now")
	// ErrConflict: something changed a held change's path in the
	// workspace since the change set was held (the user edited the
	// file, another command or an undo changed it); accepting would
	// overwrite that, so nothing was applied. The error is a
	// *layer.ConflictError naming the paths, wrapped with ErrConflict.
	ErrConflict = errors.New("transact: the workspace changed at held paths since the command ran")
	// ErrStray: the held change set is of a command that left
	// processes running over its layer, which may still write it; it
	// cannot be accepted: reject it, or run the command again.
	ErrStray = errors.New("transact: the held change set's command left processes that may still change it: reject it, or run the command again")
)

// BeginHeld is [Conv.Begin] for a command whose change sets are all
// held for review, nothing applied until accepted (not even by a
// checkpoint). Hold belongs to the command: it joins only a layer whose
// commands hold too, and a command begun with Begin never joins its
// layer.
func (c *Conv) BeginHeld(roots []string, label string) (*Tx, error) {
	return c.begin(roots, label, true)
}

// hold keeps the layer of a change set with held paths for review, as
// rep.Held (or, when maxHeld are held already, says in rep.Unheld that
// it could not). It does nothing when nothing is held. It needs no
// turn of c (a Commit that stopped waiting for it holds its change
// set).
func (c *Conv) hold(rep *Report, l *layer.Layer, s *layer.Set, label string, reasons map[string]string, stray bool) {
	if len(reasons) == 0 {
		return
	}
	h := &Held{Label: label, Reasons: reasons, layer: l, stray: stray}
	for p := range reasons {
		h.paths = append(h.paths, p)
	}
	slices.Sort(h.paths)
	h.Changes = h.pick(s.Changes)
	if len(h.Changes) == 0 {
		return
	}
	h.Digest = digest(s, h.Changes)
	h.was = slices.Clone(h.Changes)
	h.seen = make([]mark, len(h.was))
	for i, ch := range h.was {
		h.seen[i] = markOf(s, ch)
	}
	c.hmu.Lock()
	if len(c.held) >= maxHeld {
		c.hmu.Unlock()
		rep.Unheld, rep.Discarded = unheldFull, true
		return
	}
	c.heldN++
	h.ID = c.heldN
	c.held = append(c.held, h)
	c.heldChanged()
	rep.Held = h.clone()
	c.hmu.Unlock()
	c.m.track(l, true)
}

// holdAll holds every change of s for review (the hold mode, or a
// command whose processes were not known to be gone: stray), as
// rep.Held, with the policy's reasons, as in apply mode, for what it
// refuses (rep.Refused) and reason for the rest.
func (c *Conv) holdAll(rep *Report, l *layer.Layer, s *layer.Set, label, reason string, stray bool) {
	rep.Refused = gitpolicy.Check(s, l.Roots(), s.Changes)
	reasons := heldReasons(rep.Refused)
	if reasons == nil {
		reasons = make(map[string]string, len(s.Changes))
	}
	for _, ch := range s.Changes {
		if !refusedAt(reasons, ch.Path) {
			reasons[ch.Path] = reason
		}
	}
	c.hold(rep, l, s, label, reasons, stray)
}

// refusedAt reports whether path or a directory above it has a reason
// in reasons (which holds only refusals so far).
func refusedAt(reasons map[string]string, path string) bool {
	for p := path; ; {
		if _, ok := reasons[p]; ok {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i <= 0 {
			return false
		}
		p = p[:i]
	}
}

// mark is what a real path was for [Conv.Accept]'s check that nothing
// changed it since the change set was held: its identity, type,
// permissions and owner, and for anything but a directory its size and
// modification and change times (any write changes the change time).
// A deleted directory's modification time is in it too (an entry made
// or removed in it). The zero mark is no entry.
type mark struct {
	dev, ino         uint64
	mode, uid, gid   uint32
	size, mtim, ctim int64
	err              string // it could not be read
}

// markOf returns the mark of ch's real path in s, as it is now.
func markOf(s *layer.Set, ch layer.Change) mark {
	fi, err := s.Lstat(ch.Path, false)
	if errors.Is(err, fs.ErrNotExist) {
		return mark{}
	}
	if err != nil {
		return mark{err: err.Error()}
	}
	st, ok := fi.Sys().(*unix.Stat_t)
	if !ok {
		return mark{err: "no status"}
	}
	m := mark{dev: st.Dev, ino: st.Ino, mode: st.Mode, uid: st.Uid, gid: st.Gid}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		m.size, m.ctim = st.Size, st.Ctim.Nano()
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || ch.Kind == layer.Deleted {
		m.mtim = st.Mtim.Nano()
	}
	return m
}

// conflicts returns the paths of h's changes whose real path is not
// what it was when h was held, sorted.
func (h *Held) conflicts(s *layer.Set) []string {
	var out []string
	for i, ch := range h.was {
		if markOf(s, ch) != h.seen[i] {
			out = append(out, ch.Path)
		}
	}
	return out
}

// pick returns the changes of h: each held path, what is below it,
// and added directories above it (which applying it makes).
func (h *Held) pick(all []layer.Change) []layer.Change {
	var out []layer.Change
	for _, ch := range all {
		for _, p := range h.paths {
			if ch.Path == p || strings.HasPrefix(ch.Path, p+"/") ||
				ch.Kind == layer.Added && strings.HasPrefix(p, ch.Path+"/") {
				out = append(out, ch)
				break
			}
		}
	}
	return out
}

// Listed are the held changes a listing shows: an added directory
// shows as its files (layer.Listed).
func (h *Held) Listed() []layer.Change { return layer.Listed(h.Changes) }

// Reason is why path is held: its own reason, or that of the held path
// it is below or above.
func (h *Held) Reason(path string) string {
	if r, ok := h.Reasons[path]; ok {
		return r
	}
	for _, p := range h.paths {
		if strings.HasPrefix(path, p+"/") || strings.HasPrefix(p, path+"/") {
			return h.Reasons[p]
		}
	}
	return ""
}

func (h *Held) clone() *Held {
	out := *h
	out.Changes = slices.Clone(h.Changes)
	return &out
}

// digest hashes changes as they are in s (see Held.Digest).
func digest(s *layer.Set, changes []layer.Change) string {
	d := sha256.New()
	for _, ch := range changes {
		field(d, []byte(ch.Path))
		field(d, []byte(ch.Kind))
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(ch.Mode))
		d.Write(n[:])
		binary.LittleEndian.PutUint64(n[:], uint64(ch.Size))
		d.Write(n[:])
		if ch.Kind == layer.Deleted {
			continue
		}
		if fi, err := s.Lstat(ch.Path, true); err == nil {
			if st, ok := fi.Sys().(*unix.Stat_t); ok {
				binary.LittleEndian.PutUint64(n[:], st.Ino)
				d.Write(n[:])
				binary.LittleEndian.PutUint64(n[:], uint64(st.Ctim.Nano()))
				d.Write(n[:])
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				target, err := s.Readlink(ch.Path, true)
				if err != nil {
					target = "unreadable: " + err.Error()
				}
				field(d, []byte(target))
			}
			if fi.Mode().IsRegular() {
				b, err := s.ReadFile(ch.Path, true, fi.Size()+1)
				if err != nil {
					b = []byte("unreadable: " + err.Error())
				}
				field(d, b)
			}
		}
	}
	return hex.EncodeToString(d.Sum(nil))
}

// field writes b to d with its length first.
func field(d hash.Hash, b []byte) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
	d.Write(n[:])
	d.Write(b)
}

// Held lists c's held change sets, oldest first, each as it is now
// (its Changes and Digest computed afresh). It waits for c's turn (an
// accept may be taking one) until ctx ends: then it fails with an
// error wrapping layer.ErrLocked and ctx's error.
func (c *Conv) Held(ctx context.Context) ([]Held, error) {
	if err := c.lockCtx(ctx); err != nil {
		return nil, err
	}
	defer c.unlock()
	c.hmu.Lock()
	hs := slices.Clone(c.held)
	c.hmu.Unlock()
	out := make([]Held, 0, len(hs))
	for _, h := range hs {
		s, err := h.layer.Diff()
		if err != nil {
			return nil, fmt.Errorf("transact: held change set %d: %w", h.ID, err)
		}
		changes := h.pick(s.Changes)
		d := digest(s, changes)
		s.Close()
		c.hmu.Lock()
		h.Changes, h.Digest = changes, d
		c.heldChanged()
		out = append(out, *h.clone())
		c.hmu.Unlock()
	}
	return out, nil
}

// HeldBytes is what c's held change sets hold (their files' sizes). It
// never waits for c's turn.
func (c *Conv) HeldBytes() int64 {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	return c.view.held
}

// Accept applies the held change set id, exactly as digest describes it
// (see [Held.Digest]; it fails with [ErrDigest] when the changes are
// not those any more, applying nothing), as one undo step labelled with
// the command, and removes it from the held ones. The policy is not
// asked again: accepting is the decision. The report's Applied are what
// it applied.
//
// Accepting is all or nothing: when something changed the real path of
// a held change since the change set was held (a file the user edited
// meanwhile, one made where the command added one, a permission
// changed; see mark), Accept applies none of it and fails with
// [ErrConflict] (a *layer.ConflictError naming the paths), so that no
// later edit is overwritten. The change set stays held: reject it, or
// put the paths back as they were and accept it again.
//
// ctx bounds only the waits: for c's turn (a command's apply, an undo
// or another accept of c under way) and for another apply to the
// workspace. When it ends during one, Accept applies nothing and fails
// with an error wrapping layer.ErrLocked and ctx's error; the change
// set stays held as it was, to accept again. Once it holds both it
// applies whatever ctx says.
func (c *Conv) Accept(ctx context.Context, id int, digestHex string) (*Report, error) {
	if err := c.lockCtx(ctx); err != nil {
		return &Report{}, err
	}
	defer c.unlock()
	var rep *Report
	var err error
	cpu := threadCPU(func() { rep, err = c.accept(ctx, id, digestHex) })
	if rep == nil {
		// A refused accept (a conflict, a digest that no longer matches)
		// diffed the layer too: its report carries only that CPU, to be
		// charged as an applied one's is.
		rep = &Report{}
	}
	rep.CPU = cpu
	return rep, err
}

// accept is Accept's work; c's turn is held.
func (c *Conv) accept(ctx context.Context, id int, digestHex string) (*Report, error) {
	h := c.heldByID(id)
	if h == nil {
		return nil, fmt.Errorf("%w: %d", ErrNoHeld, id)
	}
	if h.stray {
		// A process may still write the layer (nothing recorded can
		// tell whether it is gone): its digest and copies could be of
		// half-written files.
		return nil, fmt.Errorf("%w (held change set %d)", ErrStray, id)
	}
	s, err := h.layer.Diff()
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	defer s.Close()
	// A change in the workspace below a held path changes the diff (a
	// path the command added that the user made too is modified now),
	// so it is looked for first: it is what to tell.
	if paths := h.conflicts(s); len(paths) > 0 {
		return nil, fmt.Errorf("%w (held change set %d): %w", ErrConflict, id, &layer.ConflictError{Paths: paths})
	}
	changes := h.pick(s.Changes)
	if len(changes) == 0 || digest(s, changes) != digestHex {
		return nil, fmt.Errorf("%w (held change set %d)", ErrDigest, id)
	}
	var others []string
	for _, ch := range s.Changes {
		if !slices.ContainsFunc(changes, func(o layer.Change) bool { return o.Path == ch.Path }) {
			others = append(others, ch.Path)
		}
	}
	st, err := c.storeMade()
	if err != nil {
		return nil, err
	}
	if beforeAcceptApply != nil {
		beforeAcceptApply()
	}
	// The conflict check above and ApplyExact's own check of every
	// real entry by its full status (under the workspace's apply lock)
	// leave no moment in which a write in place goes unseen.
	res, err := s.ApplyExact(ctx, others, st, h.Label)
	var conflict *layer.ConflictError
	if errors.As(err, &conflict) {
		return nil, fmt.Errorf("%w (held change set %d): %w", ErrConflict, id, conflict)
	}
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	c.dropHeld(h)
	return &Report{Applied: res.Applied, Failed: res.Failed, Step: res.Step}, nil
}

// heldByID returns the held change set id (nil: none).
func (c *Conv) heldByID(id int) *Held {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if i := slices.IndexFunc(c.held, func(h *Held) bool { return h.ID == id }); i >= 0 {
		return c.held[i]
	}
	return nil
}

// beforeAcceptApply, when set (by tests), runs in Accept between its
// conflict check and the apply.
var beforeAcceptApply func()

// Reject discards the held change set id. It waits for c's turn (an
// accept of it may be under way) until ctx ends: then it fails with an
// error wrapping layer.ErrLocked and ctx's error, and the change set
// stays held.
func (c *Conv) Reject(ctx context.Context, id int) error {
	if err := c.lockCtx(ctx); err != nil {
		return err
	}
	defer c.unlock()
	h := c.heldByID(id)
	if h == nil {
		return fmt.Errorf("%w: %d", ErrNoHeld, id)
	}
	c.dropHeld(h)
	return nil
}

// dropHeld removes held change set h and its layer; c's turn is held.
func (c *Conv) dropHeld(h *Held) {
	c.hmu.Lock()
	c.held = slices.DeleteFunc(c.held, func(o *Held) bool { return o == h })
	c.heldChanged()
	c.hmu.Unlock()
	c.m.track(h.layer, false)
	c.m.pool.remove(h.layer)
}

// dropAllHeld removes every held change set of c; c's turn is held.
func (c *Conv) dropAllHeld() {
	c.hmu.Lock()
	hs := slices.Clone(c.held)
	c.hmu.Unlock()
	for _, h := range slices.Backward(hs) {
		c.dropHeld(h)
	}
}

// track records a held layer (on) or forgets it, so that Close removes
// the layers still held.
func (m *Manager) track(l *layer.Layer, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		m.held = map[*layer.Layer]bool{}
	}
	if on {
		m.held[l] = true
	} else {
		delete(m.held, l)
	}
}

// heldReasons are the reasons for refusals.
func heldReasons(refused []gitpolicy.Refusal) map[string]string {
	if len(refused) == 0 {
		return nil
	}
	out := make(map[string]string, len(refused))
	for _, r := range refused {
		out[r.Path] = policyReason + string(r.Rule) + ": " + r.Reason
	}
	return out
}
