package broker

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/controller/metadata"
)

// shareAuthzCases are a request of each share-state RPC (CLUSTER_ACTION,
// inter-broker) and share-group offsets API (on the group) with the
// error Kafka answers a principal without ACLs.
func shareAuthzCases(t *testing.T, n *Node) []authzCase {
	ctx := testCtx(t)
	if res, err := n.svc.CreateTopics(ctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "t", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil || res[0].Err != nil {
		t.Fatalf("create: %v %v", err, res)
	}
	if !n.waitTopics(ctx, []string{"t"}) {
		t.Fatal("topic not led")
	}
	id := topicID(t, n, "t")
	clusterErr, groupErr := kerr.ClusterAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code

	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorType, find.CoordinatorKeys = 2, []string{shareCoordinatorKey(share.Key{Group: "g", TopicID: id})}
	ini := kmsg.NewPtrInitializeShareGroupStateRequest()
	ini.GroupID = "g"
	{
		rt := kmsg.NewInitializeShareGroupStateRequestTopic()
		rt.TopicID, rt.Partitions = id, []kmsg.InitializeShareGroupStateRequestTopicPartition{kmsg.NewInitializeShareGroupStateRequestTopicPartition()}
		ini.Topics = append(ini.Topics, rt)
	}
	read := kmsg.NewPtrReadShareGroupStateRequest()
	read.GroupID = "g"
	{
		rt := kmsg.NewReadShareGroupStateRequestTopic()
		rt.TopicID, rt.Partitions = id, []kmsg.ReadShareGroupStateRequestTopicPartition{kmsg.NewReadShareGroupStateRequestTopicPartition()}
		read.Topics = append(read.Topics, rt)
	}
	write := kmsg.NewPtrWriteShareGroupStateRequest()
	write.GroupID = "g"
	{
		rt := kmsg.NewWriteShareGroupStateRequestTopic()
		rt.TopicID, rt.Partitions = id, []kmsg.WriteShareGroupStateRequestTopicPartition{kmsg.NewWriteShareGroupStateRequestTopicPartition()}
		write.Topics = append(write.Topics, rt)
	}
	del := kmsg.NewPtrDeleteShareGroupStateRequest()
	del.GroupID = "g"
	{
		rt := kmsg.NewDeleteShareGroupStateRequestTopic()
		rt.TopicID, rt.Partitions = id, []kmsg.DeleteShareGroupStateRequestTopicPartition{kmsg.NewDeleteShareGroupStateRequestTopicPartition()}
		del.Topics = append(del.Topics, rt)
	}
	sum := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	sum.GroupID = "g"
	{
		rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
		rt.TopicID, rt.Partitions = id, []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()}
		sum.Topics = append(sum.Topics, rt)
	}
	desc := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	{
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = "g"
		desc.Groups = append(desc.Groups, rg)
	}
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "g"
	delOff := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	delOff.GroupID = "g"
	return []authzCase{
		{"FindCoordinator share", find, -1, clusterErr},
		{"InitializeShareGroupState", ini, -1, clusterErr},
		{"ReadShareGroupState", read, -1, clusterErr},
		{"WriteShareGroupState", write, -1, clusterErr},
		{"DeleteShareGroupState", del, -1, clusterErr},
		{"ReadShareGroupStateSummary", sum, -1, clusterErr},
		{"DescribeShareGroupOffsets", desc, -1, groupErr},
		{"AlterShareGroupOffsets", alter, -1, groupErr},
		{"DeleteShareGroupOffsets", delOff, -1, groupErr},
	}
}

// TestShareAPIsAuthorized: with an authorizer, a principal without ACLs
// is refused each share-state RPC (CLUSTER_ACTION, as Kafka's KafkaApis)
// and each share-group offsets API (GROUP); a super user is not.
func TestShareAPIsAuthorized(t *testing.T) {
	for _, super := range []bool{false, true} {
		extra := map[string]string{}
		if super {
			extra["super.users"] = "User:ANONYMOUS"
		}
		for k, v := range shareProps {
			extra[k] = v
		}
		n := startNode(t, t.TempDir(), authzOn(extra))
		c := dialRaw(t, n)
		for _, tc := range shareAuthzCases(t, n) {
			tc.req.SetVersion(apis[tc.req.Key()].max)
			var codes []int16
			errorCodes(reflect.ValueOf(c.roundTrip(tc.req)), &codes)
			refused := false
			for _, code := range codes {
				if code == tc.want {
					refused = true
				}
			}
			if refused != !super {
				t.Errorf("super user %v, %s: codes %v (refusal %d)", super, tc.name, codes, tc.want)
			}
		}
	}
}
