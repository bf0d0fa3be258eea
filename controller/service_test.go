package controller

import (
	"errors"
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
			r := createTopic(t, s, topic, 2, 2)
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
