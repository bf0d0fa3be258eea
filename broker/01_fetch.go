package broker

// Fetch (key 1), versions 4 (the first with record batch v2) through
// kmsg's newest (18; topics by id from v13).
//
// Behaviour: each partition is read from its log at the fetch offset, up to
// the high watermark, as whole batches exactly as stored. Byte limits
// follow KIP-74: PartitionMaxBytes per partition and MaxBytes for the
// response, except that the first batch of the first partition with data
// is returned whole even when larger, so a consumer always makes progress.
// Later partitions whose next batch does not fit the remaining budget get
// no records.
//
// Fetch sessions (KIP-227, v7+): see fetch_session.go. A full fetch with
// epoch 0 creates a session; incremental fetches name only the partitions
// that changed and are answered only with the partitions that changed.
//
// Long polling ("purgatory"): when fewer than MinBytes are available and
// MaxWaitMs > 0, the request registers a waiter on each of its partitions
// (partition.addWaiter) and sleeps until an append raises one's high
// watermark (or reconcile drops its leadership), the deadline passes, or
// the connection or node closes; no polling loop. On a wake only what can
// have changed is read again: partitions whose high watermark moved (a
// partition with no data and an unchanged high watermark still has none);
// everything is read again when a partition lost its leadership or leader
// epoch, or its log start passed the fetch offset (see readFetch). A
// partition with an error answers the fetch at once, as in Kafka's
// DelayedFetch.
//
// Zero copy: record bytes never enter the Go heap. The response is encoded
// by kmsg with a unique 20-byte placeholder in each partition's
// RecordBatches; the placeholders are then found in order and cut out,
// their length prefixes (int32 before v12, uvarint from v12) rewritten for
// the real size, and the frame remembers where each storage ReadView goes.
// The writer sends the bytes around the regions and sendfile(2)s each
// region from the segment file. (The alternative, hand-encoding everything
// but the records, would duplicate kmsg's codec for 15 versions.)
//
// Errors per partition: UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID,
// INCONSISTENT_TOPIC_ID (a session's topic id no longer behind the name),
// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (v9+,
// KIP-320), OFFSET_OUT_OF_RANGE (below the log start offset or past the
// log end offset), KAFKA_STORAGE_ERROR. A partition with an error carries
// -1 as high watermark, last stable offset and log start offset, as in
// Kafka; the others carry all three. Errors of the whole request (session
// errors) are top-level, with no partitions.
//
// Follower fetches (REPLICATION.md §1.3): a fetch from replica id >= 0
// (ReplicaState v15+, ReplicaID before) is checked for the leader epoch
// (FENCED/UNKNOWN_LEADER_EPOCH), the assignment (a non-replica gets
// UNKNOWN_LEADER_EPOCH when it sent an epoch, else NOT_LEADER_OR_FOLLOWER)
// and its broker epoch (KIP-903: older than the registered one is
// NOT_LEADER_OR_FOLLOWER). The leader's log start and LEO are taken before
// the read. With LastFetchedEpoch (v12+, any fetch, as Kafka) the epoch's
// end offset in the leader's epoch cache decides: undefined, or a fetch
// offset below the log start, is OFFSET_OUT_OF_RANGE; an older epoch or an
// end below the fetch offset answers DivergingEpoch{Epoch, EndOffset} at
// once, without records or a state update. A follower reads up to the LEO
// (consumers up to the HW); a fetch offset in [log start, local start) of
// a remote-storage log is OFFSET_MOVED_TO_TIERED_STORAGE with HW and log
// start. Then the follower's state is updated (replica_leader.go), which
// may move the HW and expand the ISR. A parked follower fetch also answers
// when the HW moves, and carries the HW as it is when answered, so
// followers learn it one fetch later at most. Followers' sessions are
// privileged in the session cache, as in Kafka.
//
// Consumers: an offset in (HW, LEO] is not out of range (empty, or parked);
// above the LEO it is.
//
// Transactions: every partition answered carries the last stable offset
// (storage.Log.LastStableOffset: min(first unstable offset, HW)). A
// consumer's read_committed fetch (isolation_level 1) reads only below it,
// as a follower serving KIP-392 reads does with its own, and lists the
// aborted transactions (producer id, first offset) whose range overlaps
// the batches it sends, from the segments' .txnindex; the client drops
// their records. Followers' fetches read to the LEO regardless.
//
// Differences from Kafka: CurrentLeader (v12+) is not filled in on
// leadership errors.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/quota"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/checkpoint"
)

func init() { register(1, 4, handleFetch) }

const markerLen = 20

// fetchPart is one partition a fetch reads: from the request (sessionless
// and full fetches) or from the session (incremental fetches).
type fetchPart struct {
	topic       string   // "" when an id did not resolve
	topicID     [16]byte // v13+
	partition   int32
	fetchOffset int64
	maxBytes    int32
	leaderEpoch int32
	sp          *sessionPart // the session's entry, for sessions

	// Follower fetches (replica >= 0): who, and what it sent.
	replica          int32
	replicaEpoch     int64 // broker epoch (ReplicaState, v15+); -1 unknown
	lastFetchedEpoch int32 // v12+; -1 none
	followerStart    int64 // the follower's log start offset (v5+)

	p         *partition
	err       error
	view      storage.ReadView
	hasView   bool
	read      bool  // read at least once
	readHW    int64 // the bound the last read stopped at: the HW (consumers) or LEO (followers)
	hwSeen    int64 // followers: the HW after the last read's state update
	diverging *kmsg.FetchResponseTopicPartitionDivergingEpoch

	// KIP-392: a consumer of Fetch v11+ may read from a follower (anyReplica),
	// and names its rack; preferred is the replica a leader sent it to (-1
	// none); asFollower says the part was served by this broker as follower.
	anyReplica bool
	clientRack string
	preferred  int32
	asFollower bool

	// readCommitted: a consumer's fetch with isolation_level=1, bounded
	// by the last stable offset and answered with the aborted
	// transactions of the range it reads.
	readCommitted bool
	// fromRemote: the view came from the remote tier, with its aborted
	// transactions (tier.abortedTxns) in remoteAborted.
	fromRemote    bool
	remoteAborted []storage.AbortedTxn
}

// checkServe returns the error this broker answers the part with before
// reading, if any: as leader, checkLeader's; a consumer of Fetch v11+
// (KIP-392) may also be served by a follower of the partition, in the
// leader epoch it names, once that follower has its high watermark from
// the current leader (until then it could show records above the real
// one: NOT_LEADER_OR_FOLLOWER sends the consumer to the leader).
func (fp *fetchPart) checkServe() error {
	p := fp.p
	fp.asFollower = false
	if fp.follower() || !fp.anyReplica || p.leader.Load() {
		return p.checkLeader(fp.leaderEpoch)
	}
	if !p.followerHWKnown.Load() {
		return kerr.NotLeaderForPartition
	}
	if fp.leaderEpoch >= 0 {
		switch e := p.leaderEpoch.Load(); {
		case fp.leaderEpoch < e:
			return kerr.FencedLeaderEpoch
		case fp.leaderEpoch > e:
			return kerr.UnknownLeaderEpoch
		}
	}
	fp.asFollower = true
	return nil
}

// follower reports whether the part is a follower's fetch.
func (fp *fetchPart) follower() bool { return fp.replica >= 0 }

// bound is how far the part may read: the LEO for a follower, the HW for
// a consumer, the last stable offset for a read_committed consumer (on a
// follower serving KIP-392 reads too: its log's LSO is bounded by the HW
// it learned from the leader).
func (fp *fetchPart) bound() int64 {
	if fp.follower() {
		return fp.p.log.LogEndOffset()
	}
	hw := fp.p.hw.Load()
	if fp.readCommitted {
		return min(hw, fp.p.log.LastStableOffset())
	}
	return hw
}

// fetchKind is how a fetch relates to fetch sessions.
type fetchKind int

const (
	fetchSessionless fetchKind = iota // no session: answer every partition
	fetchFull                         // answer every partition, then create a session
	fetchIncremental                  // read the session, answer what changed
)

func handleFetch(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.FetchRequest)
	resp := kmsg.NewPtrFetchResponse()
	kind, sess, parts, err := n.fetchContext(req, r.version)
	if err != nil {
		resp.ErrorCode = errCode(err)
		return encodeResponse(r, resp), nil
	}
	replica, replicaEpoch := fetchReplica(req, r.version)
	for i := range parts {
		parts[i].replica, parts[i].replicaEpoch = replica, replicaEpoch
		parts[i].preferred = -1
		parts[i].readCommitted = replica < 0 && req.IsolationLevel == 1
		if r.version >= 11 && replica < 0 {
			parts[i].anyReplica, parts[i].clientRack = true, req.Rack
		}
	}
	// Kafka's checks (authorize.go): a follower needs CLUSTER_ACTION, a
	// consumer READ on each topic; a part refused is
	// TOPIC_AUTHORIZATION_FAILED and read no further.
	if az := n.authorizer(); az != nil {
		clusterOK := replica < 0 || r.allowedCluster(az, authz.OpClusterAction)
		for i := range parts {
			if fp := &parts[i]; fp.topic != "" && (!clusterOK || replica < 0 && !r.allowed(az, authz.OpRead, authz.ResTopic, fp.topic)) {
				fp.p, fp.err = nil, kerr.TopicAuthorizationFailed
			}
		}
	}

	// Quotas (quotas.go): a follower is exempt; a consumer reads at most
	// what its consumer_byte_rate allows in a window.
	r.exempt = replica >= 0
	if mb := n.fetchQuotaMaxBytes(r); replica < 0 && mb >= 0 && int64(req.MaxBytes) > mb {
		req.MaxBytes = int32(max(mb, 1))
	}

	wait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	deadline := time.Now().Add(wait)
	var w *waiter
	var timer *time.Timer
	stopping := false
	defer func() {
		if w != nil {
			for i := range parts {
				if parts[i].p != nil {
					parts[i].p.removeWaiter(w)
				}
			}
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		// Register before reading, so an append between the read and the
		// wait still wakes us.
		if w == nil && wait > 0 && req.MinBytes > 0 {
			w = newWaiter()
			for i := range parts {
				if parts[i].p != nil {
					parts[i].p.addWaiter(w)
				}
			}
		}
		total, anyErr, remote := n.readFetch(ctx, parts, req.MaxBytes)
		// A fetch that read the remote tier answers at once: it already
		// waited (up to remote.fetch.max.wait.ms) for the bucket. A
		// follower's answers when the HW moved, so it learns the HW now.
		if anyErr || remote || total >= int64(max(req.MinBytes, 1)) || w == nil || ctx.Err() != nil || stopping || followerHWMoved(parts) {
			break
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if timer == nil {
			timer = time.NewTimer(left)
		} else {
			timer.Reset(left)
		}
		waitStart := time.Now()
		select {
		case <-w.c:
		case <-timer.C:
		case <-ctx.Done():
		case <-n.stopping:
			stopping = true // shutdown: answer with what there is now
		}
		r.waited += time.Since(waitStart)
	}

	// consumer_byte_rate (quotas.go): a throttled fetch takes its bytes
	// back and answers empty, with the throttle, as Kafka's.
	if replica < 0 {
		var size int64
		for i := range parts {
			if parts[i].hasView {
				size += parts[i].view.Size
			}
		}
		if n.recordQuota(r, quota.Fetch, float64(size)) > 0 {
			n.unrecordQuota(r, quota.Fetch, float64(size))
			for i := range parts {
				if parts[i].hasView {
					parts[i].view.Release()
					parts[i].hasView = false
				}
			}
			if kind == fetchIncremental {
				resp.SessionID = sess.id
			}
			return encodeResponse(r, resp), nil
		}
	}

	answered := respondState(parts)
	switch kind {
	case fetchFull:
		sps := make([]*sessionPart, len(parts))
		for i := range parts {
			sps[i] = parts[i].sessionPart(r.version >= 13, answered[i])
		}
		if len(sps) == 0 {
			break // nothing to keep a session for
		}
		if s := n.fetchSessions.create(fetchPrivileged(req, r.version), r.version >= 13, sps); s != nil {
			resp.SessionID = s.id
		}
	case fetchIncremental:
		resp.SessionID = sess.id
		answered = sess.update(parts, answered)
	}
	return encodeFetch(r, resp, parts, answered)
}

// fetchReplica returns the fetching replica's id (-1: a consumer) and
// broker epoch (-1 unknown): ReplicaState from v15 (KIP-903), ReplicaID
// before.
func fetchReplica(req *kmsg.FetchRequest, version int16) (int32, int64) {
	if version >= 15 {
		if req.ReplicaState.ID >= 0 {
			return req.ReplicaState.ID, req.ReplicaState.Epoch
		}
		return -1, -1
	}
	if req.ReplicaID >= 0 {
		return req.ReplicaID, -1
	}
	return -1, -1
}

// followerHWMoved reports whether a follower's part without data has seen
// the HW move since its read: the parked fetch answers with it.
func followerHWMoved(parts []fetchPart) bool {
	for i := range parts {
		fp := &parts[i]
		if fp.follower() && fp.p != nil && fp.read && !fp.hasView && fp.err == nil && fp.p.hw.Load() != fp.hwSeen {
			return true
		}
	}
	return false
}

// fetchPrivileged reports whether the fetch comes from a follower.
func fetchPrivileged(req *kmsg.FetchRequest, version int16) bool {
	if version >= 15 {
		return req.ReplicaState.ID >= 0
	}
	return req.ReplicaID >= 0
}

// fetchContext decides the fetch's kind (see fetch_session.go) and the
// partitions it reads. The error is a top-level one
// (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
// FETCH_SESSION_TOPIC_ID_ERROR).
func (n *Node) fetchContext(req *kmsg.FetchRequest, version int16) (fetchKind, *fetchSession, []fetchPart, error) {
	byID := version >= 13
	fromRequest := func() []fetchPart {
		var parts []fetchPart
		for ti := range req.Topics {
			t := &req.Topics[ti]
			name, _, _ := n.resolveTopic(byID, t.Topic, t.TopicID)
			for _, rp := range t.Partitions {
				parts = append(parts, newFetchPart(name, t.TopicID, byID, &rp, version))
			}
		}
		return parts
	}
	if version < 7 {
		return fetchSessionless, nil, n.resolveParts(fromRequest(), byID), nil
	}
	switch req.SessionEpoch {
	case -1, 0:
		if req.SessionID != 0 {
			n.fetchSessions.remove(req.SessionID)
		}
		kind := fetchFull
		if req.SessionEpoch == -1 {
			kind = fetchSessionless
		}
		return kind, nil, n.resolveParts(fromRequest(), byID), nil
	}
	s := n.fetchSessions.get(req.SessionID)
	if s == nil {
		return 0, nil, nil, kerr.FetchSessionIDNotFound
	}
	requested := fromRequest() // resolves names under metaMu: before s.mu
	// A partition whose topic id did not resolve when it entered the
	// session (the client knew of the topic before this broker did: a
	// follower right after the topic's creation) is resolved again on
	// every fetch until it does, as Kafka's maybeResolveUnknownName:
	// otherwise it answers UNKNOWN_TOPIC_ID for as long as the session
	// lives.
	var unresolved map[[16]byte]string
	if byID {
		s.mu.Lock()
		for _, sp := range s.parts {
			if sp.topic == "" {
				if unresolved == nil {
					unresolved = map[[16]byte]string{}
				}
				unresolved[sp.topicID] = ""
			}
		}
		s.mu.Unlock()
		for id := range unresolved {
			name, _, _ := n.resolveTopic(true, "", id)
			unresolved[id] = name
		}
	}
	s.mu.Lock()
	for _, sp := range s.parts {
		if sp.topic == "" && unresolved[sp.topicID] != "" {
			sp.topic = unresolved[sp.topicID]
		}
	}
	if s.epoch != req.SessionEpoch {
		s.mu.Unlock()
		return 0, nil, nil, kerr.InvalidFetchSessionEpoch
	}
	if s.byID != byID {
		s.mu.Unlock()
		return 0, nil, nil, kerr.FetchSessionTopicIDError
	}
	for _, fp := range requested {
		s.addOrUpdateLocked(fp.sessionPart(byID, false))
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			s.forgetLocked(newSessionKey(ft.Topic, ft.TopicID, byID, p))
		}
	}
	s.size.Store(int32(len(s.parts)))
	if len(s.parts) == 0 {
		// Kafka: a session left empty is closed and the fetch answered
		// without one.
		s.mu.Unlock()
		n.fetchSessions.remove(s.id)
		return fetchSessionless, nil, nil, nil
	}
	s.epoch = nextFetchEpoch(s.epoch)
	parts := make([]fetchPart, len(s.parts))
	for i, sp := range s.parts {
		parts[i] = fetchPart{topic: sp.topic, topicID: sp.topicID, partition: sp.partition,
			fetchOffset: sp.fetchOffset, maxBytes: sp.maxBytes, leaderEpoch: sp.leaderEpoch, sp: sp,
			lastFetchedEpoch: sp.lastFetchedEpoch, followerStart: sp.logStartOffset}
	}
	s.mu.Unlock()
	n.fetchSessions.touch(s)
	return fetchIncremental, s, n.resolveParts(parts, byID), nil
}

func newSessionKey(topic string, id [16]byte, byID bool, part int32) sessionKey {
	if byID {
		return sessionKey{id: id, part: part}
	}
	return sessionKey{topic: topic, part: part}
}

func newFetchPart(name string, id [16]byte, byID bool, rp *kmsg.FetchRequestTopicPartition, version int16) fetchPart {
	fp := fetchPart{topic: name, partition: rp.Partition, fetchOffset: rp.FetchOffset,
		maxBytes: rp.PartitionMaxBytes, leaderEpoch: -1, lastFetchedEpoch: -1, followerStart: -1}
	if version >= 5 {
		fp.followerStart = rp.LogStartOffset
	}
	if version >= 12 {
		fp.lastFetchedEpoch = rp.LastFetchedEpoch
	}
	if byID {
		fp.topicID = id
	}
	if version >= 9 {
		fp.leaderEpoch = rp.CurrentLeaderEpoch
	}
	return fp
}

// sessionPart returns the session entry of a requested partition;
// answered holds the state this response gives the client.
func (fp *fetchPart) sessionPart(byID, answered bool) *sessionPart {
	sp := &sessionPart{key: newSessionKey(fp.topic, fp.topicID, byID, fp.partition),
		topic: fp.topic, topicID: fp.topicID, partition: fp.partition,
		fetchOffset: fp.fetchOffset, maxBytes: fp.maxBytes, leaderEpoch: fp.leaderEpoch,
		lastFetchedEpoch: fp.lastFetchedEpoch, logStartOffset: fp.followerStart}
	if answered {
		sp.answered = true
		sp.hw, sp.lastStable, sp.logStartOf = fp.offsets()
	}
	return sp
}

// resolveParts finds the hosted partition of each part, or its error.
func (n *Node) resolveParts(parts []fetchPart, byID bool) []fetchPart {
	for i := range parts {
		fp := &parts[i]
		if fp.topic == "" {
			if byID {
				fp.err = kerr.UnknownTopicID
			} else {
				fp.err = kerr.InvalidTopicException
			}
			continue
		}
		if fp.p = n.partition(fp.topic, fp.partition); fp.p != nil {
			if byID && [16]byte(fp.p.topicID) != fp.topicID {
				// The name now belongs to another topic (deleted and
				// re-created): the client refreshes its metadata.
				fp.p, fp.err = nil, kerr.InconsistentTopicID
			}
			continue
		}
		_, exists, err := n.resolveTopic(false, fp.topic, [16]byte{})
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			fp.err = err
			continue
		}
		fp.err = n.missingPartitionErr(fp.topic, exists, fp.partition)
	}
	return parts
}

// readFetch reads the partitions into their views, within the byte
// limits. It returns the bytes read and whether any partition has an error
// (which answers the fetch at once, as Kafka does).
//
// Called again after a wake, it reads only what can have changed: the
// views are kept and only partitions that had no data and whose high
// watermark moved are read, within what the kept views leave of the
// budget. Everything is read again when that shortcut could be wrong: a
// partition holding a view has a new high watermark (a bigger view changes
// the budget of the ones after it), or a partition lost its leadership,
// changed leader epoch, or moved its log start past the fetch offset (an
// error to answer now, with the others' data read afresh).
//
// Partitions whose fetch offset lies below the local log start of a
// remote-storage log are read from the remote tier after the local ones,
// all at once (tiering.go), within what the local reads left of the
// budget; remote reports whether any was.
func (n *Node) readFetch(ctx context.Context, parts []fetchPart, maxBytes int32) (int64, bool, bool) {
	budget := int64(maxBytes)
	if budget <= 0 {
		budget = 1<<31 - 1
	}
	full := false
	for i := range parts {
		fp := &parts[i]
		if fp.p == nil || !fp.read {
			continue
		}
		if (fp.hasView && fp.bound() != fp.readHW) || fp.checkServe() != nil ||
			fp.fetchOffset < fp.p.log.LogStartOffset() {
			full = true
			break
		}
	}
	if full {
		releaseFetch(parts)
		for i := range parts {
			parts[i].read = false
		}
	}
	var total int64
	for i := range parts {
		if parts[i].hasView {
			total += parts[i].view.Size
		}
	}
	anyErr := false
	var remote []int
	for i := range parts {
		fp := &parts[i]
		if fp.p == nil {
			anyErr = true
			continue
		}
		if fp.hasView {
			continue
		}
		hw := fp.bound()
		if fp.read && hw == fp.readHW {
			continue // no data before, and nothing appended since
		}
		if fp.err = fp.checkServe(); fp.err != nil {
			anyErr = true
			continue
		}
		if fp.clientRack != "" && !fp.asFollower && !fp.follower() {
			// KIP-392: a leader sends a consumer to the replica of its
			// rack, answering at once with no records.
			if pr := n.preferredReadReplica(fp.p, fp.clientRack, fp.fetchOffset); pr != n.cfg.NodeID {
				fp.preferred, anyErr = pr, true
				continue
			}
		}
		if fp.asFollower && fp.fetchOffset > fp.p.log.LogEndOffset() && fp.leaderEpoch < 0 {
			// A follower behind the offset, asked by a consumer that
			// names no leader epoch (it may have come by stale
			// metadata): nothing yet rather than OFFSET_OUT_OF_RANGE,
			// which it could not tell from the leader's (as Kafka answers it).
			fp.read, fp.readHW = true, hw
			continue
		}
		if fp.lastFetchedEpoch >= 0 || fp.follower() {
			answerNow := false
			if answerNow, fp.err = n.checkReplicaFetch(fp, hw); fp.err != nil || answerNow {
				anyErr = true
				continue
			}
		}
		if fp.follower() && fp.p.log.Config().RemoteStorageEnable &&
			fp.fetchOffset >= fp.p.log.LogStartOffset() && fp.fetchOffset < fp.p.log.LocalLogStartOffset() {
			// KIP-405: a follower rebuilds this part from the tier.
			fp.err, anyErr = kerr.OffsetMovedToTieredStorage, true
			continue
		}
		if n.tier.servesRemote(fp.p, fp.fetchOffset) {
			remote = append(remote, i)
			continue
		}
		// A throttled replica out of the ISR (replica_throttle.go) gets
		// nothing while the leader's quota is spent; its fetch still
		// reports its log end.
		throttled := fp.follower() && fp.p.leaderThrottled.Load() && n.leaderQuota.limited() && !fp.p.inCommittedISR(fp.replica)
		if throttled && n.leaderQuota.exceeded() {
			n.updateFollower(fp.p, fp.replica, fp.fetchOffset, fp.followerStart, hw, fp.replicaEpoch)
			fp.hwSeen = fp.p.hw.Load()
			fp.read, fp.readHW = true, hw
			continue
		}
		limit := min(int64(fp.maxBytes), budget-total)
		if limit <= 0 {
			if total > 0 {
				continue // no budget left: read again next time
			}
			limit = 1 // still the first batch whole (KIP-74)
		}
		v, err := fp.p.log.Read(fp.fetchOffset, int(min(limit, 1<<31-1)), hw)
		if err != nil && errors.Is(err, storage.ErrOffsetOutOfRange) && n.tier.servesRemote(fp.p, fp.fetchOffset) {
			// Local retention deleted the segment between the check above
			// and the read: it is remote now.
			remote = append(remote, i)
			continue
		}
		if err != nil {
			fp.err = err
			anyErr = true
			continue
		}
		if fp.follower() {
			// The LEO as it was before the read (hw here): appends racing
			// with the fetch must not push the follower out of sync.
			n.updateFollower(fp.p, fp.replica, fp.fetchOffset, fp.followerStart, hw, fp.replicaEpoch)
			fp.hwSeen = fp.p.hw.Load()
		}
		if v.Size == 0 {
			v.Release()
			fp.read, fp.readHW = true, hw
			continue
		}
		if total > 0 && v.Size > limit {
			// KIP-74's first-batch exception is for the first
			// partition with data only.
			v.Release()
			continue
		}
		fp.view, fp.hasView, fp.read, fp.readHW = v, true, true, hw
		fp.fromRemote = false
		total += v.Size
		if throttled {
			n.leaderQuota.record(v.Size)
		}
	}
	if len(remote) > 0 {
		total, anyErr = n.readRemoteParts(ctx, parts, remote, budget, total, anyErr)
	}
	return total, anyErr, len(remote) > 0
}

// readRemoteParts reads the remote parts all at once, each up to its
// partition limit and what is left of the budget, waiting at most
// remote.fetch.max.wait.ms; then keeps, in request order, what fits the
// budget (KIP-74's first batch whole when nothing was read before). A part
// whose read is still in the air answers with no records and no error: its
// read goes on and warms the cache for the next fetch.
func (n *Node) readRemoteParts(ctx context.Context, parts []fetchPart, remote []int, budget, total int64, anyErr bool) (int64, bool) {
	type result struct {
		v       storage.ReadView
		pending bool
		err     error
		hw      int64
		aborted []storage.AbortedTxn
	}
	res := make([]result, len(remote))
	left := max(budget-total, 1)
	var wg sync.WaitGroup
	for j, i := range remote {
		fp := &parts[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &res[j]
			r.hw = fp.bound()
			limit := min(int64(fp.maxBytes), left)
			r.v, r.pending, r.err = n.tier.read(ctx, fp.p, fp.fetchOffset, int(max(limit, 1)), n.cfg.Tiering.RemoteFetchMaxWait)
			if fp.readCommitted && r.err == nil && !r.pending && r.v.Size > 0 {
				r.aborted, r.err = n.tier.abortedTxns(ctx, fp.p, fp.fetchOffset, r.v.NextOffset)
				if r.err != nil {
					r.v.Release()
					r.v = storage.ReadView{}
				}
			}
		}()
	}
	wg.Wait()
	for j, i := range remote {
		fp := &parts[i]
		r := res[j]
		switch {
		case r.err != nil:
			fp.err, anyErr = r.err, true
		case r.pending || r.v.Size == 0:
			r.v.Release()
			fp.read, fp.readHW = true, r.hw
		case total > 0 && r.v.Size > min(int64(fp.maxBytes), budget-total):
			// Does not fit next to what was read: the next fetch gets it
			// (from the chunk cache).
			r.v.Release()
		default:
			fp.view, fp.hasView, fp.read, fp.readHW = r.v, true, true, r.hw
			fp.remoteAborted, fp.fromRemote = r.aborted, true
			total += r.v.Size
		}
	}
	return total, anyErr
}

func releaseFetch(parts []fetchPart) {
	for i := range parts {
		if parts[i].hasView {
			parts[i].view.Release()
			parts[i].hasView = false
		}
	}
}

// offsets are the high watermark, last stable offset and log start offset
// the response carries for the partition: -1 for all three with an error,
// as Kafka does.
func (fp *fetchPart) offsets() (hw, lastStable, logStart int64) {
	if fp.p == nil || (fp.err != nil && !errors.Is(fp.err, kerr.OffsetMovedToTieredStorage)) {
		return -1, -1, -1
	}
	hw = fp.readHW
	if !fp.read || fp.follower() || fp.err != nil || fp.readCommitted {
		// A follower learns the HW as it is now (raised by its own fetch
		// perhaps); OFFSET_MOVED_TO_TIERED_STORAGE carries it too. A
		// read_committed read stopped at the LSO: the HW is today's.
		hw = fp.p.hw.Load()
	}
	lastStable = min(hw, fp.p.log.LastStableOffset())
	if fp.readCommitted && fp.read && fp.err == nil {
		// The LSO the read stopped at, so the records sent and the LSO
		// agree (the HW never moves back while leading).
		lastStable = min(fp.readHW, hw)
	}
	return hw, lastStable, fp.p.log.LogStartOffset()
}

// abortedTxns is a read_committed part's AbortedTransactions: the
// aborted transactions overlapping the range it sends (empty, not null,
// without records, as Kafka). nil (null) for read_uncommitted.
func (fp *fetchPart) abortedTxns() []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	if !fp.readCommitted || fp.p == nil || fp.err != nil {
		return nil
	}
	out := []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	if !fp.hasView {
		return out
	}
	aborted := fp.remoteAborted
	if !fp.fromRemote {
		aborted = fp.p.log.AbortedTxns(fp.fetchOffset, fp.view.NextOffset)
	}
	for _, a := range aborted {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, at)
	}
	return out
}

// respondState marks every partition as answered (sessionless and full
// fetches answer all of them).
func respondState(parts []fetchPart) []bool {
	out := make([]bool, len(parts))
	for i := range out {
		out[i] = true
	}
	return out
}

// update decides which partitions an incremental response carries (those
// that changed, see fetch_session.go; for a follower a diverging epoch is
// a change too, as in Kafka: it is the answer it must truncate by),
// remembers what it tells the client,
// and moves partitions with records to the end of the session's order.
// Views of partitions left out are released (there are none: a partition
// with records always changed).
func (s *fetchSession) update(parts []fetchPart, answered []bool) []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	moved := map[*sessionPart]bool{}
	for i := range parts {
		fp := &parts[i]
		sp := fp.sp
		hw, ls, lso := fp.offsets()
		must := fp.hasView || fp.err != nil || fp.diverging != nil || fp.preferred >= 0 || !sp.answered || hw != sp.hw || ls != sp.lastStable || lso != sp.logStartOf
		answered[i] = must
		if must {
			sp.answered, sp.hw, sp.lastStable, sp.logStartOf = true, hw, ls, lso
		}
		if fp.hasView {
			moved[sp] = true
		}
	}
	s.moveToEndLocked(moved)
	return answered
}

// encodeFetch builds the response frame of the partitions marked in
// answer: kmsg encodes everything with placeholders in RecordBatches,
// which are then replaced by splices of the views (see the file comment).
// The views' ownership passes to the frame.
func encodeFetch(r *request, resp *kmsg.FetchResponse, parts []fetchPart, answer []bool) (*frame, error) {
	var nonce [16]byte
	binary.LittleEndian.PutUint64(nonce[0:], rand.Uint64())
	binary.LittleEndian.PutUint64(nonce[8:], rand.Uint64())
	var views []storage.ReadView
	var markers [][]byte
	// As Kafka (FetchResponse.toMessage), a new topic entry starts
	// whenever the topic differs from the previous partition's: clients
	// (librdkafka) list a topic's partitions in several runs, and the
	// response keeps their order, which is also the order of the
	// placeholders below.
	type topicKey struct {
		name string
		id   [16]byte
	}
	var prev *topicKey
	for i := range parts {
		fp := &parts[i]
		if !answer[i] {
			if fp.hasView {
				fp.view.Release()
				fp.hasView = false
			}
			continue
		}
		k := topicKey{fp.topic, fp.topicID}
		if prev == nil || *prev != k {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = fp.topic, fp.topicID
			resp.Topics = append(resp.Topics, rt)
			prev = &k
		}
		ti := len(resp.Topics) - 1
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = fp.partition
		// Empty, not null: librdkafka rejects a null record set
		// ("invalid MessageSetSize -1"), and Kafka never sends one.
		rp.RecordBatches = []byte{}
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = fp.offsets()
		rp.AbortedTransactions = fp.abortedTxns()
		if fp.diverging != nil {
			rp.DivergingEpoch = *fp.diverging
		}
		rp.PreferredReadReplica = -1
		if fp.preferred >= 0 {
			rp.PreferredReadReplica = fp.preferred
			r.metrics().preferredRead()
		}
		if fp.err != nil {
			rp.ErrorCode = errCode(fp.err)
			if errors.Is(fp.err, storage.ErrOffsetOutOfRange) {
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
			}
			r.metrics().partitionError("Fetch", rp.ErrorCode)
		}
		if fp.hasView {
			fp.p.tm.sent(fp.view.Size)
			if !fp.follower() {
				r.metrics().consumerFetch(fp.asFollower, fp.view.Size)
			}
			m := make([]byte, markerLen)
			copy(m, nonce[:])
			binary.BigEndian.PutUint32(m[16:], uint32(len(markers)))
			markers = append(markers, m)
			views = append(views, fp.view)
			fp.hasView = false
			rp.RecordBatches = m
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
	}
	f := encodeResponse(r, resp)
	if len(markers) == 0 {
		return f, nil
	}
	flexible := r.version >= 12
	enc := f.buf
	out := make([]byte, 0, len(enc)+len(markers)*4)
	pos := 0
	var spliced int64
	for i, m := range markers {
		at := bytes.Index(enc[pos:], m)
		if at < 0 {
			for _, v := range views {
				v.Release()
			}
			return nil, fmt.Errorf("broker: fetch placeholder %d not found", i)
		}
		at += pos
		prefixLen := 4
		if flexible {
			prefixLen = 1 // uvarint(markerLen+1) fits one byte
		}
		out = append(out, enc[pos:at-prefixLen]...)
		size := views[i].Size
		if flexible {
			out = binary.AppendUvarint(out, uint64(size)+1)
		} else {
			out = binary.BigEndian.AppendUint32(out, uint32(size))
		}
		f.splices = append(f.splices, splice{at: len(out), view: views[i]})
		spliced += size
		pos = at + markerLen
	}
	out = append(out, enc[pos:]...)
	binary.BigEndian.PutUint32(out, uint32(int64(len(out)-sizeLen)+spliced))
	f.buf = out
	return f, nil
}

// checkReplicaFetch runs the checks of a follower's fetch before its read
// (and the divergence check of any fetch with LastFetchedEpoch), leo being
// the log end taken before the read: the assignment, the broker epoch,
// then the last fetched epoch's end offset. answerNow is set with
// fp.diverging: the fetch answers at once, without records.
func (n *Node) checkReplicaFetch(fp *fetchPart, leo int64) (answerNow bool, err error) {
	p := fp.p
	if fp.follower() {
		isReplica, led := p.replicaOf(fp.replica)
		switch {
		case !led:
			return false, kerr.NotLeaderForPartition
		case !isReplica && fp.leaderEpoch >= 0:
			return false, kerr.UnknownLeaderEpoch // reassignment in progress: the follower retries
		case !isReplica:
			return false, kerr.NotLeaderForPartition
		}
		if err := p.checkFollowerEpoch(fp.replica, fp.replicaEpoch); err != nil {
			return false, err
		}
	}
	fp.diverging = nil
	if fp.lastFetchedEpoch < 0 {
		return false, nil
	}
	logStart := p.log.LogStartOffset()
	e, end := p.log.LeaderEpochs().EndOffsetFor(fp.lastFetchedEpoch, leo)
	if e == checkpoint.UndefinedEpoch || end == checkpoint.UndefinedEpochOffset || fp.fetchOffset < logStart {
		return false, kerr.OffsetOutOfRange
	}
	if e < fp.lastFetchedEpoch || end < fp.fetchOffset {
		d := kmsg.NewFetchResponseTopicPartitionDivergingEpoch()
		d.Epoch, d.EndOffset = e, end
		fp.diverging = &d
		fp.read, fp.readHW = true, leo
		return true, nil
	}
	return false, nil
}
