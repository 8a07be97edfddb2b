//go:build linux

package layer_test

import (
	"fmt"
	"io/fs"

	"github.com/bashvisor/bashvisor/internal/layer"
)

func ExampleSummary() {
	changes := []layer.Change{
		{Path: "/ws/src/a.go", Kind: layer.Modified, Size: 120},
		{Path: "/ws/b.txt", Kind: layer.Added, Size: 3},
		{Path: "/ws/old.txt", Kind: layer.Deleted, Size: 9},
		{Path: "/ws/gen", Kind: layer.Added, Mode: fs.ModeDir | 0o755},
		{Path: "/ws/gen/x.go", Kind: layer.Added, Size: 7},
	}
	fmt.Println(layer.Summary(changes, "/ws", 0))
	fmt.Println(layer.Summary(changes, "/ws", 50))
	// Output:
	// [changed 4 files: M src/a.go, A b.txt, D old.txt, A gen/x.go]
	// [changed 4 files: M src/a.go, A b.txt, and 2 more]
}
