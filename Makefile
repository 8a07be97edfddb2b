# bashvisor — `make demo` runs the tour, `make test` the whole suite.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)

.PHONY: demo test vet unit stress bench ci deps generate

demo:
	$(GO) run ./cmd/demo tour

test: vet unit stress

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 15m ./...

stress:
	$(GO) run ./cmd/demo stress -n 2000 -c 32 -tenants 4

bench:
	$(GO) run ./cmd/demo bench

ci: test

# What the suite needs beyond Go, bash and git: etcd for the cluster
# package's etcd scenario (skipped without it unless REQUIRE_ETCD=1, which
# .ci/run sets); npm for mcpserver's conformance and TypeScript client
# tests, which npm ci the packages pinned in mcpserver/testdata/node
# (skipped without npm or the registry unless REQUIRE_TOOLS=1, which
# .ci/run sets).
deps:
	command -v etcd >/dev/null || (apt-get update -qq && apt-get install -y -qq etcd-server)
	command -v npm >/dev/null || (apt-get update -qq && apt-get install -y -qq npm)

# Regenerate cluster/clusterpb from its .proto (the generated code is
# committed): needs protoc (Debian's protobuf-compiler) and
# go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.33.0.
generate:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" $(GO) generate ./cluster/...
