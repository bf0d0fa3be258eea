package consumer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupRandomRequests feeds random, mostly invalid or ill-timed
// heartbeats (unknown members, wrong epochs, foreign instance ids, owned
// partitions the member never had, unknown topics, bad regexes and
// assignors, leaves of either kind) plus timeouts and topic changes. A
// handler passes client input straight in, so after every call: no
// panic; an error response carries no records; the records written so
// far replay to the live group (nothing changed without a record); no
// partition is held by two members; every member's epoch is at most the
// target epoch (or -2 for a static member that left).
func TestGroupRandomRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(848, 18))
	oks, errs, joined, staticLeaves := 0, 0, 0, 0
	for iter := range 150 {
		img := TopicImage{}
		for i := range 3 {
			top := Topic{Name: fmt.Sprintf("t%d", i), Partitions: int32(1 + rng.IntN(6))}
			top.ID = topicID(top.Name)
			img[top.Name] = top
		}
		g := NewGroup("g", DefaultConfig())
		var log []Record
		now := int64(0)
		pick := func(ss ...string) string { return ss[rng.IntN(len(ss))] }
		for step := range 120 {
			now += int64(rng.IntN(20000))
			var recs []Record
			switch rng.IntN(20) {
			case 0:
				recs = g.Expire(now, img)
			case 1:
				n := fmt.Sprintf("t%d", rng.IntN(4))
				if _, ok := img[n]; ok && rng.IntN(2) == 0 {
					delete(img, n)
				} else {
					top := img[n]
					top.Name, top.ID = n, topicID(n)
					top.Partitions += int32(1 + rng.IntN(3))
					img[n] = top
				}
				recs = g.MetadataChanged(img)
			default:
				req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				req.Version = int16(rng.IntN(2))
				req.Group = pick("g", "g", "g", "")
				req.MemberID = pick("m0", "m1", "m2", "m3", "")
				var known *Member
				if m := g.Members[req.MemberID]; m != nil {
					known = m
				}
				switch rng.IntN(6) {
				case 0, 1:
					req.MemberEpoch = 0
				case 2:
					req.MemberEpoch = int32(rng.IntN(4) - 3)
				default:
					if known != nil {
						req.MemberEpoch = known.Epoch + int32(rng.IntN(3)-1)
					} else {
						req.MemberEpoch = int32(rng.IntN(10))
					}
				}
				if rng.IntN(3) == 0 {
					req.InstanceID = kmsg.StringPtr(pick("i0", "i1", ""))
				}
				if rng.IntN(4) == 0 {
					req.RackID = kmsg.StringPtr(pick("r1", "r2", ""))
				}
				if rng.IntN(2) == 0 {
					req.RebalanceTimeoutMillis = int32(rng.IntN(3) * 5000)
				} else {
					req.RebalanceTimeoutMillis = -1
				}
				if rng.IntN(2) == 0 {
					req.SubscribedTopicNames = []string{}
					for i := range 4 {
						if rng.IntN(2) == 0 {
							req.SubscribedTopicNames = append(req.SubscribedTopicNames, fmt.Sprintf("t%d", i))
						}
					}
				}
				if req.Version >= 1 && rng.IntN(5) == 0 {
					req.SubscribedTopicRegex = kmsg.StringPtr(pick("t[01]", "t.*", "(", ""))
				}
				if rng.IntN(6) == 0 {
					req.ServerAssignor = kmsg.StringPtr(pick("uniform", "range", "cooperative-sticky"))
				}
				switch rng.IntN(3) {
				case 0: // nil: unchanged
				case 1:
					req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				default:
					req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
					for i := range 4 {
						if rng.IntN(2) == 0 {
							continue
						}
						rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
						rt.TopicID = topicID(fmt.Sprintf("t%d", i))
						for p := range int32(6) {
							if rng.IntN(2) == 0 {
								rt.Partitions = append(rt.Partitions, p)
							}
						}
						req.Topics = append(req.Topics, rt)
					}
				}
				if rng.IntN(3) > 0 {
					// Mostly a well-formed heartbeat, the way a client
					// behaves, so that the group actually moves.
					req.Version, req.Group = 1, "g"
					req.MemberID = pick("m0", "m1", "m2", "m3")
					req.InstanceID, req.SubscribedTopicRegex, req.ServerAssignor = nil, nil, nil
					if m := g.Members[req.MemberID]; m != nil && m.Epoch >= 0 && rng.IntN(8) > 0 {
						req.MemberEpoch, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = m.Epoch, -1, nil
						req.Topics = nil
						if rng.IntN(2) == 0 {
							req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
							for tid, ps := range m.Assigned {
								rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
								rt.TopicID, rt.Partitions = tid, ps
								req.Topics = append(req.Topics, rt)
							}
						}
					} else {
						req.MemberEpoch, req.RebalanceTimeoutMillis = 0, 5000
						req.SubscribedTopicNames = []string{"t0", "t1", "t2"}
						req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
					}
					// Static members: m0 and m1 use instance ids i0/i1.
					if d := req.MemberID[1]; d <= '1' && rng.IntN(2) == 0 {
						req.InstanceID = kmsg.StringPtr("i" + string(d))
					}
					if rng.IntN(10) == 0 {
						req.MemberEpoch = LeaveEpoch
						if req.InstanceID != nil && rng.IntN(2) == 0 {
							req.MemberEpoch = StaticLeaveEpoch
						}
					}
				}
				res := g.Heartbeat(now, req, Client{ID: "c"}, img)
				if res.Response.ErrorCode != 0 && len(res.Records) > 0 {
					t.Fatalf("iter %d step %d: error %d with %d records", iter, step, res.Response.ErrorCode, len(res.Records))
				}
				recs = res.Records
				if res.Response.ErrorCode != 0 {
					errs++
				} else {
					oks++
					if req.MemberEpoch == 0 {
						joined++
					}
					if req.MemberEpoch == StaticLeaveEpoch {
						staticLeaves++
					}
				}
			}
			for _, r := range recs {
				k, v := EncodeRecord(r)
				d, ok, err := DecodeRecord(k, v)
				if err != nil || !ok {
					t.Fatalf("iter %d step %d: record does not decode: %v", iter, step, err)
				}
				log = append(log, d)
			}
			if r := Replay(DefaultConfig(), log)["g"]; r != nil || len(g.Members) > 0 {
				if r == nil {
					t.Fatalf("iter %d step %d: replay lost the group", iter, step)
				}
				if err := sameGroup(g, r); err != nil {
					t.Fatalf("iter %d step %d: replay != live: %v", iter, step, err)
				}
			}
			held := map[tp]string{}
			for _, m := range g.Members {
				if m.Epoch > g.TargetEpoch || (m.Epoch < 0 && m.Epoch != StaticLeaveEpoch) {
					t.Fatalf("iter %d step %d: member %s at epoch %d, target %d", iter, step, m.ID, m.Epoch, g.TargetEpoch)
				}
				for _, a := range []Assignment{m.Assigned, m.PendingRevocation} {
					for tt, ps := range a {
						for _, p := range ps {
							if o, ok := held[tp{tt, p}]; ok && o != m.ID {
								t.Fatalf("iter %d step %d: %s-%d held by %s and %s", iter, step, tt, p, o, m.ID)
							}
							held[tp{tt, p}] = m.ID
						}
					}
				}
			}
		}
	}
	// Not vacuous: many requests must have been accepted.
	if oks < errs/4 || joined == 0 || staticLeaves == 0 {
		t.Fatalf("only %d accepted (%d joins, %d static leaves) of %d", oks, joined, staticLeaves, oks+errs)
	}
	t.Logf("%d accepted (%d joins, %d static leaves), %d refused", oks, joined, staticLeaves, errs)
}
