package proc

import (
	"fmt"
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/fd"
)

// Winsize is a terminal's size in characters.
type Winsize struct {
	Rows, Cols uint16
}

// openTTY opens a new pseudo-terminal of size ws: the master (the
// engine's side) and the slave (the process's).
func openTTY(ws Winsize) (master, slave *os.File, err error) {
	master, slave, err = pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: ws.Rows, Cols: ws.Cols}); err != nil {
		master.Close()
		slave.Close()
		return nil, nil, fmt.Errorf("pseudo-terminal size: %w", err)
	}
	return master, slave, nil
}

// dupFile returns a second descriptor of f (close-on-exec), so that each
// can be closed on its own.
func dupFile(f *os.File, name string) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	n, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { n, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	d := fd.New(n)
	if err := unix.SetNonblock(d.Int(), true); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d.File(name), nil
}
