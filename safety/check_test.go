package safety

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type checkCase struct {
	cmd  string
	want Decision
	rule string // expected rule for block/ask; "" skips the check
}

// checkCases is the analyser's table: every rule, wrapper, disguise and
// false-positive trap. Dangerous commands are only ever analysed here,
// never run.
var checkCases = []checkCase{
	// --- rm: every flag spelling on critical targets
	{"rm -rf /", Block, "rm-critical"},
	{"rm -fr /", Block, "rm-critical"},
	{"rm -r -f /", Block, "rm-critical"},
	{"rm -f -r /", Block, "rm-critical"},
	{"rm -Rf /", Block, "rm-critical"},
	{"rm -fR /", Block, "rm-critical"},
	{"rm --recursive --force /", Block, "rm-critical"},
	{"rm --force --recursive /", Block, "rm-critical"},
	{"rm --rec --for /", Block, "rm-critical"},
	{"rm -rfv /", Block, "rm-critical"},
	{"rm -vfr /", Block, "rm-critical"},
	{"rm -r /", Block, "rm-critical"},
	{"rm / -rf", Block, "rm-critical"},
	{"rm -rf -- /", Block, "rm-critical"},
	{"rm -rf --no-preserve-root /", Block, "rm-critical"},
	{"rm -rf --no-preserve-root /tmp/x", Block, "rm-critical"},
	{"rm -rf /*", Block, "rm-critical"},
	{"rm -rf /* ", Block, "rm-critical"},
	{"rm -rf //", Block, "rm-critical"},
	{"rm -rf /.", Block, "rm-critical"},
	{"rm -rf /*/", Block, "rm-critical"},
	{"rm -rf /bin", Block, "rm-critical"},
	{"rm -rf /boot", Block, "rm-critical"},
	{"rm -rf /dev", Block, "rm-critical"},
	{"rm -rf /etc", Block, "rm-critical"},
	{"rm -rf /etc/", Block, "rm-critical"},
	{"rm -rf /home", Block, "rm-critical"},
	{"rm -rf /home/*", Block, "rm-critical"},
	{"rm -rf /lib", Block, "rm-critical"},
	{"rm -rf /lib64", Block, "rm-critical"},
	{"rm -rf /opt", Block, "rm-critical"},
	{"rm -rf /proc", Block, "rm-critical"},
	{"rm -rf /root", Block, "rm-critical"},
	{"rm -rf /sbin", Block, "rm-critical"},
	{"rm -rf /srv", Block, "rm-critical"},
	{"rm -rf /sys", Block, "rm-critical"},
	{"rm -rf /usr", Block, "rm-critical"},
	{"rm -rf /usr/*", Block, "rm-critical"},
	{"rm -rf /var", Block, "rm-critical"},
	{"rm -rf ~", Block, "rm-critical"},
	{"rm -rf ~/", Block, "rm-critical"},
	{"rm -rf ~/*", Block, "rm-critical"},
	{"rm -rf $HOME", Block, "rm-critical"},
	{"rm -rf ${HOME}", Block, "rm-critical"},
	{`rm -rf "$HOME"`, Block, "rm-critical"},
	{`rm -rf "$HOME/"`, Block, "rm-critical"},
	{"rm -rf .git", Block, "rm-critical"},
	{"rm -rf .git/", Block, "rm-critical"},
	{"rm -rf ./.git", Block, "rm-critical"},
	{"rm -rf *", Ask, "rm-workdir"},
	{"rm -rf ./*", Ask, "rm-workdir"},
	{"rm -rf .*", Block, "rm-critical"},
	{"rm -rf ..", Block, "rm-critical"},
	{"rm -rf ../", Block, "rm-critical"},
	{"rm -rf ../..", Block, "rm-critical"},
	{"rm -rf build *", Ask, "rm-workdir"},
	{"cd / && rm -rf *", Block, "rm-critical"},
	{"cd /; rm -rf usr", Block, "rm-critical"},
	{"cd / && rm -rf etc", Block, "rm-critical"},
	{"cd ~ && rm -rf *", Block, "rm-critical"},
	{"cd && rm -rf .", Block, "rm-critical"},
	{"find / -delete", Block, "rm-critical"},
	{"find ~ -delete", Block, "rm-critical"},
	{"find . -depth -delete", Block, "rm-critical"},
	{"find / -xdev -mindepth 1 -delete", Block, "rm-critical"},
	// --- rm disguises
	{`\rm -rf /`, Block, "rm-critical"},
	{"/bin/rm -rf /", Block, "rm-critical"},
	{"/usr/bin/rm -rf ~", Block, "rm-critical"},
	{`"rm" -rf /`, Block, "rm-critical"},
	{`'rm' '-rf' '/'`, Block, "rm-critical"},
	{`r''m -rf /`, Block, "rm-critical"},
	{`r"m" -r"f" /`, Block, "rm-critical"},
	{`rm -r\f /`, Block, "rm-critical"},
	{`$'rm' -rf /`, Block, "rm-critical"},
	{`$'\x72\x6d' -rf $'\x2f'`, Block, "rm-critical"},
	{`$'\162m' -rf /`, Block, "rm-critical"},
	{"rm -{r,f} /", Block, "rm-critical"},
	{"rm -rf /{,}", Block, "rm-critical"},
	{"{rm,-rf,/}", Block, "rm-critical"},
	{"rm -rf {/tmp/x,/}", Block, "rm-critical"},
	{"X=/; rm -rf $X", Block, "rm-critical"},
	{`X="/"; rm -rf "$X"`, Block, "rm-critical"},
	{"X=/ && rm -rf ${X}", Block, "rm-critical"},
	{"export T=/usr; rm -rf $T", Block, "rm-critical"},
	{`F="-rf /"; rm $F`, Block, "rm-critical"},
	{`C="rm -rf /"; $C`, Block, "rm-critical"},
	{"for d in /tmp/a /; do rm -rf $d; done", Block, "rm-critical"},
	{"D=~; rm -rf $D", Block, "rm-critical"},
	{`rm -rf "${HOME:?}"`, Block, "rm-critical"},
	{`rm -rf "${HOME:?}/"*`, Block, "rm-critical"},
	{`X=; rm -rf "${X:-/}"`, Block, "rm-critical"},
	{`rm -rf "${DIR:?}/"*`, Allow, ""},
	{`rm -rf "${DIR:-/}"`, Allow, ""},
	// --- rm in every syntactic position
	{"ls; rm -rf /", Block, "rm-critical"},
	{"true && rm -rf /", Block, "rm-critical"},
	{"false || rm -rf /", Block, "rm-critical"},
	{"echo hi | rm -rf /", Block, "rm-critical"},
	{"(rm -rf /)", Block, "rm-critical"},
	{"{ rm -rf /; }", Block, "rm-critical"},
	{"f() { rm -rf /; }", Block, "rm-critical"},
	{"function f { rm -rf ~; }", Block, "rm-critical"},
	{"if true; then rm -rf /; fi", Block, "rm-critical"},
	{"if rm -rf /; then :; fi", Block, "rm-critical"},
	{"if false; then :; else rm -rf /; fi", Block, "rm-critical"},
	{"while true; do rm -rf /; done", Block, "rm-critical"},
	{"until false; do rm -rf ~; done", Block, "rm-critical"},
	{"for i in 1 2; do rm -rf /; done", Block, "rm-critical"},
	{"for ((i=0;i<1;i++)); do rm -rf /; done", Block, "rm-critical"},
	{"case x in x) rm -rf /;; esac", Block, "rm-critical"},
	{"echo $(rm -rf /)", Block, "rm-critical"},
	{"echo `rm -rf /`", Block, "rm-critical"},
	{`echo "$(rm -rf ~)"`, Block, "rm-critical"},
	{"x=$(rm -rf /)", Block, "rm-critical"},
	{"diff <(rm -rf /) x", Block, "rm-critical"},
	{"tee >(rm -rf /) < x", Block, "rm-critical"},
	{"cat > $(rm -rf /)", Block, "rm-critical"},
	{"rm -rf / &", Block, "rm-critical"},
	{"! rm -rf /", Block, "rm-critical"},
	{"time rm -rf /", Block, "rm-critical"},
	{"[[ $(rm -rf /) ]]", Block, "rm-critical"},
	{"(( $(rm -rf /) ))", Block, "rm-critical"},
	{"coproc rm -rf /", Block, "rm-critical"},
	{"ls\nrm -rf /\n", Block, "rm-critical"},
	{"rm -rf $(echo build) /", Block, "rm-critical"},
	{"rm -rf \"$(git rev-parse --show-toplevel)/tmp\" ~", Block, "rm-critical"},
	// --- wrappers
	{"sudo rm -rf /", Block, "rm-critical"},
	{"sudo -u root rm -rf /", Block, "rm-critical"},
	{"sudo -E -H -u root -g wheel rm -rf /", Block, "rm-critical"},
	{"sudo -Eu root rm -rf /", Block, "rm-critical"},
	{"sudo --user=root rm -rf /", Block, "rm-critical"},
	{"sudo -- rm -rf /", Block, "rm-critical"},
	{"sudo FOO=1 rm -rf /", Block, "rm-critical"},
	{"sudo sudo rm -rf /", Block, "rm-critical"},
	{"doas rm -rf /", Block, "rm-critical"},
	{"doas -u root rm -rf /", Block, "rm-critical"},
	{"env rm -rf /", Block, "rm-critical"},
	{"env -i PATH=/bin rm -rf /", Block, "rm-critical"},
	{"env -u FOO -C /tmp rm -rf /", Block, "rm-critical"},
	{"env -S 'rm -rf' /", Block, "rm-critical"},
	{"env --split-string='rm -rf /'", Block, "rm-critical"},
	{"env -S'rm -rf /'", Block, "rm-critical"},
	{"nohup rm -rf / &", Block, "rm-critical"},
	{"/usr/bin/time -v rm -rf /", Block, "rm-critical"},
	{"command rm -rf /", Block, "rm-critical"},
	{"command -p rm -rf /", Block, "rm-critical"},
	{"exec rm -rf /", Block, "rm-critical"},
	{"exec -a x rm -rf /", Block, "rm-critical"},
	{"builtin eval 'rm -rf /'", Block, "rm-critical"},
	{"nice rm -rf /", Block, "rm-critical"},
	{"nice -n 10 rm -rf /", Block, "rm-critical"},
	{"nice -10 rm -rf /", Block, "rm-critical"},
	{"timeout 5 rm -rf /", Block, "rm-critical"},
	{"timeout -s KILL -k 1 5s rm -rf /", Block, "rm-critical"},
	{"xargs rm -rf /", Block, "rm-critical"},
	{"xargs -0 -n 1 -I{} rm -rf /", Block, "rm-critical"},
	{"busybox rm -rf /", Block, "rm-critical"},
	{"watch rm -rf /", Block, "rm-critical"},
	{"watch -n 1 'rm -rf /'", Block, "rm-critical"},
	{"watch -x rm -rf /", Block, "rm-critical"},
	{"setsid rm -rf /", Block, "rm-critical"},
	{"sudo env nice timeout 1 rm -rf /", Block, "rm-critical"},
	// --- nested shell code
	{"bash -c 'rm -rf /'", Block, "rm-critical"},
	{`sh -c "rm -rf ~"`, Block, "rm-critical"},
	{"zsh -c 'rm -rf /'", Block, "rm-critical"},
	{"dash -c 'rm -rf /'", Block, "rm-critical"},
	{"bash -lc 'rm -rf /'", Block, "rm-critical"},
	{"bash -x -e -c 'rm -rf /'", Block, "rm-critical"},
	{"bash -o pipefail -c 'rm -rf /'", Block, "rm-critical"},
	{"/bin/bash -c 'cd / && rm -rf *'", Block, "rm-critical"},
	{`bash -c "bash -c 'rm -rf /'"`, Block, "rm-critical"},
	{"sudo bash -c 'rm -rf /'", Block, "rm-critical"},
	{"eval 'rm -rf /'", Block, "rm-critical"},
	{"eval rm -rf /", Block, "rm-critical"},
	{`X='rm -rf /'; eval "$X"`, Block, "rm-critical"},
	{"su -c 'rm -rf /'", Block, "rm-critical"},
	{"su - root -c 'rm -rf /'", Block, "rm-critical"},
	{"su --command='rm -rf /' root", Block, "rm-critical"},
	{`find . -exec rm -rf / \;`, Block, "rm-critical"},
	{"find . -execdir bash -c 'rm -rf ~' \\;", Block, "rm-critical"},
	{"find . -type f -exec rm -rf / +", Block, "rm-critical"},
	{"bash <<'EOF'\nrm -rf /\nEOF", Block, "rm-critical"},
	{"sh <<EOF\nrm -rf ~\nEOF", Block, "rm-critical"},
	{"bash <<< 'rm -rf /'", Block, "rm-critical"},
	{"source /dev/stdin <<< 'rm -rf ~'", Block, "rm-critical"},
	{"bash /dev/stdin <<'EOF'\nrm -rf /\nEOF", Block, "rm-critical"},
	{"xargs sh -c 'rm -rf /'", Block, "rm-critical"},
	{"echo 'rm -rf /' | sh", Block, "rm-critical"},
	{"echo rm -rf ~ | sudo bash", Block, "rm-critical"},
	{"{ bash; } <<'EOF'\nrm -rf /\nEOF", Block, "rm-critical"},
	{"printf 'rm -rf /' | bash -s", Block, "rm-critical"},
	{"bash -c 'echo \"unterminated'", Block, "parse-error"},
	// --- git add
	{"git add -A", Ask, "git-add-blind"},
	{"git add --all", Ask, "git-add-blind"},
	{"git add --al", Ask, "git-add-blind"},
	{"git add --a", Ask, "git-add-blind"},
	{"git add .", Ask, "git-add-blind"},
	{"git add ./", Ask, "git-add-blind"},
	{"git add *", Ask, "git-add-blind"},
	{"git add '*'", Ask, "git-add-blind"},
	{"git add :/", Ask, "git-add-blind"},
	{"git add -- .", Ask, "git-add-blind"},
	{"git add -vA", Ask, "git-add-blind"},
	{"git add -u .", Ask, "git-add-blind"},
	{"git add ..", Ask, "git-add-blind"},
	{"git add ':!secret.txt'", Ask, "git-add-blind"},
	{"git -C repo add -A", Ask, "git-add-blind"},
	{"git -c core.x=y add .", Ask, "git-add-blind"},
	{"git --git-dir=.git --work-tree=. add --all", Ask, "git-add-blind"},
	{"git --no-pager add .", Ask, "git-add-blind"},
	{"cd repo && git add . && git commit -m x", Ask, "git-add-blind"},
	{"sudo git add -A", Ask, "git-add-blind"},
	{"/usr/bin/git add -A", Ask, "git-add-blind"},
	// --- git push
	{"git push --force", Block, "git-push-force"},
	{"git push -f", Block, "git-push-force"},
	{"git push -f origin main", Block, "git-push-force"},
	{"git push origin main -f", Block, "git-push-force"},
	{"git push -uf origin main", Block, "git-push-force"},
	{"git push -fu origin main", Block, "git-push-force"},
	{"git push origin +main", Block, "git-push-force"},
	{"git push origin +HEAD:refs/heads/main", Block, "git-push-force"},
	{"git push --mirror", Block, "git-push-force"},
	{"git push --force origin main", Block, "git-push-force"},
	{"git -C x push --force", Block, "git-push-force"},
	{"git push --force-with-lease -f", Block, "git-push-force"},
	// --- fork bombs, mkfs, devices
	{":(){ :|:& };:", Block, "fork-bomb"},
	{":(){ :|: & };:", Block, "fork-bomb"},
	{"bomb(){ bomb|bomb& };bomb", Block, "fork-bomb"},
	{"function f { f | f & }; f", Block, "fork-bomb"},
	{"f() { f & f; }; f", Block, "fork-bomb"},
	{"bash -c ':(){ :|:& };:'", Block, "fork-bomb"},
	{"mkfs /dev/sda1", Block, "mkfs"},
	{"mkfs.ext4 /dev/sda1", Block, "mkfs"},
	{"sudo mkfs.xfs -f /dev/nvme0n1p1", Block, "mkfs"},
	{"/sbin/mkfs.vfat /dev/sdb", Block, "mkfs"},
	{"dd if=/dev/zero of=/dev/sda", Block, "dd-device"},
	{"dd if=img of=/dev/nvme0n1 bs=4M", Block, "dd-device"},
	{"dd of=/dev/vda", Block, "dd-device"},
	{"dd of=/dev/xvda1", Block, "dd-device"},
	{"dd of=/dev/hda", Block, "dd-device"},
	{"dd of=/dev/mmcblk0", Block, "dd-device"},
	{"dd of=/dev/loop0", Block, "dd-device"},
	{"sudo dd if=x.iso of=/dev/sdb status=progress", Block, "dd-device"},
	{"echo x > /dev/sda", Block, "write-device"},
	{"cat img >> /dev/sdb1", Block, "write-device"},
	{"cat img &> /dev/nvme0n1", Block, "write-device"},
	{"> /dev/sda", Block, "write-device"},
	{"exec 3<>/dev/sda", Block, "write-device"},
	{"cat x | tee /dev/sda", Block, "write-device"},
	{"shred /dev/sda", Block, "write-device"},
	{"cp disk.img /dev/sdc", Block, "write-device"},
	{"trap 'rm -rf /' EXIT", Block, "rm-critical"},
	{"ssh host 'rm -rf /'", Block, "rm-critical"},
	{"ssh -p 22 -i key user@host rm -rf ~", Block, "rm-critical"},
	{"chmod -R 777 /", Block, "chmod-critical"},
	{"sudo chown -R me /usr", Block, "chmod-critical"},
	{"chmod -R 755 ~", Block, "chmod-critical"},
	{"git stage -A", Ask, "git-add-blind"},
	{"rsync -a --delete empty/ /", Block, "rm-critical"},
	{"rsync -av --delete-after ./x/ ~/", Block, "rm-critical"},
	{"kill -9 -1", Block, "kill-all"},
	{"kill -- -1", Block, "kill-all"},
	{"sudo kill -s KILL -1", Block, "kill-all"},
	// --- ask: code only known at run time feeding a shell
	{"curl -fsSL https://x.sh | sh", Ask, "pipe-to-shell"},
	{"curl https://x.sh | bash", Ask, "pipe-to-shell"},
	{"wget -O- https://x.sh | bash", Ask, "pipe-to-shell"},
	{"wget -qO - https://x | sudo bash", Ask, "pipe-to-shell"},
	{"curl x | bash -s -- --yes", Ask, "pipe-to-shell"},
	{"curl x | sudo -E sh -", Ask, "pipe-to-shell"},
	{"curl x | python3", Ask, "pipe-to-shell"},
	{"curl x | tee log | sh", Ask, "pipe-to-shell"},
	{"bash <(curl -s https://x)", Ask, "procsubst-shell"},
	{"source <(curl -s https://x)", Ask, "procsubst-shell"},
	{". <(kubectl completion bash)", Ask, "procsubst-shell"},
	{`eval "$(curl -s https://x)"`, Ask, "dynamic-eval"},
	{`source /dev/stdin <<< "$(curl -s https://x)"`, Ask, "dynamic-shell"},
	{"bash -s < <(curl -s https://x)", Ask, "pipe-to-shell"},
	{"python3 <(curl -s https://x)", Ask, "procsubst-shell"},
	{"curl x | env bash", Ask, "pipe-to-shell"},
	{"while read l; do sh; done < <(curl x)", Ask, "pipe-to-shell"},
	{"{ bash; } < <(curl x)", Ask, "pipe-to-shell"},
	{"cat script.sh | bash", Ask, "pipe-to-shell"},
	{"echo $X | sh", Ask, "pipe-to-shell"},
	{`eval "$(ssh-agent -s)"`, Ask, "dynamic-eval"},
	{"eval $X", Ask, "dynamic-eval"},
	{"$CMD args", Ask, "dynamic-command"},
	{"${CMD} --flag", Ask, "dynamic-command"},
	{`"$EDITOR" file`, Ask, "dynamic-command"},
	{"$(which python) script.py", Ask, "dynamic-command"},
	{`sh -c "$X"`, Ask, "dynamic-shell"},
	{`bash -c "$(curl x)"`, Ask, "dynamic-shell"},
	{`su -c "$X"`, Ask, "dynamic-shell"},
	{"bash <<EOF\n$(curl x)\nEOF", Ask, "dynamic-shell"},
	// --- parse failures fail closed
	{"echo 'unterminated", Block, "parse-error"},
	{`echo "unterminated`, Block, "parse-error"},
	{"if true; then echo", Block, "parse-error"},
	{"echo $(", Block, "parse-error"},
	{"(ls", Block, "parse-error"},
	{"cat <<EOF\nno end", Block, "parse-error"},
	{"ls |", Block, "parse-error"},
	{"&& ls", Block, "parse-error"},
	// --- false-positive traps: all allowed
	{"", Allow, ""},
	{"   ", Allow, ""},
	{"ls -la", Allow, ""},
	{`echo "rm -rf /"`, Allow, ""},
	{`echo 'rm -rf /'`, Allow, ""},
	{`printf '%s\n' "rm -rf ~"`, Allow, ""},
	{`grep -r "git add -A" .`, Allow, ""},
	{`grep -rn "rm -rf /" docs/`, Allow, ""},
	{`rg 'git push --force' -n`, Allow, ""},
	{`git commit -m "git push --force later"`, Allow, ""},
	{`git commit -m "rm -rf / was a bad idea"`, Allow, ""},
	{`git log --grep "git add -A"`, Allow, ""},
	{"rm -rf build/ node_modules dist", Allow, ""},
	{"rm -rf build/ node_modules", Allow, ""},
	{"rm -rf /tmp/foo", Allow, ""},
	{"rm -rf /tmp/build-*", Allow, ""},
	{"rm -rf ./build", Allow, ""},
	{"rm -rf build/*", Allow, ""},
	{"rm -rf ~/.cache/go-build", Allow, ""},
	{"rm -rf $HOME/.cache/pip", Allow, ""},
	{"rm -rf /home/user/project/build", Allow, ""},
	{"rm -rf .git/hooks/pre-commit.sample", Allow, ""},
	{"rm -f *.o", Allow, ""},
	{"rm -f /tmp/*.log", Allow, ""},
	{"rm file.txt", Allow, ""},
	{`rm -rf "$TMPDIR/x"`, Allow, ""},
	{`rm -rf "$BUILD_DIR"`, Allow, ""},
	{"rm -rf ../other-build", Allow, ""},
	{`rm -rf "~"`, Allow, ""},
	{`rm -rf ./~`, Allow, ""},
	{`rm -rf \~`, Allow, ""},
	{"rm -rf ~user/tmp", Allow, ""},
	{"cd /tmp && rm -rf foo", Allow, ""},
	{"cd / && ls", Allow, ""},
	{"git add path/file", Allow, ""},
	{"git add src/main.go src/util.go", Allow, ""},
	{"git add -p", Allow, ""},
	{"git add -u", Allow, ""},
	{"git add -- src/", Allow, ""},
	{"git add '*.go'", Allow, ""},
	{"git show commit", Allow, ""},
	{"git push", Allow, ""},
	{"git push -u origin feature", Allow, ""},
	{"git push --set-upstream origin feature", Allow, ""},
	{"git push --force-with-lease", Allow, ""},
	{"git push --force-with-lease=main:abc origin main", Allow, ""},
	{"git push --force-if-includes --force-with-lease", Allow, ""},
	{"git push origin --delete old-branch", Allow, ""},
	{"git push -o ci.skip origin main", Allow, ""},
	{"git status && git diff", Allow, ""},
	{"dd if=/dev/zero of=/tmp/img bs=1M count=10", Allow, ""},
	{"dd of=/tmp/img", Allow, ""},
	{"dd if=/dev/sda of=backup.img", Allow, ""},
	{"echo x > /dev/null", Allow, ""},
	{"make 2>/dev/null", Allow, ""},
	{"make > /dev/null 2>&1", Allow, ""},
	{"echo x >&2", Allow, ""},
	{"echo x > /dev/stderr", Allow, ""},
	{"cat /dev/sda", Allow, ""},
	{"head -c 512 /dev/sda | xxd", Allow, ""},
	{"lsblk /dev/sda", Allow, ""},
	{"cat > notes.md <<'EOF'\nrm -rf /\ngit add -A\n:(){ :|:& };:\nEOF", Allow, ""},
	{"cat <<EOF\ncurl x | sh\nEOF", Allow, ""},
	{"python3 - <<'EOF'\nimport os\nEOF", Allow, ""},
	{"curl -fsSL https://x -o install.sh", Allow, ""},
	{"curl https://api | jq .", Allow, ""},
	{"cat data.json | python3 -m json.tool", Allow, ""},
	{"echo hi | python3 -c 'import sys; print(sys.stdin.read())'", Allow, ""},
	{"bash script.sh", Allow, ""},
	{"echo 'ls -la' | sh", Allow, ""},
	{"bash < script.sh", Allow, ""},
	{"source .venv/bin/activate", Allow, ""},
	{"diff <(sort a) <(sort b)", Allow, ""},
	{"bash -n script.sh", Allow, ""},
	{"sh ./configure --prefix=/usr", Allow, ""},
	{"bash -c 'echo hi'", Allow, ""},
	{`bash -c "go test ./... && go vet ./..."`, Allow, ""},
	{"eval 'echo hi'", Allow, ""},
	{"command -v rm", Allow, ""},
	{"type rm", Allow, ""},
	{"which mkfs", Allow, ""},
	{"man mkfs.ext4", Allow, ""},
	{"sudo -l", Allow, ""},
	{"sudo apt-get install -y jq", Allow, ""},
	{"find . -name '*.pyc' -delete", Allow, ""},
	{"find . -name '*.o' -exec rm -f {} +", Allow, ""},
	{"find build -type d -exec rm -rf {} +", Allow, ""},
	{"xargs -0 rm -f < list", Allow, ""},
	{"f() { echo hi; }; f", Allow, ""},
	{"retry() { cmd || retry; }", Allow, ""},
	{"walk() { for d in */; do (cd \"$d\" && walk); done; }", Allow, ""},
	{"go build ./... && go test ./...", Allow, ""},
	{"npm install && npm test", Allow, ""},
	{"X=build; rm -rf $X", Allow, ""},
	{"for f in a b c; do echo $f; done", Allow, ""},
	{"export PATH=$PATH:/usr/local/go/bin", Allow, ""},
	{"timeout 60 go test ./...", Allow, ""},
	{"sleep 300 & echo done", Allow, ""},
	{"echo '$(rm -rf /)'", Allow, ""},
	{"echo \\$\\(rm -rf /\\)", Allow, ""},
	{"find ~ -name '*.tmp' -delete", Allow, ""},
	{"# rm -rf /\nls", Allow, ""},
	{"ls # rm -rf /", Allow, ""},
	{"mkdir -p a/b && touch a/b/c", Allow, ""},
	{"docker run --rm -v /:/host alpine ls /host", Allow, ""},
	{"tar czf out.tgz --exclude=.git .", Allow, ""},
	{"chmod -R u+w build", Allow, ""},
	{"chmod -R u+w .", Allow, ""},
	{"chmod -x /usr/local/bin/tool", Allow, ""},
	{"chown -R me:me ./data", Allow, ""},
	{`trap 'rm -rf "$tmp"' EXIT`, Allow, ""},
	{"trap - EXIT", Allow, ""},
	{"ssh host 'ls -la /'", Allow, ""},
	{"ssh -o StrictHostKeyChecking=no host uptime", Allow, ""},
	{"git clean -fdx", Allow, ""},
	{"rsync -a --delete src/ ./dest/", Allow, ""},
	{"rsync -a src/ /", Allow, ""},
	{"kill -9 1234", Allow, ""},
	{"kill -1 1234", Allow, ""},
	{"kill -- -4321", Allow, ""},
	{"kill -l", Allow, ""},
}

// ruleCases prove the rules of issue 9, one table per rule. Each table
// starts with cases the analyser got wrong before the rule; the cases after
// "guards" were already right and must stay so (mentions, look-alikes,
// values only known at run time).
var ruleCases = []struct {
	rule  string
	cases []checkCase
}{
	{"ifs-split", []checkCase{
		{"IFS=,; cmd=rm,-rf,/; $cmd", Block, "rm-critical"},
		{"IFS=:; x=rm:-rf:/; $x", Block, "rm-critical"},
		{"IFS=,; a=-rf,/; rm $a", Block, "rm-critical"},
		{`IFS=/; x="rm -rf /"; $x`, Allow, ""},
		{"IFS=/; p=/usr; rm -rf $p", Allow, ""},
		{"cd /; IFS=/; p=usr/lib; rm -rf $p", Block, "rm-critical"},
		{`IFS=; x="rm -rf /"; $x`, Allow, ""},
		{"IFS=$1; x=ls; $x", Ask, "dynamic-command"},
		{"read -r IFS; x=ls; $x", Ask, "dynamic-command"},
		{"f() { local IFS=,; $1; }; f rm,-rf,/", Block, "rm-critical"},
		// guards
		{`IFS=,; unset IFS; x="rm -rf /"; $x`, Block, "rm-critical"},
		{`IFS=, read -r a b <<< "x,y"; echo $a`, Allow, ""},
		{`OLDIFS=$IFS; IFS=,; IFS=$OLDIFS; x="rm -rf /"; $x`, Block, "rm-critical"},
	}},
	{"static-text-to-shell", []checkCase{
		{`printf 'git add -A\n' | sh`, Ask, "git-add-blind"},
		{`printf 'rm -rf %s\n' / | bash`, Block, "rm-critical"},
		{`printf '%s\n' 'git push --force' | sh`, Block, "git-push-force"},
		{`echo -e 'rm -rf ~\n' | sh`, Block, "rm-critical"},
		{"echo -n 'git add .' | bash", Ask, "git-add-blind"},
		{"cat <<EOF | bash\nrm -rf /\nEOF", Block, "rm-critical"},
		{"cat <<'EOF' | sh\ngit push --force\nEOF", Block, "git-push-force"},
		{"cat <<< 'rm -rf ~' | sh", Block, "rm-critical"},
		{"(echo 'cd /'; echo 'rm -rf *') | sh", Block, "rm-critical"},
		{"{ echo ls; echo 'rm -rf /'; } | bash", Block, "rm-critical"},
		{"echo 'rm -rf /' | tee log.txt | sh", Block, "rm-critical"},
		{`printf 'ls -la\n' | sh`, Allow, ""},
		{"cat <<'EOF' | bash\necho hi\nEOF", Allow, ""},
		{"echo -e 'ls' | sh", Allow, ""},
		{"echo ls * | sh", Ask, "pipe-to-shell"},
		// guards
		{`printf "$X" | sh`, Ask, "pipe-to-shell"},
		{"cat <<EOF | bash\n$(curl x)\nEOF", Ask, "pipe-to-shell"},
	}},
	{"mkfs-base-name", []checkCase{
		{"./mkfs_wrapper.sh", Allow, ""},
		{"mkfs_notes", Allow, ""},
		{"mkfs-helper --dry-run", Allow, ""},
		// guards
		{"/opt/mkfs-tools/run", Allow, ""},
	}},
	{"glob-critical", []checkCase{
		{"rm -rf /[b]in", Block, "rm-critical"},
		{"rm -rf /bi?", Block, "rm-critical"},
		{"rm -rf /b*", Block, "rm-critical"},
		{"rm -rf /???", Block, "rm-critical"},
		{"rm -rf /[a-z]*", Block, "rm-critical"},
		{"rm -rf /u*/*", Block, "rm-critical"},
		{"rm -rf .[!.]*", Block, "rm-critical"},
		{"rm -rf .??*", Block, "rm-critical"},
		{"rm -rf .g?t", Block, "rm-critical"},
		{"rm -rf ~/.[!.]*", Block, "rm-critical"},
		{"rm -rf ~/.??*", Block, "rm-critical"},
		{"rm -rf /home/test?r", Block, "rm-critical"},
		{"cd / && rm -rf b*", Block, "rm-critical"},
		{"rm -rf ?*", Ask, "rm-workdir"},
		{"x='/b*'; rm -rf $x", Block, "rm-critical"},
		{"chmod -R 777 /e*", Block, "chmod-critical"},
		{"find /u?r -delete", Block, "rm-critical"},
		// guards
		{"rm -rf ./build*", Allow, ""},
		{"rm -rf '/b*'", Allow, ""},
		{`rm -rf "/[b]in"`, Allow, ""},
		{"rm -rf /tmp/b*", Allow, ""},
		{"rm -rf *.o", Allow, ""},
		{`x='/b*'; rm -rf "$x"`, Allow, ""},
		{"rm -rf .cache/*", Allow, ""},
	}},
	{"static-expansions", []checkCase{
		{"rm -rf ${HOME%/}", Block, "rm-critical"},
		{`rm -rf "${HOME%/*}"`, Block, "rm-critical"},
		{"x=/XbXin; rm -rf ${x//X/}", Block, "rm-critical"},
		{"x=/tmp/etc; rm -rf ${x#/tmp}", Block, "rm-critical"},
		{"x=/usr/local; rm -rf ${x%/*}", Block, "rm-critical"},
		{"x=/usr/local; rm -rf ${x%%/local}", Block, "rm-critical"},
		{`x=HOME; rm -rf "${!x}"`, Block, "rm-critical"},
		{`a=(/ /bin); rm -rf "${a[0]}"`, Block, "rm-critical"},
		{`a=(build /); rm -rf "${a[@]}"`, Block, "rm-critical"},
		{"a=(build /usr); rm -rf ${a[1]}", Block, "rm-critical"},
		{`a=(build); a+=(/etc); rm -rf "${a[@]}"`, Block, "rm-critical"},
		{"a=(x y); a[1]=/; rm -rf ${a[-1]}", Block, "rm-critical"},
		{`declare -a a=(/var); rm -rf "${a[*]}"`, Block, "rm-critical"},
		{"X=/BIN; rm -rf ${X,,}", Block, "rm-critical"},
		{"x=/binary; rm -rf ${x:0:4}", Block, "rm-critical"},
		{`x=/srv/x; rm -rf ${x/%\/x/}`, Block, "rm-critical"},
		{"x=/opt; rm -rf ${x:+$x}", Block, "rm-critical"},
		{"rm -rf ~root", Block, "rm-critical"},
		{"rm -rf ~user/", Block, "rm-critical"},
		{"rm -rf ~+", Block, "rm-critical"},
		{`set -- /; rm -rf "$1"`, Block, "rm-critical"},
		// guards
		{`a=(build dist); rm -rf "${a[@]}"`, Allow, ""},
		{`rm -rf "${HOME%/}/.cache/x"`, Allow, ""},
		{"x=/tmp/cache; rm -rf ${x%/*}/cache", Allow, ""},
		{`declare -A m=([k]=/); rm -rf "${m[k]}"`, Allow, ""},
	}},
	{"function-arguments", []checkCase{
		{`f() { rm -rf "$1"; }; f /`, Block, "rm-critical"},
		{`f() { git add "$@"; }; f -A`, Ask, "git-add-blind"},
		{`push() { git push "$@"; }; push --force origin main`, Block, "git-push-force"},
		{`f() { g "$@"; }; g() { rm -rf "$2"; }; f x /`, Block, "rm-critical"},
		{`clean() { rm -rf "$1"/*; }; clean ~`, Block, "rm-critical"},
		{`function f { rm -rf "${1:?}"; }; f /usr`, Block, "rm-critical"},
		{`f() { shift; rm -rf "$1"; }; f x /etc`, Block, "rm-critical"},
		{`f() { rm -rf "$1"/*; }; f`, Block, "rm-critical"},
		{`sh -c 'rm -rf "$1"' sh /`, Block, "rm-critical"},
		{`sh -c 'rm -rf "$1"/*'`, Block, "rm-critical"},
		// guards
		{`f() { rm -rf "$1"; }; f build`, Allow, ""},
		{`f() { f "$1"x; }; f a`, Allow, ""},
		{`f() { echo "$@"; }; f rm -rf /`, Allow, ""},
		{`f() { local IFS=,; }; x="rm -rf /"; $x`, Block, "rm-critical"},
		{`set -euo pipefail; rm -rf "$1"`, Allow, ""},
		{`xargs sh -c 'rm -rf "$1"/*' _`, Allow, ""},
		{"f() { local d=/; }; f; d=build; rm -rf $d", Allow, ""},
		{`f() { rm -rf "$2"/*; }; f *.txt`, Allow, ""},
		{`f() { rm -rf "$2"/*; }; f $(ls)`, Allow, ""},
		{`set -- $(git ls-files); rm -rf "$2"/*`, Allow, ""},
		{`sh -c 'rm -rf "$2"/*' sh *.log`, Allow, ""},
	}},
	{"wrappers", []checkCase{
		{"flock /tmp/l rm -rf /", Block, "rm-critical"},
		{"flock -n -w 5 /tmp/l rm -rf /", Block, "rm-critical"},
		{"flock /tmp/l -c 'rm -rf /'", Block, "rm-critical"},
		{"flock -x /tmp/l git add -A", Ask, "git-add-blind"},
		{"chroot /mnt rm -rf /", Block, "rm-critical"},
		{"chroot --userspec=1000:1000 /srv/root rm -rf /", Block, "rm-critical"},
		{"strace -f -o /tmp/t rm -rf /", Block, "rm-critical"},
		{"strace -e trace=file git add -A", Ask, "git-add-blind"},
		{"ltrace -o x rm -rf ~", Block, "rm-critical"},
		{"script -q -c 'rm -rf /' /dev/null", Block, "rm-critical"},
		{"script -qc 'git push --force' /dev/null", Block, "git-push-force"},
		{"script /dev/null -c 'rm -rf ~'", Block, "rm-critical"},
		{"runuser -u app -- rm -rf /", Block, "rm-critical"},
		{"runuser -l app -c 'git push --force'", Block, "git-push-force"},
		{"unshare -r rm -rf /", Block, "rm-critical"},
		{"unshare --mount --map-root-user -S 0 rm -rf ~", Block, "rm-critical"},
		{"setpriv --reuid=1000 --regid 1000 --clear-groups rm -rf /", Block, "rm-critical"},
		{"firejail --noprofile rm -rf ~", Block, "rm-critical"},
		{"systemd-run --user -p MemoryMax=1G rm -rf /", Block, "rm-critical"},
		{"systemd-run --scope -u x git add -A", Ask, "git-add-blind"},
		{"sg docker -c 'rm -rf /'", Block, "rm-critical"},
		{"sg docker 'git add -A'", Ask, "git-add-blind"},
		{`env -S 'bash -c' "$X"`, Ask, "dynamic-shell"},
		{`env -S 'rm -rf' "$DIR"`, Ask, "dynamic-shell"},
		// guards
		{"echo flock", Allow, ""},
		{"man strace", Allow, ""},
		{"strace -c ls", Allow, ""},
		{"strace -p 1234", Allow, ""},
		{"flock /tmp/lock make", Allow, ""},
		{"flock -n 9", Allow, ""},
		{"script -q /dev/null", Allow, ""},
		{"sg docker -c 'docker ps'", Allow, ""},
		{"systemd-run --user --scope make", Allow, ""},
		{"chroot /srv/root", Allow, ""},
	}},
	{"git-alias", []checkCase{
		{"git -c alias.x='add -A' x", Ask, "git-add-blind"},
		{"git -c alias.p='push --force' p origin", Block, "git-push-force"},
		{"git -c alias.x='!rm -rf /' x", Block, "rm-critical"},
		{"git -c alias.a=add a -A", Ask, "git-add-blind"},
		{"git -c 'alias.s=!git add .' s", Ask, "git-add-blind"},
		{`git -c alias.y='!f() { git add "$@"; }; f' y -A`, Ask, "git-add-blind"},
		{"git -c alias.X='stage --all' x", Ask, "git-add-blind"},
		// guards
		{"git -c alias.st=status st", Allow, ""},
		{"git log --grep='add -A'", Allow, ""},
		{"git -c alias.x='add -A' status", Allow, ""},
	}},
	{"formatters", []checkCase{
		{"mkdosfs /dev/sdb1", Block, "mkfs"},
		{"mkntfs -f /dev/sdb1", Block, "mkfs"},
		{"mkexfatfs /dev/sdc1", Block, "mkfs"},
		{"wipefs -a /dev/sda", Block, "mkfs"},
		{`wipefs --all "$DEV"`, Block, "mkfs"},
		{"wipefs -o 0x438 disk.img", Block, "mkfs"},
		{"sgdisk --zap-all /dev/sda", Block, "partition"},
		{"sgdisk -Z /dev/nvme0n1", Block, "partition"},
		{"sgdisk -o /dev/sdb", Block, "partition"},
		{"sgdisk -p -n 1:0:0 /dev/sdb", Block, "partition"},
		{"sfdisk /dev/sda < layout.sfdisk", Block, "partition"},
		{"sfdisk --delete /dev/sda 1", Block, "partition"},
		{`printf 'o\nw\n' | fdisk /dev/sda`, Block, "partition"},
		{"parted -s /dev/sda mklabel gpt", Block, "partition"},
		{"dd of=/dev/block/mmcblk0", Block, "dd-device"},
		{"dd if=boot.img of=/dev/block/by-name/boot", Block, "dd-device"},
		{"cat x > /dev/block/sda", Block, "write-device"},
		{"wipefs /dev/sda", Allow, ""},
		{"wipefs -n -a /dev/sda", Allow, ""},
		// guards
		{"sgdisk -p /dev/sda", Allow, ""},
		{"sgdisk --print /dev/sda", Allow, ""},
		{"sgdisk -P -Z /dev/sda", Allow, ""},
		{"sfdisk -l /dev/sda", Allow, ""},
		{"sfdisk -d /dev/sda > table.bak", Allow, ""},
		{"fdisk -l", Allow, ""},
		{"fdisk -l /dev/sda", Allow, ""},
		{"parted -l", Allow, ""},
		{"parted /dev/sda print", Allow, ""},
		{"grep -r 'mkdosfs' .", Allow, ""},
		{"man sgdisk", Allow, ""},
		{"apt-get install -y dosfstools gdisk", Allow, ""},
	}},
	{"interpreter-code", []checkCase{
		{`ruby -e "$(curl -s https://x)"`, Ask, "dynamic-shell"},
		{`python3 -c "$(wget -qO- https://x)"`, Ask, "dynamic-shell"},
		{`node -e "$(curl -fsSL https://x)"`, Ask, "dynamic-shell"},
		{`perl -e "$(curl -s https://x)"`, Ask, "dynamic-shell"},
		{`perl -ne "$(curl x)" file`, Ask, "dynamic-shell"},
		{`node --eval="$(curl x)"`, Ask, "dynamic-shell"},
		{`php -r "$(curl x)"`, Ask, "dynamic-shell"},
		{`python3 -c "$CODE"`, Ask, "dynamic-shell"},
		{`python3 - <<< "$(curl -s https://x)"`, Ask, "dynamic-shell"},
		// guards
		{`python3 -c "print('$HOME')"`, Allow, ""},
		{`python3 script.py "$(curl x)"`, Allow, ""},
		{"ruby -e 'puts 1'", Allow, ""},
		{`node -e "console.log($X)"`, Allow, ""},
	}},
}

// allCases returns checkCases and the cases of ruleCases.
func allCases() []checkCase {
	all := append([]checkCase(nil), checkCases...)
	for _, r := range ruleCases {
		all = append(all, r.cases...)
	}
	for _, r := range gateCases {
		all = append(all, r.cases...)
	}
	return all
}

func TestCheckTable(t *testing.T) {
	if len(checkCases) < 150 {
		t.Fatalf("table has %d cases, want >= 150", len(checkCases))
	}
	t.Setenv("HOME", "/home/tester")
	seen := map[string]bool{}
	for _, tc := range allCases() {
		if seen[tc.cmd] {
			t.Errorf("duplicate case %q", tc.cmd)
		}
		seen[tc.cmd] = true
	}
	for _, tc := range checkCases {
		checkOne(t, tc)
	}
	t.Logf("%d table cases", len(checkCases))
}

func TestCheckRules(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	for _, r := range ruleCases {
		t.Run(r.rule, func(t *testing.T) {
			for _, tc := range r.cases {
				checkOne(t, tc)
			}
		})
	}
}

// checkOne checks one case's decision and rule, and that the verdict is
// well formed.
func checkOne(t *testing.T, tc checkCase) {
	t.Helper()
	v := Check(tc.cmd)
	if v.Decision != tc.want || (tc.rule != "" && v.Rule != tc.rule) {
		t.Errorf("Check(%q) = %s/%s (%s), want %s/%s", tc.cmd, v.Decision, v.Rule, v.Reason, tc.want, tc.rule)
		return
	}
	switch v.Decision {
	case Block:
		if v.Reason == "" || v.Alternative == "" || strings.Contains(v.Message(), "\n") {
			t.Errorf("Check(%q): block needs a one-line reason and alternative, got %+v", tc.cmd, v)
		}
		if !strings.Contains(v.Message(), "; instead: ") {
			t.Errorf("Check(%q).Message() = %q", tc.cmd, v.Message())
		}
	case Ask:
		if v.Reason == "" || v.Alternative == "" || strings.Contains(v.Message(), "\n") {
			t.Errorf("Check(%q): ask needs a one-line reason and alternative, got %+v", tc.cmd, v)
		}
	case Allow:
		if v.Rule != "" || v.Message() != "" {
			t.Errorf("Check(%q): allow carries %+v", tc.cmd, v)
		}
	}
}

// The home directory's absolute path is as critical as ~.
func TestCheckAbsoluteHome(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	for _, cmd := range []string{"rm -rf /home/tester", "rm -rf /home/tester/", "rm -rf /home/tester/*"} {
		if v := Check(cmd); v.Decision != Block {
			t.Errorf("Check(%q) = %+v, want block", cmd, v)
		}
	}
	if v := Check("rm -rf /home/tester/project/build"); v.Decision != Allow {
		t.Errorf("project subdir blocked: %+v", v)
	}
}

func TestCheckLimits(t *testing.T) {
	big := strings.Repeat("a", maxCommandBytes+1)
	if v := Check(big); v.Decision != Block || v.Rule != "too-long" {
		t.Errorf("huge command: %+v", v)
	}
	// nested shells beyond maxNesting
	cmd := "rm -rf /tmp/x"
	for i := 0; i < maxNesting+2; i++ {
		cmd = "bash -c " + shellQuote(cmd)
	}
	if v := Check(cmd); v.Decision != Block || v.Rule != "too-deep" {
		t.Errorf("deep nesting: %+v", v)
	}
	cmd = "echo ok"
	for i := 0; i < maxNesting-1; i++ {
		cmd = "bash -c " + shellQuote(cmd)
	}
	if v := Check(cmd); v.Decision != Allow {
		t.Errorf("nesting within the limit: %+v", v)
	}
}

func TestCheckReasonOneLine(t *testing.T) {
	for _, cmd := range []string{"rm -rf $'/\\n/..'", "rm -rf $'/etc\\n/../\\x01/..'", "rm -rf /" + strings.Repeat("/", 5000),
		"$X$'\\xff\\n' args", "echo 'a\nb", "rm -rf " + strings.Repeat("a/../", 3000) + "/"} {
		v := Check(cmd)
		if v.Decision == Allow || strings.ContainsAny(v.Message(), "\n\r\x00") || len(v.Reason) > 2*maxReason {
			t.Errorf("Check(%q) = %+v", cmd, v)
		}
	}
}

func TestCheckParseErrorMessage(t *testing.T) {
	v := Check("echo 'oops")
	if !strings.Contains(v.Reason, "without closing quote") {
		t.Errorf("parse error reason %q lacks the parser's message", v.Reason)
	}
}

func TestCheckConcurrent(t *testing.T) {
	done := make(chan bool)
	for g := 0; g < 8; g++ {
		go func() {
			ok := true
			for i := 0; i < 50; i++ {
				for _, tc := range checkCases[:40] {
					if Check(tc.cmd).Decision != tc.want {
						ok = false
					}
				}
			}
			done <- ok
		}()
	}
	for g := 0; g < 8; g++ {
		if !<-done {
			t.Error("concurrent Check disagreed with the table")
		}
	}
}

func TestMessage(t *testing.T) {
	v := Verdict{Decision: Block, Reason: "r", Alternative: "a"}
	if v.Message() != "r; instead: a" {
		t.Errorf("Message() = %q", v.Message())
	}
	if (Verdict{Decision: Ask, Reason: "r"}).Message() != "r" {
		t.Error("Message without alternative")
	}
	_ = os.Getenv
}
