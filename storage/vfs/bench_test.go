package vfs

import (
	"fmt"
	"testing"
)

// BenchmarkMemAppend measures appending through a MemFS handle with a
// Sync every 16 writes (the unsynced-op log is kept and replayed at Sync).
func BenchmarkMemAppend(b *testing.B) {
	for _, size := range []int{128, 4096} {
		b.Run(fmt.Sprintf("size=%dB", size), func(b *testing.B) {
			m := NewMem()
			f, _ := m.Create("/x")
			buf := make([]byte, size)
			b.SetBytes(int64(size))
			var off int64
			for i := 0; b.Loop(); i++ {
				f.WriteAt(buf, off)
				off += int64(size)
				if i%16 == 15 {
					f.Sync()
				}
				if off > 64<<20 {
					f.Truncate(0)
					off = 0
				}
			}
		})
	}
}

// BenchmarkMemCrashClone measures one crash of a file system holding 32
// files of 64 KiB, half synced and half not, as a crash sweep takes one
// per sync point.
func BenchmarkMemCrashClone(b *testing.B) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	rng := newRand(1)
	for i := range 32 {
		f, _ := m.Create(fmt.Sprintf("/d/f%d", i))
		f.Write(randBytes(rng, 32<<10))
		f.Sync()
		for range 8 {
			f.Write(randBytes(rng, 4<<10))
		}
		f.Close()
	}
	m.SyncDir("/d")
	b.ResetTimer()
	for b.Loop() {
		m.CrashClone(50, rng)
	}
}
