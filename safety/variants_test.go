package safety

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

var plainWord = regexp.MustCompile(`^[A-Za-z0-9/._=:+-]+$`)

// TestQuotingVariants: quoting or escaping plain words never changes the
// decision (the analyser resolves words like bash does).
func TestQuotingVariants(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	n := 0
	for _, tc := range allCases() {
		words := strings.Fields(tc.cmd)
		if len(words) == 0 || strings.Join(words, " ") != tc.cmd {
			continue
		}
		ok := true
		for _, w := range words {
			if !plainWord.MatchString(w) {
				ok = false
			}
		}
		if !ok || syntax.IsKeyword(words[0]) || strings.Contains(words[0], "=") {
			continue // a quoted keyword is an ordinary command name, a quoted NAME=value a word
		}
		variants := []func(string) string{
			func(w string) string { return "'" + w + "'" },
			func(w string) string { return `"` + w + `"` },
			func(w string) string { return `\` + w },
			func(w string) string { return w[:1] + "''" + w[1:] },
			func(w string) string { return `$'` + w + `'` },
		}
		for vi, f := range variants {
			q := make([]string, len(words))
			for i, w := range words {
				q[i] = f(w)
			}
			cmd := strings.Join(q, " ")
			if got := Check(cmd); got.Decision != tc.want {
				t.Errorf("variant %d %q = %s (%s), want %s like %q", vi, cmd, got.Decision, got.Reason, tc.want, tc.cmd)
			}
			n++
		}
	}
	t.Logf("%d quoting variants", n)
}

// expansionScripts end with printf '<%s>' WORDS: the fields the analyser
// expands WORDS to must be the ones bash prints (with globbing off: only
// expansion and splitting are compared).
var expansionScripts = []string{
	// IFS splitting
	`x="rm -rf /"; printf '<%s>' $x`,
	`IFS=,; x=rm,-rf,/; printf '<%s>' $x "$x"`,
	`IFS=/; x="rm -rf /"; printf '<%s>' $x`,
	`IFS=/; p=/usr/lib; printf '<%s>' $p x$p $p/`,
	`IFS=; x="a b"; printf '<%s>' $x`,
	`IFS=$'\n'; x=$'a b\nc'; printf '<%s>' $x`,
	`IFS=,; unset IFS; x="a b"; printf '<%s>' $x`,
	`old=$IFS; IFS=,; IFS=$old; x="a b,c"; printf '<%s>' $x`,
	`IFS=', '; v=" ,a"; w="a ,, b"; u=", "; printf '<%s>' $v ""$v $v"" x$v $v$v $w x$w $u $u""`,
	`IFS=,; v="a,"; printf '<%s>' $v $v"" ""$v $v$v`,
	`IFS=,; set -- a b; printf '<%s>' "$*" $*`,
	`IFS=,; a=(1 2); printf '<%s>' "${a[*]}"`,
	`f() { local IFS=,; x=a,b; }; f; printf '<%s>' $x`,
	// brace sequences
	`printf '<%s>' {1..10..3} {3..1} {c..a} {5..-5..4} {a..e..2} {7..7}`,
	// parameter operators
	`x=/usr/local; printf '<%s>' ${x%/*} ${x%%/*} ${x#*/} ${x##*/} ${x%/} "${x%"/local"}"`,
	`x=/usr/local/lib; printf '<%s>' ${x/l/L} ${x//l/L} ${x/#\/usr/X} ${x/%lib/Y} ${x//[ac]/-} ${x/l*/Z}`,
	`x=/usr/local; printf '<%s>' ${x:1:3} ${x: -5} ${x:2} ${x:1:-2} ${x^^} ${x^} ${x,,} ${#x}`,
	`X=/BIN; printf '<%s>' ${X,,} ${X,} ${X^^}`,
	`x=HOME; y=x; printf '<%s>' "${!x}" ${!y}`,
	`X=; printf '<%s>' "${X:-/}" "${X-/}" "${X:+y}" "${X+z}" "${X:=d}"`,
	`X=v; printf '<%s>' "${X:-/}" "${X:+y}" "${X:?}" ${HOME%/}`,
	// arrays
	`a=(/ /bin "x y"); printf '<%s>' "${a[@]}" ${a[@]} "${a[*]}" ${a[1]} ${a[-1]} "${#a[@]}" "x${a[@]}y" $a`,
	`a=(1); a+=(2 3); a[1]=two; a[3]=four; printf '<%s>' "${a[@]}" ${a[@]:1:2}`,
	`declare -a a=(p q); b=("${a[@]}" r); printf '<%s>' "${b[@]}" "${b[@]/#/-}"`,
	`s=x; printf '<%s>' "${s[0]}" "${s[@]}"`,
	// positional parameters
	`set -- a 'b c' d; printf '<%s>' "$@" $@ "$*" $# "${@:2}" "$2" "${3}"`,
	`set -- /; shift; printf '<%s>' "$#" "x$1"`,
	`f() { printf '<%s>' "$@" "$#" "${1:-none}"; }; f 'a b' c`,
	`f() { shift 2; printf '<%s>' "$@"; }; f a b c d`,
	`set -euo pipefail; set -- a; printf '<%s>' "$1"`,
}

func TestExpansionLikeBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	t.Setenv("HOME", "/home/tester")
	for _, script := range expansionScripts {
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", "set -f; "+script).Output()
		if err != nil {
			t.Fatalf("bash %q: %v", script, err)
		}
		if got := staticFields(t, script); got != string(out) {
			t.Errorf("%s\n  analyser: %s\n  bash:     %s", script, got, out)
		}
	}
}

// staticFields walks the statements of script like Check and returns the
// fields of its last command's arguments (the first two are printf and its
// format) as printf '<%s>' would print them.
func staticFields(t *testing.T, script string) string {
	f, err := parse(script, false)
	if err != nil {
		t.Fatalf("parse %q: %v", script, err)
	}
	var c checker
	c.v.Decision = Allow
	last := f.Stmts[len(f.Stmts)-1]
	c.stmts(f.Stmts[:len(f.Stmts)-1], stdinSrc{})
	if call, ok := last.Cmd.(*syntax.FuncDecl); ok {
		t.Fatalf("%q ends with a function declaration %v", script, call)
	}
	var stmt *syntax.Stmt = last
	if call, ok := last.Cmd.(*syntax.CallExpr); ok && len(call.Args) > 0 && call.Args[0].Lit() != "printf" {
		// f ARGS: walk the body with its parameters bound, then expand
		// the printf inside it
		body := c.funcs[call.Args[0].Lit()]
		var args []field
		for i, w := range call.Args {
			args = c.resolveWord(w, i, args)
		}
		defer c.leaveFunc(c.enterFunc(args[1:]))
		ss := body.Cmd.(*syntax.Block).Stmts
		c.stmts(ss[:len(ss)-1], stdinSrc{})
		stmt = ss[len(ss)-1]
	}
	var fs []field
	for i, w := range stmt.Cmd.(*syntax.CallExpr).Args {
		fs = c.resolveWord(w, i, fs)
	}
	var b strings.Builder
	for _, f := range fs[2:] {
		if f.dyn {
			t.Errorf("%q: field %q is not static", script, f.s)
		}
		b.WriteString("<" + strings.ReplaceAll(f.s, homeMark, "/home/tester") + ">")
	}
	return b.String()
}
