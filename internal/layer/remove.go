package layer

import (
	"io/fs"
	"os"
	"path/filepath"
)

// RemoveAll removes dir like os.RemoveAll, first making directories
// without permissions removable where that fails: overlayfs's work/work
// is mode 000, and so may be what a sandboxed command made (in an upper
// layer, or in its scratch directory).
func RemoveAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
