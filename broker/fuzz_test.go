package broker

// Bad input: fuzz targets feeding arbitrary bytes to the broker's
// decode+dispatch path, in process (no sockets: a memConn stands in for
// the client connection), and targeted bad-input tests on the same harness.
//
// Run the fuzzers (each worker starts its own node):
//
//	go test ./broker -run '^$' -fuzz '^FuzzRequest$' -fuzztime 60s
//	go test ./broker -run '^$' -fuzz '^FuzzRequestBody$' -fuzztime 60s
//
// The seed corpora under testdata/fuzz/ are real requests captured from
// kgo and kadm (STRATA_TEST_WRITE_FUZZ_SEEDS=1 go test ./broker -run
// TestFuzzSeedsFromKgo rewrites them); plain `go test` replays them.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// memConn is a client connection without a socket: the broker reads input
// and then EOF (a client that sent its bytes and half-closed), and what it
// writes is collected. Deadlines are accepted and ignored: a read never
// blocks.
type memConn struct {
	in     *bytes.Reader
	mu     sync.Mutex // guards out, closed
	out    bytes.Buffer
	closed bool
}

func newMemConn(input []byte) *memConn { return &memConn{in: bytes.NewReader(input)} }

func (m *memConn) Read(b []byte) (int, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return 0, net.ErrClosed
	}
	return m.in.Read(b)
}

func (m *memConn) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, net.ErrClosed
	}
	return m.out.Write(b)
}

func (m *memConn) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

func (m *memConn) output() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.out.Bytes())
}

var memAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}

func (m *memConn) LocalAddr() net.Addr              { return memAddr }
func (m *memConn) RemoteAddr() net.Addr             { return memAddr }
func (m *memConn) SetDeadline(time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(time.Time) error { return nil }

// served is what one in-process connection did with its input.
type served struct {
	out      []byte // response bytes, in order
	closed   bool   // the broker closed the connection (malformed input, failed acks=0, ...)
	timedOut bool   // handlers still waiting after the budget (long polls): killed by the harness
}

// serveBytes runs one connection of n over input, exactly as acceptLoop
// would for a socket, and returns once the connection is finished: the
// reader read everything, every handler answered, the writer wrote.
// Handlers still running after budget (a long poll the input asked for)
// are cut by closing the connection.
func serveBytes(n *Node, input []byte, budget time.Duration) served {
	return serveBytesOn(n, "PLAINTEXT", input, budget)
}

// serveBytesOn is serveBytes on the named listener (its SASL state, if any).
func serveBytesOn(n *Node, listener string, input []byte, budget time.Duration) served {
	mc := newMemConn(input)
	c := newConn(n, mc, listener)
	finished := make(chan struct{})
	go func() {
		c.serve()
		<-c.done
		close(finished)
	}()
	var s served
	select {
	case <-finished:
	case <-time.After(budget):
		s.timedOut = true
		c.kill(nil)
		<-finished
	}
	s.out = mc.output()
	s.closed = !s.timedOut && c.ctx.Err() != nil
	return s
}

// reqFrame is one complete request frame found in fuzz input.
type reqFrame struct {
	key, version int16
	corr         int32
	body         []byte // after the size prefix
}

// splitFrames cuts input into the complete size-prefixed frames at its
// start (as the broker's reader would, stopping at the first frame that
// is cut short or not a plausible size).
func splitFrames(input []byte) []reqFrame {
	var out []reqFrame
	for len(input) >= 4 {
		size := int32(binary.BigEndian.Uint32(input))
		if size < minRequestBytes || int64(size) > int64(len(input)-4) {
			break
		}
		b := input[4 : 4+size]
		out = append(out, reqFrame{
			key: int16(binary.BigEndian.Uint16(b)), version: int16(binary.BigEndian.Uint16(b[2:])),
			corr: int32(binary.BigEndian.Uint32(b[4:])), body: b,
		})
		input = input[4+size:]
	}
	return out
}

// decodeRequestFrame decodes a frame body the way dispatch does (header,
// client id, flexible tags, kmsg), without running a handler. It is nil
// for frames dispatch would refuse.
func decodeRequestFrame(b []byte) kmsg.Request {
	key, version := int16(binary.BigEndian.Uint16(b)), int16(binary.BigEndian.Uint16(b[2:]))
	a := apis[key]
	if a == nil || version < a.min || version > a.max {
		return nil
	}
	rest := b[8:]
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if idLen > 0 {
		if int(idLen) > len(rest) {
			return nil
		}
		rest = rest[idLen:]
	}
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return nil
		}
	}
	if decodeBody(req, rest) != nil {
		return nil
	}
	return req
}

// clusterMutatingKeys are the APIs whose effects outlive the request and
// are not bounded by it: creating topics or partitions (a fuzzed count of
// 2^31 partitions is honoured: the controller has no per-request cap),
// deleting topics or records, altering configs. Inputs holding one are
// only decoded (decodeRequestFrame), never run; the handlers have their
// own tests.
var clusterMutatingKeys = map[int16]bool{19: true, 20: true, 21: true, 33: true, 37: true, 44: true}

// logState is what must not change under bad input: each hosted
// partition's log start, log end and high watermark. Internal topics
// ("__" names: __consumer_offsets, created by FindCoordinator and written
// by the group coordinator) are left out: requests legitimately create and
// write them.
func logState(n *Node) map[tpKey][3]int64 {
	n.partsMu.RLock()
	defer n.partsMu.RUnlock()
	out := make(map[tpKey][3]int64, len(n.parts))
	for k, p := range n.parts {
		if strings.HasPrefix(k.topic, "__") {
			continue
		}
		out[k] = [3]int64{p.log.LogStartOffset(), p.log.LogEndOffset(), p.hw.Load()}
	}
	return out
}

// panicWatch is a slog handler that counts what must never happen: a
// handler panic (recovered by the connection) or a kmsg decoder panic
// (recovered by decodeBody).
type panicWatch struct {
	n    atomic.Int64
	mu   sync.Mutex
	last string
}

func (w *panicWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *panicWatch) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *panicWatch) WithGroup(string) slog.Handler            { return w }
func (w *panicWatch) Handle(_ context.Context, r slog.Record) error {
	var msg strings.Builder
	msg.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&msg, " %s=%v", a.Key, a.Value); return true })
	if s := msg.String(); strings.Contains(s, "panic") {
		w.n.Add(1)
		w.mu.Lock()
		w.last = s
		w.mu.Unlock()
	}
	return nil
}

// fuzzNode is one node per fuzzing process, with a topic holding data so
// fetches and list-offsets reach the log, and auto-creation off so the
// fuzzer cannot create topics through Metadata.
type fuzzNode struct {
	n     *Node
	watch *panicWatch
	// budget bounds each input: 300ms while fuzzing (every handler but a
	// long poll answers within milliseconds; a fuzzed MaxWaitMillis is cut,
	// weakening only the answered-count check); the targeted tests, which
	// assert on answers, raise it.
	budget time.Duration
}

func startFuzzNode(tb testing.TB) *fuzzNode {
	tb.Helper()
	w := &panicWatch{}
	cfg := testConfig(tb, tb.TempDir(), map[string]string{
		"auto.create.topics.enable": "false",
		"socket.request.max.bytes":  "1048576",
		"queued.max.requests":       "16",
	})
	n, err := Open(Options{Config: cfg, Logger: slog.New(w), StartTimeout: testWait})
	if err != nil {
		tb.Fatalf("open node: %v", err)
	}
	tb.Cleanup(func() { n.Close() })
	createTopic(tb, newAdmin(tb, n), "fuzz", 2, nil)
	cl := newClient(tb, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		if err := cl.ProduceSync(testCtx(tb), &kgo.Record{Topic: "fuzz", Partition: p, Key: []byte("k"), Value: []byte("seed")}).FirstErr(); err != nil {
			tb.Fatal(err)
		}
	}
	return &fuzzNode{n: n, watch: w, budget: 300 * time.Millisecond}
}

var apiVersionsProbe = frameRequest(kmsg.NewPtrApiVersionsRequest(), 424242)

// verify serves input and checks the invariants of bad input:
//
//   - nothing panics: no handler panic, no decoder panic (both recovered
//     by the broker and logged, which panicWatch counts);
//   - the output is a sequence of whole response frames whose correlation
//     ids are, in order, those of a subsequence of the request frames, each
//     decoding with kmsg as the response to its request;
//   - unless the broker closed the connection (or a long poll was cut), every
//     request got its response, except acks=0 produces;
//   - the logs are unchanged, except that a Produce may append (log ends
//     grow, never shrink, and nothing else moves);
//   - the node still answers ApiVersions on a new connection.
func (fz *fuzzNode) verify(input []byte) (served, error) {
	frames := splitFrames(input)
	hasProduce := false
	for _, f := range frames {
		if clusterMutatingKeys[f.key] && decodeRequestFrame(f.body) != nil {
			return served{}, nil // decoded, not run (see clusterMutatingKeys)
		}
		hasProduce = hasProduce || f.key == produceKey
	}
	before := logState(fz.n)
	panics := fz.watch.n.Load()
	s := serveBytes(fz.n, input, fz.budget)
	if fz.watch.n.Load() != panics {
		fz.watch.mu.Lock()
		defer fz.watch.mu.Unlock()
		return s, fmt.Errorf("panic on input %q: %s", input, fz.watch.last)
	}

	// Responses: whole frames, in request order, each decodable.
	out, fi, answered := s.out, 0, 0
	for len(out) > 0 {
		if len(out) < 8 {
			return s, fmt.Errorf("%d trailing response bytes", len(out))
		}
		size := int(binary.BigEndian.Uint32(out))
		if size < 4 || size > len(out)-4 {
			return s, fmt.Errorf("response frame size %d with %d bytes left", size, len(out)-4)
		}
		corr, body := int32(binary.BigEndian.Uint32(out[4:])), out[8:4+size]
		out = out[4+size:]
		for fi < len(frames) && frames[fi].corr != corr {
			fi++
		}
		if fi == len(frames) {
			return s, fmt.Errorf("response with correlation id %d matches no request in order", corr)
		}
		f := frames[fi]
		fi++
		answered++
		req := decodeRequestFrame(f.body)
		if req == nil {
			if f.key != apiVersionsKey {
				return s, fmt.Errorf("a response to a request the broker cannot decode (key %d v%d)", f.key, f.version)
			}
			resp := kmsg.NewPtrApiVersionsResponse() // KIP-511 fallback
			if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
				return s, fmt.Errorf("ApiVersions v%d fallback: %v %+v", f.version, err, resp)
			}
			continue
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		if req.IsFlexible() && req.Key() != apiVersionsKey {
			if _, err := skipTags(body); err != nil {
				return s, fmt.Errorf("%s v%d response header: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
			}
			body = body[1:] // the broker writes no header tags
		}
		if err := resp.ReadFrom(body); err != nil {
			return s, fmt.Errorf("%s v%d response does not decode: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
	}
	if !s.closed && !s.timedOut {
		want := 0
		for _, f := range frames {
			if req := decodeRequestFrame(f.body); req != nil {
				if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
					continue
				}
			}
			want++
		}
		if answered != want {
			return s, fmt.Errorf("connection left open with %d of %d requests answered", answered, want)
		}
	}

	after := logState(fz.n)
	for k, b := range before {
		a, ok := after[k]
		switch {
		case !ok:
			return s, fmt.Errorf("partition %v gone", k)
		case hasProduce && a[0] == b[0] && a[1] >= b[1] && a[2] >= b[2]:
		case a != b:
			return s, fmt.Errorf("partition %v: (start, end, hw) %v -> %v on input without a produce", k, b, a)
		}
	}
	if len(after) != len(before) {
		return s, fmt.Errorf("%d partitions before, %d after", len(before), len(after))
	}
	if p := serveBytes(fz.n, apiVersionsProbe, testWait); p.closed || len(p.out) < 8 ||
		int32(binary.BigEndian.Uint32(p.out[4:])) != 424242 {
		return s, fmt.Errorf("node no longer answers ApiVersions (closed %v, %d bytes)", p.closed, len(p.out))
	}
	return s, nil
}

// check is verify failing t.
func (fz *fuzzNode) check(t *testing.T, input []byte) served {
	t.Helper()
	s, err := fz.verify(input)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzRequest feeds arbitrary bytes to a connection as the client's whole
// byte stream: size prefixes, headers, bodies, several frames or a partial
// one. Invariants: see fuzzNode.check.
func FuzzRequest(f *testing.F) {
	for _, seed := range handSeeds() {
		f.Add(seed)
	}
	fz := startFuzzNode(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		fz.check(t, input)
	})
}

// FuzzRequestBody feeds arbitrary bytes as the body of a well-framed
// request of a registered API key and version, so the fuzzer spends its
// time inside each decoder and handler rather than on framing.
// Invariants: see fuzzNode.check.
func FuzzRequestBody(f *testing.F) {
	for _, a := range supportedAPIs() {
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(a.key)
			req.SetVersion(v)
			f.Add(a.key, v, req.AppendTo(nil)) // the zero request of each version
		}
	}
	fz := startFuzzNode(f)
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		a := apis[key]
		if a == nil || version < a.min || version > a.max {
			return // FuzzRequest covers unknown keys and versions
		}
		if key == produceKey { // let mutated batches past the CRC, into validation and producer state
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(version)
			if decodeBody(req, body) == nil {
				for ti := range req.Topics {
					for pi := range req.Topics[ti].Partitions {
						fixBatchCRCs(req.Topics[ti].Partitions[pi].Records)
					}
				}
				body = req.AppendTo(nil)
			}
		}
		if key == 1 { // Fetch: keep long polls short, the fuzzer's time goes to decoding and reading
			req := kmsg.NewPtrFetchRequest()
			req.SetVersion(version)
			if decodeBody(req, body) == nil && req.MaxWaitMillis > 10 {
				req.MaxWaitMillis = 10
				body = req.AppendTo(nil)
			}
		}
		fz.check(t, rawFrame(key, version, 1, body))
	})
}

// fixBatchCRCs rewrites the CRC of each v2 batch framed in records (in
// place), so a fuzzed batch is judged on its content, not refused for its
// checksum.
func fixBatchCRCs(records []byte) {
	for len(records) >= 61 {
		size := 12 + int64(int32(binary.BigEndian.Uint32(records[8:])))
		if size < 61 || size > int64(len(records)) {
			return
		}
		binary.BigEndian.PutUint32(records[17:], crc32.Checksum(records[21:size], crc32.MakeTable(crc32.Castagnoli)))
		records = records[size:]
	}
}

// rawFrame frames body as a request of key/version: size, header (client
// id "fuzz", an empty tag section for flexible versions), body.
func rawFrame(key, version int16, corr int32, body []byte) []byte {
	b := make([]byte, 4, 16+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "fuzz"...)
	req := kmsg.RequestForKey(key)
	if req != nil {
		req.SetVersion(version)
		if req.IsFlexible() {
			b = append(b, 0)
		}
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// handSeeds are inputs no client would send but the fuzzer should start
// near: each framing edge the reader checks.
func handSeeds() [][]byte {
	av := frameRequest(kmsg.NewPtrApiVersionsRequest(), 1)
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	meta := frameRequest(md, 2)
	return [][]byte{
		{},
		{0, 0, 0},
		{0, 0, 0, 0},
		{0xff, 0xff, 0xff, 0xff},
		{0x7f, 0xff, 0xff, 0xff, 0, 18},
		av,
		append(bytes.Clone(av), meta...),
		av[:len(av)-1],
		rawFrame(18, 127, 3, []byte{0xde, 0xad}),
		rawFrame(999, 0, 4, nil),
		rawFrame(produceKey, 2, 5, nil),
	}
}

// TestFuzzHarnessSeesWhatASocketSees checks the in-process harness against
// the real thing: a good request is answered, bad framing is closed, and
// responses are byte-identical to those over TCP.
func TestFuzzHarnessSeesWhatASocketSees(t *testing.T) {
	fz := startFuzzNode(t)
	fz.budget = testWait
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	t1 := kmsg.NewMetadataRequestTopic()
	t1.Topic = kmsg.StringPtr("fuzz")
	md.Topics = append(md.Topics, t1)
	in := append(frameRequest(kmsg.NewPtrApiVersionsRequest(), 1), frameRequest(md, 2)...)
	s := fz.check(t, in)
	if s.closed || s.timedOut {
		t.Fatalf("good requests: closed %v timed out %v", s.closed, s.timedOut)
	}
	c := dialRaw(t, fz.n)
	if _, err := c.nc.Write(in); err != nil {
		t.Fatal(err)
	}
	var overTCP []byte
	for range 2 {
		corr, body, err := c.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		overTCP = binary.BigEndian.AppendUint32(overTCP, uint32(len(body)+4))
		overTCP = binary.BigEndian.AppendUint32(overTCP, uint32(corr))
		overTCP = append(overTCP, body...)
	}
	if !bytes.Equal(s.out, overTCP) {
		t.Fatalf("in-process responses differ from TCP:\n%x\n%x", s.out, overTCP)
	}
	for _, seed := range handSeeds()[:5] {
		if s := fz.check(t, seed); len(s.out) != 0 {
			t.Fatalf("bad framing %x answered: %x", seed, s.out)
		}
	}
}

// TestBadInputTargeted runs the cases the fuzzers only find by luck
// through the same harness and invariants, with the outcome each must
// have.
func TestBadInputTargeted(t *testing.T) {
	fz := startFuzzNode(t)
	fz.budget = testWait
	id := topicID(t, fz.n, "fuzz")

	// A gzip batch as kgo builds it, one byte of its compressed records
	// flipped: the CRC covers the compressed bytes, so CORRUPT_MESSAGE.
	gz := compressedBatch(t)
	gz[len(gz)-3] ^= 0x55

	type want int
	const (
		answered want = iota
		closed
	)
	for _, tc := range []struct {
		name  string
		input []byte
		want  want
		check func(t *testing.T, body []byte)
	}{
		{"version above max of every key", nil, closed, nil},
		{"version below min", rawFrame(1, 3, 1, nil), closed, nil}, // Fetch v3: before record batch v2
		{"produce v0 (advertised, not served)", rawFrame(produceKey, 0, 1, []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}), closed, nil},
		{"unknown key", rawFrame(30000, 0, 1, nil), closed, nil},
		{"negative key", rawFrame(-1, 0, 1, nil), closed, nil},
		{"ApiVersions unknown version", rawFrame(18, 99, 7, []byte{1, 2, 3}), answered, func(t *testing.T, body []byte) {
			resp := kmsg.NewPtrApiVersionsResponse()
			if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 {
				t.Fatalf("fallback %v %+v", err, resp)
			}
		}},
		{"header tags with content", headerWithTags(t), answered, nil},
		{"gzip batch with a bad crc", frameRequest(produceReq(9, "fuzz", [16]byte{}, 0, 1, gz), 9), answered, func(t *testing.T, body []byte) {
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(9)
			if err := resp.ReadFrom(body[1:]); err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.CorruptMessage.Code {
				t.Fatalf("bad crc: %v %+v", err, resp)
			}
		}},
		{"produce by id to an unknown id", frameRequest(produceReq(13, "", [16]byte{9}, 0, 1, recordBatch(1, "x")), 9), answered, nil},
		{"fetch by id v13", frameRequest(fetchReq(13, "", id, 0, 0, 0, 1, 1<<20), 9), answered, func(t *testing.T, body []byte) {
			resp := kmsg.NewPtrFetchResponse()
			resp.SetVersion(13)
			if err := resp.ReadFrom(body[1:]); err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
				t.Fatalf("fetch by id: %v %+v", err, resp)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.input == nil { // every key, one above its max
				for _, a := range supportedAPIs() {
					s := fz.check(t, rawFrame(a.key, a.max+1, 1, nil))
					if a.key == apiVersionsKey {
						if s.closed || len(s.out) == 0 {
							t.Fatalf("ApiVersions v%d: no fallback", a.max+1)
						}
					} else if !s.closed || len(s.out) != 0 {
						t.Fatalf("%s v%d: closed %v, %d bytes out", kmsg.NameForKey(a.key), a.max+1, s.closed, len(s.out))
					}
				}
				return
			}
			before := logState(fz.n)
			s := fz.check(t, tc.input)
			if got := map[bool]want{true: closed, false: answered}[s.closed]; got != tc.want || s.timedOut {
				t.Fatalf("closed %v (timed out %v), want %v", s.closed, s.timedOut, tc.want == closed)
			}
			if tc.want == answered && len(s.out) < 8 {
				t.Fatal("no response")
			}
			if tc.check != nil {
				tc.check(t, s.out[8:])
			}
			if after := logState(fz.n); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("logs changed: %v -> %v", before, after)
			}
		})
	}
}

// compressedBatch returns a gzip-compressed batch as kgo builds it, taken
// from the log after a produce.
func compressedBatch(t *testing.T) []byte {
	t.Helper()
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "gz", 1, nil)
	cl := newClient(t, n, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "gz", Value: bytes.Repeat([]byte{byte(i)}, 100)})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b := logBytes(t, n, "gz", 0)
	// The first batch only: attributes' low byte is at 22.
	size := 12 + int(binary.BigEndian.Uint32(b[8:]))
	if b[22]&7 != 1 {
		t.Fatalf("stored batch not gzip (attributes %d)", b[22])
	}
	return b[:size]
}

// headerWithTags is a Metadata v12 request whose request header carries
// two tagged fields (unknown to the broker, to be skipped).
func headerWithTags(t *testing.T) []byte {
	t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, 3)
	b = binary.BigEndian.AppendUint16(b, 12)
	b = binary.BigEndian.AppendUint32(b, 9)
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	b = append(b, 2, 0, 3, 'a', 'b', 'c', 7, 0) // 2 tags: #0 "abc", #7 empty
	b = md.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// recordingConn tees what a client writes.
type recordingConn struct {
	net.Conn
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (r recordingConn) Write(b []byte) (int, error) {
	r.mu.Lock()
	r.buf.Write(b)
	r.mu.Unlock()
	return r.Conn.Write(b)
}

// TestFuzzSeedsFromKgo drives a node with kgo and kadm through every API
// they use (with the newest versions and with Kafka 2.8's), capturing the
// request frames they write. With STRATA_TEST_WRITE_FUZZ_SEEDS=1 it writes
// them as the seed corpora of FuzzRequest and FuzzRequestBody; otherwise it
// checks the committed corpus still holds requests the broker answers.
func TestFuzzSeedsFromKgo(t *testing.T) {
	if os.Getenv("STRATA_TEST_WRITE_FUZZ_SEEDS") == "" {
		checkSeedCorpus(t)
		return
	}
	n := startNode(t, t.TempDir(), map[string]string{"group.initial.rebalance.delay.ms": "0"})
	var mu sync.Mutex
	var streams []*bytes.Buffer
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		buf := &bytes.Buffer{}
		streams = append(streams, buf)
		return recordingConn{nc, &mu, buf}, nil
	}
	for _, versions := range []*kversion.Versions{nil, kversion.V2_8_0()} {
		topic := "seeds"
		if versions != nil {
			topic = "seeds-old"
		}
		opts := []kgo.Opt{kgo.Dialer(dial), kgo.FetchMaxWait(50 * time.Millisecond)}
		if versions != nil {
			opts = append(opts, kgo.MaxVersions(versions))
		}
		raw := newClient(t, n, opts...)
		adm := kadm.NewClient(raw)
		ctx := testCtx(t)
		if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kmsg.StringPtr("86400000")}, topic); err != nil {
			t.Fatal(err)
		}
		for _, c := range codecs {
			for _, idem := range []bool{false, true} {
				o := append([]kgo.Opt{kgo.ProducerBatchCompression(c.codec), kgo.DefaultProduceTopic(topic)}, opts...)
				if idem {
					o = append(o, kgo.RequiredAcks(kgo.AllISRAcks()))
				} else {
					o = append(o, kgo.DisableIdempotentWrite())
				}
				cl, err := kgo.NewClient(append(o, kgo.SeedBrokers(n.Addr()))...)
				if err != nil {
					t.Fatal(err)
				}
				cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(c.name), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}},
					&kgo.Record{Value: []byte("second")})
				cl.Close()
			}
		}
		cons := newClient(t, n, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		for got := 0; got < 20 && pctx.Err() == nil; {
			got += len(cons.PollFetches(pctx).Records())
		}
		cancel()
		adm.ListStartOffsets(ctx, topic)
		adm.ListEndOffsets(ctx, topic)
		adm.ListOffsetsAfterMilli(ctx, 1, topic)
		adm.ListTopics(ctx)
		adm.DescribeTopicConfigs(ctx, topic)
		adm.DescribeBrokerConfigs(ctx)
		adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("3600000")}}, topic)
		adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("7200000")}}, topic)
		adm.CreatePartitions(ctx, 1, topic)
		adm.DescribeAllLogDirs(ctx, nil)
		kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, raw)
		adm.OffsetForLeaderEpoch(ctx, kadm.OffsetForLeaderEpochRequest{topic: {0: 0}})
		off := kadm.Offsets{}
		off.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1})
		adm.DeleteRecords(ctx, off)
		// A consumer group: FindCoordinator, JoinGroup, SyncGroup,
		// Heartbeat, OffsetCommit, OffsetFetch, LeaveGroup.
		group := newClient(t, n, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("seed-group-"+topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
		for got := 0; got < 4 && gctx.Err() == nil; {
			got += len(group.PollFetches(gctx).Records())
		}
		group.CommitUncommittedOffsets(gctx)
		gcancel()
		group.Close()
		adm.ListGroups(ctx)
		adm.DescribeGroups(ctx, "seed-group-"+topic)
		adm.FetchOffsets(ctx, "seed-group-"+topic)
		adm.DeleteGroups(ctx, "seed-group-"+topic)
		adm.DeleteTopics(ctx, topic)
	}
	mu.Lock()
	defer mu.Unlock()
	var frames, streamSeeds [][]byte
	seen := map[string]bool{}
	perVersion := map[[2]int16]int{} // at most 6 of each key and version (a poll loop repeats fetches)
	for _, s := range streams {
		b := s.Bytes()
		for _, f := range splitFrames(b) {
			whole := binary.BigEndian.AppendUint32(nil, uint32(len(f.body)))
			whole = append(whole, f.body...)
			kv := [2]int16{f.key, f.version}
			if !seen[string(whole)] && perVersion[kv] < 6 {
				seen[string(whole)] = true
				perVersion[kv]++
				frames = append(frames, whole)
			}
		}
		if len(b) <= 4096 && len(splitFrames(b)) > 1 {
			streamSeeds = append(streamSeeds, b) // a whole short connection, pipelining and all
		}
	}
	writeCorpus(t, "FuzzRequest", func(add func(...any)) {
		for _, f := range append(frames, streamSeeds...) {
			add(f)
		}
	})
	writeCorpus(t, "FuzzRequestBody", func(add func(...any)) {
		for _, f := range frames {
			fr := splitFrames(f)[0]
			if req := decodeRequestFrame(fr.body); req != nil {
				add(fr.key, fr.version, req.AppendTo(nil))
			}
		}
	})
	t.Logf("wrote %d frames and %d streams from %d connections", len(frames), len(streamSeeds), len(streams))
}

// writeCorpus replaces the kgo-* files of testdata/fuzz/<name> with the
// values add is given, in Go's corpus file format.
func writeCorpus(t *testing.T, name string, fill func(add func(...any))) {
	dir := filepath.Join("testdata", "fuzz", name)
	old, _ := filepath.Glob(filepath.Join(dir, "kgo-*")) // crashers found by fuzzing stay
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fill(func(vals ...any) {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, v := range vals {
			switch v := v.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
			case int16:
				fmt.Fprintf(&b, "int16(%d)\n", v)
			default:
				t.Fatalf("corpus value %T", v)
			}
		}
		sum := sha256.Sum256([]byte(b.String()))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("kgo-%x", sum[:8])), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// readCorpusBytes returns the []byte value of each file of a corpus
// written by writeCorpus (the last value of each file).
func readCorpusBytes(t *testing.T, name string) map[string][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", name)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("seed corpus %s: %v (STRATA_TEST_WRITE_FUZZ_SEEDS=1 writes it)", dir, err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "kgo-") {
			continue // crashers the fuzzer found and we keep as regressions
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		last := lines[len(lines)-1]
		q, ok := strings.CutPrefix(last, "[]byte(")
		if !ok || !strings.HasSuffix(q, ")") {
			t.Fatalf("%s: last line %.40q", e.Name(), last)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(q, ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out[e.Name()] = []byte(s)
	}
	return out
}

// checkSeedCorpus replays each captured kgo frame on a fresh node: every
// one must be a request the broker decodes and answers (not closes), so
// the fuzzer starts from deep inside each handler. Cluster-mutating
// requests are checked to decode only.
func checkSeedCorpus(t *testing.T) {
	fz := startFuzzNode(t)
	seeds := readCorpusBytes(t, "FuzzRequest")
	if len(seeds) < 20 {
		t.Fatalf("%d kgo seeds; regenerate with STRATA_TEST_WRITE_FUZZ_SEEDS=1", len(seeds))
	}
	names := make([]string, 0, len(seeds))
	for k := range seeds {
		names = append(names, k)
	}
	sort.Strings(names)
	keys := map[int16]bool{}
	for _, name := range names {
		frames := splitFrames(seeds[name])
		if len(frames) == 0 {
			t.Fatalf("%s: no frame", name)
		}
		for _, f := range frames {
			keys[f.key] = true
			if decodeRequestFrame(f.body) == nil {
				t.Fatalf("%s: %s v%d does not decode", name, kmsg.NameForKey(f.key), f.version)
			}
		}
		if clusterMutatingKeys[frames[0].key] {
			continue
		}
		if s := fz.check(t, seeds[name]); s.closed {
			t.Fatalf("%s (%s v%d): connection closed", name, kmsg.NameForKey(frames[0].key), frames[0].version)
		}
	}
	for _, k := range []int16{0, 1, 2, 3, 18, 22} {
		if !keys[k] {
			t.Errorf("no seed for %s", kmsg.NameForKey(k))
		}
	}
}

// TestFuzzInvariantsCatchBrokenHandlers swaps in broken handlers for an
// API key and checks verify reports each breakage, so the fuzzers' silence
// means something.
func TestFuzzInvariantsCatchBrokenHandlers(t *testing.T) {
	const key = 9 // OffsetFetch
	fz := startFuzzNode(t)
	fz.budget = testWait
	saved, had := apis[key]
	t.Cleanup(func() {
		if had {
			apis[key] = saved
		} else {
			delete(apis, key)
		}
	})
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(5)
	input := frameRequest(req, 77)
	for _, tc := range []struct {
		name string
		fn   handlerFunc
		want string
	}{
		{"panics", func(context.Context, *Node, *request) (*frame, error) { panic("boom") }, "panic"},
		{"answers garbage", func(_ context.Context, _ *Node, r *request) (*frame, error) {
			return &frame{buf: []byte{0, 0, 0, 6, 0, 0, 0, 77, 0xff, 0xff}}, nil
		}, "does not decode"},
		{"answers nothing", func(context.Context, *Node, *request) (*frame, error) { return nil, nil }, "0 of 1 requests answered"},
		{"writes the log", func(_ context.Context, n *Node, r *request) (*frame, error) {
			p := n.partition("fuzz", 0)
			if _, err := p.append(recordBatch(1, "sneaky"), p.leaderEpoch.Load()); err != nil {
				return nil, err
			}
			return encodeResponse(r, kmsg.NewPtrOffsetFetchResponse()), nil
		}, "without a produce"},
		{"correct", func(_ context.Context, _ *Node, r *request) (*frame, error) {
			return encodeResponse(r, kmsg.NewPtrOffsetFetchResponse()), nil
		}, ""},
	} {
		apis[key] = &api{key: key, min: 0, max: req.MaxVersion(), fn: tc.fn}
		_, err := fz.verify(input)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: verify says %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestCreateTopicsRefusesExcessivePartitions: a CreateTopics adding more
// than 10000 partitions in all (a fuzzed count of 2^30, or several large
// topics) gets POLICY_VIOLATION for the topics past the limit, at once,
// while the others of the request proceed.
func TestCreateTopicsRefusesExcessivePartitions(t *testing.T) {
	// An open-file budget of 300,000 partitions: this is about the
	// per-request cap, not the budget (TestCreateTopicsRefusedPastTheOpenFileBudget).
	n, err := Open(Options{Config: testConfig(t, t.TempDir(), nil), Logger: testLogger(), StartTimeout: testWait, FileLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	cl := newClient(t, n)
	create := func(validateOnly bool, counts map[string]int32) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.ValidateOnly, req.TimeoutMillis = validateOnly, 10000
		names := make([]string, 0, len(counts))
		for name := range counts {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, counts[name], 1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int16{}
		for _, rt := range resp.Topics {
			got[rt.Topic] = rt.ErrorCode
		}
		return got
	}
	start := time.Now()
	got := create(false, map[string]int32{"a-huge": 1 << 30, "b-small": 3})
	if got["a-huge"] != kerr.PolicyViolation.Code || got["b-small"] != 0 || len(got) != 2 {
		t.Fatalf("huge + small: %v", got)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("refusal took %v", d)
	}
	if p := n.partition("b-small", 2); p == nil {
		t.Fatal("the small topic of the request was not created")
	}
	got = create(true, map[string]int32{"c-6000": 6000, "d-6000": 6000})
	if got["c-6000"] != 0 || got["d-6000"] != kerr.PolicyViolation.Code {
		t.Fatalf("6000 + 6000 validate-only: %v", got)
	}
}

// TestRequestSizeLimitBoundary: a request of exactly socket.request.max.bytes
// is served; one byte more closes the connection after reading only the
// size prefix, allocating nothing of its size. What it allocates is the
// request budget's exact count of frame buffers (the path every frame body
// takes), read before any large frame was served, not the process's heap,
// which the node's other goroutines move.
func TestRequestSizeLimitBoundary(t *testing.T) {
	fz := startFuzzNode(t)
	fz.budget = testWait
	limit := int(fz.n.cfg.SocketRequestMaxBytes)
	sized := func(size int) []byte {
		name := 0
		for {
			md := kmsg.NewPtrMetadataRequest()
			md.SetVersion(12)
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(strings.Repeat("x", name))
			md.Topics = append(md.Topics, rt)
			b := frameRequest(md, 5)
			switch got := len(b) - 4; {
			case got == size:
				return b
			case got > size:
				t.Fatalf("cannot build a %d-byte request (%d)", size, got)
			default:
				name += max(1, size-got-2) // the compact length may grow by a byte or two
			}
		}
	}
	over := sized(limit + 1)
	s := fz.check(t, over[:4+100]) // the size prefix and a little: the reader must not wait for the rest
	if !s.closed || len(s.out) != 0 {
		t.Fatalf("request of %d bytes: closed %v, %d bytes out", limit+1, s.closed, len(s.out))
	}
	// Only small frames have been read so far (the node's setup, the probes).
	if grew := fz.n.reqMem.ReadingPeak(); grew > int64(limit/2) {
		t.Fatalf("allocated %d bytes refusing a %d-byte request", grew, limit+1)
	}
	if s := fz.check(t, sized(limit)); s.closed || len(s.out) < 8 {
		t.Fatalf("request of exactly %d bytes: closed %v, %d bytes out", limit, s.closed, len(s.out))
	}
}
