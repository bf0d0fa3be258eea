package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/storage/vfs"
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
		v      string
		static int32 // server.properties' min.insync.replicas
		rf     int
		want   int
	}{{"", 1, 3, 1}, {"2", 1, 3, 2}, {"3", 1, 1, 1}, {"5", 1, 3, 3}, {"bad", 1, 3, 1},
		{"", 2, 3, 2}, {"1", 2, 3, 1}, {"", 3, 2, 2}, {"bad", 2, 3, 2}} {
		cfg := map[string]string{}
		if c.v != "" {
			cfg[metadata.ConfigMinInsyncReplicas] = c.v
		}
		if got := effectiveMinISR(cfg, c.static, c.rf); got != c.want {
			t.Errorf("effectiveMinISR(%q, static %d, rf %d) = %d, want %d", c.v, c.static, c.rf, got, c.want)
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

// handCluster starts three brokers whose followers the tests play by
// hand: a stopped broker stays registered and unfenced (no controlled
// shutdown, a long broker.session.timeout.ms), so its replicas keep their
// place in the ISR while nothing fetches for them but the test.
func handCluster(t testing.TB, extra map[string]string) *testCluster {
	props := map[string]string{"broker.session.timeout.ms": "120000", "controlled.shutdown.enable": "false"}
	for k, v := range extra {
		props[k] = v
	}
	return startCluster(t, 3, props)
}

// replTopic creates topic with one partition on replicas (broker 1, which
// cannot be stopped, first: it leads), waits until broker 1 leads it, then
// stops the other replicas' brokers so the test fetches for them by hand.
// It returns the leader and the stopped followers with their broker epochs.
func replTopic(t testing.TB, c *testCluster, topic string, replicas []int32, configs map[string]*string) (leader *Node, followers []int32, epochs map[int32]int64) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(testWait / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, v
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), c.client())
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s on %v: %v / %v", topic, replicas, err, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	leader = c.node(1)
	testutil.Eventually(t, testWait, func() error {
		st, ok := c.partitionState(topic, 0)
		if !ok || st.Leader != 1 {
			return fmt.Errorf("leader %+v", st)
		}
		p := leader.partition(topic, 0)
		if p == nil || !p.leader.Load() || p.epochStartOffset() < 0 {
			return fmt.Errorf("broker 1 does not lead it yet")
		}
		return nil
	}, "%s led by broker 1", topic)
	epochs = map[int32]int64{}
	for _, r := range replicas[1:] {
		followers = append(followers, r)
		epochs[r] = c.node(r).brokerEpoch.Load()
		c.stop(r)
	}
	return leader, followers, epochs
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

// replicaFetch sends a follower fetch of replica id (broker epoch epoch)
// from leader's partition and returns its only partition.
func replicaFetch(t *testing.T, rc *rawConn, leader *Node, id int32, epoch int64, topic string, offset int64, lastFetchedEpoch int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	p := leader.partition(topic, 0)
	req := followerFetch(id, epoch, topic, p.topicID, offset, p.leaderEpoch.Load(), lastFetchedEpoch, 0)
	return fetchPart0(t, rc.roundTrip(req))
}

// produceAcks1 writes count records with acks=1 (the leader's append
// alone) and returns the leader's LEO.
func produceAcks1(t *testing.T, leader *Node, topic string, count int) int64 {
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
	c := handCluster(t, nil)
	leader, fs, ep := replTopic(t, c, "hw", []int32{1, 2, 3}, nil)
	p := leader.partition("hw", 0)
	leo := produceAcks1(t, leader, "hw", 3)
	if leo != 3 || p.hw.Load() != 0 {
		t.Fatalf("after acks=1 produces: LEO %d HW %d, want 3 and 0 (no follower has them)", leo, p.hw.Load())
	}
	rc := dialRaw(t, leader)
	got := replicaFetch(t, rc, leader, fs[0], ep[fs[0]], "hw", 0, -1)
	if got.ErrorCode != 0 || len(got.RecordBatches) == 0 || got.HighWatermark != 0 {
		t.Fatalf("follower fetch at 0: err %d, %d bytes, HW %d", got.ErrorCode, len(got.RecordBatches), got.HighWatermark)
	}
	// A consumer reads nothing above the HW, and (HW, LEO] is not out of range.
	cons := fetchPart0(t, rc.roundTrip(fetchReq(12, "hw", [16]byte{}, 0, 1, 0, 1, 1<<20)))
	if cons.ErrorCode != 0 || len(cons.RecordBatches) != 0 || cons.HighWatermark != 0 {
		t.Fatalf("consumer at 1: err %d, %d bytes, HW %d", cons.ErrorCode, len(cons.RecordBatches), cons.HighWatermark)
	}
	replicaFetch(t, rc, leader, fs[0], ep[fs[0]], "hw", 3, -1)
	if p.hw.Load() != 0 {
		t.Fatalf("HW %d with one follower at 3 and the other unknown", p.hw.Load())
	}
	got = replicaFetch(t, rc, leader, fs[1], ep[fs[1]], "hw", 2, -1)
	if p.hw.Load() != 2 || got.HighWatermark != 2 {
		t.Fatalf("HW %d (answered %d), want 2 = min(3, 3, 2)", p.hw.Load(), got.HighWatermark)
	}
	replicaFetch(t, rc, leader, fs[1], ep[fs[1]], "hw", 3, -1)
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
	c := handCluster(t, nil)
	leader, fs, ep := replTopic(t, c, "checks", []int32{1, 2}, nil)
	p := leader.partition("checks", 0)
	produceAcks1(t, leader, "checks", 2)
	outsider := int32(3)
	p.repMu.Lock()
	leo0 := p.rep.followers[fs[0]].leo
	p.repMu.Unlock()
	epoch := p.leaderEpoch.Load()
	rc := dialRaw(t, leader)
	fetch := func(id int32, brokerEpoch int64, offset int64, leaderEpoch, lastFetched int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		return fetchPart0(t, rc.roundTrip(followerFetch(id, brokerEpoch, "checks", p.topicID, offset, leaderEpoch, lastFetched, 0)))
	}
	be := ep[fs[0]]
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
	if leo != leo0 {
		t.Fatalf("refused fetches moved the follower's LEO from %d to %d", leo0, leo)
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
	if leo != leo0 || p.hw.Load() != 0 {
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
	c := handCluster(t, nil)
	leader, fs, ep := replTopic(t, c, "park", []int32{1, 2, 3}, nil)
	p := leader.partition("park", 0)
	produceAcks1(t, leader, "park", 2)
	rcB := dialRaw(t, leader)
	replicaFetch(t, rcB, leader, fs[1], ep[fs[1]], "park", 1, -1)
	rcA := dialRaw(t, leader)
	req := followerFetch(fs[0], ep[fs[0]], "park", p.topicID, 2, p.leaderEpoch.Load(), -1, 15_000)
	corr := rcA.send(req)
	waitParked(t, leader, "park", 0)
	if p.hw.Load() != 1 {
		t.Fatalf("HW %d, want 1 (follower B at 1)", p.hw.Load())
	}
	start := time.Now()
	replicaFetch(t, rcB, leader, fs[1], ep[fs[1]], "park", 2, -1)
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
	c := handCluster(t, nil)
	leader, fs, ep := replTopic(t, c, "acks", []int32{1, 2, 3}, nil)
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
		replicaFetch(t, fc, leader, id, ep[id], "acks", 0, -1)
		replicaFetch(t, fc, leader, id, ep[id], "acks", 3, -1)
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
	// Leadership lost while waiting: NOT_LEADER_OR_FOLLOWER, at once.
	r4 := produceReq(9, "acks", [16]byte{}, 0, -1, recordBatch(time.Now().UnixMilli(), "e"))
	r4.TimeoutMillis = 15_000
	c4 := rc.send(r4)
	testutil.Eventually(t, testWait, func() bool {
		p.hwMu.Lock()
		defer p.hwMu.Unlock()
		return len(p.hwWait) == 1
	}, "the produce waiting for the HW")
	p.resignLeadership() // what reconcile does before makeFollower
	got, body, err := rc.readFrame()
	if err != nil || got != c4 {
		t.Fatalf("after resigning: %v (correlation %d want %d)", err, got, c4)
	}
	if code, _ := produceErr(t, decodeResponse(t, r4, body)); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("acks=all after leadership lost: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}
}

// acks=all's answer once the HW covers the batch (Kafka's
// checkEnoughReplicasReachOffset): NOT_ENOUGH_REPLICAS_AFTER_APPEND when
// the maximal ISR is below the effective min ISR by then.
func TestAcksAllResult(t *testing.T) {
	p := &partition{}
	if err := p.acksAllResult(); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("not led: %v", err)
	}
	p.rep = rs([]int32{1, 2}, 2, nil, nil)
	if err := p.acksAllResult(); err != nil {
		t.Fatalf("ISR at min: %v", err)
	}
	p.rep.isr, p.rep.pending = []int32{1}, []int32{1, 3}
	if err := p.acksAllResult(); err != nil {
		t.Fatalf("maximal ISR (pending expand) at min: %v", err)
	}
	if err := p.acksAllCheck(); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("before appending, the committed ISR counts: %v", err)
	}
	p.rep.pending = nil
	if err := p.acksAllResult(); !errors.Is(err, kerr.NotEnoughReplicasAfterAppend) {
		t.Fatalf("ISR below min: %v", err)
	}
}

// Followers that never fetch leave the ISR after replica.lag.time.max.ms
// once they are behind (within 1.5x); with min.insync.replicas=2 the HW then stops (strict min
// ISR) and acks=all is refused before appending (NOT_ENOUGH_REPLICAS).
func TestISRShrinkAndStrictMinISR(t *testing.T) {
	_, leader, _, _ := shrunkCluster(t, "shrink")
	p := leader.partition("shrink", 0)
	rc := dialRaw(t, leader)
	req := produceReq(9, "shrink", [16]byte{}, 0, -1, recordBatch(time.Now().UnixMilli(), "x"))
	if code, _ := produceErr(t, rc.roundTrip(req)); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all under min ISR: %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(code))
	}
	if p.log.LogEndOffset() != 1 {
		t.Fatal("NOT_ENOUGH_REPLICAS appended the batch")
	}
	produceAcks1(t, leader, "shrink", 2)
	if p.hw.Load() != 0 {
		t.Fatalf("HW %d moved while the ISR is below min.insync.replicas", p.hw.Load())
	}
	// Both followers out: one shrink or two (each AlterPartition is one).
	if n := counterValue(t, leader.metrics.isrShrinks); n < 1 || n > 2 {
		t.Fatalf("isr_shrinks_total %v", n)
	}
}

// A follower fetching up to the leader's LEO (>= HW, >= this epoch's
// start) is proposed back into the ISR (AlterPartition v3, its broker
// epoch); once committed the HW moves again.
func TestISRExpandOnceCaughtUp(t *testing.T) {
	c, leader, fs, ep := shrunkCluster(t, "expand")
	p := leader.partition("expand", 0)
	produceAcks1(t, leader, "expand", 2)
	fc := dialRaw(t, leader)
	replicaFetch(t, fc, leader, fs[0], ep[fs[0]], "expand", 0, -1)
	replicaFetch(t, fc, leader, fs[0], ep[fs[0]], "expand", 3, -1)
	testutil.Eventually(t, testWait, func() error {
		st, _ := c.partitionState("expand", 0)
		if !slices.Contains(st.ISR, fs[0]) {
			return fmt.Errorf("controller's ISR %v", st.ISR)
		}
		return nil
	}, "follower %d back in the ISR", fs[0])
	testutil.Eventually(t, testWait, func() bool { return p.hw.Load() == 3 }, "HW at 3 once the ISR is back to min.insync.replicas")
	// The counter moves when the leader handles its AlterPartition's
	// answer, which can come after the metadata carrying the new ISR
	// (failed once in CI reading it at once).
	testutil.Eventually(t, testWait, func() bool { return counterValue(t, leader.metrics.isrExpands) >= 1 }, "isr_expands_total counted")
	if n := counterValue(t, leader.metrics.isrExpands); n != 1 {
		t.Fatalf("isr_expands_total %v, want 1", n)
	}
}

// shrunkCluster starts 3 brokers with replica.lag.time.max.ms=400, an
// RF=3 topic with min.insync.replicas=2 whose followers never fetch, and
// waits for the ISR to shrink to the leader.
func shrunkCluster(t *testing.T, topic string) (*testCluster, *Node, []int32, map[int32]int64) {
	t.Helper()
	c := handCluster(t, map[string]string{"replica.lag.time.max.ms": "400"})
	leader, fs, ep := replTopic(t, c, topic, []int32{1, 2, 3}, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")})
	p := leader.partition(topic, 0)
	// A follower at the leader's LEO is in sync however long ago it
	// fetched (an idle partition keeps its ISR): append, so they are behind.
	produceAcks1(t, leader, topic, 1)
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
	return c, leader, fs, ep
}

// makeLeader runs on every metadata delta: one that changes nothing for
// the partition keeps the followers' state and the HW, while a new
// leader's epoch entry (epoch, LEO) was written before any append in it
// (KIP-279).
func TestMakeLeaderRecordsEpochFirstAndIsIdempotent(t *testing.T) {
	c := handCluster(t, nil)
	leader, fs, ep := replTopic(t, c, "idem", []int32{1, 2, 3}, nil)
	p := leader.partition("idem", 0)
	if e, start, ok := p.log.LeaderEpochs().Latest(); !ok || e != p.leaderEpoch.Load() || start != 0 {
		t.Fatalf("epoch cache before any append: %d %d %v, want (%d, 0)", e, start, ok, p.leaderEpoch.Load())
	}
	produceAcks1(t, leader, "idem", 2)
	rc := dialRaw(t, leader)
	replicaFetch(t, rc, leader, fs[0], ep[fs[0]], "idem", 2, -1)
	before := leader.appliedOffset()
	adm := kadm.NewClient(c.client())
	if r, err := adm.CreateTopic(testCtx(t), 1, 1, nil, "other"); err != nil || r.Err != nil {
		t.Fatalf("create other: %v %v", err, r.Err)
	}
	testutil.Eventually(t, testWait, func() bool { return leader.metadataOffset() > before }, "the leader reconciled a later delta")
	p.repMu.Lock()
	leo := p.rep.followers[fs[0]].leo
	p.repMu.Unlock()
	if leo != 2 {
		t.Fatalf("a delta that changed nothing reset follower %d's LEO to %d", fs[0], leo)
	}
}

// A partition opened over a log starts at the HW the log's
// replication-offset-checkpoint recorded, capped at the log end; the
// leader's HW is what the checkpoint gets.
func TestPartitionStartsAtTheCheckpointedHighWatermark(t *testing.T) {
	c := handCluster(t, map[string]string{"replica.high.watermark.checkpoint.interval.ms": "50"})
	leader, fs, ep := replTopic(t, c, "ckpt", []int32{1, 2, 3}, nil)
	p := leader.partition("ckpt", 0)
	produceAcks1(t, leader, "ckpt", 3)
	rc := dialRaw(t, leader)
	replicaFetch(t, rc, leader, fs[0], ep[fs[0]], "ckpt", 2, -1)
	replicaFetch(t, rc, leader, fs[1], ep[fs[1]], "ckpt", 2, -1)
	if p.hw.Load() != 2 {
		t.Fatalf("HW %d, want 2", p.hw.Load())
	}
	dir := filepath.Dir(p.log.Dir())
	testutil.Eventually(t, testWait, func() error {
		hws, err := checkpoint.ReadOffsets(vfs.Default, filepath.Join(dir, storage.ReplicationOffsetCheckpointFile))
		if err != nil || hws[checkpoint.TopicPartition{Topic: "ckpt", Partition: 0}] != 2 {
			return fmt.Errorf("checkpoint %v %v", hws, err)
		}
		return nil
	}, "HW 2 in replication-offset-checkpoint")
	if np := newPartition("ckpt", p.topicID, 0, p.log); np.hw.Load() != 2 {
		t.Fatalf("a partition reopened over the log starts at HW %d, want the checkpointed 2 (not the LEO 3)", np.hw.Load())
	}
}

// BenchmarkFollowerFetch is a follower's fetch of 1 MiB from the leader
// over loopback: the leader's checks, state update and HW computation, and
// the records sent with sendfile (zero copy: allocations do not grow with
// the bytes). The request is encoded once and the response read into a
// reused buffer, so allocs/op are the broker's.
func BenchmarkFollowerFetch(b *testing.B) {
	c := handCluster(b, nil)
	leader, fs, ep := replTopic(b, c, "bench", []int32{1, 2}, nil)
	follower := fs[0]
	p := leader.partition("bench", 0)
	val := string(make([]byte, 16<<10))
	rc := dialRaw(b, leader)
	for range 64 {
		req := produceReq(9, "bench", [16]byte{}, 0, 1, recordBatch(time.Now().UnixMilli(), val))
		if code := rc.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			b.Fatal(kerr.ErrorForCode(code))
		}
	}
	req := followerFetch(follower, ep[follower], "bench", p.topicID, 0, p.leaderEpoch.Load(), -1, 0)
	wire := frameRequest(req, 1)
	buf := make([]byte, 2<<20)
	b.ReportAllocs()
	b.SetBytes(int64(p.log.Size()))
	b.ResetTimer()
	for range b.N {
		if _, err := rc.nc.Write(wire); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(rc.nc, buf[:4]); err != nil {
			b.Fatal(err)
		}
		size := int(binary.BigEndian.Uint32(buf[:4]))
		if _, err := io.ReadFull(rc.nc, buf[:size]); err != nil {
			b.Fatal(err)
		}
		if size < 1<<19 {
			b.Fatalf("response of %d bytes", size)
		}
	}
}

// End to end with real followers (replica_fetcher.go): acks=all produces
// complete once both followers have fetched them, the HW reaches the LEO,
// and a consumer reads everything. Then a follower stops: after
// replica.lag.time.max.ms it leaves the ISR and acks=all goes on with
// min.insync.replicas=2. The acks=all latency is logged.
func TestAcksAllWithRealFollowers(t *testing.T) {
	// A follower that dies (no controlled shutdown) and is not fenced yet.
	c := startCluster(t, 3, map[string]string{"replica.lag.time.max.ms": "1000", "broker.session.timeout.ms": "120000",
		"controlled.shutdown.enable": "false"})
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(testWait / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "e2e", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Replicas = []int32{1, 2, 3}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	mc := kmsg.NewCreateTopicsRequestTopicConfig()
	mc.Name, mc.Value = "min.insync.replicas", kmsg.StringPtr("2")
	rt.Configs = append(rt.Configs, mc)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(testCtx(t), c.client()); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %v", err, resp)
	}
	cl := c.client(kgo.DefaultProduceTopic("e2e"), kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func(from, n int) []time.Duration {
		t.Helper()
		var lat []time.Duration
		for i := from; i < from+n; i++ {
			start := time.Now()
			if err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatalf("acks=all produce %d: %v", i, err)
			}
			lat = append(lat, time.Since(start))
		}
		return lat
	}
	lat := produce(0, 200)
	slices.Sort(lat)
	t.Logf("acks=all RF=3, one record at a time: p50 %v p99 %v max %v", lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	p := c.node(1).partition("e2e", 0)
	if hw, leo := p.hw.Load(), p.log.LogEndOffset(); hw != 200 || leo != 200 {
		t.Fatalf("leader HW %d LEO %d, want 200 and 200", hw, leo)
	}
	for _, id := range []int32{2, 3} {
		fp := c.node(id).partition("e2e", 0)
		testutil.Eventually(t, testWait, func() bool { return fp.log.LogEndOffset() == 200 }, "follower %d at 200", id)
	}
	cons := c.client(kgo.ConsumeTopics("e2e"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	for seen < 200 {
		fs := cons.PollFetches(testCtx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		seen += fs.NumRecords()
	}
	// A stopped follower is out of sync only once the leader's LEO moves
	// past it: the first acks=all produce after the stop waits for the
	// shrink (replica.lag.time.max.ms to 1.5x that), the next ones do not.
	c.stop(3)
	lat = produce(200, 20)
	t.Logf("first acks=all produce after a follower stopped: %v (lag 1s); the next: %v", lat[0], lat[1])
	st, _ := c.partitionState("e2e", 0)
	if slices.Contains(st.ISR, 3) || lat[0] < 500*time.Millisecond {
		t.Fatalf("ISR %v, first produce after the stop took %v: want 3 shrunk out after about the lag", st.ISR, lat[0])
	}
	if hw := p.hw.Load(); hw != 220 {
		t.Fatalf("HW %d with ISR {1,2}, want 220", hw)
	}
}

// A new leader whose HW is below its epoch's start offset (it holds
// records the previous leader may not have committed) answers clients'
// ListOffsets with OFFSET_NOT_AVAILABLE (v5+; LEADER_NOT_AVAILABLE before)
// until the followers bring the HW there; replicas get the LEO.
func TestListOffsetsNotAvailableUntilTheHWReachesTheEpochStart(t *testing.T) {
	c := handCluster(t, nil)
	leader, fs, ep := replTopic(t, c, "lo", []int32{1, 2, 3}, nil)
	p := leader.partition("lo", 0)
	produceAcks1(t, leader, "lo", 3)
	// What reconcile does for a new leader epoch (as after an election
	// that kept this broker, with the HW behind).
	st, _ := c.partitionState("lo", 0)
	leader.makeLeader(p, wantedPartition{topic: "lo", id: p.topicID, index: 0, leader: true, epoch: st.LeaderEpoch + 1,
		leaderID: 1, replicas: st.Replicas, isr: st.ISR, partitionEpoch: st.PartitionEpoch})
	if e, start, _ := p.log.LeaderEpochs().Latest(); e != st.LeaderEpoch+1 || start != 3 || p.epochStartOffset() != 3 {
		t.Fatalf("new epoch entry (%d, %d), epoch start %d; want (%d, 3)", e, start, p.epochStartOffset(), st.LeaderEpoch+1)
	}
	rc := dialRaw(t, leader)
	list := func(version int16, replica int32) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(version)
		req.ReplicaID = replica
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "lo"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp, lp.CurrentLeaderEpoch = -1, -1
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		return rc.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	if r := list(7, -1); r.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("v7 client: %v, want OFFSET_NOT_AVAILABLE", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := list(4, -1); r.ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("v4 client: %v, want LEADER_NOT_AVAILABLE", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := list(7, fs[0]); r.ErrorCode != 0 || r.Offset != 3 {
		t.Fatalf("replica: %v offset %d, want the LEO 3", kerr.ErrorForCode(r.ErrorCode), r.Offset)
	}
	fc := dialRaw(t, leader)
	for _, id := range fs {
		req := followerFetch(id, ep[id], "lo", p.topicID, 3, st.LeaderEpoch+1, -1, 0)
		if got := fetchPart0(t, fc.roundTrip(req)); got.ErrorCode != 0 {
			t.Fatalf("follower %d: %v", id, kerr.ErrorForCode(got.ErrorCode))
		}
	}
	if r := list(7, -1); r.ErrorCode != 0 || r.Offset != 3 {
		t.Fatalf("once the HW reached the epoch start: %v offset %d", kerr.ErrorForCode(r.ErrorCode), r.Offset)
	}
}

// A follower in a fetch session (KIP-227; Kafka's followers use them):
// the session's partition carries the fetch offset, LastFetchedEpoch and
// log start the follower last sent, and an incremental fetch that names
// none of them still updates the follower's state from the session.
func TestFollowerFetchInASession(t *testing.T) {
	c := handCluster(t, nil)
	leader, fs, ep := replTopic(t, c, "sess", []int32{1, 2}, nil)
	p := leader.partition("sess", 0)
	produceAcks1(t, leader, "sess", 3)
	rc := dialRaw(t, leader)
	epoch := p.leaderEpoch.Load()
	full := followerFetch(fs[0], ep[fs[0]], "sess", p.topicID, 3, epoch, epoch, 0)
	full.SessionEpoch = 0
	resp := rc.roundTrip(full).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID == 0 || p.hw.Load() != 3 {
		t.Fatalf("full fetch: err %d session %d HW %d", resp.ErrorCode, resp.SessionID, p.hw.Load())
	}
	produceAcks1(t, leader, "sess", 2)
	inc := followerFetch(fs[0], ep[fs[0]], "sess", p.topicID, 5, epoch, epoch, 0)
	inc.SessionID, inc.SessionEpoch = resp.SessionID, 1
	if r := rc.roundTrip(inc).(*kmsg.FetchResponse); r.ErrorCode != 0 || p.hw.Load() != 5 {
		t.Fatalf("incremental fetch at 5: err %d HW %d", r.ErrorCode, p.hw.Load())
	}
	// Nothing named: the session's entry (offset 5, epoch) is fetched again.
	idle := followerFetch(fs[0], ep[fs[0]], "sess", p.topicID, 0, epoch, epoch, 0)
	idle.Topics = nil
	idle.SessionID, idle.SessionEpoch = resp.SessionID, 2
	if r := rc.roundTrip(idle).(*kmsg.FetchResponse); r.ErrorCode != 0 {
		t.Fatalf("incremental fetch naming nothing: err %d", r.ErrorCode)
	}
	p.repMu.Lock()
	leo := p.rep.followers[fs[0]].leo
	p.repMu.Unlock()
	if leo != 5 {
		t.Fatalf("follower LEO %d after the session fetches, want 5", leo)
	}
}

// An idempotent producer's retry of a batch the log has but the ISR has
// not acknowledged (appended with acks=1 here) is not appended again and
// answers acks=all only once the original is committed: before, it times
// out; after the followers fetch it, success at the original offset.
func TestAcksAllDuplicateWaitsForTheOriginal(t *testing.T) {
	c := handCluster(t, nil)
	leader, fs, ep := replTopic(t, c, "dup", []int32{1, 2, 3}, nil)
	p := leader.partition("dup", 0)
	rc := dialRaw(t, leader)
	id := initProducerID(t, rc)
	b := producerBatch(id, 0, 0, "a", "b")
	if code, off := produceErr(t, rc.roundTrip(produceReq(9, "dup", [16]byte{}, 0, 1, slices.Clone(b)))); code != 0 || off != 0 {
		t.Fatalf("acks=1: %v at %d", kerr.ErrorForCode(code), off)
	}
	retry := produceReq(9, "dup", [16]byte{}, 0, -1, slices.Clone(b))
	retry.TimeoutMillis = 200
	if code, _ := produceErr(t, rc.roundTrip(retry)); code != kerr.RequestTimedOut.Code {
		t.Fatalf("duplicate of an uncommitted batch: %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(code))
	}
	retry = produceReq(9, "dup", [16]byte{}, 0, -1, slices.Clone(b))
	retry.TimeoutMillis = 15_000
	corr := rc.send(retry)
	testutil.Eventually(t, testWait, func() bool {
		p.hwMu.Lock()
		defer p.hwMu.Unlock()
		return len(p.hwWait) == 1
	}, "the duplicate waiting for the HW")
	fc := dialRaw(t, leader)
	for _, f := range fs {
		replicaFetch(t, fc, leader, f, ep[f], "dup", 2, -1)
	}
	got, body, err := rc.readFrame()
	if err != nil || got != corr {
		t.Fatalf("duplicate's answer: %v (correlation %d want %d)", err, got, corr)
	}
	if code, off := produceErr(t, decodeResponse(t, retry, body)); code != 0 || off != 0 || p.log.LogEndOffset() != 2 {
		t.Fatalf("duplicate once committed: %v at %d, LEO %d; want success at 0, LEO 2", kerr.ErrorForCode(code), off, p.log.LogEndOffset())
	}
}

// KIP-704: a replica elected uncleanly leads a RECOVERING partition; it
// reports RECOVERED at once (nothing to recover without transactions), and
// only then may a follower that caught up join its ISR.
func TestUncleanLeaderReportsRecoveredThenExpands(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "200",
		"controlled.shutdown.enable": "false"})
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(testWait / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "unclean", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Replicas = []int32{2, 3}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	uc := kmsg.NewCreateTopicsRequestTopicConfig()
	uc.Name, uc.Value = "unclean.leader.election.enable", kmsg.StringPtr("true")
	rt.Configs = append(rt.Configs, uc)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(testCtx(t), c.client()); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %v", err, resp)
	}
	state := func(cond func(st metadata.PartitionInfo) bool, what string) metadata.PartitionInfo {
		t.Helper()
		var st metadata.PartitionInfo
		testutil.Eventually(t, testWait, func() error {
			st, _ = c.partitionState("unclean", 0)
			if !cond(st) {
				return fmt.Errorf("%+v", st)
			}
			return nil
		}, "%s", what)
		return st
	}
	state(func(st metadata.PartitionInfo) bool { return st.Leader == 2 && len(st.ISR) == 2 }, "led by 2 with ISR {2,3}")
	c.stop(3) // fenced after the session timeout: out of the ISR
	state(func(st metadata.PartitionInfo) bool { return !slices.Contains(st.ISR, 3) }, "3 out of the ISR")
	produceAcks1(t, c.node(2), "unclean", 2) // records 3 never had
	c.stop(2)
	c.start(3) // the only live replica, out of sync: an unclean election
	st := state(func(st metadata.PartitionInfo) bool { return st.Leader == 3 }, "3 elected uncleanly")
	t.Logf("elected: %+v", st)
	state(func(st metadata.PartitionInfo) bool { return st.LeaderRecoveryState == metadata.LeaderRecovered }, "RECOVERED reported by the new leader")
	c.start(2)
	state(func(st metadata.PartitionInfo) bool { return st.Leader == 3 && len(st.ISR) == 2 }, "2 back in the ISR of the recovered partition")
}

// A server.properties min.insync.replicas (no topic or dynamic config)
// governs acks=all: with the ISR down to the leader, a produce is refused
// with NOT_ENOUGH_REPLICAS before anything is appended, as Kafka does.
func TestStaticMinInsyncReplicasRefusesAcksAll(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	cl := c.client()
	createReplicatedTopic(t, cl, "static-min-isr", 3, 3, nil)
	part := int32(-1) // the partition broker 1 (the one that cannot stop) leads
	testutil.Eventually(t, testWait, func() bool {
		for i := int32(0); i < 3; i++ {
			if st, _ := c.partitionState("static-min-isr", i); st.Leader == 1 && len(st.ISR) == 3 {
				part = i
				return true
			}
		}
		return false
	}, "broker 1 leads a partition with a full ISR")
	c.stop(2) // controlled shutdown: out of the ISR at once
	c.stop(3)
	testutil.Eventually(t, testWait, func() bool {
		st, _ := c.partitionState("static-min-isr", part)
		return len(st.ISR) == 1
	}, "ISR down to the leader")
	p := c.node(1).partition("static-min-isr", part)
	leo := p.log.LogEndOffset()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "static-min-isr", topicID(t, c.node(1), "static-min-isr") // v13+ names topics by id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = part
	rp.Records = recordBatch(time.Now().UnixMilli(), "refused")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR [1] and static min.insync.replicas=2: error %d, want NOT_ENOUGH_REPLICAS", code)
	}
	if got := p.log.LogEndOffset(); got != leo {
		t.Fatalf("refused produce appended: LEO %d -> %d", leo, got)
	}
}
