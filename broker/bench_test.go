package broker

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/storage"
)

const benchLogBytes = 64 << 20

// fillTopic produces about benchLogBytes of 1 KiB records, 64 per batch.
func fillTopic(b *testing.B, n *Node, topic string) {
	b.Helper()
	createTopic(b, newAdmin(b, n), topic, 1, nil)
	c := dialRaw(b, n)
	vals := make([]string, 64)
	for i := range vals {
		vals[i] = string(bytes.Repeat([]byte{byte('a' + i%26)}, 1024))
	}
	for n.partition(topic, 0).log.Size() < benchLogBytes {
		req := produceReq(9, topic, [16]byte{}, 0, 1, recordBatch(0, vals...))
		c.send(req)
		if _, _, err := c.readFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetch/size=64MiB fetches the whole log in one response per
// iteration over loopback and reports MB/s and heap bytes allocated per
// fetched MiB (both sides of the connection live in this process).
func BenchmarkFetch(b *testing.B) {
	b.Run("size=64MiB", func(b *testing.B) {
		n := startNode(b, b.TempDir(), nil)
		fillTopic(b, n, "bench")
		size := n.partition("bench", 0).log.Size()
		c := dialRaw(b, n)
		req := fetchReq(11, "bench", [16]byte{}, 0, 0, 0, 0, 1<<30)
		req.MaxBytes = 1 << 30
		frame := frameRequest(req, 1)
		var sz [4]byte
		b.SetBytes(size)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.nc.Write(frame); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c.nc, sz[:]); err != nil {
				b.Fatal(err)
			}
			got, err := io.CopyN(io.Discard, c.nc, int64(binary.BigEndian.Uint32(sz[:])))
			if err != nil || got < size {
				b.Fatalf("read %d of %d: %v", got, size, err)
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms1)
		mib := float64(size) * float64(b.N) / (1 << 20)
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/mib, "allocB/MiB")
	})
}

// BenchmarkRawSendfile sends the same segment file over loopback with
// nothing but sendfile(2): the ceiling BenchmarkFetch is compared with.
func BenchmarkRawSendfile(b *testing.B) {
	b.Run("size=64MiB", func(b *testing.B) {
		n := startNode(b, b.TempDir(), nil)
		fillTopic(b, n, "bench")
		l := n.partition("bench", 0).log
		path := filepath.Join(l.Dir(), storage.SegmentFileName(0, storage.LogFileSuffix))
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		size := l.Size()
		ln, err := netListen()
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		a, r := tcpPairFrom(b, ln)
		done := make(chan struct{})
		go func() {
			defer close(done)
			io.Copy(io.Discard, r)
		}()
		b.SetBytes(size)
		for b.Loop() {
			if ok, err := sendfile(a, f, 0, size); !ok || err != nil {
				b.Fatal(err)
			}
		}
		a.Close()
		<-done
	})
}

// BenchmarkProduce/record=1KiB produces 1 KiB records with franz-go (acks
// all, linger 5ms, no compression) and reports MB/s of record values.
func BenchmarkProduce(b *testing.B) {
	b.Run("record=1KiB", func(b *testing.B) {
		n := startNode(b, b.TempDir(), nil)
		createTopic(b, newAdmin(b, n), "bench", 1, nil)
		cl := newClient(b, n, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(5_000_000),
			kgo.DefaultProduceTopic("bench"), kgo.MaxBufferedRecords(100_000))
		val := bytes.Repeat([]byte("v"), 1024)
		ctx := testCtx(b)
		b.SetBytes(1024)
		for b.Loop() {
			cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	})
}
