package safety

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

var benchCommands = []string{
	"ls -la",
	"go test ./... 2>&1 | tail -20",
	"cd /work/main && go build ./... && go vet ./...",
	`git add src/main.go && git commit -m "fix: handle empty input"`,
	"grep -rn 'TODO' --include='*.go' . | head -50",
	"npm install && npm run build",
	"find . -name '*.pyc' -delete",
	"rm -rf build/ dist/ node_modules/.cache",
	`python3 -c 'import json,sys; print(json.load(sys.stdin)["x"])' < data.json`,
	"for f in *.txt; do wc -l \"$f\"; done",
}

func BenchmarkCheck(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Check(benchCommands[i%len(benchCommands)])
	}
}

// BenchmarkAnalyze analyses the commands of BenchmarkCheck as the engine
// does: with a working directory, the standard profile and a co-author.
func BenchmarkAnalyze(b *testing.B) {
	opts := benchOptions(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Analyze(benchCommands[i%len(benchCommands)], opts)
	}
}

func benchOptions(b *testing.B) Options {
	p, err := Preset("standard")
	if err != nil {
		b.Fatal(err)
	}
	return Options{WorkDir: "/work/main", Profile: p, CoAuthor: "Bash Visor <bot@example.com>"}
}

// BenchmarkAnalyzeVsSeparate compares Analyze with the calls the engine
// made before it, each parsing the command again: Display, Gate,
// AddCoAuthor, RedactSecrets and, when the profile refused, its own
// decidingPart (copied below).
func BenchmarkAnalyzeVsSeparate(b *testing.B) {
	opts := benchOptions(b)
	for _, bc := range []struct{ name, cmd string }{
		{"cd-prefix", "cd /work/main && go build ./... && go vet ./..."},
		{"commit", `git add src/main.go && git commit -m "fix: handle empty input"`},
		{"push-asks", "go test ./... 2>&1 | tail -20 && git push origin main"},
	} {
		b.Run(bc.name+"/analyze", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Analyze(bc.cmd, opts)
			}
		})
		b.Run(bc.name+"/separate", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Display(bc.cmd, opts.WorkDir)
				g := Gate(bc.cmd, opts.Profile)
				if g.Decision != g.Verdict.Decision {
					engineDecidingPart(bc.cmd, opts.Profile, g.Decision)
				}
				AddCoAuthor(bc.cmd, opts.CoAuthor)
				RedactSecrets(bc.cmd)
			}
		})
	}
}

// engineDecidingPart is the engine's decidingPart before Analyze took it
// over, for BenchmarkAnalyzeVsSeparate.
func engineDecidingPart(command string, p *Profile, d Decision) string {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil {
		return command
	}
	found := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		s, ok := n.(*syntax.Stmt)
		if found != "" || !ok {
			return found == ""
		}
		if _, ok := s.Cmd.(*syntax.CallExpr); !ok {
			return true
		}
		start, end := int(s.Pos().Offset()), int(s.End().Offset())
		if start < 0 || start > end || end > len(command) {
			return true
		}
		part := strings.TrimRight(command[start:end], " \t;&")
		if got, _ := p.Evaluate(part); got == d {
			found = part
			return false
		}
		return true
	})
	if found == "" {
		return command
	}
	return found
}

func BenchmarkDisplay(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Display("cd /work/main && go build ./... && go vet ./...", "/work/main")
	}
}

func BenchmarkAddCoAuthor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		AddCoAuthor(`git add a.go && git commit -m "fix: x"`, "A <a@b>")
	}
}

func BenchmarkEvaluateStandard(b *testing.B) {
	p, err := Preset("standard")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p.Evaluate(benchCommands[i%len(benchCommands)])
	}
}
