package broker

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// TestProduceParallelOrder: many idempotent producers write to many
// partitions at once, in flushes of random sizes, so every request
// carries batches for several partitions that the broker appends in
// parallel (appendParallel). Read back, every partition has dense
// offsets, and each producer's records in it are there exactly once and
// in the order produced.
func TestProduceParallelOrder(t *testing.T) {
	const (
		producers = 6
		parts     = 12
		perProd   = 1500
	)
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "par", parts, nil)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errc := make(chan error, producers)
	for p := range producers {
		cl := newClient(t, n, kgo.DefaultProduceTopic("par"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			for seq := 0; seq < perProd; {
				burst := 1 + rng.IntN(200) // random batch sizes per partition
				for i := 0; i < burst && seq < perProd; i, seq = i+1, seq+1 {
					r := &kgo.Record{
						Partition: int32(rng.IntN(parts)),
						Value:     fmt.Appendf(nil, "%d-%d-%s", p, seq, strings.Repeat("x", rng.IntN(300))),
					}
					cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
						if err != nil {
							select {
							case errc <- err:
							default:
							}
						}
					})
				}
				if rng.IntN(3) == 0 {
					if err := cl.Flush(ctx); err != nil {
						errc <- err
						return
					}
				}
			}
			if err := cl.Flush(ctx); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	checkProducedOrder(t, n, "par", parts, producers, perProd)
}

// checkProducedOrder reads every partition of topic from its start and
// checks dense offsets and, per producer ("<producer>-<seq>-..." values),
// strictly increasing sequences with all perProd of them present once.
func checkProducedOrder(t *testing.T, n *Node, topic string, parts, producers, perProd int) {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	var total int64
	for p := range parts {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
		total += n.partition(topic, int32(p)).log.LogEndOffset()
	}
	if total != int64(producers*perProd) {
		t.Fatalf("%d records in the logs, want %d", total, producers*perProd)
	}
	cl := newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	ctx := testCtx(t)
	next := make([]int64, parts)            // the next offset expected per partition
	last := make([][]int, parts)            // per partition, per producer: the last sequence seen
	seen := make([]map[int]bool, producers) // per producer: sequences seen anywhere
	for p := range parts {
		last[p] = make([]int, producers)
		for i := range last[p] {
			last[p][i] = -1
		}
	}
	for i := range seen {
		seen[i] = map[int]bool{}
	}
	var got int64
	for got < total {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", got, total, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d (dense)", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			f := strings.SplitN(string(r.Value), "-", 3)
			prod, _ := strconv.Atoi(f[0])
			seq, _ := strconv.Atoi(f[1])
			if seq <= last[r.Partition][prod] {
				t.Fatalf("partition %d offset %d: producer %d sequence %d after %d", r.Partition, r.Offset, prod, seq, last[r.Partition][prod])
			}
			last[r.Partition][prod] = seq
			if seen[prod][seq] {
				t.Fatalf("producer %d record %d twice", prod, seq)
			}
			seen[prod][seq] = true
		})
	}
	for p, s := range seen {
		if len(s) != perProd {
			t.Fatalf("producer %d: %d records read, want %d", p, len(s), perProd)
		}
	}
}

// TestAppendParallelSamePartition: a request naming one partition twice
// appends its two batches in request order, on one goroutine, while other
// partitions run in parallel; every job runs once.
func TestAppendParallelSamePartition(t *testing.T) {
	n := &Node{}
	var jobs []produceJob
	for i := range 40 {
		jobs = append(jobs, produceJob{topic: "t", tp: kmsg.ProduceRequestTopicPartition{Partition: int32(i % 4)}, at: [2]int{0, i}})
	}
	var mu sync.Mutex
	order := map[int32][]int{}
	busy := map[int32]bool{}
	ran := 0
	n.appendParallel(jobs, func(j *produceJob) {
		mu.Lock()
		if busy[j.tp.Partition] {
			t.Errorf("partition %d: two jobs at once", j.tp.Partition)
		}
		busy[j.tp.Partition] = true
		ran++
		order[j.tp.Partition] = append(order[j.tp.Partition], j.at[1])
		mu.Unlock()
		runtime.Gosched()
		mu.Lock()
		busy[j.tp.Partition] = false
		mu.Unlock()
	})
	if ran != len(jobs) {
		t.Fatalf("%d jobs ran, want %d", ran, len(jobs))
	}
	for p, o := range order {
		for k := 1; k < len(o); k++ {
			if o[k] < o[k-1] {
				t.Fatalf("partition %d: jobs in order %v", p, o)
			}
		}
	}
	// A panic in a job is raised on the caller's goroutine.
	defer func() {
		if recover() == nil {
			t.Fatal("panic in a job not re-raised")
		}
	}()
	n.appendParallel(jobs, func(j *produceJob) {
		if j.at[1] == 7 {
			panic("boom")
		}
	})
}

// TestProduceFrameRecycled: a connection's 1 MiB Produce requests are read
// into recycled buffers, so the node allocates far less than a request's
// size per request (it allocated 2 MiB per request before: a 1 MiB first
// chunk grown to the frame's size).
func TestProduceFrameRecycled(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector drops sync.Pool puts")
	}
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "rec", 6, nil)
	frame := produceFrame("rec", 6, 1<<20, 1)
	c := dialRaw(t, n)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	roundTrip := func() {
		if _, err := c.nc.Write(frame); err != nil {
			t.Fatal(err)
		}
		_, body, err := c.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range decodeResponse(t, req, body).(*kmsg.ProduceResponse).Topics[0].Partitions {
			if tp.ErrorCode != 0 {
				t.Fatalf("partition %d: error %d", tp.Partition, tp.ErrorCode)
			}
		}
	}
	for range 5 { // warm up: pools, segment files, indexes
		roundTrip()
	}
	const reqs = 20
	before := heapAllocated()
	for range reqs {
		roundTrip()
	}
	per := (heapAllocated() - before) / reqs
	t.Logf("%d bytes allocated per %d-byte request", per, len(frame))
	if per > int64(len(frame))/4 {
		t.Fatalf("%d bytes allocated per %d-byte produce request, want < a quarter of it", per, len(frame))
	}
}

// TestProduceCrashBetweenPartitionsLeavesPrefix: a request for four
// partitions whose append to one of them is torn (errfs: half the bytes
// written, then EIO) while the others append in parallel, then a power
// loss (MemFS.CrashClone, keeping none, half or all of the unsynced
// writes): after restart every partition holds a prefix of what was sent
// to it, whole batches with dense offsets, and the torn partition's batch
// is not there.
func TestProduceCrashBetweenPartitionsLeavesPrefix(t *testing.T) {
	const parts, batchRecs = 4, 10
	for _, keep := range []int{0, 50, 100} {
		t.Run(fmt.Sprintf("keep=%d", keep), func(t *testing.T) {
			mem := vfs.NewMem()
			var torn atomic.Bool
			inj := errfs.InjectorFunc(func(c errfs.Call) *errfs.Fault {
				if torn.Load() && c.Op == errfs.OpWriteAt && strings.Contains(c.Path, "crash-2/") && strings.HasSuffix(c.Path, ".log") {
					torn.Store(false)
					return &errfs.Fault{Short: -1, ShortSet: true, Err: syscall.EIO}
				}
				return nil
			})
			dir := t.TempDir() // the logs on mem, the rest (metadata, caches) on the OS
			n := startNodeOn(t, errfs.Wrap(mem, inj), dir, nil)
			createTopic(t, newAdmin(t, n), "crash", parts, nil)
			c := dialRaw(t, n)
			send := func(round int) *kmsg.ProduceResponse {
				req := kmsg.NewPtrProduceRequest()
				req.SetVersion(9)
				req.Acks, req.TimeoutMillis = 1, 5000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "crash"
				for p := range parts {
					tp := kmsg.NewProduceRequestTopicPartition()
					tp.Partition = int32(p)
					tp.Records = recordBatch(int64(round), vals(fmt.Sprintf("r%d-p%d", round, p), batchRecs)...)
					rt.Partitions = append(rt.Partitions, tp)
				}
				req.Topics = append(req.Topics, rt)
				return c.roundTrip(req).(*kmsg.ProduceResponse)
			}
			for round := range 3 {
				for _, tp := range send(round).Topics[0].Partitions {
					if tp.ErrorCode != 0 {
						t.Fatalf("round %d partition %d: error %d", round, tp.Partition, tp.ErrorCode)
					}
				}
			}
			torn.Store(true)
			resp := send(3)
			if torn.Load() {
				t.Fatal("the torn write never happened")
			}
			for _, tp := range resp.Topics[0].Partitions {
				if (tp.Partition == 2) != (tp.ErrorCode != 0) {
					t.Fatalf("torn round: partition %d error %d", tp.Partition, tp.ErrorCode)
				}
			}
			clone := mem.CrashClone(keep, rand.New(rand.NewPCG(uint64(keep), 1)))
			n.Close()
			n = startNodeOn(t, clone, dir, nil)
			cl := newClient(t, n)
			for p := range parts {
				var l *storage.Log
				testutil.Eventually(t, testWait, func() bool {
					pp := n.partition("crash", int32(p))
					if pp != nil {
						l = pp.log
					}
					return pp != nil
				}, "partition open")
				leo := l.LogEndOffset()
				maxRounds := int64(4)
				if p == 2 {
					maxRounds = 3
				}
				if leo%batchRecs != 0 || leo > maxRounds*batchRecs || (keep == 100 && leo != maxRounds*batchRecs) {
					t.Fatalf("partition %d ends at %d: not a prefix of whole batches (keeping %d%% of unsynced writes)", p, leo, keep)
				}
				if leo == 0 {
					continue
				}
				cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{"crash": {int32(p): kgo.NewOffset().AtStart()}})
				var got int64
				ctx := testCtx(t)
				for got < leo {
					fs := cl.PollFetches(ctx)
					if ctx.Err() != nil {
						t.Fatalf("partition %d: read %d of %d", p, got, leo)
					}
					fs.EachRecord(func(r *kgo.Record) {
						want := fmt.Sprintf("r%d-p%d-%d", got/batchRecs, p, got%batchRecs)
						if r.Partition != int32(p) || r.Offset != got || string(r.Value) != want {
							t.Fatalf("partition %d offset %d: %q at %d, want %q", r.Partition, got, r.Value, r.Offset, want)
						}
						got++
					})
				}
				cl.RemoveConsumePartitions(map[string][]int32{"crash": {int32(p)}})
			}
		})
	}
}
