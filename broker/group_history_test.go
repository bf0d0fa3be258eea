package broker

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group/consumer"
	"github.com/strata-io/strata/broker/group/sharegroup"
)

// historyChurn is the number of members that join and leave in the
// history tests: enough to go far past the compaction threshold
// (64 + 8 × members) many times.
const historyChurn = 300

// TestConsumerGroupHistoryBounded: the history a consumer group keeps for
// a failed append (consumerGroup.hist, compacted as persistLocked does)
// stays bounded while members keep joining and leaving, and replays to
// the group the whole record stream gives. Before, the tombstones of every
// member that ever left were kept: the history grew by three records per
// departed member and every append past the threshold compacted all of it
// (BenchmarkJoinToStable848/848/members=10 took 2.4 ms/op over 100 ops and
// 13 ms/op over 1200, 57% of the CPU in compactRecords).
func TestConsumerGroupHistoryBounded(t *testing.T) {
	img := consumer.TopicImage{"t": {ID: uuid.NewSHA1(uuid.Nil, []byte("t")), Name: "t", Partitions: 4}}
	g := consumer.NewGroup("g", consumer.DefaultConfig())
	var full, hist []consumer.Record
	now := int64(0)
	hb := func(member string, epoch int32, join bool) int32 {
		t.Helper()
		now++
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.SetVersion(1)
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g", member, epoch, -1
		if join {
			req.RebalanceTimeoutMillis = 30000
			req.SubscribedTopicNames = []string{"t"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		res := g.Heartbeat(now, req, consumer.Client{ID: "c", Host: "h"}, img)
		if res.Response.ErrorCode != 0 {
			t.Fatalf("heartbeat %s epoch %d: %v", member, epoch, kerr.ErrorForCode(res.Response.ErrorCode))
		}
		full = append(full, res.Records...)
		hist = append(hist, res.Records...)
		if len(hist) > 64+8*len(g.Members) {
			hist = compactRecords(hist)
		}
		return res.Response.MemberEpoch
	}
	// same: the history replays as the whole stream does, after every
	// step (compacted or not).
	same := func(step string) {
		t.Helper()
		a, b := consumer.Replay(consumer.DefaultConfig(), hist)["g"], consumer.Replay(consumer.DefaultConfig(), full)["g"]
		if a == nil || b == nil {
			t.Fatalf("%s: replayed groups %v, %v", step, a, b)
		}
		if a.Epoch != b.Epoch || a.TargetEpoch != b.TargetEpoch || a.MetadataHash != b.MetadataHash ||
			!reflect.DeepEqual(a.Members, b.Members) || !reflect.DeepEqual(a.Target, b.Target) {
			t.Fatalf("%s: the history replays to epoch %d target %d members %v, the stream to epoch %d target %d members %v",
				step, a.Epoch, a.TargetEpoch, a.Members, b.Epoch, b.TargetEpoch, b.Members)
		}
	}
	keep := hb("keep", 0, true)
	for i := range historyChurn {
		id := "m-" + strconv.Itoa(i)
		e := hb(id, 0, true)
		keep = hb("keep", keep, false)
		same(id + " joined")
		hb(id, e, false)
		hb(id, -1, false)
		same(id + " left")
		keep = hb("keep", keep, false)
	}
	if max := 64 + 8*len(g.Members) + 8; len(hist) > max {
		t.Errorf("history of %d records after %d members left (%d in the stream), want at most %d", len(hist), historyChurn, len(full), max)
	}
	same("the end")
	if a := consumer.Replay(consumer.DefaultConfig(), hist)["g"]; len(a.Members) != 1 || a.Members["keep"] == nil || a.Epoch != g.Epoch {
		t.Errorf("replayed members %v at epoch %d, want keep alone at %d", a.Members, a.Epoch, g.Epoch)
	}
}

// TestShareGroupHistoryBounded is TestConsumerGroupHistoryBounded for a
// share group's history (shareGroup.hist, compactShareRecords).
func TestShareGroupHistoryBounded(t *testing.T) {
	img := sharegroup.TopicImage{"t": {ID: uuid.NewSHA1(uuid.Nil, []byte("t")), Name: "t", Partitions: 4}}
	g := sharegroup.NewGroup("g", sharegroup.DefaultConfig())
	var full, hist []sharegroup.Record
	now := int64(0)
	hb := func(member string, epoch int32, join bool) int32 {
		t.Helper()
		now++
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.SetVersion(1)
		req.GroupID, req.MemberID, req.MemberEpoch = "g", member, epoch
		if join {
			req.SubscribedTopicNames = []string{"t"}
		}
		res := g.Heartbeat(now, req, sharegroup.Client{ID: "c", Host: "h"}, img)
		if res.Response.ErrorCode != 0 {
			t.Fatalf("heartbeat %s epoch %d: %v", member, epoch, kerr.ErrorForCode(res.Response.ErrorCode))
		}
		full = append(full, res.Records...)
		hist = append(hist, res.Records...)
		if len(hist) > 64+8*len(g.Members) {
			hist = compactShareRecords(hist)
		}
		return res.Response.MemberEpoch
	}
	same := func(step string) {
		t.Helper()
		a, b := sharegroup.Replay(sharegroup.DefaultConfig(), hist)["g"], sharegroup.Replay(sharegroup.DefaultConfig(), full)["g"]
		if a == nil || b == nil {
			t.Fatalf("%s: replayed groups %v, %v", step, a, b)
		}
		if a.Epoch != b.Epoch || a.AssignmentEpoch != b.AssignmentEpoch || a.MetadataHash != b.MetadataHash ||
			!reflect.DeepEqual(a.Members, b.Members) || !reflect.DeepEqual(a.Target, b.Target) || !reflect.DeepEqual(a.Initialized, b.Initialized) {
			t.Fatalf("%s: the history replays to epoch %d members %v, the stream to epoch %d members %v",
				step, a.Epoch, a.Members, b.Epoch, b.Members)
		}
	}
	keep := hb("keep", 0, true)
	for i := range historyChurn {
		id := "m-" + strconv.Itoa(i)
		e := hb(id, 0, true)
		keep = hb("keep", keep, false)
		same(id + " joined")
		hb(id, e, false)
		hb(id, -1, false)
		same(id + " left")
		keep = hb("keep", keep, false)
	}
	if max := 64 + 8*len(g.Members) + 8; len(hist) > max {
		t.Errorf("history of %d records after %d members left (%d in the stream), want at most %d", len(hist), historyChurn, len(full), max)
	}
	same("the end")
	if a := sharegroup.Replay(sharegroup.DefaultConfig(), hist)["g"]; len(a.Members) != 1 || a.Members["keep"] == nil || a.Epoch != g.Epoch {
		t.Errorf("replayed members %v at epoch %d, want keep alone at %d", a.Members, a.Epoch, g.Epoch)
	}
}
