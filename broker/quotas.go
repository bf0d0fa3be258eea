package broker

// Client quota enforcement in the request path (KIP-13, KIP-55, KIP-124,
// KIP-219): the decisions are broker/quota's; this file keeps the node's
// view of the image's quotas and applies the decisions to requests.
//
//   - Produce records its request's bytes against producer_byte_rate
//     (Kafka records request.sizeInBytes); acks=0 gets no answer, so it is
//     only muted.
//   - A consumer Fetch records the bytes it read against consumer_byte_rate
//     (its size is capped at what the quota allows in a window, Kafka's
//     getMaxValueInQuotaWindow); a throttled fetch takes the bytes back and
//     answers empty, as Kafka does. A follower's fetch is exempt.
//   - controller_mutation_rate (KIP-599) takes the partitions a
//     CreateTopics, CreatePartitions or DeleteTopics would create or
//     delete from a token bucket: CreateTopics v6+, CreatePartitions v3+
//     and DeleteTopics v5+ are strict (a topic met with the bucket below
//     zero is THROTTLING_QUOTA_EXCEEDED), older versions permissive
//     (always done, the response throttled).
//   - request_percentage records every request's handler time (waits of a
//     long poll or of acks=-1 excluded) as a percentage of one thread,
//     capped at one window of throttle, as Kafka's ClientRequestQuotaManager.
//
// A throttled request's response leaves at once with throttle_time_ms
// (the largest of its throttles) and the connection is muted for that long
// (conn.go: neither read nor run), KIP-219. Where no quota matches nothing
// is recorded. Byte-rate throttles are capped at the whole sampled span
// (quota.window.num windows).
//
// The principal's user name is the quota user (ANONYMOUS on an
// unauthenticated listener); the request header's client id is the
// client-id.

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/broker/quota"
	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
)

// quotaTable is an immutable copy of the image's client quotas.
type quotaTable struct {
	values map[metadata.QuotaEntity]map[string]float64
	has    map[string]bool // keys any entity sets
}

func (t *quotaTable) lookup(e metadata.QuotaEntity, key string) (float64, bool) {
	v, ok := t.values[e][key]
	return v, ok
}

// refreshQuotas rebuilds the quota table when d replaced the image or
// carried quota records. The caller holds metaMu (or owns n alone), so a
// handler woken by metaNotify (AlterClientQuotas' read-your-writes) sees
// the new table.
func (n *Node) refreshQuotas(d controller.Delta) {
	changed := d.Image != nil || n.quotaTab.Load() == nil
	for _, r := range d.Records {
		if _, ok := r.(*metadata.ClientQuotaRecord); ok {
			changed = true
		}
	}
	if !changed {
		return
	}
	t := &quotaTable{values: map[metadata.QuotaEntity]map[string]float64{}, has: map[string]bool{}}
	for _, q := range n.meta.ClientQuotas() {
		t.values[q.Entity] = q.Values
		for k := range q.Values {
			t.has[k] = true
		}
	}
	n.quotaTab.Store(t)
}

// quotaUser is the principal's name, Kafka's quota user.
func (r *request) quotaUser() string {
	p := r.principal()
	if i := strings.IndexByte(p, ':'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// recordQuota records value against kind for r's user and client id and
// applies the throttle to r (its response's throttle_time_ms and the
// connection's mute). It returns the throttle; 0 without a quota.
func (n *Node) recordQuota(r *request, kind quota.Kind, value float64) time.Duration {
	t := n.quotaTab.Load()
	if t == nil || !t.has[kind.Key()] || r.conn == nil {
		return 0
	}
	maxThrottle := time.Duration(n.quotas.Config().Samples) * n.quotas.Config().Window
	if kind == quota.Request {
		maxThrottle = n.quotas.Config().Window
	}
	d := n.quotas.Record(kind, t.lookup, r.quotaUser(), r.clientID, value, time.Now(), maxThrottle)
	if d.Throttle > 0 {
		r.throttleFor(d.Throttle)
		n.metrics.quotaThrottle(kind, d.Throttle)
	}
	return d.Throttle
}

// unrecordQuota takes back a value recordQuota recorded.
func (n *Node) unrecordQuota(r *request, kind quota.Kind, value float64) {
	if t := n.quotaTab.Load(); t != nil && t.has[kind.Key()] {
		n.quotas.Unrecord(kind, t.lookup, r.quotaUser(), r.clientID, value, time.Now())
	}
}

// fetchQuotaMaxBytes is the most a consumer fetch of r may read under its
// consumer_byte_rate quota; -1 without one.
func (n *Node) fetchQuotaMaxBytes(r *request) int64 {
	t := n.quotaTab.Load()
	if t == nil || !t.has[metadata.QuotaConsumerByteRate] {
		return -1
	}
	bound, _, ok := quota.Resolve(t.lookup, metadata.QuotaConsumerByteRate, r.quotaUser(), r.clientID)
	if !ok {
		return -1
	}
	return int64(n.quotas.MaxValueInWindow(bound))
}

// throttleFor throttles r's connection for d from now: the response
// carries the largest throttle of the request, and the connection reads
// and runs nothing more until it has passed.
func (r *request) throttleFor(d time.Duration) {
	if d > r.throttle {
		r.throttle = d
	}
	if r.conn != nil {
		r.conn.mute(time.Now().Add(d))
	}
}

// quotaExemptAPIs are the requests request_percentage does not count:
// those before authentication and the inter-broker ones (Kafka's
// exempt sensor, for cluster actions).
var quotaExemptAPIs = map[int16]bool{
	17: true, // SaslHandshake
	36: true, // SaslAuthenticate
	27: true, // WriteTxnMarkers
}

// recordRequestQuota records r's handler time so far (less its waits)
// against request_percentage, at the moment its response is encoded.
func (n *Node) recordRequestQuota(r *request) {
	if r.conn == nil || quotaExemptAPIs[r.key] || r.exempt || r.execStart.IsZero() {
		return
	}
	t := n.quotaTab.Load()
	if t == nil || !t.has[metadata.QuotaRequestPercentage] {
		return
	}
	busy := time.Since(r.execStart) - r.waited
	if busy <= 0 {
		return
	}
	// Kafka: nanos * 100 / 1e9, a percentage of one thread over a second.
	n.recordQuota(r, quota.Request, float64(busy.Nanoseconds())*100/float64(time.Second))
}

// mutationQuota is one request's controller_mutation_rate (KIP-599): nil
// where no entity sets the key.
type mutationQuota struct {
	n        *Node
	r        *request
	t        *quotaTable
	strict   bool
	throttle time.Duration
}

// mutationQuota returns r's controller_mutation_rate, strict for the
// versions that know THROTTLING_QUOTA_EXCEEDED.
func (n *Node) mutationQuota(r *request, strict bool) *mutationQuota {
	t := n.quotaTab.Load()
	if t == nil || !t.has[metadata.QuotaControllerMutationRate] || r.conn == nil {
		return nil
	}
	return &mutationQuota{n: n, r: r, t: t, strict: strict}
}

// take takes permits (partitions created or deleted); a strict quota below
// zero refuses with THROTTLING_QUOTA_EXCEEDED, taking nothing.
func (q *mutationQuota) take(permits int64) error {
	if q == nil || permits <= 0 {
		return nil
	}
	ok, th := q.n.quotas.RecordMutation(q.t.lookup, q.r.quotaUser(), q.r.clientID, float64(permits), q.strict, time.Now())
	q.throttle = max(q.throttle, th)
	if !ok {
		return kerr.ThrottlingQuotaExceeded
	}
	return nil
}

// giveBack returns permits take took for a mutation that did not happen.
func (q *mutationQuota) giveBack(permits int64) {
	if q != nil && permits > 0 {
		q.n.quotas.UnrecordMutation(q.t.lookup, q.r.quotaUser(), q.r.clientID, float64(permits), time.Now())
	}
}

// done throttles the request by what the quota decided: its response's
// throttle_time_ms, and the connection muted.
func (q *mutationQuota) done() {
	if q != nil && q.throttle > 0 {
		maxThrottle := time.Duration(q.n.quotas.Config().Samples) * q.n.quotas.Config().Window
		d := min(q.throttle, maxThrottle)
		q.r.throttleFor(d)
		q.n.metrics.quotaThrottle(quota.Mutation, d)
	}
}

// mute keeps c muted until at least until.
func (c *conn) mute(until time.Time) {
	u := until.UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if u <= cur || c.mutedUntil.CompareAndSwap(cur, u) {
			return
		}
	}
}

// waitMuted returns once c is not muted, or stop or c's context ends
// (false).
func (c *conn) waitMuted(stop <-chan struct{}) bool {
	for {
		left := time.Until(time.Unix(0, c.mutedUntil.Load()))
		if left <= 0 {
			return true
		}
		t := time.NewTimer(left)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return false
		case <-c.ctx.Done():
			t.Stop()
			return false
		}
	}
}
