package broker

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strata-io/strata/internal/netbuf"
	"github.com/strata-io/strata/internal/testutil"
)

// TestConnStalledSizePrefixesHoldNoMemory is the attack on the
// Kafka listener: ten connections each send a 100 MiB size prefix (the
// largest socket.request.max.bytes allows) and a few bytes, then stall.
// The broker allocates as bytes arrive (at most netbuf.FirstChunk a frame,
// 10 MiB in all, not 1000 MiB: the request budget's exact count of frame
// buffers, not the process's heap, which other goroutines move), closes
// every connection once strata.socket.request.read.timeout.ms has passed
// since its prefix (not after connections.max.idle.ms), and gives all of
// its request budget and buffers back.
func TestConnStalledSizePrefixesHoldNoMemory(t *testing.T) {
	const timeout = 300 * time.Millisecond
	n := startNode(t, t.TempDir(), map[string]string{"strata.socket.request.read.timeout.ms": "300"})
	start := time.Now()
	errs := make([]error, 10)
	var wg sync.WaitGroup
	for i := range errs {
		c := dialRaw(t, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			frame := binary.BigEndian.AppendUint32(nil, 100<<20)
			frame = append(frame, 0, 18, 0, 3, 0, 0, 0, 1) // ApiVersions v3, correlation 1, then nothing
			if _, err := c.nc.Write(frame); err != nil {
				errs[i] = err
				return
			}
			errs[i] = testutil.ClosedWithin(c.nc, testWait)
		}()
	}
	wg.Wait()
	el := time.Since(start)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if el < timeout {
		t.Errorf("closed after %v, before the read timeout", el)
	}
	if peak := n.reqMem.ReadingPeak(); peak > int64(len(errs))*netbuf.FirstChunk {
		t.Errorf("ten stalled 100 MiB prefixes made the broker allocate %d MiB of frame buffers at once", peak>>20)
	}
	eventually(t, "request budget and buffers returned", func() bool { return n.reqMem.Used() == 0 && n.reqMem.Reading() == 0 })
	c := dialRaw(t, n)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
}

// TestConnRequestBytesBoundedNodeWide: with queued.max.request.bytes at
// 64 MiB, six connections each send the first 12 MiB of a 32 MiB request
// and stall. Two are admitted (64 MiB held) and read, four wait without
// being read; the two being read hold 16 MiB buffers each (grown as their
// bytes arrived: 1, 2, 4, 8, 16 MiB), 32 MiB in all, and never more than
// 48 MiB, under the bound, even while each holds its 8 MiB buffer and its
// 16 MiB successor at once. These are
// the request budget's exact counts of frame buffers, not the process's
// heap (which other goroutines move): allocating from the size prefix
// would hold 64 MiB, and six frames read without the budget 96 MiB.
// Closing the connections gives everything back, and the broker goes on
// serving.
func TestConnRequestBytesBoundedNodeWide(t *testing.T) {
	const frameBytes, limit, sent = 32 << 20, 64 << 20, 12 << 20
	const want = 2 * 16 << 20       // two frames read, each in a 16 MiB buffer
	const most = 2 * (8 + 16) << 20 // both while growing from 8 to 16 MiB
	n := startNode(t, t.TempDir(), map[string]string{
		"socket.request.max.bytes": fmt.Sprint(frameBytes),
		"queued.max.request.bytes": fmt.Sprint(limit),
	})
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, sent+4), frameBytes)
	frame = append(frame, 0, 0, 0, 9, 0, 0, 0, 1) // Produce v9, correlation 1
	frame = frame[:sent+4]                        // then zeros, and the rest never comes
	var conns []*rawConn
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // the writers end when their connections close
	for range 6 {
		c := dialRaw(t, n)
		conns = append(conns, c)
		wg.Add(1)
		go func() { defer wg.Done(); c.nc.Write(frame) }()
	}
	if err := testutil.Within(testWait, func() error {
		reading, used, waiting := n.reqMem.Reading(), n.reqMem.Used(), n.reqMem.Waiting()
		if reading > most {
			t.Fatalf("frame buffers of %d MiB for six 32 MiB frames of which 12 MiB were sent, bound 64 MiB; want at most %d MiB", reading>>20, most>>20)
		}
		if reading == want && used == limit && waiting == 4 {
			return nil
		}
		return fmt.Errorf("no steady state: %d bytes held, %d waiting, %d bytes of frame buffers", used, waiting, reading)
	}); err != nil {
		t.Fatal(err)
	}
	if peak := n.reqMem.ReadingPeak(); peak > most {
		t.Fatalf("frame buffers peaked at %d MiB, want at most %d MiB (bound %d MiB)", peak>>20, most>>20, limit>>20)
	}
	waitMetric(t, n, func(v float64) bool { return v == limit }, "strata_broker_request_memory_used_bytes")
	waitMetric(t, n, func(v float64) bool { return v == 4 }, "strata_broker_request_memory_waiting_readers")
	for _, c := range conns {
		c.nc.Close()
	}
	eventually(t, "request budget and buffers returned", func() bool {
		return n.reqMem.Used() == 0 && n.reqMem.Waiting() == 0 && n.reqMem.Reading() == 0
	})
	c := dialRaw(t, n)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
}

// TestNodeCloseWithReadersWaitingForBudget: readers waiting for request
// budget (and one stalled mid-frame) do not hold up Close.
func TestNodeCloseWithReadersWaitingForBudget(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{
		"socket.request.max.bytes": "1048576",
		"queued.max.request.bytes": "1048576",
	})
	prefix := binary.BigEndian.AppendUint32(nil, 1<<20)
	for range 3 {
		c := dialRaw(t, n)
		if _, err := c.nc.Write(append(prefix, 0, 18, 0, 3)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "one frame admitted, two readers waiting", func() bool {
		return n.reqMem.Used() == 1<<20 && n.reqMem.Waiting() == 2
	})
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testWait):
		t.Fatal("Close hung with readers waiting for request budget")
	}
	if used, waiting := n.reqMem.Used(), n.reqMem.Waiting(); used != 0 || waiting != 0 {
		t.Fatalf("after Close: %d bytes held, %d waiting", used, waiting)
	}
}

// TestConnClosedByClientReleasesItsContext: a connection the client closes
// cancels its context, so the node's context does not keep one child per
// connection ever served.
func TestConnClosedByClientReleasesItsContext(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	c := dialRaw(t, n)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
	var sc *conn
	n.connMu.Lock()
	for x := range n.conns {
		sc = x
	}
	n.connMu.Unlock()
	if sc == nil {
		t.Fatal("no connection on the node")
	}
	c.nc.Close()
	eventually(t, "connection removed", func() bool {
		n.connMu.Lock()
		defer n.connMu.Unlock()
		_, ok := n.conns[sc]
		return !ok
	})
	if sc.ctx.Err() == nil || sc.readCtx.Err() == nil {
		t.Fatal("a closed connection's context is still live")
	}
}

// TestFakeRaftPeerDoesNotStallTheNode is the fake peer against a
// whole node: a client on the CONTROLLER listener says it is node 2 (the
// quorum is node 1 alone) and sends heartbeats of rising terms. The node
// closes the stream at its hello; the controller's term stays, /readyz
// answers 200 and CreateTopics succeeds (before: UNKNOWN_SERVER_ERROR,
// 503, term 1,000,066).
func TestFakeRaftPeerDoesNotStallTheNode(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	term := n.ctl.Status().Term
	nc, err := net.DialTimeout("tcp", n.Addrs()["CONTROLLER"], testWait)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	frame := func(kind byte, payload []byte) []byte {
		return append(append(binary.BigEndian.AppendUint32(nil, uint32(len(payload)+1)), kind), payload...)
	}
	nc.SetWriteDeadline(time.Now().Add(testWait))
	if _, err := nc.Write(frame(1, binary.AppendUvarint(nil, 2))); err != nil { // Raft hello: node 2
		t.Fatal(err)
	}
	// The fake peer keeps sending while the node is used, as in the issue.
	stop, sent := make(chan struct{}), make(chan int, 1)
	defer func() { close(stop); <-sent }()
	go func() {
		i := 0
		defer func() { sent <- i }()
		for ; ; i++ {
			from, to, tm := uint64(2), uint64(1), term+1+uint64(i)
			b, _ := proto.Marshal(&raftpb.Message{From: &from, To: &to, Term: &tm, Type: raftpb.MsgHeartbeat.Enum()})
			if _, err := nc.Write(frame(2, b)); err != nil {
				return // the node closed the stream
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	createTopic(t, newAdmin(t, n), "during-fake-peer", 1, nil)
	if code, body := httpGet(t, n.AdminAddr(), "/readyz"); code != 200 {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if got := n.ctl.Status().Term; got != term {
		t.Errorf("controller term %d, was %d before the fake peer", got, term)
	}
	if err := testutil.ClosedWithin(nc, 5*time.Second); err != nil {
		t.Error("fake peer's stream:", err)
	}
}
