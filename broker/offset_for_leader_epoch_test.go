package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetForLeaderEpochFollowsTheEpochCache: records written in two
// leader epochs (the second set by hand, as a leader change would), then
// OffsetForLeaderEpoch for each kind of requested epoch, with kadm and with
// every version by hand, and the CurrentLeaderEpoch checks of KIP-320.
func TestOffsetForLeaderEpochFollowsTheEpochCache(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"auto.create.topics.enable": "false"})
	adm := newAdmin(t, n)
	createTopic(t, adm, "ofle", 1, nil)
	c := dialRaw(t, n)
	produce := func(count int) {
		for range count {
			if code, _ := produceErr(t, c.roundTrip(produceReq(9, "ofle", [16]byte{}, 0, -1, recordBatch(1000, "x")))); code != 0 {
				t.Fatalf("produce: %d", code)
			}
		}
	}
	p := n.partition("ofle", 0)
	e0 := p.leaderEpoch.Load()
	produce(5) // offsets 0-4 in e0
	e2 := e0 + 2
	p.leaderEpoch.Store(e2) // a leader change the metadata would make
	produce(3)              // offsets 5-7 in e2

	type answer struct {
		epoch int32
		end   int64
	}
	cases := []struct {
		name      string
		requested int32
		want      answer
	}{
		{"the latest epoch: the log end", e2, answer{e2, 8}},
		{"an older epoch: where the next began", e0, answer{e0, 5}},
		{"an epoch that wrote nothing: the one below", e0 + 1, answer{e0, 5}},
		{"an epoch above every known one", e2 + 1, answer{-1, -1}},
		{"undefined", -1, answer{-1, -1}},
	}
	for _, tc := range cases {
		var req kadm.OffsetForLeaderEpochRequest
		req.Add("ofle", 0, tc.requested)
		resps, err := adm.OffsetForLeaderEpoch(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		r := resps["ofle"][0]
		if r.Err != nil || (answer{r.LeaderEpoch, r.EndOffset}) != tc.want {
			t.Errorf("kadm, %s (epoch %d): %d %d %v, want %v", tc.name, tc.requested, r.LeaderEpoch, r.EndOffset, r.Err, tc.want)
		}
	}

	maxV := kmsg.NewPtrOffsetForLeaderEpochRequest().MaxVersion()
	for v := int16(2); v <= maxV; v++ {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.SetVersion(v)
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "ofle"
		type part struct {
			current, requested int32
		}
		parts := []part{{e2, e0}, {-1, e2}, {e0, e0}, {e2 + 1, e0}}
		for _, pp := range parts {
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, pp.current, pp.requested
			rt.Partitions = append(rt.Partitions, rp)
		}
		missing := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		missing.Partition, missing.LeaderEpoch = 3, e0
		rt.Partitions = append(rt.Partitions, missing)
		nope := kmsg.NewOffsetForLeaderEpochRequestTopic()
		nope.Topic = "nope"
		nope.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{missing}
		req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{rt, nope}

		resp := c.roundTrip(req).(*kmsg.OffsetForLeaderEpochResponse)
		got := resp.Topics[0].Partitions
		want := []struct {
			err   *kerr.Error
			epoch int32
			end   int64
		}{
			{nil, e0, 5},                      // current epoch matches
			{nil, e2, 8},                      // no current epoch given
			{kerr.FencedLeaderEpoch, -1, -1},  // the client's epoch is older
			{kerr.UnknownLeaderEpoch, -1, -1}, // the client's epoch is newer
			{kerr.UnknownTopicOrPartition, -1, -1},
		}
		if len(got) != len(want) || len(resp.Topics) != 2 {
			t.Fatalf("v%d: %d topics, %d partitions", v, len(resp.Topics), len(got))
		}
		for i, w := range want {
			gotErr := kerr.ErrorForCode(got[i].ErrorCode)
			if (w.err == nil && got[i].ErrorCode != 0) || (w.err != nil && !errors.Is(gotErr, w.err)) ||
				got[i].LeaderEpoch != w.epoch || got[i].EndOffset != w.end {
				t.Errorf("v%d partition entry %d: %v %d %d, want %v %d %d", v, i, gotErr, got[i].LeaderEpoch, got[i].EndOffset, w.err, w.epoch, w.end)
			}
		}
		if code := resp.Topics[1].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("v%d unknown topic: code %d", v, code)
		}
	}

	// DeleteRecords past the first epoch's start moves the cache's first
	// entry up: an epoch below it answers the new start.
	if lw, err := deleteRecordsTo(t, adm, "ofle", 6); err != nil || lw != 6 {
		t.Fatalf("delete to 6: %d %v", lw, err)
	}
	var req kadm.OffsetForLeaderEpochRequest
	req.Add("ofle", 0, e0)
	resps, err := adm.OffsetForLeaderEpoch(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if r := resps["ofle"][0]; r.Err != nil || r.LeaderEpoch != e0 || r.EndOffset != 6 {
		t.Fatalf("epoch %d after deleting below 6: %d %d %v, want %d 6", e0, r.LeaderEpoch, r.EndOffset, r.Err, e0)
	}
}
