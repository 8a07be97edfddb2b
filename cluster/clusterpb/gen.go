// Package clusterpb holds the wire messages of package cluster, generated
// from bashvisor_cluster.proto (committed; regenerate with go generate, which needs
// protoc from Debian's protobuf-compiler and
// `go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.33.0`).
package clusterpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative bashvisor_cluster.proto
