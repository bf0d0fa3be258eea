package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/vfs"
)

// testWait bounds every wait in these tests.
const testWait = 20 * time.Second

// parked reports whether a fetch waits on topic's partition index: it is
// registered as a waiter (before it reads), so an append from now on
// wakes it.
func parked(n *Node, topic string, index int32) bool {
	p := n.partition(topic, index)
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters) > 0
}

// waitParked waits until a fetch waits on topic's partition index.
func waitParked(t testing.TB, n *Node, topic string, index int32) {
	t.Helper()
	testutil.Eventually(t, testWait, func() bool { return parked(n, topic, index) }, "a fetch parked on %s-%d", topic, index)
}

func testLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testConfig is a one-node configuration on loopback port 0 with data in
// dir; extra overrides settings by name.
func testConfig(t testing.TB, dir string, extra map[string]string) Config {
	t.Helper()
	props := map[string]string{
		"listeners":                "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"controller.quorum.voters": "1@127.0.0.1:0",
		"log.dirs":                 dir,
		"admin.listener":           "127.0.0.1:0",
		// A quorum of one elects itself after one election timeout.
		"controller.quorum.election.timeout.ms": "300",
	}
	for k, v := range extra {
		props[k] = v
	}
	cfg, err := ParseConfig(MergeProperties(props, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startNode opens a node on dir and closes it at the end of the test.
func startNode(t testing.TB, dir string, extra map[string]string) *Node {
	t.Helper()
	return startNodeOn(t, nil, dir, extra)
}

// startNodeOn is startNode with the data dir on fs (nil: the OS).
func startNodeOn(t testing.TB, fs vfs.FS, dir string, extra map[string]string) *Node {
	t.Helper()
	n, err := Open(Options{Config: testConfig(t, dir, extra), Logger: testLogger(), StartTimeout: testWait, FS: fs})
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// newClient returns a kgo client of n, with franz-go's defaults (an
// idempotent producer).
func newClient(t testing.TB, n *Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(n.Addr()),
		kgo.RetryTimeout(testWait),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newAdmin(t testing.TB, n *Node) *kadm.Client {
	return kadm.NewClient(newClient(t, n))
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates a topic and fails the test on any error.
func createTopic(t testing.TB, adm *kadm.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(testCtx(t), partitions, 1, configs, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v / %v", name, err, resp.Err)
	}
}

// rawConn is a hand-driven client connection for protocol-level tests.
type rawConn struct {
	t        testing.TB
	nc       net.Conn
	corr     int32
	clientID string // "" sends "test"
}

func dialRaw(t testing.TB, n *Node) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", n.Addr(), testWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testWait))
	return &rawConn{t: t, nc: nc}
}

// frameRequest encodes req (at its set version) with correlation id corr.
func frameRequest(req kmsg.Request, corr int32) []byte {
	return frameRequestAs(req, corr, "test")
}

// frameRequestAs is frameRequest with a client id.
func frameRequestAs(req kmsg.Request, corr int32, clientID string) []byte {
	b := make([]byte, 4, 128)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// send writes one request and returns its correlation id.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	id := c.clientID
	if id == "" {
		id = "test"
	}
	if _, err := c.nc.Write(frameRequestAs(req, c.corr, id)); err != nil {
		c.t.Fatal(err)
	}
	return c.corr
}

// readFrame reads one response frame: correlation id and the rest.
func (c *rawConn) readFrame() (int32, []byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(c.nc, sz[:]); err != nil {
		return 0, nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c.nc, b); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// decode parses a response body to req (header tags skipped as the
// broker writes them).
func decodeResponse(t testing.TB, req kmsg.Request, body []byte) kmsg.Response {
	t.Helper()
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// roundTrip sends req and reads its response.
func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	want := c.send(req)
	got, body, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if got != want {
		c.t.Fatalf("correlation id %d, want %d", got, want)
	}
	return decodeResponse(c.t, req, body)
}

// expectClosed asserts the broker closes the connection (EOF or reset)
// without sending anything.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	n, err := c.nc.Read(b[:])
	if err == nil || n > 0 {
		c.t.Fatalf("connection still open (read %d bytes, err %v)", n, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatal("connection not closed within 5s")
	}
}

// topicID returns a topic's id from the node's metadata view.
func topicID(t testing.TB, n *Node, name string) [16]byte {
	t.Helper()
	var id [16]byte
	var ok bool
	n.view(func(st *metadata.State) {
		var ti metadata.TopicInfo
		ti, ok = st.TopicByName(name)
		id = ti.ID
	})
	if !ok {
		t.Fatalf("topic %s not in metadata", name)
	}
	return id
}

// recordBatch builds an uncompressed v2 batch of values, the first at
// timestamp firstTS and each next one a millisecond later, as a producer
// would send it.
func recordBatch(firstTS int64, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Key: []byte("k"), Value: []byte(v)}
		body := r.AppendTo(nil) // Length 0 is a one-byte varint
		r.Length = int32(len(body) - 1)
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: firstTS, MaxTimestamp: firstTS + int64(len(values)-1),
		NumRecords: int32(len(values)), Records: recs,
	}
	rb.Length = int32(61 + len(recs) - 12)
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
