// Command extract builds the agent-command corpus the safety tests read
// (see ../README.md) from mini-SWE-agent trajectory files: every assistant
// message with exactly one ```bash block (mini-SWE-agent's own rule for a
// valid action) gives one command. It prints one JSON object a line,
// distinct commands only, in the order first seen:
//
//	{"command": "...", "source": "REPO:PATH#STEP", "n": OCCURRENCES}
//
// Usage: go run ./safety/testdata/extract -repo OWNER/NAME ROOT > corpus.jsonl
// where ROOT holds the *.traj.json files (searched recursively).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// block is mini-SWE-agent's action regular expression.
var block = regexp.MustCompile("(?s)```bash\\s*\\n(.*?)\\n```")

type record struct {
	Command string `json:"command"`
	Source  string `json:"source"`
	N       int    `json:"n"`
}

func main() {
	repo := flag.String("repo", "", "repository the files come from, for the source field")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: extract -repo OWNER/NAME ROOT")
		os.Exit(2)
	}
	root := flag.Arg(0)
	var files []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".traj.json") {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	seen := map[string]*record{}
	var order []*record
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var traj struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(data, &traj); err != nil {
			fmt.Fprintln(os.Stderr, p+":", err)
			continue
		}
		rel, _ := filepath.Rel(root, p)
		step := 0
		for _, m := range traj.Messages {
			text, ok := m.Content.(string)
			if m.Role != "assistant" || !ok {
				continue
			}
			step++
			ms := block.FindAllStringSubmatch(text, -1)
			if len(ms) != 1 {
				continue
			}
			cmd := strings.TrimSpace(ms[0][1])
			if r, ok := seen[cmd]; ok {
				r.N++
				continue
			}
			r := &record{Command: cmd, Source: fmt.Sprintf("%s:%s#%d", *repo, rel, step), N: 1}
			seen[cmd] = r
			order = append(order, r)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	for _, r := range order {
		enc.Encode(r)
	}
	fmt.Fprintf(os.Stderr, "%d files, %d distinct commands\n", len(files), len(order))
}
