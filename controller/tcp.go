package controller

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TCPTransportOptions configure a [TCPTransport].
type TCPTransportOptions struct {
	// ID is this node's id; Peers maps every other voter's id to the
	// address of its CONTROLLER listener.
	ID    uint64
	Peers map[uint64]string
	// QueueLen bounds each peer's outbound queue (default 1024 messages);
	// a full queue drops, raft retransmits.
	QueueLen int
	// DialTimeout bounds a connection attempt (default 1s); reconnects
	// back off from 20ms doubling to MaxBackoff (default 1s).
	DialTimeout time.Duration
	MaxBackoff  time.Duration
	// WriteTimeout bounds one write to a peer (default 5s).
	WriteTimeout time.Duration
	// LocalAddr, if set, is the address peers are dialed from (see
	// [ClientOptions]).
	LocalAddr net.Addr
	// Dial, if set, opens peer connections instead (see [ClientOptions]).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ClusterID returns the cluster id sent in the hello of every outbound
	// connection; an inbound hello naming another cluster is refused when
	// both are non-empty. Called per connection, so it may follow what the
	// node learns (nil: none). Incarnation is sent in the hello too. See
	// [Options].
	ClusterID   func() string
	Incarnation uuid.UUID
	Logger      *slog.Logger
}

// TCPTransport is the [Transport] between controllers on their CONTROLLER
// listeners. Outbound, each peer has one connection, one goroutine and a
// bounded queue; inbound connections are handed over by the listener (the
// Controller's server) and read on its goroutines.
//
// Goroutines: one per peer (started by Start, stopped by Stop); inbound
// readers belong to the listener, and Stop closes their connections.
type TCPTransport struct {
	o     TCPTransportOptions
	r     Receiver
	peers map[uint64]*tcpPeer
	stopc chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	// mu guards inbound, incarnations and started.
	mu      sync.Mutex
	inbound map[net.Conn]struct{}
	// incarnations has, per voter with an open inbound stream, the
	// incarnation it said it was and how many streams are open.
	incarnations map[uint64]*peerIncarnation
	started      bool

	refusedLog atomic.Int64 // unix nanos of the last refusal logged
}

// maxStreamsPerVoter bounds a voter's open inbound streams: it keeps one,
// and reconnects may overlap old ones until those are seen closed (a
// peer that lost power is noticed only by TCP keep-alive).
const maxStreamsPerVoter = 3

type peerIncarnation struct {
	id    uuid.UUID
	conns int
}

type tcpPeer struct {
	id   uint64
	addr string
	q    chan *raftpb.Message
}

// NewTCPTransport returns a transport; Start begins dialing.
func NewTCPTransport(o TCPTransportOptions) *TCPTransport {
	if o.QueueLen == 0 {
		o.QueueLen = 1024
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	t := &TCPTransport{o: o, peers: map[uint64]*tcpPeer{}, stopc: make(chan struct{}), inbound: map[net.Conn]struct{}{},
		incarnations: map[uint64]*peerIncarnation{}}
	for id, addr := range o.Peers {
		t.peers[id] = &tcpPeer{id: id, addr: addr, q: make(chan *raftpb.Message, o.QueueLen)}
	}
	return t
}

// Start implements [Transport].
func (t *TCPTransport) Start(r Receiver) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.stopc:
		return ErrStopped
	default:
	}
	if t.started {
		return fmt.Errorf("controller: transport already started")
	}
	t.started = true
	t.r = r
	for _, p := range t.peers {
		t.wg.Add(1)
		go t.runPeer(p)
	}
	return nil
}

// Send implements [Transport].
func (t *TCPTransport) Send(msgs []*raftpb.Message) {
	for _, m := range msgs {
		p := t.peers[m.GetTo()]
		if p == nil {
			continue
		}
		select {
		case p.q <- m:
		default:
			t.r.ReportUnreachable(p.id)
			if m.GetType() == raftpb.MsgSnap {
				t.r.ReportSnapshot(p.id, true)
			}
		}
	}
}

// Stop implements [Transport].
func (t *TCPTransport) Stop() {
	t.once.Do(func() {
		close(t.stopc)
		t.mu.Lock()
		for c := range t.inbound {
			c.Close()
		}
		t.mu.Unlock()
	})
	t.wg.Wait()
}

// runPeer owns the connection to one peer: dial (with backoff), say hello,
// then write queued messages, flushing whenever the queue runs dry. While
// the peer is unreachable, queued messages are dropped and reported.
func (t *TCPTransport) runPeer(p *tcpPeer) {
	defer t.wg.Done()
	backoff := 20 * time.Millisecond
	for {
		conn, err := t.dial(p)
		if err != nil {
			t.drain(p)
			select {
			case <-t.stopc:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, t.o.MaxBackoff)
			continue
		}
		backoff = 20 * time.Millisecond
		err = t.writeLoop(p, conn)
		conn.Close()
		if err == nil { // stopped
			return
		}
		t.o.Logger.Debug("controller: peer connection lost", "peer", p.id, "err", err)
		t.r.ReportUnreachable(p.id)
	}
}

func (t *TCPTransport) dial(p *tcpPeer) (net.Conn, error) {
	var conn net.Conn
	var err error
	if t.o.Dial != nil {
		ctx, cancel := context.WithTimeout(context.Background(), t.o.DialTimeout)
		conn, err = t.o.Dial(ctx, "tcp", p.addr)
		cancel()
	} else {
		d := net.Dialer{Timeout: t.o.DialTimeout, LocalAddr: t.o.LocalAddr}
		conn, err = d.Dial("tcp", p.addr)
	}
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriter(conn)
	conn.SetWriteDeadline(time.Now().Add(t.o.WriteTimeout))
	hello := raftHello{from: t.o.ID, clusterID: t.clusterID(), incarnation: t.o.Incarnation}
	if err := writeFrame(bw, kindRaftHello, hello.append(nil)); err != nil {
		conn.Close()
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// drain drops what is queued for an unreachable peer.
func (t *TCPTransport) drain(p *tcpPeer) {
	for {
		select {
		case m := <-p.q:
			t.r.ReportUnreachable(p.id)
			if m.GetType() == raftpb.MsgSnap {
				t.r.ReportSnapshot(p.id, true)
			}
		default:
			return
		}
	}
}

// writeLoop returns nil when stopped, the write error otherwise.
func (t *TCPTransport) writeLoop(p *tcpPeer, conn net.Conn) error {
	bw := bufio.NewWriterSize(conn, 64<<10)
	var snaps int // MsgSnaps written since the last flush
	for {
		var m *raftpb.Message
		select {
		case <-t.stopc:
			return nil
		case m = <-p.q:
		}
		b, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		conn.SetWriteDeadline(time.Now().Add(t.o.WriteTimeout))
		if err := writeFrame(bw, kindRaft, b); err != nil {
			t.failSnaps(p, snaps, m)
			return err
		}
		if m.GetType() == raftpb.MsgSnap {
			snaps++
		}
		if len(p.q) == 0 {
			if err := bw.Flush(); err != nil {
				t.failSnaps(p, snaps, nil)
				return err
			}
			for ; snaps > 0; snaps-- {
				t.r.ReportSnapshot(p.id, false)
			}
		}
	}
}

func (t *TCPTransport) failSnaps(p *tcpPeer, n int, m *raftpb.Message) {
	if m != nil && m.GetType() == raftpb.MsgSnap {
		n++
	}
	for range n {
		t.r.ReportSnapshot(p.id, true)
	}
}

// serveConn reads Raft messages from an inbound peer connection until it
// fails or the transport stops. The listener calls it on its own goroutine
// after reading the hello frame.
//
// Nothing reaches Raft from a peer that is not who a voter would be: the
// hello must name one of the other voters, this cluster (when both sides
// know it), and, while another stream from that voter is open, the same
// incarnation; every message must then be from that voter to us. Raft
// steps down for any message with a higher term, so one accepted message
// from a stranger is enough to stall the quorum; PreVote and CheckQuorum
// (node.go) do not help against that, only against a real voter that was
// partitioned away.
func (t *TCPTransport) serveConn(conn net.Conn, fr *frameReader, hello []byte) {
	h, err := decodeRaftHello(hello)
	if err != nil {
		t.refuse(conn, "bad hello", 0, "err", err)
		return
	}
	from := h.from
	if _, ok := t.peers[from]; !ok {
		t.refuse(conn, "not one of the other voters", from)
		return
	}
	if ours := t.clusterID(); ours != "" && h.clusterID != "" && h.clusterID != ours {
		t.refuse(conn, "another cluster", from, "cluster.id", h.clusterID, "ours", ours)
		return
	}
	t.mu.Lock()
	select {
	case <-t.stopc:
		t.mu.Unlock()
		return
	default:
	}
	pi := t.incarnations[from]
	if h.incarnation != (uuid.UUID{}) && pi != nil && pi.conns > 0 && pi.id != (uuid.UUID{}) && pi.id != h.incarnation {
		t.mu.Unlock()
		t.refuse(conn, "another incarnation of a connected voter", from, "incarnation", h.incarnation, "connected", pi.id)
		return
	}
	if pi != nil && pi.conns >= maxStreamsPerVoter {
		t.mu.Unlock()
		t.refuse(conn, "too many streams from one voter", from)
		return
	}
	if pi == nil {
		pi = &peerIncarnation{}
		t.incarnations[from] = pi
	}
	if h.incarnation != (uuid.UUID{}) {
		pi.id = h.incarnation
	}
	pi.conns++
	t.inbound[conn] = struct{}{}
	t.mu.Unlock()
	// A voter's frames are not charged to the request budget (see
	// Options.RequestMemory); they still grow as they arrive and must
	// arrive within the read timeout.
	fr.release()
	fr.budget = nil
	defer func() {
		t.mu.Lock()
		delete(t.inbound, conn)
		if pi.conns--; pi.conns == 0 {
			delete(t.incarnations, from)
		}
		t.mu.Unlock()
	}()
	for {
		kind, payload, err := fr.next(maxFrame)
		if err != nil {
			return
		}
		if kind != kindRaft {
			t.o.Logger.Warn("controller: unexpected frame on raft connection", "kind", kind, "peer", from)
			return
		}
		m := &raftpb.Message{}
		if err := proto.Unmarshal(payload, m); err != nil {
			t.o.Logger.Warn("controller: bad raft message", "peer", from, "err", err)
			return
		}
		fr.release() // Unmarshal copied what m keeps
		if m.GetTo() != t.o.ID || m.GetFrom() != from {
			t.o.Logger.Warn("controller: misaddressed raft message", "to", m.GetTo(), "from", m.GetFrom(), "peer", from)
			return
		}
		t.r.Receive(m)
	}
}

func (t *TCPTransport) clusterID() string {
	if t.o.ClusterID == nil {
		return ""
	}
	return t.o.ClusterID()
}

// refuse logs why an inbound Raft stream is closed, at most once a second
// (a stranger reconnecting in a loop must not flood the log).
func (t *TCPTransport) refuse(conn net.Conn, why string, from uint64, kv ...any) {
	now := time.Now().UnixNano()
	if last := t.refusedLog.Load(); now-last >= int64(time.Second) && t.refusedLog.CompareAndSwap(last, now) {
		args := append([]any{"reason", why, "peer", from, "remote", conn.RemoteAddr().String()}, kv...)
		t.o.Logger.Warn("controller: refused raft connection", args...)
	}
}
