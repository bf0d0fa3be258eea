package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/internal/testutil"
)

func produceReq(version int16, topic string, id [16]byte, partition int32, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks, req.TimeoutMillis = acks, 5000
	t := kmsg.NewProduceRequestTopic()
	t.Topic, t.TopicID = topic, id
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition, p.Records = partition, records
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func fetchReq(version int16, topic string, id [16]byte, partition int32, offset int64, maxWaitMs, minBytes, partMax int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWaitMs, minBytes, 50<<20
	req.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, id
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = partition, offset, partMax
	p.CurrentLeaderEpoch = -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func produceErr(t *testing.T, resp kmsg.Response) (int16, int64) {
	t.Helper()
	pr := resp.(*kmsg.ProduceResponse)
	p := pr.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

func fetchPart0(t *testing.T, resp kmsg.Response) kmsg.FetchResponseTopicPartition {
	t.Helper()
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 {
		t.Fatalf("fetch error %d", fr.ErrorCode)
	}
	return fr.Topics[0].Partitions[0]
}

// logBytes returns the stored record bytes of a partition up to its HW.
func logBytes(t *testing.T, n *Node, topic string, part int32) []byte {
	t.Helper()
	p := n.partition(topic, part)
	v, err := p.log.Read(0, 1<<30, p.hw.Load())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	b, err := v.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAPIVersionsAdvertisesTheRegistry(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	c := dialRaw(t, n)
	for v := int16(0); v <= kmsg.NewPtrApiVersionsRequest().MaxVersion(); v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		want := map[int16][2]int16{
			0:  {0, kmsg.NewPtrProduceRequest().MaxVersion()}, // served from v3; v0 advertised as Kafka does (KAFKA-18659)
			1:  {4, kmsg.NewPtrFetchRequest().MaxVersion()},
			2:  {1, kmsg.NewPtrListOffsetsRequest().MaxVersion()},
			3:  {0, kmsg.NewPtrMetadataRequest().MaxVersion()},
			8:  {0, kmsg.NewPtrOffsetCommitRequest().MaxVersion()},
			9:  {0, kmsg.NewPtrOffsetFetchRequest().MaxVersion()},
			10: {0, kmsg.NewPtrFindCoordinatorRequest().MaxVersion()},
			11: {0, kmsg.NewPtrJoinGroupRequest().MaxVersion()},
			12: {0, kmsg.NewPtrHeartbeatRequest().MaxVersion()},
			13: {0, kmsg.NewPtrLeaveGroupRequest().MaxVersion()},
			14: {0, kmsg.NewPtrSyncGroupRequest().MaxVersion()},
			15: {0, kmsg.NewPtrDescribeGroupsRequest().MaxVersion()},
			16: {0, kmsg.NewPtrListGroupsRequest().MaxVersion()},
			17: {0, 1}, // SaslHandshake
			18: {0, kmsg.NewPtrApiVersionsRequest().MaxVersion()},
			19: {0, kmsg.NewPtrCreateTopicsRequest().MaxVersion()},
			20: {0, kmsg.NewPtrDeleteTopicsRequest().MaxVersion()},
			21: {0, kmsg.NewPtrDeleteRecordsRequest().MaxVersion()},
			22: {0, kmsg.NewPtrInitProducerIDRequest().MaxVersion()},
			23: {2, kmsg.NewPtrOffsetForLeaderEpochRequest().MaxVersion()},
			24: {0, kmsg.NewPtrAddPartitionsToTxnRequest().MaxVersion()},
			25: {0, kmsg.NewPtrAddOffsetsToTxnRequest().MaxVersion()},
			26: {0, 4}, // EndTxn v5 is transaction version 2 (KIP-890 part 2): not built
			27: {0, 1}, // v2 is KIP-890 part 2, not built
			28: {0, 4}, // TxnOffsetCommit v5 is transaction version 2: not built
			29: {0, kmsg.NewPtrDescribeACLsRequest().MaxVersion()},
			30: {0, kmsg.NewPtrCreateACLsRequest().MaxVersion()},
			31: {0, kmsg.NewPtrDeleteACLsRequest().MaxVersion()},
			32: {0, kmsg.NewPtrDescribeConfigsRequest().MaxVersion()},
			33: {0, kmsg.NewPtrAlterConfigsRequest().MaxVersion()},
			35: {0, kmsg.NewPtrDescribeLogDirsRequest().MaxVersion()},
			36: {0, kmsg.NewPtrSASLAuthenticateRequest().MaxVersion()},
			37: {0, kmsg.NewPtrCreatePartitionsRequest().MaxVersion()},
			42: {0, kmsg.NewPtrDeleteGroupsRequest().MaxVersion()},
			43: {0, kmsg.NewPtrElectLeadersRequest().MaxVersion()},
			44: {0, kmsg.NewPtrIncrementalAlterConfigsRequest().MaxVersion()},
			45: {0, kmsg.NewPtrAlterPartitionAssignmentsRequest().MaxVersion()},
			46: {0, kmsg.NewPtrListPartitionReassignmentsRequest().MaxVersion()},
			47: {0, kmsg.NewPtrOffsetDeleteRequest().MaxVersion()},
			48: {0, kmsg.NewPtrDescribeClientQuotasRequest().MaxVersion()},
			49: {0, kmsg.NewPtrAlterClientQuotasRequest().MaxVersion()},
			50: {0, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest().MaxVersion()},
			51: {0, kmsg.NewPtrAlterUserSCRAMCredentialsRequest().MaxVersion()},
			60: {0, kmsg.NewPtrDescribeClusterRequest().MaxVersion()},
			61: {0, 0},
			64: {0, kmsg.NewPtrUnregisterBrokerRequest().MaxVersion()},
			65: {0, kmsg.NewPtrDescribeTransactionsRequest().MaxVersion()},
			66: {0, 1}, // ListTransactions v2 (the id pattern filter) is not built
			68: {0, 1}, // KIP-848, group.coordinator.rebalance.protocols lists consumer by default
			69: {0, 1},
			75: {0, 0},
			76: {1, 1}, // share groups (KIP-932), on by default as in Kafka 4.2
			77: {1, 1},
			78: {1, 2},
			79: {1, 2},
			83: {0, 0}, // share-state RPCs (share_coordinator.go)
			84: {0, 0},
			85: {0, 1},
			86: {0, 0},
			87: {0, 1},
			90: {0, 1}, // share-group offsets admin (90-92)
			91: {0, 0},
			92: {0, 0},
		}
		if len(got) != len(want) {
			t.Fatalf("v%d: advertised %v, want %v", v, got, want)
		}
		for k, r := range want {
			if got[k] != r {
				t.Errorf("v%d: key %d advertised %v, want %v", v, k, got[k], r)
			}
		}
	}
}

func TestAPIVersionsUnknownVersionGetsV0Fallback(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	c := dialRaw(t, n)
	// Version 127 of ApiVersions, with a body this broker cannot know.
	b := []byte{0, 0, 0, 0, 0, 18, 0, 127, 0, 0, 0, 7, 0, 0, 0, 0xde, 0xad}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := c.nc.Write(b); err != nil {
		t.Fatal(err)
	}
	corr, body, err := c.readFrame()
	if err != nil || corr != 7 {
		t.Fatalf("corr %d err %v", corr, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("fallback is not a v0 response: %v", err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 ||
		resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != kmsg.NewPtrApiVersionsRequest().MaxVersion() {
		t.Fatalf("fallback %+v", resp)
	}
}

// TestConnBadInputClosesConnection sends each kind of bad frame on its own
// connection: the broker closes it, keeps serving others, and the log is
// unchanged.
func TestConnBadInputClosesConnection(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"socket.request.max.bytes": "1048576"})
	createTopic(t, newAdmin(t, n), "bad", 1, nil)
	good := dialRaw(t, n)
	if code, _ := produceErr(t, good.roundTrip(produceReq(9, "bad", [16]byte{}, 0, -1, recordBatch(1000, "a", "b")))); code != 0 {
		t.Fatalf("good produce: %d", code)
	}
	before := logBytes(t, n, "bad", 0)

	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 1)
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	sized := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	goodProduce := frameRequest(produceReq(7, "bad", [16]byte{}, 0, -1, recordBatch(1000, "c")), 1)
	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"unknown api key", sized(header(999, 0))},
		{"api key the broker does not serve", sized(header(9, 5))}, // OffsetFetch: not registered yet
		{"produce v2 (before record batch v2)", sized(append(header(0, 2), 0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0))},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xf0}},
		{"size below a header", sized([]byte{0, 1, 0})},
		{"oversized", binary.BigEndian.AppendUint32(nil, 512<<20)},
		{"truncated body", goodProduce[:len(goodProduce)-9]},
		{"body cut inside a field", sized(append(header(3, 12), 0, 0))},
		{"client id longer than frame", sized(append(header(18, 0)[:8], 0x7f, 0xff))},
		{"bad tag section", sized(append(header(3, 12), 5, 1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			c := dialRaw(t, n)
			if _, err := c.nc.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if tc.name == "truncated body" {
				c.nc.(interface{ CloseWrite() error }).CloseWrite()
			}
			c.expectClosed()
			runtime.ReadMemStats(&ms1)
			if grew := ms1.TotalAlloc - ms0.TotalAlloc; grew > 64<<20 {
				t.Errorf("allocated %d MiB for a rejected frame", grew>>20)
			}
		})
	}
	if after := logBytes(t, n, "bad", 0); !bytes.Equal(before, after) {
		t.Fatal("log changed by bad input")
	}
	// The node still serves.
	if code, off := produceErr(t, good.roundTrip(produceReq(9, "bad", [16]byte{}, 0, -1, recordBatch(1000, "d")))); code != 0 || off != 2 {
		t.Fatalf("produce after bad input: code %d offset %d", code, off)
	}
}

func TestProduceRejectsBadBatchesAndLeavesLogUnchanged(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"auto.create.topics.enable": "false"})
	createTopic(t, newAdmin(t, n), "crc", 1, nil)
	c := dialRaw(t, n)
	flipped := recordBatch(1000, "x", "y")
	flipped[len(flipped)-1] ^= 0xff
	badMagic := recordBatch(1000, "x")
	badMagic[16] = 1
	for _, tc := range []struct {
		name string
		req  *kmsg.ProduceRequest
		want *kerr.Error
	}{
		{"bad crc", produceReq(9, "crc", [16]byte{}, 0, -1, flipped), kerr.CorruptMessage},
		{"bad magic", produceReq(9, "crc", [16]byte{}, 0, 1, badMagic), kerr.UnsupportedForMessageFormat},
		{"truncated batch", produceReq(9, "crc", [16]byte{}, 0, 1, recordBatch(1000, "x")[:40]), kerr.CorruptMessage},
		{"acks 2", produceReq(9, "crc", [16]byte{}, 0, 2, recordBatch(1000, "x")), kerr.InvalidRequiredAcks},
		{"unknown topic", produceReq(9, "nope", [16]byte{}, 0, 1, recordBatch(1000, "x")), kerr.UnknownTopicOrPartition},
		{"illegal topic name", produceReq(9, "a/b", [16]byte{}, 0, 1, recordBatch(1000, "x")), kerr.InvalidTopicException},
		{"unknown partition", produceReq(9, "crc", [16]byte{}, 7, 1, recordBatch(1000, "x")), kerr.UnknownTopicOrPartition},
		{"unknown topic id", produceReq(13, "", [16]byte{1}, 0, 1, recordBatch(1000, "x")), kerr.UnknownTopicID},
	} {
		code, _ := produceErr(t, c.roundTrip(tc.req))
		if code != tc.want.Code {
			t.Errorf("%s: error %d, want %s", tc.name, code, tc.want.Message)
		}
	}
	if p := n.partition("crc", 0); p.log.LogEndOffset() != 0 {
		t.Fatalf("log end offset %d after rejected batches", p.log.LogEndOffset())
	}
	if code, off := produceErr(t, c.roundTrip(produceReq(9, "crc", [16]byte{}, 0, -1, recordBatch(1000, "ok")))); code != 0 || off != 0 {
		t.Fatalf("good batch after bad ones: code %d offset %d", code, off)
	}
}

func TestProduceAcksZeroSendsNoResponse(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "acks0", 1, nil)
	c := dialRaw(t, n)
	c.send(produceReq(9, "acks0", [16]byte{}, 0, 0, recordBatch(1000, "fire", "forget")))
	av := kmsg.NewPtrApiVersionsRequest()
	resp := c.roundTrip(av) // fails if the produce had been answered first
	if resp.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
		t.Fatal("api versions failed")
	}
	if got := n.partition("acks0", 0).log.LogEndOffset(); got != 2 {
		t.Fatalf("log end offset %d, want 2", got)
	}
	// An acks=0 request that fails closes the connection.
	c.send(produceReq(9, "acks0", [16]byte{}, 5, 0, recordBatch(1000, "x")))
	c.expectClosed()
}

// TestProduceFetchEveryVersion produces with every Produce version and
// reads back with every Fetch version: flexible and not, by name and by
// topic id. The fetched bytes are the stored bytes exactly, which proves
// the splice framing around sendfile regions for each version.
func TestProduceFetchEveryVersion(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "versions", 1, nil)
	id := topicID(t, n, "versions")
	c := dialRaw(t, n)
	maxProduce := kmsg.NewPtrProduceRequest().MaxVersion()
	for v := int16(3); v <= maxProduce; v++ {
		name := "versions"
		if v >= 13 {
			name = ""
		}
		code, off := produceErr(t, c.roundTrip(produceReq(v, name, id, 0, -1, recordBatch(int64(v)*1000, "p", string(rune('a'+v))))))
		if code != 0 || off != int64(v-3)*2 {
			t.Fatalf("produce v%d: code %d offset %d", v, code, off)
		}
	}
	stored := logBytes(t, n, "versions", 0)
	maxFetch := kmsg.NewPtrFetchRequest().MaxVersion()
	for v := int16(4); v <= maxFetch; v++ {
		name := "versions"
		if v >= 13 {
			name = ""
		}
		p := fetchPart0(t, c.roundTrip(fetchReq(v, name, id, 0, 0, 0, 0, 1<<20)))
		if p.ErrorCode != 0 || p.HighWatermark != int64(maxProduce-2)*2 {
			t.Fatalf("fetch v%d: code %d hw %d", v, p.ErrorCode, p.HighWatermark)
		}
		if !bytes.Equal(p.RecordBatches, stored) {
			t.Fatalf("fetch v%d: %d bytes differ from the %d stored", v, len(p.RecordBatches), len(stored))
		}
		// Two partitions' worth of framing: an empty partition after a
		// full one keeps its own framing intact.
		req := fetchReq(v, name, id, 0, int64(maxProduce-2)*2, 0, 0, 1<<20)
		req.Topics[0].Partitions = append([]kmsg.FetchRequestTopicPartition{req.Topics[0].Partitions[0]}, req.Topics[0].Partitions...)
		req.Topics[0].Partitions[0].FetchOffset = 2
		fr := c.roundTrip(req).(*kmsg.FetchResponse)
		if got := fr.Topics[0].Partitions; len(got) != 2 || !bytes.Equal(got[0].RecordBatches, stored[len(stored)-len(got[0].RecordBatches):]) || len(got[1].RecordBatches) != 0 {
			t.Fatalf("fetch v%d with two partitions: bad framing", v)
		} else if got[1].RecordBatches == nil {
			t.Fatalf("fetch v%d: an empty partition's records are null (librdkafka rejects that), want empty", v)
		}
	}
}

func TestFetchLimitsFollowKIP74(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "limits", 2, nil)
	c := dialRaw(t, n)
	big := string(bytes.Repeat([]byte("z"), 1000))
	for i := range 5 {
		for p := int32(0); p < 2; p++ {
			if code, _ := produceErr(t, c.roundTrip(produceReq(9, "limits", [16]byte{}, p, -1, recordBatch(int64(i), big)))); code != 0 {
				t.Fatal(code)
			}
		}
	}
	batch := len(recordBatch(0, big))
	one := fetchPart0(t, c.roundTrip(fetchReq(11, "limits", [16]byte{}, 0, 0, 0, 0, 1)))
	if len(one.RecordBatches) != batch {
		t.Errorf("partition max 1 byte: got %d bytes, want the first batch whole (%d)", len(one.RecordBatches), batch)
	}
	two := fetchPart0(t, c.roundTrip(fetchReq(11, "limits", [16]byte{}, 0, 0, 0, 0, int32(2*batch+batch/2))))
	if len(two.RecordBatches) != 2*batch {
		t.Errorf("partition max 2.5 batches: got %d bytes, want 2 batches", len(two.RecordBatches))
	}
	// Response limit: the first partition's first batch is whole, the
	// second partition gets nothing.
	req := fetchReq(11, "limits", [16]byte{}, 0, 0, 0, 0, 1<<20)
	req.MaxBytes = 10
	p1 := req.Topics[0].Partitions[0]
	p1.Partition = 1
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	fr := c.roundTrip(req).(*kmsg.FetchResponse)
	if a, b := len(fr.Topics[0].Partitions[0].RecordBatches), len(fr.Topics[0].Partitions[1].RecordBatches); a != batch || b != 0 {
		t.Errorf("response max 10 bytes: partitions got %d and %d bytes, want %d and 0", a, b, batch)
	}
}

func TestFetchErrors(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "ferr", 1, nil)
	c := dialRaw(t, n)
	c.roundTrip(produceReq(9, "ferr", [16]byte{}, 0, -1, recordBatch(0, "a")))
	check := func(name string, req *kmsg.FetchRequest, want *kerr.Error) {
		t.Helper()
		code := int16(0)
		if want != nil {
			code = want.Code
		}
		if got := fetchPart0(t, c.roundTrip(req)).ErrorCode; got != code {
			t.Errorf("%s: error %d, want %v", name, got, want)
		}
	}
	check("offset past end", fetchReq(11, "ferr", [16]byte{}, 0, 5, 0, 0, 1<<20), kerr.OffsetOutOfRange)
	check("unknown topic", fetchReq(11, "nope", [16]byte{}, 0, 0, 0, 0, 1<<20), kerr.UnknownTopicOrPartition)
	check("unknown topic id", fetchReq(13, "", [16]byte{9}, 0, 0, 0, 0, 1<<20), kerr.UnknownTopicID)
	newer := fetchReq(11, "ferr", [16]byte{}, 0, 0, 0, 0, 1<<20)
	newer.Topics[0].Partitions[0].CurrentLeaderEpoch = 5
	check("newer leader epoch", newer, kerr.UnknownLeaderEpoch)
	newer.Topics[0].Partitions[0].CurrentLeaderEpoch = 0
	check("current leader epoch", newer, nil)
	sess := fetchReq(11, "ferr", [16]byte{}, 0, 0, 0, 0, 1<<20)
	sess.SessionID, sess.SessionEpoch = 42, 3
	if fr := c.roundTrip(sess).(*kmsg.FetchResponse); fr.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("unknown session: %d", fr.ErrorCode)
	}
}

func TestFetchLongPollWokenByAppend(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "poll", 1, nil)
	c := dialRaw(t, n)

	// Nothing arrives: the fetch waits out MaxWaitMs.
	start := time.Now()
	p := fetchPart0(t, c.roundTrip(fetchReq(11, "poll", [16]byte{}, 0, 0, 300, 1, 1<<20)))
	if el := time.Since(start); el < 300*time.Millisecond || len(p.RecordBatches) != 0 {
		t.Fatalf("empty long poll returned after %v with %d bytes", el, len(p.RecordBatches))
	}

	// An append wakes a 20s long poll at once.
	corr := c.send(fetchReq(11, "poll", [16]byte{}, 0, 0, 20000, 1, 1<<20))
	waitParked(t, n, "poll", 0)
	start = time.Now()
	prod := dialRaw(t, n)
	prod.roundTrip(produceReq(9, "poll", [16]byte{}, 0, 1, recordBatch(0, "wake")))
	got, body, err := c.readFrame()
	if err != nil || got != corr {
		t.Fatalf("long poll: corr %d err %v", got, err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("append woke the fetch after %v", el)
	}
	fr := decodeResponse(t, fetchReq(11, "", [16]byte{}, 0, 0, 0, 0, 0), body).(*kmsg.FetchResponse)
	if len(fr.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatal("woken fetch returned no records")
	}
}

// TestConnPipelinedResponsesInOrder pipelines a long poll followed by
// quick requests on one connection, with an in-flight bound of 2: the
// quick ones finish first but every response leaves in request order.
func TestConnPipelinedResponsesInOrder(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"queued.max.requests": "2"})
	createTopic(t, newAdmin(t, n), "pipe", 1, nil)
	c := dialRaw(t, n)
	var reqs []kmsg.Request
	reqs = append(reqs, fetchReq(11, "pipe", [16]byte{}, 0, 0, 400, 1, 1<<20))
	for i := range 6 {
		if i%2 == 0 {
			reqs = append(reqs, kmsg.NewPtrApiVersionsRequest())
		} else {
			m := kmsg.NewPtrMetadataRequest()
			m.SetVersion(12)
			reqs = append(reqs, m)
		}
	}
	var buf []byte
	for i, r := range reqs {
		buf = append(buf, frameRequest(r, int32(100+i))...)
	}
	start := time.Now()
	if _, err := c.nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	// While the long poll holds the head of the queue, the reader stops at
	// the bound: two requests read and unanswered, the rest left unread.
	testutil.Eventually(t, testWait, func() error {
		n.connMu.Lock()
		defer n.connMu.Unlock()
		for sc := range n.conns {
			if sc.nc.RemoteAddr().String() != c.nc.LocalAddr().String() {
				continue
			}
			if tok, p := len(sc.tokens), sc.pending.Load(); tok != 2 || p != 2 {
				return fmt.Errorf("in flight: %d tokens taken, %d pending; want 2 and 2 (bound 2)", tok, p)
			}
			return nil
		}
		return errors.New("connection not registered")
	}, "the reader to stop at the in-flight bound")
	for i, r := range reqs {
		corr, body, err := c.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		if corr != int32(100+i) {
			t.Fatalf("response %d has correlation id %d, want %d", i, corr, 100+i)
		}
		decodeResponse(t, r, body)
		if i == 0 && time.Since(start) < 400*time.Millisecond {
			t.Fatal("long poll answered before MaxWaitMs")
		}
	}
}

func TestConnIdleConnectionClosed(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"connections.max.idle.ms": "200"})
	c := dialRaw(t, n)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
	start := time.Now()
	c.expectClosed()
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout", el)
	}
}

// TestNodeCloseAnswersInFlightLongPoll: shutdown does not cut a pending
// long poll; it is answered, then the connection closes.
func TestNodeCloseAnswersInFlightLongPoll(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "bye", 1, nil)
	c := dialRaw(t, n)
	corr := c.send(fetchReq(11, "bye", [16]byte{}, 0, 0, 20000, 1, 1<<20))
	waitParked(t, n, "bye", 0)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- n.Close() }()
	got, _, err := c.readFrame()
	if err != nil || got != corr {
		t.Fatalf("in-flight fetch not answered at shutdown: corr %d err %v", got, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("close: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("shutdown took %v", el)
	}
	c.expectClosed()
}

// TestHandlerPanicClosesOnlyThatConnection registers a panicking handler
// for an unused key: the connection closes, the node keeps serving.
func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	const key = 9 // OffsetFetch, swapped for a panicking handler and restored
	saved, had := apis[key]
	defer func() {
		if had {
			apis[key] = saved
		} else {
			delete(apis, key)
		}
	}()
	apis[key] = &api{key: key, min: 0, max: kmsg.NewPtrOffsetFetchRequest().MaxVersion(),
		fn: func(context.Context, *Node, *request) (*frame, error) { panic("boom") }}
	n := startNode(t, t.TempDir(), nil)
	c := dialRaw(t, n)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(5)
	c.send(req)
	c.expectClosed()
	other := dialRaw(t, n)
	if resp := other.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatal("node stopped serving after a handler panic")
	}
}

// TestConnRequestsTakeEffectInOrder: as in Kafka, which handles one
// request per connection at a time, pipelined requests on one connection
// take effect in the order sent: a commit sent after another overwrites
// it, and an OffsetFetch sent after them sees the last one (librdkafka's
// 0030_offset_commit read 9 after committing 50 when commits ran
// concurrently).
func TestConnRequestsTakeEffectInOrder(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "ordered", 1, nil)
	var os kadm.Offsets
	os.AddOffset("ordered", 0, 1, -1)
	if resp, err := adm.CommitOffsets(testCtx(t), "in-order", os); err != nil || resp.Error() != nil {
		t.Fatalf("first commit: %v %v", err, resp.Error())
	}
	commit := func(offset int64) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(8)
		req.Group, req.Generation, req.MemberID = "in-order", -1, ""
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "ordered"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(7)
	fetch.Group = "in-order"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "ordered", []int32{0}
	fetch.Topics = append(fetch.Topics, ft)

	c := dialRaw(t, n)
	for round := range 20 {
		var reqs []kmsg.Request
		for i := range 5 {
			reqs = append(reqs, commit(int64(round*10+i+2)))
		}
		reqs = append(reqs, fetch)
		var buf []byte
		for i, r := range reqs {
			buf = append(buf, frameRequest(r, int32(1000*round+i))...)
		}
		if _, err := c.nc.Write(buf); err != nil {
			t.Fatal(err)
		}
		for i, r := range reqs {
			corr, body, err := c.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			if corr != int32(1000*round+i) {
				t.Fatalf("response %d has correlation id %d", i, corr)
			}
			switch resp := decodeResponse(t, r, body).(type) {
			case *kmsg.OffsetCommitResponse:
				if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Fatalf("round %d commit %d: error %d", round, i, code)
				}
			case *kmsg.OffsetFetchResponse:
				want := int64(round*10 + 6)
				if got := resp.Topics[0].Partitions[0].Offset; got != want {
					t.Fatalf("round %d: OffsetFetch after committing %d read %d", round, want, got)
				}
			}
		}
	}
	if o, ok := n.groups.store.Fetch("in-order", group.TopicPartition{Topic: "ordered", Partition: 0}); !ok || o.Offset != 196 {
		t.Fatalf("committed offset %+v, want the last commit 196", o)
	}
}
