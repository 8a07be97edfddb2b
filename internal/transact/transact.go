//go:build linux

package transact

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer"
)

// Options configure a [Manager].
type Options struct {
	// Dir holds the layers and the undo stores. It is made if missing
	// (0700), and what an earlier engine left there is removed: stores
	// keep their index in memory, so nothing in it outlives its engine.
	// Best on the workspaces' file system (see the package doc).
	Dir string
	// Limits bound each conversation's undo store (zero fields: the
	// defaults of package layer).
	Limits layer.StoreLimits
	// UserXattr mounts the layers with overlayfs's userxattr option, as a
	// user namespace needs (an engine that is not root).
	UserXattr bool
	// Premount makes the overlays of the layers made ahead of time too
	// (layer.Layer.Premount), so that mounting one on a command's path
	// only attaches it, and lets later commands join a background job's
	// layer (see the package doc, "Shared layers"). Set it only when the
	// commands' layers are mounted from a thread of this process (a root
	// engine's sandbox, with either launcher): a rootless helper process
	// mounts its own (see layer.Layer.Premount). Without it (or when it
	// fails) the layers are held instead (layer.Layer.Hold): the process
	// that mounts a layer hands its overlays over.
	Premount bool
}

// Manager holds the conversations' undo stores and makes their commands'
// layers. It is safe for concurrent use.
type Manager struct {
	opts   Options
	mu     sync.Mutex
	convs  map[string]*conv // nil after Close
	serial int
	pool   *pool
}

// conv is one conversation's state: its store, made on first apply,
// and the turn its commands take to apply.
type conv struct {
	dir   string // the store's directory
	apply sync.Mutex
	store *layer.Store // nil until a command changed something

	mu     sync.Mutex
	shares []*share // layers of running background jobs, which later commands join
	// live are the undo steps applied from layers still in use (by
	// checkpoints), guarded by apply.
	live map[int]*share
}

// New makes a Manager, removing what an earlier engine left in
// opts.Dir.
func New(opts Options) (*Manager, error) {
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	if err := layer.RemoveStale(opts.Dir); err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), storePrefix) {
			if err := os.RemoveAll(filepath.Join(opts.Dir, e.Name())); err != nil {
				return nil, fmt.Errorf("transact: stale undo store: %w", err)
			}
		}
	}
	return &Manager{opts: opts, convs: map[string]*conv{}, pool: newPool(opts.Dir, opts.UserXattr, opts.Premount)}, nil
}

// storePrefix starts the name of every store's directory.
const storePrefix = "undo-"

// ErrClosed is returned after [Manager.Close].
var ErrClosed = errors.New("transact: closed")

// conversation returns a conversation's state, made on first use.
func (m *Manager) conversation(id string) (*conv, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.convs == nil {
		return nil, ErrClosed
	}
	c := m.convs[id]
	if c == nil {
		m.serial++
		c = &conv{dir: filepath.Join(m.opts.Dir, fmt.Sprintf("%s%d", storePrefix, m.serial))}
		m.convs[id] = c
	}
	return c, nil
}

// Begin makes the layer of a command of conversation over roots (the
// directories it may write; see [Roots]); label names it in the undo
// store (the command). Start the command with [Tx.Spec] mounted, then
// call [Tx.Commit] (or [Tx.Abort] if it never started).
func (m *Manager) Begin(conversation string, roots []string, label string) (*Tx, error) {
	c, err := m.conversation(conversation)
	if err != nil {
		return nil, err
	}
	if t := m.join(c, roots, label); t != nil {
		return t, nil
	}
	l, err := m.pool.layer(roots)
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	t := &Tx{m: m, c: c, label: label, spec: l.Spec(), ending: make(chan struct{})}
	t.sh = &share{l: l, key: key(roots), live: []*Tx{t}}
	return t, nil
}

// store returns c's store, made on first use; c.apply is held.
func (m *Manager) store(c *conv) (*layer.Store, error) {
	if c.store == nil {
		s, err := layer.NewStore(c.dir, m.opts.Limits)
		if err != nil {
			return nil, fmt.Errorf("transact: undo store: %w", err)
		}
		c.store = s
	}
	return c.store, nil
}

// lookup returns a conversation's state, nil when it has none.
func (m *Manager) lookup(id string) *conv {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.convs[id]
}

// Undo puts the workspace back to before the last steps commands (and
// checkpoints) of conversation that changed something. It fails with
// a *layer.ConflictError naming the paths something changed since
// (nothing is undone then), and with an error wrapping
// layer.ErrNothingToUndo when fewer steps are kept. It returns what it
// changed.
func (m *Manager) Undo(conversation string, steps int) ([]layer.Change, error) {
	if steps < 1 {
		return nil, fmt.Errorf("transact: steps must be at least 1, not %d", steps)
	}
	c := m.lookup(conversation)
	if c == nil {
		return nil, fmt.Errorf("transact: %w: the conversation changed nothing", layer.ErrNothingToUndo)
	}
	c.apply.Lock()
	defer c.apply.Unlock()
	if c.store == nil {
		return nil, fmt.Errorf("transact: %w: the conversation changed nothing", layer.ErrNothingToUndo)
	}
	kept := c.store.Steps()
	for _, s := range kept[max(0, len(kept)-steps):] {
		if c.live[s.N] != nil {
			return nil, fmt.Errorf("%w (%s)", ErrUndoLive, s.Label)
		}
	}
	return c.store.Undo(steps)
}

// ErrUndoLive is Undo's refusal to take back a step applied from the
// layer of a background job that still runs (a checkpoint, or a command
// that joined the layer): the job, and the commands that join its
// layer, would go on seeing the changes, and apply them again.
var ErrUndoLive = errors.New("transact: the changes to undo are still in the layer of a background job that runs: end the job first")

// Steps lists the steps conversation can undo, oldest first.
func (m *Manager) Steps(conversation string) []layer.StepInfo {
	c := m.lookup(conversation)
	if c == nil {
		return nil
	}
	c.apply.Lock()
	defer c.apply.Unlock()
	if c.store == nil {
		return nil
	}
	return c.store.Steps()
}

// Bytes is what conversation's undo store keeps, in bytes (what the
// engine counts against the conversation's quota).
func (m *Manager) Bytes(conversation string) int64 {
	var n int64
	for _, s := range m.Steps(conversation) {
		n += s.Bytes
	}
	return n
}

// End removes conversation's undo store (the conversation ended). Its
// commands' layers are removed by their Commit or Abort.
func (m *Manager) End(conversation string) error {
	m.mu.Lock()
	c := m.convs[conversation]
	delete(m.convs, conversation)
	m.mu.Unlock()
	return c.remove()
}

// remove removes c's store (nil-safe).
func (c *conv) remove() error {
	if c == nil {
		return nil
	}
	c.apply.Lock()
	defer c.apply.Unlock()
	if c.store == nil {
		return nil
	}
	err := c.store.Remove()
	c.store = nil
	return err
}

// Close removes every store, the layers made ahead of time and those
// of committed commands that were still to be removed; later calls fail
// with ErrClosed (a Commit or Abort after it removes its layer itself).
func (m *Manager) Close() error {
	m.mu.Lock()
	convs := m.convs
	m.convs = nil
	m.mu.Unlock()
	m.pool.close()
	var errs []error
	for _, c := range convs {
		errs = append(errs, c.remove())
	}
	return errors.Join(errs...)
}

// Tx is one command's layer, from before it starts until what it
// changed is applied. Its layer may be shared with other commands of
// the conversation (see the package doc, "Background jobs").
type Tx struct {
	m     *Manager
	c     *conv
	sh    *share
	spec  layer.Spec
	label string
	// freeze freezes the command's processes (Tx.Background; nil: a
	// foreground command). Guarded by sh.mu, as are the fields below.
	freeze func(func()) bool
	joined bool // the layer was a running job's (Begin joined it)
	done   bool
	// checkpoints are the changes applied by the command's checkpoints,
	// for its final report.
	checkpoints []layer.Change
	// ending is closed when Commit or Abort begins, gone set before.
	ending  chan struct{}
	endOnce sync.Once
	gone    bool
}

// Spec is what the sandbox mounts (sandbox.Options.Layer).
func (t *Tx) Spec() layer.Spec { return t.spec }

// Roots are the layer's roots.
func (t *Tx) Roots() []string { return t.sh.l.Roots() }

// Shared reports whether the command joined the layer of a running
// background job instead of getting its own.
func (t *Tx) Shared() bool { return t.joined }

// Report is what a command's layer did to the workspace.
type Report struct {
	// Applied are the changes now in the workspace, in path order.
	Applied []layer.Change
	// Refused are the changes policy kept out (package gitpolicy).
	Refused []gitpolicy.Refusal
	// Failed are changes that could not be applied (the workspace
	// changed meanwhile, the disk is full).
	Failed []layer.Failure
	// Step is the undo step that holds what Applied replaced (0: none).
	Step int
	// NotApplied says why nothing was applied ("" when it was): the
	// command's processes were not known to be gone, or it shares its
	// layer with a command that runs on and cannot be frozen.
	NotApplied string
	// Discarded reports that the command's changes are lost: they were
	// not applied and never will be (processes not known to be gone).
	// A deferred apply (the shared layer's last command applies them)
	// is not discarded.
	Discarded bool
}

// Commit ends the command's transaction: when gone (every process of
// the command is known to have ended), it computes the layer's change
// set, checks it against policy, applies what is allowed (one undo
// step) and removes the layer. Without gone it applies nothing (see the
// package doc). For a job that had checkpoints, Applied includes what
// they applied. When the layer is shared and other commands still run
// over it, Commit takes a checkpoint instead (see the package doc,
// "Background jobs"), and the last command's Commit removes it. An
// error means the change set could not be computed or applied at all;
// the layer is removed in every case, in the background (see the
// package doc, "Cost").
func (t *Tx) Commit(gone bool) (*Report, error) {
	return t.sh.end(t, gone, false)
}

// Abort ends the transaction of a command that never started, without
// applying anything of its own. Its layer is removed (in the
// background), unless other commands share it.
func (t *Tx) Abort() error {
	_, err := t.sh.end(t, true, true)
	return err
}

// Checkpoint applies what a job that still runs over the layer changed
// so far, by copying (see the package doc): its report's Applied are
// every change applied so far, Refused what this checkpoint refused.
// freeze must run its argument with every process of the job frozen,
// and report false when it cannot (the job has ended, or has no cgroup
// to freeze); then Checkpoint does nothing and returns nil. The other
// commands sharing the layer are frozen too (see the package doc);
// when one cannot be, Checkpoint does nothing either. The changes it
// applied are in the report, and again in Commit's.
func (t *Tx) Checkpoint(freeze func(func()) bool) (*Report, error) {
	sh := t.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if t.done {
		return nil, nil
	}
	var rep *Report
	var err error
	if !frozen(append([]func(func()) bool{freeze}, sh.freezers(t)...), func() { rep, err = sh.apply(t, true) }) {
		return nil, nil
	}
	if rep != nil {
		t.checkpoints = append(t.checkpoints, rep.Applied...)
		rep.Applied = slices.Clone(t.checkpoints)
	}
	return rep, err
}
