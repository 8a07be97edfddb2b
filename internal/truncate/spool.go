package truncate

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// SpoolID is the id of a spool file: its name without the "output-"
// prefix and ".log" suffix (the file is in a directory the engine
// chooses, so the id alone reaches it only through a list of the files a
// caller may read).
func SpoolID(path string) string {
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "output-"), ".log")
}

// ReadSpool reads up to n bytes of a spool file (Output.SpoolFile) from
// offset off as text: valid UTF-8 (invalid bytes replaced), ending on a
// character boundary unless the file ends there. It returns the text, the
// file offset after the bytes it covers, and the file's size; an offset
// past the end reads nothing. A file that is gone is an error matching
// os.ErrNotExist.
func ReadSpool(path string, off, n int64) (text string, end, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, 0, err
	}
	size = st.Size()
	off = min(max(off, 0), size)
	buf := make([]byte, min(max(n, 0), size-off))
	k, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", 0, 0, err
	}
	buf = buf[:k]
	if off+int64(k) < size {
		for i := 0; i < utf8.UTFMax && len(buf) > 0 && !utf8.FullRune(buf[lastRuneStart(buf):]); i++ {
			buf = buf[:lastRuneStart(buf)]
		}
	}
	return strings.ToValidUTF8(string(buf), "\uFFFD"), off + int64(len(buf)), size, nil
}

// lastRuneStart is the index of the last rune start in b (0 if none).
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return 0
}
