package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// maskedFile is a Mask whose source was read.
type maskedFile struct {
	path string
	data []byte
}

// readMasks reads the masks' sources (before the view hides them).
func readMasks(masks []Mask) ([]maskedFile, error) {
	var out []maskedFile
	for _, m := range masks {
		data, err := os.ReadFile(m.Source)
		if err != nil {
			return nil, fmt.Errorf("mask %s: %w", m.Path, err)
		}
		out = append(out, maskedFile{path: m.Path, data: data})
	}
	return out, nil
}

// resolveMasks resolves the files' paths in the command's view, leaving
// out those that do not exist there (a file under the host's /tmp in a
// world: the command cannot see it) and the second mask of a file (two
// paths naming one file through a symbolic link).
func resolveMasks(files []maskedFile) ([]maskedFile, error) {
	var out []maskedFile
	for _, f := range files {
		path, err := filepath.EvalSymlinks(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("mask %s: %w", f.path, err)
		}
		if !slices.ContainsFunc(out, func(o maskedFile) bool { return o.path == path }) {
			out = append(out, maskedFile{path: path, data: f.data})
		}
	}
	return out, nil
}

// maskFiles bind-mounts, in the calling thread's mount namespace, each
// file's content over its path (see resolveMasks), read-only. The
// contents are written on a tmpfs stacked on /tmp for the moment (as
// maskResolvConf does), which is then detached: only the bind mounts keep
// it. The paths are opened first and bound through their descriptors, so
// that a path below /tmp (a workspace in the host's /tmp, shown in a
// world) is reached under the stacked tmpfs.
func maskFiles(files []maskedFile) error {
	files, err := resolveMasks(files)
	if err != nil || len(files) == 0 {
		return err
	}
	targets := make([]int, len(files))
	for i, f := range files {
		if targets[i], err = unix.Open(f.path, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("mask %s: %w", f.path, err)
		}
		defer unix.Close(targets[i])
	}
	if err := bindMasks(files, targets); err != nil {
		return err
	}
	for _, f := range files {
		if err := unix.Mount("", f.path, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mask %s read-only: %w", f.path, err)
		}
	}
	return nil
}

// bindMasks writes the files' contents on a tmpfs stacked on /tmp and
// bind-mounts each over its target descriptor, then detaches the tmpfs.
func bindMasks(files []maskedFile, targets []int) error {
	const dir = "/tmp"
	size := 4096
	for _, f := range files {
		size += len(f.data) + 4096
	}
	opts := "size=" + strconv.Itoa(size) + ",nr_inodes=" + strconv.Itoa(len(files)+2) + ",mode=0755"
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("masks: %w", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	for i, f := range files {
		src := dir + "/mask" + strconv.Itoa(i)
		if err := os.WriteFile(src, f.data, 0o644); err != nil {
			return fmt.Errorf("mask %s: %w", f.path, err)
		}
		if err := unix.Mount(src, "/proc/self/fd/"+strconv.Itoa(targets[i]), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask %s: %w", f.path, err)
		}
	}
	return nil
}
