package broker

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/vfs"
)

var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

// produceKeyed produces count keyed records with two headers each to
// topic, round-robin over partitions, and returns them as acknowledged.
func produceKeyed(t *testing.T, cl *kgo.Client, topic, tag string, count int) []*kgo.Record {
	t.Helper()
	var recs []*kgo.Record
	for i := range count {
		recs = append(recs, &kgo.Record{
			Topic: topic,
			Key:   []byte(fmt.Sprintf("%s-key-%d", tag, i)),
			Value: bytes.Repeat([]byte(fmt.Sprintf("%s-value-%d|", tag, i)), 1+i%7),
			Headers: []kgo.RecordHeader{
				{Key: "h1", Value: []byte(tag)},
				{Key: "h2", Value: []byte(fmt.Sprint(i))},
			},
			Partition: int32(i % 3),
		})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", tag, err)
	}
	return recs
}

// consumeAll reads want records from topic from the start and returns
// them keyed by partition and offset.
func consumeAll(t *testing.T, n *Node, topic string, want int) map[[2]int64]*kgo.Record {
	t.Helper()
	cl := newClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[[2]int64]*kgo.Record{}
	ctx := testCtx(t)
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(got), want)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			k := [2]int64{int64(r.Partition), r.Offset}
			if _, dup := got[k]; dup {
				t.Fatalf("offset %d of partition %d delivered twice", r.Offset, r.Partition)
			}
			got[k] = r
		})
	}
	return got
}

func sameRecord(a, b *kgo.Record) bool {
	if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) || len(a.Headers) != len(b.Headers) ||
		a.Partition != b.Partition || a.Offset != b.Offset || !a.Timestamp.Equal(b.Timestamp) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// checkConsumed compares consumed records with produced ones, byte for
// byte, and checks every partition's offsets are dense from 0.
func checkConsumed(t *testing.T, produced []*kgo.Record, got map[[2]int64]*kgo.Record) {
	t.Helper()
	if len(got) != len(produced) {
		t.Fatalf("consumed %d records, produced %d", len(got), len(produced))
	}
	for _, p := range produced {
		c, ok := got[[2]int64{int64(p.Partition), p.Offset}]
		if !ok {
			t.Fatalf("acknowledged record at %d/%d missing", p.Partition, p.Offset)
		}
		if !sameRecord(p, c) {
			t.Fatalf("record %d/%d differs:\nproduced %q %q %v %v\nconsumed %q %q %v %v", p.Partition, p.Offset,
				p.Key, p.Value, p.Headers, p.Timestamp, c.Key, c.Value, c.Headers, c.Timestamp)
		}
	}
	perPart := map[int32]int64{}
	for k := range got {
		perPart[int32(k[0])]++
	}
	for part, cnt := range perPart {
		for off := range cnt {
			if _, ok := got[[2]int64{int64(part), off}]; !ok {
				t.Fatalf("partition %d: offset %d missing (offsets not dense)", part, off)
			}
		}
	}
}

func TestNodeRoundTripsEveryCodecAndRestarts(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	createTopic(t, newAdmin(t, n), "codecs", 3, nil)
	var produced []*kgo.Record
	for _, c := range codecs {
		cl := newClient(t, n, kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(5*time.Millisecond),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produced = append(produced, produceKeyed(t, cl, "codecs", c.name, 200)...)
	}
	checkConsumed(t, produced, consumeAll(t, n, "codecs", len(produced)))

	// Restart on the same directory: everything is still there, and the
	// clean shutdown left the marker storage looks for.
	idBefore := topicID(t, n, "codecs")
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".kafka_cleanshutdown")); err != nil {
		t.Fatalf("no clean-shutdown marker after Close: %v", err)
	}
	n2 := startNode(t, dir, nil)
	if topicID(t, n2, "codecs") != idBefore {
		t.Fatal("topic id changed across restart")
	}
	checkConsumed(t, produced, consumeAll(t, n2, "codecs", len(produced)))

	// And new appends continue the offsets.
	cl := newClient(t, n2, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &kgo.Record{Topic: "codecs", Partition: 0, Value: []byte("after restart")}
	if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	for _, p := range produced {
		if p.Partition == 0 {
			want++
		}
	}
	if r.Offset != want {
		t.Fatalf("first offset after restart %d, want %d", r.Offset, want)
	}
}

func TestNodeListOffsetsByTimestamp(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "times", 1, nil)
	cl := newClient(t, n)
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := range 50 {
		recs = append(recs, &kgo.Record{Topic: "times", Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	// Several batches: produce in groups of 10.
	for i := 0; i < len(recs); i += 10 {
		if err := cl.ProduceSync(testCtx(t), recs[i:i+10]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t)
	for _, tc := range []struct {
		ts   int64
		want int64
	}{
		{base.UnixMilli(), 0},
		{base.UnixMilli() - 1, 0},
		{base.Add(17 * time.Second).UnixMilli(), 17},
		{base.Add(17*time.Second).UnixMilli() + 1, 18},
		{base.Add(49 * time.Second).UnixMilli(), 49},
		{base.Add(50 * time.Second).UnixMilli(), -1},
	} {
		lo, err := adm.ListOffsetsAfterMilli(ctx, tc.ts, "times")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("times", 0)
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		want := tc.want
		if want == -1 {
			want = 50 // kadm maps "no such offset" to the end offset
		}
		if o.Offset != want {
			t.Errorf("offset after %d = %d, want %d", tc.ts, o.Offset, want)
		}
	}
	start, err := adm.ListStartOffsets(ctx, "times")
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, "times")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := start.Lookup("times", 0); s.Offset != 0 {
		t.Errorf("start offset %d", s.Offset)
	}
	if e, _ := end.Lookup("times", 0); e.Offset != 50 {
		t.Errorf("end offset %d", e.Offset)
	}
}

func TestNodeProduceErrorsPerPartition(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"auto.create.topics.enable": "false"})
	adm := newAdmin(t, n)
	small := "200"
	createTopic(t, adm, "small", 1, map[string]*string{"max.message.bytes": &small})
	cl := newClient(t, n, kgo.RecordRetries(0), kgo.RequestRetries(0))
	big := make([]byte, 1000)
	rand.Read(big) // incompressible: kgo compresses with snappy by default
	err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "small", Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("oversized batch: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "small", Value: []byte("fits")}).FirstErr(); err != nil {
		t.Errorf("small record: %v", err)
	}
	// Unknown topic with auto-creation off: kgo gives up with
	// UNKNOWN_TOPIC_OR_PARTITION.
	cl2 := newClient(t, n, kgo.RecordRetries(1), kgo.UnknownTopicRetries(1))
	err = cl2.ProduceSync(testCtx(t), &kgo.Record{Topic: "nope", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", err)
	}
}

func TestNodeAutoCreatesTopicOnMetadata(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"num.partitions": "2"})
	cl := newClient(t, n, kgo.AllowAutoTopicCreation())
	r := &kgo.Record{Topic: "auto", Value: []byte("x")}
	if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	td, err := newAdmin(t, n).ListTopics(testCtx(t), "auto")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(td["auto"].Partitions); got != 2 {
		t.Fatalf("auto-created topic has %d partitions, want num.partitions=2", got)
	}
}

func TestNodeDeleteTopicRemovesLogsAndAllowsRecreate(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, map[string]string{"auto.create.topics.enable": "false"})
	adm := newAdmin(t, n)
	createTopic(t, adm, "gone", 1, nil)
	cl := newClient(t, n)
	for range 3 {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "gone", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := adm.DeleteTopic(testCtx(t), "gone")
	if err != nil || resp.Err != nil {
		t.Fatalf("delete: %v %v", err, resp.Err)
	}
	if err := testutil.Within(testWait, func() bool {
		_, err := os.Stat(filepath.Join(dir, "gone-0"))
		return os.IsNotExist(err)
	}); err != nil {
		t.Fatal("log directory still there after DeleteTopics")
	}
	createTopic(t, adm, "gone", 1, nil)
	r := &kgo.Record{Topic: "gone", Value: []byte("fresh")}
	cl2 := newClient(t, n)
	if err := cl2.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if r.Offset != 0 {
		t.Fatalf("re-created topic starts at offset %d", r.Offset)
	}
}

// TestNodeSetsAsideStrayLogsAtStart: a log on disk whose topic the
// metadata does not have (deleted while the node was down, or lost with
// the metadata) is renamed <dir>.<uuid>-stray at start, its files kept,
// as Kafka does; the logs of live topics are kept in place.
func TestNodeSetsAsideStrayLogsAtStart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	createTopic(t, newAdmin(t, n), "kept", 1, nil)
	if err := newClient(t, n).ProduceSync(testCtx(t), &kgo.Record{Topic: "kept", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "phantom-0"), os.DirFS(filepath.Join(dir, "kept-0"))); err != nil {
		t.Fatal(err)
	}
	n2 := startNode(t, dir, nil)
	if err := testutil.Within(testWait, func() bool {
		_, err := os.Stat(filepath.Join(dir, "phantom-0"))
		return os.IsNotExist(err)
	}); err != nil {
		t.Fatal("stray log phantom-0 not set aside")
	}
	strays, _ := filepath.Glob(filepath.Join(dir, "phantom-0.*-stray"))
	if len(strays) != 1 {
		t.Fatalf("stray dirs %v, want one phantom-0.<uuid>-stray", strays)
	}
	logs, _ := filepath.Glob(filepath.Join(strays[0], "*.log"))
	if len(logs) == 0 {
		t.Fatalf("stray dir %s lost its segments", strays[0])
	}
	if p := n2.partition("kept", 0); p == nil || p.log.LogEndOffset() != 1 {
		t.Fatal("live topic's log lost")
	}
}

// TestNodeConcurrentProducersAndTailingConsumers: producers on several
// connections and consumers tailing (long polls woken by appends) at the
// same time; every acknowledged record is consumed once, offsets dense.
func TestNodeConcurrentProducersAndTailingConsumers(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "busy", 6, nil)
	const producers, perProducer = 4, 500
	consumed := make(chan map[[2]int64]*kgo.Record, 1)
	go func() {
		cl := newClient(t, n, kgo.ConsumeTopics("busy"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		got := map[[2]int64]*kgo.Record{}
		ctx := testCtx(t)
		for len(got) < producers*perProducer && ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[[2]int64{int64(r.Partition), r.Offset}] = r })
		}
		consumed <- got
	}()
	errs := make(chan error, producers)
	var all []*kgo.Record
	recsBy := make([][]*kgo.Record, producers)
	for p := range producers {
		for i := range perProducer {
			recsBy[p] = append(recsBy[p], &kgo.Record{Topic: "busy", Key: []byte(fmt.Sprintf("p%d-%d", p, i)), Value: []byte(fmt.Sprint(i))})
		}
		all = append(all, recsBy[p]...)
	}
	for p := range producers {
		go func() {
			cl := newClient(t, n, kgo.ProducerLinger(time.Millisecond))
			for _, r := range recsBy[p] {
				cl.Produce(testCtx(t), r, func(_ *kgo.Record, err error) {
					if err != nil {
						errs <- err
					}
				})
			}
			errs <- cl.Flush(testCtx(t))
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	checkConsumed(t, all, <-consumed)
}

// TestNodeSetsAsideALogOfAnotherTopicID: a log on disk whose
// partition.metadata names another id than the metadata's topic of that
// name is set aside as -stray (not deleted) and the partition starts
// empty under the metadata's id.
func TestNodeSetsAsideALogOfAnotherTopicID(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	createTopic(t, newAdmin(t, n), "reborn", 1, nil)
	if err := newClient(t, n).ProduceSync(testCtx(t), &kgo.Record{Topic: "reborn", Value: []byte("old")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := writePartitionMetadata(vfs.Default, filepath.Join(dir, "reborn-0"), uuid.New()); err != nil {
		t.Fatal(err)
	}
	n2 := startNode(t, dir, nil)
	strays, _ := filepath.Glob(filepath.Join(dir, "reborn-0.*-stray"))
	if len(strays) != 1 {
		t.Fatalf("stray dirs %v, want one", strays)
	}
	if logs, _ := filepath.Glob(filepath.Join(strays[0], "*.log")); len(logs) == 0 {
		t.Fatalf("%s lost its segments", strays[0])
	}
	if p := n2.partition("reborn", 0); p == nil || p.log.LogEndOffset() != 0 {
		t.Fatal("the partition did not start empty under the metadata's id")
	}
}
