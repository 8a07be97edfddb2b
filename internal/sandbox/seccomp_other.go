//go:build linux && !amd64 && !arm64

package sandbox

import "errors"

type filterOpts struct{ denyIPC, denyBind, metadata, network bool }

func installSeccomp(filterOpts) error { return errors.New("no seccomp filter for this architecture") }

func seccompUsable() error { return errors.New("no seccomp filter for this architecture") }
