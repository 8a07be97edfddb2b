package safety

import "testing"

// TestReadOnlyGrammar: what the locked profile allows, by the argument
// grammars, and what it denies although the program reads.
func TestReadOnlyGrammar(t *testing.T) {
	locked, _ := Preset("locked")
	for _, tc := range []struct {
		cmd  string
		want Decision
	}{
		{"cat f > /dev/null", Allow}, {"ls >&2", Allow}, {"ls 2>&1 | head", Allow}, {"ls > out", Deny},
		{"LC_ALL=C sort f", Allow}, {"PAGER=./x git log", Deny}, {"GIT_EXTERNAL_DIFF=x git diff", Deny},
		{"find . -name '*.py' -type f", Allow}, {"find . -name x -exec rm {} +", Deny}, {"find . -delete", Deny},
		{"find . -fprint out", Deny}, {`find . -name "$x"`, Allow}, {`find . $x`, Deny},
		{"git status --short", Allow}, {"git log --oneline -5", Allow}, {"git diff HEAD~1 -- a.py", Allow},
		{"git -C sub log", Allow}, {"git -C /etc log", Deny}, {"git -C ../x log", Deny},
		{"git -c core.pager=x log", Deny}, {"git --git-dir=x log", Deny}, {"git --exec-path=x status", Deny},
		{"git log --output=x", Deny}, {"git diff --ext-diff", Deny}, {"git grep -O x", Deny}, {`git log "$x"`, Deny},
		{"git branch", Allow}, {"git branch -a", Allow}, {"git branch new", Deny}, {"git branch -D x", Deny},
		{"git tag", Allow}, {"git tag -l 'v*'", Allow}, {"git tag v1", Deny},
		{"git stash list", Allow}, {"git stash", Deny}, {"git stash pop", Deny},
		{"git config --get user.name", Allow}, {"git config user.name x", Deny}, {"git remote -v", Allow},
		{"git remote add o x", Deny}, {"git fetch", Deny}, {"git checkout x", Deny},
		{"sed -n '1,20p' f", Allow}, {"nl -ba f | sed -n '10,20p'", Allow}, {"sed -n '1w out' f", Deny},
		{"sed -n 's/a/b/w out' f", Deny}, {"sed -i 1d f", Deny}, {"sed '1e id' f", Deny}, {"sed -f s.sed f", Deny},
		{"sort -k2 -n f", Allow}, {"sort -o x f", Deny}, {"sort -ro x f", Deny}, {"sort --output=x f", Deny},
		{"sort --compress-program=sh f", Deny}, {"sort -T /tmp f", Deny},
		{"find . | xargs grep -l x", Allow}, {"xargs rg x", Deny}, {"xargs -I{} sh -c {}", Deny}, {"xargs sort -o x", Deny},
		{"uniq -c f", Allow}, {"uniq a b", Deny}, {"tree -L 2", Allow}, {"tree -o x", Deny}, {"file -C -m x", Deny},
		{"less -N f", Allow}, {"less '+!touch S' f", Deny}, {"less -o log f", Deny}, {"less -k keys f", Deny},
		{"date +%s", Allow}, {"date -d yesterday", Allow}, {"date -u +%F", Allow}, {"date 0101", Deny}, {"date -s x", Deny},
		{"hostname", Allow}, {"hostname -f", Allow}, {"hostname x", Deny}, {"hostname -F f", Deny}, {"hostname -b x", Deny},
		{"printf -v x '%s' y", Allow}, {"printf -v 'x[0]' y", Deny}, {`printf "$fmt" y`, Deny}, {`printf '%s' "$y"`, Allow},
		{"test -v x", Allow}, {`[ -v "$x" ]`, Deny}, {`[ -f "$f" ]`, Allow}, {`[ "$a" = "$b" ]`, Allow}, {`[ $a ]`, Deny},
		{`test "$a"`, Allow}, {`test "$a" "$b"`, Deny},
		{"cd src && grep -rn x .", Allow}, {"ls $(touch S)", Deny}, {"cat <(touch S)", Deny}, {"env ls", Deny},
		{"pip list", Allow}, {"pip install x", Deny}, {"python3 --version", Allow}, {"./x --version", Deny},
		{"echo $((1+2))", Allow}, {"rg --pre sh x", Deny}, {"ag --pager x y", Deny},
		{"rg -z x f.gz", Deny}, {"rg --search-zip x", Deny}, {"rg -E latin1 x", Allow}, {"cat < f", Allow},
		{"cat < /dev/tcp/example.com/80", Deny}, {`cat < "$f"`, Deny}, {"cat < //dev/udp/h/53", Deny},
		{"echo $(( x + $y ))", Allow}, {`echo $(( 'a[$(touch S)]' ))`, Deny}, {`echo ${x:'a[$(touch S)]'}`, Deny},
		{`echo "${a['b[$(touch S)]']}"`, Deny}, {`echo $(( $(cat f) ))`, Deny}, {`echo "${a[@]}" ${x:1:2}`, Allow},
		// what surrounds the simple commands: compound commands'
		// redirections, arithmetic outside a simple command, and values
		// the text binds that arithmetic evaluates in turn
		{"{ echo hi; } > out", Deny}, {"(ls) >> out", Deny}, {"for i in 1; do echo; done > out", Deny},
		{"if true; then cat f; fi > out", Deny}, {"{ ls; cat f; } 2>/dev/null", Allow}, {"(cd src && ls)", Allow},
		{`for (( i = 'a[$(touch S)]'; 0; )); do echo; done`, Deny}, {`for i in $(( 'a[$(touch S)]' )); do echo; done`, Deny},
		{`for x in 'a[$(touch S)]'; do echo $((x)); done`, Deny}, {`for x in 'b[$(touch S)]'; do echo ${a[x]}; done`, Deny},
		{`for x in 'b[$(touch S)]'; do echo ${a:x}; done`, Deny}, {`for r in 'a[$(touch S)]'; do echo $((USER)); done`, Deny},
		{`echo 'a[$(touch S)]'; echo $((_))`, Deny}, {`echo $(( $_ ))`, Deny}, {`echo ${x:='a[$(touch S)]'}; echo $((x))`, Deny},
		{`printf -v x %s 'a[$(touch S)]'; echo $((x))`, Deny}, {`cat() { echo $(($1)); }; cat 'a[$(touch S)]'`, Deny},
		{`for i in 1 2 {3..5}; do echo $((i+1)); done`, Allow}, {`for f in *.go; do wc -l "$f"; done`, Allow},
		{`echo $((${#x}+$#))`, Allow},
	} {
		if got, _ := locked.Evaluate(tc.cmd); got != tc.want {
			t.Errorf("locked.Evaluate(%q) = %s, want %s", tc.cmd, got, tc.want)
		}
	}
}

// TestReadOnlyFramePart: what a profile objects to in a text whose simple
// commands read but whose frame writes or runs code is the whole text,
// not a simple command it would allow alone.
func TestReadOnlyFramePart(t *testing.T) {
	locked, _ := Preset("locked")
	for _, cmd := range []string{"{ echo hi; } > out", `for x in 'a[$(touch S)]'; do echo $((x)); done`} {
		a := Analyze(cmd, Options{Profile: locked})
		if a.Outcome.Decision != Deny || a.Part != cmd {
			t.Errorf("locked on %q: %s, part %q; want deny of the whole text", cmd, a.Outcome.Decision, a.Part)
		}
	}
	if a := Analyze("ls; rm x", Options{Profile: locked}); a.Part != "rm x" {
		t.Errorf("locked on %q: part %q, want rm x", "ls; rm x", a.Part)
	}
}
