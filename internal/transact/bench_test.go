//go:build linux

package transact_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/layer"
	"github.com/bashvisor/bashvisor/internal/layer/layertest"
	"github.com/bashvisor/bashvisor/internal/transact"
)

// BenchmarkCommit1000 is what the engine does after a command that
// modified 1,000 files (and added none): diff, policy, apply with an
// undo step, the change report's line; and the undo of that step.
// Beside them, "raw" is writing the same 1,000 files in place without a
// layer (what an unconfined command's writes leave to do: nothing), so
// the ratios say what the transaction adds over the files' own I/O;
// the "floor" figures are the file system's share of applying and
// undoing, three ways (see floor). "disk" has the workspace and the manager's directory on the
// test's temporary directory, "tmpfs" both on /dev/shm: there the file
// system costs little, and what remains is the transaction's own.
func BenchmarkCommit1000(b *testing.B) {
	layertest.Need(b)
	b.Run("disk", func(b *testing.B) { commit1000(b, b.TempDir()) })
	b.Run("tmpfs", func(b *testing.B) {
		var st unix.Statfs_t
		if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
			b.Skipf("no tmpfs at /dev/shm: %v", err)
		}
		dir, err := os.MkdirTemp("/dev/shm", "transact-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		commit1000(b, dir)
	})
}

func commit1000(b *testing.B, dir string) {
	base, _ := filepath.EvalSymlinks(dir)
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		d := filepath.Join(ws, fmt.Sprintf("d%02d", i/50))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d.go", i)), []byte("package x\n"), 0o644)
	}
	m, err := transact.New(transact.Options{Dir: filepath.Join(base, "state"), UserXattr: layertest.Unprivileged()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	c := m.Conversation()
	const script = `for f in d*/f*.go; do echo "// $RANDOM" >> "$f"; done`
	var commit, undo, raw, linkRename, renameOver, exchange time.Duration
	for b.Loop() {
		b.StopTimer()
		tx, err := c.Begin([]string{ws}, "edit")
		if err != nil {
			b.Fatal(err)
		}
		if out, err := layertest.Run(b, tx.Spec(), ws, nil, script); err != nil {
			b.Fatal(err, out)
		}
		settle()
		b.StartTimer()
		start := time.Now()
		rep, err := tx.Commit(context.Background(), true)
		if err != nil || len(rep.Applied) != 1000 || len(rep.Failed) > 0 {
			b.Fatalf("%v applied %d failed %v", err, len(rep.Applied), rep.Failed)
		}
		_ = layer.Summary(rep.Applied, ws, 0)
		commit += time.Since(start)
		b.StopTimer()
		settle()
		b.StartTimer()
		start = time.Now()
		if cs, err := c.Undo(context.Background(), 1); err != nil || len(cs) != 1000 {
			b.Fatalf("undo: %v %d", err, len(cs))
		}
		undo += time.Since(start)
		b.StopTimer()
		start = time.Now()
		for i := range 1000 {
			f := filepath.Join(ws, fmt.Sprintf("d%02d", i/50), fmt.Sprintf("f%03d.go", i))
			fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				b.Fatal(err)
			}
			fh.WriteString("// x\n")
			fh.Close()
		}
		raw += time.Since(start)
		lr, ro, ex := floor(b, ws, filepath.Join(base, "floor"))
		linkRename += lr
		renameOver += ro
		exchange += ex
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(commit.Microseconds())/n/1000, "commit-ms")
	b.ReportMetric(float64(undo.Microseconds())/n/1000, "undo-ms")
	b.ReportMetric(float64(raw.Microseconds())/n/1000, "raw-write-ms")
	b.ReportMetric(float64(linkRename.Microseconds())/n/1000, "floor-link-rename-ms")
	b.ReportMetric(float64(renameOver.Microseconds())/n/1000, "floor-rename-over-ms")
	b.ReportMetric(float64(exchange.Microseconds())/n/1000, "floor-exchange-ms")
	b.ReportMetric(float64(commit)/float64(linkRename), "commit/link-rename")
	b.ReportMetric(float64(commit)/float64(exchange), "commit/exchange")
	b.ReportMetric(float64(undo)/float64(exchange), "undo/exchange")
	b.ReportMetric(0, "ns/op")
}

// settle waits for the work the last step left to the background (the
// removal of a used layer, of an undo's trash) and for the disk's
// journal, so that each timed step starts as it would after a model's
// turn, and the floor's and the transaction's steps start alike.
func settle() { time.Sleep(100 * time.Millisecond) }

// floor times the file system's own work of applying 1,000 modified
// files and of undoing that, on the same disk, three ways: a new file
// for each is made beside the workspace (not timed), then
//
//   - link-rename: each real file is linked into a store directory and
//     the new one renamed over it (what Apply did per file before it
//     exchanged them; nothing is freed);
//   - rename-over: the linked one is renamed back over the new one
//     (which frees the new one: what Undo did before it exchanged);
//   - exchange: new files are made again, and each is exchanged with
//     the real one (renameat2 RENAME_EXCHANGE: what Apply and Undo do
//     per file now).
func floor(b *testing.B, ws, dir string) (linkRename, renameOver, exchange time.Duration) {
	src, store := filepath.Join(dir, "new"), filepath.Join(dir, "store")
	for _, d := range []string{src, store} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	real := func(i int) string { return filepath.Join(ws, fmt.Sprintf("d%02d", i/50), fmt.Sprintf("f%03d.go", i)) }
	fresh := func() {
		for i := range 1000 {
			if err := os.WriteFile(fmt.Sprintf("%s/%d", src, i), []byte("package x\n// y\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		settle()
	}
	fresh()
	start := time.Now()
	for i := range 1000 {
		if err := os.Link(real(i), fmt.Sprintf("%s/%d", store, i)); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(fmt.Sprintf("%s/%d", src, i), real(i)); err != nil {
			b.Fatal(err)
		}
	}
	linkRename = time.Since(start)
	settle()
	start = time.Now()
	for i := range 1000 {
		if err := os.Rename(fmt.Sprintf("%s/%d", store, i), real(i)); err != nil {
			b.Fatal(err)
		}
	}
	renameOver = time.Since(start)
	fresh()
	start = time.Now()
	for i := range 1000 {
		if err := unix.Renameat2(unix.AT_FDCWD, fmt.Sprintf("%s/%d", src, i), unix.AT_FDCWD, real(i), unix.RENAME_EXCHANGE); err != nil {
			b.Fatal(err)
		}
	}
	return linkRename, renameOver, time.Since(start)
}
