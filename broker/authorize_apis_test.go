package broker

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

// errorCodes collects every ErrorCode field of a response, at any depth.
func errorCodes(v reflect.Value, out *[]int16) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			errorCodes(v.Elem(), out)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
				*out = append(*out, int16(v.Field(i).Int()))
				continue
			}
			errorCodes(v.Field(i), out)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			errorCodes(v.Index(i), out)
		}
	}
}

// TestAuthorizerRefusesEachAPI sends each authorized API, at the newest
// version served, as User:ANONYMOUS without any ACL (and
// allow.everyone.if.no.acl.found=false), and expects Kafka's error for
// it in every error code the answer carries.
func TestAuthorizerRefusesEachAPI(t *testing.T) {
	n := startNode(t, t.TempDir(), authzOn(nil))
	c := dialRaw(t, n)
	for _, tc := range authzCases(t, n) {
		v := tc.version
		if v < 0 {
			v = apis[tc.req.Key()].max
		}
		tc.req.SetVersion(v)
		var codes []int16
		errorCodes(reflect.ValueOf(c.roundTrip(tc.req)), &codes)
		seen := false
		for _, code := range codes {
			if code == tc.want {
				seen = true
			} else if code != 0 {
				seen = false
				break
			}
		}
		if !seen {
			t.Errorf("%s v%d: codes %v, want %d", tc.name, v, codes, tc.want)
		}
	}
	// Nothing refused changed anything.
	n.view(func(st *metadata.State) {
		if _, ok := st.TopicByName("new"); ok {
			t.Error("a refused CreateTopics created its topic")
		}
		if _, ok := st.TopicByName("t"); !ok {
			t.Error("a refused DeleteTopics deleted its topic")
		}
		if len(st.ACLs()) != 0 {
			t.Error("a refused CreateAcls created an ACL")
		}
	})
}

// TestAuthorizerSuperUserPassesEachAPI: the same requests from a super
// user meet no authorization error.
func TestAuthorizerSuperUserPassesEachAPI(t *testing.T) {
	n := startNode(t, t.TempDir(), authzOn(map[string]string{"super.users": "User:ANONYMOUS"}))
	c := dialRaw(t, n)
	denied := map[int16]bool{kerr.TopicAuthorizationFailed.Code: true, kerr.GroupAuthorizationFailed.Code: true,
		kerr.ClusterAuthorizationFailed.Code: true, kerr.TransactionalIDAuthorizationFailed.Code: true}
	for _, tc := range authzCases(t, n) {
		v := tc.version
		if v < 0 {
			v = apis[tc.req.Key()].max
		}
		tc.req.SetVersion(v)
		var codes []int16
		errorCodes(reflect.ValueOf(c.roundTrip(tc.req)), &codes)
		for _, code := range codes {
			if denied[code] {
				t.Errorf("%s v%d: codes %v", tc.name, v, codes)
			}
		}
	}
}

type authzCase struct {
	name    string
	req     kmsg.Request
	version int16 // -1: the newest served
	want    int16
}

// authzCases are a request of each authorized API and the error Kafka
// answers a principal without ACLs. They create a topic t on n.
func authzCases(t *testing.T, n *Node) []authzCase {
	ctx := testCtx(t)
	if res, err := n.svc.CreateTopics(ctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "t", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil || res[0].Err != nil {
		t.Fatalf("create: %v %v", err, res)
	}
	if !n.waitTopics(ctx, []string{"t"}) {
		t.Fatal("topic not led")
	}
	topicErr, groupErr := kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code
	txnErr, clusterErr := kerr.TransactionalIDAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code
	str := kmsg.StringPtr

	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = 1
	{
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic, pt.TopicID = "t", topicID(t, n, "t")
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = recordBatch(0, "v")
		pt.Partitions = append(pt.Partitions, pp)
		produce.Topics = append(produce.Topics, pt)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID = -1
	{
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "t", topicID(t, n, "t")
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
	}
	follower := kmsg.NewPtrFetchRequest()
	*follower = *fetch
	follower.ReplicaID, follower.ReplicaState.ID = 2, 2
	listOffsets := kmsg.NewPtrListOffsetsRequest()
	listOffsets.ReplicaID = -1
	{
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "t"
		lt.Partitions = append(lt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
		listOffsets.Topics = append(listOffsets.Topics, lt)
	}
	meta := kmsg.NewPtrMetadataRequest()
	{
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = str("t")
		meta.Topics = append(meta.Topics, mt)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "g"
	commit.Generation = -1
	{
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = "t"
		ct.Partitions = append(ct.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
		commit.Topics = append(commit.Topics, ct)
	}
	offFetch := kmsg.NewPtrOffsetFetchRequest()
	{
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g"
		offFetch.Groups = append(offFetch.Groups, g)
	}
	offFetch.Group = "g"
	findGroup := kmsg.NewPtrFindCoordinatorRequest()
	findGroup.CoordinatorKey, findGroup.CoordinatorKeys = "g", []string{"g"}
	findTxn := kmsg.NewPtrFindCoordinatorRequest()
	findTxn.CoordinatorType, findTxn.CoordinatorKey, findTxn.CoordinatorKeys = 1, "tx", []string{"tx"}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis = "g", "consumer", 10000
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g"
	syncG := kmsg.NewPtrSyncGroupRequest()
	syncG.Group = "g"
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "g"
	cgHB := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgHB.Group, cgHB.MemberID, cgHB.RebalanceTimeoutMillis, cgHB.SubscribedTopicNames = "g", "m", 10000, []string{"t"}
	cgHB.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	cgDesc := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgDesc.Groups = []string{"g"}
	descGroups := kmsg.NewPtrDescribeGroupsRequest()
	descGroups.Groups = []string{"g"}
	delGroups := kmsg.NewPtrDeleteGroupsRequest()
	delGroups.Groups = []string{"g"}
	offDelete := kmsg.NewPtrOffsetDeleteRequest()
	offDelete.Group = "g"
	initTxn := kmsg.NewPtrInitProducerIDRequest()
	initTxn.TransactionalID, initTxn.TransactionTimeoutMillis = str("tx"), 10000
	initIdem := kmsg.NewPtrInitProducerIDRequest()
	addParts := kmsg.NewPtrAddPartitionsToTxnRequest()
	addParts.TransactionalID = "tx"
	{
		at := kmsg.NewAddPartitionsToTxnRequestTopic()
		at.Topic, at.Partitions = "t", []int32{0}
		addParts.Topics = append(addParts.Topics, at)
	}
	addPartsV4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	addOffsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	addOffsets.TransactionalID, addOffsets.Group = "tx", "g"
	endTxn := kmsg.NewPtrEndTxnRequest()
	endTxn.TransactionalID = "tx"
	txnCommit := kmsg.NewPtrTxnOffsetCommitRequest()
	txnCommit.TransactionalID, txnCommit.Group = "tx", "g"
	{
		tt := kmsg.NewTxnOffsetCommitRequestTopic()
		tt.Topic = "t"
		tt.Partitions = append(tt.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
		txnCommit.Topics = append(txnCommit.Topics, tt)
	}
	markers := kmsg.NewPtrWriteTxnMarkersRequest()
	{
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = "t", []int32{0}
		m.Topics = append(m.Topics, mt)
		markers.Markers = append(markers.Markers, m)
	}
	createTopics := kmsg.NewPtrCreateTopicsRequest()
	{
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "new", 1, 1
		createTopics.Topics = append(createTopics.Topics, ct)
	}
	deleteTopics := kmsg.NewPtrDeleteTopicsRequest()
	deleteTopics.TopicNames = []string{"t"}
	{
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = str("t")
		deleteTopics.Topics = append(deleteTopics.Topics, dt)
	}
	createParts := kmsg.NewPtrCreatePartitionsRequest()
	{
		ct := kmsg.NewCreatePartitionsRequestTopic()
		ct.Topic, ct.Count = "t", 2
		createParts.Topics = append(createParts.Topics, ct)
	}
	deleteRecords := kmsg.NewPtrDeleteRecordsRequest()
	{
		dt := kmsg.NewDeleteRecordsRequestTopic()
		dt.Topic = "t"
		dt.Partitions = append(dt.Partitions, kmsg.NewDeleteRecordsRequestTopicPartition())
		deleteRecords.Topics = append(deleteRecords.Topics, dt)
	}
	descConfigs := func(typ kmsg.ConfigResourceType, name string) kmsg.Request {
		r := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		r.Resources = append(r.Resources, rr)
		return r
	}
	alterConfigs := kmsg.NewPtrAlterConfigsRequest()
	{
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		alterConfigs.Resources = append(alterConfigs.Resources, rr)
	}
	incAlter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	{
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
		incAlter.Resources = append(incAlter.Resources, rr)
	}
	olfe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	olfe.ReplicaID = -1
	{
		ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
		ot.Topic = "t"
		ot.Partitions = append(ot.Partitions, kmsg.NewOffsetForLeaderEpochRequestTopicPartition())
		olfe.Topics = append(olfe.Topics, ot)
	}
	descProducers := kmsg.NewPtrDescribeProducersRequest()
	{
		dt := kmsg.NewDescribeProducersRequestTopic()
		dt.Topic, dt.Partitions = "t", []int32{0}
		descProducers.Topics = append(descProducers.Topics, dt)
	}
	descTxns := kmsg.NewPtrDescribeTransactionsRequest()
	descTxns.TransactionalIDs = []string{"tx"}
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	{
		dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		dt.Topic = "t"
		dtp.Topics = append(dtp.Topics, dt)
	}
	dtp.ResponsePartitionLimit = 10
	createACLs := kmsg.NewPtrCreateACLsRequest()
	createACLs.Creations = append(createACLs.Creations, kmsg.NewCreateACLsRequestCreation())
	deleteACLs := kmsg.NewPtrDeleteACLsRequest()
	deleteACLs.Filters = append(deleteACLs.Filters, kmsg.NewDeleteACLsRequestFilter())

	return []authzCase{
		{"Produce", produce, -1, topicErr},
		{"Produce v12", produce, 12, topicErr},
		{"Fetch v12", fetch, 12, topicErr},
		{"Fetch", fetch, -1, topicErr},
		{"Fetch follower", follower, -1, topicErr},
		{"ListOffsets", listOffsets, -1, topicErr},
		{"Metadata", meta, -1, topicErr},
		{"OffsetCommit", commit, -1, groupErr},
		{"OffsetFetch", offFetch, -1, groupErr},
		{"OffsetFetch v7", offFetch, 7, groupErr},
		{"FindCoordinator group", findGroup, -1, groupErr},
		{"FindCoordinator txn", findTxn, -1, txnErr},
		{"JoinGroup", join, -1, groupErr},
		{"Heartbeat", hb, -1, groupErr},
		{"SyncGroup", syncG, -1, groupErr},
		{"LeaveGroup", leave, -1, groupErr},
		{"DescribeGroups", descGroups, -1, groupErr},
		{"DeleteGroups", delGroups, -1, groupErr},
		{"OffsetDelete", offDelete, -1, groupErr},
		{"InitProducerId txn", initTxn, -1, txnErr},
		{"InitProducerId idempotent", initIdem, -1, clusterErr},
		{"AddPartitionsToTxn v3", addParts, 3, txnErr},
		{"AddPartitionsToTxn v4", addPartsV4, -1, clusterErr},
		{"AddOffsetsToTxn", addOffsets, -1, txnErr},
		{"EndTxn", endTxn, -1, txnErr},
		{"TxnOffsetCommit", txnCommit, -1, txnErr},
		{"WriteTxnMarkers", markers, -1, clusterErr},
		{"CreateTopics", createTopics, -1, topicErr},
		{"DeleteTopics", deleteTopics, -1, topicErr},
		{"DeleteTopics v5", deleteTopics, 5, topicErr},
		{"CreatePartitions", createParts, -1, topicErr},
		{"DeleteRecords", deleteRecords, -1, topicErr},
		{"DescribeConfigs topic", descConfigs(kmsg.ConfigResourceTypeTopic, "t"), -1, topicErr},
		{"DescribeConfigs broker", descConfigs(kmsg.ConfigResourceTypeBroker, "1"), -1, clusterErr},
		{"AlterConfigs", alterConfigs, -1, topicErr},
		{"IncrementalAlterConfigs broker", incAlter, -1, clusterErr},
		{"OffsetForLeaderEpoch", olfe, -1, topicErr},
		{"DescribeProducers", descProducers, -1, topicErr},
		{"DescribeTransactions", descTxns, -1, txnErr},
		{"DescribeTopicPartitions", dtp, -1, topicErr},
		{"ElectLeaders", kmsg.NewPtrElectLeadersRequest(), -1, clusterErr},
		{"AlterPartitionReassignments", kmsg.NewPtrAlterPartitionAssignmentsRequest(), -1, clusterErr},
		{"ListPartitionReassignments", kmsg.NewPtrListPartitionReassignmentsRequest(), -1, clusterErr},
		{"UnregisterBroker", kmsg.NewPtrUnregisterBrokerRequest(), -1, clusterErr},
		{"DescribeLogDirs", kmsg.NewPtrDescribeLogDirsRequest(), -1, clusterErr},
		{"CreateAcls", createACLs, -1, clusterErr},
		{"DescribeAcls", kmsg.NewPtrDescribeACLsRequest(), -1, clusterErr},
		{"DeleteAcls", deleteACLs, -1, clusterErr},
		{"ConsumerGroupHeartbeat", cgHB, -1, groupErr},
		{"ConsumerGroupDescribe", cgDesc, -1, groupErr},
	}
}
