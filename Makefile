# bashvisor — `make demo` runs the tour, `make test` the whole suite,
# `make install` installs the bashvisor command.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
SHELL := /bin/bash

.PHONY: demo test vet unit stress bench ci deps clients generate build install vm-deps vm-test vm-bench

# The tour. It builds bin/demo first, saying so: a first build compiles
# about 475 packages (the engine, the MCP server, the fleet's remote; not
# the Kubernetes or etcd clients), 1 to 2 minutes on two idle cores, and
# prints every 25th; later builds take seconds and print nothing.
demo:
	@echo "building bin/demo (a first build compiles about 475 packages: 1-2 minutes on 2 idle cores; then seconds)"
	@set -o pipefail; $(GO) build -v -o bin/demo ./cmd/demo 2>&1 | \
		awk '/^[[:alnum:]_.~+-]+(\/[[:alnum:]_.~+-]+)*$$/ { if (++n % 25 == 0) printf "  %d packages compiled (%s)\n", n, $$0; next } { print }'
	bin/demo tour

# bin/bashvisor and bin/bashvisor-fleet, stripped, with the commit in
# `bashvisor version` (-buildvcs=auto overrides a GOFLAGS that turns it
# off), and beside them the small static sandbox helper an engine that
# is not root starts for each sandboxed command (bin/bashvisor-sandbox).
build:
	$(GO) build -buildvcs=auto -trimpath -ldflags='-s -w' -o bin/ ./cmd/bashvisor ./cmd/bashvisor-fleet
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -ldflags='-s -w' -o bin/ ./cmd/bashvisor-sandbox

# bashvisor (and its small sandbox helper, bashvisor-sandbox) into BINDIR: by default $(go env GOBIN), or $(go env
# GOPATH)/bin; `make install BINDIR=~/.local/bin` (or /usr/local/bin as
# root) puts it there. Stripped, with the commit in `bashvisor version`;
# built without -trimpath so that it reuses what `make demo` compiled.
# It ends by saying whether your shell's PATH finds it, and if not, the
# line that makes it.
BINDIR ?=
install:
	@set -e; d="$(BINDIR)"; \
	if [ -z "$$d" ]; then d=$$($(GO) env GOBIN); d=$${d:-$$($(GO) env GOPATH)/bin}; fi; \
	case "$$d" in "~/"*) d="$$HOME/$${d#"~/"}";; esac; \
	mkdir -p "$$d"; \
	echo "building bashvisor into $$d"; \
	$(GO) build -buildvcs=auto -ldflags='-s -w' -o "$$d/bashvisor" ./cmd/bashvisor; \
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -ldflags='-s -w' -o "$$d/bashvisor-sandbox" ./cmd/bashvisor-sandbox; \
	found=$$(command -v bashvisor || true); \
	if [ "$$found" = "$$d/bashvisor" ]; then \
		echo "installed $$d/bashvisor: on your PATH (bashvisor version)"; \
	elif [ -n "$$found" ]; then \
		echo "installed $$d/bashvisor, but your PATH finds $$found first: run $$d/bashvisor, or put $$d before it:"; \
		echo "  export PATH=\"$$d:\$$PATH\"   # add this line to ~/.bashrc (or ~/.profile) to keep it"; \
	else \
		echo "installed $$d/bashvisor, which is NOT on your PATH: run it as $$d/bashvisor, or"; \
		echo "  export PATH=\"\$$PATH:$$d\"   # add this line to ~/.bashrc (or ~/.profile) to keep it"; \
	fi

test: vet unit vm-test stress

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 15m ./...

stress:
	$(GO) run ./cmd/demo stress -n 2000 -c 32 -tenants 4

bench:
	$(GO) run ./cmd/demo bench

ci: test

# The cgroup v2 suite: the cgroup, limits, accounting, kill and sandbox
# tests in a qemu VM whose kernel boots with cgroup_no_v1=all, the engine
# given a delegated subtree (internal/vmtest says how). It needs qemu and
# an unpacked Debian kernel (make vm-deps, as root); without them it is
# skipped, unless REQUIRE_CGROUP_V2_VM=1 (.ci/run), which makes it fail.
VM ?= $(CURDIR)/.vm
VM_KERNEL ?= $(VM)/kernel
VM_TIMEOUT ?= 15m
vm-test:
	@$(GO) build -o $(VM)/vmtest ./internal/vmtest && \
	$(VM)/vmtest -kernel $(VM_KERNEL) -out $(VM)/run -timeout $(VM_TIMEOUT); rc=$$?; \
	if [ $$rc = 3 ] && [ "$$REQUIRE_CGROUP_V2_VM" != 1 ]; then \
		echo "vm-test: SKIPPED: no qemu or kernel for the cgroup v2 VM (make vm-deps as root; REQUIRE_CGROUP_V2_VM=1 makes this a failure)"; \
	else exit $$rc; fi

# Serial `bash -c true` in the cgroup v2 VM: raw os/exec, the engine with
# per-command cgroups in the delegated subtree, and without cgroups, side
# by side, 3 rounds (under software emulation a `bash -c true` takes
# 150-250 ms: about 4 minutes a round).
vm-bench:
	$(GO) run ./internal/vmtest -kernel $(VM_KERNEL) -out $(VM)/bench -timeout 30m -rounds 3 \
		-demo "bench -only serial -serial 200 -cgroup-parent /sys/fs/cgroup/bashvisor.service"

# What vm-test needs: qemu, and Debian's current kernel image unpacked
# into $(VM_KERNEL) (not installed: the host's /boot is left alone).
vm-deps:
	command -v qemu-system-x86_64 >/dev/null || (apt-get update -qq && apt-get install -y -qq --no-install-recommends qemu-system-x86)
	@if ! ls $(VM_KERNEL)/boot/vmlinuz-* >/dev/null 2>&1; then \
		set -e; apt-get update -qq; \
		pkg=$$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $$2; exit}'); \
		echo "vm-deps: unpacking $$pkg into $(VM_KERNEL)"; \
		rm -rf $(VM)/deb && mkdir -p $(VM)/deb && cd $(VM)/deb && apt-get download -q "$$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed'; \
		dpkg-deb -x $(VM)/deb/*.deb $(VM_KERNEL) && rm -rf $(VM)/deb; \
	fi

# What the suite needs beyond Go, bash and git: etcd for the cluster
# package's etcd scenario (skipped without it unless REQUIRE_ETCD=1, which
# .ci/run sets); npm for mcpserver's conformance and TypeScript client
# tests, which npm ci the packages pinned in mcpserver/testdata/node
# (skipped without npm or the registry unless REQUIRE_TOOLS=1, which
# .ci/run sets); strace for gitpolicy's oracle, which traces the user's
# git commands, and dig for egress's resolver test (each skipped without
# it unless REQUIRE_TOOLS=1); bubblewrap for `demo bench -peers`, which
# runs bwrap beside the engine (a peer not installed is reported, not
# measured); hyperfine for the CLI start's figures in docs/measurements.md.
deps:
	command -v etcd >/dev/null || (apt-get update -qq && apt-get install -y -qq etcd-server)
	command -v npm >/dev/null || (apt-get update -qq && apt-get install -y -qq npm)
	command -v strace >/dev/null || (apt-get update -qq && apt-get install -y -qq strace)
	command -v dig >/dev/null || (apt-get update -qq && apt-get install -y -qq bind9-dnsutils)
	command -v bwrap >/dev/null || (apt-get update -qq && apt-get install -y -qq bubblewrap)
	command -v rg >/dev/null || (apt-get update -qq && apt-get install -y -qq ripgrep)
	command -v hyperfine >/dev/null || (apt-get update -qq && apt-get install -y -qq hyperfine)

# The agent clients whose model-facing text mcpserver's
# TestClientsHandTheModelTheText captures (Claude Code and Codex, pinned
# in mcpserver/testdata/clients), installed with npm ci into .clients
# (about 660 MB; again only when the lock file changes). Without them the
# test skips, unless REQUIRE_CLIENTS=1 (.ci/run), which makes it fail.
clients:
	@set -e; if cmp -s mcpserver/testdata/clients/package-lock.json .clients/package-lock.json && \
		[ -x .clients/node_modules/.bin/claude ] && [ -x .clients/node_modules/.bin/codex ]; then \
		echo "clients: installed in .clients"; exit 0; fi; \
	command -v npm >/dev/null || (apt-get update -qq && apt-get install -y -qq npm); \
	rm -rf .clients && mkdir -p .clients && cp mcpserver/testdata/clients/package.json mcpserver/testdata/clients/package-lock.json .clients/; \
	npm ci --prefix .clients --no-audit --no-fund --fetch-retries=2; \
	.clients/node_modules/.bin/claude --version; .clients/node_modules/.bin/codex --version

# Regenerate cluster/clusterpb from its .proto (the generated code is
# committed): needs protoc (Debian's protobuf-compiler) and
# go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.33.0.
generate:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" $(GO) generate ./cluster/...
