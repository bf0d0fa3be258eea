package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
)

// shareNode starts a node offering share groups, with a topic of one
// partition, and returns it with the topic's id.
func shareNode(t *testing.T, extra map[string]string) (*Node, [16]byte) {
	t.Helper()
	props := map[string]string{"group.coordinator.rebalance.protocols": "classic,consumer,share"}
	for k, v := range extra {
		props[k] = v
	}
	n := startNode(t, t.TempDir(), props)
	createTopic(t, newAdmin(t, n), "q", 1, nil)
	return n, topicID(t, n, "q")
}

// shareProduce appends count records "v<i>" to q.
func shareProduce(t *testing.T, n *Node, from, count int) {
	t.Helper()
	cl := newClient(t, n, kgo.DefaultProduceTopic("q"))
	var rs []*kgo.Record
	for i := from; i < from+count; i++ {
		rs = append(rs, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// shareClient is a raw share consumer: one member, its session epoch.
type shareClient struct {
	t      *testing.T
	c      *rawConn
	group  string
	member string
	epoch  int32
	tid    [16]byte
}

func newShareClient(t *testing.T, n *Node, tid [16]byte, member string) *shareClient {
	return &shareClient{t: t, c: dialRaw(t, n), group: "g", member: member, tid: tid}
}

// fetch sends a ShareFetch of partition 0 (named only at epoch 0) with
// acks, and advances the epoch on success.
func (sc *shareClient) fetch(maxWaitMs int32, maxRecords int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
	sc.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(2)
	req.GroupID, req.MemberID = &sc.group, &sc.member
	req.ShareSessionEpoch = sc.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWaitMs, 1, 1<<20
	req.MaxRecords, req.BatchSize = maxRecords, maxRecords
	if sc.epoch == 0 || len(acks) > 0 {
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = sc.tid
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rp.AcknowledgementBatches = acks
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp := sc.c.roundTrip(req).(*kmsg.ShareFetchResponse)
	if resp.ErrorCode == 0 {
		sc.epoch = nextShareEpoch(sc.epoch)
	}
	return resp
}

// ack sends a ShareAcknowledge of partition 0.
func (sc *shareClient) ack(epoch int32, acks ...kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareAcknowledgeResponse {
	sc.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.SetVersion(2)
	req.GroupID, req.MemberID = &sc.group, &sc.member
	req.ShareSessionEpoch = epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = sc.tid
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := sc.c.roundTrip(req).(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode == 0 && epoch > 0 {
		sc.epoch = nextShareEpoch(epoch)
	}
	return resp
}

func fetchAck(first, last int64, typ int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	return kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{typ}}
}

func ackBatch(first, last int64, typ int8) kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch {
	return kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{typ}}
}

// sharePartResp returns the response's only partition (nil if none).
func sharePartResp(t *testing.T, resp *kmsg.ShareFetchResponse) *kmsg.ShareFetchResponseTopicPartition {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("ShareFetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			return &resp.Topics[i].Partitions[j]
		}
	}
	return nil
}

// acquiredOf lists the offsets and delivery counts a response acquired,
// checking the records sent cover them.
func acquiredOf(t *testing.T, rp *kmsg.ShareFetchResponseTopicPartition) map[int64]int16 {
	t.Helper()
	out := map[int64]int16{}
	if rp == nil {
		return out
	}
	if rp.ErrorCode != 0 {
		t.Fatalf("partition error %v", kerr.ErrorForCode(rp.ErrorCode))
	}
	have := map[int64]bool{}
	fp := kmsg.NewFetchResponseTopicPartition()
	fp.RecordBatches = rp.Records
	pf, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "q"}, &fp, kgo.DefaultDecompressor(), nil)
	for _, r := range pf.Records {
		have[r.Offset] = true
	}
	for _, a := range rp.AcquiredRecords {
		for o := a.FirstOffset; o <= a.LastOffset; o++ {
			if !have[o] {
				t.Fatalf("offset %d acquired but not in the records sent", o)
			}
			out[o] = a.DeliveryCount
		}
	}
	return out
}

func TestShareAPIsAdvertisedOnlyWhenEnabled(t *testing.T) {
	has := func(n *Node) (bool, bool) {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		resp := dialRaw(t, n).roundTrip(req).(*kmsg.ApiVersionsResponse)
		var f, a bool
		for _, k := range resp.ApiKeys {
			f = f || k.ApiKey == shareFetchKey && k.MinVersion == 1 && k.MaxVersion == 2
			a = a || k.ApiKey == shareAcknowledgeKey && k.MinVersion == 1 && k.MaxVersion == 2
		}
		return f, a
	}
	off := startNode(t, t.TempDir(), map[string]string{"group.coordinator.rebalance.protocols": "classic,consumer"})
	if f, a := has(off); f || a {
		t.Fatalf("advertised without share in the protocols: fetch %v ack %v", f, a)
	}
	sc := newShareClient(t, off, [16]byte{1}, "m1")
	if resp := sc.fetch(0, 10); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ShareFetch while not offered: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	on, _ := shareNode(t, nil)
	if f, a := has(on); !f || !a {
		t.Fatalf("not advertised with share in the protocols: fetch %v ack %v", f, a)
	}
}

func TestShareSessionEpochs(t *testing.T) {
	n, tid := shareNode(t, map[string]string{"group.share.max.share.sessions": "1"})
	a := newShareClient(t, n, tid, "a")

	if resp := a.ack(3, ackBatch(0, 0, 1)); resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("ack without a session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	a.epoch = 4
	if resp := a.fetch(0, 10); resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("fetch epoch 4 without a session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	a.epoch = 0
	if resp := a.fetch(0, 10, fetchAck(0, 0, 1)); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acks on epoch 0: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if rp := sharePartResp(t, a.fetch(0, 10)); rp == nil || rp.ErrorCode != 0 {
		t.Fatalf("epoch 0 answer: %+v", rp) // a new session answers its partitions once
	}
	if a.epoch != 1 {
		t.Fatalf("epoch after open %d", a.epoch)
	}
	// The session's partitions are not named again, and not answered
	// while nothing changes.
	if resp := a.fetch(0, 10); sharePartResp(t, resp) != nil {
		t.Fatalf("incremental answer with nothing: %+v", resp.Topics)
	}
	if resp := a.ack(0); resp.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("ack epoch 0: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp := a.ack(a.epoch + 5); resp.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("ack wrong epoch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	// One slot: another member cannot open one; the same member can re-open.
	b := newShareClient(t, n, tid, "b")
	if resp := b.fetch(0, 10); resp.ErrorCode != kerr.ShareSessionLimitReached.Code {
		t.Fatalf("second session with one slot: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	a.epoch = 0
	sharePartResp(t, a.fetch(0, 10))
	if resp := a.ack(-1); resp.ErrorCode != 0 {
		t.Fatalf("close: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp := a.ack(1); resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("ack after close: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	sharePartResp(t, b.fetch(0, 10)) // the slot is free again
}

func TestShareFetchAcquireAcknowledge(t *testing.T) {
	n, tid := shareNode(t, nil)
	a, b := newShareClient(t, n, tid, "a"), newShareClient(t, n, tid, "b")
	sharePartResp(t, a.fetch(0, 100)) // latest: the share-partition starts at the end (0)
	sharePartResp(t, b.fetch(0, 100))
	shareProduce(t, n, 0, 10)

	got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 100)))
	if len(got) != 10 || got[0] != 1 || got[9] != 1 {
		t.Fatalf("a acquired %v, want offsets 0-9 delivered once", got)
	}
	if got := acquiredOf(t, sharePartResp(t, b.fetch(100, 100))); len(got) != 0 {
		t.Fatalf("b acquired %v while a holds everything", got)
	}
	// b acknowledging a's records is refused, all or nothing.
	if rp := sharePartResp(t, b.fetch(0, 100, fetchAck(0, 0, 1))); rp == nil || rp.AcknowledgeErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("b acking a's record: %+v", rp)
	}
	// a accepts 0-4 and releases 5-9 (piggy-backed on its fetch, which
	// then acquires the released records again for a itself).
	resp := a.ack(a.epoch, ackBatch(0, 4, 1), ackBatch(5, 9, 2))
	if e := resp.Topics[0].Partitions[0].ErrorCode; e != 0 {
		t.Fatalf("a's acks: %v", kerr.ErrorForCode(e))
	}
	got = acquiredOf(t, sharePartResp(t, b.fetch(5000, 100)))
	if len(got) != 5 || got[5] != 2 || got[9] != 2 {
		t.Fatalf("b acquired %v, want 5-9 delivered a second time", got)
	}
	if rp := sharePartResp(t, b.fetch(0, 100, fetchAck(5, 9, 3))); rp == nil || rp.AcknowledgeErrorCode != 0 {
		t.Fatalf("b rejects: %+v", rp)
	}
	st, err := n.sharePersister.Read(context.Background(), share.Key{Group: "g", TopicID: tid, Partition: 0}, -1)
	if err != nil || st.StartOffset != 10 {
		t.Fatalf("durable state %+v, %v: want start offset 10 (all accepted or archived)", st, err)
	}
}

func TestShareFetchLockExpiryAndDeliveryLimit(t *testing.T) {
	n, tid := shareNode(t, map[string]string{
		"group.share.min.record.lock.duration.ms": "1000",
		"group.share.record.lock.duration.ms":     "1000",
		"group.share.delivery.count.limit":        "2",
	})
	a, b := newShareClient(t, n, tid, "a"), newShareClient(t, n, tid, "b")
	sharePartResp(t, a.fetch(0, 100))
	sharePartResp(t, b.fetch(0, 100))
	shareProduce(t, n, 0, 3)
	if got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 100))); len(got) != 3 {
		t.Fatalf("a acquired %v", got)
	}
	if resp := a.fetch(0, 100); resp.AcquisitionLockTimeoutMillis != 1000 {
		t.Fatalf("AcquisitionLockTimeoutMillis %d", resp.AcquisitionLockTimeoutMillis)
	}
	// a never acknowledges: after 1 s its locks expire and b's waiting
	// fetch is woken with the records, delivered a second time.
	start := time.Now()
	got := acquiredOf(t, sharePartResp(t, b.fetch(5000, 100)))
	if len(got) != 3 || got[0] != 2 {
		t.Fatalf("b acquired %v after a's locks expired, want 0-2 with delivery count 2", got)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("redelivery took %v with a 1 s lock", el)
	}
	// b's locks expire too: at the limit (2) the records are archived,
	// never delivered a third time, and the start offset moves past them.
	key := share.Key{Group: "g", TopicID: tid, Partition: 0}
	deadline := time.Now().Add(testWait)
	for {
		st, err := n.sharePersister.Read(context.Background(), key, -1)
		if err == nil && st.StartOffset == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %+v, %v: want start offset 3 after archiving at the limit", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := acquiredOf(t, sharePartResp(t, a.fetch(200, 100))); len(got) != 0 {
		t.Fatalf("a acquired %v: records delivered past the limit", got)
	}
	m := scrapeMetrics(t, n)
	if v, _ := m.value("strata_share_archived_total"); v != 3 {
		t.Fatalf("strata_share_archived_total %v, want 3", v)
	}
	if v, _ := m.value("strata_share_redeliveries_total"); v != 3 {
		t.Fatalf("strata_share_redeliveries_total %v, want 3", v)
	}
	if v, _ := m.value("strata_share_in_flight_records"); v != 0 {
		t.Fatalf("strata_share_in_flight_records %v, want 0", v)
	}
}

func TestShareFetchTwoMembersNeverHoldTheSameRecord(t *testing.T) {
	n, tid := shareNode(t, nil)
	const total = 400
	members := []*shareClient{newShareClient(t, n, tid, "a"), newShareClient(t, n, tid, "b"), newShareClient(t, n, tid, "c")}
	for _, m := range members {
		sharePartResp(t, m.fetch(0, 7))
	}
	shareProduce(t, n, 0, total)
	var mu sync.Mutex
	holder := map[int64]string{} // offset -> the member that acquired it
	var wg sync.WaitGroup
	errc := make(chan error, len(members))
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pending []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
			for {
				mu.Lock()
				done := len(holder) == total
				mu.Unlock()
				if done {
					return
				}
				resp := m.fetch(200, 7, pending...)
				pending = nil
				rp := sharePartResp(t, resp)
				if rp == nil {
					continue
				}
				if rp.AcknowledgeErrorCode != 0 {
					errc <- fmt.Errorf("%s: ack %v", m.member, kerr.ErrorForCode(rp.AcknowledgeErrorCode))
					return
				}
				for _, ar := range rp.AcquiredRecords {
					mu.Lock()
					for o := ar.FirstOffset; o <= ar.LastOffset; o++ {
						if h, ok := holder[o]; ok {
							mu.Unlock()
							errc <- fmt.Errorf("offset %d acquired by %s while %s had it (or after it was accepted)", o, m.member, h)
							return
						}
						holder[o] = m.member
					}
					mu.Unlock()
					pending = append(pending, fetchAck(ar.FirstOffset, ar.LastOffset, 1))
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, h := range holder {
		per[h]++
	}
	if len(holder) != total {
		t.Fatalf("%d records acquired, want %d", len(holder), total)
	}
	t.Logf("records per member: %v", per)
}

// TestShareStateDurableAcrossRecreation drops the share-partition's state
// (as a leader change does) and checks the rebuilt one, read back from the
// persister, redelivers exactly what was not acknowledged.
func TestShareStateDurableAcrossRecreation(t *testing.T) {
	n, tid := shareNode(t, nil)
	a, b := newShareClient(t, n, tid, "a"), newShareClient(t, n, tid, "b")
	sharePartResp(t, a.fetch(0, 100))
	sharePartResp(t, b.fetch(0, 100))
	shareProduce(t, n, 0, 10)
	if got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 100))); len(got) != 10 {
		t.Fatalf("acquired %v", got)
	}
	// Accept 0-3 and 6; reject 4; 5 and 7-9 stay acquired, unacknowledged.
	resp := a.ack(a.epoch, ackBatch(0, 3, 1), ackBatch(4, 4, 3), ackBatch(6, 6, 1))
	if e := resp.Topics[0].Partitions[0].ErrorCode; e != 0 {
		t.Fatalf("acks: %v", kerr.ErrorForCode(e))
	}
	// The share-partition goes away (leadership moved and came back) and
	// is rebuilt from the persister on the next fetch.
	for _, s := range n.shareLeader.snapshot() {
		s.mu.Lock()
		n.shareLeader.dropLocked(s)
		s.mu.Unlock()
	}
	got := acquiredOf(t, sharePartResp(t, b.fetch(5000, 100)))
	want := map[int64]int16{5: 2, 7: 2, 8: 2, 9: 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after re-creation acquired %v, want %v (only the unacknowledged, second delivery)", got, want)
	}
	// a's old records are gone with the state: its late ack is refused.
	if resp := a.ack(a.epoch, ackBatch(5, 5, 1)); resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("stale ack: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
}

// TestShareSessionConnectionCloseReleases: a member's connection ends
// with records acquired; another member gets them at once, not after the
// 30 s lock.
func TestShareSessionConnectionCloseReleases(t *testing.T) {
	n, tid := shareNode(t, nil)
	a, b := newShareClient(t, n, tid, "a"), newShareClient(t, n, tid, "b")
	sharePartResp(t, a.fetch(0, 100))
	sharePartResp(t, b.fetch(0, 100))
	shareProduce(t, n, 0, 5)
	if got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 100))); len(got) != 5 {
		t.Fatalf("a acquired %v", got)
	}
	a.c.nc.Close()
	start := time.Now()
	var got map[int64]int16
	for time.Since(start) < testWait && len(got) == 0 {
		got = acquiredOf(t, sharePartResp(t, b.fetch(1000, 100)))
	}
	if len(got) != 5 || got[0] != 2 {
		t.Fatalf("b acquired %v after a's connection closed", got)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("released after %v: the lock expired rather than the session", el)
	}
}

// failingPersister fails every Write while fail is set.
type failingPersister struct {
	share.Persister
	mu   sync.Mutex
	fail bool
}

func (f *failingPersister) Write(ctx context.Context, k share.Key, se, le int32, u share.Update) error {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return kerr.CoordinatorNotAvailable
	}
	return f.Persister.Write(ctx, k, se, le, u)
}

// TestShareAckNotAnsweredBeforeDurable: an acknowledgement whose write
// fails is answered with the write's error, and the records come back as
// the durable state has them (acquired, not accepted).
func TestShareAckNotAnsweredBeforeDurable(t *testing.T) {
	n, tid := shareNode(t, nil)
	fp := &failingPersister{Persister: n.sharePersister}
	n.shareLeader.setTestPersister(fp)
	a := newShareClient(t, n, tid, "a")
	sharePartResp(t, a.fetch(0, 100))
	shareProduce(t, n, 0, 4)
	if got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 100))); len(got) != 4 {
		t.Fatalf("acquired %v", got)
	}
	fp.mu.Lock()
	fp.fail = true
	fp.mu.Unlock()
	resp := a.ack(a.epoch, ackBatch(0, 3, 1))
	if e := resp.Topics[0].Partitions[0].ErrorCode; e != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("ack with a failing write answered %v", kerr.ErrorForCode(e))
	}
	fp.mu.Lock()
	fp.fail = false
	fp.mu.Unlock()
	// The state was dropped and read back: the acknowledgement is not
	// there, nor the first delivery (acquisitions go with the next write,
	// which failed), so 0-3 come again as first deliveries.
	got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 100)))
	if len(got) != 4 || got[0] != 1 {
		t.Fatalf("after the failed write acquired %v, want 0-3 again", got)
	}
}

func TestShareFetchUnknownTopicAndRenew(t *testing.T) {
	n, tid := shareNode(t, nil)
	x := newShareClient(t, n, uuid.New(), "x")
	if rp := sharePartResp(t, x.fetch(1000, 10)); rp == nil || rp.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %+v", rp)
	}
	a := newShareClient(t, n, tid, "a")
	sharePartResp(t, a.fetch(0, 10))
	shareProduce(t, n, 0, 2)
	if got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 10))); len(got) != 2 {
		t.Fatalf("acquired %v", got)
	}
	// A renew without IsRenewAck is refused; with it the lock is renewed.
	if resp := a.ack(a.epoch, ackBatch(0, 1, 4)); resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("renew without IsRenewAck: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.SetVersion(2)
	req.GroupID, req.MemberID, req.ShareSessionEpoch, req.IsRenewAck = &a.group, &a.member, a.epoch, true
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = tid
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ackBatch(0, 1, 4))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := a.c.roundTrip(req).(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("renew: %v / %v", kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
}

func TestShareParseBatches(t *testing.T) {
	mk := func(base int64, n int, pid int64, txn, control bool) []byte {
		b := recordBatch(0, make([]string, n)...)
		rb := kmsg.RecordBatch{}
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		rb.FirstOffset, rb.ProducerID = base, pid
		if txn {
			rb.Attributes |= 0x10
		}
		if control {
			rb.Attributes |= 0x20
		}
		out := rb.AppendTo(nil)
		binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
		return out
	}
	var raw []byte
	raw = append(raw, mk(0, 2, -1, false, false)...) // 0-1 plain
	raw = append(raw, mk(2, 2, 7, true, false)...)   // 2-3 pid 7, aborted
	raw = append(raw, mk(4, 1, 7, true, true)...)    // 4 abort marker
	raw = append(raw, mk(5, 2, 8, true, false)...)   // 5-6 pid 8, committed
	raw = append(raw, mk(7, 1, 8, true, true)...)    // 7 commit marker
	raw = append(raw, mk(8, 2, -1, false, false)...) // 8-9 plain, at the bound
	aborted := []struct{ pid, first, last int64 }{{7, 2, 4}}
	for _, tc := range []struct {
		rc    bool
		bound int64
		want  string
	}{
		{false, 10, "[{0 1} {2 3} {5 6} {8 9}]"},
		{true, 10, "[{0 1} {5 6} {8 9}]"},
		{true, 9, "[{0 1} {5 6}]"}, // 8-9 crosses the bound
	} {
		var ab []storage.AbortedTxn
		for _, a := range aborted {
			ab = append(ab, storage.AbortedTxn{ProducerID: a.pid, FirstOffset: a.first, LastOffset: a.last})
		}
		bs, err := shareParseBatches(raw, tc.bound, tc.rc, ab)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(shareAcquirable(bs)); got != tc.want {
			t.Errorf("read_committed %v bound %d: acquirable %s, want %s", tc.rc, tc.bound, got, tc.want)
		}
		if c := shareCover(raw, bs, 5, 6); len(c) == 0 {
			t.Errorf("cover of 5-6 empty")
		}
	}
}

func TestShareSessionCache(t *testing.T) {
	c := newShareSessionCache(2)
	k := shareSessionKey{"g", "m"}
	t1, t2, t3 := shareTP{uuid.New(), 0}, shareTP{uuid.New(), 0}, shareTP{uuid.New(), 1}
	if _, _, err := c.open(k, nil, []shareTP{t1, t2, t1}); err != nil {
		t.Fatal(err)
	}
	parts, fresh, err := c.advance(k, 1, []shareTP{t3}, []shareTP{t1})
	if err != nil || len(parts) != 2 || fresh[t2] || !fresh[t3] { // t2 was answered when the session opened
		t.Fatalf("advance: %v %v %v", parts, fresh, err)
	}
	if _, fresh, _ := c.advance(k, 2, nil, nil); len(fresh) != 0 {
		t.Fatalf("fresh twice: %v", fresh)
	}
	if _, _, err := c.advance(k, 2, nil, nil); !errors.Is(err, kerr.InvalidShareSessionEpoch) {
		t.Fatalf("replayed epoch: %v", err)
	}
	if nextShareEpoch(1<<31-1) != 1 {
		t.Fatal("epoch does not wrap to 1")
	}
	// Rotation: each epoch starts one partition further.
	var firsts []string
	for e := int32(3); e < 5; e++ {
		parts, _, _ := c.advance(k, e, nil, nil)
		firsts = append(firsts, parts[0].topicID.String())
	}
	if firsts[0] == firsts[1] {
		t.Fatalf("no rotation: %v", firsts)
	}
	if _, _, err := c.open(shareSessionKey{"g", "m2"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.open(shareSessionKey{"g", "m3"}, nil, nil); !errors.Is(err, kerr.ShareSessionLimitReached) {
		t.Fatalf("third session of two slots: %v", err)
	}
	s, old, err := c.open(k, nil, nil)
	if err != nil || old == nil || s.epoch != 1 {
		t.Fatalf("re-open: %v %v %v", s, old, err)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].partition < parts[j].partition })
}

// TestShareLeaderChangeRebuildsFromDurableState: a follower answers
// NOT_LEADER_OR_FOLLOWER with the leader (KIP-951); when the leader goes,
// the new one rebuilds the share-partition from the durable state (one
// persister shared by both nodes stands in for the share coordinator)
// and redelivers exactly what was not acknowledged.
func TestShareLeaderChangeRebuildsFromDurableState(t *testing.T) {
	c := startCluster(t, 2, map[string]string{"group.coordinator.rebalance.protocols": "classic,consumer,share"})
	cl := c.client(kgo.DefaultProduceTopic("q"))
	createAssigned(t, cl, "q", nil, []int32{2, 1})
	c.waitFullISR("q", 0)
	shared := share.NewMemPersister()
	for _, id := range []int32{1, 2} {
		c.node(id).shareLeader.setTestPersister(shared)
	}
	tid := topicID(t, c.node(1), "q")

	f := newShareClient(t, c.node(1), tid, "f")
	rp := sharePartResp(t, f.fetch(0, 10))
	if rp == nil || rp.ErrorCode != kerr.NotLeaderForPartition.Code || rp.CurrentLeader.LeaderID != 2 {
		t.Fatalf("follower's answer: %+v", rp)
	}
	if resp := f.fetch(0, 10); len(resp.NodeEndpoints) != 1 || resp.NodeEndpoints[0].NodeID != 2 {
		t.Fatalf("node endpoints %+v, want broker 2's", resp.NodeEndpoints)
	}

	a := newShareClient(t, c.node(2), tid, "a")
	// Until broker 2's view has it lead the partition, it answers
	// NOT_LEADER_OR_FOLLOWER; the share-partition is created (at latest:
	// offset 0) by the first answer without error.
	if err := testutil.Within(testWait, func() error {
		// No partition in an incremental answer: loaded, nothing to say.
		if rp := sharePartResp(t, a.fetch(0, 100)); rp != nil && rp.ErrorCode != 0 {
			return fmt.Errorf("leader's answer %+v", rp)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b := newShareClient(t, c.node(1), tid, "b")
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 100))); len(got) != 10 {
		t.Fatalf("a acquired %v on the leader", got)
	}
	resp := a.ack(a.epoch, ackBatch(0, 5, 1))
	if e := resp.Topics[0].Partitions[0].ErrorCode; e != 0 {
		t.Fatalf("acks: %v", kerr.ErrorForCode(e))
	}
	c.stop(2)
	c.waitNewLeader("q", 0, 2)
	var got map[int64]int16
	deadline := time.Now().Add(testWait)
	for len(got) == 0 && time.Now().Before(deadline) {
		if b.epoch == 0 {
			rp := sharePartResp(t, b.fetch(1000, 100))
			got = map[int64]int16{}
			if rp != nil && rp.ErrorCode == 0 {
				got = acquiredOf(t, rp)
			} else {
				b.epoch = 0 // not the leader yet: open again
			}
			continue
		}
		got = acquiredOf(t, sharePartResp(t, b.fetch(1000, 100)))
	}
	want := map[int64]int16{6: 2, 7: 2, 8: 2, 9: 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("new leader delivered %v, want %v", got, want)
	}
}

// TestShareIdlePartitionDropped: once no session names a share-partition
// and nothing is acquired, the leader drops it (its state is durable); a
// member fetching again gets it back as it was.
func TestShareIdlePartitionDropped(t *testing.T) {
	n, tid := shareNode(t, nil)
	a := newShareClient(t, n, tid, "a")
	sharePartResp(t, a.fetch(0, 100))
	shareProduce(t, n, 0, 4)
	if got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 100))); len(got) != 4 {
		t.Fatalf("acquired %v", got)
	}
	if resp := a.ack(a.epoch, ackBatch(0, 1, 1)); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	// Closing the session releases 2-3; then nothing names the
	// share-partition and the sweep drops it.
	if resp := a.ack(-1); resp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
	}
	if err := testutil.Within(testWait, func() error {
		if k := len(n.shareLeader.snapshot()); k != 0 {
			return fmt.Errorf("%d share-partitions still held", k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b := newShareClient(t, n, tid, "b")
	got := acquiredOf(t, sharePartResp(t, b.fetch(5000, 100)))
	if want := map[int64]int16{2: 2, 3: 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reloaded share-partition delivered %v, want %v", got, want)
	}
}

// TestDescribeShareGroupOffsetsInFlight: DescribeShareGroupOffsets carries
// each share-partition's in-flight count (Strata's tagged field
// InFlightTag): records delivered and neither acknowledged nor archived,
// as of the share-partition's last durable write; other clients skip the
// tag, and kmsg decodes the rest of the answer unchanged.
func TestDescribeShareGroupOffsetsInFlight(t *testing.T) {
	n, tid := shareNode(t, nil)
	a := newShareClient(t, n, tid, "a")
	findCoordinator(t, a.c, "g") // creates __consumer_offsets: the group's coordinator answers 90
	waitLoaded(t, n, "g")
	sharePartResp(t, a.fetch(0, 100)) // the share-partition starts at the end (0)
	shareProduce(t, n, 0, 10)
	if got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 100))); len(got) != 10 {
		t.Fatalf("acquired %v, want 0-9", got)
	}
	inFlight := func() (int64, int64) {
		t.Helper()
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.SetVersion(1)
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = "g"
		req.Groups = append(req.Groups, rg)
		resp := dialRaw(t, n).roundTrip(req).(*kmsg.DescribeShareGroupOffsetsResponse)
		if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
			t.Fatalf("answer %+v", resp)
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		n := int64(-1)
		p.UnknownTags.Each(func(tag uint32, v []byte) {
			if tag == InFlightTag && len(v) == 4 {
				n = int64(int32(binary.BigEndian.Uint32(v)))
			}
		})
		return p.StartOffset, n
	}
	// Accepting 0-2 writes the state, the acquisitions of 3-9 with it.
	if e := a.ack(a.epoch, ackBatch(0, 2, 1)).Topics[0].Partitions[0].ErrorCode; e != 0 {
		t.Fatal(kerr.ErrorForCode(e))
	}
	if start, n := inFlight(); start != 3 || n != 7 {
		t.Fatalf("start offset %d, in flight %d: want 3 and 7", start, n)
	}
	// Releasing 3-4 keeps them in flight (delivered, to be redelivered);
	// rejecting 5-9 archives them.
	if e := a.ack(a.epoch, ackBatch(3, 4, 2), ackBatch(5, 9, 3)).Topics[0].Partitions[0].ErrorCode; e != 0 {
		t.Fatal(kerr.ErrorForCode(e))
	}
	if start, n := inFlight(); start != 3 || n != 2 {
		t.Fatalf("start offset %d, in flight %d: want 3 and 2", start, n)
	}
}

// TestShareFetchAnswersHolderEarly: a fetch carrying acknowledgements is
// answered at once, and one whose member holds records is answered empty
// within shareHoldFor instead of MaxWait (a kgo consumer's next
// acknowledgements queue behind it on its one connection).
func TestShareFetchAnswersHolderEarly(t *testing.T) {
	n, tid := shareNode(t, nil)
	a := newShareClient(t, n, tid, "a")
	sharePartResp(t, a.fetch(0, 100))
	shareProduce(t, n, 0, 10)
	if got := acquiredOf(t, sharePartResp(t, a.fetch(5000, 100))); len(got) != 10 {
		t.Fatalf("a acquired %v, want 0-9", got)
	}
	m := &n.shareLeader.m
	// Holding 0-9, nothing more to acquire: answered early, empty.
	if rp := sharePartResp(t, a.fetch(3000, 100)); rp != nil && len(rp.AcquiredRecords) > 0 {
		t.Fatalf("acquired %+v with nothing new", rp.AcquiredRecords)
	}
	if early, stalls := counterValue(t, m.heldEarly), counterValue(t, m.ackStalls); early != 1 || stalls != 0 {
		t.Fatalf("held early %v, ack stalls %v: want 1, 0 (the holder's fetch waited out MaxWait)", early, stalls)
	}
	// Again: answered early too, after a longer hold (the streak grew).
	sharePartResp(t, a.fetch(3000, 100))
	if early := counterValue(t, m.heldEarly); early != 2 {
		t.Fatalf("held early %v after a second fetch, want 2", early)
	}
	if k := n.shareSessions.holdStreak(shareSessionKey{"g", "a"}); k != 2 {
		t.Fatalf("hold streak %d, want 2", k)
	}
	// Acknowledging everything, nothing to acquire: answered at once.
	if rp := sharePartResp(t, a.fetch(3000, 100, fetchAck(0, 9, 1))); rp == nil || rp.AcknowledgeErrorCode != 0 {
		t.Fatalf("a's acks: %+v", rp)
	}
	if stalls := counterValue(t, m.ackStalls); stalls != 0 {
		t.Fatalf("ack stalls %v: the fetch carrying acknowledgements waited out MaxWait", stalls)
	}
	if k := n.shareSessions.holdStreak(shareSessionKey{"g", "a"}); k != 0 {
		t.Fatalf("hold streak %d after acknowledgements, want 0", k)
	}
	// Holding nothing: the fetch long-polls as before (not early).
	sharePartResp(t, a.fetch(200, 100))
	if early, stalls := counterValue(t, m.heldEarly), counterValue(t, m.ackStalls); early != 2 || stalls != 0 {
		t.Fatalf("held early %v, ack stalls %v after an idle fetch: want 2, 0", early, stalls)
	}
}

func TestShareHoldFor(t *testing.T) {
	for _, c := range []struct {
		streak int
		want   time.Duration
	}{{0, 2 * time.Millisecond}, {1, 4 * time.Millisecond}, {3, 16 * time.Millisecond}, {8, 512 * time.Millisecond}, {9, time.Second}, {40, time.Second}} {
		if got := shareHoldFor(c.streak); got != c.want {
			t.Errorf("shareHoldFor(%d) = %v, want %v", c.streak, got, c.want)
		}
	}
}
