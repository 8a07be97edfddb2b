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
// (with -C) and the permission decision (with -profile).
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

	v := safety.Check(command)
	out := checkOutput{Verdict: v}
	if *dir != "" {
		out.Display = safety.Display(command, *dir)
	}
	if prof != nil && v.Decision == safety.Allow {
		d, r := prof.Evaluate(command)
		out.Permission = string(d)
		if r != nil {
			out.PermRule = r.Pattern
		}
	}

	code := 0
	switch {
	case v.Decision == safety.Block:
		code = 1
	case v.Decision == safety.Ask:
		code = 2
	case out.Permission == string(safety.Deny):
		code = 1
	case out.Permission == string(safety.Ask):
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
	switch v.Decision {
	case safety.Block:
		fmt.Fprintf(stdout, "block: %s\n", v.Message())
	case safety.Ask:
		fmt.Fprintf(stdout, "ask: %s\n", v.Reason)
	default:
		switch out.Permission {
		case string(safety.Deny):
			fmt.Fprintf(stdout, "deny: permission profile %s (rule %s)\n", *profile, orDefault(out.PermRule))
		case string(safety.Ask):
			fmt.Fprintf(stdout, "ask: permission profile %s needs approval (rule %s)\n", *profile, orDefault(out.PermRule))
		default:
			fmt.Fprintln(stdout, "allow")
		}
	}
	if *dir != "" && !*asJSON {
		fmt.Fprintf(stdout, "display: %s\n", out.Display)
	}
	return code
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}
