//go:build linux

package gitpolicy_test

import (
	"slices"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
)

// BenchmarkCheck judges 1,000 modified files of a repository's working
// tree, and a commit of them (the index, objects, refs, logs) beside
// the Diff that finds the changes, in one run: Check over Diff is the
// policy's share of what every workspace-write command pays ("check"
// revalidates the walk for repositories on its path, as a check without
// Prefetch does; "check walking" walks the workspace afresh, as the
// first check of a root without Prefetch does).
func BenchmarkCheck(b *testing.B) {
	for _, tc := range []struct{ name, script string }{
		{"1000 modified", "for i in $(seq 1000); do echo y >> d/f$i; done"},
		{"1000 modified and committed", "for i in $(seq 1000); do echo y >> d/f$i; done; git add -A && git commit -qm c"},
		{"a new tree 900 deep", "mkdir -p $(printf 'a/%.0s' $(seq 900))"},
	} {
		w := newWorld(b)
		w.sh(b, "git init -q -b main . && mkdir d && for i in $(seq 1000); do echo x > d/f$i; done && git add -A && git commit -qm init")
		l, err := layer.New(layer.Options{Roots: []string{w.ws}, Dir: w.state, UserXattr: layertest.Unprivileged()})
		if err != nil {
			b.Fatal(err)
		}
		if out, err := layertest.Run(b, l.Spec(), w.ws, w.env, tc.script); err != nil {
			b.Fatal(err, out)
		}
		var s *layer.Set
		b.Run(tc.name+"/diff", func(b *testing.B) {
			for b.Loop() {
				if s != nil {
					s.Close()
				}
				if s, err = l.Diff(); err != nil {
					b.Fatal(err)
				}
			}
		})
		if s == nil {
			if s, err = l.Diff(); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(tc.name+"/check", func(b *testing.B) {
			for b.Loop() {
				if r := gitpolicy.Check(s, l.Roots(), s.Changes); len(r) > 0 {
					b.Fatal(r)
				}
			}
			b.ReportMetric(float64(len(s.Changes)), "changes")
		})
		b.Run(tc.name+"/check walking", func(b *testing.B) {
			for b.Loop() {
				gitpolicy.ForgetWalks()
				if r := gitpolicy.Check(s, l.Roots(), s.Changes); len(r) > 0 {
					b.Fatal(r)
				}
			}
		})
		s.Close()
		l.Remove()
	}
}

// BenchmarkWalk judges one modified file in a workspace of 20,000
// directories (and as many files) beside the Diff that finds it, in one
// run: with the walk for repositories on the check's path, reading
// every directory (the first walk of a root) or revalidating the tree
// the last walk recorded (a check without Prefetch), and prefetched
// (the walk ran while the command did: Prefetch before it, the check
// once the walk is done; "at once": the check right after Prefetch, a
// command that takes no time). The walks alone: review8's (a directory
// read and an lstat per entry, through the layer's view), a first walk
// (a directory read per directory, types from the entries) and a
// revalidation (a stat per directory).
func BenchmarkWalk(b *testing.B) {
	w := newWorld(b)
	w.sh(b, `git init -q -b main . && echo x > README && git add README && git commit -qm init &&
for i in $(seq 20); do for j in $(seq 999); do echo "d$i/e$j/f"; done; done | xargs mkdir -p &&
for i in $(seq 20); do for j in $(seq 999); do echo "d$i/e$j/f/x"; done; done | xargs touch`)
	l, err := layer.New(layer.Options{Roots: []string{w.ws}, Dir: w.state, UserXattr: layertest.Unprivileged()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Remove()
	if out, err := layertest.Run(b, l.Spec(), w.ws, w.env, "echo y >> README"); err != nil {
		b.Fatal(err, out)
	}
	s, err := l.Diff()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	time.Sleep(gitpolicy.RacyMargin) // old enough for a walk to trust
	check := func(b *testing.B) {
		if r := gitpolicy.Check(s, l.Roots(), s.Changes); len(r) > 0 {
			b.Fatal(r)
		}
	}
	b.Run("diff", func(b *testing.B) {
		for b.Loop() {
			s2, err := l.Diff()
			if err != nil {
				b.Fatal(err)
			}
			s2.Close()
		}
	})
	b.Run("check walking afresh", func(b *testing.B) {
		for b.Loop() {
			gitpolicy.ForgetWalks()
			check(b)
		}
	})
	b.Run("check revalidating", func(b *testing.B) {
		for b.Loop() {
			check(b)
		}
	})
	b.Run("check prefetched", func(b *testing.B) {
		release := gitpolicy.Prefetch(l.Roots())
		defer release()
		gitpolicy.WalkFound(w.ws) // the command ran as long as the walk
		for b.Loop() {
			check(b)
		}
	})
	b.Run("check prefetched at once", func(b *testing.B) {
		for b.Loop() {
			release := gitpolicy.Prefetch(l.Roots())
			check(b)
			b.StopTimer()
			release()
			b.StartTimer()
		}
	})
	b.Run("walk review8", func(b *testing.B) {
		for b.Loop() {
			if n := oldWalk(s, w.ws); n != 1 {
				b.Fatal(n, "repositories")
			}
		}
	})
	for _, afresh := range []bool{true, false} {
		b.Run(map[bool]string{true: "walk afresh", false: "walk revalidating"}[afresh], func(b *testing.B) {
			for b.Loop() {
				if n := gitpolicy.WalkOnce(w.ws, afresh); n != 1 {
					b.Fatal(n, "repositories")
				}
			}
		})
	}
}

// oldWalk is review8's walk, through the view: a directory read per
// directory and an lstat per entry. It returns the repositories found.
func oldWalk(v gitpolicy.View, d string) int {
	names, err := v.ReadDir(d, false)
	if err != nil {
		return 0
	}
	n := 0
	if slices.Contains(names, ".git") {
		n++
	}
	for _, name := range names {
		if name == ".git" {
			continue
		}
		if fi, err := v.Lstat(d+"/"+name, false); err == nil && fi.IsDir() {
			n += oldWalk(v, d+"/"+name)
		}
	}
	return n
}
