package broker

// The follower's half of replication (REPLICATION.md §1.4): fetcher loops
// that fetch the partitions this broker follows from their leaders with
// Kafka's Fetch, append the leader's batches as they are, and truncate by
// leader epoch, never to the high watermark.
//
// Shape, as Kafka's ReplicaFetcherManager / AbstractFetcherThread:
//
//	reconcile ─ makeFollower(p, w) ─▶ replicaFetchers.follow ─▶ fetcher{leader, addr, id}.add
//	          ─ makeLeader / drop ─▶ stopFollowing(p)   ─▶ fetcher.remove (waits out a step in progress)
//
//	fetcher goroutine: build one Fetch of its partitions ─▶ leader (one in flight)
//	                   ─▶ per partition, under fetcher.mu, if its state is still the one fetched:
//	                      data            append (one write), HW := min(leader HW, LEO), log start
//	                      DivergingEpoch  truncate (divergenceTruncation), fetch again
//	                      OFFSET_OUT_OF_RANGE            ListOffsets latest/earliest, truncate (outOfRangePlan)
//	                      OFFSET_MOVED_TO_TIERED_STORAGE n.rebuildFromTier (replica_tier.go)
//	                      a batch across our LEO         OffsetsForLeaderEpoch, truncate (a leader
//	                                                     that did not check LastFetchedEpoch)
//	                      FENCED_LEADER_EPOCH            parked until new metadata (a new epoch)
//	                      anything else, transport error back off replica.fetch.backoff.ms
//
// One fetcher per (source broker, its address, fetcher id): partitions are
// hashed over num.replica.fetchers as Kafka does. Each fetcher talks to its
// leader through one kgo.Client seeded with the leader's inter-broker
// listener and dialing from this node's address (n.dialContext); requests
// are sent raw (Broker.Request) with v15+ semantics: ReplicaState{ID, Epoch}
// (ReplicaID below v15), CurrentLeaderEpoch, LastFetchedEpoch (the latest
// epoch of the local leader-epoch cache), FetchOffset = the local LEO,
// LogStartOffset, in a KIP-227 fetch session (f.sess): after the first
// full request an incremental one names only the partitions that changed,
// and a session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
// FETCH_SESSION_TOPIC_ID_ERROR) starts a new full one.
//
// Lock order: replicaFetchers.mu → fetcher.mu → partition.appendMu →
// producerCell.mu. A fetcher holds fetcher.mu while it appends or
// truncates (local disk only), never while waiting on the network, so
// stopFollowing waits at most one local step; once it returns nothing
// writes to the log as follower any more (makeLeader relies on it).
// Every state change bumps the partition's generation; a response or a
// ListOffsets answer for an older generation is dropped.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
)

// makeFollower makes p followed by this broker, led by w.leaderID (or
// offline) in w's leader epoch. reconcile calls it for every partition of
// the image this broker replicates without leading, on every delta, so it
// must be cheap and idempotent when nothing changed.
//
// Produce is refused from here on (leader=false); the log is kept, and the
// first fetch in the new epoch carries LastFetchedEpoch, so the leader
// answers DivergingEpoch wherever this log went past it (KAFKA-7164: after
// every epoch change, even under the same leader).
func (n *Node) makeFollower(p *partition, w wantedPartition) {
	wasLeader := p.leader.Swap(false)
	if p.leaderEpoch.Swap(w.epoch) != w.epoch || wasLeader {
		// Consumers read from this follower (KIP-392) only once the
		// new epoch's leader has told it the high watermark.
		p.followerHWKnown.Store(false)
	}
	if n.replicas == nil {
		return
	}
	addr := ""
	if w.leaderID != metadata.NoLeader && w.leaderID != n.cfg.NodeID {
		addr = n.interBrokerAddr(w.leaderID)
	}
	if addr == "" {
		// Offline, or the leader has no listener we can use yet: nothing to
		// fetch from until a delta names one.
		n.replicas.stop(p)
		return
	}
	n.replicas.follow(p, followTarget{leader: w.leaderID, addr: addr, epoch: w.epoch, topicID: w.id})
}

// stopFollowing stops fetching p (it is led here now, or dropped). When it
// returns, no fetcher step touches p's log any more. Idempotent.
func (n *Node) stopFollowing(p *partition) {
	if n.replicas != nil {
		n.replicas.stop(p)
	}
}

// interBrokerAddr is the address followers fetch from on broker id: its
// registered listener named inter.broker.listener.name, else its first
// listener that is not the controller's; "" when it has none (or is
// unknown).
func (n *Node) interBrokerAddr(id int32) string {
	var addr string
	n.view(func(st *metadata.State) {
		b, ok := st.Broker(id)
		if !ok {
			return
		}
		for _, l := range b.Listeners {
			if n.cfg.InterBrokerListenerName != "" && l.Name != n.cfg.InterBrokerListenerName {
				continue
			}
			if l.Name == n.cfg.ControllerListenerName {
				continue
			}
			addr = fmt.Sprintf("%s:%d", l.Host, l.Port)
			return
		}
	})
	return addr
}

// leaderEndpoint is a fetcher's connection to its source broker: one
// request at a time, answered or failed. The kgo one is [kgoEndpoint];
// tests use an in-process fake leader. Safe for concurrent use.
type leaderEndpoint interface {
	request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	close()
}

// kgoEndpoint sends raw requests to one broker through a franz-go client
// seeded with its address (kgo negotiates versions through ApiVersions).
type kgoEndpoint struct{ cl *kgo.Client }

func (e kgoEndpoint) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	bs := e.cl.SeedBrokers()
	if len(bs) == 0 {
		return nil, errors.New("broker: replica fetcher: no seed broker")
	}
	return bs[0].Request(ctx, req)
}

func (e kgoEndpoint) close() { e.cl.Close() }

// followTarget is what a follower fetches a partition from.
type followTarget struct {
	leader  int32
	addr    string
	epoch   int32
	topicID uuid.UUID
}

// fetcherKey names one fetcher: source broker, the address it is reached
// at (a restarted broker may come back on another port), fetcher id.
type fetcherKey struct {
	leader int32
	addr   string
	id     int
}

// fetcherEnv is what a fetcher needs from its node, so unit tests can run
// fetchers against a fake leader without one.
type fetcherEnv struct {
	nodeID      int32
	brokerEpoch func() int64
	cfg         ReplicaFetchSettings
	logger      *slog.Logger
	metrics     *fetcherMetrics // nil-safe
	// rebuild is called on OFFSET_MOVED_TO_TIERED_STORAGE with the
	// leader's log start and local log start; it returns the offset to
	// fetch from (n.rebuildFromTier).
	rebuild func(ctx context.Context, p *partition, leaderLogStart, leaderLocalStart int64) (int64, error)
	// dial makes the endpoint of a new fetcher.
	dial func(leader int32, addr string) (leaderEndpoint, error)
	// quota is follower.replication.throttled.rate (replica_throttle.go);
	// nil: none.
	quota *replicationQuota
}

// throttled reports whether st's partition is a throttled replica out of
// the ISR while the follower quota is set.
func (env *fetcherEnv) throttled(st *followState) bool {
	return env.quota != nil && st.p.followerThrottled.Load() && !st.p.followerInISR.Load() && env.quota.limited()
}

// throttleRecheck is how soon a partition held back by the follower quota
// is looked at again.
const throttleRecheck = 50 * time.Millisecond

// replicaFetchers is the node's fetcher manager: which fetcher fetches
// which partition.
type replicaFetchers struct {
	env fetcherEnv

	mu       sync.Mutex // guards fetchers, byPart, closed
	fetchers map[fetcherKey]*fetcher
	byPart   map[*partition]fetcherKey
	closed   bool
}

func newReplicaFetchers(env fetcherEnv) *replicaFetchers {
	if env.logger == nil {
		env.logger = slog.New(slog.DiscardHandler)
	}
	if env.cfg.Fetchers < 1 {
		env.cfg.Fetchers = 1
	}
	return &replicaFetchers{env: env, fetchers: map[fetcherKey]*fetcher{}, byPart: map[*partition]fetcherKey{}}
}

// startReplicaFetchers wires the node's fetcher manager (before the
// metadata follower starts: reconcile hands it partitions).
func (n *Node) startReplicaFetchers() error {
	fm := newFetcherMetrics()
	env := fetcherEnv{
		nodeID:      n.cfg.NodeID,
		brokerEpoch: n.brokerEpoch.Load,
		cfg:         n.cfg.ReplicaFetch,
		logger:      n.logger,
		metrics:     fm,
		rebuild:     n.rebuildFromTier,
		quota:       n.followerQuota,
		dial: func(leader int32, addr string) (leaderEndpoint, error) {
			cl, err := kgo.NewClient(
				kgo.SeedBrokers(addr),
				kgo.Dialer(n.dialContext),
				n.interBrokerSASL(),
				kgo.ClientID(fmt.Sprintf("strata-replica-fetcher-%d-to-%d", n.cfg.NodeID, leader)),
				// A fetch is held up to replica.fetch.wait.max.ms by the leader.
				kgo.RequestTimeoutOverhead(10*time.Second+n.cfg.ReplicaFetch.MaxWait),
				// The first batch comes whole even when larger than the
				// limits (KIP-74): leave room for one large batch beyond
				// them (kgo's own default, 100 MiB, at least).
				kgo.BrokerMaxReadBytes(int32(min(max(100<<20, int64(max(n.cfg.ReplicaFetch.ResponseMaxBytes, n.cfg.ReplicaFetch.MaxBytes))+
					int64(n.cfg.Storage.MaxMessageBytes)+(1<<20)), math.MaxInt32))),
			)
			if err != nil {
				return nil, err
			}
			return kgoEndpoint{cl}, nil
		},
	}
	n.replicas = newReplicaFetchers(env)
	if n.reg != nil {
		if err := n.reg.Register(fm); err != nil {
			return err
		}
		if err := n.reg.Register(replicaLagCollector{n.replicas}); err != nil {
			return err
		}
	}
	return nil
}

// fetcherIndex hashes a partition onto one of n fetchers, as Kafka's
// AbstractFetcherManager.getFetcherId: abs(31 * hash(topic) + partition) % n.
func fetcherIndex(topic string, partition int32, n int) int {
	h := fnv.New32a()
	h.Write([]byte(topic))
	v := int64(int32(31*h.Sum32())) + int64(partition)
	if v < 0 {
		v = -v
	}
	return int(v % int64(n))
}

// follow makes p fetched from t: moved to t's fetcher if it was on another
// one, its fetch state restarted if t's epoch differs from the one it is
// fetched in, left alone otherwise (cheap: reconcile calls it on every
// delta).
func (m *replicaFetchers) follow(p *partition, t followTarget) {
	key := fetcherKey{leader: t.leader, addr: t.addr, id: fetcherIndex(p.topic, p.index, m.env.cfg.Fetchers)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if old, ok := m.byPart[p]; ok && old != key {
		m.removeLocked(p, old)
	}
	f := m.fetchers[key]
	if f == nil {
		ep, err := m.env.dial(t.leader, t.addr)
		if err != nil {
			m.env.logger.Warn("broker: replica fetcher: cannot reach leader", "leader", t.leader, "addr", t.addr, "err", err)
			return
		}
		f = newFetcher(key, ep, &m.env)
		m.fetchers[key] = f
		go f.run()
	}
	m.byPart[p] = key
	f.add(p, t.epoch, t.topicID)
}

// stop stops fetching p. Idempotent.
func (m *replicaFetchers) stop(p *partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if key, ok := m.byPart[p]; ok {
		m.removeLocked(p, key)
	}
}

func (m *replicaFetchers) removeLocked(p *partition, key fetcherKey) {
	delete(m.byPart, p)
	f := m.fetchers[key]
	if f == nil {
		return
	}
	if f.remove(p) == 0 {
		delete(m.fetchers, key)
		f.stop()
	}
}

// close stops every fetcher (Node.Close, before the logs close).
func (m *replicaFetchers) close() {
	m.mu.Lock()
	m.closed = true
	fs := make([]*fetcher, 0, len(m.fetchers))
	for _, f := range m.fetchers {
		fs = append(fs, f)
	}
	m.fetchers, m.byPart = map[fetcherKey]*fetcher{}, map[*partition]fetcherKey{}
	m.mu.Unlock()
	for _, f := range fs {
		f.stop()
	}
}

// each calls fn with every followed partition's state, under its
// fetcher's lock (the lag collector).
func (m *replicaFetchers) each(fn func(st *followState)) {
	m.mu.Lock()
	fs := make([]*fetcher, 0, len(m.fetchers))
	for _, f := range m.fetchers {
		fs = append(fs, f)
	}
	m.mu.Unlock()
	for _, f := range fs {
		f.mu.Lock()
		for _, st := range f.parts {
			fn(st)
		}
		f.mu.Unlock()
	}
}

// followState is one partition's fetch state on its fetcher.
type followState struct {
	p       *partition
	topicID uuid.UUID
	epoch   int32  // the leader epoch fetched in (CurrentLeaderEpoch)
	gen     uint64 // bumped on every restart; stale answers are dropped
	// fetchOffset is the next offset to fetch: the local LEO after every
	// step.
	fetchOffset int64
	delayUntil  time.Time // backing off until then
	// fenced: the leader answered FENCED_LEADER_EPOCH; no fetching until
	// makeFollower brings a new epoch (Kafka removes the partition until
	// the next LeaderAndIsr / metadata delta).
	fenced bool
	// failed: the local log failed (KAFKA_STORAGE_ERROR); no fetching
	// until a new epoch (the log stays latched anyway).
	failed bool
	// needEpochQuery: the response showed a divergence the leader did not
	// report; truncate through OffsetsForLeaderEpoch before fetching on.
	needEpochQuery bool
	lag            int64 // leader HW - fetch offset at the last response (records)
}

// fetchable reports whether st goes into the next request at now.
func (st *followState) fetchable(now time.Time) bool {
	return !st.fenced && !st.failed && !now.Before(st.delayUntil)
}

// fetcher is one fetcher loop: one source broker, a set of partitions, one
// request in flight.
type fetcher struct {
	key fetcherKey
	ep  leaderEndpoint
	env *fetcherEnv

	mu      sync.Mutex // guards parts, nextGen; held for every local step on a partition
	parts   map[*partition]*followState
	nextGen uint64

	// sess is the fetch session with the leader; only the loop's
	// goroutine touches it (buildRequest, and run after each response).
	sess followerSession

	kick   chan struct{} // cap 1: a partition was added or restarted
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newFetcher(key fetcherKey, ep leaderEndpoint, env *fetcherEnv) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &fetcher{key: key, ep: ep, env: env, parts: map[*partition]*followState{},
		kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// add starts fetching p in epoch, or restarts it if it was fetched in
// another epoch; a partition already fetched in epoch keeps its state
// (backoff, fenced, fetch offset): a metadata delta that changes nothing
// for it must not make it fetch or truncate again.
func (f *fetcher) add(p *partition, epoch int32, topicID uuid.UUID) {
	f.mu.Lock()
	st := f.parts[p]
	if st != nil && st.epoch == epoch {
		f.mu.Unlock()
		return
	}
	if st == nil {
		st = &followState{p: p}
		f.parts[p] = st
	}
	f.nextGen++
	st.topicID, st.epoch, st.gen = topicID, epoch, f.nextGen
	st.fetchOffset = p.log.LogEndOffset()
	st.delayUntil, st.fenced, st.failed = time.Time{}, false, p.log.Failed()
	from := st.fetchOffset
	f.mu.Unlock()
	f.env.logger.Debug("broker: following", "topic", p.topic, "partition", p.index, "leader", f.key.leader, "epoch", epoch, "fetch_offset", from)
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// remove stops fetching p, once any local step on it is done; it returns
// how many partitions the fetcher has left.
func (f *fetcher) remove(p *partition) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.parts, p)
	return len(f.parts)
}

// stop ends the loop and closes the endpoint.
func (f *fetcher) stop() {
	f.cancel()
	<-f.done
	f.ep.close()
}

// sentPart is what one request asked for one partition.
type sentPart struct {
	st          *followState
	gen         uint64
	fetchOffset int64
}

func (f *fetcher) run() {
	defer close(f.done)
	var lastResp time.Time
	for f.ctx.Err() == nil {
		req, sent, wait := f.buildRequest(time.Now())
		if req == nil {
			f.idle(wait)
			lastResp = time.Time{} // an idle wait is no fetch gap
			continue
		}
		start := time.Now()
		if !lastResp.IsZero() {
			f.env.metrics.observeGap(start.Sub(lastResp))
		}
		resp, err := f.ep.request(f.ctx, req)
		lastResp = time.Now()
		f.env.metrics.observeRequest(lastResp.Sub(start))
		if err != nil {
			if f.ctx.Err() != nil {
				return
			}
			f.env.metrics.fetchError("TRANSPORT")
			f.env.logger.Warn("broker: replica fetch failed", "leader", f.key.leader, "addr", f.key.addr, "err", err)
			f.sess.failed()
			f.backoff(sent)
			continue
		}
		fr, ok := resp.(*kmsg.FetchResponse)
		if !ok || fr.ErrorCode != 0 {
			code := int16(-1)
			if ok {
				code = fr.ErrorCode
			}
			f.env.metrics.fetchError(errorName(code))
			f.sess.failed()
			switch code {
			case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code, kerr.FetchSessionTopicIDError.Code:
				// The leader lost or refused our session (evicted,
				// restarted): the next request is a full one, now.
				f.env.logger.Info("broker: replica fetch session reset", "leader", f.key.leader, "err", kerr.ErrorForCode(code))
				continue
			}
			f.env.logger.Warn("broker: replica fetch refused", "leader", f.key.leader, "err", kerr.ErrorForCode(code))
			f.backoff(sent)
			continue
		}
		f.sess.accepted(fr.SessionID)
		f.process(sent, fr)
	}
}

// idle waits for a kick (a partition added or restarted), for wait (a
// backed-off partition due; 0: no timer), or the end.
func (f *fetcher) idle(wait time.Duration) {
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-f.ctx.Done():
	case <-f.kick:
	case <-timer:
	}
}

// buildRequest builds the next Fetch of every fetchable partition. With
// none, it returns nil and how long until a backed-off one is due (0:
// none is, wait for a kick).
func (f *fetcher) buildRequest(now time.Time) (*kmsg.FetchRequest, map[tpKey]sentPart, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cfg := f.env.cfg
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.env.nodeID
	req.ReplicaState.ID = f.env.nodeID
	req.ReplicaState.Epoch = f.env.brokerEpoch()
	req.MaxWaitMillis = int32(min(cfg.MaxWait.Milliseconds(), 1<<31-1))
	req.MinBytes = cfg.MinBytes
	req.MaxBytes = cfg.ResponseMaxBytes
	req.IsolationLevel = 0
	var wait time.Duration
	sent := make(map[tpKey]sentPart, len(f.parts))
	want := make(map[tpKey]sessionFields, len(f.parts))
	fps := make(map[tpKey]kmsg.FetchRequestTopicPartition, len(f.parts))
	for _, st := range f.parts {
		if !st.fetchable(now) {
			if !st.fenced && !st.failed {
				if d := st.delayUntil.Sub(now); wait == 0 || d < wait {
					wait = d
				}
			}
			continue
		}
		if f.env.throttled(st) && f.env.quota.exceeded() {
			if wait == 0 || throttleRecheck < wait {
				wait = throttleRecheck
			}
			continue
		}
		p := st.p
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p.index
		fp.CurrentLeaderEpoch = st.epoch
		fp.FetchOffset = st.fetchOffset
		fp.LastFetchedEpoch = -1
		if e, _, ok := p.log.LeaderEpochs().Latest(); ok {
			fp.LastFetchedEpoch = e
		}
		fp.LogStartOffset = p.log.LogStartOffset()
		fp.PartitionMaxBytes = cfg.MaxBytes
		k := tpKey{p.topic, p.index}
		fps[k] = fp
		want[k] = sessionFields{topicID: st.topicID, fetchOffset: fp.FetchOffset, logStart: fp.LogStartOffset,
			leaderEpoch: fp.CurrentLeaderEpoch, lastFetchedEpoch: fp.LastFetchedEpoch, maxBytes: fp.PartitionMaxBytes}
		sent[k] = sentPart{st: st, gen: st.gen, fetchOffset: st.fetchOffset}
	}
	if len(sent) == 0 {
		return nil, nil, wait
	}
	// In a session only what changed goes on the wire; the leader reads
	// every partition of the session all the same.
	held := f.sess.held
	var send map[tpKey]bool
	var forget []tpKey
	req.SessionID, req.SessionEpoch, send, forget = f.sess.next(want)
	byTopic := map[string]int{}
	for k, fp := range fps {
		if !send[k] {
			continue
		}
		i, ok := byTopic[k.topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = k.topic, want[k].topicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[k.topic] = i
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, fp)
	}
	forgotten := map[string]int{}
	for _, k := range forget {
		i, ok := forgotten[k.topic]
		if !ok {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = k.topic, held[k].topicID
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
			i = len(req.ForgottenTopics) - 1
			forgotten[k.topic] = i
		}
		req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, k.partition)
	}
	for i := range req.Topics {
		slices.SortFunc(req.Topics[i].Partitions, func(a, b kmsg.FetchRequestTopicPartition) int { return int(a.Partition - b.Partition) })
	}
	for i := range req.ForgottenTopics {
		slices.Sort(req.ForgottenTopics[i].Partitions)
	}
	slices.SortFunc(req.Topics, func(a, b kmsg.FetchRequestTopic) int {
		switch {
		case a.Topic < b.Topic:
			return -1
		case a.Topic > b.Topic:
			return 1
		}
		return 0
	})
	return req, sent, 0
}

// backoff delays every partition of a failed request.
func (f *fetcher) backoff(sent map[tpKey]sentPart) {
	until := time.Now().Add(f.env.cfg.Backoff)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range sent {
		if f.current(s.st, s.gen) {
			s.st.delayUntil = until
		}
	}
}

// current reports whether st is still fetched in generation gen. f.mu held.
func (f *fetcher) current(st *followState, gen uint64) bool {
	return f.parts[st.p] == st && st.gen == gen
}

// process applies one Fetch response.
func (f *fetcher) process(sent map[tpKey]sentPart, resp *kmsg.FetchResponse) {
	type later struct {
		s  sentPart
		rp kmsg.FetchResponseTopicPartition
	}
	var outOfRange, tiered, epochQuery []later
	f.mu.Lock()
	// Under f.mu: add rewrites st.topicID when it restarts a partition in
	// a new epoch (a reassignment's completion bumps it under a leader
	// that stays).
	names := map[uuid.UUID]string{}
	for _, s := range sent {
		names[s.st.topicID] = s.st.p.topic
	}
	for _, t := range resp.Topics {
		name := t.Topic
		if name == "" {
			name = names[uuid.UUID(t.TopicID)]
		}
		for _, rp := range t.Partitions {
			s, ok := sent[tpKey{name, rp.Partition}]
			if !ok || !f.current(s.st, s.gen) || s.st.fetchOffset != s.fetchOffset {
				continue // restarted, moved or removed meanwhile
			}
			st := s.st
			if rp.ErrorCode != 0 {
				f.env.metrics.fetchError(errorName(rp.ErrorCode))
				f.sess.resend(tpKey{name, rp.Partition})
			}
			switch rp.ErrorCode {
			case 0:
				f.handleData(st, &rp)
				if st.needEpochQuery {
					st.needEpochQuery = false
					epochQuery = append(epochQuery, later{s, rp})
				}
			case kerr.OffsetOutOfRange.Code:
				outOfRange = append(outOfRange, later{s, rp})
			case kerr.OffsetMovedToTieredStorage.Code:
				tiered = append(tiered, later{s, rp})
			case kerr.FencedLeaderEpoch.Code:
				// Our epoch is older than the leader's: wait for the
				// metadata that says so.
				st.fenced = true
				f.env.logger.Info("broker: replica fetch fenced, waiting for new metadata", "topic", st.p.topic, "partition", st.p.index, "epoch", st.epoch)
			default:
				// UNKNOWN_LEADER_EPOCH (the leader has not seen our epoch
				// yet), NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_*, a storage
				// error on the leader, ...: retry after the backoff.
				st.delayUntil = time.Now().Add(f.env.cfg.Backoff)
				f.env.logger.Debug("broker: replica fetch partition error", "topic", st.p.topic, "partition", st.p.index, "err", kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	f.mu.Unlock()
	for _, l := range outOfRange {
		f.handleOutOfRange(l.s)
	}
	for _, l := range tiered {
		f.handleTiered(l.s, l.rp.LogStartOffset)
	}
	for _, l := range epochQuery {
		f.truncateByEpochQuery(l.s)
	}
}

// truncateByEpochQuery truncates by OffsetsForLeaderEpoch (KIP-101's way,
// before DivergingEpoch): the leader's end offset of our latest epoch, then
// divergenceTruncation as for a DivergingEpoch answer. When that leaves
// the log as it was, the partition backs off rather than spin.
func (f *fetcher) truncateByEpochQuery(s sentPart) {
	st, p := s.st, s.st.p
	latest, _, ok := p.log.LeaderEpochs().Latest()
	var epoch int32 = -1
	var end int64 = -1
	var err error
	if ok {
		ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
		epoch, end, err = f.epochEndOffset(ctx, st, latest)
		cancel()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.current(st, s.gen) {
		return
	}
	leo := p.log.LogEndOffset()
	off := leo
	if err == nil && ok {
		off, _ = divergenceTruncation(epoch, end, leo, p.log.LeaderEpochs().EndOffsetFor)
	}
	if off >= leo {
		f.env.logger.Warn("broker: follower log ends inside a leader batch and the leader's epochs do not say where it diverges, retrying",
			"topic", p.topic, "partition", p.index, "leo", leo, "epoch", latest, "leader_epoch", epoch, "leader_end_offset", end, "err", err)
		st.delayUntil = time.Now().Add(f.env.cfg.Backoff)
		return
	}
	if err := p.truncateAsFollower(off); err != nil {
		f.fail(st, "truncate", err)
		return
	}
	f.env.metrics.truncated()
	f.env.logger.Info("broker: follower truncated by OffsetsForLeaderEpoch", "topic", p.topic, "partition", p.index,
		"epoch", latest, "leader_epoch", epoch, "leader_end_offset", end, "from", leo, "to", p.log.LogEndOffset())
	f.nextGen++
	st.gen = f.nextGen
	st.fetchOffset = p.log.LogEndOffset()
}

// epochEndOffset asks the leader where epoch ends in its log
// (OffsetsForLeaderEpoch as a replica, with the current leader epoch).
func (f *fetcher) epochEndOffset(ctx context.Context, st *followState, epoch int32) (int32, int64, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = f.env.nodeID
	t := kmsg.NewOffsetForLeaderEpochRequestTopic()
	t.Topic = st.p.topic
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition = st.p.index
	f.mu.Lock()
	op.CurrentLeaderEpoch = st.epoch
	f.mu.Unlock()
	op.LeaderEpoch = epoch
	t.Partitions = append(t.Partitions, op)
	req.Topics = append(req.Topics, t)
	resp, err := f.ep.request(ctx, req)
	if err != nil {
		return -1, -1, err
	}
	or, ok := resp.(*kmsg.OffsetForLeaderEpochResponse)
	if !ok || len(or.Topics) != 1 || len(or.Topics[0].Partitions) != 1 {
		return -1, -1, errors.New("broker: OffsetsForLeaderEpoch answered another partition")
	}
	rp := or.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return -1, -1, err
	}
	return rp.LeaderEpoch, rp.EndOffset, nil
}

// handleData applies a partition's records, or the truncation its
// DivergingEpoch asks for. f.mu held.
func (f *fetcher) handleData(st *followState, rp *kmsg.FetchResponseTopicPartition) {
	p := st.p
	if rp.DivergingEpoch.Epoch >= 0 {
		// The leader found our log past the end of our last epoch on its
		// side (KIP-320 / Fetch v12): truncate, fetch again. It sends no
		// records with it.
		leo := p.log.LogEndOffset()
		off, done := divergenceTruncation(rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset, leo, p.log.LeaderEpochs().EndOffsetFor)
		if off <= leo {
			// At the LEO too: no record goes, but an epoch entry starting
			// there (ours from a leadership that appended nothing) does,
			// or we would send it as LastFetchedEpoch again and again.
			if err := p.truncateAsFollower(off); err != nil {
				f.fail(st, "truncate", err)
				return
			}
			if off < leo {
				f.env.metrics.truncated()
			}
		}
		f.env.logger.Info("broker: follower truncated by leader epoch", "topic", p.topic, "partition", p.index,
			"diverging_epoch", rp.DivergingEpoch.Epoch, "leader_end_offset", rp.DivergingEpoch.EndOffset, "from", leo, "to", p.log.LogEndOffset(), "complete", done)
		st.fetchOffset = p.log.LogEndOffset()
		return
	}
	if len(rp.RecordBatches) > 0 {
		if leo := p.log.LogEndOffset(); leo != st.fetchOffset {
			// Something else moved the log (cannot happen while this
			// fetcher owns it): fetch again from where it is.
			st.fetchOffset = leo
			return
		}
		recs, err := followerBatches(rp.RecordBatches, st.fetchOffset)
		if errors.Is(err, errStraddle) {
			// Our log ends inside one of the leader's batches: it differs
			// from the leader's there, and the leader did not say so with
			// DivergingEpoch (a peer that does not check LastFetchedEpoch).
			// Ask with OffsetsForLeaderEpoch instead (process does it after
			// this pass, without f.mu).
			st.needEpochQuery = true
			return
		}
		if err != nil {
			f.env.metrics.fetchError("CORRUPT_MESSAGE")
			f.env.logger.Warn("broker: replica fetch returned unusable batches, retrying", "topic", p.topic, "partition", p.index, "offset", st.fetchOffset, "err", err)
			st.delayUntil = time.Now().Add(f.env.cfg.Backoff)
			return
		}
		if len(recs) > 0 {
			start := time.Now()
			info, err := p.appendAsFollower(recs)
			if err != nil {
				if errors.Is(err, storage.ErrLogFailed) || errors.Is(err, storage.ErrClosed) || p.log.Failed() {
					f.fail(st, "append", err)
					return
				}
				f.env.metrics.fetchError("APPEND")
				f.env.logger.Warn("broker: follower append refused, retrying", "topic", p.topic, "partition", p.index, "offset", st.fetchOffset, "err", err)
				st.delayUntil = time.Now().Add(f.env.cfg.Backoff)
				return
			}
			f.env.metrics.appended(time.Since(start), info)
			if f.env.throttled(st) {
				f.env.quota.record(int64(len(recs)))
			}
			st.fetchOffset = info.LastOffset + 1
		}
	}
	leo := p.log.LogEndOffset()
	if rp.HighWatermark >= 0 {
		// Kafka's follower takes min(leader HW, LEO), backwards too: a
		// restarted follower's HW (its LEO here) may be above the real one.
		p.setFollowerHW(min(rp.HighWatermark, leo))
		p.followerHWKnown.Store(true)
	}
	if rp.LogStartOffset > p.log.LogStartOffset() && rp.LogStartOffset <= p.hw.Load() {
		if err := p.log.SetLogStartOffset(rp.LogStartOffset); err != nil {
			f.env.logger.Warn("broker: follower log start not moved", "topic", p.topic, "partition", p.index, "to", rp.LogStartOffset, "err", err)
		}
	}
	st.lag = max(0, rp.HighWatermark-st.fetchOffset)
}

// fail marks st failed: its local log cannot take the leader's data. f.mu
// held.
func (f *fetcher) fail(st *followState, what string, err error) {
	st.failed = true
	f.env.metrics.fetchError(errorName(kerr.KafkaStorageError.Code))
	f.env.logger.Error("broker: follower partition failed, no longer fetching", "topic", st.p.topic, "partition", st.p.index, "during", what, "err", err)
}

// handleOutOfRange handles OFFSET_OUT_OF_RANGE (Kafka's
// fetchOffsetAndTruncate): ask the leader's latest offset; below our LEO
// (an unclean election made a shorter log the leader's) truncate to it;
// else ask its earliest and, if ours ends below it, start over there.
// The ListOffsets round trips run without f.mu.
func (f *fetcher) handleOutOfRange(s sentPart) {
	st, p := s.st, s.st.p
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	leaderEnd, err := f.listOffset(ctx, st, -1)
	leaderStart := int64(-1)
	if err == nil && leaderEnd >= p.log.LogEndOffset() {
		leaderStart, err = f.listOffset(ctx, st, -2)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.current(st, s.gen) {
		return
	}
	if err != nil {
		f.env.logger.Warn("broker: follower out of range, leader offsets unknown", "topic", p.topic, "partition", p.index, "err", err)
		st.delayUntil = time.Now().Add(f.env.cfg.Backoff)
		return
	}
	leo, hw := p.log.LogEndOffset(), p.hw.Load()
	plan := outOfRangePlan(leo, leaderEnd, leaderStart)
	switch {
	case plan.truncateTo >= 0:
		if plan.truncateTo < hw {
			f.env.logger.Warn("broker: follower truncating below its high watermark: the leader's log is shorter (unclean leader election)",
				"topic", p.topic, "partition", p.index, "high_watermark", hw, "to", plan.truncateTo)
		}
		if err := p.truncateAsFollower(plan.truncateTo); err != nil {
			f.fail(st, "truncate", err)
			return
		}
		f.env.metrics.truncated()
	case plan.startAt >= 0:
		f.env.logger.Info("broker: follower below the leader's log start, starting over there", "topic", p.topic, "partition", p.index, "leo", leo, "leader_log_start", plan.startAt)
		if err := p.truncateFullyAsFollower(plan.startAt); err != nil {
			f.fail(st, "truncate", err)
			return
		}
		f.env.metrics.truncated()
	}
	f.nextGen++
	st.gen = f.nextGen
	st.fetchOffset = p.log.LogEndOffset()
}

// handleTiered handles OFFSET_MOVED_TO_TIERED_STORAGE: the leader's local
// log starts above our fetch offset, so our log restarts from the remote
// tier (n.rebuildFromTier, KIP-405's tier state machine) at the offset it
// returns. It runs under f.mu: it rewrites the log.
func (f *fetcher) handleTiered(s sentPart, leaderLogStart int64) {
	st, p := s.st, s.st.p
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	localStart, err := f.listOffset(ctx, st, -4) // EARLIEST_LOCAL (ListOffsets v8+)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.current(st, s.gen) {
		return
	}
	var at int64
	if err == nil {
		at, err = f.env.rebuild(ctx, p, leaderLogStart, localStart)
	}
	if err != nil {
		f.env.logger.Warn("broker: follower rebuild from the remote tier failed, retrying", "topic", p.topic, "partition", p.index, "err", err)
		st.delayUntil = time.Now().Add(f.env.cfg.Backoff)
		return
	}
	p.clampHW()
	f.nextGen++
	st.gen = f.nextGen
	st.fetchOffset = at
	if leo := p.log.LogEndOffset(); leo != at {
		st.fetchOffset = leo
	}
}

// listOffset asks the leader for one of p's offsets (-1 latest: its LEO
// for a replica; -2 earliest; -4 earliest local) as a replica would, with
// the current leader epoch.
func (f *fetcher) listOffset(ctx context.Context, st *followState, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = f.env.nodeID
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = st.p.topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition = st.p.index
	f.mu.Lock()
	lp.CurrentLeaderEpoch = st.epoch
	f.mu.Unlock()
	lp.Timestamp = ts
	t.Partitions = append(t.Partitions, lp)
	req.Topics = append(req.Topics, t)
	resp, err := f.ep.request(ctx, req)
	if err != nil {
		return -1, err
	}
	lr, ok := resp.(*kmsg.ListOffsetsResponse)
	if !ok || len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 {
		return -1, errors.New("broker: ListOffsets answered another partition")
	}
	rp := lr.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return -1, err
	}
	return rp.Offset, nil
}

// setFollowerHW sets a follower's high watermark to hw (the caller took
// min(leader HW, LEO)), waking waiters when it changed.
func (p *partition) setFollowerHW(hw int64) {
	if p.hw.Swap(hw) != hw {
		p.log.SetHighWatermark(hw) // for the replication-offset-checkpoint
		p.wake()
	}
}

// clampHW keeps the high watermark within [log start, LEO] after the log
// was rewritten under it.
func (p *partition) clampHW() {
	p.clampHWWithin(p.log.LogStartOffset(), p.log.LogEndOffset())
}

// clampHWWithin moves the high watermark into [lo, hi].
func (p *partition) clampHWWithin(lo, hi int64) {
	for {
		hw := p.hw.Load()
		to := min(max(hw, lo), hi)
		if hw == to {
			return
		}
		if p.hw.CompareAndSwap(hw, to) {
			p.log.SetHighWatermark(to)
			return
		}
	}
}
