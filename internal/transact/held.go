//go:build linux

package transact

import (
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
}

// maxHeld bounds a conversation's held change sets: holding one more
// discards the oldest.
const maxHeld = 64

// Reasons given for held paths.
const (
	holdMode     = "the command's review mode holds every change set until it is accepted"
	heldNotGone  = "processes of the command were still running over its layer"
	policyReason = "policy: " // before a gitpolicy rule and reason
)

// Errors of [Conv.Accept] and [Conv.Reject].
var (
	// ErrNoHeld: no held change set has that ID (never held, already
	// accepted or rejected, or the conversation ended).
	ErrNoHeld = errors.New("transact: no held change set has that id")
	// ErrDigest: the held changes are no longer those the digest was
	// taken of (or the digest is wrong); nothing was applied.
	ErrDigest = errors.New("transact: the held changes do not match the digest: list them again and review what they are now")
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

// hold keeps the layer of a change set with held paths for review;
// c.apply is held. It returns nil when nothing is held.
func (c *Conv) hold(l *layer.Layer, s *layer.Set, label string, reasons map[string]string, stray bool) *Held {
	if len(reasons) == 0 {
		return nil
	}
	h := &Held{Label: label, Reasons: reasons, layer: l, stray: stray}
	for p := range reasons {
		h.paths = append(h.paths, p)
	}
	slices.Sort(h.paths)
	h.Changes = h.pick(s.Changes)
	if len(h.Changes) == 0 {
		return nil
	}
	h.Digest = digest(s, h.Changes)
	if len(c.held) >= maxHeld {
		c.dropHeld(0)
	}
	c.heldN++
	h.ID = c.heldN
	c.held = append(c.held, h)
	c.m.track(l, true)
	return h.clone()
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
// (its Changes and Digest computed afresh).
func (c *Conv) Held() ([]Held, error) {
	c.apply.Lock()
	defer c.apply.Unlock()
	out := make([]Held, 0, len(c.held))
	for _, h := range c.held {
		s, err := h.layer.Diff()
		if err != nil {
			return nil, fmt.Errorf("transact: held change set %d: %w", h.ID, err)
		}
		h.Changes = h.pick(s.Changes)
		h.Digest = digest(s, h.Changes)
		s.Close()
		out = append(out, *h.clone())
	}
	return out, nil
}

// HeldBytes is what c's held change sets hold (their files' sizes).
func (c *Conv) HeldBytes() int64 {
	c.apply.Lock()
	defer c.apply.Unlock()
	var n int64
	for _, h := range c.held {
		for _, ch := range h.Changes {
			if ch.Kind != layer.Deleted {
				n += ch.Size
			}
		}
	}
	return n
}

// Accept applies the held change set id, exactly as digest describes it
// (see [Held.Digest]; it fails with [ErrDigest] when the changes are
// not those any more, applying nothing), as one undo step labelled with
// the command, and removes it from the held ones. The policy is not
// asked again: accepting is the decision. The report's Applied are what
// it applied.
func (c *Conv) Accept(id int, digestHex string) (*Report, error) {
	c.apply.Lock()
	defer c.apply.Unlock()
	i := slices.IndexFunc(c.held, func(h *Held) bool { return h.ID == id })
	if i < 0 {
		return nil, fmt.Errorf("%w: %d", ErrNoHeld, id)
	}
	h := c.held[i]
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
	res, err := s.Apply(others, st, h.Label)
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	c.dropHeld(i)
	return &Report{Applied: res.Applied, Failed: res.Failed, Step: res.Step}, nil
}

// Reject discards the held change set id.
func (c *Conv) Reject(id int) error {
	c.apply.Lock()
	defer c.apply.Unlock()
	i := slices.IndexFunc(c.held, func(h *Held) bool { return h.ID == id })
	if i < 0 {
		return fmt.Errorf("%w: %d", ErrNoHeld, id)
	}
	c.dropHeld(i)
	return nil
}

// dropHeld removes held change set i and its layer; c.apply is held.
func (c *Conv) dropHeld(i int) {
	h := c.held[i]
	c.held = slices.Delete(c.held, i, i+1)
	c.m.track(h.layer, false)
	c.m.pool.remove(h.layer)
}

// dropAllHeld removes every held change set of c; c.apply is held.
func (c *Conv) dropAllHeld() {
	for len(c.held) > 0 {
		c.dropHeld(len(c.held) - 1)
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

// allReasons gives every change's path reason.
func allReasons(changes []layer.Change, reason string) map[string]string {
	out := make(map[string]string, len(changes))
	for _, ch := range changes {
		out[ch.Path] = reason
	}
	return out
}
