package tiering

import (
	"context"
	"io"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/miniotest"
	"github.com/strata-io/strata/tiering/objstore"
)

// rdBenchSet builds a 64 MiB segment set (four 16 MiB segments of ~16 KiB
// batches) in an FSStore on b.TempDir().
func rdBenchSet(b *testing.B) (objstore.ObjectStore, []RemoteSegment, int64) {
	b.Helper()
	l := rdNewLog(b)
	l.fillFixed(4, 16<<20, 16<<10)
	store, err := objstore.NewFSStore(filepath.Join(b.TempDir(), "objects"))
	if err != nil {
		b.Fatal(err)
	}
	segs := l.upload(store, "p")
	var total int64
	for _, s := range segs {
		total += s.SizeBytes
	}
	return store, segs, total
}

// rdCPUTime returns the CPU time (user + system) the process has used.
func rdCPUTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rdReportCPU adds cpu-ns/op: CPU time per operation (background work of
// the op included), which, unlike ns/op, other processes competing for
// the cores of a shared machine do not inflate.
func rdReportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(rdCPUTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRemoteCatchUp: a consumer catching up reads the whole set
// sequentially, 1 MiB per fetch, through a cold Reader (default chunk,
// read-ahead and threads). Compare MB/s and cpu-ns/op with
// BenchmarkRawRangedGet. cpu-ns/op includes the reader's background work
// (read-ahead, cache file writes, Close removing the files).
func BenchmarkRemoteCatchUp(b *testing.B) {
	store, segs, total := rdBenchSet(b)
	ctx := context.Background()
	b.SetBytes(total)
	var gets int64
	cpu := rdCPUTime(b)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		r := rdReader(b, store, func(c *ReaderConfig) {
			c.CacheBytes, c.ChunkBytes, c.IndexCacheBytes, c.Threads = DefaultRemoteCacheBytes, DefaultRemoteChunkBytes, DefaultRemoteIndexCacheBytes, DefaultRemoteReaderThreads
		})
		b.StartTimer()
		for _, seg := range segs {
			for off := seg.BaseOffset; off <= seg.EndOffset; {
				rr, err := r.Read(ctx, seg, off, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				off = rr.NextOffset
			}
		}
		b.StopTimer()
		gets += r.Stats().GETs
		r.Close()
		b.StartTimer()
	}
	rdReportCPU(b, cpu)
	b.ReportMetric(float64(gets)/float64(b.N)/(float64(total)/(1<<30)), "GETs/GiB")
}

// BenchmarkRawRangedGet: the same bytes as plain sequential ranged Gets
// of DefaultRemoteChunkBytes, one at a time, into a reused buffer: the
// floor the reader's overhead is measured against.
func BenchmarkRawRangedGet(b *testing.B) {
	store, segs, total := rdBenchSet(b)
	ctx := context.Background()
	buf := make([]byte, DefaultRemoteChunkBytes)
	b.SetBytes(total)
	gets := 0
	cpu := rdCPUTime(b)
	b.ResetTimer()
	for b.Loop() {
		for _, seg := range segs {
			key := seg.Key("p", ExtLog)
			for off := int64(0); off < seg.SizeBytes; off += DefaultRemoteChunkBytes {
				n := min(DefaultRemoteChunkBytes, seg.SizeBytes-off)
				rc, err := store.Get(ctx, key, off, n)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rc, buf[:n]); err != nil {
					b.Fatal(err)
				}
				rc.Close()
				gets++
			}
		}
	}
	rdReportCPU(b, cpu)
	b.ReportMetric(float64(gets)/float64(b.N)/(float64(total)/(1<<30)), "GETs/GiB")
}

// BenchmarkRemoteCatchUpMinIO: a cold Reader (defaults) catches up over
// the 64 MiB set in MinIO, 1 MiB per read as views (the broker's path:
// no copy, released as a response would be), against a raw pass of
// sequential ranged GETs of one chunk over the same .log objects timed
// right before it in every iteration: x-raw is the ratio of the two
// rates, raw-MB/s the raw one. Also GETs per GiB and the chunk cache's
// hit ratio. Skipped without minio unless CI=true.
func BenchmarkRemoteCatchUpMinIO(b *testing.B) {
	srv := miniotest.Start(b)
	b.Setenv("AWS_CA_BUNDLE", "")
	store, err := objstore.NewS3Store(context.Background(), objstore.S3Options{
		Endpoint: srv.Endpoint, Bucket: srv.Bucket, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		b.Fatal(err)
	}
	l := rdNewLog(b)
	l.fillFixed(4, 16<<20, 16<<10)
	segs := l.upload(store, "p")
	var total int64
	for _, s := range segs {
		total += s.SizeBytes
	}
	ctx := context.Background()
	buf := make([]byte, DefaultRemoteChunkBytes)
	b.SetBytes(total)
	var gets, hits, misses int64
	var readTime, rawTime time.Duration
	cpu := rdCPUTime(b)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		start := time.Now()
		for _, seg := range segs {
			key := seg.Key("p", ExtLog)
			for off := int64(0); off < seg.SizeBytes; off += DefaultRemoteChunkBytes {
				n := min(DefaultRemoteChunkBytes, seg.SizeBytes-off)
				rc, err := store.Get(ctx, key, off, n)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rc, buf[:n]); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		}
		rawTime += time.Since(start)
		r := rdReader(b, store, func(c *ReaderConfig) {
			c.CacheBytes, c.ChunkBytes, c.IndexCacheBytes, c.Threads = DefaultRemoteCacheBytes, DefaultRemoteChunkBytes, DefaultRemoteIndexCacheBytes, DefaultRemoteReaderThreads
		})
		b.StartTimer()
		start = time.Now()
		for i, seg := range segs {
			if i+1 < len(segs) {
				r.Follows(seg, segs[i+1])
			}
			for off := seg.BaseOffset; off <= seg.EndOffset; {
				v, err := r.ReadView(ctx, seg, off, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				off = v.NextOffset
				v.Release()
			}
		}
		readTime += time.Since(start)
		b.StopTimer()
		st := r.Stats()
		gets, hits, misses = gets+st.GETs, hits+st.Hits, misses+st.Misses
		r.Close()
		b.StartTimer()
	}
	rdReportCPU(b, cpu)
	b.ReportMetric(float64(gets)/float64(b.N)/(float64(total)/(1<<30)), "GETs/GiB")
	if hits+misses > 0 {
		b.ReportMetric(float64(hits)/float64(hits+misses), "hit-ratio")
	}
	b.ReportMetric(float64(total)*float64(b.N)/rawTime.Seconds()/1e6, "raw-MB/s")
	b.ReportMetric(rawTime.Seconds()/readTime.Seconds(), "x-raw")
}
