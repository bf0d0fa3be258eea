package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	dto "github.com/prometheus/client_model/go"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
)

func strp(s string) *string { return &s }

// TestServiceEveryMethodInProcessAndOverClient drives every Service method
// once through the Controller and once through a Client on a follower,
// checking results and the errors that must survive the wire.
func TestServiceEveryMethodInProcessAndOverClient(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	lead := c.leader()
	cl := NewClient(ClientOptions{Addrs: []string{c.follower().Addr()}})
	defer cl.Close()
	epochs := registerBrokers(t, lead, 3, 0)
	for _, tc := range []struct {
		name string
		svc  Service
	}{{"inproc", lead}, {"client", cl}} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.svc
			topic := "svc-" + tc.name
			r := createTopic(t, s, topic, 2, 1)
			if r.Err != nil || r.TopicID == uuid.Nil || r.NumPartitions != 2 {
				t.Fatalf("create: %+v", r)
			}
			// Incremental alter: set retention.ms.
			res, err := s.AlterConfigs(ctx(t), metadata.AlterConfigsRequest{Incremental: true, Resources: []metadata.AlterConfigResource{{
				Type: metadata.ResourceTopic, Name: topic,
				Configs: []metadata.AlterConfigEntry{{Name: metadata.ConfigRetentionMs, Value: strp("60000"), Op: metadata.OpSet}},
			}}})
			if err != nil || len(res) != 1 || res[0].Err != nil {
				t.Fatalf("incremental alter: %v %+v", err, res)
			}
			// Full replace drops retention.ms and sets segment.bytes.
			res, err = s.AlterConfigs(ctx(t), metadata.AlterConfigsRequest{Resources: []metadata.AlterConfigResource{{
				Type: metadata.ResourceTopic, Name: topic,
				Configs: []metadata.AlterConfigEntry{{Name: metadata.ConfigSegmentBytes, Value: strp("1048576")}},
			}}})
			if err != nil || len(res) != 1 || res[0].Err != nil {
				t.Fatalf("full alter: %v %+v", err, res)
			}
			// A bad value is INVALID_CONFIG and changes nothing.
			res, err = s.AlterConfigs(ctx(t), metadata.AlterConfigsRequest{Incremental: true, Resources: []metadata.AlterConfigResource{{
				Type: metadata.ResourceTopic, Name: topic,
				Configs: []metadata.AlterConfigEntry{{Name: metadata.ConfigRetentionMs, Value: strp("soon"), Op: metadata.OpSet}},
			}}})
			if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.InvalidConfig) {
				t.Fatalf("bad config: %v %+v", err, res)
			}
			if !waitFor(testWait, func() bool {
				cfg := lead.State().TopicConfig(topic)
				_, hasRet := cfg[metadata.ConfigRetentionMs]
				return cfg[metadata.ConfigSegmentBytes] == "1048576" && !hasRet
			}) {
				t.Fatalf("configs now %v", lead.State().TopicConfig(topic))
			}
			// Grow to 4 partitions; shrinking is refused.
			pr, err := s.CreatePartitions(ctx(t), metadata.CreatePartitionsRequest{Topics: []metadata.CreatePartitionsTopic{{Name: topic, Count: 4}}})
			if err != nil || len(pr) != 1 || pr[0].Err != nil {
				t.Fatalf("create partitions: %v %+v", err, pr)
			}
			pr, err = s.CreatePartitions(ctx(t), metadata.CreatePartitionsRequest{Topics: []metadata.CreatePartitionsTopic{{Name: topic, Count: 3}}})
			if err != nil || !errors.Is(pr[0].Err, kerr.InvalidPartitions) {
				t.Fatalf("shrink partitions: %v %+v", err, pr)
			}
			if n := len(lead.State().Partitions(r.TopicID)); n != 4 {
				t.Fatalf("%d partitions", n)
			}
			// Remote segment lifecycle, and an illegal jump.
			p0, _ := lead.State().Partition(r.TopicID, 0)
			seg := metadata.RemoteSegmentRecord{
				SegmentID: uuid.New(), TopicID: r.TopicID, Partition: 0, BaseOffset: 0, EndOffset: 99,
				MaxTimestamp: time.Now().UnixMilli(), LeaderEpochs: []metadata.EpochStart{{Epoch: p0.LeaderEpoch, StartOffset: 0}},
				SizeBytes: 4096, State: metadata.CopyStarted, BrokerID: p0.Leader, EventTimestamp: time.Now().UnixMilli(),
				WriterLeaderEpoch: p0.LeaderEpoch,
			}
			if err := s.CommitRemoteSegment(ctx(t), seg); err != nil {
				t.Fatalf("copy started: %v", err)
			}
			seg.State = metadata.DeleteFinished
			if err := s.CommitRemoteSegment(ctx(t), seg); !errors.Is(err, kerr.InvalidRecordState) {
				t.Fatalf("COPY_STARTED -> DELETE_FINISHED: %v, want INVALID_RECORD_STATE", err)
			}
			seg.State = metadata.CopyFinished
			if err := s.CommitRemoteSegment(ctx(t), seg); err != nil {
				t.Fatalf("copy finished: %v", err)
			}
			if err := s.CommitRemoteSegment(ctx(t), seg); err != nil {
				t.Fatalf("copy finished again (idempotent): %v", err)
			}
			segs := lead.State().RemoteSegments(r.TopicID, 0)
			if len(segs) != 1 || segs[0].State != metadata.CopyFinished {
				t.Fatalf("segments %+v", segs)
			}
			// Heartbeat with a stale epoch is refused.
			var id int32 = 101
			if _, err := s.BrokerHeartbeat(ctx(t), metadata.BrokerHeartbeatRequest{BrokerID: id, BrokerEpoch: epochs[id] - 100}); !errors.Is(err, kerr.StaleBrokerEpoch) {
				t.Fatalf("stale heartbeat: %v", err)
			}
			// ElectLeaders: the one replica leads (ELECTION_NOT_NEEDED);
			// an unknown partition; null topics leave out the not needed.
			er, err := s.ElectLeaders(ctx(t), metadata.ElectLeadersRequest{Type: metadata.ElectPreferred,
				Topics: []metadata.ElectLeadersTopic{{Name: topic, Partitions: []int32{0, 9}}}})
			if err != nil || len(er) != 1 || len(er[0].Partitions) != 2 ||
				!errors.Is(er[0].Partitions[0].Err, kerr.ElectionNotNeeded) || !errors.Is(er[0].Partitions[1].Err, kerr.UnknownTopicOrPartition) {
				t.Fatalf("elect leaders: %v %+v", err, er)
			}
			er, err = s.ElectLeaders(ctx(t), metadata.ElectLeadersRequest{Type: metadata.ElectPreferred})
			if err != nil || len(er) == 0 {
				t.Fatalf("elect leaders, null topics: %v %+v", err, er)
			}
			for _, r := range er {
				if len(r.Partitions) != 0 {
					t.Fatalf("elect leaders, null topics: %+v", er)
				}
			}
			// Delete by name, then again: unknown.
			dr, err := s.DeleteTopics(ctx(t), []string{topic}, nil)
			if err != nil || len(dr) != 1 || dr[0].Err != nil || dr[0].TopicID != r.TopicID {
				t.Fatalf("delete: %v %+v", err, dr)
			}
			dr, err = s.DeleteTopics(ctx(t), []string{topic}, nil)
			if err != nil || !errors.Is(dr[0].Err, kerr.UnknownTopicOrPartition) {
				t.Fatalf("delete again: %v %+v", err, dr)
			}
		})
	}
}

// TestControllerNewLeaderGivesBrokersFreshSession: the brokers' sessions
// live only in the old leader's memory; the new leader must not fence them
// at once but give them a full broker.session.timeout.ms. (A leader that
// regains leadership must forget its stale sessions too: that is
// TestLivenessResetGivesFreshSessions.)
func TestControllerNewLeaderGivesBrokersFreshSession(t *testing.T) {
	const session = 800 * time.Millisecond
	c := newCtrlCluster(t, clusterOpts{n: 3, tune: func(cfg *Config) {
		cfg.BrokerSessionTimeout = session
		cfg.BrokerHeartbeatInterval = 50 * time.Millisecond
	}})
	lead := c.leader()
	registerBrokers(t, lead, 1, 0)
	old := lead.ID()
	c.stop(old)
	var others []int32
	for id := range c.ctrls {
		others = append(others, id)
	}
	lead = c.leader(others...)
	elected := time.Now()
	// Nobody heartbeats any more: the broker is fenced, but not before a
	// fresh session has run out on the new leader.
	if !waitFor(testWait, func() bool { b, _ := lead.State().Broker(101); return b.Fenced }) {
		t.Fatal("silent broker never fenced by the new leader")
	}
	if el := time.Since(elected); el < session*3/4 {
		t.Fatalf("new leader fenced the broker %v after election, before a fresh session of %v", el, session)
	}
}

func TestClientRetriesPastDeadAddressAndFollowsHint(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	lead := c.leader()
	dead, err := netListenClose()
	if err != nil {
		t.Fatal(err)
	}
	cl := NewClient(ClientOptions{Addrs: []string{dead, c.follower().Addr()}, RetryBackoff: 5 * time.Millisecond})
	defer cl.Close()
	registerBrokers(t, cl, 1, 0)
	if b, ok := lead.State().Broker(101); !ok || b.Fenced {
		t.Fatalf("broker %+v %v", b, ok)
	}
}

// TestControllerConcurrentDecisionsSeeEachOther: decisions batched into one
// entry are planned in order on a speculative image, so of many concurrent
// creations of one name exactly one wins, and distinct names all succeed
// with distinct ids.
func TestControllerConcurrentDecisionsSeeEachOther(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	lead := c.leader()
	registerBrokers(t, lead, 3, 0)
	const n = 24
	var wg sync.WaitGroup
	same := make([]metadata.CreateTopicResult, n)
	distinct := make([]metadata.CreateTopicResult, n)
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			res, err := lead.CreateTopics(context.Background(), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "contended", NumPartitions: 2, ReplicationFactor: 1}}})
			if err != nil {
				errs <- err
				return
			}
			same[i] = res[0]
		}()
		go func() {
			defer wg.Done()
			res, err := lead.CreateTopics(context.Background(), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: fmt.Sprint("d", i), NumPartitions: 1, ReplicationFactor: 1}}})
			if err != nil {
				errs <- err
				return
			}
			distinct[i] = res[0]
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	wins := 0
	for _, r := range same {
		switch {
		case r.Err == nil:
			wins++
		case !errors.Is(r.Err, kerr.TopicAlreadyExists):
			t.Fatalf("contended create: %v", r.Err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d creations of one name succeeded", wins)
	}
	ids := map[uuid.UUID]bool{}
	for _, r := range distinct {
		if r.Err != nil || ids[r.TopicID] {
			t.Fatalf("distinct create: %+v", r)
		}
		ids[r.TopicID] = true
	}
	st := lead.State()
	if got := len(st.Topics()); got != n+1 {
		t.Fatalf("%d topics, want %d", got, n+1)
	}
	c.waitApplied(st.Offset())
	want, _ := st.Marshal()
	for _, ctl := range c.ctrls {
		if got, _ := ctl.State().Marshal(); !bytes.Equal(got, want) {
			t.Fatalf("controller %d image differs", ctl.ID())
		}
	}
}

// TestDecideBatchPlansOnSpeculativeImage drives one batch directly (the
// decider is idle: nothing else is requested meanwhile): five creations of
// one name and a heartbeat-free registration, planned in order, must see
// each other although none is applied when the next is planned.
func TestDecideBatchPlansOnSpeculativeImage(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	ctl := c.leader()
	registerBrokers(t, ctl, 2, 0)
	var batch []*decision
	results := make([]metadata.CreateTopicResult, 5)
	for i := range results {
		batch = append(batch, &decision{ctx: context.Background(), done: make(chan struct{}),
			plan: func(st *metadata.State) []metadata.Record {
				recs, res := st.PlanCreateTopics(metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "one", NumPartitions: 1, ReplicationFactor: 1}}}, ctl.rng)
				results[i] = res[0]
				return recs
			}})
	}
	ctl.decideBatch(batch)
	wins := 0
	for i, d := range batch {
		<-d.done
		if d.err != nil {
			t.Fatalf("decision %d: %v", i, d.err)
		}
		if d.off != batch[0].off {
			t.Fatalf("decision %d at offset %d, batch at %d: not one entry", i, d.off, batch[0].off)
		}
		if results[i].Err == nil {
			wins++
		} else if !errors.Is(results[i].Err, kerr.TopicAlreadyExists) {
			t.Fatalf("decision %d: %v", i, results[i].Err)
		}
	}
	if wins != 1 || results[0].Err != nil {
		t.Fatalf("%d wins (first: %v), want exactly the first", wins, results[0].Err)
	}
	if _, ok := ctl.State().TopicByName("one"); !ok {
		t.Fatal("topic not applied")
	}
}

// TestControllerFencedLeaderElections: a leader that asks to be fenced
// hands its partitions to the next ISR member; a partition whose ISR is
// the leader alone stays with it, leaderless, unless its topic enables
// unclean.leader.election, where the out-of-sync replica takes over,
// RECOVERING (KIP-704), and the unclean election is counted
// (strata_controller_unclean_leader_elections_total).
func TestControllerFencedLeaderElections(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	ctl := c.leader()
	epochs := registerBrokers(t, ctl, 2, 0)
	clean, unclean, synced := uuid.MustParse("00000000-0000-4000-8000-0000000c1ea2"), uuid.MustParse("00000000-0000-4000-8000-000000d1e7e2"), uuid.MustParse("00000000-0000-4000-8000-0000005e7c0d")
	var recs []metadata.Record
	for _, tp := range []struct {
		name string
		id   uuid.UUID
		isr  []int32
	}{{"clean", clean, []int32{101}}, {"unclean", unclean, []int32{101}}, {"synced", synced, []int32{101, 102}}} {
		recs = append(recs, &metadata.TopicRecord{Name: tp.name, TopicID: tp.id},
			&metadata.PartitionRecord{TopicID: tp.id, Replicas: []int32{101, 102}, ISR: tp.isr, Leader: 101})
	}
	v := "true"
	recs = append(recs, &metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "unclean", Name: metadata.ConfigUncleanLeaderElectionEnable, Value: &v})
	if _, err := ctl.Propose(ctx(t), recs); err != nil {
		t.Fatal(err)
	}
	hb, err := ctl.BrokerHeartbeat(ctx(t), metadata.BrokerHeartbeatRequest{BrokerID: 101, BrokerEpoch: epochs[101], CurrentMetadataOffset: 1 << 40, WantFence: true})
	if err != nil || !hb.IsFenced {
		t.Fatalf("fence 101: %v %+v", err, hb)
	}
	st := ctl.State()
	if p, _ := st.Partition(synced, 0); p.Leader != 102 || !slices.Equal(p.ISR, []int32{102}) || p.LeaderRecoveryState != metadata.LeaderRecovered {
		t.Fatalf("synced topic: %+v, want 102 leading cleanly", p)
	}
	if p, _ := st.Partition(clean, 0); p.Leader != metadata.NoLeader || !slices.Equal(p.ISR, []int32{101}) {
		t.Fatalf("clean topic: %+v, want leader -1 and ISR [101] (102 is out of sync)", p)
	}
	pu, _ := st.Partition(unclean, 0)
	if pu.Leader != 102 || !slices.Equal(pu.ISR, []int32{102}) || pu.LeaderEpoch == 0 || pu.LeaderRecoveryState != metadata.LeaderRecovering {
		t.Fatalf("unclean topic: %+v", pu)
	}
	var m dto.Metric
	if err := ctl.metrics.uncleanElections.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Fatalf("unclean elections counted: %v (%v), want 1", m.GetCounter().GetValue(), err)
	}
}

// TestWireErrorCodes pins the code every error a controller answers with
// is sent as, and what the Client makes of it.
func TestWireErrorCodes(t *testing.T) {
	for _, c := range []struct {
		err     error
		code    int16
		stopped bool
	}{
		{kerr.TopicAlreadyExists, 36, false},
		{fmt.Errorf("x: %w", kerr.InvalidReplicationFactor), 38, false},
		{&NotControllerError{LeaderID: -1}, 41, false},
		{fmt.Errorf("controller: proposal: %w (%w)", kerr.RequestTimedOut, context.DeadlineExceeded), 7, false},
		{context.DeadlineExceeded, -1, false},
		{context.Canceled, -1, false},
		{ErrStopped, -1, true},
		{fmt.Errorf("x: %w", ErrStopped), -1, true},
		{ErrProtocol, -1, false},
		{ErrNotLeader, -1, false},
		{&RemoteError{Code: 87, Msg: "remote"}, 87, false},
		{errors.New("plain"), -1, false},
	} {
		w := toWireErr(c.err)
		if w.Code != c.code || w.Stopped != c.stopped || w.Msg != c.err.Error() {
			t.Errorf("%v: on the wire %+v, want code %d stopped %v", c.err, w, c.code, c.stopped)
		}
		back := fromWireErr(w)
		var ke *kerr.Error
		if c.stopped {
			if !errors.Is(back, ErrStopped) {
				t.Errorf("%v: came back as %v", c.err, back)
			}
		} else if !errors.As(back, &ke) || ke.Code != c.code {
			t.Errorf("%v: came back as %v (%v)", c.err, back, ke)
		}
	}
}

// TestControllerControlledShutdownThroughTheRPC: a broker heartbeating
// WantShutDown over the network (a Client on a follower, forwarded to the
// leader) is told ShouldShutDown once the image has it leading nothing and
// in no ISR: its leaderships went to the next ISR member, it is fenced and
// in controlled shutdown, and later heartbeats keep telling it to shut
// down. The same broker re-registering after an unclean shutdown
// (PreviousBrokerEpoch not its epoch) stays out of the ELR it had joined.
func TestControllerControlledShutdownThroughTheRPC(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	lead := c.leader()
	cl := NewClient(ClientOptions{Addrs: []string{c.follower().Addr()}})
	defer cl.Close()
	epochs := registerBrokers(t, cl, 3, 0)
	res, err := cl.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{
		{Name: "cs", NumPartitions: 3, ReplicationFactor: 3, Configs: map[string]string{metadata.ConfigMinInsyncReplicas: "3"}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("create: %v %v", err, res)
	}
	id := res[0].TopicID
	hb, err := cl.BrokerHeartbeat(ctx(t), metadata.BrokerHeartbeatRequest{BrokerID: 102, BrokerEpoch: epochs[102], CurrentMetadataOffset: 1 << 40, WantShutDown: true})
	if err != nil || !hb.ShouldShutDown || !hb.IsFenced {
		t.Fatalf("want-shutdown heartbeat: %v %+v", err, hb)
	}
	st := lead.State()
	for _, p := range st.Partitions(id) {
		if p.Leader == 102 || p.Leader == metadata.NoLeader || slices.Contains(p.ISR, 102) || !slices.Equal(p.ELR, []int32{102}) {
			t.Fatalf("after controlled shutdown of 102: %+v (want another leader, 102 out of the ISR, in the ELR: ISR below min ISR 3)", p)
		}
	}
	if b, _ := st.Broker(102); !b.InControlledShutdown || !b.Fenced {
		t.Fatalf("broker 102: %+v", b)
	}
	hb, err = cl.BrokerHeartbeat(ctx(t), metadata.BrokerHeartbeatRequest{BrokerID: 102, BrokerEpoch: epochs[102], CurrentMetadataOffset: 1 << 40})
	if err != nil || !hb.ShouldShutDown || !hb.IsFenced {
		t.Fatalf("later heartbeat: %v %+v", err, hb)
	}
	// Restarted uncleanly (no marker: PreviousBrokerEpoch -1): out of
	// every ELR, remembered in the last known ELR.
	if _, err := cl.RegisterBroker(ctx(t), metadata.RegisterBrokerRequest{BrokerID: 102, IncarnationID: uuid.New(), PreviousBrokerEpoch: -1,
		Listeners: []metadata.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9002, SecurityProtocol: "PLAINTEXT"}}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range lead.State().Partitions(id) {
		if slices.Contains(p.ELR, 102) || !slices.Contains(p.LastKnownELR, 102) {
			t.Fatalf("after an unclean restart of 102: %+v", p)
		}
	}
}
