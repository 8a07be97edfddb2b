//go:build linux

package gitpolicy

import "strings"

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

// ForgetWalks drops the repositories walks found, so that the next
// check walks its roots again.
func ForgetWalks() {
	walks.Lock()
	clear(walks.m)
	walks.Unlock()
}
