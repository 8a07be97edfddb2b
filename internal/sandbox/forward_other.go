//go:build !linux

package sandbox

import (
	"context"
	"net"
)

// Dial is not available on this platform.
func (w *World) Dial(ctx context.Context, port int) (net.Conn, error) {
	return nil, unavailable("not Linux")
}

// Listening is not available on this platform.
func (w *World) Listening(hint []int) ([]Socket, error) { return nil, unavailable("not Linux") }
