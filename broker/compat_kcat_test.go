package broker

// Second-client tests, part 1: kcat (librdkafka's protocol code, not
// franz-go's kmsg, which the broker shares with kgo and so could hide a
// codec bug on both sides). compat_python_test.go drives librdkafka's
// consumer and producer APIs through python3-confluent-kafka.
//
// Both clients are Debian packages that .ci/run installs when missing: on a
// developer machine without them these tests skip, under CI=true they fail.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clientTimeout bounds every client subprocess.
const clientTimeout = 60 * time.Second

// needClient returns the path of a second client's executable; when it is
// missing (or probe fails) the test skips, or fails under CI=true.
func needClient(t *testing.T, path string, probe ...string) string {
	t.Helper()
	p, err := exec.LookPath(path)
	if err == nil && len(probe) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
		defer cancel()
		if out, perr := exec.CommandContext(ctx, p, probe...).CombinedOutput(); perr != nil {
			err = fmt.Errorf("%v: %s", perr, out)
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing under CI (.ci/run installs it): %v", path, err)
		}
		t.Skipf("%s not available: %v", path, err)
	}
	return p
}

// runClient runs a client subprocess with stdin and returns its stdout; a
// non-zero exit or the timeout fails the test with its stderr.
func runClient(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s\nstdout (last 2000 bytes):\n%s", name, strings.Join(args, " "), err,
			stderr.Bytes(), stdout.Bytes()[max(0, stdout.Len()-2000):])
	}
	return stdout.Bytes()
}

// storedBatches parses a partition's stored bytes into batch headers (the
// records stay as stored: compressed batches are not decompressed).
func storedBatches(t *testing.T, n *Node, topic string, part int32) []kmsg.RecordBatch {
	t.Helper()
	b := logBytes(t, n, topic, part)
	var out []kmsg.RecordBatch
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("%d trailing bytes in the log", len(b))
		}
		size := 12 + int(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])))
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:size]); err != nil {
			t.Fatalf("stored batch: %v", err)
		}
		out = append(out, rb)
		b = b[size:]
	}
	return out
}

// codecAttr is the compression attribute of a v2 batch for a codec name.
var codecAttr = map[string]int16{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// librdkafkaCompresses reports whether librdkafka will compress with codec
// against this broker. It enables lz4 only when the broker advertises
// FindCoordinator (key 10: lz4 shipped with Kafka 0.8.2, as did the group
// coordinator, and librdkafka dates it that way): a broker without consumer
// groups gets lz4 batches uncompressed. gzip and snappy need Produce v0
// advertised (18_api_versions.go, KAFKA-18659).
func librdkafkaCompresses(codec string) bool {
	return codec != "lz4" || apis[10] != nil
}

// kcatRecord is one line of `kcat -C -J`.
type kcatRecord struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	TSType    string   `json:"tstype"`
	TS        int64    `json:"ts"`
	Broker    int32    `json:"broker"`
	Headers   []string `json:"headers"`
	Key       *string  `json:"key"`
	Payload   *string  `json:"payload"`
}

func kcatConsume(t *testing.T, kcat, addr, topic string, args ...string) []kcatRecord {
	t.Helper()
	out := runClient(t, nil, kcat, append([]string{"-b", addr, "-C", "-t", topic, "-e", "-J", "-q"}, args...)...)
	var recs []kcatRecord
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r kcatRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("kcat output %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func TestKcatMetadataListsBrokerTopicsAndLeaders(t *testing.T) {
	kcat := needClient(t, "kcat", "-V")
	n := startNode(t, t.TempDir(), map[string]string{"auto.create.topics.enable": "false"})
	adm := newAdmin(t, n)
	createTopic(t, adm, "kc-meta-a", 3, nil)
	createTopic(t, adm, "kc-meta-b", 1, nil)

	var md struct {
		ControllerID int32 `json:"controllerid"`
		Brokers      []struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Error      string `json:"error"`
			Partitions []struct {
				Partition int32                `json:"partition"`
				Leader    int32                `json:"leader"`
				Error     string               `json:"error"`
				Replicas  []struct{ ID int32 } `json:"replicas"`
				ISRs      []struct{ ID int32 } `json:"isrs"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	out := runClient(t, nil, kcat, "-b", n.Addr(), "-L", "-J")
	if err := json.Unmarshal(out, &md); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, out)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 1 || md.Brokers[0].Name != n.Addr() || md.ControllerID != 1 {
		t.Fatalf("brokers %+v controller %d, want [1 %s] and 1", md.Brokers, md.ControllerID, n.Addr())
	}
	parts := map[string]int{}
	for _, tp := range md.Topics {
		if tp.Error != "" {
			t.Fatalf("topic %s: %s", tp.Topic, tp.Error)
		}
		for i, p := range tp.Partitions {
			if p.Partition != int32(i) || p.Leader != 1 || p.Error != "" || len(p.Replicas) != 1 || p.Replicas[0].ID != 1 ||
				len(p.ISRs) != 1 || p.ISRs[0].ID != 1 {
				t.Fatalf("topic %s partition %d: %+v", tp.Topic, i, p)
			}
		}
		parts[tp.Topic] = len(tp.Partitions)
	}
	if len(parts) != 2 || parts["kc-meta-a"] != 3 || parts["kc-meta-b"] != 1 {
		t.Fatalf("topics %v, want kc-meta-a:3 kc-meta-b:1", parts)
	}

	// One topic by name; a missing one is reported, not auto-created.
	out = runClient(t, nil, kcat, "-b", n.Addr(), "-L", "-J", "-t", "kc-meta-missing")
	if !bytes.Contains(out, []byte(`"topic":"kc-meta-missing"`)) || !bytes.Contains(out, []byte(`"error"`)) {
		t.Fatalf("missing topic not reported as an error: %s", out)
	}
}

// kcatInput is what the kcat produce tests send: keyed lines with values
// of several sizes and non-ASCII bytes (kcat splits each line at the
// first ':' for -K:).
func kcatInput(tag string, count int) (keys, values []string, stdin []byte) {
	var b bytes.Buffer
	for i := range count {
		k := fmt.Sprintf("%s-k%d", tag, i)
		v := fmt.Sprintf("välue-%d:%s|ünïcode✓", i, strings.Repeat("abc", i*40))
		keys, values = append(keys, k), append(values, v)
		fmt.Fprintf(&b, "%s:%s\n", k, v)
	}
	return keys, values, b.Bytes()
}

// TestKcatProduceKeysAndHeadersEveryCodecConsumeByteExact produces keyed
// records with headers through kcat under every codec librdkafka has,
// checks the batches are stored with the client's compression untouched,
// and reads them back byte-exact with kgo and with kcat.
func TestKcatProduceKeysAndHeadersEveryCodecConsumeByteExact(t *testing.T) {
	kcat := needClient(t, "kcat", "-V")
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	const count = 40
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "kc-" + codec
			createTopic(t, adm, topic, 1, nil)
			keys, values, stdin := kcatInput(codec, count)
			runClient(t, stdin, kcat, "-b", n.Addr(), "-P", "-t", topic, "-p", "0", "-K:", "-z", codec,
				"-H", "trace=äbc", "-H", "codec="+codec, "-X", "linger.ms=20", "-X", "acks=all")

			batches := storedBatches(t, n, topic, 0)
			next, compressed := int64(0), 0
			for _, rb := range batches {
				// librdkafka sends a batch uncompressed when compressing
				// does not make it smaller (a lone short record).
				if c := rb.Attributes & 7; c != codecAttr[codec] && c != 0 {
					t.Fatalf("stored batch at %d has compression %d, want %d (%s)", rb.FirstOffset, c, codecAttr[codec], codec)
				} else if c == codecAttr[codec] {
					compressed++
				}
				if rb.FirstOffset != next {
					t.Fatalf("batch at %d, want %d", rb.FirstOffset, next)
				}
				next += int64(rb.LastOffsetDelta) + 1
			}
			if next != count || compressed == 0 && librdkafkaCompresses(codec) {
				t.Fatalf("stored %d records (want %d) in %d batches, %d of them %s", next, count, len(batches), compressed, codec)
			}

			wantHeaders := []kgo.RecordHeader{{Key: "trace", Value: []byte("äbc")}, {Key: "codec", Value: []byte(codec)}}
			got := consumeAll(t, n, topic, count)
			for i := range count {
				r := got[[2]int64{0, int64(i)}]
				if r == nil || string(r.Key) != keys[i] || string(r.Value) != values[i] || len(r.Headers) != 2 ||
					r.Headers[0].Key != wantHeaders[0].Key || !bytes.Equal(r.Headers[0].Value, wantHeaders[0].Value) ||
					r.Headers[1].Key != wantHeaders[1].Key || !bytes.Equal(r.Headers[1].Value, wantHeaders[1].Value) {
					t.Fatalf("kgo read offset %d: %+v, want key %q value %q headers %v", i, r, keys[i], values[i], wantHeaders)
				}
			}

			recs := kcatConsume(t, kcat, n.Addr(), topic, "-p", "0", "-o", "beginning")
			if len(recs) != count {
				t.Fatalf("kcat consumed %d records, want %d", len(recs), count)
			}
			for i, r := range recs {
				if r.Offset != int64(i) || r.Key == nil || *r.Key != keys[i] || r.Payload == nil || *r.Payload != values[i] ||
					strings.Join(r.Headers, ",") != "trace,äbc,codec,"+codec || r.Broker != 1 || r.TSType != "create" {
					t.Fatalf("kcat read %+v, want offset %d key %q value %q", r, i, keys[i], values[i])
				}
			}
		})
	}
}

// TestKcatConsumesKgoRecordsAndStartsAtATimestamp produces records with
// known timestamps through kgo (one batch each, and one batch of several)
// and has kcat start at offsets found by time (-o s@ts: ListOffsets by
// timestamp from librdkafka's codec).
func TestKcatConsumesKgoRecordsAndStartsAtATimestamp(t *testing.T) {
	kcat := needClient(t, "kcat", "-V")
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "kc-time", 1, nil)
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := range 10 {
		r := &kgo.Record{Topic: "kc-time", Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("v", i)),
			Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	// Offsets 10..14 in one batch, timestamps base+20s..base+24s.
	var batch []*kgo.Record
	for i := range 5 {
		batch = append(batch, &kgo.Record{Topic: "kc-time", Value: []byte(fmt.Sprint("b", i)), Timestamp: base.Add(time.Duration(20+i) * time.Second)})
	}
	if err := cl.ProduceSync(testCtx(t), batch...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if batch[0].Offset != 10 || batch[4].Offset != 14 {
		t.Fatalf("batch offsets %d..%d", batch[0].Offset, batch[4].Offset)
	}

	all := kcatConsume(t, kcat, n.Addr(), "kc-time", "-p", "0", "-o", "beginning")
	if len(all) != 15 {
		t.Fatalf("kcat read %d records, want 15", len(all))
	}
	for i, r := range recs {
		if all[i].Offset != r.Offset || *all[i].Key != string(r.Key) || *all[i].Payload != string(r.Value) || all[i].TS != r.Timestamp.UnixMilli() {
			t.Fatalf("kcat offset %d: %+v, want %q=%q at %d", i, all[i], r.Key, r.Value, r.Timestamp.UnixMilli())
		}
	}
	for _, tc := range []struct {
		ts        int64
		wantFirst int64
	}{
		{base.UnixMilli() - 1, 0},
		{base.UnixMilli(), 0},
		{base.Add(3500 * time.Millisecond).UnixMilli(), 4},
		{base.Add(9 * time.Second).UnixMilli(), 9},
		{base.Add(22 * time.Second).UnixMilli(), 12}, // inside the batch: the record, not the batch start
		{base.Add(24 * time.Second).UnixMilli(), 14},
	} {
		got := kcatConsume(t, kcat, n.Addr(), "kc-time", "-p", "0", "-o", fmt.Sprintf("s@%d", tc.ts))
		if len(got) != int(15-tc.wantFirst) || got[0].Offset != tc.wantFirst {
			first := int64(-1)
			if len(got) > 0 {
				first = got[0].Offset
			}
			t.Fatalf("s@%d: %d records from offset %d, want from %d", tc.ts, len(got), first, tc.wantFirst)
		}
	}
}

// TestKcatIdempotentProducer produces with librdkafka's idempotent
// producer (InitProducerId, then sequenced batches): every record once,
// offsets dense, batches stamped with the producer id and consecutive
// sequences.
func TestKcatIdempotentProducer(t *testing.T) {
	kcat := needClient(t, "kcat", "-V")
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "kc-idem", 1, nil)
	const count = 300
	keys, values, stdin := kcatInput("idem", count)
	runClient(t, stdin, kcat, "-b", n.Addr(), "-P", "-t", "kc-idem", "-p", "0", "-K:", "-z", "lz4",
		"-X", "enable.idempotence=true", "-X", "linger.ms=5", "-X", "batch.num.messages=17")
	got := consumeAll(t, n, "kc-idem", count)
	for i := range count {
		if r := got[[2]int64{0, int64(i)}]; r == nil || string(r.Key) != keys[i] || string(r.Value) != values[i] {
			t.Fatalf("offset %d: %+v", i, r)
		}
	}
	batches := storedBatches(t, n, "kc-idem", 0)
	if len(batches) < 2 {
		t.Fatalf("%d batches; the test wants several sequenced batches", len(batches))
	}
	seq := int32(0)
	for _, rb := range batches {
		if rb.ProducerID < 0 || rb.ProducerID != batches[0].ProducerID || rb.ProducerEpoch != batches[0].ProducerEpoch {
			t.Fatalf("batch at %d: producer %d epoch %d (first batch: %d/%d)", rb.FirstOffset, rb.ProducerID, rb.ProducerEpoch,
				batches[0].ProducerID, batches[0].ProducerEpoch)
		}
		if rb.FirstSequence != seq {
			t.Fatalf("batch at %d: sequence %d, want %d", rb.FirstOffset, rb.FirstSequence, seq)
		}
		seq += rb.LastOffsetDelta + 1
	}
}
