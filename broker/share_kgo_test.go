package broker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/internal/testutil"
)

// TestShareGroupFranzGoOneNode runs franz-go's own share group tests
// (TestShareGroup, TestShareGroupETL, TestShareGroupAckOnClose,
// TestShareGroupOffsetsAdmin, TestConsumeRegexShareSkipsInternal) against
// one in-process node with share groups on. franz-go runs them only when
// ShareFetch (78) and ShareAcknowledge (79) v2 are advertised, so this
// test skips while the node does not advertise them (it asks the node,
// never a constant): membership (76, 77) alone cannot consume. As
// TestGroup848FranzGoOneNode, franz-go's source comes from the module
// proxy; it runs when CI=true or STRATA_TEST_KGO=1.
func TestShareGroupFranzGoOneNode(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KGO") != "1" {
		t.Skip("set STRATA_TEST_KGO=1 (or CI=true) to run franz-go's share group tests against a node")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	settings := withSettings(map[string]string{
		"group.coordinator.rebalance.protocols": "classic,consumer,share",
		"group.share.heartbeat.interval.ms":     "1000",
		"group.share.min.heartbeat.interval.ms": "1000",
	})
	n := startNode(t, t.TempDir(), settings)
	vresp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(testCtx(t), newClient(t, n))
	if err != nil {
		t.Fatal(err)
	}
	advertised := map[int16]int16{}
	for _, k := range vresp.ApiKeys {
		advertised[k.ApiKey] = k.MaxVersion
	}
	// Every share API is served with share in the protocols: one that is
	// not advertised (or below franz-go's v2 for 78/79) fails here rather
	// than letting franz-go's tests skip.
	for key, min := range map[int16]int16{shareGroupHeartbeatKey: 1, shareGroupDescribeKey: 0, 78: 2, 79: 2, 90: 0, 91: 0, 92: 0} {
		if v, ok := advertised[key]; !ok || v < min {
			t.Fatalf("key %d not advertised at v%d+ with share groups on (max %d)", key, min, v)
		}
	}
	tests := []string{"TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin", "TestConsumeRegexShareSkipsInternal"}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	src := kgoSource(t, ctx)
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "-timeout", "6m",
		"-run", "^("+strings.Join(tests, "|")+")$", ".")
	cmd.Dir = filepath.Join(src, "pkg", "kgo")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "KGO_SEEDS="+n.Addr(), "KGO_TEST_RF=1",
		"KGO_TEST_RECORDS=20000", "KGO_LOG_LEVEL=none")
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	re := regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): (\S+) `)
	var pass, skip []string
	for _, m := range re.FindAllSubmatch(out, -1) {
		switch string(m[1]) {
		case "PASS":
			pass = append(pass, string(m[2]))
		case "SKIP":
			skip = append(skip, string(m[2]))
		}
	}
	t.Logf("franz-go share tests: passed %v, skipped %v, in %v", pass, skip, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("franz-go share tests: %v\n%s", err, out[max(0, len(out)-16<<10):])
	}
	for _, want := range tests {
		if !slices.Contains(pass, want) {
			t.Errorf("%s did not pass (skipped: %v)", want, skip)
		}
	}
}

// advertisesKey reports whether n's ApiVersions lists key.
func advertisesKey(t testing.TB, n *Node, key int16) bool {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	resp := dialRaw(t, n).roundTrip(req).(*kmsg.ApiVersionsResponse)
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return true
		}
	}
	return false
}

// needShareMembership fails unless the share-group membership API
// (ShareGroupHeartbeat, key 76) is served: kgo's share consumer needs it.
func needShareMembership(t testing.TB, n *Node) {
	t.Helper()
	if !advertisesKey(t, n, 76) {
		t.Fatal("ShareGroupHeartbeat (76) not advertised with share groups on")
	}
}

// setGroupConfigs sets group configs (GROUP resource, type 32) as kgo's
// share tests do.
func setGroupConfigs(t testing.TB, cl *kgo.Client, group string, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("set group configs of %s: %v", group, err)
		}
	}
}

// TestShareGroupEightConsumers: 8 kgo share consumers on a 1-partition
// topic process every record, the load spreads over all of them, and one
// that hangs mid-batch (it stops polling and never acknowledges, its
// connection open) has its records redelivered to the others once their
// lock expires.
func TestShareGroupEightConsumers(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{
		"group.coordinator.rebalance.protocols":   "classic,consumer,share",
		"group.share.min.record.lock.duration.ms": "1000",
		"group.share.record.lock.duration.ms":     "2000",
	})
	needShareMembership(t, n)
	createTopic(t, newAdmin(t, n), "q8", 1, nil)
	admin := newClient(t, n, kgo.DefaultProduceTopic("q8"))
	setGroupConfigs(t, admin, "g8", "share.auto.offset.reset", "earliest")

	// In batches of 20: a share fetch acquires whole log batches
	// (batch-optimized mode), so one batch of everything would go to one
	// consumer.
	const total, consumers, batch = 3000, 8, 20
	for i := 0; i < total; i += batch {
		var rs []*kgo.Record
		for j := i; j < i+batch; j++ {
			rs = append(rs, &kgo.Record{Value: []byte(strconv.Itoa(j))})
		}
		if err := admin.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*testWait)
	defer cancel()
	var mu sync.Mutex
	accepted := map[int64]int{} // offset -> the consumer that accepted it
	perConsumer := make([]int, consumers)
	var hungHeld map[int64]bool     // what the hung consumer held when it stopped
	redelivered := map[int64]bool{} // offsets accepted with delivery count > 1
	hung := make(chan struct{})     // closed once consumer 0 holds its batch
	var wg sync.WaitGroup
	for c := range consumers {
		if c == 1 {
			// The others start once consumer 0 hangs holding records.
			select {
			case <-hung:
			case <-ctx.Done():
				t.Fatal("the consumer meant to hang got no records")
			}
		}
		cl := newClient(t, n, kgo.ShareGroup("g8"), kgo.ConsumeTopics("q8"), kgo.ShareMaxRecords(25), kgo.FetchMaxWait(500*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				recs := fs.Records()
				if len(recs) == 0 {
					continue
				}
				if c == 0 {
					// The hung consumer: takes one batch and neither
					// acknowledges nor polls again.
					mu.Lock()
					hungHeld = map[int64]bool{}
					for _, r := range recs {
						hungHeld[r.Offset] = true
					}
					mu.Unlock()
					close(hung)
					<-ctx.Done()
					return
				}
				mu.Lock()
				for _, r := range recs {
					if _, dup := accepted[r.Offset]; !dup {
						accepted[r.Offset] = c
						perConsumer[c]++
					}
					if r.DeliveryCount() > 1 {
						redelivered[r.Offset] = true
					}
					r.Ack(kgo.AckAccept)
				}
				done := len(accepted) == total
				mu.Unlock()
				if done {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if hungHeld == nil {
		t.Fatal("the consumer meant to hang never got records")
	}
	if len(accepted) != total {
		t.Fatalf("%d of %d records processed", len(accepted), total)
	}
	for c := 1; c < consumers; c++ {
		if perConsumer[c] == 0 {
			t.Errorf("consumer %d processed nothing: %v", c, perConsumer)
		}
	}
	for o := range hungHeld {
		if !redelivered[o] {
			t.Errorf("offset %d held by the hung consumer was not redelivered (delivery count > 1) to another", o)
		}
	}
	t.Logf("per consumer %v; hung consumer held %d records, all redelivered", perConsumer, len(hungHeld))
}

// BenchmarkShareGroupAck measures records acknowledged per second on a
// 1-partition topic: a share group of 1, 4 and 16 kgo consumers
// (accepting each record), against a classic group's single consumer
// committing after each poll, on the same node in the same run. Both
// sides get the same work on the same clock: the b.N records are
// produced first (untimed), and the clock runs from the creation of a
// new group's consumers (kgo joins and fetches from then on; joining is
// timed on both sides, a few round trips with
// group.initial.rebalance.delay.ms at 0) until the last record's
// acknowledgement is answered (share: FlushAcks) or its offset committed
// (classic). Neither side's first fetch is left out of the time (the
// classic figure used to start at its first poll's records: the whole
// topic, fetched untimed, so it timed about one commit).
func BenchmarkShareGroupAck(b *testing.B) {
	n := startNode(b, b.TempDir(), map[string]string{
		"group.coordinator.rebalance.protocols": "classic,consumer,share",
		"group.initial.rebalance.delay.ms":      "0",
	})
	needShareMembership(b, n)
	admin := newClient(b, n)
	produce := func(topic string, count int) {
		createTopic(b, kadm.NewClient(admin), topic, 1, nil)
		// Log batches of 100 records: a share fetch acquires whole
		// batches, so the batch size bounds how finely the records spread.
		const chunk = 100
		for i := 0; i < count; i += chunk {
			var rs []*kgo.Record
			for j := i; j < min(i+chunk, count); j++ {
				rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(j))})
			}
			if err := admin.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Warm up, untimed: the first share group creates __share_group_state
	// and the first group of either kind __consumer_offsets (a quarter of
	// a second here, which the first sub-benchmark would otherwise time).
	produce("sbwarm", 1)
	setGroupConfigs(b, admin, "sgwarm", "share.auto.offset.reset", "earliest")
	wctx, wcancel := context.WithTimeout(context.Background(), testWait)
	defer wcancel()
	for _, opt := range []kgo.Opt{kgo.ShareGroup("sgwarm"), kgo.ConsumerGroup("cgwarm")} {
		cl := newClient(b, n, opt, kgo.ConsumeTopics("sbwarm"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		for got := 0; got == 0 && wctx.Err() == nil; {
			fs := cl.PollFetches(wctx)
			got = len(fs.Records())
			for _, r := range fs.Records() {
				r.Ack(kgo.AckAccept)
			}
		}
		if wctx.Err() != nil {
			b.Fatal("warm-up: no record consumed")
		}
		cl.Close()
	}
	run := 0
	for _, consumers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("share/consumers=%d", consumers), func(b *testing.B) {
			run++
			topic, group := fmt.Sprintf("sb%d", run), fmt.Sprintf("sg%d", run)
			produce(topic, b.N)
			setGroupConfigs(b, admin, group, "share.auto.offset.reset", "earliest")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var acked atomic.Int64
			var seen sync.Map
			b.ResetTimer()
			start := time.Now()
			// A kgo client joins its group and fetches from its
			// creation on: the clients are made on the clock.
			cls := make([]*kgo.Client, consumers)
			for i := range cls {
				cls[i] = newClient(b, n, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
			}
			var wg sync.WaitGroup
			for _, cl := range cls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil && acked.Load() < int64(b.N) {
						fs := cl.PollFetches(ctx)
						for _, r := range fs.Records() {
							r.Ack(kgo.AckAccept)
							if _, dup := seen.LoadOrStore(r.Offset, true); !dup && acked.Add(1) == int64(b.N) {
								cancel()
							}
						}
					}
					// Until every acknowledgement is answered.
					fctx, fcancel := context.WithTimeout(context.Background(), testWait)
					if err := cl.FlushAcks(fctx); err != nil {
						b.Errorf("flush acks: %v", err)
					}
					fcancel()
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			if acked.Load() < int64(b.N) {
				b.Fatalf("%d of %d acknowledged", acked.Load(), b.N)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
		})
	}
	b.Run("classic/consumers=1", func(b *testing.B) {
		run++
		topic, group := fmt.Sprintf("sb%d", run), fmt.Sprintf("cg%d", run)
		produce(topic, b.N)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b.ResetTimer()
		start := time.Now()
		// A kgo client joins its group and fetches from its creation
		// on: the client is made on the clock.
		cl := newClient(b, n, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		got := 0
		for got < b.N && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			got += len(fs.Records())
			if err := cl.CommitRecords(ctx, fs.Records()...); err != nil {
				b.Fatal(err)
			}
		}
		el := time.Since(start)
		b.StopTimer()
		if got < b.N {
			b.Fatalf("%d of %d committed", got, b.N)
		}
		b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
	})
}

// TestShareGroupTwoConsumersNoAckStalls: two kgo share consumers of one
// partition acknowledge every record without a ShareFetch waiting out
// MaxWait while acknowledgements queue behind it (kgo sends one request
// at a time to a broker: before the fix every round, and the last flush,
// waited for MaxWait).
func TestShareGroupTwoConsumersNoAckStalls(t *testing.T) {
	// A window of 200 records, fetches of 100: each consumer holding the
	// batch it processes and the one it prefetched fills it.
	n := startNode(t, t.TempDir(), map[string]string{
		"group.coordinator.rebalance.protocols":  "classic,consumer,share",
		"group.share.partition.max.record.locks": "200",
	})
	needShareMembership(t, n)
	createTopic(t, newAdmin(t, n), "q2", 1, nil)
	admin := newClient(t, n, kgo.DefaultProduceTopic("q2"))
	setGroupConfigs(t, admin, "g2", "share.auto.offset.reset", "earliest")
	const total, batch = 2000, 100
	for i := 0; i < total; i += batch {
		var rs []*kgo.Record
		for j := i; j < i+batch; j++ {
			rs = append(rs, &kgo.Record{Value: []byte(strconv.Itoa(j))})
		}
		if err := admin.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*testWait)
	defer cancel()
	var seen sync.Map
	var acked atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		cl := newClient(t, n, kgo.ShareGroup("g2"), kgo.ConsumeTopics("q2"), kgo.ShareMaxRecords(100), kgo.FetchMaxWait(2*time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && acked.Load() < total {
				for _, r := range cl.PollFetches(ctx).Records() {
					r.Ack(kgo.AckAccept)
					if _, dup := seen.LoadOrStore(r.Offset, true); !dup && acked.Add(1) == total {
						cancel()
					}
				}
			}
			fctx, fcancel := context.WithTimeout(context.Background(), testWait)
			defer fcancel()
			if err := cl.FlushAcks(fctx); err != nil {
				t.Errorf("flush acks: %v", err)
			}
		}()
	}
	wg.Wait()
	if acked.Load() != total {
		t.Fatalf("%d of %d records acknowledged", acked.Load(), total)
	}
	// Every accept durable: the share-partition start offset is past them.
	key := share.Key{Group: "g2", TopicID: topicID(t, n, "q2"), Partition: 0}
	testutil.Eventually(t, testWait, func() bool {
		st, err := n.sharePersister.Read(context.Background(), key, -1)
		return err == nil && st.StartOffset == total
	}, "share-partition start offset reaches %d", total)
	if stalls := counterValue(t, n.shareLeader.m.ackStalls); stalls != 0 {
		t.Fatalf("%v ShareFetches waited out MaxWait with acknowledgements queued behind them (held early: %v)", stalls, counterValue(t, n.shareLeader.m.heldEarly))
	}
}
