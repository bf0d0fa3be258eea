package netbuf

import "io"

// FirstChunk is the most [ReadFrame] allocates before any byte of a frame
// has arrived. It is a producer's largest usual request (batch.size and
// message.max.bytes are about 1 MiB), so the produce path allocates once,
// as it did from the size prefix: growing from 128 KiB instead made a
// 1 MiB read 3 times slower (BenchmarkReadFrame: 2.3 ms against 0.67 ms on
// the shared CI machine), four allocations and 0.9 MiB copied per request.
// A stalled frame costs at most this much, and no more frames are read at
// once than the request budget admits.
const FirstChunk = 1 << 20

// Growth is the factor by which a frame's buffer grows each time it
// fills: the bytes read so far are copied into the larger buffer, about
// n/(Growth-1) bytes copied for an n-byte frame. Doubling copied about
// the whole frame again (a producer's multi-partition request of 3.5 MiB
// grew 1, 2, 3.5 MiB: 3 MiB copied, 9 % of the broker's CPU in a
// max-throughput profile, issue 20); by four it copies 1 MiB.
const Growth = 4

// ReadFrame reads exactly n bytes from r into a new buffer that grows as
// they arrive: it starts at min(n, FirstChunk) and grows Growth times, so
// a peer that claims a large frame and sends little makes the process
// allocate at most about Growth+1 times what was sent (the full buffer
// and the larger one while copying), and FirstChunk for nothing.
// A short read returns io.ErrUnexpectedEOF (io.EOF if nothing was read), or
// the reader's error, such as a deadline.
func ReadFrame(r io.Reader, n int) ([]byte, error) {
	return (*Budget)(nil).ReadFrame(r, n)
}

// ReadFrame is [ReadFrame] for a frame whose n bytes were acquired from b;
// while it runs, the buffers it holds count in [Budget.Reading]. It
// acquires and releases nothing.
func (b *Budget) ReadFrame(r io.Reader, n int) ([]byte, error) {
	if n <= 0 {
		return []byte{}, nil
	}
	buf := make([]byte, min(n, FirstChunk))
	b.addReading(int64(len(buf)))
	defer func() { b.addReading(-int64(len(buf))) }()
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
		next := make([]byte, min(n, Growth*len(buf)))
		b.addReading(int64(len(next)))
		copy(next, buf)
		b.addReading(-int64(len(buf)))
		buf = next
	}
}
