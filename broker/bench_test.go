package broker

// Benchmarks of the two data paths over loopback. Every consume benchmark
// also sends the same segment file with nothing but sendfile(2) over its
// own loopback connection in the same iteration (timer stopped), and
// reports the ratio of the two rates ("ratio", target >= 0.8): both
// measurements share the run's CPU and page-cache conditions, so the ratio
// is meaningful even on a noisy shared machine where absolute MB/s is not.
//
//	go test -run '^$' -bench . -benchtime 20x -count 5 ./broker/
//
// Metrics: MB/s (b.SetBytes: log bytes for consume, record values for
// produce), sendfile-MB/s, ratio, allocB/MiB (heap bytes allocated per MiB
// fetched, both ends of the connection in this process: the zero-copy
// proof is that it stays far below 1 MiB), records/s.

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/storage"
)

const (
	benchLogBytes   = 64 << 20
	benchRecordSize = 1024
	benchBatchRecs  = 64
)

// fillTopic produces about benchLogBytes of 1 KiB records, 64 per batch,
// to partition 0 of a new topic and returns the number of records.
func fillTopic(b *testing.B, n *Node, topic string) int64 {
	b.Helper()
	createTopic(b, newAdmin(b, n), topic, 1, nil)
	c := dialRaw(b, n)
	vals := make([]string, benchBatchRecs)
	for i := range vals {
		vals[i] = string(bytes.Repeat([]byte{byte('a' + i%26)}, benchRecordSize))
	}
	l := n.partition(topic, 0).log
	for l.Size() < benchLogBytes {
		c.send(produceReq(9, topic, [16]byte{}, 0, 1, recordBatch(0, vals...)))
		if _, _, err := c.readFrame(); err != nil {
			b.Fatal(err)
		}
	}
	return l.LogEndOffset()
}

// drain reads exactly n bytes from r into a reused buffer.
func drain(r io.Reader, buf []byte, n int64) error {
	for n > 0 {
		got, err := r.Read(buf[:min(int64(len(buf)), n)])
		n -= int64(got)
		if err != nil && n > 0 {
			return err
		}
	}
	return nil
}

// rawSendfile is the ceiling the consume benchmarks compare with: the
// topic's segment file sent with sendfile(2) alone over its own loopback
// connection, drained by a reader like the consumer's.
type rawSendfile struct {
	f    *os.File
	size int64
	a    *net.TCPConn
	got  chan error
}

func newRawSendfile(b *testing.B, n *Node, topic string) *rawSendfile {
	b.Helper()
	l := n.partition(topic, 0).log
	if l.NumSegments() != 1 {
		b.Fatalf("%d segments, want the log in one file", l.NumSegments())
	}
	f, err := os.Open(filepath.Join(l.Dir(), storage.SegmentFileName(0, storage.LogFileSuffix)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	ln, err := netListen()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	rs := &rawSendfile{f: f, size: l.Size(), got: make(chan error, 1)}
	var r *net.TCPConn
	rs.a, r = tcpPairFrom(b, ln)
	return rs.startReader(r)
}

func (rs *rawSendfile) startReader(r *net.TCPConn) *rawSendfile {
	go func() {
		buf := make([]byte, 256<<10)
		for {
			err := drain(r, buf, rs.size)
			rs.got <- err
			if err != nil {
				return
			}
		}
	}()
	return rs
}

// once sends the file and returns how long it took to arrive.
func (rs *rawSendfile) once(b *testing.B) time.Duration {
	start := time.Now()
	if ok, err := sendfile(rs.a, rs.f, 0, rs.size); !ok || err != nil {
		b.Fatalf("sendfile: ok=%v err=%v", ok, err)
	}
	if err := <-rs.got; err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// consumeStats accumulates a consume benchmark's measurements.
type consumeStats struct {
	bytes          int64 // log bytes consumed
	consume, raw   time.Duration
	alloc, records int64
	// ratios holds each iteration's consume rate over its sendfile rate:
	// the reported ratio is their median, robust to a burst of load from
	// elsewhere hitting one side of one pair.
	ratios []float64
}

// pair records one iteration: its consume and sendfile durations.
func (s *consumeStats) pair(consume, raw time.Duration) {
	s.consume += consume
	s.raw += raw
	s.ratios = append(s.ratios, raw.Seconds()/consume.Seconds())
}

func (s *consumeStats) report(b *testing.B) {
	mbps := func(d time.Duration) float64 { return float64(s.bytes) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(s.raw), "sendfile-MB/s")
	slices.Sort(s.ratios)
	b.ReportMetric(s.ratios[len(s.ratios)/2], "ratio")
	if s.alloc > 0 {
		b.ReportMetric(float64(s.alloc)/(float64(s.bytes)/(1<<20)), "allocB/MiB")
	}
	if s.records > 0 {
		b.ReportMetric(float64(s.records)/s.consume.Seconds(), "records/s")
	}
}

func heapAllocated() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.TotalAlloc)
}

// BenchmarkFetch consumes the 64 MiB log with raw Fetch requests, reading
// responses into one reused buffer, against a raw sendfile of the segment:
//
//   - size=64MiB: one request for the whole log per iteration (the
//     zero-copy path at its purest: allocB/MiB is the broker's cost).
//   - partitionMaxBytes=1MiB: a consumer's loop, 1 MiB per partition per
//     request (kgo's default), each response parsed for the next offset.
func BenchmarkFetch(b *testing.B) {
	for _, c := range []struct {
		name    string
		partMax int32
	}{{"size=64MiB", 1 << 30}, {"partitionMaxBytes=1MiB", 1 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			n := startNode(b, b.TempDir(), nil)
			end := fillTopic(b, n, "bench")
			raw := newRawSendfile(b, n, "bench")
			conn := dialRaw(b, n)
			conn.nc.SetDeadline(time.Time{})
			buf := make([]byte, 0, 2<<20)
			drainBuf := make([]byte, 256<<10)
			var st consumeStats
			b.SetBytes(raw.size)
			b.ResetTimer()
			for i := range b.N {
				var rawTook time.Duration
				if i%2 == 1 {
					// Alternate which goes first, so neither gains from
					// the other's warm-up.
					b.StopTimer()
					rawTook = raw.once(b)
					b.StartTimer()
				}
				start, a0 := time.Now(), heapAllocated()
				for off := int64(0); off < end; {
					req := fetchReq(11, "bench", [16]byte{}, 0, off, 0, 0, c.partMax)
					req.MaxBytes = 1 << 30
					if _, err := conn.nc.Write(frameRequest(req, 1)); err != nil {
						b.Fatal(err)
					}
					var sz [4]byte
					if _, err := io.ReadFull(conn.nc, sz[:]); err != nil {
						b.Fatal(err)
					}
					size := int64(binary.BigEndian.Uint32(sz[:]))
					if c.partMax == 1<<30 {
						// One response is the whole log: drain it.
						if err := drain(conn.nc, drainBuf, size); err != nil || size < raw.size {
							b.Fatalf("read %d of %d: %v", size, raw.size, err)
						}
						off = end
						continue
					}
					buf = buf[:0]
					if int64(cap(buf)) < size {
						buf = make([]byte, 0, size)
					}
					buf = buf[:size]
					if _, err := io.ReadFull(conn.nc, buf); err != nil {
						b.Fatal(err)
					}
					next := nextFetchOffset(b, req, buf[4:])
					if next <= off {
						b.Fatalf("no progress at offset %d", off)
					}
					off = next
				}
				took := time.Since(start)
				st.alloc += heapAllocated() - a0
				st.bytes += raw.size
				if i%2 == 0 {
					b.StopTimer()
					rawTook = raw.once(b)
					b.StartTimer()
				}
				st.pair(took, rawTook)
			}
			b.StopTimer()
			st.report(b)
		})
	}
}

// nextFetchOffset decodes a fetch response (kmsg aliases its record bytes
// to body) and returns the offset after its last whole batch.
func nextFetchOffset(b *testing.B, req *kmsg.FetchRequest, body []byte) int64 {
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		b.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].ErrorCode != 0 {
		b.Fatalf("bad fetch response %+v", fr)
	}
	recs := fr.Topics[0].Partitions[0].RecordBatches
	next := int64(-1)
	for len(recs) >= 61 {
		l := int64(binary.BigEndian.Uint32(recs[8:])) + 12
		if l > int64(len(recs)) {
			break
		}
		next = int64(binary.BigEndian.Uint64(recs)) + int64(binary.BigEndian.Uint32(recs[23:])) + 1
		recs = recs[l:]
	}
	return next
}

// BenchmarkConsume/record=1KiB consumes the 64 MiB log of 1 KiB records
// with a new franz-go consumer per iteration (fetch sessions on, kgo's
// defaults), against a raw sendfile of the same segment. franz-go decodes
// every record into its own heap objects: this is a client's ceiling, not
// the broker's.
func BenchmarkConsume(b *testing.B) {
	b.Run("record=1KiB", func(b *testing.B) {
		n := startNode(b, b.TempDir(), nil)
		end := fillTopic(b, n, "bench")
		raw := newRawSendfile(b, n, "bench")
		ctx := testCtx(b)
		var st consumeStats
		b.SetBytes(raw.size)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumeTopics("bench"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			var got int64
			for got < end {
				fs := cl.PollFetches(ctx)
				if err := fs.Err(); err != nil {
					b.Fatal(err)
				}
				got += int64(fs.NumRecords())
			}
			took := time.Since(start)
			st.bytes += raw.size
			st.records += got
			b.StopTimer()
			cl.Close()
			st.pair(took, raw.once(b))
			b.StartTimer()
		}
		b.StopTimer()
		st.report(b)
	})
}

// BenchmarkProduce/record=1KiB produces 16 MiB of 1 KiB records per
// iteration with franz-go's defaults (idempotent, acks=all) but no
// compression and a 5ms linger, waiting for every acknowledgement, and
// reports MB/s of record values and records/s.
func BenchmarkProduce(b *testing.B) {
	b.Run("record=1KiB", func(b *testing.B) {
		const perOp = 16 << 10
		n := startNode(b, b.TempDir(), nil)
		createTopic(b, newAdmin(b, n), "bench", 1, nil)
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerLinger(5*time.Millisecond), kgo.DefaultProduceTopic("bench"), kgo.MaxBufferedRecords(perOp))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		ctx := testCtx(b)
		benchProduceLoop(b, ctx, cl, perOp)
		if got := n.partition("bench", 0).log.LogEndOffset(); got != int64(b.N*perOp) {
			b.Fatalf("log ends at %d after %d records", got, b.N*perOp)
		}
	})
}

// benchProduceLoop times b.N rounds of perOp records of benchRecordSize
// produced through cl and flushed, and reports records/s.
func benchProduceLoop(b *testing.B, ctx context.Context, cl *kgo.Client, perOp int) {
	b.Helper()
	val := bytes.Repeat([]byte("v"), benchRecordSize)
	b.SetBytes(int64(perOp) * benchRecordSize)
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		for range perOp {
			cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*perOp)/time.Since(start).Seconds(), "records/s")
}
