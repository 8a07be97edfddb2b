package safety

import "testing"

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
