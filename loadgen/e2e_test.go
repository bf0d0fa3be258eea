package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkRun checks a finished short run of rate records/s for secs seconds
// against what the broker holds: every acknowledged record is in the log
// (and nothing else is), the consumers read each one exactly as produced,
// and the figures are consistent.
func checkRun(t *testing.T, res *Result, addr, topic string, rate, secs int64) {
	t.Helper()
	held := heldRecords(t, addr, topic)
	p, c := res.Produce, res.Consume
	t.Logf("target %s: produced %d (%.0f rec/s, %.2f MB/s, p99 %.2f ms), consumed %d (e2e p99 %.2f ms), held %d, errors %v, notes %v",
		res.Target, p.Records, p.RecordsPerSec, p.MBPerSec, p.Latency.P99, c.Records, res.EndToEnd.P99, held, res.Errors, res.Notes)
	if p.Records != held {
		t.Fatalf("summary says %d records produced, the broker holds %d", p.Records, held)
	}
	if c.Records != p.Records {
		t.Fatalf("consumed %d records, produced %d: everything must be read", c.Records, p.Records)
	}
	if p.Errors != 0 || len(res.Errors) != 0 {
		t.Fatalf("errors: %d, %v", p.Errors, res.Errors)
	}
	// The open-loop schedule hands out rate×secs slots whatever the
	// latency; the loop stops at the deadline, so allow its last slot.
	if want := rate * secs; p.Records < want-2 || p.Records > want+1 {
		t.Fatalf("produced %d records in %ds at %d/s, want %d", p.Records, secs, rate, want)
	}
	if p.Latency.Count != p.Records || res.EndToEnd.Count != c.Records {
		t.Fatalf("latency counts %d/%d, records %d/%d", p.Latency.Count, res.EndToEnd.Count, p.Records, c.Records)
	}
	if p.Bytes < p.Records*202 || p.Bytes > p.Records*203 {
		t.Fatalf("produced bytes %d for %d records of 200 B values and 2-3 B keys", p.Bytes, p.Records)
	}
	if c.Bytes != p.Bytes {
		t.Fatalf("consumed %d bytes, produced %d", c.Bytes, p.Bytes)
	}
	l := p.Latency
	if !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.P9999 && l.P9999 <= l.Max) {
		t.Fatalf("publish percentiles not ordered: %+v", l)
	}
	if res.EndToEnd.P50 <= 0 || len(res.Histogram.Publish) == 0 || len(res.Histogram.EndToEnd) == 0 {
		t.Fatalf("no end-to-end latency or histograms: %+v", res.EndToEnd)
	}
	if len(res.Series) < int(secs)-1 {
		t.Fatalf("%d samples for a %ds run", len(res.Series), secs)
	}
	var inSeries int64
	for _, s := range res.Series {
		inSeries += s.ProduceRecords
	}
	if inSeries > p.Records || inSeries < p.Records/2 {
		t.Fatalf("series sums to %d produced records of %d", inSeries, p.Records)
	}
	var out bytes.Buffer
	if err := WriteSummary(&out, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "publish") || !strings.Contains(out.String(), "end-to-end") {
		t.Fatalf("summary:\n%s", out.String())
	}
	if _, err := json.Marshal(res); err != nil {
		t.Fatal(err)
	}
}

func shortWorkload(topic string, rate int64) Workload {
	return Workload{
		Topic: topic, Partitions: 3,
		RecordSize: SizeDist{Kind: "fixed", Size: "200B"},
		Keys:       "round-robin", KeySpace: 30,
		Producers: 1, Consumers: 1, Groups: 1,
		Rate: rate, Duration: "3s", Warmup: "0s", Seed: 1, Linger: "1ms",
	}
}

// TestRunAgainstStrataNode runs a 3-second fixed-rate workload with one
// producer and one consumer group against a real node and checks the
// summary against the broker's offsets; the node's /metrics makes the
// target "strata" and yields a cost section (no object-store traffic: no
// topic here tiers).
func TestRunAgainstStrataNode(t *testing.T) {
	addr, admin := startNode(t)
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Keep: true, Workload: shortWorkload("e2e", 500), MetricsURL: "http://" + admin + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Target != "strata" {
		t.Fatalf("target %q, want strata", res.Target)
	}
	checkRun(t, res, addr, "e2e", 500, 3)
	if res.Cost == nil {
		t.Fatal("no cost section for a Strata target")
	}
	if res.Cost.Puts != 0 || res.Cost.Gets != 0 || res.Cost.EstimatedCostUSD != 0 {
		t.Fatalf("object-store traffic without a tiered topic: %+v", res.Cost)
	}
}

// TestRunAgainstKfake runs the same workload against franz-go's kfake,
// started the way `strata loadgen kfake` starts it.
func TestRunAgainstKfake(t *testing.T) {
	c, addr, err := StartKfake("127.0.0.1:0", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Keep: true, Workload: shortWorkload("kf", 1000)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Target != "kfake" || res.Cost != nil {
		t.Fatalf("target %q, cost %v; want kfake and no cost", res.Target, res.Cost)
	}
	checkRun(t, res, addr, "kf", 1000, 3)
}

// frozenClock is the real clock, except that the first sleep that
// wakes up past freezeAt oversleeps by freeze: as if the process had been
// descheduled (a loaded CI machine), its loop waking up with slots due.
type frozenClock struct {
	freezeAt time.Time
	freeze   time.Duration
	once     *sync.Once
}

func (c frozenClock) Now() time.Time { return time.Now() }

func (c frozenClock) SleepUntil(ctx context.Context, t time.Time) error {
	if t.After(c.freezeAt) {
		c.once.Do(func() { t = t.Add(c.freeze) })
	}
	return SystemClock{}.SleepUntil(ctx, t)
}

// TestRunSendsEverySlotWhenTheLoopRunsLate: a producer loop that wakes up
// past the end of the run with slots still due sends them all (each
// measured from its slot), so a run of rate r for d seconds holds r×d
// records however late the machine ran the loop — CI once saw a loaded
// run stop 21 slots short at the deadline.
func TestRunSendsEverySlotWhenTheLoopRunsLate(t *testing.T) {
	c, addr, err := StartKfake("127.0.0.1:0", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := shortWorkload("late", 500)
	w.Duration = "2s"
	clk := frozenClock{freezeAt: time.Now().Add(time.Second), freeze: 1500 * time.Millisecond, once: new(sync.Once)}
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Keep: true, Workload: w, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if res.Produce.Records != 1000 || heldRecords(t, addr, "late") != 1000 {
		t.Fatalf("summary %d records, log %d; want every one of the 1000 slots", res.Produce.Records, heldRecords(t, addr, "late"))
	}
	// The frozen slots count from their intended time: the stall shows.
	if res.Produce.Latency.Max < 400 {
		t.Fatalf("publish max %.1f ms: the 1.5 s freeze is hidden", res.Produce.Latency.Max)
	}
}

// TestWarmupExcludedFromSummary: records of the warm-up are in the log and
// the series (negative t) but not in the summary.
func TestWarmupExcludedFromSummary(t *testing.T) {
	c, addr, err := StartKfake("127.0.0.1:0", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := shortWorkload("warm", 500)
	w.Warmup, w.Duration = "1500ms", "2s"
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Keep: true, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	held := heldRecords(t, addr, "warm")
	if res.Produce.Records < 990 || res.Produce.Records > 1001 || held < res.Produce.Records+740 {
		t.Fatalf("summary %d records, log %d: want ≈1000 measured of ≈1750", res.Produce.Records, held)
	}
	if res.Consume.Records != res.Produce.Records {
		t.Fatalf("consumed %d measured records, produced %d", res.Consume.Records, res.Produce.Records)
	}
	if len(res.Series) == 0 || res.Series[0].T >= 0 {
		t.Fatalf("first sample at t=%v, want a negative warm-up time", res.Series)
	}
}

// TestPureClient: loadgen's own (non-test) dependencies include no Strata
// server package, so it measures any cluster as a plain client.
func TestPureClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/strata-io/strata/loadgen").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, bad := range []string{"broker", "storage", "controller", "tiering"} {
			p := "github.com/strata-io/strata/" + bad
			if pkg == p || strings.HasPrefix(pkg, p+"/") {
				t.Errorf("loadgen depends on %s", pkg)
			}
		}
	}
}

// TestRunTransactionalAgainstKfake: --txn-interval makes the producers
// transactional, committing every interval (the last transaction too,
// when producing stops), and read_committed consumers read every
// committed record; kfake speaks transactions, so this is the client side
// against a peer that is not Strata.
func TestRunTransactionalAgainstKfake(t *testing.T) {
	c, addr, err := StartKfake("127.0.0.1:0", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := shortWorkload("kftx", 1000)
	w.TxnInterval, w.Isolation = "50ms", "read_committed"
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	p, cons := res.Produce, res.Consume
	t.Logf("produced %d in %d transactions, consumed %d (e2e p99 %.1f ms), errors %v", p.Records, p.TxnCommits, cons.Records, res.EndToEnd.P99, res.Errors)
	if p.Errors != 0 || len(res.Errors) != 0 {
		t.Fatalf("errors: %d, %v", p.Errors, res.Errors)
	}
	if p.Records < 2990 || cons.Records != p.Records {
		t.Fatalf("produced %d, consumed %d: want every committed record read", p.Records, cons.Records)
	}
	for _, n := range res.Notes {
		if strings.Contains(n, "lag") {
			t.Fatalf("the drain did not end (positions short of the commit markers?): %s", n)
		}
	}
	// 3 s at one commit per 50 ms (each commit's flush and EndTxn take
	// some of that): dozens, not one.
	if p.TxnCommits < 20 {
		t.Fatalf("%d transactions committed in 3 s at a 50 ms interval", p.TxnCommits)
	}
	for _, bad := range []Workload{{Topic: "x", TxnInterval: "soon"}, {Topic: "x", TxnInterval: "1s", Acks: "1"}, {Topic: "x", Isolation: "dirty"}} {
		if err := bad.Defaults(); err == nil {
			t.Errorf("workload %+v accepted", bad)
		}
	}
}
