package actors

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/egress"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/proc"
	"github.com/bashvisor/bashvisor/internal/render"
	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/transact"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// Launched is a job's started process, handed to the job's actor (send it
// as a message), which owns it from then on.
type Launched struct {
	start   time.Time
	p       *proc.Process
	applied jobs.Applied     // the limits it runs under
	cg      *proc.Cgroup     // nil: the process group is the unit
	sbx     *sandbox.Command // restricted jobs
	fz      *proc.Freezer    // a restricted job without a cgroup: its mount namespace
	live    *proc.Handle     // reads and freezes it (cg, or fz)
	tx      *transact.Tx     // Spec.Tx
	proxy   *egress.Proxy    // restricted jobs with network
	refused refusals         // what proxy refused
	out     *truncate.Buffer // foreground output
	errBuf  *truncate.Buffer // foreground stderr with separate streams
	file    *truncate.File   // a background job's output file
	stdin   *os.File         // the job's stdin pipe or terminal input (Spec.Stdin, Spec.TTY)
}

// Pid is the pid of the job's shell, which is also its process group id.
func (l *Launched) Pid() int { return l.p.Pid }

// Cgroup is the job's cgroup (nil: the process group is the unit), for
// reading what it uses while it runs; the job's actor owns it.
func (l *Launched) Cgroup() *proc.Cgroup { return l.cg }

// Output is a foreground job's live output buffer (nil for a background
// job), for progress reports.
func (l *Launched) Output() *truncate.Buffer { return l.out }

// Launch starts spec's process in the calling goroutine: its cgroup and
// limits, its sandbox, its output pipe or file, and the fork. Starting
// here, rather than in the actor, keeps the fork from waiting for actors
// to be scheduled. On error nothing is left behind.
//
// A background job writes into a pipe (or its terminal) that its actor
// copies into its output file, through the redactor when there are secret
// values to redact (res.Redactor), and bounded (Resources.JobFileCap, see
// truncate.File).
//
// The limits (spec.Limits) go on the job's cgroup where it has the
// controller; otherwise memory and CPU time become rlimits of each process
// (see Limits), which an unrestricted job gets with prlimit(2) right after
// the fork: the shell runs only its own start-up before that (a few
// hundred µs, in which it forks nothing), and processes it forks later
// inherit them. A restricted job gets them before it runs anything, as the
// lower of these and the sandbox's own rlimits.
func Launch(spec *Spec, res *Resources) (_ *Launched, err error) {
	l := &Launched{start: time.Now(), applied: jobs.Applied{Limits: spec.Limits}}
	// One cleanup, keyed on success (as os/exec's Cmd.Start): whatever
	// was set up is released when Launch fails.
	defer func() {
		if err != nil {
			l.undo()
		}
	}()
	lim := spec.Limits
	ps := proc.Spec{
		Path: res.Bash, Args: []string{"bash", "-c", spec.Script}, Dir: spec.Dir,
		SeparateStderr: res.SeparateStreams && !spec.Background && spec.TTY == nil && spec.Yield == nil,
		Stdin:          spec.Stdin,
	}
	if spec.TTY != nil {
		ps.TTY = (*proc.Winsize)(spec.TTY)
	}
	extra := spec.ExtraEnv
	var memCtl, pidsCtl bool
	if res.Cgroups != nil {
		name := spec.Name
		if name == "" {
			name = spec.ID
		}
		cg, err := res.Cgroups.New(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", proc.ErrStart, err)
		}
		l.cg, ps.Cgroup = cg, cg
		memCtl, pidsCtl = cg.Controllers()
		var pl proc.Limits
		if memCtl {
			pl.Memory = lim.Memory
		}
		if pidsCtl {
			pl.Pids = lim.Processes
		} else {
			l.applied.Processes = 0
		}
		if err := cg.SetLimits(pl); err != nil {
			return nil, fmt.Errorf("%w: %w", proc.ErrStart, err)
		}
	} else {
		l.applied.Processes = 0
	}
	// The rlimit fallbacks.
	l.applied.MemoryPerProcess = lim.Memory > 0 && !memCtl
	l.applied.CPUPerProcess = lim.CPUTime > 0 && l.cg == nil
	cpuSeconds := uint64((lim.CPUTime + time.Second - 1) / time.Second)
	if spec.Sandbox != nil {
		sc, err := l.sandboxed(spec, res, cpuSeconds, pidsCtl)
		if err != nil {
			return nil, err
		}
		extra = append(extra[:len(extra):len(extra)], sc.Env...)
		if res.Sandbox.Helper {
			ps.Launch = sc.StartHelper
		} else {
			ps.Launch = sc.StartDirect
		}
	}
	env, dropped := res.Env.With(extra, spec.Env)
	if len(dropped) > 0 && res.Log != nil {
		res.Log.Warn("dropped environment overrides", "names", dropped, "conversation", spec.Conversation)
	}
	ps.Env = env
	if spec.Background {
		f, err := truncate.CreateFile(spec.OutputFile, res.JobFileCap)
		if err != nil {
			return nil, fmt.Errorf("%w: output file: %w", proc.ErrStart, err)
		}
		l.file = f
	}
	if l.p, err = proc.Start(ps); err != nil {
		return nil, err
	}
	if l.cg == nil {
		res.Watchdog.Track(l.p.Pid) // its cgroup is the engine's otherwise, which the watchdog knows
		if l.sbx != nil {
			// Its processes, those that left its process group too, are
			// found in its mount namespace (see sandbox.Command.Freezer).
			l.fz = l.sbx.Freezer(l.p.Pid)
		}
	}
	l.stdin = l.p.Stdin
	if spec.Sandbox == nil {
		if err := l.setRlimits(lim, cpuSeconds); err != nil {
			return nil, fmt.Errorf("%w: %w", proc.ErrStart, err)
		}
	}
	if !spec.Background {
		tc := bufferConfig(spec, res.Truncate)
		l.out = truncate.New(tc)
		if l.p.Stderr != nil {
			l.errBuf = truncate.New(tc)
		}
	}
	l.live = proc.NewHandle(l.cg, l.fz)
	if l.tx = spec.Tx; l.tx != nil && spec.Background {
		l.tx.Background(l.live.Freeze) // may wait for a checkpoint of a layer it joined
	}
	return l, nil
}

// sandboxed prepares a restricted job's sandbox (and its egress proxy):
// its limits are the lower of the job's rlimit fallbacks and the
// sandbox's own, its roots the layer of its transaction (Spec.Tx), or
// the workspace's protected roots, or Writable only.
func (l *Launched) sandboxed(spec *Spec, res *Resources, cpuSeconds uint64, pidsCtl bool) (*sandbox.Command, error) {
	p, lim := spec.Sandbox, spec.Limits
	sl := res.Sandbox.Limits
	def := sl.WithDefaults()
	if l.applied.MemoryPerProcess && uint64(lim.Memory) < def.AddressSpace {
		sl.AddressSpace = uint64(lim.Memory)
	}
	if l.applied.CPUPerProcess && cpuSeconds < def.CPUSeconds {
		sl.CPUSeconds = cpuSeconds
	}
	opts := sandbox.Options{
		Limits: sl, Bash: res.Bash, Command: spec.Script, Cgroup: l.cg,
		Helper: res.Sandbox.HelperPath, ScratchRoot: res.Sandbox.ScratchRoot,
		World: spec.World, WorldSize: spec.WorldSize, Dir: spec.Dir, Network: p.Network != nil, LoopbackViaProxy: p.Network.NamesLoopback(),
		Carry: p.Network.Ports(), ProxyEnv: p.ProxyEnv, Masks: spec.Masks, NoTCP: p.Contained,
		// A command that runs because its result is reviewed (or the
		// read-only sandbox answers its ask), or whose every change is
		// reviewed, writes a /tmp and caches no later command reads.
		ThrowawayCaches: p.Contained || p.Hold,
	}
	switch {
	case spec.Tx != nil:
		// The layer's overlays replace protecting paths.
		ls := spec.Tx.Spec()
		opts.Roots, opts.Layer = sandbox.Roots{Writable: spec.Tx.Roots()}, &ls
	case p.Workspace:
		roots, err := sandbox.WorkspaceRoots(spec.Dir)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", proc.ErrStart, err)
		}
		opts.Roots = roots
		opts.Roots.Writable = append(opts.Roots.Writable, p.Writable...)
	default:
		opts.Roots.Writable = append(opts.Roots.Writable, p.Writable...)
	}
	sc, err := sandbox.Prepare(opts)
	if err != nil {
		if errors.Is(err, sandbox.ErrUnavailable) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", proc.ErrStart, err)
	}
	l.sbx = sc
	if p.Network != nil {
		l.proxy = egress.Start(sc.Proxy(), egress.Policy{Allow: p.Network, Broker: p.Broker, Log: func(d egress.Decision) {
			if !d.Allowed {
				dest := d.Host // a name the resolver refused
				if d.Port != 0 {
					dest = net.JoinHostPort(d.Host, strconv.Itoa(d.Port))
				}
				l.refused.add(dest)
			}
			if p.OnProxy != nil {
				p.OnProxy(d)
			}
		}})
		if err := l.serveCapture(sc); err != nil {
			return nil, fmt.Errorf("%w: %w", proc.ErrStart, err)
		}
	}
	if pidsCtl {
		l.applied.Processes = l.cg.Limits().Pids // the stricter of the two
	}
	return sc, nil
}

// bufferConfig is the configuration of a foreground job's output buffer:
// its own spool directory, its own smaller output bound (head and tail
// then parts of it), and a terminal's byte stream shown as its screen.
func bufferConfig(spec *Spec, tc truncate.Config) truncate.Config {
	if spec.OutputMax > 0 && (tc.Max <= 0 || spec.OutputMax < tc.Max) {
		tc.Max, tc.Head, tc.Tail = spec.OutputMax, 0, 0
	}
	if spec.SpoolDir != "" && tc.SpoolDir != "" {
		tc.SpoolDir = spec.SpoolDir
	}
	if spec.TTY != nil && tc.Render != render.Raw {
		tc.Render, tc.Screen = render.Terminal, render.Size{Cols: int(spec.TTY.Cols), Rows: int(spec.TTY.Rows)}
	}
	return tc
}

// setRlimits applies the rlimit fallbacks to an unrestricted job's shell.
func (l *Launched) setRlimits(lim config.Limits, cpuSeconds uint64) error {
	if l.applied.MemoryPerProcess {
		if err := l.p.SetRlimit(unix.RLIMIT_AS, uint64(lim.Memory), uint64(lim.Memory)); err != nil {
			return err
		}
	}
	if l.applied.CPUPerProcess {
		// SIGXCPU at the soft limit, SIGKILL at the hard one.
		if err := l.p.SetRlimit(unix.RLIMIT_CPU, cpuSeconds, cpuSeconds+5); err != nil {
			return err
		}
	}
	return nil
}

// closePipes closes the read ends of a started process's pipes.
func (l *Launched) closePipes() {
	for _, f := range []*os.File{l.p.Stdout, l.p.Stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// undo releases what a failed Launch had set up: a process it started
// is killed and reaped first.
func (l *Launched) undo() {
	if l.p != nil {
		_ = l.p.SignalGroup(syscall.SIGKILL)
		_, _ = l.p.Wait()
		l.closePipes()
		l.fz.Close()
	}
	if l.stdin != nil {
		l.stdin.Close()
	}
	l.closeProxy()
	if l.sbx != nil {
		_ = l.sbx.Cleanup(true) // nothing ever ran in it
	}
	if l.cg != nil {
		l.cg.Remove()
	}
	if l.file != nil {
		_ = l.file.Close()
		_ = os.Remove(l.file.Path())
	}
}

// serveCapture adds to the job's proxy the resolver and carried
// listeners of its world (sandbox.Options.Carry): names the allowlist
// allows resolve to the capture address, whose listeners carry what
// clients that ignore the proxy variables send there.
func (l *Launched) serveCapture(sc *sandbox.Command) error {
	if sc.Resolver == nil && sc.ResolverTCP == nil {
		return nil
	}
	if err := l.proxy.Resolve(sc.Resolver, sc.ResolverTCP, sc.Capture); err != nil {
		return err
	}
	for port, cl := range sc.Carried {
		if err := l.proxy.Carry(cl, port); err != nil {
			return err
		}
	}
	return nil
}

// closeProxy stops a restricted job's egress proxy (its processes are
// gone, or about to be) and returns its final report (nil without one).
func (l *Launched) closeProxy() egress.Report {
	if l.proxy == nil {
		return nil
	}
	_ = l.proxy.Close()
	r := l.proxy.Report()
	l.proxy = nil
	if r == nil {
		r = egress.Report{}
	}
	return r
}

// network is a snapshot of the job's egress report (nil without network).
func (l *Launched) network() egress.Report {
	if l == nil || l.proxy == nil {
		return nil
	}
	return l.proxy.Report()
}

// maxRefused bounds the destinations an outcome lists as refused.
const maxRefused = 4

// refusals collects the destinations the proxy refused a job (from the
// proxy's goroutines).
type refusals struct {
	mu   sync.Mutex
	list []string
}

func (r *refusals) add(dest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.list) < maxRefused && !slices.Contains(r.list, dest) {
		r.list = append(r.list, dest)
	}
}

func (r *refusals) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}
