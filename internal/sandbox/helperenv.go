package sandbox

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
)

// The helper's Go runtime runs on one P (GOMAXPROCS=1), whatever the
// command's environment says: the helper runs one goroutine, and with
// more Ps the runtime starts a thread for each goroutine it wakes while
// another runs (4 to 5 threads per helper on 2 CPUs), each of which
// execve must end before bash starts. One P saved 0.1–0.3 ms of CPU per
// rootless command in each of five runs of BenchmarkRootlessGap (helper
// and bash: 3.28 → 2.99 ms back to back at load 10–12), and back to back
// 11.5 → 7.6 ms of wall time there (80 rounds); at load 17–37 the wall
// times of both varied by more than that. StartHelper sets it in the
// helper's environment and hands the command's own value (or its
// absence) over in helperConfig.RuntimeEnv, which the helper puts back
// before it execs bash. Not for a command with a layer (its helper
// makes and exchanges overlays): in `demo bench -only idle -user bvci`
// (before and after alternated, load 8–20) layered workspace-write a
// second after the previous command went from 21.5/28.0 ms to
// 49.9/63.6 with it (unexplained), and 18.0 without. There read-only
// over root was +14.0/+14.0/+2.7 ms back to back before and
// +2.9/+3.2/+6.0 after, +6.5/+13.9/+18.6 and +19.4/−6.7/+8.5 a second
// apart: the spread of p50 of 15 at that load exceeds the gain, which
// only the CPU time shows.

// helperRuntime are the variables StartHelper sets for the helper's
// runtime.
var helperRuntime = []string{"GOMAXPROCS=1"}

// helperProcs1 makes StartHelper set helperRuntime (the benchmark
// compares it with the runtime's default).
var helperProcs1 = true

// withHelperRuntime returns env (nil: this process's) with
// helperRuntime set, and args (c.Args) with the configuration saying
// what the command's values were.
func (c *Command) withHelperRuntime(env, args []string) ([]string, []string) {
	if env == nil {
		env = os.Environ()
	}
	cfg := c.cfg
	cfg.RuntimeEnv = map[string]*string{}
	for _, kv := range helperRuntime {
		name, _, _ := strings.Cut(kv, "=")
		cfg.RuntimeEnv[name] = nil
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, name+"="); ok {
				cfg.RuntimeEnv[name] = &v // the last one wins, as in dedupEnv
			}
		}
	}
	enc, err := json.Marshal(cfg)
	if err != nil || len(args) < 3 || args[1] != HelperArg {
		return env, args
	}
	args = slices.Clone(args)
	args[2] = string(enc)
	return append(slices.Clip(env), helperRuntime...), args
}

// restoreRuntimeEnv, in the helper, puts back the command's values of
// the variables StartHelper set for the helper's runtime.
func restoreRuntimeEnv(saved map[string]*string) error {
	for name, v := range saved {
		var err error
		if v == nil {
			err = os.Unsetenv(name)
		} else {
			err = os.Setenv(name, *v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
