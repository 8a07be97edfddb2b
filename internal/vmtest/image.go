//go:build linux

package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// guestModules are the kernel modules the guest loads before it mounts the
// host's root (Debian builds them as modules): 9p over virtio, overlayfs,
// the virtio PCI transport and the virtio RNG (so that getrandom does not
// wait for entropy at boot).
var guestModules = []string{"virtio_pci", "virtio_rng", "9pnet_virtio", "9p", "overlay"}

// resolveModules finds the named modules and, first, everything they
// depend on (the "depends=" of each module's .modinfo section), under a
// kernel's lib/modules/VERSION directory. It returns their paths in load
// order. Module names treat '-' and '_' alike, as the kernel does.
func resolveModules(dir string, names []string) ([]string, error) {
	byName := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			byName[modName(strings.TrimSuffix(d.Name(), ".ko"))] = p
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if data, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			builtin[modName(strings.TrimSuffix(filepath.Base(line), ".ko"))] = true
		}
	}
	var order []string
	seen := map[string]bool{}
	var visit func(name string, depth int) error
	visit = func(name string, depth int) error {
		name = modName(name)
		if seen[name] || builtin[name] {
			return nil
		}
		if depth > 32 {
			return fmt.Errorf("module dependencies too deep at %s", name)
		}
		p, ok := byName[name]
		if !ok {
			return fmt.Errorf("kernel module %s not found under %s", name, dir)
		}
		deps, err := moduleDeps(p)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, depth+1); err != nil {
				return err
			}
		}
		seen[name] = true
		order = append(order, p)
		return nil
	}
	for _, n := range names {
		if err := visit(n, 0); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// moduleDeps reads the "depends=" entry of a module's .modinfo section.
func moduleDeps(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("%s: no .modinfo section", path)
	}
	data, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for kv := range bytes.SplitSeq(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// cpioWriter writes a cpio archive in the "newc" format, the one the
// kernel unpacks as an initramfs.
type cpioWriter struct {
	w   io.Writer
	n   int64
	ino int
	err error
}

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// entry writes one file (mode includes the type bits) with its contents.
func (c *cpioWriter) entry(name string, mode uint32, data []byte) {
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
}

func (c *cpioWriter) dir(name string) { c.entry(name, 0o040755, nil) }

func (c *cpioWriter) file(name string, perm uint32, data []byte) {
	c.entry(name, 0o100000|perm, data)
}

func (c *cpioWriter) close() error {
	c.entry("TRAILER!!!", 0, nil)
	return c.err
}

// writeInitramfs writes the guest's initramfs: the init program (this
// command built statically), the modules in load order and their order.
func writeInitramfs(path, initBin string, modules []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	c := &cpioWriter{w: f}
	for _, d := range []string{"dev", "proc", "sys", "host", "rw", "newroot", "modules"} {
		c.dir(d)
	}
	init, err := os.ReadFile(initBin)
	if err != nil {
		return err
	}
	c.file("init", 0o755, init)
	var order []string
	for _, m := range modules {
		data, err := os.ReadFile(m)
		if err != nil {
			return err
		}
		name := filepath.Base(m)
		c.file("modules/"+name, 0o644, data)
		order = append(order, name)
	}
	c.file("modules/order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	if err := c.close(); err != nil {
		return err
	}
	return f.Close()
}
