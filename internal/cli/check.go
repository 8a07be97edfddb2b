package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/safety"
)

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// checkOutput is the -json form: the safety verdict plus the display form
// (with -C) and, with -profile, the profile's decision when it overrides
// the verdict (deny or ask) and the pattern that decided.
type checkOutput struct {
	safety.Verdict
	Display    string `json:"display,omitempty"`
	Permission string `json:"permission,omitempty"`
	PermRule   string `json:"permission_rule,omitempty"`
}

// runCheck implements `demo check [-json] [-C DIR] [-profile NAME] [--]
// COMMAND`: analysis only, the command is never executed. Exit status 0
// allow, 1 block (or denied by the profile), 2 ask, 126 bad input (what
// `demo run` refuses without running: an empty command, NUL bytes, ...),
// 64 usage error.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check")
	asJSON := fs.Bool("json", false, "print the verdict as JSON")
	dir := fs.String("C", "", "working `dir`ectory, used to compute the display form")
	profile := fs.String("profile", "", "also evaluate a permission preset: "+strings.Join(safety.Presets(), ", "))
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(fs, stderr, "missing COMMAND")
	}
	command := strings.Join(fs.Args(), " ")
	var prof *safety.Profile
	if *profile != "" {
		p, err := safety.Preset(*profile)
		if err != nil {
			return usageError(fs, stderr, "-profile: %v", err)
		}
		prof = p
	}
	// The engine refuses bad input before any analysis; so does check.
	if err := engine.ValidateInput(engine.Input{Command: command}); err != nil {
		if *asJSON {
			writeJSON(stdout, checkOutput{Verdict: safety.Verdict{Decision: "error", Reason: err.Error()}})
		} else {
			fmt.Fprintln(stderr, errPrefix("check"), err)
		}
		return exitSystem
	}

	o := safety.Gate(command, prof)
	v := o.Verdict
	out := checkOutput{Verdict: v}
	if *dir != "" {
		out.Display = safety.Display(command, *dir)
	}
	if prof != nil && o.Decision != v.Decision {
		out.Permission = string(o.Decision)
		out.PermRule = o.Rule
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
		if o.Decision == v.Decision {
			fmt.Fprintf(stdout, "ask: %s\n", v.Reason)
		} else {
			fmt.Fprintf(stdout, "ask: %s\n", o.Message)
		}
	default:
		fmt.Fprintln(stdout, "allow")
	}
	if *dir != "" {
		fmt.Fprintf(stdout, "display: %s\n", out.Display)
	}
	return code
}
