// Package quota is the decision core of client quota enforcement: Kafka's
// sampled rate (org.apache.kafka.common.metrics.stats.Rate over a
// SampledStat of quota.window.num windows of quota.window.size.seconds),
// its throttle time, and which quota of the metadata image applies to a
// (user, client-id) — Kafka's precedence, DefaultQuotaCallback. No I/O
// and no clock: the caller passes the time, so tables test every rule.
//
// A [Manager] keeps one rate per (quota kind, sensor): the sensor is the
// entity level that matched (for a user quota, every client id of the user
// shares one rate; for a user+client-id quota, each pair has its own), as
// Kafka's quota metric tags.
package quota

import (
	"math"
	"sync"
	"time"

	"github.com/strata-io/strata/controller/metadata"
)

// Config is the sampling of every rate: Kafka's quota.window.num (11) and
// quota.window.size.seconds (1).
type Config struct {
	Samples int
	Window  time.Duration
}

// DefaultConfig is Kafka's default sampling.
func DefaultConfig() Config { return Config{Samples: 11, Window: time.Second} }

func (c Config) windowMs() int64 { return c.Window.Milliseconds() }

// sample is one window of a rate: Kafka's SampledStat.Sample.
type sample struct {
	value        float64
	lastWindowMs int64 // when the window began
}

// Rate is Kafka's Rate over a WindowedSum: per second, the sum of the
// retained windows divided by their elapsed time, where fewer than
// Samples-1 full windows count as Samples-1 (so a client's first burst is
// measured over the whole span, not its first milliseconds). The zero
// value is an empty rate.
type Rate struct {
	samples []sample
	current int
}

// Record adds v at nowMs (Kafka's SampledStat.record): into the current
// window, or a new one once it is complete.
func (r *Rate) Record(c Config, v float64, nowMs int64) {
	s := r.cur(nowMs)
	if nowMs-s.lastWindowMs >= c.windowMs() {
		s = r.advance(c, nowMs)
	}
	s.value += v
}

func (r *Rate) cur(nowMs int64) *sample {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{lastWindowMs: nowMs})
	}
	return &r.samples[r.current]
}

func (r *Rate) advance(c Config, nowMs int64) *sample {
	r.current = (r.current + 1) % c.Samples
	if r.current >= len(r.samples) {
		r.samples = append(r.samples, sample{lastWindowMs: nowMs})
	} else {
		r.samples[r.current] = sample{lastWindowMs: nowMs}
	}
	return &r.samples[r.current]
}

// purge resets the windows older than the whole span (Kafka's
// purgeObsoleteSamples).
func (r *Rate) purge(c Config, nowMs int64) {
	expire := int64(c.Samples) * c.windowMs()
	for i := range r.samples {
		if nowMs-r.samples[i].lastWindowMs >= expire {
			r.samples[i] = sample{lastWindowMs: nowMs}
		}
	}
}

// WindowSize is the span the rate divides by, in ms (Kafka's
// Rate.windowSize): from the oldest retained window to now, at least
// Samples-1 whole windows, at least 1 ms.
func (r *Rate) WindowSize(c Config, nowMs int64) int64 {
	r.purge(c, nowMs)
	oldest := nowMs
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{lastWindowMs: nowMs})
	}
	for _, s := range r.samples {
		oldest = min(oldest, s.lastWindowMs)
	}
	elapsed := nowMs - oldest
	full := elapsed / c.windowMs()
	if minFull := int64(c.Samples - 1); full < minFull {
		elapsed += (minFull - full) * c.windowMs()
	}
	return max(elapsed, 1)
}

// Measure is the rate per second at nowMs (Kafka's Rate.measure).
func (r *Rate) Measure(c Config, nowMs int64) float64 {
	r.purge(c, nowMs)
	var sum float64
	for _, s := range r.samples {
		sum += s.value
	}
	return sum / (float64(r.WindowSize(c, nowMs)) / 1000)
}

// ThrottleMs is how long a client measured at measured against bound must
// wait for its rate to fall back to the bound, over a window of windowMs
// (Kafka's QuotaUtils.throttleTime): (measured - bound) / bound * window,
// rounded; 0 when within the bound.
func ThrottleMs(measured, bound float64, windowMs int64) int64 {
	if measured <= bound || bound <= 0 {
		return 0
	}
	return int64(math.Round((measured - bound) / bound * float64(windowMs)))
}

// Kind is the quota a rate counts against.
type Kind int

const (
	Produce    Kind = iota // producer_byte_rate: request bytes
	Fetch                  // consumer_byte_rate: response bytes
	Request                // request_percentage: handler time, percent of one thread
	Connection             // connection_creation_rate of an ip entity: new connections
	Mutation               // controller_mutation_rate: partitions created or deleted (a token bucket)
)

// Key is the quota key of the kind.
func (k Kind) Key() string {
	switch k {
	case Produce:
		return metadata.QuotaProducerByteRate
	case Fetch:
		return metadata.QuotaConsumerByteRate
	case Connection:
		return metadata.QuotaConnectionCreationRate
	case Mutation:
		return metadata.QuotaControllerMutationRate
	}
	return metadata.QuotaRequestPercentage
}

func (k Kind) String() string {
	switch k {
	case Produce:
		return "produce"
	case Fetch:
		return "fetch"
	case Connection:
		return "connection"
	case Mutation:
		return "controller_mutation"
	}
	return "request"
}

// Lookup returns an entity's value of a key in the image.
type Lookup func(e metadata.QuotaEntity, key string) (float64, bool)

// Sensor is what a rate is kept for: the user and client id of the entity
// level that matched ("" where that level does not name it).
type Sensor struct {
	User, ClientID string
	ByUser, ByID   bool
	IP             string // connection_creation_rate: the address
}

// Resolve returns the quota of key that applies to user and clientID and
// the sensor its rate is kept under, in Kafka's precedence (the first
// level holding the key wins):
//
//  1. user=<user>, client-id=<client-id>
//  2. user=<user>, client-id=<default>
//  3. user=<user>
//  4. user=<default>, client-id=<client-id>
//  5. user=<default>, client-id=<default>
//  6. user=<default>
//  7. client-id=<client-id>
//  8. client-id=<default>
//
// ok is false when none holds it: no quota, nothing is recorded.
func Resolve(look Lookup, key, user, clientID string) (bound float64, s Sensor, ok bool) {
	u, c, def := metadata.NamedQuota(user), metadata.NamedQuota(clientID), metadata.DefaultQuota()
	both := Sensor{User: user, ClientID: clientID, ByUser: true, ByID: true}
	onlyUser := Sensor{User: user, ByUser: true}
	onlyID := Sensor{ClientID: clientID, ByID: true}
	type level struct {
		e metadata.QuotaEntity
		s Sensor
	}
	// An empty user or client id names no entity (AlterClientQuotas
	// refuses empty names): its levels are skipped, defaults still apply.
	levels := make([]level, 0, 8)
	if user != "" {
		if clientID != "" {
			levels = append(levels, level{metadata.QuotaEntity{User: u, ClientID: c}, both})
		}
		levels = append(levels, level{metadata.QuotaEntity{User: u, ClientID: def}, both}, level{metadata.QuotaEntity{User: u}, onlyUser})
	}
	if clientID != "" {
		levels = append(levels, level{metadata.QuotaEntity{User: def, ClientID: c}, both})
	}
	levels = append(levels, level{metadata.QuotaEntity{User: def, ClientID: def}, both}, level{metadata.QuotaEntity{User: def}, onlyUser})
	if clientID != "" {
		levels = append(levels, level{metadata.QuotaEntity{ClientID: c}, onlyID})
	}
	levels = append(levels, level{metadata.QuotaEntity{ClientID: def}, onlyID})
	for _, l := range levels {
		if v, found := look(l.e, key); found {
			return v, l.s, true
		}
	}
	return 0, Sensor{}, false
}

// ResolveIP returns the connection_creation_rate of ip: its own ip
// entity's, else the default ip entity's (Kafka's ConnectionQuotas).
func ResolveIP(look Lookup, ip string) (float64, bool) {
	if v, ok := look(metadata.QuotaEntity{IP: metadata.NamedQuota(ip)}, metadata.QuotaConnectionCreationRate); ok {
		return v, true
	}
	return look(metadata.QuotaEntity{IP: metadata.DefaultQuota()}, metadata.QuotaConnectionCreationRate)
}

type sensorKey struct {
	kind Kind
	Sensor
}

type rateState struct {
	Rate
	lastMs int64
}

// Bucket is Kafka's TokenBucket (KIP-599): tokens refill at the quota per
// second up to a burst of the quota over Samples windows; a record takes
// its value (the tokens may go negative); the quota is exceeded while they
// are below zero. A new bucket is full.
type Bucket struct {
	tokens  float64
	lastMs  int64
	started bool
}

func (b *Bucket) refill(c Config, quota float64, nowMs int64) {
	burst := quota * float64(c.Samples) * c.Window.Seconds()
	if !b.started {
		b.tokens, b.started = burst, true
	} else if nowMs > b.lastMs {
		b.tokens = min(burst, b.tokens+quota*float64(nowMs-b.lastMs)/1000)
	}
	b.lastMs = max(b.lastMs, nowMs)
}

// Tokens are the bucket's tokens at nowMs.
func (b *Bucket) Tokens(c Config, quota float64, nowMs int64) float64 {
	b.refill(c, quota, nowMs)
	return b.tokens
}

// Record takes v tokens at nowMs.
func (b *Bucket) Record(c Config, quota, v float64, nowMs int64) {
	b.refill(c, quota, nowMs)
	b.tokens -= v
}

// bucketThrottle is how long until a bucket at tokens is back at zero.
func bucketThrottle(tokens, quota float64) time.Duration {
	if tokens >= 0 || quota <= 0 {
		return 0
	}
	return time.Duration(math.Round(-tokens/quota*1000)) * time.Millisecond
}

// Manager holds the rates of every sensor. Safe for concurrent use.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	rates   map[sensorKey]*rateState
	buckets map[sensorKey]*Bucket
	sweepMs int64
}

// NewManager returns a manager sampling with cfg.
func NewManager(cfg Config) *Manager {
	return &Manager{cfg: cfg, rates: map[sensorKey]*rateState{}, buckets: map[sensorKey]*Bucket{}}
}

// Config returns the manager's sampling.
func (m *Manager) Config() Config { return m.cfg }

// Decision is the outcome of one record.
type Decision struct {
	Throttle time.Duration // 0: within the quota, or no quota
	Bound    float64       // the quota, when one applies
	Measured float64       // the rate after the record
	Applies  bool          // a quota matched (the value was recorded)
}

// Record adds value for (user, clientID) against kind's quota at now and
// returns the throttle (Kafka's recordAndGetThrottleTimeMs), capped at
// maxThrottle (0: no cap). Nothing is recorded where no quota matches.
func (m *Manager) Record(kind Kind, look Lookup, user, clientID string, value float64, now time.Time, maxThrottle time.Duration) Decision {
	bound, s, ok := Resolve(look, kind.Key(), user, clientID)
	if !ok {
		return Decision{}
	}
	nowMs := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(nowMs)
	k := sensorKey{kind, s}
	r := m.rates[k]
	if r == nil {
		r = &rateState{}
		m.rates[k] = r
	}
	r.lastMs = nowMs
	r.Record(m.cfg, value, nowMs)
	measured := r.Measure(m.cfg, nowMs)
	d := Decision{Bound: bound, Measured: measured, Applies: true}
	t := time.Duration(ThrottleMs(measured, bound, r.WindowSize(m.cfg, nowMs))) * time.Millisecond
	if maxThrottle > 0 {
		t = min(t, maxThrottle)
	}
	d.Throttle = t
	return d
}

// RecordConnection counts a new connection from ip against its
// connection_creation_rate at now (Kafka's
// recordIpConnectionMaybeThrottle): over the quota, the connection is not
// counted and the throttle says how long until the address may connect
// again (the caller closes the connection after it).
func (m *Manager) RecordConnection(look Lookup, ip string, now time.Time) Decision {
	bound, ok := ResolveIP(look, ip)
	if !ok {
		return Decision{}
	}
	nowMs := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(nowMs)
	k := sensorKey{Connection, Sensor{IP: ip}}
	r := m.rates[k]
	if r == nil {
		r = &rateState{}
		m.rates[k] = r
	}
	r.lastMs = nowMs
	r.Record(m.cfg, 1, nowMs)
	measured := r.Measure(m.cfg, nowMs)
	d := Decision{Bound: bound, Measured: measured, Applies: true}
	if t := ThrottleMs(measured, bound, r.WindowSize(m.cfg, nowMs)); t > 0 {
		r.Record(m.cfg, -1, nowMs)
		d.Throttle = time.Duration(t) * time.Millisecond
	}
	return d
}

// RecordMutation takes permits (partitions to create or delete) from the
// controller_mutation_rate bucket of (user, clientID) at now, as Kafka's
// ControllerMutationQuota: strict (CreateTopics v6+, CreatePartitions v3+,
// DeleteTopics v5+) refuses the mutation, taking nothing, while the bucket
// is below zero, and says how long until it is not; permissive (older
// versions) always takes them and says how long the bucket needs to come
// back to zero. ok is true where no quota applies.
func (m *Manager) RecordMutation(look Lookup, user, clientID string, permits float64, strict bool, now time.Time) (ok bool, throttle time.Duration) {
	bound, s, found := Resolve(look, metadata.QuotaControllerMutationRate, user, clientID)
	if !found {
		return true, 0
	}
	nowMs := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := sensorKey{Mutation, s}
	b := m.buckets[k]
	if b == nil {
		b = &Bucket{}
		m.buckets[k] = b
	}
	if t := b.Tokens(m.cfg, bound, nowMs); strict && t < 0 {
		return false, bucketThrottle(t, bound)
	}
	b.Record(m.cfg, bound, permits, nowMs)
	if strict {
		return true, 0
	}
	return true, bucketThrottle(b.tokens, bound)
}

// UnrecordMutation gives back permits RecordMutation took (a mutation the
// controller then refused).
func (m *Manager) UnrecordMutation(look Lookup, user, clientID string, permits float64, now time.Time) {
	bound, s, found := Resolve(look, metadata.QuotaControllerMutationRate, user, clientID)
	if !found {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.buckets[sensorKey{Mutation, s}]; b != nil {
		b.Record(m.cfg, bound, -permits, now.UnixMilli())
	}
}

// Unrecord takes back a value Record added (Kafka's unrecordQuotaSensor: a
// throttled fetch answers empty, so its bytes do not count).
func (m *Manager) Unrecord(kind Kind, look Lookup, user, clientID string, value float64, now time.Time) {
	_, s, ok := Resolve(look, kind.Key(), user, clientID)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rates[sensorKey{kind, s}]; r != nil {
		r.Record(m.cfg, -value, now.UnixMilli())
	}
}

// MaxValueInWindow is the most a client may take in one response under
// bound (Kafka's getMaxValueInQuotaWindow): bound over Samples-1 windows.
func (m *Manager) MaxValueInWindow(bound float64) float64 {
	return bound * float64(m.cfg.Samples-1) * m.cfg.Window.Seconds()
}

// sweep drops rates idle for the whole span: every window of theirs would
// be purged, so a fresh rate measures the same. The caller holds mu.
func (m *Manager) sweep(nowMs int64) {
	span := int64(m.cfg.Samples) * m.cfg.windowMs()
	if nowMs-m.sweepMs < span {
		return
	}
	m.sweepMs = nowMs
	for k, r := range m.rates {
		if nowMs-r.lastMs >= span {
			delete(m.rates, k)
		}
	}
}

// Sensors is the number of rates kept (for tests and metrics).
func (m *Manager) Sensors() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rates)
}
