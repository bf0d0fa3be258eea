package broker

// The group coordinator's node wiring: the internal topic
// __consumer_offsets, which of its partitions this broker coordinates, the
// load of a partition when this broker becomes its leader, the
// [group.Store] of committed offsets (and the Persister the membership
// state machine writes group metadata through), offsets retention, and the
// consumer-lag metric.
//
// Partition lifecycle, driven by reconcile (reconcile.go) through
// offsetsPartitionChanged:
//
//	NotOwned --leader--> Loading --HW at the epoch start, replayed to the HW--> Loaded
//	    ^                   |                               |
//	    +---- not leader / dropped (load cancelled, unload) +
//
// While Loading, requests for its groups get COORDINATOR_LOAD_IN_PROGRESS;
// NotOwned gives NOT_COORDINATOR. A load reads the log from its start to
// the high watermark with storage.Log.Read, hands each batch to a
// group.Loader (offsets into the store), then the newest group metadata of
// each group to Coordinator.LoadGroup, and only then marks the partition
// Loaded, in both the offsets half (here) and the membership half.
//
// Writes (commits, group metadata, tombstones) go through the partition's
// leader append path (partition.appendRecords, as Produce), so the high
// watermark, fetch wake-ups and per-topic metrics follow; a commit (and
// SyncGroup's group metadata) is acknowledged only once the high watermark
// covers its batch, as an acks=all produce (offsets.commit.timeout.ms).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage"
)

// offsetsTopic is Kafka's internal topic of committed offsets and group
// metadata.
const offsetsTopic = "__consumer_offsets"

// loadReadBytes is how much of a __consumer_offsets log one read of a load
// takes (Kafka: offsets.load.buffer.size, 5 MiB).
const loadReadBytes = 5 << 20

// groupCoordinator is the node's half of the group coordinator. Its
// methods are safe for concurrent use.
type groupCoordinator struct {
	n       *Node
	store   *group.Store
	members *group.Coordinator
	cgs     *consumerGroups // KIP-848 consumer groups (consumer_groups.go)
	sgs     *shareGroups    // KIP-932 share groups' membership (share_groups.go)

	mu     sync.Mutex                     // guards states, loads
	states map[int32]group.PartitionState // __consumer_offsets partition → state (absent: NotOwned)
	loads  map[int32]context.CancelFunc   // running loads

	// loadHook, if set (tests), runs at the start of each partition load,
	// before any read: a slow load is a hook that blocks.
	loadHook atomic.Pointer[func(partition int32)]

	// verifyHook, if set (tests before the transaction coordinator is
	// reachable), answers TxnOffsetCommit's KIP-890 verification instead
	// of Node.verifyTxnPartitions.
	verifyHook atomic.Pointer[func(txnID string, producerID int64, epoch int16, tps map[string][]int32) map[string]map[int32]int16]

	// appendHook, if set (tests), runs before each append to a
	// __consumer_offsets partition; an error fails the append.
	appendHook atomic.Pointer[func(partition int32) error]

	// expiryPasses counts completed offset expiry passes (run), so a test
	// can wait for the expiry to have had its chance.
	expiryPasses atomic.Uint64

	commits     prometheus.Counter
	commitFails prometheus.Counter
}

func newGroupCoordinator(n *Node) *groupCoordinator {
	gc := &groupCoordinator{n: n, states: map[int32]group.PartitionState{}, loads: map[int32]context.CancelFunc{}}
	gc.store = group.NewStore(group.StoreOptions{Append: gc.append})
	gc.members = group.NewCoordinator(group.Options{
		Persister: gc.store, Logger: n.logger, Registry: n.reg, Partitions: n.cfg.OffsetsTopicPartitions,
		InitialRebalanceDelay: n.cfg.GroupInitialRebalanceDelay,
		MinSessionTimeout:     n.cfg.GroupMinSessionTimeout, MaxSessionTimeout: n.cfg.GroupMaxSessionTimeout,
		MaxSize: n.cfg.GroupMaxSize,
	})
	gc.cgs = newConsumerGroups(gc, n.consumerGroupConfig())
	gc.sgs = newShareGroups(gc, n.shareGroupsConfig())
	gc.commits = prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "group",
		Name: "offset_commits_total", Help: "offsets committed (one per partition of a successful OffsetCommit)"})
	gc.commitFails = prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "group",
		Name: "offset_commit_failures_total", Help: "partitions of OffsetCommit requests answered with an error"})
	for _, c := range []prometheus.Collector{gc.commits, gc.commitFails, &lagCollector{gc: gc}} {
		if err := n.reg.Register(c); err != nil {
			n.logger.Warn("broker: register group metrics", "err", err)
		}
	}
	return gc
}

// close stops every load and the membership timers.
func (gc *groupCoordinator) close() {
	gc.mu.Lock()
	for p, cancel := range gc.loads {
		cancel()
		delete(gc.loads, p)
	}
	gc.mu.Unlock()
	gc.members.Close()
	gc.cgs.close()
	gc.sgs.close()
}

// append is the store's [group.AppendFunc]: the leader append path of the
// hosted __consumer_offsets partition, as durable as acks=all (Kafka
// appends group writes with acks -1): NOT_ENOUGH_REPLICAS before the
// append while the ISR is below min ISR, then a wait of up to
// offsets.commit.timeout.ms (and ctx) for the high watermark to cover the
// batch; REQUEST_TIMED_OUT if it does not, NOT_LEADER_OR_FOLLOWER if the
// leadership moves meanwhile (the commit's answer: NOT_COORDINATOR). The
// store makes a write visible only once this returns nil, so the in-memory
// state never shows what a new leader could lose.
func (gc *groupCoordinator) append(ctx context.Context, partition int32, b []byte, appended func(int64)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if h := gc.appendHook.Load(); h != nil {
		if err := (*h)(partition); err != nil {
			return err
		}
	}
	p := gc.n.partition(offsetsTopic, partition)
	if p == nil || !p.leader.Load() {
		return fmt.Errorf("broker: %s-%d not led here: %w", offsetsTopic, partition, kerr.NotCoordinator)
	}
	if err := p.acksAllCheck(); err != nil {
		return fmt.Errorf("broker: append to %s-%d: %w", offsetsTopic, partition, err)
	}
	epoch := p.leaderEpoch.Load()
	res, err := p.appendCoordinatorBatch(b, epoch, appended)
	if err != nil {
		if errors.Is(err, storage.ErrLogFailed) || errors.Is(err, storage.ErrClosed) {
			return fmt.Errorf("broker: append to %s-%d: %w (%w)", offsetsTopic, partition, kerr.CoordinatorNotAvailable, err)
		}
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, gc.n.cfg.OffsetsCommitTimeout)
	defer cancel()
	switch err := p.waitHWInEpoch(wctx, res.lastOffset, epoch); {
	case err == nil:
		if err := p.acksAllResult(); err != nil {
			return fmt.Errorf("broker: %s-%d: %w", offsetsTopic, partition, err)
		}
		return nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("broker: %s-%d: the ISR did not take the write within offsets.commit.timeout.ms: %w", offsetsTopic, partition, kerr.RequestTimedOut)
	default:
		return fmt.Errorf("broker: %s-%d: %w", offsetsTopic, partition, err)
	}
}

// numPartitions is the partition count of __consumer_offsets in the
// metadata view, 0 while it does not exist.
func (gc *groupCoordinator) numPartitions() int32 {
	var n int32
	gc.n.view(func(st *metadata.State) {
		if t, ok := st.TopicByName(offsetsTopic); ok {
			n = int32(len(st.Partitions(t.ID)))
		}
	})
	return n
}

// partitionOf returns group's __consumer_offsets partition, and the error
// its requests get here: COORDINATOR_NOT_AVAILABLE while the topic does not
// exist, NOT_COORDINATOR unless this broker leads the partition,
// COORDINATOR_LOAD_IN_PROGRESS while it loads.
func (gc *groupCoordinator) partitionOf(groupID string) (int32, error) {
	n := gc.numPartitions()
	if n == 0 {
		return -1, kerr.CoordinatorNotAvailable
	}
	p := group.PartitionFor(groupID, n)
	gc.mu.Lock()
	st := gc.states[p]
	gc.mu.Unlock()
	switch st {
	case group.Loaded:
		return p, nil
	case group.Loading:
		return p, kerr.CoordinatorLoadInProgress
	default:
		return p, kerr.NotCoordinator
	}
}

// offsetsPartitionChanged is called by reconcile for each hosted
// __consumer_offsets partition after its leadership is set (p nil: the
// partition was dropped). Becoming leader starts a load; losing it
// cancels a load and unloads the partition's groups.
func (gc *groupCoordinator) offsetsPartitionChanged(index int32, p *partition) {
	lead := p != nil && p.leader.Load()
	gc.mu.Lock()
	st := gc.states[index]
	switch {
	case lead && st == group.NotOwned:
		ctx, cancel := context.WithCancel(gc.n.ctx)
		gc.states[index] = group.Loading
		gc.loads[index] = cancel
		gc.mu.Unlock()
		gc.members.SetPartitionState(index, group.Loading)
		gc.n.loops.Add(1)
		go func() {
			defer gc.n.loops.Done()
			gc.load(ctx, index, p)
		}()
		return
	case !lead && st != group.NotOwned:
		if cancel := gc.loads[index]; cancel != nil {
			cancel()
			delete(gc.loads, index)
		}
		delete(gc.states, index)
		gc.mu.Unlock()
		gc.members.SetPartitionState(index, group.NotOwned)
		gc.cgs.unload(index)
		gc.sgs.unload(index)
		gc.store.Unload(index)
		return
	}
	gc.mu.Unlock()
}

// load replays the partition's log into the store and the membership,
// then marks it Loaded (unless leadership moved meanwhile). A failed
// read leaves it Loading and retries after a second: clients keep getting
// COORDINATOR_LOAD_IN_PROGRESS, as Kafka's do while its loader retries.
func (gc *groupCoordinator) load(ctx context.Context, index int32, p *partition) {
	if h := gc.loadHook.Load(); h != nil {
		(*h)(index)
	}
	for {
		start := time.Now()
		l, err := gc.replay(ctx, index, p)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			gc.mu.Lock()
			if ctx.Err() != nil {
				gc.mu.Unlock()
				return
			}
			// Membership first: a group is Loaded in both halves before any
			// request is routed to it.
			l.Finish(gc.members.LoadGroup)
			consumerGroups := map[string]bool{}
			for _, id := range gc.cgs.load(index, l.ConsumerRecords()) {
				consumerGroups[id] = true
				gc.members.RemoveEmptyGroup(id) // an Empty classic group a consumer group took over
			}
			for _, id := range gc.sgs.load(index, l.ShareRecords()) {
				consumerGroups[id] = true // not a classic group either
			}
			for _, g := range gc.store.GroupsOf(index) {
				if !consumerGroups[g] {
					gc.members.EnsureGroup(index, g) // offsets only: an Empty group, as Kafka lists it
				}
			}
			gc.members.SetPartitionState(index, group.Loaded)
			gc.states[index] = group.Loaded
			delete(gc.loads, index)
			gc.mu.Unlock()
			gc.n.logger.Info("broker: loaded group coordinator partition", "partition", index,
				"records", l.Records, "took", time.Since(start))
			return
		}
		gc.n.logger.Warn("broker: load group coordinator partition, retrying", "partition", index, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// replay reads p's log from its start to its high watermark, batch by
// batch, into a new loader. Only committed records are replayed: a write
// above the HW may still be truncated away. A new leader's HW can lag its
// log (it learnt the HW one fetch late), while everything below the start
// of its leader epoch was committed by an earlier leader or will be once
// the ISR has caught up: so the replay first waits (Loading, clients
// retry) for the HW to reach that start, or it would miss acknowledged
// commits.
func (gc *groupCoordinator) replay(ctx context.Context, index int32, p *partition) (*group.Loader, error) {
	l := group.NewLoader(gc.store, index)
	if err := p.replayBatches(ctx, l.Batch); err != nil {
		return nil, err
	}
	return l, nil
}

// replayBatches hands fn every batch of p's log from its start to its HW
// in order, once the HW has reached this leader epoch's start offset (see
// groupCoordinator.replay): the load of both coordinators.
func (p *partition) replayBatches(ctx context.Context, fn func(batch []byte) error) error {
	if start := p.epochStartOffset(); start > 0 {
		if err := p.waitHW(ctx, start-1); err != nil {
			return err
		}
	}
	off, end := p.log.LogStartOffset(), p.hw.Load()
	for off < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		v, err := p.log.Read(off, loadReadBytes, end)
		if err != nil {
			return err
		}
		b, err := v.Bytes()
		v.Release()
		if err != nil {
			return err
		}
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			one, rest, err := batch.Split(b)
			if err != nil {
				return err
			}
			if err := fn(one); err != nil {
				return err
			}
			b = rest
		}
		off = v.NextOffset
	}
	return nil
}

// ensureOffsetsTopic creates __consumer_offsets unless it exists, as
// Kafka does on the first FindCoordinator: offsets.topic.num.partitions,
// offsets.topic.replication.factor capped at the live brokers,
// cleanup.policy=compact, segment.bytes=offsets.topic.segment.bytes,
// compression.type=producer (the coordinator writes uncompressed
// batches). It waits (up to ctx) for the partitions to be led.
func (gc *groupCoordinator) ensureOffsetsTopic(ctx context.Context) error {
	if gc.numPartitions() > 0 {
		return nil
	}
	rf := gc.n.cfg.OffsetsTopicReplicationFactor
	live := 0
	gc.n.view(func(st *metadata.State) {
		for _, b := range st.Brokers() {
			if !b.Fenced {
				live++
			}
		}
	})
	if live > 0 && int(rf) > live {
		rf = int16(live)
	}
	release, err := gc.n.reservePartitions(gc.n.onThisNode(int64(gc.n.cfg.OffsetsTopicPartitions), rf, nil))
	if err != nil {
		return err
	}
	defer release()
	res, err := gc.n.svc.CreateTopics(ctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{
		Name: offsetsTopic, NumPartitions: gc.n.cfg.OffsetsTopicPartitions, ReplicationFactor: rf,
		Configs: map[string]string{
			metadata.ConfigCleanupPolicy:   "compact",
			metadata.ConfigSegmentBytes:    fmt.Sprint(gc.n.cfg.OffsetsTopicSegmentBytes),
			metadata.ConfigCompressionType: "producer",
		},
	}}})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return r.Err
		}
	}
	if !gc.n.waitTopics(ctx, []string{offsetsTopic}) {
		return ctx.Err()
	}
	return nil
}

// run expires offsets every offsets.retention.check.interval.ms. The
// internal topic is not created here but by the first FindCoordinator
// (Kafka's way), so a node nobody uses as a coordinator hosts no
// __consumer_offsets logs.
func (gc *groupCoordinator) run(ctx context.Context) {
	every(ctx, gc.n.cfg.OffsetsRetentionCheckInterval, func() {
		gc.expireOffsets(ctx)
		gc.expiryPasses.Add(1)
	})
}

// every runs fn every d until ctx ends (the first run after d).
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// expireOffsets removes the expired offsets (KIP-211): those of groups
// that are Empty (or unknown to the membership: simple consumers) past
// offsets.retention.minutes after their commit.
func (gc *groupCoordinator) expireOffsets(ctx context.Context) int {
	n, emptied, err := gc.store.ExpireOffsets(ctx, gc.n.cfg.OffsetsRetention, gc.expirable(ctx))
	if err != nil && ctx.Err() == nil {
		gc.n.logger.Warn("broker: expire offsets", "err", err)
	}
	// An Empty group whose last offset expired is removed, with its
	// tombstone (Kafka's cleanupGroupMetadata).
	for _, g := range emptied {
		if st, ok := gc.members.GroupState(g.Group); ok && st != "Empty" {
			continue
		}
		if handled, code := gc.cgs.dropEmpty(ctx, g.Group, false); handled && code != 0 {
			continue // a consumer group with members (or its tombstones failed)
		}
		gc.members.RemoveEmptyGroup(g.Group)
		if err := gc.store.DeleteGroup(ctx, g.Partition, g.Group); err != nil && ctx.Err() == nil {
			gc.n.logger.Warn("broker: remove expired group", "group", g.Group, "err", err)
		}
	}
	if n > 0 {
		gc.n.logger.Info("broker: expired committed offsets", "count", n)
	}
	return n
}

// expirable returns the retention check's view of the groups: an offset
// may expire by age when its group has no members (Empty, Dead, or never
// joined through the coordinator) or, KIP-496, when no member of a
// consumer group subscribes to its topic. Each group is asked once per
// pass. It never calls into the store (the store holds its lock while
// asking).
func (gc *groupCoordinator) expirable(ctx context.Context) func(groupID, topic string) bool {
	type inUse struct {
		topics map[string]bool
		all    bool
	}
	cache := map[string]inUse{}
	return func(groupID, topic string) bool {
		u, ok := cache[groupID]
		if !ok {
			var err error
			u.topics, u.all, err = gc.topicsInUse(ctx, groupID)
			u.all = u.all || err != nil
			cache[groupID] = u
		}
		return !u.all && !u.topics[topic]
	}
}

// topicsInUse returns the topics a group's members subscribe to: none for
// a group without members, all (unknown) when the group is not a consumer
// group or a subscription does not decode (ConsumerMemberMetadata).
func (gc *groupCoordinator) topicsInUse(ctx context.Context, groupID string) (topics map[string]bool, all bool, err error) {
	if topics, all, known := gc.cgs.subscribed(groupID); known {
		return topics, all, nil // a KIP-848 consumer group: its members' subscriptions
	}
	st, known := gc.members.GroupState(groupID)
	if !known || st == "Empty" || st == "Dead" {
		return nil, false, nil
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{groupID}
	dresp := gc.members.DescribeGroups(ctx, dreq)
	if len(dresp.Groups) != 1 {
		return nil, false, kerr.CoordinatorNotAvailable
	}
	g := dresp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return nil, false, err
	}
	if g.ProtocolType != "consumer" {
		return nil, true, nil
	}
	topics = map[string]bool{}
	for _, m := range g.Members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.ProtocolMetadata); err != nil {
			return nil, true, nil
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics, false, nil
}

// lagCollector exports strata_consumer_group_lag{group,topic,partition}
// at scrape time: the partition's high watermark minus the group's
// committed offset (never below 0), for partitions this broker leads.
type lagCollector struct{ gc *groupCoordinator }

var lagDesc = prometheus.NewDesc("strata_consumer_group_lag",
	"high watermark minus the group's committed offset, per partition this broker leads",
	[]string{"group", "topic", "partition"}, nil)

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- lagDesc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	type row struct {
		group string
		tp    group.TopicPartition
		off   int64
	}
	var rows []row
	c.gc.store.Each(func(g string, tp group.TopicPartition, o group.Offset) {
		rows = append(rows, row{g, tp, o.Offset})
	})
	for _, r := range rows {
		p := c.gc.n.partition(r.tp.Topic, r.tp.Partition)
		if p == nil || !p.leader.Load() {
			continue
		}
		lag := max(p.hw.Load()-r.off, 0)
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(lag),
			r.group, r.tp.Topic, fmt.Sprint(r.tp.Partition))
	}
}
