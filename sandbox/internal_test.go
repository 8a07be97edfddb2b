package sandbox

import (
	"fmt"
	"os"
	"testing"
)

func BenchmarkBuildFilter(b *testing.B) {
	for b.Loop() {
		if _, err := buildFilter(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCgroupCreateRemove(b *testing.B) {
	if !Probe().Cgroup {
		b.Skip("no cgroup")
	}
	i := 0
	for b.Loop() {
		i++
		d, err := createCgroup(fmt.Sprintf("bench-%d-%d", os.Getpid(), i), 10)
		if err != nil {
			b.Fatal(err)
		}
		if err := removeCgroup(d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScratchCreateRemove(b *testing.B) {
	for b.Loop() {
		d, err := os.MkdirTemp("", "bashvisor-sbx-")
		if err != nil {
			b.Fatal(err)
		}
		os.Mkdir(d+"/.cache", 0o700)
		if err := removeScratch(d); err != nil {
			b.Fatal(err)
		}
	}
}
