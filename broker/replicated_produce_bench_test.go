package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkReplicatedProduce is issue 20's replicated-produce ratio in one
// process: 1 KiB records, acks=all, 12 partitions, franz-go's idempotent
// producer (5 ms linger), 16 MiB per iteration, on one node at RF=1 and on
// three at RF=3 with min.insync.replicas=2. Compare the two sub-benchmarks'
// MB/s; a CPU profile of rf=3 shows the leader's and the followers' paths
// together (the three brokers share the process).
func BenchmarkReplicatedProduce(b *testing.B) {
	for _, rf := range []int{1, 3} {
		b.Run(fmt.Sprintf("rf=%d", rf), func(b *testing.B) {
			const perOp = 16 << 10
			const partitions = 12
			c := startCluster(b, rf, nil)
			adm := kadm.NewClient(c.client())
			cfg := map[string]*string{}
			if rf == 3 {
				cfg["min.insync.replicas"] = kadmString("2")
			}
			if resp, err := adm.CreateTopic(testCtx(b), partitions, int16(rf), cfg, "bench"); err != nil || resp.Err != nil {
				b.Fatalf("create topic: %v / %v", err, resp.Err)
			}
			cl := c.client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(5*time.Millisecond),
				kgo.DefaultProduceTopic("bench"), kgo.MaxBufferedRecords(perOp), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			ctx := testCtx(b)
			// Every partition's leader and ISR in place before the clock
			// starts.
			for range 4 * partitions {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
			benchProduceLoop(b, ctx, cl, perOp)
		})
	}
}

func kadmString(s string) *string { return &s }
