package controller

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
)

// TestServiceCreateTopicWithGivenIDAndRemovedTopicNames drives a restore's
// controller calls through the Controller and through a Client on a
// follower (JSON over loopback TCP, forwarded to the leader): a topic is
// created under a given ID; the ID is refused while live and while its
// removed topic's remote segments remain, during which every replica still
// knows the removed topic's name; once the last segment is DELETE_FINISHED
// the name is forgotten and a restore under the ID succeeds.
func TestServiceCreateTopicWithGivenIDAndRemovedTopicNames(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	lead := c.leader()
	cl := NewClient(ClientOptions{Addrs: []string{c.follower().Addr()}})
	defer cl.Close()
	registerBrokers(t, lead, 3, 0)
	for i, tc := range []struct {
		name string
		svc  Service
	}{{"inproc", lead}, {"client", cl}} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.svc
			id := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "restore-%d", i))
			topic := "restore-" + tc.name
			create := func(name string, validate bool) metadata.CreateTopicResult {
				t.Helper()
				res, err := s.CreateTopics(ctx(t), metadata.CreateTopicsRequest{ValidateOnly: validate, Topics: []metadata.CreateTopic{{
					Name: name, NumPartitions: 2, ReplicationFactor: 1, TopicID: id,
				}}})
				if err != nil || len(res) != 1 {
					t.Fatalf("create %s: %v %+v", name, err, res)
				}
				return res[0]
			}
			names := func(name string, exists, known bool) {
				t.Helper()
				c.waitApplied(lead.State().Offset())
				for nid, ctl := range c.ctrls {
					n, e, k := ctl.State().TopicNameByID(id)
					if n != name || e != exists || k != known {
						t.Fatalf("controller %d: TopicNameByID = (%q, %t, %t), want (%q, %t, %t)", nid, n, e, k, name, exists, known)
					}
				}
			}
			if r := create(topic, true); r.Err != nil || r.TopicID != uuid.Nil {
				t.Fatalf("validate-only: %+v", r)
			}
			if _, ok := lead.State().TopicByName(topic); ok {
				t.Fatal("validate-only created the topic")
			}
			if r := create(topic, false); r.Err != nil || r.TopicID != id {
				t.Fatalf("create under %s: %+v", id, r)
			}
			names(topic, true, true)
			if r := create(topic+"-again", false); !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				t.Fatalf("live id: %v, want TOPIC_ALREADY_EXISTS", r.Err)
			}
			seg := metadata.RemoteSegmentRecord{SegmentID: uuid.NewSHA1(id, []byte("seg")), TopicID: id, Partition: 1,
				BaseOffset: 0, EndOffset: 99, SizeBytes: 1024, State: metadata.CopyStarted, BrokerID: 1,
				WriterLeaderEpoch: metadata.UnknownLeaderEpoch} // registered as a restore does: broker 1 does not lead
			if err := s.CommitRemoteSegment(ctx(t), seg); err != nil {
				t.Fatal(err)
			}
			del, err := s.DeleteTopics(ctx(t), []string{topic}, nil)
			if err != nil || del[0].Err != nil {
				t.Fatalf("delete: %v %+v", err, del)
			}
			names(topic, false, true)
			if r := create(topic, false); !errors.Is(r.Err, kerr.InvalidRequest) {
				t.Fatalf("id with remote data left: %v, want INVALID_REQUEST", r.Err)
			}
			for _, st := range []metadata.RemoteSegmentState{metadata.DeleteStarted, metadata.DeleteFinished} {
				seg.State = st
				if err := s.CommitRemoteSegment(ctx(t), seg); err != nil {
					t.Fatal(err)
				}
			}
			names("", false, false)
			if r := create(topic, false); r.Err != nil || r.TopicID != id {
				t.Fatalf("restore: %+v", r)
			}
			names(topic, true, true)
		})
	}
}

// TestControllerFollowerLearnsRemovedTopicNameFromSnapshot: a follower
// that catches up by snapshot, not by replaying the removal, still knows
// a removed topic's name while its remote segments remain.
func TestControllerFollowerLearnsRemovedTopicNameFromSnapshot(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3, disk: true, tune: func(cfg *Config) {
		cfg.SnapshotEntries = 10
		cfg.SnapshotCatchUpEntries = 2
	}})
	lead := c.leader()
	f := c.follower().ID()
	c.stop(f)
	registerBrokers(t, lead, 3, 0)
	r := createTopic(t, lead, "doomed", 1, 1)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	seg := metadata.RemoteSegmentRecord{SegmentID: uuid.NewSHA1(r.TopicID, []byte("seg")), TopicID: r.TopicID,
		EndOffset: 9, State: metadata.CopyStarted, BrokerID: 1, WriterLeaderEpoch: metadata.UnknownLeaderEpoch}
	if err := lead.CommitRemoteSegment(ctx(t), seg); err != nil {
		t.Fatal(err)
	}
	if del, err := lead.DeleteTopics(ctx(t), nil, []uuid.UUID{r.TopicID}); err != nil || del[0].Err != nil {
		t.Fatalf("delete: %v %+v", err, del)
	}
	for i := range 15 { // enough entries to compact the removal away
		if r := createTopic(t, lead, fmt.Sprint("filler-", i), 1, 1); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	c.start(f)
	c.waitApplied(lead.State().Offset())
	if c.ctrls[f].Status().SnapshotIndex == 0 {
		t.Fatal("follower caught up without a snapshot")
	}
	if n, e, k := c.ctrls[f].State().TopicNameByID(r.TopicID); n != "doomed" || e || !k {
		t.Fatalf("follower: TopicNameByID = (%q, %t, %t), want (doomed, false, true)", n, e, k)
	}
	a, _ := lead.State().Marshal()
	b, _ := c.ctrls[f].State().Marshal()
	if !bytes.Equal(a, b) {
		t.Fatal("follower image differs from the leader's")
	}
}
