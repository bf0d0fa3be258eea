package broker

// The share-partition leader (KIP-932): the shell around broker/share's
// deterministic Partition for every (share group, topic, partition) whose
// partition this broker leads and some member fetched. ShareFetch (78) and
// ShareAcknowledge (79) drive it; share_session.go keeps the members'
// sessions.
//
// Life of a share-partition here:
//
//   - created on the first ShareFetch or acknowledgement naming it, in the
//     partition's current leader epoch: its durable state is read through
//     n.sharePersister (ReadShareGroupState with the leader epoch); with no
//     state (ErrNoState) it is initialized (InitializeShareGroupState,
//     state epoch 0) at the offset share.auto.offset.reset gives (latest:
//     the high watermark, or the last stable offset for read_committed;
//     earliest: the log start; by_duration: ListOffsets by timestamp), then
//     read again, and rebuilt with share.Restore. A read that fails (the
//     share coordinator moving) answers the partition with its error and
//     the next fetch tries again;
//   - every change (acknowledgements, releases, lock expiries, the start
//     offset moving) is written (WriteShareGroupState with
//     Partition.TakeUpdate) before the request that caused it is answered:
//     an acknowledgement answered without error is durable. Acquisitions
//     are only marked dirty and go with the next write. A write that fails
//     answers the acknowledgements with its error and drops the in-memory
//     state, so the next access reloads what is durable (a fenced state
//     epoch after AlterShareGroupOffsets, a newer leader, a coordinator
//     down): memory never claims more than the coordinator holds;
//   - dropped when this broker stops leading the partition or its leader
//     epoch moves (checked on every access and by the expiry loop every
//     second): a new leader rebuilds it from the durable state, records
//     acquired here become available there with their delivery counts.
//
// One goroutine per node (run) expires acquisition locks at the earliest
// Partition.NextDeadline over all share-partitions (kicked when an
// acquisition sets an earlier one), writes what the expiry released, wakes
// the ShareFetches waiting on those share-partitions, and once a second
// moves share-partitions past a log start that moved (retention,
// DeleteRecords: Partition.AdvanceStart) and drops those whose leadership
// went, and the idle ones: named by no share session here and nothing
// acquired (all they hold is durable; a deleted group's state is not
// written back, and memory stays bounded by what is being fetched).
//
// Lock order: shareLeader.mu (the map) is taken inside nothing and never
// held across a call out; sharePart.mu is held across the share-partition's
// persister calls (its writes must reach the coordinator in order) and
// taken inside nothing; sharePart.wmu (its waiters) is taken inside mu or
// alone.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/broker/share"
)

// shareLeaderConfig holds the broker's group.share.* settings of the
// share-partition leader.
type shareLeaderConfig struct {
	RecordLockDurationMs    int64 // group.share.record.lock.duration.ms
	MinRecordLockDurationMs int64 // group.share.min.record.lock.duration.ms
	MaxRecordLockDurationMs int64 // group.share.max.record.lock.duration.ms
	DeliveryCountLimit      int16 // group.share.delivery.count.limit
	PartitionMaxRecordLocks int   // group.share.partition.max.record.locks
	MaxShareSessions        int   // group.share.max.share.sessions
}

// parseShareLeaderConfig reads the settings with Kafka's bounds
// (ShareGroupConfig): lock durations at least 1000 ms, the default between
// the min and the max (the max at most 3600000), delivery count limit
// 2..10, record locks 100..10000, sessions at least 1.
func parseShareLeaderConfig(i64 func(string, int64) int64, bad func(name, v, why string), get func(string) string) shareLeaderConfig {
	c := shareLeaderConfig{
		RecordLockDurationMs:    i64("group.share.record.lock.duration.ms", 1000),
		MinRecordLockDurationMs: i64("group.share.min.record.lock.duration.ms", 1000),
		MaxRecordLockDurationMs: i64("group.share.max.record.lock.duration.ms", 1000),
	}
	switch {
	case c.MaxRecordLockDurationMs > 3600000:
		bad("group.share.max.record.lock.duration.ms", get("group.share.max.record.lock.duration.ms"), "above 3600000")
	case c.MinRecordLockDurationMs > c.MaxRecordLockDurationMs:
		bad("group.share.min.record.lock.duration.ms", get("group.share.min.record.lock.duration.ms"), "above group.share.max.record.lock.duration.ms")
	case c.RecordLockDurationMs < c.MinRecordLockDurationMs:
		bad("group.share.record.lock.duration.ms", get("group.share.record.lock.duration.ms"), "below group.share.min.record.lock.duration.ms")
	case c.RecordLockDurationMs > c.MaxRecordLockDurationMs:
		bad("group.share.record.lock.duration.ms", get("group.share.record.lock.duration.ms"), "above group.share.max.record.lock.duration.ms")
	}
	if d := i64("group.share.delivery.count.limit", 2); d > 10 {
		bad("group.share.delivery.count.limit", get("group.share.delivery.count.limit"), "above 10")
	} else {
		c.DeliveryCountLimit = int16(d)
	}
	if l := i64("group.share.partition.max.record.locks", 100); l > 10000 {
		bad("group.share.partition.max.record.locks", get("group.share.partition.max.record.locks"), "above 10000")
	} else {
		c.PartitionMaxRecordLocks = int(l)
	}
	c.MaxShareSessions = int(min(i64("group.share.max.share.sessions", 1), 1<<20))
	return c
}

// sharePartKey names a share-partition.
type sharePartKey struct {
	group     string
	topicID   uuid.UUID
	partition int32
}

// sharePart is one share-partition led here.
type sharePart struct {
	key   sharePartKey
	topic string

	mu         sync.Mutex // guards the fields below; held across persister calls
	p          *partition // the hosted partition it was created for
	epoch      int32      // p's leader epoch then
	sp         *share.Partition
	stateEpoch int32
	dropped    bool
	archived   int64 // sp.Archived() as last counted into the node's metric

	// Read without mu (the expiry loop, metrics): the earliest lock
	// deadline (-1 none), the in-flight and acquired counts, as of the
	// last change.
	deadline         atomic.Int64
	inFlight, acqCnt atomic.Int64

	wmu     sync.Mutex
	waiters map[*waiter]struct{}
}

func (s *sharePart) addWaiter(w *waiter) {
	s.wmu.Lock()
	s.waiters[w] = struct{}{}
	s.wmu.Unlock()
}

func (s *sharePart) hasWaiters() bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return len(s.waiters) > 0
}

func (s *sharePart) removeWaiter(w *waiter) {
	s.wmu.Lock()
	delete(s.waiters, w)
	s.wmu.Unlock()
}

// wake signals the ShareFetches waiting for records of s.
func (s *sharePart) wake() {
	s.wmu.Lock()
	for w := range s.waiters {
		select {
		case w.c <- struct{}{}:
		default:
		}
	}
	s.wmu.Unlock()
}

// shareMetrics are the share-partition leader's counters; the in-flight
// and acquired gauges are read at scrape time.
type shareMetrics struct {
	deliveries   prometheus.Counter
	redeliveries prometheus.Counter
	archived     prometheus.Counter
	acks         *prometheus.CounterVec // type
	expired      prometheus.Counter
	// ackStalls: ShareFetches that waited out MaxWait while their member
	// held records (its acknowledgements may queue behind the fetch);
	// heldEarly: answered empty before MaxWait for that reason
	// (shareHoldFor).
	ackStalls prometheus.Counter
	heldEarly prometheus.Counter
}

// shareLeader holds the share-partitions led here.
type shareLeader struct {
	n    *Node
	mu   sync.Mutex // guards parts
	pts  map[sharePartKey]*sharePart
	kick chan struct{}
	m    shareMetrics
	// now is the clock in ms (tests move it); nil: time.Now.
	now func() int64
	// testPersister, if set (tests, under mu), is used instead of
	// n.sharePersister: a failing one, or one shared by several nodes as
	// the share coordinator would be.
	testPersister share.Persister
}

// persister is the share coordinator's client.
func (sl *shareLeader) persister() share.Persister {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.testPersister != nil {
		return sl.testPersister
	}
	return sl.n.sharePersister
}

// setTestPersister replaces the persister (tests).
func (sl *shareLeader) setTestPersister(p share.Persister) {
	sl.mu.Lock()
	sl.testPersister = p
	sl.mu.Unlock()
}

func newShareLeader(n *Node) *shareLeader {
	sl := &shareLeader{n: n, pts: map[sharePartKey]*sharePart{}, kick: make(chan struct{}, 1)}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "share", Name: name, Help: help})
	}
	sl.m = shareMetrics{
		deliveries:   c("deliveries_total", "Records handed to share-group consumers by ShareFetch (each delivery of a record counts)."),
		redeliveries: c("redeliveries_total", "Deliveries of records delivered before (delivery count above 1: released, lock expired, or the previous holder gone)."),
		archived:     c("archived_total", "Records archived without being accepted: rejected, or released/expired at the delivery count limit."),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "share", Name: "acknowledged_records_total",
			Help: "Records acknowledged by share-group consumers, by type (accept, release, reject, gap, renew)."}, []string{"type"}),
		expired:   c("lock_expiries_total", "Acquired records released because their acquisition lock expired."),
		ackStalls: c("fetch_ack_stalls_total", "ShareFetch requests answered with nothing acquired once their MaxWait passed while their member held records (a client's acknowledgements queued behind the fetch waited that long)."),
		heldEarly: c("fetch_held_early_total", "ShareFetch requests answered with nothing acquired before their MaxWait because the member held records (so that the client can send the acknowledgements it queues behind the fetch)."),
	}
	if n.reg != nil {
		for _, col := range []prometheus.Collector{sl.m.deliveries, sl.m.redeliveries, sl.m.archived, sl.m.acks, sl.m.expired, sl.m.ackStalls, sl.m.heldEarly, shareCollector{sl}} {
			if err := n.reg.Register(col); err != nil {
				n.logger.Warn("broker: register share metrics", "err", err)
			}
		}
	}
	return sl
}

func (sl *shareLeader) nowMs() int64 {
	if sl.now != nil {
		return sl.now()
	}
	return time.Now().UnixMilli()
}

// shareCollector reports the in-flight and acquired records of the
// share-partitions led here, at scrape time.
type shareCollector struct{ sl *shareLeader }

var (
	shareInFlightDesc = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "share", "in_flight_records"),
		"Records in the in-flight windows (share-partition start to end offset) of the share-partitions led by this broker.", nil, nil)
	shareAcquiredDesc = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "share", "acquired_records"),
		"Records currently acquired (locked to a consumer) in the share-partitions led by this broker.", nil, nil)
	sharePartsDesc = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "share", "partitions"),
		"Share-partitions (group, topic, partition) led by this broker with state loaded.", nil, nil)
	shareSessionsDesc = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "share", "sessions"),
		"Share sessions open on this broker.", nil, nil)
)

func (c shareCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shareInFlightDesc
	ch <- shareAcquiredDesc
	ch <- sharePartsDesc
	ch <- shareSessionsDesc
}

func (c shareCollector) Collect(ch chan<- prometheus.Metric) {
	var inFlight, acquired int64
	parts := c.sl.snapshot()
	for _, s := range parts {
		inFlight += s.inFlight.Load()
		acquired += s.acqCnt.Load()
	}
	ch <- prometheus.MustNewConstMetric(shareInFlightDesc, prometheus.GaugeValue, float64(inFlight))
	ch <- prometheus.MustNewConstMetric(shareAcquiredDesc, prometheus.GaugeValue, float64(acquired))
	ch <- prometheus.MustNewConstMetric(sharePartsDesc, prometheus.GaugeValue, float64(len(parts)))
	sessions := 0
	if c.sl.n.shareSessions != nil {
		sessions = c.sl.n.shareSessions.len()
	}
	ch <- prometheus.MustNewConstMetric(shareSessionsDesc, prometheus.GaugeValue, float64(sessions))
}

func (sl *shareLeader) snapshot() []*sharePart {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	out := make([]*sharePart, 0, len(sl.pts))
	for _, s := range sl.pts {
		out = append(out, s)
	}
	return out
}

// part returns the share-partition of group on p (creating its entry,
// not loading it), or nil when p is not led here.
func (sl *shareLeader) part(group string, p *partition) *sharePart {
	k := sharePartKey{group, p.topicID, p.index}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if s := sl.pts[k]; s != nil {
		return s
	}
	s := &sharePart{key: k, topic: p.topic, p: p, epoch: p.leaderEpoch.Load(), waiters: map[*waiter]struct{}{}}
	s.deadline.Store(-1)
	sl.pts[k] = s
	return s
}

// remove forgets s (already marked dropped).
func (sl *shareLeader) remove(s *sharePart) {
	sl.mu.Lock()
	if sl.pts[s.key] == s {
		delete(sl.pts, s.key)
	}
	sl.mu.Unlock()
	s.wake()
}

// errShareDropped: the share-partition was dropped while the caller waited
// for it (leadership moved): it takes the entry again.
var errShareDropped = errors.New("broker: share-partition dropped")

// lockLoaded returns group's share-partition on p locked and loaded, in
// p's current leader epoch; the caller unlocks s.mu. The error is the
// partition's: the leadership's, or the persister's.
func (sl *shareLeader) lockLoaded(ctx context.Context, group string, p *partition) (*sharePart, error) {
	for range 3 {
		if err := p.checkLeader(-1); err != nil {
			return nil, err
		}
		s := sl.part(group, p)
		s.mu.Lock()
		if s.dropped {
			s.mu.Unlock()
			continue
		}
		if !sl.stillLeads(s) {
			sl.dropLocked(s)
			s.mu.Unlock()
			continue
		}
		if s.sp == nil {
			if err := sl.load(ctx, s); err != nil {
				s.mu.Unlock()
				return nil, err
			}
		}
		if ls := p.log.LogStartOffset(); ls > s.sp.StartOffset() {
			s.sp.AdvanceStart(ls, sl.nowMs())
		}
		return s, nil
	}
	return nil, kerr.NotLeaderForPartition
}

// stillLeads reports whether s's partition is still hosted and led here in
// the epoch s was created in (s.mu held).
func (sl *shareLeader) stillLeads(s *sharePart) bool {
	p := s.p
	return p.leader.Load() && p.leaderEpoch.Load() == s.epoch && sl.n.partition(p.topic, p.index) == p
}

// dropLocked drops s's state (s.mu held): leadership moved, or a write
// failed.
func (sl *shareLeader) dropLocked(s *sharePart) {
	s.dropped = true
	s.sp = nil
	s.inFlight.Store(0)
	s.acqCnt.Store(0)
	s.deadline.Store(-1)
	sl.remove(s)
}

func (sl *shareLeader) shareKey(s *sharePart) share.Key {
	return share.Key{Group: s.key.group, TopicID: s.key.topicID, Partition: s.key.partition}
}

// load reads s's durable state (initializing it first when there is
// none) and rebuilds the share-partition (s.mu held).
func (sl *shareLeader) load(ctx context.Context, s *sharePart) error {
	n := sl.n
	gc := n.shareGroupConfig(s.key.group)
	cfg := share.Config{LockDurationMs: gc.RecordLockDurationMs, DeliveryCountLimit: gc.DeliveryCountLimit, MaxRecordLocks: n.cfg.Share.PartitionMaxRecordLocks}
	k := sl.shareKey(s)
	st, err := sl.persister().Read(ctx, k, s.epoch)
	if errors.Is(err, share.ErrNoState) {
		start := sl.resetOffset(s.p, gc)
		if err = sl.persister().Initialize(ctx, k, 0, start); err == nil || errors.Is(err, kerr.FencedStateEpoch) {
			st, err = sl.persister().Read(ctx, k, s.epoch)
		}
	}
	if err != nil {
		if errors.Is(err, share.ErrNoState) {
			err = kerr.CoordinatorLoadInProgress // initialized and gone again (deleted meanwhile): retriable
		}
		return err
	}
	sp, err := share.Restore(cfg, st)
	if err != nil {
		n.logger.Error("broker: share-partition state refused", "group", s.key.group, "topic", s.topic, "partition", s.key.partition, "err", err)
		return kerr.UnknownServerError
	}
	s.sp, s.stateEpoch = sp, st.StateEpoch
	s.archived = 0
	sl.publish(s)
	return nil
}

// resetOffset is the initial share-partition start offset of
// share.auto.offset.reset (an unparsable value is latest).
func (sl *shareLeader) resetOffset(p *partition, gc ShareGroupConfig) int64 {
	r, err := share.ParseAutoOffsetReset(gc.AutoOffsetReset)
	if err != nil {
		r = share.AutoOffsetReset{Kind: share.ResetLatest}
	}
	end := p.hw.Load()
	if gc.IsolationLevel == 1 {
		end = min(end, p.log.LastStableOffset())
	}
	return r.StartOffset(p.log.LogStartOffset(), end, sl.nowMs(), func(ts int64) (int64, bool) {
		o, _, ok, err := p.log.OffsetForTimestamp(ts)
		return o, ok && err == nil
	})
}

// publish refreshes what is read of s without its lock and counts the
// newly archived records (s.mu held, s.sp loaded).
func (sl *shareLeader) publish(s *sharePart) {
	s.inFlight.Store(int64(s.sp.InFlight()))
	s.acqCnt.Store(int64(s.sp.AcquiredCount()))
	old := s.deadline.Load()
	d := s.sp.NextDeadline()
	s.deadline.Store(d)
	if a := s.sp.Archived(); a > s.archived {
		sl.m.archived.Add(float64(a - s.archived))
		s.archived = a
	}
	if d >= 0 && (old < 0 || d < old) {
		select {
		case sl.kick <- struct{}{}:
		default:
		}
	}
}

// persist writes what changed in s since its last write (s.mu held). A
// failure drops s's state: the next access reloads the durable one.
func (sl *shareLeader) persist(ctx context.Context, s *sharePart) error {
	sl.publish(s)
	u, ok := s.sp.TakeUpdate()
	if !ok {
		return nil
	}
	if err := sl.persister().Write(ctx, sl.shareKey(s), s.stateEpoch, s.epoch, u); err != nil {
		sl.n.logger.Warn("broker: share state write failed, dropping the share-partition's state", "group", s.key.group,
			"topic", s.topic, "partition", s.key.partition, "err", err)
		sl.dropLocked(s)
		if !isKafkaErr(err) {
			err = kerr.UnknownServerError
		}
		return err
	}
	return nil
}

// isKafkaErr reports whether err carries a Kafka error code.
func isKafkaErr(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke)
}

// releaseMember releases what member holds in the share-partitions of
// group on the partitions tps (nil: all of the group's here), as a closed
// session or a member leaving the group does.
func (sl *shareLeader) releaseMember(ctx context.Context, group, member string, tps []shareTP) {
	var want map[shareTP]bool
	if tps != nil {
		want = map[shareTP]bool{}
		for _, tp := range tps {
			want[tp] = true
		}
	}
	for _, s := range sl.snapshot() {
		if s.key.group != group || (want != nil && !want[shareTP{s.key.topicID, s.key.partition}]) {
			continue
		}
		s.mu.Lock()
		if s.sp != nil && !s.dropped {
			if s.sp.ReleaseMember(member, sl.nowMs()) > 0 {
				_ = sl.persist(ctx, s)
				s.wake()
			}
		}
		s.mu.Unlock()
	}
}

// run is the expiry loop (see the file comment); it returns when ctx ends.
func (sl *shareLeader) run(ctx context.Context) {
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	lastSweep := time.Now()
	for {
		sweep := time.Since(lastSweep) >= time.Second
		if sweep {
			lastSweep = time.Now()
		}
		next := sl.expire(ctx, sweep)
		wait := time.Second - time.Since(lastSweep)
		if next >= 0 {
			wait = min(wait, time.Duration(next-sl.nowMs())*time.Millisecond)
		}
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-sl.kick: // Reset above needs no drain (Go 1.23+ timers)
		}
	}
}

// expire releases the locks due in every share-partition, writes and wakes
// what it released; with sweep it also drops the share-partitions whose
// leadership went and moves the others past a moved log start. It returns
// the earliest deadline left (-1 none).
func (sl *shareLeader) expire(ctx context.Context, sweep bool) int64 {
	now := sl.nowMs()
	next := int64(-1)
	var used map[sharePartKey]bool
	if sweep {
		used = sl.n.shareSessions.inUse()
	}
	for _, s := range sl.snapshot() {
		d := s.deadline.Load()
		if !sweep && (d < 0 || d > now) {
			if d >= 0 && (next < 0 || d < next) {
				next = d
			}
			continue
		}
		s.mu.Lock()
		switch {
		case s.dropped:
		case !sl.stillLeads(s):
			sl.dropLocked(s)
		case s.sp != nil:
			changed := false
			if ls := s.p.log.LogStartOffset(); ls > s.sp.StartOffset() {
				s.sp.AdvanceStart(ls, now)
				changed = true
			}
			if k := s.sp.Expire(now); k > 0 {
				sl.m.expired.Add(float64(k))
				changed = true
			}
			if changed {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_ = sl.persist(wctx, s)
				cancel()
				s.wake()
			}
			if s.sp != nil && sweep && !used[s.key] && s.sp.AcquiredCount() == 0 && !s.hasWaiters() {
				// Idle: no session here names it and nothing is
				// acquired, so it holds only what is durable; dropping
				// it keeps a deleted group's state from being written
				// back, and memory bounded by what is fetched.
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_ = sl.persist(wctx, s)
				cancel()
				if !s.dropped {
					sl.dropLocked(s)
				}
			}
			if s.sp != nil {
				sl.publish(s)
				if d := s.sp.NextDeadline(); d >= 0 && (next < 0 || d < next) {
					next = d
				}
			}
		case sweep && !used[s.key]:
			sl.dropLocked(s) // never loaded (its read failed) and no longer asked for
		}
		s.mu.Unlock()
	}
	return next
}
