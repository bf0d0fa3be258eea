package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/strata-io/strata/tiering/objstore"
)

// BenchmarkFSStorePut is a segment upload into the filesystem tier:
// temp file, MD5, xattr, fsync, link, directory fsync.
func BenchmarkFSStorePut(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			s, err := objstore.NewFSStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			data := bytes.Repeat([]byte("strata!"), size/7+1)[:size]
			b.SetBytes(int64(size))
			ctx := context.Background()
			i := 0
			for b.Loop() {
				key := fmt.Sprintf("t-1/0/%020d.log", i)
				i++
				if _, err := s.Put(ctx, key, bytes.NewReader(data), int64(size), objstore.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFSStoreGetRange is a remote read: open, ranged section read.
func BenchmarkFSStoreGetRange(b *testing.B) {
	s, err := objstore.NewFSStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const size = 16 << 20
	if _, err := s.Put(ctx, "seg", bytes.NewReader(make([]byte, size)), size, objstore.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("range=%dKiB", n>>10), func(b *testing.B) {
			buf := make([]byte, 256<<10)
			b.SetBytes(int64(n))
			off := int64(0)
			for b.Loop() {
				rc, err := s.Get(ctx, "seg", off, int64(n))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, rc, buf); err != nil {
					b.Fatal(err)
				}
				rc.Close()
				off = (off + int64(n)) % (size - int64(n))
			}
		})
	}
}
