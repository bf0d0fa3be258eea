package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/storage/vfs"
)

func TestProducerIDsNeverRepeatAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	seen := map[int64]bool{}
	last := int64(-1)
	for round := range 3 {
		// No close: each round is a restart after a crash.
		p, err := openProducerIDs(vfs.Default, dir, 7)
		if err != nil {
			t.Fatal(err)
		}
		for range producerIDBlockSize + 10 {
			id, err := p.allocate()
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] || id <= last {
				t.Fatalf("round %d: id %d repeated or not increasing (last %d)", round, id, last)
			}
			if id>>32 != 7 {
				t.Fatalf("id %x lacks the node id", id)
			}
			seen[id], last = true, id
		}
	}
}

func TestInitProducerIDAndIdempotentKgoProducer(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "idem", 1, nil)
	c := dialRaw(t, n)

	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.ProducerID, req.ProducerEpoch = -1, -1
	first := c.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if first.ErrorCode != 0 || first.ProducerID < 0 || first.ProducerEpoch != 0 {
		t.Fatalf("init: %+v", first)
	}
	req.ProducerID, req.ProducerEpoch = first.ProducerID, 0
	bumped := c.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if bumped.ProducerID != first.ProducerID || bumped.ProducerEpoch != 1 {
		t.Fatalf("KIP-360 re-init: %+v", bumped)
	}
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.SetVersion(4)
	txn.TransactionalID = kmsg.StringPtr("tx")
	txn.TransactionTimeoutMillis = 60000
	if r := c.roundTrip(txn).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("transactional init before any FindCoordinator: %+v", r) // no __transaction_state yet
	}

	// franz-go's default producer is idempotent: it must simply work.
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumeTopics("idem"), kgo.RetryTimeout(testWait))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: "idem", Value: []byte{byte(i)}})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := 0
	ctx := testCtx(t)
	for got < 100 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(got) || r.Value[0] != byte(got) || r.ProducerID < 0 {
				t.Fatalf("record %d: offset %d value %v producer %d", got, r.Offset, r.Value, r.ProducerID)
			}
			got++
		})
	}
	if got != 100 {
		t.Fatalf("consumed %d of 100", got)
	}
}
