package controller

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/controller/metadata"
)

// BenchmarkCommit3Voters measures metadata records committed per second by
// a quorum of three controllers on loopback TCP, each with a real
// (fsync'ing) raftlog in a temp dir. Proposers run concurrently (64 of
// them via RunParallel), so raft batches many proposals per Ready and per
// fsync; each op is one ConfigRecord proposed on the leader and waited for
// until applied there.
func BenchmarkCommit3Voters(b *testing.B) {
	c := newCtrlCluster(b, clusterOpts{n: 3, tcp: true, disk: benchDisk, tune: benchTune})
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

// BenchmarkCreateTopics3Voters measures leader decisions per second: each
// op is a CreateTopics of one single-partition topic from one of 32
// concurrent callers. Decisions are serialised (each waits for its entry to
// apply before the next plan), so this is bounded by commit latency, not
// by batching.
func BenchmarkCreateTopics3Voters(b *testing.B) {
	c := newCtrlCluster(b, clusterOpts{n: 3, tcp: true, disk: benchDisk, tune: benchTune})
	lead := c.leader()
	registerBrokers(b, lead, 3, 0)
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := "bench-" + strconv.FormatInt(n.Add(1), 10)
			res, err := lead.CreateTopics(context.Background(), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: name, NumPartitions: 1, ReplicationFactor: 1}}})
			if err != nil || res[0].Err != nil {
				b.Errorf("create %s: %v %v", name, err, res)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

func benchTune(cfg *Config) {
	cfg.SnapshotEntries = 100000
	cfg.SnapshotCatchUpEntries = 10000
	// Production-like timing (elections after 0.5-1s): with the tests' 10ms
	// ticks a saturated leader, or an fsync stalled by other work on the
	// machine, makes it step down (CheckQuorum) mid-run.
	cfg.TickInterval = 50 * time.Millisecond
	cfg.ElectionTicks = 10
	// Nobody heartbeats here: keep the brokers' sessions alive.
	cfg.BrokerSessionTimeout = time.Hour
}
