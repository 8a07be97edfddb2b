//go:build !linux

package config

import "math"

// defaultMemoryLimit is the default of [Limits.Memory] where the physical
// memory is not read: 4 GiB.
func defaultMemoryLimit() int64 { return 4 << 30 }

// openFiles is the process's limit on open files where it is not read: a
// large number.
func openFiles() int { return math.MaxInt32 }
