package broker

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/producer"
)

// BenchmarkProduceIdempotence compares the produce path of plain and
// idempotent batches: one connection, one partition, one 16 KiB batch of
// sixteen 1 KiB records per request, acks=1, each request answered before
// the next. The difference is the producer-state work (appendMu, Begin,
// Check, Update, Commit).
func BenchmarkProduceIdempotence(b *testing.B) {
	for _, idem := range []bool{false, true} {
		b.Run(fmt.Sprintf("idempotent=%v", idem), func(b *testing.B) {
			n := startNode(b, b.TempDir(), nil)
			createTopic(b, newAdmin(b, n), "bench", 1, nil)
			c := dialRaw(b, n)
			pid := int64(-1)
			if idem {
				req := kmsg.NewPtrInitProducerIDRequest()
				req.ProducerID, req.ProducerEpoch = -1, -1
				pid = c.roundTrip(req).(*kmsg.InitProducerIDResponse).ProducerID
			}
			values := make([]string, 16)
			for i := range values {
				values[i] = strings.Repeat(string(rune('a'+i)), 1000)
			}
			batch := producerBatch(pid, 0, 0, values...)
			if !idem {
				batch = producerBatch(-1, -1, -1, values...)
			}
			castagnoli := crc32.MakeTable(crc32.Castagnoli)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if idem {
					binary.BigEndian.PutUint32(batch[53:], uint32(i*16)) // base sequence
					binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], castagnoli))
				}
				resp := c.roundTrip(produceReq(9, "bench", [16]byte{}, 0, 1, batch)).(*kmsg.ProduceResponse)
				if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != int64(i*16) {
					b.Fatalf("produce %d: code %d offset %d", i, p.ErrorCode, p.BaseOffset)
				}
			}
		})
	}
}

// BenchmarkProducerStateReplay measures what a partition's open costs
// when its producer state is rebuilt from the log alone: 100,000
// single-record idempotent batches (~100 bytes each, ~10 MB) replayed
// header by header into a State.
func BenchmarkProducerStateReplay(b *testing.B) {
	cfg := storage.DefaultConfig()
	l, err := storage.OpenLog(storage.LogOptions{Dir: filepath.Join(b.TempDir(), "r-0"), Topic: "r", Partition: 0, Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const batches = 100_000
	for i := range batches {
		if _, err := l.Append(producerBatch(int64(i%50), 0, int32(i/50), "0123456789012345678901234567890123456789"), storage.AppendOptions{AssignOffsets: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(l.Size())
	b.ResetTimer()
	for range b.N {
		st, res, err := producer.Load(producer.Options{}, 0, nil, time.Now().UnixMilli(), func(from int64, apply func(batch.Header) error) error {
			return replayBatchHeaders(l, from, apply)
		})
		if err != nil || res.Replayed != batches || st.Producers() != 50 {
			b.Fatalf("replayed %d, %d producers: %v", res.Replayed, st.Producers(), err)
		}
	}
	b.ReportMetric(float64(batches*b.N)/b.Elapsed().Seconds(), "batches/s")
}
