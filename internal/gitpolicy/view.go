//go:build linux

package gitpolicy

import (
	"io"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/bashvisor/bashvisor/internal/layer"
)

// projected is the tree that apply will produce: the view after the
// command, except where a refused change leaves the tree as it was
// before. A refused addition, deletion or change of type keeps what
// was there before for its whole subtree (apply takes what is below
// along); a refused modification only for the entry itself.
type projected struct {
	View
	subtree  map[string]bool     // refused paths shown as before with all below them
	entry    map[string]bool     // refused paths shown as before themselves
	byParent map[string][]string // refused paths by their directory
}

// project returns v as apply will leave it when refused (a set of
// changes' paths) is not applied.
func project(v View, changes []layer.Change, refused map[string]Refusal) *projected {
	p := &projected{View: v, subtree: map[string]bool{}, entry: map[string]bool{}, byParent: map[string][]string{}}
	for _, c := range changes {
		if _, ok := refused[c.Path]; !ok {
			continue
		}
		if c.Kind == layer.Modified {
			p.entry[c.Path] = true
		} else {
			p.subtree[c.Path] = true
		}
		d := filepath.Dir(c.Path)
		p.byParent[d] = append(p.byParent[d], c.Path)
	}
	return p
}

// asBefore reports whether path shows as it was before the command.
func (p *projected) asBefore(path string) bool {
	if p.entry[path] {
		return true
	}
	for d := path; ; d = filepath.Dir(d) {
		if p.subtree[d] {
			return true
		}
		if d == "/" || d == "." {
			return false
		}
	}
}

// covered reports whether path lies below a refused path whose subtree
// stays as before (apply does not apply it).
func (p *projected) covered(path string) bool {
	return path != "/" && p.asBefore(filepath.Dir(path))
}

func (p *projected) Lstat(path string, after bool) (fs.FileInfo, error) {
	return p.View.Lstat(path, after && !p.asBefore(path))
}

func (p *projected) ReadFile(path string, after bool, limit int64) ([]byte, error) {
	return p.View.ReadFile(path, after && !p.asBefore(path), limit)
}

func (p *projected) Open(path string, after bool) (io.ReadCloser, error) {
	return p.View.Open(path, after && !p.asBefore(path))
}

func (p *projected) Readlink(path string, after bool) (string, error) {
	return p.View.Readlink(path, after && !p.asBefore(path))
}

func (p *projected) ReadDir(path string, after bool) ([]string, error) {
	if !after || p.asBefore(path) {
		return p.View.ReadDir(path, false)
	}
	names, err := p.View.ReadDir(path, true)
	if err != nil || len(p.byParent[path]) == 0 {
		return names, err
	}
	names = slices.Clone(names)
	for _, r := range p.byParent[path] {
		name := filepath.Base(r)
		i, found := slices.BinarySearch(names, name)
		_, berr := p.View.Lstat(r, false)
		switch {
		case berr == nil && !found:
			names = slices.Insert(names, i, name)
		case berr != nil && found:
			names = slices.Delete(names, i, i+1)
		}
	}
	return names, nil
}
