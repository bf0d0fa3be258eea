package sharegroup

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupRandomRequests drives one group with random, often wrong
// heartbeats (unknown members, stale and future epochs, leaves, new
// subscriptions), expiries and topic changes, and checks after each step:
// an error answer wrote nothing and changed nothing; the replay of all
// records equals the live group; no member is ahead of the group epoch;
// the target satisfies the assignor's properties; every member whose
// epoch is the assignment epoch holds exactly its target.
func TestGroupRandomRequests(t *testing.T) {
	for seed := range uint64(25) {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := Config{SessionTimeoutMs: 1000, HeartbeatIntervalMs: 100, MaxSize: 6}
		g := NewGroup("g", cfg)
		img, nm := parseTopics(t, "a partitions=2\nb partitions=3\n")
		var hist []Record
		var now int64
		for step := range 300 {
			now += int64(rng.IntN(300))
			var recs []Record
			switch k := rng.IntN(20); {
			case k < 15:
				req := kmsg.NewPtrShareGroupHeartbeatRequest()
				req.GroupID, req.MemberID = "g", fmt.Sprint("m", rng.IntN(8))
				if m := g.Members[req.MemberID]; m != nil && rng.IntN(4) > 0 {
					req.MemberEpoch = []int32{m.Epoch, m.PreviousEpoch, m.Epoch + 1, -1}[rng.IntN(4)]
				} else {
					req.MemberEpoch = int32(rng.IntN(4)) - 1
				}
				if rng.IntN(3) == 0 || req.MemberEpoch == 0 {
					req.SubscribedTopicNames = [][]string{{"a"}, {"b"}, {"a", "b"}, {"c"}, {}}[rng.IntN(5)]
				}
				before := nm.snapshot(g)
				res := g.Heartbeat(now, req, Client{ID: "c", Host: "h"}, img)
				if res.Response.ErrorCode != 0 {
					if len(res.Records) > 0 || nm.snapshot(g) != before {
						t.Fatalf("seed %d step %d: an error (%d) changed the group", seed, step, res.Response.ErrorCode)
					}
				}
				recs = res.Records
			case k < 17:
				recs = g.Expire(now, img)
			default:
				img, nm = parseTopics(t, fmt.Sprintf("a partitions=%d\nb partitions=%d\nc partitions=%d\n", 1+rng.IntN(3), 1+rng.IntN(3), rng.IntN(2)))
				recs = g.MetadataChanged(img)

			}
			hist = append(hist, recs...)
			if len(hist) > 64 {
				hist = compacted(hist) // what log compaction keeps replays the same
			}
			checkReplay(t, cfg, g, hist, nm, false)
			var specs []MemberSpec
			for id, m := range g.Members {
				if m.Epoch > g.Epoch || g.AssignmentEpoch > g.Epoch {
					t.Fatalf("seed %d step %d: member %s epoch %d, group %d, assignment %d", seed, step, id, m.Epoch, g.Epoch, g.AssignmentEpoch)
				}
				if m.Epoch == g.AssignmentEpoch && !m.Assigned.Equal(g.Target[id]) {
					t.Fatalf("seed %d step %d: member %s at the assignment epoch holds %v, target %v", seed, step, id, m.Assigned, g.Target[id])
				}
				s := MemberSpec{ID: id}
				for _, name := range m.SubscribedTopicNames {
					if tp, ok := img[name]; ok {
						s.Topics = append(s.Topics, tp.ID)
					}
				}
				specs = append(specs, s)
			}
			if g.AssignmentEpoch == g.Epoch && g.MetadataHash == g.metadataHash(img) {
				byID := map[uuid.UUID]Topic{}
				for _, tp := range img {
					byID[tp.ID] = tp
				}
				target := map[string]Assignment{}
				for _, s := range specs {
					target[s.ID] = g.Target[s.ID]
				}
				checkSimple(t, specs, byID, target)
			}
		}
	}
}

// compacted keeps the newest record of each key, in the order of those
// newest records.
func compacted(recs []Record) []Record {
	last := map[string]int{}
	for i, r := range recs {
		k, _ := EncodeRecord(r)
		last[string(k)] = i
	}
	var out []Record
	for i, r := range recs {
		k, _ := EncodeRecord(r)
		if last[string(k)] == i {
			out = append(out, r)
		}
	}
	return out
}
