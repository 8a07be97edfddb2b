//go:build linux

package gitpolicy

import (
	"slices"
	"strings"
	"time"
)

// SetMaxDataFile sets maxDataFile to n until the returned function
// restores it (not while another test judges a change set).
func SetMaxDataFile(n int64) (restore func()) {
	old := maxDataFile
	maxDataFile = n
	return func() { maxDataFile = old }
}

// EnvConfig is what the judge reads of the configuration env itself
// sets: its entries as `git config --list -z` prints them ("name\nvalue",
// or "name" for a boolean true, the section and name lower-cased), and
// whether it reads the system file.
func EnvConfig(env []string) (entries []string, system bool) {
	u := userConfigOf(env)
	for _, e := range u.entries {
		s := e.name()
		if !e.Bare {
			s += "\n" + e.Value
		}
		entries = append(entries, s)
	}
	for _, f := range u.files {
		system = system || f == systemConfig || f == getenvOf(env, "GIT_CONFIG_SYSTEM")
	}
	return entries, system
}

func getenvOf(env []string, k string) string {
	v := ""
	for _, kv := range env {
		if name, val, ok := strings.Cut(kv, "="); ok && name == k {
			v = val
		}
	}
	return v
}

// ForgetWalks drops the trees walks recorded, so that the next walk of
// each root reads every directory (none may be under way).
func ForgetWalks() {
	walks.Lock()
	clear(walks.m)
	walks.Unlock()
}

// RacyMargin is racyMargin.
const RacyMargin = racyMargin

// WalkFound walks root as a check does and returns the repositories
// found ("dir .git" or "dir bare"), sorted.
func WalkFound(root string) []string {
	var out []string
	cands, _ := foundBelow(root)
	for _, c := range cands {
		out = append(out, c.dir+map[repoKind]string{dotGit: " .git", bareRepo: " bare"}[c.kind])
	}
	slices.Sort(out)
	return out
}

// WalkMissed walks root as a check does and returns why the walk did
// not look everywhere ("": it did).
func WalkMissed(root string) string {
	_, missed := foundBelow(root)
	return missed
}

// SetMaxWalkDirs sets maxWalkDirs to n until the returned function
// restores it (not while a walk runs).
func SetMaxWalkDirs(n int) (restore func()) {
	old := maxWalkDirs
	maxWalkDirs = n
	return func() { maxWalkDirs = old }
}

// WalkOnce walks root once: afresh (every directory read), or revalidating
// the tree the last walk of root recorded (which it then replaces).
func WalkOnce(root string, afresh bool) int {
	walks.Lock()
	rw := rootOfWalks(root)
	if afresh {
		rw.tree = nil
	}
	rw.walk(nil)
	n := len(rw.found)
	walks.Unlock()
	return n
}

// SetWalkRefresh sets walkRefresh to d until the returned function
// restores it (no walk loop may run meanwhile).
func SetWalkRefresh(d time.Duration) (restore func()) {
	old := walkRefresh
	walkRefresh = d
	return func() { walkRefresh = old }
}
