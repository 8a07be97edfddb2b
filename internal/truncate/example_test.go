package truncate_test

import (
	"fmt"

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
	// [output truncated in middle: got 160 B, max is 64 B]
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
