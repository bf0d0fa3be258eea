package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
)

// rs builds a replState led by 1 over replicas 1..3 with the given
// committed ISR; followers get their LEOs from leos (missing: unknown),
// each caught up at caught[id] ms.
func rs(isr []int32, minISR int, leos map[int32]int64, caught map[int32]int64) *replState {
	s := &replState{self: 1, replicas: []int32{1, 2, 3}, isr: isr, minISR: minISR,
		followers: map[int32]*followerState{}, brokers: map[int32]replicaInfo{}}
	for _, id := range []int32{2, 3} {
		f := &followerState{leo: -1, brokerEpoch: -1}
		if l, ok := leos[id]; ok {
			f.leo = l
		}
		f.lastCaughtUpMs = caught[id]
		s.followers[id] = f
		s.brokers[id] = replicaInfo{epoch: 10, eligible: true}
	}
	return s
}

// PartitionTest-like table of the HW rule (Kafka's
// maybeIncrementLeaderHW with strict min ISR, KIP-966).
func TestNextHW(t *testing.T) {
	const now, lag = 100_000, 30_000
	for _, c := range []struct {
		name    string
		s       *replState
		pending []int32
		hw, leo int64
		want    int64
	}{
		{"ISR of the leader alone follows the leader's LEO", rs([]int32{1}, 1, nil, nil), nil, 3, 10, 10},
		{"min LEO of the ISR", rs([]int32{1, 2, 3}, 1, map[int32]int64{2: 7, 3: 5}, map[int32]int64{2: now, 3: now}), nil, 0, 10, 5},
		{"an unknown ISR member's LEO holds it", rs([]int32{1, 2, 3}, 1, map[int32]int64{2: 7}, map[int32]int64{2: now}), nil, 4, 10, 4},
		{"never backwards", rs([]int32{1, 2}, 1, map[int32]int64{2: 3}, map[int32]int64{2: now}), nil, 6, 10, 6},
		{"strict min ISR: below min.insync the HW stays", rs([]int32{1}, 2, map[int32]int64{2: 10, 3: 10}, nil), nil, 2, 10, 2},
		{"a pending shrink still counts the leaving member", rs([]int32{1, 2, 3}, 1, map[int32]int64{2: 9, 3: 4}, map[int32]int64{2: now, 3: 0}), []int32{1, 2}, 0, 10, 4},
		{"a pending expand counts the joining member", rs([]int32{1, 2}, 1, map[int32]int64{2: 9, 3: 6}, map[int32]int64{2: now, 3: 0}), []int32{1, 2, 3}, 0, 10, 6},
		{"a caught-up eligible non-member is waited for", rs([]int32{1, 2}, 1, map[int32]int64{2: 9, 3: 8}, map[int32]int64{2: now, 3: now}), nil, 0, 10, 8},
		{"a lagging non-member is not", rs([]int32{1, 2}, 1, map[int32]int64{2: 9, 3: 1}, map[int32]int64{2: now, 3: 0}), nil, 0, 10, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.s.pending = c.pending
			if got := nextHW(c.s, c.hw, c.leo, now, lag); got != c.want {
				t.Fatalf("nextHW = %d, want %d", got, c.want)
			}
		})
	}
	// An ineligible (fenced) caught-up non-member is not waited for.
	s := rs([]int32{1, 2}, 1, map[int32]int64{2: 9, 3: 8}, map[int32]int64{2: now, 3: now})
	s.brokers[3] = replicaInfo{epoch: 10}
	if got := nextHW(s, 0, 10, now, lag); got != 9 {
		t.Fatalf("fenced non-member: nextHW = %d, want 9", got)
	}
}

func TestOutOfSync(t *testing.T) {
	const now, lag = 100_000, 30_000
	for _, c := range []struct {
		name string
		s    *replState
		leo  int64
		want []int32
	}{
		{"at the leader's LEO: in sync however old", rs([]int32{1, 2, 3}, 1, map[int32]int64{2: 10, 3: 10}, nil), 10, nil},
		{"caught up within the lag", rs([]int32{1, 2, 3}, 1, map[int32]int64{2: 5, 3: 5}, map[int32]int64{2: now - lag, 3: now - lag + 1}), 10, nil},
		{"stuck past the lag", rs([]int32{1, 2, 3}, 1, map[int32]int64{2: 5, 3: 10}, map[int32]int64{2: now - lag - 1}), 10, []int32{2}},
		{"never fetched, past the lag", rs([]int32{1, 2, 3}, 1, nil, nil), 10, []int32{2, 3}},
		{"non-members are not shrunk", rs([]int32{1}, 1, nil, nil), 10, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := outOfSync(c.s, c.leo, now, lag); !slices.Equal(got, c.want) {
				t.Fatalf("outOfSync = %v, want %v", got, c.want)
			}
		})
	}
}

func TestCanJoinISR(t *testing.T) {
	base := func() *replState {
		s := rs([]int32{1, 2}, 1, map[int32]int64{2: 10, 3: 8}, nil)
		s.epochStart = 6
		return s
	}
	for _, c := range []struct {
		name   string
		change func(s *replState)
		hw     int64
		want   bool
	}{
		{"LEO at the HW and past the epoch start", nil, 8, true},
		{"below the HW", nil, 9, false},
		{"below the current epoch's start", func(s *replState) { s.epochStart = 9 }, 8, false},
		{"fenced or shutting down", func(s *replState) { s.brokers[3] = replicaInfo{epoch: 10} }, 8, false},
		{"fetching with another broker epoch (KIP-903)", func(s *replState) { s.followers[3].brokerEpoch = 9 }, 8, false},
		{"fetching with the registered broker epoch", func(s *replState) { s.followers[3].brokerEpoch = 10 }, 8, true},
		{"a change pending", func(s *replState) { s.pending = []int32{1} }, 8, false},
		{"RECOVERING (KIP-704)", func(s *replState) { s.recovery = metadata.LeaderRecovering }, 8, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := base()
			if c.change != nil {
				c.change(s)
			}
			if got := canJoinISR(s, 3, c.hw); got != c.want {
				t.Fatalf("canJoinISR = %v, want %v", got, c.want)
			}
		})
	}
	if canJoinISR(base(), 2, 0) {
		t.Fatal("an ISR member can join again")
	}
}

func TestAlterDecision(t *testing.T) {
	ok := metadata.AlterPartitionResult{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 8, ISR: []int32{1, 2}}
	for _, c := range []struct {
		name string
		res  metadata.AlterPartitionResult
		err  error
		want alterAction
	}{
		{"success", ok, nil, alterCommit},
		{"success for another leader epoch is stale", metadata.AlterPartitionResult{LeaderEpoch: 3, PartitionEpoch: 9}, nil, alterIgnore},
		{"success with an older partition epoch is stale", metadata.AlterPartitionResult{LeaderEpoch: 4, PartitionEpoch: 6}, nil, alterIgnore},
		{"OPERATION_NOT_ATTEMPTED reverts", metadata.AlterPartitionResult{Err: kerr.OperationNotAttempted}, nil, alterRevert},
		{"INELIGIBLE_REPLICA reverts", metadata.AlterPartitionResult{Err: fmt.Errorf("x: %w", kerr.IneligibleReplica)}, nil, alterRevert},
		{"FENCED_LEADER_EPOCH waits for metadata", metadata.AlterPartitionResult{Err: kerr.FencedLeaderEpoch}, nil, alterWait},
		{"INVALID_UPDATE_VERSION waits", metadata.AlterPartitionResult{Err: kerr.InvalidUpdateVersion}, nil, alterWait},
		{"UNKNOWN_TOPIC_ID waits", metadata.AlterPartitionResult{Err: kerr.UnknownTopicID}, nil, alterWait},
		{"INVALID_REQUEST waits", metadata.AlterPartitionResult{Err: kerr.InvalidRequest}, nil, alterWait},
		{"NEW_LEADER_ELECTED waits", metadata.AlterPartitionResult{Err: kerr.NewLeaderElected}, nil, alterWait},
		{"NOT_CONTROLLER retries", metadata.AlterPartitionResult{Err: kerr.NotController}, nil, alterRetry},
		{"a routing failure retries", metadata.AlterPartitionResult{}, errors.New("dial: refused"), alterRetry},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := alterDecision(c.res, c.err, 4, 7); got != c.want {
				t.Fatalf("alterDecision = %v, want %v", got, c.want)
			}
		})
	}
}

// Kafka's Replica.updateFetchStateOrThrow: the lastCaughtUpTimeMs rule.
func TestFollowerStateLastCaughtUp(t *testing.T) {
	f := &followerState{leo: -1, lastFetchLeaderLEO: -1}
	f.updateFetch(5, 0, 10, 1000, 7) // behind: previous fetch (none) was at time 0
	if f.lastCaughtUpMs != 0 || f.leo != 5 || f.brokerEpoch != 7 {
		t.Fatalf("after a lagging fetch: %+v", f)
	}
	f.updateFetch(10, 0, 12, 2000, 7) // reached the LEO the leader had at the previous fetch (10)
	if f.lastCaughtUpMs != 1000 {
		t.Fatalf("caught up to the previous fetch's LEO: lastCaughtUpMs %d, want 1000", f.lastCaughtUpMs)
	}
	f.updateFetch(12, 0, 12, 3000, 7) // at the leader's LEO
	if f.lastCaughtUpMs != 3000 {
		t.Fatalf("at the LEO: lastCaughtUpMs %d, want 3000", f.lastCaughtUpMs)
	}
	f.updateFetch(12, 0, 20, 4000, 7) // behind a new append, and behind the LEO seen before (12 < 12? no: equal)
	if f.lastCaughtUpMs != 3000 {
		t.Fatalf("lastCaughtUpMs %d, want 3000 (the previous fetch's time)", f.lastCaughtUpMs)
	}
	f.updateFetch(13, 0, 25, 5000, 7) // below the previous fetch's leader LEO (20)
	if f.lastCaughtUpMs != 3000 {
		t.Fatalf("lagging: lastCaughtUpMs moved to %d", f.lastCaughtUpMs)
	}
}

func TestEffectiveMinISR(t *testing.T) {
	for _, c := range []struct {
		v    string
		rf   int
		want int
	}{{"", 3, 1}, {"2", 3, 2}, {"3", 1, 1}, {"5", 3, 3}, {"bad", 3, 1}} {
		if got := effectiveMinISR(map[string]string{metadata.ConfigMinInsyncReplicas: c.v}, c.rf); got != c.want {
			t.Errorf("effectiveMinISR(%q, %d) = %d, want %d", c.v, c.rf, got, c.want)
		}
	}
}

// HW waiters complete in offset order exactly when the HW passes them,
// fail when leadership is lost, and give up at their context's end.
func TestHWWaiters(t *testing.T) {
	p := &partition{}
	p.leader.Store(true)
	type res struct {
		off int64
		err error
	}
	done := make(chan res, 8)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for _, off := range []int64{7, 2, 5} {
		w, err := p.addHWWaiter(off, -1)
		if err != nil || w == nil {
			t.Fatalf("add %d: %v %v", off, w, err)
		}
		go func() {
			select {
			case err := <-w.c:
				done <- res{off, err}
			case <-ctx.Done():
			}
		}()
	}
	p.hw.Store(6)
	p.completeHWWaiters()
	got := []int64{(<-done).off, (<-done).off}
	slices.Sort(got)
	if !slices.Equal(got, []int64{2, 5}) || len(p.hwWait) != 1 || p.hwWait[0].offset != 7 {
		t.Fatalf("completed %v, left %d", got, len(p.hwWait))
	}
	if w, err := p.addHWWaiter(3, -1); w != nil || err != nil {
		t.Fatalf("an offset below the HW waits: %v %v", w, err)
	}
	p.failHWWaiters(kerr.NotLeaderForPartition, -1)
	if r := <-done; r.off != 7 || !errors.Is(r.err, kerr.NotLeaderForPartition) {
		t.Fatalf("after resign: %+v", r)
	}
	short, c2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer c2()
	if err := p.waitHW(short, 100); !errors.Is(err, context.DeadlineExceeded) || len(p.hwWait) != 0 {
		t.Fatalf("waitHW past its deadline: %v, %d waiters left", err, len(p.hwWait))
	}
	p.leader.Store(false)
	if err := p.waitHW(ctx, 100); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("waitHW on a non-leader: %v", err)
	}
}

// replTopic creates topic with one partition of rf replicas on c and
// waits until its leader leads it; it returns the leader and the other
// replicas (the followers the test plays by hand).
func replTopic(t *testing.T, c *testCluster, topic string, rf int16, configs map[string]*string) (leader *Node, followers []int32) {
	t.Helper()
	adm := kadm.NewClient(c.client())
	resp, err := adm.CreateTopic(testCtx(t), 1, rf, configs, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v / %v", topic, err, resp.Err)
	}
	var st metadata.PartitionInfo
	testutil.Eventually(t, testWait, func() error {
		var ok bool
		if st, ok = c.partitionState(topic, 0); !ok || st.Leader < 0 {
			return fmt.Errorf("no leader yet: %+v", st)
		}
		n := c.node(st.Leader)
		if n == nil {
			return fmt.Errorf("leader %d stopped", st.Leader)
		}
		p := n.partition(topic, 0)
		if p == nil || !p.leader.Load() || p.epochStartOffset() < 0 {
			return fmt.Errorf("broker %d does not lead it yet", st.Leader)
		}
		return nil
	}, "%s led", topic)
	for _, r := range st.Replicas {
		if r != st.Leader {
			followers = append(followers, r)
		}
	}
	return c.node(st.Leader), followers
}

// followerFetch is a v16 Fetch from replica id (with its broker epoch),
// sessionless, as a follower sends it.
func followerFetch(id int32, brokerEpoch int64, topic string, topicID [16]byte, offset int64, leaderEpoch, lastFetchedEpoch int32, maxWaitMs int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(16)
	req.ReplicaID = -1
	req.ReplicaState.ID, req.ReplicaState.Epoch = id, brokerEpoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = maxWaitMs, 1, 10<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, offset, 1<<20
	fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = leaderEpoch, lastFetchedEpoch, 0
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}

// replicaFetch sends a follower fetch of replica id from leader's
// partition and returns its only partition.
func replicaFetch(t *testing.T, c *testCluster, rc *rawConn, leader *Node, id int32, topic string, offset int64, lastFetchedEpoch int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	p := leader.partition(topic, 0)
	req := followerFetch(id, c.node(id).brokerEpoch.Load(), topic, p.topicID, offset, p.leaderEpoch.Load(), lastFetchedEpoch, 0)
	return fetchPart0(t, rc.roundTrip(req))
}

// produceAcks1 writes count records with acks=1 (the leader's append
// alone) and returns the leader's LEO.
func produceAcks1(t *testing.T, c *testCluster, leader *Node, topic string, count int) int64 {
	t.Helper()
	rc := dialRaw(t, leader)
	for i := range count {
		req := produceReq(9, topic, [16]byte{}, 0, 1, recordBatch(time.Now().UnixMilli(), fmt.Sprint(i)))
		if code, _ := produceErr(t, rc.roundTrip(req)); code != 0 {
			t.Fatalf("produce acks=1: %v", kerr.ErrorForCode(code))
		}
	}
	return leader.partition(topic, 0).log.LogEndOffset()
}

// Followers' fetches move the HW: the leader serves them up to its LEO,
// and the HW becomes the ISR's minimum LEO; consumers never see past it.
func TestFollowerFetchesAdvanceTheHighWatermark(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, fs := replTopic(t, c, "hw", 3, nil)
	p := leader.partition("hw", 0)
	leo := produceAcks1(t, c, leader, "hw", 3)
	if leo != 3 || p.hw.Load() != 0 {
		t.Fatalf("after acks=1 produces: LEO %d HW %d, want 3 and 0 (no follower has them)", leo, p.hw.Load())
	}
	rc := dialRaw(t, leader)
	got := replicaFetch(t, c, rc, leader, fs[0], "hw", 0, -1)
	if got.ErrorCode != 0 || len(got.RecordBatches) == 0 || got.HighWatermark != 0 {
		t.Fatalf("follower fetch at 0: err %d, %d bytes, HW %d", got.ErrorCode, len(got.RecordBatches), got.HighWatermark)
	}
	// A consumer reads nothing above the HW, and (HW, LEO] is not out of range.
	cons := fetchPart0(t, rc.roundTrip(fetchReq(12, "hw", [16]byte{}, 0, 1, 0, 1, 1<<20)))
	if cons.ErrorCode != 0 || len(cons.RecordBatches) != 0 || cons.HighWatermark != 0 {
		t.Fatalf("consumer at 1: err %d, %d bytes, HW %d", cons.ErrorCode, len(cons.RecordBatches), cons.HighWatermark)
	}
	replicaFetch(t, c, rc, leader, fs[0], "hw", 3, -1)
	if p.hw.Load() != 0 {
		t.Fatalf("HW %d with one follower at 3 and the other unknown", p.hw.Load())
	}
	got = replicaFetch(t, c, rc, leader, fs[1], "hw", 2, -1)
	if p.hw.Load() != 2 || got.HighWatermark != 2 {
		t.Fatalf("HW %d (answered %d), want 2 = min(3, 3, 2)", p.hw.Load(), got.HighWatermark)
	}
	replicaFetch(t, c, rc, leader, fs[1], "hw", 3, -1)
	if p.hw.Load() != 3 {
		t.Fatalf("HW %d, want 3", p.hw.Load())
	}
	if isr, hw, leo, under := p.replicationStatus(); len(isr) != 3 || hw != 3 || leo != 3 || under {
		t.Fatalf("replicationStatus = %v %d %d %v", isr, hw, leo, under)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(7)
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "hw"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp, lp.CurrentLeaderEpoch = -1, -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	if r := rc.roundTrip(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; r.ErrorCode != 0 || r.Offset != 3 {
		t.Fatalf("ListOffsets latest: err %d offset %d, want the HW 3", r.ErrorCode, r.Offset)
	}
}

// The checks of a follower fetch (REPLICATION.md §1.3 steps 1, 2, 4 and
// KIP-903), each answered as Kafka answers it.
func TestFollowerFetchChecks(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, fs := replTopic(t, c, "checks", 2, nil)
	p := leader.partition("checks", 0)
	produceAcks1(t, c, leader, "checks", 2)
	var outsider int32
	for _, id := range []int32{1, 2, 3} {
		if id != leader.cfg.NodeID && id != fs[0] {
			outsider = id
		}
	}
	epoch := p.leaderEpoch.Load()
	rc := dialRaw(t, leader)
	fetch := func(id int32, brokerEpoch int64, offset int64, leaderEpoch, lastFetched int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		return fetchPart0(t, rc.roundTrip(followerFetch(id, brokerEpoch, "checks", p.topicID, offset, leaderEpoch, lastFetched, 0)))
	}
	be := c.node(fs[0]).brokerEpoch.Load()
	for _, k := range []struct {
		name                string
		id                  int32
		brokerEpoch, offset int64
		leaderEpoch, last   int32
		want                *kerr.Error
	}{
		{"a newer leader epoch", fs[0], be, 0, epoch + 1, -1, kerr.UnknownLeaderEpoch},
		{"not a replica, with an epoch", outsider, c.node(outsider).brokerEpoch.Load(), 0, epoch, -1, kerr.UnknownLeaderEpoch},
		{"not a replica, without one", outsider, c.node(outsider).brokerEpoch.Load(), 0, -1, -1, kerr.NotLeaderForPartition},
		{"a previous incarnation's broker epoch", fs[0], be - 1, 0, epoch, -1, kerr.NotLeaderForPartition},
		{"a last fetched epoch the leader never had", fs[0], be, 2, epoch, epoch + 3, kerr.OffsetOutOfRange},
		{"past the LEO", fs[0], be, 5, epoch, -1, kerr.OffsetOutOfRange},
	} {
		got := fetch(k.id, k.brokerEpoch, k.offset, k.leaderEpoch, k.last)
		if got.ErrorCode != k.want.Code || len(got.RecordBatches) != 0 {
			t.Errorf("%s: error %v, %d bytes; want %v", k.name, kerr.ErrorForCode(got.ErrorCode), len(got.RecordBatches), k.want)
		}
	}
	if epoch > 0 {
		if got := fetch(fs[0], be, 0, epoch-1, -1); got.ErrorCode != kerr.FencedLeaderEpoch.Code {
			t.Errorf("an older leader epoch: %v", kerr.ErrorForCode(got.ErrorCode))
		}
	}
	// None of the refused fetches moved the follower's state.
	p.repMu.Lock()
	leo := p.rep.followers[fs[0]].leo
	p.repMu.Unlock()
	if leo != -1 {
		t.Fatalf("refused fetches set the follower's LEO to %d", leo)
	}
	// Diverging: the follower claims this epoch up to offset 4, the leader's
	// epoch ends at 2: DivergingEpoch{epoch, 2}, no records, no update.
	got := fetch(fs[0], be, 4, epoch, epoch)
	if got.ErrorCode != 0 || got.DivergingEpoch.Epoch != epoch || got.DivergingEpoch.EndOffset != 2 || len(got.RecordBatches) != 0 {
		t.Fatalf("diverging: err %d, diverging %+v, %d bytes", got.ErrorCode, got.DivergingEpoch, len(got.RecordBatches))
	}
	p.repMu.Lock()
	leo = p.rep.followers[fs[0]].leo
	p.repMu.Unlock()
	if leo != -1 || p.hw.Load() != 0 {
		t.Fatalf("a diverging fetch updated the follower (LEO %d) or the HW (%d)", leo, p.hw.Load())
	}
	// The same epoch, consistent: served, and counted.
	got = fetch(fs[0], be, 2, epoch, epoch)
	if got.ErrorCode != 0 || got.DivergingEpoch.Epoch != -1 || p.hw.Load() != 2 {
		t.Fatalf("consistent fetch: err %d, diverging %+v, HW %d", got.ErrorCode, got.DivergingEpoch, p.hw.Load())
	}
}

// A follower's parked fetch answers as soon as the HW moves (another
// follower's fetch moved it), carrying the new HW, not after
// replica.fetch.wait.max.ms.
func TestParkedFollowerFetchWokenByHighWatermark(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, fs := replTopic(t, c, "park", 3, nil)
	p := leader.partition("park", 0)
	produceAcks1(t, c, leader, "park", 2)
	rcB := dialRaw(t, leader)
	replicaFetch(t, c, rcB, leader, fs[1], "park", 1, -1)
	rcA := dialRaw(t, leader)
	req := followerFetch(fs[0], c.node(fs[0]).brokerEpoch.Load(), "park", p.topicID, 2, p.leaderEpoch.Load(), -1, 15_000)
	corr := rcA.send(req)
	waitParked(t, leader, "park", 0)
	if p.hw.Load() != 1 {
		t.Fatalf("HW %d, want 1 (follower B at 1)", p.hw.Load())
	}
	start := time.Now()
	replicaFetch(t, c, rcB, leader, fs[1], "park", 2, -1)
	gotCorr, body, err := rcA.readFrame()
	if err != nil || gotCorr != corr {
		t.Fatalf("parked fetch: %v (corr %d want %d)", err, gotCorr, corr)
	}
	got := fetchPart0(t, decodeResponse(t, req, body))
	if took := time.Since(start); took > 5*time.Second || got.HighWatermark != 2 {
		t.Fatalf("parked fetch answered after %v with HW %d, want at once with 2", took, got.HighWatermark)
	}
}

// acks=all: the produce waits for the ISR (the HW passing its batch)
// without holding the connection: pipelined produces both append, and
// both answer, in order, once the followers have fetched them. A produce
// the followers never fetch times out with REQUEST_TIMED_OUT.
func TestAcksAllWaitsForTheISRWithoutBlockingTheConnection(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, fs := replTopic(t, c, "acks", 3, nil)
	p := leader.partition("acks", 0)
	rc := dialRaw(t, leader)
	r1 := produceReq(9, "acks", [16]byte{}, 0, -1, recordBatch(time.Now().UnixMilli(), "a"))
	r1.TimeoutMillis = 15_000
	r2 := produceReq(9, "acks", [16]byte{}, 0, -1, recordBatch(time.Now().UnixMilli(), "b", "c"))
	r2.TimeoutMillis = 15_000
	c1, c2 := rc.send(r1), rc.send(r2)
	testutil.Eventually(t, testWait, func() bool { return p.log.LogEndOffset() == 3 }, "both pipelined acks=all produces appended")
	if p.hw.Load() != 0 {
		t.Fatalf("HW %d before any follower fetched", p.hw.Load())
	}
	fc := dialRaw(t, leader)
	for _, id := range fs {
		replicaFetch(t, c, fc, leader, id, "acks", 0, -1)
		replicaFetch(t, c, fc, leader, id, "acks", 3, -1)
	}
	for i, want := range []int32{c1, c2} {
		got, body, err := rc.readFrame()
		if err != nil || got != want {
			t.Fatalf("response %d: %v, correlation %d want %d", i, err, got, want)
		}
		if code, base := produceErr(t, decodeResponse(t, r1, body)); code != 0 || base != []int64{0, 1}[i] {
			t.Fatalf("response %d: %v base %d", i, kerr.ErrorForCode(code), base)
		}
	}
	r3 := produceReq(9, "acks", [16]byte{}, 0, -1, recordBatch(time.Now().UnixMilli(), "d"))
	r3.TimeoutMillis = 300
	start := time.Now()
	if code, _ := produceErr(t, rc.roundTrip(r3)); code != kerr.RequestTimedOut.Code {
		t.Fatalf("unreplicated acks=all: %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(code))
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("timed out after %v, before the request's 300ms", took)
	}
}

// Followers that never fetch leave the ISR after replica.lag.time.max.ms
// (within 1.5x); with min.insync.replicas=2 the HW then stops (strict min
// ISR) and acks=all is refused before appending (NOT_ENOUGH_REPLICAS).
func TestISRShrinkAndStrictMinISR(t *testing.T) {
	c, leader, _ := shrunkCluster(t, "shrink")
	p := leader.partition("shrink", 0)
	rc := dialRaw(t, leader)
	req := produceReq(9, "shrink", [16]byte{}, 0, -1, recordBatch(time.Now().UnixMilli(), "x"))
	if code, _ := produceErr(t, rc.roundTrip(req)); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all under min ISR: %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(code))
	}
	if p.log.LogEndOffset() != 0 {
		t.Fatal("NOT_ENOUGH_REPLICAS appended the batch")
	}
	produceAcks1(t, c, leader, "shrink", 2)
	if p.hw.Load() != 0 {
		t.Fatalf("HW %d moved while the ISR is below min.insync.replicas", p.hw.Load())
	}
}

// A follower fetching up to the leader's LEO (>= HW, >= this epoch's
// start) is proposed back into the ISR (AlterPartition v3, its broker
// epoch); once committed the HW moves again.
func TestISRExpandOnceCaughtUp(t *testing.T) {
	c, leader, fs := shrunkCluster(t, "expand")
	p := leader.partition("expand", 0)
	produceAcks1(t, c, leader, "expand", 2)
	skipUnlessControllerGrowsISR(t, c, "expand", fs[0])
	fc := dialRaw(t, leader)
	replicaFetch(t, c, fc, leader, fs[0], "expand", 0, -1)
	replicaFetch(t, c, fc, leader, fs[0], "expand", 2, -1)
	testutil.Eventually(t, testWait, func() error {
		st, _ := c.partitionState("expand", 0)
		if !slices.Contains(st.ISR, fs[0]) {
			return fmt.Errorf("controller's ISR %v", st.ISR)
		}
		return nil
	}, "follower %d back in the ISR", fs[0])
	testutil.Eventually(t, testWait, func() bool { return p.hw.Load() == 2 }, "HW at 2 once the ISR is back to min.insync.replicas")
}

// shrunkCluster starts 3 brokers with replica.lag.time.max.ms=400, an
// RF=3 topic with min.insync.replicas=2 whose followers never fetch, and
// waits for the ISR to shrink to the leader.
func shrunkCluster(t *testing.T, topic string) (*testCluster, *Node, []int32) {
	t.Helper()
	c := startCluster(t, 3, map[string]string{"replica.lag.time.max.ms": "400"})
	leader, fs := replTopic(t, c, topic, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")})
	p := leader.partition(topic, 0)
	start := time.Now()
	testutil.Eventually(t, testWait, func() error {
		st, _ := c.partitionState(topic, 0)
		if len(st.ISR) != 1 {
			return fmt.Errorf("ISR %v", st.ISR)
		}
		isr, _, _, under := p.replicationStatus()
		if len(isr) != 1 || !under {
			return fmt.Errorf("leader's ISR %v under %v", isr, under)
		}
		return nil
	}, "ISR shrunk to the leader")
	t.Logf("shrunk after %v (lag 400ms)", time.Since(start))
	return c, leader, fs
}

// skipUnlessControllerGrowsISR skips the rest of a test when the
// controller's planner still refuses every ISR growth (main before the
// controller side of issue 14: INELIGIBLE_REPLICA for any new member);
// the leader's proposal is then reverted, as §1.7 says.
func skipUnlessControllerGrowsISR(t *testing.T, c *testCluster, topic string, add int32) {
	t.Helper()
	var err error
	c.ctl.view(func(st *metadata.State) {
		tt, _ := st.TopicByName(topic)
		pi, _ := st.Partition(tt.ID, 0)
		b, _ := st.Broker(pi.Leader)
		ab, _ := st.Broker(add)
		isr := append(slices.Clone(pi.ISR), add)
		var members []metadata.ISRMember
		for _, id := range pi.ISR {
			mb, _ := st.Broker(id)
			members = append(members, metadata.ISRMember{BrokerID: id, BrokerEpoch: mb.Epoch})
		}
		members = append(members, metadata.ISRMember{BrokerID: add, BrokerEpoch: ab.Epoch})
		_, res := st.PlanAlterPartition(metadata.AlterPartitionRequest{BrokerID: pi.Leader, BrokerEpoch: b.Epoch, TopicID: tt.ID,
			LeaderEpoch: pi.LeaderEpoch, PartitionEpoch: pi.PartitionEpoch, NewISR: isr, NewISRWithEpochs: members})
		err = res.Err
	})
	if errors.Is(err, kerr.IneligibleReplica) {
		t.Skipf("this controller refuses ISR growth (%v): the expand half needs the controller side of issue 14", err)
	}
}
