package controller

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
)

// fakePeer opens a Raft stream to addr with hello h and sends heartbeats
// from h.from to `to` with terms rising from term+1, as the fake
// peer did. It reports whether the controller closed the stream (within
// 5s of the last message sent).
func fakePeer(t *testing.T, addr string, h raftHello, to, term uint64, n int) (closed bool) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, testWait)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetWriteDeadline(time.Now().Add(testWait))
	bw := bufio.NewWriter(conn)
	if err := writeFrame(bw, kindRaftHello, h.append(nil)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		tm, commit := term+1+uint64(i), uint64(0)
		b, err := proto.Marshal(&raftpb.Message{From: &h.from, To: &to, Term: &tm, Commit: &commit, Type: raftpb.MsgHeartbeat.Enum()})
		if err != nil {
			t.Fatal(err)
		}
		if writeFrame(bw, kindRaft, b) != nil || bw.Flush() != nil {
			break // refused: the controller closed the stream
		}
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var one [1]byte
	_, err = conn.Read(one[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// checkServing asserts that the leader still decides (CreateTopics) and
// that no controller's term moved from terms.
func checkServing(t *testing.T, c *ctrlCluster, lead *Controller, terms map[int32]uint64, topic string) {
	t.Helper()
	res, err := lead.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: topic, NumPartitions: 1, ReplicationFactor: 1}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("CreateTopics while a fake peer ran: %v %v", err, res)
	}
	for id, ctl := range c.ctrls {
		if got := ctl.Status().Term; got != terms[id] {
			t.Fatalf("controller %d: term %d, was %d before the fake peer", id, got, terms[id])
		}
		if l, _, _ := ctl.Leader(); l != lead.ID() {
			t.Fatalf("controller %d follows %d, want %d", id, l, lead.ID())
		}
	}
}

func terms(c *ctrlCluster) map[int32]uint64 {
	out := map[int32]uint64{}
	for id, ctl := range c.ctrls {
		out[id] = ctl.Status().Term
	}
	return out
}

// TestRaftStreamFromNonVoterRefused: on a quorum of one (node 1), a client
// on the CONTROLLER listener saying it is node 2 and sending heartbeats of
// rising terms is disconnected at its hello; the term stays and
// CreateTopics keeps working (the issue: UNKNOWN_SERVER_ERROR, term
// 1,000,066).
func TestRaftStreamFromNonVoterRefused(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1, tcp: true, clusterID: "cluster-a"})
	lead := c.leader()
	registerBrokers(t, lead, 1, 0)
	before := terms(c)
	closed := fakePeer(t, lead.Addr(), raftHello{from: 2, clusterID: "cluster-a", incarnation: uuid.New()}, 1, before[1], 1000)
	checkServing(t, c, lead, before, "after-non-voter")
	if !closed {
		t.Fatal("a Raft stream from node 2, not a voter, stayed open")
	}
}

// TestRaftStreamFromWrongClusterOrIncarnationRefused: on three voters, a
// stream claiming a follower's id is refused when it names another
// cluster, or another incarnation than the follower's stream already open
// to the leader. Neither moves a term; the quorum keeps deciding.
func TestRaftStreamFromWrongClusterOrIncarnationRefused(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3, tcp: true, clusterID: "cluster-a"})
	lead := c.leader()
	registerBrokers(t, lead, 1, 0)
	var fol int32
	for id := range c.ctrls {
		if id != int32(lead.ID()) {
			fol = id
			break
		}
	}
	// The follower's own stream to the leader is open once the leader has
	// heard from it (heartbeat responses): wait for the leader to track it.
	tcp := lead.transport.(*TCPTransport)
	if !waitFor(testWait, func() bool {
		tcp.mu.Lock()
		defer tcp.mu.Unlock()
		pi := tcp.incarnations[uint64(fol)]
		return pi != nil && pi.id == c.incs[fol]
	}) {
		t.Fatalf("leader never saw follower %d's incarnation", fol)
	}
	for i, h := range []raftHello{
		{from: uint64(fol), clusterID: "cluster-b", incarnation: c.incs[fol]},
		{from: uint64(fol), clusterID: "cluster-a", incarnation: uuid.New()},
	} {
		before := terms(c)
		closed := fakePeer(t, lead.Addr(), h, uint64(lead.ID()), before[int32(lead.ID())], 1000)
		checkServing(t, c, lead, before, fmt.Sprintf("after-fake-%d", i))
		if !closed {
			t.Fatalf("fake peer %+v: stream stayed open", h)
		}
	}
}

// TestNodeDropsMessagesFromNonVoters: whatever the transport, raft never
// sees a message from an id outside the voter set (here handed straight to
// Receive, as a SimNetwork or a future transport would).
func TestNodeDropsMessagesFromNonVoters(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	lead := c.leader()
	registerBrokers(t, lead, 1, 0)
	before := terms(c)
	for i := range 1000 {
		from, to, tm := uint64(7), uint64(1), before[1]+1+uint64(i)
		lead.node.Receive(&raftpb.Message{From: &from, To: &to, Term: &tm, Type: raftpb.MsgHeartbeat.Enum()})
	}
	checkServing(t, c, lead, before, "after-receive")
}

// TestRaftHelloDecodes: both hello versions decode; a bad one is an error.
func TestRaftHelloDecodes(t *testing.T) {
	h := raftHello{from: 3, clusterID: "abc", incarnation: uuid.New()}
	got, err := decodeRaftHello(h.append(nil))
	if err != nil || got != h {
		t.Fatalf("v2: %+v %v, want %+v", got, err, h)
	}
	got, err = decodeRaftHello([]byte{3}) // version 1: the id alone
	if err != nil || got != (raftHello{from: 3}) {
		t.Fatalf("v1: %+v %v", got, err)
	}
	for _, b := range [][]byte{nil, {0}, {3, 1}, {3, 2, 9, 'a'}, append([]byte{3, 2, 0}, make([]byte, 15)...)} {
		if _, err := decodeRaftHello(b); !errors.Is(err, ErrProtocol) {
			t.Errorf("%x: %v, want ErrProtocol", b, err)
		}
	}
}

// FuzzDecodeRaftHello: for any bytes, decodeRaftHello never panics, and
// whatever it accepts re-encodes (as version 2) to a hello that decodes to
// the same fields.
func FuzzDecodeRaftHello(f *testing.F) {
	f.Add([]byte{1})
	f.Add(raftHello{from: 2, clusterID: "x", incarnation: uuid.New()}.append(nil))
	f.Add([]byte{2, 2, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeRaftHello(b)
		if err != nil {
			return
		}
		again, err := decodeRaftHello(h.append(nil))
		if err != nil || again != h {
			t.Fatalf("%x: %+v re-decoded as %+v (%v)", b, h, again, err)
		}
	})
}

// TestRaftStreamsPerVoterBounded: streams that pass every check but are
// more than maxStreamsPerVoter for one voter (its own included) are
// refused, so one voter's id cannot open unbounded uncharged streams.
func TestRaftStreamsPerVoterBounded(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3, tcp: true, clusterID: "cluster-a"})
	lead := c.leader()
	var fol int32
	for id := range c.ctrls {
		if id != int32(lead.ID()) {
			fol = id
			break
		}
	}
	tcp := lead.transport.(*TCPTransport)
	streams := func() int {
		tcp.mu.Lock()
		defer tcp.mu.Unlock()
		if pi := tcp.incarnations[uint64(fol)]; pi != nil {
			return pi.conns
		}
		return 0
	}
	if !waitFor(testWait, func() bool { return streams() == 1 }) {
		t.Fatalf("follower %d has %d streams to the leader, want 1", fol, streams())
	}
	h := raftHello{from: uint64(fol), clusterID: "cluster-a", incarnation: c.incs[fol]}
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for i := 0; i < maxStreamsPerVoter; i++ {
		nc, err := net.DialTimeout("tcp", lead.Addr(), testWait)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		nc.SetWriteDeadline(time.Now().Add(testWait))
		bw := bufio.NewWriter(nc)
		if err := writeFrame(bw, kindRaftHello, h.append(nil)); err != nil || bw.Flush() != nil {
			t.Fatal(err)
		}
		if i < maxStreamsPerVoter-1 {
			want := i + 2
			if !waitFor(testWait, func() bool { return streams() == want }) {
				t.Fatalf("stream %d not accepted: %d open", i+2, streams())
			}
			continue
		}
		if err := testutil.ClosedWithin(nc, 5*time.Second); err != nil {
			t.Fatalf("stream %d of one voter: %v", maxStreamsPerVoter+1, err)
		}
	}
}
