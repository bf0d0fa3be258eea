package broker

import (
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setQuota sets one quota key of one entity ("user=alice,client-id=x"
// form, <default> for a null name) through AlterClientQuotas.
func setQuota(t *testing.T, adm *kadm.Client, entity, key string, value float64) {
	t.Helper()
	var e kadm.ClientQuotaEntity
	for _, p := range strings.Split(entity, ",") {
		typ, name, _ := strings.Cut(p, "=")
		c := kadm.ClientQuotaEntityComponent{Type: typ}
		if name != "<default>" {
			c.Name = &name
		}
		e = append(e, c)
	}
	res, err := adm.AlterClientQuotas(testCtx(t), []kadm.AlterClientQuotaEntry{{Entity: e, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: value}}}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("set quota %s %s=%v: %v %+v", entity, key, value, err, res)
	}
}

func rawProduce(topic string, value []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordBatch(time.Now().UnixMilli(), string(value))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestQuotaThrottleMutesConnection (KIP-219): a produce over its client's
// producer_byte_rate is answered at once with throttle_time_ms, and the
// broker runs nothing more from that connection (here an ApiVersions sent
// right behind it, as a client ignoring the throttle would) until the
// throttle has passed. The throttle is capped at the sampled span
// (2 windows of 1 s). A client without a quota on the same node is not
// throttled.
func TestQuotaThrottleMutesConnection(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"quota.window.num": "2"})
	adm := newAdmin(t, n)
	createTopic(t, adm, "q", 1, nil)
	setQuota(t, adm, "client-id=test", "producer_byte_rate", 10_000) // the raw client's id

	c := dialRaw(t, n)
	value := make([]byte, 100_000)
	c.send(rawProduce("q", value))
	c.send(kmsg.NewPtrApiVersionsRequest())
	start := time.Now()
	_, body, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	pr := decodeResponse(t, rawProduce("q", nil), body).(*kmsg.ProduceResponse)
	answered := time.Since(start)
	if pr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: error %d", pr.Topics[0].Partitions[0].ErrorCode)
	}
	// 100 kB over a 1 s padded window against 10 kB/s: 9 s, capped at 2 s.
	if pr.ThrottleMillis != 2000 {
		t.Fatalf("throttle_time_ms %d, want the 2000 ms cap", pr.ThrottleMillis)
	}
	if answered > time.Second {
		t.Errorf("throttled produce answered after %v: it must answer at once", answered)
	}
	if _, _, err := c.readFrame(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 1900*time.Millisecond {
		t.Errorf("request behind a 2 s throttle answered after %v: the connection was not muted", el)
	}
	if got := counterValue(t, n.metrics.quotaThrottled.WithLabelValues("produce")); got != 1 {
		t.Errorf("strata_broker_quota_throttled_responses_total{type=produce} %v, want 1", got)
	}

	// Another client id: no quota matches, no throttle, no rate kept.
	cl := newClient(t, n, kgo.ClientID("free"))
	for range 3 {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "q", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.quotas.Sensors(); got != 1 {
		t.Errorf("%d rates kept, want only the throttled client's", got)
	}
}

// TestQuotaProduceByteRateHeld is the test: a producer with a
// 1 MiB/s producer_byte_rate (client-id), sending as fast as it may, is
// held within 10 % of it over 20 s from its first record and sees
// throttle_time_ms > 0; a producer without a quota, offering 2 MiB/s at
// the same time, gets its whole rate and is never throttled. Kafka's
// sampled rate is used with 5 windows of 1 s: with the default 11 a
// greedy client's first burst is 10 s of quota, so its rate oscillates
// with an 11 s period and any 20 s measure reads 0.6 or 1.1 of the quota
// (see TestManagerDefaultWindowsBurst).
func TestQuotaProduceByteRateHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("20 s")
	}
	const quotaBytes, dur, recBytes = 1 << 20, 20 * time.Second, 1000
	n := startNode(t, t.TempDir(), map[string]string{"quota.window.num": "5"})
	adm := newAdmin(t, n)
	createTopic(t, adm, "slow", 1, nil)
	createTopic(t, adm, "free", 1, nil)
	setQuota(t, adm, "client-id=slow", "producer_byte_rate", quotaBytes)

	type counts struct {
		acked     atomic.Int64
		throttles atomic.Int64
	}
	var slow, free counts
	hook := func(c *counts) kgo.Opt { return kgo.WithHooks(throttleHook{&c.throttles}) }
	// Uncompressed: the quota counts request bytes, the test counts
	// record values.
	none := kgo.ProducerBatchCompression(kgo.NoCompression())
	slowCl := newClient(t, n, kgo.ClientID("slow"), hook(&slow), none, kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(256))
	freeCl := newClient(t, n, kgo.ClientID("free"), hook(&free), none, kgo.ProducerLinger(0))

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	value := make([]byte, recBytes)
	rand.Read(value)
	var wg sync.WaitGroup
	wg.Add(2)
	start := time.Now()
	go func() { // greedy: as fast as the buffer allows
		defer wg.Done()
		for ctx.Err() == nil {
			slowCl.Produce(ctx, &kgo.Record{Topic: "slow", Value: value}, func(r *kgo.Record, err error) {
				if err == nil && time.Since(start) <= dur {
					slow.acked.Add(int64(len(r.Value)))
				}
			})
		}
	}()
	go func() { // paced: 2 MiB/s, caught up every 10 ms (ticks a busy machine drops are made up)
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		sent := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due := int(time.Since(start).Seconds() * (2 << 20) / recBytes)
			for ; sent < due; sent++ {
				freeCl.Produce(ctx, &kgo.Record{Topic: "free", Value: value}, func(r *kgo.Record, err error) {
					if err == nil && time.Since(start) <= dur {
						free.acked.Add(int64(len(r.Value)))
					}
				})
			}
		}
	}()
	wg.Wait()
	slowRate := float64(slow.acked.Load()) / dur.Seconds()
	freeRate := float64(free.acked.Load()) / dur.Seconds()
	t.Logf("quota'd producer: %.0f B/s (%.3f of the quota), %d throttled responses; free producer: %.0f B/s (%.3f of its offer), %d throttled",
		slowRate, slowRate/quotaBytes, slow.throttles.Load(), freeRate, freeRate/(2<<20), free.throttles.Load())
	if slowRate < 0.9*quotaBytes || slowRate > 1.1*quotaBytes {
		t.Errorf("quota'd producer held at %.0f B/s, want within 10%% of %d", slowRate, quotaBytes)
	}
	if slow.throttles.Load() == 0 {
		t.Error("quota'd producer never saw throttle_time_ms > 0")
	}
	if freeRate < 0.9*(2<<20) || free.throttles.Load() != 0 {
		t.Errorf("producer without a quota: %.0f B/s of 2 MiB/s offered, %d throttles", freeRate, free.throttles.Load())
	}
}

// throttleHook counts the throttles a client's brokers answer.
type throttleHook struct{ n *atomic.Int64 }

func (h throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// TestQuotaRequestPercentage: request_percentage counts handler time: a
// client sending Metadata requests back to back against a 1 % quota (10 ms
// of handler time a second) is soon answered with throttle_time_ms, at
// most one window (1 s), and muted; its requests per second fall far below
// those of a client without the quota.
func TestQuotaRequestPercentage(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"quota.window.num": "2"})
	adm := newAdmin(t, n)
	createTopic(t, adm, "r", 4, nil)
	setQuota(t, adm, "client-id=test", "request_percentage", 1)

	run := func(c *rawConn, d time.Duration) (requests int, maxThrottle int32) {
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(9)
			resp := c.roundTrip(req).(*kmsg.MetadataResponse)
			requests++
			maxThrottle = max(maxThrottle, resp.ThrottleMillis)
		}
		return requests, maxThrottle
	}
	c := dialRaw(t, n)
	throttledReqs, maxThrottle := run(c, 2*time.Second)
	if maxThrottle <= 0 || maxThrottle > 1000 {
		t.Fatalf("largest throttle_time_ms %d after %d requests, want in (0, 1000]", maxThrottle, throttledReqs)
	}
	if got := counterValue(t, n.metrics.quotaThrottled.WithLabelValues("request")); got == 0 {
		t.Error("no throttle counted for type=request")
	}
	// The same requests under another client id: no quota.
	free := dialRawAs(t, n, "free")
	freeReqs, freeThrottle := run(free, 2*time.Second)
	t.Logf("1%% request quota: %d requests in 2 s (largest throttle %d ms); without: %d (throttle %d)", throttledReqs, maxThrottle, freeReqs, freeThrottle)
	if freeThrottle != 0 || freeReqs < 3*throttledReqs {
		t.Errorf("client without the quota: %d requests (throttle %d) against %d with it", freeReqs, freeThrottle, throttledReqs)
	}
}

// dialRawAs is dialRaw with another client id in the request header.
func dialRawAs(t *testing.T, n *Node, clientID string) *rawConn {
	c := dialRaw(t, n)
	c.clientID = clientID
	return c
}

// TestQuotaFetchByteRateHeld: a consumer with a 1 MiB/s consumer_byte_rate
// (user default, client-id) reading a backlog is held within 10 % of it
// over 10 s and sees throttle_time_ms > 0; 5 windows of 1 s. A throttled
// fetch answers empty and its bytes do not count, as in Kafka, so the
// consumer falls short of its quota by about one fetch over the window:
// fetches of 128 KiB a partition keep that small.
func TestQuotaFetchByteRateHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s")
	}
	const quotaBytes, dur = 1 << 20, 10 * time.Second
	n := startNode(t, t.TempDir(), map[string]string{"quota.window.num": "5"})
	adm := newAdmin(t, n)
	createTopic(t, adm, "backlog", 1, nil)
	setQuota(t, adm, "user=<default>,client-id=slowc", "consumer_byte_rate", quotaBytes)

	// A backlog of 16 MiB of incompressible records.
	p := newClient(t, n, kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, 16<<10)
	for range 1024 {
		rand.Read(value)
		p.Produce(testCtx(t), &kgo.Record{Topic: "backlog", Value: append([]byte(nil), value...)}, nil)
	}
	if err := p.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	var throttles atomic.Int64
	c := newClient(t, n, kgo.ClientID("slowc"), kgo.WithHooks(throttleHook{&throttles}),
		kgo.ConsumeTopics("backlog"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(128<<10))
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var got int64
	for ctx.Err() == nil {
		fs := c.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got += int64(len(r.Value)) })
	}
	rate := float64(got) / dur.Seconds()
	t.Logf("consumer held at %.0f B/s (%.3f of the quota), %d throttled responses", rate, rate/quotaBytes, throttles.Load())
	if rate < 0.9*quotaBytes || rate > 1.1*quotaBytes {
		t.Errorf("consumer held at %.0f B/s, want within 10%% of %d", rate, quotaBytes)
	}
	if throttles.Load() == 0 {
		t.Error("consumer never saw throttle_time_ms > 0")
	}
	if got := counterValue(t, n.metrics.quotaThrottled.WithLabelValues("fetch")); got == 0 {
		t.Error("no throttle counted for type=fetch")
	}
}

func rawCreateTopic(version int16, name string, partitions int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(version)
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	return req
}

// TestQuotaControllerMutationRate (KIP-599): 1 partition/s over 2 windows
// is a bucket of 2 tokens. A CreateTopics of 5 partitions on the full
// bucket passes (taking it to -3); then, strict (CreateTopics v6+,
// CreatePartitions v3+, DeleteTopics v5+), mutations are
// THROTTLING_QUOTA_EXCEEDED with a throttle, and nothing changes; a
// CreateTopics v5 (permissive) is created, throttled.
func TestQuotaControllerMutationRate(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"quota.window.num": "2"})
	adm := newAdmin(t, n)
	setQuota(t, adm, "client-id=test", "controller_mutation_rate", 1)

	first := dialRaw(t, n).roundTrip(rawCreateTopic(7, "m1", 5)).(*kmsg.CreateTopicsResponse)
	if first.Topics[0].ErrorCode != 0 || first.ThrottleMillis != 0 {
		t.Fatalf("first CreateTopics: error %d throttle %d, want created unthrottled", first.Topics[0].ErrorCode, first.ThrottleMillis)
	}
	strict := dialRaw(t, n).roundTrip(rawCreateTopic(7, "m2", 1)).(*kmsg.CreateTopicsResponse)
	if strict.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || strict.ThrottleMillis <= 0 {
		t.Fatalf("strict CreateTopics below zero: error %d throttle %d, want THROTTLING_QUOTA_EXCEEDED with a throttle", strict.Topics[0].ErrorCode, strict.ThrottleMillis)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cp.TimeoutMillis = 10000
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "m1", 6
	cp.Topics = append(cp.Topics, cpt)
	cpr := dialRaw(t, n).roundTrip(cp).(*kmsg.CreatePartitionsResponse)
	if cpr.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("strict CreatePartitions below zero: error %d", cpr.Topics[0].ErrorCode)
	}
	permissive := dialRaw(t, n).roundTrip(rawCreateTopic(5, "m3", 1)).(*kmsg.CreateTopicsResponse)
	if permissive.Topics[0].ErrorCode != 0 || permissive.ThrottleMillis <= 0 {
		t.Fatalf("permissive CreateTopics v5: error %d throttle %d, want created and throttled", permissive.Topics[0].ErrorCode, permissive.ThrottleMillis)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(6)
	dt.TimeoutMillis = 10000
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("m3")
	dt.Topics = append(dt.Topics, dtt)
	dtr := dialRaw(t, n).roundTrip(dt).(*kmsg.DeleteTopicsResponse)
	if dtr.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || dtr.ThrottleMillis <= 0 {
		t.Fatalf("strict DeleteTopics below zero: error %d throttle %d", dtr.Topics[0].ErrorCode, dtr.ThrottleMillis)
	}
	topics, err := adm.ListTopics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !topics.Has("m1") || topics.Has("m2") || !topics.Has("m3") || len(topics["m1"].Partitions) != 5 {
		t.Fatalf("topics after the quota: %v", topics.Names())
	}
	if got := counterValue(t, n.metrics.quotaThrottled.WithLabelValues("controller_mutation")); got < 3 {
		t.Errorf("%v throttles counted for type=controller_mutation, want at least 3", got)
	}
}
