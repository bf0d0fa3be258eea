package broker

// The transaction coordinator's marker sender (Kafka's
// TransactionMarkerChannelManager): the WriteTxnMarkers the planner asks
// for, delivered to the leader of each partition, the answers fed back
// per partition with Coordinator.MarkerDone.
//
// One dispatcher looks each due marker's partitions up in the metadata
// view (a partition gone from it, a deleted topic, is acked Deleted; one
// without a leader is acked NOT_LEADER_OR_FOLLOWER, which the planner
// sends again after retry backoff) and queues them per destination
// broker. One worker per destination takes everything queued for it and
// sends it as one WriteTxnMarkers request: to this node's own
// writeTxnMarkers (txn_markers.go) in-process, else over the
// inter-broker listener (a kgo client per destination, dialing from this
// node's address like the replica fetchers). A request that fails as a
// whole acks its partitions NETWORK_EXCEPTION (sent again, the leader
// looked up again). Retries the planner asks for come back after
// txnMarkerRetryBackoff.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-io/strata/broker/txncoord"
	"github.com/strata-io/strata/controller/metadata"
)

// txnMarkerRetryBackoff is how long a marker the planner sends again
// waits (Kafka's retry.backoff.ms default for its channel manager).
const txnMarkerRetryBackoff = 100 * time.Millisecond

// txnMarkerRequestTimeout bounds one WriteTxnMarkers round trip (Kafka's
// request.timeout.ms): markers are appended acks=all by the leader.
const txnMarkerRequestTimeout = 30 * time.Second

type dueMarker struct {
	m   txncoord.Marker
	due time.Time
}

// markerDest is one destination broker's queue and worker.
type markerDest struct {
	id     int32
	queue  []txncoord.Marker // guarded by markerSender.mu
	wake   chan struct{}
	cl     *kgo.Client // remote destinations; worker-owned
	clAddr string
}

type markerSender struct {
	tc *txnCoordinator

	mu      sync.Mutex // guards pending, dests, closed
	pending []dueMarker
	dests   map[int32]*markerDest
	closed  bool
	wake    chan struct{}
	started bool

	// sendHook, if set (tests), runs before each WriteTxnMarkers to dest
	// is sent; a non-nil response is taken instead of sending (a fake
	// partition side).
	sendHook atomic.Pointer[func(dest int32, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse]
}

func newMarkerSender(tc *txnCoordinator) *markerSender {
	return &markerSender{tc: tc, dests: map[int32]*markerDest{}, wake: make(chan struct{}, 1)}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// enqueue schedules m for delivery after delay. It never blocks and takes
// no coordinator lock (runLocked calls it with tc.mu held).
func (s *markerSender) enqueue(m txncoord.Marker, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.pending = append(s.pending, dueMarker{m: m, due: time.Now().Add(delay)})
	if !s.started {
		s.started = true
		n := s.tc.n
		n.loops.Add(1)
		go func() { defer n.loops.Done(); s.dispatch(n.ctx) }()
	}
	signal(s.wake)
}

func (s *markerSender) close() {
	s.mu.Lock()
	s.closed = true
	dests := s.dests
	s.dests = map[int32]*markerDest{}
	s.mu.Unlock()
	for _, d := range dests {
		signal(d.wake)
	}
}

// dispatch routes due markers to their destinations until ctx ends.
func (s *markerSender) dispatch(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		var due []txncoord.Marker
		next := time.Duration(-1)
		keep := s.pending[:0]
		for _, dm := range s.pending {
			if !dm.due.After(now) {
				due = append(due, dm.m)
				continue
			}
			if d := dm.due.Sub(now); next < 0 || d < next {
				next = d
			}
			keep = append(keep, dm)
		}
		s.pending = keep
		s.mu.Unlock()
		if len(due) > 0 {
			s.route(ctx, due)
		}
		if next < 0 {
			next = time.Hour
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// leaderOf returns the leader of tp in the metadata view: -1 without one,
// -2 when tp is not in the metadata (deleted).
func leaderOf(st *metadata.State, tp txncoord.TopicPartition) int32 {
	t, ok := st.TopicByName(tp.Topic)
	if !ok {
		return -2
	}
	p, ok := st.Partition(t.ID, tp.Partition)
	if !ok {
		return -2
	}
	if p.Leader == metadata.NoLeader {
		return -1
	}
	return p.Leader
}

// route splits markers by leader and queues them to their destinations.
func (s *markerSender) route(ctx context.Context, markers []txncoord.Marker) {
	byDest := map[int32][]txncoord.Marker{}
	var acks []txncoord.MarkerAck
	s.tc.n.view(func(st *metadata.State) {
		for _, m := range markers {
			for l, lm := range m.ByLeader(func(tp txncoord.TopicPartition) int32 { return leaderOf(st, tp) }) {
				switch l {
				case -2:
					for _, a := range txncoord.FailedMarkerAcks([]txncoord.Marker{lm}, 0) {
						a.Deleted = true
						acks = append(acks, a)
					}
				case -1:
					acks = append(acks, txncoord.FailedMarkerAcks([]txncoord.Marker{lm}, kerr.NotLeaderForPartition.Code)...)
				default:
					byDest[l] = append(byDest[l], lm)
				}
			}
		}
	})
	s.tc.markerAcks(acks)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for id, ms := range byDest {
		d := s.dests[id]
		if d == nil {
			d = &markerDest{id: id, wake: make(chan struct{}, 1)}
			s.dests[id] = d
			n := s.tc.n
			n.loops.Add(1)
			go func() { defer n.loops.Done(); s.work(ctx, d) }()
		}
		d.queue = append(d.queue, ms...)
		signal(d.wake)
	}
}

// work sends d's queued markers, one request at a time, until ctx ends.
func (s *markerSender) work(ctx context.Context, d *markerDest) {
	defer func() {
		if d.cl != nil {
			d.cl.Close()
		}
	}()
	for {
		s.mu.Lock()
		ms := d.queue
		d.queue = nil
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return
		}
		if len(ms) > 0 {
			s.tc.markerAcks(s.send(ctx, d, ms))
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		}
	}
}

// send delivers ms to broker d and returns one ack per partition.
func (s *markerSender) send(ctx context.Context, d *markerDest, ms []txncoord.Marker) []txncoord.MarkerAck {
	n := s.tc.n
	req := txncoord.WriteTxnMarkersRequest(ms)
	req.Version = 1
	rctx, cancel := context.WithTimeout(ctx, txnMarkerRequestTimeout)
	defer cancel()
	if h := s.sendHook.Load(); h != nil {
		if resp := (*h)(d.id, req); resp != nil {
			return txncoord.MarkerAcks(ms, resp)
		}
	}
	if d.id == n.cfg.NodeID {
		return txncoord.MarkerAcks(ms, n.writeTxnMarkers(rctx, req))
	}
	addr := n.interBrokerAddr(d.id)
	if addr == "" {
		return txncoord.FailedMarkerAcks(ms, kerr.NetworkException.Code)
	}
	if d.cl != nil && d.clAddr != addr {
		d.cl.Close()
		d.cl = nil
	}
	if d.cl == nil {
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(kmsg.WriteTxnMarkers.Int16(), 1)
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(addr),
			kgo.Dialer(n.dialContext),
			n.interBrokerSASL(),
			kgo.ClientID(fmt.Sprintf("strata-txn-markers-%d-to-%d", n.cfg.NodeID, d.id)),
			kgo.MaxVersions(versions),
		)
		if err != nil {
			return txncoord.FailedMarkerAcks(ms, kerr.NetworkException.Code)
		}
		d.cl, d.clAddr = cl, addr
	}
	bs := d.cl.SeedBrokers()
	if len(bs) == 0 {
		return txncoord.FailedMarkerAcks(ms, kerr.NetworkException.Code)
	}
	resp, err := bs[0].Request(rctx, req)
	if err != nil {
		n.logger.Debug("broker: send transaction markers", "broker", d.id, "err", err)
		d.cl.Close()
		d.cl = nil
		return txncoord.FailedMarkerAcks(ms, kerr.NetworkException.Code)
	}
	return txncoord.MarkerAcks(ms, resp.(*kmsg.WriteTxnMarkersResponse))
}

// markerAcks feeds acks to the planner; the markers it sends again wait
// txnMarkerRetryBackoff.
func (tc *txnCoordinator) markerAcks(acks []txncoord.MarkerAck) {
	if len(acks) == 0 {
		return
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	now := nowMs()
	for _, a := range acks {
		tc.runLocked(tc.c.MarkerDone(now, a), txnMarkerRetryBackoff)
	}
}
