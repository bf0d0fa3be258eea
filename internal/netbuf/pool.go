package netbuf

import (
	"io"
	"math/bits"
	"sync"
)

// Frames of at least PoolMin bytes can be read into recycled buffers
// ([Budget.ReadFramePooled], [PutFrame]): power-of-two classes from PoolMin
// to PoolMax, each a sync.Pool, so a producer's 1 MiB requests stop costing
// a 1-2 MiB allocation each (and the GC work behind it). The pools hold
// nothing across two GC cycles, so an idle process keeps no memory for
// them.
const (
	poolMinShift = 16 // 64 KiB
	poolMaxShift = 27 // 128 MiB
	PoolMin      = 1 << poolMinShift
	PoolMax      = 1 << poolMaxShift
)

var framePools [poolMaxShift - poolMinShift + 1]sync.Pool

// poolClass is the class whose buffers hold n bytes, or -1.
func poolClass(n int) int {
	if n < PoolMin || n > PoolMax {
		return -1
	}
	return bits.Len(uint(n-1)) - poolMinShift
}

// getFrame is a buffer of length n, recycled when n's class has one.
func getFrame(n int) []byte {
	c := poolClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if bp, ok := framePools[c].Get().(*[]byte); ok {
		return (*bp)[:n]
	}
	return make([]byte, n, PoolMin<<c)
}

// PutFrame recycles a buffer from [Budget.ReadFramePooled] (or any buffer
// whose capacity is a class size) once nothing refers to it any more.
// Other buffers are left to the GC.
func PutFrame(b []byte) {
	c := poolClass(cap(b))
	if c < 0 || cap(b) != PoolMin<<c {
		return
	}
	b = b[:cap(b)]
	framePools[c].Put(&b)
}

// ReadFramePooled is [Budget.ReadFrame] with buffers from the frame pools:
// the same growth as bytes arrive (so a stalled frame costs no more), the
// buffers it outgrows going back to the pools. The caller gives the frame
// back with [PutFrame] when the request is done, or drops it.
func (b *Budget) ReadFramePooled(r io.Reader, n int) ([]byte, error) {
	if n <= 0 {
		return []byte{}, nil
	}
	buf := getFrame(min(n, FirstChunk))
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
			PutFrame(buf)
			return nil, err
		}
		if got == n {
			return buf, nil
		}
		next := getFrame(min(n, Growth*len(buf)))
		b.addReading(int64(len(next)))
		copy(next, buf)
		b.addReading(-int64(len(buf)))
		PutFrame(buf)
		buf = next
	}
}
