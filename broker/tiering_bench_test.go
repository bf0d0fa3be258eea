package broker

// Benchmarks of the remote tier, through a real node on the fs backend:
//
//	BenchmarkTierCatchUp/{fs,minio}/strata-fetch
//	                                    a consumer reading a topic from
//	                                    offset 0 whose data is all remote,
//	                                    on the fs backend and on a real S3
//	                                    server (MinIO; skipped when minio
//	                                    is missing unless CI=true)
//	BenchmarkTierCatchUp/{fs,minio}/raw-ranged-get
//	                                    the same .log objects read with
//	                                    plain ranged GETs of one chunk, in
//	                                    the same run: the ratio of the two
//	                                    is what the reader's path costs
//	BenchmarkTierUpload                 uploads: MB/s and PUTs per GiB
//	BenchmarkTierProducerP99/{alone,with-catchup-reader}
//	                                    a fixed-rate producer's p99 ack
//	                                    latency, with and without a
//	                                    catch-up reader next to it
//
// Run with -benchtime=3x (each op is a whole read or a whole run).
// cpu-ns/op is the whole process's CPU time per op (node and client): on
// a shared machine ns/op is inflated by other processes, cpu-ns/op is not.

import (
	"context"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/miniotest"
	"github.com/strata-io/strata/tiering"
	"github.com/strata-io/strata/tiering/objstore"
)

// tierCPUTime returns the CPU time (user + system) the process has used.
func tierCPUTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const benchTierBytes = 64 << 20

// benchTierCacheBytes is the catch-up benchmarks' chunk cache: half the
// bytes read, so every pass reads everything from the store again, and
// not the 8 MiB (8 chunks) of the e2e tests, which is too small for the
// read-ahead of two partitions (the default is 1 GiB).
const benchTierCacheBytes = 32 << 20

// tierBenchNode starts a node on the fs backend with a two-partition
// tiered topic holding benchTierBytes, all of it uploaded and most of it
// remote only.
func tierBenchNode(b *testing.B) (*Node, string, produced) {
	dir := b.TempDir()
	return tierBenchNodeWith(b, dir, map[string]string{"remote.storage.fs.path": filepath.Join(dir, "objects")})
}

// tierBenchNodeWith is tierBenchNode with the remote.storage.* settings
// given.
func tierBenchNodeWith(b *testing.B, dir string, remote map[string]string) (*Node, string, produced) {
	b.Helper()
	settings := tierSettings(remote)
	settings["remote.log.cache.bytes"] = strconv.Itoa(benchTierCacheBytes)
	n := startNode(b, dir, settings)
	const topic = "bench"
	createTopic(b, newAdmin(b, n), topic, e2ePartitions, tieredTopicConfigs())
	cl := newClient(b, n, kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(20000), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var prod produced
	produceBench(b, cl, topic, benchTierBytes, &prod)
	rollAll(b, n, topic)
	waitUploaded(b, n, topic, 3*time.Minute)
	return n, topic, prod
}

func produceBench(b testing.TB, cl *kgo.Client, topic string, total int64, p *produced) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	n := total / e2eValueBytes / e2ePartitions
	for part := int32(0); part < e2ePartitions; part++ {
		for seq := p[part]; seq < p[part]+n; seq++ {
			wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: part, Value: e2eValue(part, seq), Timestamp: time.UnixMilli(e2eTsBase + seq)},
				func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					wg.Done()
				})
		}
		p[part] += n
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

// readAll consumes the topic from offset 0 to the ends in want, every
// offset below them once and in order.
func readAll(b testing.TB, n *Node, topic string, want produced) int64 {
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := int32(0); p < e2ePartitions; p++ {
		offsets[topic][p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumePartitions(offsets), kgo.FetchMaxBytes(16<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var next produced
	var bytes int64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// At or past want: a producer running beside the read (the p99
	// benchmark) appends after want, and one fetch may bring both.
	reached := func() bool {
		for p := range next {
			if next[p] < want[p] {
				return false
			}
		}
		return true
	}
	for !reached() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("catch-up read timed out at %v of %v", next, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= want[r.Partition] {
				return // appended beside the read
			}
			if r.Offset != next[r.Partition] {
				// A skip must fail the run, not speed it up: a catch-up
				// once skipped whole segments unnoticed here.
				b.Fatalf("catch-up read partition %d at offset %d, want %d (in order, none missing)", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition] = r.Offset + 1
			bytes += int64(len(r.Value))
		})
	}
	return bytes
}

func objstoreCount(b testing.TB, n *Node, op string) float64 {
	v, _ := scrapeMetrics(b, n).value("strata_objstore_requests_total", "op", op)
	return v
}

func BenchmarkTierCatchUp(b *testing.B) {
	b.Run("fs", func(b *testing.B) {
		n, topic, prod := tierBenchNode(b)
		benchTierCatchUp(b, n, topic, prod)
	})
	b.Run("minio", func(b *testing.B) {
		srv := miniotest.Start(b)
		remote := maps.Clone(minioSettings(srv, srv.Bucket))
		n, topic, prod := tierBenchNodeWith(b, b.TempDir(), remote)
		benchTierCatchUp(b, n, topic, prod)
	})
}

// benchTierCatchUp runs strata-fetch and raw-ranged-get against n's
// remote store. strata-fetch also times a raw pass before each of its
// catch-ups (outside its own timer) and reports raw-MB/s and x-raw, the
// ratio of the two rates measured side by side: on a shared machine the
// ratio holds where absolute figures swing.
func benchTierCatchUp(b *testing.B, n *Node, topic string, prod produced) {
	b.Run("strata-fetch", func(b *testing.B) {
		b.SetBytes(benchTierBytes)
		var gets float64
		st0 := n.tier.rd.Stats()
		var read, raw int64
		var strataTime, rawTime time.Duration
		cpu := tierCPUTime(b)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			rb, rt := rawCatchUp(b, n, topic, make([]byte, 256<<10))
			raw, rawTime = raw+rb, rawTime+rt
			gets0 := objstoreCount(b, n, "get")
			b.StartTimer()
			start := time.Now()
			read += readAll(b, n, topic, prod)
			strataTime += time.Since(start)
			b.StopTimer()
			gets += objstoreCount(b, n, "get") - gets0
			b.StartTimer()
		}
		b.StopTimer()
		b.ReportMetric(float64(tierCPUTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		gib := float64(read) / (1 << 30)
		b.ReportMetric(gets/gib, "GETs/GiB")
		// Chunk lookups of fetches that found the chunk cached (read-ahead
		// keeping ahead of the consumer) rather than waiting for a GET.
		st := n.tier.rd.Stats()
		if h, m := float64(st.Hits-st0.Hits), float64(st.Misses-st0.Misses); h+m > 0 {
			b.ReportMetric(h/(h+m), "hit-ratio")
		}
		rawRate := float64(raw) / rawTime.Seconds()
		b.ReportMetric(rawRate/1e6, "raw-MB/s")
		// Records' values over .log bytes: x-raw understates the reader a
		// little (batch and record headers count for raw only).
		b.ReportMetric(float64(read)/strataTime.Seconds()/rawRate, "x-raw")
	})
	b.Run("raw-ranged-get", func(b *testing.B) {
		buf := make([]byte, 256<<10)
		total, _ := rawCatchUp(b, n, topic, buf)
		b.SetBytes(total)
		cpu := tierCPUTime(b)
		b.ResetTimer()
		for range b.N {
			rawCatchUp(b, n, topic, buf)
		}
		b.StopTimer()
		b.ReportMetric(float64(tierCPUTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	})
}

// rawCatchUp reads the topic's .log objects with plain sequential ranged
// GETs of one chunk, one at a time: the floor the reader is measured
// against. It returns the bytes read and the time taken.
func rawCatchUp(b *testing.B, n *Node, topic string, buf []byte) (int64, time.Duration) {
	store := n.RemoteStore()
	ctx := context.Background()
	objs, err := store.List(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	var logs []objstore.ObjectInfo
	for _, o := range objs {
		if strings.HasPrefix(o.Key, topic+"-") && strings.HasSuffix(o.Key, "."+tiering.ExtLog) {
			logs = append(logs, o)
		}
	}
	slices.SortFunc(logs, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	chunk := n.cfg.Tiering.ChunkBytes
	var total int64
	start := time.Now()
	for _, o := range logs {
		for off := int64(0); off < o.Size; off += chunk {
			rc, err := store.Get(ctx, o.Key, off, min(chunk, o.Size-off))
			if err != nil {
				b.Fatal(err)
			}
			k, err := io.CopyBuffer(io.Discard, rc, buf)
			rc.Close()
			if err != nil {
				b.Fatal(err)
			}
			total += k
		}
	}
	return total, time.Since(start)
}

// BenchmarkTierUpload: the uploader is held back (a task interval of an
// hour) while benchTierBytes are produced and sealed, then kicked: the
// time to drain the backlog gives the upload rate, and every PUT it makes
// (segment objects and manifest rewrites) counts toward PUTs per GiB.
func BenchmarkTierUpload(b *testing.B) {
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		n := startNode(b, dir, tierSettings(map[string]string{
			"remote.storage.fs.path":              filepath.Join(dir, "objects"),
			"remote.log.manager.task.interval.ms": "3600000",
		}))
		const topic = "up"
		createTopic(b, newAdmin(b, n), topic, e2ePartitions, tieredTopicConfigs())
		cl := newClient(b, n, kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(20000), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var prod produced
		produceBench(b, cl, topic, benchTierBytes, &prod)
		rollAll(b, n, topic)
		puts := objstoreCount(b, n, "put")
		b.StartTimer()
		start := time.Now()
		n.tier.up.Kick()
		waitUploaded(b, n, topic, 3*time.Minute)
		el := time.Since(start)
		b.StopTimer()
		st, _ := n.TierStatus(topic)
		var up int64
		segs := 0
		for _, s := range st {
			up += s.RemoteBytes
			segs += s.RemoteSegments
		}
		b.ReportMetric((objstoreCount(b, n, "put")-puts)/(float64(up)/(1<<30)), "PUTs/GiB")
		b.ReportMetric((objstoreCount(b, n, "put")-puts)/float64(segs), "PUTs/segment")
		b.ReportMetric(float64(up)/1e6/el.Seconds(), "upload-MB/s")
		n.Close()
	}
}

func BenchmarkTierProducerP99(b *testing.B) {
	for _, withReader := range []bool{false, true} {
		name := "alone"
		if withReader {
			name = "with-catchup-reader"
		}
		b.Run(name, func(b *testing.B) {
			n, topic, prod := tierBenchNode(b)
			cl := newClient(b, n, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			var p99s []float64
			for range b.N {
				stop := make(chan struct{})
				var wg sync.WaitGroup
				if withReader {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							select {
							case <-stop:
								return
							default:
							}
							readAll(b, n, topic, prod)
						}
					}()
				}
				// 1000 records/s of 1000 bytes for 3 s, open loop: latency
				// counts from the intended send time.
				const rate, dur = 1000, 3 * time.Second
				lat := make([]time.Duration, 0, rate*3)
				var mu sync.Mutex
				var pw sync.WaitGroup
				start := time.Now()
				for i := 0; i < int(rate*dur/time.Second); i++ {
					intended := start.Add(time.Duration(i) * time.Second / rate)
					time.Sleep(time.Until(intended))
					pw.Add(1)
					cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: int32(i % e2ePartitions), Value: e2eValue(0, 0)},
						func(_ *kgo.Record, err error) {
							mu.Lock()
							lat = append(lat, time.Since(intended))
							mu.Unlock()
							pw.Done()
						})
				}
				pw.Wait()
				close(stop)
				wg.Wait()
				slices.Sort(lat)
				p99s = append(p99s, float64(lat[len(lat)*99/100].Microseconds())/1000)
			}
			slices.Sort(p99s)
			b.ReportMetric(p99s[len(p99s)/2], "p99-ms")
		})
	}
}
