package errfs

import (
	"syscall"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// BenchmarkErrfsWriteOverhead compares 4 KiB writes to a MemFS file bare
// and through errfs with three non-matching rules (the common case in a
// sweep: the fault is elsewhere).
func BenchmarkErrfsWriteOverhead(b *testing.B) {
	buf := make([]byte, 4096)
	for _, wrapped := range []bool{false, true} {
		name := "bare"
		if wrapped {
			name = "errfs"
		}
		b.Run(name, func(b *testing.B) {
			var fs vfs.FS = vfs.NewMem()
			if wrapped {
				fs = Wrap(fs, Any(
					On(OpSync).Nth(1<<30).Err(syscall.EIO),
					On(OpWrite).Glob("*.index").Err(syscall.ENOSPC),
					On(OpRename).Err(syscall.EIO),
				))
			}
			f, _ := fs.Create("/x.log")
			b.SetBytes(4096)
			for i := 0; b.Loop(); i++ {
				f.WriteAt(buf, int64(i%4096)*4096)
			}
		})
	}
}
