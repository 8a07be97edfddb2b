package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/bashvisor/bashvisor/cmd/internal/checkcli"
	"github.com/bashvisor/bashvisor/safety"
)

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// runCheck implements `demo check [-json] [-C DIR] [-profile NAME] [-stdin
// pipe|tty] [--] COMMAND`: analysis only, the command is never executed.
// Exit status 0 allow, 1 block (or denied by the profile), 2 ask, 126 bad
// input (what `demo run` refuses without running: an empty command, NUL
// bytes, ...), 64 usage error.
//
// `demo check -` reads commands from stdin instead, each a JSON string on
// its own line, and writes one JSON verdict per line (see
// checkcli.Batch); the exit status is that of the most severe answer (1
// if any command is blocked or denied, else 2 if any asks, else 126 if a
// line was bad input, else 0).
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check")
	asJSON := fs.Bool("json", false, "print the verdict as JSON")
	dir := fs.String("C", "", "working `dir`ectory, used to compute the display form")
	profile := fs.String("profile", "", "also evaluate a permission preset: "+strings.Join(safety.Presets(), ", "))
	stdin := fs.String("stdin", "", "the command's stdin as the engine would give it: pipe or tty (programs that may run code they read then ask)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(fs, stderr, "missing COMMAND (or - to read commands from stdin)")
	}
	cfg := checkcli.Config{Dir: *dir, Stdin: *stdin}
	switch *stdin {
	case "", "null", "pipe", "tty":
	default:
		return usageError(fs, stderr, "-stdin: want pipe or tty, not %q", *stdin)
	}
	if *profile != "" {
		p, err := safety.Preset(*profile)
		if err != nil {
			return usageError(fs, stderr, "-profile: %v", err)
		}
		cfg.Profile = p
	}
	if fs.NArg() == 1 && fs.Arg(0) == "-" {
		sum, err := checkcli.Batch(os.Stdin, stdout, cfg)
		if err != nil {
			fmt.Fprintln(stderr, "demo check:", err)
			return exitSystem
		}
		return map[string]int{"block": 1, "deny": 1, "ask": 2, "error": exitSystem}[sum.Worst()]
	}
	command := strings.Join(fs.Args(), " ")
	out, o, err := checkcli.Check(command, cfg)
	if err != nil {
		// The engine refuses bad input before any analysis; so does check.
		if *asJSON {
			writeJSON(stdout, out)
		} else {
			fmt.Fprintln(stderr, errPrefix("check"), err)
		}
		return exitSystem
	}

	code := 0
	switch o.Decision {
	case safety.Block, safety.Deny:
		code = 1
	case safety.Ask:
		code = 2
	}

	if *asJSON {
		if err := writeJSON(stdout, out); err != nil {
			fmt.Fprintln(stderr, errPrefix("check"), err)
			return exitSystem
		}
		return code
	}
	switch o.Decision {
	case safety.Block:
		fmt.Fprintf(stdout, "block: %s\n", o.Message)
	case safety.Deny:
		fmt.Fprintf(stdout, "deny: %s\n", o.Message)
	case safety.Ask:
		fmt.Fprintf(stdout, "ask: %s\n", o.Message)
	default:
		fmt.Fprintln(stdout, "allow")
	}
	if *dir != "" {
		fmt.Fprintf(stdout, "display: %s\n", out.Display)
	}
	return code
}
