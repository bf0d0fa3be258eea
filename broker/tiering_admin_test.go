package broker

import (
	crand "crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/tiering"
)

// TestTierRestoreUnknownTopicIs404: restoring a topic the bucket does not
// hold is a missing resource (404 with the error), not a server fault.
func TestTierRestoreUnknownTopicIs404(t *testing.T) {
	n := startNode(t, t.TempDir(), tierSettings(nil))
	resp, err := http.Post("http://"+n.AdminAddr()+"/v1/tier/restore?topic=nosuch", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusNotFound || e.Error == "" {
		t.Fatalf("restore of a missing topic: %s %q, want 404 with an error", resp.Status, e.Error)
	}
}

// smallTieredTopic creates a one-partition tiered topic of 16 KiB
// segments, produces records 1 KiB values to it, and waits until
// everything sealed is remote and local retention has dropped it, so
// offset 0 is served from the bucket. It returns the bucket's root.
func smallTieredTopic(t *testing.T, n *Node, dir, topic string, records int) string {
	t.Helper()
	s := func(v string) *string { return &v }
	createTopic(t, newAdmin(t, n), topic, 1, map[string]*string{
		"remote.storage.enable": s("true"), "segment.bytes": s("16384"),
		"local.retention.bytes": s("16384"), "retention.ms": s("-1"),
	})
	cl := newClient(t, n)
	for i := range records {
		val := make([]byte, 1000) // incompressible: segments fill as their bytes say
		crand.Read(val)
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: val}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.partition(topic, 0).log.Roll(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testWait)
	for {
		st, err := n.TierStatus(topic)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) == 1 && st[0].UploadLagSegments == 0 && st[0].RemoteEnd == int64(records-1) && st[0].LocalStart > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not tiered: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return filepath.Join(dir, "objects")
}

// fetchErrorCode sends one Fetch of topic partition 0 at offset and
// returns the partition's error code.
func fetchErrorCode(t *testing.T, cl *kgo.Client, topic string, id [16]byte, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = id // kgo may send a version that names topics by id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = offset, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestTierMissingRemoteObjectIsOneSteadyError: with a remote segment's
// .log object gone from the bucket, every fetch at its offsets answers
// KAFKA_STORAGE_ERROR (never an empty answer), the segment is counted
// once and shown in tier status with its key, and tier verify reports it
// while fetches of the other segments still work.
func TestTierMissingRemoteObjectIsOneSteadyError(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, tierSettings(nil))
	const topic = "holes"
	root := smallTieredTopic(t, n, dir, topic, 100)
	p := n.partition(topic, 0)
	segs := n.tier.finished(p.topicID, 0)
	if len(segs) < 3 {
		t.Fatalf("%d remote segments, want >= 3", len(segs))
	}
	hole := tiering.FromInfo(topic, segs[1])
	key := hole.Key("", tiering.ExtLog)
	if err := os.Remove(filepath.Join(root, filepath.FromSlash(key))); err != nil {
		t.Fatal(err)
	}

	v, err := n.TierVerify(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Problems) != 1 || v.Problems[0].Key != key || v.Problems[0].Problem != "missing" || v.Segments != len(segs) {
		t.Fatalf("verify: %+v, want one missing %s of %d segments", v, key, len(segs))
	}

	if ls := p.log.LocalLogStartOffset(); ls <= hole.EndOffset {
		t.Fatalf("local start %d: segment [%d, %d] is still local", ls, hole.BaseOffset, hole.EndOffset)
	}
	cl := newClient(t, n)
	for i := range 6 {
		if code := fetchErrorCode(t, cl, topic, p.topicID, hole.BaseOffset); code != kerr.KafkaStorageError.Code {
			t.Fatalf("fetch %d at %d: error code %d, want KAFKA_STORAGE_ERROR every time", i, hole.BaseOffset, code)
		}
	}
	if code := fetchErrorCode(t, cl, topic, p.topicID, segs[0].BaseOffset); code != 0 {
		t.Fatalf("fetch of an intact segment: error code %d", code)
	}
	if got := gatheredCounter(t, n, tiering.MetricRemoteMissingSegments); got != 1 {
		t.Fatalf("%s = %v, want 1", tiering.MetricRemoteMissingSegments, got)
	}
	rows, err := n.tierStatusRows(topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || len(rows[0].MissingSegments) != 1 || rows[0].MissingSegments[0].Key != key {
		t.Fatalf("tier status: %+v, want the missing segment %s", rows, key)
	}
}

// gatheredCounter returns the sum of a counter family's values in n's
// registry.
func gatheredCounter(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	mfs, err := n.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
