package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bashvisor/bashvisor/engine"
)

// idleVariant is one way of running `true` in the idle case: in this
// process (raw os/exec or the engine) or as a peer sandbox's process.
type idleVariant struct {
	label string
	run   func() error
	peer  bool // an external sandbox: its start is the sample
	// restricted: the sample's target is at most +1.0 ms over the
	// unrestricted engine's median at the same spacing.
	restricted bool
}

// idleSample is what one call cost: its wall time, this process's CPU
// from its start to the next call's start (the engine's asynchronous
// tail included; the idle gap's is in it too), and the children's.
type idleSample struct {
	wall, self, child time.Duration
}

// parseIdle parses -idle: durations separated by commas, 0 for back to
// back.
func parseIdle(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if f == "0" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("-idle: %q is not a duration", f)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-idle: no spacing in %q", s)
	}
	return out, nil
}

// idleVariants returns the idle case's variants: raw os/exec, the engine
// for every profile in one conversation (workspace-write in a git
// repository), and with -peers bwrap, `codex sandbox` and srt where they
// are installed (the labels of those that are not, or do not work
// here, in missing).
func idleVariants(o benchOpts, e *engine.Engine, dir string) (vs []idleVariant, missing []string, err error) {
	repo := filepath.Join(dir, "idle-ws")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return nil, nil, err
	}
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("git init: %v: %s", err, out)
	}
	tc := engine.ToolContext{WorkingDir: dir, ConversationID: "bench-idle"}
	eng := func(tc engine.ToolContext) func() error { return func() error { return engRun(e, tc, "true") } }
	vs = []idleVariant{
		{label: "raw os/exec", run: func() error { return rawRun(dir, "true") }},
		{label: "unrestricted", run: eng(tc)},
		{label: "read-only", run: eng(withSandbox(tc, engine.Sandbox{Profile: engine.ReadOnly})), restricted: true},
		{label: "workspace-write", run: eng(withSandbox(engine.ToolContext{WorkingDir: repo, ConversationID: tc.ConversationID},
			engine.Sandbox{Profile: engine.WorkspaceWrite})), restricted: true},
	}
	if !o.peers {
		return keepWorking(vs)
	}
	home := filepath.Join(dir, "peer-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, nil, err
	}
	peerEnv := append(os.Environ(), "HOME="+home, "CODEX_HOME="+home)
	peer := func(label string, argv ...string) {
		p, err := exec.LookPath(argv[0])
		if err != nil {
			missing = append(missing, label)
			return
		}
		vs = append(vs, idleVariant{label: label, peer: true, run: func() error {
			c := exec.Command(p, argv[1:]...)
			c.Dir, c.Env = dir, peerEnv
			var b bytes.Buffer
			c.Stdout, c.Stderr = &b, &b
			if err := c.Run(); err != nil {
				return fmt.Errorf("%s: %w: %s", label, err, firstLine(b.String()))
			}
			return nil
		}})
	}
	peer("bwrap --unshare-all", "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "bash", "-c", "true")
	peer("codex sandbox", "codex", "sandbox", "--", "bash", "-c", "true")
	peer("srt", "srt", "bash -c true")
	kept, failed, err := keepWorking(vs)
	return kept, append(missing, failed...), err
}

// keepWorking runs each restricted variant and peer once: one that
// fails here (a sandbox this machine cannot give, a peer not set up for
// it) is reported, not measured.
func keepWorking(vs []idleVariant) (kept []idleVariant, failed []string, err error) {
	for _, v := range vs {
		if v.peer || v.restricted {
			if err := v.run(); err != nil {
				failed = append(failed, v.label+" ("+firstLine(err.Error())+")")
				continue
			}
		}
		kept = append(kept, v)
	}
	return kept, failed, nil
}

// benchIdle runs every variant at each spacing of -idle: the variants
// rotate, and before each sample the process sleeps the spacing (0: back
// to back), as an agent's commands come seconds apart. A warm-up round is
// discarded. Each restricted profile's median is compared with the
// unrestricted engine's at the same spacing (target +1.0 ms), each
// variant's with raw os/exec's.
func benchIdle(o benchOpts, e *engine.Engine, dir string) ([]benchRow, error) {
	spacings, err := parseIdle(o.idle)
	if err != nil {
		return nil, err
	}
	vs, missing, err := idleVariants(o, e, dir)
	if err != nil {
		return nil, err
	}
	var rows []benchRow
	for _, gap := range spacings {
		samples := make([][]idleSample, len(vs))
		last := -1 // the previous sample's variant, charged this process's CPU until the next start
		var c0 time.Duration
		for i := -1; i < o.idleN; i++ {
			for j := range vs {
				k := (j + max(i, 0)) % len(vs) // rotated per round
				time.Sleep(gap)
				c1 := selfCPU()
				if last >= 0 {
					samples[last][len(samples[last])-1].self = c1 - c0
				}
				s, err := idleCall(vs[k].run)
				if err != nil {
					return nil, err
				}
				last, c0 = -1, c1
				if i >= 0 {
					samples[k] = append(samples[k], s)
					last = k
				}
			}
		}
		if last >= 0 {
			time.Sleep(gap)
			samples[last][len(samples[last])-1].self = selfCPU() - c0
		}
		rows = append(rows, idleRows(o, gap, vs, samples)...)
	}
	for _, m := range missing {
		rows = append(rows, benchRow{name: "idle: not measured: " + m, raw: "n/a", eng: "n/a", ratio: "n/a: not installed or not working"})
	}
	return rows, nil
}

// idleCall runs one sample: its wall time and its children's CPU.
func idleCall(run func() error) (idleSample, error) {
	ch0, t0 := childCPU(), time.Now()
	err := run()
	return idleSample{wall: time.Since(t0), child: childCPU() - ch0}, err
}

// childCPU is the user and system CPU time of this process's waited-for
// children.
func childCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func idleRows(o benchOpts, gap time.Duration, vs []idleVariant, samples [][]idleSample) []benchRow {
	p50 := func(k int) time.Duration {
		d := make(durations, len(samples[k]))
		for i, s := range samples[k] {
			d[i] = s.wall
		}
		return d.pct(50)
	}
	mean := func(k int, f func(idleSample) time.Duration) time.Duration {
		var t time.Duration
		for _, s := range samples[k] {
			t += f(s)
		}
		return t / time.Duration(max(len(samples[k]), 1))
	}
	raw, unr := p50(0), p50(1)
	var rows []benchRow
	for k, v := range vs {
		d := p50(k)
		cpu := fmt.Sprintf("CPU %.2f ms", float64(mean(k, func(s idleSample) time.Duration { return s.self }))/1e6)
		if v.peer {
			cpu = fmt.Sprintf("CPU %.2f+%.2f ms", float64(mean(k, func(s idleSample) time.Duration { return s.self }))/1e6,
				float64(mean(k, func(s idleSample) time.Duration { return s.child }))/1e6)
		}
		r := benchRow{name: fmt.Sprintf("idle %v: %s, p50 / mean of %d", gap, v.label, o.idleN), raw: ms(raw),
			eng:   fmt.Sprintf("%.3f / %.3f ms (%s)", float64(d)/1e6, float64(mean(k, func(s idleSample) time.Duration { return s.wall }))/1e6, cpu),
			ratio: fmt.Sprintf("%.2fx raw, %+.3f ms unr.", float64(d)/float64(raw), float64(d-unr)/1e6)}
		if v.restricted {
			r.target, r.ok = "<= unr. +1.0 ms", pass(d-unr <= time.Millisecond)
		}
		rows = append(rows, r)
	}
	return rows
}
