package broker

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/strata-io/strata/controller/metadata"
)

// Replication throttles (KIP-73), for reassignments and catching-up
// replicas: a topic names the replicas to throttle on the leader side
// (leader.replication.throttled.replicas) and on the follower side
// (follower.replication.throttled.replicas), as partition:broker pairs or
// "*"; a broker caps the bytes those replicas move while OUT of the ISR
// at leader.replication.throttled.rate (sent as leader) and
// follower.replication.throttled.rate (fetched as follower). In-sync
// replicas are never throttled, so acks=all never waits for a quota, as
// in Kafka (ReplicaManager.shouldLeaderThrottle, the fetcher's
// shouldFollowerThrottle). The rates are dynamic broker configs (this
// broker's, then the cluster default, then the static setting).

// replicationQuota is a token bucket of bytes: rate bytes a second, at
// most a second's worth saved up. Bytes are recorded after they are moved
// (the bucket may go negative by one fetch); a quota is exceeded while
// the bucket is empty.
type replicationQuota struct {
	mu        sync.Mutex
	unlimited bool    // the default: math.MaxInt64
	rate      float64 // bytes/s when limited (0: throttled replicas copy nothing, as in Kafka)
	tokens    float64
	last      time.Time
	now       func() time.Time
}

func newReplicationQuota() *replicationQuota {
	return &replicationQuota{unlimited: true, now: time.Now}
}

// setRate sets the rate in bytes/s; math.MaxInt64 (Kafka's default) is
// no limit.
func (q *replicationQuota) setRate(r int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	unlimited := r >= math.MaxInt64
	if unlimited == q.unlimited && float64(r) == q.rate {
		return
	}
	q.unlimited, q.rate, q.last = unlimited, float64(max(r, 0)), q.now()
	q.tokens = q.rate
}

// limited reports whether a rate is set.
func (q *replicationQuota) limited() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.unlimited
}

func (q *replicationQuota) refillLocked() {
	now := q.now()
	q.tokens = min(q.rate, q.tokens+q.rate*now.Sub(q.last).Seconds())
	q.last = now
}

// exceeded reports whether throttled bytes must wait now.
func (q *replicationQuota) exceeded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.unlimited {
		return false
	}
	q.refillLocked()
	return q.tokens <= 0
}

// record counts n throttled bytes moved.
func (q *replicationQuota) record(n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.unlimited {
		return
	}
	q.refillLocked()
	q.tokens -= float64(n)
}

// replicationRate is a throttle rate's effective value in st: this
// broker's dynamic value, the cluster default, the static setting.
func (n *Node) replicationRate(st *metadata.State, name string) int64 {
	chain := append(n.dynamicBrokerChain(st, name), n.staticChain(name, "")...)
	for _, c := range chain {
		if v, err := strconv.ParseInt(c.value, 10, 64); err == nil {
			return v
		}
	}
	return math.MaxInt64
}

// updateThrottles applies the image's throttle settings to p (reconcile).
func (n *Node) updateThrottles(p *partition, w wantedPartition) {
	self := n.cfg.NodeID
	p.leaderThrottled.Store(metadata.ThrottledReplica(w.configs[metadata.ConfigLeaderReplicationThrottledReplicas], w.index, self))
	p.followerThrottled.Store(metadata.ThrottledReplica(w.configs[metadata.ConfigFollowerReplicationThrottledReplicas], w.index, self))
	inISR := false
	for _, id := range w.isr {
		inISR = inISR || id == self
	}
	p.followerInISR.Store(inISR)
}

// inCommittedISR reports whether replica is in the ISR this leader has.
func (p *partition) inCommittedISR(replica int32) bool {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.rep == nil {
		return false
	}
	for _, id := range p.rep.isr {
		if id == replica {
			return true
		}
	}
	return false
}
