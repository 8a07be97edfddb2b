package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// The idle case as an unprivileged user (-user NAME, run as root): a
// peer process of this program runs as that user with an engine of its
// own (sandboxed commands then go through the rootless helper: a small
// bashvisor-sandbox next to this program's executable if there is one,
// else this program re-executed) and runs one sample whenever this
// process asks, so that its samples rotate with this engine's at every
// spacing and share the machine's load. It reports the wall time it
// measured and its CPU time.

// userProfiles are the peer's variants, in the order of the root
// engine's (idleVariants) after raw os/exec.
var userProfiles = []string{"unrestricted", "read-only", "workspace-write"}

// userReply is the peer's answer to one request.
type userReply struct {
	Wall time.Duration `json:"wall"`
	CPU  time.Duration `json:"cpu"`  // the peer's CPU time when the request came
	Kids time.Duration `json:"kids"` // its waited-for children's (helpers, bash)
	Err  string        `json:"err,omitempty"`
}

// userPeer is the running peer process.
type userPeer struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	base string
}

// startUserPeer starts the peer as name, before this process makes an
// engine (whose children lose capabilities from their bounding set,
// which user namespaces need). The peer's HOME and TMPDIR are in a
// temporary directory it owns; this program must be executable by it.
func startUserPeer(o benchOpts, log io.Writer) (*userPeer, error) {
	u, err := user.Lookup(o.user)
	if err != nil {
		return nil, fmt.Errorf("-user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "bashvisor-bench-user-")
	if err != nil {
		return nil, err
	}
	p := &userPeer{base: base}
	for _, d := range []string{base, filepath.Join(base, "home"), filepath.Join(base, "tmp")} {
		if err == nil {
			err = os.MkdirAll(d, 0o755)
		}
		if err == nil && d != base {
			err = os.Chown(d, uid, gid)
		}
	}
	if err == nil {
		err = os.Chmod(base, 0o755)
	}
	if err != nil {
		p.close()
		return nil, err
	}
	p.cmd = exec.Command(exe, "bench", "-child", "idle-user", "-spool-cap", strconv.FormatInt(o.spoolCap, 10))
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(base, "home"), "TMPDIR=" + filepath.Join(base, "tmp")}
	p.cmd.Dir = filepath.Join(base, "home")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	p.cmd.Stderr = log
	if p.in, err = p.cmd.StdinPipe(); err == nil {
		var r io.Reader
		if r, err = p.cmd.StdoutPipe(); err == nil {
			p.out = bufio.NewScanner(r)
			err = p.cmd.Start()
		}
	}
	if err != nil {
		p.close()
		return nil, fmt.Errorf("-user: start the peer: %w", err)
	}
	if _, err := p.ask("ready"); err != nil {
		p.close()
		return nil, fmt.Errorf("-user %s: %w", o.user, err)
	}
	return p, nil
}

// ask sends one request and reads the answer.
func (p *userPeer) ask(req string) (userReply, error) {
	var r userReply
	if _, err := fmt.Fprintln(p.in, req); err != nil {
		return r, err
	}
	if !p.out.Scan() {
		return r, fmt.Errorf("the peer ended: %v", p.out.Err())
	}
	if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
		return r, err
	}
	if r.Err != "" {
		return r, errors.New(r.Err)
	}
	return r, nil
}

// close ends the peer (closing its input) and removes its directory.
func (p *userPeer) close() {
	if p == nil {
		return
	}
	if p.in != nil {
		_ = p.in.Close()
	}
	if p.cmd != nil && p.cmd.Process != nil {
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(p.base)
}

// idleUserChild is the peer: it answers "ready" once its engine runs
// every profile, then runs the variant whose index each line names and
// answers its wall time, until its input ends.
func idleUserChild(o benchOpts, in io.Reader, stdout, stderr io.Writer) int {
	enc := json.NewEncoder(stdout)
	fail := func(err error) int {
		_ = enc.Encode(userReply{Err: err.Error()})
		return exitSystem
	}
	dir, err := os.MkdirTemp("", "bashvisor-bench-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	repo := filepath.Join(dir, "idle-ws")
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("git init: %v: %s", err, out))
	}
	e, err := engine.New(benchConfig(o))
	if err != nil {
		return fail(fmt.Errorf("engine: %w", err))
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.Shutdown(ctx)
	}()
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "bench-idle"}
	tcs := []engine.ToolContext{tc, withSandbox(tc, engine.Sandbox{Profile: engine.ReadOnly}),
		withSandbox(engine.ToolContext{WorkingDir: repo, ConversationID: tc.ConversationID}, engine.Sandbox{Profile: engine.WorkspaceWrite})}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		r := userReply{CPU: selfCPU(), Kids: childCPU()}
		switch req := sc.Text(); req {
		case "ready", "cpu":
			if req == "ready" {
				for k, tc := range tcs {
					if err := engRun(e, tc, "true"); err != nil {
						r.Err = userProfiles[k] + ": " + err.Error()
					}
				}
			}
		default:
			k, err := strconv.Atoi(req)
			if err != nil || k < 0 || k >= len(tcs) {
				fmt.Fprintln(stderr, "bench: bad request", req)
				return exitUsage
			}
			t0 := time.Now()
			if err := engRun(e, tcs[k], "true"); err != nil {
				r.Err = err.Error()
			}
			r.Wall = time.Since(t0)
		}
		if err := enc.Encode(r); err != nil {
			return exitSystem
		}
	}
	return 0
}

// benchIdleUser is the idle case with the peer: this engine's variants
// (raw os/exec and every profile) and the peer's profiles rotate at each
// spacing; each of the peer's profiles is compared with the same
// profile of this engine (target: within +1.5 ms).
func benchIdleUser(o benchOpts, e *engine.Engine, dir string, p *userPeer) ([]benchRow, error) {
	spacings, err := parseIdle(o.idle)
	if err != nil {
		return nil, err
	}
	vs, _, err := idleVariants(benchOpts{}, e, dir) // no peers here
	if err != nil {
		return nil, err
	}
	n := len(vs)
	var rows []benchRow
	for _, gap := range spacings {
		walls := make([]durations, n+len(userProfiles))
		cpus := make([]time.Duration, n+len(userProfiles))
		kids := make([]time.Duration, n+len(userProfiles))
		// Each side's sample is charged that side's CPU time from its
		// start to the start of the side's next sample (its asynchronous
		// tail included).
		type side struct {
			last   int
			c0, k0 time.Duration
		}
		root, peer := side{last: -1}, side{last: -1}
		charge := func(s *side, k int, c, kc time.Duration) {
			if s.last >= 0 {
				cpus[s.last] += c - s.c0
				kids[s.last] += kc - s.k0
			}
			s.last, s.c0, s.k0 = k, c, kc
		}
		for i := -1; i < o.idleN; i++ {
			for j := range walls {
				k := (j + max(i, 0)) % len(walls)
				counted := k
				if i < 0 {
					counted = -1 // the warm-up round
				}
				time.Sleep(gap)
				var wall time.Duration
				if k < n {
					charge(&root, counted, selfCPU(), childCPU())
					t0 := time.Now()
					if err := vs[k].run(); err != nil {
						return nil, err
					}
					wall = time.Since(t0)
				} else {
					r, err := p.ask(strconv.Itoa(k - n))
					if err != nil {
						return nil, fmt.Errorf("as %s: %s: %w", o.user, userProfiles[k-n], err)
					}
					charge(&peer, counted, r.CPU, r.Kids)
					wall = r.Wall
				}
				if counted >= 0 {
					walls[k] = append(walls[k], wall)
				}
			}
		}
		time.Sleep(gap)
		charge(&root, -1, selfCPU(), childCPU())
		r, err := p.ask("cpu")
		if err != nil {
			return nil, err
		}
		charge(&peer, -1, r.CPU, r.Kids)
		rows = append(rows, userRows(o, gap, vs, walls, cpus, kids)...)
	}
	return rows, nil
}

// userRows reports each variant's median, its engine's and its children's
// (bash, and a rootless helper) mean CPU per call, and each peer
// profile's gap to the same profile as root.
func userRows(o benchOpts, gap time.Duration, vs []idleVariant, walls []durations, cpus, kids []time.Duration) []benchRow {
	n := len(vs)
	raw := walls[0].pct(50)
	var rows []benchRow
	label := func(k int) string {
		if k < n {
			return "root " + vs[k].label
		}
		return o.user + " " + userProfiles[k-n]
	}
	for k := range walls {
		d := walls[k].pct(50)
		r := benchRow{name: fmt.Sprintf("idle %v: %s, p50 of %d", gap, label(k), o.idleN), raw: ms(raw),
			eng: fmt.Sprintf("%.3f ms (CPU %.2f+%.2f ms)", float64(d)/1e6, float64(cpus[k])/1e6/float64(max(len(walls[k]), 1)),
				float64(kids[k])/1e6/float64(max(len(walls[k]), 1))),
			ratio: fmt.Sprintf("%.2fx raw", float64(d)/float64(raw))}
		if k >= n {
			root := walls[k-n+1].pct(50) // the same profile as root (vs[1:] are the profiles)
			r.ratio += fmt.Sprintf(", %+.3f ms root", float64(d-root)/1e6)
			if k > n {
				r.target, r.ok = "<= root +1.5 ms", pass(d-root <= 1500*time.Microsecond)
			}
		}
		rows = append(rows, r)
	}
	return rows
}
