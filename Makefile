# bashvisor — `make demo` runs the tour, `make test` the whole suite,
# `make install` installs the bashvisor command.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
SHELL := /bin/bash

.PHONY: demo test vet unit stress bench ci deps generate build install

# The tour. It builds bin/demo first, saying so: a first build compiles
# about 460 packages (the engine, the MCP server, the fleet's remote; not
# the Kubernetes or etcd clients), 1 to 2 minutes on two idle cores, and
# prints every 25th; later builds take seconds and print nothing.
demo:
	@echo "building bin/demo (a first build compiles about 460 packages: 1-2 minutes on 2 idle cores; then seconds)"
	@set -o pipefail; $(GO) build -v -o bin/demo ./cmd/demo 2>&1 | \
		awk '/^[[:alnum:]_.~+-]+(\/[[:alnum:]_.~+-]+)*$$/ { if (++n % 25 == 0) printf "  %d packages compiled (%s)\n", n, $$0; next } { print }'
	bin/demo tour

# bin/bashvisor and bin/bashvisor-fleet, stripped, with the commit in
# `bashvisor version` (-buildvcs=auto overrides a GOFLAGS that turns it
# off).
build:
	$(GO) build -buildvcs=auto -trimpath -ldflags='-s -w' -o bin/ ./cmd/bashvisor ./cmd/bashvisor-fleet

# bashvisor into $(go env GOBIN), or $(go env GOPATH)/bin.
install:
	$(GO) install -buildvcs=auto -trimpath -ldflags='-s -w' ./cmd/bashvisor
	@d=$$($(GO) env GOBIN); echo "installed $${d:-$$($(GO) env GOPATH)/bin}/bashvisor"

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
