package txncoord

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMarkerRequestRoundTrip: a marker split by leader, encoded as a
// WriteTxnMarkers request, answered, and mapped back to acks that complete
// the transaction through MarkerDone.
func TestMarkerRequestRoundTrip(t *testing.T) {
	var next int64 = 7
	c := New(Config{Partitions: 1}, func() (int64, error) { next++; return next, nil })
	if _, err := c.Load(0, 0, 9, nil); err != nil {
		t.Fatal(err)
	}
	e := c.InitProducerID(0, InitRequest{Req: 1, Version: 4, TxnID: "t", TimeoutMs: 1000, ProducerID: -1, Epoch: -1})
	c.AppendDone(0, e.Appends[0].Token, 0)
	tps := []TopicPartition{{"a", 0}, {"a", 1}, {"b", 0}}
	e = c.AddPartitions(0, AddRequest{Req: 2, Version: 3, TxnID: "t", ProducerID: 8, Epoch: 0, Partitions: tps})
	c.AppendDone(0, e.Appends[0].Token, 0)
	e = c.EndTxn(0, EndRequest{Req: 3, Version: 3, TxnID: "t", ProducerID: 8, Epoch: 0, Commit: true})
	e = c.AppendDone(0, e.Appends[0].Token, 0)
	if len(e.Markers) != 1 {
		t.Fatalf("markers %+v", e.Markers)
	}
	split := e.Markers[0].ByLeader(func(tp TopicPartition) int32 { return tp.Partition }) // leader = partition number
	if len(split) != 2 || len(split[0].Partitions) != 2 || len(split[1].Partitions) != 1 {
		t.Fatalf("split %+v", split)
	}
	var done Effects
	for leader, m := range split {
		req := WriteTxnMarkersRequest([]Marker{m})
		km := req.Markers[0]
		if km.ProducerID != 8 || km.ProducerEpoch != 0 || !km.Committed || km.CoordinatorEpoch != 9 {
			t.Fatalf("request marker %+v", km)
		}
		// The leader answers: partition 1 of a first NOT_LEADER, then NONE.
		resp := kmsg.NewPtrWriteTxnMarkersResponse()
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = km.ProducerID
		for _, kt := range km.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = kt.Topic
			for _, p := range kt.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				if leader == 1 {
					rp.ErrorCode = kerr.NotLeaderForPartition.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
		for _, a := range MarkerAcks([]Marker{m}, resp) {
			r := c.MarkerDone(0, a)
			if leader == 1 {
				if len(r.Markers) != 1 || r.Markers[0].Partitions[0] != (TopicPartition{"a", 1}) {
					t.Fatalf("retry %+v", r)
				}
				for _, a := range FailedMarkerAcks(r.Markers, 0) {
					done.add(c.MarkerDone(0, a))
				}
				continue
			}
			done.add(r)
		}
	}
	if len(done.Appends) != 1 {
		t.Fatalf("want the CompleteCommit append, got %+v", done)
	}
	if r, _ := DecodeValue(done.Appends[0].Value); r.State != CompleteCommit {
		t.Fatalf("appended %s", recordString(r))
	}
	// A response missing a partition: acked REQUEST_TIMED_OUT (retried).
	acks := MarkerAcks(e.Markers, kmsg.NewPtrWriteTxnMarkersResponse())
	if len(acks) != 3 || acks[0].Err != kerr.RequestTimedOut.Code {
		t.Fatalf("acks %+v", acks)
	}
}

// TestLeaderVerifyCode: the verify answers a partition leader passes on
// to a producer.
func TestLeaderVerifyCode(t *testing.T) {
	for _, c := range []struct {
		in    int16
		known bool
		want  int16
	}{
		{0, false, 0},
		{kerr.ProducerFenced.Code, true, kerr.InvalidProducerEpoch.Code},
		{kerr.ProducerFenced.Code, false, kerr.InvalidProducerEpoch.Code},
		{kerr.TransactionAbortable.Code, true, kerr.TransactionAbortable.Code},
		{kerr.TransactionAbortable.Code, false, kerr.InvalidTxnState.Code},
		{kerr.ConcurrentTransactions.Code, false, kerr.ConcurrentTransactions.Code},
		{kerr.InvalidProducerIDMapping.Code, false, kerr.InvalidProducerIDMapping.Code},
	} {
		if got := LeaderVerifyCode(c.in, c.known); got != c.want {
			t.Errorf("LeaderVerifyCode(%d, %v) = %d, want %d", c.in, c.known, got, c.want)
		}
	}
}
