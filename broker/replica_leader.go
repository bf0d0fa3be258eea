package broker

// The leader's half of replication (Kafka's Partition.scala, REPLICATION.md
// §1.3, §1.5-§1.7): the state of each follower (LEO, last caught-up time,
// broker epoch), the high watermark as the minimum LEO of the leader and
// the maximal ISR, ISR shrink and expand through AlterPartition, and the
// waiters of acks=all produces and of waitHW.
//
// The decisions are pure functions of a replState snapshot (nextHW,
// outOfSync, canJoinISR, alterDecision), table-tested in
// replica_leader_test.go; the shell around them holds the locks, starts
// the AlterPartition calls and wakes waiters.
//
// Lock order: partition.appendMu → partition.repMu → partition.hwMu.
// repMu is never held across a controller call or a log write other than
// the leader-epoch cache entry written at election (KIP-279).

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
)

// followerState is what the leader knows of one follower, from its
// fetches in the current leader epoch (Kafka's Replica).
type followerState struct {
	leo                int64 // the follower's log end offset: its last fetch offset; -1 unknown
	logStart           int64 // the log start offset it sent
	lastCaughtUpMs     int64 // last time it was known caught up to the leader's LEO
	lastFetchLeaderLEO int64 // the leader's LEO at its previous fetch
	lastFetchMs        int64 // when its previous fetch was served
	brokerEpoch        int64 // the broker epoch its fetches carry (ReplicaState, v15+); -1 unknown
}

// caughtUp is Kafka's Replica.isCaughtUp: at the leader's LEO, or caught
// up to it within the last lagMs.
func (f *followerState) caughtUp(leaderLEO, nowMs, lagMs int64) bool {
	return f.leo == leaderLEO || nowMs-f.lastCaughtUpMs <= lagMs
}

// updateFetch records a served fetch (Kafka's updateFetchStateOrThrow):
// the follower's LEO is its fetch offset; it was caught up now if it
// fetched from the leader's LEO (as it was before the read), else at its
// previous fetch if it has since reached the LEO the leader had then, so a
// stream of small produces does not push an up-to-date follower out.
func (f *followerState) updateFetch(fetchOffset, logStart, leaderLEO, nowMs, brokerEpoch int64) {
	switch {
	case fetchOffset >= leaderLEO:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, nowMs)
	case fetchOffset >= f.lastFetchLeaderLEO:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, f.lastFetchMs)
	}
	f.leo, f.logStart = fetchOffset, logStart
	f.lastFetchLeaderLEO, f.lastFetchMs = leaderLEO, nowMs
	f.brokerEpoch = brokerEpoch
}

// replicaInfo is a replica's broker as this broker's metadata image shows
// it: its registered epoch, and whether it may be in an ISR (registered,
// unfenced, not in controlled shutdown; KIP-841).
type replicaInfo struct {
	epoch    int64
	eligible bool
}

// replState is a led partition's replication state, guarded by
// partition.repMu.
type replState struct {
	self           int32
	leaderEpoch    int32
	partitionEpoch int32
	epochStart     int64 // the log end offset when this broker became leader in leaderEpoch
	replicas       []int32
	isr            []int32 // committed: as the metadata image (or the last accepted AlterPartition) says
	// pending is the ISR proposed to the controller and not yet
	// committed, nil when none (Kafka's PendingExpandIsr/PendingShrinkIsr);
	// inflight says the AlterPartition is still unanswered, else pending
	// waits for new metadata (§1.7).
	pending   []int32
	inflight  bool
	minISR    int // effective min ISR: min(min.insync.replicas, RF)
	recovery  int8
	followers map[int32]*followerState
	brokers   map[int32]replicaInfo
}

// maximalISR is the ISR the high watermark and acks=all count: the
// committed one joined with a pending change (a pending expand counts its
// new member, a pending shrink still counts the leaving one).
func (s *replState) maximalISR() []int32 {
	out := slices.Clone(s.isr)
	for _, id := range s.pending {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// underMinISR is strict min ISR (KIP-966): the committed ISR is below
// the effective min ISR, so the HW stays and acks=all is refused.
func (s *replState) underMinISR() bool { return len(s.isr) < s.minISR }

// nextHW is the high watermark after a change of the leader's LEO, a
// follower's LEO or the ISR (Kafka's maybeIncrementLeaderHW): the minimum
// LEO over the leader, every maximal-ISR member and every other replica
// that is caught up and eligible to join (so a joining follower is not
// starved). It only moves forward, and not at all while the committed ISR
// is below the effective min ISR.
func nextHW(s *replState, hw, leaderLEO, nowMs, lagMs int64) int64 {
	if s.underMinISR() {
		return hw
	}
	maximal := s.maximalISR()
	next := leaderLEO
	for _, id := range s.replicas {
		if id == s.self {
			continue
		}
		f := s.followers[id]
		inMax := slices.Contains(maximal, id)
		joining := f != nil && f.leo >= 0 && f.caughtUp(leaderLEO, nowMs, lagMs) && s.brokers[id].eligible
		if !inMax && !joining {
			continue
		}
		leo := int64(-1)
		if f != nil {
			leo = f.leo
		}
		next = min(next, leo)
	}
	return max(hw, next)
}

// outOfSync lists the committed ISR members (not the leader) that are out
// of sync (Kafka's getOutOfSyncReplicas): not at the leader's LEO and not
// caught up within lagMs.
func outOfSync(s *replState, leaderLEO, nowMs, lagMs int64) []int32 {
	var out []int32
	for _, id := range s.isr {
		if id == s.self {
			continue
		}
		f := s.followers[id]
		if f == nil || !f.caughtUp(leaderLEO, nowMs, lagMs) {
			out = append(out, id)
		}
	}
	return out
}

// canJoinISR reports whether follower id may be added to the ISR (Kafka's
// needsExpandIsr): a replica outside the ISR whose LEO reached the HW and
// the start of the leader's current epoch (so it holds this epoch's
// committed data), eligible per this broker's image with the broker epoch
// its fetches carry matching the registered one (or unknown), with no
// change pending and the partition not RECOVERING (KIP-704).
func canJoinISR(s *replState, id int32, hw int64) bool {
	f := s.followers[id]
	if f == nil || s.pending != nil || s.recovery == metadata.LeaderRecovering ||
		slices.Contains(s.isr, id) || !slices.Contains(s.replicas, id) {
		return false
	}
	b, ok := s.brokers[id]
	if !ok || !b.eligible || (f.brokerEpoch >= 0 && f.brokerEpoch != b.epoch) {
		return false
	}
	return f.leo >= hw && f.leo >= s.epochStart
}

// alterAction is what the leader does with an AlterPartition answer.
type alterAction int

const (
	alterCommit alterAction = iota // take the answer's ISR and partition epoch
	alterRevert                    // drop the pending change: it was not applied
	alterWait                      // keep it pending until new metadata arrives
	alterRetry                     // send it again
	alterIgnore                    // a stale success: drop the pending change, keep the state
)

// alterDecision maps an AlterPartition outcome to the leader's action
// (§1.7, Kafka's handleAlterPartitionError/Update). err is the call's own
// error (routing, timeout: retry); res.Err the controller's answer.
func alterDecision(res metadata.AlterPartitionResult, err error, leaderEpoch, partitionEpoch int32) alterAction {
	if err == nil {
		err = res.Err
	} else {
		return alterRetry
	}
	if err == nil {
		if res.LeaderEpoch != leaderEpoch || res.PartitionEpoch < partitionEpoch {
			return alterIgnore
		}
		return alterCommit
	}
	switch {
	case errors.Is(err, kerr.OperationNotAttempted), errors.Is(err, kerr.IneligibleReplica):
		return alterRevert
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID),
		errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.InvalidUpdateVersion),
		errors.Is(err, kerr.InvalidRequest), errors.Is(err, kerr.NewLeaderElected):
		return alterWait
	}
	return alterRetry
}

// effectiveMinISR is min(min.insync.replicas, RF), at least 1: the
// topic's (or the dynamic broker default's) value in configs, else
// brokerDefault, the static min.insync.replicas of server.properties.
func effectiveMinISR(configs map[string]string, brokerDefault int32, rf int) int {
	m := max(int(brokerDefault), 1)
	if v, err := strconv.Atoi(configs[metadata.ConfigMinInsyncReplicas]); err == nil && v > 0 {
		m = v
	}
	return max(min(m, rf), 1)
}

// makeLeader makes p led by this broker in w's leader epoch. reconcile
// calls it for every partition the image says this broker leads, on every
// delta, so it is cheap and idempotent when nothing changed.
//
// In a new leader epoch it first records (epoch, LEO) in the leader-epoch
// cache, before any append in that epoch (KIP-279), resets every
// follower's state (LEO unknown; ISR members count as caught up now, as
// Kafka's), keeps the HW and fails the waiters of the previous epoch. A
// new partition epoch takes the image's ISR as committed and ends any
// pending change.
func (n *Node) makeLeader(p *partition, w wantedPartition) {
	n.stopFollowing(p)
	brokers := map[int32]replicaInfo{}
	recovery := metadata.LeaderRecovered
	n.view(func(st *metadata.State) {
		for _, id := range w.replicas {
			if b, ok := st.Broker(id); ok {
				brokers[id] = replicaInfo{epoch: b.Epoch, eligible: !b.Fenced && !b.InControlledShutdown}
			}
		}
		if pi, ok := st.Partition(w.id, w.index); ok {
			recovery = pi.LeaderRecoveryState
		}
	})
	nowMs := time.Now().UnixMilli()

	p.appendMu.Lock() // no append between the epoch entry and the new epoch
	p.repMu.Lock()
	s := p.rep
	newEpoch := s == nil || s.leaderEpoch != w.epoch || !p.leader.Load()
	if newEpoch {
		leo := p.log.LogEndOffset()
		if err := p.log.LeaderEpochs().Assign(w.epoch, leo); err != nil {
			n.logger.Error("broker: record leader epoch", "topic", p.topic, "partition", p.index, "epoch", w.epoch, "err", err)
		}
		s = &replState{self: n.cfg.NodeID, leaderEpoch: w.epoch, partitionEpoch: w.partitionEpoch, epochStart: leo,
			followers: map[int32]*followerState{}}
		for _, id := range w.replicas {
			if id == s.self {
				continue
			}
			f := &followerState{leo: -1, logStart: -1, lastFetchLeaderLEO: -1, brokerEpoch: -1}
			if slices.Contains(w.isr, id) {
				f.lastCaughtUpMs = nowMs
			}
			s.followers[id] = f
		}
		s.isr = slices.Clone(w.isr)
		p.rep = s
		p.leaderEpoch.Store(w.epoch)
	} else if w.partitionEpoch != s.partitionEpoch {
		s.partitionEpoch, s.isr, s.pending, s.inflight = w.partitionEpoch, slices.Clone(w.isr), nil, false
	}
	s.replicas = slices.Clone(w.replicas)
	for id := range s.followers {
		if !slices.Contains(s.replicas, id) {
			delete(s.followers, id) // reassigned away
		}
	}
	for _, id := range s.replicas {
		if _, ok := s.followers[id]; !ok && id != s.self {
			s.followers[id] = &followerState{leo: -1, logStart: -1, lastFetchLeaderLEO: -1, brokerEpoch: -1}
		}
	}
	s.brokers = brokers
	s.minISR = effectiveMinISR(w.configs, n.cfg.MinInsyncReplicas, len(w.replicas))
	s.recovery = recovery
	p.lagMs = n.cfg.ReplicaLagTimeMax.Milliseconds()
	p.leader.Store(true)
	p.maybeIncrementHWLocked(nowMs)
	var recovered *metadata.AlterPartitionRequest
	prev := len(s.isr)
	if s.recovery == metadata.LeaderRecovering && s.pending == nil {
		// KIP-704: elected uncleanly. There is no transaction state to
		// recover, so the leader reports RECOVERED at once (with the
		// one-member ISR); until that commits the ISR cannot grow.
		recovered = n.proposeISRLocked(p, slices.Clone(s.isr))
		recovered.LeaderRecoveryState = metadata.LeaderRecovered
	}
	p.repMu.Unlock()
	p.appendMu.Unlock()
	if recovered != nil {
		n.sendAlterPartition(p, *recovered, prev)
	}
	if newEpoch {
		p.failHWWaiters(kerr.NotLeaderForPartition, w.epoch)
		p.wake()
	}
	n.startISRExpiration(p)
}

// resignLeadership tells p's replication state that this broker no longer
// leads it (reconcile: before makeFollower, and when the partition is
// dropped): acks=all produces and waitHW callers waiting on it fail with
// NOT_LEADER_OR_FOLLOWER. Idempotent.
//
// Under appendMu: a leader append racing with it either completes before
// (and is failed with the waiters) or is refused (checkLeaderAppendLocked),
// never lands after with no replication state to hold the HW back.
func (p *partition) resignLeadership() {
	p.appendMu.Lock()
	p.leader.Store(false) // before failing waiters: no new one registers after
	p.repMu.Lock()
	p.rep = nil
	p.repMu.Unlock()
	p.appendMu.Unlock()
	p.failHWWaiters(kerr.NotLeaderForPartition, -1)
}

// maybeIncrementHWLocked recomputes the HW (repMu held) and raises it.
// Without replication state (a partition opened, not yet led) the HW is
// the log end, as a single replica's.
func (p *partition) maybeIncrementHWLocked(nowMs int64) {
	leo := p.log.LogEndOffset()
	if p.rep == nil {
		p.raiseHW(leo)
		return
	}
	p.raiseHW(nextHW(p.rep, p.hw.Load(), leo, nowMs, p.lagMs))
}

// afterLeaderAppend re-evaluates the HW after a leader append (what moves
// it when the ISR is the leader alone) and wakes parked fetches, followers'
// included, which read up to the log end.
func (p *partition) afterLeaderAppend() {
	p.repMu.Lock()
	p.maybeIncrementHWLocked(time.Now().UnixMilli())
	p.repMu.Unlock()
	p.wake()
}

// replicaOf reports whether id is one of p's replicas in the state this
// broker leads it with; ok is false when it does not lead p.
func (p *partition) replicaOf(id int32) (isReplica, ok bool) {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.rep == nil {
		return false, false
	}
	return slices.Contains(p.rep.replicas, id), true
}

// checkFollowerEpoch refuses a fetch from a previous incarnation of
// follower id (KIP-903): a broker epoch older than the one registered in
// this broker's image, or than one it already fetched with.
func (p *partition) checkFollowerEpoch(id int32, brokerEpoch int64) error {
	if brokerEpoch < 0 {
		return nil
	}
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.rep == nil {
		return kerr.NotLeaderForPartition
	}
	if b, ok := p.rep.brokers[id]; ok && brokerEpoch < b.epoch {
		return kerr.NotLeaderForPartition
	}
	if f := p.rep.followers[id]; f != nil && brokerEpoch < f.brokerEpoch {
		return kerr.NotLeaderForPartition
	}
	return nil
}

// updateFollower records a follower's served fetch (leaderLEO as it was
// before the read), then raises the HW and, when the follower may join the
// ISR, proposes it. Returns the proposal to send (nil: none).
func (n *Node) updateFollower(p *partition, id int32, fetchOffset, logStart, leaderLEO, brokerEpoch int64) {
	nowMs := time.Now().UnixMilli()
	p.repMu.Lock()
	s := p.rep
	if s == nil {
		p.repMu.Unlock()
		return
	}
	f := s.followers[id]
	if f == nil {
		p.repMu.Unlock()
		return
	}
	f.updateFetch(fetchOffset, logStart, leaderLEO, nowMs, brokerEpoch)
	p.maybeIncrementHWLocked(nowMs)
	var req *metadata.AlterPartitionRequest
	prev := len(s.isr)
	if canJoinISR(s, id, p.hw.Load()) {
		isr := append(slices.Clone(s.isr), id)
		req = n.proposeISRLocked(p, isr)
	}
	p.repMu.Unlock()
	if req != nil {
		n.sendAlterPartition(p, *req, prev)
	}
}

// proposeISRLocked marks isr pending and builds its AlterPartition
// (repMu held; v3 with each member's broker epoch, KIP-903).
func (n *Node) proposeISRLocked(p *partition, isr []int32) *metadata.AlterPartitionRequest {
	s := p.rep
	s.pending, s.inflight = isr, true
	members := make([]metadata.ISRMember, len(isr))
	for i, id := range isr {
		e := int64(-1)
		if id == s.self {
			e = n.brokerEpoch.Load()
		} else if f := s.followers[id]; f != nil {
			e = f.brokerEpoch
		}
		members[i] = metadata.ISRMember{BrokerID: id, BrokerEpoch: e}
	}
	return &metadata.AlterPartitionRequest{BrokerID: s.self, BrokerEpoch: n.brokerEpoch.Load(), TopicID: p.topicID,
		Partition: p.index, LeaderEpoch: s.leaderEpoch, PartitionEpoch: s.partitionEpoch,
		NewISR: slices.Clone(isr), NewISRWithEpochs: members, LeaderRecoveryState: s.recovery}
}

// alterRetryBackoff is how long a retried AlterPartition waits.
const alterRetryBackoff = 100 * time.Millisecond

// sendAlterPartition sends one ISR change to the controller off the
// caller's goroutine and applies the answer (§1.7). Only one is in flight
// per partition (proposeISRLocked set inflight; nothing proposes while a
// change is pending).
func (n *Node) sendAlterPartition(p *partition, req metadata.AlterPartitionRequest, prevISR int) {
	// Called from a connection's handler or a task in n.loops, so the
	// group is not at zero here: Close waits for this one too.
	n.loops.Add(1)
	go func() {
		defer n.loops.Done()
		for {
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.BrokerSessionTimeout)
			res, err := n.svc.AlterPartition(ctx, req)
			cancel()
			if n.ctx.Err() != nil {
				return
			}
			// Metrics count what the controller accepted, even when the
			// new metadata reached this broker before the answer.
			accepted := err == nil && res.Err == nil && res.LeaderEpoch == req.LeaderEpoch
			switch {
			case accepted && len(res.ISR) < prevISR:
				n.metrics.isrShrink()
			case accepted && len(res.ISR) > prevISR:
				n.metrics.isrExpand()
			case !accepted:
				n.metrics.isrUpdateFailed() // refused, stale, or not answered (retried)
			}
			p.repMu.Lock()
			s := p.rep
			if s == nil || s.leaderEpoch != req.LeaderEpoch || !s.inflight || !slices.Equal(s.pending, req.NewISR) {
				p.repMu.Unlock() // superseded by new metadata
				return
			}
			action := alterDecision(res, err, s.leaderEpoch, s.partitionEpoch)
			switch action {
			case alterCommit:
				s.isr, s.partitionEpoch, s.pending, s.inflight = slices.Clone(res.ISR), res.PartitionEpoch, nil, false
				s.recovery = req.LeaderRecoveryState
				p.maybeIncrementHWLocked(time.Now().UnixMilli())
			case alterRevert, alterIgnore:
				s.pending, s.inflight = nil, false
			case alterWait:
				s.inflight = false
			}
			p.repMu.Unlock()
			if action != alterRetry {
				if err == nil {
					err = res.Err
				}
				if err != nil {
					n.logger.Info("broker: AlterPartition refused", "topic", p.topic, "partition", p.index, "isr", req.NewISR, "err", err)
				}
				return
			}
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(alterRetryBackoff):
			}
		}
	}()
}

// startISRExpiration starts p's isr-expiration task (every
// replica.lag.time.max.ms/2, as Kafka's), once per partition object. It
// ends with the node or when p is dropped.
func (n *Node) startISRExpiration(p *partition) {
	p.expiryOnce.Do(func() {
		every := max(n.cfg.ReplicaLagTimeMax/2, time.Millisecond)
		n.loops.Add(1)
		go func() {
			defer n.loops.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-n.ctx.Done():
					return
				case <-p.dropped:
					return
				case <-t.C:
					n.maybeShrinkISR(p)
				}
			}
		}()
	})
}

// maybeShrinkISR proposes the ISR without its out-of-sync members, when
// this broker leads p and no change is pending.
func (n *Node) maybeShrinkISR(p *partition) {
	nowMs := time.Now().UnixMilli()
	p.repMu.Lock()
	s := p.rep
	if s == nil || s.pending != nil || !p.leader.Load() {
		p.repMu.Unlock()
		return
	}
	gone := outOfSync(s, p.log.LogEndOffset(), nowMs, p.lagMs)
	if len(gone) == 0 {
		p.repMu.Unlock()
		return
	}
	var isr []int32
	for _, id := range s.isr {
		if !slices.Contains(gone, id) {
			isr = append(isr, id)
		}
	}
	n.logger.Info("broker: shrinking ISR", "topic", p.topic, "partition", p.index, "isr", s.isr, "out_of_sync", gone)
	req := n.proposeISRLocked(p, isr)
	prev := len(s.isr)
	p.repMu.Unlock()
	n.sendAlterPartition(p, *req, prev)
}

// replicationStatus is p's replication state for metrics and admin: the
// committed ISR, the HW, the LEO, and whether the ISR is below the
// effective min ISR (strict min ISR holds the HW). A partition this broker
// does not lead reports a nil ISR.
func (p *partition) replicationStatus() (isr []int32, hw, leo int64, underMinISR bool) {
	p.repMu.Lock()
	if p.rep != nil {
		isr, underMinISR = slices.Clone(p.rep.isr), p.rep.underMinISR()
	}
	p.repMu.Unlock()
	return isr, p.hw.Load(), p.log.LogEndOffset(), underMinISR
}

// acksAllCheck is acks=-1's check before appending: NOT_ENOUGH_REPLICAS
// while the committed ISR is below the effective min ISR.
func (p *partition) acksAllCheck() error {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.rep != nil && p.rep.underMinISR() {
		return kerr.NotEnoughReplicas
	}
	return nil
}

// acksAllResult is acks=-1's answer once the HW covers the batch: success,
// or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR fell below the
// effective min ISR meanwhile (Kafka's checkEnoughReplicasReachOffset).
func (p *partition) acksAllResult() error {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.rep == nil {
		return kerr.NotLeaderForPartition
	}
	if len(p.rep.maximalISR()) < p.rep.minISR {
		return kerr.NotEnoughReplicasAfterAppend
	}
	return nil
}

// epochStartOffset is the start offset of the leader epoch this broker
// leads p in, -1 when it does not lead it.
func (p *partition) epochStartOffset() int64 {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.rep == nil {
		return -1
	}
	return p.rep.epochStart
}

// hwWaiter is one caller waiting for the HW to pass offset in leader
// epoch epoch; c receives nil or the error that ended the wait.
type hwWaiter struct {
	offset int64
	epoch  int32
	c      chan error
	i      int // index in the heap; -1 once removed
}

// hwWaiters is a min-heap of waiters by offset: a HW move pops exactly
// the waiters it completes, in offset order, without scanning the rest.
type hwWaiters []*hwWaiter

func (h hwWaiters) Len() int           { return len(h) }
func (h hwWaiters) Less(i, j int) bool { return h[i].offset < h[j].offset }
func (h hwWaiters) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].i = i; h[j].i = j }
func (h *hwWaiters) Push(x any)        { w := x.(*hwWaiter); w.i = len(*h); *h = append(*h, w) }
func (h *hwWaiters) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.i = -1
	return w
}

// addHWWaiter registers a wait for HW > offset; nil when it already is.
// It fails at once when p is not led here (in epoch, when epoch >= 0).
func (p *partition) addHWWaiter(offset int64, epoch int32) (*hwWaiter, error) {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	if !p.leader.Load() || (epoch >= 0 && p.leaderEpoch.Load() != epoch) {
		return nil, kerr.NotLeaderForPartition
	}
	if p.hw.Load() > offset {
		return nil, nil
	}
	w := &hwWaiter{offset: offset, epoch: p.leaderEpoch.Load(), c: make(chan error, 1)}
	heap.Push(&p.hwWait, w)
	return w, nil
}

func (p *partition) removeHWWaiter(w *hwWaiter) {
	p.hwMu.Lock()
	if w.i >= 0 {
		heap.Remove(&p.hwWait, w.i)
	}
	p.hwMu.Unlock()
}

// completeHWWaiters completes the waiters the HW now passes.
func (p *partition) completeHWWaiters() {
	p.hwMu.Lock()
	hw := p.hw.Load()
	for len(p.hwWait) > 0 && p.hwWait[0].offset < hw {
		heap.Pop(&p.hwWait).(*hwWaiter).c <- nil
	}
	p.hwMu.Unlock()
}

// failHWWaiters ends every wait with err, except those of epoch keep
// (-1: all).
func (p *partition) failHWWaiters(err error, keep int32) {
	p.hwMu.Lock()
	var kept hwWaiters
	for _, w := range p.hwWait {
		if keep >= 0 && w.epoch == keep {
			kept = append(kept, w)
			continue
		}
		w.i = -1
		w.c <- err
	}
	p.hwWait = p.hwWait[:0]
	for _, w := range kept {
		heap.Push(&p.hwWait, w)
	}
	p.hwMu.Unlock()
}

// waitHW waits until p's high watermark is above offset (the record at
// offset is committed), ctx ends, or p stops being led here
// (NOT_LEADER_OR_FOLLOWER). It is how a write that must be as durable as
// acks=all (a group's offset commit) waits for the ISR.
func (p *partition) waitHW(ctx context.Context, offset int64) error {
	return p.waitHWInEpoch(ctx, offset, -1)
}

// waitHWInEpoch is waitHW for a write made in leader epoch epoch (-1:
// any): losing that epoch ends the wait.
func (p *partition) waitHWInEpoch(ctx context.Context, offset int64, epoch int32) error {
	w, err := p.addHWWaiter(offset, epoch)
	if err != nil || w == nil {
		return err
	}
	select {
	case err := <-w.c:
		return err
	case <-ctx.Done():
		p.removeHWWaiter(w)
		select {
		case err := <-w.c: // completed meanwhile
			return err
		default:
		}
		return ctx.Err()
	}
}
