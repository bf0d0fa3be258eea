package broker

import (
	"math"

	"github.com/google/uuid"
)

// The follower's side of a fetch session (KIP-227; Kafka's
// FetchSessionHandler). A follower fetches every partition it follows from
// one leader in each request, most of them idle: the __consumer_offsets
// partitions alone are a third of fifty per broker on a three-node
// cluster. Sessionless, each request names them all and each response
// answers them all, so the leader encodes and the follower decodes every
// idle partition on every round, a few thousand rounds a second under a
// latency load. In a session the request names only the partitions whose
// fetch fields changed since the leader last took them (and forgets the
// ones no longer fetched), and the response carries only the partitions
// that have records, an error, or new offsets (fetch_session.go, the
// leader's side).
//
// followerSession is the decision, pure: what the leader's session holds,
// and from that what the next request sends. The fetcher loop (one request
// in flight) calls next for each request, then accepted with the
// response's session id or failed when the request or the session failed.
type followerSession struct {
	id    int32 // the leader's session id; 0 none
	epoch int32 // the next request's epoch: 0 full (create a session), > 0 incremental
	// held is what the leader's session holds after the last accepted
	// request; pending what it holds once the request in flight is.
	held, pending map[tpKey]sessionFields
}

// sessionFields are a partition's fetch fields as the leader's session
// keeps them: a partition whose fields changed goes on the wire again.
type sessionFields struct {
	topicID          uuid.UUID
	fetchOffset      int64
	logStart         int64
	leaderEpoch      int32
	lastFetchedEpoch int32
	maxBytes         int32
}

// next plans the request fetching want (every partition to fetch now):
// the session id and epoch to send, which partitions go on the wire, and
// which partitions the leader's session must forget. A full request (no
// session yet, or after a failure) sends every partition.
func (s *followerSession) next(want map[tpKey]sessionFields) (id, epoch int32, send map[tpKey]bool, forget []tpKey) {
	s.pending = want
	send = make(map[tpKey]bool, len(want))
	if s.epoch == 0 {
		for k := range want {
			send[k] = true
		}
		return s.id, 0, send, nil
	}
	for k, f := range want {
		if h, ok := s.held[k]; !ok || h != f {
			send[k] = true
		}
	}
	for k := range s.held {
		if _, ok := want[k]; !ok {
			forget = append(forget, k)
		}
	}
	return s.id, s.epoch, send, forget
}

// accepted records the leader's answer to the request in flight: respID
// is the response's session id. After a full request it names the new
// session (0: the leader made none, and the next request is full again);
// after an incremental one the session moves to its next epoch.
func (s *followerSession) accepted(respID int32) {
	if respID == 0 || (s.epoch > 0 && respID != s.id) {
		// No session (the leader keeps none, or closed ours when it
		// was left empty): the next request is full.
		s.id, s.epoch, s.held, s.pending = 0, 0, nil, nil
		return
	}
	if s.epoch == 0 {
		s.id, s.epoch = respID, 1
	} else if s.epoch == math.MaxInt32 {
		s.epoch = 1
	} else {
		s.epoch++
	}
	s.held, s.pending = s.pending, nil
}

// failed forgets the session after a failed request (transport, a
// top-level error such as FETCH_SESSION_ID_NOT_FOUND or
// INVALID_FETCH_SESSION_EPOCH): the leader may or may not have applied it,
// so the next request is a full one, closing the old session (its id with
// epoch 0) and asking for a new one.
func (s *followerSession) failed() {
	s.epoch, s.held, s.pending = 0, nil, nil
}

// resend makes the next request carry k again (or forget it, if it is no
// longer fetched): the leader answered it with an error, and sending it
// anew refreshes its entry in the leader's session, as a new partition's.
func (s *followerSession) resend(k tpKey) {
	if h, ok := s.held[k]; ok {
		h.fetchOffset = -1 // no fetch ever asks for -1
		s.held[k] = h
	}
}
