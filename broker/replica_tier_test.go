package broker

// Tests of tiered topics with followers (KIP-405 with replication, issue
// 14): only the leader uploads, a follower's local retention follows the
// leader's uploaded offset, a follower rebuilds from the bucket, a new
// leader resumes uploading where the old one stopped and serves what lies
// below its local start from the tier.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/tiering"
	"github.com/strata-io/strata/tiering/objstore"
)

// tierClusterSettings are the settings of a tiered in-process cluster:
// one fs bucket directory shared by every node (as one S3 bucket would
// be), fast uploader loops, and a short broker session so a stopped
// broker is fenced (and its leaderships moved) within a second or two.
func tierClusterSettings(t testing.TB, extra map[string]string) (map[string]string, string) {
	objects := filepath.Join(t.TempDir(), "objects")
	m := tierSettings(map[string]string{
		"remote.storage.fs.path":       objects,
		"broker.session.timeout.ms":    "1500",
		"broker.heartbeat.interval.ms": "200",
	})
	for k, v := range extra {
		m[k] = v
	}
	return m, objects
}

// createAssigned creates topic with one partition per assignment entry,
// placed on exactly those replicas (the first one leads), and waits
// until every replica hosts its partitions.
func (c *testCluster) createAssigned(topic string, configs map[string]string, assignment ...[]int32) {
	c.t.Helper()
	createAssigned(c.t, c.client(), topic, configs, assignment...)
	for i, replicas := range assignment {
		for _, id := range replicas {
			n := c.node(id)
			if n == nil {
				continue
			}
			testutil.Eventually(c.t, testWait, func() bool { return n.partition(topic, int32(i)) != nil },
				"broker %d hosting %s-%d", id, topic, i)
		}
	}
}

// waitLeader waits until the controller names a live leader of
// topic-index other than not, and that broker has taken the leadership
// (its partition is led in the image's leader epoch); it returns it.
func (c *testCluster) waitLeader(topic string, index int32, not int32) int32 {
	c.t.Helper()
	var leader int32 = -1
	testutil.Eventually(c.t, testWait, func() error {
		st, ok := c.partitionState(topic, index)
		if !ok {
			return fmt.Errorf("no partition %s-%d", topic, index)
		}
		if st.Leader < 0 || st.Leader == not || c.node(st.Leader) == nil {
			return fmt.Errorf("leader %d (isr %v)", st.Leader, st.ISR)
		}
		p := c.node(st.Leader).partition(topic, index)
		if p == nil || !p.leader.Load() || p.leaderEpoch.Load() != st.LeaderEpoch {
			return fmt.Errorf("broker %d has not taken leader epoch %d yet", st.Leader, st.LeaderEpoch)
		}
		leader = st.Leader
		return nil
	}, "a leader of %s-%d other than %d", topic, index, not)
	return leader
}

// finishedSegments is the controller's COPY_FINISHED segments of
// topic-index, by base offset.
func (c *testCluster) finishedSegments(topic string, index int32) []metadata.RemoteSegmentInfo {
	var out []metadata.RemoteSegmentInfo
	c.ctl.view(func(st *metadata.State) {
		t, ok := st.TopicByName(topic)
		if !ok {
			return
		}
		for _, s := range st.RemoteSegments(t.ID, index) {
			if s.State == metadata.CopyFinished {
				out = append(out, s)
			}
		}
	})
	return out
}

// remoteSegmentsAll is every remote segment of topic-index in any state.
func (c *testCluster) remoteSegmentsAll(topic string, index int32) []metadata.RemoteSegmentInfo {
	var out []metadata.RemoteSegmentInfo
	c.ctl.view(func(st *metadata.State) {
		if t, ok := st.TopicByName(topic); ok {
			out = st.RemoteSegments(t.ID, index)
		}
	})
	return out
}

// checkTierContiguous checks the partition's remote tier as `tier verify`
// does (every COPY_FINISHED segment's objects present, of the recorded
// sizes) and that its COPY_FINISHED segments tile [0, wantEnd] with no gap
// and no segment another one covers (a duplicate), that nothing is left
// in COPY_STARTED or DELETE_STARTED, and that the bucket's manifest
// lists exactly those segments.
func (c *testCluster) checkTierContiguous(n *Node, topic string, index int32, wantEnd int64) error {
	all := c.remoteSegmentsAll(topic, index)
	var segs []metadata.RemoteSegmentInfo
	for _, s := range all {
		switch s.State {
		case metadata.CopyFinished:
			segs = append(segs, s)
		default:
			return fmt.Errorf("segment [%d, %d] left in %s", s.BaseOffset, s.EndOffset, s.State)
		}
	}
	next := int64(0)
	for i, s := range segs {
		if s.BaseOffset > next {
			return fmt.Errorf("gap: segment %d starts at %d, want <= %d (segments %v)", i, s.BaseOffset, next, segRanges(segs))
		}
		if s.EndOffset < next {
			return fmt.Errorf("duplicate: segment [%d, %d] adds nothing after %d (segments %v)", s.BaseOffset, s.EndOffset, next-1, segRanges(segs))
		}
		next = s.EndOffset + 1
	}
	if next-1 != wantEnd {
		return fmt.Errorf("remote end %d, want %d (segments %v)", next-1, wantEnd, segRanges(segs))
	}
	p := n.partition(topic, index)
	part := tiering.Partition{Topic: topic, TopicID: p.topicID, Index: index}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	probs, checked, err := tiering.VerifyPartition(ctx, n.RemoteStore(), "", part, all)
	if err != nil {
		return err
	}
	if len(probs) > 0 || checked != len(segs) {
		return fmt.Errorf("verify: %d checked of %d, problems %+v", checked, len(segs), probs)
	}
	man, _, err := tiering.NewManifestStore(n.RemoteStore()).Load(ctx, tiering.ManifestKey("", topic, p.topicID, index))
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	var inMan, inImage []string
	for _, s := range man.Segments {
		inMan = append(inMan, s.SegmentID.String())
	}
	for _, s := range segs {
		inImage = append(inImage, s.SegmentID.String())
	}
	slices.Sort(inMan)
	slices.Sort(inImage)
	if !slices.Equal(inMan, inImage) {
		return fmt.Errorf("manifest lists %v, the controller %v", inMan, inImage)
	}
	return nil
}

func segRanges(segs []metadata.RemoteSegmentInfo) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = fmt.Sprintf("[%d,%d]@b%d", s.BaseOffset, s.EndOffset, s.BrokerID)
	}
	return out
}

// tierValue is record i's value in these tests.
func tierValue(i int) []byte { return []byte(fmt.Sprintf("record-%06d", i)) }

// produceTier produces records [from, to) to partition 0 of topic, one
// at a time in order, and checks each lands at its own offset.
func produceTier(t testing.TB, cl *kgo.Client, topic string, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for i := from; i < to; i++ {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: tierValue(i)}
		res := cl.ProduceSync(ctx, r)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %d acked at offset %d", i, r.Offset)
		}
	}
}

// consumeTier reads partition 0 of topic from offset 0 through broker n
// (whichever leads, the client follows) until it has want records, and
// checks each.
func consumeTier(t testing.TB, cl *kgo.Client, topic string, want int) {
	t.Helper()
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}})
	defer cl.RemoveConsumePartitions(map[string][]int32{topic: {0}})
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	next := 0
	for next < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume: timed out at offset %d of %d", next, want)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("consume %s/%d: %v (retried)", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(next) || string(r.Value) != string(tierValue(next)) {
				t.Fatalf("offset %d: got %q, want offset %d %q", r.Offset, r.Value, next, tierValue(next))
			}
			next++
		})
	}
}

// tierTopicConfigs: tiny segments, so a few hundred records make several.
func tierTopicConfigs() map[string]string {
	return map[string]string{
		"remote.storage.enable": "true",
		"segment.bytes":         strconv.Itoa(4 << 10),
		"local.retention.bytes": strconv.Itoa(8 << 10),
		"retention.ms":          "-1",
	}
}

// rollPartition seals the active segment of topic-index on n.
func rollPartition(t testing.TB, n *Node, topic string, index int32) {
	t.Helper()
	if err := n.partition(topic, index).log.Roll(); err != nil {
		t.Fatal(err)
	}
}

// waitRemoteEnd waits until the controller's COPY_FINISHED segments of
// topic-index reach end.
func (c *testCluster) waitRemoteEnd(topic string, index int32, end int64) {
	c.t.Helper()
	testutil.Eventually(c.t, testWait, func() error {
		segs := c.finishedSegments(topic, index)
		got := int64(-1)
		for _, s := range segs {
			got = max(got, s.EndOffset)
		}
		if got < end {
			return fmt.Errorf("remote end %d (segments %v)", got, segRanges(segs))
		}
		return nil
	}, "the remote tier of %s-%d to reach %d", topic, index, end)
}

// TestTieredFailoverNewLeaderResumesUploadAndServesFromTier: leader 2
// uploads, then stops; the new leader serves the uploaded records from
// the tier (whatever its local log holds), appends after them, and its
// uploads continue the remote tier with no gap and no duplicate.
func TestTieredFailoverNewLeaderResumesUploadAndServesFromTier(t *testing.T) {
	settings, _ := tierClusterSettings(t, nil)
	c := startCluster(t, 3, settings)
	const topic = "tier-failover"
	c.createAssigned(topic, tierTopicConfigs(), []int32{2, 3, 1})
	cl := c.client()

	const first = 300
	produceTier(t, cl, topic, 0, first)
	rollPartition(t, c.node(2), topic, 0)
	c.waitRemoteEnd(topic, 0, first-1)

	// The old leader dies mid-copy: its next segment COPY_STARTED, one
	// object put. The new leader must take it for an orphan (another
	// broker's, so at once), delete it and its objects, and copy the
	// range itself.
	lp := c.node(2).partition(topic, 0)
	orphan := metadata.RemoteSegmentRecord{SegmentID: uuid.New(), TopicID: lp.topicID, Partition: 0,
		BaseOffset: first, EndOffset: first + 49, MaxTimestamp: -1, SizeBytes: 3,
		LeaderEpochs: []metadata.EpochStart{{Epoch: 0, StartOffset: first}},
		State:        metadata.CopyStarted, BrokerID: 2, EventTimestamp: time.Now().UnixMilli()}
	ctx := testCtx(t)
	if err := (tierMeta{c.node(2)}).CommitRemoteSegment(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	orphanKey := tiering.FromInfo(topic, metadata.RemoteSegmentInfo{SegmentID: orphan.SegmentID, TopicID: orphan.TopicID,
		BaseOffset: orphan.BaseOffset, EndOffset: orphan.EndOffset}).Key("", tiering.ExtLog)
	if _, err := c.node(2).RemoteStore().Put(ctx, orphanKey, strings.NewReader("abc"), 3, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	c.stop(2)
	leader := c.waitLeader(topic, 0, 2)
	t.Logf("new leader %d; remote %v", leader, segRanges(c.finishedSegments(topic, 0)))
	// The new leader's epoch history holds what the remote tier's
	// segments record, and its own epoch from its log end (KIP-279),
	// before any append.
	// (Its log holds the records, replicated, or restarts empty after the
	// remote end; either way it ends at first.)
	np := c.node(leader).partition(topic, 0)
	testutil.Eventually(t, testWait, func() bool { return np.log.LogEndOffset() == first }, "the new leader's log end at %d", first)
	want := []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}}
	if np.log.LocalLogStartOffset() == first {
		// Restarted empty after the remote tier (tier.restartEmpty); a
		// replicated log gets its own epoch entry from makeLeader.
		want = append(want, checkpoint.EpochEntry{Epoch: np.leaderEpoch.Load(), StartOffset: first})
	}
	if got := np.log.LeaderEpochs().Entries(); !slices.Equal(got[:min(len(got), len(want))], want) {
		t.Fatalf("new leader's epochs %v, want %v first", got, want)
	}
	// And the idempotent producer's state: its last batch is the last
	// record before the failover (one record a batch, sequence = offset).
	pid, _, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testWait, func() error {
		np.prod.mu.Lock()
		e, ok := np.prod.st.Entry(pid)
		np.prod.mu.Unlock()
		if !ok || len(e.Batches) == 0 {
			return fmt.Errorf("producer %d unknown to the new leader", pid)
		}
		if last := e.Batches[len(e.Batches)-1]; last.LastOffset != first-1 || int64(last.LastSeq) != first-1 {
			return fmt.Errorf("producer %d's last batch %+v, want the one at offset %d", pid, last, first-1)
		}
		return nil
	}, "the new leader's producer state")
	if np.log.LocalLogStartOffset() == first { // restarted empty: the restored state is on disk too
		testutil.Eventually(t, testWait, func() error {
			if off, data, ok, err := np.log.LatestProducerSnapshot(); err != nil || !ok || off != first || len(data) == 0 {
				return fmt.Errorf("at %d, %d bytes, ok %v, err %v; want one at %d", off, len(data), ok, err, first)
			}
			return nil
		}, "the new leader's producer snapshot on disk")
	}

	// Everything acknowledged before the failover is readable from the
	// new leader: what its local log lacks comes from the tier.
	consumeTier(t, c.client(), topic, first)

	const second = 600
	produceTier(t, cl, topic, first, second)
	rollPartition(t, c.node(leader), topic, 0)
	c.waitRemoteEnd(topic, 0, second-1)
	testutil.Eventually(t, testWait, func() error {
		return c.checkTierContiguous(c.node(leader), topic, 0, second-1)
	}, "a contiguous remote tier")
	if _, err := c.node(leader).RemoteStore().Head(ctx, orphanKey); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the old leader's orphan object: %v, want deleted", err)
	}
	consumeTier(t, c.client(), topic, second)
}

// TestTieredFollowersNeverUploadAndFollowTheUploadedOffset: of a tiered
// RF=3 partition only the leader uploads (every segment record is the
// leader's, the followers' uploaders hold no task for it), and each
// follower's remote-uploaded offset, the bound of its local retention,
// follows the controller's COPY_FINISHED segments: from the metadata
// deltas while it runs, and from the image when it starts again.
func TestTieredFollowersNeverUploadAndFollowTheUploadedOffset(t *testing.T) {
	settings, _ := tierClusterSettings(t, nil)
	c := startCluster(t, 3, settings)
	const topic = "tier-followers"
	c.createAssigned(topic, tierTopicConfigs(), []int32{2, 3, 1})
	cl := c.client()

	const n = 300
	produceTier(t, cl, topic, 0, n)
	rollPartition(t, c.node(2), topic, 0)
	c.waitRemoteEnd(topic, 0, n-1)

	uploaded := func(id int32) func() error {
		return func() error {
			p := c.node(id).partition(topic, 0)
			if p == nil {
				return fmt.Errorf("broker %d does not host the partition", id)
			}
			if got := p.log.RemoteUploadedOffset(); got != n {
				return fmt.Errorf("broker %d: remote-uploaded offset %d, want %d", id, got, n)
			}
			return nil
		}
	}
	for _, id := range []int32{1, 3} {
		testutil.Eventually(t, testWait, uploaded(id), "follower %d's remote-uploaded offset", id)
		// A follower holding the records (followers replicating) deletes
		// the uploaded ones by local.retention.bytes, as the leader does.
		if fp := c.node(id).partition(topic, 0); fp.log.LogEndOffset() == n {
			testutil.Eventually(t, testWait, func() error {
				if ls, sz := fp.log.LocalLogStartOffset(), fp.log.Size(); ls == 0 || sz > 3*(4<<10) {
					return fmt.Errorf("follower %d: local start %d, %d bytes", id, ls, sz)
				}
				return nil
			}, "follower %d's local retention", id)
		}
		st, err := c.node(id).TierStatus(topic)
		if err != nil || len(st) != 0 {
			t.Fatalf("follower %d's uploader holds %+v (err %v), want nothing", id, st, err)
		}
	}
	for _, s := range c.remoteSegmentsAll(topic, 0) {
		if s.BrokerID != 2 {
			t.Fatalf("segment [%d, %d] %s recorded by broker %d, not the leader 2", s.BaseOffset, s.EndOffset, s.State, s.BrokerID)
		}
	}

	// A follower that starts again learns the offset from the image.
	c.stop(3)
	c.start(3)
	testutil.Eventually(t, testWait, uploaded(3), "restarted follower 3's remote-uploaded offset")
}

func TestRebuildEpochs(t *testing.T) {
	seg := func(base, end int64, es ...int64) metadata.RemoteSegmentInfo {
		s := metadata.RemoteSegmentInfo{BaseOffset: base, EndOffset: end}
		for i := 0; i+1 < len(es); i += 2 {
			s.LeaderEpochs = append(s.LeaderEpochs, metadata.EpochStart{Epoch: int32(es[i]), StartOffset: es[i+1]})
		}
		return s
	}
	es := func(pairs ...int64) []checkpoint.EpochEntry {
		var out []checkpoint.EpochEntry
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, checkpoint.EpochEntry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name           string
		segs           []metadata.RemoteSegmentInfo
		logStart, next int64
		want           []checkpoint.EpochEntry
	}{
		{"none", nil, 0, 100, nil},
		{"one segment", []metadata.RemoteSegmentInfo{seg(0, 99, 0, 0, 1, 40)}, 0, 100, es(0, 0, 1, 40)},
		{"clamped starts take the earliest", []metadata.RemoteSegmentInfo{
			seg(0, 99, 0, 0, 1, 40), seg(100, 199, 1, 100, 3, 150), seg(200, 299, 3, 200)}, 0, 300,
			es(0, 0, 1, 40, 3, 150)},
		{"entries at or above next go", []metadata.RemoteSegmentInfo{
			seg(0, 99, 0, 0), seg(50, 149, 0, 50, 2, 120)}, 0, 100, es(0, 0)},
		{"log start collapses older entries", []metadata.RemoteSegmentInfo{
			seg(0, 99, 0, 0, 1, 40), seg(100, 199, 1, 100, 3, 150)}, 120, 200, es(1, 120, 3, 150)},
		{"log start on an entry", []metadata.RemoteSegmentInfo{
			seg(0, 99, 0, 0, 1, 40), seg(100, 199, 3, 150)}, 40, 200, es(1, 40, 3, 150)},
		{"a newer epoch at an older start wins", []metadata.RemoteSegmentInfo{
			seg(0, 99, 0, 0, 1, 50), seg(40, 140, 0, 40, 2, 50)}, 0, 141, es(0, 0, 2, 50)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rebuildEpochs(tc.segs, tc.logStart, tc.next)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// isolatedReplica opens a log of topic-0 outside any node (no fetcher,
// no reconcile touches it), with stale records in it, as the partition a
// fetcher would hand to rebuildFromTier.
func isolatedReplica(t *testing.T, topic string, id [16]byte, stale int) *partition {
	t.Helper()
	cfg := storage.DefaultConfig()
	cfg.RemoteStorageEnable = true
	l, err := storage.OpenLog(storage.LogOptions{Dir: filepath.Join(t.TempDir(), topic+"-0"), Topic: topic, Partition: 0, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := 0; i < stale; i++ {
		if _, err := l.Append(recordBatch(time.Now().UnixMilli(), "stale"), storage.AppendOptions{LeaderEpoch: 0, AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	p := newPartition(topic, id, 0, l)
	if _, err := p.loadProducerState(&producerCell{}, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTieredFollowerRebuildsFromTheTier: a follower (here a replica log
// no fetcher touches, driven as the fetcher would: the replica fetcher calls
// the same function on OFFSET_MOVED_TO_TIERED_STORAGE) whose fetch offset
// is below the leader's local start truncates fully, restarts after the
// remote segment holding the leader's local start - 1 with the leader's
// log start, that segment's leader epochs and its producer snapshot, and
// fetches on from there: its log then holds the leader's bytes exactly.
func TestTieredFollowerRebuildsFromTheTier(t *testing.T) {
	settings, objects := tierClusterSettings(t, nil)
	c := startCluster(t, 3, settings)
	const topic = "tier-rebuild"
	c.createAssigned(topic, tierTopicConfigs(), []int32{2, 3, 1})
	cl := c.client()
	const uploaded, total = 600, 650
	produceTier(t, cl, topic, 0, uploaded)
	rollPartition(t, c.node(2), topic, 0)
	c.waitRemoteEnd(topic, 0, uploaded-1)
	// Every segment went up with the producer state at its end, including
	// those rolled before the first upload finished.
	snaps := tierSegmentFiles(t, objects, tiering.ExtSnapshot)
	for k, snap := range snaps {
		if len(snap) == 0 {
			t.Errorf("%s: empty snapshot: the idempotent producer's state is missing", k)
		}
	}
	if len(snaps) == 0 {
		t.Errorf("no packed segment in the bucket")
	}
	lp := c.node(2).partition(topic, 0)
	testutil.Eventually(t, testWait, func() bool { return lp.log.LocalLogStartOffset() > 0 }, "the leader's local retention")
	produceTier(t, cl, topic, uploaded, total) // local on the leader only
	pid, _, err := cl.ProducerID(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	leaderLogStart, leaderLocalStart := lp.log.LogStartOffset(), lp.log.LocalLogStartOffset()

	fp := isolatedReplica(t, topic, lp.topicID, 3)
	n3 := c.node(3)
	ctx := testCtx(t)

	// Nothing remote holds an offset past the remote end: refused, and the
	// replica is left as it was.
	if _, err := n3.rebuildFromTier(ctx, fp, leaderLogStart, total+10); !errors.Is(err, errTierRebuild) {
		t.Fatalf("rebuild past the remote end: %v, want errTierRebuild", err)
	}
	if fp.log.LogEndOffset() != 3 {
		t.Fatalf("a refused rebuild changed the log: end %d", fp.log.LogEndOffset())
	}

	resume, err := n3.rebuildFromTier(ctx, fp, leaderLogStart, leaderLocalStart)
	if err != nil {
		t.Fatal(err)
	}
	var covering metadata.RemoteSegmentInfo
	for _, s := range c.finishedSegments(topic, 0) {
		if s.BaseOffset <= leaderLocalStart-1 && leaderLocalStart-1 <= s.EndOffset {
			covering = s
		}
	}
	if resume != covering.EndOffset+1 || resume < leaderLocalStart {
		t.Fatalf("resume at %d; the segment holding %d is [%d, %d]", resume, leaderLocalStart-1, covering.BaseOffset, covering.EndOffset)
	}
	l := fp.log
	if l.LogStartOffset() != leaderLogStart || l.LocalLogStartOffset() != resume || l.LogEndOffset() != resume || l.RemoteUploadedOffset() != resume {
		t.Fatalf("rebuilt log: start %d local %d end %d uploaded %d; want %d %d %d %d", l.LogStartOffset(), l.LocalLogStartOffset(),
			l.LogEndOffset(), l.RemoteUploadedOffset(), leaderLogStart, resume, resume, resume)
	}
	var wantEpochs []checkpoint.EpochEntry
	for _, e := range lp.log.LeaderEpochs().Entries() {
		if e.StartOffset < resume {
			wantEpochs = append(wantEpochs, e)
		}
	}
	if got := l.LeaderEpochs().Entries(); !slices.Equal(got, wantEpochs) {
		t.Fatalf("rebuilt epochs %v, the leader's below %d %v", got, resume, wantEpochs)
	}
	// The producer state is the one at the segment's end: this producer's
	// last batch is the segment's last record (one record a batch, its
	// sequence equal to its offset).
	fp.prod.mu.Lock()
	e, ok := fp.prod.st.Entry(pid)
	fp.prod.mu.Unlock()
	if !ok || len(e.Batches) == 0 {
		t.Fatalf("producer %d unknown to the rebuilt replica", pid)
	}
	if last := e.Batches[len(e.Batches)-1]; last.LastOffset != resume-1 || int64(last.LastSeq) != resume-1 {
		t.Fatalf("producer %d's last batch %+v, want the one at offset %d", pid, last, resume-1)
	}
	if _, data, ok, err := l.LatestProducerSnapshot(); err != nil || !ok || len(data) == 0 {
		t.Fatalf("no producer snapshot on disk after the rebuild (ok %v, err %v)", ok, err)
	}

	// The fetcher resumes at resume: the leader's batches appended as they
	// are give the leader's bytes. The leader's local retention may move
	// its local start past resume meanwhile: then, as the fetcher would be
	// told again, rebuild again.
	fetch := func(from int64) error {
		for off := from; off < lp.log.LogEndOffset(); {
			v, err := lp.log.Read(off, 1<<20, lp.hw.Load())
			if err != nil {
				return err
			}
			b, err := v.Bytes()
			v.Release()
			if err != nil {
				return err
			}
			if _, err := l.Append(b, storage.AppendOptions{AssignOffsets: false}); err != nil {
				t.Fatalf("append the leader's batches at %d: %v", off, err)
			}
			off = v.NextOffset
		}
		return nil
	}
	for attempt := 0; ; attempt++ {
		err := fetch(resume)
		if err == nil {
			break
		}
		if !errors.Is(err, storage.ErrOffsetOutOfRange) || attempt == 5 {
			t.Fatalf("fetch from %d: %v", resume, err)
		}
		if resume, err = n3.rebuildFromTier(ctx, fp, lp.log.LogStartOffset(), lp.log.LocalLogStartOffset()); err != nil {
			t.Fatal(err)
		}
	}
	for off := resume; off < total; off++ {
		lv, err1 := lp.log.Read(off, 1, total)
		if errors.Is(err1, storage.ErrOffsetOutOfRange) && off < lp.log.LocalLogStartOffset() {
			continue // deleted by the leader's local retention meanwhile
		}
		fv, err2 := l.Read(off, 1, total)
		if err1 != nil || err2 != nil {
			t.Fatalf("read %d: %v / %v", off, err1, err2)
		}
		lb, _ := lv.Bytes()
		fb, _ := fv.Bytes()
		lv.Release()
		fv.Release()
		if string(lb) != string(fb) {
			t.Fatalf("offset %d differs between leader and rebuilt follower", off)
		}
	}

	// Remote storage off: refused.
	off := isolatedReplica(t, topic, lp.topicID, 0)
	cfg := off.log.Config()
	cfg.RemoteStorageEnable = false
	off.log.SetConfig(cfg)
	if _, err := n3.rebuildFromTier(ctx, off, leaderLogStart, leaderLocalStart); !errors.Is(err, errTierRebuild) {
		t.Fatalf("rebuild without remote storage: %v", err)
	}
}

// TestTieredEmptyFollowerStartsAfterTheLastTieredOffset (KIP-1023): with
// follower.fetch.last.tiered.offset.enable an empty follower rebuilds
// after the remote tier's last offset rather than the leader's local
// start; one holding data, or with the setting off, fetches as usual.
func TestTieredEmptyFollowerStartsAfterTheLastTieredOffset(t *testing.T) {
	settings, _ := tierClusterSettings(t, map[string]string{"follower.fetch.last.tiered.offset.enable": "true"})
	c := startCluster(t, 3, settings)
	const topic = "tier-kip1023"
	c.createAssigned(topic, tierTopicConfigs(), []int32{2, 3, 1})
	cl := c.client()
	produceTier(t, cl, topic, 0, 300)
	rollPartition(t, c.node(2), topic, 0)
	c.waitRemoteEnd(topic, 0, 299)
	lp := c.node(2).partition(topic, 0)
	n3 := c.node(3)

	if _, _, ok := n3.lastTieredStart(isolatedReplica(t, topic, lp.topicID, 2)); ok {
		t.Fatal("a follower holding data starts after the last tiered offset")
	}
	fp := isolatedReplica(t, topic, lp.topicID, 0)
	start, last, ok := n3.lastTieredStart(fp)
	if !ok || start != 0 || last != 299 {
		t.Fatalf("lastTieredStart = %d, %d, %v; want 0, 299, true", start, last, ok)
	}
	resume, err := n3.rebuildFromTierAt(testCtx(t), fp, start, last)
	if err != nil || resume != 300 {
		t.Fatalf("rebuild at the last tiered offset: resume %d, %v; want 300", resume, err)
	}
	if fp.log.LogStartOffset() != 0 || fp.log.LogEndOffset() != 300 {
		t.Fatalf("rebuilt: start %d end %d", fp.log.LogStartOffset(), fp.log.LogEndOffset())
	}
	n3.cfg.Tiering.FollowerFetchLastTiered = false
	if _, _, ok := n3.lastTieredStart(isolatedReplica(t, topic, lp.topicID, 0)); ok {
		t.Fatal("the setting off, an empty follower still starts after the last tiered offset")
	}
}

// TestTieredFollowerRebuildsEndToEnd: follower 3 is down while the
// leader uploads and its local retention deletes what 3 would fetch
// next; back, 3's fetcher is told OFFSET_MOVED_TO_TIERED_STORAGE, rebuilds
// from the tier and catches up, holding the leader's bytes above its new
// local start; elected leader, it serves everything from offset 0, the
// part below its local start from the tier.
func TestTieredFollowerRebuildsEndToEnd(t *testing.T) {
	settings, _ := tierClusterSettings(t, nil)
	c := startCluster(t, 3, settings)
	const topic = "tier-rebuild-e2e"
	c.createAssigned(topic, tierTopicConfigs(), []int32{2, 3, 1})
	cl := c.client()
	const early, uploaded, total = 50, 600, 650
	produceTier(t, cl, topic, 0, early)
	testutil.Eventually(t, testWait, func() bool {
		p := c.node(3).partition(topic, 0)
		return p != nil && p.log.LogEndOffset() == early
	}, "follower 3 replicating")

	c.stop(3)
	produceTier(t, cl, topic, early, uploaded)
	lp := c.node(2).partition(topic, 0)
	rollPartition(t, c.node(2), topic, 0)
	c.waitRemoteEnd(topic, 0, uploaded-1)
	testutil.Eventually(t, testWait, func() bool { return lp.log.LocalLogStartOffset() > early }, "the leader's local retention past %d", early)
	produceTier(t, cl, topic, uploaded, total)

	c.start(3)
	var fp *partition
	testutil.Eventually(t, testWait, func() error {
		if fp = c.node(3).partition(topic, 0); fp == nil {
			return fmt.Errorf("broker 3 does not host the partition")
		}
		l := fp.log
		if l.LogEndOffset() != total || l.LocalLogStartOffset() <= early || l.LogStartOffset() != lp.log.LogStartOffset() {
			return fmt.Errorf("follower 3: start %d local %d end %d; leader start %d local %d end %d", l.LogStartOffset(),
				l.LocalLogStartOffset(), l.LogEndOffset(), lp.log.LogStartOffset(), lp.log.LocalLogStartOffset(), lp.log.LogEndOffset())
		}
		return nil
	}, "follower 3 rebuilt from the tier and caught up")
	if c.node(3).tier.rebuilds.Load() == 0 {
		t.Fatal("follower 3 caught up without rebuilding from the tier: the leader served it from below its local start")
	}
	for off := fp.log.LocalLogStartOffset(); off < total; off++ {
		lv, err1 := lp.log.Read(off, 1, total)
		if errors.Is(err1, storage.ErrOffsetOutOfRange) && off < lp.log.LocalLogStartOffset() {
			continue // deleted by the leader's local retention
		}
		fv, err2 := fp.log.Read(off, 1, total)
		if err1 != nil || err2 != nil {
			t.Fatalf("read %d: %v / %v", off, err1, err2)
		}
		lb, _ := lv.Bytes()
		fb, _ := fv.Bytes()
		lv.Release()
		fv.Release()
		if string(lb) != string(fb) {
			t.Fatalf("offset %d differs between the leader and the rebuilt follower", off)
		}
	}

	testutil.Eventually(t, testWait, func() error {
		if st, _ := c.partitionState(topic, 0); !slices.Contains(st.ISR, 3) {
			return fmt.Errorf("%+v", st)
		}
		return nil
	}, "caught-up follower 3 back in the ISR")
	c.stop(2)
	if leader := c.waitLeader(topic, 0, 2); leader != 3 {
		t.Fatalf("leader %d after 2 stopped, want 3 (first live ISR member)", leader)
	}
	consumeTier(t, c.client(), topic, total)
}

// TestTieredLeaderOnALostDiskRestartsAfterTheTier: the only replica left
// lost its disk and is elected (uncleanly: the ISR member is gone). Its
// empty log restarts after the remote end with the remote tier's epoch
// history, its own epoch at the new end, and the producer state uploaded
// with the last segment; it serves everything from offset 0 (below its
// local start from the tier) and the idempotent producer carries on.
func TestTieredLeaderOnALostDiskRestartsAfterTheTier(t *testing.T) {
	settings, _ := tierClusterSettings(t, nil)
	c := startCluster(t, 3, settings)
	const topic = "tier-lost-disk"
	cfgs := tierTopicConfigs()
	cfgs["unclean.leader.election.enable"] = "true"
	c.createAssigned(topic, cfgs, []int32{2, 3})
	cl := c.client()
	const first, second = 300, 350
	produceTier(t, cl, topic, 0, first)
	rollPartition(t, c.node(2), topic, 0)
	c.waitRemoteEnd(topic, 0, first-1)
	pid, _, err := cl.ProducerID(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}

	c.stop(3)
	testutil.Eventually(t, testWait, func() bool {
		st, _ := c.partitionState(topic, 0)
		return !slices.Contains(st.ISR, 3)
	}, "3 out of the ISR")
	c.stop(2)
	if err := os.RemoveAll(filepath.Join(c.dirs[3], topic+"-0")); err != nil {
		t.Fatal(err)
	}
	c.start(3)
	if leader := c.waitLeader(topic, 0, 2); leader != 3 {
		t.Fatalf("leader %d, want 3", leader)
	}
	np := c.node(3).partition(topic, 0)
	testutil.Eventually(t, testWait, func() bool { return np.log.LogEndOffset() == first }, "3's log restarted at %d", first)
	if np.log.LogStartOffset() != 0 || np.log.LocalLogStartOffset() != first {
		t.Fatalf("restarted log: start %d local %d, want 0 %d", np.log.LogStartOffset(), np.log.LocalLogStartOffset(), first)
	}
	want := []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: np.leaderEpoch.Load(), StartOffset: first}}
	if got := np.log.LeaderEpochs().Entries(); !slices.Equal(got, want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
	testutil.Eventually(t, testWait, func() error {
		np.prod.mu.Lock()
		e, ok := np.prod.st.Entry(pid)
		np.prod.mu.Unlock()
		if !ok || len(e.Batches) == 0 || e.Batches[len(e.Batches)-1].LastOffset != first-1 {
			return fmt.Errorf("producer %d: %+v (known %v)", pid, e, ok)
		}
		if _, data, ok, _ := np.log.LatestProducerSnapshot(); !ok || len(data) == 0 {
			return fmt.Errorf("no producer snapshot on disk yet")
		}
		return nil
	}, "the producer state from the remote tier")

	consumeTier(t, c.client(), topic, first)
	produceTier(t, cl, topic, first, second)
	consumeTier(t, c.client(), topic, second)
}

// tierSegmentFiles returns file ext (a section of the packed .meta) of
// every segment in the fs bucket at root, by .meta key.
func tierSegmentFiles(t *testing.T, root, ext string) map[string][]byte {
	t.Helper()
	bucket, err := objstore.NewFSStore(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for k := range fsBucket(root)(t, "") {
		info, err := tiering.ParseSegmentKey(k)
		if err != nil || info.Ext != tiering.ExtMeta {
			continue
		}
		rs := tiering.RemoteSegment{Partition: tiering.Partition{Topic: info.Topic, TopicID: info.TopicID, Index: info.Partition},
			SegmentID: info.SegmentID, BaseOffset: info.BaseOffset}
		b, err := tiering.ReadSegmentFile(testCtx(t), bucket, info.Prefix, rs, ext)
		if err != nil {
			t.Fatalf("%s: .%s: %v", k, ext, err)
		}
		out[k] = b
	}
	return out
}
