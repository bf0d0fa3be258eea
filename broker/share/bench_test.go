package share

import (
	"fmt"
	"testing"
)

// fetchLog is an endless log of batchLen-record batches: the batches a
// fetch from offset from returns, up to n records.
func fetchLog(from int64, batchLen, n int64) []Batch {
	first := from - from%batchLen
	var out []Batch
	for o := first; o < from+n; o += batchLen {
		out = append(out, Batch{First: o, Last: o + batchLen - 1})
	}
	return out
}

// BenchmarkAcquireAccept measures the core's acquire+accept throughput
// for 1, 4 and 16 consumers sharing one partition (Kafka's defaults: 2000
// record locks, batches of 10 records, ShareFetch max 500 records): in
// each round every consumer fetches from the next fetch offset and
// acquires, then every consumer accepts what it got. With persist, every
// round also takes the update, writes it through the Journal and encodes
// the record, as the shell would for WriteShareGroupState.
func BenchmarkAcquireAccept(b *testing.B) {
	for _, persist := range []bool{false, true} {
		for _, consumers := range []int{1, 4, 16} {
			name := fmt.Sprintf("consumers=%d", consumers)
			if persist {
				name += "/persist"
			}
			b.Run(name, func(b *testing.B) {
				benchAcquireAccept(b, consumers, persist)
			})
		}
	}
}

func benchAcquireAccept(b *testing.B, consumers int, persist bool) {
	p := New(DefaultConfig(), 0)
	j := NewJournal()
	key := Key{Group: "bench", TopicID: testTopic}
	if _, err := j.Initialize(key, 0, 0, 0); err != nil {
		b.Fatal(err)
	}
	members := make([]string, consumers)
	for i := range members {
		members[i] = fmt.Sprintf("member-%d", i)
	}
	got := make([][]AcquiredRecords, consumers)
	acks := make([]AckBatch, 0, 64)
	accept := []AckType{AckAccept}
	now := int64(0)
	records := int64(0)
	b.ResetTimer()
	for records < int64(b.N) {
		now++
		for i, m := range members {
			got[i] = p.Acquire(m, fetchLog(p.NextFetchOffset(), 10, 500), 500, BatchOptimized, now)
		}
		for i, m := range members {
			acks = acks[:0]
			for _, a := range got[i] {
				acks = append(acks, AckBatch{First: a.First, Last: a.Last, Types: accept})
				records += a.Last - a.First + 1
			}
			if err := p.Acknowledge(m, acks, now); err != nil {
				b.Fatal(err)
			}
		}
		if persist {
			if u, ok := p.TakeUpdate(); ok {
				rec, err := j.Write(key, 0, 0, u, now)
				if err != nil {
					b.Fatal(err)
				}
				EncodeRecord(rec)
			}
		}
	}
	b.StopTimer()
	if p.AcquiredCount() != 0 || p.StartOffset() != records {
		b.Fatalf("SPSO %d after %d records accepted", p.StartOffset(), records)
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}
