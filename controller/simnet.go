package controller

import (
	"math/rand/v2"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// SimNetwork is an in-process network of Raft endpoints for tests, in the
// spirit of etcd's rafttest/network.go: every directed link can drop a
// fraction of messages, delay them, or be cut (a partition). Messages are
// cloned on send, so nodes share no memory through it.
//
// Each endpoint delivers through one goroutine and a bounded queue (full →
// drop, as a real link would); [SimNetwork.Close] stops them all.
type SimNetwork struct {
	// mu guards every field below it.
	mu     sync.Mutex
	eps    map[uint64]*simEndpoint
	drop   map[[2]uint64]float64
	delay  map[[2]uint64]time.Duration
	cut    map[[2]uint64]bool
	down   map[uint64]bool
	rng    *rand.Rand
	closed bool
}

// NewSimNetwork returns an empty network; seed makes drops reproducible.
func NewSimNetwork(seed uint64) *SimNetwork {
	return &SimNetwork{
		eps:   map[uint64]*simEndpoint{},
		drop:  map[[2]uint64]float64{},
		delay: map[[2]uint64]time.Duration{},
		cut:   map[[2]uint64]bool{},
		down:  map[uint64]bool{},
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// Endpoint returns the [Transport] for node id. A node restarted with the
// same id gets a fresh endpoint replacing the old one.
func (s *SimNetwork) Endpoint(id uint64) Transport {
	return &simEndpoint{net: s, id: id}
}

// Drop makes the link from → to drop the fraction p (0..1) of messages.
func (s *SimNetwork) Drop(from, to uint64, p float64) {
	s.mu.Lock()
	s.drop[[2]uint64{from, to}] = p
	s.mu.Unlock()
}

// Delay delays every message on the link from → to by d.
func (s *SimNetwork) Delay(from, to uint64, d time.Duration) {
	s.mu.Lock()
	s.delay[[2]uint64{from, to}] = d
	s.mu.Unlock()
}

// Partition cuts every link between the given groups (both directions);
// links inside a group stay up. Ids not listed keep their links.
func (s *SimNetwork) Partition(groups ...[]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					s.cut[[2]uint64{a, b}] = true
				}
			}
		}
	}
}

// Heal removes every partition, drop and delay.
func (s *SimNetwork) Heal() {
	s.mu.Lock()
	s.cut = map[[2]uint64]bool{}
	s.drop = map[[2]uint64]float64{}
	s.delay = map[[2]uint64]time.Duration{}
	s.mu.Unlock()
}

// Close stops every endpoint.
func (s *SimNetwork) Close() {
	s.mu.Lock()
	s.closed = true
	eps := s.eps
	s.eps = map[uint64]*simEndpoint{}
	s.mu.Unlock()
	for _, ep := range eps {
		ep.Stop()
	}
}

type simMsg struct {
	due time.Time
	m   *raftpb.Message
}

type simEndpoint struct {
	net *SimNetwork
	id  uint64

	// Set by Start.
	r     Receiver
	inbox chan simMsg
	stopc chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

const simInboxLen = 4096

func (e *simEndpoint) Start(r Receiver) error {
	e.r = r
	e.inbox = make(chan simMsg, simInboxLen)
	e.stopc = make(chan struct{})
	s := e.net
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrStopped
	}
	old := s.eps[e.id]
	s.eps[e.id] = e
	s.mu.Unlock()
	if old != nil && old != e {
		old.Stop()
	}
	e.wg.Add(1)
	go e.deliver()
	return nil
}

// deliver hands queued messages to the receiver in order, each not before
// its due time.
func (e *simEndpoint) deliver() {
	defer e.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case sm := <-e.inbox:
			if d := time.Until(sm.due); d > 0 {
				t.Reset(d)
				select {
				case <-t.C:
				case <-e.stopc:
					return
				}
			}
			e.r.Receive(sm.m)
		case <-e.stopc:
			return
		}
	}
}

func (e *simEndpoint) Send(msgs []*raftpb.Message) {
	s := e.net
	now := time.Now()
	for _, m := range msgs {
		to := m.GetTo()
		link := [2]uint64{e.id, to}
		s.mu.Lock()
		dst := s.eps[to]
		lost := s.closed || dst == nil || s.cut[link] || (s.drop[link] > 0 && s.rng.Float64() < s.drop[link])
		delay := s.delay[link]
		s.mu.Unlock()
		delivered := false
		if !lost {
			select {
			case dst.inbox <- simMsg{due: now.Add(delay), m: proto.CloneOf(m)}:
				delivered = true
			default:
			}
		}
		if !delivered {
			e.r.ReportUnreachable(to)
		}
		if m.GetType() == raftpb.MsgSnap {
			e.r.ReportSnapshot(to, !delivered)
		}
	}
}

func (e *simEndpoint) Stop() {
	if e.stopc == nil {
		return
	}
	e.once.Do(func() {
		close(e.stopc)
		s := e.net
		s.mu.Lock()
		if s.eps[e.id] == e {
			delete(s.eps, e.id)
		}
		s.mu.Unlock()
	})
	e.wg.Wait()
}
