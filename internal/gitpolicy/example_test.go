//go:build linux

package gitpolicy_test

import (
	"fmt"

	"github.com/bashvisor/bashvisor/internal/gitpolicy"
)

func ExampleLines() {
	refusals := []gitpolicy.Refusal{
		{Path: "/ws/.git/commondir", Rule: gitpolicy.Commondir, Reason: "a commondir file"},
		{Path: "/ws/.git/hooks/pre-commit", Rule: gitpolicy.Hooks, Reason: "a hook (a program git runs)"},
		{Path: "/ws/.git/hooks/post-checkout", Rule: gitpolicy.Hooks, Reason: "a hook (a program git runs)"},
	}
	for _, l := range gitpolicy.Lines(refusals, "/ws") {
		fmt.Println(l)
	}
	// Output:
	// refused .git/commondir (git-commondir): a commondir file; it would move the repository's config and hooks elsewhere; set up worktrees outside the sandbox
	// refused .git/hooks/pre-commit, .git/hooks/post-checkout (git-hooks): a hook (a program git runs); hooks are programs git runs later outside the sandbox; ask the user to install them
}
