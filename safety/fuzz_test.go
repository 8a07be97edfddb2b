package safety

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheck: the analyser (and the other parsers' users) never panic and
// do work linear in the input (counted, not timed), whatever the input.
func FuzzCheck(f *testing.F) {
	for _, tc := range allCases() {
		f.Add(tc.cmd)
	}
	f.Add(strings.Repeat("$(", 200) + strings.Repeat(")", 200))
	f.Add(strings.Repeat("bash -c '", 20))
	f.Add("rm -rf /{" + strings.Repeat("a,", 100) + "}{1..100000}")
	f.Add("for a in 1 2 3; do for b in 1 2 3; do eval \"rm -rf /tmp/$a$b\"; done; done")
	for _, c := range redactTexts {
		f.Add(c)
	}
	for _, c := range heredocCases {
		f.Add(c)
	}
	for _, c := range stdinCases {
		f.Add(c.cmd)
	}
	for _, seed := range []string{
		"IFS=,; cmd=rm,-rf,/; $cmd",
		"IFS=$'\\n'; x=$'a\\nb'; $x; unset IFS; read IFS; $x",
		"printf '%s %b %d %q\\n' a 'b\\c' 3 \"x y\" | bash",
		"echo -e 'rm -rf ~\\0101' | tee log | sh",
		"cat <<EOF | bash\nrm -rf $HOME\nEOF",
		"rm -rf /[b]in /bi? .[!.]* ~/.??* /home/*/[",
		"x=/a/b; a=(1 2); rm -rf ${x%/*} ${x//[ab]/} ${x/#\\//} ${!x} ${a[@]:1} ${x:1:-1} ${x^^} ~root ~+",
		"f() { g \"$@\"; f \"$1\"x; }; g() { rm -rf \"$2\"; shift; set -- \"$@\"; }; f a /",
		"flock /l -c 'sg g -c \"script -qc \\\"rm -rf /\\\"\"'",
		"git -c alias.a='!f() { git add \"$@\"; }; f' -c alias.b=a b -A",
		"sgdisk -Z -P /dev/sda; sfdisk -N2 /dev/sda; parted /dev/sda unit s print; wipefs -ao 0 x",
		"ruby -e \"$(curl x)\"; perl -lne\"$(wget -O- y)\"; node --eval=\"$X\"",
	} {
		f.Add(seed)
	}
	prof, err := Preset("standard")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		v, work := check(cmd)
		if work > workBound(len(cmd)) {
			t.Fatalf("Check did %d units of work on %d bytes %q", work, len(cmd), cmd)
		}
		if strings.ContainsAny(v.Message(), "\n\r\x00") || !utf8.ValidString(v.Message()) || len(v.Reason) > 2*maxReason {
			t.Fatalf("message not one clean line: %q", v.Message())
		}
		switch v.Decision {
		case Allow:
		case Block:
			if v.Reason == "" || v.Alternative == "" {
				t.Fatalf("block without reason/alternative: %+v", v)
			}
		case Ask:
			if v.Reason == "" || v.Alternative == "" {
				t.Fatalf("ask without reason/alternative: %+v", v)
			}
		default:
			t.Fatalf("bad decision %q", v.Decision)
		}
		if d := Display(cmd, "/tmp"); !strings.HasSuffix(cmd, d) {
			t.Fatalf("Display(%q) = %q is not a suffix of the command", cmd, d)
		}
		out := AddCoAuthor(cmd, "A <a@b>")
		if out != cmd && !strings.Contains(out, `--trailer "Co-authored-by: A <a@b>"`) {
			t.Fatalf("AddCoAuthor changed %q into %q", cmd, out)
		}
		prof.Evaluate(cmd)
		if got, want := redactWith(&source{text: cmd}, false), redactWith(&source{text: cmd}, true); got != want {
			t.Fatalf("windowed redaction of %q = %q, whole text %q", cmd, got, want)
		}
		// A job's stdin taking input later only adds reasons to ask.
		if fed := Analyze(cmd, Options{StdinFed: true}).Outcome.Verdict; fed.Decision.severity() < v.Decision.severity() {
			t.Fatalf("%q: %s with a stdin pipe, %s without", cmd, fed.Decision, v.Decision)
		}
		if tty := Analyze(cmd, Options{Terminal: true}).Outcome.Verdict; tty.Decision.severity() < v.Decision.severity() {
			t.Fatalf("%q: %s on a terminal, %s without", cmd, tty.Decision, v.Decision)
		}
		opts := Options{WorkDir: "/tmp", Profile: prof, CoAuthor: "A <a@b>", Log: true}
		if got, want := analyze(&source{text: cmd}, opts), analyze(&source{text: cmd, whole: true}, opts); got != want {
			t.Fatalf("heredoc cut changes the analysis of %q:\ncut   %+v\nwhole %+v", cmd, got, want)
		}
	})
}
