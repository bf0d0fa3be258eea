package broker

// Second-client tests, part 2: librdkafka's producer and consumer through
// python3-confluent-kafka, driven by testdata/compat/client.py under the
// system python (/usr/bin/python3: the Debian package installs there, not
// into a pyenv). Values and keys are arbitrary bytes, base64 on the pipe, so
// the comparison is byte-exact both ways: librdkafka produces and kgo reads,
// kgo produces and librdkafka reads.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

const systemPython = "/usr/bin/python3"

// pyRecord is one record on client.py's pipe.
type pyRecord struct {
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset,omitempty"`
	Timestamp int64        `json:"timestamp,omitempty"`
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   [][2]*string `json:"headers"`
}

type pyReport struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Error     *string `json:"error"`
}

func b64p(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

func unb64p(t *testing.T, s *string) []byte {
	t.Helper()
	if s == nil {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(*s)
	if err != nil {
		t.Fatal(err)
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

// pyClient runs client.py with a command; it skips (or fails under CI)
// when the system python lacks confluent_kafka.
func pyClient(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	py := needClient(t, systemPython, "-c", "import confluent_kafka")
	script, err := filepath.Abs(filepath.Join("testdata", "compat", "client.py"))
	if err != nil {
		t.Fatal(err)
	}
	return runClient(t, stdin, py, append([]string{script}, args...)...)
}

func jsonLines[T any](t *testing.T, out []byte) []T {
	t.Helper()
	var res []T
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("client.py output %q: %v", line, err)
		}
		res = append(res, v)
	}
	return res
}

// binaryRecords returns count kgo records with arbitrary bytes (every byte
// value, zero-length, null keys and header values) on partitions round
// robin, timestamps from base a millisecond apart.
func binaryRecords(topic, tag string, count, partitions int, base time.Time) []*kgo.Record {
	var recs []*kgo.Record
	for i := range count {
		val := make([]byte, (i*97)%2000)
		for j := range val {
			val[j] = byte(i + j*31)
		}
		r := &kgo.Record{
			Topic: topic, Partition: int32(i % partitions), Value: val,
			Key:       []byte(fmt.Sprintf("%s\x00\xff-%d", tag, i)),
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
			Headers: []kgo.RecordHeader{
				{Key: "tag", Value: []byte(tag)},
				{Key: "bin", Value: []byte{0, 1, 0xfe, 0xff, byte(i)}},
				{Key: "empty", Value: []byte{}},
			},
		}
		switch i % 5 {
		case 1:
			r.Key = nil
		case 2:
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "null"})
		case 3:
			r.Headers = nil
		}
		recs = append(recs, r)
	}
	return recs
}

func pyInput(recs []*kgo.Record) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range recs {
		pr := pyRecord{Partition: r.Partition, Timestamp: r.Timestamp.UnixMilli(), Key: b64p(r.Key), Value: b64p(r.Value)}
		for _, h := range r.Headers {
			k := h.Key
			pr.Headers = append(pr.Headers, [2]*string{&k, b64p(h.Value)})
		}
		enc.Encode(pr)
	}
	return b.Bytes()
}

// samePy compares a record client.py read with the one produced.
func samePy(t *testing.T, want *kgo.Record, got pyRecord) {
	t.Helper()
	eq := got.Partition == want.Partition && got.Offset == want.Offset && got.Timestamp == want.Timestamp.UnixMilli() &&
		bytes.Equal(unb64p(t, got.Key), want.Key) && (got.Key == nil) == (want.Key == nil) &&
		bytes.Equal(unb64p(t, got.Value), want.Value) && len(got.Headers) == len(want.Headers)
	for i := 0; eq && i < len(want.Headers); i++ {
		h := got.Headers[i]
		eq = h[0] != nil && *h[0] == want.Headers[i].Key && bytes.Equal(unb64p(t, h[1]), want.Headers[i].Value) &&
			(h[1] == nil) == (want.Headers[i].Value == nil)
	}
	if !eq {
		t.Fatalf("librdkafka read %d/%d differs:\nwant key %q value %d bytes headers %v ts %d\ngot  %+v",
			want.Partition, want.Offset, want.Key, len(want.Value), want.Headers, want.Timestamp.UnixMilli(), got)
	}
}

func TestPythonMetadataListsBrokerAndTopics(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"auto.create.topics.enable": "false"})
	createTopic(t, newAdmin(t, n), "py-meta", 4, nil)
	var md struct {
		Brokers map[string]string           `json:"brokers"`
		Topics  map[string]map[string]int32 `json:"topics"`
	}
	if err := json.Unmarshal(pyClient(t, nil, "metadata", n.Addr()), &md); err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || md.Brokers["1"] != n.Addr() {
		t.Fatalf("brokers %v, want 1=%s", md.Brokers, n.Addr())
	}
	// The script's consumer has a group.id, so librdkafka may look up its
	// coordinator, which creates __consumer_offsets (as in Kafka).
	delete(md.Topics, offsetsTopic)
	parts := md.Topics["py-meta"]
	if len(md.Topics) != 1 || len(parts) != 4 {
		t.Fatalf("topics %v", md.Topics)
	}
	for p, leader := range parts {
		if leader != 1 {
			t.Fatalf("partition %s leader %d", p, leader)
		}
	}
}

// TestPythonProduceEveryCodecKgoReadsByteExact: librdkafka produces keyed
// binary records with headers and explicit timestamps under each codec it
// supports, idempotent and not; kgo reads them back byte-exact, and the
// stored batches keep the client's compression.
func TestPythonProduceEveryCodecKgoReadsByteExact(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		for _, idem := range []string{"0", "1"} {
			t.Run(fmt.Sprintf("codec=%s/idempotent=%s", codec, idem), func(t *testing.T) {
				topic := fmt.Sprintf("py-%s-%s", codec, idem)
				createTopic(t, adm, topic, 2, nil)
				recs := binaryRecords(topic, codec, 120, 2, time.UnixMilli(1_700_000_000_000))
				reports := jsonLines[pyReport](t, pyClient(t, pyInput(recs), "produce", n.Addr(), topic, codec, idem))
				if len(reports) != len(recs) {
					t.Fatalf("%d delivery reports for %d records", len(reports), len(recs))
				}
				next := map[int32]int64{}
				for i, rep := range reports {
					if rep.Error != nil || rep.Partition != recs[i].Partition {
						t.Fatalf("record %d: report %+v", i, rep)
					}
					// One producer, in order per partition: dense offsets.
					if rep.Offset != next[rep.Partition] {
						t.Fatalf("record %d acknowledged at %d/%d, want offset %d", i, rep.Partition, rep.Offset, next[rep.Partition])
					}
					next[rep.Partition]++
					recs[i].Offset = rep.Offset
				}
				checkConsumed(t, recs, consumeAll(t, n, topic, len(recs)))
				compressed := 0
				for p := range int32(2) {
					for _, rb := range storedBatches(t, n, topic, p) {
						// librdkafka sends a batch uncompressed when
						// compressing does not make it smaller.
						if c := rb.Attributes & 7; c != codecAttr[codec] && c != 0 {
							t.Fatalf("partition %d batch at %d: compression %d, want %s", p, rb.FirstOffset, c, codec)
						} else if c == codecAttr[codec] {
							compressed++
						}
						if (rb.ProducerID >= 0) != (idem == "1") {
							t.Fatalf("partition %d batch at %d: producer id %d with idempotence %s", p, rb.FirstOffset, rb.ProducerID, idem)
						}
					}
				}
				if compressed == 0 && librdkafkaCompresses(codec) {
					t.Fatalf("no stored batch is %s-compressed", codec)
				}
			})
		}
	}
}

// TestPythonConsumesKgoRecordsByteExact: kgo produces (every codec), and
// librdkafka's consumer, assigned partitions at offsets without a group,
// reads them back byte-exact, from the start and from the middle.
func TestPythonConsumesKgoRecordsByteExact(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "py-read", 2, nil)
	var recs []*kgo.Record
	for i, c := range codecs {
		cl := newClient(t, n, kgo.ProducerBatchCompression(c.codec), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(5*time.Millisecond))
		batch := binaryRecords("py-read", c.name, 60, 2, time.UnixMilli(1_700_000_000_000+int64(i)*1000))
		if err := cl.ProduceSync(testCtx(t), batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, batch...)
	}
	byPart := map[int32][]*kgo.Record{}
	for _, r := range recs {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	for p, want := range byPart {
		got := jsonLines[pyRecord](t, pyClient(t, nil, "consume", n.Addr(), "py-read", fmt.Sprint(p), "0", fmt.Sprint(len(want)+1)))
		if len(got) != len(want) {
			t.Fatalf("partition %d: librdkafka read %d records, want %d", p, len(got), len(want))
		}
		for i := range want {
			if want[i].Offset != int64(i) {
				t.Fatalf("partition %d: kgo acknowledged offset %d at position %d", p, want[i].Offset, i)
			}
			samePy(t, want[i], got[i])
		}
		// From the middle of a (compressed) batch: librdkafka skips the
		// records before the fetch offset itself.
		mid := int64(len(want) / 2)
		got = jsonLines[pyRecord](t, pyClient(t, nil, "consume", n.Addr(), "py-read", fmt.Sprint(p), fmt.Sprint(mid), "5"))
		if len(got) != 5 {
			t.Fatalf("partition %d from %d: %d records", p, mid, len(got))
		}
		for i := range got {
			samePy(t, want[mid+int64(i)], got[i])
		}
	}
}

// TestPythonOffsetsForTimes: librdkafka's offsets_for_times (ListOffsets
// by timestamp from its own codec) finds the first record at or after each
// timestamp, inside batches too, and -1 past the last one.
func TestPythonOffsetsForTimes(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "py-time", 1, nil)
	base := time.UnixMilli(1_700_000_000_000)
	// Three batches of 10 records 100ms apart, the batches a minute apart.
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for b := range 3 {
		var batch []*kgo.Record
		for i := range 10 {
			batch = append(batch, &kgo.Record{Topic: "py-time", Value: []byte{byte(b), byte(i)},
				Timestamp: base.Add(time.Duration(b)*time.Minute + time.Duration(i)*100*time.Millisecond)})
		}
		if err := cl.ProduceSync(testCtx(t), batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, batch...)
	}
	ms := func(d time.Duration) string { return fmt.Sprint(base.Add(d).UnixMilli()) }
	out := pyClient(t, nil, "offsets_for_times", n.Addr(), "py-time", "0",
		ms(-time.Hour), ms(0), ms(450*time.Millisecond), ms(time.Minute), ms(time.Minute+900*time.Millisecond),
		ms(2*time.Minute+50*time.Millisecond), ms(2*time.Minute+900*time.Millisecond), ms(time.Hour))
	var got []int64
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	want := []int64{0, 0, 5, 10, 19, 21, 29, -1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("offsets_for_times %v, want %v", got, want)
	}
	if recs[29].Offset != 29 {
		t.Fatalf("last offset %d", recs[29].Offset)
	}
}

// TestPythonKeylessRecordsOnCompactedTopicFailAsInKafka is librdkafka's
// 0011_produce_batch test_message_single_partition_record_fail: the topic
// becomes compacted by IncrementalAlterConfigs APPEND cleanup.policy
// compact, then 100 records, every tenth without a key, are
// produced. In one batch, the batch fails whole: librdkafka 2.4+ (KIP-467)
// fails the ten keyless records with INVALID_RECORD, from the response's
// RecordErrors, and the ninety others with _INVALID_DIFFERENT_RECORD;
// older ones fail all hundred with INVALID_RECORD. With one record per
// batch the ten fail and the ninety are appended.
func TestPythonKeylessRecordsOnCompactedTopicFailAsInKafka(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	for _, variation := range []struct {
		name      string
		batchSize string
	}{{"one-batch", "1000000"}, {"batch-per-record", "1"}} {
		t.Run(variation.name, func(t *testing.T) {
			topic := "py-keyless-" + variation.name
			createTopic(t, adm, topic, 1, nil)
			rs, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}, topic)
			if err == nil {
				err = rs[0].Err
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := testutil.Within(testWait, func() bool {
				l, ok := n.store.Get(topic, 0)
				return ok && l.Config().Compact()
			}); err != nil {
				t.Fatal("cleanup.policy compact did not reach the log")
			}
			var in bytes.Buffer
			enc := json.NewEncoder(&in)
			for i := range 100 {
				r := pyRecord{Value: b64p(fmt.Appendf(nil, "message #%d", i))}
				if i%10 != 0 {
					r.Key = b64p(fmt.Appendf(nil, "key #%d", i))
				}
				enc.Encode(r)
			}
			var out struct {
				Librdkafka int `json:"librdkafka"`
				Reports    []struct {
					Offset int64   `json:"offset"`
					Error  *string `json:"error"`
				} `json:"reports"`
			}
			if err := json.Unmarshal(pyClient(t, in.Bytes(), "produce_may_fail", n.Addr(), topic, variation.batchSize), &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Reports) != 100 {
				t.Fatalf("%d delivery reports", len(out.Reports))
			}
			kip467 := out.Librdkafka >= 0x02040000
			for i, rep := range out.Reports {
				got := "delivered"
				if rep.Error != nil {
					got = *rep.Error
				}
				want := "delivered"
				switch {
				case i%10 == 0:
					want = "INVALID_RECORD"
				case variation.batchSize != "1" && kip467:
					want = "_INVALID_DIFFERENT_RECORD"
				case variation.batchSize != "1":
					want = "INVALID_RECORD"
				}
				if got != want {
					t.Errorf("librdkafka %#x: record %d: %s, want %s", out.Librdkafka, i, got, want)
				}
			}
			wantHW := int64(0)
			if variation.batchSize == "1" {
				wantHW = 90
			}
			if hw := n.partition(topic, 0).hw.Load(); hw != wantHW {
				t.Fatalf("%d records appended, want %d", hw, wantHW)
			}
		})
	}
}

// TestPythonGroupConsumesManyTopics is librdkafka's 0042_many_topics: a
// group member subscribed to 20 topics of 4 partitions reads every record
// with no connection lost. librdkafka's fetches list a topic's partitions
// in several runs; answering them grouped by topic closed the connection
// ("All broker connections are down").
func TestPythonGroupConsumesManyTopics(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var topics []string
	var recs []*kgo.Record
	for i := range 20 {
		topic := fmt.Sprintf("py-many-%02d", i)
		topics = append(topics, topic)
		createTopic(t, adm, topic, 4, nil)
		for j := range 40 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(j % 4), Value: fmt.Appendf(nil, "%s/%d", topic, j)})
		}
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Records int      `json:"records"`
		Errors  []string `json:"errors"`
	}
	args := append([]string{"subscribe", n.Addr(), "py-many", fmt.Sprint(len(recs))}, topics...)
	if err := json.Unmarshal(pyClient(t, nil, args...), &out); err != nil {
		t.Fatal(err)
	}
	if out.Records != len(recs) || len(out.Errors) > 0 {
		t.Fatalf("read %d of %d records; client errors: %v", out.Records, len(recs), out.Errors)
	}
}

// TestPythonTransactionsReadCommitted: librdkafka's transactional producer
// (init, begin, produce, flush, commit or abort) against the coordinator
// and the partition side; librdkafka's consumer (read_committed by
// default) and franz-go's read_committed consumer read only the committed
// transactions' records, in order, and a read_uncommitted one all of them.
func TestPythonTransactionsReadCommitted(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "py-txn", 1, nil)
	var res struct{ Committed, Aborted []string }
	out := pyClient(t, nil, "transact", n.Addr(), "py-txn", "py-tx", "3:commit,2:abort,4:commit,1:abort,2:commit")
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("transact output %q: %v", out, err)
	}
	if len(res.Committed) != 9 || len(res.Aborted) != 3 {
		t.Fatalf("transact: %+v", res)
	}
	var got []string
	for _, r := range jsonLines[pyRecord](t, pyClient(t, nil, "consume", n.Addr(), "py-txn", "0", "0", "100")) {
		got = append(got, string(unb64p(t, r.Value)))
	}
	if !slices.Equal(got, res.Committed) {
		t.Fatalf("librdkafka read_committed: %q, want %q", got, res.Committed)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(n.Addr())}
	if got := consumeIso(t, opts, "py-txn", true, len(res.Committed)); !slices.Equal(got, res.Committed) {
		t.Fatalf("franz-go read_committed: %q, want %q", got, res.Committed)
	}
	all := consumeIso(t, opts, "py-txn", false, len(res.Committed)+len(res.Aborted))
	if len(all) != 12 {
		t.Fatalf("franz-go read_uncommitted: %q", all)
	}
}
