package broker

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/storage/producer"
)

// verifyAnswer makes n's TxnOffsetCommit verification answer code for
// every partition (the transaction coordinator's verdict), recording the
// calls.
func verifyAnswer(n *Node, code int16, calls *[]string) {
	h := func(txnID string, pid int64, epoch int16, tps map[string][]int32) map[string]map[int32]int16 {
		out := map[string]map[int32]int16{}
		for t, ps := range tps {
			out[t] = map[int32]int16{}
			for _, p := range ps {
				out[t][p] = code
				if calls != nil {
					*calls = append(*calls, txnID+" "+t)
				}
			}
		}
		return out
	}
	n.groups.verifyHook.Store(&h)
}

type txnCommit struct {
	version       int16
	txnID, group  string
	pid           int64
	epoch         int16
	generation    int32
	member        string
	instance      *string
	topic         string
	partition     int32
	offset        int64
	metadata      *string
	extraTopic    string // a second topic of the request, partition 0
	extraExpected int16
}

func txnOffsetCommitRaw(t *testing.T, c *rawConn, tc txnCommit) int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.SetVersion(tc.version)
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = tc.txnID, tc.group, tc.pid, tc.epoch
	req.Generation, req.MemberID, req.InstanceID = tc.generation, tc.member, tc.instance
	add := func(topic string, p int32, off int64) {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata, rp.LeaderEpoch = p, off, tc.metadata, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	add(tc.topic, tc.partition, tc.offset)
	if tc.extraTopic != "" {
		add(tc.extraTopic, 0, tc.offset)
	}
	resp := c.roundTrip(req).(*kmsg.TxnOffsetCommitResponse)
	if len(resp.Topics) != len(req.Topics) || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("txn offset commit response shape %+v", resp)
	}
	if tc.extraTopic != "" {
		if got := resp.Topics[1].Partitions[0].ErrorCode; got != tc.extraExpected {
			t.Fatalf("second topic %q: code %d, want %d", tc.extraTopic, got, tc.extraExpected)
		}
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchStable fetches group's offset of topic/partition with OffsetFetch
// version (RequireStable set when requireStable and version >= 7).
func fetchStable(t *testing.T, c *rawConn, version int16, groupID, topic string, partition int32, requireStable bool) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(version)
	req.RequireStable = requireStable
	if version >= 8 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = groupID
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{partition}
		g.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
		req.Groups = []kmsg.OffsetFetchRequestGroup{g}
		resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
			t.Fatalf("offset fetch v%d: %+v", version, resp)
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	req.Group = groupID
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 {
		t.Fatalf("offset fetch v%d: %+v", version, resp)
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// appendTestMarker writes a transaction marker on __consumer_offsets
// partition as its leader, the way the marker path does, and waits for
// the high watermark to pass it.
func appendTestMarker(t *testing.T, n *Node, partition int32, m producer.Marker) {
	t.Helper()
	p := n.partition(offsetsTopic, partition)
	if p == nil {
		t.Fatalf("%s-%d not hosted", offsetsTopic, partition)
	}
	p.appendMu.Lock()
	info, err := p.log.AppendMarker(m, p.leaderEpoch.Load())
	if err == nil {
		p.afterLeaderAppend()
	}
	p.appendMu.Unlock()
	if err != nil {
		t.Fatalf("marker: %v", err)
	}
	if err := p.waitHW(testCtx(t), info.LastOffset); err != nil {
		t.Fatal(err)
	}
}

// TestTxnOffsetCommitErrors: Kafka's answers of TxnOffsetCommit, in its
// order: unknown partitions, the group id, the KIP-890 verification's
// verdict (mapped for v0-v4 clients), the membership (v3+), the metadata
// size.
func TestTxnOffsetCommitErrors(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 2, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")

	base := txnCommit{version: 3, txnID: "tx", group: "g", pid: 42, generation: -1, topic: "t", offset: 7}
	// The coordinator's verdicts (txn_group_e2e_test.go asks the real
	// one), as v0-v4 clients get them.
	for _, tc := range []struct {
		verdict, want int16
	}{
		{kerr.InvalidTxnState.Code, kerr.InvalidTxnState.Code}, // no AddOffsetsToTxn
		{kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code},
		{kerr.ConcurrentTransactions.Code, kerr.ConcurrentTransactions.Code},
		{kerr.TransactionAbortable.Code, kerr.InvalidTxnState.Code}, // v0-v4 do not know it
		{kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code},
		{kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code},
		{kerr.InvalidProducerIDMapping.Code, kerr.InvalidProducerIDMapping.Code},
	} {
		verifyAnswer(n, tc.verdict, nil)
		if code := txnOffsetCommitRaw(t, c, base); code != tc.want {
			t.Fatalf("verdict %d: answered %d, want %d", tc.verdict, code, tc.want)
		}
	}
	var calls []string
	verifyAnswer(n, 0, &calls)
	partition, _ := n.groups.partitionOf("g")

	check := func(name string, tc txnCommit, want int16) {
		t.Helper()
		if code := txnOffsetCommitRaw(t, c, tc); code != want {
			t.Fatalf("%s: %d, want %d", name, code, want)
		}
	}
	bad := base
	bad.topic = "nope"
	check("unknown topic", bad, kerr.UnknownTopicOrPartition.Code)
	bad = base
	bad.extraTopic, bad.extraExpected = "nope", kerr.UnknownTopicOrPartition.Code
	bad.group = ""
	check("empty group", bad, kerr.InvalidGroupID.Code)
	bad = base
	bad.generation = 3
	bad.group = "unknown-group"
	findCoordinator(t, c, bad.group)
	waitLoaded(t, n, bad.group)
	check("generation of an unknown group", bad, kerr.IllegalGeneration.Code)
	md := strings.Repeat("x", n.cfg.OffsetMetadataMaxBytes+1)
	bad = base
	bad.metadata = &md
	check("metadata too large", bad, kerr.OffsetMetadataTooLarge.Code)

	// A consumer group: v3 carries the member.
	jr := joinConsumer(t, n, "g", "t")
	bad = base
	bad.member, bad.generation = "someone-else", jr.Generation
	check("unknown member", bad, kerr.UnknownMemberID.Code)
	bad.member, bad.generation = jr.MemberID, jr.Generation+1
	check("old generation", bad, kerr.IllegalGeneration.Code)
	// Without a member (v0-v2, or generation -1) a transactional commit
	// is accepted in a group with members (Kafka: older clients send none).
	ok := base
	ok.version = 2
	check("v2 in a Stable group", ok, 0)
	ok = base
	ok.member, ok.generation = jr.MemberID, jr.Generation
	ok.offset = 8
	check("the member", ok, 0)
	if len(calls) == 0 || calls[0] != "tx "+offsetsTopic {
		t.Fatalf("verification calls %q, want the offsets partition of transactional id tx", calls)
	}

	// Pending: not visible; RequireStable answers UNSTABLE_OFFSET_COMMIT.
	for _, v := range []int16{1, 6, 7, 8} {
		off, code := fetchStable(t, c, v, "g", "t", 0, false)
		if off != -1 || code != 0 {
			t.Fatalf("v%d without RequireStable: offset %d code %d, want -1 and no error", v, off, code)
		}
	}
	for _, v := range []int16{7, 8} {
		off, code := fetchStable(t, c, v, "g", "t", 0, true)
		if off != -1 || code != kerr.UnstableOffsetCommit.Code {
			t.Fatalf("v%d RequireStable: offset %d code %d, want UNSTABLE_OFFSET_COMMIT", v, off, code)
		}
	}
	if _, code := fetchStable(t, c, 7, "g", "t", 1, true); code != 0 {
		t.Fatalf("partition without pending offsets: %d", code)
	}

	// The marker path commits them: the second commit of the transaction
	// is the one (its batch repeats sequence 0 and is no duplicate).
	appendTestMarker(t, n, partition, producer.Marker{ProducerID: 42, ProducerEpoch: 0, Commit: true})
	n.completeGroupTxn(partition, 42, 0, true)
	for _, v := range []int16{6, 7, 8} {
		off, code := fetchStable(t, c, v, "g", "t", 0, true)
		if off != 8 || code != 0 {
			t.Fatalf("v%d after commit: offset %d code %d, want 8", v, off, code)
		}
	}

	// A fencing marker at a bumped epoch: the old epoch's commit is
	// refused by the log (the verification said yes).
	appendTestMarker(t, n, partition, producer.Marker{ProducerID: 42, ProducerEpoch: 1, Commit: false})
	n.completeGroupTxn(partition, 42, 1, false)
	ok.offset = 9
	check("fenced epoch", ok, kerr.InvalidProducerEpoch.Code)
	if off, code := fetchStable(t, c, 7, "g", "t", 0, true); off != 8 || code != 0 {
		t.Fatalf("after the fenced commit: offset %d code %d, want 8", off, code)
	}
}

// TestTxnOffsetsSurviveRestartByTheirMarkers: a restarted coordinator
// replays __consumer_offsets: a committed transaction's offsets apply, an
// aborted one's never, and an open one's stay pending (UNSTABLE) until
// its marker arrives.
func TestTxnOffsetsSurviveRestartByTheirMarkers(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 3, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	verifyAnswer(n, 0, nil)
	partition, _ := n.groups.partitionOf("g")
	commit := func(pid int64, p int32, off int64) {
		t.Helper()
		tc := txnCommit{version: 3, txnID: "tx", group: "g", pid: pid, generation: -1, topic: "t", partition: p, offset: off}
		if code := txnOffsetCommitRaw(t, c, tc); code != 0 {
			t.Fatalf("txn commit pid %d: %d", pid, code)
		}
	}
	if code := commitRaw(t, c, 8, "g", "t", 0, 1, nil); code != 0 {
		t.Fatalf("plain commit: %d", code)
	}
	commit(100, 0, 9)  // committed: the second commit of the transaction wins
	commit(100, 0, 10) // (a batch at sequence 0 again, no duplicate)
	commit(101, 1, 20) // aborted
	commit(102, 2, 30) // open
	appendTestMarker(t, n, partition, producer.Marker{ProducerID: 100, Commit: true})
	n.completeGroupTxn(partition, 100, 0, true)
	appendTestMarker(t, n, partition, producer.Marker{ProducerID: 101, Commit: false})
	n.completeGroupTxn(partition, 101, 0, false)

	want := func(c *rawConn, p int32, off int64, code int16) {
		t.Helper()
		gotOff, gotCode := fetchStable(t, c, 8, "g", "t", p, true)
		if gotOff != off || gotCode != code {
			t.Fatalf("t/%d: offset %d code %d, want %d code %d", p, gotOff, gotCode, off, code)
		}
	}
	want(c, 0, 10, 0)
	want(c, 1, -1, 0)
	want(c, 2, -1, kerr.UnstableOffsetCommit.Code)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n2 := startNode(t, dir, groupTestSettings)
	c2 := dialRaw(t, n2)
	waitLoaded(t, n2, "g")
	want(c2, 0, 10, 0)
	want(c2, 1, -1, 0)
	want(c2, 2, -1, kerr.UnstableOffsetCommit.Code)
	if got := n2.groups.store.FetchAll("g"); len(got) != 1 || got[0].TopicPartition != (group.TopicPartition{Topic: "t", Partition: 0}) {
		t.Fatalf("committed after restart: %+v", got)
	}
	appendTestMarker(t, n2, partition, producer.Marker{ProducerID: 102, Commit: true})
	n2.completeGroupTxn(partition, 102, 0, true)
	want(c2, 2, 30, 0)
}

// TestTxnOffsetCommitCoordinatorErrors: the group coordinator's own
// answers come first: COORDINATOR_NOT_AVAILABLE before __consumer_offsets
// exists, COORDINATOR_LOAD_IN_PROGRESS while the group's partition loads,
// NOT_COORDINATOR once this broker no longer leads it.
func TestTxnOffsetCommitCoordinatorErrors(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	verifyAnswer(n, 0, nil)
	release := make(chan struct{})
	hook := func(int32) {
		select {
		case <-release:
		case <-time.After(testWait):
		}
	}
	n.groups.loadHook.Store(&hook)
	c := dialRaw(t, n)
	tc := txnCommit{version: 3, txnID: "tx", group: "g", pid: 1, generation: -1, topic: "t", offset: 1}
	if code := txnOffsetCommitRaw(t, c, tc); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("without __consumer_offsets: %d, want COORDINATOR_NOT_AVAILABLE", code)
	}
	findCoordinator(t, c, "g")
	if code := txnOffsetCommitRaw(t, c, tc); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("while loading: %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
	close(release)
	waitLoaded(t, n, "g")
	if code := txnOffsetCommitRaw(t, c, tc); code != 0 {
		t.Fatalf("loaded: %d", code)
	}
	idx, _ := n.groups.partitionOf("g")
	p := n.partition(offsetsTopic, idx)
	n.groups.offsetsPartitionChanged(idx, nil)
	if code := txnOffsetCommitRaw(t, c, tc); code != kerr.NotCoordinator.Code {
		t.Fatalf("not led here: %d, want NOT_COORDINATOR", code)
	}
	// Led again: the pending offset comes back from the log.
	n.groups.offsetsPartitionChanged(idx, p)
	waitLoaded(t, n, "g")
	if _, code := fetchStable(t, c, 7, "g", "t", 0, true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("reloaded: code %d, want UNSTABLE_OFFSET_COMMIT", code)
	}
}

// TestOffsetFetchAllRequireStable: OffsetFetch for every partition of a
// group (topics null) lists the committed partitions; with RequireStable
// one with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT
// (offset -1), without it its committed offset. A partition with only a
// pending offset is not listed (Kafka lists committed ones).
func TestOffsetFetchAllRequireStable(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 3, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	verifyAnswer(n, 0, nil)
	for p := int32(0); p < 2; p++ {
		if code := commitRaw(t, c, 8, "g", "t", p, 5, nil); code != 0 {
			t.Fatalf("plain commit: %d", code)
		}
	}
	for _, p := range []int32{1, 2} {
		tc := txnCommit{version: 3, txnID: "tx", group: "g", pid: 9, generation: -1, topic: "t", partition: p, offset: 50}
		if code := txnOffsetCommitRaw(t, c, tc); code != 0 {
			t.Fatalf("txn commit: %d", code)
		}
	}
	fetchAll := func(version int16, stable bool) map[int32][2]int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(version)
		req.RequireStable = stable
		out := map[int32][2]int64{}
		if version >= 8 {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g"
			req.Groups = []kmsg.OffsetFetchRequestGroup{g}
			resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
			for _, rt := range resp.Groups[0].Topics {
				for _, p := range rt.Partitions {
					out[p.Partition] = [2]int64{p.Offset, int64(p.ErrorCode)}
				}
			}
			return out
		}
		req.Group = "g"
		resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				out[p.Partition] = [2]int64{p.Offset, int64(p.ErrorCode)}
			}
		}
		return out
	}
	unstable := int64(kerr.UnstableOffsetCommit.Code)
	for _, v := range []int16{7, 8} {
		if got, want := fetchAll(v, true), map[int32][2]int64{0: {5, 0}, 1: {-1, unstable}}; !maps.Equal(got, want) {
			t.Fatalf("v%d RequireStable: %v, want %v", v, got, want)
		}
		if got, want := fetchAll(v, false), map[int32][2]int64{0: {5, 0}, 1: {5, 0}}; !maps.Equal(got, want) {
			t.Fatalf("v%d: %v, want %v", v, got, want)
		}
	}
}
