package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTieredOffsetsNeverOutOfRange: while uploads and local retention
// move the local log start under load, a fetch at any offset in
// [log start, HW) — aimed at the local start itself, where a read races
// the deletion — is answered with data or nothing, never
// OFFSET_OUT_OF_RANGE: no offset of a tiered log is ever unreadable.
func TestTieredOffsetsNeverOutOfRange(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, tierSettings(map[string]string{
		"remote.log.manager.task.interval.ms": "50",
		"log.retention.check.interval.ms":     "50",
	}))
	const topic = "race"
	// Small segments and local retention: the local start moves often even
	// on a slow (race-detector) build.
	cfgs := tieredTopicConfigs()
	seg, local := "65536", "131072"
	cfgs["segment.bytes"], cfgs["local.retention.bytes"] = &seg, &local
	createTopic(t, newAdmin(t, n), topic, 1, cfgs)
	p := n.partition(topic, 0)
	// Until the local start has moved enough times (or a bound).
	const wantMoves = 20
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the load that rolls, uploads and deletes segments
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.DefaultProduceTopic(topic))
		if err != nil {
			return
		}
		defer cl.Close()
		v := make([]byte, 1000)
		for ctx.Err() == nil {
			rs := make([]*kgo.Record, 256)
			for i := range rs {
				rs[i] = &kgo.Record{Value: v}
			}
			cl.ProduceSync(ctx, rs...)
		}
	}()

	cl := newClient(t, n)
	id := topicID(t, n, topic)
	fetches, moved := 0, 0
	lastLocal := p.log.LocalLogStartOffset()
	for ctx.Err() == nil && moved < wantMoves {
		off := p.log.LocalLogStartOffset()
		if off != lastLocal {
			moved++
			lastLocal = off
		}
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.ReplicaID = -1
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id // kgo sends its newest version: v13+ names topics by id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = off, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			break // the deadline
		}
		fetches++
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != 0 && got.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("fetch at %d: error %d", off, got.ErrorCode)
		}
		if got.ErrorCode == kerr.OffsetOutOfRange.Code && off >= p.log.LogStartOffset() {
			t.Fatalf("fetch at %d (log start %d, local start now %d): OFFSET_OUT_OF_RANGE", off, p.log.LogStartOffset(), p.log.LocalLogStartOffset())
		}
	}
	cancel()
	wg.Wait()
	if moved < wantMoves {
		t.Fatalf("the local start moved only %d times in %d fetches: the race was not exercised", moved, fetches)
	}
	t.Logf("%d fetches at the moving local start (moved %d times)", fetches, moved)
}
