//go:build !linux

package config

// defaultMemoryLimit is the default of [Limits.Memory] where the physical
// memory is not read: 4 GiB.
func defaultMemoryLimit() int64 { return 4 << 30 }
