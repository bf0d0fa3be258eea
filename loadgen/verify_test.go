package loadgen

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/internal/deliverycheck"
)

// fault is what the broken broker stand-in does to one acknowledged
// record (partition 0, offset standInOffset).
type fault int

const (
	passThrough     fault = iota
	dropRecord            // remove it from every fetch response: the cluster lost it
	duplicateRecord       // append its value again to the log: the cluster duplicated it
	corruptRecord         // flip a byte of its value in every fetch response
)

const standInOffset = 3

// standIn is a deliberately broken broker: a TCP proxy in front of one
// real broker (kfake) that decodes responses with kmsg, points Metadata
// and FindCoordinator at itself (so every client connection goes through
// it), and applies its fault to Fetch responses.
type standIn struct {
	t        *testing.T
	ln       net.Listener
	upstream string
	topic    string
	fault    fault
	host     string
	port     int32
	hits     atomic.Int64 // fetch responses (or the one produce) the fault changed
	dupOnce  sync.Once
	dupErr   chan error

	mu    sync.Mutex // guards conns
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startStandIn(t *testing.T, upstream, topic string, f fault) *standIn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	s := &standIn{t: t, ln: ln, upstream: upstream, topic: topic, fault: f, host: host, port: int32(p),
		dupErr: make(chan error, 1), conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *standIn) addr() string { return s.ln.Addr().String() }

func (s *standIn) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		return false
	}
	s.conns[c] = true
	return true
}

func (s *standIn) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", s.upstream)
		if err != nil {
			c.Close()
			continue
		}
		s.track(c)
		s.track(up)
		s.wg.Add(2)
		var mu sync.Mutex
		pending := map[int32][2]int16{} // correlation id → api key, version
		go func() {                     // client → broker: note each request's key and version
			defer s.wg.Done()
			defer up.Close()
			for {
				f, err := readFrame(c)
				if err != nil || len(f) < 8 {
					return
				}
				mu.Lock()
				pending[int32(binary.BigEndian.Uint32(f[4:8]))] = [2]int16{int16(binary.BigEndian.Uint16(f[0:2])), int16(binary.BigEndian.Uint16(f[2:4]))}
				mu.Unlock()
				if writeFrame(up, f) != nil {
					return
				}
			}
		}()
		go func() { // broker → client: rewrite what the fault asks
			defer s.wg.Done()
			defer c.Close()
			for {
				f, err := readFrame(up)
				if err != nil || len(f) < 4 {
					return
				}
				corr := int32(binary.BigEndian.Uint32(f[0:4]))
				mu.Lock()
				kv, ok := pending[corr]
				delete(pending, corr)
				mu.Unlock()
				if ok {
					f = s.rewrite(kv[0], kv[1], f)
				}
				if writeFrame(c, f) != nil {
					return
				}
			}
		}()
	}
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 64<<20 {
		return nil, errors.New("frame too large")
	}
	f := make([]byte, size)
	_, err := io.ReadFull(r, f)
	return f, err
}

func writeFrame(w io.Writer, f []byte) error {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(f)), uint32(len(f)))
	_, err := w.Write(append(b, f...))
	return err
}

// rewrite decodes a response body with kmsg, changes it, re-encodes it.
func (s *standIn) rewrite(key, version int16, f []byte) []byte {
	switch key {
	case 1, 3, 10: // Fetch, Metadata, FindCoordinator
	default:
		return f
	}
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	hdr := 4
	if req.IsFlexible() { // response header v1: an empty tag buffer
		if len(f) < 5 || f[4] != 0 {
			s.t.Errorf("stand-in: response header tags %x", f[:5])
			return f
		}
		hdr = 5
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if err := resp.ReadFrom(f[hdr:]); err != nil {
		s.t.Errorf("stand-in: decode key %d v%d: %v", key, version, err)
		return f
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = s.host, s.port
		}
	case *kmsg.FindCoordinatorResponse:
		r.Host, r.Port = s.host, s.port
		for i := range r.Coordinators {
			r.Coordinators[i].Host, r.Coordinators[i].Port = s.host, s.port
		}
	case *kmsg.FetchResponse:
		if s.fault == passThrough || !s.mutateFetch(r) {
			return f
		}
	}
	return resp.AppendTo(append([]byte(nil), f[:hdr]...))
}

// mutateFetch applies the fault to the record at standInOffset of
// partition 0, reporting whether it changed the response.
func (s *standIn) mutateFetch(r *kmsg.FetchResponse) bool {
	changed := false
	for ti := range r.Topics {
		for pi := range r.Topics[ti].Partitions {
			p := &r.Topics[ti].Partitions[pi]
			if p.Partition != 0 {
				continue
			}
			var out []byte
			b := p.RecordBatches
			for len(b) > 0 {
				raw, rest, err := batch.Split(b)
				if err != nil {
					break // a partial batch at the end: kept as is
				}
				b = rest
				nb, ok := s.mutateBatch(raw)
				changed = changed || ok
				out = append(out, nb...)
			}
			p.RecordBatches = append(out, b...)
		}
	}
	if changed {
		s.hits.Add(1)
	}
	return changed
}

func (s *standIn) mutateBatch(raw []byte) ([]byte, bool) {
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(raw); err != nil || rb.Attributes&0x07 != 0 {
		return raw, false // compressed batches are not touched (verify produces uncompressed)
	}
	if standInOffset < rb.FirstOffset || standInOffset > rb.FirstOffset+int64(rb.LastOffsetDelta) {
		return raw, false
	}
	var recs []kmsg.Record
	rest := rb.Records
	for range rb.NumRecords {
		v, n := binary.Varint(rest)
		if n <= 0 || n+int(v) > len(rest) {
			return raw, false
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(rest[:n+int(v)]); err != nil {
			return raw, false
		}
		rest = rest[n+int(v):]
		recs = append(recs, rec)
	}
	var kept []kmsg.Record
	hit := false
	for _, rec := range recs {
		if rb.FirstOffset+int64(rec.OffsetDelta) != standInOffset {
			kept = append(kept, rec)
			continue
		}
		hit = true
		switch s.fault {
		case dropRecord:
			continue // the offset stays in the batch's range: a hole
		case corruptRecord:
			v := append([]byte(nil), rec.Value...)
			v[len(v)-1] ^= 0x01
			rec.Value = v
		case duplicateRecord:
			value := append([]byte(nil), rec.Value...)
			s.dupOnce.Do(func() { go s.duplicate(value) })
		}
		kept = append(kept, rec)
	}
	if !hit || s.fault == duplicateRecord {
		return raw, hit
	}
	rb.NumRecords = int32(len(kept))
	rb.Records = nil
	for i := range kept {
		rb.Records = kept[i].AppendTo(rb.Records)
	}
	nb := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(nb[8:12], uint32(len(nb)-12))
	binary.BigEndian.PutUint32(nb[17:21], batch.Checksum(nb)) // the CRC field
	return nb, true
}

// duplicate appends value to partition 0 again, as a broker that lost its
// idempotence state would when a producer retried.
func (s *standIn) duplicate(value []byte) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.upstream), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		s.dupErr <- err
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.dupErr <- cl.ProduceSync(ctx, &kgo.Record{Topic: s.topic, Partition: 0, Value: value}).FirstErr()
}

// verifyCLI runs `loadgen verify` against addr with a short workload and
// returns the exit code and the result --out wrote.
func verifyCLI(t *testing.T, addr, topic string, extra ...string) (int, *VerifyResult, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "verify.json")
	args := append([]string{"verify", "--brokers", addr, "--topic", topic, "--partitions", "2", "--duration", "1500ms",
		"--rate", "300", "--drain", "10s", "--quiet", "--out", out}, extra...)
	code, stdout, stderr := runCLI(t, args...)
	if code == 3 || code == 2 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("exit %d, no --out: %v\n%s%s", code, err, stdout, stderr)
	}
	var res VerifyResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return code, &res, stdout
}

func count(res *VerifyResult, k deliverycheck.Kind) int {
	n := 0
	for _, a := range res.Report.Anomalies {
		if a.Kind == k {
			n++
		}
	}
	return n
}

// TestVerifyCleanThroughStandIn: against kfake behind the pass-through
// stand-in (so the proxy alone adds no anomaly), verify acknowledges
// hundreds of records, reads them back in a group, by partition and in
// the final read, and exits 0 with a clean verdict in stdout and --out.
func TestVerifyCleanThroughStandIn(t *testing.T) {
	c, addr, err := StartKfake("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := startStandIn(t, addr, "clean", passThrough)
	code, res, stdout := verifyCLI(t, s.addr(), "clean", "--producers", "2")
	if code != 0 || res.Verdict != "clean" || !strings.Contains(stdout, "verdict: clean") || len(res.Counts) != 0 {
		t.Fatalf("exit %d, verdict %s:\n%s", code, res.Verdict, stdout)
	}
	h := res.History
	if res.Report.Acked < 300 || len(h.Final) != res.Report.Acked || !h.Checksummed || !h.Idempotent {
		t.Fatalf("acked %d, final read %d, checksummed %v: %s", res.Report.Acked, len(h.Final), h.Checksummed, res.Summary)
	}
	producers := map[string]bool{}
	for _, sd := range h.Sends {
		p, _, err := deliverycheck.ParseValue(sd.Value)
		if err != nil {
			t.Fatal(err)
		}
		producers[p] = true
	}
	if len(producers) != 2 {
		t.Fatalf("producers %v, want 2", producers)
	}
	readers := map[string]bool{}
	for _, p := range h.Polls {
		readers[p.Consumer] = true
	}
	if !readers["r0"] || !(readers["g0.c0"] || readers["g0.c1"]) {
		t.Fatalf("readers %v: want the group and the partition reader", readers)
	}
}

// TestVerifyFindsInjectedAnomalies: the stand-in drops, duplicates or
// corrupts one acknowledged record and verify reports that class (exit 1).
func TestVerifyFindsInjectedAnomalies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault fault
		want  []deliverycheck.Kind
	}{
		{"drop", dropRecord, []deliverycheck.Kind{deliverycheck.Lost, deliverycheck.PollSkip}},
		{"duplicate", duplicateRecord, []deliverycheck.Kind{deliverycheck.Duplicate}},
		{"corrupt", corruptRecord, []deliverycheck.Kind{deliverycheck.Corrupt, deliverycheck.InconsistentOffset, deliverycheck.Lost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, addr, err := StartKfake("127.0.0.1:0", 2)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			s := startStandIn(t, addr, tc.name, tc.fault)
			code, res, stdout := verifyCLI(t, s.addr(), tc.name)
			if s.hits.Load() == 0 {
				t.Fatalf("the stand-in never saw offset %d of partition 0:\n%s", standInOffset, stdout)
			}
			if tc.fault == duplicateRecord {
				if err := <-s.dupErr; err != nil {
					t.Fatalf("duplicate append: %v", err)
				}
			}
			t.Logf("%s", stdout)
			if code != 1 || res.Verdict != "anomalies" || !strings.Contains(stdout, "verdict: ANOMALIES") {
				t.Fatalf("exit %d, verdict %s:\n%s", code, res.Verdict, stdout)
			}
			for _, k := range tc.want {
				if count(res, k) == 0 || res.Counts[k] != count(res, k) {
					t.Errorf("no %s anomaly:\n%s", k, stdout)
				}
			}
			for _, a := range res.Report.Anomalies {
				if a.Partition != 0 || (a.Offset != standInOffset && a.Kind != deliverycheck.Duplicate) {
					t.Errorf("anomaly away from p0@%d: %v", standInOffset, a)
				}
			}
		})
	}
}

// TestVerifyCleanAgainstStrataNode: the same workload against a real
// one-node Strata cluster, through the Go API, is clean.
func TestVerifyCleanAgainstStrataNode(t *testing.T) {
	addr, _ := startNode(t)
	res, err := Verify(testCtx(t), VerifyOptions{Brokers: []string{addr}, Topic: "strata-verify", Partitions: 2,
		Duration: 1500 * time.Millisecond, Rate: 300, Drain: 10 * time.Second, RecordSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Clean() || res.Verdict != "clean" || res.Report.Acked < 300 || res.History.Final[0].Value == "" {
		t.Fatalf("verdict %s: %s\n%v", res.Verdict, res.Summary, res.Report.Err())
	}
	if n := len(res.History.Final[0].Value); n != 200 {
		t.Fatalf("value of %d bytes, want --record-size 200", n)
	}
	if topics, groups := state(t, addr); slices.Contains(topics, "strata-verify") || len(groups) != 0 {
		t.Fatalf("not cleaned up: topics %v, groups %v", topics, groups)
	}
}

// TestVerifyCLIExitCodes: usage errors exit 2; no verdict (an unreachable
// cluster, a topic that already exists and so holds records outside the
// history) exits 3 with one line on stderr.
func TestVerifyCLIExitCodes(t *testing.T) {
	for _, args := range [][]string{
		{"verify", "--partitions", "-1"},
		{"verify", "--record-size", "lots"},
		{"verify", "--groups", "0", "--partition-readers", "0"},
		{"verify", "extra"},
	} {
		if code, _, stderr := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
	code, _, stderr := runCLI(t, "verify", "--brokers", "127.0.0.1:1", "--quiet")
	if code != 3 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "no verdict") {
		t.Fatalf("unreachable: exit %d, stderr %q", code, stderr)
	}
	c, addr, err := StartKfake("127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 1, 1, nil, "taken"); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "verify", "--brokers", addr, "--topic", "taken", "--quiet")
	if code != 3 || !strings.Contains(stderr, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("existing topic: exit %d, stderr %q", code, stderr)
	}
}

// TestVerifyTopicConfigsAndCompression: --topic-config reaches the topic
// it creates and --compression the producers' batches (a fault run of a
// tiered topic needs remote.storage.enable; a compressed run checks the
// codecs' paths too; padded values, since franz-go sends a batch
// uncompressed when compressing would not shrink it). Unknown codecs are
// a usage error.
func TestVerifyTopicConfigsAndCompression(t *testing.T) {
	addr, _ := startNode(t)
	res, err := Verify(testCtx(t), VerifyOptions{Brokers: []string{addr}, Topic: "verify-cfg", Partitions: 1,
		Duration: time.Second, Rate: 200, Drain: 10 * time.Second, Keep: true, Compression: "zstd", RecordSize: 1000,
		TopicConfigs: map[string]string{"segment.bytes": "1048576", "min.insync.replicas": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Clean() {
		t.Fatalf("verdict %s: %s", res.Verdict, res.Summary)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("verify-cfg"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(testCtx(t), "verify-cfg")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("verify-cfg", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			got[c.Key] = c.MaybeValue()
		}
	}
	if got["segment.bytes"] != "1048576" || got["min.insync.replicas"] != "1" {
		t.Fatalf("topic configs set: %v", got)
	}
	fs := cl.PollRecords(testCtx(t), 1)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) == 0 || recs[0].Attrs.CompressionType() != 4 {
		t.Fatalf("records %d, first's codec %v, want zstd (4)", len(recs), recs)
	}
	if code, _, stderr := runCLI(t, "verify", "--compression", "brotli"); code != 2 || !strings.Contains(stderr, "brotli") {
		t.Fatalf("--compression brotli: exit %d, stderr %q", code, stderr)
	}
}
