package truncate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// File is a background job's output file, bounded: it never holds more
// than its cap. Past the cap it keeps the first Head bytes of the output
// and the newest ones, and drops the oldest output in between, saying so
// in one line of fixed length where the gap is:
//
//	HEAD\n[output truncated in middle: 123456789 bytes dropped here, between the first 8 MiB and the newest output]\nTAIL
//
// (the line is padded with spaces to a constant length, so that it can be
// rewritten in place as the gap grows). The file stays a plain text file
// that tail, grep and less read as they are.
//
// Offsets are the job's: output byte n is at offset n whether or not output
// before it was dropped, so a reader that goes on from where it stopped
// (bash_output's offset) keeps working after a gap opened behind it;
// [File.ReadAt] maps them to the file and skips the gap.
//
// When the file would pass the cap, the tail is cut to the newest
// cap-Head-Slack bytes (copied down in the file: the kernel has no portable
// way to drop a range from the middle of a file), so each Slack bytes
// written past the cap cost one copy of the kept tail. With the defaults
// (64 MiB cap, 8 MiB head, 16 MiB slack) that is 2.5 bytes copied per byte
// written, on a job that prints more than 64 MiB.
//
// File is safe for concurrent use: one writer (the job's reader) and any
// number of readers.
type File struct {
	path      string
	cap, head int64
	slack     int64

	mu      sync.Mutex
	f       *os.File // nil once closed
	size    int64    // output bytes written (the logical size)
	dropped int64    // output bytes dropped, those at [head, head+dropped)
	err     error    // the first write error; later writes fail with it
}

// MinFileCap is the smallest cap a [File] takes (a smaller one is raised
// to it): room for the gap's line and some output on either side.
const MinFileCap = 4 << 10

// gapLineLen is the length of the line that marks the gap, newlines
// included.
const gapLineLen = 128

// CreateFile creates (or truncates) the output file at path (mode 0600),
// bounded to capBytes (<= 0: unbounded, a plain file).
func CreateFile(path string, capBytes int64) (*File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return newFile(path, f, capBytes), nil
}

func newFile(path string, f *os.File, capBytes int64) *File {
	file := &File{path: path, f: f, cap: capBytes}
	if capBytes > 0 {
		file.cap = max(capBytes, MinFileCap)
		file.head = file.cap / 8
		file.slack = file.cap / 4
	}
	return file
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Size returns the number of output bytes written so far: the offset the
// next byte gets.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size
}

// Gap returns where output was dropped: the output bytes [from, from+n)
// are not in the file (n = 0: nothing was dropped).
func (f *File) Gap() (from, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head, f.dropped
}

// DiskSize is the file's size on disk: at most the cap.
func (f *File) DiskSize() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.physical()
}

// physical is the file's size on disk (mu held).
func (f *File) physical() int64 {
	if f.dropped == 0 {
		return f.size
	}
	return f.size - f.dropped + gapLineLen
}

// Write appends p to the output. It never fails short of a write error of
// the file (a full disk), which it returns then and for every later write.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	if f.f == nil {
		return 0, os.ErrClosed
	}
	n := len(p)
	if err := f.write(p); err != nil {
		f.err = err
		return 0, err
	}
	return n, nil
}

func (f *File) write(p []byte) error {
	if f.cap <= 0 || f.physical()+int64(len(p)) <= f.cap {
		if _, err := f.f.WriteAt(p, f.physical()); err != nil {
			return err
		}
		f.size += int64(len(p))
		return nil
	}
	if f.size < f.head { // the head fills first
		k := f.head - f.size
		if _, err := f.f.WriteAt(p[:k], f.size); err != nil {
			return err
		}
		f.size += k
		p = p[k:]
	}
	// Keep the newest keep bytes of the tail followed by p.
	keep := f.cap - f.head - gapLineLen - f.slack
	tailStart := f.head + gapLineLen // where the tail begins on disk once there is a gap
	oldTail := f.physical() - f.head
	if f.dropped > 0 {
		oldTail -= gapLineLen
	}
	if int64(len(p)) >= keep {
		f.dropped += oldTail + int64(len(p)) - keep
		p = p[int64(len(p))-keep:]
		if _, err := f.f.WriteAt(p, tailStart); err != nil {
			return err
		}
	} else {
		moved := keep - int64(len(p))
		from := f.physical() - moved
		if err := f.copyDown(tailStart, from, moved); err != nil {
			return err
		}
		f.dropped += oldTail - moved
		if _, err := f.f.WriteAt(p, tailStart+moved); err != nil {
			return err
		}
	}
	f.size = f.head + f.dropped + keep
	if err := f.f.Truncate(tailStart + keep); err != nil {
		return err
	}
	_, err := f.f.WriteAt([]byte(gapLine(f.dropped, f.head)), f.head)
	return err
}

// copyDown copies n bytes of the file from offset src to offset dst <
// src, in order, so that no byte is overwritten before it was read.
func (f *File) copyDown(dst, src, n int64) error {
	buf := make([]byte, min(n, 1<<20))
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := f.f.ReadAt(buf[:k], src); err != nil {
			return err
		}
		if _, err := f.f.WriteAt(buf[:k], dst); err != nil {
			return err
		}
		src, dst, n = src+k, dst+k, n-k
	}
	return nil
}

// gapLine is the line that marks the gap, padded to gapLineLen bytes.
func gapLine(dropped, head int64) string {
	s := fmt.Sprintf("\n[output truncated in middle: %d bytes dropped here, between the first %s and the newest output]",
		dropped, humanizeLimit(head))
	return s + strings.Repeat(" ", max(gapLineLen-len(s)-1, 0)) + "\n"
}

// ReadAt reads up to len(p) bytes of output from offset off. When off
// lies in the gap, it reads from the first byte after it: start is the
// offset of p[0] (>= off). n < len(p) only at the end of the output
// (err io.EOF).
func (f *File) ReadAt(p []byte, off int64) (start int64, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off < 0 {
		return off, 0, errors.New("truncate: negative offset")
	}
	file := f.f
	if file == nil {
		if file, err = os.Open(f.path); err != nil {
			return off, 0, err
		}
		defer file.Close()
	}
	if f.dropped > 0 && off >= f.head && off < f.head+f.dropped {
		off = f.head + f.dropped
	}
	start = off
	for len(p) > 0 && off < f.size {
		var phys, avail int64
		switch {
		case f.dropped == 0:
			phys, avail = off, f.size-off
		case off < f.head:
			phys, avail = off, f.head-off
		default:
			phys, avail = off-f.dropped+gapLineLen, f.size-off
		}
		k := min(int64(len(p)), avail)
		m, rerr := file.ReadAt(p[:k], phys)
		n += m
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return start, n, rerr
		}
		if int64(m) < k { // the file is shorter than its record says
			return start, n, io.ErrUnexpectedEOF
		}
		p, off = p[k:], off+k
		if f.dropped > 0 && off == f.head {
			if len(p) > 0 && n > 0 {
				return start, n, nil // stop at the gap: the next read skips it
			}
			off = f.head + f.dropped
		}
	}
	if len(p) > 0 {
		return start, n, io.EOF
	}
	return start, n, nil
}

// Close closes the file for writing; ReadAt goes on working (it opens the
// file by its path).
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f = nil
	return err
}
