package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/bashvisor/bashvisor/internal/actors"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// workspace is what a conversation's commands run in and change: its
// world (sandbox.World: /tmp, caches, loopback), made on first use, and
// its transactions (transact.Conv: the undo store and the layers of its
// running background jobs). The supervisor's record of the
// conversation owns it; the slow work on it (making the world, the
// layers' begin, checkpoints and undo) runs in the callers' goroutines,
// never on the supervisor actor. It is safe for concurrent use.
type workspace struct {
	s   *Supervisor
	key string // names its directories (conversationKey)

	mu     sync.Mutex
	world  *sandbox.World
	broker *convBroker    // made on first use (nil: none yet, or no Config.Broker)
	tx     *transact.Conv // nil: none made yet (conv), or no layers on this host
	closed bool
}

func (s *Supervisor) newWorkspace(conv string) *workspace {
	return &workspace{s: s, key: conversationKey(conv)}
}

// conv returns the conversation's transactions: made on first use when
// create is set (the first workspace-write job, or an undo or review),
// so that a conversation that never writes through a layer never probes
// the sandbox or makes the layers' directory. Nil: none made yet, or no
// layers on this host (or w is nil).
func (w *workspace) conv(create bool) *transact.Conv {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tx == nil && create && !w.closed {
		if m := w.s.layers(); m != nil {
			w.tx = m.Conversation()
		}
	}
	return w.tx
}

// conversationKey names a conversation's directories: a hash, so any
// conversation id makes a safe file name.
func conversationKey(conv string) string {
	sum := sha256.Sum256([]byte(conv))
	return "conversation-" + hex.EncodeToString(sum[:8])
}

// getWorld returns the conversation's world, making it on first use:
// its /tmp and caches (one tmpfs of Sandbox.Limits.ScratchBytes, on
// Sandbox.CacheDir/conversation-KEY), its loopback network, and the
// engine's directories hidden from its commands but for the
// conversation's own output directory. Each conversation has its own:
// caches two conversations share would let one's commands plant build
// outputs the other's builds then use.
func (w *workspace) getWorld() (*sandbox.World, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.world != nil {
		return w.world, nil
	}
	if w.closed {
		return nil, ErrShutdown
	}
	s := w.s
	lim := s.sandbox.Limits
	world, err := sandbox.NewWorld(sandbox.WorldOptions{
		Dir: filepath.Join(s.cacheRoot, w.key), Bytes: lim.ScratchBytes, Files: lim.ScratchFiles,
		BaseCaches: s.sandbox.BaseCaches, Helper: s.sandbox.HelperPath,
		Hide: []string{s.outDir, s.cacheRoot}, Show: []string{filepath.Join(s.outDir, w.key)},
	})
	if err != nil {
		if errors.Is(err, sandbox.ErrUnavailable) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the conversation's sandbox: %w", proc.ErrStart, err)
	}
	w.world = world
	return world, nil
}

// checkpoint applies what the conversation's running workspace-write
// background jobs changed so far (transact.Conv.Checkpoint), so that
// its next command, and a read of a job's output, see it.
func (w *workspace) checkpoint(ctx context.Context) {
	if c := w.conv(false); c != nil {
		c.Checkpoint(ctx)
	}
}

// undoBytes is what the conversation's undo store keeps.
func (w *workspace) undoBytes() uint64 {
	if c := w.conv(false); c != nil {
		return uint64(c.Bytes())
	}
	return 0
}

// heldBytes is what the conversation's held change sets hold.
func (w *workspace) heldBytes() uint64 {
	if c := w.conv(false); c != nil {
		return uint64(c.HeldBytes())
	}
	return 0
}

// prepare readies a job of the conversation before Launch, in the
// caller's goroutine: the running background jobs' checkpoints, and for
// a sandboxed job its world, the world's size for it, and with
// Profile.Layer its transaction (Begin). It fails with ctx's error
// when ctx ended meanwhile (the checkpoints stop waiting for another
// apply then, and the job must not start without them).
func (w *workspace) prepare(ctx context.Context, spec *actors.Spec) error {
	w.checkpoint(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	p := spec.Sandbox
	if p == nil {
		return nil
	}
	world, err := w.getWorld()
	if err != nil {
		return err
	}
	spec.World = world
	spec.WorldSize = w.s.worldSize(spec.Conversation, w).Size
	cb, err := w.getBroker()
	if err != nil {
		return fmt.Errorf("%w: %w", proc.ErrStart, err)
	}
	if cb != nil {
		cb.apply(spec)
	}
	if !p.Workspace || !p.Layer {
		return nil
	}
	c := w.conv(true)
	if c == nil {
		return fmt.Errorf("%w: the workspace layer is unavailable", ErrUnavailable)
	}
	roots, err := transact.Roots(spec.Dir)
	if err == nil {
		roots = append(roots, p.Writable...)
		err = world.CheckWorkspace(spec.Dir, roots) // before the layer is made
	}
	if err != nil {
		return fmt.Errorf("%w: %w", proc.ErrStart, err)
	}
	begin := c.Begin
	if p.Hold {
		begin = c.BeginHeld
	}
	tx, err := begin(roots, spec.Display)
	if err != nil {
		return fmt.Errorf("%w: %w", proc.ErrStart, err)
	}
	tx.SetTurn(spec.Turn)
	spec.Tx = tx
	return nil
}

// close closes the world and removes the undo store (the conversation
// ended, or the engine stops).
func (w *workspace) close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	world, cb, tx := w.world, w.broker, w.tx
	w.world, w.broker, w.closed = nil, nil, true
	w.mu.Unlock()
	var errs []error
	if cb != nil {
		errs = append(errs, os.RemoveAll(cb.dir))
	}
	if world != nil {
		if err := world.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the conversation's sandbox: %w", err))
		}
	}
	return errors.Join(append(errs, tx.End())...)
}

// WorldUsage is what a conversation's world holds against its quota
// (Sandbox.Limits.ScratchBytes).
type WorldUsage struct {
	// Used and Total are what its file system holds and its size (0, 0
	// without a world yet).
	Used, Total uint64
	// JobBytes is what its background jobs' output files hold on disk;
	// UndoBytes what its undo store and its held change sets keep.
	JobBytes, UndoBytes uint64
	// Size is what its world may hold when its next command starts: the
	// quota less JobBytes and UndoBytes, at least 1 MiB.
	Size uint64
}

// worldSize measures a conversation's quota (see WorldUsage).
func (s *Supervisor) worldSize(conv string, w *workspace) WorldUsage {
	var u WorldUsage
	q := s.sandbox.Limits.WithDefaults().ScratchBytes
	for _, st := range s.Jobs(conv) {
		if st.Output != nil {
			u.JobBytes += uint64(st.Output.DiskSize())
		}
	}
	u.UndoBytes = w.undoBytes() + w.heldBytes()
	u.Size = 1 << 20
	if u.JobBytes+u.UndoBytes+1<<20 < q {
		u.Size = q - u.JobBytes - u.UndoBytes
	}
	if w != nil {
		w.mu.Lock()
		world := w.world
		w.mu.Unlock()
		if world != nil {
			if used, total, err := world.Usage(); err == nil {
				u.Used, u.Total = used, total
			}
		}
	}
	return u
}

// World returns what conversation conv's world holds against its quota.
func (s *Supervisor) World(conv string) WorldUsage { return s.worldSize(conv, s.workspace(conv)) }

// Checkpoint applies what conversation conv's running workspace-write
// background jobs changed so far to its workspace (each job frozen
// meanwhile), in the calling goroutine; their reports are then in Jobs.
// It waits at most checkpointWait for the conversation's turn and the
// workspace (another call's apply, another engine's): then it applies
// nothing and the changes wait for the next checkpoint or the job's end.
func (s *Supervisor) Checkpoint(conv string) {
	ctx, cancel := context.WithTimeout(context.Background(), checkpointWait)
	defer cancel()
	s.workspace(conv).checkpoint(ctx)
}

// checkpointWait bounds Checkpoint's waits: a read of a job's output
// (its caller) must not wait for another apply, which may take minutes
// (another engine's, up to its lock wait), nor keep the job frozen, nor
// hold back the job's own end meanwhile.
const checkpointWait = 2 * time.Second

// Undo takes back the last steps changes of conversation conv to its
// workspace (see transact.Conv.Undo), and returns what it changed (as
// the report's Applied: an undone addition is a deletion) and how many
// steps were kept before.
//
// Its errors match ErrNothingToUndo, ErrUndoLive, or are an
// *UndoConflictError (nothing was undone then). ctx bounds its waits
// for another apply, undo or accept (see transact.Conv.Undo): when it
// ends during one, Undo changes nothing and fails with an error
// wrapping ctx's.
func (s *Supervisor) Undo(ctx context.Context, conv string, steps int) (jobs.Changes, int, error) {
	c, _, kept, err := s.Revert(ctx, conv, Selection{Steps: steps})
	return c, kept, err
}

// Selection chooses what Revert takes back (transact.Selection): the
// last Steps steps, a Turn's, one step's Paths, or the last undo
// (Redo).
type Selection struct {
	Steps int
	Turn  string
	Paths []string
	Redo  bool
}

// Revert takes back what sel chooses of conversation conv's changes
// (transact.Conv.Revert: the last steps, a turn's, one step's paths,
// or the last undo), and returns what it changed, the numbers of the
// steps it undid or put back, and how many steps were kept before. Its
// errors are Undo's (nothing to redo matches ErrNothingToUndo), and
// ctx bounds its waits as Undo's.
func (s *Supervisor) Revert(ctx context.Context, conv string, sel Selection) (jobs.Changes, []int, int, error) {
	c := s.workspace(conv).conv(true)
	if c == nil {
		return jobs.Changes{}, nil, 0, fmt.Errorf("%w: the conversation changed nothing", ErrNothingToUndo)
	}
	kept := len(c.Steps())
	cs, ns, err := c.Revert(ctx, transact.Selection(sel))
	if err != nil { // cs: what an undo or redo that stopped did restore
		return jobs.Changes{Report: &transact.Report{Applied: cs}}, nil, kept, own(err)
	}
	return jobs.Changes{Report: &transact.Report{Applied: cs}}, ns, kept, nil
}

// Held lists conversation conv's change sets held for review, oldest
// first, as they are now (transact.Conv.Held), each as the Held of a
// report. ctx bounds its wait for an accept, apply or undo of conv
// under way (its error wraps ctx's then).
func (s *Supervisor) Held(ctx context.Context, conv string) ([]jobs.Changes, error) {
	c := s.workspace(conv).conv(true)
	if c == nil {
		return nil, nil
	}
	hs, err := c.Held(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]jobs.Changes, 0, len(hs))
	for i := range hs {
		out = append(out, jobs.Changes{Report: &transact.Report{Held: &hs[i]}})
	}
	return out, nil
}

// Review accepts (transact.Conv.Accept, with the digest of the held
// changes as listed) or rejects held change set id of conversation
// conv, and returns what accepting applied. Its errors match
// ErrNoHeld, ErrDigest or ErrStray when it applied nothing, or
// ErrConflict, as an *UndoConflictError naming the held paths that
// changed in the workspace since the command ran (transact.ErrConflict;
// nothing applied either).
//
// The engine's CPU time an accept spent is charged to principal (a
// call's Principal: "" for the conversation's own), as a job's change
// set is (see chargeEngine). ctx bounds the wait for another call of
// conv and for another apply to the workspace (transact.Conv.Accept,
// transact.Conv.Reject): when it ends during it, nothing is applied or
// rejected, and the error wraps ctx's.
func (s *Supervisor) Review(ctx context.Context, conv, principal string, id int, digest string, accept bool) (jobs.Changes, error) {
	c := s.workspace(conv).conv(true)
	if c == nil {
		return jobs.Changes{}, fmt.Errorf("%w: %d", ErrNoHeld, id)
	}
	if !accept {
		return jobs.Changes{}, own(c.Reject(ctx, id))
	}
	rep, err := c.Accept(ctx, id, digest)
	if rep != nil && rep.CPU > 0 { // a refused accept's work counts too
		s.system.Root.Send(s.pid, &engineCharge{conv: conv, pk: principalKey(jobs.Request{Conversation: conv, Principal: principal}), cpu: rep.CPU})
	}
	if err != nil {
		return jobs.Changes{}, own(err)
	}
	return jobs.Changes{Report: rep}, nil
}

// SandboxMain runs the sandbox's helper and exits when the process was
// started as one (sandbox.Main); otherwise it returns at once.
func SandboxMain() { sandbox.Main() }

// workspace returns conversation conv's workspace, nil when the
// supervisor has no record of it.
func (s *Supervisor) workspace(conv string) *workspace {
	reply := make(chan *workspace, 1)
	s.system.Root.Send(s.pid, &workspaceRequest{conv: conv, reply: reply})
	select {
	case w := <-reply:
		return w
	case <-s.done:
		return nil
	}
}

// changesOf is a running job's last report.
func changesOf(tx *transact.Tx) jobs.Changes {
	if tx == nil {
		return jobs.Changes{}
	}
	rep, err := tx.Last()
	return jobs.Changes{Report: rep, Err: err}
}
