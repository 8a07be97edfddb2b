package render_test

import (
	"fmt"

	"github.com/bashvisor/bashvisor/internal/render"
)

func ExampleAppendClean() {
	raw := []byte("\x1b[01;34mdir\x1b[0m  file\n 10%\r 60%\r100%\n\x00done\r\n")
	text, _ := render.AppendClean(nil, raw, render.CleanOptions{})
	fmt.Printf("%q\n", text)
	// Output: "dir  file\n100%\ndone\n"
}

func ExampleAppendTerminal() {
	// A REPL on a terminal: the whole text, then what the answer changed.
	raw := []byte(">>> print(6*7)\r\n42\r\n>>> ")
	size := render.Size{Cols: 80, Rows: 24}
	fmt.Printf("%q\n", render.AppendTerminal(nil, raw, size, 0))
	fmt.Printf("%q\n", render.AppendTerminal(nil, raw, size, len(">>> ")))
	// Output:
	// ">>> print(6*7)\n42\n>>> "
	// "print(6*7)\n42\n>>> "
}
