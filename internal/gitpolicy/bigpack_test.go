//go:build linux

package gitpolicy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
)

// TestLargePackStreamed: a pack larger than what policy reads of a
// file into memory (maxDataFile, lowered to 1 MiB here: a real clone's
// pack over 128 MiB takes longer to make than this test may) is
// verified by reading it through its hash, and applies; judging it
// allocates less than the pack's size. A pack whose last byte is
// changed, however large, is refused, and so is one with holes, unread.
func TestLargePackStreamed(t *testing.T) {
	defer gitpolicy.SetMaxDataFile(1 << 20)()
	const repack = "head -c 3M /dev/urandom > big && git add big && git commit -qm big && git -c pack.compression=0 repack -adq"
	t.Run("applies", func(t *testing.T) {
		w := newWorld(t)
		w.repo(t)
		o := w.run(t, repack)
		refused, alloc := o.refusals, o.alloc
		if len(refused) > 0 {
			t.Fatalf("refused: %v", refused)
		}
		packs, _ := filepath.Glob(w.ws + "/.git/objects/pack/*.pack")
		if len(packs) != 1 {
			t.Fatalf("packs applied: %v", packs)
		}
		fi, err := os.Stat(packs[0])
		if err != nil || fi.Size() < 3<<20 {
			t.Fatalf("the pack: %v, %v", fi, err)
		}
		if alloc >= uint64(fi.Size()) {
			t.Errorf("judging a pack of %d bytes allocated %d", fi.Size(), alloc)
		}
		t.Logf("judging a pack of %d bytes allocated %d", fi.Size(), alloc)
	})
	t.Run("holes", func(t *testing.T) {
		// 2 GiB of holes cost the command nothing; hashing them would
		// cost the engine seconds.
		w := newWorld(t)
		w.repo(t)
		refused := w.run(t, repack+" && p=$(ls .git/objects/pack/*.pack) && chmod u+w $p && truncate -s +2G $p").refusals
		if !slices.ContainsFunc(refused, func(r gitpolicy.Refusal) bool {
			return r.Rule == gitpolicy.Object && strings.HasSuffix(r.Path, ".pack") && strings.Contains(r.Reason, "holes")
		}) {
			t.Errorf("the pack with holes was not refused as such: %v", refused)
		}
	})
	t.Run("last byte changed", func(t *testing.T) {
		w := newWorld(t)
		w.repo(t)
		refused := w.run(t, repack+" && p=$(ls .git/objects/pack/*.pack) && chmod u+w $p && printf x | dd of=$p bs=1 seek=$(($(stat -c %s $p)-1)) conv=notrunc 2>/dev/null").refusals
		if !slices.ContainsFunc(refused, func(r gitpolicy.Refusal) bool {
			return r.Rule == gitpolicy.Object && strings.HasSuffix(r.Path, ".pack")
		}) {
			t.Errorf("the corrupt pack was not refused: %v", refused)
		}
	})
}
