package controller

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/strata-io/strata/controller/metadata"
)

// BenchmarkCommit3Voters measures metadata records committed per second by
// a quorum of three controllers on loopback TCP, each with a real
// (fsync'ing) raftlog in a temp dir. Proposers run concurrently (64 of
// them via RunParallel), so raft batches many proposals per Ready and per
// fsync; each op is one ConfigRecord proposed on the leader and waited for
// until applied there.
func BenchmarkCommit3Voters(b *testing.B) {
	c := newCtrlCluster(b, clusterOpts{n: 3, tcp: true, disk: benchDisk, tune: func(cfg *Config) {
		cfg.SnapshotEntries = 100000
		cfg.SnapshotCatchUpEntries = 10000
		cfg.ProposalTimeout = 0
	}})
	lead := c.leader()
	var n atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			v := strconv.FormatInt(n.Add(1), 10)
			rec := &metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: "", Name: "strata.bench.counter", Value: &v}
			if _, err := lead.Propose(context.Background(), []metadata.Record{rec}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

var benchDisk = os.Getenv("STRATA_TEST_BENCH_MEM") == ""
