package broker

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

// dtpPage is one DescribeTopicPartitions response, flattened to
// "topic/partition" (or "topic!CODE" for a topic error) and the cursor.
func dtpPage(t *testing.T, c *rawConn, topics []string, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor) ([]string, string) {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, name := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	req.ResponsePartitionLimit = limit
	req.Cursor = cursor
	resp := c.roundTrip(req).(*kmsg.DescribeTopicPartitionsResponse)
	var got []string
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			got = append(got, fmt.Sprintf("%s!%s", *rt.Topic, kerr.ErrorForCode(rt.ErrorCode).(*kerr.Error).Message))
			continue
		}
		for _, p := range rt.Partitions {
			got = append(got, fmt.Sprintf("%s/%d", *rt.Topic, p.Partition))
		}
	}
	next := ""
	if resp.NextCursor != nil {
		next = fmt.Sprintf("%s/%d", resp.NextCursor.Topic, resp.NextCursor.Partition)
	}
	return got, next
}

// TestDescribeTopicPartitionsPagesWithTheCursor walks every topic two,
// then three partitions at a time and checks Kafka's paging: name order,
// a cursor into a topic cut short or at the start of the next one, the
// limit capped by max.request.partition.size.limit and at least 1, and
// the errors for missing or illegal names and bad cursors.
func TestDescribeTopicPartitionsPagesWithTheCursor(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"auto.create.topics.enable": "false", "max.request.partition.size.limit": "3"})
	adm := newAdmin(t, n)
	createTopic(t, adm, "b", 2, nil)
	createTopic(t, adm, "a", 3, nil)
	createTopic(t, adm, "c", 1, nil)
	c := dialRaw(t, n)
	cur := func(s string) *kmsg.DescribeTopicPartitionsRequestCursor {
		topic, part, _ := strings.Cut(s, "/")
		var p int32
		fmt.Sscan(part, &p)
		return &kmsg.DescribeTopicPartitionsRequestCursor{Topic: topic, Partition: p}
	}
	type page struct {
		topics []string
		limit  int32
		cursor string
		want   string // partitions, then "| cursor"
	}
	for _, tc := range []page{
		{nil, 2, "", "a/0 a/1 | a/2"},
		{nil, 2, "a/2", "a/2 b/0 | b/1"},
		{nil, 2, "b/1", "b/1 c/0 | "},
		{nil, 3, "", "a/0 a/1 a/2 | b/0"},   // a full topic, then the next one's start
		{nil, 100, "", "a/0 a/1 a/2 | b/0"}, // capped at max.request.partition.size.limit
		{nil, 0, "", "a/0 | a/1"},           // at least one
		{nil, 3, "b/5", "c/0 | "},           // past the end of the cursor's topic
		{[]string{"c", "a", "c"}, 2000, "", "a/0 a/1 a/2 | c/0"},
		{[]string{"c", "zz", "bad name!"}, 2000, "", "bad name!!INVALID_TOPIC_EXCEPTION c/0 zz!UNKNOWN_TOPIC_OR_PARTITION | "},
		{[]string{"a", "b"}, 2, "b/0", "b/0 b/1 | "},
		{[]string{"a", "c"}, 2, "b/0", "a!INVALID_REQUEST c!INVALID_REQUEST | "}, // the cursor's topic is not named
		{[]string{"a"}, 2, "a/-1", "a!INVALID_REQUEST | "},
	} {
		var cursor *kmsg.DescribeTopicPartitionsRequestCursor
		if tc.cursor != "" {
			cursor = cur(tc.cursor)
		}
		got, next := dtpPage(t, c, tc.topics, tc.limit, cursor)
		if s := strings.Join(got, " ") + " | " + next; s != tc.want {
			t.Errorf("topics %v limit %d cursor %q: got %q, want %q", tc.topics, tc.limit, tc.cursor, s, tc.want)
		}
	}

	// Following the cursors from the start visits every partition once.
	var all []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for range 10 {
		got, next := dtpPage(t, c, nil, 1, cursor)
		all = append(all, got...)
		if next == "" {
			break
		}
		cursor = cur(next)
	}
	if s := strings.Join(all, " "); s != "a/0 a/1 a/2 b/0 b/1 c/0" {
		t.Fatalf("paged one at a time: %s", s)
	}
}

// TestDescribeTopicPartitionsReportsReplicationState: on three brokers,
// one stopped and fenced, each partition carries the controller's
// replicas, ISR and leader epoch, the fenced broker as offline replica,
// and leader -1 without an error where it led (Kafka answers no error
// here, unlike Metadata's LEADER_NOT_AVAILABLE). ApiVersions lists key 75.
func TestDescribeTopicPartitionsReportsReplicationState(t *testing.T) {
	c := startCluster(t, 3, fastFencing)
	c.createTopicRF("dtp", 3, 3)
	c.createTopicAssigned("dtp-solo", [][]int32{{3}})
	c.stop(3)
	c.waitFenced(3)
	c.waitCaughtUp(2)
	raw := dialRaw(t, c.node(2))

	av := raw.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	if !slices.ContainsFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
		return k.ApiKey == 75 && k.MinVersion == 0 && k.MaxVersion == 0
	}) {
		t.Errorf("ApiVersions does not list DescribeTopicPartitions v0")
	}

	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = "dtp"
	req.Topics = append(req.Topics, rt)
	resp := raw.roundTrip(req).(*kmsg.DescribeTopicPartitionsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("response %+v", resp.Topics)
	}
	if resp.Topics[0].TopicID != topicID(t, c.node(2), "dtp") || resp.Topics[0].AuthorizedOperations != topicOperations {
		t.Errorf("topic id %x ops %d", resp.Topics[0].TopicID, resp.Topics[0].AuthorizedOperations)
	}
	leaderless := 0
	for _, p := range resp.Topics[0].Partitions {
		st, _ := c.partitionState("dtp", p.Partition)
		what := fmt.Sprintf("partition %d", p.Partition)
		if p.ErrorCode != 0 || p.LeaderID != st.Leader || p.LeaderEpoch != st.LeaderEpoch ||
			!slices.Equal(p.Replicas, st.Replicas) || !slices.Equal(p.ISR, st.ISR) {
			t.Errorf("%s: %+v, controller has %+v", what, p, st)
		}
		if !slices.Equal(p.OfflineReplicas, []int32{3}) {
			t.Errorf("%s: offline replicas %v, want [3]", what, p.OfflineReplicas)
		}
		if p.EligibleLeaderReplicas == nil || p.LastKnownELR == nil {
			t.Errorf("%s: null ELR lists", what)
		}
		if st.Leader == metadata.NoLeader {
			leaderless++
		}
	}
	if leaderless != 0 {
		t.Errorf("%d partitions of dtp lost their leader: the controller elects from the ISR", leaderless)
	}
	// dtp-solo's only replica is gone: leader -1, and no error (Kafka's
	// DescribeTopicPartitions, unlike Metadata, answers NONE here).
	rt.Topic = "dtp-solo"
	req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{rt}
	resp = raw.roundTrip(req).(*kmsg.DescribeTopicPartitionsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("dtp-solo: %+v", resp.Topics)
	}
	if p := resp.Topics[0].Partitions[0]; p.LeaderID != -1 || p.ErrorCode != 0 || !slices.Equal(p.Replicas, []int32{3}) || !slices.Equal(p.OfflineReplicas, []int32{3}) {
		t.Errorf("dtp-solo-0: %+v, want leader -1, no error, replicas and offline [3]", p)
	}
}

// TestDescribeTopicPartitionsCarriesELR: the KIP-966 lists of the image
// reach the response as they are.
func TestDescribeTopicPartitionsCarriesELR(t *testing.T) {
	st := metadata.NewState()
	for i, id := range []int32{1, 2, 3} {
		if err := st.Apply(int64(i+1), &metadata.RegisterBrokerRecord{BrokerID: id, BrokerEpoch: int64(10 + i), Fenced: id == 3}); err != nil {
			t.Fatal(err)
		}
	}
	rs := &replicaStatus{st: st, self: 1}
	p := metadata.PartitionInfo{TopicID: uuid.New(), Partition: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1},
		Leader: 1, LeaderEpoch: 7, ELR: []int32{2}, LastKnownELR: []int32{3}}
	got := describePartition(rs, "t", p)
	if got.Partition != 4 || got.LeaderID != 1 || got.LeaderEpoch != 7 || !slices.Equal(got.ISR, []int32{1}) ||
		!slices.Equal(got.EligibleLeaderReplicas, []int32{2}) || !slices.Equal(got.LastKnownELR, []int32{3}) ||
		!slices.Equal(got.OfflineReplicas, []int32{3}) {
		t.Fatalf("described %+v", got)
	}
	// A leader the image does not know is no leader.
	p.Leader = 9
	if got := describePartition(rs, "t", p); got.LeaderID != -1 || got.ErrorCode != 0 {
		t.Fatalf("unregistered leader described as %d (code %d)", got.LeaderID, got.ErrorCode)
	}
}
