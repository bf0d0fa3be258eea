package broker

import (
	"context"
	"testing"
	"time"

	"github.com/strata-io/strata/loadgen"
)

// TestLoadgenVerifyThreeNodes: `strata loadgen verify` against a 3-node
// cluster with a replicated topic (RF 3, acks=all through the ISR) is
// clean: every acknowledged record read back once, at its offset, intact
// and in order, by a group, by a partition reader and in the final read.
func TestLoadgenVerifyThreeNodes(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	res, err := loadgen.Verify(ctx, loadgen.VerifyOptions{Brokers: c.seeds(), Topic: "verify3", Partitions: 3,
		ReplicationFactor: 3, Duration: 2 * time.Second, Rate: 300, Drain: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Clean() || res.Report.Acked < 100 || res.Report.FinalRead != res.Report.Acked {
		t.Fatalf("verdict %s: %s\n%v", res.Verdict, res.Summary, res.Report.Err())
	}
	t.Logf("%s", res.Summary)
}
