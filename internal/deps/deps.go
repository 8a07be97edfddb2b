// Package deps pins the module's dependencies until the packages that use them land.
package deps

import (
	_ "github.com/asynkron/protoactor-go/actor"
	_ "github.com/landlock-lsm/go-landlock/landlock"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/schollz/progressbar/v3"
	_ "go.uber.org/goleak"
	_ "golang.org/x/net/bpf"
	_ "golang.org/x/sys/unix"
	_ "mvdan.cc/sh/v3/syntax"
	_ "pgregory.net/rapid"
)
