package loadgen

import "testing"

// TestCostCoversTheWholeRun: the object-store counters are scraped before
// the warm-up and after the run, so the per-GiB figures divide by what
// moved in that span: the cost section records the bytes produced and
// consumed over every phase, more than the measured phase's when there
// is a warm-up.
func TestCostCoversTheWholeRun(t *testing.T) {
	addr, admin := startNode(t)
	w := shortWorkload("costspan", 500)
	w.Warmup, w.Duration = "1s", "2s"
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Workload: w, MetricsURL: "http://" + admin + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cost
	if c == nil {
		t.Fatal("no cost section for a Strata target")
	}
	if c.BytesProduced <= res.Produce.Bytes || c.BytesConsumed <= res.Consume.Bytes || res.Produce.Bytes <= 0 {
		t.Fatalf("cost covers %d bytes produced and %d consumed; the measured phase %d and %d: want the warm-up's too",
			c.BytesProduced, c.BytesConsumed, res.Produce.Bytes, res.Consume.Bytes)
	}
}
