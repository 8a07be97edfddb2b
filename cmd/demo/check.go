package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/bashvisor/bashvisor/safety"
)

func init() { commands["check"] = cmdCheck }

// cmdCheck implements `demo check [-json] [-C DIR] [-profile NAME] [--]
// COMMAND`: analysis only, the command is never executed. Exit status 0
// allow, 1 block (or denied by the profile), 2 ask, 64 usage error.
func cmdCheck(args []string) int {
	return runCheck(args, os.Stdout, os.Stderr)
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

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the verdict as JSON")
	dir := fs.String("C", "", "working directory, used to compute the display form")
	profile := fs.String("profile", "", "also evaluate a permission preset: "+strings.Join(safety.Presets(), ", "))
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: demo check [-json] [-C DIR] [-profile NAME] [--] COMMAND\n"+
			"Analyses COMMAND without running it. Exit status: 0 allow, 1 block, 2 ask, 64 usage.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 64
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 64
	}
	command := strings.Join(fs.Args(), " ")
	var prof *safety.Profile
	if *profile != "" {
		p, err := safety.Preset(*profile)
		if err != nil {
			fmt.Fprintln(stderr, "demo check:", err)
			return 64
		}
		prof = p
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
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(stderr, "demo check:", err)
			return 64
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
