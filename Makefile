# bashvisor — `make demo` runs the tour, `make test` the whole suite.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)

.PHONY: demo test vet unit stress bench ci

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
