package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// tourWants says, for each block of the tour (by its title), what the
// block must show. Every step of tourSteps has an entry, so a new step
// comes with what it shows.
var tourWants = map[string][]string{
	"a success": {"status ok, exit 0", "| hello from bash", "| Linux"},
	"a failure with its exit code, stderr interleaved":                         {"status failed, exit 2", "| [command failed: exit code 2]", "| compiling\n   | error: missing semicolon"},
	"a timeout: partial output kept, process group ended":                      {"status timed_out", "| [command timed out after 2s]", "| working"},
	"a flood of 10 MiB: middle cut, full output spooled":                       {"10485760 bytes, truncated true", "| [output truncated in middle: got 10.0 MiB, showing the first 32 KiB and the last 96 KiB]", "| [full output: /"},
	"a grandchild holding the pipe: returns promptly, leftover named":          {"status ok, exit 0", "| server started", "| [killed processes left running after the shell exited: sleep (pid "},
	"a SIGTERM-ignoring tree past its timeout: SIGKILL after the grace period": {"status timed_out, exit 137, SIGKILL", "| stubborn"},
	"secrets filtered from the environment":                                    {"| GITHUB_TOKEN=<unset> PATH is set"},
	"a background job":                                                         {"status started", "| <pid>", "| <output_file>/"},
	"a yield: after 1s the call returns what it has and the command runs on as a job": {"status started",
		"| [command still running after 1s: moved to background as job-"},
	"binary output made valid UTF-8":                                     {"| bytes: \uFFFD end"},
	"no TTY, stdin at EOF":                                               {"| not a tty", "| stdin: EOF"},
	"a call cancelled by its caller after 700ms":                         {"status cancelled", "| [command cancelled]"},
	"a dangerous command, blocked by the analyser and never run":         {"status blocked", "| [command blocked: recursive rm of ~"},
	"a disguised one: quotes, a wrapper and nested shell code":           {"status blocked", "| [command blocked: force push (-f)"},
	"restricted mode: read-only filesystem, no network, private $TMPDIR": {"status ok, exit 0", "| read ok", "| write denied", "| scratch ok", "| network denied"},
	"a git hook written from the shell: the analyser asks a person first, and nothing runs": {"status needs_approval, 0 bytes",
		"| [command needs approval: writes the git hook .git/hooks/pre-commit"},
	"sandbox workspace-write, the same hook approved by a person: the commit is applied, the hook and the config change refused, the rest read-only": {
		"status ok, exit 0",
		"| hook written (in the command's layer)",
		"| outside denied",
		"| [changed ",
		"| [refused .git/config (git-config): ",
		"| [refused .git/hooks/pre-commit (git-hooks): ",
		`afterwards, outside the sandbox: 2 commits, the last "from the sandbox"; no .git/hooks/pre-commit; core.fsmonitor unset`,
	},
	"background jobs after the others finished": {"job-1 pid ", "job-2 pid ", "completed (exit 0)", `tick 3\n\n\n[background process completed]`, `step 4\n\n\n[background process completed]`},
}

// tourBlocks splits the tour's output into its blocks, each under the
// title its "== " line names.
func tourBlocks(t *testing.T, out string) map[string]string {
	t.Helper()
	blocks := map[string]string{}
	title := ""
	for line := range strings.Lines(out) {
		if s, ok := strings.CutPrefix(line, "== "); ok {
			title = strings.TrimSuffix(s, "\n")
			if _, dup := blocks[title]; dup {
				t.Errorf("the tour prints the block %q twice", title)
			}
			blocks[title] = ""
			continue
		}
		if title != "" {
			blocks[title] += line
		}
	}
	return blocks
}

// Each block of the tour shows what its title says: the status, the text
// the model reads, and for the sandbox the workspace afterwards.
func TestTourBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("the tour takes a few seconds")
	}
	for _, s := range tourSteps() {
		if _, ok := tourWants[s.title]; !ok {
			t.Errorf("step %q: the test does not say what its block must show", s.title)
		}
	}
	checkTourSummary(t)
	r := demo(t, nil, "tour")
	if r.code != 0 {
		t.Fatal(r)
	}
	blocks := tourBlocks(t, r.stdout)
	for title, wants := range tourWants {
		block, ok := blocks[title]
		if !ok {
			t.Errorf("the tour has no block %q", title)
			continue
		}
		for _, want := range wants {
			if !strings.Contains(block, want) {
				t.Errorf("block %q lacks %q:\n%s", title, want, block)
			}
		}
	}
	if len(blocks) != len(tourWants) {
		t.Errorf("the tour prints %d blocks, want %d", len(blocks), len(tourWants))
	}
	if !strings.Contains(r.stdout, "engine shut down in ") {
		t.Errorf("the tour does not say the engine shut down:\n%s", r.stdout)
	}
	checkTourFiles(t, r.stdout)
}

// checkTourSummary checks that the tour's summary in the help (and so in
// the README's first lines, which quote it) counts its steps.
func checkTourSummary(t *testing.T) {
	t.Helper()
	words := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
		"thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}
	n := len(tourSteps())
	for _, c := range program().Commands {
		if c.Name != "tour" {
			continue
		}
		if n >= len(words) || !strings.HasPrefix(c.Summary, words[n]+" commands") {
			t.Errorf("the tour has %d steps; its summary says %q", n, c.Summary)
		}
		return
	}
	t.Error("the demo has no tour command")
}

// The tour keeps the files it names and says where.
func checkTourFiles(t *testing.T, out string) {
	t.Helper()
	m := regexp.MustCompile(`the output files named above are kept in (\S+) \(rm -r `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the tour does not say where its files are:\n%s", out)
	}
	defer os.RemoveAll(m[1])
	named := regexp.MustCompile(`(?:\[full output: |<output_file>)(/[^\]<]+)`).FindAllStringSubmatch(out, -1)
	if len(named) < 2 {
		t.Errorf("the tour names %d files, want the flood's and the job's", len(named))
	}
	for _, n := range named {
		if _, err := os.Stat(n[1]); err != nil || !strings.HasPrefix(n[1], m[1]+"/") {
			t.Errorf("named file %s: %v", n[1], err)
		}
	}
}
