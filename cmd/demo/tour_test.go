package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The tour keeps the files it names and says where.
func TestTour(t *testing.T) {
	if testing.Short() {
		t.Skip("the tour takes a few seconds")
	}
	r := demo(t, nil, "tour")
	if r.code != 0 {
		t.Fatal(r)
	}
	out := r.stdout
	for _, want := range []string{"status ok", "status failed, exit 2", "status timed_out", "truncated true", "killed processes left running", "SIGKILL", "[background process completed]", "engine shut down",
		"[command cancelled]", "status blocked", "write denied", "network denied", "scratch ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("tour output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`\[command still running after 1s: moved to background as job-\d; read it with bash_output, stop it with bash_kill\]`).MatchString(out) {
		t.Errorf("tour output lacks the yield")
	}
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
