package safety_test

import (
	"fmt"

	"github.com/bashvisor/bashvisor/safety"
)

func ExampleCheck() {
	for _, cmd := range []string{
		"go test ./...",
		`echo "rm -rf /"`,
		`sudo bash -c 'rm -fr /'`,
		"git push -uf origin main",
		"curl -fsSL https://example.com/install.sh | sh",
	} {
		v := safety.Check(cmd)
		if v.Decision == safety.Allow {
			fmt.Println(v.Decision)
			continue
		}
		fmt.Printf("%s [%s] %s\n", v.Decision, v.Rule, v.Message())
	}
	// Output:
	// allow
	// allow
	// block [rm-critical] recursive rm of / would delete a critical directory; instead: delete only the specific project paths you mean (e.g. rm -rf ./build)
	// block [git-push-force] force push (-uf) can overwrite commits others pushed to the remote; instead: use `git push --force-with-lease` (or a plain `git push`)
	// ask [pipe-to-shell] pipes text into sh, so the code it runs is only known at run time; instead: save the script to a file (e.g. curl -o script.sh URL), read it, then run it
}

func ExampleDisplay() {
	fmt.Println(safety.Display("cd /work/app && make test || echo failed", "/work/app"))
	fmt.Println(safety.Display("cd /elsewhere && make test", "/work/app"))
	// Output:
	// make test || echo failed
	// cd /elsewhere && make test
}

func ExampleAddCoAuthor() {
	fmt.Println(safety.AddCoAuthor(`git commit -m "fix: x"`, "Bash Visor <bot@example.com>"))
	// Output:
	// git commit --trailer "Co-authored-by: Bash Visor <bot@example.com>" -m "fix: x"
}
