package quota

import (
	"math"
	"testing"
	"time"

	"github.com/strata-io/strata/controller/metadata"
)

type table map[metadata.QuotaEntity]float64

func (t table) look(e metadata.QuotaEntity, key string) (float64, bool) {
	if key != metadata.QuotaProducerByteRate {
		return 0, false
	}
	v, ok := t[e]
	return v, ok
}

// TestResolvePrecedence: Kafka's eight levels, each winning over every
// level after it, with the sensor its rate is kept under.
func TestResolvePrecedence(t *testing.T) {
	n, d := metadata.NamedQuota, metadata.DefaultQuota()
	levels := []metadata.QuotaEntity{
		{User: n("alice"), ClientID: n("app")},
		{User: n("alice"), ClientID: d},
		{User: n("alice")},
		{User: d, ClientID: n("app")},
		{User: d, ClientID: d},
		{User: d},
		{ClientID: n("app")},
		{ClientID: d},
	}
	both := Sensor{User: "alice", ClientID: "app", ByUser: true, ByID: true}
	sensors := []Sensor{both, both, {User: "alice", ByUser: true}, both, both, {User: "alice", ByUser: true}, {ClientID: "app", ByID: true}, {ClientID: "app", ByID: true}}
	for i := range levels {
		tb := table{}
		for j := i; j < len(levels); j++ {
			tb[levels[j]] = float64(j + 1)
		}
		// Entities that never match alice/app: another user, another client.
		tb[metadata.QuotaEntity{User: n("bob")}] = 100
		tb[metadata.QuotaEntity{User: n("alice"), ClientID: n("other")}] = 100
		bound, s, ok := Resolve(tb.look, metadata.QuotaProducerByteRate, "alice", "app")
		if !ok || bound != float64(i+1) || s != sensors[i] {
			t.Errorf("level %d (%s): bound %v sensor %+v ok %v; want %d %+v", i+1, levels[i], bound, s, ok, i+1, sensors[i])
		}
	}
	if _, _, ok := Resolve(table{{User: n("bob")}: 1}.look, metadata.QuotaProducerByteRate, "alice", "app"); ok {
		t.Error("bob's quota applies to alice")
	}
	if _, _, ok := Resolve(table{{User: n("alice")}: 1}.look, metadata.QuotaConsumerByteRate, "alice", "app"); ok {
		t.Error("a producer quota applies to fetches")
	}
	// An empty client id matches only the defaults.
	tb := table{{ClientID: n("")}: 1, {User: n("alice"), ClientID: d}: 7}
	if bound, _, ok := Resolve(tb.look, metadata.QuotaProducerByteRate, "alice", ""); !ok || bound != 7 {
		t.Errorf("empty client id: %v %v, want the user's default-client quota 7", bound, ok)
	}
}

// TestRateKafkaMath: the sampled rate's values, computed by hand from
// Kafka's SampledStat and Rate (11 windows of 1 s).
func TestRateKafkaMath(t *testing.T) {
	c := DefaultConfig()
	var r Rate
	steps := []struct {
		at, v      int64
		window     int64
		rate       float64
		whatItShow string
	}{
		{0, 500, 10000, 50, "one sample: elapsed 0 counts as 10 whole windows"},
		{1500, 500, 10500, 1000 / 10.5, "a second window: 1.5 s elapsed, padded to 10 windows + 0.5"},
		{12000, 100, 10500, 600 / 10.5, "the first window expired (>= 11 s old) and was reset"},
	}
	for _, s := range steps {
		r.Record(c, float64(s.v), s.at)
		if w := r.WindowSize(c, s.at); w != s.window {
			t.Errorf("%s: window %d, want %d", s.whatItShow, w, s.window)
		}
		if got := r.Measure(c, s.at); math.Abs(got-s.rate) > 1e-9 {
			t.Errorf("%s: rate %v, want %v", s.whatItShow, got, s.rate)
		}
	}
	var empty Rate
	if got := empty.Measure(c, 5000); got != 0 {
		t.Errorf("empty rate %v", got)
	}
}

func TestThrottleMs(t *testing.T) {
	for _, c := range []struct {
		measured, bound float64
		window          int64
		want            int64
	}{
		{2000, 1000, 10000, 10000},
		{1050, 1000, 10500, 525},
		{1000, 1000, 10000, 0},
		{999, 1000, 10000, 0},
		{1000.4, 1000, 1000, 0}, // rounds
		{1, 0, 1000, 0},
	} {
		if got := ThrottleMs(c.measured, c.bound, c.window); got != c.want {
			t.Errorf("ThrottleMs(%v, %v, %d) = %d, want %d", c.measured, c.bound, c.window, got, c.want)
		}
	}
}

// TestManagerHoldsClientAtQuota: a greedy client (10 KB requests, the
// next one 1 ms after an unthrottled answer or once its throttle has
// passed) against a 100 KB/s quota, with 5 windows of 1 s, is held within
// 5 % of it over 20 s of simulated time from its first request; another
// without a quota is never throttled and leaves no rate behind.
func TestManagerHoldsClientAtQuota(t *testing.T) {
	m := NewManager(Config{Samples: 5, Window: time.Second})
	tb := table{{ClientID: metadata.NamedQuota("slow")}: 100_000}
	start := time.Unix(1000, 0)
	now := start
	var sent float64
	throttled := 0
	for {
		d := m.Record(Produce, tb.look, "ANONYMOUS", "slow", 10_000, now, 5*time.Second)
		if !d.Applies {
			t.Fatal("quota did not apply")
		}
		if d.Throttle > 0 {
			throttled++
		}
		next := now.Add(max(d.Throttle, time.Millisecond))
		if next.Sub(start) > 20*time.Second {
			break
		}
		sent += 10_000
		now = next
	}
	if rate := sent / 20; rate < 95_000 || rate > 105_000 || throttled == 0 {
		t.Errorf("held at %.0f B/s (%d throttled answers), want within 5%% of 100000", rate, throttled)
	}
	for i := range 1000 {
		if d := m.Record(Produce, tb.look, "ANONYMOUS", "fast", 1e6, now.Add(time.Duration(i)*time.Millisecond), 0); d != (Decision{}) {
			t.Fatalf("client without a quota: %+v", d)
		}
	}
	if n := m.Sensors(); n != 1 {
		t.Errorf("%d rates kept, want 1 (the quota'd client's)", n)
	}
}

// TestManagerDefaultWindowsBurst: with Kafka's 11 windows a greedy
// client's first burst is the quota over 10 windows (the elapsed-window
// rule counts a young rate over Samples-1 windows), then it is throttled
// until that burst leaves the retained windows, 11 s later.
func TestManagerDefaultWindowsBurst(t *testing.T) {
	m := NewManager(DefaultConfig())
	tb := table{{ClientID: metadata.NamedQuota("c")}: 100_000}
	now := time.Unix(1000, 0)
	var burst float64
	for {
		d := m.Record(Produce, tb.look, "u", "c", 10_000, now, 0)
		burst += 10_000
		if d.Throttle > 0 {
			break
		}
	}
	if burst != 1_010_000 {
		t.Errorf("first burst %v bytes, want 10 windows of the quota and the request that crossed it", burst)
	}
	var later float64
	for at := now; at.Sub(now) < 10*time.Second; {
		d := m.Record(Produce, tb.look, "u", "c", 10_000, at, 0)
		later += 10_000
		at = at.Add(max(d.Throttle, time.Millisecond))
	}
	if later > 200_000 {
		t.Errorf("%v bytes let through in the 10 s after the burst, want about one window's worth", later)
	}
}

// TestManagerCapAndUnrecord: the throttle is capped; an unrecorded value
// no longer counts; idle rates are dropped after the whole span.
func TestManagerCapAndUnrecord(t *testing.T) {
	m := NewManager(DefaultConfig())
	tb := table{{User: metadata.NamedQuota("u")}: 1000}
	now := time.Unix(1000, 0)
	d := m.Record(Produce, tb.look, "u", "c", 1e9, now, 11*time.Second)
	if d.Throttle != 11*time.Second {
		t.Errorf("throttle %v, want the 11 s cap", d.Throttle)
	}
	m.Unrecord(Produce, tb.look, "u", "c", 1e9, now)
	if d := m.Record(Produce, tb.look, "u", "other-client", 1, now, 0); d.Throttle != 0 || d.Measured != 0.1 {
		t.Errorf("after unrecord (same user sensor): %+v, want 1 B over 10 s", d)
	}
	m.Record(Produce, tb.look, "u", "c", 1, now.Add(11*time.Second), 0)
	if n := m.Sensors(); n != 1 {
		t.Errorf("%d rates", n)
	}
	if got := m.MaxValueInWindow(1000); got != 10_000 {
		t.Errorf("max value in window %v, want 10 windows of 1000", got)
	}
}

// TestRecordConnection: an address's own connection_creation_rate wins
// over the default ip entity's; a connection over the rate is throttled
// and not counted, so the address may connect again once the throttle
// has passed.
func TestRecordConnection(t *testing.T) {
	m := NewManager(Config{Samples: 2, Window: time.Second})
	tb := map[metadata.QuotaEntity]float64{
		{IP: metadata.NamedQuota("10.0.0.1")}: 2,
		{IP: metadata.DefaultQuota()}:         100,
	}
	look := func(e metadata.QuotaEntity, key string) (float64, bool) {
		v, ok := tb[e]
		return v, ok && key == metadata.QuotaConnectionCreationRate
	}
	now := time.Unix(1000, 0)
	for i := range 2 {
		if d := m.RecordConnection(look, "10.0.0.1", now); d.Throttle != 0 || !d.Applies {
			t.Fatalf("connection %d: %+v", i, d)
		}
	}
	d := m.RecordConnection(look, "10.0.0.1", now)
	if d.Throttle != 500*time.Millisecond {
		t.Fatalf("third connection in a 1 s window against 2/s: %+v, want a 500 ms throttle", d)
	}
	if d := m.RecordConnection(look, "10.0.0.1", now.Add(500*time.Millisecond)); d.Throttle != 0 {
		t.Fatalf("after the throttle: %+v (the refused connection must not count)", d)
	}
	for range 50 {
		if d := m.RecordConnection(look, "10.0.0.2", now); d.Throttle != 0 || d.Bound != 100 {
			t.Fatalf("default ip entity: %+v", d)
		}
	}
	if d := m.RecordConnection(func(metadata.QuotaEntity, string) (float64, bool) { return 0, false }, "10.0.0.3", now); d != (Decision{}) {
		t.Fatalf("no ip quota: %+v", d)
	}
}

// TestRecordMutation: Kafka's token bucket for controller_mutation_rate,
// 5 partitions/s with 11 windows: a burst of 55 tokens; strict refuses
// only once the bucket is below zero (the mutation that takes it there
// passes), with the time it needs to refill to zero; permissive always
// passes and reports that time; tokens refill at the quota.
func TestRecordMutation(t *testing.T) {
	m := NewManager(DefaultConfig())
	tb := map[metadata.QuotaEntity]float64{{User: metadata.NamedQuota("u")}: 5}
	look := func(e metadata.QuotaEntity, key string) (float64, bool) {
		v, ok := tb[e]
		return v, ok && key == metadata.QuotaControllerMutationRate
	}
	now := time.Unix(1000, 0)
	if ok, th := m.RecordMutation(look, "u", "c", 100, true, now); !ok || th != 0 {
		t.Fatalf("first mutation on a full bucket: %v %v", ok, th)
	}
	// 55 - 100 = -45 tokens: 9 s to refill to zero.
	if ok, th := m.RecordMutation(look, "u", "c", 1, true, now); ok || th != 9*time.Second {
		t.Fatalf("strict below zero: %v %v, want refused with 9s", ok, th)
	}
	if ok, th := m.RecordMutation(look, "u", "c", 5, false, now); !ok || th != 10*time.Second {
		t.Fatalf("permissive: %v %v, want taken with 10s (-50 tokens)", ok, th)
	}
	m.UnrecordMutation(look, "u", "c", 5, now)
	if ok, _ := m.RecordMutation(look, "u", "c", 1, true, now.Add(9*time.Second)); !ok {
		t.Fatal("strict after refilling to zero refused")
	}
	if ok, th := m.RecordMutation(look, "v", "c", 1e6, true, now); !ok || th != 0 {
		t.Fatalf("no quota: %v %v", ok, th)
	}
}
