package netbuf

import "io"

// FirstChunk is the most [ReadFrame] allocates before any byte of a frame
// has arrived. Produce requests are up to about 1 MiB (a producer's
// batch.size), so they take four doublings from here; measured on
// BenchmarkProduce the extra copying is within run-to-run noise.
const FirstChunk = 128 << 10

// ReadFrame reads exactly n bytes from r into a new buffer that grows as
// they arrive: it starts at min(n, FirstChunk) and doubles, so a peer that
// claims a large frame and sends little makes the process allocate at most
// about twice what was sent (and never more than FirstChunk for nothing).
// A short read returns io.ErrUnexpectedEOF (io.EOF if nothing was read), or
// the reader's error, such as a deadline.
func ReadFrame(r io.Reader, n int) ([]byte, error) {
	if n <= 0 {
		return []byte{}, nil
	}
	buf := make([]byte, min(n, FirstChunk))
	got := 0
	for {
		m, err := io.ReadFull(r, buf[got:])
		got += m
		if err != nil {
			if err == io.EOF && got > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if got == n {
			return buf, nil
		}
		next := make([]byte, min(n, 2*len(buf)))
		copy(next, buf)
		buf = next
	}
}
