//go:build linux && !amd64 && !arm64

package sandbox

import "errors"

const seccompArchSupported = false

func installSeccomp(bool) error { return errors.New("no seccomp filter for this architecture") }

func seccompUsable() error { return errors.New("no seccomp filter for this architecture") }
