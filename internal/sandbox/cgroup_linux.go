//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// staleChecked holds the scratch roots already cleaned of dead engines'
// leftovers in this process.
var staleChecked sync.Map

// removeStaleOnce runs removeStale once per root and process.
func removeStaleOnce(root string) {
	if _, done := staleChecked.LoadOrStore(root, true); !done {
		removeStale(root)
	}
}

// removeStale removes the scratch directories under root (os.TempDir()
// when "") that engines which were killed left behind: those named after an
// engine process that no longer exists (scratchPrefix + PID + "-"). The
// commands' cgroups are the engine's (proc.Cgroups removes stale ones).
func removeStale(root string) {
	if root == "" {
		root = os.TempDir()
	}
	dead := func(name string) bool {
		rest, ok := strings.CutPrefix(name, scratchPrefix)
		if !ok {
			return false
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		return ok && err == nil && pid > 0 && errors.Is(unix.Kill(pid, 0), unix.ESRCH)
	}
	if entries, err := os.ReadDir(root); err == nil {
		for _, e := range entries {
			if e.IsDir() && dead(e.Name()) {
				_ = removeScratch(filepath.Join(root, e.Name()))
			}
		}
	}
}
