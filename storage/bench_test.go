package storage_test

// Storage benchmarks (issue 2). Run them one at a time, e.g.
//
//	go test -run '^$' -bench 'BenchmarkAppend' -benchtime 2000x -count 5 ./storage
//	go test -run '^$' -bench 'BenchmarkReadByOffset' -count 3 ./storage
//	go test -run '^$' -bench 'BenchmarkReopen' -benchtime 3x -count 3 ./storage
//
// BenchmarkAppend runs a raw sequential os.File write of the same bytes in
// the same sizes beside the log append, so the ratio (append MB/s over raw
// MB/s) comes out of one run. BenchmarkReadByOffset and BenchmarkReopen
// build their logs once per run (256 MiB and 1 GiB on disk, in a temporary
// directory removed afterwards) and skip under -short.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
)

const (
	benchRecordBytes = 1 << 10  // 1 KiB record values
	benchBatchBytes  = 16 << 10 // about 16 KiB per batch
	benchBaseTs      = int64(1_700_000_000_000)
)

// benchBatch builds a valid uncompressed v2 batch of 1 KiB records that
// comes to about 16 KiB (a producer's default batch.size), as a producer
// would send it. Append patches offsets and epochs in place, outside the
// CRC, so the one buffer can be appended again and again.
func benchBatch(tb testing.TB) []byte {
	tb.Helper()
	n := benchBatchBytes / (benchRecordBytes + 16) // records + their framing fit in 16 KiB
	var raw []byte
	for i := range n {
		r := kmsg.Record{
			OffsetDelta:      int32(i),
			TimestampDelta64: int64(i),
			Key:              fmt.Appendf(nil, "key-%04d", i),
			Value:            bytes.Repeat([]byte{byte('a' + i%26)}, benchRecordBytes),
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		raw = r.AppendTo(raw)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       benchBaseTs,
		MaxTimestamp:         benchBaseTs + int64(n-1),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(n),
		Records:              raw,
	}
	rb.Length = int32(len(raw) + batch.HeaderSize - 12)
	b := rb.AppendTo(nil)
	rb.CRC = int32(batch.Checksum(b))
	b = rb.AppendTo(b[:0])
	if _, err := batch.Validate(b, batch.Limits{MaxBatchBytes: 1 << 20, SkipTimestampCheck: true}); err != nil {
		tb.Fatalf("bench batch does not validate: %v", err)
	}
	return b
}

// benchLogOptions opens a log in dir with Kafka's defaults and a segment
// size of 1 GiB (the default), on the OS file system.
func benchLogOptions(dir string) storage.LogOptions {
	cfg := storage.DefaultConfig()
	cfg.SegmentBytes = 1 << 30
	return storage.LogOptions{Dir: dir, Topic: "bench", Partition: 0, FS: vfs.Default, Config: cfg}
}

func openBenchLog(tb testing.TB, o storage.LogOptions) *storage.Log {
	tb.Helper()
	l, err := storage.OpenLog(o)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// Byte positions in a v2 batch header (see internal/batch).
const (
	batchCRCPos     = 17
	batchFirstTsPos = 27
	batchMaxTsPos   = 35
)

// restamp moves a batch's timestamps to start at ts and fixes its CRC, as
// if a producer had built it at ts.
func restamp(b []byte, ts int64) {
	span := int64(binary.BigEndian.Uint64(b[batchMaxTsPos:])) - int64(binary.BigEndian.Uint64(b[batchFirstTsPos:]))
	binary.BigEndian.PutUint64(b[batchFirstTsPos:], uint64(ts))
	binary.BigEndian.PutUint64(b[batchMaxTsPos:], uint64(ts+span))
	binary.BigEndian.PutUint32(b[batchCRCPos:], batch.Checksum(b))
}

// fillLog appends batches until the log holds at least size bytes, each
// batch stamped 1 ms after the previous one (producers stamp the time they
// build a batch, so a partition's max timestamp keeps rising and the time
// index gets an entry at every offset index entry).
func fillLog(tb testing.TB, l *storage.Log, size int64) {
	tb.Helper()
	b := benchBatch(tb)
	for i := int64(0); l.Size() < size; i++ {
		restamp(b, benchBaseTs+i)
		if _, err := l.Append(b, storage.AppendOptions{LeaderEpoch: 1, AssignOffsets: true}); err != nil {
			tb.Fatal(err)
		}
	}
}

// cpuTime returns the CPU time (user + system) the process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op: CPU time per operation, which, unlike ns/op,
// other processes competing for the cores do not inflate (the machine is
// shared; compare cpu-ns/op when ns/op is noisy).
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkAppend measures Log.Append of 1 KiB records in 16 KiB batches
// (validation, offset assignment, one write, index upkeep; no fsync, as
// with Kafka's default flush settings), next to raw-file-write: the same
// bytes in the same sizes written sequentially to an os.File, the page
// cache's speed. Compare the two MB/s figures.
func BenchmarkAppend(b *testing.B) {
	rec := benchBatch(b)
	b.Run("size=1KiB", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "bench-0")
		l := openBenchLog(b, benchLogOptions(dir))
		b.Cleanup(func() { _ = l.Close() })
		o := storage.AppendOptions{LeaderEpoch: 1, AssignOffsets: true}
		b.SetBytes(int64(len(rec)))
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime(b)
		for range b.N {
			if _, err := l.Append(rec, o); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportCPU(b, cpu0)
		if got, want := l.Size(), int64(b.N)*int64(len(rec)); got != want {
			b.Fatalf("log holds %d bytes after %d appends, want %d", got, b.N, want)
		}
	})
	b.Run("raw-file-write", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "raw.log"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = f.Close() })
		buf := bytes.Clone(rec)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime(b)
		for range b.N {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportCPU(b, cpu0)
	})
}

// BenchmarkReadByOffset measures Log.Read of one batch at a random offset
// of a 256 MiB log: locate = find the segment and the position (index
// lookup plus the scan to the batch), the cost a fetch pays before
// sendfile; locate+read also copies the batch out with ReadAt (page cache
// hot), as a fetch without sendfile would.
func BenchmarkReadByOffset(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 256 MiB log")
	}
	dir := filepath.Join(b.TempDir(), "bench-0")
	l := openBenchLog(b, benchLogOptions(dir))
	defer l.Close()
	fillLog(b, l, 256<<20)
	leo := l.LogEndOffset()
	buf := make([]byte, 2*benchBatchBytes)
	for _, copyOut := range []bool{false, true} {
		name := "locate"
		if copyOut {
			name = "locate+read"
		}
		b.Run(name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			defer reportCPU(b, cpu0)
			for range b.N {
				off := rng.Int64N(leo)
				v, err := l.Read(off, benchBatchBytes, leo)
				if err != nil {
					b.Fatal(err)
				}
				if v.Size == 0 || v.FirstOffset > off || v.NextOffset <= off {
					b.Fatalf("Read(%d) = [%d, %d) of %d bytes", off, v.FirstOffset, v.NextOffset, v.Size)
				}
				if copyOut {
					if _, err := v.File.ReadAt(buf[:v.Size], v.Pos); err != nil {
						b.Fatal(err)
					}
				}
				v.Release()
			}
		})
	}
}

// BenchmarkReopen measures OpenLog of a 1 GiB log (one segment at the
// default segment.bytes): state=clean after a clean shutdown (indexes
// trusted, nothing rescanned), state=unclean after a crash that left the
// recovery point at 0 (the whole segment is revalidated, CRCs included,
// and its indexes rebuilt). The log is built once; the page cache is hot.
func BenchmarkReopen(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1 GiB log")
	}
	dir := filepath.Join(b.TempDir(), "bench-0")
	l := openBenchLog(b, benchLogOptions(dir))
	fillLog(b, l, 1<<30)
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	for _, clean := range []bool{true, false} {
		name := "state=unclean"
		if clean {
			name = "state=clean"
		}
		b.Run(name, func(b *testing.B) {
			o := benchLogOptions(dir)
			o.CleanShutdown = clean
			if clean {
				o.RecoveryPoint = leo
			}
			b.ResetTimer()
			var cpu time.Duration
			for range b.N {
				cpu0 := cpuTime(b)
				l := openBenchLog(b, o)
				cpu += cpuTime(b) - cpu0
				b.StopTimer()
				if got := l.LogEndOffset(); got != leo {
					b.Fatalf("reopened at log end %d, want %d", got, leo)
				}
				if !clean && !l.Recovery().Recovered {
					b.Fatalf("unclean reopen did not recover: %+v", l.Recovery())
				}
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
