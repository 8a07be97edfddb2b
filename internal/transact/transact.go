//go:build linux

package transact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer"
)

// Options configure a [Manager].
type Options struct {
	// Dir holds the layers and the undo stores. It is made if missing
	// (0700), and what an earlier engine left there is removed: stores
	// keep their index in memory, so nothing in it outlives its engine.
	// Best on the workspaces' file system (see the package doc). New
	// marks it as the top of directory hierarchies (chattr +T), so that
	// ext4 places each layer in a block group of its own (see spread).
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
	// LockWait bounds how long a command's apply waits for another
	// process's apply on the same workspace (layer.Options.LockWait;
	// zero: 10 minutes); then its change set is held for review
	// instead.
	LockWait time.Duration
}

// Manager makes the layers of the commands of every conversation (see
// [Manager.Conversation]). It is safe for concurrent use.
type Manager struct {
	opts   Options
	mu     sync.Mutex
	closed bool
	serial int
	pool   *pool
	held   map[*layer.Layer]bool // layers of held change sets (Close removes them)
}

// Conv is one conversation's transactions: its undo store, made on
// first apply, the turn its commands take to apply, and the layers of
// its running background jobs. Its owner (the supervisor's record of
// the conversation) removes it with [Conv.End]. It is safe for
// concurrent use.
type Conv struct {
	m   *Manager
	dir string // the store's directory
	// turn is the conversation's turn to apply, undo or accept (see
	// lockCtx); it guards store.
	turn  chan struct{}
	store *layer.Store // nil until a command changed something

	mu     sync.Mutex
	shares []*share // layers of running background jobs, which later commands join
	bg     []*Tx    // the running background jobs, oldest first (Checkpoint)

	// hmu guards the fields below. It is taken last and held briefly,
	// so that a call that stopped waiting for the turn can still hold
	// its change set, and reads need no turn.
	hmu sync.Mutex
	// live are the undo steps applied from layers still in use (by
	// checkpoints).
	live map[int]*share
	// held are the change sets kept for review, oldest first; heldN
	// numbers them. What takes one out holds the turn too.
	held  []*Held
	heldN int
	view  view
}

// New makes a Manager, removing what an earlier engine left in
// opts.Dir.
func New(opts Options) (*Manager, error) {
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	spread(opts.Dir)
	if err := layer.RemoveStale(opts.Dir); err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	if err := removeStores(opts.Dir); err != nil {
		return nil, err
	}
	return &Manager{opts: opts, pool: newPool(opts.Dir, opts.UserXattr, opts.Premount, opts.LockWait)}, nil
}

// removeStores removes the undo stores' directories in dir.
func removeStores(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("transact: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), storePrefix) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("transact: stale undo store: %w", err)
			}
		}
	}
	return nil
}

// storePrefix starts the name of every store's directory.
const storePrefix = "undo-"

// ErrClosed is returned after [Manager.Close].
var ErrClosed = errors.New("transact: closed")

// Conversation returns the state of a new conversation, with a store
// of its own.
func (m *Manager) Conversation() *Conv {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.serial++
	return &Conv{m: m, dir: filepath.Join(m.opts.Dir, fmt.Sprintf("%s%d", storePrefix, m.serial)), turn: make(chan struct{}, 1)}
}

// Begin makes the layer of a command of c over roots (the directories
// it may write; see [Roots]); label names it in the undo store (the
// command). Start the command with [Tx.Spec] mounted, then call
// [Tx.Commit] (or [Tx.Abort] if it never started).
func (c *Conv) Begin(roots []string, label string) (*Tx, error) {
	return c.begin(roots, label, false)
}

func (c *Conv) begin(roots []string, label string, hold bool) (*Tx, error) {
	m := c.m
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	k := key(roots) // once: it resolves every root's symlinks
	if t := m.join(c, k, label, hold); t != nil {
		t.unwalk = gitpolicy.Prefetch(t.Roots())
		return t, nil
	}
	l, err := m.pool.layer(k, roots)
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	t := &Tx{m: m, c: c, label: label, spec: l.Spec(), ending: make(chan struct{})}
	t.sh = &share{l: l, key: k, live: []*Tx{t}, hold: hold}
	// The walk for repositories the check reads runs while the command
	// does (released once its changes are checked: share.end).
	t.unwalk = gitpolicy.Prefetch(l.Roots())
	return t, nil
}

// Checkpoint applies what each running background job of c changed so
// far ([Tx.Checkpoint], with the freeze its [Tx.Background] was
// given), oldest first; each job's report is then its [Tx.Last]. ctx
// bounds each one's wait for c's turn (see Tx.Checkpoint).
func (c *Conv) Checkpoint(ctx context.Context) {
	c.mu.Lock()
	bg := slices.Clone(c.bg)
	c.mu.Unlock()
	for _, t := range bg {
		_, _ = t.Checkpoint(ctx, t.freezer())
	}
}

// storeMade returns c's store, made on first use; c's turn is held.
func (c *Conv) storeMade() (*layer.Store, error) {
	if c.store == nil {
		s, err := layer.NewStore(c.dir, c.m.opts.Limits)
		if err != nil {
			return nil, fmt.Errorf("transact: undo store: %w", err)
		}
		s.SetCanon(indexCanon)
		c.store = s
	}
	return c.store, nil
}

// Undo puts the workspace back to before the last steps commands (and
// checkpoints) of c that changed something. It fails with a
// *layer.ConflictError naming the paths something changed since
// (nothing is undone then), with [ErrUndoLive], and with an error
// wrapping layer.ErrNothingToUndo when fewer steps are kept. It returns
// what it changed.
//
// ctx bounds only the waits: for c's turn (a command's apply, an undo
// or an accept of c under way) and for the workspace's apply lock
// (another engine's or conversation's apply; layer.Store.Undo). When
// it ends during one, Undo fails with an error wrapping
// layer.ErrLocked and ctx's error, having changed nothing: the
// workspace, the kept steps and what can be redone stay as they were,
// and the same undo can be asked again. Once it holds both it undoes
// whatever ctx says.
func (c *Conv) Undo(ctx context.Context, steps int) ([]layer.Change, error) {
	cs, _, err := c.Revert(ctx, Selection{Steps: steps})
	return cs, err
}

// Selection chooses what [Conv.Revert] takes back: one of its fields
// is set.
type Selection struct {
	// Steps takes back the last Steps steps.
	Steps int
	// Turn takes back every kept step of the turn, as one.
	Turn string
	// Paths takes back these paths (absolute; a directory stands for
	// what is below it) of the newest step that changed them; the step
	// keeps its other paths.
	Paths []string
	// Redo takes back the last undo (layer.Store.Redo).
	Redo bool
}

// Revert takes back what sel chooses (see [Conv.Undo] for its errors,
// and for ctx, which bounds its waits as Undo's; a redo with nothing
// to redo wraps layer.ErrNothingToRedo) and returns what it changed
// and the numbers of the steps it undid or put back.
func (c *Conv) Revert(ctx context.Context, sel Selection) ([]layer.Change, []int, error) {
	if sel.Steps < 0 || sel.Steps == 0 && sel.Turn == "" && len(sel.Paths) == 0 && !sel.Redo {
		return nil, nil, fmt.Errorf("transact: steps must be at least 1, not %d", sel.Steps)
	}
	if err := c.lockCtx(ctx); err != nil {
		return nil, nil, err
	}
	defer c.unlock()
	if c.store == nil {
		if sel.Redo {
			return nil, nil, fmt.Errorf("transact: %w: the conversation changed nothing", layer.ErrNothingToRedo)
		}
		return nil, nil, fmt.Errorf("transact: %w: the conversation changed nothing", layer.ErrNothingToUndo)
	}
	if sel.Redo {
		return c.store.Redo(ctx)
	}
	ns, err := c.chosen(sel)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case sel.Turn != "":
		cs, err := c.store.UndoTurn(ctx, sel.Turn)
		return cs, ns, err
	case len(sel.Paths) > 0:
		cs, n, err := c.store.UndoPaths(ctx, sel.Paths)
		return cs, []int{n}, err
	}
	cs, err := c.store.Undo(ctx, sel.Steps)
	return cs, ns, err
}

// chosen returns the numbers of the kept steps sel takes back, failing
// with ErrUndoLive when one was applied from a layer still in use; c's
// turn is held.
func (c *Conv) chosen(sel Selection) ([]int, error) {
	kept := c.store.Steps()
	var ns []int
	switch {
	case sel.Turn != "":
		ns = c.store.TurnSteps(sel.Turn)
	case len(sel.Paths) > 0:
		n, err := c.store.PathsStep(sel.Paths)
		if err != nil {
			return nil, err
		}
		ns = []int{n}
	default:
		for _, s := range kept[max(0, len(kept)-sel.Steps):] {
			ns = append(ns, s.N)
		}
	}
	c.hmu.Lock()
	defer c.hmu.Unlock()
	for _, s := range kept {
		if c.live[s.N] != nil && slices.Contains(ns, s.N) {
			return nil, fmt.Errorf("%w (%s)", ErrUndoLive, s.Label)
		}
	}
	return ns, nil
}

// ErrUndoLive is Undo's refusal to take back a step applied from the
// layer of a background job that still runs (a checkpoint, or a command
// that joined the layer): the job, and the commands that join its
// layer, would go on seeing the changes, and apply them again.
var ErrUndoLive = errors.New("transact: the changes to undo are still in the layer of a background job that runs: end the job first")

// Steps lists the steps c can undo, oldest first, as the last apply,
// undo or accept of c left them: it never waits for one under way.
func (c *Conv) Steps() []layer.StepInfo {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	return slices.Clone(c.view.steps)
}

// Bytes is what c's undo store keeps, in bytes, for undo and redo
// (what the engine counts against the conversation's quota), as the
// last apply, undo or accept of c left it: it never waits for one
// under way.
func (c *Conv) Bytes() int64 {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	n := c.view.redo
	for _, s := range c.view.steps {
		n += s.Bytes
	}
	return n
}

// End removes c's undo store and its held change sets (the
// conversation ended; nil-safe). Its
// commands' layers are removed by their Commit or Abort.
func (c *Conv) End() error {
	if c == nil {
		return nil
	}
	c.lock()
	defer c.unlock()
	c.dropAllHeld()
	if c.store == nil {
		return nil
	}
	err := c.store.Remove()
	c.store = nil
	return err
}

// Close removes the layers made ahead of time, those of committed
// commands that were still to be removed, and the stores of
// conversations not ended; later Begins fail with ErrClosed (a Commit
// or Abort after it removes its layer itself).
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	held := m.held
	m.held = nil
	m.mu.Unlock()
	m.pool.close()
	for l := range held {
		_ = l.Remove()
	}
	return removeStores(m.opts.Dir)
}

// Tx is one command's layer, from before it starts until what it
// changed is applied. Its layer may be shared with other commands of
// the conversation (see the package doc, "Background jobs").
type Tx struct {
	m     *Manager
	c     *Conv
	sh    *share
	spec  layer.Spec
	label string
	turn  string // the client's turn (SetTurn), recorded with its undo steps
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
	// unwalk releases the walk of its roots (gitpolicy.Prefetch).
	unwalk func()

	// cpu is the engine's CPU time spent on t's change sets so far (its
	// checkpoints'), guarded by sh.mu.
	cpu time.Duration

	rmu     sync.Mutex
	last    *Report // the last checkpoint's report, Commit's once ended
	lastErr error
	final   bool // Commit or Abort returned
}

// Last returns the report of t's last checkpoint that applied or failed
// (nil, nil: none yet), or once t ended its Commit's.
func (t *Tx) Last() (*Report, error) {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	return t.last, t.lastErr
}

// setLast records a report; a checkpoint's (final false) is dropped
// once Commit recorded its own.
func (t *Tx) setLast(rep *Report, err error, final bool) {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	if t.final {
		return
	}
	t.last, t.lastErr, t.final = rep, err, final
}

// freezer returns the freeze t's Background was given (nil: none).
func (t *Tx) freezer() func(func()) bool {
	t.sh.mu.Lock()
	defer t.sh.mu.Unlock()
	return t.freeze
}

// SetTurn names the client's turn of t's command (before it starts):
// the undo steps its changes make record it (layer.Store.SetTurn).
func (t *Tx) SetTurn(turn string) { t.turn = turn }

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
	// Step is the undo step that holds what Applied replaced (0: none);
	// Turn is the turn it records ([Tx.SetTurn]).
	Step int
	Turn string
	// NotApplied says why nothing was applied ("" when it was): the
	// command's processes were not known to be gone, or it shares its
	// layer with a command that runs on and cannot be frozen.
	NotApplied string
	// Discarded reports that the command's changes were not applied and
	// will not be on their own (processes not known to be gone): they
	// are held for review (Held), or lost when there was nothing to
	// hold or the layer could not be diffed. It is set too when
	// changes that would have been held were discarded (Unheld; what
	// policy allowed may have been applied then). A deferred apply (the
	// shared layer's last command applies them) is not discarded.
	Discarded bool
	// Held is the part of the change set kept for review instead of
	// applied (nil: none): what policy refused, everything in the
	// command's hold mode ([Conv.BeginHeld]), or a Discarded
	// change set. See [Conv.Accept].
	Held *Held
	// CPU is the engine's CPU time spent on the change set: diffing it,
	// judging it (policy), applying or holding it, for a command's
	// Commit its checkpoints' too (measured on the working thread:
	// getrusage RUSAGE_THREAD; waiting for a lock or a freeze is not
	// counted). The engine charges it to the command's principal.
	CPU time.Duration
	// Unheld says why changes that would have been held were discarded
	// instead ("" when none were): the conversation holds as many change
	// sets as it may (see maxHeld). Discarded is set then too.
	Unheld string
}

// Listed are the applied changes a listing shows: an added directory
// shows as its files (layer.Listed; nil-safe).
func (r *Report) Listed() []layer.Change {
	if r == nil {
		return nil
	}
	return layer.Listed(r.Applied)
}

// Summary is the one line that says what was applied, relative to cwd
// ("[changed 3 files: M src/a.go, A b.txt, D old.txt]", capped: see
// layer.Summary); "" when nothing was (nil-safe).
func (r *Report) Summary(cwd string) string {
	if r == nil {
		return ""
	}
	return layer.Summary(r.Applied, cwd, 0)
}

// Commit ends the command's transaction: when gone (every process of
// the command is known to have ended), it computes the layer's change
// set, checks it against policy, applies what is allowed (one undo
// step) and removes the layer. Without gone it applies nothing (see the
// package doc). For a job that had checkpoints, Applied includes what
// they applied; for a command over a shared layer, what another
// command's apply took from the layer once this Commit began (it is
// listed by both). When the layer is shared and other commands still run
// over it, Commit takes a checkpoint instead (see the package doc,
// "Background jobs"), and the last command's Commit removes it. An
// error means the change set could not be computed or applied at all;
// the layer is removed in every case, in the background (see the
// package doc, "Cost"), unless it holds changes for review.
//
// ctx bounds only the waits: for the conversation's turn (another
// command's apply, an undo or an accept of the conversation under way)
// and for another apply to the workspace (another engine's or
// conversation's; see layer.Options.LockWait). When ctx ends during
// one, Commit applies nothing, holds the whole change set for review
// (Report.Held, each path's reason saying the call ended; nothing is
// lost, nothing half applied: accept or reject it as any held change
// set) and returns the report with an error wrapping layer.ErrLocked
// and ctx's error. A command sharing its layer with a job that runs on
// applies nothing either then (its checkpoint): the changes stay in
// the layer, for the job's next checkpoint or its Commit. A
// conversation and workspace that are free are applied to whatever ctx
// says.
func (t *Tx) Commit(ctx context.Context, gone bool) (*Report, error) {
	var rep *Report
	var err error
	cpu := threadCPU(func() { rep, err = t.sh.end(ctx, t, gone, false) })
	if rep != nil {
		t.sh.mu.Lock()
		t.cpu += cpu
		rep.CPU = t.cpu
		t.sh.mu.Unlock()
	}
	t.setLast(rep, err, true)
	return rep, err
}

// threadCPU runs f on a locked OS thread and returns the CPU time that
// thread spent (user and system: getrusage RUSAGE_THREAD), which is
// f's own unless f waits for other goroutines' work. Zero when it
// cannot be read.
func threadCPU(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after unix.Rusage
	errBefore := unix.Getrusage(unix.RUSAGE_THREAD, &before)
	f()
	if errBefore != nil || unix.Getrusage(unix.RUSAGE_THREAD, &after) != nil {
		return 0
	}
	used := func(r *unix.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return max(0, used(&after)-used(&before))
}

// Abort ends the transaction of a command that never started, without
// applying anything of its own. Its layer is removed (in the
// background), unless other commands share it.
func (t *Tx) Abort() error {
	_, err := t.sh.end(context.Background(), t, true, true)
	t.setLast(nil, nil, true)
	return err
}

// Checkpoint applies what a job that still runs over the layer changed
// so far, by copying (see the package doc): its report's Applied are
// every change applied so far, Refused what this checkpoint refused.
// freeze must run its argument with every process of the job frozen,
// and report false when it cannot (the job has ended, or has no cgroup
// to freeze); then Checkpoint does nothing and returns nil. A report or
// error is t's [Tx.Last] too. The other
// commands sharing the layer are frozen too (see the package doc);
// when one cannot be, Checkpoint does nothing either. The changes it
// applied are in the report, and again in Commit's.
//
// Nothing is frozen until Checkpoint holds the conversation's turn
// (another command's apply, an undo or an accept may hold it). ctx
// bounds that wait, and the wait for another apply to the workspace:
// when it ends during one, Checkpoint applies nothing (the changes stay
// in the layer, for a later checkpoint or Commit) and returns an error
// wrapping layer.ErrLocked and ctx's error, which is not t's Last (the
// job did nothing wrong).
func (t *Tx) Checkpoint(ctx context.Context, freeze func(func()) bool) (*Report, error) {
	sh := t.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if t.done {
		return nil, nil
	}
	var rep *Report
	var err error
	ran, werr := sh.frozen(ctx, t, append([]func(func()) bool{freeze}, sh.freezers(t)...), func() {
		t.cpu += threadCPU(func() { rep, err = sh.applyLive(ctx, t) })
	})
	if werr != nil {
		return nil, werr
	}
	if !ran {
		return nil, nil
	}
	if errors.Is(err, layer.ErrLocked) && ctx.Err() != nil {
		return nil, err // the caller stopped waiting for the workspace: not the job's
	}
	if rep != nil {
		t.checkpoints = append(t.checkpoints, rep.Applied...)
		rep.Applied = slices.Clone(t.checkpoints)
	}
	if rep != nil || err != nil {
		t.setLast(rep, err, false)
	}
	return rep, err
}
