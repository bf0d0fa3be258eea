package broker

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/tiering"
)

// A consumer fetch below the local start with a 4 MiB partition limit
// gets more than one remote segment's records (1 MiB segments), in order
// from offset 0 and within the limit; and once the chunks are in the
// cache's files, the records leave through sendfile(2) from them, as
// local data does, not through a copy.
func TestRemoteFetchSpansSegmentsAndSendfilesTheCache(t *testing.T) {
	dir := t.TempDir()
	settings := tierSettings(map[string]string{"remote.storage.fs.path": filepath.Join(dir, "objects")})
	settings["remote.log.cache.bytes"] = fmt.Sprint(32 << 20)
	settings["remote.fetch.max.wait.ms"] = "5000"
	n := startNode(t, dir, settings)
	const topic = "spans"
	createTopic(t, newAdmin(t, n), topic, e2ePartitions, tieredTopicConfigs())
	var prod produced
	produceE2E(t, newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, 16<<20, &prod)
	rollAll(t, n, topic)
	waitUploaded(t, n, topic, time.Minute)
	p := n.partition(topic, 0)
	segs := n.tier.finished(p.topicID, 0)
	if len(segs) < 3 || segs[0].BaseOffset != 0 || p.log.LocalLogStartOffset() <= segs[2].BaseOffset {
		t.Fatalf("want three remote-only segments from 0: %d segments, local start %d", len(segs), p.log.LocalLogStartOffset())
	}
	const limit = 4 << 20
	cl := newClient(t, n)
	id := topicID(t, n, topic)
	fetch := func() kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.ReplicaID = -1
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 5000, 1, limit
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, limit, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != 0 {
			t.Fatalf("fetch error %d", got.ErrorCode)
		}
		return got
	}
	// check decodes the batches: offsets from 0 without a gap, and the
	// next offset after the last.
	check := func(b []byte) int64 {
		next := int64(0)
		for len(b) > 0 {
			one, rest, err := batch.Split(b)
			if err != nil {
				t.Fatalf("batch at offset %d: %v", next, err)
			}
			h, err := batch.ParseHeader(one)
			if err != nil || h.BaseOffset != next || batch.Checksum(one) != h.CRC {
				t.Fatalf("batch at %d: base %d, crc ok %v (%v)", next, h.BaseOffset, batch.Checksum(one) == h.CRC, err)
			}
			next, b = h.LastOffset()+1, rest
		}
		return next
	}
	var got kmsg.FetchResponseTopicPartition
	if err := testutil.Within(30*time.Second, func() bool { got = fetch(); return len(got.RecordBatches) > 0 }); err != nil {
		t.Fatal("the remote records never arrived")
	}
	next := check(got.RecordBatches)
	if next <= segs[1].EndOffset || len(got.RecordBatches) > limit {
		t.Fatalf("one fetch of %d bytes reached offset %d; want past the second segment's end %d, within %d bytes",
			len(got.RecordBatches), next, segs[1].EndOffset, limit)
	}
	t.Logf("one fetch: %d bytes, offsets [0, %d), %d remote segments of %d", len(got.RecordBatches), next, countSegs(segs, next), len(segs))

	// The chunk files are written behind the first reads: the same fetch
	// again is then sent from them with sendfile.
	var sent int64
	if err := testutil.Within(30*time.Second, func() bool {
		before := sentfileBytes.Load()
		got = fetch()
		sent = sentfileBytes.Load() - before
		return sent >= int64(len(got.RecordBatches))
	}); err != nil {
		t.Fatalf("a fetch of %d remote bytes sent %d with sendfile", len(got.RecordBatches), sent)
	}
	if check(got.RecordBatches) != next {
		t.Fatal("the cached fetch returned other records")
	}
}

func countSegs(segs []metadata.RemoteSegmentInfo, next int64) int {
	n := 0
	for _, s := range segs {
		if s.BaseOffset < next {
			n++
		}
	}
	return n
}

// The reader's ReaderConfig.Next (tier.nextRemote) names the remote
// segment after a remote one while the consumer reads it from the tier,
// so read-ahead over small segments goes on past the next one; nothing
// after the last remote-only segment (the local log has what follows),
// nor for a partition the node does not host.
func TestTierNextRemoteNamesRemoteOnlySuccessors(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, tierSettings(map[string]string{"remote.storage.fs.path": filepath.Join(dir, "objects")}))
	const topic = "next"
	createTopic(t, newAdmin(t, n), topic, e2ePartitions, tieredTopicConfigs())
	var prod produced
	produceE2E(t, newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, 16<<20, &prod)
	rollAll(t, n, topic)
	waitUploaded(t, n, topic, time.Minute)
	p := n.partition(topic, 0)
	segs := n.tier.finished(p.topicID, 0)
	local := p.log.LocalLogStartOffset()
	remoteOnly := 0
	for _, s := range segs {
		if s.BaseOffset < local {
			remoteOnly++
		}
	}
	if remoteOnly < 3 {
		t.Fatalf("want three remote-only segments: %d of %d below the local start %d", remoteOnly, len(segs), local)
	}
	for i := 0; i+1 < len(segs); i++ {
		got, ok := n.tier.nextRemote(tiering.FromInfo(topic, segs[i]))
		wantOK := segs[i+1].BaseOffset < local
		if ok != wantOK || ok && got != tiering.FromInfo(topic, segs[i+1]) {
			t.Fatalf("after segment %d [%d, %d]: %+v %v, want segment %d (%v)", i, segs[i].BaseOffset, segs[i].EndOffset, got, ok, i+1, wantOK)
		}
	}
	if _, ok := n.tier.nextRemote(tiering.FromInfo(topic, segs[len(segs)-1])); ok {
		t.Fatal("a segment after the last remote one")
	}
	other := tiering.FromInfo("elsewhere", segs[0])
	if _, ok := n.tier.nextRemote(other); ok {
		t.Fatal("a segment after one of a partition the node does not host")
	}
}
