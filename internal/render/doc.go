// Package render turns the bytes a command wrote into the text a model
// reads: by default the bytes as a terminal would show them, without
// escape sequences or control bytes. It works on byte slices and keeps no
// state between calls; the callers (package truncate for a command's
// buffered output, the engine for a job's output file) decide which bytes
// to render, and keep the raw bytes themselves.
//
// # Modes
//
// [Raw] keeps the bytes; only invalid UTF-8 becomes U+FFFD.
//
// [Clean], for output written to a pipe, removes every escape sequence
// (CSI, OSC, DCS, SOS, PM, APC and two-byte ESC sequences: colours,
// cursor moves, titles, hyperlinks' markers, terminal queries), every
// other C0 control byte but newline and tab (NUL, BEL, …), DEL and the C1
// controls (U+0080–U+009F), and replaces each run of invalid UTF-8 with
// one U+FFFD. Within a line it does what a terminal does with the cursor:
// carriage return goes back to the line's start and what follows
// overwrites it, backspace and CSI n D go back, CSI n C and CSI n G move
// forward or to a column, CSI K erases to the end of the line (CSI 2 K:
// the whole line, and the cursor returns to its start). So a progress bar
// redrawn with \r shows its last state, `ls --color=always` its names, and
// CRLF line ends are plain newlines. Vertical tab and form feed end a
// line. Cursor moves to other lines are dropped: output that draws a
// screen belongs on a terminal (tty jobs, [Terminal]).
//
// [Terminal], for the output of a job run on a pseudo-terminal (the
// engine's tty jobs), replays the bytes on a terminal emulator of the
// job's size and returns its text: the lines that scrolled off the top,
// oldest first, then the lines of the screen (the alternate screen while a
// full-screen program such as less, vi or top shows it). See
// [AppendTerminal] for its bounds and what "text" means for a slice.
//
// # The emulator
//
// The terminal emulator is github.com/charmbracelet/x/vt (the version
// go.mod pins), Charm's virtual terminal: maintained by the authors of
// bubbletea and lipgloss, tagged releases, pure Go. It was chosen over the
// vt10x family (hinshun/vt10x and its forks: unmaintained, no scrollback)
// for what a model needs from a terminal job: xterm-compatible parsing (it
// is built on the charmbracelet/x/ansi DEC state machine), cursor
// addressing, erase in line and display, scroll regions, wide characters,
// the alternate screen and a scrollback of the lines that scroll off. Its
// costs (internal/truncate's BenchmarkRenderedResult; docs/measurements.md
// has the figures): creating one allocates a buffer of a few MiB for
// OSC/DCS strings, and a line that scrolls at the bottom copies the whole
// screen, so output that scrolls replays far slower than a full-screen
// program's redraws. WindowStart bounds that work; an emulator is made per
// replay and kept by nobody (the replay is not incremental: a later read
// replays the window again). An emulator answers terminal queries (device
// attributes, cursor position) on an io.Pipe that blocks until read;
// AppendTerminal closes that pipe first, so the answers are dropped.
//
// # What holds for secrets
//
// Rendering can join bytes that escape sequences, control bytes or cursor
// moves kept apart in the raw output ("sec\x1b[0mret" renders "secret"),
// so a value redacted in the raw stream (internal/secret) is not enough:
// the callers redact every rendered text again before a model reads it.
// What they guarantee is per text: a result, one progress notification's
// output, one bash_output answer never contains a secret value. A value
// whose rendered characters fall on both sides of a cut between two texts
// (two progress notifications, two bash_output slices, the head and tail
// of a truncated output) shows as two fragments; the raw bytes held it
// apart too, where a model could read it anyway, so rendering shows
// nothing that the raw text did not.
package render
