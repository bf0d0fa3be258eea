package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// heapLive returns the bytes of live heap after a collection.
func heapLive() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// closedWithin reads from nc until the broker closes it or d passes.
func closedWithin(nc net.Conn, d time.Duration) error {
	nc.SetReadDeadline(time.Now().Add(d))
	var b [512]byte
	for {
		if _, err := nc.Read(b[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("connection still open after %v", d)
			}
			return nil
		}
	}
}

// TestConnStalledSizePrefixesHoldNoMemory is the attack on the
// Kafka listener: ten connections each send a 100 MiB size prefix (the
// largest socket.request.max.bytes allows) and a few bytes, then stall.
// The broker allocates as bytes arrive (a few hundred KiB in all, not
// 1000 MiB), closes every connection once
// strata.socket.request.read.timeout.ms has passed since its prefix (not
// after connections.max.idle.ms), and gives all of its request budget back.
func TestConnStalledSizePrefixesHoldNoMemory(t *testing.T) {
	const timeout = 300 * time.Millisecond
	n := startNode(t, t.TempDir(), map[string]string{"strata.socket.request.read.timeout.ms": "300"})
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
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
			errs[i] = closedWithin(c.nc, testWait)
		}()
	}
	wg.Wait()
	el := time.Since(start)
	runtime.ReadMemStats(&ms1)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if el < timeout {
		t.Errorf("closed after %v, before the read timeout", el)
	}
	if grew := ms1.TotalAlloc - ms0.TotalAlloc; grew > 48<<20 {
		t.Errorf("ten stalled 100 MiB prefixes made the process allocate %d MiB", grew>>20)
	}
	eventually(t, "request budget returned", func() bool { return n.reqMem.Used() == 0 })
	c := dialRaw(t, n)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
}

// TestConnRequestBytesBoundedNodeWide: with queued.max.request.bytes at
// 64 MiB and six connections each sending all but the last byte of a
// 32 MiB request, two are read (64 MiB held) and four wait without being
// read, so the live heap grows by about 64 MiB, not 192. Closing the
// connections gives the budget back, and the broker goes on serving.
func TestConnRequestBytesBoundedNodeWide(t *testing.T) {
	const frameBytes, limit = 32 << 20, 64 << 20
	n := startNode(t, t.TempDir(), map[string]string{
		"socket.request.max.bytes": fmt.Sprint(frameBytes),
		"queued.max.request.bytes": fmt.Sprint(limit),
	})
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, frameBytes+4), frameBytes)
	frame = append(frame, 0, 0, 0, 9, 0, 0, 0, 1) // Produce v9, correlation 1
	frame = frame[:frameBytes+4-1]                // all but the last byte
	before := heapLive()
	var conns []*rawConn
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // the writers end when their connections close
	for range 6 {
		c := dialRaw(t, n)
		conns = append(conns, c)
		wg.Add(1)
		go func() { defer wg.Done(); c.nc.Write(frame) }()
	}
	// Wait for the steady state: the budget full, four readers waiting,
	// and the two admitted frames read (the live heap holds them and stops
	// growing). Until then a frame being grown briefly holds its old and
	// new buffers (1.5 times its bytes): the peak allowed is twice the
	// bound, where six frames allocated from their size prefixes (before
	// the fix) take three times.
	peak := uint64(2*limit + 16<<20)
	deadline := time.Now().Add(testWait)
	var grew, last uint64
	for {
		grew = heapLive() - before
		if grew > peak {
			t.Fatalf("live heap grew by %d MiB with six 32 MiB frames and a 64 MiB bound", grew>>20)
		}
		full := n.reqMem.Used() == limit && n.reqMem.Waiting() == 4
		if full && grew >= 2*frameBytes-(4<<20) && grew <= last+(1<<20) && last <= grew+(1<<20) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no steady state: %d bytes held, %d waiting, heap +%d MiB", n.reqMem.Used(), n.reqMem.Waiting(), grew>>20)
		}
		last = grew
		time.Sleep(20 * time.Millisecond)
	}
	if grew > limit+8<<20 {
		t.Fatalf("live heap grew by %d MiB, bound %d MiB", grew>>20, limit>>20)
	}
	waitMetric(t, n, func(v float64) bool { return v == limit }, "strata_broker_request_memory_used_bytes")
	waitMetric(t, n, func(v float64) bool { return v == 4 }, "strata_broker_request_memory_waiting_readers")
	runtime.KeepAlive(frame)
	for _, c := range conns {
		c.nc.Close()
	}
	eventually(t, "request budget returned", func() bool { return n.reqMem.Used() == 0 && n.reqMem.Waiting() == 0 })
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
	if err := closedWithin(nc, 5*time.Second); err != nil {
		t.Error("fake peer's stream:", err)
	}
}
