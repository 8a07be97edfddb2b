package gitindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// ewah is an EWAH-compressed bitmap as git stores it (ewah/ewah_io.c
// ewah_read_mmap): its size in bits, its 64-bit words, and the position
// of its last marker word. Each marker word says how many words of
// equal bits (0 or 1) come, then how many literal words follow it.
type ewah struct {
	bits  uint32
	words []uint64
	size  int // the bytes it took
}

// readEWAH reads a bitmap at the start of b and checks that its marker
// words and literal words fit in it (git's ewah_each_bit trusts them).
func readEWAH(b []byte) (ewah, error) {
	if len(b) < 8 {
		return ewah{}, errors.New("a bitmap that ends early")
	}
	bm := ewah{bits: binary.BigEndian.Uint32(b)}
	n := uint64(binary.BigEndian.Uint32(b[4:]))
	if n*8 > uint64(len(b)-8) || uint64(len(b)-8)-n*8 < 4 {
		return ewah{}, errors.New("a bitmap that ends early")
	}
	bm.words = make([]uint64, n)
	for i := range bm.words {
		bm.words[i] = binary.BigEndian.Uint64(b[8+8*i:])
	}
	bm.size = 8 + int(n)*8 + 4
	rlw := uint64(binary.BigEndian.Uint32(b[8+n*8:]))
	last := uint64(0)
	for i := uint64(0); i < n; {
		last = i
		i += 1 + bm.words[i]>>33
		if i > n {
			return ewah{}, errors.New("a bitmap whose literal words run past its end")
		}
	}
	if n > 0 && rlw != last || n == 0 && rlw != 0 {
		return ewah{}, fmt.Errorf("a bitmap whose last marker is at %d, not %d", rlw, last)
	}
	return bm, nil
}

// each calls f with the position of each set bit (ewah_each_bit); a
// position at or past limit is an error, found before f sees it.
func (bm ewah) each(limit int, f func(int)) error {
	pos := uint64(0)
	lim := uint64(limit)
	for i := 0; i < len(bm.words); {
		w := bm.words[i]
		run := ((w >> 1) & 0xffffffff) * 64
		if w&1 != 0 {
			if pos+run > lim {
				return fmt.Errorf("a bitmap with bit %d set, of %d", pos+run-1, limit)
			}
			for range run {
				f(int(pos))
				pos++
			}
		} else {
			pos += run
		}
		lit := int(w >> 33)
		for _, x := range bm.words[i+1 : i+1+lit] {
			for x != 0 {
				c := uint64(bits.TrailingZeros64(x))
				if pos+c >= lim {
					return fmt.Errorf("a bitmap with bit %d set, of %d", pos+c, limit)
				}
				f(int(pos + c))
				x &= x - 1
			}
			pos += 64
		}
		i += 1 + lit
	}
	return nil
}
