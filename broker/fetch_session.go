package broker

// Fetch sessions (KIP-227): a consumer or follower that fetches the same
// partitions over and over sends them once, then only what changed.
//
// A request names its session with (SessionID, SessionEpoch):
//
//	SessionID  SessionEpoch   meaning                                    broker
//	---------  ------------   ----------------------------------------   ----------------------------------------
//	0          -1             no session (sessionless full fetch)        full response, SessionID 0
//	id         -1             close session id, fetch without one        remove id; as above
//	0          0              full fetch, please create a session        full response, SessionID = new id (0 if
//	                                                                     the cache is full and nothing evictable)
//	id         0              close id and create a new one              remove id; as above
//	id         n > 0          incremental fetch in session id            FETCH_SESSION_ID_NOT_FOUND if unknown,
//	                                                                     INVALID_FETCH_SESSION_EPOCH unless n is
//	                                                                     the session's next epoch, else: apply
//	                                                                     the request's partitions (added or
//	                                                                     updated) and ForgottenTopics, read every
//	                                                                     partition of the session, answer only
//	                                                                     the partitions that changed
//
// Fetch versions before 7 carry no session fields: always sessionless.
//
// The epoch moves on (n → n+1, wrapping to 1 after MaxInt32) when an
// incremental request is accepted, before it is read, as in Kafka: a retry
// of the same epoch (the client lost the response) is refused with
// INVALID_FETCH_SESSION_EPOCH and the client starts a new session.
//
// "Changed" is Kafka's rule (CachedPartition.maybeUpdateResponseData):
// the partition has records or an error, or its high watermark, last
// stable offset or log start offset differs from the last response that
// carried it. A partition entering the session has never been answered, so
// it is always in the next response. Partitions that returned records move
// to the end of the session's order, so under a response byte limit every
// partition gets its turn at the front (KIP-227 fairness).
//
// A session's topics are named the way its creating request named them:
// by topic id from Fetch v13, by name before. A request of the other kind
// gets FETCH_SESSION_TOPIC_ID_ERROR (the client resets the session). The
// name behind an id is resolved when the partition enters the session; if
// the topic is later deleted and re-created under that name, the session's
// partition answers INCONSISTENT_TOPIC_ID (by id) until forgotten.
//
// The cache is bounded by max.incremental.fetch.session.cache.slots (0:
// no sessions). When it is full, a new session may evict an existing one
// (Kafka's FetchSessionCache.tryEvict): the least recently used session if
// it has been idle for fetchSessionEvictAfter, else the least valuable
// session that is not recently created, if the new one is worth more (a
// follower's session beats a consumer's, then more partitions beat fewer).
// Otherwise the new fetch is answered without a session.
//
// Lock order: fetchSessionCache.mu and fetchSession.mu are never held
// together (eviction reads a session's size and last use from atomics).

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// fetchSessionEvictAfter is how long a session must be idle before any new
// session may evict it, and how long a new session is safe from being
// evicted by a larger one (Kafka's min.incremental.fetch.session.eviction.ms
// default).
const fetchSessionEvictAfter = 2 * time.Minute

// sessionKey names a partition in a session: by topic id (v13+) or by
// topic name, never both.
type sessionKey struct {
	id    [16]byte
	topic string
	part  int32
}

// sessionPart is one partition of a session: what the client last asked
// for and what the broker last answered about it.
type sessionPart struct {
	key       sessionKey
	topic     string   // the name, resolved when the partition entered ("" for an unknown id)
	topicID   [16]byte // the id the client named (v13+), else zero
	partition int32

	fetchOffset      int64
	maxBytes         int32
	leaderEpoch      int32
	lastFetchedEpoch int32 // v12+, -1 none
	logStartOffset   int64 // a follower's log start (v5+), -1 none

	// What the last response carrying this partition said; answered is
	// false until one did.
	answered                   bool
	hw, lastStable, logStartOf int64
}

// fetchSession is one client's fetch session.
type fetchSession struct {
	id         int32
	privileged bool // a follower's session (replica id >= 0)
	byID       bool // created by a v13+ request: topics named by id
	created    time.Time

	// Read by the cache's eviction without mu.
	lastUsed atomic.Int64 // unix nanoseconds of the last accepted request
	size     atomic.Int32 // len(parts)

	mu    sync.Mutex // guards epoch, parts, index
	epoch int32      // the epoch the next incremental request must carry
	parts []*sessionPart
	index map[sessionKey]*sessionPart
}

// nextFetchEpoch is the epoch after e: e+1, wrapping to 1 (Kafka's
// FetchMetadata.nextEpoch).
func nextFetchEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// addOrUpdateLocked applies one requested partition: a known one takes the
// new offset, limit and epoch; a new one goes to the end of the order.
func (s *fetchSession) addOrUpdateLocked(sp *sessionPart) {
	if cur, ok := s.index[sp.key]; ok {
		cur.fetchOffset, cur.maxBytes, cur.leaderEpoch = sp.fetchOffset, sp.maxBytes, sp.leaderEpoch
		cur.lastFetchedEpoch, cur.logStartOffset = sp.lastFetchedEpoch, sp.logStartOffset
		return
	}
	s.index[sp.key] = sp
	s.parts = append(s.parts, sp)
}

// forgetLocked removes a partition (a no-op if it is not in the session).
func (s *fetchSession) forgetLocked(k sessionKey) {
	sp, ok := s.index[k]
	if !ok {
		return
	}
	delete(s.index, k)
	for i, x := range s.parts {
		if x == sp {
			s.parts = append(s.parts[:i], s.parts[i+1:]...)
			break
		}
	}
}

// moveToEndLocked moves the given partitions (in their current relative
// order) behind the others.
func (s *fetchSession) moveToEndLocked(moved map[*sessionPart]bool) {
	if len(moved) == 0 {
		return
	}
	kept := s.parts[:0:0]
	var tail []*sessionPart
	for _, sp := range s.parts {
		if moved[sp] {
			tail = append(tail, sp)
		} else {
			kept = append(kept, sp)
		}
	}
	s.parts = append(kept, tail...)
}

// fetchSessionCache holds the broker's fetch sessions, bounded by slots.
// Safe for concurrent use.
type fetchSessionCache struct {
	slots      int
	evictAfter time.Duration
	now        func() time.Time // time.Now; tests move it

	mu       sync.Mutex // guards sessions
	sessions map[int32]*fetchSession
}

func newFetchSessionCache(slots int) *fetchSessionCache {
	return &fetchSessionCache{slots: slots, evictAfter: fetchSessionEvictAfter, now: time.Now, sessions: map[int32]*fetchSession{}}
}

func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
}

func (c *fetchSessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

func (c *fetchSessionCache) touch(s *fetchSession) { s.lastUsed.Store(c.now().UnixNano()) }

// create makes a session of parts (already answered once, by the full
// fetch creating it), evicting another if the cache is full and one may
// go. It returns nil when there is no room: the fetch is answered without
// a session.
func (c *fetchSessionCache) create(privileged, byID bool, parts []*sessionPart) *fetchSession {
	if c.slots <= 0 {
		return nil
	}
	now := c.now()
	s := &fetchSession{privileged: privileged, byID: byID, created: now, epoch: 1,
		parts: parts, index: make(map[sessionKey]*sessionPart, len(parts))}
	for _, sp := range parts {
		s.index[sp.key] = sp
	}
	s.size.Store(int32(len(parts)))
	s.lastUsed.Store(now.UnixNano())
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.slots && !c.evictLocked(s, now) {
		return nil
	}
	for {
		// Positive and never 0 (0 means "no session" on the wire).
		if id := rand.Int32N(math.MaxInt32) + 1; c.sessions[id] == nil {
			s.id = id
			break
		}
	}
	c.sessions[s.id] = s
	return s
}

// evictLocked makes room for s if some session may give way (see the file
// comment) and reports whether it did.
func (c *fetchSessionCache) evictLocked(s *fetchSession, now time.Time) bool {
	var lru, cheapest *fetchSession
	for _, x := range c.sessions {
		if lru == nil || x.lastUsed.Load() < lru.lastUsed.Load() {
			lru = x
		}
		if now.Sub(x.created) < c.evictAfter {
			continue // recently created: only staleness evicts it
		}
		if cheapest == nil || sessionLess(x, cheapest) {
			cheapest = x
		}
	}
	if lru != nil && now.Sub(time.Unix(0, lru.lastUsed.Load())) >= c.evictAfter {
		delete(c.sessions, lru.id)
		return true
	}
	if cheapest != nil && worthMore(s, cheapest) {
		delete(c.sessions, cheapest.id)
		return true
	}
	return false
}

// worthMore reports whether a new session a may evict b: a follower's
// beats a consumer's, then more partitions beat fewer (ties keep b).
func worthMore(a, b *fetchSession) bool {
	if a.privileged != b.privileged {
		return a.privileged
	}
	return a.size.Load() > b.size.Load()
}

// sessionLess orders sessions by value: consumers before followers, then
// fewer partitions first, then older last use first.
func sessionLess(a, b *fetchSession) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	if sa, sb := a.size.Load(), b.size.Load(); sa != sb {
		return sa < sb
	}
	return a.lastUsed.Load() < b.lastUsed.Load()
}
