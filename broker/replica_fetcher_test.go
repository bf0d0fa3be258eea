package broker

// Fetcher tests against an in-process fake leader, in the spirit of
// Kafka's AbstractFetcherThreadTest: the fake leader holds a real
// storage.Log per partition and answers Fetch and ListOffsets as Kafka's
// leader does (REPLICATION.md §1.3: epoch checks, the DivergingEpoch
// check on LastFetchedEpoch, out of range, reads up to the LEO), plus
// injected errors, transport failures and cut responses.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// fakeReplica is the fake leader's state of one partition.
type fakeReplica struct {
	log   *storage.Log
	epoch int32 // the leader's current leader epoch
	hw    int64 // -1: the LEO
	errs  []int16
	// cut, if > 0, cuts the records of the next answer with more bytes to
	// that many (a partial trailing batch, as a byte limit leaves it); cutAt
	// records the fetch offsets of such answers.
	cut   int
	cutAt []int64
	// oldPeer: the leader ignores LastFetchedEpoch (no DivergingEpoch), as
	// a leader before Fetch v12 or one not checking it.
	oldPeer bool
}

// fakeLeader is an in-process leader: a leaderEndpoint serving Fetch and
// ListOffsets from real logs.
type fakeLeader struct {
	t       *testing.T
	mu      sync.Mutex // guards everything below
	parts   map[tpKey]*fakeReplica
	fails   int // transport errors for the next requests
	fetches []*kmsg.FetchRequest
	lists   []*kmsg.ListOffsetsRequest
	changed chan struct{} // closed and replaced on every leader append
}

func newFakeLeader(t *testing.T) *fakeLeader {
	return &fakeLeader{t: t, parts: map[tpKey]*fakeReplica{}, changed: make(chan struct{})}
}

func openTestLog(t *testing.T, fs vfs.FS, name string) *storage.Log {
	t.Helper()
	l, err := storage.OpenLog(storage.LogOptions{Dir: filepath.Join(t.TempDir(), name+"-0"), Topic: name, FS: fs, Config: storage.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// replica returns the leader's partition topic-0, created at epoch 0.
func (fl *fakeLeader) replica(topic string) *fakeReplica {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	k := tpKey{topic, 0}
	if fl.parts[k] == nil {
		fl.parts[k] = &fakeReplica{log: openTestLog(fl.t, nil, "leader-"+topic), hw: -1}
	}
	return fl.parts[k]
}

// appendAs appends records to the leader's log as leader in epoch e (the
// leader's epoch becomes e, and its cache gets (e, LEO) first, KIP-279).
func (fl *fakeLeader) appendAs(topic string, e int32, records ...[]byte) {
	fl.t.Helper()
	r := fl.replica(topic)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	r.epoch = max(r.epoch, e)
	if err := r.log.LeaderEpochs().Assign(e, r.log.LogEndOffset()); err != nil {
		fl.t.Fatal(err)
	}
	for _, b := range records {
		if _, err := r.log.Append(slices.Clone(b), storage.AppendOptions{LeaderEpoch: e, AssignOffsets: true}); err != nil {
			fl.t.Fatal(err)
		}
	}
	close(fl.changed)
	fl.changed = make(chan struct{})
}

func (fl *fakeLeader) set(topic string, fn func(r *fakeReplica)) {
	r := fl.replica(topic)
	fl.mu.Lock()
	fn(r)
	close(fl.changed)
	fl.changed = make(chan struct{})
	fl.mu.Unlock()
}

func (fl *fakeLeader) close() {}

func (fl *fakeLeader) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	fl.mu.Lock()
	if fl.fails > 0 {
		fl.fails--
		fl.mu.Unlock()
		return nil, errors.New("fake leader: connection refused")
	}
	fl.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		deadline := time.After(time.Duration(r.MaxWaitMillis) * time.Millisecond)
		for {
			fl.mu.Lock()
			fl.fetches = append(fl.fetches, r)
			resp, bytes := fl.fetchLocked(r)
			ch := fl.changed
			fl.mu.Unlock()
			if bytes > 0 || fetchHasError(resp) {
				return resp, nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-deadline:
				return resp, nil
			case <-ch:
			}
		}
	case *kmsg.ListOffsetsRequest:
		fl.mu.Lock()
		defer fl.mu.Unlock()
		fl.lists = append(fl.lists, r)
		resp := kmsg.NewPtrListOffsetsResponse()
		for _, t := range r.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition = p.Partition
				fr := fl.parts[tpKey{t.Topic, p.Partition}]
				switch {
				case fr == nil:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case p.Timestamp == -1:
					rp.Offset = fr.log.LogEndOffset() // a replica asks: LEO
				case p.Timestamp == -2:
					rp.Offset = fr.log.LogStartOffset()
				case p.Timestamp == -4:
					rp.Offset = fr.log.LocalLogStartOffset()
				default:
					rp.ErrorCode = kerr.InvalidRequest.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.OffsetForLeaderEpochRequest:
		fl.mu.Lock()
		defer fl.mu.Unlock()
		resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition = p.Partition
				if fr := fl.parts[tpKey{t.Topic, p.Partition}]; fr == nil {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				} else {
					rp.LeaderEpoch, rp.EndOffset = fr.log.LeaderEpochs().EndOffsetFor(p.LeaderEpoch, fr.log.LogEndOffset())
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("fake leader: unexpected %T", req)
}

func fetchHasError(resp *kmsg.FetchResponse) bool {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.DivergingEpoch.Epoch >= 0 {
				return true
			}
		}
	}
	return false
}

// fetchLocked answers a follower's fetch as Kafka's Partition.fetchRecords.
func (fl *fakeLeader) fetchLocked(req *kmsg.FetchRequest) (*kmsg.FetchResponse, int) {
	resp := kmsg.NewPtrFetchResponse()
	total := 0
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, fp := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = fp.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			r := fl.parts[tpKey{t.Topic, fp.Partition}]
			func() {
				if r == nil {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					return
				}
				if len(r.errs) > 0 {
					rp.ErrorCode, r.errs = r.errs[0], r.errs[1:]
					return
				}
				switch {
				case fp.CurrentLeaderEpoch < r.epoch:
					rp.ErrorCode = kerr.FencedLeaderEpoch.Code
					return
				case fp.CurrentLeaderEpoch > r.epoch:
					rp.ErrorCode = kerr.UnknownLeaderEpoch.Code
					return
				}
				l := r.log
				leo := l.LogEndOffset()
				hw := r.hw
				if hw < 0 {
					hw = leo
				}
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw, hw, l.LogStartOffset()
				if fp.LastFetchedEpoch >= 0 && !r.oldPeer {
					e, end := l.LeaderEpochs().EndOffsetFor(fp.LastFetchedEpoch, leo)
					if e == checkpoint.UndefinedEpoch || end < 0 {
						rp.ErrorCode = kerr.OffsetOutOfRange.Code
						return
					}
					if e < fp.LastFetchedEpoch || end < fp.FetchOffset {
						rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = e, end
						return
					}
				}
				if fp.FetchOffset < l.LogStartOffset() || fp.FetchOffset > leo {
					rp.ErrorCode = kerr.OffsetOutOfRange.Code
					return
				}
				if fp.FetchOffset == leo {
					return
				}
				v, err := l.Read(fp.FetchOffset, int(fp.PartitionMaxBytes), leo)
				if err != nil {
					rp.ErrorCode = kerr.KafkaStorageError.Code
					return
				}
				b, err := v.Bytes()
				v.Release()
				if err != nil {
					rp.ErrorCode = kerr.KafkaStorageError.Code
					return
				}
				if r.cut > 0 && r.cut < len(b) {
					b = b[:r.cut]
					r.cut = 0
					r.cutAt = append(r.cutAt, fp.FetchOffset)
				}
				rp.RecordBatches = b
				total += len(b)
			}()
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, total
}

func (fl *fakeLeader) fetchCount() int {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return len(fl.fetches)
}

// fetcherHarness runs a replicaFetchers whose every fetcher talks to one
// fake leader (broker 2); the follower is broker 5.
type fetcherHarness struct {
	t       *testing.T
	leader  *fakeLeader
	m       *replicaFetchers
	metrics *fetcherMetrics
	mu      sync.Mutex // guards rebuilds
	rebuild func(p *partition, logStart, localStart int64) (int64, error)
}

func newFetcherHarness(t *testing.T) *fetcherHarness {
	h := &fetcherHarness{t: t, leader: newFakeLeader(t), metrics: newFetcherMetrics()}
	h.m = newReplicaFetchers(fetcherEnv{
		nodeID:      5,
		brokerEpoch: func() int64 { return 42 },
		cfg:         ReplicaFetchSettings{Fetchers: 1, MaxBytes: 1 << 20, ResponseMaxBytes: 10 << 20, MaxWait: 50 * time.Millisecond, MinBytes: 1, Backoff: 20 * time.Millisecond},
		logger:      testLogger(),
		metrics:     h.metrics,
		rebuild: func(ctx context.Context, p *partition, logStart, localStart int64) (int64, error) {
			h.mu.Lock()
			fn := h.rebuild
			h.mu.Unlock()
			if fn == nil {
				return -1, errors.New("no rebuild")
			}
			return fn(p, logStart, localStart)
		},
		dial: func(leader int32, addr string) (leaderEndpoint, error) { return h.leader, nil },
	})
	t.Cleanup(h.m.close)
	return h
}

// follower opens the follower's partition topic-0 over fs (nil: the OS).
func (h *fetcherHarness) follower(topic string, fs vfs.FS) *partition {
	h.t.Helper()
	p := newPartition(topic, uuid.UUID{1}, 0, openTestLog(h.t, fs, "follower-"+topic))
	if _, err := p.loadProducerState(&producerCell{}, time.Now().UnixMilli()); err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *fetcherHarness) follow(p *partition, epoch int32) {
	h.m.follow(p, followTarget{leader: 2, addr: "leader:9092", epoch: epoch, topicID: p.topicID})
}

// state returns a copy of p's fetch state.
func (h *fetcherHarness) state(p *partition) (followState, bool) {
	var out followState
	var ok bool
	h.m.each(func(st *followState) {
		if st.p == p {
			out, ok = *st, true
		}
	})
	return out, ok
}

// appendLocal writes records into a log as if this replica had led in
// epoch e (its own history, possibly diverging from the leader's).
func appendLocal(t *testing.T, p *partition, e int32, records ...[]byte) {
	t.Helper()
	p.leaderEpoch.Store(e)
	p.leader.Store(true)
	defer p.leader.Store(false)
	for _, b := range records {
		// As a leader's produce: the producer state records it too.
		if _, err := p.appendRecords(slices.Clone(b), e, time.Now().UnixMilli(), nil); err != nil {
			t.Fatal(err)
		}
	}
}

func readLog(t *testing.T, l *storage.Log) []byte {
	t.Helper()
	b, err := tryReadLog(l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tryReadLog reads a log that may be truncated meanwhile (an error then).
func tryReadLog(l *storage.Log) ([]byte, error) {
	var out bytes.Buffer
	for off, end := l.LogStartOffset(), l.LogEndOffset(); off < end; {
		v, err := l.Read(off, 64<<20, end)
		if err != nil {
			return nil, err
		}
		b, err := v.Bytes()
		next := v.NextOffset
		v.Release()
		if err != nil {
			return nil, err
		}
		if next <= off {
			return nil, fmt.Errorf("read at %d made no progress", off)
		}
		out.Write(b)
		off = next
	}
	return out.Bytes(), nil
}

// waitIdentical waits until the follower's log is the leader's, byte for
// byte, with the same epoch history.
func (h *fetcherHarness) waitIdentical(p *partition) {
	h.t.Helper()
	lr := h.leader.replica(p.topic)
	testutil.Eventually(h.t, testWait, func() error {
		h.leader.mu.Lock()
		want, wantLEO := readLog(h.t, lr.log), lr.log.LogEndOffset()
		wantEpochs := lr.log.LeaderEpochs().Entries()
		h.leader.mu.Unlock()
		got, err := tryReadLog(p.log)
		if err != nil {
			return err
		}
		if p.log.LogEndOffset() != wantLEO || !bytes.Equal(got, want) {
			return fmt.Errorf("follower LEO %d (%d bytes), leader LEO %d (%d bytes)", p.log.LogEndOffset(), len(got), wantLEO, len(want))
		}
		// The leader's cache may hold an epoch that wrote nothing yet.
		gotEpochs := p.log.LeaderEpochs().Entries()
		for len(wantEpochs) > 0 && wantEpochs[len(wantEpochs)-1].StartOffset >= wantLEO {
			wantEpochs = wantEpochs[:len(wantEpochs)-1]
		}
		if !slices.Equal(gotEpochs, wantEpochs) {
			return fmt.Errorf("follower epochs %v, leader %v", gotEpochs, wantEpochs)
		}
		return nil
	}, "follower of %s identical to the leader", p.topic)
}

func vals(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// TestFetcherReplicatesBatchesAndHighWatermark: batches appear on the
// follower byte for byte (offsets and epochs the leader's), its HW is
// min(leader HW, own LEO), its log start follows the leader's, and the
// request is a follower's: ReplicaState, CurrentLeaderEpoch,
// LastFetchedEpoch, FetchOffset = LEO, the configured limits.
func TestFetcherReplicatesBatchesAndHighWatermark(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 0, recordBatch(1000, vals("a", 3)...), recordBatch(1001, vals("b", 2)...))
	h.leader.appendAs("t", 1, recordBatch(1002, vals("c", 4)...))
	h.leader.set("t", func(r *fakeReplica) { r.epoch, r.hw = 1, 7 })
	p := h.follower("t", nil)
	h.follow(p, 1)
	h.waitIdentical(p)
	testutil.Eventually(t, testWait, func() bool { return p.hw.Load() == 7 }, "follower HW 7 (the leader's)")

	h.leader.set("t", func(r *fakeReplica) {
		r.hw = 9
		if err := r.log.SetLogStartOffset(3); err != nil {
			t.Fatal(err)
		}
	})
	h.leader.appendAs("t", 1, recordBatch(1003, "d")) // wakes the parked fetch
	testutil.Eventually(t, testWait, func() bool { return p.hw.Load() == 9 && p.log.LogStartOffset() == 3 },
		"follower HW 9 and log start 3, got %d and %d", p.hw.Load(), p.log.LogStartOffset())

	// The next request built says so: LogStartOffset is the follower's.
	var last *kmsg.FetchRequest
	testutil.Eventually(t, testWait, func() bool {
		h.leader.mu.Lock()
		defer h.leader.mu.Unlock()
		last = h.leader.fetches[len(h.leader.fetches)-1]
		return last.Topics[0].Partitions[0].LogStartOffset == 3
	}, "a fetch sending log start 3")
	fp := last.Topics[0].Partitions[0]
	if last.ReplicaState.ID != 5 || last.ReplicaState.Epoch != 42 || last.ReplicaID != 5 || last.MaxWaitMillis != 50 || last.MinBytes != 1 ||
		last.MaxBytes != 10<<20 || fp.PartitionMaxBytes != 1<<20 || fp.CurrentLeaderEpoch != 1 || fp.LastFetchedEpoch != 1 ||
		fp.FetchOffset != p.log.LogEndOffset() || fp.LogStartOffset != 3 {
		t.Fatalf("follower fetch %+v partition %+v", last, fp)
	}
}

// TestFetcherTruncatesOnDivergingEpoch: the follower wrote offsets 5..9
// in epoch 1 that the leader (which took over in epoch 2 at offset 5)
// never had; the leader's DivergingEpoch{0, 5} makes it cut them and take
// the leader's instead — not truncating to the HW (which is 0 here).
func TestFetcherTruncatesOnDivergingEpoch(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 0, recordBatch(1, vals("a", 5)...))
	h.leader.appendAs("t", 2, recordBatch(2, vals("new", 3)...))
	p := h.follower("t", nil)
	appendLocal(t, p, 0, recordBatch(1, vals("a", 5)...))
	appendLocal(t, p, 1, recordBatch(3, vals("old", 5)...))
	p.hw.Store(0)
	h.follow(p, 2)
	h.waitIdentical(p)
	if got := p.log.LeaderEpochs().Entries(); len(got) != 2 || got[1] != (checkpoint.EpochEntry{Epoch: 2, StartOffset: 5}) {
		t.Fatalf("epochs %v", got)
	}
}

// TestFetcherDropsAnEmptyEpochAtItsLEO: the follower led epoch 1 for a
// moment (its epoch entry (1, 5) written at election, KIP-279) and
// appended nothing before epoch 2 went to the leader, which wrote at 5
// on. Its LastFetchedEpoch 1 gets DivergingEpoch{0, 5}: truncating to 5
// moves no record, but the empty epoch 1 must go, or the follower sends
// it forever and never fetches (seen in a rolling restart of three nodes:
// "follower truncated by leader epoch ... from=4663 to=4663" in a loop).
func TestFetcherDropsAnEmptyEpochAtItsLEO(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 0, recordBatch(1, vals("a", 5)...))
	h.leader.appendAs("t", 2, recordBatch(2, vals("new", 3)...))
	p := h.follower("t", nil)
	appendLocal(t, p, 0, recordBatch(1, vals("a", 5)...))
	if err := p.log.LeaderEpochs().Assign(1, p.log.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	h.follow(p, 2)
	h.waitIdentical(p)
	if got := p.log.LeaderEpochs().Entries(); len(got) != 2 || got[1] != (checkpoint.EpochEntry{Epoch: 2, StartOffset: 5}) {
		t.Fatalf("epochs %v, want epoch 0 then (2, 5)", got)
	}
}

// TestFetcherTruncatesOverSeveralRounds: epochs the follower never saw
// (KIP-279's multi-round case). Follower: e0 [0,3) e1 [3,6) e3 [6,9);
// leader: e0 [0,3) e2 [3,8) e4 [8,10). Round 1: LastFetchedEpoch 3 →
// leader (2, 8) → the follower has no epoch 2, so it cuts to the end of
// its epoch 1 (6), not complete; round 2: LastFetchedEpoch 1 → leader
// (0, 3) → cut to 3; then it fetches the leader's e2 and e4.
func TestFetcherTruncatesOverSeveralRounds(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 0, recordBatch(1, vals("a", 3)...))
	h.leader.appendAs("t", 2, recordBatch(2, vals("l2", 5)...))
	h.leader.appendAs("t", 4, recordBatch(3, vals("l4", 2)...))
	p := h.follower("t", nil)
	appendLocal(t, p, 0, recordBatch(1, vals("a", 3)...))
	appendLocal(t, p, 1, recordBatch(4, vals("f1", 3)...))
	// One record per batch, so a truncation lands exactly where it is
	// asked to (storage cuts whole batches).
	appendLocal(t, p, 3, recordBatch(5, "f3-0"), recordBatch(6, "f3-1"), recordBatch(7, "f3-2"))
	h.follow(p, 4)
	h.waitIdentical(p)
	var lastFetched []int32
	h.leader.mu.Lock()
	for _, f := range h.leader.fetches {
		e := f.Topics[0].Partitions[0].LastFetchedEpoch
		if len(lastFetched) == 0 || lastFetched[len(lastFetched)-1] != e {
			lastFetched = append(lastFetched, e)
		}
	}
	h.leader.mu.Unlock()
	if !slices.Equal(lastFetched[:3], []int32{3, 1, 0}) {
		t.Fatalf("LastFetchedEpoch sequence %v, want 3, 1, 0, ...", lastFetched)
	}
}

// TestFetcherFencedPartitionWaitsForNewMetadata: FENCED_LEADER_EPOCH (our
// epoch 3, the leader's 4) parks the partition: no more fetches of it,
// even when the same epoch is handed in again; a delta with epoch 4
// resumes it.
func TestFetcherFencedPartitionWaitsForNewMetadata(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 4, recordBatch(1, vals("a", 3)...))
	p := h.follower("t", nil)
	h.follow(p, 3)
	testutil.Eventually(t, testWait, func() bool { st, _ := h.state(p); return st.fenced }, "partition fenced")
	n := h.leader.fetchCount()
	h.follow(p, 3) // a delta that changes nothing for it
	// Another partition on the same fetcher keeps fetching meanwhile: once
	// it has replicated, the fetcher has sent requests without p in them.
	h.leader.appendAs("u", 0, recordBatch(1, "x"))
	q := h.follower("u", nil)
	h.follow(q, 0)
	h.waitIdentical(q)
	h.leader.mu.Lock()
	for _, f := range h.leader.fetches[n:] {
		for _, t2 := range f.Topics {
			if t2.Topic == "t" {
				h.leader.mu.Unlock()
				t.Fatal("a fenced partition was fetched again in the same epoch")
			}
		}
	}
	h.leader.mu.Unlock()
	if st, _ := h.state(p); !st.fenced || p.log.LogEndOffset() != 0 {
		t.Fatalf("state %+v, LEO %d", st, p.log.LogEndOffset())
	}
	h.follow(p, 4)
	h.waitIdentical(p)
}

// TestFetcherRetriesUnknownLeaderEpoch: UNKNOWN_LEADER_EPOCH (the leader
// has not seen our newer epoch yet) and NOT_LEADER_OR_FOLLOWER are retried
// after the backoff; once the leader is in our epoch, we catch up.
func TestFetcherRetriesUnknownLeaderEpoch(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 4, recordBatch(1, vals("a", 3)...))
	h.leader.set("t", func(r *fakeReplica) { r.errs = []int16{kerr.NotLeaderForPartition.Code} })
	p := h.follower("t", nil)
	h.follow(p, 5)
	testutil.Eventually(t, testWait, func() bool { return h.leader.fetchCount() >= 3 }, "retries")
	if p.log.LogEndOffset() != 0 {
		t.Fatal("appended from a leader in another epoch")
	}
	if st, _ := h.state(p); st.fenced || st.failed {
		t.Fatalf("state %+v: want retrying", st)
	}
	h.leader.appendAs("t", 5, recordBatch(2, "b"))
	h.waitIdentical(p)
}

// TestFetcherOutOfRangeHigh: the leader's log ends below ours with no
// epoch to compare (batches without a leader epoch): OFFSET_OUT_OF_RANGE,
// ListOffsets latest (the leader's LEO, 7) is below our LEO (10), so we
// truncate to 7, below our high watermark: the unclean case, logged.
func TestFetcherOutOfRangeHigh(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 0, recordBatch(1, vals("a", 7)...))
	h.leader.set("t", func(r *fakeReplica) {
		// No epochs in the leader's cache either: only out of range tells.
		if err := r.log.LeaderEpochs().Clear(); err != nil {
			t.Fatal(err)
		}
	})
	p := h.follower("t", nil)
	appendLocal(t, p, -1, recordBatch(1, vals("a", 7)...), recordBatch(5, vals("z", 3)...))
	p.hw.Store(10)
	h.follow(p, 0)
	testutil.Eventually(t, testWait, func() bool { return p.log.LogEndOffset() == 7 }, "truncated to the leader's end")
	if got := readLog(t, p.log); len(got) != len(recordBatch(1, vals("a", 7)...)) {
		t.Fatalf("follower kept %d bytes, want its first batch", len(got))
	}
	if hw := p.hw.Load(); hw > 7 {
		t.Fatalf("HW %d above the LEO", hw)
	}
	h.leader.mu.Lock()
	defer h.leader.mu.Unlock()
	if len(h.leader.lists) == 0 || h.leader.lists[0].ReplicaID != 5 || h.leader.lists[0].Topics[0].Partitions[0].Timestamp != -1 {
		t.Fatalf("ListOffsets %+v", h.leader.lists)
	}
}

// TestFetcherOutOfRangeLow: our log ends below the leader's log start:
// OFFSET_OUT_OF_RANGE, latest >= our LEO, earliest (5) above it, so the
// log starts over empty at 5 and fetches from there.
func TestFetcherOutOfRangeLow(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 0, recordBatch(1, vals("a", 5)...), recordBatch(2, vals("b", 5)...))
	h.leader.set("t", func(r *fakeReplica) {
		if err := r.log.SetLogStartOffset(5); err != nil {
			t.Fatal(err)
		}
	})
	p := h.follower("t", nil)
	appendLocal(t, p, 0, recordBatch(1, vals("a", 2)...))
	h.follow(p, 0)
	testutil.Eventually(t, testWait, func() bool { return p.log.LogStartOffset() == 5 && p.log.LogEndOffset() == 10 },
		"follower restarted at the leader's log start: start %d, LEO %d", p.log.LogStartOffset(), p.log.LogEndOffset())
	lb := readLog(t, h.leader.replica("t").log)
	if !bytes.Equal(readLog(t, p.log), lb) {
		t.Fatal("follower differs from the leader")
	}
}

// TestFetcherSameEpochKeepsFetchState: reconcile hands in every
// partition on every delta; one whose leader and epoch did not change
// keeps its state (its backoff here), so nothing is fetched or truncated
// again for it; a new epoch restarts it at once (KAFKA-7164: every epoch
// change is a new fetch state).
func TestFetcherSameEpochKeepsFetchState(t *testing.T) {
	h := newFetcherHarness(t)
	h.m.env.cfg.Backoff = time.Hour
	h.leader.appendAs("t", 1, recordBatch(1, vals("a", 3)...))
	h.leader.set("t", func(r *fakeReplica) { r.errs = []int16{kerr.UnknownLeaderEpoch.Code} })
	p := h.follower("t", nil)
	h.follow(p, 1)
	testutil.Eventually(t, testWait, func() bool { st, _ := h.state(p); return time.Until(st.delayUntil) > time.Minute }, "backing off")
	before, _ := h.state(p)
	for range 3 {
		h.follow(p, 1)
	}
	after, _ := h.state(p)
	if after.gen != before.gen || after.delayUntil != before.delayUntil {
		t.Fatalf("same epoch restarted the state: %+v -> %+v", before, after)
	}
	h.leader.set("t", func(r *fakeReplica) { r.epoch = 2 })
	h.follow(p, 2)
	h.waitIdentical(p)
}

// TestFetcherPartitionFailsOnStorageError: the follower's segment write
// fails (errfs): the partition is marked failed and no longer fetched,
// the fetcher does not crash, and another partition it fetches goes on.
func TestFetcherPartitionFailsOnStorageError(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("bad", 0, recordBatch(1, vals("a", 3)...))
	h.leader.appendAs("good", 0, recordBatch(1, vals("b", 3)...))
	rule := errfs.On(errfs.Writes...).Glob("*.log").Err(errors.New("EIO"))
	bad := h.follower("bad", errfs.Wrap(vfs.Default, rule))
	good := h.follower("good", nil)
	h.follow(bad, 0)
	h.follow(good, 0)
	testutil.Eventually(t, testWait, func() bool { st, _ := h.state(bad); return st.failed }, "partition failed")
	h.waitIdentical(good)
	if bad.log.LogEndOffset() != 0 || !bad.log.Failed() {
		t.Fatalf("failed partition LEO %d failed=%v", bad.log.LogEndOffset(), bad.log.Failed())
	}
	h.leader.appendAs("good", 0, recordBatch(2, "c"))
	h.waitIdentical(good)
}

// TestFetcherCutsAPartialTrailingBatch: a response whose last batch was
// cut by a byte limit (KIP-74) is appended up to its last whole batch; the
// rest comes with the next fetch.
func TestFetcherCutsAPartialTrailingBatch(t *testing.T) {
	h := newFetcherHarness(t)
	b1, b2 := recordBatch(1, vals("a", 4)...), recordBatch(2, vals("b", 4)...)
	h.leader.appendAs("t", 0, b1, b2)
	h.leader.set("t", func(r *fakeReplica) { r.cut = len(b1) + len(b2)/2 })
	p := h.follower("t", nil)
	h.follow(p, 0)
	h.waitIdentical(p)
	h.leader.mu.Lock()
	defer h.leader.mu.Unlock()
	var offsets []int64
	for _, f := range h.leader.fetches {
		offsets = append(offsets, f.Topics[0].Partitions[0].FetchOffset)
	}
	// The cut answer was at 0; the next fetch asked from 4: the whole
	// first batch was appended, the partial second one left.
	if cutAt := h.leader.parts[tpKey{"t", 0}].cutAt; !slices.Equal(cutAt, []int64{0}) || !slices.Contains(offsets, 4) {
		t.Fatalf("cut answers at %v, fetch offsets %v", cutAt, offsets)
	}
	if st, _ := h.state(p); st.failed || st.fenced {
		t.Fatalf("state %+v", st)
	}
}

// TestFetcherBacksOffOnTransportErrors: refused connections back off and
// retry; the follower catches up once the leader answers.
func TestFetcherBacksOffOnTransportErrors(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 0, recordBatch(1, vals("a", 3)...))
	h.leader.mu.Lock()
	h.leader.fails = 3
	h.leader.mu.Unlock()
	p := h.follower("t", nil)
	h.follow(p, 0)
	h.waitIdentical(p)
	h.leader.mu.Lock()
	defer h.leader.mu.Unlock()
	if h.leader.fails != 0 {
		t.Fatalf("%d failures left", h.leader.fails)
	}
}

// TestFetcherRebuildsFromTierOnOffsetMovedToTieredStorage: error 109 hands
// the partition to rebuildFromTier with the leader's log start and local
// log start; fetching resumes where it says.
func TestFetcherRebuildsFromTierOnOffsetMovedToTieredStorage(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 0, recordBatch(1, vals("a", 5)...), recordBatch(2, vals("b", 5)...))
	h.leader.set("t", func(r *fakeReplica) { r.errs = []int16{kerr.OffsetMovedToTieredStorage.Code} })
	p := h.follower("t", nil)
	var got [2]int64
	h.mu.Lock()
	h.rebuild = func(p *partition, logStart, localStart int64) (int64, error) {
		got = [2]int64{logStart, localStart}
		// As the tier rebuild does: the log restarts at the remote
		// segment's end + 1, here 5.
		return 5, p.truncateFullyAsFollower(5)
	}
	h.mu.Unlock()
	h.follow(p, 0)
	testutil.Eventually(t, testWait, func() bool { return p.log.LogStartOffset() == 5 && p.log.LogEndOffset() == 10 }, "resumed at 5")
	h.mu.Lock()
	defer h.mu.Unlock()
	if got != [2]int64{-1, 0} { // the injected answer carries no offsets; ListOffsets -4 says 0
		t.Fatalf("rebuild called with %v", got)
	}
}

// TestFetcherRebuildsProducerState: the follower's producer state follows
// what it appends (the same replay a reload does) and what it truncates,
// so as leader it would dedupe a retry of a batch the old leader
// acknowledged and accept the next sequence.
func TestFetcherRebuildsProducerState(t *testing.T) {
	h := newFetcherHarness(t)
	ab := producerBatch(7, 0, 0, "a", "b")
	h.leader.appendAs("t", 0, ab, producerBatch(7, 0, 2, "c"))
	h.leader.appendAs("t", 2) // elected in epoch 2 at offset 3 (KIP-279's entry)
	p := h.follower("t", nil)
	appendLocal(t, p, 0, ab)
	// Written here as leader of epoch 1, never replicated.
	appendLocal(t, p, 1, producerBatch(7, 0, 2, "x"), producerBatch(8, 0, 0, "only-here"))
	h.follow(p, 2)
	h.waitIdentical(p)
	p.prod.mu.Lock()
	defer p.prod.mu.Unlock()
	e, ok := p.prod.st.Entry(7)
	if !ok || len(e.Batches) != 2 || e.Batches[1].FirstSeq != 2 || e.Batches[1].FirstOffset != 2 {
		t.Fatalf("producer 7: %+v %v", e, ok)
	}
	if _, ok := p.prod.st.Entry(8); ok {
		t.Fatal("producer 8 only wrote truncated batches, yet is remembered")
	}
	hdr, err := batch.ParseHeader(producerBatch(7, 0, 2, "c"))
	if err != nil {
		t.Fatal(err)
	}
	if dup, err := p.prod.st.Check(hdr); err != nil || dup == nil || dup.FirstOffset != 2 {
		t.Fatalf("retry of the acknowledged batch: dup %+v err %v, want a duplicate at 2", dup, err)
	}
}

// TestFetcherStopWaitsOutAStep: once stopFollowing returns, the fetcher
// no longer appends to the log (a new leader may write it).
func TestFetcherStopWaitsOutAStep(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 0, recordBatch(1, vals("a", 3)...))
	p := h.follower("t", nil)
	h.follow(p, 0)
	h.waitIdentical(p)
	h.m.stop(p)
	leo := p.log.LogEndOffset()
	h.leader.appendAs("t", 0, recordBatch(2, "b"))
	// The fetcher of this leader is gone with its last partition.
	h.m.mu.Lock()
	n := len(h.m.fetchers)
	h.m.mu.Unlock()
	if n != 0 || p.log.LogEndOffset() != leo {
		t.Fatalf("%d fetchers left, LEO %d -> %d", n, leo, p.log.LogEndOffset())
	}
}

// TestFetcherTruncatesByEpochQueryWhenTheLeaderDoesNotCheck: a leader
// that ignores LastFetchedEpoch sends its batch holding our LEO, which
// starts below it (our log went another way there): the follower asks
// OffsetsForLeaderEpoch for its latest epoch, truncates to the leader's
// end of it, and fetches the leader's records.
func TestFetcherTruncatesByEpochQueryWhenTheLeaderDoesNotCheck(t *testing.T) {
	h := newFetcherHarness(t)
	h.leader.appendAs("t", 0, recordBatch(1, vals("a", 5)...))
	h.leader.appendAs("t", 2, recordBatch(2, vals("new", 6)...))
	h.leader.set("t", func(r *fakeReplica) { r.oldPeer = true })
	p := h.follower("t", nil)
	appendLocal(t, p, 0, recordBatch(1, vals("a", 5)...))
	appendLocal(t, p, 1, recordBatch(3, vals("old", 3)...))
	h.follow(p, 2)
	h.waitIdentical(p)
}

// TestFetcherManagerOneFetcherPerSourceAndID: with num.replica.fetchers=2
// the partitions of one leader go to two fetchers (one request in flight
// each), every partition replicates, and a leader's new address (a
// restarted broker on another port) moves its partitions to a new fetcher,
// stopping the old one.
func TestFetcherManagerOneFetcherPerSourceAndID(t *testing.T) {
	h := newFetcherHarness(t)
	h.m.env.cfg.Fetchers = 2
	var ps []*partition
	for i := range 6 {
		topic := fmt.Sprintf("m%d", i)
		h.leader.appendAs(topic, 0, recordBatch(1, vals(topic, 2)...))
		p := h.follower(topic, nil)
		h.follow(p, 0)
		ps = append(ps, p)
	}
	for _, p := range ps {
		h.waitIdentical(p)
	}
	h.m.mu.Lock()
	keys := slices.Collect(maps.Keys(h.m.fetchers))
	h.m.mu.Unlock()
	if len(keys) != 2 {
		t.Fatalf("fetchers %v, want 2", keys)
	}
	for _, p := range ps {
		h.m.follow(p, followTarget{leader: 2, addr: "leader:9999", epoch: 0, topicID: p.topicID})
	}
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	for k := range h.m.fetchers {
		if k.addr != "leader:9999" {
			t.Fatalf("fetcher %v of the old address still running", k)
		}
	}
	if len(h.m.byPart) != 6 {
		t.Fatalf("%d partitions followed", len(h.m.byPart))
	}
}

// BenchmarkFollowerAppend measures a follower's append of one fetched
// 16-record batch of 1 KiB records: CRC check, one write, producer state
// replay. Allocations are what the fetch path costs per batch.
func BenchmarkFollowerAppend(b *testing.B) {
	l, err := storage.OpenLog(storage.LogOptions{Dir: filepath.Join(b.TempDir(), "bench-0"), Topic: "bench", Config: storage.DefaultConfig()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	p := newPartition("bench", uuid.UUID{1}, 0, l)
	if _, err := p.loadProducerState(&producerCell{}, time.Now().UnixMilli()); err != nil {
		b.Fatal(err)
	}
	v := string(bytes.Repeat([]byte("x"), 1024))
	vs := make([]string, 16)
	for i := range vs {
		vs[i] = v
	}
	tmpl := producerBatch(9, 0, 0, vs...)
	buf := make([]byte, len(tmpl))
	b.SetBytes(int64(len(tmpl)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		copy(buf, tmpl)
		batch.SetBaseOffset(buf, int64(i)*16)
		if _, err := p.appendAsFollower(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFetcherConvergesFromRandomDivergentHistories: for random histories
// — a common prefix, then epochs each written by one side only (one
// leader per epoch), the leader's current epoch the newest — the follower
// ends byte-identical to the leader with its epochs through DivergingEpoch
// answers, and never truncates into the common prefix (the committed
// part). (The OffsetsForLeaderEpoch fallback for a leader that ignores
// LastFetchedEpoch only sees a divergence that splits one of the leader's
// batches, so it is not held to this.)
func TestFetcherConvergesFromRandomDivergentHistories(t *testing.T) {
	for seed := range 60 {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			h := newFetcherHarness(t)
			p := h.follower("r", nil)
			h.leader.replica("r")
			batches := func(tag string) [][]byte {
				var out [][]byte
				for i := range 1 + rng.IntN(3) {
					out = append(out, recordBatch(int64(1+i), vals(fmt.Sprintf("%s-%d", tag, i), 1+rng.IntN(4))...))
				}
				return out
			}
			epoch := int32(0)
			for range rng.IntN(4) { // the common prefix, on both
				bs := batches(fmt.Sprintf("common-%d", epoch))
				h.leader.appendAs("r", epoch, bs...)
				appendLocal(t, p, epoch, bs...)
				epoch += 1 + int32(rng.IntN(2))
			}
			prefix := p.log.LogEndOffset()
			for range 1 + rng.IntN(5) { // then each epoch on one side
				bs := batches(fmt.Sprintf("e%d", epoch))
				if rng.IntN(2) == 0 {
					h.leader.appendAs("r", epoch, bs...)
				} else {
					appendLocal(t, p, epoch, bs...)
				}
				epoch += 1 + int32(rng.IntN(2))
			}
			h.leader.appendAs("r", epoch, batches("current")...)
			h.follow(p, epoch)
			h.waitIdentical(p)
			h.leader.mu.Lock()
			defer h.leader.mu.Unlock()
			for _, f := range h.leader.fetches {
				if off := f.Topics[0].Partitions[0].FetchOffset; off < prefix {
					t.Fatalf("fetched from %d, inside the common prefix ending at %d", off, prefix)
				}
			}
		})
	}
}
