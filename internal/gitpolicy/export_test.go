//go:build linux

package gitpolicy

// SetMaxDataFile sets maxDataFile to n until the returned function
// restores it (not while another test judges a change set).
func SetMaxDataFile(n int64) (restore func()) {
	old := maxDataFile
	maxDataFile = n
	return func() { maxDataFile = old }
}
