package netbuf

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// TestReadFramePooledReadsExactly: pooled reads return exactly the frame's
// bytes at every size around the class and chunk boundaries, also into
// recycled buffers that held other bytes, and a short frame is an error.
func TestReadFramePooledReadsExactly(t *testing.T) {
	b := NewBudget(0)
	for _, n := range []int{1, PoolMin - 1, PoolMin, PoolMin + 1, FirstChunk - 1, FirstChunk, FirstChunk + 1, 3*FirstChunk + 5} {
		for round := range 2 {
			want := make([]byte, n)
			for i := range want {
				want[i] = byte(rand.IntN(256))
			}
			got, err := b.ReadFramePooled(bytes.NewReader(want), n)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("n=%d round %d: %d bytes, equal %v, err %v", n, round, len(got), bytes.Equal(got, want), err)
			}
			PutFrame(got)
		}
		if _, err := b.ReadFramePooled(bytes.NewReader(make([]byte, n-1)), n); !errors.Is(err, io.ErrUnexpectedEOF) && !(n == 1 && errors.Is(err, io.EOF)) {
			t.Fatalf("n=%d short frame: %v", n, err)
		}
	}
	if r := b.Reading(); r != 0 {
		t.Fatalf("reading %d after the frames, want 0", r)
	}
}

// TestPoolClass: a class's buffers hold every size of it and no class
// covers what is outside [PoolMin, PoolMax].
func TestPoolClass(t *testing.T) {
	for _, n := range []int{PoolMin, PoolMin + 1, 2 * PoolMin, 1 << 20, (1 << 20) + 1, PoolMax} {
		c := poolClass(n)
		if c < 0 || PoolMin<<c < n || (c > 0 && PoolMin<<(c-1) >= n) {
			t.Fatalf("n=%d: class %d (%d bytes)", n, c, PoolMin<<c)
		}
	}
	for _, n := range []int{0, PoolMin - 1, PoolMax + 1} {
		if c := poolClass(n); c >= 0 {
			t.Fatalf("n=%d: class %d, want none", n, c)
		}
	}
}
