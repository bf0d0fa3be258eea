package broker

import (
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
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
	if err := testutil.Within(testWait, func() error {
		st, err := n.TierStatus(topic)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) == 1 && st[0].UploadLagSegments == 0 && st[0].RemoteEnd == int64(records-1) && st[0].LocalStart > 0 {
			return nil
		}
		return fmt.Errorf("not tiered: %+v", st)
	}); err != nil {
		t.Fatal(err)
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

// TestTierEmptyMetadataKeepsLogsAndRestoreAllBringsThemBack: a node
// restarted with its metadata log removed sets every log aside as
// <dir>.<uuid>-stray (nothing deleted); tier list shows the tiered topic
// as lost, with its offsets; tier restore --all recreates it from the
// bucket and every record reads back; a second restore --all restores
// nothing and skips it as present.
func TestTierEmptyMetadataKeepsLogsAndRestoreAllBringsThemBack(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, tierSettings(nil))
	const topic, records = "lostmeta", 60
	smallTieredTopic(t, n, dir, topic, records)
	oldID := encodeTopicID(n.partition(topic, 0).topicID)
	createTopic(t, newAdmin(t, n), "plain", 1, nil)
	if err := newClient(t, n).ProduceSync(testCtx(t), &kgo.Record{Topic: "plain", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	n.Close()
	if err := os.RemoveAll(filepath.Join(dir, "__cluster_metadata-0")); err != nil {
		t.Fatal(err)
	}

	n = startNode(t, dir, tierSettings(nil))
	for _, name := range []string{topic + "-0", "plain-0"} {
		strays, _ := filepath.Glob(filepath.Join(dir, name+".*-stray"))
		if len(strays) != 1 {
			t.Fatalf("%s: stray dirs %v, want one", name, strays)
		}
		if logs, _ := filepath.Glob(filepath.Join(strays[0], "*.log")); len(logs) == 0 {
			t.Fatalf("%s lost its segments", strays[0])
		}
	}
	rows, err := n.TierList(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Topic != topic || rows[0].TopicID != oldID || rows[0].State != bucketLost ||
		len(rows[0].Partitions) != 1 || rows[0].Partitions[0].EndOffset != records-1 || rows[0].Partitions[0].Segments == 0 ||
		rows[0].Partitions[0].Bytes == 0 {
		t.Fatalf("tier list: %+v, want %s (%s) lost with offsets up to %d", rows, topic, oldID, records-1)
	}

	resp, err := http.Post("http://"+n.AdminAddr()+"/v1/tier/restore?all=true", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var res RestoreAllResult
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(res.Restored) != 1 || res.Restored[0].Topic != topic || res.Restored[0].TopicID != oldID || len(res.Failed) != 0 {
		t.Fatalf("restore --all: %s %+v %v", resp.Status, res, err)
	}
	cl := newClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	for seen < records {
		fs := cl.PollFetches(testCtx(t))
		if err := testCtx(t).Err(); err != nil {
			t.Fatalf("read back %d of %d records", seen, records)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(seen) || string(r.Key) != strconv.Itoa(seen) {
				t.Fatalf("record at %d: offset %d key %q", seen, r.Offset, r.Key)
			}
			seen++
		})
	}
	again, err := n.RestoreAll(testCtx(t))
	if err != nil || len(again.Restored) != 0 || len(again.Skipped) != 1 || again.Skipped[0].Reason != bucketPresent {
		t.Fatalf("second restore --all: %+v %v", again, err)
	}
}

// TestTierStatusJSONIsSnakeCaseWithKafkaTopicIDs: /v1/tier/status names
// its fields in snake_case and prints the topic id as Kafka does.
func TestTierStatusJSONIsSnakeCaseWithKafkaTopicIDs(t *testing.T) {
	n := startNode(t, t.TempDir(), tierSettings(nil))
	s := func(v string) *string { return &v }
	createTopic(t, newAdmin(t, n), "snake", 1, map[string]*string{"remote.storage.enable": s("true")})
	var rows []map[string]any
	if err := testutil.Within(testWait, func() bool {
		resp, err := http.Get("http://" + n.AdminAddr() + "/v1/tier/status?topic=snake")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&rows)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return len(rows) > 0
	}); err != nil {
		t.Fatal("no status row")
	}
	want := encodeTopicID(n.partition("snake", 0).topicID)
	if rows[0]["topic_id"] != want || rows[0]["remote_segments"] == nil || rows[0]["upload_lag_bytes"] == nil || rows[0]["partition"] == nil {
		t.Fatalf("status row %v: want snake_case fields and topic_id %s", rows[0], want)
	}
	for k := range rows[0] {
		if strings.ToLower(k) != k {
			t.Fatalf("field %q is not snake_case", k)
		}
	}
}

// TestTierVanishedLocalLogWarnsWhichOffsetsWereLost: a tiered
// partition's directory removed while the node is down, holding records
// never uploaded (the active segment), restarts after the remote tier
// with a warning naming the lost offsets, not an INFO line.
func TestTierVanishedLocalLogWarnsWhichOffsetsWereLost(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, tierSettings(nil))
	const topic, uploaded, tail = "vanish", 40, 7
	smallTieredTopic(t, n, dir, topic, uploaded)
	cl := newClient(t, n)
	for i := range tail {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	n.Close()
	if err := os.RemoveAll(filepath.Join(dir, topic+"-0")); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	n, err := Open(Options{Config: testConfig(t, dir, tierSettings(nil)), Logger: slog.New(slog.NewTextHandler(logs, nil)), StartTimeout: testWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := testutil.Within(testWait, func() bool { return strings.Contains(logs.String(), "vanished") }); err != nil {
		t.Fatalf("no warning of the lost log:\n%s", logs.String())
	}
	out := logs.String()
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "vanished") {
			line = l
		}
	}
	want := fmt.Sprintf("lost_from=%d lost_to=%d", uploaded, uploaded+tail-1)
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, want) {
		t.Fatalf("warning %q, want WARN with %s", line, want)
	}
	if p := n.partition(topic, 0); p == nil || p.log.LogEndOffset() != uploaded {
		t.Fatalf("partition did not restart after the remote end %d", uploaded)
	}
}
