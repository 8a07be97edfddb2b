package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// cliVariant is one command the CLI case starts as a process per run.
type cliVariant struct {
	label string
	argv  []string
	dir   string // working directory ("": the bench's)
	// base, when set, is the label of the variant of the target: at
	// most maxOver over its median.
	base    string
	maxOver time.Duration
}

// cliBins returns the binaries the CLI case measures: -cli-bins, else
// this program (whose run is the same code as bashvisor's).
func cliBins(o benchOpts) ([]string, error) {
	if o.cliBins == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cli: %w", err)
		}
		return []string{self}, nil
	}
	var bins []string
	for _, b := range strings.Split(o.cliBins, ",") {
		p, err := exec.LookPath(b)
		if err != nil {
			return nil, fmt.Errorf("-cli-bins: %w", err)
		}
		bins = append(bins, p)
	}
	return bins, nil
}

// benchCLI measures one CLI process per command, as agents' harnesses
// call a shell: `BIN run -- true` (and sandboxed, and `BIN version`, the
// process's start alone) against `bash -c true` and, where installed,
// `bwrap --ro-bind / / true`, rotated through -cli-rounds rounds after a
// warm-up. Each sample is one process's wall time from start to exit;
// CPU is the child's user+system time, which load inflates less.
func benchCLI(o benchOpts, dir string) ([]benchRow, error) {
	bins, err := cliBins(o)
	if err != nil {
		return nil, err
	}
	ws := filepath.Join(dir, "cli-ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git init: %v: %s", err, out)
	}
	raw := cliVariant{label: "bash -c true", argv: []string{"bash", "-c", "true"}}
	vs := []cliVariant{raw}
	bwrap, _ := exec.LookPath("bwrap")
	if bwrap != "" {
		vs = append(vs, cliVariant{label: "bwrap --ro-bind / / true", argv: []string{bwrap, "--ro-bind", "/", "/", "true"}})
		// For comparison, no target: a start closer to read-only's (its
		// own network, mount, pid, IPC and UTS namespaces, a /proc, bash;
		// no seccomp, Landlock or cgroup), where the host lets bwrap make
		// them.
		all := []string{bwrap, "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "bash", "-c", "true"}
		if exec.Command(all[0], all[1:]...).Run() == nil {
			vs = append(vs, cliVariant{label: "bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc bash -c true", argv: all})
		}
	}
	for _, b := range bins {
		name := filepath.Base(b)
		if len(bins) > 1 {
			name = b
		}
		sandboxTarget := func(v cliVariant) cliVariant {
			if bwrap != "" {
				v.base = "bwrap --ro-bind / / true" // at most bwrap's start
			}
			return v
		}
		vs = append(vs,
			cliVariant{label: name + " version", argv: []string{b, "version"}},
			cliVariant{label: name + " run -- true", argv: []string{b, "run", "--", "true"}, base: raw.label, maxOver: 10 * time.Millisecond},
			sandboxTarget(cliVariant{label: name + " run -sandbox read-only -- true", argv: []string{b, "run", "-sandbox", "read-only", "--", "true"}}),
			sandboxTarget(cliVariant{label: name + " run -sandbox workspace-write -- true", argv: []string{b, "run", "-sandbox", "workspace-write", "--", "true"}, dir: ws}),
		)
	}
	wall := make([]durations, len(vs))
	cpu := make([]time.Duration, len(vs))
	for i := -2; i < o.cliRounds; i++ {
		for k, v := range vs {
			c := exec.Command(v.argv[0], v.argv[1:]...)
			c.Dir = dir
			if v.dir != "" {
				c.Dir = v.dir
			}
			var out strings.Builder
			c.Stdout, c.Stderr = &out, &out
			t0 := time.Now()
			err := c.Run()
			d := time.Since(t0)
			if err != nil {
				return nil, fmt.Errorf("%s: %v: %s", v.label, err, out.String())
			}
			if i >= 0 {
				wall[k] = append(wall[k], d)
				cpu[k] += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
			}
		}
	}
	med := map[string]time.Duration{}
	for k, v := range vs {
		med[v.label] = wall[k].pct(50)
	}
	n := time.Duration(max(o.cliRounds, 1))
	var rows []benchRow
	for k, v := range vs {
		if k == 0 {
			rows = append(rows, benchRow{name: fmt.Sprintf("CLI per command: %s, median of %d (CPU)", v.label, o.cliRounds),
				raw: ms(med[raw.label]), eng: fmt.Sprintf("(%s CPU)", ms(cpu[k]/n))})
			continue
		}
		r := benchRow{name: "CLI per command: " + v.label, raw: ms(med[raw.label]),
			eng: fmt.Sprintf("%s (%s CPU)", ms(med[v.label]), ms(cpu[k]/n)),
			ratio: fmt.Sprintf("%.2fx, %+.3f ms", float64(med[v.label])/float64(med[raw.label]),
				float64(med[v.label]-med[raw.label])/1e6)}
		if v.base != "" {
			r.target = "<= " + strings.Fields(v.base)[0]
			if v.maxOver > 0 {
				r.target = fmt.Sprintf("<= %s +%.0f ms", strings.Fields(v.base)[0], float64(v.maxOver)/1e6)
			}
			r.ok = pass(med[v.label]-med[v.base] <= v.maxOver)
		}
		rows = append(rows, r)
	}
	if bwrap == "" {
		rows = append(rows, benchRow{name: "CLI per command: bwrap --ro-bind / / true", raw: "n/a", eng: "n/a", ratio: "n/a: bwrap not installed"})
	}
	return rows, nil
}
