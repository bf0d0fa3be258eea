package broker

// Share sessions (KIP-932): the partitions a share-group member fetches
// from this broker, named once and then only changed incrementally, like
// KIP-227 fetch sessions (fetch_session.go) but keyed by (group, member id)
// instead of a broker-chosen id, and with no eviction.
//
// Epochs: a ShareFetch with epoch 0 opens the session (replacing one the
// member had: Kafka's cache.remove(key) before maybeCreateSession), listing
// its partitions; it may carry no acknowledgements (INVALID_REQUEST). Every
// later ShareFetch or ShareAcknowledge names the epoch the session expects
// (SHARE_SESSION_NOT_FOUND without a session, INVALID_SHARE_SESSION_EPOCH
// for another epoch) and moves it on by one (MaxInt32 wraps to 1, as in
// Kafka and kgo). A ShareFetch's Topics add partitions, its
// ForgottenTopicsData remove them. Epoch -1 (ShareFetch or
// ShareAcknowledge) applies its acknowledgements and closes the session.
//
// A session belongs to the connection that opened it (Kafka 4.1's
// connection-disconnect listener; kgo resets its session epoch to 0 on a
// new connection): when that connection ends, or the session is closed
// with epoch -1, the records the member holds in the session's partitions
// are released at once (share.Partition.ReleaseMember) instead of waiting
// for their locks to expire.
//
// The cache holds at most group.share.max.share.sessions sessions; opening
// one more is SHARE_SESSION_LIMIT_REACHED (a member re-opening its own
// session does not count twice).
//
// Differences from Kafka: none known in the epoch rules; the session's
// partitions are answered in every response that has something for them
// (records, an error, an acknowledgement result) and once when they enter
// the session, as Kafka's CachedSharePartition.requiresUpdateInResponse.

import (
	"context"
	"sync"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
)

// shareSessionKey names a share session: one per member and broker.
type shareSessionKey struct{ group, member string }

// shareTP is a partition of a share session, by topic id.
type shareTP struct {
	topicID   uuid.UUID
	partition int32
}

// shareSession is one member's session. Its fields are guarded by
// shareSessionCache.mu.
type shareSession struct {
	key   shareSessionKey
	epoch int32 // the epoch the next request must carry
	// parts in the order they entered the session (fetched in a rotating
	// order from it); fresh marks those not answered yet.
	parts []shareTP
	fresh map[shareTP]bool
	conn  context.Context // the opening connection's: done when it ends
	// done is closed when the session ends (closed, replaced, or its
	// connection gone): the goroutine watching the connection stops.
	done    chan struct{}
	endOnce sync.Once
	// holds counts the member's fetches in a row answered empty early
	// because it held records (shareHoldFor); reset by a fetch that
	// acquires or acknowledges something.
	holds int
}

func (s *shareSession) end() { s.endOnce.Do(func() { close(s.done) }) }

func (s *shareSession) has(tp shareTP) bool {
	_, ok := s.fresh[tp]
	return ok
}

// nextShareEpoch is the epoch after e (MaxInt32 wraps to 1).
func nextShareEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// shareSessionCache holds the broker's share sessions. Safe for concurrent
// use; mu is taken inside nothing and never held across a call out.
type shareSessionCache struct {
	mu       sync.Mutex
	max      int
	sessions map[shareSessionKey]*shareSession
}

func newShareSessionCache(max int) *shareSessionCache {
	return &shareSessionCache{max: max, sessions: map[shareSessionKey]*shareSession{}}
}

// open starts key's session at epoch 1 with parts, for the connection
// whose context is conn; it returns the session and the one it replaced
// (nil if none), or SHARE_SESSION_LIMIT_REACHED.
func (c *shareSessionCache) open(key shareSessionKey, conn context.Context, parts []shareTP) (s, old *shareSession, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old = c.sessions[key]
	if old == nil && len(c.sessions) >= c.max {
		return nil, nil, kerr.ShareSessionLimitReached
	}
	s = &shareSession{key: key, epoch: 1, fresh: map[shareTP]bool{}, conn: conn, done: make(chan struct{})}
	for _, tp := range parts {
		if !s.has(tp) {
			s.parts = append(s.parts, tp)
			s.fresh[tp] = false // the opening response answers them all
		}
	}
	c.sessions[key] = s
	return s, old, nil
}

// advance checks a request's epoch against key's session and moves the
// session on: add and forget change its partitions (ShareFetch only). It
// returns the session's partitions after the change, in order, starting
// the rotation at the epoch, and which of them are fresh (and now no
// longer).
func (c *shareSessionCache) advance(key shareSessionKey, epoch int32, add, forget []shareTP) (parts []shareTP, fresh map[shareTP]bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[key]
	switch {
	case s == nil:
		return nil, nil, kerr.ShareSessionNotFound
	case s.epoch != epoch:
		return nil, nil, kerr.InvalidShareSessionEpoch
	}
	for _, tp := range add {
		if !s.has(tp) {
			s.parts = append(s.parts, tp)
			s.fresh[tp] = true
		}
	}
	for _, tp := range forget {
		if !s.has(tp) {
			continue
		}
		delete(s.fresh, tp)
		for i := range s.parts {
			if s.parts[i] == tp {
				s.parts = append(s.parts[:i], s.parts[i+1:]...)
				break
			}
		}
	}
	s.epoch = nextShareEpoch(s.epoch)
	parts = make([]shareTP, 0, len(s.parts))
	if k := len(s.parts); k > 0 {
		start := int(epoch) % k // fairness: each fetch starts one partition further
		parts = append(parts, s.parts[start:]...)
		parts = append(parts, s.parts[:start]...)
	}
	fresh = map[shareTP]bool{}
	for tp, f := range s.fresh {
		if f {
			fresh[tp] = true
			s.fresh[tp] = false
		}
	}
	return parts, fresh, nil
}

// holdStreak is key's session's count of early empty answers in a row
// (0 without a session).
func (c *shareSessionCache) holdStreak(key shareSessionKey) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[key]; s != nil {
		return s.holds
	}
	return 0
}

// setHoldStreak sets key's session's count of early empty answers.
func (c *shareSessionCache) setHoldStreak(key shareSessionKey, v int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[key]; s != nil {
		s.holds = v
	}
}

// partsOf returns a session's partitions (a new slice).
func (c *shareSessionCache) partsOf(s *shareSession) []shareTP {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]shareTP(nil), s.parts...)
}

// close removes key's session if epoch -1 may close it: it returns the
// session, or SHARE_SESSION_NOT_FOUND.
func (c *shareSessionCache) close(key shareSessionKey) (*shareSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[key]
	if s == nil {
		return nil, kerr.ShareSessionNotFound
	}
	delete(c.sessions, key)
	return s, nil
}

// dropIf removes s if it is still key's session (its connection ended)
// and reports whether it did.
func (c *shareSessionCache) dropIf(s *shareSession) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[s.key] != s {
		return false
	}
	delete(c.sessions, s.key)
	return true
}

// inUse is the share-partitions some session names.
func (c *shareSessionCache) inUse() map[sharePartKey]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[sharePartKey]bool{}
	for k, s := range c.sessions {
		for _, tp := range s.parts {
			out[sharePartKey{k.group, tp.topicID, tp.partition}] = true
		}
	}
	return out
}

// len is the number of sessions (metrics).
func (c *shareSessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}
