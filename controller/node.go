package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// nodeConfig is what a node is built from; the Controller fills it from
// Config.
type nodeConfig struct {
	id              uint64
	peers           []uint64 // every voter, self included
	storage         Storage
	fsm             FSM
	transport       Transport
	tick            time.Duration
	electionTicks   int
	heartbeatTicks  int
	snapshotEntries uint64
	catchUpEntries  uint64
	maxSizePerMsg   uint64
	maxInflight     int
	logger          *slog.Logger
	metrics         *metrics // may be nil
	// onApplied is called on the Ready goroutine after entries or a
	// snapshot were applied, with the new applied index.
	onApplied func(index uint64)
	// onLeader is called on the Ready goroutine when the known leader or
	// the term changes.
	onLeader func(leader, term uint64)
}

// Queue bounds. A full queue drops (raft retransmits) rather than block
// the transport or the caller.
const (
	recvQueueLen   = 4096
	reportQueueLen = 256
	propQueueLen   = 1024
)

type proposal struct {
	data []byte
	w    *waiter
}

type waiter struct {
	id   uint64
	done chan struct{}
	idx  uint64
	err  error
}

type report struct {
	id          uint64
	snap        bool
	snapFailed  bool
	unreachable bool
}

// node is the goroutine shell around raft.RawNode: one goroutine (run)
// owns the RawNode and runs the Ready loop; everything else talks to it
// through bounded channels. Stop closes stopc and waits for donec.
type node struct {
	cfg    nodeConfig
	rn     *raft.RawNode       // owned by run
	voters map[uint64]struct{} // cfg.peers without self; read-only

	recvc   chan *raftpb.Message
	campc   chan struct{}
	propc   chan proposal
	reportc chan report
	stopc   chan struct{}
	donec   chan struct{}
	stop    sync.Once

	nextProp atomic.Uint64

	// mu guards waiters, appliedc, fatal and the fields below it.
	mu        sync.Mutex
	waiters   map[uint64]*waiter
	appliedc  chan struct{} // closed and replaced whenever applied grows
	fatal     error
	confState *raftpb.ConfState

	// Published by run for readers on other goroutines.
	leader      atomic.Uint64
	term        atomic.Uint64
	commit      atomic.Uint64
	applied     atomic.Uint64
	appliedTerm atomic.Uint64
	snapIndex   atomic.Uint64
	snapTime    atomic.Int64 // unix nanos of the last snapshot taken or restored

	// Owned by run.
	lastLeader   uint64
	lastTerm     uint64
	wantCampaign bool
	raftState    raft.StateType // from the last SoftState
}

// newNode opens raft over cfg.storage, restoring the FSM from the stored
// snapshot, and bootstraps the voter set when the storage is empty. It does
// not start the loop (start does).
func newNode(cfg nodeConfig) (*node, error) {
	n := &node{
		cfg:      cfg,
		recvc:    make(chan *raftpb.Message, recvQueueLen),
		campc:    make(chan struct{}, 1),
		propc:    make(chan proposal, propQueueLen),
		reportc:  make(chan report, reportQueueLen),
		stopc:    make(chan struct{}),
		donec:    make(chan struct{}),
		waiters:  map[uint64]*waiter{},
		appliedc: make(chan struct{}),
		voters:   map[uint64]struct{}{},
	}
	for _, id := range cfg.peers {
		if id != cfg.id {
			n.voters[id] = struct{}{}
		}
	}
	n.nextProp.Store(rand.Uint64() >> 1)

	hs, cs, err := cfg.storage.InitialState()
	if err != nil {
		return nil, fmt.Errorf("controller: initial state: %w", err)
	}
	snap, err := cfg.storage.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot: %w", err)
	}
	var applied uint64
	if !raft.IsEmptySnap(snap) {
		md := snap.GetMetadata()
		if err := cfg.fsm.Restore(md.GetIndex(), snap.GetData()); err != nil {
			return nil, fmt.Errorf("controller: restore snapshot at %d: %w", md.GetIndex(), err)
		}
		applied = md.GetIndex()
		n.appliedTerm.Store(md.GetTerm())
		n.snapIndex.Store(applied)
	}
	n.confState = proto.CloneOf(raftpb.EnsureConfState(cs))
	n.applied.Store(applied)

	rc := &raft.Config{
		ID:                        cfg.id,
		ElectionTick:              cfg.electionTicks,
		HeartbeatTick:             cfg.heartbeatTicks,
		Storage:                   cfg.storage,
		Applied:                   applied,
		MaxSizePerMsg:             cfg.maxSizePerMsg,
		MaxInflightMsgs:           cfg.maxInflight,
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		// Proposals are made on the leader only: the Controller forwards
		// requests at the service level, so a follower's Propose fails fast
		// with ErrNotLeader instead of vanishing into a forwarded MsgProp.
		DisableProposalForwarding: true,
		Logger:                    raftLogger{cfg.logger},
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return nil, fmt.Errorf("controller: raft: %w", err)
	}
	last, err := cfg.storage.LastIndex()
	if err != nil {
		return nil, err
	}
	if last == 0 && raft.IsEmptyHardState(hs) && raft.IsEmptySnap(snap) {
		peers := make([]raft.Peer, len(cfg.peers))
		for i, id := range cfg.peers {
			peers[i] = raft.Peer{ID: id}
		}
		if err := rn.Bootstrap(peers); err != nil {
			return nil, fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	n.rn = rn
	return n, nil
}

// start launches the Ready loop and the transport's delivery to this node.
func (n *node) start() error {
	if err := n.cfg.transport.Start(n); err != nil {
		return err
	}
	go n.run()
	return nil
}

// Receive implements Receiver. Local message types (MsgHup, MsgBeat, ...)
// are never accepted from the network, nor messages from anyone but the
// other voters: raft would step down to follow any sender with a higher
// term (the transport refuses such peers already; this holds for every
// transport).
func (n *node) Receive(m *raftpb.Message) {
	if raft.IsLocalMsg(m.GetType()) {
		return
	}
	if _, ok := n.voters[m.GetFrom()]; !ok || m.GetTo() != n.cfg.id {
		return
	}
	select {
	case n.recvc <- m:
	default: // full: drop, raft retransmits
	}
}

// ReportUnreachable implements Receiver.
func (n *node) ReportUnreachable(id uint64) {
	select {
	case n.reportc <- report{id: id, unreachable: true}:
	default:
	}
}

// ReportSnapshot implements Receiver. Transports call it from the Ready
// loop's own goroutine (inside Send) as well as from their own, so it must
// not block: when the queue is full the report is dropped, which only
// delays raft, since a follower that installed the snapshot acknowledges it
// with its next MsgAppResp and the leader leaves snapshot state then.
func (n *node) ReportSnapshot(id uint64, failed bool) {
	select {
	case n.reportc <- report{id: id, snap: true, snapFailed: failed}:
	default:
	}
}

// run is the Ready loop: the only goroutine touching n.rn.
func (n *node) run() {
	defer close(n.donec)
	ticker := time.NewTicker(n.cfg.tick)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			n.rn.Tick()
		case m := <-n.recvc:
			// Step errors are for messages raft ignores (stale terms, local
			// message types from a peer); nothing to do about them.
			_ = n.rn.Step(m)
		case <-n.campc:
			n.wantCampaign = true
		case p := <-n.propc:
			n.propose(p)
		case r := <-n.reportc:
			if r.unreachable {
				n.rn.ReportUnreachable(r.id)
			}
			if r.snap {
				st := raft.SnapshotFinish
				if r.snapFailed {
					st = raft.SnapshotFailure
				}
				n.rn.ReportSnapshot(r.id, st)
			}
		case <-n.stopc:
			n.failAll(ErrStopped)
			return
		}
		n.drain()
		n.maybeCampaign()
		for n.rn.HasReady() {
			if err := n.handleReady(n.rn.Ready()); err != nil {
				n.cfg.logger.Error("controller: raft node failed, stopping", "node", n.cfg.id, "err", err)
				n.mu.Lock()
				n.fatal = err
				n.mu.Unlock()
				// A failed node leads nothing: callers go elsewhere.
				n.leader.Store(0)
				n.failAll(err)
				// Keep draining stopc so Stop returns; refuse all work.
				<-n.stopc
				return
			}
		}
	}
}

// maybeCampaign starts the election campaign asked for, once everything
// committed is applied: raft ignores a campaign while committed conf
// changes (the bootstrap's, on first start) are unapplied, and a quorum of
// one would otherwise wait a whole election timeout.
func (n *node) maybeCampaign() {
	if !n.wantCampaign {
		return
	}
	if n.raftState == raft.StateLeader {
		n.wantCampaign = false
		return
	}
	if st := n.rn.BasicStatus(); st.Applied >= st.HardState.GetCommit() {
		n.wantCampaign = false
		_ = n.rn.Campaign()
	}
}

// drain steps and proposes what else is already queued, so one Ready (one
// fsync) carries many proposals on the leader and many appends on a
// follower. Measured with 3 voters on loopback with fsync'ing storage:
// without it a follower fsyncs once per MsgApp and the quorum commits a few
// hundred records/s; with it, thousands.
func (n *node) drain() {
	for range drainMax {
		select {
		case m := <-n.recvc:
			_ = n.rn.Step(m)
		case p := <-n.propc:
			n.propose(p)
		default:
			return
		}
	}
}

// drainMax bounds one drain so ticks are not starved.
const drainMax = 512

func (n *node) propose(p proposal) {
	if n.raftState != raft.StateLeader {
		n.finish(p.w.id, 0, ErrNotLeader)
		return
	}
	if err := n.rn.Propose(p.data); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			err = ErrProposalDropped
		}
		n.finish(p.w.id, 0, err)
		return
	}
	if n.cfg.metrics != nil {
		n.cfg.metrics.proposals.Inc()
	}
}

// handleReady processes one Ready by the book (etcd raft README):
//
//  1. Persist: Save writes the snapshot, then the entries, then the
//     HardState, and fsyncs before returning. Nothing below happens before
//     that, so a vote or an acknowledgement we send is always durable.
//     A crash inside Save leaves at worst a torn WAL tail (truncated on
//     open) or an orphaned snapshot file newer than the WAL knows about
//     (ignored on open, the WAL's snapshot record decides); both are safe
//     because nothing was acknowledged yet.
//  2. Send the messages (after persisting: the README's rule for
//     synchronous storage). A MsgSnap's delivery is reported back by the
//     transport via ReportSnapshot.
//  3. Apply: restore the FSM from an incoming snapshot, then apply the
//     committed entries in order, waking the proposers waiting on them.
//  4. Advance.
//
// Then, outside the four steps, a snapshot of the FSM is taken every
// snapshotEntries applied entries and the log compacted behind it, keeping
// catchUpEntries for slow followers.
func (n *node) handleReady(rd raft.Ready) error {
	if rd.SoftState != nil {
		n.softState(rd.SoftState.Lead, rd.SoftState.RaftState)
	}
	if hs := rd.HardState; hs != nil {
		n.term.Store(hs.GetTerm())
		n.commit.Store(hs.GetCommit())
	}
	n.noteLeader()

	// 1. persist
	if err := n.cfg.storage.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
		return fmt.Errorf("controller: save: %w", err)
	}
	// 2. send
	if len(rd.Messages) > 0 {
		n.cfg.transport.Send(rd.Messages)
	}
	// 3. apply
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.applySnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	if len(rd.CommittedEntries) > 0 {
		if err := n.applyEntries(rd.CommittedEntries); err != nil {
			return err
		}
	}
	// 4. advance
	n.rn.Advance(rd)
	return n.maybeSnapshot()
}

func (n *node) softState(lead uint64, st raft.StateType) {
	n.raftState = st
	n.leader.Store(lead)
	if st != raft.StateLeader {
		// Entries we proposed may yet commit under the new leader or be
		// overwritten; we cannot tell which, so the callers retry.
		n.failAll(ErrNotLeader)
	}
}

// noteLeader reports a leader or term change once per change.
func (n *node) noteLeader() {
	lead, term := n.leader.Load(), n.term.Load()
	if lead == n.lastLeader && term == n.lastTerm {
		return
	}
	if lead != n.lastLeader && n.cfg.metrics != nil {
		n.cfg.metrics.leaderChanges.Inc()
	}
	n.lastLeader, n.lastTerm = lead, term
	if n.cfg.onLeader != nil {
		n.cfg.onLeader(lead, term)
	}
}

func (n *node) applySnapshot(snap *raftpb.Snapshot) error {
	md := snap.GetMetadata()
	if md.GetIndex() <= n.applied.Load() {
		return nil
	}
	if err := n.cfg.fsm.Restore(md.GetIndex(), snap.GetData()); err != nil {
		return fmt.Errorf("controller: restore snapshot at %d: %w", md.GetIndex(), err)
	}
	n.mu.Lock()
	n.confState = proto.CloneOf(raftpb.EnsureConfState(md.GetConfState()))
	n.mu.Unlock()
	n.snapIndex.Store(md.GetIndex())
	n.snapTime.Store(time.Now().UnixNano())
	n.appliedTerm.Store(md.GetTerm())
	n.setApplied(md.GetIndex())
	n.cfg.logger.Info("controller: restored snapshot", "node", n.cfg.id, "index", md.GetIndex(), "bytes", len(snap.GetData()))
	return nil
}

func (n *node) applyEntries(ents []*raftpb.Entry) error {
	last := n.applied.Load()
	for _, e := range ents {
		idx := e.GetIndex()
		if idx <= last {
			continue // already in the restored snapshot
		}
		switch e.GetType() {
		case raftpb.EntryNormal:
			from, id, payload, err := decodeEntry(e.GetData())
			if err != nil {
				return fmt.Errorf("entry %d: %w", idx, err)
			}
			if err := n.cfg.fsm.Apply(idx, payload); err != nil {
				return fmt.Errorf("controller: apply entry %d: %w", idx, err)
			}
			if from == n.cfg.id && id != 0 {
				n.finish(id, idx, nil)
			}
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("%w: conf change at %d: %v", ErrCorruptEntry, idx, err)
			}
			cs := n.rn.ApplyConfChange(&cc)
			n.mu.Lock()
			n.confState = cs
			n.mu.Unlock()
			// The FSM sees every index so its offset tracks the log.
			if err := n.cfg.fsm.Apply(idx, nil); err != nil {
				return err
			}
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("%w: conf change v2 at %d: %v", ErrCorruptEntry, idx, err)
			}
			cs := n.rn.ApplyConfChange(&cc)
			n.mu.Lock()
			n.confState = cs
			n.mu.Unlock()
			if err := n.cfg.fsm.Apply(idx, nil); err != nil {
				return err
			}
		}
		last = idx
		n.appliedTerm.Store(e.GetTerm())
	}
	n.setApplied(last)
	return nil
}

func (n *node) setApplied(idx uint64) {
	n.applied.Store(idx)
	if n.cfg.metrics != nil {
		n.cfg.metrics.applied.Set(float64(idx))
	}
	n.mu.Lock()
	close(n.appliedc)
	n.appliedc = make(chan struct{})
	n.mu.Unlock()
	if n.cfg.onApplied != nil {
		n.cfg.onApplied(idx)
	}
}

// maybeSnapshot snapshots the FSM every snapshotEntries applied entries and
// compacts the log, keeping catchUpEntries entries so a follower that is
// only a little behind is caught up from the log and not a snapshot.
func (n *node) maybeSnapshot() error {
	applied := n.applied.Load()
	if applied-n.snapIndex.Load() < n.cfg.snapshotEntries {
		return nil
	}
	data, err := n.cfg.fsm.Snapshot()
	if err != nil {
		return fmt.Errorf("controller: fsm snapshot: %w", err)
	}
	n.mu.Lock()
	cs := proto.CloneOf(n.confState)
	n.mu.Unlock()
	if _, err := n.cfg.storage.CreateSnapshot(applied, cs, data); err != nil {
		if errors.Is(err, raft.ErrSnapOutOfDate) {
			return nil
		}
		return fmt.Errorf("controller: create snapshot at %d: %w", applied, err)
	}
	n.snapIndex.Store(applied)
	n.snapTime.Store(time.Now().UnixNano())
	if m := n.cfg.metrics; m != nil {
		m.snapshotBytes.Set(float64(len(data)))
		m.snapshotTime.SetToCurrentTime()
	}
	if applied > n.cfg.catchUpEntries {
		if err := n.cfg.storage.Compact(applied - n.cfg.catchUpEntries); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return fmt.Errorf("controller: compact to %d: %w", applied-n.cfg.catchUpEntries, err)
		}
	}
	return nil
}

// Propose replicates payload and waits until this node has applied it,
// returning its log index. It fails with ErrNotLeader on a follower or when
// leadership is lost before the entry applied (the entry may or may not
// commit later: the caller retries, so payloads should be safe to repeat),
// ErrProposalDropped when raft refuses it, ctx's error on timeout, and
// ErrStopped when the node stops.
func (n *node) Propose(ctx context.Context, payload []byte) (uint64, error) {
	if err := n.failed(); err != nil {
		return 0, err
	}
	if n.leader.Load() != n.cfg.id {
		return 0, ErrNotLeader
	}
	w := &waiter{id: n.nextProp.Add(1), done: make(chan struct{})}
	n.mu.Lock()
	n.waiters[w.id] = w
	n.mu.Unlock()
	p := proposal{data: encodeEntry(n.cfg.id, w.id, payload), w: w}
	select {
	case n.propc <- p:
	case <-ctx.Done():
		n.forget(w.id)
		return 0, ctx.Err()
	case <-n.stopc:
		n.forget(w.id)
		return 0, ErrStopped
	}
	select {
	case <-w.done:
		return w.idx, w.err
	case <-ctx.Done():
		n.forget(w.id)
		return 0, ctx.Err()
	case <-n.donec:
		n.forget(w.id)
		if err := n.failed(); err != nil {
			return 0, err
		}
		return 0, ErrStopped
	}
}

func (n *node) forget(id uint64) {
	n.mu.Lock()
	delete(n.waiters, id)
	n.mu.Unlock()
}

func (n *node) finish(id, idx uint64, err error) {
	n.mu.Lock()
	w := n.waiters[id]
	delete(n.waiters, id)
	n.mu.Unlock()
	if w != nil {
		w.idx, w.err = idx, err
		close(w.done)
	}
}

func (n *node) failAll(err error) {
	n.mu.Lock()
	ws := n.waiters
	n.waiters = map[uint64]*waiter{}
	n.mu.Unlock()
	for _, w := range ws {
		w.err = err
		close(w.done)
	}
}

func (n *node) failed() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fatal
}

// appliedChan returns a channel closed when the applied index next grows.
func (n *node) appliedChan() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.appliedc
}

// isLeaderReady reports whether this node leads and has applied an entry of
// its own term, so its FSM holds everything committed before it took over
// and decisions made on it are not based on stale state.
func (n *node) isLeaderReady() bool {
	t := n.term.Load()
	return n.leader.Load() == n.cfg.id && n.appliedTerm.Load() == t && t != 0
}

// campaign asks the node to start an election (tests, and a quorum of one
// that should not wait an election timeout).
func (n *node) campaign() {
	select {
	case n.campc <- struct{}{}:
	default: // one already pending
	}
}

// Stop stops the Ready loop and waits for it. The transport is stopped by
// its owner. Idempotent.
func (n *node) Stop() {
	n.stop.Do(func() { close(n.stopc) })
	<-n.donec
}

// raftLogger adapts slog to raft.Logger; raft's chatter goes to Debug.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                   { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any)   { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Error(v ...any)                   { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any)   { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                    { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)    { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)                 { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) { r.l.Warn(fmt.Sprintf(format, v...)) }
func (r raftLogger) Fatal(v ...any)                   { r.l.Error(fmt.Sprint(v...)); panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) {
	r.l.Error(fmt.Sprintf(format, v...))
	panic(fmt.Sprintf(format, v...))
}
func (r raftLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }

// Status is a point-in-time view of a controller's Raft state.
type Status struct {
	ID            uint64
	Leader        uint64 // 0 = unknown
	Term          uint64
	Commit        uint64
	Applied       uint64
	SnapshotIndex uint64
	SnapshotTime  time.Time // zero if no snapshot taken or restored yet
}

// status reads the published state; safe from any goroutine.
func (n *node) status() Status {
	s := Status{
		ID:            n.cfg.id,
		Leader:        n.leader.Load(),
		Term:          n.term.Load(),
		Commit:        n.commit.Load(),
		Applied:       n.applied.Load(),
		SnapshotIndex: n.snapIndex.Load(),
	}
	if t := n.snapTime.Load(); t != 0 {
		s.SnapshotTime = time.Unix(0, t)
	}
	return s
}
