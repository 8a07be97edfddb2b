package safety

import (
	"os"
	"strings"
	"testing"
)

// heredocCases are commands with quoted heredocs, including forms the cut
// must leave to the parser.
var heredocCases = []string{
	"cat <<'EOF' > f.py\nimport os\nprint(1)\nEOF",
	"cat <<'EOF' > f.py\nimport os\nEOF\ncd /work && git commit -m x",
	"cd /testbed && cat <<'EOF' > a.py && python a.py\nx = 1\nEOF",
	"cat <<\"EOF\" > a\n$HOME `x`\nEOF\ngit add a && git commit -m 'a'",
	"cat <<\\EOF | bash\nrm -rf /\nEOF",
	"bash <<'EOF'\nrm -rf ~\nEOF",
	"python3 - <<'PY'\nimport subprocess\nPY\nGH_TOKEN=ghp_0123456789abcdefABCDEF gh pr list",
	"cat <<'A' <<'B'\na\nA\nb\nB\necho done",
	"echo \"<<'EOF'\"\nrm -rf /\nEOF",
	"echo '\n<<'EOF'\nx\nEOF",
	"cat <<'EOF' > \"$TMPDIR/x\" # a comment ' here\nbody\nEOF\necho ok",
	"x=$(cat <<'EOF'\nhi)\nEOF\n)\necho $x",
	"cat <<-'EOF'\n\tbody\n\tEOF\necho ok",
	"cat <<'EOF'\nEOF\nEOF\nrm -rf /",
	"cat <<'EOF' \\\n > f\nbody\nEOF",
	"cat <<'EOF'\nno end",
	"cat <<'EOF' > f; cat <<'EOF' > g\na\nEOF\nb\nEOF",
	"for i in 1 2; do cat <<'EOF' >> log\nline $i\nEOF\ndone; rm -rf ./*",
	"cat <<'E-1.x' > f\nbody\nE-1.x\nsudo -u x git add -A",
	"cat << 'EOF' > f\nbody\nEOF",
	"cat <<'EOF'>f&&git commit -m 'y'\nbody\nEOF",
}

// TestHeredocCutSameAnalysis: parsing a skeleton with heredoc bodies cut
// out gives the analysis a whole parse gives, on tricky forms and on the
// agent corpus when there is one.
func TestHeredocCutSameAnalysis(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	cmds := append([]string(nil), heredocCases...)
	if os.Getenv("BASHVISOR_AGENT_CORPUS") != "" {
		for _, rec := range agentCorpus(t) {
			if strings.Contains(rec.Command, "<<") {
				cmds = append(cmds, rec.Command)
			}
		}
	}
	prof, err := Preset("standard")
	if err != nil {
		t.Fatal(err)
	}
	cut := 0
	for _, cmd := range cmds {
		opts := Options{WorkDir: "/work", Profile: prof, CoAuthor: "A <a@b>", Log: true}
		fast := &source{text: cmd}
		got := analyze(fast, opts)
		want := analyze(&source{text: cmd, whole: true}, opts)
		if got != want {
			t.Errorf("%q:\ncut   %+v\nwhole %+v", cmd, got, want)
		}
		if len(fast.holes) > 0 {
			cut++
		}
	}
	if cut < 10 {
		t.Errorf("only %d of %d commands took the cut path", cut, len(cmds))
	}
	t.Logf("%d commands, %d parsed with heredoc bodies cut out", len(cmds), cut)
}
