package broker

// ShareFetch (key 78), versions 1 and 2 (KIP-932; v1 adds MaxRecords and
// BatchSize, KIP-1206; v2 ShareAcquireMode and IsRenewAck, KIP-1206 and
// KIP-1222). v0 was Kafka 4.0's early access and is not served (Kafka 4.1
// dropped it too). Advertised only when share groups are on
// (group.coordinator.rebalance.protocols lists share); otherwise answered
// UNSUPPORTED_VERSION.
//
// Behaviour, in order:
//
//   - the request: a member id (1-36 characters) and a group id are
//     required (INVALID_REQUEST, INVALID_GROUP_ID); IsRenewAck requires
//     MaxBytes, MinBytes, MaxRecords and MaxWait 0 and acknowledgements on
//     every partition named (INVALID_REQUEST); GROUP READ is checked before
//     (authorize_request.go), TOPIC READ per partition;
//   - the share session (share_session.go): epoch 0 opens it with the
//     partitions named (acknowledgements then are INVALID_REQUEST), a
//     positive epoch must be the session's and adds the partitions named
//     and removes ForgottenTopicsData, -1 applies the acknowledgements and
//     closes it, releasing what the member still holds in its partitions.
//     Session errors are top-level, with nothing applied;
//   - piggy-backed acknowledgements, per partition, all or nothing
//     (share.Partition.Acknowledge), written to the share coordinator
//     before the response (AcknowledgeErrorCode: the refusal, the leader's
//     error, or the write's);
//   - then, unless IsRenewAck, records are acquired for the member from
//     every partition of the session, rotating the first one with the
//     epoch: per share-partition the log is read from NextFetchOffset up
//     to the high watermark (share.isolation.level=read_committed: the
//     last stable offset; aborted transactions' batches and control
//     batches are never acquired: they are archived as gaps), at most
//     MaxRecords records over the whole request (500 when 0: KIP-1206's
//     default), MaxBytes over the response and PartitionMaxBytes (1 MiB
//     when the partition came in an earlier request) per partition, with
//     the first batch whole (KIP-74). The response carries the record
//     batches covering the acquired ranges, and AcquiredRecords (split
//     into runs of at most BatchSize records in batch-optimized mode);
//   - long polling: with nothing acquired, no error and MaxWait > 0 the
//     fetch waits for an append to one of its partitions, or for records
//     to come back (released, rejected, lock expired, acknowledged: the
//     window has room), then tries again until MaxWait passes; but a
//     fetch carrying acknowledgements does not wait, and one whose member
//     holds records waits only shareHoldFor (2 ms, doubling per such
//     empty answer in a row, reset by a fetch that acquires or
//     acknowledges): a client's next acknowledgements queue behind its
//     fetch (kgo sends one request at a time per broker), and several
//     consumers of one partition otherwise all wait out MaxWait with
//     their acknowledgements stuck (strata_share_fetch_ack_stalls_total
//     counts fetches that still did);
//   - AcquisitionLockTimeoutMillis is the group's record lock duration.
//
// Errors per partition: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
// NOT_LEADER_OR_FOLLOWER (with CurrentLeader and NodeEndpoints when the
// metadata names the leader, KIP-951), TOPIC_AUTHORIZATION_FAILED, the
// share coordinator's (COORDINATOR_NOT_AVAILABLE, ... retriable: the next
// fetch tries again), KAFKA_STORAGE_ERROR.
//
// Differences from Kafka: MinBytes only decides whether to wait when
// nothing was acquired (a fetch that acquired anything answers at once;
// Kafka's DelayedShareFetch waits for MinBytes before acquiring); a fetch
// carrying acknowledgements is answered at once and a holder's wait is cut
// (long polling above), where Kafka answers the acknowledgement results
// with the fetch (kgo's consumer_share.go: "the broker holds the entire
// response (ack results included) until MaxWait expires or records
// appear", why it caps MaxWait at 500 ms then); record
// bytes are copied into the response (Fetch splices them from the file);
// ShareFetch does not check group membership (nor does Kafka: a member id
// only has to be well formed).

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/controller/metadata"
)

const (
	shareFetchKey       = 78
	shareAcknowledgeKey = 79
	// shareDefaultMaxRecords is KIP-1206's default of MaxRecords.
	shareDefaultMaxRecords = 500
	// sharePartitionMaxBytes bounds a partition's read when its request
	// did not name it (it joined the session earlier).
	sharePartitionMaxBytes = 1 << 20
)

func init() { registerMax(shareFetchKey, 1, 2, handleShareFetch) }

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// shareRequestCheck is the top-level error of a ShareFetch or
// ShareAcknowledge for its group and member ids, 0 if none.
func (n *Node) shareRequestCheck(group, member string) int16 {
	switch {
	case !n.shareGroupsOn():
		return kerr.UnsupportedVersion.Code
	case group == "":
		return kerr.InvalidGroupID.Code
	case member == "" || len(member) > 36:
		return kerr.InvalidRequest.Code
	}
	return 0
}

// shareAckPart is one partition's acknowledgements of a request.
type shareAckPart struct {
	tp      shareTP
	batches []share.AckBatch
	err     error // the batches did not convert: INVALID_REQUEST
}

// shareResult is what a request tells one partition: the error of its
// fetch or acknowledgement and, with NOT_LEADER_OR_FOLLOWER, the leader.
type shareResult struct {
	err                 error
	leaderID, leaderEp  int32
	hasLeader, answered bool
}

// shareFetchPart is one partition a ShareFetch reads.
type shareFetchPart struct {
	tp       shareTP
	maxBytes int32
	topic    string
	p        *partition
	res      shareResult
	records  []byte
	acquired []share.AcquiredRecords
}

func handleShareFetch(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ShareFetchRequest)
	resp := kmsg.NewPtrShareFetchResponse()
	group, member := strOr(req.GroupID), strOr(req.MemberID)
	gc := n.shareGroupConfig(group)
	resp.AcquisitionLockTimeoutMillis = int32(gc.RecordLockDurationMs)
	if code := n.shareRequestCheck(group, member); code != 0 {
		resp.ErrorCode = code
		return encodeResponse(r, resp), nil
	}
	renew := r.version >= 2 && req.IsRenewAck
	var named []shareTP
	maxBytes := map[shareTP]int32{}
	var acks []shareAckPart
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := shareTP{uuid.UUID(t.TopicID), p.Partition}
			named = append(named, tp)
			maxBytes[tp] = p.PartitionMaxBytes
			if len(p.AcknowledgementBatches) > 0 {
				b, err := share.AcksFromShareFetch(p.AcknowledgementBatches, renew)
				acks = append(acks, shareAckPart{tp: tp, batches: b, err: err})
			} else if renew {
				resp.ErrorCode = kerr.InvalidRequest.Code // a renew carries acknowledgements only
				return encodeResponse(r, resp), nil
			}
		}
	}
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return encodeResponse(r, resp), nil
	}
	var forget []shareTP
	for _, ft := range req.ForgottenTopicsData {
		for _, p := range ft.Partitions {
			forget = append(forget, shareTP{uuid.UUID(ft.TopicID), p})
		}
	}

	key := shareSessionKey{group, member}
	var parts []shareTP
	var fresh map[shareTP]bool
	switch req.ShareSessionEpoch {
	case -1:
		s, err := n.shareSessions.close(key)
		if err != nil {
			resp.ErrorCode = errCode(err)
			return encodeResponse(r, resp), nil
		}
		s.end()
		res := n.shareAcknowledge(ctx, r, group, member, acks)
		n.shareLeader.releaseMember(ctx, group, member, s.parts)
		n.encodeShareFetch(r, resp, nil, res, nil)
		return encodeResponse(r, resp), nil
	case 0:
		if len(acks) > 0 {
			resp.ErrorCode = kerr.InvalidRequest.Code // no acknowledgements on a new session
			return encodeResponse(r, resp), nil
		}
		s, old, err := n.shareSessions.open(key, r.connCtx(), named)
		if err != nil {
			resp.ErrorCode = errCode(err)
			return encodeResponse(r, resp), nil
		}
		if old != nil {
			old.end()
		}
		n.watchShareSession(s)
		parts = n.shareSessions.partsOf(s)
		fresh = map[shareTP]bool{}
		for _, tp := range parts {
			fresh[tp] = true
		}
	default:
		var err error
		if parts, fresh, err = n.shareSessions.advance(key, req.ShareSessionEpoch, named, forget); err != nil {
			resp.ErrorCode = errCode(err)
			return encodeResponse(r, resp), nil
		}
	}

	res := n.shareAcknowledge(ctx, r, group, member, acks)
	if renew {
		n.encodeShareFetch(r, resp, nil, res, nil)
		return encodeResponse(r, resp), nil
	}

	fps := make([]shareFetchPart, len(parts))
	for i, tp := range parts {
		fp := &fps[i]
		fp.tp = tp
		fp.maxBytes = sharePartitionMaxBytes
		if mb, ok := maxBytes[tp]; ok && mb > 0 {
			fp.maxBytes = mb
		}
		fp.topic, fp.p, fp.res = n.shareResolve(r, tp)
	}
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = shareDefaultMaxRecords
	}
	mode := share.BatchOptimized
	if r.version >= 2 && req.ShareAcquireMode == 1 {
		mode = share.RecordLimit
	}
	budget := int64(req.MaxBytes)
	if budget <= 0 {
		budget = 1<<31 - 1
	}

	wait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	if len(acks) > 0 {
		// Acknowledgements are answered at once: a client sends one
		// request at a time per session (kgo's FlushAcks, the next
		// acknowledgements and lock renewals all wait for this one).
		wait = 0
	}
	deadline := time.Now().Add(wait)
	streak := n.shareSessions.holdStreak(key)
	var holdUntil time.Time // set once the member is seen holding records
	held := false
	got, early := 0, false
	var w *waiter
	var waitOn []*sharePart
	var timer *time.Timer
	defer func() {
		if w != nil {
			for i := range fps {
				if fps[i].p != nil {
					fps[i].p.removeWaiter(w)
				}
			}
			for _, s := range waitOn {
				s.removeWaiter(w)
			}
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if w == nil && wait > 0 {
			w = newWaiter()
			for i := range fps {
				if fps[i].p != nil && fps[i].res.err == nil {
					fps[i].p.addWaiter(w)
				}
			}
		}
		var anyErr, holding bool
		got, anyErr, holding = n.shareAcquireAll(ctx, group, member, fps, maxRecords, budget, mode, gc, w, &waitOn)
		if got > 0 || anyErr || w == nil || ctx.Err() != nil {
			break
		}
		held = held || holding
		if holding && holdUntil.IsZero() {
			holdUntil = time.Now().Add(shareHoldFor(streak))
		}
		until := deadline
		if !holdUntil.IsZero() && holdUntil.Before(deadline) {
			until = holdUntil
		}
		left := time.Until(until)
		if left <= 0 {
			early = until.Before(deadline)
			break
		}
		if timer == nil {
			timer = time.NewTimer(left)
		} else {
			timer.Reset(left)
		}
		waitStart := time.Now()
		stop := false
		select {
		case <-w.c:
		case <-timer.C:
			stop = true
			early = until.Before(deadline)
		case <-ctx.Done():
			stop = true
		case <-n.stopping:
			stop = true
		}
		r.waited += time.Since(waitStart)
		if stop {
			break
		}
	}
	switch {
	case got > 0 || len(acks) > 0:
		streak = 0
	case early:
		streak++
		n.shareLeader.m.heldEarly.Inc()
	}
	if got == 0 && !early && (held || len(acks) > 0) && w != nil && time.Until(deadline) <= 0 {
		n.shareLeader.m.ackStalls.Inc()
	}
	n.shareSessions.setHoldStreak(key, streak)
	n.encodeShareFetch(r, resp, fps, res, fresh)
	return encodeResponse(r, resp), nil
}

// connCtx is the context of the request's connection (done when it ends),
// nil for a request with no connection.
func (r *request) connCtx() context.Context {
	if r.conn == nil {
		return nil
	}
	return r.conn.ctx
}

// watchShareSession releases what a session's member holds once the
// session's connection ends, unless the session ended first.
func (n *Node) watchShareSession(s *shareSession) {
	if s.conn == nil {
		return
	}
	n.loops.Add(1)
	go func() {
		defer n.loops.Done()
		select {
		case <-s.conn.Done():
			if n.shareSessions.dropIf(s) {
				s.end()
				ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
				n.shareLeader.releaseMember(ctx, s.key.group, s.key.member, n.shareSessions.partsOf(s))
				cancel()
			}
		case <-s.done:
		case <-n.ctx.Done():
		}
	}()
}

// shareResolve finds a session partition's topic and hosted partition, or
// the error it is answered with.
func (n *Node) shareResolve(r *request, tp shareTP) (string, *partition, shareResult) {
	name, ok, err := n.resolveTopic(true, "", tp.topicID)
	if !ok {
		return "", nil, shareResult{err: err}
	}
	if az := n.authorizer(); az != nil && !r.allowed(az, authz.OpRead, authz.ResTopic, name) {
		return name, nil, shareResult{err: kerr.TopicAuthorizationFailed}
	}
	p := n.partition(name, tp.partition)
	if p == nil {
		return name, nil, n.shareLeaderHint(r, tp, n.missingPartitionErr(name, true, tp.partition))
	}
	if err := p.checkLeader(-1); err != nil {
		return name, nil, n.shareLeaderHint(r, tp, err)
	}
	return name, p, shareResult{}
}

// shareLeaderHint adds the current leader to a NOT_LEADER_OR_FOLLOWER
// answer when the metadata knows it (KIP-951).
func (n *Node) shareLeaderHint(_ *request, tp shareTP, err error) shareResult {
	res := shareResult{err: err, leaderID: -1, leaderEp: -1}
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		return res
	}
	n.view(func(st *metadata.State) {
		if pi, ok := st.Partition(tp.topicID, tp.partition); ok && pi.Leader >= 0 && pi.Leader != n.cfg.NodeID {
			res.leaderID, res.leaderEp, res.hasLeader = pi.Leader, pi.LeaderEpoch, true
		}
	})
	return res
}

// shareAcknowledge applies a request's acknowledgements, one write to the
// share coordinator per partition, and returns each partition's result.
func (n *Node) shareAcknowledge(ctx context.Context, r *request, group, member string, acks []shareAckPart) map[shareTP]shareResult {
	out := make(map[shareTP]shareResult, len(acks))
	for _, a := range acks {
		res := shareResult{answered: true, leaderID: -1, leaderEp: -1}
		if a.err != nil {
			res.err = a.err
			out[a.tp] = res
			continue
		}
		_, p, rr := n.shareResolve(r, a.tp)
		if rr.err != nil {
			rr.answered = true
			out[a.tp] = rr
			continue
		}
		s, err := n.shareLeader.lockLoaded(ctx, group, p)
		if err != nil {
			res.err = err
			out[a.tp] = res
			continue
		}
		now := n.shareLeader.nowMs()
		if err := s.sp.Acknowledge(member, a.batches, now); err != nil {
			res.err = err
		} else {
			n.shareLeader.countAcks(a.batches)
			res.err = n.shareLeader.persist(ctx, s)
		}
		s.mu.Unlock()
		s.wake()
		out[a.tp] = res
	}
	return out
}

// countAcks counts acknowledged records by type.
func (sl *shareLeader) countAcks(batches []share.AckBatch) {
	names := [...]string{"gap", "accept", "release", "reject", "renew"}
	for _, b := range batches {
		if len(b.Types) == 1 {
			sl.m.acks.WithLabelValues(names[b.Types[0]]).Add(float64(b.Last - b.First + 1))
			continue
		}
		for _, t := range b.Types {
			sl.m.acks.WithLabelValues(names[t]).Inc()
		}
	}
}

// shareAcquireAll acquires records for member from the parts that have
// none yet, within maxRecords and budget bytes over all of them; w, if
// set, is registered on each share-partition read (waitOn collects them).
// It returns the records acquired by this call, whether a part has an
// error, and whether member holds records in a part it acquired nothing
// from.
func (n *Node) shareAcquireAll(ctx context.Context, group, member string, fps []shareFetchPart, maxRecords int, budget int64, mode share.AcquireMode, gc ShareGroupConfig, w *waiter, waitOn *[]*sharePart) (int, bool, bool) {
	got, anyErr, holding := 0, false, false
	for i := range fps {
		fp := &fps[i]
		if fp.res.err != nil {
			anyErr = true
			continue
		}
		if fp.p == nil || maxRecords-got <= 0 || budget <= 0 {
			continue
		}
		s, err := n.shareLeader.lockLoaded(ctx, group, fp.p)
		if err != nil {
			fp.res = n.shareLeaderHint(nil, fp.tp, err)
			anyErr = true
			continue
		}
		if w != nil {
			s.addWaiter(w)
			*waitOn = append(*waitOn, s)
		}
		k, size, err := n.shareAcquireOne(ctx, s, fp, member, maxRecords-got, min(int64(fp.maxBytes), budget), mode, gc)
		if k == 0 && err == nil && s.sp.Holds(member) {
			holding = true
		}
		s.mu.Unlock()
		if err != nil {
			fp.res = shareResult{err: err, leaderID: -1, leaderEp: -1}
			anyErr = true
			continue
		}
		got += k
		budget -= size
	}
	return got, anyErr, holding
}

// shareHoldBase is how long a ShareFetch that acquired nothing waits at
// first when its member holds records (shareHoldFor).
const shareHoldBase = 2 * time.Millisecond

// shareHoldFor is how long a ShareFetch that acquired nothing may wait
// when its member holds records, after streak such fetches in a row were
// answered empty early: shareHoldBase doubled per answer, up to a second
// (MaxWait bounds it further).
//
// Why: a share consumer sends one request at a time to a broker (kgo: a
// ShareFetch or a ShareAcknowledge, on the one connection its session is
// tied to) and prefetches the next batch while the application processes
// the last, so the acknowledgements of records it holds queue behind its
// parked fetch. Several consumers on one partition fill the in-flight
// window (group.share.partition.max.record.locks) with records whose
// acknowledgements are all stuck that way: nothing wakes the parked
// fetches and every consumer waits out MaxWait each round. Answering the
// member early lets its client send them. The doubling bounds the extra
// requests while the application is still processing (nothing acked yet);
// a fetch that acquires or acknowledges anything starts over.
func shareHoldFor(streak int) time.Duration {
	if streak >= 9 { // 2ms<<9 ≈ 1s
		return time.Second
	}
	return shareHoldBase << streak
}

// shareAcquireOne reads s's partition from NextFetchOffset and acquires
// up to maxRecords of it for member (s.mu held); it returns the records
// acquired and the bytes kept for the response.
func (n *Node) shareAcquireOne(ctx context.Context, s *sharePart, fp *shareFetchPart, member string, maxRecords int, maxBytes int64, mode share.AcquireMode, gc ShareGroupConfig) (int, int64, error) {
	sl := n.shareLeader
	now := sl.nowMs()
	if !s.sp.CanAcquire(now) {
		sl.publish(s)
		return 0, 0, nil
	}
	from := s.sp.NextFetchOffset()
	readCommitted := gc.IsolationLevel == 1
	raw, bs, err := n.shareRead(ctx, s.p, from, maxBytes, readCommitted)
	if err != nil || len(bs) == 0 {
		return 0, 0, err
	}
	acq := s.sp.Acquire(member, shareAcquirable(bs), maxRecords, mode, now)
	sl.publish(s)
	if len(acq) == 0 {
		return 0, 0, nil
	}
	k := 0
	for _, a := range acq {
		c := int(a.Last - a.First + 1)
		k += c
		sl.m.deliveries.Add(float64(c))
		if a.DeliveryCount > 1 {
			sl.m.redeliveries.Add(float64(c))
		}
	}
	fp.records = shareCover(raw, bs, acq[0].First, acq[len(acq)-1].Last)
	fp.acquired = append(fp.acquired, acq...)
	return k, int64(len(fp.records)), nil
}

// encodeShareFetch fills the response: every fetched partition with
// records, an error, an acknowledgement result, or fresh in the session;
// then acknowledged partitions that were not fetched.
func (n *Node) encodeShareFetch(r *request, resp *kmsg.ShareFetchResponse, fps []shareFetchPart, acks map[shareTP]shareResult, fresh map[shareTP]bool) {
	req := r.msg.(*kmsg.ShareFetchRequest)
	batchSize := int64(0)
	if req.BatchSize > 0 && (r.version < 2 || req.ShareAcquireMode == 0) {
		batchSize = int64(req.BatchSize)
	}
	topicIdx := map[uuid.UUID]int{}
	leaders := map[int32]bool{}
	add := func(tp shareTP) *kmsg.ShareFetchResponseTopicPartition {
		i, ok := topicIdx[tp.topicID]
		if !ok {
			i = len(resp.Topics)
			topicIdx[tp.topicID] = i
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = tp.topicID
			resp.Topics = append(resp.Topics, t)
		}
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = tp.partition
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
		return &resp.Topics[i].Partitions[len(resp.Topics[i].Partitions)-1]
	}
	setErr := func(rp *kmsg.ShareFetchResponseTopicPartition, res shareResult, ack bool) {
		if res.err == nil {
			return
		}
		code := errCode(res.err)
		if ack {
			rp.AcknowledgeErrorCode = code
		} else {
			rp.ErrorCode = code
			r.metrics().partitionError("ShareFetch", code)
		}
		if res.hasLeader {
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = res.leaderID, res.leaderEp
			leaders[res.leaderID] = true
		}
	}
	done := map[shareTP]bool{}
	for i := range fps {
		fp := &fps[i]
		ack, acked := acks[fp.tp]
		if fp.res.err == nil && len(fp.acquired) == 0 && !acked && !fresh[fp.tp] {
			continue
		}
		done[fp.tp] = true
		rp := add(fp.tp)
		setErr(rp, fp.res, false)
		if acked {
			setErr(rp, ack, true)
		}
		if len(fp.acquired) > 0 {
			rp.Records = fp.records
			rp.AcquiredRecords = share.ToKmsg(splitAcquired(fp.acquired, batchSize))
			if fp.p != nil {
				fp.p.tm.sent(int64(len(fp.records)))
			}
		}
	}
	for tp, ack := range acks {
		if done[tp] {
			continue
		}
		setErr(add(tp), ack, true)
	}
	if len(leaders) > 0 {
		n.view(func(st *metadata.State) {
			for id := range leaders {
				b, ok := st.Broker(id)
				if !ok {
					continue
				}
				listener := ""
				if r.conn != nil {
					listener = r.conn.listener
				}
				l, ok := pickListener(b.Listeners, listener)
				if !ok {
					continue
				}
				ep := kmsg.NewShareFetchResponseNodeEndpoint()
				ep.NodeID, ep.Host, ep.Port = id, l.Host, int32(l.Port)
				if b.Rack != "" {
					rack := b.Rack
					ep.Rack = &rack
				}
				resp.NodeEndpoints = append(resp.NodeEndpoints, ep)
			}
		})
	}
}

// splitAcquired splits acquired runs into runs of at most size records
// (size 0: as they are), KIP-1206's BatchSize.
func splitAcquired(in []share.AcquiredRecords, size int64) []share.AcquiredRecords {
	if size <= 0 {
		return in
	}
	var out []share.AcquiredRecords
	for _, a := range in {
		for f := a.First; f <= a.Last; f += size {
			out = append(out, share.AcquiredRecords{First: f, Last: min(f+size-1, a.Last), DeliveryCount: a.DeliveryCount})
		}
	}
	return out
}
