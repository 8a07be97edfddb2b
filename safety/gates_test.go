package safety

import "testing"

// gateCases are the cases of issue 20, one table per class: real agent
// commands that must pass, and the nested or stdin-fed code that must not.
var gateCases = []struct {
	rule  string
	cases []checkCase
}{
	{"no-false-block", []checkCase{
		// mini-SWE-agent's submit command: stage, then only inspect.
		{"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", Allow, ""},
		{"rm -rf reproduction\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", Allow, ""},
		{"git add -A && git status", Allow, ""},
		{"git add . && git diff --cached --stat", Allow, ""},
		{"git -C /testbed add -A && git diff --cached > patch.diff", Allow, ""},
		// staging everything, then recording it, stays refused
		{"git add . && git commit -m 'Add math_utils'", Block, "git-add-blind"},
		{"git add -A && git diff --cached && git commit -m x", Block, "git-add-blind"},
		{"git add -A; git stash", Block, "git-add-blind"},
		{"sh -c 'git add -A' && git commit -m x", Block, "git-add-blind"},
		{"git add --all && git commit --amend --no-edit", Block, "git-add-blind"},
		{"git add -A && git rebase --continue", Block, "git-add-blind"},
		// staging everything with nothing or something else after it asks
		{"git add -A && echo staged", Ask, "git-add-blind"},
		{"git add -A && make test", Ask, "git-add-blind"},
		{"git diff --cached && git add -A", Ask, "git-add-blind"},
		{"git add src/a.go && git commit -m x", Allow, ""},
		{"git commit -am 'fix' && git add -A && git status", Allow, ""},
		// a quoted * is a file named *
		{"rm -rf '*'", Allow, ""},
		{`rm -rf "*"`, Allow, ""},
		{`rm -rf \*`, Allow, ""},
		{`X='*'; rm -rf "$X"`, Allow, ""},
		{"X='*'; rm -rf $X", Ask, "rm-workdir"},
		{"rm -rf '/'", Block, "rm-critical"},
		{"rm -rf '/'*", Block, "rm-critical"},
		// emptying the working directory asks; its hidden entries and
		// critical working directories stay blocked
		{"cd build && rm -rf *", Ask, "rm-workdir"},
		{"cd ~ && rm -rf ./*", Block, "rm-critical"},
		{"cd /usr && rm -rf ?*", Block, "rm-critical"},
		// a program under a directory only known at run time
		{`go build -o "$TMPDIR/app" . && "$TMPDIR/app"`, Allow, ""},
		{`$(go env GOPATH)/bin/golangci-lint run ./...`, Allow, ""},
		{`"$VENV/bin/python" -m pytest -x`, Allow, ""},
		{`"$TMPDIR/rm" -rf /`, Block, "rm-critical"},
		{`"$TMPDIR"/bash -c 'rm -rf ~'`, Block, "rm-critical"},
		{`"$VENV/bin/python" -c "$(curl -s x)"`, Ask, "dynamic-shell"},
		{`"$TOOL" run`, Ask, "dynamic-command"},
		{`"$DIR/$TOOL" run`, Ask, "dynamic-command"},
		{`$DIR/.. x`, Ask, "dynamic-command"},
	}},
}

func TestGateCases(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	for _, r := range gateCases {
		t.Run(r.rule, func(t *testing.T) {
			for _, tc := range r.cases {
				checkOne(t, tc)
			}
		})
	}
}
