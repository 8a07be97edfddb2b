package truncate_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/bashvisor/bashvisor/internal/truncate"
)

func ExampleNew() {
	b := truncate.New(truncate.Config{Max: 64, Head: 15, Tail: 16})
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(b, "line %02d\n", i) // a command's output arriving
	}
	fmt.Println(b.Total(), b.LastLine(80))

	out := b.Result()
	fmt.Println(out.Truncated, out.Total)
	fmt.Print(out.Text)
	// Output:
	// 160 line 20
	// true 160
	// [output truncated in middle: got 160 B, showing the first 15 B and the last 16 B]
	// line 01
	// line 02
	//
	//
	// [snip]
	//
	// line 19
	// line 20
}

func ExampleHumanize() {
	fmt.Println(truncate.Humanize(900), truncate.Humanize(1536), truncate.Humanize(300<<10))
	// Output: 900 B 1.5 KiB 300.0 KiB
}

// A job's output file capped at 4 KiB keeps its first 512 bytes and the
// newest output; offsets are the output's, so a read at an offset the
// file dropped starts after the gap.
func ExampleFile() {
	dir, _ := os.MkdirTemp("", "example-file-")
	defer os.RemoveAll(dir)
	f, err := truncate.CreateFile(filepath.Join(dir, "job-1.log"), truncate.MinFileCap)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	for i := range 1000 {
		fmt.Fprintf(f, "line %04d\n", i)
	}
	from, dropped := f.Gap()
	fmt.Println("output", f.Size(), "bytes; dropped", dropped, "from", from)
	buf := make([]byte, 10)
	start, n, _ := f.ReadAt(buf, 5000)
	fmt.Printf("read at 5000: starts at %d: %q\n", start, buf[:n])
	// Output:
	// output 10000 bytes; dropped 6306 from 512
	// read at 5000: starts at 6818: "1\nline 068"
}
