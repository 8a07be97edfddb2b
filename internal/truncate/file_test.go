package truncate

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readAll reads a File's output from offset 0 the way bash_output pages
// through it, and returns what it read and the gaps it was told of.
func readAll(t *testing.T, f *File, page int) (data []byte, gaps [][2]int64) {
	t.Helper()
	off := int64(0)
	for {
		buf := make([]byte, page)
		start, n, err := f.ReadAt(buf, off)
		if start != off {
			gaps = append(gaps, [2]int64{off, start})
		}
		data = append(data, buf[:n]...)
		off = start + int64(n)
		if errors.Is(err, io.EOF) {
			return data, gaps
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestFileKeepsHeadAndNewestWithinCap(t *testing.T) {
	const capBytes = 64 << 10
	for _, chunk := range []int{1, 100, 4096, 9000, 40 << 10, 200 << 10} {
		path := filepath.Join(t.TempDir(), "job.log")
		f, err := CreateFile(path, capBytes)
		if err != nil {
			t.Fatal(err)
		}
		want := logLines(1 << 20)
		rng := rand.New(rand.NewPCG(1, uint64(chunk)))
		for rest := want; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(chunk))
			if n, err := f.Write(rest[:k]); n != k || err != nil {
				t.Fatalf("chunk %d: Write = %d, %v", chunk, n, err)
			}
			rest = rest[k:]
			if fi, err := os.Stat(path); err != nil || fi.Size() > capBytes {
				t.Fatalf("chunk %d: file is %d bytes, cap %d (%v)", chunk, fi.Size(), capBytes, err)
			}
		}
		if f.Size() != int64(len(want)) {
			t.Fatalf("chunk %d: Size = %d, want %d", chunk, f.Size(), len(want))
		}
		head, dropped := f.Gap()
		if head != capBytes/8 || dropped == 0 {
			t.Fatalf("chunk %d: Gap = %d, %d", chunk, head, dropped)
		}
		// Paging from 0 gives the head, then (told of the gap) the newest
		// output, each byte at its own offset.
		got, gaps := readAll(t, f, 3000)
		tail := want[head+dropped:]
		if !bytes.Equal(got, append(want[:head:head], tail...)) || len(gaps) != 1 || gaps[0] != [2]int64{head, head + dropped} {
			t.Fatalf("chunk %d: read %d bytes with gaps %v; want %d+%d bytes, gap at %d", chunk, len(got), gaps, head, len(tail), head)
		}
		// On disk: head, the gap line, the tail.
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		disk, _ := os.ReadFile(path)
		line := gapLine(dropped, head)
		if len(line) != gapLineLen || !bytes.Equal(disk, append(append(want[:head:head], line...), tail...)) {
			t.Fatalf("chunk %d: file content is not head + %q + tail", chunk, line)
		}
		if !strings.Contains(line, "bytes dropped here") {
			t.Fatal(line)
		}
		// Reading after Close opens the file by its path.
		if again, _ := readAll(t, f, 1<<20); !bytes.Equal(again, got) {
			t.Fatalf("chunk %d: read after close differs", chunk)
		}
	}
}

func TestFileOffsetsInsideTheGap(t *testing.T) {
	f, err := CreateFile(filepath.Join(t.TempDir(), "job.log"), MinFileCap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := logLines(50 << 10)
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	head, dropped := f.Gap()
	buf := make([]byte, 10)
	for _, off := range []int64{head, head + 1, head + dropped - 1} {
		start, n, err := f.ReadAt(buf, off)
		if err != nil || start != head+dropped || n != 10 || !bytes.Equal(buf, want[start:start+10]) {
			t.Fatalf("ReadAt(%d) = %d, %d, %v; want the bytes at %d", off, start, n, err, head+dropped)
		}
	}
	// A read that starts in the head stops at the gap.
	start, n, err := f.ReadAt(make([]byte, 100), head-5)
	if err != nil || start != head-5 || n != 5 {
		t.Fatalf("ReadAt(head-5) = %d, %d, %v", start, n, err)
	}
	// Past the end: EOF, nothing read.
	if _, n, err := f.ReadAt(buf, f.Size()+10); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("ReadAt past the end = %d, %v", n, err)
	}
}

func TestFileUnbounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.log")
	f, err := CreateFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := logLines(200 << 10)
	for i := 0; i < len(want); i += 7000 {
		f.Write(want[i:min(i+7000, len(want))])
	}
	f.Close()
	if disk, _ := os.ReadFile(path); !bytes.Equal(disk, want) {
		t.Fatal("unbounded file differs from the output")
	}
	if _, dropped := f.Gap(); dropped != 0 {
		t.Fatal(dropped)
	}
}

func BenchmarkFileFlood(b *testing.B) {
	data := logLines(64 << 10)
	f, err := CreateFile(filepath.Join(b.TempDir(), "job.log"), 4<<20)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		f.Write(data)
	}
}
